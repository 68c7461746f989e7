"""Threads of one process sharing a table (Arrow data: no Spark job).

A thread pool appending partitions, or a service scanning while a scheduler
optimizes, is a common way to use a library; an audit found that threads broke
what separate processes did not reach as often: the index store, index
declarations and Table.create of one path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelayout.api import Table
from lakelayout.errors import LocationNotEmpty, TableExists
from lakelayout.skipping.indexes import BloomFilter, MinMax, Prefix, ValueList


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "cat": [f"c{start}"] * n})


def _together(n: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads released at once; each one's result or exception."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as exc:  # the test looks at what each thread got
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_appends_from_threads_keep_the_index_store_readable_and_complete(tmp_path: Path) -> None:
    """Each append stores its files' index metadata: from four threads at once, one's
    garbage collection deleted the segment another was publishing (the store was
    unreadable, refresh too, in 8 rounds of 10), or an older list of live files marked
    another append's rows dead."""
    for round_ in range(3):
        t = Table.create(str(tmp_path / f"t{round_}"), _rows(0, 10))
        t.indexes.add(ValueList("cat"), MinMax("id"))

        def append(w: int, t: Table = t) -> None:
            for j in range(3):
                t.append(_rows(1000 * (1 + w * 3 + j), 10))

        assert _together(4, append) == [None] * 4
        files = len(t.snapshot().files)
        assert files == 13
        for described in t.indexes.describe():  # raised StateUnreadable
            assert described.files_covered == files - 1, described  # all but create's
        assert t.scan("cat = 'c4000'").report.files_kept == 1


def test_indexes_declared_from_threads_at_once_are_all_declared(tmp_path: Path) -> None:
    """Each add() read the declarations, added its own and wrote them back: of four
    declared at once, some were lost although every add() returned its name."""
    for round_ in range(10):
        path = str(tmp_path / f"t{round_}")
        Table.create(
            path, pa.table({"a": [1, 2], "b": ["x", "y"], "c": [1.0, 2.0], "d": ["p", "q"]})
        )
        declared = [MinMax("a"), ValueList("b"), BloomFilter("c"), Prefix("d", length=1)]
        returned = _together(
            4, lambda i, path=path, declared=declared: Table(path).indexes.add(declared[i])
        )
        assert all(isinstance(r, list) for r in returned), returned
        assert sorted(i.name for i in Table(path).indexes.list()) == sorted(
            name for r in returned for name in r
        )


def test_two_creates_of_one_path_make_one_table(tmp_path: Path) -> None:
    """Both passed the 'nothing there' check before either wrote: both could succeed
    (version 1 a second CREATE TABLE over the first), or the loser's cleanup deleted the
    winner's new table (a create returned and its table was gone)."""
    for round_ in range(20):
        path = str(tmp_path / f"t{round_}")
        got = _together(2, lambda w, path=path: Table.create(path, _rows(1000 * w, 50)))
        won = [w for w in (0, 1) if isinstance(got[w], Table)]
        assert len(won) == 1, got
        assert isinstance(got[1 - won[0]], TableExists), got
        table = DeltaTable(path)
        assert table.version() == 0
        ids = sorted(table.to_pyarrow_table().column("id").to_pylist())
        assert ids == list(range(1000 * won[0], 1000 * won[0] + 50))


def test_a_create_refused_by_another_creators_claim_touches_nothing(tmp_path: Path) -> None:
    """A location holding only another create's `_lakelayout` claim: TableExists saying
    so (it said "the folder already holds _lakelayout/ and no Delta table"; a review),
    before the check and at the claim alike, and nothing there is touched."""
    from lakelayout.table import delta

    path = tmp_path / "t"
    (path / "_lakelayout").mkdir(parents=True)  # another create is under way
    (path / "_lakelayout" / "theirs").write_text("x")
    with pytest.raises(TableExists, match=r"another Table\.create is creating a table"):
        Table.create(str(path), _rows(0, 5))
    with pytest.raises(TableExists, match=r"another Table\.create is creating a table"):
        delta.claim_location(str(path))  # one that passed the check together with it
    assert sorted(os.listdir(path)) == ["_lakelayout"]
    assert os.listdir(path / "_lakelayout") == ["theirs"]
    # further along: its log folder and data files written, its commit not yet there
    (path / "_delta_log").mkdir()
    (path / "ll-part-0.parquet").write_text("x")
    (path / "p=1").mkdir()
    with pytest.raises(TableExists, match=r"another Table\.create is creating a table"):
        Table.create(str(path), _rows(0, 5))
    # a file no create writes: the folder is someone's data, not a create under way
    (path / "notes.csv").write_text("x")
    with pytest.raises(LocationNotEmpty, match=r"notes\.csv"):
        Table.create(str(path), _rows(0, 5))
    assert sorted(os.listdir(path)) == [
        "_delta_log",
        "_lakelayout",
        "ll-part-0.parquet",
        "notes.csv",
        "p=1",
    ]


@pytest.mark.spark
def test_a_failed_create_releases_its_claim(spark: Any, tmp_path: Path) -> None:
    """A create that fails after claiming the location (its write job fails: a division
    by zero under ANSI) leaves it as it was: a later create is not refused."""
    path = str(tmp_path / "t")
    with pytest.raises(Exception, match="DIVIDE_BY_ZERO"):
        Table.create(path, spark.sql("SELECT id, id DIV (id - id) AS x FROM range(3)"))
    assert not os.path.exists(path)
    assert Table.create(path, spark.sql("SELECT id FROM range(3)")).version == 0


def test_appends_that_lose_to_property_changes_commit(tmp_path: Path) -> None:
    """An append whose commit lost the race to a commit that changed only a property
    (cluster_by, the online state) failed with a CommitConflict "that changed data it
    planned on" (58 of 150 appends in an audit): it commits on the new version now."""
    t = Table.create(str(tmp_path / "t"), _rows(0, 5))
    stop = threading.Event()

    def toggle() -> None:
        flip = 0
        while not stop.is_set():
            t.cluster_by(["id"] if flip % 2 == 0 else None)
            flip += 1

    toggler = threading.Thread(target=toggle)
    toggler.start()
    try:
        got = _together(
            2, lambda w: [t.append(_rows(1000 * (1 + w * 20 + j), 5)) for j in range(12)]
        )
    finally:
        stop.set()
        toggler.join()
    assert not [g for g in got if isinstance(g, Exception)], got
    ids = sorted(DeltaTable(t.uri).to_pyarrow_table().column("id").to_pylist())
    expected = list(range(5)) + [
        i
        for w in range(2)
        for j in range(12)
        for i in range(1000 * (1 + w * 20 + j), 1000 * (1 + w * 20 + j) + 5)
    ]
    assert ids == sorted(expected)


@pytest.mark.spark
def test_sql_creates_from_threads_keep_every_name_and_if_not_exists_waits(
    spark: Any, tmp_path: Path
) -> None:
    """Threads creating tables through lakelayout.sql: the catalog file was read and
    written back by each (a table's name could be lost), and of two CREATE TABLE IF NOT
    EXISTS of one name one failed with TableExists while the other created it."""
    import lakelayout
    from lakelayout.sql import Catalog

    for round_ in range(3):
        wh = str(tmp_path / f"wh{round_}")

        def create(i: int, wh: str = wh) -> Any:
            if i < 4:
                return lakelayout.sql(spark, f"CREATE TABLE t{i} (a INT) USING delta", warehouse=wh)
            return lakelayout.sql(
                spark, "CREATE TABLE IF NOT EXISTS same (a INT) USING delta", warehouse=wh
            )

        got = _together(6, create)
        assert all(isinstance(g, Table) for g in got), got
        assert got[4].uri == got[5].uri
        assert sorted(Catalog(wh).entries()) == ["same", "t0", "t1", "t2", "t3"]
        assert DeltaTable(got[4].uri).version() == 0


def test_a_create_killed_before_its_commit_is_cleared_by_the_next(tmp_path: Path) -> None:
    """A create killed before its first commit left its claim and its data files: every
    later create was refused, and removing the claim as told then failed on the files
    (an audit). While it runs it is named; once its process is gone the next create
    clears what it left and creates the table."""
    from . import processes

    path, ready, log = tmp_path / "t", tmp_path / "ready", tmp_path / "child.log"
    child = processes.python(Path(__file__).with_name("create_hang.py"), str(path), str(ready),
                             log=log)  # fmt: skip
    try:
        processes.wait_for(ready.exists, what="hanging create", proc=child, log=log)
        left = sorted(os.listdir(path))
        assert "_lakelayout" in left and any(n.startswith("ll-") for n in left), left
        with pytest.raises(TableExists, match=rf"process {child.pid} on "):
            Table.create(str(path), _rows(0, 5))  # it still runs: its claim holds
        assert sorted(os.listdir(path)) == left
    finally:
        processes.kill(child)
    created = Table.create(str(path), _rows(0, 5))
    table = DeltaTable(created.uri)
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(5))
    data = {n for n in os.listdir(path) if n.startswith("ll-")}
    assert data == {os.path.basename(u) for u in table.file_uris()}  # its files are gone
    assert not os.path.exists(path / "_lakelayout" / "creating.json")


def test_a_create_killed_between_its_commits_is_named_and_its_table_kept(
    tmp_path: Path,
) -> None:
    """A create with lakelayout properties commits the empty table, then its rows: killed
    in between, it left an empty table, and a later create said only that a table exists
    (an audit). It says what happened now; the table is not cleared, another process may
    be writing to it (a review: an append committed into a table being cleared lost its
    rows)."""
    from . import processes

    path, ready, log = tmp_path / "t", tmp_path / "ready", tmp_path / "child.log"
    child = processes.python(Path(__file__).with_name("create_hang.py"), str(path), str(ready),
                             "between", log=log)  # fmt: skip
    try:
        processes.wait_for(ready.exists, what="hanging create", proc=child, log=log)
        with pytest.raises(TableExists, match="already exists") as running:
            Table.create(str(path), _rows(0, 5))  # it still runs: its table stands
        assert "interrupted" not in str(running.value)
    finally:
        processes.kill(child)
    with pytest.raises(TableExists, match=rf"process {child.pid} on .*, gone\) was interrupted"):
        Table.create(str(path), _rows(0, 5))
    Table(str(path)).append(_rows(7, 3).select(["id"]))  # the table stays, and takes rows
    table = DeltaTable(str(path))
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [7, 8, 9]
    assert "lakelayout.clusteringColumns" in table.metadata().configuration
    with pytest.raises(TableExists, match="a Delta table already exists") as done:
        Table.create(str(path), _rows(0, 5))  # it has rows now: a table like any
    assert "interrupted" not in str(done.value)


def test_a_finished_tables_claim_left_by_a_killed_create_keeps_the_table(
    tmp_path: Path,
) -> None:
    """A create killed after its rows' commit, before it dropped its claim: the table
    holds rows and stays; a create there is refused as on any table."""
    import json
    import socket
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / "t"
    Table.create(str(path), _rows(0, 5))
    record = {"pid": dead.pid, "host": socket.gethostname(), "existed": False, "token": "gone"}
    (path / "_lakelayout" / "creating.json").write_text(json.dumps(record))
    with pytest.raises(TableExists, match="already exists"):
        Table.create(str(path), _rows(10, 15))
    rows = DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()
    assert sorted(rows) == list(range(5))


def test_a_create_that_judged_a_claim_dead_late_leaves_anothers_table_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two creates find a dead creator's claim. One (C) pauses right after judging it
    dead; the other (B) clears the leftovers, claims the folder and commits. C then
    renamed B's claim away and deleted B's log: B's table was gone (a review). Now C
    checks the claim it moved is the dead one's, and yields (TableExists)."""
    import json
    import socket
    import subprocess
    import sys

    from lakelayout.stats.bounds import LAKELAYOUT_FILE_PREFIX
    from lakelayout.table import delta

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / "t"
    (path / "_lakelayout").mkdir(parents=True)
    (path / "_delta_log").mkdir()
    (path / f"{LAKELAYOUT_FILE_PREFIX}left.parquet").write_bytes(b"x")
    record = {"pid": dead.pid, "host": socket.gethostname(), "existed": False, "token": "gone"}
    (path / "_lakelayout" / "creating.json").write_text(json.dumps(record))
    judged, committed = threading.Event(), threading.Event()
    original = delta._interrupted_creator

    def late(root: str) -> Any:
        found = original(root)
        if threading.current_thread().name == "C" and found is not None:
            judged.set()
            committed.wait(60)  # B clears, claims and commits meanwhile
        return found

    monkeypatch.setattr(delta, "_interrupted_creator", late)
    got: dict[str, Any] = {}

    def create_c() -> None:
        try:
            got["C"] = Table.create(str(path), _rows(100, 3))
        except Exception as exc:
            got["C"] = exc

    c = threading.Thread(target=create_c, name="C")
    c.start()
    assert judged.wait(60)
    Table.create(str(path), _rows(0, 5))  # B
    committed.set()
    c.join(60)
    assert isinstance(got["C"], TableExists), got
    ids = sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())
    assert ids == list(range(5))
