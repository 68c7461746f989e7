"""The replay's online policies (oreo, greedy, regret) and oracles (static, offline-optimal)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lakelayout.errors import InvalidOption
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import taxi_dataset
from lakelayout.evaluation.online_report import online_rows
from lakelayout.evaluation.policies import OnlineSettings, make_policies, shared
from lakelayout.evaluation.replay import ReplayConfig, replay
from lakelayout.online.engine import make_decider
from lakelayout.online_table import alpha_per_scan_bytes

NAMES = ["oreo", "greedy", "regret", "static", "offline-optimal"]


def test_online_settings_and_names_are_checked_before_anything_runs() -> None:
    with pytest.raises(InvalidOption, match="unknown policy 'oreoo' Did you mean 'oreo'"):
        make_policies(["oreoo"])
    with pytest.raises(InvalidOption, match="alpha must be a number > 0 or 'measured'"):
        OnlineSettings(alpha="auto")
    with pytest.raises(InvalidOption, match="epsilon must be >= 0 and <= 1"):
        OnlineSettings(epsilon=2.0)
    with pytest.raises(InvalidOption, match="unknown layout family 'zorder'"):
        OnlineSettings(families=("zorder",))
    policies = make_policies(NAMES, OnlineSettings(alpha=5.0))
    assert [p.name for p in policies] == NAMES
    assert [p.knows for p in policies] == ["online"] * 3 + ["oracle"] * 2


def test_oreo_uniform_is_oreo_with_the_uniform_draw_whatever_the_runs_gamma() -> None:
    uniform, oreo = make_policies(["oreo-uniform", "oreo"], OnlineSettings(alpha=5.0, gamma=1.0))
    assert (uniform.name, uniform.kind, uniform.knows) == ("oreo-uniform", "oreo", "online")
    assert (oreo.name, oreo.kind) == ("oreo", "oreo")
    assert uniform.settings.config("oreo", 5.0).gamma == 0.0  # type: ignore[attr-defined]
    assert oreo.settings.config("oreo", 5.0).gamma == 1.0  # type: ignore[attr-defined]
    assert uniform.settings.window == oreo.settings.window  # type: ignore[attr-defined]


def test_oreo_recent_is_oreo_whose_predictor_reads_the_window() -> None:
    (recent,) = make_policies(["oreo-recent"], OnlineSettings(alpha=5.0, gamma=2.0, window=50))
    assert (recent.name, recent.kind, recent.knows) == ("oreo-recent", "oreo", "online")
    config = recent.settings.config("oreo", 5.0)  # type: ignore[attr-defined]
    assert (config.predictor, config.gamma, config.window) == ("recent", 2.0, 50)
    decider = make_decider(config, ["a", "b"], "a")
    assert (decider.predictor, decider.recent) == ("recent", 50)  # type: ignore[union-attr]
    assert not decider.mid_phase_join  # type: ignore[union-attr]
    joining = OnlineSettings(alpha=5.0, mid_phase_join=True).config("oreo", 5.0)
    assert make_decider(joining, ["a", "b"], "a").mid_phase_join  # type: ignore[union-attr]
    with pytest.raises(InvalidOption, match="mid_phase_join must be true or false, got 'yes'"):
        OnlineSettings(mid_phase_join="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="unknown predictor 'last'"):
        OnlineSettings(predictor="last")


def test_oreo_recent_all_files_differs_from_oreo_recent_only_in_what_a_switch_keeps() -> None:
    recent, every = make_policies(
        ["oreo-recent", "oreo-recent-all-files"], OnlineSettings(alpha=5.0, gamma=2.0)
    )
    assert (every.name, every.kind, every.knows) == ("oreo-recent-all-files", "oreo", "online")
    assert recent.settings.keep_files and not every.settings.keep_files  # type: ignore[attr-defined]
    assert every.settings.config("oreo", 5.0) == recent.settings.config("oreo", 5.0)  # type: ignore[attr-defined]


def test_oreo_recent_no_catch_up_differs_from_oreo_recent_only_in_catch_ups() -> None:
    recent, without = make_policies(
        ["oreo-recent", "oreo-recent-no-catch-up"], OnlineSettings(alpha=5.0, gamma=2.0)
    )
    assert (without.name, without.knows) == ("oreo-recent-no-catch-up", "online")
    mine = recent.settings.config("oreo", 5.0)  # type: ignore[attr-defined]
    theirs = without.settings.config("oreo", 5.0)  # type: ignore[attr-defined]
    assert mine.catch_up and not theirs.catch_up
    assert dataclasses.replace(theirs, catch_up=True) == mine


def test_a_measured_alpha_is_in_units_of_a_full_scan_s_bytes_not_its_fixed_overhead() -> None:
    # the decisions price a query by the bytes it reads; the fixed part of a scan is paid
    # by every layout alike, so α divides the rewrite by the full scan less that part
    alpha, unit = alpha_per_scan_bytes(5.0, 0.3, 0.05)
    assert alpha == pytest.approx(20.0)
    assert unit == "full scan 0.300 s less the fixed 0.050 s a query pays"
    # not measured (logical mode), or not below the full scan: the full scan as it is
    for fixed in (0.0, 0.3, 0.4):
        alpha, unit = alpha_per_scan_bytes(5.0, 0.25, fixed)
        assert alpha == pytest.approx(20.0)
        assert unit == "full scan 0.250 s"


def test_shared_results_are_made_once_per_memo() -> None:
    calls: list[str] = []

    def make(key: str) -> int:
        calls.append(key)
        return len(calls)

    ctx = SimpleNamespace(memo={})
    assert shared(ctx, "a", lambda: make("a")) == 1  # type: ignore[arg-type]
    assert shared(ctx, "a", lambda: make("a")) == 1  # type: ignore[arg-type]
    assert shared(ctx, "b", lambda: make("b")) == 2  # type: ignore[arg-type]
    assert calls == ["a", "b"]
    # a context that shares nothing makes it every time
    assert shared(object(), "a", lambda: make("a")) == 3  # type: ignore[arg-type]
    assert shared(object(), "a", lambda: make("a")) == 4  # type: ignore[arg-type]


@pytest.mark.spark
def test_a_drifting_replay_under_the_online_policies_and_oracles(
    spark: Any, tmp_path: Path
) -> None:
    ds = taxi_dataset(spark, 8_000, tmp_path, batches=1, seed=4)
    queries = wl.generate(
        wl.TAXI_TEMPLATES, 60, seed=3, shape="drift", segment_length=20,
        names=["distance", "window", "duration"],
    )  # fmt: skip
    assert len(wl.switches(queries)) == 2
    settings = OnlineSettings(alpha=4.0, window=20, interval=10, families=("qdtree",))
    # rewrites charged as OReO's simulation charges them: α full scans per table rewritten
    config = ReplayConfig(
        mode="logical", rows_per_file=1_000, sample_rows=3_000, full_scans=1, warmup=False,
        rewrite_alpha=4.0,
    )  # fmt: skip
    results = replay(
        make_policies(NAMES, settings), ds, queries, tmp_path / "r", config, spark=spark
    )
    runs = {r["policy"]: r for r in results["runs"]}
    full = results["full_scan_seconds"]
    for name, run in runs.items():
        assert run["totals"]["final_rows"] == 8_000, name  # no row lost or duplicated
        assert len(run["queries"]) == 60
        # one insert: every rewrite replaces the whole table and costs α full scans; the
        # seconds it took are kept beside
        assert run["rewrites"], name
        assert all(r["cost_seconds"] == pytest.approx(4.0 * full) for r in run["rewrites"]), name
        totals = run["totals"]
        assert totals["rewrite_seconds"] == pytest.approx(4.0 * full * len(run["rewrites"]))
        assert totals["rewrite_seconds_measured"] == pytest.approx(
            sum(r["seconds"] for r in run["rewrites"])
        )
    rows = {r["policy"]: r for r in online_rows(results)}
    assert {n: rows[n]["knows"] for n in NAMES} == {
        "oreo": "online",
        "greedy": "online",
        "regret": "online",
        "static": "oracle",
        "offline-optimal": "oracle",
    }
    for name in ("oreo", "greedy", "regret"):
        assert runs[name]["description"].startswith("[online]")
        assert "α=4.0 (given)" in runs[name]["description"]
        kinds = [r["kind"] for r in runs[name]["rewrites"]]
        assert all(k.startswith("switch to ") for k in kinds)
        assert rows[name]["switches"] == len(kinds)
    # the online policies follow the drift: at least one switch each to a fitted layout
    assert rows["oreo"]["switches"] >= 1 and rows["greedy"]["switches"] >= 1
    static = runs["static"]
    assert static["description"].startswith("[oracle] best single layout")
    assert [r["kind"].split()[0] for r in static["rewrites"]] == ["apply"]  # laid out once
    optimal = runs["offline-optimal"]
    assert optimal["description"].startswith("[oracle] exact DP over")
    planned = int(optimal["description"].split(" planned switches")[0].rsplit(", ", 1)[1])
    # both oracles chose among the same candidates (fitted and priced once, shared)
    n_static = static["description"].split(" candidates")[0].rsplit("of ", 1)[1]
    n_optimal = optimal["description"].split(" candidate layouts")[0].rsplit("over ", 1)[1]
    assert n_static == n_optimal and int(n_static) >= 1
    assert static["totals"]["fit_seconds"] == optimal["totals"]["fit_seconds"] > 0
    assert rows["offline-optimal"]["switches"] == planned
    assert all(r["rewrite_scans"] == pytest.approx(4.0 * r["rewrites"]) for r in rows.values())
    # the online policies' own time is in their totals (an audit: it was in none); each is
    # charged every window fit it used, whichever policy made it first (the fits are shared)
    fits = {}
    for name in ("oreo", "greedy", "regret"):
        overheads = runs[name]["overheads"]
        kinds = {o["kind"] for o in overheads}
        assert {"online start", "online observe", "online decision", "online fit"} <= kinds
        fits[name] = sum(o["seconds"] for o in overheads if o["kind"] == "online fit")
        deciding = runs[name]["totals"]["overhead_seconds"]
        assert deciding == pytest.approx(sum(o["seconds"] for o in overheads)) and deciding > 0
        spent = runs[name]["totals"]
        assert rows[name]["total_seconds"] == pytest.approx(
            spent["query_cost_seconds"] + spent["rewrite_seconds"] + deciding
        )
    assert fits["oreo"] == pytest.approx(fits["greedy"]) == pytest.approx(fits["regret"])
    assert fits["oreo"] > 0
    assert not runs["static"]["overheads"] and rows["static"]["deciding_scans"] == 0
    assert rows["static"]["static_over_this"] == pytest.approx(1.0)
    assert rows["offline-optimal"]["this_over_optimal"] == pytest.approx(1.0)


#: what a query record holds from counting its matching rows (``count_every``)
COUNTS = ("rows_matching", "files_relevant", "rows_in_relevant_files")


def _counts(run: dict[str, Any]) -> dict[int, tuple[int, ...] | None]:
    """Per query (``i``) of one policy's run: its counts, None where the replay did not count."""
    out: dict[int, tuple[int, ...] | None] = {}
    for q in run["queries"]:
        values = tuple(q[k] for k in COUNTS)
        assert all(v is None for v in values) or all(v is not None for v in values)
        out[q["i"]] = None if values[0] is None else values
    return out


def _outcome(results: dict[str, Any]) -> dict[str, Any]:
    """What a logical replay decides and measures, without its timings (which differ
    from run to run) and file names (random)."""
    out: dict[str, Any] = {"switches": results["switches"]}
    for run in results["runs"]:
        queries = [
            {k: v for k, v in q.items() if k not in ("cost_seconds", "seconds", "slot", *COUNTS)}
            for q in run["queries"]
        ]
        rewrites = [
            {k: v for k, v in r.items() if k not in ("seconds", "alpha", "slot")}
            for r in run["rewrites"]
        ]
        totals = {k: v for k, v in run["totals"].items() if k.startswith("final_")}
        out[run["policy"]] = {"queries": queries, "rewrites": rewrites, "totals": totals}
    return out


@pytest.mark.spark
def test_reused_snapshots_give_the_results_of_fresh_ones(spark: Any, tmp_path: Path) -> None:
    """The replay reuses a table's snapshot until its next commit: inserts mid-stream and
    switches must show in the very next query, exactly as when every query reads the log."""
    ds = taxi_dataset(spark, 3_000, tmp_path, batches=2, seed=5)
    queries = wl.generate(
        wl.TAXI_TEMPLATES, 40, seed=3, shape="drift", segment_length=20,
        names=["distance", "window"],
    )  # fmt: skip
    settings = OnlineSettings(alpha=2.0, window=20, interval=10, families=("qdtree",))
    # the two policies that switch during the stream (the oracles decide before it)
    names = ["oreo", "greedy"]
    outcomes, counts = [], []
    for reuse in (True, False):
        # the run reading the log at every ask also counts matching rows of every third
        # query only: counting must not change a decision or a cost either
        config = ReplayConfig(
            mode="logical", rows_per_file=500, sample_rows=3_000, full_scans=1,
            warmup=False, reuse_snapshots=reuse, count_every=1 if reuse else 3,
        )  # fmt: skip
        results = replay(
            make_policies(names, settings), ds, queries, tmp_path / f"r{reuse}", config,
            spark=spark,
        )  # fmt: skip
        outcomes.append(_outcome(results))
        counts.append({r["policy"]: _counts(r) for r in results["runs"]})
    reused, fresh = outcomes
    for name in names:
        assert reused[name] == fresh[name], name
    assert reused == fresh
    every, third = counts
    for name in names:
        assert set(every[name]) == set(third[name]) == {q.i for q in queries}
        assert all(c is not None for c in every[name].values()), name
        for i, sampled in third[name].items():
            assert sampled == (every[name][i] if i % 3 == 0 else None), (name, i)
        assert any(c is not None and c[0] > 0 for c in third[name].values()), name
    # the comparison saw the table change mid-stream: the second insert and switches
    # (rewrites during the stream) under the online policies, each read at a new version
    for name in ("oreo", "greedy"):
        during = [r for r in reused[name]["rewrites"] if r["position"] > 0]
        assert during, name
        versions = [q["version"] for q in reused[name]["queries"]]
        assert versions == sorted(versions) and len(set(versions)) >= 3, name


def test_inserts_after_a_switch_are_laid_out_by_a_catch_up_in_the_replay_too(
    spark: Any, tmp_path: Path
) -> None:
    ds = taxi_dataset(spark, 3_000, tmp_path, batches=3, seed=5)
    queries = wl.generate(
        wl.TAXI_TEMPLATES, 60, seed=3, shape="drift", segment_length=60, names=["distance"]
    )
    config = ReplayConfig(
        mode="logical", rows_per_file=500, sample_rows=3_000, full_scans=1, warmup=False,
        rewrite_alpha=2.0,
    )  # fmt: skip
    runs = {}
    for catch_up in (True, False):
        settings = OnlineSettings(
            alpha=2.0, window=20, interval=10, families=("qdtree",), catch_up=catch_up
        )
        results = replay(
            make_policies(["regret"], settings), ds, queries, tmp_path / f"c{catch_up}", config,
            spark=spark,
        )  # fmt: skip
        runs[catch_up] = results["runs"][0]
    kinds = [r["kind"] for r in runs[True]["rewrites"]]
    caught = [r for r in runs[True]["rewrites"] if r["kind"].startswith("catch-up in")]
    assert caught, kinds
    assert not any(k.startswith("catch-up") for k in (r["kind"] for r in runs[False]["rewrites"]))
    # each after a switch (the table's layout exists) and charged α × the share it rewrote
    first_switch = kinds.index(next(k for k in kinds if k.startswith("switch to")))
    assert kinds.index(caught[0]["kind"]) > first_switch
    for r in caught:
        assert r["bytes_removed"] > 0 and r["cost_seconds"] > 0
    assert "catch-ups" in runs[True]["description"]
    rows = online_rows({"runs": [runs[True]], "full_scan_seconds": 1.0, "mode": "logical"})
    assert rows[0]["catch_ups"] == len(caught)


def test_fit_before_draw_is_oreo_s_and_needs_the_mid_phase_join() -> None:
    settings = OnlineSettings(alpha=5.0, mid_phase_join=True, fit_before_draw=True)
    assert settings.config("oreo", 5.0).fit_before_draw
    # the baselines never draw: their early rounds would only be extra fits
    assert not settings.config("greedy", 5.0).fit_before_draw
    assert not settings.config("regret", 5.0).fit_before_draw
    with pytest.raises(InvalidOption, match="fit_before_draw needs policy 'oreo' with mid_phase"):
        OnlineSettings(alpha=5.0, fit_before_draw=True)
    with pytest.raises(InvalidOption, match="fit_before_draw must be true or false, got 1"):
        OnlineSettings(alpha=5.0, mid_phase_join=True, fit_before_draw=1)  # type: ignore[arg-type]


def test_the_recent_predictor_averages_over_its_own_window_when_given() -> None:
    plain = OnlineSettings(alpha=5.0, predictor="recent", window=200).config("oreo", 5.0)
    assert make_decider(plain, ["a", "b"], "a").recent == 200  # type: ignore[union-attr]
    short = OnlineSettings(alpha=5.0, predictor="recent", window=200, predictor_window=25)
    decider = make_decider(short.config("oreo", 5.0), ["a", "b"], "a")
    assert decider.recent == 25  # type: ignore[union-attr]
    # its weights come from the last 25 queries: 25 cheap ones outweigh 175 dear ones
    for k in range(200):
        cost = 1.0 if k < 175 else 0.0
        decider.observe({"a": 0.5, "b": cost})
    assert decider._recent_weights() == {"a": 0.5, "b": 1.0}  # type: ignore[union-attr]
    with pytest.raises(InvalidOption, match=r"predictor_window must be >= 0 queries \(0: the"):
        OnlineSettings(predictor_window=-1)


def test_the_predictor_weight_reaches_the_decider_and_the_description() -> None:
    (plain,) = make_policies(["oreo-recent"], OnlineSettings(alpha=5.0, gamma=2.0))
    (inverse,) = make_policies(
        ["oreo-recent"], OnlineSettings(alpha=5.0, gamma=2.0, predictor_weight="inverse")
    )
    for policy, weight in ((plain, "skipped"), (inverse, "inverse")):
        config = policy.settings.config("oreo", 5.0)  # type: ignore[attr-defined]
        assert make_decider(config, ["a", "b"], "a").weight == weight  # type: ignore[union-attr]
    with pytest.raises(InvalidOption, match="unknown predictor weight 'ratio'"):
        OnlineSettings(predictor_weight="ratio")


@pytest.mark.spark
def test_a_replay_switch_writes_its_files_as_a_live_switch_does(spark: Any, tmp_path: Path) -> None:
    """A block up to twice the table's target file size is one file; a leaf no query cuts
    is cut into several, as ``Table.online`` and the advisor write it
    (``split_blocks=False``, the ``oreo-recent-per-block`` comparison: one file per block)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakelayout.api import Table
    from lakelayout.cluster.config import TARGET_FILE_SIZE
    from lakelayout.evaluation.policies import _rewrite_to
    from lakelayout.layouts.qdtree import QdTreeLayout
    from lakelayout.table import delta

    n = 8_000
    rows = pa.table({"id": pa.array(range(n), pa.int64()), "x": pa.array(range(n), pa.int64())})
    # two cuts near the low end (leaves of at least n / 16 rows): the third leaf holds
    # seven eighths of the rows
    layout = QdTreeLayout.fit(rows, ["x < 500", "x < 1000"], target_blocks=8)
    counts = np.bincount(layout.assign(rows), minlength=layout.n_blocks)
    assert layout.n_blocks == 3 and counts.max() == 7_000

    def switched(name: str, split_blocks: bool) -> tuple[Table, int]:
        df = spark.createDataFrame(rows.to_pandas()).repartition(8)
        t = Table.create(str(tmp_path / name), df)
        average = int(t.snapshot().files.total_bytes) // len(t.snapshot().files)
        delta.set_properties(t.uri, {TARGET_FILE_SIZE: str(average)})
        ctx = SimpleNamespace(table=t, rewrite=lambda kind, action: action())
        _rewrite_to(ctx, layout, "qdtree", split_blocks=split_blocks)  # type: ignore[arg-type]
        assert sorted(t.to_df().toArrow().column("id").to_pylist()) == list(range(n))
        for path in t.snapshot().files.paths:  # each file in one block
            local = os.path.join(t.uri.removeprefix("file://"), str(path))
            assert len(set(layout.assign(pq.read_table(local)).tolist())) == 1
        return t, average

    t, average = switched("split", True)
    files = t.snapshot().files
    # the two small leaves one file each, the big one several of at most about twice the target
    assert len(files) >= layout.n_blocks + 2
    assert max(int(s) for s in files.sizes) < 3 * average
    assert t.scan("x < 500", columns=["id"]).report.files_kept == 1
    per_block, average = switched("per-block", False)
    assert len(per_block.snapshot().files) == layout.n_blocks
    assert max(int(s) for s in per_block.snapshot().files.sizes) > 4 * average


def test_oreo_recent_per_block_differs_from_oreo_recent_only_in_how_a_switch_writes() -> None:
    recent, per_block = make_policies(
        ["oreo-recent", "oreo-recent-per-block"], OnlineSettings(alpha=5.0, gamma=2.0)
    )
    assert (per_block.name, per_block.kind, per_block.knows) == (
        "oreo-recent-per-block",
        "oreo",
        "online",
    )
    settings = per_block.settings  # type: ignore[attr-defined]
    assert recent.settings.split_blocks and not settings.split_blocks  # type: ignore[attr-defined]
    assert dataclasses.replace(settings, split_blocks=True) == recent.settings  # type: ignore[attr-defined]
