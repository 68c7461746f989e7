"""The query log without Spark: buffering, flushing, several processes, retention."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakelayout.advisor import querylog as ql
from lakelayout.advisor.advisor import AUTO_MIN_BYTES, AUTO_OPTIMIZE
from lakelayout.api import Table
from lakelayout.errors import InvalidOption


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [1, 2, 3]}))
    return path


def test_records_are_buffered_until_flushed_and_read_back_in_order(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    for i in range(3):
        log.record(ql.QueryRecord(table_version=0, predicate=f"a > {i}", features=("a",)))
    assert log.pending() == 3
    assert not log.exists()  # nothing written on the record's path
    unflushed = log.read(flush=False)  # queued records are read from memory
    assert unflushed.num_rows == 3 and not log.exists()
    assert log.flush() == 3 and log.pending() == 0
    data = log.read()
    assert data.column("predicate").to_pylist() == ["a > 0", "a > 1", "a > 2"]
    assert data.column("features").to_pylist() == [["a"]] * 3
    assert data.schema == ql.SCHEMA
    # any Delta reader: delta-rs directly
    assert DeltaTable(log.path).to_pyarrow_table().num_rows == 3


def test_a_failing_flush_warns_and_keeps_the_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    blocker = Path(log.path)
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a directory")  # the log cannot be created here
    log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with caplog.at_level(logging.WARNING, logger="lakelayout.advisor.querylog"):
        assert log.flush() == 0
    assert "flush of 1 records failed" in caplog.text
    assert log.pending() == 1
    blocker.unlink()
    assert log.flush() == 1
    assert log.read().column("predicate").to_pylist() == ["a = 1"]


def test_a_flush_that_fails_after_its_commit_writes_its_records_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs can raise after the commit (its checkpoint or log clean-up on a full
    disk): the records were queued again and written twice, and the advisor counted those
    queries twice (an audit)."""
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    real = ql.write_deltalake

    def then_full(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise OSError(28, "No space left on device")

    for n, first in enumerate([True, False]):  # the log's first commit, then a later one
        log.record(ql.QueryRecord(table_version=0, predicate=f"a = {n}"))
        with monkeypatch.context() as patch:
            patch.setattr(ql, "write_deltalake", then_full)
            assert log.flush() == 1 and log.pending() == 0, first
    log.record(ql.QueryRecord(table_version=0, predicate="a = 2"))
    assert log.flush() == 1
    assert log.read().column("predicate").to_pylist() == ["a = 0", "a = 1", "a = 2"]
    # a write that raises before its commit still keeps its records for the next flush
    with monkeypatch.context() as patch:
        patch.setattr(ql, "write_deltalake", lambda *a, **k: (_ for _ in ()).throw(OSError(28)))
        log.record(ql.QueryRecord(table_version=0, predicate="a = 3"))
        assert log.flush() == 0 and log.pending() == 1
    assert log.flush() == 1 and log.read().num_rows == 4


def test_session_and_table_switches() -> None:
    assert ql.is_enabled({})
    assert not ql.is_enabled({ql.ENABLED_PROPERTY: "false"})
    assert not ql.is_enabled({}, "FALSE")
    assert ql.is_enabled({ql.ENABLED_PROPERTY: "true"}, "true")
    ql.set_enabled(False)
    try:
        assert not ql.is_enabled({})
    finally:
        ql.set_enabled(True)


def test_retention_deletes_old_and_excess_records_and_compacts(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    for i in range(4):
        log.record(ql.QueryRecord(table_version=0, predicate=f"old {i}", ts=old))
        log.flush()
    for i in range(5):
        log.record(ql.QueryRecord(table_version=0, predicate=f"new {i}"))
        log.flush()
    result = log.maintain(retention_days=30, max_records=3)
    assert result.records_deleted == 6
    assert result.files_before == 9 and result.files_after == 1
    assert log.read().column("predicate").to_pylist() == ["new 2", "new 3", "new 4"]
    with pytest.raises(ql.InvalidOption, match="retention_days must be a finite number > 0"):
        log.maintain(retention_days=0)


_WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from lakelayout.advisor import querylog as ql
    ql.FLUSH_RECORDS = 7          # many small flushes, interleaved with the other process
    log = ql.QueryLog(sys.argv[1])
    for i in range(int(sys.argv[3])):
        log.record(ql.QueryRecord(table_version=0, predicate=f"{sys.argv[2]} {i}"))
    # the rest is written by the exit flush
    """
)


def test_two_processes_logging_to_one_table_lose_no_record(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    n = 120
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER_SCRIPT, uri, name, str(n)])
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    data = ql.QueryLog(uri).read()
    assert data.num_rows == 2 * n
    keys = set(zip(data["session"].to_pylist(), data["seq"].to_pylist(), strict=True))
    assert len(keys) == 2 * n  # no duplicate either
    expected = {f"{name} {i}" for name in ("left", "right") for i in range(n)}
    assert set(data["predicate"].to_pylist()) == expected
    assert len(set(data["session"].to_pylist())) == 2


_ONE_RUN_SCRIPT = textwrap.dedent(
    """
    import sys
    from lakelayout.advisor import querylog as ql
    log = ql.QueryLog(sys.argv[1])
    for i in range(2):  # a short run: two flushes, far from its own 25th
        log.record(ql.QueryRecord(table_version=0, predicate=f"run {i}"), max_records=5)
        log.flush()
    """
)


def test_a_short_lived_process_maintains_the_log_on_the_version_that_is_due(
    tmp_path: Path,
) -> None:
    """Maintenance ran on every 25th flush of one process: processes that flush a few
    times each (the CLI, cron jobs) never maintained the log, whatever its limits (an
    audit: 40 of them left 120 records in 40 files with maxRecords=5). The flush that
    takes a version that is a multiple of 25 maintains it, in whichever process."""
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    for i in range(ql.MAINTAIN_EVERY - 1):  # versions 0..23; this process's 24 flushes
        log.record(ql.QueryRecord(table_version=0, predicate=f"here {i}"), max_records=5)
        log.flush()
    assert len(DeltaTable(log.path).file_uris()) == ql.MAINTAIN_EVERY - 1
    run = subprocess.run([sys.executable, "-c", _ONE_RUN_SCRIPT, uri], timeout=120)
    assert run.returncode == 0
    # its second flush took version 25: the newest 5 records, in one file
    assert len(DeltaTable(log.path).file_uris()) == 1
    assert log.read().column("predicate").to_pylist() == [
        "here 21", "here 22", "here 23", "run 0", "run 1",
    ]  # fmt: skip


_MAINTAINER_SCRIPT = textwrap.dedent(
    """
    import sys
    from lakelayout.advisor import querylog as ql
    log = ql.QueryLog(sys.argv[1])
    for i in range(int(sys.argv[3])):
        log.record(ql.QueryRecord(table_version=0, predicate=f"{sys.argv[2]} {i}"))
        log.flush()
        log.maintain(max_records=10_000)   # compacts, racing the other process's
    """
)


def test_two_processes_maintaining_one_log_duplicate_no_record(tmp_path: Path) -> None:
    """Compactions (dataChange=false) and appends of two processes race on one log.

    delta-rs's own retry lets a compaction commit over one that already
    removed the same files (it ignores a winner's dataChange=false removes),
    which doubled the log's records; maintenance now commits each step at
    exactly the next version or not at all.
    """
    uri = _table(tmp_path)
    n = 20
    procs = [
        subprocess.Popen([sys.executable, "-c", _MAINTAINER_SCRIPT, uri, name, str(n)])
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    predicates = ql.QueryLog(uri).read().column("predicate").to_pylist()
    assert sorted(predicates) == sorted(
        f"{name} {i}" for name in ("left", "right") for i in range(n)
    )


def test_records_of_a_deleted_table_are_dropped_not_written(tmp_path: Path) -> None:
    log = ql.QueryLog(str(tmp_path / "gone"))
    log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    assert log.flush() == 0 and log.pending() == 0
    assert not (tmp_path / "gone").exists()


def test_records_of_a_table_created_again_at_its_path_are_dropped_not_given_to_the_new_one(
    tmp_path: Path,
) -> None:
    """A table deleted and created again at its path before the flush is another table:
    the old one's queued records went into the new one's log, and its advisor counted
    queries never run on it (an audit). Records carry the Delta table id they were
    queued for; a record without one is written as before."""
    import shutil

    from lakelayout.table import delta

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    old_id = delta.snapshot(uri).metadata.id  # type: ignore[union-attr]
    log.record(ql.QueryRecord(table_version=0, predicate="old = 1"), table_id=old_id)
    shutil.rmtree(uri)
    write_deltalake(uri, pa.table({"b": [1]}))
    new_id = delta.snapshot(uri).metadata.id  # type: ignore[union-attr]
    assert new_id != old_id
    log.record(ql.QueryRecord(table_version=0, predicate="new = 1"), table_id=new_id)
    log.record(ql.QueryRecord(table_version=0, predicate="unnamed = 1"))
    assert log.flush() == 2 and log.pending() == 0
    assert sorted(log.read().column("predicate").to_pylist()) == ["new = 1", "unnamed = 1"]
    assert ql._WRITER.queued(uri) == []  # nothing left in flight either


def test_the_log_keeps_two_days_of_commit_files_not_delta_s_thirty(tmp_path: Path) -> None:
    """Each flush is a commit; with Delta's default log retention (30 days) a table
    scanned every few seconds kept about 500,000 commit files, listed at every flush (an
    audit). A new log keeps 2 days of them; a log made before gets the property at its
    next maintenance; commit files older than that go at delta-rs's next checkpoint."""
    import os
    import time

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    for i in range(100):  # version 99: delta-rs's checkpoint
        log.record(ql.QueryRecord(table_version=0, predicate=f"a = {i}"))
        log.flush()
        if i == 0:  # set as the first flush creates the log
            assert DeltaTable(log.path).metadata().configuration == ql.LOG_PROPERTIES
    folder = Path(log.path) / "_delta_log"
    assert (folder / f"{99:020d}.checkpoint.parquet").exists()
    old = time.time() - 3 * 86400  # all of it three days old, the checkpoint too
    for entry in folder.iterdir():
        os.utime(entry, (old, old))
    DeltaTable(log.path).cleanup_metadata()  # what delta-rs runs after its next checkpoint
    commits = sorted(int(p.name[:20]) for p in folder.glob("*.json"))
    assert commits[0] == 99 and len(commits) > 1, commits[:3]  # 30 days kept them all
    assert log.read().num_rows == 100  # records are the retention's business, not this

    older = str(tmp_path / "older")  # a log written before the property was set
    write_deltalake(older, pa.table({"a": [1]}))
    ql.QueryLog(older).record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    ql.QueryLog(older).flush()
    path = ql.log_path(older)
    DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})
    ql.maintain(older)
    assert DeltaTable(path).metadata().configuration == ql.LOG_PROPERTIES


def test_a_timed_run_is_held_back_from_flushes_and_written_with_its_seconds(
    tmp_path: Path,
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    handle = log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with handle.timed(columns=["a"]):
        # the run's record waits for its time; the others are written meanwhile
        log.record(ql.QueryRecord(table_version=0, predicate="a = 2"))
        assert log.flush() == 1 and log.pending() == 1
        assert log.read(flush=False).column("run_seconds").to_pylist() == [None, None]
    assert handle.run_seconds is not None and handle.run_seconds >= 0
    assert log.flush() == 1
    rows = {r["predicate"]: (r["run_seconds"], r["columns"]) for r in log.read().to_pylist()}
    assert rows == {"a = 2": (None, None), "a = 1": (handle.run_seconds, ["a"])}


@pytest.mark.parametrize("scanned", [None, ["a", "b"]])
def test_a_full_read_timed_after_a_count_keeps_the_scans_own_columns(
    tmp_path: Path, scanned: list[str] | None
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    handle = log.record(ql.QueryRecord(table_version=0, predicate="a = 1", columns=scanned))
    with handle.timed(columns=["a"]):  # a count: the filter's column only
        pass
    with handle.timed():  # then the scan's own read (None: every column)
        pass
    assert log.read().column("columns").to_pylist() == [scanned]


def test_a_run_that_fails_or_comes_after_the_flush_records_no_time(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    failed = log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with pytest.raises(ZeroDivisionError), failed.timed(columns=["a"]):
        _ = 1 / 0
    late = log.record(ql.QueryRecord(table_version=0, predicate="a = 2"))
    assert log.flush() == 2  # nothing held: both written
    with late.timed():
        pass
    assert late.run_seconds is None and log.pending() == 0
    data = log.read()
    assert data.column("run_seconds").to_pylist() == [None, None]
    assert data.column("columns").to_pylist() == [None, None]  # nor the run's columns


def test_a_held_record_is_written_once_its_hold_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    monkeypatch.setattr(ql, "MAX_HOLD_SECONDS", 0.0)  # a run that never ends, on fast-forward
    handle = log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with handle.timed():
        assert log.flush() == 1  # the hold has expired: not kept forever
    assert log.read().column("run_seconds").to_pylist() == [None]


def test_a_log_written_before_run_seconds_existed_is_read_and_appended_to(
    tmp_path: Path,
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    old_schema = pa.schema([f for f in ql.SCHEMA if f.name not in ql.ADDED_COLUMNS])
    old = pa.Table.from_pylist([ql.QueryRecord(table_version=0, predicate="a = 0").row()],
                               schema=old_schema)  # fmt: skip
    write_deltalake(log.path, old)
    assert log.read().column("run_seconds").to_pylist() == [None]
    handle = log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with handle.timed():
        pass
    data = log.read()
    assert data.schema == ql.SCHEMA
    assert data.column("run_seconds").to_pylist() == [None, handle.run_seconds]
    assert "run_seconds" in DeltaTable(log.path).schema().to_arrow().names


def test_a_remote_tables_scans_are_not_recorded_and_it_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Records of s3:// tables were queued, then dropped at each flush as "table is gone"
    at INFO level (found by an audit): sidecars live beside local tables only."""
    with caplog.at_level(logging.WARNING, logger="lakelayout.advisor.querylog"):
        for _ in range(3):
            assert ql.log_scan("s3://bucket/remote-t", {}, None, None, None, 0.1) is None
    said = [r for r in caplog.records if "s3://bucket/remote-t" in r.getMessage()]
    assert len(said) == 1 and "not a local table" in said[0].getMessage()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (ql.RETENTION_PROPERTY, "abc", "must be a number of days > 0 and <= 700,000, got 'abc'"),
        (ql.RETENTION_PROPERTY, "inf", "must be a number of days > 0 and <= 700,000, got 'inf'"),
        (ql.RETENTION_PROPERTY, "nan", "must be a number of days > 0 and <= 700,000, got 'nan'"),
        (ql.RETENTION_PROPERTY, "0", "must be a number of days > 0 and <= 700,000, got '0'"),
        (ql.MAX_RECORDS_PROPERTY, "-5", "must be a whole number >= 1, got '-5'"),
        (ql.MAX_RECORDS_PROPERTY, "many", "must be a whole number >= 1, got 'many'"),
        (ql.ENABLED_PROPERTY, "no", "must be 'true' or 'false', got 'no'"),
        (AUTO_OPTIMIZE, "yes", "must be 'true' or 'false', got 'yes'"),
        (AUTO_MIN_BYTES, "-1", "must be a whole number of bytes >= 0, got '-1'"),
    ],
)
def test_create_refuses_a_bad_advisor_property_before_anything_is_written(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    path = tmp_path / "t"
    with pytest.raises(InvalidOption) as err:
        Table.create(str(path), schema=pa.schema([("a", pa.int64())]), properties={name: value})
    assert str(err.value) == f"table property {name} {message}"
    assert not path.exists()


def test_create_takes_the_advisor_properties_spark_would() -> None:
    good = {
        ql.ENABLED_PROPERTY: " FALSE ",
        AUTO_OPTIMIZE: "True",
        ql.RETENTION_PROPERTY: "0.5",
        ql.MAX_RECORDS_PROPERTY: "10",
    }
    from lakelayout.advisor.advisor import check_properties

    check_properties(good)  # no error
    assert ql.properties_limits(good) == (0.5, 10)
    assert ql.properties_limits({}) == (ql.DEFAULT_RETENTION_DAYS, ql.DEFAULT_MAX_RECORDS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retention_days": float("inf")}, "retention_days must be a finite number > 0"),
        ({"retention_days": float("nan")}, "retention_days must be a finite number > 0"),
        ({"retention_days": 1e9}, "retention_days must be a finite number > 0"),
        ({"retention_days": 0}, "retention_days must be a finite number > 0"),
        ({"retention_days": "7"}, "retention_days must be a number, got '7'"),
        ({"max_records": 0}, "max_records must be a whole number >= 1, got 0"),
        ({"max_records": 2.5}, "max_records must be a whole number >= 1, got 2.5"),
    ],
)
def test_maintenance_refuses_limits_it_cannot_apply(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    with pytest.raises(InvalidOption, match=message):
        log.maintain(**kwargs)  # type: ignore[arg-type]
    assert log.read().num_rows == 1


def test_the_decision_log_is_maintained_every_25_versions(tmp_path: Path) -> None:
    """The decision log took one commit and one file per automatic decision, for ever
    (an audit: 202 files after 100 appends; VACUUM left them). It is compacted like the
    query log, keeping the newest rows."""
    from lakelayout.advisor.decisions import DecisionLog, DecisionRow

    uri = _table(tmp_path)
    decisions = DecisionLog(uri)
    for i in range(ql.MAINTAIN_EVERY):  # versions 0..24
        decisions.append(DecisionRow(kind="decision", reason=f"r{i}", outcome="skipped"))
    assert len(DeltaTable(decisions.path).file_uris()) == ql.MAINTAIN_EVERY
    decisions.append(DecisionRow(kind="decision", reason="due", outcome="skipped"))  # 25
    assert len(DeltaTable(decisions.path).file_uris()) == 1
    reasons = [r["reason"] for r in decisions.rows()]
    assert reasons == [f"r{i}" for i in range(ql.MAINTAIN_EVERY)] + ["due"]
    result = decisions.maintain(max_rows=2)
    assert result.records_deleted == ql.MAINTAIN_EVERY - 1
    assert [r["reason"] for r in decisions.rows()] == [f"r{ql.MAINTAIN_EVERY - 1}", "due"]


def test_records_being_flushed_are_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush took the records out of memory before its commit put them on disk: a
    reader in between (the advisor reads with flush=False) saw none of them, and decided
    on "only 0 queries logged" (a CI run). Now they are read from memory until the
    commit, and once after it. The commit is held in the window by wrapping the log's
    append (it then runs as it is)."""
    import threading

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    for i in range(3):
        log.record(ql.QueryRecord(table_version=0, predicate=f"a > {i}"))
    real, entered, go = ql._append, threading.Event(), threading.Event()

    def slow(path: str, rows: Any) -> None:
        entered.set()
        assert go.wait(30)
        real(path, rows)

    monkeypatch.setattr(ql, "_append", slow)
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    assert entered.wait(30)
    assert log.read(flush=False).num_rows == 3  # in flight: from memory
    go.set()
    flusher.join()
    assert log.pending() == 0
    assert log.read(flush=False).num_rows == 3  # committed: from disk, once


def test_maintenance_deletes_the_files_of_writes_killed_before_their_commit(
    tmp_path: Path,
) -> None:
    """A flush or a compaction killed between its file and its commit left the file for
    good: the log's vacuum (lite) and Table.vacuum (which leaves _lakelayout/ alone) never
    listed it (an audit). Maintenance now deletes such files once an hour old; a younger
    one may be a write about to commit, and stays."""
    import os
    import time

    import pyarrow.parquet as pq

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    log.flush()
    old, young = Path(log.path) / "part-killed-old.parquet", Path(log.path) / "part-young.parquet"
    for orphan in (old, young):
        pq.write_table(pa.table({"x": [1]}), orphan)
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    log.maintain()
    assert not old.exists() and young.exists()
    assert log.read().column("predicate").to_pylist() == ["a = 1"]


def test_a_corrupt_log_commit_is_table_corrupt_naming_the_log(tmp_path: Path) -> None:
    """A commit file that is not JSON raised delta-rs's raw DeltaError with a native
    backtrace from QueryLog.read and the advisor (an audit)."""
    from lakelayout.errors import TableCorrupt

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    log.record(ql.QueryRecord(table_version=0, predicate="a = 1"))
    log.flush()
    (Path(log.path) / "_delta_log" / "00000000000000000000.json").write_text("{not json")
    with pytest.raises(TableCorrupt, match=r"the Delta log of '.*querylog' cannot be read"):
        log.read()


def test_logs_another_tool_rewrote_are_refused_naming_them_or_read_without_bad_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A query or decision log of another schema raised a raw KeyError from every
    decision and from the CLI; a null where lakelayout always writes a value a raw
    ValueError, and a null time a TypeError in ``lakelayout log`` (an audit). The log is
    refused by name, a record with such a null left out with a warning."""
    from typer.testing import CliRunner

    from lakelayout.advisor.decisions import DecisionLog
    from lakelayout.cli import app
    from lakelayout.errors import StateUnreadable

    uri = _table(tmp_path)
    log = ql.QueryLog(uri)
    loose = pa.schema([f.with_nullable(True) for f in ql.SCHEMA])
    rows = [ql.QueryRecord(table_version=0, predicate=f"a = {i}").row() for i in range(3)]
    rows[1]["predicate"] = None
    rows[2]["scan_seconds"] = None
    write_deltalake(log.path, pa.Table.from_pylist(rows, schema=loose))
    with caplog.at_level(logging.WARNING, logger="lakelayout.advisor.querylog"):
        assert log.read().column("predicate").to_pylist() == ["a = 0", "a = 2"]
    assert "1 record(s) with a null in ['predicate'] left out" in caplog.text
    result = CliRunner().invoke(app, ["log", uri])
    assert result.exit_code == 0 and "a = 2" in result.output, result.output

    other = str(tmp_path / "other")
    write_deltalake(other, pa.table({"a": [1]}))
    alien = ql.QueryLog(other)
    write_deltalake(alien.path, pa.Table.from_pylist(rows[:1], schema=loose).drop_columns(["seq"]))
    with pytest.raises(StateUnreadable, match=r"query log at .* has no column\(s\) \['seq'\]"):
        alien.read()
    result = CliRunner().invoke(app, ["log", other])
    assert result.exit_code == 2 and "has no column(s) ['seq']" in result.output
    decisions = DecisionLog(other)
    write_deltalake(decisions.path, pa.table({"ts": ["x"], "kind": [1]}))
    with pytest.raises(StateUnreadable, match=r"decision log at .* has no column\(s\) \['id',"):
        decisions.read()
