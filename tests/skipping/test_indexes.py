"""Each index type skips what it should on small hand-made files, and never a matching file."""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes import (
    BloomFilter,
    Features,
    GapList,
    GeoBox,
    Hybrid,
    Index,
    MinMax,
    Prefix,
    Suffix,
    ValueList,
    elementwise,
)
from lakelayout.skipping.planner import MINMAX

from .index_helpers import run

SCHEMA = pa.schema(
    [
        ("s", pa.string()),
        ("x", pa.float64()),
        ("i", pa.int64()),
        ("d", pa.date32()),
        ("lat", pa.float64()),
        ("lng", pa.float64()),
        ("m", pa.map_(pa.string(), pa.string())),
    ]
)


def table(**columns: list) -> pa.Table:
    n = len(next(iter(columns.values())))
    full = {f.name: columns.get(f.name, [None] * n) for f in SCHEMA}
    return pa.table(full, schema=SCHEMA)


def days(*values: str) -> list[dt.date]:
    return [dt.date.fromisoformat(v) for v in values]


# ---------------------------------------------------------------- MinMax on expressions

DATES = [
    table(d=days("2024-01-05", "2024-12-30")),  # month 1..12: min/max of d cannot skip month
    table(d=days("2023-06-01", "2023-06-30")),
    table(d=days("2022-12-01", "2022-12-24")),
]


def test_minmax_expression_skips_where_column_minmax_cannot() -> None:
    result = run("month(d) = 12", DATES, SCHEMA, [MinMax("month(d)")])
    assert result.keep.tolist() == [True, False, True]
    assert result.skipped_by == {MINMAX: 0, "minmax(month(d))": 1}


def test_minmax_expression_negation_and_ranges() -> None:
    result = run("NOT (month(d) != 6)", DATES, SCHEMA, [MinMax("month(d)")])
    assert result.keep.tolist() == [True, True, False]
    assert run("month(d) < 6", DATES, SCHEMA, [MinMax("MONTH( d )")]).files_skipped == 2


def test_expression_matching_ignores_spelling_and_commutative_order() -> None:
    files = [table(i=[1, 2]), table(i=[10, 20])]
    for index_text, query in [("i + 1", "1 + I = 21"), ("i*2", "(2 * i) > 30")]:
        result = run(query, files, SCHEMA, [MinMax(index_text)])
        assert result.keep.tolist() == [False, True], (index_text, query)
        assert result.skipped_by[MinMax(index_text).bind(SCHEMA).name] == 1


# ---------------------------------------------------------------- ValueList

WORDS = [
    table(s=["apple", "apricot", None]),
    table(s=["banana", "blueberry"]),
    table(s=["cherry"]),
    table(s=[None, None]),
]


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("s = 'banana'", [False, True, False, False]),
        ("s IN ('cherry', 'kiwi')", [False, False, True, False]),
        ("s != 'cherry'", [True, True, False, False]),
        ("s NOT IN ('banana', 'blueberry')", [True, False, True, False]),
        ("s LIKE '%rr%'", [False, True, True, False]),
        ("s LIKE 'a_r%'", [True, False, False, False]),
        ("s LIKE '%y'", [False, True, True, False]),
        ("s NOT LIKE '%y'", [True, True, False, False]),
        ("s > 'c'", [False, False, True, False]),
        ("s IS NOT NULL", [True, True, True, False]),
    ],
)
def test_value_list(query: str, kept: list[bool]) -> None:
    result = run(query, WORDS, SCHEMA, [ValueList("s")])
    assert result.keep.tolist() == kept


def test_value_list_keeps_null_rows_for_is_null() -> None:
    result = run("s IS NULL", WORDS, SCHEMA, [ValueList("s")])
    assert result.skipped_by.get("valuelist(s)", 0) == 0


def test_value_list_float_nan_and_negative_zero() -> None:
    files = [table(x=[float("nan"), 1.0]), table(x=[-0.0]), table(x=[2.0])]
    assert run("x = 0.0", files, SCHEMA, [ValueList("x")]).keep.tolist() == [False, True, False]
    nan = run("x = CAST('NaN' AS DOUBLE)", files, SCHEMA, [ValueList("x")])
    assert nan.keep.tolist() == [True, False, False]


def test_udf_value_list() -> None:
    files = [table(s=["Mozilla Firefox/1", "curl/8"]), table(s=["Wget/1.2"])]
    udf = elementwise(lambda v: v.split("/")[0].split()[-1])
    index = ValueList(
        "getAgentName(s)", functions={"getagentname": pa.string()}, udfs={"getAgentName": udf}
    )
    functions = {"getagentname": pa.string()}
    result = run("GETAGENTNAME(s) = 'Wget'", files, SCHEMA, [index], functions=functions)
    assert result.keep.tolist() == [False, True]
    assert result.skipped_by["valuelist(getagentname(s))"] == 1


def test_elementwise_calls_the_function_once_per_distinct_argument() -> None:
    calls: list[tuple] = []

    def agent(name: str, version: int) -> str:
        calls.append((name, version))
        return f"{name}/{version}"

    udf = elementwise(agent)
    names = pa.array(["curl", "wget", None, "curl", "curl", "wget"])
    versions = pa.array([8, 1, 3, 8, 9, None], pa.int64())
    assert udf(names, versions) == ["curl/8", "wget/1", None, "curl/8", "curl/9", None]
    assert sorted(calls) == [("curl", 8), ("curl", 9), ("wget", 1)]


def test_elementwise_passes_floats_row_by_row() -> None:
    # Python's 0.0 == -0.0 must not hand one zero's result to the other
    udf = elementwise(lambda x: math.copysign(1.0, x))
    assert udf(pa.array([0.0, -0.0, 0.0, float("nan")]))[:3] == [1.0, -1.0, 1.0]


# ---------------------------------------------------------------- BloomFilter and Hybrid


def test_bloom_filter_skips_absent_values() -> None:
    files = [table(i=list(range(k * 100, k * 100 + 50, 2))) for k in range(4)]
    result = run(
        "i IN (102, 307)", files, SCHEMA, [BloomFilter("i", fpp=0.001, expected_values=100)]
    )
    assert result.keep.tolist() == [False, True, False, False]
    assert result.skipped_by["bloomfilter(i)"] == 3
    spread = [table(i=[5, 1000]), table(i=[6, 999])]
    only_bloom = run("i = 500", spread, SCHEMA, [BloomFilter("i", expected_values=10)])
    assert only_bloom.skipped_by == {MINMAX: 0, "bloomfilter(i)": 2}


GOLDEN_BLOOM = "0709220500108812404400"  # k = 7 hashes, 80 bits for 8 values at 1 %


def test_bloom_hash_is_stable_across_processes() -> None:
    index = BloomFilter("s", expected_values=8).bind(SCHEMA)
    value = index.collect(table(s=["x", "yy"]))
    assert value.hex() == GOLDEN_BLOOM
    assert value == index.collect(table(s=["yy", "x", None]))
    code = (
        "import pyarrow as pa; from lakelayout.skipping.indexes import BloomFilter; "
        "i = BloomFilter('s', expected_values=8).bind(pa.schema([('s', pa.string())])); "
        "print(i.collect(pa.table({'s': ['x', 'yy']})).hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == GOLDEN_BLOOM, out.stderr


@pytest.mark.parametrize(
    ("dtype", "values", "probe"),
    [
        (pa.decimal128(5, 2), ["1.50", "2.25"], "CAST('2.25' AS DECIMAL(5, 2))"),
        (
            pa.timestamp("us", tz="UTC"),
            [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)],
            "TIMESTAMP '2024-01-01 00:00:00'",
        ),
        (pa.float32(), [1.5, -0.0], "0.0"),
        (pa.int8(), [3, -1], "-1"),
    ],
)
def test_bloom_filter_types(dtype: pa.DataType, values: list, probe: str) -> None:
    import decimal

    schema = pa.schema([("v", dtype)])
    raw = [decimal.Decimal(v) if isinstance(v, str) else v for v in values]
    hit = pa.table({"v": pa.array(raw, dtype)})
    index = BloomFilter("v", expected_values=4).bind(schema)
    meta = pa.array([index.collect(hit), None], index.arrow_type)
    clause = index.label(parse_predicate(f"v = {probe}", schema))
    assert clause is not None and clause.evaluate(meta).tolist() == [True, True]


def test_bloom_filter_of_repeated_values_is_the_filter_of_the_distinct_ones() -> None:
    index = BloomFilter("s", expected_values=8).bind(SCHEMA)
    assert index.collect(table(s=["x", "yy", "x", None, "yy", "x"])).hex() == GOLDEN_BLOOM


def test_hybrid_uses_list_below_and_bloom_above_threshold() -> None:
    small, big = table(s=["a", "b"]), table(s=[f"v{i}" for i in range(20)])
    index = Hybrid("s", max_values=5).bind(SCHEMA)
    assert index.collect(small) == {"values": ["a", "b"], "bloom": None}
    assert index.collect(big)["values"] is None
    result = run("s = 'v3'", [small, big], SCHEMA, [Hybrid("s", max_values=5)])
    assert result.keep.tolist() == [False, True]
    liked = run("s LIKE '%3'", [small, big], SCHEMA, [Hybrid("s", max_values=5)])
    assert liked.keep.tolist() == [False, True]  # bloom files are kept for LIKE


# ---------------------------------------------------------------- Prefix / Suffix

URLS = [
    table(s=["https://example.com/a/long/path/1", "https://example.com/a/long/path/2"]),
    table(s=["https://example.com/b/x", "ftp://old"]),
    table(s=["ht"]),
]


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("s LIKE 'https://example.com/a%'", [True, True, False]),  # len(p) > n: cut to n
        ("startswith(s, 'ftp')", [False, True, False]),  # len(p) < n
        ("s LIKE 'h%'", [True, True, True]),
        ("s LIKE 'htt%'", [True, True, False]),
        ("s NOT LIKE 'https%'", [False, True, True]),  # negation, len(p) <= n
        ("s NOT LIKE 'https://example.com/a/l%'", [False, True, True]),  # min/max skips
        ("s = 'ht'", [False, True, True]),  # 'https' starts with 'ht': a prefix cannot tell
        ("s LIKE 'ftp:%d'", [False, True, False]),
    ],
)
def test_prefix(query: str, kept: list[bool]) -> None:
    result = run(query, URLS, SCHEMA, [Prefix("s", length=5)])
    assert result.keep.tolist() == kept


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("s LIKE '%path/2'", [True, False, False]),
        ("endswith(s, '/x')", [False, True, False]),
        ("s NOT LIKE '%1'", [True, True, True]),
        ("s NOT LIKE '%ht'", [True, True, False]),  # negation: every suffix ends with 'ht'
        ("s LIKE '%b/x'", [False, True, False]),
    ],
)
def test_suffix(query: str, kept: list[bool]) -> None:
    assert run(query, URLS, SCHEMA, [Suffix("s", length=3)]).keep.tolist() == kept


def test_prefix_on_expression_with_unicode() -> None:
    files = [table(s=["ÉCOLE", "Éclair"]), table(s=["eau"])]
    result = run("lower(s) LIKE 'éc%'", files, SCHEMA, [Prefix("lower(s)", length=2)])
    assert result.keep.tolist() == [True, False]


# ---------------------------------------------------------------- GapList


def test_gap_list_skips_ranges_inside_gaps() -> None:
    files = [table(x=[1.0, 2.0, 100.0, 101.0]), table(x=[50.0, 60.0]), table(x=[1.0, float("nan")])]
    result = run("x BETWEEN 10 AND 40", files, SCHEMA, [GapList("x", gaps=2)])
    assert result.keep.tolist() == [False, False, False]
    assert result.skipped_by["gaplist(x)"] == 3
    assert result.skipped_by[MINMAX] == 1  # file 1 (min 50); file 2's max is voided by NaN
    point = run("x IN (3.0, 55.5, 60.0)", files, SCHEMA, [GapList("x", gaps=2)])
    assert point.keep.tolist() == [False, True, False]  # 55.5 is in the gap (50, 60)
    open_high = run("x > 101", files, SCHEMA, [GapList("x", gaps=2)])
    assert open_high.keep.tolist() == [False, False, True]  # NaN > 101 in Spark


def test_gap_list_collects_values_without_an_exact_double() -> None:
    """Regression: ranking gaps cast to float64 with a range check, so a bigint past 2**53
    or a timestamp in year 9999 made collection (inside every write) fail."""
    schema = pa.schema([("big", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    utc = dt.timezone.utc
    data = pa.table(
        {
            "big": pa.array([1, 2**62, 2**62 + 1, 2**63 - 1], pa.int64()),
            "ts": pa.array(
                [
                    dt.datetime(1, 1, 1, tzinfo=utc),
                    dt.datetime(1970, 1, 1, tzinfo=utc),
                    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
                    None,
                ],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    big = GapList("big", gaps=1).bind(schema).collect(data)
    assert big["gaps"] == [{"lo": 1, "hi": 2**62}]
    stamps = GapList("ts", gaps=1).bind(schema).collect(data)
    assert stamps["min"] == dt.datetime(1, 1, 1, tzinfo=utc)
    assert stamps["max"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc)
    assert len(stamps["gaps"]) == 1


def test_gap_list_merges_batches() -> None:
    index = GapList("i", gaps=1).bind(SCHEMA)
    batches = [pa.record_batch(table(i=[1, 2]).to_batches()[0]), table(i=[50, 51]).to_batches()[0]]
    assert index.collect(batches) == {
        "min": 1,
        "max": 51,
        "gaps": [{"lo": 2, "hi": 50}],
        "nan": False,
    }


# ---------------------------------------------------------------- GeoBox


def test_geo_box_skips_files_whose_boxes_miss_the_query() -> None:
    west = table(lat=[10.0, 11.0, 40.0, 41.0], lng=[10.0, 11.0, 40.0, 41.0])  # two clusters
    east = table(lat=[70.0, 71.0], lng=[70.0, 71.0])
    files = [west, east]
    result = run(
        "st_within_box(lat, lng, 20, 30, 20, 30)", files, SCHEMA, [GeoBox("lat", "lng", boxes=2)]
    )
    assert result.keep.tolist() == [False, False]
    # the planner expands st_within_box, so min/max alone rules out the east file
    assert result.skipped_by == {MINMAX: 1, "geobox(lat, lng)": 2}
    anded = run(
        "lat >= 39 AND lat <= 42 AND lng BETWEEN 39 AND 42", files, SCHEMA, [GeoBox("lat", "lng")]
    )
    assert anded.keep.tolist() == [True, False]


# ---------------------------------------------------------------- Features


def test_features_bits_and_their_negation() -> None:
    files = [
        table(s=["error", "ok"], m=[[("courier", "ups")], []]),
        table(s=["ok", None], m=[[("courier", "dhl")], None]),
        table(s=["error"], m=[[("courier", "ups")]]),
    ]
    index = Features(["s = 'error'", "m['courier'] = 'ups'"])
    assert run("s = 'error'", files, SCHEMA, [index]).keep.tolist() == [True, False, True]
    assert run("NOT (s = 'error')", files, SCHEMA, [index]).keep.tolist() == [True, True, False]
    courier = run("m['courier'] = 'ups'", files, SCHEMA, [index])
    assert courier.keep.tolist() == [True, False, True]


def test_a_feature_label_is_the_first_feature_whose_text_or_negation_matches() -> None:
    # the second feature's text is the first one's negation: the first one labels it
    index = Features(["i < 5", "i >= 5", "s = 'a'"]).bind(SCHEMA)
    bits = [(c.i, c.truth) for c in (index.label(parse_predicate(t, SCHEMA)) for t in (
        "i < 5", "i >= 5", "NOT (s = 'a')", "s = 'a'"))]  # fmt: skip
    assert bits == [(0, True), (0, False), (2, False), (2, True)]
    assert index.label(parse_predicate("i < 6", SCHEMA)) is None
    with pytest.raises(InvalidOption, match="not bound"):
        Features(["i < 5"]).label(parse_predicate("i < 5", SCHEMA))


def test_a_declaration_bound_again_to_the_same_schema_is_the_same_bound_index() -> None:
    texts = ["i < 5", "s = 'a'"]
    first = Features(texts).bind(SCHEMA)
    assert Features(list(texts)).bind(SCHEMA) is first  # parsed and checked once
    assert first.label(parse_predicate("NOT (s = 'a')", SCHEMA)).truth is False
    # another schema: bound again, on its own types
    wider = pa.schema([("i", pa.float64()), ("s", pa.string())])
    other = Features(texts).bind(wider)
    assert other is not first
    assert other.predicates[0].columns() == first.predicates[0].columns()
    assert other.key != first.key  # the literal compared with a double: 5.0 vs 5
    with pytest.raises(InvalidOption, match="not bound"):
        Features(texts).label(parse_predicate("i < 5", SCHEMA))  # binding left it unbound
    # a failing declaration fails every time it is bound (nothing cached)
    for _ in range(2):
        with pytest.raises(InvalidOption, match="cannot be evaluated"):
            Features(["rand() > 0.5"]).bind(SCHEMA)


def test_a_module_executed_again_leaves_the_exported_class_registered() -> None:
    from lakelayout.skipping.indexes.base import index_kinds, register

    # what a second execution of features.py defines: a class of the same module and name
    again = type("Features", (Features,), {"__module__": Features.__module__})
    assert register(again) is again
    assert index_kinds()["features"] is Features
    restored = Index.from_dict(Features(["i < 5"]).to_dict())
    assert type(restored) is Features


# ---------------------------------------------------------------- errors at add time


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        (ValueList("l_shipmod"), PredicateError, "unknown column 'l_shipmod'"),
        (MinMax("rand()"), PredicateError, "non-deterministic"),
        (MinMax("month(s"), PredicateError, "malformed"),
        (BloomFilter("m"), InvalidOption, "BloomFilter cannot index map column 'm'"),
        (Prefix("i", length=2), InvalidOption, "Prefix cannot index bigint column 'i'"),
        (GapList("s"), InvalidOption, "GapList cannot index string column 's'"),
        (GeoBox("s", "lng"), InvalidOption, "GeoBox cannot index string column 's'"),
        (ValueList("f(s)", functions={"f": "string"}), InvalidOption, "no Python function"),
        (Features(["rand() > 0.5"]), InvalidOption, "cannot be evaluated"),
    ],
)
def test_bind_errors(index: Index, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        index.bind(SCHEMA)


def test_unknown_column_suggests_the_closest() -> None:
    with pytest.raises(PredicateError, match="Did you mean 'lat'"):
        ValueList("latt").bind(SCHEMA)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: BloomFilter("i", fpp=1.5), "fpp must be a positive number and below 1"),
        (lambda: BloomFilter("i", expected_values=0), "expected_values must be a positive"),
        (lambda: Hybrid("s", max_values=-1), "max_values must be a positive integer"),
        (lambda: Prefix("s", length=0), "length must be a positive integer"),
        (lambda: GapList("x", gaps=True), "gaps must be a positive integer"),
        (lambda: GeoBox("lat", "lng", boxes=0), "boxes must be a positive integer"),
        (lambda: Features([]), "non-empty list"),
        (lambda: ValueList(""), "needs an expression"),
    ],
)
def test_bad_parameters(make: object, message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        make()  # type: ignore[operator]


def test_declarations_round_trip() -> None:
    indexes = [
        MinMax("month(d)"),
        ValueList("s"),
        BloomFilter("i", fpp=0.02, expected_values=50),
        Hybrid("s", max_values=7),
        Prefix("s", length=4),
        Suffix("s", length=3),
        GapList("x", gaps=3),
        GeoBox("lat", "lng", boxes=5),
        Features(["s = 'a'"]),
    ]
    for index in indexes:
        again = Index.from_dict(index.to_dict())
        assert type(again) is type(index)
        assert again.to_dict() == index.to_dict()
        assert again.bind(SCHEMA).name == index.bind(SCHEMA).name
    with pytest.raises(InvalidOption, match="unknown index kind 'nope'"):
        Index.from_dict({"kind": "nope"})


def test_names_are_canonical() -> None:
    assert ValueList(" L_SHIPMODE ").bind(pa.schema([("l_shipmode", pa.string())])).name == (
        "valuelist(l_shipmode)"
    )
    assert MinMax("MONTH(d)").bind(SCHEMA).name == "minmax(month(d))"


def test_unsupported_predicates_are_not_labelled() -> None:
    index = ValueList("s").bind(SCHEMA)
    assert index.label(parse_predicate("s IS NULL", SCHEMA)) is None
    assert index.label(parse_predicate("i = 1", SCHEMA)) is None
    assert np.all(
        index.label(parse_predicate("s = 'a'", SCHEMA)).evaluate(pa.nulls(3, index.arrow_type))
    )


def test_an_index_of_a_zoned_function_is_not_used_in_another_zone() -> None:
    """Index values of hour()/year() of a TIMESTAMP are collected in UTC; a query in a
    session zone elsewhere reads other values (hour(ts) = 22 in New York is 2 in UTC), so
    the index is left out, and said why. Min/max, evaluated in the session zone, prunes
    alone; in UTC the index is used."""
    from lakelayout.skipping.indexes import MinMax, ValueList
    from lakelayout.skipping.planner import plan

    from .index_helpers import file_stats, metadata

    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    utc = dt.timezone.utc
    files = [
        pa.table({"ts": pa.array([dt.datetime(2024, 6, 1, 2, tzinfo=utc)] * 3, schema[0].type)}),
        pa.table({"ts": pa.array([dt.datetime(2025, 1, 1, 3, tzinfo=utc)] * 3, schema[0].type)}),
    ]
    bound = [i.bind(schema) for i in (ValueList("hour(ts)"), MinMax("year(ts)"))]
    stats, meta = file_stats(files, schema), metadata(bound, files)
    zone = "America/New_York"
    for sql, holds in [("hour(ts) = 22", [True, True]), ("year(ts) = 2024", [True, True])]:
        pred = parse_predicate(sql, schema, timezone=zone)
        result = plan(pred, stats, metadata=meta, indexes=bound, timezone=zone)
        assert result.keep.tolist() == holds, (sql, result.keep)
        assert not result.indexes_used
        assert any("built in UTC" in why for why in result.unused.values()), result.unused
    pred = parse_predicate("hour(ts) = 3", schema, timezone="UTC")
    result = plan(pred, stats, metadata=meta, indexes=bound, timezone="UTC")
    assert result.keep.tolist() == [False, True] and result.indexes_used


@pytest.mark.parametrize("kind", ["gaplist", "hybrid"])
def test_a_literal_beyond_pythons_years_is_no_error_for_an_index(kind: str) -> None:
    """TIMESTAMP '0001-01-01 00:00:00' in a session zone east of UTC is an instant of
    year 0, and '9999-12-31 23:00:00' in New York one of year 10000: Python's datetime has
    neither. An index asked about them gave a raw OverflowError; it gives no answer now
    (its files are kept), and the plan is right."""
    from lakelayout.expr.evaluate import evaluate
    from lakelayout.skipping.planner import plan

    from .index_helpers import file_stats, metadata

    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    utc = dt.timezone.utc
    stamps = [dt.datetime(1, 1, 1, tzinfo=utc), dt.datetime(2024, 1, 1, tzinfo=utc)]
    files = [pa.table({"ts": pa.array([s], schema[0].type)}) for s in stamps]
    index = (GapList("ts", gaps=4) if kind == "gaplist" else Hybrid("ts")).bind(schema)
    stats, meta = file_stats(files, schema), metadata([index], files)
    for zone, sql in [
        ("+05:30", "ts = TIMESTAMP'0001-01-01 00:00:00'"),
        ("+05:30", "ts IN (TIMESTAMP'0001-01-01 00:00:00', TIMESTAMP'2024-01-01 05:30:00')"),
        ("America/New_York", "ts > TIMESTAMP'9999-12-31 23:59:59'"),
        ("America/New_York", "ts >= TIMESTAMP'2023-12-31 19:00:00' AND ts < '9999-12-31 23:00:00'"),
    ]:
        pred = parse_predicate(sql, schema, timezone=zone)
        kept = plan(pred, stats, metadata=meta, indexes=[index], timezone=zone).keep.tolist()
        truth = [bool(evaluate(pred, f, timezone=zone).any()) for f in files]
        assert all(k or not t for k, t in zip(kept, truth, strict=True)), (sql, kept, truth)


def test_a_bloom_probe_in_chunks_answers_as_one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long IN list is probed in chunks of values over the files not yet found (the whole
    files x values x hashes matrix took 2.3 GB for 20,000 values over 2,000 files; an
    audit): the same answer per file as one probe, every file holding a value kept."""
    from lakelayout.skipping.indexes import values as bloom_module

    bloom = bloom_module.Bloom(*bloom_module.bloom_shape(0.01, 50))
    rng = np.random.default_rng(7)
    contents = [rng.choice(100_000, 40, replace=False) for _ in range(30)]
    entries = []
    for held in contents:
        filled = bloom.empty()
        bloom.add(filled, pa.array(held, pa.int64()))
        entries.append(bloom.encode(filled))
    meta = pa.array([*entries, None, b"\x00"], pa.binary())  # unknown and foreign: kept
    probe = pa.array(np.concatenate([rng.choice(100_000, 30), contents[4][:1]]), pa.int64())
    whole = bloom.might_contain(meta, probe)
    monkeypatch.setattr(bloom_module, "_PROBE_CELLS", 5)
    chunked = bloom.might_contain(meta, probe)
    assert chunked.tolist() == whole.tolist()
    assert whole[4] and whole[-1] and whole[-2]
    holds = [bool(np.isin(held, probe.to_numpy()).any()) for held in contents]
    assert all(whole[k] for k, h in enumerate(holds) if h)
    assert not whole[: len(contents)].all()  # the filter rules files out
