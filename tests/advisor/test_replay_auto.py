"""The ``auto`` replay policy: learns only from its own table's query log."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from lakelayout.advisor.advisor import DEFAULT_WINDOW
from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.advisor.querylog import QueryLog
from lakelayout.api import Table
from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import logs_dataset
from lakelayout.evaluation.policies import AutoPolicy, make_policies, policy_label
from lakelayout.evaluation.replay import ReplayConfig, replay
from lakelayout.evaluation.workloads import Query

pytestmark = pytest.mark.spark

CHEAP = dataclasses.replace(
    DEFAULTS, rewrite_fixed_seconds=0.01, rewrite_per_file_seconds=0.0, query_seconds_per_byte=1e-5
)


@dataclasses.dataclass
class _Blind:
    """A context that refuses to show the workload: the policy must not need it."""

    table: Table
    position: int = 0
    rewrites: list[str] = dataclasses.field(default_factory=list)
    overheads: list[tuple[str, float]] = dataclasses.field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        if name in ("workload", "seen", "sample", "predicates", "queries_total"):
            raise AssertionError(f"the auto policy looked at ctx.{name}")
        raise AttributeError(name)

    def rewrite(self, kind: str, action: Callable[[], OptimizeMetrics]) -> None:
        action()
        self.rewrites.append(kind)

    def record_overhead(self, kind: str, seconds: float) -> None:
        self.overheads.append((kind, seconds))


def test_auto_learns_from_its_own_log_only(spark: Any, tmp_path: Path) -> None:
    ds = logs_dataset(spark, 8_000, tmp_path, batches=2, seed=3)
    queries: Sequence[Query] = wl.generate(
        {"window": wl.LOGS_TEMPLATES["window"]}, 12, seed=2, shape="mixed"
    )
    table = Table.create(str(tmp_path / "t"), ds.batch(spark, 0, 1000), spark=spark,
                         target_file_size=1 << 30)  # fmt: skip
    table.indexes.register_udfs(ds.udfs, return_types=ds.udf_types)
    average = table.snapshot().files.total_bytes // len(table.snapshot().files)
    from lakelayout.table import delta

    delta.set_properties(table.uri, {"lakelayout.targetFileSize": str(average)})
    ctx = _Blind(table)
    policy = AutoPolicy(model=CHEAP, recheck=5)
    policy.on_insert(ctx, [])  # nothing logged yet: nothing to learn from, nothing asked
    assert policy.decisions == [] and ctx.overheads == []
    for q in queries:  # logical mode: the policy logs what it is told ran
        policy.may_reorganize(ctx)
        policy.on_query(ctx, q)
    log = QueryLog(table.uri).read()
    assert log.num_rows == 12 and set(log["source"].to_pylist()) == {"replay"}
    assert ctx.rewrites and ctx.rewrites[0].startswith("auto ")
    # the policy decides over the window a table gets outside the replay, unless told
    assert table.advisor.window == DEFAULT_WINDOW and policy.window is None
    assert {kind for kind, _ in ctx.overheads} == {"advisor log", "advisor decision"}
    assert policy.overhead_seconds == 0.0  # all handed to ctx.record_overhead
    assert sum(s for _, s in ctx.overheads) == pytest.approx(
        sum(s for _, _, s in policy.overhead_events)
    )
    assert "rewrites: " in policy.description and "after" in policy.description
    # in spark mode the scan itself logs: the policy does not log twice
    before = QueryLog(table.uri).read().num_rows
    policy.may_reorganize(ctx)
    table.scan(queries[0].sql)
    policy.on_query(ctx, queries[0])
    assert QueryLog(table.uri).read().num_rows == before + 1


def test_auto_in_a_replay_is_labelled_and_counts_its_time(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no calibration: defaults
    ds = logs_dataset(spark, 6_000, tmp_path, batches=2, seed=3)
    queries = wl.generate(wl.LOGS_TEMPLATES, 12, seed=2, shape="drift", segment_length=3)
    config = ReplayConfig(
        mode="logical", rows_per_file=1_000, sample_rows=2_000, full_scans=1, warmup=False
    )
    none, auto, breakeven = make_policies(["none", "auto", "auto-breakeven"])
    assert isinstance(auto, AutoPolicy) and isinstance(breakeven, AutoPolicy)
    results = replay([none, auto, breakeven], ds, queries, tmp_path / "r", config, spark=spark)
    run = results["runs"][1]
    assert run["policy"] == "auto" and run["rewrites"] == []  # a tiny table: never pays
    assert "defaults cost model" in run["description"] and "rewrites: none" in run["description"]
    # the replay context takes the advisor's time: it is in the run's totals, not left over
    assert auto.overhead_seconds == 0.0
    assert run["totals"]["overhead_seconds"] == pytest.approx(
        sum(s for _, _, s in auto.overhead_events)
    )
    assert run["totals"]["overhead_seconds"] > 0
    assert auto.decisions and all("no rewrite: " in d for d in auto.decisions)
    # the same decisions with margin 1 (auto-breakeven): each one priced with its own margin
    assert results["runs"][2]["policy"] == "auto-breakeven"
    assert results["runs"][2]["rewrites"] == []  # even at margin 1 a tiny table never pays
    priced = [(a, b) for a, b in zip(auto.decisions, breakeven.decisions, strict=True) if "×" in a]
    assert priced and all(a.endswith("× 1.5") and b.endswith("× 1") for a, b in priced), priced
    assert policy_label("auto") == "auto" and policy_label("pando") == "pando (oracle)"
