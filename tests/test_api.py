"""End to end on a real local SparkSession and real Delta tables: create, append,
scan, time travel, pruning, errors, and the no-lost-rows property."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelayout import PredicateError, SchemaMismatch, TableNotFound
from lakelayout.api import Table

pytestmark = pytest.mark.spark


def _orders(spark: Any, start: int, n: int, parts: int) -> Any:
    """n rows with increasing ids, range-partitioned into ``parts`` files."""
    rows = pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "qty": pa.array([(i * 7) % 50 for i in range(start, start + n)], pa.int32()),
            "mode": pa.array([["AIR", "MAIL", "SHIP", "TRUCK"][i % 4] for i in range(n)]),
            "day": pa.array(
                [dt.date(1995, 1, 1) + dt.timedelta(days=i // 10) for i in range(start, start + n)]
            ),
        }
    )
    return spark.createDataFrame(rows).repartitionByRange(parts, "id").sortWithinPartitions("id")


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def _files_in(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def test_create_append_scan_and_time_travel(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "orders"
    t = Table.create(str(path), _orders(spark, 0, 1000, 4))
    assert t.version == 0
    m = t.append(_orders(spark, 1000, 500, 2))
    assert (m.version, m.rows_added) == (1, 500)
    assert m.files_added >= 2

    res = t.scan("id >= 1200 AND qty < 10", columns=["id", "mode"])
    assert res.df.columns == ["id", "mode"]
    expected = [i for i in range(1200, 1500) if (i * 7) % 50 < 10]
    assert _ids(res.df) == expected
    assert res.report.rows_total == 1500 and res.report.files_total == m.files_added + 4

    old = t.scan("id >= 0", version=0)
    assert old.report.rows_total == 1000 and old.df.count() == 1000
    # any Delta reader sees the same table
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 1500


def test_pruning_keeps_only_files_that_can_match(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), _orders(spark, 0, 2000, 8))
    assert len(t.snapshot().files) == 8
    res = t.scan("id BETWEEN 10 AND 20", measure=True)
    r = res.report
    # 8 range partitions of 250 ids: one file holds ids 10..20
    assert (r.files_kept, r.files_total) == (1, 8)
    assert r.measured is not None and r.measured.rows_matching == 11
    assert r.sigma == pytest.approx(11 / 2000)
    assert r.mu == pytest.approx(1.0)
    assert r.psi == pytest.approx(r.rows_kept / 2000)
    assert r.psi == pytest.approx(r.sigma / (r.lam * r.mu))
    # a predicate on a column uncorrelated with the file order skips nothing
    assert t.scan("mode = 'AIR'").report.files_kept == 8
    # OR keeps when either side keeps; NOT is pushed down
    assert t.scan("id < 5 OR id > 1995").report.files_kept == 2
    assert t.scan("NOT (id >= 250)").report.files_kept == 1


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("", "empty predicate"),
        ("   ", "empty predicate"),
        ("id >>= 3", "id >>= 3"),
        ("idd = 3", "Did you mean 'id'?"),
        ("day = 'not a date'", "day"),
        ("id + 1", "boolean"),
    ],
)
def test_bad_predicates_raise_before_reading(
    spark: Any, tmp_path: Path, where: str, message: str
) -> None:
    t = Table.create(str(tmp_path / "t"), _orders(spark, 0, 100, 1))
    with pytest.raises(PredicateError, match=message.replace("(", r"\(").replace("?", r"\?")):
        t.scan(where)


def test_unknown_scan_column_is_named(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), _orders(spark, 0, 100, 1))
    with pytest.raises(
        PredicateError, match=r"unknown column 'mod' in columns; Did you mean 'mode'\?"
    ):
        t.scan("id > 1", columns=["id", "mod"])


def test_missing_table_path_raises(tmp_path: Path) -> None:
    with pytest.raises(TableNotFound, match="no Delta table"):
        Table(str(tmp_path / "nothing-here"))


def test_schema_mismatch_on_append_writes_nothing(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = Table.create(str(path), _orders(spark, 0, 100, 1))
    before = _files_in(path)
    bad = _orders(spark, 100, 10, 1).withColumnRenamed("qty", "quantity")
    with pytest.raises(SchemaMismatch, match="qty"):
        t.append(bad)
    ok = _orders(spark, 100, 10, 1)
    wrong_type = ok.withColumn("qty", ok["qty"].cast("string"))
    with pytest.raises(SchemaMismatch, match="qty"):
        t.append(wrong_type)
    assert t.version == 0
    assert _files_in(path) == before


def test_append_accepts_other_column_order_and_case(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), _orders(spark, 0, 100, 1))
    df = _orders(spark, 100, 50, 1)
    reordered = df.select("day", "MODE", "id", "qty")
    t.append(reordered)
    assert _ids(t.scan("id >= 100").df) == list(range(100, 150))
    assert t.scan("mode = 'AIR' AND id >= 100").df.count() == len(range(100, 150, 4))


def test_create_from_schema_then_append(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("price", pa.decimal128(10, 2))])
    t = Table.create(str(tmp_path / "t"), schema=schema, spark=spark)
    assert t.version == 0 and len(t.snapshot().files) == 0
    assert t.scan("id > 0").df.count() == 0
    df = spark.createDataFrame(
        pa.table(
            {"id": [1, 2, 3], "price": pa.array([decimal.Decimal("1.50")] * 3, schema[1].type)}
        )
    )
    t.append(df)
    assert t.scan("price = 1.5").df.count() == 3


def test_describe_reports_files_rows_and_coverage(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), _orders(spark, 0, 300, 3))
    t.append(_orders(spark, 300, 100, 1))
    d = t.describe()
    assert (d.files, d.rows, d.version) == (4, 400, 1)
    assert d.bytes == sum(os.path.getsize(tmp_path / "t" / p) for p in t.snapshot().files.paths)
    by_name = {c.name: c for c in d.coverage}
    assert by_name["id"].files_with_min_max == 4
    assert [h["version"] for h in d.history] == [1, 0]
