"""The Spark writer end to end: Spark tasks write files, the driver commits, readers agree."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelayout.errors import InvalidOption, SchemaMismatch
from lakelayout.table import delta
from lakelayout.table.schema import delta_type_name
from lakelayout.table.writer import arrow_schema_of, write_files

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
KIB = 1024
TARGET = 64 * KIB

# "path" and "rows" collide with the descriptor columns on purpose
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("path", pa.string()),
        ("b", pa.binary()),
        ("bo", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tsn", pa.timestamp("us")),
        ("dec", pa.decimal128(12, 3)),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("arr", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.float64())),
        ("rows", pa.int64()),
    ]
)

SPARK_DDL = (
    "id long, i8 tinyint, i16 smallint, i32 int, f32 float, f64 double, path string, "
    "b binary, bo boolean, d date, ts timestamp, tsn timestamp_ntz, dec decimal(12,3), "
    "st struct<x: int, y: string>, arr array<long>, m map<string, double>, rows long"
)

_ALPHABET = "abcdefghijklmnopqrstuvwxyzé漢字😀 "
_FLOATS = [math.nan, math.inf, -math.inf, -0.0, 1.5, None]


def _row(i: int, rng: random.Random) -> dict[str, Any]:
    null = i % 11 == 0
    text = "".join(rng.choice(_ALPHABET) for _ in range(2000 if i % 97 == 0 else 40))
    return {
        "id": i,
        "i8": None if null else rng.randint(-128, 127),
        "i16": rng.randint(-32768, 32767),
        "i32": None if null else rng.randint(-(2**31), 2**31 - 1),
        "f32": _FLOATS[i % 6] if i % 5 == 0 else rng.random(),
        "f64": _FLOATS[i % 6] if i % 7 == 0 else rng.gauss(0, 1e6),
        "path": None if null else ("" if i % 13 == 0 else text),
        "b": None if null else text.encode()[:20],
        "bo": None if null else i % 2 == 0,
        "d": dt.date(1900, 1, 1) + dt.timedelta(days=rng.randint(0, 73000)),
        "ts": None
        if null
        else dt.datetime(1970, 1, 1, tzinfo=UTC)
        + dt.timedelta(microseconds=rng.randint(-(10**15), 4 * 10**15)),
        "tsn": dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**15)),
        "dec": None if null else Decimal(rng.randint(-(10**11), 10**11)) / 1000,
        "st": None if null else {"x": i, "y": text[:5]},
        "arr": None if null else [i, None, -i][: i % 4],
        "m": None if null else [("k", float(i)), (text[:3], None)][: 1 + i % 2],
        "rows": i * 3,
    }


def _input_table(n: int, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    return pa.Table.from_pylist([_row(i, rng) for i in range(n)], schema=SCHEMA)


def _normalize(value: Any) -> Any:
    """Comparable Python values: NaN as a string, maps (tuples or key/value dicts) as lists."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        if set(value) == {"key", "value"}:
            return (_normalize(value["key"]), _normalize(value["value"]))
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_normalize(v) for v in value)
    return value


def _rows(table: pa.Table) -> list[Any]:
    ordered = table.select(SCHEMA.names).sort_by("id")
    return [_normalize(r) for r in ordered.to_pylist()]


@pytest.fixture(scope="module")
def written(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, pa.Table, list[Any]]:
    """~1.5 MB of every supported type written at a 64 KiB target and committed."""
    data = _input_table(12_000)
    df = spark.createDataFrame(data, SPARK_DDL).repartition(2)
    root = tmp_path_factory.mktemp("w") / "t"
    schema = arrow_schema_of(df)
    files = write_files(df, str(root), schema=schema, target_file_size=TARGET)
    assert delta.create_table(root, schema, files) == 0
    return root, data, files


def test_arrow_schema_of_maps_spark_types(spark: Any) -> None:
    df = spark.createDataFrame(_input_table(3), SPARK_DDL)
    schema = arrow_schema_of(df)
    assert [delta_type_name(f.type) for f in schema] == [delta_type_name(f.type) for f in SCHEMA]
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert schema.field("tsn").type == pa.timestamp("us")


def test_round_trip_through_deltalake_and_polars(written: tuple[Path, pa.Table, list[Any]]) -> None:
    root, data, _ = written
    expected = _rows(data)
    assert _rows(DeltaTable(str(root)).to_pyarrow_table()) == expected
    assert _rows(pl.read_delta(str(root)).to_arrow()) == expected


def test_files_roll_near_the_target_size(written: tuple[Path, pa.Table, list[Any]]) -> None:
    _, data, files = written
    assert sum(f.num_records for f in files) == data.num_rows
    by_task: dict[str, list[int]] = {}
    for f in sorted(files, key=lambda f: f.path.rsplit("-c", 1)[1]):
        by_task.setdefault(f.path.split("-")[2], []).append(f.size)  # ll-part-<task>-...
    assert len(by_task) == 2
    full = [
        size for sizes in by_task.values() for size in sizes[:-1]
    ]  # last file of a task: the rest
    assert len(full) >= 8
    assert all(0.6 * TARGET <= size <= 1.3 * TARGET for size in full), full
    assert all(f.size <= 1.3 * TARGET for f in files)


def test_stats_match_the_files(written: tuple[Path, pa.Table, list[Any]]) -> None:
    root, _, files = written
    actions = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True))
    assert sorted(actions.column("path").to_pylist()) == sorted(f.path for f in files)
    for i, path in enumerate(actions.column("path").to_pylist()):
        content = pq.read_table(root / path)
        assert actions.column("num_records")[i].as_py() == content.num_rows
        assert actions.column("size_bytes")[i].as_py() == (root / path).stat().st_size
        ids = pc.min_max(content.column("id"))
        assert actions.column("min.id")[i].as_py() == ids["min"].as_py()
        assert actions.column("max.id")[i].as_py() == ids["max"].as_py()
        assert actions.column("null_count.i8")[i].as_py() == content.column("i8").null_count
        days = pc.min_max(content.column("d"))
        assert actions.column("min.d")[i].as_py() == days["min"].as_py()
    assert pq.read_schema(root / files[0].path).field("ts").type == pa.timestamp("us", tz="UTC")


def test_append_time_travel_and_schema_mismatch(
    spark: Any, written: tuple[Path, pa.Table, list[Any]], tmp_path: Path
) -> None:
    base = written[0]
    root = tmp_path / "copy"
    small = spark.createDataFrame(_input_table(50, seed=1), SPARK_DDL).repartition(6)
    schema = delta.snapshot(base).schema  # the schema read back from Delta, not from Spark
    first = write_files(small, str(root), schema=schema, target_file_size=TARGET)
    assert 1 <= len(first) <= 6 and all(f.num_records > 0 for f in first)
    delta.create_table(root, schema, first)
    # columns in another order and case are fine
    again = small.select(*reversed([c.upper() for c in small.columns]))
    v1 = delta.commit(
        root, adds=write_files(again, str(root), schema=schema, target_file_size=TARGET)
    )
    assert v1 == 1
    assert len(DeltaTable(str(root)).to_pyarrow_table()) == 100
    assert len(DeltaTable(str(root), version=0).to_pyarrow_table()) == 50
    assert delta.snapshot(root, version=0).version == 0

    wrong = small.drop("rows").withColumn("i8", small["i8"].cast("int"))
    with pytest.raises(SchemaMismatch) as info:
        write_files(wrong, str(root), schema=schema, target_file_size=TARGET)
    assert "column 'rows' of the table is missing" in str(info.value)
    assert "column 'i8' is byte in the table but integer in the data" in str(info.value)
    assert DeltaTable(str(root)).version() == 1
    # a task that fails mid-write: Spark raises, nothing is committed
    from pyspark.sql import functions as F

    boom = small.withColumn(
        "rows", F.when(F.col("id") == 40, F.raise_error(F.lit("boom"))).otherwise(F.col("rows"))
    )
    with pytest.raises(Exception, match="boom"):
        write_files(boom, str(root), schema=schema, target_file_size=TARGET)
    assert DeltaTable(str(root)).version() == 1
    assert len(DeltaTable(str(root)).to_pyarrow_table()) == 100
    with pytest.raises(InvalidOption, match="target_file_size must be a positive int"):
        write_files(small, str(root), schema=schema, target_file_size=0)


def test_empty_dataframe_writes_nothing(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame(_input_table(0), SPARK_DDL).repartition(3)
    assert write_files(df, str(tmp_path / "e"), schema=SCHEMA, target_file_size=TARGET) == []


def test_column_names_with_a_backtick_or_a_dot_are_written_and_rewritten(
    spark: Any, tmp_path: Path
) -> None:
    from lakelayout.api import Table

    df = spark.createDataFrame(
        [(i, i * 2, i % 3) for i in range(60)], "id INT, `x``y` INT, `a.b` INT"
    ).repartition(3)
    t = Table.create(str(tmp_path / "t"), df)  # PySpark's mapInArrow could not name x`y
    assert t.schema.names == ["id", "x`y", "a.b"]
    got = sorted((r["x`y"], r["a.b"]) for r in t.scan("`x``y` < 10").df.collect())
    assert got == [(0, 0), (2, 1), (4, 2), (6, 0), (8, 1)]
    t.optimize.zorder(["x`y", "id"])  # a rewrite reads and writes them too
    table = DeltaTable(t.uri).to_pyarrow_table()
    assert sorted(table.column("x`y").to_pylist()) == [2 * i for i in range(60)]
    parted = Table.create(str(tmp_path / "p"), df, partition_by=["a.b"])
    assert sorted(r["a.b"] for r in parted.to_df().collect()) == sorted(i % 3 for i in range(60))


def test_a_worker_s_filesystem_error_is_one_lakelayout_error() -> None:
    """A Spark task's Python worker failing on a full disk surfaced as a raw PythonException
    holding the worker's traceback (an audit); its last error line is said once."""
    from lakelayout.errors import LakelayoutError
    from lakelayout.table.writer import task_errors

    worker = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "writer.py", line 1, in write\nOSError: [Errno 28] No space left on device\n'
    )
    with pytest.raises(LakelayoutError) as err, task_errors():
        raise RuntimeError(worker)
    assert str(err.value) == (
        "a Spark task could not write the table's files: OSError: [Errno 28] No space left on "
        "device; nothing was committed"
    )
    with pytest.raises(RuntimeError, match="ValueError: a bug"), task_errors():
        raise RuntimeError("Traceback (most recent call last):\nValueError: a bug\n")
