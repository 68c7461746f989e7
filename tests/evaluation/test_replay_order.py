"""The replay's policy order decides nothing: policies advance in lockstep, in an order
rotated per event that does not depend on the order they were given; policy overhead
counts in the totals."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.errors import InvalidOption
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.metrics import OverheadRecord, PolicyRun, QueryRecord, cumulative_cost
from lakelayout.evaluation.policies import Context, Policy, make_policies
from lakelayout.evaluation.replay import (
    ReplayConfig,
    ReplayContext,
    replay,
    rotated_orders,
)
from lakelayout.evaluation.workloads import Query

# --------------------------------------------------------------------------- the rotation


@given(
    n=st.integers(1, 7),
    cycles=st.integers(1, 4),
    extra=st.integers(0, 6),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_rotation_puts_every_policy_in_every_place_once_per_cycle(
    n: int, cycles: int, extra: int, seed: int, data: st.DataObject
) -> None:
    names = [f"p{k}" for k in range(n)]
    given_order = data.draw(st.permutations(names))
    orders = rotated_orders(given_order, n * cycles + extra, seed)
    assert orders == rotated_orders(names, n * cycles + extra, seed)  # given order plays no part
    assert len(orders) == n * cycles + extra
    assert all(sorted(o) == names for o in orders)
    for c in range(cycles):
        block = orders[c * n : (c + 1) * n]
        for place in range(n):
            assert sorted(o[place] for o in block) == names


def test_rotation_changes_with_the_seed_and_the_neighbours_change_between_cycles() -> None:
    names = ["a", "b", "c", "d", "e"]
    by_seed = {tuple(map(tuple, rotated_orders(names, 50, seed))) for seed in range(4)}
    assert len(by_seed) == 4
    orders = rotated_orders(names, 50, 0)
    followers = {(o[k], o[(k + 1) % 5]) for o in orders for k in range(5)}
    assert len(followers) > 5  # a fixed cyclic order would only ever show 5 pairs


def test_rotation_of_no_policies_is_empty() -> None:
    assert rotated_orders([], 3, 0) == [[], [], []]


# --------------------------------------------------------------------------- overhead


def _context() -> ReplayContext:
    """A context outside a replay: record_overhead needs no Spark, table or data."""
    return ReplayContext(None, None, [], ReplayConfig(), 1, 1.0)  # type: ignore[arg-type]


def test_record_overhead_is_part_of_the_context_protocol_and_validated() -> None:
    assert "record_overhead" in dir(Context)
    ctx = _context()
    ctx.position, ctx.slot = 7, 2
    ctx.record_overhead("advisor", 0.5)
    ctx.record_overhead("decide", 0)
    assert ctx.overheads == [
        OverheadRecord(7, "advisor", 0.5, 2),
        OverheadRecord(7, "decide", 0.0, 2),
    ]
    with pytest.raises(
        InvalidOption, match=r"record_overhead\('advisor'\) needs finite seconds >= 0, got -1"
    ):
        ctx.record_overhead("advisor", -1)
    with pytest.raises(InvalidOption, match="got nan"):
        ctx.record_overhead("advisor", math.nan)
    with pytest.raises(InvalidOption, match="needs a non-empty kind, got ''"):
        ctx.record_overhead("", 1.0)
    assert len(ctx.overheads) == 2  # refused values leave no record


def test_replay_config_refuses_bad_sampling_and_rewrite_charges() -> None:
    for name in ("time_every", "count_every"):
        for bad in (0, -2, 1.5, True):
            with pytest.raises(InvalidOption, match=f"{name} must be an integer >= 1"):
                ReplayConfig(**{name: bad})
    with pytest.raises(InvalidOption, match="rewrite_alpha must be a number > 0, got 0"):
        ReplayConfig(rewrite_alpha=0)
    with pytest.raises(InvalidOption, match="logical mode only"):
        ReplayConfig(mode="spark", rewrite_alpha=5.0)
    assert ReplayConfig(count_every=4, time_every=3).count_every == 4


def test_a_query_not_counted_has_no_precision_indicators() -> None:
    counted = QueryRecord(0, 0, "t", 0, 1, 10, 4, 1000, 400, 100, 40, 10, 2, 20, None, None, 1.0)
    skipped = replace(
        counted, i=1, rows_matching=None, files_relevant=None, rows_in_relevant_files=None
    )
    assert (counted.sigma, counted.lam, counted.mu) == (0.1, 0.5, 0.5)
    assert (skipped.sigma, skipped.lam, skipped.mu) == (None, None, None)
    assert skipped.psi == counted.psi == 0.4  # what the metadata kept is known either way
    run = PolicyRun(policy="p", description="")
    run.queries = [counted, skipped]
    totals = run.totals()
    assert totals["queries"] == 2 and totals["queries_counted"] == 1
    assert totals["rows_matching"] == 10 and totals["rows_kept"] == 80
    assert totals["g_sigma"] == pytest.approx(0.1)
    assert PolicyRun.from_dict(run.to_dict()).totals() == totals


def test_overhead_counts_in_the_totals_and_the_cumulative_cost() -> None:
    run = PolicyRun(policy="auto", description="")
    run.overheads = [OverheadRecord(1, "advisor", 0.75, 0), OverheadRecord(3, "advisor", 0.5, 1)]
    t = run.totals()
    assert t["overhead_seconds"] == pytest.approx(1.25)
    assert t["overheads"] == 2
    assert t["total_cost_seconds"] == pytest.approx(1.25)  # no queries, no rewrites
    assert cumulative_cost(run, 5) == pytest.approx([0.0, 0.75, 0.75, 1.25, 1.25])
    assert t["mean_slot"] == pytest.approx(0.5)
    assert PolicyRun.from_dict(run.to_dict()).totals() == t


# --------------------------------------------------------------------------- lockstep replays


class Recorder(Policy):
    """A built-in policy, unchanged, that also logs every event the replay runs it for
    (position, name) and, when asked, records a fixed overhead after every insert."""

    def __init__(self, inner: Policy, log: list[tuple[int, str]], overhead: float = 0.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.log = log
        self.overhead = overhead

    @property
    def description(self) -> str:  # type: ignore[override]
        return self.inner.description

    @property
    def fit_seconds(self) -> float:
        return float(getattr(self.inner, "fit_seconds", 0.0))

    def cluster_by(self, ctx: Context) -> list[str] | None:
        return self.inner.cluster_by(ctx)

    def prepare(self, ctx: Context) -> None:
        self.inner.prepare(ctx)

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        self.log.append((ctx.position, self.name))  # type: ignore[attr-defined]
        self.inner.on_insert(ctx, new_files)
        if self.overhead:
            ctx.record_overhead("recorder", self.overhead)

    def may_reorganize(self, ctx: Context) -> None:
        self.inner.may_reorganize(ctx)

    def on_query(self, ctx: Context, query: Query) -> None:
        self.log.append((ctx.position, self.name))  # type: ignore[attr-defined]
        self.inner.on_query(ctx, query)


NAMES = ["none", "sorted", "zorder-halfway"]  # no rewrite; one per insert; one halfway
OVERHEAD = 0.25  # seconds the recorder around `sorted` reports after every insert


@pytest.mark.spark
def test_the_given_order_decides_nothing_in_a_spark_replay(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from lakelayout.evaluation.datasets import tpch_dataset

    ds = tpch_dataset(spark, 0.002, tmp_path / "data", batches=2)
    queries = wl.generate(wl.TPCH_TEMPLATES, 4, seed=3, shape="drift", segment_length=2)
    config = ReplayConfig(mode="spark", rows_per_file=1_000, sample_rows=4_000, full_scans=1,
                          zero_file_scans=2)  # fmt: skip
    # the second replay skips the warm-up and the re-timing (to keep the test short): neither
    # may change the schedule or what any policy reads and writes
    configs = {"given": config, "reversed": replace(config, warmup=False, retime=False)}
    out: dict[str, dict[str, Any]] = {}
    logs: dict[str, list[tuple[int, str]]] = {}
    for label, given_order in (("given", NAMES), ("reversed", NAMES[::-1])):
        log: list[tuple[int, str]] = []
        policies = [
            Recorder(p, log, OVERHEAD if p.name == "sorted" else 0.0)
            for p in make_policies(given_order)
        ]
        out[label] = replay(policies, ds, queries, tmp_path / label, configs[label], spark=spark)
        logs[label] = log
    events = out["given"]["events"]
    assert events == 2 + len(queries)
    orders = out["given"]["order"]["events"]

    for label, result in out.items():
        log = logs[label]
        # lockstep: every policy runs an event before any policy runs the next one
        assert [p for p, _ in log] == sorted(p for p, _ in log)
        assert len(log) == events * len(NAMES)
        # the order that ran is the order recorded, and the records' slots say the same
        assert [[n for p, n in log if p == position] for position in range(events)] == orders
        assert result["order"]["events"] == orders
        for run in result["runs"]:
            for record in (*run["queries"], *run["inserts"], *run["rewrites"]):
                assert orders[record["position"]][record["slot"]] == run["policy"]
        # the document keeps the policies in the order they were given
        assert [r["policy"] for r in result["runs"]] == (
            [*NAMES] if label == "given" else NAMES[::-1]
        )

    # the schedule does not depend on the order the policies were given ...
    assert logs["given"] == logs["reversed"]
    # ... and is balanced: over each full cycle every policy holds every place once
    n = len(NAMES)
    for c in range(events // n):
        for place in range(n):
            assert sorted(o[place] for o in orders[c * n : (c + 1) * n]) == sorted(NAMES)

    # what every policy read and wrote is the same whichever order it was given in
    given = {r["policy"]: r for r in out["given"]["runs"]}
    again = {r["policy"]: r for r in out["reversed"]["runs"]}
    fields = ("files_kept", "bytes_kept", "files_total", "rows_matching", "rows_returned")
    for name in NAMES:
        a, b = given[name], again[name]
        assert [[q[f] for f in fields] for q in a["queries"]] == [
            [q[f] for f in fields] for q in b["queries"]
        ], name
        for key in (
            "files_kept",
            "bytes_kept",
            "final_files",
            "final_bytes",
            "rewrite_bytes_written",
        ):
            assert a["totals"][key] == b["totals"][key], (name, key)
        assert [w["kind"] for w in a["rewrites"]] == [w["kind"] for w in b["rewrites"]]
        assert all(q["rows_returned"] == q["rows_matching"] for q in a["queries"])
    assert [len(given[n]["rewrites"]) for n in NAMES] == [0, 2, 1]
    assert given["sorted"]["totals"]["bytes_kept"] < given["none"]["totals"]["bytes_kept"]

    for result in out.values():
        runs = {r["policy"]: r for r in result["runs"]}
        # the recorder's overhead is part of its policy's total, and of no other
        sorted_totals = runs["sorted"]["totals"]
        assert sorted_totals["overhead_seconds"] == pytest.approx(2 * OVERHEAD)
        assert sorted_totals["total_cost_seconds"] == pytest.approx(
            sorted_totals["query_cost_seconds"] + sorted_totals["rewrite_seconds"] + 2 * OVERHEAD
        )
        assert runs["none"]["totals"]["overhead_seconds"] == 0

    first = out["given"]
    # every query was timed again after the stream, with the same files (no indexes here)
    assert first["retime"]["done"] is True
    for run in first["runs"]:
        t = run["totals"]
        assert t["queries_retimed"] == len(queries)
        assert all(q["seconds_retimed"] is not None for q in run["queries"])
        assert t["query_seconds_retimed"] == pytest.approx(
            sum(q["seconds_retimed"] for q in run["queries"])
        )
        assert t["query_seconds_compared"] == pytest.approx(t["query_seconds"])
    # the warm-up ran every query once; the zero-file scan kept nothing
    assert first["warmup"]["queries"] == len(queries)
    assert first["warmup"]["rewrite"]["files_added"] > 0
    zero = first["zero_file_scan"]
    assert zero["files_kept"] == 0 and zero["predicate"].endswith("IS NULL")
    assert len(zero["samples"]) == 2 and zero["seconds"] == statistics.median(zero["samples"])
    # without them: nothing re-timed, no warm-up, no fixed-overhead figure
    second = out["reversed"]
    assert second["retime"]["done"] is False and second["warmup"] is None
    assert second["zero_file_scan"] is None
    assert all(r["totals"]["queries_retimed"] == 0 for r in second["runs"])


def test_replay_refuses_repeated_policy_names_before_any_work(tmp_path: Path) -> None:
    policies = make_policies(["none", "sorted", "none"])
    with pytest.raises(InvalidOption, match="distinct names; repeated: none"):
        replay(policies, None, [Query(0, "t", "x = 1")], tmp_path, ReplayConfig(), spark=None)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())
