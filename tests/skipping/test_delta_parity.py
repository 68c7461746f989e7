"""Skipping at least as strong as Delta Lake's, in both directions, on the kinds it used to miss.

Each kind gets files built through the real statistics path (StatsCollector ->
Delta stats JSON -> FileStats, named as lakelayout's writer names files) and
predicates at the boundary: the plan must skip the files where no row can
match, and keep every file where one does. Every case is also checked against
the rows themselves (:func:`lakelayout.expr.evaluate.evaluate`): a kept file
may hold no match, a skipped one never does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.planner import plan
from lakelayout.skipping.stats_rules import all_rows_match
from lakelayout.stats.delta_stats import from_delta_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.collect import StatsCollector, stats_json

UTC = dt.timezone.utc


def files_of(tables: Sequence[pa.Table], schema: pa.Schema, *, own: bool = True) -> FileStats:
    """Statistics of each table as a Delta log holds them (own: named like lakelayout's files)."""
    stats = []
    for table in tables:
        collector = StatsCollector(schema)
        collector.add(table)
        stats.append(stats_json(collector.result()))
    prefix = "ll-" if own else "part-"
    paths = [f"{prefix}{i:05d}.parquet" for i in range(len(tables))]
    return from_delta_stats(stats, schema, paths=paths, sizes=[100] * len(tables))


def kept(
    sql: str,
    tables: Sequence[pa.Table],
    schema: pa.Schema,
    *,
    own: bool = True,
    timezone: str = "UTC",
) -> list[int]:
    """Files the planner keeps for ``sql``, after checking it drops no matching file."""
    files = files_of(tables, schema, own=own)
    pred = parse_predicate(sql, schema, timezone=timezone)
    keep = plan(pred, files, timezone=timezone).keep
    every = all_rows_match(pred, files, timezone=timezone)
    for i, table in enumerate(tables):
        rows = evaluate(pred, table, timezone=timezone)
        assert keep[i] or not rows.any(), f"{sql!r} skipped file {i} holding a match"
        assert not every[i] or rows.all(), f"{sql!r}: not every row of file {i} matches"
    return [int(i) for i in np.flatnonzero(keep)]


def table(schema: pa.Schema, **columns: list[Any]) -> pa.Table:
    rows = len(next(iter(columns.values())))
    return pa.table(
        {
            f.name: pa.array(columns[f.name], f.type)
            if f.name in columns
            else pa.nulls(rows, f.type)
            for f in schema
        },
        schema=schema,
    )


# ---------------------------------------------------------------- nested fields

INNER = pa.struct([("z", pa.int64())])
NESTED = pa.schema([("a", pa.struct([("b", pa.int32()), ("y", INNER)])), ("a.b", pa.int32())])
NESTED_FILES = [
    table(NESTED, a=[{"b": 1, "y": {"z": 1}}, {"b": 3, "y": {"z": 4}}], **{"a.b": [100, 100]}),
    table(NESTED, a=[{"b": 5, "y": {"z": 10}}, None], **{"a.b": [2, 2]}),
    table(NESTED, a=[None, None], **{"a.b": [None, None]}),
    table(NESTED, a=[{"b": None, "y": None}, {"b": 2, "y": {"z": None}}], **{"a.b": [2, 3]}),
]


@pytest.mark.parametrize(
    ("sql", "files"),
    [
        ("a.b = 2", [0, 3]),  # file 0's a.b in [1, 3] may hold 2
        ("a.b = 4", []),
        ("a.b > 3", [1]),
        ("a.b >= 3", [0, 1]),
        ("a.b < 1", []),
        ("a.y.z < 5", [0]),
        ("a.y.z >= 10", [1]),
        ("a.y.z = 5", []),
        ("a.b IS NULL", [1, 2, 3]),
        ("a.y.z IS NULL", [1, 2, 3]),
        ("a.b IS NOT NULL", [0, 1, 3]),
        ("`a.b` = 2", [1, 3]),
        ("`a.b` = 100", [0]),
        ("`a.b` > 3", [0]),
        ("A.B IN (5, 6)", [1]),
    ],
)
def test_struct_fields_skip_like_columns(sql: str, files: list[int]) -> None:
    assert kept(sql, NESTED_FILES, NESTED) == files


def test_a_dotted_column_and_a_struct_field_keep_apart_statistics() -> None:
    stats = files_of(NESTED_FILES, NESTED)
    field, dotted = stats.column("a.b"), stats.column("`a.b`")
    assert field is not None and dotted is not None
    assert field.min.to_pylist() == [1, 5, None, 2]
    assert dotted.min.to_pylist() == [100, 2, None, 2]


# ---------------------------------------------------------------- timestamps near bounds

TS = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
T0 = dt.datetime(2020, 1, 1, 0, 0, 0, 500, tzinfo=UTC)  # 0.5 ms past a whole millisecond
TS_FILES = [table(TS, ts=[T0, T0]), table(TS, ts=[T0 + dt.timedelta(seconds=1)])]


@pytest.mark.parametrize(
    ("literal", "own", "others"),
    [
        # the file's max is rounded up to .001 when written: within that millisecond,
        # lakelayout's own files are skipped, other writers' (widened again) are kept
        ("2020-01-01 00:00:00.001000", [1], [0, 1]),
        ("2020-01-01 00:00:00.001500", [1], [0, 1]),
        ("2020-01-01 00:00:00.002000", [1], [1]),
        ("2020-01-01 00:00:00.000999", [0, 1], [0, 1]),
        ("2020-01-01 00:00:00.000500", [0, 1], [0, 1]),
        ("2020-01-01 00:00:00.000499", [0, 1], [0, 1]),
    ],
)
def test_timestamps_are_not_widened_twice(literal: str, own: list[int], others: list[int]) -> None:
    sql = f"ts > TIMESTAMP'{literal}'"
    assert kept(sql, TS_FILES, TS, own=True) == own
    assert kept(sql, TS_FILES, TS, own=False) == others


def test_a_timestamp_min_below_the_literal_keeps_and_above_skips() -> None:
    assert kept("ts < TIMESTAMP'2020-01-01 00:00:00.000501'", TS_FILES, TS) == [0]
    assert kept("ts < TIMESTAMP'2020-01-01 00:00:00'", TS_FILES, TS) == []
    assert kept("ts <= TIMESTAMP'2020-01-01 00:00:00 UTC'", TS_FILES, TS) == [0]


def test_extreme_timestamps_are_kept_safely() -> None:
    far = pa.array([2**62, 2**62 + 1], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    files = [pa.table({"ts": far}), table(TS, ts=[T0])]
    stats = files_of(files, TS)
    column = stats.column("ts")
    assert column is not None and column.max[0].as_py() is None  # no bound beyond year 9999
    assert kept("ts > TIMESTAMP'9999-12-31 23:59:59.999999'", files, TS) == [0]
    assert kept("ts > TIMESTAMP'+100000-01-01 00:00:00'", files, TS) == [0]
    # neither bound of the far file can be written as Delta stats: it has none, and is kept
    assert kept("ts < TIMESTAMP'1970-01-01 00:00:00'", files, TS) == [0]


@pytest.mark.parametrize(
    ("sql", "files"),
    [
        ("ts < TIMESTAMP'2019-12-31 16:00:00.001 PST'", [0]),
        ("ts < TIMESTAMP'2019-12-31 16:00:00 PST'", []),
        ("ts >= TIMESTAMP'2020-01-01 05:30:01+05:30'", [1]),
        ("ts >= TIMESTAMP'2020-01-01 05:30:01.5+05:30'", []),
    ],
)
def test_timestamp_literals_with_zones_prune_at_their_instant(sql: str, files: list[int]) -> None:
    assert kept(sql, TS_FILES, TS) == files


def test_a_session_zone_pushing_9999_past_the_year_is_accepted() -> None:
    sql = "ts < TIMESTAMP'9999-12-31 23:59:59.999999'"
    assert kept(sql, TS_FILES, TS, timezone="America/New_York") == [0, 1]


# ---------------------------------------------------------------- IS NULL over expressions

NUM = pa.schema([("a", pa.int64()), ("d", pa.date32()), ("s", pa.string())])
NUM_FILES = [
    table(NUM, a=[1, 2], d=[dt.date(2024, 1, 1), dt.date(2024, 5, 1)], s=["abc", "abd"]),
    table(NUM, a=[None, 5], d=[None, dt.date(2023, 1, 1)], s=[None, "x"]),
    table(NUM, a=[None, None], d=[None, None], s=[None, None]),
]


@pytest.mark.parametrize(
    ("sql", "files"),
    [
        ("(a > 0) IS NULL", [1, 2]),
        ("(a > 0) IS NOT NULL", [0, 1]),
        ("(a + 1) IS NULL", [1, 2]),
        ("(a + 1) IS NOT NULL", [0, 1]),
        ("year(d) IS NULL", [1, 2]),
        ("(s LIKE 'a%') IS NULL", [1, 2]),
        ("(a BETWEEN 1 AND 3) IS NOT NULL", [0, 1]),
        ("(a > a + 1) IS NULL", [1, 2]),
        # coalesce is not NULL-strict: only the files holding one value (or NULLs) decide
        ("coalesce(a, 0) IS NULL", [0]),
        ("coalesce(a, NULL) IS NULL", [0, 1, 2]),
    ],
)
def test_is_null_of_expressions_uses_null_counts(sql: str, files: list[int]) -> None:
    assert kept(sql, NUM_FILES, NUM) == files


# ---------------------------------------------------------------- expressions over columns

DAYS = pa.schema(
    [("c", pa.date32()), ("e", pa.int64()), ("s", pa.string()), ("dec", pa.decimal128(6, 2))]
)
DAY_FILES = [
    table(DAYS, c=[dt.date(1976, 7, 4)] * 2, e=[1, 1], s=["abc", "abc"], dec=[Decimal("1.50")] * 2),
    table(
        DAYS,
        c=[dt.date(1976, 6, 30), dt.date(1976, 8, 1)],
        e=[1, 10],
        s=["abb", "abd"],
        dec=[Decimal("1"), Decimal("2")],
    ),
    table(DAYS, c=[dt.date(1977, 1, 1)] * 2, e=[2, 2], s=["abd", "abz"], dec=[Decimal("2.50")] * 2),
    table(DAYS, c=[None, None], e=[None, None], s=[None, None], dec=[None, None]),
    table(
        DAYS,
        c=[dt.date(2023, 12, 31), dt.date(2024, 1, 1)],
        e=[1, None],
        s=["ab", None],
        dec=[Decimal("1.50"), None],
    ),
]


@pytest.mark.parametrize(
    ("sql", "files"),
    [
        # single-valued files decide exactly; monotonic functions map bounds
        ("date_format(c, 'yyyy-MM') = '1976-07'", [0, 1]),
        ("date_format(c, 'yyyy-MM') = '1976-09'", []),
        ("date_format(c, 'yyyy-MM') >= '1977'", [2, 4]),
        ("date_format(c, 'MM') = '07'", [0, 1, 4]),  # not monotonic: only files 0, 2 decided
        ("year(c) = 2024", [4]),
        ("year(c) = 2023", [4]),
        ("year(c) = 1976", [0, 1]),
        ("year(c) > 1976", [2, 4]),
        ("CAST(e AS STRING) = '1'", [0, 1, 4]),
        ("CAST(e AS STRING) = '2'", [1, 2]),
        ("CAST(e AS STRING) = '10'", [1]),
        ("CAST(c AS STRING) = '1976-07-04'", [0, 1]),
        ("CAST(dec AS STRING) = '1.50'", [0, 1, 4]),
        ("CAST(dec AS STRING) = '1.5'", [1]),
        ("substring(s, 1, 3) = 'abc'", [0, 1]),
        ("substring(s, 1, 2) = 'ab'", [0, 1, 2, 4]),
        ("substring(s, 1, 3) > 'abd'", [2]),
        ("substring(s, 2, 1) = 'b'", [0, 1, 2, 4]),
        ("length(s) = 3", [0, 1, 2]),
        ("e % 3 = 1", [0, 1, 4]),
    ],
)
def test_expressions_over_columns_without_an_index(sql: str, files: list[int]) -> None:
    assert kept(sql, DAY_FILES, DAYS) == files


def test_functions_of_timestamps_are_monotonic_only_in_a_fixed_zone() -> None:
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    files = [
        table(
            schema,
            ts=[dt.datetime(2024, 1, 1, 12, tzinfo=UTC), dt.datetime(2024, 3, 1, tzinfo=UTC)],
        ),
        table(
            schema,
            ts=[dt.datetime(2022, 1, 1, 12, tzinfo=UTC), dt.datetime(2022, 3, 1, tzinfo=UTC)],
        ),
    ]
    assert kept("year(ts) = 2024", files, schema) == [0]
    assert kept("year(ts) = 2024", files, schema, timezone="+05:00") == [0]
    assert kept("year(ts) = 2024", files, schema, timezone="Europe/Paris") == [0, 1]


# ---------------------------------------------------------------- null-rejecting predicates

REJECT = pa.schema([("x", pa.int64()), ("s", pa.string()), ("d", pa.date32())])
REJECT_FILES = [
    table(REJECT, x=[1, 2], s=["a", "b"], d=[dt.date(2020, 1, 1)] * 2),
    table(REJECT, x=[None, None], s=[None, None], d=[None, None]),
]


@pytest.mark.parametrize(
    ("sql", "files"),
    [
        ("x = 1", [0]),
        ("x != 5", [0]),
        ("x IN (1, 7)", [0]),
        ("x NOT IN (7, 8)", [0]),
        ("x IN (7, NULL)", []),
        ("x NOT IN (1, NULL)", []),
        ("s LIKE '%a%'", [0]),
        ("endswith(s, 'a')", [0]),
        ("abs(x) = 1", [0]),
        ("month(d) = 1", [0]),
        ("x < 5 OR s = 'z'", [0]),
        ("x IS NULL", [1]),
        ("NOT (x = 1)", [0]),
    ],
)
def test_files_of_nulls_are_skipped_for_null_rejecting_tests(sql: str, files: list[int]) -> None:
    assert kept(sql, REJECT_FILES, REJECT) == files
