"""The retry loop of user operations and the waiting markers maintenance yields to (no JVM)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lakelayout.errors import CommitConflict
from lakelayout.table.conflicts import (
    WAITING_DIRECTORY,
    WAITING_TTL_SECONDS,
    CommitSummary,
    RetryPolicy,
    Waiting,
    expired_markers,
    run_with_retries,
    summarize,
    waiting_operations,
)

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002)
REWRITE = CommitSummary(7, "OPTIMIZE", False, frozenset({"a"}), frozenset({"b"}))
DELETE = CommitSummary(8, "DELETE", True, frozenset({"a"}), frozenset())


def _conflict(winner: CommitSummary) -> CommitConflict:
    return CommitConflict(
        f"lost to {winner.describe()}", winners=(winner,), rows_unchanged=not winner.data_change
    )


def test_retries_while_the_winners_changed_no_data(tmp_path: Path) -> None:
    seen: list[tuple[int, list[str]]] = []

    def attempt(n: int) -> str:
        seen.append((n, waiting_operations(str(tmp_path))))
        if n < 2:
            raise _conflict(REWRITE)
        return "committed"

    assert run_with_retries(str(tmp_path), "DELETE", attempt, policy=FAST) == ("committed", 2)
    assert [n for n, _ in seen] == [0, 1, 2]
    assert seen[0][1] == []  # no marker before the first lost race
    assert len(seen[1][1]) == 1 and seen[1][1][0].startswith(f"DELETE (pid {os.getpid()} on ")
    assert waiting_operations(str(tmp_path)) == []  # released when the operation ends
    assert list((tmp_path / WAITING_DIRECTORY).iterdir()) == []


def test_gives_up_naming_the_winner_when_attempts_run_out(tmp_path: Path) -> None:
    def attempt(n: int) -> None:
        raise _conflict(REWRITE)

    with pytest.raises(CommitConflict, match=r"DELETE on .* gave up after 3 attempt\(s\)") as c:
        run_with_retries(str(tmp_path), "DELETE", attempt, policy=FAST)
    assert "version 7 (OPTIMIZE, no data change)" in str(c.value)
    assert c.value.winners == (REWRITE,)
    assert waiting_operations(str(tmp_path)) == []


def test_a_winner_that_changed_data_is_not_retried(tmp_path: Path) -> None:
    calls: list[int] = []

    def attempt(n: int) -> None:
        calls.append(n)
        raise _conflict(DELETE)

    with pytest.raises(CommitConflict, match=r"changed data it planned on.*version 8 \(DELETE"):
        run_with_retries(str(tmp_path), "DELETE", attempt, policy=FAST)
    assert calls == [0]
    unknown = CommitConflict("race", winners=(), rows_unchanged=True)

    def unknown_winner(n: int) -> None:
        calls.append(n)
        raise unknown

    with pytest.raises(CommitConflict):
        run_with_retries(str(tmp_path), "append", unknown_winner, policy=FAST)
    assert calls == [0, 0]  # unknown winners are never assumed harmless


def test_other_errors_pass_through_and_release_the_marker(tmp_path: Path) -> None:
    def attempt(n: int) -> None:
        if n == 0:
            raise _conflict(REWRITE)
        raise ValueError("schema changed")

    with pytest.raises(ValueError, match="schema changed"):
        run_with_retries(str(tmp_path), "append", attempt, policy=FAST)
    assert waiting_operations(str(tmp_path)) == []


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(attempts=5, base_delay=0.1, max_delay=0.5)
    for n, ceiling in enumerate([0.1, 0.2, 0.4, 0.5, 0.5]):
        assert ceiling / 2 <= policy.delay(n) <= ceiling


def test_markers_expire_and_are_vacuum_garbage(tmp_path: Path) -> None:
    marker = Waiting.announce(str(tmp_path), "DELETE")
    assert marker.path is not None and json.loads(marker.path.read_text())["operation"] == "DELETE"
    assert len(waiting_operations(str(tmp_path))) == 1 and expired_markers(str(tmp_path)) == []
    later = time.time() + WAITING_TTL_SECONDS + 1
    assert waiting_operations(str(tmp_path), now=later) == []
    assert [p for p, _ in expired_markers(str(tmp_path), now=later)] == [marker.path]
    marker.release()
    assert not marker.path.exists()
    remote = Waiting.announce("s3://bucket/table", "DELETE")  # sidecars are local only
    assert remote.path is None and waiting_operations("s3://bucket/table") == []


def test_a_marker_of_a_process_gone_is_not_waited_for(tmp_path: Path) -> None:
    """A DELETE killed while it waited left its marker, and every rewrite yielded to it
    until it expired, 300 s later (an audit): a marker whose process is gone does not
    count; one of this process (another thread) does."""
    import subprocess
    import sys

    marker = Waiting.announce(str(tmp_path), "DELETE")
    assert marker.path is not None and len(waiting_operations(str(tmp_path))) == 1
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    body = json.loads(marker.path.read_text())
    marker.path.write_text(json.dumps({**body, "pid": dead.pid}))
    assert waiting_operations(str(tmp_path)) == []
    marker.release()


def test_summaries_of_commits_written_by_other_engines() -> None:
    spark_optimize = summarize(
        4,
        [
            {"commitInfo": {"operation": "OPTIMIZE"}},
            {"remove": {"path": "x", "dataChange": False}},
            {"add": {"path": "y", "dataChange": False}},
        ],
    )
    assert spark_optimize.describe() == "version 4 (OPTIMIZE, no data change)"
    properties = summarize(
        5, [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, {"metaData": {}}]
    )
    assert not properties.data_change and not properties.removed
    blind = summarize(6, [{"add": {"path": "z"}}])  # dataChange missing: assume it changed data
    assert blind.data_change and blind.operation == "unknown"


def test_unreadable_commit_files_make_the_winners_unknown(tmp_path: Path) -> None:
    from lakelayout.table.conflicts import winners

    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{1:020d}.json").write_text(
        json.dumps({"remove": {"path": "a", "dataChange": False}}) + "\n"
    )
    found, unchanged = winners(str(tmp_path), 0, 1, ["a"])
    assert [c.version for c in found] == [1] and unchanged
    found, unchanged = winners(str(tmp_path), 0, 2, ["a"])  # version 2's file is gone
    assert [c.version for c in found] == [1] and not unchanged
