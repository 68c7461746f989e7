"""Per-file statistics: the Delta stats a file gets, and FileStats built from them."""

from __future__ import annotations

import datetime as dt
import json
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

from lakelayout.errors import InvalidOption, SchemaMismatch
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.bounds import next_string, string_upper_bound, widen_string_max
from lakelayout.stats.delta_stats import from_add_actions, from_delta_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.collect import StatsCollector, stats_json

UTC = dt.timezone.utc
NAN = float("nan")
INF = float("inf")


def collect(values: list[Any], dtype: pa.DataType, **options: Any) -> dict[str, Any]:
    schema = pa.schema([("c", dtype)])
    collector = StatsCollector(schema, **options)
    collector.add(pa.record_batch([pa.array(values, dtype)], schema=schema))
    return collector.result()


def bounds(values: list[Any], dtype: pa.DataType, **options: Any) -> tuple[Any, Any, Any]:
    result = collect(values, dtype, **options)
    return (
        result["minValues"].get("c"),
        result["maxValues"].get("c"),
        result["nullCount"].get("c"),
    )


# ---------------------------------------------------------------- collector rules as data

# values, type, expected (min, max, nullCount); None = omitted
RULES: list[tuple[str, list[Any], pa.DataType, tuple[Any, Any, Any]]] = [
    ("ints", [3, None, -7, 12], pa.int64(), (-7, 12, 1)),
    ("int8", [1, 2], pa.int8(), (1, 2, 0)),
    ("floats", [1.5, -2.25], pa.float64(), (-2.25, 1.5, 0)),
    ("nan drops max", [1.0, NAN, 3.0], pa.float64(), (1.0, None, 0)),
    ("all nan", [NAN, NAN], pa.float64(), (None, None, 0)),
    ("neg zero", [-0.0, 0.0], pa.float64(), (0.0, 0.0, 0)),
    ("infinities omitted", [-INF, 1.0, INF], pa.float64(), (None, None, 0)),
    ("float32 exact", [0.1], pa.float32(), (float(np.float32(0.1)), float(np.float32(0.1)), 0)),
    ("decimal", [Decimal("1.25"), Decimal("-3.10")], pa.decimal128(10, 2), (-3.1, 1.25, 0)),
    (
        "big decimal as text",
        [Decimal("12345678901234567890.12"), Decimal("0.01")],
        pa.decimal128(38, 2),
        (0.01, "12345678901234567890.12", 0),
    ),
    ("tiny decimal as text", [Decimal("0.00001")], pa.decimal128(10, 5), ("0.00001", "0.00001", 0)),
    ("strings", ["b", "a", None, ""], pa.string(), ("", "b", 1)),
    ("large_string", ["x", "y"], pa.large_string(), ("x", "y", 0)),
    ("long strings", ["a" * 40, "b" * 40], pa.string(), ("a" * 32, "b" * 31 + "c", 0)),
    ("max carries U+10FFFF", ["a\U0010ffff" * 20], pa.string(), ("a\U0010ffff" * 16, "b", 0)),
    ("short max with U+10FFFF", ["z\U0010ffffq"], pa.string(), ("z\U0010ffffq", "{", 0)),
    ("max of U+10FFFF only", ["\U0010ffff" * 40], pa.string(), ("\U0010ffff" * 32, None, 0)),
    ("unicode", ["é", "日本"], pa.string(), ("é", "日本", 0)),
    (
        "dates",
        [dt.date(2020, 1, 2), dt.date(1999, 12, 31)],
        pa.date32(),
        ("1999-12-31", "2020-01-02", 0),
    ),
    (
        "timestamps round outward",
        [dt.datetime(2020, 1, 1, 0, 0, 0, 123456, UTC), dt.datetime(2020, 1, 1, 0, 0, 1, 7, UTC)],
        pa.timestamp("us", tz="UTC"),
        ("2020-01-01T00:00:00.123Z", "2020-01-01T00:00:01.001Z", 0),
    ),
    (
        "whole millisecond stays",
        [dt.datetime(2020, 1, 1, 0, 0, 0, 123000, UTC)],
        pa.timestamp("us", tz="UTC"),
        ("2020-01-01T00:00:00.123Z", "2020-01-01T00:00:00.123Z", 0),
    ),
    (
        "other zone is written in UTC",
        [dt.datetime(2020, 1, 1, 1, 0, tzinfo=UTC)],
        pa.timestamp("us", tz="Europe/Paris"),
        ("2020-01-01T01:00:00.000Z", "2020-01-01T01:00:00.000Z", 0),
    ),
    (
        "timestamp_ntz",
        [dt.datetime(2020, 1, 1, 0, 0, 0, 1)],
        pa.timestamp("us"),
        ("2020-01-01T00:00:00.000", "2020-01-01T00:00:00.001", 0),
    ),
    (
        "nanoseconds",
        [1_000_001, -1],
        pa.timestamp("ns"),
        ("1969-12-31T23:59:59.999", "1970-01-01T00:00:00.002", 0),
    ),
    ("booleans", [True, None, False], pa.bool_(), (False, True, 1)),
    ("binary has no bounds", [b"a", None], pa.binary(), (None, None, 1)),
    ("list has no bounds", [[1], None, []], pa.list_(pa.int32()), (None, None, 1)),
    ("all null", [None, None], pa.int32(), (None, None, 2)),
    ("zero rows", [], pa.int32(), (None, None, 0)),
    ("dictionary", ["b", "a"], pa.dictionary(pa.int8(), pa.string()), ("a", "b", 0)),
]


@pytest.mark.parametrize(
    ("values", "dtype", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES]
)
def test_collector_rules(
    values: list[Any], dtype: pa.DataType, expected: tuple[Any, Any, Any]
) -> None:
    assert bounds(values, dtype) == expected


def test_string_view_column() -> None:
    assert bounds(["b", "a"], pa.string_view()) == ("a", "b", 0)


def test_prefix_length_option() -> None:
    assert bounds(["abcdef"], pa.string(), string_prefix_length=3) == ("abc", "abd", 0)
    with pytest.raises(
        InvalidOption, match=r"string_prefix_length must be a positive number.*got 0"
    ):
        StatsCollector(pa.schema([("c", pa.string())]), string_prefix_length=0)


def test_string_bounds_are_true_bounds() -> None:
    values = ["a" * 40 + "z", "a" * 40, "é" * 50, "\ud7ff" * 33]
    low, high, _ = bounds(values, pa.string())
    assert all(low <= v for v in values)
    assert all(v < high for v in values)


def test_several_batches_and_numrecords() -> None:
    schema = pa.schema([("a", pa.int64()), ("f", pa.float64())])
    collector = StatsCollector(schema)
    collector.add(pa.record_batch({"a": [5, 6], "f": [1.0, 2.0]}, schema=schema))
    collector.add(pa.table({"a": [None, 1], "f": [NAN, -1.0]}, schema=schema))
    result = collector.result()
    assert result == {
        "numRecords": 4,
        "minValues": {"a": 1, "f": -1.0},
        "maxValues": {"a": 6},
        "nullCount": {"a": 1, "f": 0},
    }


def test_nested_struct_stats_follow_delta() -> None:
    st = pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.string())]))])
    result = collect([{"x": 1, "y": {"z": "q"}}, None, {"x": None, "y": None}], st)
    assert result["minValues"] == {"c": {"x": 1, "y": {"z": "q"}}}
    assert result["maxValues"] == {"c": {"x": 1, "y": {"z": "q"}}}
    assert result["nullCount"] == {"c": {"x": 2, "y": {"z": 2}}}


def test_missing_column_is_an_error() -> None:
    collector = StatsCollector(pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    with pytest.raises(SchemaMismatch, match=r"lacks column\(s\) \['b'\]"):
        collector.add(pa.record_batch({"a": [1]}))


def test_result_is_json_ready() -> None:
    result = collect([Decimal("12345678901234567890.12"), None], pa.decimal128(38, 2))
    assert json.loads(json.dumps(result)) == result
    unicode = collect(["é", "日本", "\U0010ffff"], pa.string())
    text = stats_json(unicode)
    assert "é" in text
    assert json.loads(text) == unicode
    assert "c" not in unicode["maxValues"]  # no finite string exceeds every U+10FFFF...


# ---------------------------------------------------------------- string helpers


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("abc", "abd"),
        ("a\U0010ffff", "b"),
        ("a\U0010ffff\U0010ffff", "b"),
        ("x\ud7ff", "x\ue000"),
        ("", None),
        ("\U0010ffff\U0010ffff", None),
        ("日", "旦"),
    ],
)
def test_next_string(prefix: str, expected: str | None) -> None:
    assert next_string(prefix) == expected
    if expected is not None:
        assert expected > prefix + "\U0010ffff" * 3


@pytest.mark.parametrize(
    ("value", "n", "upper", "widened"),
    [
        ("abc", 3, "abc", "abd"),
        ("ab", 3, "ab", "ab"),
        ("abcd", 3, "abd", "abd"),
        ("ab\U000fffff", 32, "ab\U000fffff", "ac"),
        ("ab\U0010ffff", 32, "ac", "ac"),
    ],
)
def test_upper_bounds(value: str, n: int, upper: str, widened: str) -> None:
    assert string_upper_bound(value, n) == upper
    assert widen_string_max(value, n) == widened


# ---------------------------------------------------------------- FileStats


SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("d", pa.decimal128(38, 2)),
        ("s", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("bin", pa.binary()),
        ("st", pa.struct([("x", pa.int32())])),
    ]
)


def sample_files() -> list[pa.Table]:
    t1 = pa.table(
        {
            "i": [1, 2, None],
            "f": [1.5, NAN, -0.0],
            "d": [Decimal("12345678901234567890.12"), Decimal("-1.05"), None],
            "s": ["a" * 40, "zz\U0010ffff", None],
            "day": [dt.date(2020, 1, 1), dt.date(2021, 2, 3), None],
            "ts": [dt.datetime(2020, 1, 1, 1, 2, 3, 123456, UTC)] * 3,
            "ntz": [dt.datetime(2020, 1, 1, 1, 2, 3, 999999)] * 3,
            "b": [True, None, True],
            "bin": [b"a", b"b", None],
            "st": [{"x": 1}, None, {"x": 7}],
        },
        schema=SCHEMA,
    )
    t2 = pa.table({c: pa.nulls(2, SCHEMA.field(c).type) for c in SCHEMA.names}, schema=SCHEMA)
    t3 = SCHEMA.empty_table()
    return [t1, t2, t3]


def stats_of(table: pa.Table) -> dict[str, Any]:
    collector = StatsCollector(SCHEMA)
    for batch in table.to_batches():
        collector.add(batch)
    return collector.result()


def assert_true_bounds(files: FileStats, tables: list[pa.Table]) -> None:
    """Every known bound really bounds the file's values; null counts are exact."""
    for i, table in enumerate(tables):
        for name, column in files.columns.items():
            values = table.column(name.split(".")[0])
            if "." in name:
                values = pa.chunked_array([c.flatten()[0] for c in values.chunks], pa.int32())
            assert column.null_count[i] == values.null_count
            present = [v for v in values.to_pylist() if v is not None and v == v]
            low, high = column.min[i].as_py(), column.max[i].as_py()
            if low is not None:
                assert all(low <= v for v in present), (name, low)
            if high is not None:
                assert all(v <= high for v in present), (name, high)


def test_from_delta_stats_true_bounds() -> None:
    tables = sample_files()
    files = from_delta_stats([stats_of(t) for t in tables], SCHEMA)
    assert len(files) == 3
    assert files.num_records.tolist() == [3, 2, 0]
    assert files.total_rows == 5
    assert_true_bounds(files, tables)
    assert files.columns["f"].max[0].as_py() is None  # NaN present
    assert files.columns["d"].max[0].as_py() == Decimal("12345678901234567890.12")
    assert files.columns["ts"].max[0].as_py() == dt.datetime(2020, 1, 1, 1, 2, 3, 124999, UTC)
    assert files.columns["s"].max[0].as_py() == "z{"
    assert files.columns["b"].min.to_pylist() == [True, None, None]


def test_unparseable_stats_are_unknown() -> None:
    files = from_delta_stats(
        [
            "not json",
            None,
            {
                "numRecords": 2,
                "minValues": {"i": "x", "day": "2020-13-01", "d": 1e3},
                "nullCount": {"i": True},
            },
        ],
        SCHEMA,
    )
    assert files.num_records.tolist() == [-1, -1, 2]
    assert files.columns["i"].min.null_count == 3
    assert files.columns["i"].null_count.tolist() == [-1, -1, -1]
    assert files.columns["day"].min[2].as_py() is None
    assert files.columns["d"].min[2].as_py() == Decimal("1000")


def test_take_len_totals() -> None:
    files = from_delta_stats(
        [stats_of(t) for t in sample_files()], SCHEMA, paths=["p0", "p1", "p2"], sizes=[10, 20, 30]
    )
    assert files.total_bytes == 60
    picked = files.take(np.array([False, True, True]))
    assert picked.paths.tolist() == ["p1", "p2"]
    assert picked.columns["i"].null_count.tolist() == [2, 0]
    reordered = files.take([2, 0])
    assert reordered.paths.tolist() == ["p2", "p0"]
    assert reordered.columns["s"].min.to_pylist() == [None, "a" * 32]
    with pytest.raises(InvalidOption, match="mask has 2 entries for 3 files"):
        files.take(np.array([True, False]))
    assert len(FileStats.empty(SCHEMA)) == 0


def test_from_add_actions_rejects_other_objects() -> None:
    with pytest.raises(InvalidOption, match="got dict"):
        from_add_actions({"path": []}, SCHEMA)


# ---------------------------------------------------------------- through a real Delta log


def write_delta(root: Path, tables: list[pa.Table], schema: pa.Schema, stats: list[str]) -> None:
    actions = []
    for k, (table, text) in enumerate(zip(tables, stats, strict=True)):
        name = f"part-{k}.parquet"
        pq.write_table(table, root / name)
        size = os.path.getsize(root / name)
        actions.append(AddAction(name, size, {}, 1_700_000_000_000 + k, True, text))
    create_table_with_add_actions(str(root), DeltaSchema.from_arrow(schema), actions, mode="error")


@pytest.mark.parametrize("dump", [json.dumps, stats_json], ids=["json.dumps", "stats_json"])
def test_delta_rs_round_trip(tmp_path: Path, dump: Any) -> None:
    tables = sample_files()
    written = [stats_of(t) for t in tables]
    write_delta(tmp_path, tables, SCHEMA, [dump(s) for s in written])
    table = DeltaTable(str(tmp_path))
    actions = table.get_add_actions(flatten=True)
    from_log = from_add_actions(actions, SCHEMA)
    from_dicts = from_delta_stats(written, SCHEMA)
    order = np.argsort(from_log.paths)
    from_log = from_log.take(order)
    assert from_log.paths.tolist() == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert from_log.num_records.tolist() == [3, 2, 0]
    assert (from_log.sizes > 0).all()
    assert from_log.modification_times.tolist() == [1_700_000_000_000 + k for k in range(3)]
    for name, column in from_dicts.columns.items():
        log_column = from_log.columns[name]
        assert log_column.min.to_pylist() == column.min.to_pylist(), name
        assert log_column.max.to_pylist() == column.max.to_pylist(), name
        assert log_column.null_count.tolist() == column.null_count.tolist(), name
    assert_true_bounds(from_log, tables)


def test_other_writers_truncated_bounds_are_widened(tmp_path: Path) -> None:
    """Delta Spark style: 32-char prefix + U+10FFFF tie-breaker, escaped; ms timestamps."""
    schema = pa.schema(
        [("s", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("f", pa.float64())]
    )
    data = pa.table(
        {
            "s": ["k" * 32 + "\U0010ffff\U0010ffffzz"],
            "ts": [dt.datetime(2020, 1, 1, 0, 0, 0, 123999, UTC)],
            "f": [NAN],
        },
        schema=schema,
    )
    spark_like = {
        "numRecords": 1,
        "minValues": {"s": "k" * 32, "ts": "2020-01-01T00:00:00.123Z", "f": "NaN"},
        "maxValues": {"s": "k" * 32 + "\U0010ffff", "ts": "2020-01-01T00:00:00.123Z", "f": "NaN"},
        "nullCount": {"s": 0, "ts": 0, "f": 0},
    }
    write_delta(tmp_path, [data], schema, [json.dumps(spark_like)])
    files = from_add_actions(DeltaTable(str(tmp_path)).get_add_actions(flatten=True), schema)
    assert files.columns["s"].max[0].as_py() == "k" * 31 + "l"
    assert files.columns["s"].max[0].as_py() > data["s"][0].as_py()
    assert files.columns["ts"].max[0].as_py() == dt.datetime(2020, 1, 1, 0, 0, 0, 123999, UTC)
    assert files.columns["f"].min[0].as_py() is None
    assert files.columns["f"].max[0].as_py() is None


# ---------------------------------------------------------------- from_blocks


def test_from_blocks_exact_bounds() -> None:
    data = pa.table(
        {
            "a": [5, 1, 9, None],
            "f": [1.0, NAN, 2.0, 3.0],
            "s": ["x" * 50, "b", "c", "a"],
            "ts": pa.array([1_001, 5, None, 2_999], pa.timestamp("ns", tz="UTC")),
            "bin": [b"a", b"b", b"c", None],
        }
    )
    files = block_stats(data, np.array([7, 3, 7, 3]))
    assert files.paths.tolist() == ["block-3", "block-7"]
    assert files.num_records.tolist() == [2, 2]
    assert files.total_rows == 4
    assert files.columns["a"].min.to_pylist() == [1, 5]
    assert files.columns["a"].null_count.tolist() == [1, 0]
    assert files.columns["f"].max.to_pylist() == [None, 2.0]  # NaN in block 3
    assert files.columns["s"].max.to_pylist() == ["b", "x" * 50]  # exact, untruncated
    assert files.columns["ts"].min.cast(pa.int64()).to_pylist() == [0, 1]
    assert files.columns["ts"].max.cast(pa.int64()).to_pylist() == [3, 2]
    assert files.columns["bin"].min.null_count == 2
    assert files.sizes.sum() == pytest.approx(data.nbytes, abs=2)
    with pytest.raises(InvalidOption, match="block_ids has 3 entries for a table of 4 rows"):
        block_stats(data, np.array([1, 2, 3]))


def test_a_dotted_column_beside_a_struct_field_through_a_delta_log(tmp_path: Path) -> None:
    """Column ``b.c`` and field ``c`` of struct ``b``: apart in the JSON, the log and FileStats."""
    schema = pa.schema([("b", pa.struct([("c", pa.int32())])), ("b.c", pa.int32())])
    data = pa.table({"b": [{"c": 1}, {"c": 2}], "b.c": [10, 20]}, schema=schema)
    collector = StatsCollector(schema)
    collector.add(data)
    stats = collector.result()
    assert stats["minValues"] == {"b": {"c": 1}, "b.c": 10}
    assert stats["maxValues"] == {"b": {"c": 2}, "b.c": 20}
    write_delta(tmp_path, [data], schema, [stats_json(stats)])
    nested = from_add_actions(DeltaTable(str(tmp_path)).get_add_actions(flatten=False), schema)
    assert nested.columns["b.c"].min.to_pylist() == [1]
    assert nested.columns["`b.c`"].min.to_pylist() == [10]
    assert nested.columns["`b.c`"].max.to_pylist() == [20]
    # the flattened form names both min.b.c: ambiguous, so both read as unknown
    flat = from_add_actions(DeltaTable(str(tmp_path)).get_add_actions(flatten=True), schema)
    assert flat.columns["b.c"].min.to_pylist() == [None]
    assert flat.columns["`b.c`"].max.to_pylist() == [None]
    assert from_delta_stats([stats], schema).columns["`b.c`"].min.to_pylist() == [10]


def test_decimal_bounds_from_json_text_keep_38_digits() -> None:
    """Regression: JSON numbers went through a double (and a 28-digit context)."""
    schema = pa.schema([("d", pa.decimal128(20, 2)), ("e", pa.decimal128(38, 18))])
    text = (
        '{"numRecords":1,'
        '"minValues":{"d":123456789012345678.91,"e":-12345678901.123456789012345679},'
        '"maxValues":{"d":"123456789012345678.91","e":99999999999999999999.999999999999999999},'
        '"nullCount":{"d":0,"e":0}}'
    )
    files = from_delta_stats([text], schema)
    assert files.columns["d"].min.to_pylist() == [Decimal("123456789012345678.91")]
    assert files.columns["d"].max.to_pylist() == [Decimal("123456789012345678.91")]
    assert files.columns["e"].min.to_pylist() == [Decimal("-12345678901.123456789012345679")]
    assert files.columns["e"].max.to_pylist() == [
        Decimal("99999999999999999999.999999999999999999")
    ]


def test_decimal_bound_beyond_the_type_is_unknown() -> None:
    schema = pa.schema([("d", pa.decimal128(5, 2))])
    text = '{"numRecords":1,"minValues":{"d":1234.5},"maxValues":{"d":1.005},"nullCount":{"d":0}}'
    files = from_delta_stats([text], schema)
    assert files.columns["d"].min.to_pylist() == [None]  # 6 digits in DECIMAL(5, 2)
    assert files.columns["d"].max.to_pylist() == [None]  # a third fraction digit
