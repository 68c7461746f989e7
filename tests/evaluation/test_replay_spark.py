"""Spark accepts every generated predicate; logical and spark replays agree; the planner changed no result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.cluster.logical import layout_blocks
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import logs_dataset, tpch_denormalized, tpchgen
from lakelayout.evaluation.policies import Policy, make_policies
from lakelayout.evaluation.replay import ReplayConfig, replay
from lakelayout.expr.nodes import BoolConst
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.clauses import evaluate as evaluate_clause
from lakelayout.skipping.clauses import generate
from lakelayout.skipping.indexes import expand_within_box
from lakelayout.skipping.planner import MINMAX, StatsLabeller, labels_some_node, relax
from lakelayout.skipping.stats_rules import might_match

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
        # no warm-up (tests/evaluation/test_replay_order.py checks it); the re-timing stays:
        # here it re-times queries on an indexed table at the versions they ran on
        config = ReplayConfig(
            mode=mode, rows_per_file=1_000, sample_rows=2_000, full_scans=1, warmup=False
        )
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

    # every third query timed (the same ones under every policy): a query in between costs
    # what its policy's last timed query took, and only timed queries are re-timed
    config = ReplayConfig(
        mode="spark", rows_per_file=1_000, sample_rows=2_000, full_scans=1, warmup=False,
        time_every=3, zero_file_scans=1,
    )  # fmt: skip
    sampled = replay(
        make_policies(["none"]), ds, queries, tmp_path / "sampled", config, spark=spark
    )
    assert sampled["config"]["time_every"] == 3
    for run in sampled["runs"]:
        qs = run["queries"]
        assert [q["i"] for q in qs] == list(range(len(queries)))
        assert [q["seconds"] is not None for q in qs] == [i % 3 == 0 for i in range(len(qs))]
        assert [q["cost_seconds"] for q in qs] == [qs[k - k % 3]["seconds"] for k in range(len(qs))]
        timed = [q for q in qs if q["seconds"] is not None]
        assert run["totals"]["query_cost_seconds"] == pytest.approx(
            3 * sum(q["seconds"] for q in timed)
        )
        assert all(q["rows_returned"] == q["rows_matching"] for q in timed)
        assert all(q["rows_returned"] is None for q in qs if q["seconds"] is None)
        assert run["totals"]["queries_retimed"] <= len(timed)
        assert all(q["seconds_retimed"] is None for q in qs if q["seconds"] is None)
        # pruning does not depend on what was timed
        full = real_runs[run["policy"]]["queries"]
        assert [q["files_kept"] for q in qs] == [q["files_kept"] for q in full]
    assert sampled["runs"][0]["totals"]["queries_retimed"] == 2  # `none` keeps its files


class _Checked(Policy):
    """A policy that, after every query, checks the plan against the hand-merged pipeline.

    Before the planner, a query's files were min/max, then the indexes merged
    with min/max (engine.prune), then the layouts' logical indexes
    (cluster.logical.prune), combined by hand; :func:`_merged_by_hand` redoes
    that from the same primitives. The logical replay's kept files are the
    plan's, so equal plans mean unchanged replay results.
    """

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.checked = 0
        self.mismatches: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def cluster_by(self, ctx: Any) -> Any:
        return self.inner.cluster_by(ctx)

    def prepare(self, ctx: Any) -> None:
        self.inner.prepare(ctx)

    def on_insert(self, ctx: Any, new_files: Any) -> None:
        self.inner.on_insert(ctx, new_files)

    def may_reorganize(self, ctx: Any) -> None:
        self.inner.may_reorganize(ctx)

    def on_query(self, ctx: Any, query: Any) -> None:
        table = ctx.table
        snap = table.snapshot()
        pred = parse_predicate(query.sql, snap.schema, functions=table.indexes.functions())
        planned = table.plan(pred, snapshot=snap, timezone="UTC")
        reference = _merged_by_hand(table, pred, snap)
        self.checked += 1
        if not np.array_equal(planned.keep, reference):
            self.mismatches.append(query.sql)
        self.inner.on_query(ctx, query)


def _merged_by_hand(table: Any, pred: Any, snap: Any) -> np.ndarray:
    expanded = expand_within_box(pred)
    files = snap.files
    keep = np.asarray(might_match(expanded, files), dtype=bool)
    indexes, _ = table.indexes.usable(snap.schema)
    relevant = [i for i in indexes if labels_some_node(i, expanded)]
    columns = table.indexes.store.read(files, [i.name for i in relevant]) if relevant else {}
    with_meta = [i for i in relevant if i.name in columns]
    if with_meta:
        merged = generate(expanded, [StatsLabeller(files), *with_meta])
        present = {MINMAX: None, **{k: pa.array(v) for k, v in columns.items()}}
        keep &= evaluate_clause(merged, present, len(files)) & (files.num_records != 0)
    for entry in layout_blocks(table.uri, files, snap.schema):
        relaxed = relax(expanded, entry.columns or frozenset())
        if relaxed == BoolConst(True):
            continue
        allowed = entry.layout.blocks_for(relaxed)
        if allowed is None:
            continue
        mine = (entry.blocks >= 0) & (entry.blocks < entry.layout.n_blocks)
        keep &= ~(mine & ~np.isin(entry.blocks, np.asarray(allowed)))
    return keep


def test_logical_replay_is_unchanged_by_the_planner(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = logs_dataset(spark, 4_000, tmp_path, batches=2, seed=4)
    assert ds.indexes  # the logs dataset declares skipping indexes: they take part
    queries = wl.generate(wl.LOGS_TEMPLATES, 8, seed=3, shape="mixed")
    policies = [_Checked(p) for p in make_policies(["none", "qdtree"])]
    config = ReplayConfig(
        mode="logical", rows_per_file=800, sample_rows=2_000, full_scans=1, warmup=False
    )
    out = replay(policies, ds, queries, tmp_path / "r", config, spark=spark)
    assert [len(run["queries"]) for run in out["runs"]] == [8, 8]
    assert all(p.checked == 8 for p in policies)
    assert [p.mismatches for p in policies] == [[], []]
    qd = out["runs"][1]["queries"]
    assert sum(q["files_total"] - q["files_kept"] for q in qd) > 0  # something was skipped
