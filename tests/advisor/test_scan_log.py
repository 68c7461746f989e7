"""Every Table.scan leaves a query-log record (real Spark, real Delta tables)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelayout.advisor import querylog as ql
from lakelayout.api import Table
from lakelayout.table import delta

pytestmark = pytest.mark.spark


def _make(spark: Any, path: Path) -> Table:
    rows = pa.table(
        {
            "id": pa.array(range(400), pa.int64()),
            "s": pa.array([f"v{i % 7}" for i in range(400)]),
            "ts": pa.array([dt.datetime(2025, 1 + i // 100, 1) for i in range(400)]),
        }
    )
    df = spark.createDataFrame(rows).repartitionByRange(4, "id").sortWithinPartitions("id")
    return Table.create(str(path), df)


def test_every_scan_is_recorded_with_its_fields(spark: Any, tmp_path: Path) -> None:
    t = _make(spark, tmp_path / "t")
    before = dt.datetime.now(dt.UTC)
    a = t.scan("id >= 300 AND month(ts) = 4 AND s LIKE '%3%'", columns=["id", "s"])
    assert a.df.count() == len([i for i in range(300, 400) if "3" in f"v{i % 7}"])
    t.scan()
    after = dt.datetime.now(dt.UTC)
    log = ql.QueryLog(t.uri).read()
    assert log.num_rows == 2
    first, second = log.to_pylist()
    assert first["predicate"] == a.predicate.sql()
    assert first["features"] == ["id", "month(ts)", "s LIKE '%3%'"]
    assert first["columns"] == ["id", "s"]
    report = a.report
    assert (first["files_total"], first["files_kept"]) == (report.files_total, report.files_kept)
    assert (first["bytes_total"], first["bytes_kept"]) == (report.bytes_total, report.bytes_kept)
    assert (first["rows_total"], first["rows_kept"]) == (400, report.rows_kept)
    assert report.files_kept < report.files_total  # the record shows real pruning
    assert first["table_version"] == t.version
    assert first["planning_seconds"] == pytest.approx(report.pruning_seconds)
    assert first["scan_seconds"] >= first["planning_seconds"]
    assert before <= first["ts"] <= second["ts"] <= after
    assert first["session"] == ql.SESSION_ID and second["seq"] > first["seq"]
    assert second["predicate"] == "TRUE" and second["columns"] is None
    assert second["files_kept"] == second["files_total"]


def test_a_failing_log_write_does_not_fail_the_scan(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = _make(spark, tmp_path / "t")
    blocker = Path(ql.log_path(t.uri))
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("in the way")
    res = t.scan("id < 10")
    assert res.df.count() == 10
    log = ql.QueryLog(t.uri)
    with caplog.at_level(logging.WARNING, logger="lakelayout.advisor.querylog"):
        assert log.flush() == 0
    assert "failed" in caplog.text
    assert t.scan("id < 20").df.count() == 20  # still scanning
    blocker.unlink()
    assert log.read().column("predicate").to_pylist() == ["id < 10L", "id < 20L"]


def test_a_broken_log_property_does_not_fail_the_scan(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = _make(spark, tmp_path / "t")
    delta.set_properties(t.uri, {ql.MAX_RECORDS_PROPERTY: "many"})
    with caplog.at_level(logging.WARNING, logger="lakelayout.api"):
        assert t.scan("id < 5").df.count() == 5
    assert "scan not recorded" in caplog.text and ql.MAX_RECORDS_PROPERTY in caplog.text
    # the advisor, which would wait for ever, and `lakelayout log` say why no query
    # comes (they said "only 0 queries logged" and nothing; an audit)
    said = f"table property {ql.MAX_RECORDS_PROPERTY} must be a whole number >= 1, got 'many'"
    assert said in t.advisor.recommend().reason
    from typer.testing import CliRunner

    from lakelayout.cli import app

    shown = CliRunner().invoke(app, ["log", t.uri], terminal_width=300)
    assert shown.exit_code == 0 and f"note: {said}: its scans are not recorded" in shown.output


def test_logging_is_off_per_table_and_per_session(spark: Any, tmp_path: Path) -> None:
    """And the advisor, which would wait for queries for ever, says why none come (it
    said 'only 0 queries logged': an audit)."""
    t = _make(spark, tmp_path / "t")
    delta.set_properties(t.uri, {ql.ENABLED_PROPERTY: "false"})
    t.scan("id < 5").df.count()
    assert ql.QueryLog(t.uri).read().num_rows == 0
    said = f"query logging is off for this table ({ql.ENABLED_PROPERTY}=false)"
    assert said in t.advisor.recommend().reason
    from typer.testing import CliRunner

    from lakelayout.cli import app

    shown = CliRunner().invoke(app, ["log", t.uri], terminal_width=200)
    assert shown.exit_code == 0 and f"note: {said}: its scans are not recorded" in shown.output

    other = _make(spark, tmp_path / "u")
    assert "logging is off" not in other.advisor.recommend().reason
    spark.conf.set(ql.SESSION_CONF, "false")
    try:
        other.scan("id < 5")
        said = f"query logging is off in this Spark session ({ql.SESSION_CONF}=false)"
        assert said in Table(other.uri).advisor.recommend().reason
    finally:
        spark.conf.unset(ql.SESSION_CONF)
    assert ql.QueryLog(other.uri).read().num_rows == 0
    other.scan("id < 6")
    assert ql.QueryLog(other.uri).read().num_rows == 1


def test_a_query_recorded_for_the_advisor_follows_the_session_switch(
    spark: Any, tmp_path: Path
) -> None:
    t = _make(spark, tmp_path / "t")
    spark.conf.set(ql.SESSION_CONF, "false")
    try:
        assert not t.advisor.record_query("id < 7", source="replay")
    finally:
        spark.conf.unset(ql.SESSION_CONF)
    assert ql.QueryLog(t.uri).read().num_rows == 0
    assert t.advisor.record_query("id < 8", source="replay")
    assert ql.QueryLog(t.uri).read().num_rows == 1


def test_select_through_lakelayout_sql_is_logged(spark: Any, tmp_path: Path) -> None:
    import lakelayout
    from lakelayout.errors import InvalidOption

    t = _make(spark, tmp_path / "t")
    wh = str(tmp_path / "wh")
    df = lakelayout.sql(spark, f"SELECT id, s FROM delta.`{t.uri}` WHERE id >= 390", warehouse=wh)
    assert df.columns == ["id", "s"] and sorted(r["id"] for r in df.collect()) == list(
        range(390, 400)
    )
    assert lakelayout.sql(spark, f"select * from delta.`{t.uri}`", warehouse=wh).count() == 400
    with pytest.raises(InvalidOption, match="SELECT takes \\* or column names, got"):
        lakelayout.sql(spark, f"SELECT id + 1 FROM delta.`{t.uri}`", warehouse=wh)
    log = ql.QueryLog(t.uri).read().to_pylist()
    assert [(r["predicate"], r["columns"]) for r in log] == [
        ("id >= 390L", ["id", "s"]),
        ("TRUE", None),
    ]


def test_a_count_through_the_scan_records_what_spark_took(spark: Any, tmp_path: Path) -> None:
    t = _make(spark, tmp_path / "t")
    timed = t.scan("id >= 250")
    assert timed.count() == 150
    untimed = t.scan("id < 10")
    assert untimed.df.count() == 10  # straight through Spark: not timed
    inside = t.scan("s = 'v3'")
    with inside.timed():
        rows = inside.df.collect()
    assert len(rows) == len([i for i in range(400) if i % 7 == 3])
    log = {r["predicate"]: r for r in ql.QueryLog(t.uri).read().to_pylist()}
    assert log[timed.predicate.sql()]["run_seconds"] > 0
    assert log[untimed.predicate.sql()]["run_seconds"] is None
    assert log[inside.predicate.sql()]["run_seconds"] > 0
    # a count reads only its filter's columns, and its record says so; the others all
    assert log[timed.predicate.sql()]["columns"] == ["id"]
    assert log[untimed.predicate.sql()]["columns"] is None
    assert log[inside.predicate.sql()]["columns"] is None
    assert timed.logged is not None and timed.logged.run_seconds == pytest.approx(
        log[timed.predicate.sql()]["run_seconds"]
    )
    # the advisor reads the timed ones as the table's own query costs, their bytes those
    # of the columns each read: the count's, its filter column's share of the files
    sizes = {"id": 0, "s": 0, "ts": 0}
    for path in delta.snapshot(t.uri).files.paths:
        meta = pq.read_metadata(Path(t.uri) / str(path))
        for g in range(meta.num_row_groups):
            for c in range(meta.row_group(g).num_columns):
                chunk = meta.row_group(g).column(c)
                sizes[chunk.path_in_schema] += chunk.total_compressed_size
    id_share = sizes["id"] / sum(sizes.values())
    assert 0 < id_share < 1
    runs = t.advisor.inputs().runs
    counted, collected = log[timed.predicate.sql()], log[inside.predicate.sql()]
    assert sorted(r.bytes_read for r in runs) == sorted(
        [round(counted["bytes_kept"] * id_share), collected["bytes_kept"]]
    )
    assert sorted(r.seconds for r in runs) == pytest.approx(
        sorted(x["scan_seconds"] + x["run_seconds"] for x in (counted, collected))
    )


def test_a_count_of_every_row_reads_no_column(spark: Any, tmp_path: Path) -> None:
    t = _make(spark, tmp_path / "t")
    assert t.scan().count() == 400
    assert t.scan("month(ts) = 2 AND s LIKE 'v1%'").count() == len(
        [i for i in range(100, 200) if i % 7 == 1]
    )
    first, second = ql.QueryLog(t.uri).read().to_pylist()
    assert first["columns"] == [] and first["run_seconds"] > 0
    assert second["columns"] == ["s", "ts"]


def test_with_logging_off_a_scan_still_counts(spark: Any, tmp_path: Path) -> None:
    t = _make(spark, tmp_path / "t")
    ql.set_enabled(False)
    try:
        res = t.scan("id < 5")
        assert res.logged is None and res.count() == 5
    finally:
        ql.set_enabled(True)
    assert ql.QueryLog(t.uri).read().num_rows == 0


def test_a_query_planned_elsewhere_is_recorded_in_the_session_zone(
    spark: Any, tmp_path: Path
) -> None:
    t = _make(spark, tmp_path / "t")
    where = "ts >= '2025-03-01 00:00:00'"
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        # 05:00 UTC on March 1st: the file holding the March rows (ts = midnight UTC) no
        # longer matches, those of April do
        spark.conf.set("spark.sql.session.timeZone", "America/New_York")
        assert t.advisor.record_query(where, source="replay")
        assert t.advisor.record_query(None, source="replay")
        shifted = t.plan(where, timezone="America/New_York")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    in_utc = t.plan(where, timezone="UTC")
    assert shifted.files_kept < in_utc.files_kept  # the zone decides which files a query keeps
    first, second = ql.QueryLog(t.uri).read().to_pylist()
    assert first["source"] == second["source"] == "replay"
    assert first["files_kept"] == shifted.files_kept and first["files_total"] == 4
    assert first["bytes_kept"] == shifted.bytes_kept
    assert first["features"] == ["ts"] and first["table_version"] == t.version
    assert second["predicate"] == "TRUE" and second["files_kept"] == 4


@pytest.mark.spark
def test_queries_logged_before_a_rename_are_not_credited_to_a_new_column_of_that_name(
    spark: Any, tmp_path: Path
) -> None:
    """With column mapping, Delta renamed ``price`` and added a new column ``price``: the
    advisor bound the 12 logged queries to the new, empty column and chose it (found by
    an audit). A query whose column is another one now does not count."""
    path = str(tmp_path / "t")
    t = Table.create(path, pa.table({"id": list(range(400)), "price": [i / 4 for i in range(400)]}))
    t = Table(path, spark=spark)
    for k in range(12):
        t.scan(f"price >= {k * 5} AND price < {k * 5 + 3}")
        t.scan(f"id < {k * 30}")
    assert "price" in t.advisor.features().curve
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
    )
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN price TO old_price")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (price DOUBLE)")
    t = Table(path, spark=spark)
    analysis = t.advisor.features()
    assert analysis.queries == 12  # the id queries; the price ones are about old_price
    assert "price" not in analysis.curve and "id" in analysis.curve
    t.append(pa.table({"id": [1000], "old_price": [1.0], "price": [2.0]}))
    for k in range(3):  # logged after the rename: they count
        t.scan(f"price > {k}")
    assert t.advisor.features().queries == 15
