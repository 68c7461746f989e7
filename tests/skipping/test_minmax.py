"""Min/max pruning rules: skips and keeps at every boundary, as data."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, create_table_with_add_actions
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.expr.like import like_prefix
from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    Func,
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
from lakelayout.skipping.stats_rules import IN_LIST_CAP, all_rows_match, might_match
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.delta_stats import from_add_actions, from_delta_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.collect import StatsCollector, stats_json

UTC = dt.timezone.utc
NAN = float("nan")

SCHEMA = pa.schema(
    [
        ("a", pa.int64()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("s", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
    ]
)

# Five files, one per boundary situation (columns not listed are all null).
FILES: list[dict[str, list[Any]]] = [
    # 0: a in [10, 20], no nulls; f with -0.0; strings; decimals; one day; ts
    {
        "a": [10, 15, 20],
        "f": [-0.0, 1.0, 2.5],
        "g": [0.5, 0.5, 0.5],
        "s": ["apple", "apricot", "banana"],
        "day": [dt.date(2020, 1, 1)] * 3,
        "ts": [dt.datetime(2020, 1, 1, 0, 0, 0, 500, UTC)] * 3,
        "dec": [Decimal("1.10"), Decimal("2.00"), Decimal("3.35")],
        "b": [True, True, True],
    },
    # 1: every column all null
    {},
    # 2: a = 15 once plus a null; f has a NaN; strings with unicode and empty
    {
        "a": [15, None],
        "f": [1.0, NAN],
        "s": ["", "\u00e9t\u00e9"],
        "b": [False, None],
    },
    # 3: zero rows
    {"__rows": []},
    # 4: long strings (truncated bounds), a single value -5
    {"a": [-5, -5], "s": ["x" * 40 + "a", "x" * 40 + "b"]},
]


def file_table(spec: dict[str, list[Any]]) -> pa.Table:
    rows = 0 if "__rows" in spec else max((len(v) for v in spec.values()), default=2)
    return pa.table(
        {
            f.name: pa.array(spec[f.name], f.type) if f.name in spec else pa.nulls(rows, f.type)
            for f in SCHEMA
        },
        schema=SCHEMA,
    )


TABLES = [file_table(spec) for spec in FILES]


def file_stats(tables: list[pa.Table] = TABLES, *, missing: tuple[int, ...] = ()) -> FileStats:
    stats: list[Any] = []
    for k, table in enumerate(tables):
        collector = StatsCollector(SCHEMA)
        collector.add(table)
        stats.append(None if k in missing else stats_json(collector.result()))
    return from_delta_stats(stats, SCHEMA)


STATS = file_stats()


def col(name: str) -> Column:
    return Column(name, SCHEMA.field(name).type)


def lit(name: str, value: Any) -> Literal:
    return Literal(value, SCHEMA.field(name).type)


def cmp(name: str, op: str, value: Any) -> Compare:
    return Compare(op, col(name), lit(name, value))


def keeps(pred: Predicate, stats: FileStats = STATS) -> list[int]:
    return [int(i) for i in np.flatnonzero(might_match(pred, stats))]


def everywhere(pred: Predicate, stats: FileStats = STATS) -> list[int]:
    return [int(i) for i in np.flatnonzero(all_rows_match(pred, stats))]


# ---------------------------------------------------------------- rule table
# (predicate, files kept by might_match, files where all_rows_match).
# File 3 has zero rows: never kept, always "all rows match" (vacuously).

D = dt.date
T = dt.datetime
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))
RULES: list[tuple[str, Predicate, list[int], list[int]]] = [
    # integers: lit = min, min - 1, max, max + 1, inside, outside
    ("a = min", cmp("a", "=", 10), [0], [3]),
    ("a = min-1", cmp("a", "=", 9), [], [3]),
    ("a = max", cmp("a", "=", 20), [0], [3]),
    ("a = max+1", cmp("a", "=", 21), [], [3]),
    ("a = 15", cmp("a", "=", 15), [0, 2], [3]),
    ("a < min", cmp("a", "<", 10), [4], [3, 4]),
    ("a <= min", cmp("a", "<=", 10), [0, 4], [3, 4]),
    ("a > max", cmp("a", ">", 20), [], [3]),
    ("a >= max", cmp("a", ">=", 20), [0], [3]),
    ("a > -5", cmp("a", ">", -5), [0, 2], [0, 3]),
    ("a != -5 (min = max = lit)", cmp("a", "!=", -5), [0, 2], [0, 3]),
    ("a != 15 (nulls never match !=)", cmp("a", "!=", 15), [0, 4], [3, 4]),
    ("a != 10 (min = lit only)", cmp("a", "!=", 10), [0, 2, 4], [3, 4]),
    ("a = NULL", Compare("=", col("a"), lit("a", None)), [], [3]),
    # a literal the column type cannot hold: no bounds test, but files 2 (a = 15 or
    # NULL) and 4 (a = -5) hold one value, on which the comparison is decided exactly
    ("a < 5.5 inexact", Compare("<", col("a"), Literal(5.5, pa.float64())), [0, 4], [3, 4]),
    # IN / NOT IN
    ("a IN (9, 21)", In(col("a"), (lit("a", 9), lit("a", 21))), [], [3]),
    ("a IN (9, 12)", In(col("a"), (lit("a", 9), lit("a", 12))), [0], [3]),
    ("a IN (-5, NULL)", In(col("a"), (lit("a", -5), lit("a", None))), [4], [3, 4]),
    ("a IN (NULL)", In(col("a"), (lit("a", None),)), [], [3]),
    ("a NOT IN (-5, 7)", In(col("a"), (lit("a", -5), lit("a", 7)), negated=True), [0, 2], [0, 3]),
    ("a NOT IN (1, NULL)", In(col("a"), (lit("a", 1), lit("a", None)), negated=True), [], [3]),
    # IS NULL / IS NOT NULL
    ("a IS NULL", IsNull(col("a")), [1, 2], [1, 3]),
    ("a IS NOT NULL", IsNull(col("a"), negated=True), [0, 2, 4], [0, 3, 4]),
    # floats: NaN voids max; -0.0 equals 0.0; NaN literal keeps
    ("f > 2.5 (NaN file kept)", cmp("f", ">", 2.5), [2], [3]),
    ("f < 0.0 (-0.0 is 0.0)", cmp("f", "<", 0.0), [], [3]),
    ("f <= 0.0", cmp("f", "<=", 0.0), [0], [3]),
    ("f = 0.0", cmp("f", "=", 0.0), [0], [3]),
    ("f > 1.0 NaN row > 1.0", cmp("f", ">", 1.0), [0, 2], [3]),
    ("f = NaN keeps", cmp("f", "=", NAN), [0, 2], [3]),
    ("f != 1.0 NaN row", cmp("f", "!=", 1.0), [0, 2], [3]),
    ("g float32 = 0.5", cmp("g", "=", 0.5), [0], [0, 3]),
    (
        "g float32 < 0.5000001",
        Compare("<", col("g"), Literal(0.5000001, pa.float64())),
        [0],
        [0, 3],
    ),
    ("g float32 = 0.1 double", Compare("=", col("g"), Literal(0.1, pa.float64())), [], [3]),
    # strings: empty, unicode, truncated bounds, prefix ranges
    # (file 2's max 'été' sorts above every 'x...' string: it stays in those ranges)
    ("s = ''", cmp("s", "=", ""), [2], [3]),
    ("s = 'été'", cmp("s", "=", "\u00e9t\u00e9"), [2], [3]),
    ("s > 'été'", cmp("s", ">", "\u00e9t\u00e9"), [], [3]),
    ("s = 'x'*40+'a'", cmp("s", "=", "x" * 40 + "a"), [2, 4], [3]),
    ("s = 'x'*40+'c' (truncated max)", cmp("s", "=", "x" * 40 + "c"), [2, 4], [3]),
    ("s = 'x'*41 (below truncated min)", cmp("s", "=", "x" * 41), [2, 4], [3]),
    ("s = 'x'*31+'z' (at widened max)", cmp("s", "=", "x" * 31 + "z"), [2, 4], [3]),
    ("s = 'x'*31+'{' (above widened max)", cmp("s", "=", "x" * 31 + "{"), [2], [3]),
    ("s < 'x'*32 (at truncated min)", cmp("s", "<", "x" * 32), [0, 2], [0, 3]),
    ("s > 'x'*40+'b'", cmp("s", ">", "x" * 40 + "b"), [2, 4], [3]),
    ("startswith ap", StartsWith(col("s"), "ap"), [0, 2], [3]),
    ("startswith apple", StartsWith(col("s"), "apple"), [0, 2], [3]),
    ("startswith b", StartsWith(col("s"), "b"), [0, 2], [3]),
    ("startswith c", StartsWith(col("s"), "c"), [2], [3]),
    ("startswith y", StartsWith(col("s"), "y"), [2], [3]),
    ("startswith ''", StartsWith(col("s"), ""), [0, 2, 4], [0, 2, 3, 4]),
    ("startswith x*35", StartsWith(col("s"), "x" * 35), [2, 4], [3]),
    ("startswith x*20", StartsWith(col("s"), "x" * 20), [2, 4], [3, 4]),
    ("not startswith x", StartsWith(col("s"), "x", negated=True), [0, 2], [0, 3]),
    ("not startswith a", StartsWith(col("s"), "a", negated=True), [0, 2, 4], [3, 4]),
    ("not startswith ''", StartsWith(col("s"), "", negated=True), [], [3]),
    ("like 'ban%'", Like(col("s"), "ban%"), [0, 2], [3]),
    ("like 'c_t'", Like(col("s"), "c_t"), [2], [3]),
    ("like 'apple' (no wildcard: =)", Like(col("s"), "apple"), [0, 2], [3]),
    ("like 'x%' all rows", Like(col("s"), "x%"), [2, 4], [3, 4]),
    ("like '%a' no prefix", Like(col("s"), "%a"), [0, 2, 4], [3]),
    ("not like 'c%'", Like(col("s"), "c%", negated=True), [0, 2, 4], [3]),
    ("endswith keeps non-null", EndsWith(col("s"), "zzz"), [0, 2, 4], [3]),
    # dates, timestamps, decimals compared in the column type
    ("day = 2020-01-01", cmp("day", "=", D(2020, 1, 1)), [0], [0, 3]),
    ("day > 2020-01-01", cmp("day", ">", D(2020, 1, 1)), [], [3]),
    ("day >= text", Compare(">=", col("day"), Literal("2020-01-01", pa.string())), [0], [0, 3]),
    ("ts = exact us", cmp("ts", "=", T(2020, 1, 1, 0, 0, 0, 500, UTC)), [0], [3]),
    ("ts > within widened ms", cmp("ts", ">", T(2020, 1, 1, 0, 0, 0, 1000, UTC)), [0], [3]),
    ("ts >= 2 ms later", cmp("ts", ">=", T(2020, 1, 1, 0, 0, 0, 2000, UTC)), [], [3]),
    ("ts < file min ms", cmp("ts", "<", T(2020, 1, 1, tzinfo=UTC)), [], [3]),
    ("ts > 0.999 ms", cmp("ts", ">", T(2020, 1, 1, 0, 0, 0, 999, UTC)), [0], [3]),
    ("ts other zone", cmp("ts", "<", T(2020, 1, 1, 1, 0, 1, tzinfo=PLUS_ONE)), [0], [0, 3]),
    ("dec = 3.35", cmp("dec", "=", Decimal("3.35")), [0], [3]),
    ("dec > 3.35", cmp("dec", ">", Decimal("3.35")), [], [3]),
    ("dec >= 1.10", cmp("dec", ">=", Decimal("1.10")), [0], [0, 3]),
    ("dec < 1.105 finer scale keeps", cmp("dec", "<", Decimal("1.105")), [0], [3]),
    # booleans
    ("b (all true)", BoolTerm(col("b")), [0], [0, 3]),
    ("NOT b", BoolTerm(col("b"), negated=True), [2], [3]),
    ("b = false", cmp("b", "=", False), [2], [3]),
    # constants, combinations, unknown things
    ("TRUE", BoolConst(True), [0, 1, 2, 4], [0, 1, 2, 3, 4]),
    ("FALSE", BoolConst(False), [], [3]),
    ("AND prunes", And((cmp("a", ">", 12), cmp("s", "<", "b"))), [0, 2], [3]),
    ("AND with opaque", And((Opaque("x"), cmp("a", "=", -5))), [4], [3]),
    ("OR keeps union", Or((cmp("a", "=", -5), cmp("s", "=", ""))), [2, 4], [3, 4]),
    ("OR with opaque keeps all", Or((Opaque("x"), cmp("a", "=", -5))), [0, 1, 2, 4], [3, 4]),
    ("NOT over anything keeps", Not(cmp("a", "=", 99)), [0, 1, 2, 4], [3]),
    (
        # abs() is not monotonic: file 0 is kept; abs() is NULL on NULL, so the
        # all-null file 1 is not; files 2 and 4 hold one value, decided exactly
        "function term keeps unless single-valued",
        Compare("=", Func("abs", (col("a"),), pa.int64()), lit("a", 9)),
        [0],
        [3],
    ),
    (
        "unknown column keeps",
        Compare("=", Column("zz", pa.int64()), lit("a", 1)),
        [0, 1, 2, 4],
        [3],
    ),
]


@pytest.mark.parametrize(
    ("pred", "kept", "all_match"), [r[1:] for r in RULES], ids=[r[0] for r in RULES]
)
def test_rule(pred: Predicate, kept: list[int], all_match: list[int]) -> None:
    assert keeps(pred) == kept
    assert everywhere(pred) == all_match


def test_no_stats_keeps_everything() -> None:
    stats = file_stats(missing=(0, 2, 4))
    assert keeps(cmp("a", "=", 999), stats) == [0, 2, 4]
    assert keeps(IsNull(col("a")), stats) == [0, 1, 2, 4]
    assert everywhere(cmp("a", ">", -100), stats) == [3]


def test_long_in_list_is_a_range() -> None:
    many = tuple(lit("a", v) for v in range(100, 100 + 2 * IN_LIST_CAP))
    assert keeps(In(col("a"), many)) == []
    spread = (*many, lit("a", -1000))
    # range [-1000, 499] covers every file; files 2 and 4 hold one value, not listed
    assert keeps(In(col("a"), spread)) == [0]
    short = (lit("a", -1000), lit("a", 20))
    assert keeps(In(col("a"), short)) == [0]


def test_long_in_list_holds_negative_zero_as_zero() -> None:
    """Beyond the cap, a one-value file was checked with ``pc.is_in``, which hashes a
    float's bits: a file of -0.0 was skipped by ``f IN (0.0, ...)`` and said to match
    ``f NOT IN (0.0, ...)`` everywhere (a DELETE dropped its rows unread), where SQL's
    -0.0 = 0.0 (an audit, on a DOUBLE partition column: min = max = -0.0)."""
    for name in ("f", "g"):
        stats = from_delta_stats(
            [
                {
                    "numRecords": 2,
                    "minValues": {name: v},
                    "maxValues": {name: v},
                    "nullCount": {name: 0},
                }
                for v in (-0.0, 3.0)
            ],
            SCHEMA,
        )
        listed = tuple(lit(name, float(v)) for v in range(2 * IN_LIST_CAP) if v != 3)
        assert keeps(In(col(name), listed), stats) == [0]
        assert everywhere(In(col(name), listed, negated=True), stats) == [1]
        assert everywhere(In(col(name), listed), stats) == [0]


def test_in_list_on_strings_and_dates() -> None:
    assert keeps(In(col("s"), (lit("s", "apricot"), lit("s", "zebra")))) == [0, 2]
    assert keeps(In(col("s"), (lit("s", "b"), lit("s", "yak")))) == [0, 2]
    assert keeps(In(col("s"), (lit("s", "c"), lit("s", "d")))) == [2]
    assert keeps(In(col("s"), (lit("s", "c"), lit("s", "x" * 33)))) == [2, 4]
    days = (lit("day", D(2019, 1, 1)), lit("day", D(2020, 1, 1)))
    assert keeps(In(col("day"), days)) == [0]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("abc%", ("abc", False)),
        ("abc", ("abc", True)),
        ("a\\%b%", ("a%b", False)),
        ("a\\\\b", ("a\\b", True)),
        ("_x", ("", False)),
        ("a\\", None),
        ("a\\x", None),
    ],
)
def test_like_prefix(pattern: str, expected: tuple[str, bool] | None) -> None:
    assert like_prefix(pattern) == expected


def test_result_is_a_fresh_bool_vector() -> None:
    mask = might_match(BoolConst(True), STATS)
    assert mask.dtype == bool
    assert mask.shape == (len(STATS),)
    mask[:] = False
    assert keeps(BoolConst(True)) == [0, 1, 2, 4]


def test_empty_snapshot() -> None:
    empty = FileStats.empty(SCHEMA)
    assert might_match(cmp("a", "=", 1), empty).shape == (0,)
    assert all_rows_match(cmp("a", "=", 1), empty).shape == (0,)


def test_virtual_files_from_blocks() -> None:
    data = pa.table({"a": list(range(100)), "s": [f"k{i:03d}" for i in range(100)]})
    blocks = block_stats(data, np.arange(100) // 10)
    a = Column("a", pa.int64())
    assert np.flatnonzero(
        might_match(Compare(">=", a, Literal(95, pa.int64())), blocks)
    ).tolist() == [9]
    between = And(
        (Compare(">=", a, Literal(15, pa.int64())), Compare("<", a, Literal(30, pa.int64())))
    )
    assert np.flatnonzero(might_match(between, blocks)).tolist() == [1, 2]
    assert np.flatnonzero(all_rows_match(between, blocks)).tolist() == [2]
    assert np.flatnonzero(might_match(StartsWith(Column("s"), "k05"), blocks)).tolist() == [5]


def test_through_a_real_delta_log(tmp_path: Path) -> None:
    """Stats written with the collector, read back by delta-rs, prune the same way."""
    actions = []
    for k, table in enumerate(TABLES):
        name = f"ll-part-{k}.parquet"  # named as lakelayout's writer names files
        pq.write_table(table, tmp_path / name)
        collector = StatsCollector(SCHEMA)
        collector.add(table)
        size = os.path.getsize(tmp_path / name)
        actions.append(AddAction(name, size, {}, 0, True, stats_json(collector.result())))
    create_table_with_add_actions(str(tmp_path), DeltaSchema.from_arrow(SCHEMA), actions)
    for flatten in (True, False):
        from_log = from_add_actions(
            DeltaTable(str(tmp_path)).get_add_actions(flatten=flatten), SCHEMA
        )
        from_log = from_log.take(np.argsort(from_log.paths))
        assert from_log.paths.tolist() == [f"ll-part-{k}.parquet" for k in range(len(TABLES))]
        for label, pred, kept, all_match in RULES:
            want = SHARPER_FOR_OWN_FILES.get(label, kept)
            assert keeps(pred, from_log) == want, pred.sql()
            assert everywhere(pred, from_log) == all_match, pred.sql()


#: rules whose answer is sharper on lakelayout's own files: their timestamp max was
#: rounded up to the millisecond once when written and is not widened again when read
SHARPER_FOR_OWN_FILES = {"ts > within widened ms": []}


def test_float_max_of_other_writers_is_not_trusted(tmp_path: Path) -> None:
    """parquet-rs (delta-rs's writer) computes float max ignoring NaN, which Spark
    orders above every number: a file with NaN must survive ``f > v``."""
    data = pa.table({"f": pa.array([1.0, float("nan")], pa.float64())})
    pq.write_table(data, tmp_path / "part-0.parquet")
    # the stats such a writer records: max 1.0, NaN ignored
    stats = (
        '{"numRecords": 2, "minValues": {"f": 1.0}, "maxValues": {"f": 1.0}, "nullCount": {"f": 0}}'
    )
    size = os.path.getsize(tmp_path / "part-0.parquet")
    schema = pa.schema([("f", pa.float64())])
    create_table_with_add_actions(
        str(tmp_path),
        DeltaSchema.from_arrow(schema),
        [AddAction("part-0.parquet", size, {}, 0, True, stats)],
    )
    files = from_add_actions(DeltaTable(str(tmp_path)).get_add_actions(flatten=True), schema)
    f = Column("f", pa.float64())
    assert might_match(Compare(">", f, Literal(5.0, pa.float64())), files).tolist() == [True]
    # the min stays a true lower bound, so the file is still skipped below it
    assert might_match(Compare("<", f, Literal(0.5, pa.float64())), files).tolist() == [False]
    trusted = from_add_actions(
        DeltaTable(str(tmp_path)).get_add_actions(flatten=True), schema, nan_safe=True
    )
    assert might_match(Compare(">", f, Literal(5.0, pa.float64())), trusted).tolist() == [False]


def test_in_list_on_38_digit_decimals_is_exact() -> None:
    """IN lists compare DECIMAL(38, s) bounds exactly (no float64 detour: 1e-18 apart values)."""
    dtype = pa.decimal128(38, 18)
    low, high = Decimal("-12345678901.123456789012345678"), Decimal("99999999999999999999.0")
    files = block_stats(pa.table({"d": pa.array([low, high], dtype)}), np.array([0, 0]))
    d = Column("d", dtype)
    below = Decimal("-12345678901.123456789012345679")  # one ulp under the min: same double
    assert float(below) == float(low)
    values = [below, Decimal("-99999999999999999999.999999999999999999")]
    assert might_match(In(d, tuple(Literal(v, dtype) for v in values)), files).tolist() == [False]
    assert all_rows_match(
        In(d, tuple(Literal(v, dtype) for v in values), negated=True), files
    ).tolist() == [True]
    hit = (*values, low)
    assert might_match(In(d, tuple(Literal(v, dtype) for v in hit)), files).tolist() == [True]
    assert all_rows_match(
        In(d, tuple(Literal(v, dtype) for v in hit), negated=True), files
    ).tolist() == [False]


# ---------------------------------------------------------------- decimal IN lists (B5)


@settings(max_examples=200, deadline=None)
@given(
    scale=st.integers(0, 38),
    unscaled=st.lists(
        st.lists(
            st.one_of(
                st.integers(-(10**38) + 1, 10**38 - 1),
                st.sampled_from([0, 1, -1, 2**63, -(2**63), 2**64 - 1, -(2**64), 10**38 - 1]),
            ),
            min_size=1,
            max_size=6,
        ),
        min_size=3,
        max_size=3,
    ),
    offset=st.integers(0, 2),
)
def test_decimal_ranks_order_as_the_decimals_do(
    scale: int, unscaled: list[list[int]], offset: int
) -> None:
    """An IN list of decimals is searched by exact ranks of the 16-byte values (a high
    and a low word): every pair of values across the arrays orders and ties as the
    decimals do, 38 digits and sliced arrays included."""
    from lakelayout.skipping.stats_rules import _sortable_together

    dtype = pa.decimal128(38, scale)
    arrays = []
    for values in unscaled:
        whole = pa.array([Decimal(f"{v}E-{scale}") for v in values], dtype)
        arrays.append(whole.slice(min(offset, len(whole) - 1)))
    decimals = [v for a in arrays for v in a.to_pylist()]
    ranks = [int(r) for part in _sortable_together(*arrays) for r in part]
    for i, a in enumerate(decimals):
        for j, b in enumerate(decimals):
            assert (a < b) == (ranks[i] < ranks[j]) and (a == b) == (ranks[i] == ranks[j])


def test_a_decimal_in_list_keeps_the_files_whose_range_holds_a_value() -> None:
    """The ranked search keeps exactly the files whose [min, max] holds a listed value,
    at 38 digits, where doubles would merge neighbours."""
    dtype = pa.decimal128(38, 0)
    top = 10**38 - 1
    values = [top - 5, top - 4, top - 3, 0, 10, -top, -top + 1, None]
    blocks = np.array([0, 0, 1, 2, 2, 3, 3, 4])
    files = block_stats(
        pa.table({"d": pa.array([None if v is None else Decimal(v) for v in values], dtype)}),
        blocks,
    )
    listed = (Literal(Decimal(top - 3), dtype), Literal(Decimal(-top), dtype))
    assert might_match(In(Column("d", dtype), listed), files).tolist() == [
        False,
        True,
        False,
        True,
        False,  # only NULLs: IN never holds
    ]
