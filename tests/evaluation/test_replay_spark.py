"""Spark accepts every generated predicate; logical and spark replays agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import logs_dataset, tpch_denormalized, tpchgen
from lakelayout.evaluation.policies import make_policies
from lakelayout.evaluation.replay import ReplayConfig, replay

pytestmark = pytest.mark.spark


def test_spark_accepts_every_predicate(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    tpch = tpch_denormalized(spark, tpchgen(0.001, tmp_path / "tpch"))
    queries = wl.generate(wl.TPCH_TEMPLATES, 39, seed=5, shape="drift", segment_length=3)
    sums = [F.sum(F.expr(q.sql).cast("int")).alias(f"q{q.i}") for q in queries]
    row = tpch.select(*sums).collect()[0]
    assert len(row) == 39
    assert sum(row[f"q{q.i}"] or 0 for q in queries if q.template == "q1") > 0

    logs = logs_dataset(spark, 3000, tmp_path, batches=2, seed=1)
    lq = wl.generate(wl.LOGS_TEMPLATES, 21, seed=5, shape="mixed")
    df = logs.frame(spark)
    row = df.select(*[F.sum(F.expr(q.sql).cast("int")).alias(f"q{q.i}") for q in lq]).collect()[0]
    assert len(row) == 21


def test_logical_and_spark_modes_agree(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = logs_dataset(spark, 6_000, tmp_path, batches=2, seed=3)
    queries = wl.generate(wl.LOGS_TEMPLATES, 6, seed=2, shape="drift", segment_length=2)
    names = ["none", "sorted", "zorder-halfway"]
    out = {}
    for mode in ("logical", "spark"):
        config = ReplayConfig(mode=mode, rows_per_file=1_000, sample_rows=2_000, full_scans=1)
        out[mode] = replay(make_policies(names), ds, queries, tmp_path / mode, config, spark=spark)
    for logical, real in zip(out["logical"]["runs"], out["spark"]["runs"], strict=True):
        assert logical["policy"] == real["policy"]
        lq, sq = logical["queries"], real["queries"]
        assert [q["files_kept"] for q in lq] == [q["files_kept"] for q in sq]
        assert [q["rows_matching"] for q in lq] == [q["rows_matching"] for q in sq]
        assert all(q["rows_returned"] == q["rows_matching"] for q in sq)
        assert all(q["seconds"] is None for q in lq)
        totals = real["totals"]
        assert totals["bytes_kept"] == sum(q["bytes_kept"] for q in sq)
        assert totals["rewrite_seconds"] == pytest.approx(
            sum(r["seconds"] for r in real["rewrites"])
        )
    # re-timed at the versions they ran on: `none` never removes a file, so its indexed
    # table keeps the same files at every old version and every query is re-timed
    real_runs = {r["policy"]: r for r in out["spark"]["runs"]}
    assert out["spark"]["retime"]["done"] and not out["logical"]["retime"]["done"]
    assert all(q["seconds_retimed"] is not None for q in real_runs["none"]["queries"])
    assert real_runs["none"]["totals"]["queries_retimed"] == len(queries)
    assert all(q["seconds_retimed"] is None for q in out["logical"]["runs"][0]["queries"])
    runs = {r["policy"]: r for r in out["logical"]["runs"]}
    assert runs["none"]["rewrites"] == []
    assert [r["kind"] for r in runs["zorder-halfway"]["rewrites"]] == ["zorder"]
    assert len(runs["sorted"]["rewrites"]) == 2  # one per insert batch
