"""Differential property: with any combination of indexes, a skipped file holds no matching row.

Random tables (nulls, NaN, -0.0, infinities, unicode, long common prefixes)
are split into random files; every index type collects its metadata batch by
batch; random predicates over AND / OR / NOT and every supported form (LIKE
prefix / suffix / infix, IN, NOT IN, ranges, BETWEEN, lower(s), month(d),
st_within_box, feature predicates) are pruned with all indexes, with each
index alone and with a random subset, and some metadata entries are dropped
(missing or stale). Row truth is :func:`lakelayout.expr.evaluate.evaluate`.
``LAKELAYOUT_FUZZ_EXAMPLES`` scales the number of examples.
"""

from __future__ import annotations

import datetime as dt
import os
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import PredicateError
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.clauses import evaluate as evaluate_clause
from lakelayout.skipping.indexes import (
    BloomFilter,
    Features,
    GapList,
    GeoBox,
    Hybrid,
    MinMax,
    Prefix,
    Suffix,
    ValueList,
)
from lakelayout.skipping.indexes.base import elementwise
from lakelayout.skipping.planner import MINMAX, plan

from ..expr.predicates import comparison_near_values, double_literal, extreme_table
from .index_helpers import FUNCTIONS, file_stats, truth

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "400"))

SCHEMA = pa.schema(
    [
        ("s", pa.string()),
        ("x", pa.float64()),
        ("i", pa.int64()),
        ("d", pa.date32()),
        ("lat", pa.float64()),
        ("lng", pa.float64()),
    ]
)
INDEXES = [
    i.bind(SCHEMA)
    for i in [
        MinMax("lower(s)"),
        MinMax("month(d)"),
        MinMax("x + 1"),
        ValueList("s"),
        ValueList("lower(s)"),
        BloomFilter("i", expected_values=16),
        BloomFilter("s", expected_values=8),
        Hybrid("s", max_values=2, expected_values=8),
        Prefix("s", length=3),
        Prefix("lower(s)", length=1),
        Suffix("s", length=2),
        GapList("x", gaps=2),
        GapList("i", gaps=1),
        GapList("d", gaps=2),
        GeoBox("lat", "lng", boxes=2),
        Features(["i > 2", "s LIKE '%a%'", "month(d) = 3"]),
    ]
]

COMMON = "https://example.com/very/long/common/prefix/"
WORDS = ["", "a", "ab", "abc", "Ab", "é", "€x", "b%", "_a", "🙂", COMMON + "a", COMMON + "b", "zz"]
CHARS = "abAé€🙂%_x"
strings = st.one_of(
    st.none(),
    st.sampled_from(WORDS),
    st.text(alphabet=CHARS, max_size=5),
    st.text(alphabet=CHARS, max_size=3).map(lambda t: COMMON + t),
)
floats = st.one_of(
    st.none(),
    st.sampled_from([float("nan"), -0.0, 0.0, float("inf"), float("-inf")]),
    st.integers(-5, 5).map(float),
    st.floats(-10, 10, allow_nan=False),
)
ints = st.one_of(st.none(), st.integers(-3, 8))
dates = st.one_of(
    st.none(), st.integers(0, 700).map(lambda k: dt.date(2023, 1, 1) + dt.timedelta(k))
)

row = st.tuples(strings, floats, ints, dates, floats, floats)


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def affix() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["a", "ab", "é", "x", "https", COMMON, COMMON + "a"]),
        st.text(alphabet="abé", max_size=3),
    )


def leaves() -> st.SearchStrategy[str]:
    text = st.one_of(st.sampled_from(WORDS), st.text(alphabet=CHARS, max_size=3)).map(sql_string)
    pattern = affix().map(lambda p: p.replace("\\", ""))
    number = st.one_of(
        st.integers(-4, 9).map(float), st.sampled_from([float("nan"), -0.0, float("inf")])
    ).map(double_literal)
    small = st.integers(-3, 9).map(str)
    month = st.integers(1, 12).map(str)
    coordinate = st.integers(-6, 6).map(str)
    date = st.integers(0, 700).map(lambda k: f"DATE '{dt.date(2023, 1, 1) + dt.timedelta(k)}'")
    forms = [
        st.builds("s = {}".format, text),
        st.builds("s != {}".format, text),
        st.builds("s IN ({}, {})".format, text, text),
        st.builds("s NOT IN ({}, {})".format, text, text),
        st.builds("s > {}".format, text),
        pattern.map(lambda p: f"s LIKE '{p}%'"),
        pattern.map(lambda p: f"s LIKE '%{p}'"),
        pattern.map(lambda p: f"s LIKE '%{p}%'"),
        pattern.map(lambda p: f"s LIKE '{p}_%'"),
        pattern.map(lambda p: f"s NOT LIKE '{p}%'"),
        pattern.map(lambda p: f"NOT (s LIKE '%{p}')"),
        pattern.map(lambda p: f"startswith(s, '{p}')"),
        pattern.map(lambda p: f"endswith(lower(s), '{p}')"),
        st.builds("lower(s) = {}".format, text),
        pattern.map(lambda p: f"lower(s) LIKE '{p}%'"),
        st.sampled_from(["s IS NULL", "s IS NOT NULL", "s LIKE '%a%'", "i > 2", "month(d) = 3"]),
        st.builds("x = {}".format, number),
        st.builds("x > {}".format, number),
        st.builds("x <= {}".format, number),
        st.builds("x != {}".format, number),
        st.builds("x BETWEEN {} AND {}".format, number, number),
        st.builds("x IN ({}, {})".format, number, number),
        st.builds("x + 1 > {}".format, number),
        st.builds("i = {}".format, small),
        st.builds("i IN ({}, {}, {})".format, small, small, small),
        st.builds("i NOT IN ({}, {})".format, small, small),
        st.builds("i BETWEEN {} AND {}".format, small, small),
        st.builds("month(d) = {}".format, month),
        st.builds("month(d) IN ({}, {})".format, month, month),
        st.builds("d BETWEEN {} AND {}".format, date, date),
        st.builds(
            "st_within_box(lat, lng, {}, {}, {}, {})".format,
            coordinate,
            coordinate,
            coordinate,
            coordinate,
        ),
        st.builds("lat BETWEEN {} AND {} AND lng >= {}".format, coordinate, coordinate, coordinate),
    ]
    return st.one_of(*forms)


predicates = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.builds("({}) AND ({})".format, inner, inner),
        st.builds("({}) OR ({})".format, inner, inner),
        inner.map("NOT ({})".format),
    ),
    max_leaves=4,
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[pa.Table], list[str]]:
    rows = draw(st.lists(row, min_size=1, max_size=30))
    files = draw(st.integers(1, 5))
    ids = draw(st.lists(st.integers(0, files - 1), min_size=len(rows), max_size=len(rows)))
    tables = []
    for f in range(files):
        mine = [r for r, k in zip(rows, ids, strict=True) if k == f]
        columns = list(zip(*mine, strict=True)) if mine else [[] for _ in SCHEMA]
        tables.append(
            pa.table(
                [pa.array(c, t.type) for c, t in zip(columns, SCHEMA, strict=True)], schema=SCHEMA
            )
        )
    queries = draw(st.lists(predicates, min_size=1, max_size=3))
    return tables, queries


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases(), subset=st.sets(st.integers(0, len(INDEXES) - 1)), drop=st.integers(0, 2**16))
def test_skipped_files_hold_no_matching_row(
    case: tuple[list[pa.Table], list[str]], subset: set[int], drop: int
) -> None:
    tables, queries = case
    stats = file_stats(tables, SCHEMA)
    rng = np.random.default_rng(drop)
    columns = {}
    for index in INDEXES:
        values = [index.collect(t.to_batches(max_chunksize=3) or [t]) for t in tables]
        missing = rng.random(len(values)) < 0.2  # missing / stale metadata reads as null
        values = [None if m else v for v, m in zip(values, missing, strict=True)]
        columns[index.name] = pa.array(values, type=index.arrow_type)
    chosen = [INDEXES[k] for k in sorted(subset)]
    for query in queries:
        pred = parse_predicate(query, SCHEMA, functions=FUNCTIONS)
        holds = truth(query, tables, SCHEMA)
        full = plan(pred, stats, metadata=columns, indexes=INDEXES)
        assert not (holds & ~full.keep).any(), (query, full.keep, holds)
        some = plan(pred, stats, metadata={i.name: columns[i.name] for i in chosen}, indexes=chosen)
        assert not (holds & ~some.keep).any(), (query, [i.name for i in chosen])
        assert (full.keep <= some.keep).all()  # more indexes never keep more
        alone_columns = {MINMAX: None, **columns}
        for index in INDEXES:
            alone = evaluate_clause(full.clause, alone_columns, len(tables), only={index.name})
            assert not (holds & ~alone).any(), (query, index.name)
            unknown = np.asarray(columns[index.name].is_null().to_numpy(zero_copy_only=False))
            assert alone[unknown].all(), (query, index.name, "skipped without metadata")


#: term indexes whose term fails on some rows, or calls a Python UDF
ONE_PASS = [
    i.bind(SCHEMA)
    for i in [
        MinMax("10 / i"),
        ValueList(
            "tag(s, i)",
            udfs={"tag": elementwise(lambda s, i: f"{s[:1]}{i % 3}")},
            functions={"tag": "string"},
        ),
        BloomFilter("10 / i", expected_values=8),
    ]
]


@settings(
    max_examples=EXAMPLES // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(row, min_size=1, max_size=40),
    cuts=st.sets(st.integers(1, 39)),
    features=st.lists(predicates, min_size=1, max_size=4),
)
def test_collecting_all_blocks_at_once_equals_block_by_block(
    rows: list[tuple[Any, ...]], cuts: set[int], features: list[str]
) -> None:
    """Virtual files collect every block in one call (``collect_blocks``): the values
    are the ones each block alone gives (Features evaluates each predicate once, a term
    index computes its term once). ``10 / i`` fails on rows where ``i = 0`` (ANSI): only
    the blocks holding such a row are unknown; a UDF's values are the ones it gives each
    block."""
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        [pa.array(c, t.type) for c, t in zip(columns, SCHEMA, strict=True)], schema=SCHEMA
    )
    starts = [0, *sorted(c for c in cuts if c < table.num_rows)]
    bounds = [*starts, table.num_rows]
    blocks = [table.slice(a, b - a) for a, b in pairwise(bounds)]
    # drawn predicates as feature bits (a box call needs its expansion, not a feature)
    texts = [f for f in features if "st_within_box" not in f]
    drawn = [Features(texts).bind(SCHEMA)] if texts else []
    for index in [*INDEXES, *ONE_PASS, *drawn]:
        assert index.collect_blocks(table, starts) == [index.collect(b) for b in blocks], index.name


# ---------------------------------------------------------------- extreme values (issue 10)
#
# Value-list, bloom, gap-list and min/max-over-expression indexes on
# DECIMAL(38, s) values at both ends of the type, doubles at subnormals,
# -0.0, NaN and infinities, and the first and last dates and timestamps;
# predicates whose literals sit on, or one ulp beside, the values held.

EXTREME = extreme_table().select(["d38_18", "d38_0", "d38_38", "f64", "dt", "ts"])
EXTREME_SCHEMA = EXTREME.schema
EXTREME_INDEXES = [
    i.bind(EXTREME_SCHEMA)
    for i in [
        ValueList("d38_18"),
        BloomFilter("d38_18", expected_values=8),
        GapList("d38_18", gaps=2),
        GapList("d38_0", gaps=1),
        Hybrid("d38_38", max_values=2, expected_values=8),
        BloomFilter("f64", expected_values=8),
        GapList("f64", gaps=2),
        MinMax("f64 * 2"),
        MinMax("d38_0 % 7"),
        ValueList("dt"),
        GapList("ts", gaps=2),
    ]
]


@st.composite
def extreme_cases(draw: st.DrawFn) -> tuple[list[pa.Table], list[str]]:
    rows = draw(st.lists(st.integers(0, EXTREME.num_rows - 1), min_size=1, max_size=20))
    data = EXTREME.take(pa.array(rows))
    files = draw(st.integers(1, 4))
    ids = np.asarray(
        draw(st.lists(st.integers(0, files - 1), min_size=len(rows), max_size=len(rows)))
    )
    tables = [data.filter(pa.array(ids == f)) for f in range(files)]
    columns = st.sampled_from(["d38_18", "d38_18", "d38_0", "d38_38", "f64", "dt", "ts"])
    leaf = columns.flatmap(lambda c: comparison_near_values(data, c))
    in_list = st.lists(
        st.sampled_from(
            [format(v, "f") for v in data.column("d38_18").to_pylist() if v is not None] or ["0"]
        ),
        min_size=1,
        max_size=3,
    ).map(lambda items: f"d38_18 IN ({', '.join(items)})")
    atom = st.one_of(leaf, leaf, in_list)
    tree = st.recursive(
        atom,
        lambda inner: st.one_of(
            st.builds("({}) AND ({})".format, inner, inner),
            st.builds("({}) OR ({})".format, inner, inner),
            inner.map("NOT ({})".format),
        ),
        max_leaves=3,
    )
    return tables, draw(st.lists(tree, min_size=1, max_size=3))


@settings(
    max_examples=max(20, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=extreme_cases())
def test_extreme_values_skipped_files_hold_no_matching_row(
    case: tuple[list[pa.Table], list[str]],
) -> None:
    tables, queries = case
    stats = file_stats(tables, EXTREME_SCHEMA)
    columns = {
        index.name: pa.array(
            [index.collect(t.to_batches(max_chunksize=3) or [t]) for t in tables],
            type=index.arrow_type,
        )
        for index in EXTREME_INDEXES
    }
    for query in queries:
        try:
            pred = parse_predicate(query, EXTREME_SCHEMA)
            holds = truth(query, tables, EXTREME_SCHEMA)
        except PredicateError:
            continue  # Spark rejects it too, or it is not evaluable outside Spark
        full = plan(pred, stats, metadata=columns, indexes=EXTREME_INDEXES)
        assert not (holds & ~full.keep).any(), (query, full.keep, holds)
