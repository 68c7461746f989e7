"""Partitioned tables: written by lakelayout, by Delta's Spark connector and by delta-rs.

Every operation keeps each row in its partition: after create, append,
compaction, ZORDER BY, DELETE and ``apply(layout)`` the rows (partition
columns included) read by lakelayout, Delta's own Spark reader, delta-rs and
polars are the same multiset as the expected rows computed by Spark. Scans
prune by partition value, and the report says how many files the partition
values alone ruled out.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelayout.api import Table
from lakelayout.errors import InvalidOption, SchemaMismatch
from lakelayout.skipping.planner import PARTITION
from lakelayout.table.datafile import file_location
from tests.cluster.helpers import same_rows

pytestmark = pytest.mark.spark

#: partition values that need escaping in a path, a NULL, non-ASCII text
PART_VALUES = "CASE id % 5 WHEN 0 THEN NULL WHEN 1 THEN 'a b:c/d' WHEN 2 THEN '%x=y' WHEN 3 THEN 'ü' ELSE 'plain' END"


def source_rows(spark: Any, start: int, n: int) -> Any:
    """``n`` rows: id, a string partition column ``part``, ints k and w, a double v, a date."""
    return spark.sql(
        f"""SELECT id, {PART_VALUES} AS part, CAST(id % 7 AS INT) AS k,
                   CAST((id * 37) % 101 AS INT) AS w, id * 1.5 AS v,
                   DATE_ADD(DATE'2020-01-01', CAST(id % 3 AS INT)) AS d
            FROM range({start}, {start + n})"""
    )


def rows_of(values: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of comparable values (timestamps as UTC instants)."""

    def norm(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.timezone.utc)  # naive = local time (Spark's collect)
        return v

    return sorted((tuple(norm(v) for v in row.values()) for row in values), key=repr)


def assert_rows(spark: Any, path: str, expected: Any) -> None:
    """lakelayout, Delta's connector, delta-rs and polars all read the ``expected`` rows."""
    import polars as pl

    columns = expected.columns
    want = rows_of([r.asDict() for r in expected.collect()])
    readers = {
        "lakelayout": lambda: Table(path, spark=spark).to_df().select(*columns).collect(),
        "delta-spark": lambda: spark.read.format("delta").load(path).select(*columns).collect(),
    }
    for reader, read in readers.items():
        assert rows_of([r.asDict() for r in read()]) == want, f"{reader} reads other rows"
    delta_rs = DeltaTable(path).to_pyarrow_table().select(columns).to_pylist()
    assert rows_of(delta_rs) == want, "delta-rs reads other rows"
    via_polars = pl.read_delta(path).select(columns).to_dicts()
    assert rows_of(via_polars) == want, "polars reads other rows"


def assert_partitioned_files(path: str, partition: str) -> None:
    """Every live file sits in a ``partition=`` directory and does not store the column."""
    for file in pa.table(DeltaTable(path).get_add_actions()).column("path").to_pylist():
        assert file.startswith(f"{partition}="), file
        names = pq.read_schema(file_location(path, file)).names
        assert partition not in names, (file, names)


@pytest.fixture(scope="module")
def base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A lakelayout table partitioned by ``part``, 60 rows in several files per partition."""
    path = str(tmp_path_factory.mktemp("part") / "t")
    Table.create(path, source_rows(spark, 0, 60).repartition(3), partition_by=["part"])
    return path


def copy_of(path: str, tmp_path: Path) -> str:
    target = str(tmp_path / "copy")
    shutil.copytree(path, target)
    return target


def test_create_writes_files_as_delta_does(spark: Any, base: str) -> None:
    snap = Table(base, spark=spark).snapshot()
    assert snap.table_format.partition_columns == ("part",)
    assert DeltaTable(base).metadata().partition_columns == ["part"]
    assert_partitioned_files(base, "part")
    paths = {str(p).split("/")[0] for p in snap.files.paths}
    # Hive escaping on disk, URI encoding in the log (as Delta's connector writes them)
    assert paths == {
        "part=__HIVE_DEFAULT_PARTITION__",
        "part=a%20b%253Ac%252Fd",
        "part=%2525x%253Dy",
        "part=%C3%BC",
        "part=plain",
    }
    assert os.path.isdir(os.path.join(base, "part=a b%3Ac%2Fd"))
    assert_rows(spark, base, source_rows(spark, 0, 60))


def test_scan_prunes_by_partition_before_reading(spark: Any, base: str) -> None:
    from pyspark.sql import functions as F

    t = Table(base, spark=spark)
    snap = t.snapshot()
    in_partition = sum(str(p).startswith("part=%C3%BC/") for p in snap.files.paths)
    res = t.scan("part = 'ü' AND k >= 0", measure=True)
    assert res.report.files_kept == in_partition
    assert res.report.skipped_by[PARTITION] == len(snap.files) - in_partition
    want = spark.read.format("delta").load(base).where(F.expr("part = 'ü' AND k >= 0"))
    assert same_rows(res.df, want)
    assert res.report.measured is not None
    assert res.report.measured.rows_matching == want.count() == 12
    # NULL partition: IS NULL keeps only its files, a comparison skips them
    nulls = t.scan("part IS NULL")
    assert nulls.df.count() == 12
    assert nulls.report.files_kept == sum(
        str(p).startswith("part=__HIVE") for p in snap.files.paths
    )
    assert t.scan("part > 'a'").df.where("part IS NULL").count() == 0


def test_append_optimize_zorder_delete_keep_every_row_in_its_partition(
    spark: Any, base: str, tmp_path: Path
) -> None:
    path = copy_of(base, tmp_path)
    t = Table(path, spark=spark)
    before = len(t.snapshot().files)
    t.optimize.compact()  # every partition's files become one file
    assert len(t.snapshot().files) == 5 < before
    t.append(source_rows(spark, 60, 25).repartition(2))
    expected = source_rows(spark, 0, 85)
    assert_partitioned_files(path, "part")
    assert_rows(spark, path, expected)
    version = t.version
    with pytest.raises(InvalidOption, match="ZORDER BY part: a partition column"):
        t.optimize.zorder(["k", "PART"])  # Delta refuses it too (it compacted; an audit)
    assert t.version == version
    t.optimize.zorder(["k", "w"])
    assert_partitioned_files(path, "part")
    assert_rows(spark, path, expected)
    t.delete("k = 1 OR part = 'plain'")
    assert_partitioned_files(path, "part")
    assert_rows(spark, path, expected.where("NOT (k = 1 OR part <=> 'plain')"))


def test_apply_splits_blocks_that_span_partitions(spark: Any, base: str, tmp_path: Path) -> None:
    from lakelayout.layouts import LinearLayout

    path = copy_of(base, tmp_path)
    t = Table(path, spark=spark)
    sample = pa.table({"k": list(range(7))})
    layout = LinearLayout.fit(sample, columns=["k"], target_blocks=2)  # blocks ignore "part"
    t.optimize.apply(layout)
    assert_partitioned_files(path, "part")
    snap = t.snapshot()
    partitions = {str(p).split("/")[0] for p in snap.files.paths}
    assert len(partitions) == 5 and len(snap.files) >= 5
    assert_rows(spark, path, source_rows(spark, 0, 60))


def test_empty_string_partition_value_is_null_for_every_reader(spark: Any, tmp_path: Path) -> None:
    df = spark.sql("SELECT id, CASE id % 3 WHEN 0 THEN '' WHEN 1 THEN 'x' END AS p FROM range(6)")
    path = str(tmp_path / "t")
    Table.create(path, df, partition_by=["p"])
    expected = spark.sql("SELECT id, IF(id % 3 = 1, 'x', NULL) AS p FROM range(6)")
    assert_rows(spark, path, expected)
    strict = spark.createDataFrame([(1, ""), (2, "y")], "id long, p string not null")
    with pytest.raises(SchemaMismatch, match="column 'p' is not nullable"):
        Table.create(str(tmp_path / "strict"), strict, partition_by=["p"])
    assert not os.path.exists(os.path.join(tmp_path, "strict", "_delta_log"))


def test_timestamp_partitions_before_year_1000_are_read_by_delta_and_polars(
    spark: Any, tmp_path: Path
) -> None:
    """Partition values of timestamps had years without four digits ('1-01-01T...Z'):
    Delta's reader returned NULL for them and polars refused the table (found by an audit)."""
    import polars as pl

    moments = [dt.datetime(1, 1, 1), dt.datetime(999, 12, 31, 23), dt.datetime(2020, 1, 1, 0, 0, 1)]
    data = pa.table({
        "pt": pa.array([m.replace(tzinfo=dt.timezone.utc) for m in moments], pa.timestamp("us", "UTC")),
        "pn": pa.array(moments, pa.timestamp("us")),
        "v": pa.array([1, 2, 3], pa.int64()),
    })  # fmt: skip
    want = sorted((m.isoformat(sep=" "), i + 1) for i, m in enumerate(moments))
    for column in ("pt", "pn"):
        path = str(tmp_path / column)
        Table.create(path, data, spark=spark, partition_by=[column])
        log = Path(path, "_delta_log", "00000000000000000000.json").read_text().splitlines()
        values = sorted(
            json.loads(line)["add"]["partitionValues"][column] for line in log if '"add"' in line
        )
        assert [v[:5] for v in values] == ["0001-", "0999-", "2020-"], values
        got = spark.sql(
            f"SELECT date_format({column}, 'yyyy-MM-dd HH:mm:ss') AS s, v "
            f"FROM delta.`{path}` WHERE {column} IS NOT NULL"
        ).collect()
        assert sorted((r.s, r.v) for r in got) == want
        assert sorted(pl.read_delta(path).get_column("v").to_list()) == [1, 2, 3]


def test_create_refuses_what_delta_refuses(spark: Any, tmp_path: Path) -> None:
    df = spark.sql(
        "SELECT id, named_struct('x', id) AS st, CAST(CAST(id AS STRING) AS BINARY) AS bin FROM range(2)"
    )
    path = str(tmp_path / "t")
    with pytest.raises(InvalidOption, match="partition column 'nope' is not in the table"):
        Table.create(path, df, partition_by=["nope"])
    with pytest.raises(InvalidOption, match="cannot partition by 'st' of type struct"):
        Table.create(path, df, partition_by=["st"])
    with pytest.raises(InvalidOption, match="cannot partition by 'bin' of type binary"):
        Table.create(path, df, partition_by=["bin"])
    with pytest.raises(InvalidOption, match="cannot use all columns as partition columns"):
        Table.create(path, df.select("id"), partition_by=["id"])
    with pytest.raises(InvalidOption, match="both partitioned and clustered"):
        Table.create(path, df, partition_by=["id"], cluster_by=["id"])
    with pytest.raises(InvalidOption, match="given twice"):
        Table.create(path, df, partition_by=["id", "ID"])
    assert not os.path.exists(path)  # refused before anything was written


# --------------------------------------------------------------------------- other writers


def delta_spark_rows(spark: Any, start: int, n: int) -> Any:
    """Rows for a table Delta's connector partitions by a string, a date and a timestamp."""
    return spark.sql(
        f"""SELECT id, {PART_VALUES} AS s, DATE_ADD(DATE'2021-03-01', CAST(id % 2 AS INT)) AS d,
                   TIMESTAMP'2021-03-01 10:00:00.123456' + make_interval(0, 0, 0, 0, CAST(id % 2 AS INT), 0, 0) AS ts,
                   CAST(id % 7 AS INT) AS k, CAST((id * 37) % 101 AS INT) AS w
            FROM range({start}, {start + n})"""
    )


@pytest.fixture(scope="module")
def written_by_delta_spark(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("dspark") / "t")
    delta_spark_rows(spark, 0, 40).repartition(2).write.format("delta").partitionBy(
        "s", "d", "ts"
    ).save(path)
    return path


@pytest.fixture(scope="module")
def written_by_delta_rs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    from deltalake import write_deltalake

    path = str(tmp_path_factory.mktemp("drs") / "t")
    rows = delta_spark_rows(spark, 0, 40).toArrow()
    for half in (rows.slice(0, 20), rows.slice(20)):
        write_deltalake(path, half, partition_by=["s", "d"], mode="append")
    return path


@pytest.mark.parametrize("writer", ["delta-spark", "delta-rs"])
def test_every_operation_on_a_table_another_writer_partitioned(
    spark: Any, request: pytest.FixtureRequest, tmp_path: Path, writer: str
) -> None:
    from pyspark.sql import functions as F

    from lakelayout.skipping.indexes import ValueList

    fixture = "written_by_delta_spark" if writer == "delta-spark" else "written_by_delta_rs"
    path = copy_of(request.getfixturevalue(fixture), tmp_path)
    t = Table(path, spark=spark)
    parts = t.snapshot().table_format.partition_columns
    assert set(parts) >= {"s", "d"}
    expected = delta_spark_rows(spark, 0, 40)
    assert_rows(spark, path, expected)

    where = "s = 'a b:c/d' AND d = DATE'2021-03-02'"
    res = t.scan(where)
    assert res.report.skipped_by[PARTITION] > 0
    assert same_rows(res.df, expected.where(F.expr(where)))

    t.append(delta_spark_rows(spark, 40, 10))
    expected = expected.unionByName(delta_spark_rows(spark, 40, 10))
    assert_rows(spark, path, expected)
    t.optimize.compact()
    assert_rows(spark, path, expected)
    t.optimize.zorder(["k", "w"])
    assert_rows(spark, path, expected)
    t.delete("w < 30 AND s IS NOT NULL")
    expected = expected.where("NOT (w < 30 AND s IS NOT NULL)")
    assert_rows(spark, path, expected)

    t.indexes.add(ValueList("k"))
    t.indexes.refresh()
    got = t.scan("k = 3 AND s IS NULL")
    assert same_rows(got.df, expected.where("k = 3 AND s IS NULL"))
    assert got.df.count() > 0


# --------------------------------------------------------------------------- zone-less timestamps


def _spellings(path: str) -> set[str]:
    return {p["ts"] for p in DeltaTable(path).partitions()}


def _delta_in_zone(spark: Any, path: str, zone: str) -> list[tuple[str, int]]:
    """(ts as Delta's connector reads it in ``zone``, rendered in UTC; id) of every row."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        rows = spark.read.format("delta").load(path).select("ts", "id").collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    return sorted((r.ts.isoformat(), r.id) for r in rows)  # the driver's zone: UTC


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_rewrites_keep_the_logs_spelling_of_zone_less_timestamps(
    spark: Any, tmp_path: Path, mapping: str
) -> None:
    """Delta's connector before version 3 wrote timestamp partition values without a
    zone, in the session's zone, and reads them so. A rewrite spelled them in UTC,
    which moved every rewritten row by the zone's offset for Delta's reader (5:30
    hours in Kolkata; found by an audit). Now a rewrite keeps the log's spelling and
    an append of a new moment writes its own (UTC), which every reader reads alike. With
    column mapping too (a review: the log's values were looked up under the physical
    name)."""
    path = str(tmp_path / "t")
    zone = "Asia/Kolkata"
    saved = {
        k: spark.conf.get(k, None)
        for k in (
            "spark.sql.session.timeZone",
            "spark.databricks.delta.write.utcTimestampPartitionValues",
        )
    }
    spark.conf.set("spark.sql.session.timeZone", zone)
    spark.conf.set("spark.databricks.delta.write.utcTimestampPartitionValues", "false")
    try:
        spark.sql(
            f"CREATE TABLE delta.`{path}` (id BIGINT, k INT, ts TIMESTAMP) USING delta "
            f"PARTITIONED BY (ts) TBLPROPERTIES ('delta.columnMapping.mode' = '{mapping}')"
        )
        spark.sql(
            "SELECT id, CAST(id % 4 AS INT) AS k, TIMESTAMP'2021-01-01 05:30:00' "
            "+ make_interval(0, 0, 0, 0, CAST(id % 3 AS INT), 0, 0) AS ts FROM range(30)"
        ).repartition(4).write.format("delta").mode("append").save(path)
    finally:
        for k, v in saved.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    spelled = _spellings(path)
    assert spelled == {"2021-01-01 05:30:00", "2021-01-01 06:30:00", "2021-01-01 07:30:00"}
    seen = _delta_in_zone(spark, path, zone)
    assert seen[0][0] == "2021-01-01T00:00:00"  # 05:30 in Kolkata

    t = Table(path, spark=spark)
    t.optimize.compact()
    t.optimize.zorder(["k", "id"])
    t.delete("id = 0")
    assert _spellings(path) == spelled
    assert _delta_in_zone(spark, path, zone) == [r for r in seen if r[1] != 0]

    moment = dt.datetime(2021, 1, 1, 0, 0, tzinfo=dt.timezone.utc)
    t.append(pa.table({
        "id": pa.array([100], pa.int64()), "k": pa.array([1], pa.int32()),
        "ts": pa.array([moment], pa.timestamp("us", "UTC")),
    }))  # fmt: skip
    assert "2021-01-01T00:00:00.000000Z" in _spellings(path)
    assert ("2021-01-01T00:00:00", 100) in _delta_in_zone(spark, path, zone)


def test_a_moment_spelled_with_and_without_a_zone_is_not_rewritten(
    spark: Any, tmp_path: Path
) -> None:
    """delta-rs spells 03:30 UTC without a zone, Delta's connector (3.0 on) with one:
    Delta's connector reads the two apart in a non-UTC session, so no one spelling of
    the rewritten file keeps both. The rewrite is refused before anything is written.
    lakelayout's own append of that moment joins the log's first spelling: it never
    makes a moment two-spelled (it did, and blocked every later rewrite; an audit)."""
    from deltalake import write_deltalake

    from lakelayout.errors import UnsupportedTable

    path = str(tmp_path / "t")
    moment = dt.datetime(2021, 1, 1, 3, 30, tzinfo=dt.timezone.utc)
    rows = pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "ts": pa.array([moment, moment], pa.timestamp("us", "UTC")),
    })  # fmt: skip
    write_deltalake(path, rows, partition_by=["ts"])
    t = Table(path, spark=spark)
    t.append(rows)
    assert _spellings(path) == {"2021-01-01 03:30:00.000000"}
    t.optimize.compact()  # one spelling: the rewrite goes ahead
    assert _spellings(path) == {"2021-01-01 03:30:00.000000"}
    spark.createDataFrame(rows.to_pandas()).write.format("delta").mode("append").save(path)
    assert _spellings(path) == {"2021-01-01 03:30:00.000000", "2021-01-01T03:30:00.000000Z"}
    files = sorted(str(p) for p in Path(path).rglob("*.parquet"))
    version = t.version
    with pytest.raises(UnsupportedTable, match=r"'ts' holds the moment .* both with and without"):
        t.optimize.compact()
    assert t.version == version
    assert sorted(str(p) for p in Path(path).rglob("*.parquet")) == files
    assert sorted(t.scan("ts = TIMESTAMP'2021-01-01 03:30:00'").df.toPandas()["id"]) == [
        1,
        1,
        1,
        2,
        2,
        2,
    ]
    # a DELETE that drops the files whole writes no value again: it goes ahead (a review)
    t.delete("ts = TIMESTAMP'2021-01-01 03:30:00'")
    assert t.to_df().count() == 0
