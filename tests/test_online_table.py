"""``Table.online`` on real local Delta tables: switches, appends, failures, restarts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakelayout import online_table
from lakelayout.api import Table
from lakelayout.cluster import OptimizeHooks
from lakelayout.cluster.config import TARGET_FILE_SIZE
from lakelayout.errors import InvalidOption, StateLocked, StateUnreadable
from lakelayout.table import delta

from . import processes
from .cluster.helpers import gen, live_paths, same_rows
from .processes import C1_ONLY

pytestmark = pytest.mark.spark

ROWS = 16_000
SETTINGS: dict[str, Any] = {
    "alpha": 2.0,
    "window": 20,
    "interval": 10,
    "max_states": 4,
    "families": ["qdtree"],
    "sample_rows": 2_000,
    "seed": 0,
}


def make_table(spark: Any, path: Path) -> Table:
    return Table.create(str(path), gen(spark, ROWS, seed=3, parts=8), spark=spark)


def queries(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"a >= {lo} AND a < {lo + 25}" for lo in rng.integers(0, 975, n)]


def scan_until_switch(t: Table, sqls: list[str]) -> int:
    """Scan until a rewrite starts (or the queries run out); how many scans ran."""
    for k, sql in enumerate(sqls, 1):
        t.scan(sql)
        if t.online.history():
            return k
    return len(sqls)


def test_a_switch_while_appends_run_loses_and_duplicates_no_row(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    assert t.online.status()["applied"] == "as-is"
    appended: list[Any] = []

    def append_before_commit(_: int) -> None:  # commits between the rewrite's read and commit
        # every rewrite commit (a switch's batches, a later catch-up) runs the hook: new ids each time
        df = gen(spark, 300, seed=11 + len(appended), parts=1, start=100_000 + 1000 * len(appended))
        Table(t.uri, spark=spark).append(df)
        appended.append(df)

    t.online.set_hooks(OptimizeHooks(before_commit=append_before_commit))
    ran = scan_until_switch(t, queries(60))
    assert ran < 60, "no switch was decided"
    # more appends and scans while the rewrite may still be running
    extra = [gen(spark, 200, seed=20 + k, parts=1, start=200_000 + 1000 * k) for k in range(3)]
    writer = threading.Thread(target=lambda: [Table(t.uri, spark=spark).append(d) for d in extra])
    writer.start()
    for sql in queries(5, seed=1):
        t.scan(sql)
    writer.join()
    assert t.online.wait(300)
    history = t.online.history()
    assert history[0]["status"] == "done", history[0]
    assert history[0]["source"] == "as-is" and history[0]["target_label"] == "qdtree"
    expected = gen(spark, ROWS, seed=3, parts=8)
    for df in appended + extra:
        expected = expected.unionByName(df)
    assert appended, "the hook did not run: the rewrite never reached its commit"
    actual = t.to_df()
    assert same_rows(actual, expected)
    assert actual.select("id").distinct().count() == actual.count()
    status = t.online.status()
    assert status["applied"] == history[0]["target"] and status["switches"] == 1
    assert "as-is" not in {s["id"] for s in status["states"]}  # cannot be rebuilt: removed


def test_a_switch_cuts_a_block_over_twice_the_target_file_size(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    files = t.snapshot().files
    average = int(files.total_bytes) // len(files)
    # candidates get about as many blocks as the table has files: each block holds about a
    # file's rows, four times the target set here
    delta.set_properties(t.uri, {TARGET_FILE_SIZE: str(max(1024, average // 4))})
    t.online.enable(**SETTINGS)
    assert scan_until_switch(t, queries(60)) < 60, "no switch was decided"
    assert t.online.wait(300)
    done = t.online.history()[0]
    assert done["status"] == "done", done
    states = {s["id"]: s for s in t.online.status()["states"]}
    blocks = states[done["target"]]["blocks"]
    assert blocks and done["files_added"] > blocks
    assert max(int(n) for n in t.snapshot().files.sizes) < average
    assert same_rows(t.to_df(), gen(spark, ROWS, seed=3, parts=8))


def _blocks_per_file(t: Table, layout: Any) -> dict[str, list[int]]:
    """Per live file: the distinct blocks of ``layout`` its rows are assigned to."""
    import pyarrow.parquet as pq

    out = {}
    for path in live_paths(t):
        local = path if os.path.isabs(path) else os.path.join(t.uri.removeprefix("file://"), path)
        out[path] = sorted({int(b) for b in layout.assign(pq.read_table(local))})
    return out


def _recorded_blocks(t: Table) -> dict[str, int]:
    """Per live file: the block its provenance records for the layout it names (-1: none),
    as query-time block pruning reads it."""
    from lakelayout.cluster.logical import layout_blocks

    snap = t.snapshot()
    out = {str(p): -1 for p in snap.files.paths}
    for entry in layout_blocks(t.uri, snap.files, snap.schema):
        for path, block in zip(snap.files.paths, entry.blocks.tolist(), strict=True):
            if block >= 0:
                out[str(path)] = int(block)
    return out


def _switch_by_lows(t: Table, layout: Any) -> tuple[list[tuple[int, bool]], set[str]]:
    """Which files a switch to ``layout`` rewrites, as (lowest ``a``, rewritten?) sorted by
    ``a``; then that switch (``apply`` on those files, the others kept and recorded as the
    blocks they were placed in); the paths it kept."""
    snap = t.snapshot()
    rewrite, keep = online_table.plan_switch(t.uri, snap.files, layout)
    lows = [int(v) for v in snap.files.column("a").min.to_pylist()]
    kept = {str(p) for p, r in zip(snap.files.paths, rewrite, strict=True) if not r}
    assert set(keep) <= kept  # the others were written by ``layout`` itself
    moved = [str(p) for p, r in zip(snap.files.paths, rewrite, strict=True) if r]
    t.optimize.apply(layout, moved, one_file_per_block=True, keep=keep)
    # every live file is now recorded as laid out by ``layout``, in the block all its rows
    # are in: the kept ones as placed, the written ones as routed
    assert online_table.laid_out_by(t.uri, t.snapshot().files, layout).all()
    recorded = _recorded_blocks(t)
    assert {p: [b] for p, b in recorded.items()} == _blocks_per_file(t, layout)
    return sorted(zip(lows, rewrite.tolist(), strict=True)), kept


def test_a_switch_rewrites_only_the_files_its_blocks_change(spark: Any, tmp_path: Path) -> None:
    from lakelayout.layouts import QdTreeLayout

    t = make_table(spark, tmp_path / "t")
    sample = t.to_df().toArrow()

    def tree(cuts: list[str]) -> QdTreeLayout:
        return QdTreeLayout.fit(sample, cuts, rows_per_block=1000)

    t.optimize.apply(tree(["a < 300", "a < 600"]), one_file_per_block=True)
    assert len(live_paths(t)) == 3  # a in [0,300), [300,600), [600,1000)
    second = tree(["a < 600", "a < 450"])  # blocks [0,450), [450,600), [600,1000)
    # [0,300) and [600,1000) lie in one block each and hold 30 % and 40 % of the rows, over
    # half an average block (a sixth of the table)
    decided, kept = _switch_by_lows(t, second)
    assert decided == [(0, False), (300, True), (600, False)]
    assert len(live_paths(t)) == 4 and kept <= live_paths(t)
    assert all(len(b) == 1 for b in _blocks_per_file(t, second).values())
    assert same_rows(t.to_df(), gen(spark, ROWS, seed=3, parts=8))

    # files of [300,450) and [450,600) lie in one block of the next layout each, but hold
    # less than half of one of its two blocks: rewritten with their neighbours, not kept
    third = tree(["a < 450"])
    decided, kept = _switch_by_lows(t, third)
    assert decided == [(0, False), (300, True), (450, True), (600, False)]
    assert kept <= live_paths(t)
    assert all(len(b) == 1 for b in _blocks_per_file(t, third).values())
    assert same_rows(t.to_df(), gen(spark, ROWS, seed=3, parts=8))


def test_a_live_switch_keeps_the_files_already_in_one_block_of_its_target(
    spark: Any, tmp_path: Path
) -> None:
    from lakelayout.layouts import QdTreeLayout

    t = make_table(spark, tmp_path / "t")
    sample = t.to_df().toArrow()
    # eight files of ranges of a; the queries below filter on b among a >= 500, so a tree
    # fitted on them cuts b on one side of a = 500 only, and the four files of the other
    # side lie in one of its blocks (each an eighth of the table: over half its average
    # block when it has fewer than sixteen blocks)
    cuts = [f"a < {k * 125}" for k in range(1, 8)]
    t.optimize.apply(QdTreeLayout.fit(sample, cuts, rows_per_block=500), one_file_per_block=True)
    before = live_paths(t)
    assert len(before) == 8
    t.online.enable(**SETTINGS)
    rng = np.random.default_rng(5)
    sqls = [f"a >= 500 AND b >= {lo} AND b < {lo + 25}" for lo in rng.integers(0, 975, 60)]
    assert scan_until_switch(t, sqls) < 60, "no switch was decided"
    assert t.online.wait(300)
    done = t.online.history()[0]
    assert done["status"] == "done", done
    assert done["files_kept"] > 0 and done["files_kept"] + done["files_removed"] == 8
    kept = before & live_paths(t)
    assert len(kept) == done["files_kept"]
    engine = online_table.controller(t.uri).engine
    assert engine is not None
    target = engine.layout_of(done["target"])
    placed = _blocks_per_file(t, target)
    assert all(len(placed[p]) == 1 for p in kept)
    # the kept files are recorded as the blocks they are in: query-time block pruning by
    # the target covers them, and the next switch sees the table as laid out by it
    recorded = _recorded_blocks(t)
    assert all(placed[p] == [recorded[p]] for p in kept)
    assert online_table.laid_out_by(t.uri, t.snapshot().files, target).all()
    assert same_rows(t.to_df(), gen(spark, ROWS, seed=3, parts=8))


def test_a_failed_rewrite_leaves_table_and_reorganizer_consistent(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)

    def boom(_: int) -> None:
        raise RuntimeError("disk full (simulated)")

    t.online.set_hooks(OptimizeHooks(before_commit=boom))
    before_files, before_version = live_paths(t), None
    sqls = queries(80)
    ran = scan_until_switch(t, sqls)
    before_version = t.version
    assert t.online.wait(300)
    failed = t.online.history()[0]
    assert failed["status"] == "failed" and "disk full (simulated)" in failed["error"]
    assert live_paths(t) == before_files and t.version == before_version
    assert t.to_df().count() == ROWS
    status = t.online.status()
    assert status["applied"] == "as-is" and status["current"] == "as-is"
    assert status["switches"] == 0 and status["failed_rewrites"] == 1

    # the next scans draw again; the switch commits, and a hook failing after its commit
    # does not make it read as failed (an audit: "failed", version None, the table in
    # "as-is" though the switch's OPTIMIZE had committed)
    def after(_: int, version: int) -> None:
        raise RuntimeError(f"hook after version {version}")

    t.online.set_hooks(OptimizeHooks(after_commit=after))
    for sql in sqls[ran:]:
        t.scan(sql)
        if any(h["status"] == "done" for h in t.online.history()):
            break
        t.online.wait(300)
    assert t.online.wait(300)
    (done,) = [h for h in t.online.history() if h["status"] == "done"]
    assert done["version"] == t.version and done["files_removed"] > 0
    status = t.online.status()
    assert status["applied"] == done["target"] and status["switches"] == 1
    assert t.to_df().count() == ROWS
    assert t.to_df().select("id").distinct().count() == ROWS


def test_a_switch_that_loses_its_commit_is_recorded_as_failed(spark: Any, tmp_path: Path) -> None:
    """A DELETE commits in the switch's window: the rewrite yields (nothing committed),
    and the history said ``done`` with the reorganizer in the target state, its costs
    counted on a layout the table was not in (found by an audit)."""
    t = make_table(spark, tmp_path / "t")
    doomed = t.to_df().where("id % 50 = 0").count()
    t.online.enable(**SETTINGS)
    other = Table(t.uri, spark=spark)
    deleted: list[int] = []

    def delete_first(_: int) -> None:
        if not deleted:
            deleted.append(other.delete("id % 50 = 0").versions[-1])

    t.online.set_hooks(OptimizeHooks(before_commit=delete_first))
    scan_until_switch(t, queries(80))
    assert t.online.wait(300)
    lost = t.online.history()[0]
    assert lost["status"] == "failed" and lost["error"].startswith("yielded: "), lost
    status = t.online.status()
    assert status["applied"] == "as-is" and status["current"] == "as-is"
    assert status["switches"] == 0 and status["failed_rewrites"] == 1
    assert doomed > 0 and t.to_df().count() == ROWS - doomed
    assert t.version == deleted[0]  # the DELETE's commit is the last


def test_a_step_on_a_snapshot_older_than_the_last_switch_plans_on_the_table_as_it_is(
    spark: Any, tmp_path: Path
) -> None:
    """A scan that read the table before a switch committed steps the reorganizer after
    it (the scan's snapshot is older than the layout the state says the table is in):
    the next rewrite is planned on the table as it is now, never on the files the
    switch removed (which ``optimize.apply`` refuses: a failed rewrite and a redraw)."""
    from lakelayout.expr.parse import parse_predicate

    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    stale = t.snapshot()
    scan_until_switch(t, queries(80))
    assert t.online.wait(300)
    (first,) = t.online.history()
    assert first["status"] == "done" and first["version"] > stale.version
    rng = np.random.default_rng(5)
    for lo in rng.integers(0, 975, 120):  # now on b: the reorganizer wants another layout
        sql = f"b >= {lo} AND b < {lo + 25}"
        online_table.after_scan(t, sql, parse_predicate(sql, stale.schema), stale)
        if len(t.online.history()) > 1:
            break
    assert t.online.wait(300)
    later = t.online.history()[1:]
    assert later, "no rewrite after the first"
    assert all(h["status"] == "done" and not h["error"] for h in later), later
    assert all(h["read_version"] >= first["version"] for h in later)
    assert t.online.status()["failed_rewrites"] == 0
    assert t.to_df().count() == ROWS
    assert t.to_df().select("id").distinct().count() == ROWS


#: a child process with its own JVM on the table argv[1]; the scripts below go on from it
CHILD = textwrap.dedent(
    """
    import os, sys, time
    from lakelayout.api import Table
    from lakelayout.cluster import OptimizeHooks
    from lakelayout.table.session import spark_session

    spark = spark_session("local[1]", **{"spark.ui.enabled": "false"})
    t = Table(sys.argv[1], spark=spark)
    """
)
KILLER = CHILD + textwrap.dedent(
    """
    t.online.set_hooks(OptimizeHooks(before_commit=lambda i: os._exit(9)))
    for sql in sys.argv[2:]:
        t.scan(sql)
    t.online.wait(300)
    os._exit(1)  # no rewrite reached its commit
    """
)


def test_a_process_killed_mid_rewrite_leaves_a_usable_table_and_state(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    version, files = t.version, live_paths(t)
    sqls = queries(40)
    done = subprocess.run(
        [sys.executable, "-c", KILLER, t.uri, *sqls],
        # a JVM that lives for one rewrite: C1 only, like the suite's other child JVMs
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": C1_ONLY},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 9, done.stderr[-2000:]
    stored = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    assert stored["engine"]["history"][-1]["status"] == "pending"  # what the dead process left
    # a new Table object settles the interrupted rewrite from the Delta log
    again = Table(t.uri, spark=spark)
    assert again.version == version and live_paths(again) == files
    assert again.to_df().count() == ROWS
    history = again.online.history()
    assert history[-1]["status"] == "failed" and "interrupted" in history[-1]["error"]
    status = again.online.status()
    assert status["applied"] == "as-is" and status["current"] == "as-is"
    # and it goes on: the same stream, continued here, gets its switch
    for sql in queries(80, seed=5):
        again.scan(sql)
        again.online.wait(300)
        if again.online.status()["switches"]:
            break
    assert again.online.status()["switches"] == 1
    assert again.to_df().select("id").distinct().count() == ROWS


def test_status_and_history_survive_a_restart(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(
        **SETTINGS,
        admission_sample=15,
        half_life=30,
        gamma=1.0,  # the predictor's weights are read only when draws are not uniform
        predictor="recent",
        predictor_weight="inverse",
        mid_phase_join=True,
        fit_before_draw=True,
    )
    scan_until_switch(t, queries(60))
    assert t.online.wait(300)
    status, history = t.online.status(), t.online.history()
    assert (status["admission_sample"], status["half_life"]) == (15, 30)
    assert (status["predictor"], status["mid_phase_join"]) == ("recent", True)
    assert status["predictor_weight"] == "inverse"
    # the table as it is reads every file: its counter fills before the first round is due
    assert status["fit_before_draw"] and status["draw_fits"] >= 1
    # a new process: the CLI reads the stored state (no JVM needed)
    cli = [sys.executable, "-m", "lakelayout.cli", "online"]
    shown = subprocess.run([*cli, "status", t.uri], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"queries {status['queries']}" in shown.stdout
    assert "qdtree" in shown.stdout and "switches 1" in shown.stdout
    assert "layouts compared on a time-biased sample of 15 queries (half-life 30)" in shown.stdout
    words = " ".join(shown.stdout.split())  # the console wraps long lines
    assert (
        "predictor recent over 20 queries, inverse weights mid-phase join fit before a draw"
        in words
    )
    listed = subprocess.run([*cli, "history", t.uri], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "done" in listed.stdout and "as-is" in listed.stdout
    # a fresh controller (as in a new process) continues where the last one stopped
    online_table._CONTROLLERS.clear()
    again = Table(t.uri, spark=spark)
    assert again.online.status()["queries"] == status["queries"]
    assert again.online.status()["draw_fits"] == status["draw_fits"]
    assert again.online.status()["predictor_weight"] == "inverse"
    assert again.online.history() == history
    # the time-biased sample is stored with the state: up to 15 scanned queries, in order
    state = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    kept = state["engine"]["manager"]["admission_sampled"]
    positions = [pos for pos, _ in kept]
    assert len(kept) == min(15, status["queries"]) > 0 and positions == sorted(positions)
    assert max(positions) < status["queries"]
    assert {sql for _, sql in kept} <= set(queries(60))
    again.scan(queries(1, seed=9)[0])
    assert again.online.status()["queries"] == status["queries"] + 1
    stored = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    assert stored["engine"]["decider"]["rng"]["bit_generator"] == "PCG64"


#: a process scanning a table through ``Table.scan``'s hook (no JVM: with the state enabled,
#: a step only reads the Delta log and the stored sample); it starts when ``go`` appears
SCANNER = """
import os, sys, time
from pathlib import Path
from lakelayout import online_table
from lakelayout.api import Table
from lakelayout.expr.parse import parse_predicate

uri, go, ready = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
sqls = sys.argv[4:]
t = Table(uri)
snap = t.snapshot()
bound = [(sql, parse_predicate(sql, snap.schema)) for sql in sqls]
ready.touch()
while not go.exists():
    time.sleep(0.01)
if os.environ.get("DIE_AFTER_SAVE"):  # the process dies between a step's save and its dequeue
    online_table.OnlineStore.dequeue = lambda self, paths: os._exit(7)
for sql, predicate in bound:
    online_table.after_scan(t, sql, predicate, snap)
print("scanned", len(bound))
"""


def run_scanners(
    tmp_path: Path,
    uri: str,
    streams: list[list[str]],
    *,
    env: dict[str, str] | None = None,
    exit_code: int = 0,
) -> None:
    """Start one scanning process per stream, release them together, wait for all."""
    script = tmp_path / "scanner.py"
    script.write_text(SCANNER)
    go = tmp_path / "go"
    children = []
    try:
        for k, sqls in enumerate(streams):
            ready = tmp_path / f"ready-{k}"
            log = tmp_path / f"scanner-{k}.log"
            proc = processes.python(script, uri, str(go), str(ready), *sqls, log=log, env=env)
            children.append((proc, log, ready))
        for proc, log, ready in children:
            processes.wait_for(ready.exists, what="a scanner", proc=proc, log=log)
        go.touch()
        for proc, log, _ in children:
            assert proc.wait(timeout=300) == exit_code, processes.tail(log)
    finally:
        for proc, _, _ in children:
            processes.stop(proc, grace=1.0)


def test_two_processes_scanning_one_table_lose_no_step(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    # no counter fills (no switch: the children have no JVM); a candidate round every 10 scans
    t.online.enable(**{**SETTINGS, "alpha": 1e9})
    streams = [queries(120, seed=1), queries(120, seed=2)]
    run_scanners(tmp_path, t.uri, streams)
    # every scan of both is a step, whether its process held the lock or queued it
    status = t.online.status()
    assert status["queries"] == 240
    assert status["rewrite_pending"] is False and status["switches"] == 0
    assert online_table.OnlineStore(t.uri).queued_count() == 0
    state = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    window = state["engine"]["manager"]["recent"]
    assert len(window) == SETTINGS["window"] and set(window) <= set(streams[0] + streams[1])


def test_a_rewrite_ending_keeps_the_steps_another_process_took_meanwhile(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    paused, resume = threading.Event(), threading.Event()

    def pause(_: int) -> None:
        paused.set()
        resume.wait(300)

    t.online.set_hooks(OptimizeHooks(before_commit=pause))
    assert scan_until_switch(t, queries(60)) < 60, "no switch was decided"
    assert paused.wait(300), "the rewrite never reached its commit"
    before = t.online.status()["queries"]
    # what another process sees meanwhile: which rewrite runs, for how long, on what
    cli = [sys.executable, "-m", "lakelayout.cli", "online", "status", t.uri]
    shown = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    running = t.online.history()[-1]
    assert running["status"] == "pending"
    assert f"switch to {running['target_label']} [{running['target']}] running for" in shown.stdout
    assert f"{len(running['inputs'])} files to rewrite, process {os.getpid()}" in shown.stdout
    # another process scans while the rewrite runs: its steps go to the state on disk
    run_scanners(tmp_path, t.uri, [queries(20, seed=5)])
    resume.set()
    assert t.online.wait(300)
    # the rewrite's outcome was recorded on that state, not on this process's older copy
    status, history = t.online.status(), t.online.history()
    assert status["queries"] == before + 20
    assert history[0]["status"] == "done" and status["switches"] == 1
    assert status["applied"] == history[0]["target"] and not status["rewrite_pending"]


def test_a_scan_while_another_process_steps_is_queued_not_waited_for(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9})
    t.scan("a < 10")
    store = online_table.OnlineStore(t.uri)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another holder: filelock's lock is per thread
        with store.locked(wait=True):
            held.set()
            release.wait(300)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        streams = [queries(30, seed=4)]
        run_scanners(tmp_path, t.uri, streams)  # finishes while the lock is held
        assert store.queued_count() == 30
        # what must be recorded waits for the lock, then gives up by name
        monkeypatch.setattr(online_table, "LOCK_WAIT", 0.5)
        with pytest.raises(StateLocked, match=r"state\.lock"):
            t.online.status()
        monkeypatch.undo()
    finally:
        release.set()
        holder.join(60)
    # the next step applies the queued scans first, in their order, then its own (a
    # candidate round among them: the scan leaves the step to its process's stepper)
    t.scan("a < 20")
    assert t.online.wait(300)
    state = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    assert (
        state["engine"]["manager"]["recent"][-SETTINGS["window"] :]
        == (["a < 10", *streams[0], "a < 20"][-SETTINGS["window"] :])
    )
    assert t.online.status()["queries"] == 32 and store.queued_count() == 0


def test_a_process_that_exits_after_a_round_was_queued_takes_it_first(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9})  # no switch; a candidate round every 10 scans
    store = online_table.OnlineStore(t.uri)
    # the 10th scan leaves its step (and the round) to a background thread, and the
    # child exits right after it
    run_scanners(tmp_path, t.uri, [queries(10, seed=8)])
    state = json.loads(store.state.read_text())  # as the child left it (status() would step)
    assert store.queued_count() == 0
    assert state["engine"]["manager"]["queries"] == 10
    assert state["engine"]["fitted_at"] == 10, "the round did not run"


def test_a_scan_queued_as_a_step_lets_go_of_the_lock_is_applied_without_another_scan(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9, "interval": 100})  # no round, no switch
    store = online_table.OnlineStore(t.uri)
    applied = online_table._Controller._apply_queued
    late = ["a < 7"]

    def then_a_scan_arrives(self: Any, *args: Any, **kwargs: Any) -> bool:
        done = applied(self, *args, **kwargs)
        if late:  # after the step's last look at the queue, before it lets go of the lock
            store.enqueue(late.pop())
        return done

    monkeypatch.setattr(online_table._Controller, "_apply_queued", then_a_scan_arrives)
    t.scan("a < 5")
    assert t.online.wait(120)
    state = json.loads(store.state.read_text())
    assert store.queued_count() == 0
    assert state["engine"]["manager"]["recent"] == ["a < 5", "a < 7"]


EXITER = CHILD + textwrap.dedent(
    """
    t.online.set_hooks(OptimizeHooks(before_commit=lambda i: time.sleep(2)))
    for sql in sys.argv[2:]:
        t.scan(sql)
        if t.online.history():  # a switch started: end the script while it rewrites
            print("pending", t.online.history()[-1]["status"])
            sys.exit(0)
    sys.exit(3)
    """
)


def test_a_process_that_exits_during_a_rewrite_lets_it_commit(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    version = t.version
    done = subprocess.run(
        [sys.executable, "-c", EXITER, t.uri, *queries(60)],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": C1_ONLY},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pending pending" in done.stdout  # it was still rewriting when the script ended
    stored = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    assert stored["engine"]["history"][-1]["status"] == "done"
    again = Table(t.uri, spark=spark)
    assert again.version > version
    assert again.to_df().select("id").distinct().count() == again.to_df().count() == ROWS


def test_a_step_that_dies_before_removing_its_queue_files_counts_them_once(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9, "interval": 100})  # no candidate round
    t.scan("a < 10")
    store = online_table.OnlineStore(t.uri)
    with store.locked(wait=True):  # another holder: the child's 12 scans are queued
        run_scanners(tmp_path, t.uri, [queries(12, seed=6)])
    assert store.queued_count() == 12
    # a process applies them with its own scan, saves the state, and dies before it
    # removes the queue files
    run_scanners(tmp_path, t.uri, [["a < 20"]], env={"DIE_AFTER_SAVE": "1"}, exit_code=7)
    assert store.queued_count() == 12
    assert json.loads(store.state.read_text())["engine"]["manager"]["queries"] == 14
    # the next step removes them without applying them again
    t.scan("a < 30")
    assert t.online.status()["queries"] == 15 and store.queued_count() == 0
    state = json.loads(store.state.read_text())
    assert state["engine"]["manager"]["recent"][-3:] == [
        *queries(12, seed=6)[-1:],
        "a < 20",
        "a < 30",
    ]


def test_a_scan_does_not_wait_for_the_candidate_round_its_step_brings(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9})  # a round every 10 scans
    fitting, gate = threading.Event(), threading.Event()
    fit = online_table.fit_candidates

    def held_fit(*args: Any, **kwargs: Any) -> Any:  # the round waits until released
        fitting.set()
        assert gate.wait(300)
        return fit(*args, **kwargs)

    monkeypatch.setattr(online_table, "fit_candidates", held_fit)
    sqls = queries(15, seed=7)
    scanned = threading.Event()

    def scan_all() -> None:
        for sql in sqls:
            t.scan(sql)
        scanned.set()

    scanner = threading.Thread(target=scan_all)
    scanner.start()
    try:
        assert fitting.wait(120), "no candidate round started"
        # the round holds the state's lock in the process's stepper; the 15 scans returned
        assert scanned.wait(120), "a scan waited for the candidate round"
        # the 10th (its step fits) and the five after it are queued, none lost
        assert online_table.OnlineStore(t.uri).queued_count() == 6
    finally:
        gate.set()
        scanner.join(120)
    assert t.online.wait(300)
    # the stepper applied the scans queued behind its round before it let go of the lock
    state = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    assert state["engine"]["manager"]["recent"] == sqls  # in the order scanned
    assert online_table.OnlineStore(t.uri).queued_count() == 0
    status = t.online.status()
    assert status["queries"] == 15 and len(status["states"]) > 1


def small_files(t: Table, layout: Any) -> int:
    """Live files below the size a switch keeps (half an average block of the layout)."""
    sizes = np.asarray(delta.snapshot(t.uri).files.sizes, dtype=np.float64)
    return int((sizes < 0.5 * sizes.sum() / layout.n_blocks).sum())


def test_appended_files_are_laid_out_by_a_catch_up_once_they_cost_what_it_does(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    # one candidate in the first round (query 20); after the switch to it the table's
    # state is the only one (the table as it was leaves) until the next round (query 40)
    t.online.enable(**{**SETTINGS, "interval": 20, "max_states": 2})
    k = scan_until_switch(t, queries(40))
    assert k < 30, "no switch was decided"
    assert t.online.wait(300)
    [switch] = t.online.history()
    assert switch["status"] == "done" and switch["kind"] == "switch"
    state = online_table.controller(t.uri).engine.manager.states[switch["target"]]
    layout = state.layout
    before = t.to_df().collect()
    appends = [gen(spark, 3_000, seed=9 + r, parts=4, start=ROWS + 3_000 * r) for r in (0, 1)]
    sqls = iter(queries(60, seed=8))
    small = []
    unlaid = online_table.UnlaidFiles(t.uri)  # one across versions: new files worked out only
    for r, rows in enumerate(appends):
        t.append(rows)
        files = delta.snapshot(t.uri).files
        appended = online_table.plan_switch(t.uri, files, layout)[0]
        assert appended.sum() == 4  # the append's files, not laid out by the table's layout
        assert np.array_equal(unlaid.plan(files, state)[0], appended)
        scans = 0
        while len(t.online.history()) < 2 + r:
            t.scan(next(sqls))
            scans += 1
        assert t.online.wait(300)
        catch_up = t.online.history()[-1]
        assert catch_up["kind"] == "catch-up" and catch_up["status"] == "done", catch_up
        assert catch_up["source"] == catch_up["target"] == switch["target"]
        # it came when the queries' extra reading reached the rewrite's cost, not at once
        assert scans > 1 and catch_up["reason"].startswith("catch-up")
        # it rewrote the appended files (and the small files the layout wrote before)
        assert {str(p) for p in files.paths[appended]} <= set(catch_up["inputs"])
        # every live file is laid out by the table's layout now
        live = delta.snapshot(t.uri).files
        assert not online_table.plan_switch(t.uri, live, layout)[0].any()
        assert not unlaid.plan(live, state)[0].any()
        small.append(small_files(t, layout))
    # the second merged the first's pieces: a block gains at most one small file
    assert small[1] <= layout.n_blocks
    status = t.online.status()
    assert status["switches"] == 1 and status["catch_ups"] == 2
    assert status["applied"] == switch["target"]
    shares = [h["share"] for h in t.online.history()[1:]]
    alpha = SETTINGS["alpha"]
    assert all(0 < share < 0.6 for share in shares)
    assert status["reorganization_cost"] == pytest.approx(
        alpha + sum(alpha * max(share, 0.05) for share in shares)
    )
    # no row was lost or doubled
    expected = spark.createDataFrame(before).unionByName(appends[0]).unionByName(appends[1])
    assert same_rows(t.to_df(), expected)


def state_refs(t: Table) -> set[str]:
    state = json.loads((Path(t.uri) / online_table.DIRECTORY / "state.json").read_text())
    items = state["engine"]["manager"]["states"]
    assert all("layout" not in item for item in items if item["id"] != "as-is")
    return {item["layout_ref"] for item in items if "layout_ref" in item}


def test_the_state_names_its_layouts_and_keeps_only_those_named(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(
        **{**SETTINGS, "alpha": 1e9, "max_states": 2, "families": ["hilbert", "qdtree"]}
    )
    layouts = Path(t.uri) / online_table.DIRECTORY / online_table.LAYOUT_DIRECTORY
    seen: set[str] = set()
    sqls = queries(30, seed=1) + [f"b >= {k} AND b < {k + 40}" for k in range(0, 900, 30)]
    for sql in sqls:
        t.scan(sql)
        assert t.online.wait(300)  # a step with a candidate round is taken in the background
        named = state_refs(t)
        seen |= named
        # every layout the state names is on disk, and nothing else is
        assert {p.stem for p in layouts.glob("*.json")} == named
    assert len(seen) > len(named) >= 1, "no state was replaced: nothing to remove"
    state_bytes = (Path(t.uri) / online_table.DIRECTORY / "state.json").stat().st_size
    assert state_bytes < sum(p.stat().st_size for p in layouts.glob("*.json"))
    # a state saved before layouts were named (version 1: written out) still loads
    before = t.online.status()
    state_path = Path(t.uri) / online_table.DIRECTORY / "state.json"
    old = json.loads(state_path.read_text())
    for item in old["engine"]["manager"]["states"]:
        if "layout_ref" in item:
            item["layout"] = json.loads((layouts / f"{item.pop('layout_ref')}.json").read_text())
    old["version"] = 1
    state_path.write_text(json.dumps(old))
    for path in layouts.glob("*.json"):
        path.unlink()
    online_table._CONTROLLERS.clear()
    again = Table(t.uri, spark=spark)
    assert again.online.status()["states"] == before["states"]
    again.scan("a < 10")
    assert again.online.status()["queries"] == before["queries"] + 1
    assert json.loads(state_path.read_text())["version"] == online_table.STATE_VERSION
    assert {p.stem for p in layouts.glob("*.json")} == state_refs(again) == named


def test_a_scan_queued_while_a_step_runs_is_applied_before_the_lock_is_let_go(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**{**SETTINGS, "alpha": 1e9, "interval": 100})
    t.scan("a < 10")
    store_type = online_table.OnlineStore
    queued = store_type.queued
    arrived: list[str] = []

    def another_scan_arrives(self: Any, limit: int = online_table.QUEUE_DRAIN) -> Any:
        out = queued(self, limit)
        if not arrived:  # another process's scan lands just after the step read the queue
            arrived.append("a < 77")
            self.enqueue("a < 77")
        return out

    monkeypatch.setattr(store_type, "queued", another_scan_arrives)
    t.scan("a < 20")
    monkeypatch.undo()
    store = online_table.OnlineStore(t.uri)
    state = json.loads(store.state.read_text())  # as saved: no status() to drain the queue
    assert state["engine"]["manager"]["recent"] == ["a < 10", "a < 20", "a < 77"]
    assert store.queued_count() == 0


def test_scans_feed_nothing_until_enabled_and_bad_options_write_nothing(
    spark: Any, tmp_path: Path
) -> None:
    t = make_table(spark, tmp_path / "t")
    t.scan("a < 10")
    state = Path(t.uri) / online_table.DIRECTORY
    assert not state.exists()
    with pytest.raises(InvalidOption, match="never enabled"):
        t.online.status()
    with pytest.raises(InvalidOption, match="alpha must be a number > 0 or 'measured'"):
        t.online.enable(alpha="guess")
    with pytest.raises(InvalidOption, match="unknown layout family 'qdtre'"):
        t.online.enable(alpha=2.0, families=["qdtre"])
    with pytest.raises(InvalidOption, match="max_states must be >= 2"):
        t.online.enable(alpha=2.0, max_states=1)
    with pytest.raises(InvalidOption, match="unknown predictor 'last'"):
        t.online.enable(alpha=2.0, predictor="last")
    with pytest.raises(InvalidOption, match="unknown predictor weight 'skip'"):
        t.online.enable(alpha=2.0, predictor_weight="skip")
    with pytest.raises(InvalidOption, match="seed must be >= 0"):
        t.online.enable(alpha=2.0, seed=-1)
    # options the chosen policy never reads are named, not echoed back by status() (an audit)
    with pytest.raises(InvalidOption, match=r"ignore: gamma \(policy 'greedy' draws no state\)"):
        t.online.enable(alpha=2.0, policy="greedy", gamma=4.0)
    with pytest.raises(InvalidOption, match=r"predictor_window \(read with predictor='recent'"):
        t.online.enable(alpha=2.0, gamma=1.0, predictor_window=30)
    with pytest.raises(InvalidOption, match=r"predictor_weight \(gamma=0 draws uniformly\)"):
        t.online.enable(alpha=2.0, predictor_weight="inverse")
    with pytest.raises(InvalidOption, match=r"half_life \(read with admission_sample > 0"):
        t.online.enable(alpha=2.0, half_life=10)
    version = t.version
    with pytest.raises(InvalidOption, match="never enabled"):
        t.online.disable()
    assert not state.exists() and not t.online.enabled and t.version == version
    t.online.enable(**SETTINGS)
    with pytest.raises(InvalidOption, match="already enabled"):
        t.online.enable(**SETTINGS)
    t.scan("a < 10")
    assert t.online.status()["queries"] == 1
    t.online.disable()
    version = t.version
    t.online.disable()  # off already: nothing committed
    assert t.version == version
    t.scan("a < 20")
    assert t.online.status()["queries"] == 1 and not t.online.status()["enabled"]


def test_a_damaged_or_unlockable_state_never_fails_a_scan(spark: Any, tmp_path: Path) -> None:
    """A state file of another format, a missing sample or a lock that cannot be taken (a
    read-only ``_lakelayout/``) failed every scan with a raw KeyError, FileNotFoundError or
    PermissionError (found by an audit); now the scan returns its rows and status() says
    what is wrong."""
    t = make_table(spark, tmp_path / "t")
    t.online.enable(**SETTINGS)
    want = t.scan("a < 10").df.count()
    directory = Path(t.uri) / online_table.DIRECTORY
    good = (directory / "state.json").read_text()
    damage = {
        "state.json": lambda: (directory / "state.json").write_text('{"version": 2}'),
        "sample.parquet": lambda: (directory / "sample.parquet").unlink(),
        "state.lock": lambda: (directory / "state.lock").mkdir(),
    }
    for name, spoil in damage.items():
        sample = (directory / "sample.parquet").read_bytes()
        (directory / "state.lock").unlink(missing_ok=True)
        spoil()
        (directory / "state.json").write_text(good + " " * len(name))  # a new token: reloaded
        if name == "state.json":
            spoil()
        assert t.scan("a < 10").df.count() == want, name
        with pytest.raises(StateUnreadable, match="online state"):
            t.online.status()
        if name == "state.lock":
            (directory / "state.lock").rmdir()
        (directory / "sample.parquet").write_bytes(sample)
        (directory / "state.json").write_text(good)
    t.scan("a < 10")
    assert t.online.status()["queries"] == 2  # the first scan and this one


def test_the_table_property_alone_enables_it_and_a_bad_one_is_refused_or_reported(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``lakelayout.online=true`` at create: the first scan starts online reorganization
    with α from ``lakelayout.online.alpha``. A bad value of either is refused by create
    before anything is written; one another tool wrote is reported once, not used."""
    data = gen(spark, 2_000, seed=3, parts=2)
    on = {online_table.ENABLED_PROPERTY: "true", online_table.ALPHA_PROPERTY: "7"}
    t = Table.create(str(tmp_path / "t"), data, properties=on)
    t.scan("a < 10")  # enables it in a thread: this scan is not fed to it
    assert t.online.wait(300)
    t.scan("a < 20")
    status = t.online.status()
    assert status["enabled"] and status["alpha"] == 7.0 and status["queries"] == 1
    for bad, named in [
        ({**on, online_table.ALPHA_PROPERTY: "-3"}, "must be a number > 0"),
        ({**on, online_table.ALPHA_PROPERTY: "abc"}, "must be a number > 0"),
        ({online_table.ENABLED_PROPERTY: "yes"}, "must be 'true' or 'false'"),
    ]:
        with pytest.raises(InvalidOption, match=named):
            Table.create(str(tmp_path / "bad"), data, properties=bad)
        assert not (tmp_path / "bad").exists()
    other = Table.create(str(tmp_path / "other"), data)
    delta.set_properties(other.uri, {**on, online_table.ALPHA_PROPERTY: "abc"})
    with caplog.at_level("WARNING", logger="lakelayout.online_table"):
        for where in ("a < 10", "a < 20"):
            other.scan(where)
            assert other.online.wait(300)
    reported = [r for r in caplog.records if online_table.ALPHA_PROPERTY in r.getMessage()]
    assert len(reported) == 1 and "'abc'" in reported[0].getMessage()
    assert not (Path(other.uri) / online_table.DIRECTORY).exists()


def test_alpha_is_measured_on_a_scratch_copy(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    files = live_paths(t)
    m = online_table.measure_alpha(t)
    assert m.method == "measured" and m.alpha > 0
    assert m.scan_seconds and m.rewrite_seconds and m.fixed_seconds
    # α prices the bytes a full scan reads: the part a scan keeping no file pays is out
    # (unless noise put it above the full scan: then the whole scan is the unit)
    want, _ = online_table.alpha_per_scan_bytes(m.rewrite_seconds, m.scan_seconds, m.fixed_seconds)
    assert m.alpha == pytest.approx(want)
    assert m.rows == ROWS and m.files >= 1
    assert live_paths(t) == files  # the table itself is not touched


def test_the_cli_enables_and_disables_and_names_a_bad_option(spark: Any, tmp_path: Path) -> None:
    t = make_table(spark, tmp_path / "t")
    cli = [sys.executable, "-m", "lakelayout.cli", "online"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": C1_ONLY}
    state = Path(t.uri) / online_table.DIRECTORY / "state.json"
    # bad input: one line naming the option, exit code 2, nothing written
    for bad, named in ((["--families", "qdtree,nope"], "nope"), (["--alpha", "lots"], "--alpha")):
        shown = subprocess.run(
            [*cli, "enable", t.uri, *bad], capture_output=True, text=True, timeout=120, env=env
        )
        assert shown.returncode == 2 and named in shown.stdout, shown.stdout + shown.stderr
        assert "Traceback" not in shown.stderr and not state.exists()
    args = ["--alpha", "3", "--window", "20", "--interval", "10", "--families", "qdtree"]
    shown = subprocess.run(
        [*cli, "enable", t.uri, *args, "--sample-rows", "2000", "--no-catch-up"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "online reorganization enabled" in shown.stdout and "α = 3.00 (given)" in shown.stdout
    assert "families qdtree" in shown.stdout.splitlines()
    status = Table(t.uri, spark=spark).online.status()
    assert status["enabled"] and (status["alpha"], status["window"], status["interval"]) == (
        3.0,
        20,
        10,
    )
    assert status["families"] == ["qdtree"] and status["catch_up"] is False
    again = subprocess.run([*cli, "enable", t.uri], capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "already enabled" in again.stdout
    off = subprocess.run([*cli, "disable", t.uri], capture_output=True, text=True, timeout=120)
    assert off.returncode == 0 and "disabled" in off.stdout, off.stderr
    assert Table(t.uri, spark=spark).online.status()["enabled"] is False


def test_enabled_on_an_empty_table_it_starts_fitting_once_rows_arrive(
    spark: Any, tmp_path: Path
) -> None:
    t = Table.create(str(tmp_path / "t"), gen(spark, 0, seed=3, parts=1), spark=spark)
    with pytest.raises(InvalidOption, match="no files"):  # nothing to time a rewrite on
        t.online.enable(**{**SETTINGS, "alpha": "measured"})
    t.online.enable(**{**SETTINGS, "alpha": 5.0})
    for sql in queries(12, seed=4):  # a round is due at the 10th: nothing to fit on yet
        assert t.scan(sql).df.count() == 0
    assert t.online.wait(120)
    status = t.online.status()
    assert status["queries"] == 12 and not status["last_error"]
    assert [s["id"] for s in status["states"]] == ["as-is"]
    t.append(gen(spark, ROWS, seed=3, parts=8))
    for sql in queries(20, seed=5):  # the next round samples the rows that arrived
        t.scan(sql)
    assert t.online.wait(300)
    status = t.online.status()
    assert not status["last_error"], status["last_error"]
    fitted = [s for s in status["states"] if s["blocks"] is not None]  # (as-is has none)
    assert fitted, "no candidate was fitted on the rows that arrived"
    assert t.to_df().select("id").distinct().count() == t.to_df().count() == ROWS


def test_a_switch_planned_on_files_a_commit_removed_since_yields(
    spark: Any, tmp_path: Path
) -> None:
    """A DELETE in another thread committed between a switch's plan and its rewrite:
    ``optimize.apply`` refused the planned files, and the history said ``failed:
    InvalidOption`` where a switch that lost a race yields (found by an audit)."""
    t = make_table(spark, tmp_path / "t")
    planned = [str(p) for p in t.snapshot().files.paths]
    assert online_table._removed_since(t, planned) == ""
    touched = t.delete("id % 50 = 0").files_removed
    reason = online_table._removed_since(t, planned)
    assert touched > 0 and reason.startswith(f"{touched} of its input files were removed"), reason
    assert f"version {t.version}" in reason
