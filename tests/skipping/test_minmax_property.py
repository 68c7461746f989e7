"""Differential property: pruning never drops a file holding a matching row.

Random small tables are split into random "files"; their statistics go through
the real path (StatsCollector -> Delta stats JSON -> FileStats) with a tiny
string prefix length so truncation is exercised. A row-level reference
evaluator with Spark's semantics (three-valued logic, NaN above every number,
-0.0 = 0.0) decides which rows match. Then:

* ``might_match`` False  =>  no row of the file matches;
* ``all_rows_match`` True =>  every row of the file matches.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    StartsWith,
)
from lakelayout.skipping.stats_rules import all_rows_match, might_match
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.delta_stats import from_delta_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.collect import StatsCollector

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "100"))
PREFIX = 3
UTC = dt.timezone.utc

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("b", pa.bool_()),
        ("dec", pa.decimal128(10, 2)),
    ]
)

# ---------------------------------------------------------------- value domains

ints = st.integers(-5, 5)
floats = st.sampled_from(
    [-1.5, -0.0, 0.0, 0.5, 1.0, 2.0, float("nan"), float("inf"), -float("inf")]
)
strings = st.text(alphabet="ab\u00e9\U0010ffff", max_size=6)
days = st.dates(dt.date(2019, 12, 28), dt.date(2020, 1, 4))
stamps = st.integers(0, 4_000).map(
    lambda us: dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us * 997)
)
bools = st.booleans()
decimals = st.integers(-300, 300).map(lambda n: Decimal(n).scaleb(-2))

DOMAINS: dict[str, st.SearchStrategy[Any]] = {
    "i": ints,
    "f": floats,
    "s": strings,
    "day": days,
    "ts": stamps,
    "b": bools,
    "dec": decimals,
}


def column_values(name: str) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), DOMAINS[name]) if name != "b" else st.one_of(st.none(), bools)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 24))
    data = {
        name: draw(st.lists(column_values(name), min_size=n, max_size=n)) for name in SCHEMA.names
    }
    return pa.table(data, schema=SCHEMA)


# ---------------------------------------------------------------- predicates


def predicates(pool: dict[str, list[Any]]) -> st.SearchStrategy[Predicate]:
    """Random trees whose literals are often values of the table (to hit bounds exactly)."""

    def literal(name: str) -> st.SearchStrategy[Literal]:
        dtype = SCHEMA.field(name).type
        seen = [v for v in pool[name] if v is not None]
        values = st.one_of(st.sampled_from(seen), DOMAINS[name]) if seen else DOMAINS[name]
        return values.map(lambda v: Literal(v, dtype))

    def maybe_null(name: str) -> st.SearchStrategy[Literal]:
        null = st.just(Literal(None, SCHEMA.field(name).type))
        return st.one_of(literal(name), literal(name), literal(name), null)

    @st.composite
    def leaves(draw: st.DrawFn) -> Predicate:
        name = draw(st.sampled_from(SCHEMA.names))
        kind = draw(st.sampled_from(["cmp"] * 4 + ["in", "in", "null", "str", "str", "other"]))
        col = Column(name, SCHEMA.field(name).type)
        if kind == "cmp":
            op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
            return Compare(op, col, draw(maybe_null(name)))
        if kind == "in":
            values = draw(st.lists(maybe_null(name), min_size=1, max_size=4))
            return In(col, tuple(values), negated=draw(st.booleans()))
        if kind == "null":
            return IsNull(col, negated=draw(st.booleans()))
        if kind == "str":
            return draw(string_leaf(literal("s")))
        other = draw(st.sampled_from(["const", "boolterm", "opaque"]))
        if other == "const":
            return BoolConst(draw(st.booleans()))
        if other == "boolterm":
            return BoolTerm(Column("b", pa.bool_()), negated=draw(st.booleans()))
        return Opaque("rand() < 0.5")

    @st.composite
    def trees(draw: st.DrawFn, depth: int = 2) -> Predicate:
        """Mostly leaves and AND/OR; an unpushed NOT now and then."""
        shape = draw(st.sampled_from(["leaf"] * 5 + ["and"] * 2 + ["or"] * 2 + ["not"]))
        if depth == 0 or shape == "leaf":
            return draw(leaves())
        if shape == "not":
            return Not(draw(trees(depth - 1)))
        children = tuple(draw(st.lists(trees(depth - 1), min_size=1, max_size=3)))
        return And(children) if shape == "and" else Or(children)

    return trees()


@st.composite
def string_leaf(draw: st.DrawFn, values: st.SearchStrategy[Literal]) -> Predicate:
    s = Column("s", pa.string())
    whole = str(draw(values).value)
    text = whole[: draw(st.integers(0, len(whole)))]
    form = draw(st.sampled_from(["starts", "starts", "ends", "like"]))
    negated = draw(st.booleans())
    if form == "starts":
        return StartsWith(s, text, negated)
    if form == "ends":
        return EndsWith(s, text, negated)
    pattern = text + draw(st.sampled_from(["", "%", "_", "%a", "_%"]))
    return Like(s, pattern, negated)


# ---------------------------------------------------------------- reference evaluator (Spark semantics)


def _key(value: Any) -> Any:
    """Spark's ordering: NaN above every number, -0.0 equal to 0.0."""
    if isinstance(value, float):
        return (1, 0.0) if value != value else (0, value + 0.0)
    return value


def _compare(op: str, x: Any, v: Any) -> bool | None:
    if x is None or v is None:
        return None
    a, b = _key(x), _key(v)
    return {
        "=": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _like_regex(pattern: str) -> re.Pattern[str]:
    out, chars = [], iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def reference(pred: Predicate, row: dict[str, Any]) -> bool | None:
    if isinstance(pred, BoolConst):
        return pred.value
    if isinstance(pred, Opaque):
        return True  # anything may match: the worst case for pruning
    if isinstance(pred, Not):
        return _not(reference(pred.child, row))
    if isinstance(pred, And):
        parts = [reference(c, row) for c in pred.children_]
        return False if False in parts else (None if None in parts else True)
    if isinstance(pred, Or):
        parts = [reference(c, row) for c in pred.children_]
        return True if True in parts else (None if None in parts else False)
    x = row[pred.term.name]  # type: ignore[attr-defined]
    if isinstance(pred, IsNull):
        return (x is not None) if pred.negated else (x is None)
    if isinstance(pred, Compare):
        return _compare(pred.op, x, pred.value.value)
    if isinstance(pred, In):
        hits = [_compare("=", x, v.value) for v in pred.values]
        found = True if True in hits else (None if None in hits else False)
        return _not(found) if pred.negated else found
    if isinstance(pred, BoolTerm):
        return None if x is None else x == (not pred.negated)
    if x is None:
        return None
    if isinstance(pred, StartsWith):
        return x.startswith(pred.prefix) != pred.negated
    if isinstance(pred, EndsWith):
        return x.endswith(pred.suffix) != pred.negated
    if isinstance(pred, Like):
        return (_like_regex(pred.pattern).fullmatch(x) is not None) != pred.negated
    raise AssertionError(f"unexpected node {pred!r}")


# ---------------------------------------------------------------- the property


def split(table: pa.Table, ids: list[int]) -> list[pa.Table]:
    groups = np.asarray(ids, dtype=np.int64)
    return [table.filter(pa.array(groups == k)) for k in range(max(ids, default=-1) + 1)]


def check(pred: Predicate, files: FileStats, parts: list[pa.Table]) -> None:
    keep = might_match(pred, files)
    every = all_rows_match(pred, files)
    assert keep.dtype == bool and keep.shape == (len(parts),)
    for k, part in enumerate(parts):
        truth = [reference(pred, row) for row in part.to_pylist()]
        if not keep[k]:
            assert True not in truth, (pred.sql(), k, part.to_pylist())
        if every[k]:
            assert all(t is True for t in truth), (pred.sql(), k, part.to_pylist())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(table=tables(), data=st.data())
def test_pruning_never_drops_a_matching_file(table: pa.Table, data: st.DataObject) -> None:
    n = table.num_rows
    if n and data.draw(st.booleans()):
        order = data.draw(st.sampled_from(["i", "s", "ts", "f", "dec"]))
        table = table.sort_by([(order, "ascending")])
    ids = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    parts = [*split(table, ids), SCHEMA.empty_table()]
    stats = []
    for part in parts:
        collector = StatsCollector(SCHEMA, string_prefix_length=PREFIX)
        for batch in part.to_batches(max_chunksize=5):
            collector.add(batch)
        stats.append(json.dumps(collector.result()))
    files = from_delta_stats(stats, SCHEMA, string_prefix_length=PREFIX)
    pool = {name: table.column(name).to_pylist() for name in SCHEMA.names}
    preds = data.draw(st.lists(predicates(pool), min_size=1, max_size=4))
    for pred in preds:
        check(pred, files, parts)
    if n:
        blocks = block_stats(table, np.asarray(ids))
        present = [p for p in split(table, ids) if p.num_rows]
        for pred in preds:
            check(pred, blocks, present)
