"""Delta Lake's own OPTIMIZE ZORDER BY and liquid clustering as peers in the replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.api import Table
from lakelayout.errors import InvalidOption
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.delta_oss import max_file_size_for
from lakelayout.evaluation.metrics import FILE_COUNT_TOLERANCE
from lakelayout.evaluation.policies import POLICIES, make_policies


@given(files=st.integers(1, 2_000), extra=st.integers(0, 10**9))
def test_max_file_size_makes_delta_cut_exactly_that_many_files(files: int, extra: int) -> None:
    nbytes = files * (files + 1) + extra
    assert max(1, nbytes // max_file_size_for(nbytes, files)) == files


def test_max_file_size_rejects_empty_input() -> None:
    with pytest.raises(InvalidOption, match="files >= 1, got 10, 0"):
        max_file_size_for(10, 0)


def test_peers_are_registered_and_need_the_connector() -> None:
    peers = make_policies(["delta-zorder", "delta-liquid"])
    assert [p.name for p in peers] == ["delta-zorder", "delta-liquid"]
    assert all(p.needs_delta_connector for p in peers)
    assert not any(POLICIES[n]().needs_delta_connector for n in ("none", "liquid", "hilbert"))


def _detail(spark: Any, path: str) -> Any:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]


def _history(spark: Any, path: str) -> list[Any]:
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()


@pytest.mark.spark
def test_delta_peers_replay_at_equal_file_counts(spark: Any, tmp_path: Path) -> None:
    from lakelayout.evaluation.datasets import tpch_dataset
    from lakelayout.evaluation.replay import ReplayConfig, replay

    ds = tpch_dataset(spark, 0.005, tmp_path, batches=2)
    queries = wl.generate(wl.TPCH_TEMPLATES, 4, seed=3, shape="drift", segment_length=2)
    names = ["none", "zorder-halfway", "delta-zorder", "liquid", "delta-liquid"]
    config = ReplayConfig(
        mode="logical",
        rows_per_file=1_000,
        sample_rows=4_000,
        full_scans=1,
        warmup=False,  # correctness here; warm-up and re-timing: test_replay_order
        retime=False,
    )
    result = replay(make_policies(names), ds, queries, tmp_path / "logical", config, spark=spark)
    runs = {r["policy"]: r for r in result["runs"]}
    inserted = runs["none"]["totals"]["final_files"]
    assert inserted >= 10
    for name, run in runs.items():
        totals = run["totals"]
        assert totals["final_rows"] == ds.rows, name
        assert abs(totals["final_files"] - inserted) <= FILE_COUNT_TOLERANCE * inserted, name
    # Delta's ZORDER BY ran once, halfway, on zorder-halfway's columns, over the whole table
    (zorder,) = runs["delta-zorder"]["rewrites"]
    assert zorder["kind"] == "delta zorder" and zorder["rows_written"] == ds.rows
    assert zorder["position"] == runs["zorder-halfway"]["rewrites"][0]["position"]
    ours = runs["zorder-halfway"]["description"].split("(")[1].split(")")[0]
    assert ours in runs["delta-zorder"]["description"]
    history = _history(spark, str(tmp_path / "logical" / "tables" / "delta-zorder"))
    optimized = [h for h in history if h["operation"] == "OPTIMIZE"]
    assert len(optimized) == 1
    zcols = json.loads(optimized[0]["operationParameters"]["zOrderBy"])
    assert ", ".join(zcols) == ours
    # Delta's liquid clustering: created by Delta, OPTIMIZE after each insert, same columns
    liquid = runs["delta-liquid"]
    assert [r["kind"] for r in liquid["rewrites"]] == ["delta optimize"] * ds.batches
    detail = _detail(spark, str(tmp_path / "logical" / "tables" / "delta-liquid"))
    cols = runs["liquid"]["description"].split("(")[1].split(")")[0]
    assert ", ".join(detail["clusteringColumns"]) == cols
    assert "clustering" in detail["tableFeatures"]
    # lakelayout scanning the files Delta's liquid clustering wrote returns exactly the rows
    # Delta's own reader matches (Delta's ZORDER BY files: tests/delta_connector/
    # test_lakelayout_tables.py); a spark-mode replay would rebuild the same table to check it
    path = str(tmp_path / "logical" / "tables" / "delta-liquid")
    table, delta = Table(path, spark=spark), spark.read.format("delta").load(path)
    counts, skipped = [], []
    for q in queries:
        scan = table.scan(q.sql)
        counts.append(scan.df.count())
        assert counts[-1] == delta.where(q.sql).count(), q.sql
        skipped.append(scan.report.files_total - scan.report.files_kept)
    assert sum(counts) > 0 and max(skipped) > 0, (counts, skipped)
