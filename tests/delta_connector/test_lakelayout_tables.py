"""lakelayout's tables under Delta Lake's own Spark connector (``delta-spark``).

The same rows through ``spark.read.format("delta")``; ``DESCRIBE DETAIL`` and
``DESCRIBE HISTORY`` see lakelayout's commits; Delta's VACUUM (retention 0)
deletes neither lakelayout's sidecars nor a live file; Delta's OPTIMIZE and
ZORDER BY keep every row, and lakelayout then reads the table correctly,
ignoring the provenance of the files Delta removed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakelayout.advisor.querylog import flush_all
from lakelayout.api import Table
from lakelayout.layouts import QdTreeLayout
from lakelayout.skipping.indexes import ValueList
from lakelayout.table.schema import STATS_COLUMNS

from ..cluster.helpers import same_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
    ]
)
STRINGS = ["", "a", "Ärger", "日本", "naïve", "\U0001f600x", "https://example.com/" + "p" * 40]
FLOATS = [float("nan"), -0.0, 1.5, float("inf"), -2.25, None]


def _rows(start: int, n: int) -> pa.Table:
    """Every type lakelayout writes statistics for, with nulls, NaN, unicode, long strings."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "i": [None if k % 11 == 0 else k % 50 for k in ids],
            "f": [FLOATS[k % len(FLOATS)] for k in ids],
            "s": [None if k % 13 == 0 else STRINGS[k % len(STRINGS)] + str(k % 7) for k in ids],
            "d": [dt.date(2000, 1, 1) + dt.timedelta(days=k % 40) for k in ids],
            "ts": [
                dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
                + dt.timedelta(seconds=k * 37, microseconds=k % 1000)
                for k in ids
            ],
            "dec": [decimal.Decimal(k % 997).scaleb(-2) for k in ids],
            "b": [k % 3 == 0 for k in ids],
        },
        schema=SCHEMA,
    )


def _df(spark: Any, start: int, n: int, parts: int) -> Any:
    return spark.createDataFrame(_rows(start, n)).repartitionByRange(parts, "id")


def _delta(spark: Any, t: Table, **options: Any) -> Any:
    reader = spark.read.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(t.uri)


def _names(files: list[str]) -> set[str]:
    return {os.path.basename(f) for f in files}


def _sidecars(t: Table) -> dict[str, int]:
    """Every file under ``_lakelayout/`` with its size."""
    root = os.path.join(t.uri, "_lakelayout")
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


# ------------------------------------------------------------------ rows, detail, history


def test_deltas_reader_returns_the_rows_lakelayout_wrote(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    t = Table.create(str(tmp_path / "t"), _df(spark, 0, 300, 3), spark=spark)
    t.append(_df(spark, 300, 200, 2))
    t.delete("i < 10 OR s LIKE 'a%'")
    t.optimize.zorder(["i", "d"])
    every = spark.createDataFrame(_rows(0, 500))
    kept = every.where(~F.coalesce(F.expr("i < 10 OR s LIKE 'a%'"), F.lit(False)))
    assert same_rows(_delta(spark, t), kept)
    assert _delta(spark, t).count() == kept.count() > 300
    # time travel through Delta's reader sees lakelayout's versions
    assert same_rows(_delta(spark, t, versionAsOf=0), spark.createDataFrame(_rows(0, 300)))
    assert same_rows(_delta(spark, t, versionAsOf=t.version), t.to_df())
    assert _delta(spark, t).schema == t.to_df().schema


def test_describe_detail_and_history_see_lakelayouts_commits(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), _df(spark, 0, 300, 3), spark=spark, cluster_by=["i", "d"])
    appended = t.append(_df(spark, 300, 100, 2)).version
    t.optimize.run()
    snap = t.snapshot()
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{t.uri}`").collect()[0]
    assert detail["format"] == "delta"
    assert detail["numFiles"] == len(snap.files)
    assert detail["sizeInBytes"] == snap.files.total_bytes
    assert detail["id"] == snap.metadata.id  # type: ignore[union-attr]
    assert detail["properties"]["lakelayout.clusteringColumns"] == '["i", "d"]'
    history = spark.sql(f"DESCRIBE HISTORY delta.`{t.uri}`").collect()
    ours = t.history()
    assert [h["version"] for h in history] == [h["version"] for h in ours]
    assert [h["operation"] for h in history] == [
        h.get("recordedOperation", h["operation"]) for h in ours
    ]
    # what lakelayout did, where delta-rs recorded a WRITE
    assert [h["operation"] for h in ours][:2] == ["OPTIMIZE", "WRITE"]
    assert history[0]["version"] == snap.version
    assert history[-1]["operation"] == "CREATE TABLE"
    # an append reads nothing and removes nothing: Delta sees a blind append, so a concurrent
    # Delta DELETE does not conflict with it; OPTIMIZE is not one
    blind = {h["version"]: h["isBlindAppend"] for h in history}
    assert blind[appended] is True
    assert not blind[snap.version]


def test_statistics_past_the_32nd_column_reach_deltas_skipping(spark: Any, tmp_path: Path) -> None:
    """lakelayout writes statistics on every column and says so in the table's properties;
    without it Delta's connector (and delta-rs) ignore those of columns 33 and up."""
    from pyspark.sql import functions as F

    wide = spark.range(4000).select(
        "id", *[((F.col("id") * (k + 1)) % 1000).alias(f"c{k:02d}") for k in range(40)]
    )
    t = Table.create(str(tmp_path / "wide"), wide.repartitionByRange(8, "id"), spark=spark)
    assert t.properties[STATS_COLUMNS] == "-1"
    where = "id < 400 AND c39 >= 0"  # c39 is the 41st column
    assert t.snapshot().files.column("c39") is not None
    delta_read = _names(_delta(spark, t).where("c39 < 0").inputFiles())
    assert delta_read == set()  # no row has c39 < 0: Delta reads nothing
    res = t.scan(where)
    assert res.report.files_kept == 1
    assert _names(_delta(spark, t).where(where).inputFiles()) == _names(res.df.inputFiles())


# ------------------------------------------------------------------ VACUUM


def _with_layout_and_index(spark: Any, path: Path) -> Table:
    """Twelve files, a ValueList index and a Qd-tree layout applied (provenance sidecars)."""
    from pyspark.sql import functions as F

    df = (
        spark.range(6000)
        .select(
            "id",
            (F.rand(3) * 1000).cast("int").alias("a"),
            (F.col("id") % 10).cast("int").alias("k"),
            F.concat(F.lit("m"), (F.col("id") % 4).cast("string")).alias("mode"),
        )
        .repartition(6)
    )
    t = Table.create(str(path), df, spark=spark, target_file_size=16 * 1024)
    t.indexes.add(ValueList("mode"))
    sample = t.to_df().select("a", "k").toArrow()
    layout = QdTreeLayout.fit(sample, ["k IN (1, 5)", "a < 250"], target_blocks=12)
    t.optimize.apply(layout)
    t.indexes.refresh()
    return t


PROBES = ["k IN (1, 5)", "a < 250 AND k = 3", "mode = 'm2'", "id BETWEEN 100 AND 900"]


def test_vacuum_keeps_sidecars_and_live_files(spark: Any, tmp_path: Path) -> None:
    t = _with_layout_and_index(spark, tmp_path / "t")
    before = {w: t.scan(w) for w in PROBES}
    assert before["k IN (1, 5)"].report.skipped_by.get("layout(qdtree)", 0) > 0
    assert before["mode = 'm2'"].report.skipped_by.get("valuelist(mode)", 0) > 0
    kept = {w: _names(r.df.inputFiles()) for w, r in before.items()}
    rows = {w: sorted(x["id"] for x in r.df.select("id").collect()) for w, r in before.items()}
    flush_all()  # the query log's own writer thread: its files are sidecars too
    sidecars = _sidecars(t)
    live = {str(p) for p in t.snapshot().files.paths}
    data_files = {n for n in os.listdir(t.uri) if n.endswith(".parquet")}
    assert data_files > live  # the files the Qd-tree rewrite removed are still on disk
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{t.uri}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert {n for n in os.listdir(t.uri) if n.endswith(".parquet")} == live  # it did vacuum
    assert _sidecars(t) == sidecars
    assert any(name.startswith("querylog/") for name in sidecars)
    again = Table(t.uri, spark=spark)
    for where in PROBES:
        res = again.scan(where)
        assert res.report.skipped_by == before[where].report.skipped_by, where
        assert _names(res.df.inputFiles()) == kept[where], where
        assert sorted(x["id"] for x in res.df.select("id").collect()) == rows[where], where
    described = {d.name: d for d in again.indexes.describe()}
    assert described["valuelist(mode)"].files_covered == len(live)


# ------------------------------------------------------------------ Delta's OPTIMIZE


def test_deltas_optimize_keeps_rows_and_stale_provenance_is_ignored(
    spark: Any, tmp_path: Path
) -> None:
    t = _with_layout_and_index(spark, tmp_path / "t")
    everything = t.to_df().select("id", "a", "k", "mode").localCheckpoint()
    laid_out = {str(p) for p in t.snapshot().files.paths}
    spark.sql(f"OPTIMIZE delta.`{t.uri}`").collect()  # compaction: all files are small
    compacted = {str(p) for p in t.snapshot().files.paths}
    assert not compacted & laid_out and len(compacted) < len(laid_out)
    assert same_rows(t.to_df(), everything)
    for where in PROBES:
        res = t.scan(where)
        # the Qd-tree's blocks belonged to the removed files: nothing is skipped by it now
        assert "layout(qdtree)" not in res.report.skipped_by, where
        assert same_rows(res.df, everything.where(where)), where
    assert same_rows(t.scan("mode = 'm2'").df, everything.where("mode = 'm2'"))

    spark.sql(f"OPTIMIZE delta.`{t.uri}` ZORDER BY (a, k)").collect()
    assert same_rows(t.to_df(), everything)
    assert same_rows(_delta(spark, t), everything)
    for where in PROBES:  # lakelayout's scans of Delta's Z-ordered files
        assert same_rows(t.scan(where).df, everything.where(where)), where
    # lakelayout reorganizes Delta's files in turn, and Delta reads the result
    t.optimize.zorder(["k", "a"])
    for where in PROBES:
        assert same_rows(t.scan(where).df, everything.where(where)), where
        assert same_rows(_delta(spark, t).where(where), everything.where(where)), where


def test_deltas_optimize_on_a_lakelayout_clustered_table(spark: Any, tmp_path: Path) -> None:
    """Delta compacts lakelayout's ZCubes away; lakelayout's cube provenance for the removed
    files no longer counts, and its next OPTIMIZE clusters Delta's files again."""
    t = Table.create(str(tmp_path / "t"), _df(spark, 0, 600, 4), spark=spark, cluster_by=["i", "d"])
    t.optimize.run()
    t.append(_df(spark, 600, 200, 2))
    assert t.detail().cubes
    everything = spark.createDataFrame(_rows(0, 800))
    spark.sql(f"OPTIMIZE delta.`{t.uri}`").collect()
    assert same_rows(t.to_df(), everything)
    detail = t.detail()
    assert not detail.cubes  # every clustered file was removed by Delta
    m = t.optimize.run()
    assert m.rows_removed == m.rows_added == 800
    assert t.detail().cubes
    assert same_rows(t.to_df(), everything)
    assert same_rows(_delta(spark, t), everything)
    for where in ["i < 5", "d >= DATE'2000-01-30'", "s LIKE 'na%'"]:
        assert same_rows(t.scan(where).df, everything.where(where)), where


def test_delta_peer_statements_take_relative_paths(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make demo`` names its tables relative to the working folder: Delta's ``delta.`path```
    reads a path only when it is absolute, so the peers' statements make it so."""
    from lakelayout.evaluation import delta_oss

    monkeypatch.chdir(tmp_path)
    df = spark.range(300).selectExpr("id", "cast(id % 7 as int) as k")
    delta_oss.create_clustered(spark, "rel/t", df, ["k"])
    delta_oss.append(spark, "rel/t", df.selectExpr("id + 300 as id", "k"))
    delta_oss.optimize(spark, "rel/t")
    ids = sorted(r["id"] for r in Table(str(tmp_path / "rel" / "t"), spark=spark).to_df().collect())
    assert ids == list(range(600))
