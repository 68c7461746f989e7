"""Concurrent writers on real tables: user operations retry, maintenance yields.

A DELETE that loses its race to a rewrite that changed no data re-plans and
commits again; OPTIMIZE gives up quietly (``yielded``) rather than fail a
user's operation; when retries run out the error names the winner. The last
test runs a Z-order loop in a second, real process against deletes here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from lakelayout.api import Table
from lakelayout.cluster import OptimizeHooks
from lakelayout.errors import CommitConflict
from lakelayout.table.conflicts import WAITING_DIRECTORY, RetryPolicy, Waiting

from .. import processes
from .helpers import TARGET, gen, live_paths

pytestmark = pytest.mark.spark

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


def _ids(t: Table) -> list[int]:
    return sorted(r["id"] for r in t.to_df().select("id").collect())


def _ids_by_deltalake(t: Table) -> list[int]:
    """The table as another Delta reader sees it."""
    return sorted(DeltaTable(t.uri).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def _markers(t: Table) -> list[Path]:
    folder = Path(t.uri) / WAITING_DIRECTORY
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@pytest.fixture
def table(spark: Any, tmp_path: Path) -> Table:
    return Table.create(str(tmp_path / "t"), gen(spark, 4000, 3, parts=6), target_file_size=TARGET)


def test_delete_retries_after_losing_to_optimize(spark: Any, table: Table) -> None:
    rows = {r["id"]: r["a"] for r in table.to_df().select("id", "a").collect()}
    other = Table(table.uri, spark=spark)
    optimized: list[Any] = []

    def optimize_first(_: int) -> None:
        if not optimized:  # the first attempt loses to a Z-order (dataChange=false)
            optimized.append(other.optimize.zorder(["a", "b"]))

    m = table.delete("a < 100", hooks=OptimizeHooks(before_commit=optimize_first))
    assert optimized[0].commits == 1 and not optimized[0].yielded
    assert m.retries == 1 and m.commits == 1
    expected = sorted(i for i, a in rows.items() if a >= 100)
    assert m.rows_removed - m.rows_added == len(rows) - len(expected)
    assert _ids(table) == expected == _ids_by_deltalake(table)
    assert _markers(table) == []
    assert table.history(1)[0]["lakelayout"]["operation"] == "DELETE"


def test_delete_losing_to_a_data_change_fails_at_once(spark: Any, table: Table) -> None:
    other = Table(table.uri, spark=spark)
    calls: list[int] = []

    def delete_first(_: int) -> None:
        calls.append(1)
        other.delete("a < 500")

    with pytest.raises(CommitConflict, match=r"changed data it planned on") as c:
        table.delete("a < 100", hooks=OptimizeHooks(before_commit=delete_first), retry=FAST)
    winner = c.value.winners[-1]
    assert (winner.version, winner.operation, winner.data_change) == (table.version, "DELETE", True)
    assert f"version {table.version} (DELETE, changed data)" in str(c.value)
    assert calls == [1]  # not retried
    assert min(r["a"] for r in table.to_df().select("a").collect()) >= 500


def test_delete_gives_up_naming_the_winner(spark: Any, table: Table) -> None:
    """delta-rs's own Z-order (it knows nothing of lakelayout's markers) wins every race."""
    before = _ids(table)

    def foreign_optimize(_: int) -> None:
        DeltaTable(table.uri).optimize.z_order(["a", "b"])

    with pytest.raises(CommitConflict, match=r"DELETE on .* gave up after 3 attempt\(s\)") as c:
        table.delete("a < 100", hooks=OptimizeHooks(before_commit=foreign_optimize), retry=FAST)
    winner = c.value.winners[-1]
    assert (winner.version, winner.operation, winner.data_change) == (
        table.version,
        "OPTIMIZE",
        False,
    )
    assert f"version {table.version} (OPTIMIZE, no data change)" in str(c.value)
    assert _ids(table) == before and _markers(table) == []
    assert not [p for p in Path(table.uri).glob("ll-del*")]  # the losers' files are gone


def test_optimize_yields_to_a_waiting_user_operation(spark: Any, table: Table) -> None:
    version, files = table.version, live_paths(table)
    waiting = Waiting.announce(table.uri, "DELETE")
    try:
        m = table.optimize.zorder(["a", "b"])
        assert m.yielded and m.commits == 0
        assert m.yield_reason.startswith("a user operation is waiting to commit: DELETE (pid ")
        assert table.optimize.compact().yielded
    finally:
        waiting.release()
    assert table.version == version and live_paths(table) == files

    late: list[Waiting] = []

    def announce(_: int) -> None:  # the user operation starts waiting mid-rewrite
        late.append(Waiting.announce(table.uri, "DELETE"))

    m = table.optimize.zorder(["a", "b"], hooks=OptimizeHooks(before_commit=announce))
    late[0].release()
    assert m.yielded and m.commits == 0 and table.version == version
    assert not list(Path(table.uri).glob("ll-zorder*"))  # its written files were deleted
    assert not table.optimize.zorder(["a", "b"]).yielded  # nobody waits now


def test_deletes_against_a_zorder_loop_in_another_process(
    spark: Any, table: Table, tmp_path: Path
) -> None:
    """Every DELETE succeeds and removes exactly its rows; no row is lost or duplicated."""
    stop, log, out = tmp_path / "stop", tmp_path / "loop.jsonl", tmp_path / "child.log"
    ids = _ids(table)
    child = processes.python(
        Path(__file__).with_name("zorder_loop.py"), table.uri, str(stop), str(log), log=out
    )
    deleted: list[Any] = []
    try:

        def loop_committed() -> bool:
            lines = log.read_text().splitlines() if log.exists() else []
            return any(json.loads(line)["versions"] for line in lines)

        processes.wait_for(loop_committed, what="z-order loop", proc=child, log=out)
        for k in range(5):
            m = table.delete(f"id % 10 = {k}")
            deleted.append(m)
            assert m.rows_removed - m.rows_added == sum(1 for i in ids if i % 10 == k)
        stop.touch()
        processes.wait_for(lambda: child.poll() is not None, what="loop stop", log=out)
    finally:
        processes.stop(child)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r["versions"] or r["yielded"] for r in runs)  # it never failed
    expected = [i for i in ids if i % 10 >= 5]
    assert _ids(table) == expected == _ids_by_deltalake(table)
    assert _markers(table) == []
