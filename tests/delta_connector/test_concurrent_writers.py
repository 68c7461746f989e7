"""lakelayout and Delta Lake's own connector writing one table at once, from two processes.

* lakelayout's OPTIMIZE (Z-order) loops in this process while Delta's
  connector appends and deletes in another (``delta_writer.py writes``);
  first with Delta's DELETE placed inside lakelayout's commit window (between
  writing the rewritten files and committing them), then freely;
* the reverse: Delta's OPTIMIZE and ZORDER BY loop in the other process while
  lakelayout appends and deletes here.

Whoever loses a race gets the conflict semantics of its side: Delta raises a
``DeltaConcurrentModificationException`` (the writer process retries the
statement), lakelayout raises :class:`~lakelayout.errors.CommitConflict`
naming the table with nothing committed (retried here, or by lakelayout
itself where it retries a rewrite on the new snapshot). Afterwards the
table holds exactly the rows the committed statements imply, once each,
through both lakelayout and Delta's reader. The other process is started once
for the module and runs one job per test (see ``delta_writer.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakelayout.api import Table
from lakelayout.cluster.optimize import OptimizeHooks
from lakelayout.errors import CommitConflict

pytestmark = pytest.mark.spark

WRITER = Path(__file__).with_name("delta_writer.py")
INITIAL = 2000
ROUNDS = 2
ROWS = 150
#: generous bound on the other process (JVM start on a loaded machine included)
WAIT_SECONDS = 1200
#: lakelayout OPTIMIZEs racing the Delta writer, and the pause after each
MAX_OPTIMIZES = 2
PAUSE_SECONDS = 0.2
#: lakelayout DELETE attempts before the test gives up
MAX_ATTEMPTS = 50


def _initial(spark: Any, path: Path) -> Table:
    df = spark.range(INITIAL).selectExpr(
        "id", "cast(id * 7 % 1000 as int) as a", "cast(id % 10 as int) as k"
    )
    return Table.create(str(path), df.repartition(8), spark=spark, target_file_size=8 * 1024)


class Writer:
    """The other process (``delta_writer.py``): one JVM for the module, one job per test."""

    def __init__(self, jobs: Path) -> None:
        self.jobs, self.log, self.submitted = jobs, jobs / "writer.log", 0
        with open(self.log, "wb") as log:  # a file, not a pipe a long run could fill
            self.proc = subprocess.Popen(
                [sys.executable, str(WRITER), str(jobs)], stdout=log, stderr=subprocess.STDOUT
            )

    def _died(self) -> str:
        return f"writer process died: {self.log.read_text(errors='replace')[-3000:]}"

    def _until(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not done():
            if self.proc.poll() is not None:
                raise AssertionError(f"{what}; {self._died()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"writer process: {what} (timed out)")
            time.sleep(0.2)

    def start(self, mode: str, table: Table, state: Path, *extra: str) -> None:
        """Hand the process its next job; return once the job has started."""
        self._until(lambda: (self.jobs / "ready").exists(), "did not start")
        self.submitted += 1
        job = self.jobs / f"{self.submitted}.json"
        job.with_suffix(".tmp").write_text(json.dumps([mode, table.uri, str(state), *extra]))
        job.with_suffix(".tmp").rename(job)
        self._until(lambda: Path(str(state) + ".ready").exists(), "job did not start")

    def running(self, state: Path) -> bool:
        return self.proc.poll() is None and not state.exists()

    def wait_progress(self, state: Path, at_least: int) -> None:
        """Until the job committed ``at_least`` statements (it fails if the job ends first)."""
        self._until(
            lambda: _progress(state) >= at_least or state.exists(),
            f"job did not commit {at_least} statements",
        )
        if _progress(state) < at_least:
            raise AssertionError(
                f"writer committed {_progress(state)} < {at_least}: {self.finish(state)}"
            )

    def finish(self, state: Path) -> dict[str, Any]:
        """Wait for the job's outcome; fail on any error it reports."""
        self._until(state.exists, "job did not finish")
        out: dict[str, Any] = json.loads(state.read_text())
        assert not out["errors"], "\n".join(out["errors"])[-6000:]
        return out

    def stop(self) -> None:
        (self.jobs / "exit").write_text("exit")
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Writer]:
    w = Writer(tmp_path_factory.mktemp("delta-writer"))
    try:
        yield w
    finally:
        w.stop()


def _progress(state: Path) -> int:
    """Statements the writer process committed so far."""
    try:
        return int(Path(str(state) + ".progress").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _expected(rounds: int = ROUNDS) -> list[int]:
    """After ``rounds`` rounds: the initial rows their deletes left (``id % 2R`` not below
    ``rounds``) and the rows they appended."""
    kept = [i for i in range(INITIAL) if i % (2 * ROUNDS) >= rounds]
    return kept + list(range(INITIAL, INITIAL + rounds * ROWS))


def _open_gate(state: Path, n: int) -> None:
    """Let the gated writer start its statements up to the n-th."""
    Path(str(state) + ".go").write_text(str(n))


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def _check_conflict(exc: CommitConflict, table: Table) -> None:
    text = str(exc)
    assert table.uri in text and "nothing was committed" in text, text


def test_lakelayout_optimize_while_delta_appends_and_deletes(
    spark: Any, writer: Writer, tmp_path: Path
) -> None:
    t = _initial(spark, tmp_path / "t")
    state = tmp_path / "writer.json"
    writer.start(
        "writes",
        t,
        state,
        f"--initial={INITIAL}",
        f"--rounds={ROUNDS}",
        f"--rows={ROWS}",
        "--gated",
    )

    # first, deterministically: Delta's first append and DELETE commit while lakelayout's
    # Z-order has written its files but not committed them (the DELETE removed files the
    # rewrite replaces): lakelayout must not commit them over it
    def delta_commits_first(_: int) -> None:
        _open_gate(state, 2)
        writer.wait_progress(state, 2)

    try:
        m = t.optimize.zorder(["k", "a"], hooks=OptimizeHooks(before_commit=delta_commits_first))
        first = "retried" if m.versions else "yielded"
    except CommitConflict as exc:
        _check_conflict(exc, t)
        first = "CommitConflict"
    after_first = _expected(rounds=1)
    assert _ids(t.to_df()) == after_first, first
    assert _ids(spark.read.format("delta").load(t.uri)) == after_first, first

    # then freely: the other statements race lakelayout's Z-orders
    _open_gate(state, 2 * ROUNDS)
    committed, conflicts, raced = 0, 0, 0
    # rewrites until MAX_OPTIMIZES of them ran while the writer was under way (after its
    # first commit), each followed by a pause: Delta's DELETE conflicts with every commit
    # that adds files, so an endless stream of OPTIMIZEs could starve it
    while writer.running(state) and raced < MAX_OPTIMIZES:
        under_way = _progress(state) > 0
        try:
            t.optimize.zorder(["k", "a"])
            committed += 1
        except CommitConflict as exc:
            _check_conflict(exc, t)
            conflicts += 1
        if under_way:
            raced += 1
        time.sleep(PAUSE_SECONDS)
    out = writer.finish(state)
    assert len(out["committed"]) == 2 * ROUNDS, out
    want = _expected()
    got = _ids(t.to_df())
    summary = (
        f"lakelayout: first rewrite {first}, then {committed} optimized ({raced} racing), "
        f"{conflicts} conflicts; {out}"
    )
    assert len(got) == len(set(got)), f"duplicated rows; {summary}"
    assert got == want, summary
    assert _ids(spark.read.format("delta").load(t.uri)) == want, summary
    assert committed + conflicts >= 1, summary


def test_delta_optimize_while_lakelayout_appends_and_deletes(
    spark: Any, writer: Writer, tmp_path: Path
) -> None:
    t = _initial(spark, tmp_path / "t")
    state = tmp_path / "writer.json"
    writer.start("optimize", t, state, "--zorder=a, k")
    writer.wait_progress(state, 1)  # Delta's OPTIMIZE runs warm before the race starts
    before = _progress(state)
    retried = 0
    try:
        for r in range(ROUNDS):
            lo = INITIAL + r * ROWS
            batch = spark.range(lo, lo + ROWS).selectExpr(
                "id", "cast(id * 7 % 1000 as int) as a", "cast(id % 10 as int) as k"
            )
            t.append(batch.repartition(2))
            for _ in range(MAX_ATTEMPTS):
                try:
                    t.delete(f"id < {INITIAL} AND id % {2 * ROUNDS} = {r}")
                    break
                except CommitConflict as exc:
                    _check_conflict(exc, t)
                    retried += 1
            else:
                raise AssertionError(f"DELETE lost {MAX_ATTEMPTS} races in a row")
            time.sleep(PAUSE_SECONDS)
        # Delta's OPTIMIZE commits once more on the table lakelayout changed
        writer.wait_progress(state, before + 1)
    finally:
        Path(str(state) + ".stop").write_text("stop")
    out = writer.finish(state)
    want = _expected()
    got = _ids(t.to_df())
    summary = f"lakelayout: {retried} deletes retried; delta: {out}"
    assert len(got) == len(set(got)), f"duplicated rows; {summary}"
    assert got == want, summary
    assert _ids(spark.read.format("delta").load(t.uri)) == want, summary
