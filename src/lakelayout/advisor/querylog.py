"""The query log: one record per scan, kept as a Delta table next to the data.

Thesis ch. 3 (the "Query Log" module of Fig. 3.1): every query leaves the
filters it used, the schema it read and what the scan cost, so that the
workload analyzer can later choose clustering features from what people
actually ran. Here the log of a table at ``<table>`` is itself a Delta table
at ``<table>/_lakelayout/querylog``, written with ``deltalake`` from Arrow
(no Spark job), so any Delta reader can read it.

Writes never sit on a query's path. :meth:`QueryLog.record` appends the
record to an in-memory queue and returns; a background thread appends the
queue to the Delta table every :data:`FLUSH_RECORDS` records or
:data:`FLUSH_SECONDS` seconds, whichever comes first, and everything left is
flushed at interpreter exit. A flush that fails logs a warning
(``logging``) and keeps its records for the next attempt (at most
:data:`MAX_PENDING` per table; the oldest are dropped beyond that), so a
failing log never fails a query. Several processes may log to one table:
each flush is one Delta append, and delta-rs retries an append whose
version was taken by another writer (appends never conflict).

The flush that takes a log version that is a multiple of
:data:`MAINTAIN_EVERY` (in whichever process: short-lived ones too)
*maintains* the log: records older than the
retention (``lakelayout.queryLog.retentionDays``, default 30) or beyond the
newest ``lakelayout.queryLog.maxRecords`` (default 100,000) are deleted and
the small files of many appends are compacted, both in one rewrite of the
log's live files committed like every lakelayout rewrite
(:func:`lakelayout.table.delta.commit`: it fails, and the pass is skipped,
when another process maintained the log first; delta-rs's own
``optimize.compact`` commits over a concurrent compaction of the same files
and duplicated the records), and files no version needs any more are
vacuumed. Each flush is a commit: the log's commit files are kept
:data:`LOG_PROPERTIES` long (``delta.logRetentionDuration``, 2 days; Delta's
default, 30 days, kept about 500,000 commit files of a table scanned every
few seconds, and every flush listed them; an audit). delta-rs removes older
ones when it writes a checkpoint (every 100 commits).

Logging is on by default. It is off for a table whose property
``lakelayout.queryLog.enabled`` is ``false``, for a Spark session whose conf
``spark.lakelayout.queryLog.enabled`` is ``false``, and for this process
after :func:`set_enabled(False) <set_enabled>`.

This module is pure (Arrow and deltalake); it never imports pyspark.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (see _Writer.close)
import contextlib
import datetime as dt
import functools
import itertools
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from lakelayout.errors import CommitConflict, InvalidOption, StateUnreadable
from lakelayout.table.location import is_local

logger = logging.getLogger(__name__)

#: where a table's query log lives, relative to the table root
LOG_DIR = os.path.join("_lakelayout", "querylog")
#: table property that turns the log off for one table ("false")
ENABLED_PROPERTY = "lakelayout.queryLog.enabled"
#: Spark session conf that turns the log off for every table the session scans ("false")
SESSION_CONF = "spark.lakelayout.queryLog.enabled"
RETENTION_PROPERTY = "lakelayout.queryLog.retentionDays"
MAX_RECORDS_PROPERTY = "lakelayout.queryLog.maxRecords"
DEFAULT_RETENTION_DAYS = 30.0
#: the longest retention: a cutoff further back than this is before year 1
MAX_RETENTION_DAYS = 700_000
DEFAULT_MAX_RECORDS = 100_000

#: a table's queue is flushed when it holds this many records ...
FLUSH_RECORDS = 200
#: ... or when its oldest record is this old
FLUSH_SECONDS = 5.0
#: records kept per table while flushes fail (the oldest are dropped beyond it)
MAX_PENDING = 10_000
#: maintenance (retention, compaction, vacuum) runs every this many versions of a log
MAINTAIN_EVERY = 25
#: a queued record whose query is being timed waits for its run time this long at most
MAX_HOLD_SECONDS = 600.0
#: the properties of the log tables lakelayout writes (the query log, the decision log):
#: their commit files are needed for no time travel, only for the latest version
LOG_PROPERTIES = {"delta.logRetentionDuration": "interval 2 days"}
#: the key of a held record's deadline (not a column: Arrow ignores keys outside the schema)
_HELD = "_held_until"
#: the key of the Delta table id a record was queued for (not a column either): a table
#: deleted and created again at its path before the flush is another table, and the
#: records of the old one were written into the new one's log (an audit)
_TABLE_ID = "_table_id"

SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("session", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("table_version", pa.int64(), nullable=False),
        pa.field("predicate", pa.string(), nullable=False),
        pa.field("features", pa.list_(pa.string())),
        pa.field("columns", pa.list_(pa.string())),
        pa.field("files_total", pa.int64()),
        pa.field("files_kept", pa.int64()),
        pa.field("bytes_total", pa.int64()),
        pa.field("bytes_kept", pa.int64()),
        pa.field("rows_total", pa.int64()),
        pa.field("rows_kept", pa.int64()),
        pa.field("planning_seconds", pa.float64()),
        pa.field("scan_seconds", pa.float64()),
        pa.field("run_seconds", pa.float64()),
    ]
)
#: columns added after the first version of the log: a log written before reads them as
#: nulls, and the next append adds them (``schema_mode="merge"``)
ADDED_COLUMNS = ("run_seconds",)

#: this process's id in the ``session`` column (host, pid and a random part)
SESSION_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
_SEQ = itertools.count()
_ENABLED: bool = True


@dataclass(frozen=True)
class QueryRecord:
    """One logged query.

    ``predicate`` is the canonical SQL of the bound predicate (``TRUE`` when the
    scan had none) and ``features`` its feature keys
    (:func:`lakelayout.advisor.filters.feature_keys`); ``columns`` the columns
    read (None: all); files/bytes/rows are the snapshot's totals and what
    pruning kept. ``planning_seconds`` is the pruning time and
    ``scan_seconds`` the whole ``Table.scan`` call (Spark runs the returned
    DataFrame later, outside it); ``run_seconds`` what Spark then took to run
    it, when the action went through the scan's timed path
    (``ScanResult.count``, ``ScanResult.timed``), else None. A count through
    ``ScanResult.count`` records as ``columns`` its predicate's columns, the
    only ones Spark reads for it.
    """

    table_version: int
    predicate: str
    features: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None
    files_total: int = 0
    files_kept: int = 0
    bytes_total: int = 0
    bytes_kept: int = 0
    rows_total: int = 0
    rows_kept: int = 0
    planning_seconds: float = 0.0
    scan_seconds: float = 0.0
    run_seconds: float | None = None
    source: str = "scan"
    ts: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def row(self) -> dict[str, Any]:
        """The record as one row of :data:`SCHEMA` (session and sequence number added)."""
        out = asdict(self)
        out["features"] = list(self.features)
        out["columns"] = None if self.columns is None else list(self.columns)
        out["session"] = SESSION_ID
        out["seq"] = next(_SEQ)
        return out


def set_enabled(enabled: bool) -> None:
    """Turn query logging on or off for every table in this process."""
    global _ENABLED
    _ENABLED = bool(enabled)


def is_enabled(configuration: Mapping[str, str], session_value: str | None = None) -> bool:
    """Whether a scan of a table with these properties logs (process, session, table)."""
    return not off_because(configuration, session_value)


def off_because(configuration: Mapping[str, str], session_value: str | None = None) -> str:
    """Why a scan of a table with these properties does not log ('' when it does)."""
    if not _ENABLED:
        return "query logging is off in this process (querylog.set_enabled(False))"
    if session_value is not None and session_value.strip().lower() == "false":
        return f"query logging is off in this Spark session ({SESSION_CONF}=false)"
    if configuration.get(ENABLED_PROPERTY, "").strip().lower() == "false":
        return f"query logging is off for this table ({ENABLED_PROPERTY}=false)"
    return ""


#: characters delta-rs, which writes the query and decision logs, cannot open in a path
#: (deltalake 1.6: it panics, "Invalid object store url", even on a percent-encoded URL)
_UNOPENABLE = "[]"


def unwritable_because(path: str) -> str:
    """Why delta-rs cannot write a log at ``path`` or below it ('' when it can)."""
    bad = sorted({c for c in path if c in _UNOPENABLE})
    if not bad:
        return ""
    return (
        f"delta-rs, which writes lakelayout's logs, cannot open a path holding "
        f"{' or '.join(map(repr, bad))} ('{path}')"
    )


def log_path(table_uri: str) -> str:
    """The query log's location for the table at ``table_uri``."""
    return os.path.join(table_uri, LOG_DIR)


# --------------------------------------------------------------------------- the writer


@dataclass
class _Queue:
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: rows taken by a flush that has not committed them yet: still this process's to
    #: read (a reader saw them neither queued nor on disk: the advisor once counted 0)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    since: float = 0.0
    retention_days: float = DEFAULT_RETENTION_DAYS
    max_records: int = DEFAULT_MAX_RECORDS


class _Writer:
    """The process-wide buffer and its background flushing thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queues: dict[str, _Queue] = {}
        self._added: dict[str, int] = {}
        self._io = threading.Lock()  # one flush at a time (thread, explicit, exit)
        self._thread: threading.Thread | None = None
        self._closed = False
        atexit.register(self.close)

    def add(self, table_uri: str, row: dict[str, Any], limits: tuple[float, int]) -> None:
        with self._lock:
            queue = self._queues.setdefault(table_uri, _Queue())
            if not queue.rows:
                queue.since = time.monotonic()
            queue.rows.append(row)
            self._added[table_uri] = self._added.get(table_uri, 0) + 1
            queue.retention_days, queue.max_records = limits
            if len(queue.rows) > MAX_PENDING:
                dropped = len(queue.rows) - MAX_PENDING
                del queue.rows[:dropped]
                logger.warning("query log of %s: %d unflushed records dropped", table_uri, dropped)
            self._start()
            if len(queue.rows) >= FLUSH_RECORDS:
                self._wake.notify()

    def added(self, table_uri: str) -> int:
        with self._lock:
            return self._added.get(table_uri, 0)

    def queued(self, table_uri: str) -> list[dict[str, Any]]:
        """A copy of the records of ``table_uri`` not written yet (being written included:
        a reader dedupes them against the log by session and sequence number)."""
        with self._lock:
            queue = self._queues.get(table_uri)
            return [*queue.in_flight, *queue.rows] if queue else []

    def pending(self, table_uri: str) -> int:
        with self._lock:
            queue = self._queues.get(table_uri)
            return len(queue.rows) if queue else 0

    def hold(self, table_uri: str, row: dict[str, Any]) -> bool:
        """Keep ``row`` out of flushes until :meth:`release` (or :data:`MAX_HOLD_SECONDS`);
        whether it was still queued (a record already written cannot take a run time)."""
        with self._lock:
            queue = self._queues.get(table_uri)
            if queue is None or not any(r is row for r in queue.rows):
                return False
            row[_HELD] = time.monotonic() + MAX_HOLD_SECONDS
            return True

    def release(
        self,
        row: dict[str, Any],
        run_seconds: float | None,
        columns: Sequence[str] | None = None,
    ) -> None:
        """Let a held ``row`` be flushed again, with its run time when there is one (and
        then the columns the run read: None for every column)."""
        with self._lock:
            if run_seconds is not None:
                row["run_seconds"] = float(run_seconds)
                row["columns"] = None if columns is None else list(columns)
            row.pop(_HELD, None)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="lakelayout-querylog", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._wake.wait(timeout=FLUSH_SECONDS / 2)
                if self._closed:
                    return
                now = time.monotonic()
                due = [
                    uri
                    for uri, q in self._queues.items()
                    if q.rows and (len(q.rows) >= FLUSH_RECORDS or now - q.since >= FLUSH_SECONDS)
                ]
            for uri in due:
                self.flush(uri)

    def flush(self, table_uri: str | None = None) -> int:
        """Write the queued records (of one table, or all); the number written."""
        written = 0
        with self._io:
            with self._lock:
                uris = list(self._queues) if table_uri is None else [table_uri]
            for uri in uris:
                written += self._flush_one(uri)
        return written

    def _flush_one(self, uri: str) -> int:
        with self._lock:
            queue = self._queues.get(uri)
            if queue is None or not queue.rows:
                return 0
            now = time.monotonic()
            ready = [self._closed or r.get(_HELD, 0.0) <= now for r in queue.rows]
            rows = [r for r, go in zip(queue.rows, ready, strict=True) if go]
            # the held ones wait for their run times (and count as new: due again later)
            queue.rows = [r for r, go in zip(queue.rows, ready, strict=True) if not go]
            if queue.rows:
                queue.since = now
            limits = (queue.retention_days, queue.max_records)
            queue.in_flight.extend(rows)
        if not rows:
            return 0
        written = rows
        try:
            if not os.path.isdir(os.path.join(uri, "_delta_log")):
                logger.info(
                    "query log: table %s is no longer there; %d records dropped", uri, len(rows)
                )
                return 0
            written = _of_the_table_there(uri, rows)
            if len(written) < len(rows):
                logger.info(
                    "query log: table %s was created again; %d records of the table that was "
                    "there dropped", uri, len(rows) - len(written),
                )  # fmt: skip
            if not written:
                return 0
            _append(log_path(uri), written)
        except Exception as exc:  # a failing log never fails anything else
            logger.warning(
                "query log of %s: flush of %d records failed: %s", uri, len(written), exc
            )
            with self._lock:
                queue.rows[:0] = written
                if len(queue.rows) > MAX_PENDING:
                    del queue.rows[: len(queue.rows) - MAX_PENDING]
            return 0
        finally:
            with self._lock:
                taken = {id(r) for r in rows}
                queue.in_flight = [r for r in queue.in_flight if id(r) not in taken]
        # the log's version counts every process's flushes: a process that flushes a few
        # times (the CLI, a cron job) maintains too, on the flush that reaches a multiple
        # (a count of this process's own flushes did it twice as often in a long-lived one)
        if maintenance_due(log_path(uri)):
            try:
                with delta_rs_panics(uri):
                    maintain(uri, retention_days=limits[0], max_records=limits[1])
            except Exception as exc:
                logger.warning("query log of %s: maintenance failed: %s", uri, exc)
        return len(written)

    def close(self) -> None:
        """Flush everything (at interpreter exit) and stop the thread.

        The writer's dependencies register their own exit hooks when
        ``concurrent.futures.thread`` is first imported; that is refused once
        the interpreter is shutting down, so the module imports it up front.
        """
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        self.flush()


_WRITER = _Writer()


def _of_the_table_there(uri: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``rows`` queued for the table now at ``uri`` (by its Delta table id; a row
    without one is kept)."""
    if all(r.get(_TABLE_ID) is None for r in rows):
        return rows
    from lakelayout.table import delta

    top = delta.head(uri)  # the log's latest metadata, not every file's statistics
    try:
        there = str(top.table.metadata().id)
    finally:
        delta.release(top)
    return [r for r in rows if r.get(_TABLE_ID) in (None, there)]


def _append(path: str, rows: Sequence[dict[str, Any]]) -> None:
    data = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    # "merge": a log written before a column was added gains it
    append_once(path, data, name="lakelayout query log", schema_mode="merge")


def append_once(
    path: str, data: pa.Table, *, name: str, schema_mode: Literal["merge"] | None = None
) -> None:
    """Append ``data`` to the Delta table at ``path`` (a log of lakelayout's), once: a write
    that raises after its commit (delta-rs's checkpoint or log clean-up on a full disk) is
    not an error, so its rows are not written again (the query log's were: an audit)."""
    from deltalake import CommitProperties

    from lakelayout.table.delta import COMMIT_INFO_KEY, committed_since

    refused = unwritable_because(path)
    if refused:  # (delta-rs panicked, and Rust printed its panic on stderr: an audit)
        raise StateUnreadable(f"{name} not written: {refused}")
    token = uuid.uuid4().hex
    started = int(time.time() * 1000)  # (not the log's version: a second read per append)
    try:
        with delta_rs_panics(path):
            write_deltalake(
                path, data, mode="append", schema_mode=schema_mode, name=name,
                configuration=LOG_PROPERTIES,  # (when it creates the log)
                commit_properties=CommitProperties(
                    custom_metadata={COMMIT_INFO_KEY: {"commit": token}}  # type: ignore[dict-item]
                ),
            )  # fmt: skip
    except Exception as exc:
        if committed_since(path, started, token):
            logger.info("%s at %s: committed, then: %s", name, path, exc)
            return
        raise


@contextlib.contextmanager
def delta_rs_panics(path: str) -> Iterator[None]:
    """A panic of delta-rs (pyo3's PanicException derives from BaseException, past every
    ``except Exception``) as a StateUnreadable: it killed the query log's thread for the
    rest of the process, e.g. on a table folder named ``t[1]`` (an audit)."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except Exception:
        raise
    except BaseException as exc:
        raise StateUnreadable(f"delta-rs failed on '{path}': {exc}") from exc


def conform(
    data: pa.Table, schema: pa.Schema, path: str, name: str, added: Sequence[str] = ()
) -> pa.Table:
    """``data`` (one of lakelayout's logs, read from disk at ``path``) in ``schema``'s
    columns, order and types: the ``added`` columns a log written before them lacks
    are nulls, and a record with a null where lakelayout always writes a value is left
    out with a warning. StateUnreadable naming the log when a column is missing or of a
    type that does not cast (another tool rewrote it: a raw KeyError or ValueError
    from every decision and from the CLI before; an audit)."""
    missing = [n for n in schema.names if n not in data.column_names and n not in added]
    if missing:
        raise StateUnreadable(
            f"the {name} at {path} is not lakelayout's: it has no column(s) {missing}; move "
            "it away and lakelayout starts a new one"
        )
    for column in added:
        if column not in data.column_names:
            field = schema.field(column)
            data = data.append_column(field, pa.nulls(data.num_rows, field.type))
    data = data.select(schema.names)
    required = [f.name for f in schema if not f.nullable and data[f.name].null_count]
    if required:
        valid = functools.reduce(pc.and_, [pc.is_valid(data[n]) for n in required])
        logger.warning(
            "%s at %s: %d record(s) with a null in %s left out",
            name,
            path,
            data.num_rows - pc.sum(valid).as_py(),
            required,
        )
        data = data.filter(valid)
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise StateUnreadable(
            f"the {name} at {path} is not lakelayout's: {exc}; move it away and lakelayout "
            "starts a new one"
        ) from None


def records_added(table_uri: str) -> int:
    """Records queued for ``table_uri`` by this process so far (monotonic): lets a caller
    tell whether a scan it ran was logged."""
    return _WRITER.added(table_uri)


def flush_all() -> int:
    """Flush every table's queued records now (tests, and before reading)."""
    return _WRITER.flush()


# --------------------------------------------------------------------------- per table


class QueryLog:
    """The query log of one table: ``record`` (buffered), ``flush``, ``read``, ``maintain``."""

    def __init__(self, table_uri: str) -> None:
        self.table_uri = table_uri
        self.path = log_path(table_uri)

    def record(
        self,
        entry: QueryRecord,
        *,
        retention_days: float = DEFAULT_RETENTION_DAYS,
        max_records: int = DEFAULT_MAX_RECORDS,
        table_id: str | None = None,
    ) -> PendingRecord:
        """Queue ``entry``; the background thread writes it. Never raises on I/O. The
        handle times the query's run (:meth:`PendingRecord.timed`). With ``table_id``
        (the Delta table's id) it is written only while that table is at the path."""
        row = entry.row()
        if table_id is not None:
            row[_TABLE_ID] = table_id
        _WRITER.add(self.table_uri, row, (retention_days, max_records))
        return PendingRecord(self.table_uri, row)

    def pending(self) -> int:
        """Records of this table queued in this process and not written yet."""
        return _WRITER.pending(self.table_uri)

    def flush(self) -> int:
        """Write this table's queued records now; how many were written."""
        return _WRITER.flush(self.table_uri)

    def exists(self) -> bool:
        return os.path.isdir(os.path.join(self.path, "_delta_log"))

    def read(
        self,
        *,
        since: dt.datetime | None = None,
        last: int | None = None,
        flush: bool = True,
    ) -> pa.Table:
        """Records (oldest first) newer than ``since`` and/or the ``last`` newest ones.

        Queued records of this process are flushed first; with ``flush=False``
        they are read from memory instead (no write). An absent log reads as an
        empty table of :data:`SCHEMA`.
        """
        from lakelayout.table import delta

        if flush:
            self.flush()
        # memory first, then the log: a record a flush commits in between is in both (and
        # kept once), never in neither
        queued = [] if flush else _WRITER.queued(self.table_uri)
        parts = []
        if self.exists():
            stored = delta.read_rows(self.path)
            parts.append(conform(stored, SCHEMA, self.path, "query log", ADDED_COLUMNS))
        if queued:
            written = (
                set(zip(parts[0]["session"].to_pylist(), parts[0]["seq"].to_pylist(), strict=True))
                if parts
                else set()
            )
            fresh = [r for r in queued if (r["session"], r["seq"]) not in written]
            if fresh:
                parts.append(pa.Table.from_pylist(fresh, schema=SCHEMA))
        data = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
        if since is not None:
            data = data.filter(pc.greater_equal(data["ts"], pa.scalar(_utc(since), SCHEMA[0].type)))
        order = pc.sort_indices(
            data, [("ts", "ascending"), ("session", "ascending"), ("seq", "ascending")]
        )
        data = data.take(order)
        if last is not None:
            if last < 0:
                raise InvalidOption(f"last= must be >= 0, got {last}")
            data = data.slice(max(0, data.num_rows - last))
        return data

    def maintain(
        self,
        *,
        retention_days: float = DEFAULT_RETENTION_DAYS,
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> MaintenanceResult:
        """Apply the retention limits, compact the log's files, vacuum unneeded ones."""
        self.flush()
        return maintain(self.table_uri, retention_days=retention_days, max_records=max_records)


class PendingRecord:
    """A queued record whose query's run time can still be added (:meth:`timed`)."""

    def __init__(self, table_uri: str, row: dict[str, Any]) -> None:
        self.table_uri = table_uri
        self._row = row
        #: the scan's own columns (None: every column), what an untold run reads
        scanned = row.get("columns")
        self._scanned: list[str] | None = None if scanned is None else list(scanned)

    @contextlib.contextmanager
    def timed(self, *, columns: Sequence[str] | None = None) -> Iterator[None]:
        """Time the block (a Spark action on the scanned rows) as the record's
        ``run_seconds``; ``columns``: the columns the action reads, when the caller
        knows them better than the scan did (a count reads only its filter's). The
        record names the columns of the last timed block: ``columns``, else the
        scan's own (so a full read timed after a count is not put on the count's).

        The record is held back from flushes while the block runs (at most
        :data:`MAX_HOLD_SECONDS`). A block that raises leaves the record without a
        run time, and so does a record written before the block started; a second
        timed block replaces the first's time. Never fails the block for the log's sake.
        """
        held = _WRITER.hold(self.table_uri, self._row)
        started = time.perf_counter()
        seconds: float | None = None
        try:
            yield
            seconds = time.perf_counter() - started
        finally:
            if held:
                _WRITER.release(self._row, seconds, self._scanned if columns is None else columns)

    @property
    def run_seconds(self) -> float | None:
        """The run time recorded so far (None: none yet)."""
        value = self._row.get("run_seconds")
        return None if value is None else float(value)


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance pass did to a query log."""

    records_deleted: int
    files_before: int
    files_after: int


def maintain(
    table_uri: str,
    *,
    retention_days: float = DEFAULT_RETENTION_DAYS,
    max_records: int = DEFAULT_MAX_RECORDS,
) -> MaintenanceResult:
    """Delete records beyond the retention limits, compact, vacuum (see module docstring).

    ``retention_days``: a finite number > 0 (at most :data:`MAX_RETENTION_DAYS`, what
    a date can go back); ``max_records``: a whole number >= 1.
    """
    if isinstance(retention_days, bool) or not isinstance(retention_days, int | float):
        raise InvalidOption(f"retention_days must be a number, got {retention_days!r}")
    if not (math.isfinite(retention_days) and 0 < retention_days <= MAX_RETENTION_DAYS):
        raise InvalidOption(
            f"retention_days must be a finite number > 0 and <= {MAX_RETENTION_DAYS:,}, "
            f"got {retention_days!r}"
        )
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
        raise InvalidOption(f"max_records must be a whole number >= 1, got {max_records!r}")
    return compact_log(
        log_path(table_uri),
        retention_days=retention_days,
        max_records=max_records,
        prefix="querylog",
        operation="QUERY LOG MAINTENANCE",
    )


def maintenance_due(path: str) -> bool:
    """Whether the log Delta table at ``path`` has just reached a version that is a
    multiple of :data:`MAINTAIN_EVERY` (one flush in that many, whoever made it)."""
    from lakelayout.table import delta

    newest = delta.latest_commit(path)
    return newest is not None and newest[0] > 0 and newest[0] % MAINTAIN_EVERY == 0


def compact_log(
    path: str, *, retention_days: float, max_records: int, prefix: str, operation: str
) -> MaintenanceResult:
    """Rewrite the log Delta table at ``path`` (rows with a ``ts`` column) into one file
    without the rows older than ``retention_days`` or beyond the newest
    ``max_records``; one commit (skipped when another process maintained it first),
    then a vacuum of the files no version needs (see the module docstring)."""
    from lakelayout.table import delta
    from lakelayout.table.writer import write_arrow

    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return MaintenanceResult(0, 0, 0)
    snap = delta.snapshot(path)
    files = [str(p) for p in snap.files.paths]
    data = delta.read_rows(path, snap.version)
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(days=retention_days)
    ts = data.column("ts")
    if len(ts) > max_records:
        newest_first = pc.array_sort_indices(ts.combine_chunks(), order="descending")
        cutoff = max(cutoff, ts.take(newest_first)[max_records - 1].as_py())
    kept = data.filter(pc.greater_equal(ts, pa.scalar(cutoff, ts.type)))
    deleted = data.num_rows - kept.num_rows
    if deleted or len(files) > 1:
        written = write_arrow(
            kept,
            path,
            schema=snap.schema,
            target_file_size=1 << 40,
            prefix=prefix,
            fmt=snap.table_format,
        )
        try:
            delta.commit(
                path,
                adds=written,
                removes=files,
                data_change=deleted > 0,
                read_version=snap.version,
                operation=operation,
            )
        except CommitConflict as exc:  # another process maintained the log first: its turn
            for w in written:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(path, w.path))
            logger.info("%s: maintenance skipped: %s", path, exc)
            return MaintenanceResult(0, len(files), len(files))
    if any(snap.configuration.get(k) != v for k, v in LOG_PROPERTIES.items()):
        # a log made before they were set: they are set once (a metadata commit)
        with contextlib.suppress(Exception):  # (another process's commit won: next time)
            DeltaTable(path).alter.set_table_properties(LOG_PROPERTIES, raise_if_not_exists=False)
    # files younger than an hour are kept: another process may be about to commit them;
    # full: also the files of a flush or a compaction killed before its commit (an audit:
    # nothing else ever deleted them)
    DeltaTable(path).vacuum(
        retention_hours=1, dry_run=False, enforce_retention_duration=False, full=True
    )
    return MaintenanceResult(deleted, len(files), len(DeltaTable(path).file_uris()))


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def properties_limits(configuration: Mapping[str, str]) -> tuple[float, int]:
    """(retention days, max records) from a table's properties, with the defaults;
    InvalidOption naming the property and its value when one is not a number of days
    > 0 and <= :data:`MAX_RETENTION_DAYS`, or a whole number >= 1 (records)."""
    raw_days = (configuration.get(RETENTION_PROPERTY) or "").strip()
    raw_records = (configuration.get(MAX_RECORDS_PROPERTY) or "").strip()
    try:
        days = float(raw_days) if raw_days else DEFAULT_RETENTION_DAYS
    except ValueError:
        days = math.nan
    try:
        records = int(raw_records) if raw_records else DEFAULT_MAX_RECORDS
    except ValueError:
        records = 0
    if not (math.isfinite(days) and 0 < days <= MAX_RETENTION_DAYS):
        raise InvalidOption(
            f"table property {RETENTION_PROPERTY} must be a number of days > 0 and "
            f"<= {MAX_RETENTION_DAYS:,}, got {configuration.get(RETENTION_PROPERTY)!r}"
        )
    if records < 1:
        raise InvalidOption(
            f"table property {MAX_RECORDS_PROPERTY} must be a whole number >= 1, "
            f"got {configuration.get(MAX_RECORDS_PROPERTY)!r}"
        )
    return days, records


def bad_limits_because(configuration: Mapping[str, str]) -> str:
    """Why the scans of a table with these properties leave their records out: a bad
    limit another tool set (Table.create refuses one); '' when the limits read. The
    advisor and ``lakelayout log`` say it (they waited for ever in silence; an audit)."""
    try:
        properties_limits(configuration)
    except InvalidOption as exc:
        return str(exc)
    return ""


def check_properties(configuration: Mapping[str, str]) -> None:
    """Refuse a bad :data:`ENABLED_PROPERTY`, :data:`RETENTION_PROPERTY` or
    :data:`MAX_RECORDS_PROPERTY` (InvalidOption naming it and the value):
    ``Table.create`` checks them before anything is written. A bad value set
    later by another tool does not fail scans: their records are left out with
    a warning."""
    from lakelayout.table.features import check_flag

    check_flag(configuration, ENABLED_PROPERTY)
    properties_limits(configuration)


#: tables (remote, or at a path delta-rs cannot open) whose scans were said, once, not
#: to be recorded
_UNLOGGED_REPORTED: set[str] = set()


def log_scan(
    table_uri: str,
    configuration: Mapping[str, str],
    report: Any,
    predicate: Any,
    columns: Sequence[str] | None,
    seconds: float,
    *,
    session_value: str | None = None,
    source: str = "scan",
    table_id: str | None = None,
) -> PendingRecord | None:
    """Queue the record of one scan (a :class:`~lakelayout.skipping.scan_report.ScanReport`
    and its bound predicate) unless logging is off; its handle, None when not queued.
    ``table_id``: the scanned snapshot's Delta table id (see :meth:`QueryLog.record`)."""
    if not is_enabled(configuration, session_value):
        return None
    unlogged = (
        "it is not a local table, and lakelayout keeps its query log (and the advisor's "
        "inputs) only beside local tables"
        if not is_local(table_uri)
        else unwritable_because(table_uri)
    )
    if unlogged:
        if table_uri not in _UNLOGGED_REPORTED:
            _UNLOGGED_REPORTED.add(table_uri)
            logger.warning("query log: scans of %s are not recorded: %s", table_uri, unlogged)
        return None
    from lakelayout.advisor.filters import feature_keys

    entry = QueryRecord(
        table_version=int(report.version),
        predicate=predicate.sql(),
        features=tuple(feature_keys(predicate)),
        columns=None if columns is None else tuple(columns),
        files_total=int(report.files_total),
        files_kept=int(report.files_kept),
        bytes_total=int(report.bytes_total),
        bytes_kept=int(report.bytes_kept),
        rows_total=int(report.rows_total),
        rows_kept=int(report.rows_kept),
        planning_seconds=float(report.pruning_seconds),
        scan_seconds=float(seconds),
        source=source,
    )
    days, records = properties_limits(configuration)
    return QueryLog(table_uri).record(
        entry, retention_days=days, max_records=records, table_id=table_id
    )
