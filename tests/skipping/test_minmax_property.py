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
from collections.abc import Callable
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

from ..expr.predicates import EDGE_DAYS

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "100"))
#: the pruning properties' hypothesis settings (``make fuzz`` raises the examples)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
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


def assert_sound(
    label: Any,
    pred: Predicate,
    files: FileStats,
    parts: list[pa.Table],
    truth: Callable[[dict[str, Any]], bool | None],
) -> None:
    """No file ``might_match`` skips holds a row ``truth`` calls TRUE, and every row of a
    file ``all_rows_match`` claims is TRUE (``label`` names the case in a failure)."""
    keep = might_match(pred, files)
    every = all_rows_match(pred, files)
    assert keep.dtype == bool and keep.shape == (len(parts),)
    for k, part in enumerate(parts):
        found = [truth(row) for row in part.to_pylist()]
        if not keep[k]:
            assert True not in found, (label, k, part.to_pylist())
        if every[k]:
            assert all(t is True for t in found), (label, k, part.to_pylist())


def check(pred: Predicate, files: FileStats, parts: list[pa.Table]) -> None:
    assert_sound(pred.sql(), pred, files, parts, lambda row: reference(pred, row))


@FUZZ
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


# ---------------------------------------------------------------- extreme values (issue 10)
#
# DECIMAL(38, s) at both ends for several scales, literals of up to 38
# significant digits one unit of the last place from stored values, doubles
# at subnormals, -0.0, NaN and infinities, the first and last dates and
# timestamps. Two properties:
#
# * trees built directly (literals of the column type): the statistics path
#   (collector -> JSON -> FileStats) and the pruning rules at those corners;
# * SQL text through ``parse_predicate``, judged by a reference that reads the
#   literals from the text itself (``Decimal(text)``, negation included), so
#   a binding that rounds a literal is caught. Literals stay in the domain
#   where Spark's comparison is exact for these columns (scale <= the
#   column's, integral digits within the type), where that reference is
#   Spark's semantics.

EXTREME_SCALES = {"d0": 0, "d2": 2, "d18": 18, "d37": 37, "d38": 38}
EXTREME_SCHEMA = pa.schema(
    [(name, pa.decimal128(38, scale)) for name, scale in EXTREME_SCALES.items()]
    + [
        ("x", pa.float64()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
_WIDE = __import__("decimal").Context(prec=100)


def _edge_decimals(scale: int) -> list[Decimal]:
    top = Decimal("9" * (38 - scale) + ("." + "9" * scale if scale else ""))
    ulp = Decimal(1).scaleb(-scale, _WIDE)
    wide = Decimal("12345678901234567890123456789012345678").scaleb(-scale, _WIDE)
    values = [top, _WIDE.subtract(top, ulp), wide, ulp, Decimal(0).scaleb(-scale, _WIDE)]
    return values + [v.copy_negate() for v in values]


@st.composite
def near(draw: st.DrawFn, scale: int) -> Decimal:
    """A DECIMAL(38, scale) value on, or a few ulps from, an edge value (clamped to the type)."""
    base = draw(st.sampled_from(_edge_decimals(scale)))
    step = Decimal(draw(st.sampled_from([0, 0, 1, -1, 2, -2]))).scaleb(-scale, _WIDE)
    value = _WIDE.add(base, step)
    top = _edge_decimals(scale)[0]
    return min(max(value, top.copy_negate()), top)


EXTREME_FLOATS = st.sampled_from(
    [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        float("nan"),
        float("inf"),
        float("-inf"),
        1.0,
        0.1,
    ]
)
EXTREME_DAYS = st.sampled_from(EDGE_DAYS)
EXTREME_STAMPS = st.sampled_from(
    [
        dt.datetime(1, 1, 1, tzinfo=UTC),
        dt.datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(1970, 1, 1, tzinfo=UTC),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
    ]
)
EXTREME_DOMAINS: dict[str, st.SearchStrategy[Any]] = {
    **{name: near(scale) for name, scale in EXTREME_SCALES.items()},
    "x": EXTREME_FLOATS,
    "day": EXTREME_DAYS,
    "ts": EXTREME_STAMPS,
}


@st.composite
def extreme_tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 16))
    data = {
        name: draw(st.lists(st.one_of(st.none(), EXTREME_DOMAINS[name]), min_size=n, max_size=n))
        for name in EXTREME_SCHEMA.names
    }
    return pa.table(data, schema=EXTREME_SCHEMA)


def _extreme_files(table: pa.Table, ids: list[int]) -> tuple[FileStats, list[pa.Table]]:
    parts = [*split(table, ids), EXTREME_SCHEMA.empty_table()]
    stats = []
    for part in parts:
        collector = StatsCollector(EXTREME_SCHEMA)
        for batch in part.to_batches(max_chunksize=4):
            collector.add(batch)
        stats.append(json.dumps(collector.result()))  # floats from _decimal_json: exact
    return from_delta_stats(stats, EXTREME_SCHEMA), parts


@st.composite
def extreme_trees(draw: st.DrawFn, pool: dict[str, list[Any]], depth: int = 2) -> Predicate:
    """Trees whose literals sit on, or one ulp beside, stored and edge values."""
    shape = draw(st.sampled_from(["leaf"] * 4 + ["and", "or"]))
    if depth == 0 or shape == "leaf":
        name = draw(st.sampled_from(EXTREME_SCHEMA.names))
        dtype = EXTREME_SCHEMA.field(name).type
        seen = [v for v in pool[name] if v is not None]
        values = (
            st.one_of(st.sampled_from(seen), EXTREME_DOMAINS[name])
            if seen
            else EXTREME_DOMAINS[name]
        )
        col = Column(name, dtype)
        if draw(st.booleans()):
            op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
            return Compare(op, col, Literal(draw(values), dtype))
        listed = tuple(Literal(v, dtype) for v in draw(st.lists(values, min_size=1, max_size=3)))
        return In(col, listed, negated=draw(st.booleans()))
    kids = tuple(draw(st.lists(extreme_trees(pool, depth - 1), min_size=1, max_size=3)))
    return And(kids) if shape == "and" else Or(kids)


@FUZZ
@given(table=extreme_tables(), data=st.data())
def test_extreme_values_never_drop_a_matching_file(table: pa.Table, data: st.DataObject) -> None:
    n = table.num_rows
    ids = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    files, parts = _extreme_files(table, ids)
    pool = {name: table.column(name).to_pylist() for name in EXTREME_SCHEMA.names}
    for pred in data.draw(st.lists(extreme_trees(pool), min_size=1, max_size=4)):
        check(pred, files, parts)


# -------- SQL text, judged from the text


@st.composite
def decimal_atoms(draw: st.DrawFn, pool: dict[str, list[Any]]) -> tuple[str, str, str, Decimal]:
    """``(sql, column, op, value)``: a comparison whose literal Spark compares exactly."""
    name = draw(st.sampled_from(list(EXTREME_SCALES)))
    scale = EXTREME_SCALES[name]
    seen = [v for v in pool[name] if v is not None]
    value = draw(st.one_of(st.sampled_from(seen), near(scale)) if seen else near(scale))
    # drop trailing fraction digits now and then: fewer digits, same exact domain
    keep = draw(st.integers(0, scale)) if scale and draw(st.booleans()) else scale
    value = value.quantize(Decimal(1).scaleb(-keep, _WIDE), rounding="ROUND_DOWN", context=_WIDE)
    text = format(value, "f")  # "-x" parses as a negation, as in the repro
    op = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">=", "<=>"]))
    if draw(st.booleans()):
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        return f"{text} {flipped} {name}", name, op, value
    return f"{name} {op} {text}", name, op, value


def _sql_truth(op: str, x: Decimal | None, v: Decimal) -> bool | None:
    if op == "<=>":
        return x is not None and x == v
    if x is None:
        return None
    return {
        "=": x == v,
        "!=": x != v,
        "<>": x != v,
        "<": x < v,
        "<=": x <= v,
        ">": x > v,
        ">=": x >= v,
    }[op]


def _pair_truth(op: str, x: Decimal | None, y: Decimal | None) -> bool | None:
    if op == "<=>":
        return (x is None and y is None) or (x is not None and y is not None and x == y)
    if x is None or y is None:
        return None
    return {"=": x == y, "<": x < y, ">=": x >= y}[op]


@st.composite
def sql_trees(draw: st.DrawFn, pool: dict[str, list[Any]], depth: int = 2) -> tuple[str, Any]:
    """``(sql, reference)``: AND / OR / NOT over exact decimal comparisons."""
    shape = draw(st.sampled_from(["leaf"] * 3 + ["pair", "and", "or", "not"]))
    if shape == "pair":  # two columns: <=> is TRUE where both are NULL (an audit's find)
        left, right = draw(st.lists(st.sampled_from(list(EXTREME_SCALES)), min_size=2,
                                    max_size=2))  # fmt: skip
        op = draw(st.sampled_from(["=", "<=>", "<", ">="]))
        return f"{left} {op} {right}", lambda row: _pair_truth(op, row[left], row[right])
    if depth == 0 or shape == "leaf":
        text, name, op, value = draw(decimal_atoms(pool))
        return text, lambda row: _sql_truth(op, row[name], value)
    if shape == "not":
        inner, ref = draw(sql_trees(pool, depth - 1))
        return f"NOT ({inner})", lambda row: _not(ref(row))
    (lt, lref), (rt, rref) = draw(sql_trees(pool, depth - 1)), draw(sql_trees(pool, depth - 1))
    if shape == "and":

        def both(row: dict[str, Any]) -> bool | None:
            parts = [lref(row), rref(row)]
            return False if False in parts else (None if None in parts else True)

        return f"({lt} AND {rt})", both

    def either(row: dict[str, Any]) -> bool | None:
        parts = [lref(row), rref(row)]
        return True if True in parts else (None if None in parts else False)

    return f"({lt} OR {rt})", either


@FUZZ
@given(table=extreme_tables(), data=st.data())
def test_decimal_sql_literals_never_drop_a_matching_file(
    table: pa.Table, data: st.DataObject
) -> None:
    from lakelayout.expr.parse import parse_predicate

    n = table.num_rows
    ids = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    files, parts = _extreme_files(table, ids)
    pool = {name: table.column(name).to_pylist() for name in EXTREME_SCHEMA.names}
    for text, ref in data.draw(st.lists(sql_trees(pool), min_size=1, max_size=4)):
        pred = parse_predicate(text, EXTREME_SCHEMA)
        assert_sound((text, pred.sql()), pred, files, parts, ref)
