"""``Table.online``: OReO on a live Delta table (the execution side of :mod:`lakelayout.online`).

Once enabled, every ``Table.scan`` with a predicate on the latest version
feeds the reorganizer (:class:`~lakelayout.online.engine.OnlineEngine`): the
query is priced on every state (real files for the state the table is in,
virtual files over a stored sample for the others), the counters move, and
every ``interval`` queries the layout manager fits candidates on its window.
When the reorganizer switches, a background thread rewrites the table with
``optimize.apply(layout, files)`` — only the files not already laid out by
that layout (:func:`plan_switch`: written by it, or placed by their
statistics in one of its blocks, and recorded as such) — while scans keep reading the snapshot
they planned on.

Safety:

* the rewrite commits in one Delta transaction that checks the files it
  removes are still live (``read_version``): appends committed meanwhile are
  kept as they are (laid out by the next switch); a delete or OPTIMIZE that
  removed one of its files makes it fail;
* a failed rewrite changes nothing in the table; the reorganizer is put
  back in the state the table is in and the history records the error;
* the state is written atomically after every step, with the rewrite
  marked ``pending`` (its process id, ``read_version`` and input files)
  before it starts. A process that died mid-rewrite is detected by the next
  process that loads the state: the Delta log tells whether the commit
  happened, and the record becomes ``done`` or ``failed`` accordingly;
* several processes may scan the table: a step (load, price, save) holds
  the state's lock (``state.lock``, released by the operating system if its
  process dies). A scan that finds it held does not wait: it leaves its
  predicate in ``queue/`` and the next step, in whichever process, applies
  the queued scans first, in the order they were queued. So no scan is
  lost or counted twice (the state names the queue files its step applied),
  two processes never start two switches, and a scan's time is never spent
  waiting on another process;
* files appended after a switch are laid out by a *catch-up* (the table's
  layout applied to them in the background, like a switch) once what the
  queries read beyond that layout in them reaches α × their share of the
  table (rent or buy; :meth:`OnlineEngine.wants_catch_up`);
* no scan waits on a candidate round: a scan whose step would fit candidates
  (:meth:`OnlineEngine.fits_next`) queues itself and a background thread of
  its process (the *stepper*) takes the step under the lock; the scans queued
  meanwhile follow in their order, so the decisions are those of stepping
  every scan in turn.

Files under ``<table>/_lakelayout/online/``: ``state.json`` (configuration,
α and how it was measured, reorganizer with its random generator position,
layout manager with the window's SQL and each state's layout by name, history,
the last status), ``layouts/`` (the states' layouts, a document each, named by
its digest), ``sample.parquet`` (the rows virtual files are built on),
``state.lock`` and ``queue/`` (scans not yet applied, a file each).

α (the cost of a rewrite in full scans, §III-A, §VI-D1) is given or
*measured* (:func:`measure_alpha`): a copy of (part of) the table is made in
a scratch directory (not timed), then, on that copy, the median of three full
scans (Spark reads every column of every file, ``write.format("noop")``) and
one rewrite by a Hilbert layout with one file per block
(``optimize.apply``, as a switch does) are timed: ``α = rewrite / scan``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import logging
import math
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from lakelayout import arguments as args
from lakelayout.cluster.config import block_roll_size
from lakelayout.errors import (
    AfterCommitError,
    InvalidOption,
    LakelayoutError,
    StateLocked,
    StateUnreadable,
)
from lakelayout.expr.nodes import Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts.base import Layout, file_blocks, keep_floor
from lakelayout.layouts.base import from_json as layout_from_json
from lakelayout.layouts.qdtree import CutMemo
from lakelayout.online.candidates import FAMILIES, check_families, fit_candidates
from lakelayout.online.costs import fraction_read, table_costs
from lakelayout.online.engine import OnlineConfig, OnlineEngine, Switch
from lakelayout.skipping.store import atomic_write_text
from lakelayout.stats.model import FileStats
from lakelayout.table import owner

if TYPE_CHECKING:
    from lakelayout.api import Table
    from lakelayout.cluster.optimize import OptimizeHooks
    from lakelayout.cluster.optimize_metrics import OptimizeMetrics
    from lakelayout.online.manager import ManagedState
    from lakelayout.table.delta import Snapshot

logger = logging.getLogger(__name__)

DIRECTORY = os.path.join("_lakelayout", "online")
STATE_FILE = "state.json"
SAMPLE_FILE = "sample.parquet"
LOCK_FILE = "state.lock"
#: the states' layouts, a JSON document each, named by their digest
LAYOUT_DIRECTORY = "layouts"
#: scans another process left for the lock holder to apply, a file each
QUEUE_DIRECTORY = "queue"
#: seconds a step that must be recorded (a rewrite's outcome, enable, status) waits for
#: another process to finish its step; a scan never waits (its query is queued instead)
LOCK_WAIT = 120.0
#: queued scans one step applies at most (the rest wait for the next)
QUEUE_DRAIN = 1000
#: a scan whose step would fit candidates (seconds) leaves it to a background thread of its
#: process, which holds the state's lock meanwhile (scans are queued); False: the scan's
#: own thread fits, as before (bench/bench_online_step.py times both)
ROUNDS_IN_BACKGROUND = True
#: steps the stepper takes after its own to apply the scans queued while it held the lock
#: (bounded: scans arriving faster than it applies them wait for the next scan's step)
STEPPER_PASSES = 3
#: the state's list of the queue files its last step applied (removed after the save)
APPLIED_KEY = "queue_applied"
#: environment variable: seconds a process waits at its exit for the online rewrite it
#: started (unset or "": until it ends; 0: not at all, the rewrite dies with the process
#: and the next one finds it interrupted, the table as it was)
EXIT_WAIT_ENV = "LAKELAYOUT_ONLINE_EXIT_WAIT"
#: table property: "true" while online reorganization is enabled ("" = off)
ENABLED_PROPERTY = "lakelayout.online"
#: optional table property: α to use when the property alone enables it
ALPHA_PROPERTY = "lakelayout.online.alpha"
#: 2: states name their layouts, kept in ``layouts/`` (1: written out in the state)
STATE_VERSION = 2
STATE_VERSIONS = (1, 2)
#: bytes of the table copied to measure α (the whole table when smaller)
ALPHA_BYTES = 256 * 1024 * 1024
#: rows of the stored sample
SAMPLE_ROWS = 20_000
#: the sample is taken again when the table's row count moved this much since, or this
#: share of the sample's rows lies outside the table's bounds (its rows were replaced)
RESAMPLE_GROWTH = 0.5


# --------------------------------------------------------------------------- α


@dataclass(frozen=True)
class AlphaMeasurement:
    """α and how it was obtained (``method``: "measured" or "given")."""

    alpha: float
    method: str
    scan_seconds: float | None = None
    rewrite_seconds: float | None = None
    #: a scan of the copy keeping zero files: the part of a scan no layout saves
    fixed_seconds: float | None = None
    files: int = 0
    bytes: int = 0
    rows: int = 0
    layout: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AlphaMeasurement:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def alpha_per_scan_bytes(rewrite: float, full: float, fixed: float) -> tuple[float, str]:
    """``rewrite`` seconds in units of what reading a full scan's bytes costs: the
    full scan's ``full`` seconds less the ``fixed`` seconds every query pays (ignored
    when it is not in ``(0, full)``); and the unit, in words.

    >>> alpha_per_scan_bytes(22.0, 0.25, 0.05)
    (110.0, 'full scan 0.250 s less the fixed 0.050 s a query pays')
    """
    if not 0 < fixed < full:
        return rewrite / full, f"full scan {full:.3f} s"
    unit = f"full scan {full:.3f} s less the fixed {fixed:.3f} s a query pays"
    return rewrite / (full - fixed), unit


def zero_file_predicate(
    table: Table, snapshot: Snapshot | None = None, prefer: Sequence[str] = ()
) -> str | None:
    """``<column> IS NULL`` for a top-level column no file holds a null of, so that
    pruning keeps no file (``prefer``'s columns tried first); None when every column
    may hold nulls. A scan with it pays what every query pays whatever it reads."""
    snap = snapshot if snapshot is not None else table.snapshot()
    names = [n for n in prefer if n in snap.schema.names]
    names += [n for n in snap.schema.names if n not in names]
    tz = table.spark.conf.get("spark.sql.session.timeZone") or "UTC"
    for name in names:
        if not name.isidentifier():
            continue
        sql = f"{name} IS NULL"
        predicate = parse_predicate(sql, snap.schema, timezone=tz)
        keep = np.asarray(table.plan(predicate, snapshot=snap, timezone=tz).keep, bool)
        if len(keep) and not keep.any():
            return sql
    return None


def _read_all_seconds(table: Table, where: str | None) -> float:
    """Seconds of ``table.scan(where)`` with every column of every kept row read."""
    started = time.perf_counter()
    table.scan(where).df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def measure_alpha(
    table: Table, *, max_bytes: int = ALPHA_BYTES, scans: int = 3
) -> AlphaMeasurement:
    """Rewrite time over the time of reading a full scan's bytes, both timed on a
    scratch copy of the table.

    The copy holds the table's files in path order up to ``max_bytes`` (at
    least one file). Full scan: ``scan()`` of the copy with every column of
    every row read (``write.format("noop")``); fixed part: the same with a
    predicate that keeps no file (:func:`zero_file_predicate`) -- what every
    query pays whatever its layout; both interleaved, medians of ``scans``
    runs after one warm-up run each. Rewrite: ``optimize.apply`` of a Hilbert
    layout (Z-order with one column) on the first two orderable columns,
    fitted on a sample of the copy, one file per block, committed -- the path a
    switch takes. ``α = rewrite / (full scan - fixed part)``
    (:func:`alpha_per_scan_bytes`): the decisions price a query by the bytes
    it reads, and a switch can only save on those.
    """
    from lakelayout.cluster.rewrite import read_files, sample_rows
    from lakelayout.layouts import HilbertLayout
    from lakelayout.layouts.zorder import ZOrderLayout

    snap = table.snapshot()
    if len(snap.files) == 0:
        raise InvalidOption(
            f"cannot measure alpha on '{table.uri}': the table has no files; "
            "pass alpha=<number> (CLI: --alpha N)"
        )
    columns = _orderable_columns(snap.schema)[:2]
    if not columns:
        raise InvalidOption(
            f"cannot measure alpha on '{table.uri}': no orderable column; "
            "pass alpha=<number> (CLI: --alpha N)"
        )
    paths: list[str] = []
    nbytes = 0
    for path, size in zip(snap.files.paths, snap.files.sizes, strict=True):
        if paths and nbytes >= max_bytes:
            break
        paths.append(str(path))
        nbytes += int(size)
    spark = table.spark
    with tempfile.TemporaryDirectory(prefix="ll-alpha-") as tmp:
        df = read_files(spark, snap, paths, with_file=False)
        target = max(1024, nbytes // max(len(paths), 1))
        # the table's own class (importing lakelayout.api here would make an import cycle)
        scratch = type(table).create(
            os.path.join(tmp, "copy"),
            df,
            spark=spark,
            target_file_size=target,
            properties={"lakelayout.queryLog.enabled": "false"},  # its scans are not queries
        )
        files = scratch.snapshot().files
        nothing = zero_file_predicate(scratch)
        full_times, zero_times = [], []
        for _ in range(scans + 1):
            full_times.append(_read_all_seconds(scratch, None))
            if nothing is not None:
                zero_times.append(_read_all_seconds(scratch, nothing))
        scan = statistics.median(full_times[1:])
        fixed = statistics.median(zero_times[1:]) if zero_times else None
        sample = sample_rows(scratch.to_df().select(*columns), int(files.total_rows))
        blocks = max(2, len(files))
        if len(columns) >= 2:
            layout: Layout = HilbertLayout.fit(sample, columns=columns, target_blocks=blocks)
        else:
            layout = ZOrderLayout.fit(sample, columns=columns, target_blocks=blocks)
        started = time.perf_counter()
        scratch.optimize.apply(layout, one_file_per_block=True)
        rewrite = time.perf_counter() - started
    alpha = alpha_per_scan_bytes(rewrite, scan, fixed or 0.0)[0] if scan > 0 else float("inf")
    return AlphaMeasurement(
        alpha=alpha,
        method="measured",
        scan_seconds=scan,
        rewrite_seconds=rewrite,
        fixed_seconds=fixed,
        files=len(files),
        bytes=int(files.total_bytes),
        rows=int(files.total_rows),
        layout=f"{layout.family}({', '.join(columns)}), {layout.n_blocks} blocks",
    )


def _orderable_columns(schema: pa.Schema) -> list[str]:
    out = []
    for field in schema:
        t = field.type
        if (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_decimal(t)
            or pa.types.is_date(t)
            or pa.types.is_timestamp(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
        ):
            out.append(field.name)
    return out


# --------------------------------------------------------------------------- the files


class OnlineStore:
    """``<table>/_lakelayout/online/``: the state document and the sample."""

    def __init__(self, root: str) -> None:
        self.directory = Path(root) / DIRECTORY
        self.state = self.directory / STATE_FILE
        self.sample = self.directory / SAMPLE_FILE
        self.queue = self.directory / QUEUE_DIRECTORY
        self.layouts = self.directory / LAYOUT_DIRECTORY
        self._lock = FileLock(self.directory / LOCK_FILE)
        self._names = itertools.count()

    @contextlib.contextmanager
    def locked(self, *, wait: bool) -> Iterator[bool]:
        """Hold the state's lock across processes for one load → step → save.

        Yields True while held. With ``wait`` false it yields False at once when
        another process holds it; with ``wait`` true it waits up to
        :data:`LOCK_WAIT` seconds, then raises :class:`StateLocked`. Re-entrant
        within a thread; the operating system releases it when its process dies.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock.acquire(timeout=LOCK_WAIT if wait else 0)
        except Timeout:  # (a TimeoutError, so an OSError: caught first)
            if wait:
                raise StateLocked(
                    f"another process has held {self._lock.lock_file} for more than "
                    f"{LOCK_WAIT:g} s; the online state was not changed"
                ) from None
            yield False
            return
        except OSError as exc:  # a read-only directory, a lock path that is not a file
            raise StateUnreadable(
                f"cannot take the online state's lock {self._lock.lock_file}: {exc}"
            ) from exc
        try:
            yield True
        finally:
            self._lock.release()

    def enqueue(self, where: str) -> None:
        """Leave a scan's predicate for the process stepping the reorganizer: one file
        per scan, written whole and renamed into place (never read half-written)."""
        self.queue.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{threading.get_ident()}-{next(self._names)}"
        atomic_write_text(self.queue / f"{name}.json", json.dumps({"where": where}))

    def queued(self, limit: int = QUEUE_DRAIN) -> list[tuple[Path, str]]:
        """The oldest ``limit`` queued scans, in the order they were queued: (file, SQL)."""
        out: list[tuple[Path, str]] = []
        for path in sorted(self.queue.glob("*.json"))[:limit]:
            try:
                where = json.loads(path.read_text(encoding="utf-8"))["where"]
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError):
                logger.warning("online state: unreadable queued scan %s dropped", path)
                path.unlink(missing_ok=True)
                continue
            out.append((path, str(where)))
        return out

    def queued_count(self) -> int:
        return sum(1 for _ in self.queue.glob("*.json"))

    def queued_names(self) -> frozenset[str]:
        return frozenset(path.name for path in self.queue.glob("*.json"))

    def dequeue(self, paths: Sequence[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    def clear_queue(self) -> None:
        self.dequeue(list(self.queue.glob("*.json")))

    def read(self) -> dict[str, Any] | None:
        try:
            text = self.state.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateUnreadable(f"cannot read the online state {self.state}: {exc}") from exc
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidOption(f"the online state {self.state} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") not in STATE_VERSIONS:
            raise InvalidOption(f"the online state {self.state} has an unknown format")
        return data

    def write(self, data: Mapping[str, Any]) -> tuple[int, int]:
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.state, json.dumps(data, sort_keys=True, indent=1))
        return self.token()

    def token(self) -> tuple[int, int]:
        """(mtime, size) of the state file: changes when anyone writes it."""
        try:
            st = self.state.stat()
        except FileNotFoundError:
            return (0, 0)
        return (st.st_mtime_ns, st.st_size)

    def has_layout(self, digest: str) -> bool:
        return (self.layouts / f"{digest}.json").exists()

    def write_layout(self, digest: str, text: str) -> None:
        self.layouts.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.layouts / f"{digest}.json", text)

    def read_layout(self, digest: str) -> Layout:
        path = self.layouts / f"{digest}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InvalidOption(
                f"the online state names a layout that is missing: {path}"
            ) from None
        return layout_from_json(text)

    def prune_layouts(self, keep: Collection[str]) -> None:
        """Remove the layouts no state names any more (under the state's lock)."""
        for path in self.layouts.glob("*.json"):
            if path.stem not in keep:
                path.unlink(missing_ok=True)

    def write_sample(self, sample: pa.Table) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        temp = self.directory / f".{SAMPLE_FILE}.{os.getpid()}.tmp"
        pq.write_table(sample, temp)
        os.replace(temp, self.sample)

    def read_sample(self) -> pa.Table:
        return pq.read_table(self.sample)


def laid_out_by(
    root: str, files: FileStats, layout: Layout, document: str | None = None
) -> np.ndarray:
    """Per live file: was it written by ``optimize.apply`` with exactly ``layout``?

    From the provenance sidecar: a row counts only where it recorded the file's
    current size and its layout document equals ``layout`` (any doubt: False,
    the file is rewritten). ``document``: ``layout``'s JSON when the caller has it
    (:attr:`~lakelayout.online.manager.ManagedState.layout_json`); else it is made
    only when a file needs the comparison (~3 ms for a curve layout).
    """
    from lakelayout.cluster.provenance import ProvenanceStore

    store = ProvenanceStore(root)
    rows = store.read([str(p) for p in files.paths])
    same: dict[str, bool] = {}
    out = np.zeros(len(files), dtype=bool)
    for i, (path, size) in enumerate(zip(files.paths, files.sizes, strict=True)):
        row = rows.get(str(path))
        if row is None or not row.layout_id or row.block_id is None or row.size != int(size):
            continue
        if row.layout_id not in same:
            if document is None:
                document = layout.to_json()
            same[row.layout_id] = _stored_layout_json(store, row.layout_id) == document
        out[i] = same[row.layout_id]
    return out


#: (provenance directory, layout id) -> the stored layout's JSON as rebuilt, or None when it
#: cannot be read; ids are never reused nor their documents replaced
_STORED_JSON: dict[tuple[str, str], str | None] = {}
_STORED_JSON_MAX = 256
_STORED_JSON_LOCK = threading.Lock()  # (scans, steppers and rewrites ask from several threads)


def _stored_layout_json(store: Any, layout_id: str) -> str | None:
    key = (str(store.layouts), layout_id)
    with _STORED_JSON_LOCK:
        if key in _STORED_JSON:
            return _STORED_JSON[key]
    try:
        text: str | None = store.load_layout(layout_id).to_json()
    except LakelayoutError:
        text = None
    with _STORED_JSON_LOCK:
        if len(_STORED_JSON) >= _STORED_JSON_MAX:
            _STORED_JSON.pop(next(iter(_STORED_JSON)))
        _STORED_JSON[key] = text
    return text


def plan_switch(root: str, files: FileStats, layout: Layout) -> tuple[np.ndarray, dict[str, int]]:
    """Per live file, must a switch to ``layout`` rewrite it; and the files it keeps
    that ``layout`` did not write, with the block their statistics place them in
    (``optimize.apply(keep=...)`` records them as that block).

    No for a file already written with ``layout`` (:func:`laid_out_by`), and no
    for a file :func:`~lakelayout.layouts.base.placed_blocks` places in one block
    (its statistics put every row there and it holds at least
    :data:`~lakelayout.layouts.base.KEEP_MIN_BLOCK_SHARE` of an average block):
    it is laid out already, only not written by that layout. Only the other
    files are rewritten, so a switch between layouts that share cuts moves the
    rows whose block changes (OReO §V: a partial reorganization) instead of
    the whole table.
    """
    return _switch_plan(files, layout, laid_out_by(root, files, layout), file_blocks(layout, files))


def _switch_plan(
    files: FileStats, layout: Layout, written: np.ndarray, blocks: np.ndarray
) -> tuple[np.ndarray, dict[str, int]]:
    """:func:`plan_switch` from each file's :func:`laid_out_by` and
    :func:`~lakelayout.layouts.base.file_blocks` (the size floor applied here, over all
    of ``files``: it moves with the table)."""
    sizes = np.asarray(files.sizes, dtype=np.int64)
    placed = ~written & (blocks >= 0) & (sizes >= keep_floor(layout, sizes))
    keep = {str(files.paths[i]): int(blocks[i]) for i in np.flatnonzero(placed)}
    return ~(written | placed), keep


# --------------------------------------------------------------------------- the loop


class _Controller:
    """The reorganizer of one table in this process: state, lock, rewrite thread."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.store = OnlineStore(uri)
        self.lock = threading.RLock()
        self.engine: OnlineEngine | None = None
        self.document: dict[str, Any] = {}
        self.worker: threading.Thread | None = None
        #: the thread taking a step with a candidate round off a scan's path, if any
        self.stepper: threading.Thread | None = None
        #: the thread enabling it because the table property says so (α measured, sample)
        self.starter: threading.Thread | None = None
        self.hooks: OptimizeHooks | None = None
        self._token: tuple[int, int] = (0, 0)
        self._blocks = 1
        #: layouts read from ``layouts/`` by digest (a state's layout never changes)
        self._layouts: dict[str, Layout] = {}
        self._named: frozenset[str] | None = None  # what the last save named (None: unknown)
        self._sample_cache: tuple[tuple[int, int], pa.Table] | None = None
        #: the last window's cut work on the engine's sample, for the next window's fit
        self._cut_memo = CutMemo()
        self.unlaid = UnlaidFiles(uri)
        #: the queue as the last step saw it before letting go of the lock
        self._looked: frozenset[str] = frozenset()

    # ------------------------------------------------------------ state

    def load(self, table: Table, snap: Snapshot) -> OnlineEngine | None:
        """The engine, (re)loaded from disk when the state file changed; None if absent."""
        token = self.store.token()
        if self.engine is not None and token == self._token:
            return self.engine
        data = self.store.read()
        if data is None:
            self.engine = None
            return None
        try:
            sample = self._sample()
            bind = _binder(table, snap, str(data.get("timezone") or "UTC"))
            families = list(data.get("families") or FAMILIES)
            # the previous engine's cost book, when on the same sample: the states' virtual
            # files and costs stay (a reload of what another process wrote rebuilt them: 0.15 s)
            book = self.engine.book if self.engine and self.engine.book.sample is sample else None
            engine = OnlineEngine.from_dict(
                data["engine"], sample, self._fitter(families), bind, self._layout, book
            )
        except LakelayoutError:
            raise
        except (OSError, KeyError, TypeError, ValueError, pa.ArrowException) as exc:
            raise StateUnreadable(
                f"the online state under {self.store.directory} cannot be read "
                f"({type(exc).__name__}: {exc}); t.online.disable() then enable() starts over"
            ) from exc
        self.engine, self.document, self._token = engine, data, token
        self._recover(snap)
        return engine

    def _fitter(self, families: Sequence[str]) -> Any:
        def fit(predicates: Sequence[Predicate]) -> Any:
            assert self.engine is not None
            return fit_candidates(
                self.engine.sample,
                predicates,
                blocks=self._blocks,
                families=families,
                memo=self._cut_memo,
            )

        return fit

    def _sample(self) -> pa.Table:
        """The stored sample, read again only when the file changed (a reload of the state
        another process wrote must not cost a read of it)."""
        st = self.store.sample.stat()
        token = (st.st_mtime_ns, st.st_size)
        if self._sample_cache is None or self._sample_cache[0] != token:
            self._sample_cache = (token, self.store.read_sample())
        return self._sample_cache[1]

    def _layout(self, digest: str) -> Layout:
        found = self._layouts.get(digest)
        if found is None:
            found = self._layouts[digest] = self.store.read_layout(digest)
        return found

    def save(self) -> None:
        """Write the state (under the state's lock). Layouts go to ``layouts/`` once each,
        the state names them: it is saved after every scan, and written out, a curve
        layout's rank tables made it megabytes (a 15 ms step, a third of a scan's own time)."""
        assert self.engine is not None
        named = []
        for state in self.engine.manager.states.values():
            if state.layout is None:
                continue
            digest = state.layout_digest
            if not self.store.has_layout(digest):
                self.store.write_layout(digest, state.layout_json)
            self._layouts[digest] = state.layout
            named.append(digest)
        # the book keeps the states' virtual files only, not every candidate ever fitted
        self.engine.book.retain([self._layouts[d] for d in named])
        self.document["version"] = STATE_VERSION
        self.document["engine"] = self.engine.to_dict(refs=True)
        self.document["status"] = self.engine.status()
        self.document["updated"] = time.time()
        self._token = self.store.write(self.document)
        if frozenset(named) != self._named:  # a state came or went: drop what none names
            self._named = frozenset(named)
            self.store.prune_layouts(self._named)
            self._layouts = {d: self._layouts[d] for d in self._named}

    def _recover(self, snap: Snapshot) -> None:
        """A pending rewrite whose process is gone: did its commit happen?"""
        assert self.engine is not None
        record = self.engine.pending
        if record is None or self._running_here():
            return
        who = {"pid": record.owner, "host": record.owner_host, "started": record.owner_started}
        # this process's id, not its worker: a restart gave this process the owner's id
        if not owner.gone(who, this_one=True):
            return
        if _committed(self.uri, record, snap, self.engine.layout_of(record.target)):
            self.engine.committed(record, finished=time.time())
        else:
            self.engine.failed(record, "interrupted: the process rewriting the table stopped")
        self.save()

    def _running_here(self) -> bool:
        return self.worker is not None and self.worker.is_alive()

    # ------------------------------------------------------------ queries

    def observe(self, table: Table, where: str, predicate: Predicate, snap: Snapshot) -> None:
        """One scan's step under the state's lock. When another process (or this
        process's stepper) holds the lock the scan is queued for the next step, never
        waited for on the query's path; so is a scan whose step would fit candidates
        (:data:`ROUNDS_IN_BACKGROUND`), which the stepper thread then takes."""
        with self.store.locked(wait=False) as held:
            if not held:
                self.store.enqueue(where)
                return
            with self.lock:
                fits = not ROUNDS_IN_BACKGROUND
                done = self._step(table, snap, (where, predicate), rewrite=True, fits=fits)
                # and what others queued during the step, before the lock is let go
                if not (done and self._apply_queued(table, snap, 1, rewrite=True, fits=fits)):
                    self._start_stepper(table)
                    return
                left = self._looked
        self._after_release(table, left)

    def _apply_queued(
        self, table: Table, snap: Snapshot, passes: int, *, rewrite: bool, fits: bool = True
    ) -> bool:
        """Up to ``passes`` steps while scans are queued (the lock held); False when one
        stopped before a candidate round (``fits`` false, :meth:`_step`)."""
        for _ in range(passes):
            self._looked = self.store.queued_names()
            if not self._looked:
                break
            if not self._step(table, snap, None, rewrite=rewrite, fits=fits):
                return False
        return True

    def _after_release(self, table: Table, left: frozenset[str]) -> None:
        """A scan queued after a step's last look at the queue (``left``: what it saw),
        before the step let go of the lock, would wait for the next scan: a stepper
        takes it now. Only scans queued since that look start one, so scans a step could
        not apply (e.g. an unreadable state) never keep a thread busy."""
        if self.store.queued_names() - left:
            with self.lock:
                self._start_stepper(table)

    def _start_stepper(self, table: Table) -> None:
        """A thread that takes the next step, candidate round included, off the scan's
        path (one at a time: a stepper not yet past its step will apply what is queued)."""
        if self.stepper is not None and self.stepper.is_alive():
            return
        _finish_at_exit.register()
        self.stepper = threading.Thread(
            target=self._background_step, args=(table,), name="lakelayout-online-step",
            daemon=True,
        )  # fmt: skip
        self.stepper.start()

    def _background_step(self, table: Table) -> None:
        try:
            with self.store.locked(wait=True), self.lock:
                try:
                    snap = table.snapshot()
                    self._step(table, snap, None, rewrite=True)
                    # the scans queued while it held the lock, before letting go of it
                    self._apply_queued(table, snap, STEPPER_PASSES, rewrite=True)
                    left = self._looked
                finally:
                    self.stepper = None  # under the locks: a later scan starts a new one
            self._after_release(table, left)
        except Exception as exc:  # e.g. StateLocked: the scans stay queued for the next step
            if self.stepper is threading.current_thread():
                self.stepper = None
            logger.warning("online state of %s: background step not taken: %s", self.uri, exc)

    def drain(self, table: Table, snap: Snapshot) -> None:
        """Apply the scans queued by other processes (for ``status()``; a switch they call
        for starts at the next scan)."""
        with self.store.locked(wait=True), self.lock:
            self._apply_queued(table, snap, 1, rewrite=False)

    def _step(
        self,
        table: Table,
        snap: Snapshot,
        scan: tuple[str, Predicate] | None,
        *,
        rewrite: bool,
        fits: bool = True,
    ) -> bool:
        """Load, price the queued scans then ``scan`` on every state, move the counters,
        maybe start a switch, save.

        With ``fits`` false the step stops before a scan whose step would fit candidates
        (:meth:`OnlineEngine.fits_next`): that scan and the ones after it stay queued
        (``scan`` is queued), and the step returns False for a stepper to go on from
        there. True otherwise.
        """
        try:
            engine = self.load(table, snap)
        except LakelayoutError:
            return True  # an unreadable state: status() reports it; the scan goes on
        if engine is None:
            return True
        newest = engine.last_commit()
        if newest is not None and snap.version < newest:
            # the scan read the table before a rewrite committed, and the state describes
            # the table after it: price the scan on the layout the state is in, and plan
            # the next rewrite on files that are live (optimize.apply refuses others)
            snap = table.snapshot()
        applied: list[Path] = []
        seen: list[Predicate] = []  # the scans this step applied
        stopped = False
        try:
            self._blocks = max(1, len(snap.files))
            if not _same_columns(engine.sample.schema, snap.schema):  # the schema was replaced
                self._resample(table, snap, engine)
                engine.drop_unbound(engine.sample)
            elif fits:
                self._maybe_resample(table, snap, engine)
            real = functools.partial(
                table_costs,
                files=snap.files,
                root=self.uri,
                schema=snap.schema,
                fmt=snap.table_format,
            )
            # scans queued by other processes (or while a stepper held the lock) ran first;
            # bound to the schema now (None: it changed since, the scan is dropped)
            items: list[tuple[Path | None, str, Predicate | None]] = []
            queued = self.store.queued()
            if queued:  # (binding looks the table's index functions up)
                bind = _binder(table, snap, str(self.document.get("timezone") or "UTC"))
                items = [(path, sql, bind(sql)) for path, sql in queued]
            if scan is not None:
                items.append((None, scan[0], scan[1]))
            # a step that saved and stopped before removing its queue files took these
            done = set(self.document.get(APPLIED_KEY) or ())
            for path, sql, predicate in items:
                if path is not None and path.name in done:
                    applied.append(path)
                    continue
                if predicate is not None:
                    if not fits and engine.fits_next(predicate, real):
                        stopped = True
                        break
                    if path is not None:  # taken even if its step fails below: the
                        applied.append(path)  # counters have it (it was counted twice)
                    engine.observe(sql, predicate, real)
                    seen.append(predicate)
                elif path is not None:
                    applied.append(path)
            if stopped and scan is not None:
                self.store.enqueue(scan[0])  # after everything queued before it
            if engine.config.catch_up:
                charge_unlaid(engine, seen, snap, self.unlaid.of(snap, engine)[0])
            engine.last_error = ""
            if rewrite and not stopped:
                self._maybe_rewrite(table, snap)
        except Exception as exc:  # the reorganizer must never fail the user's scan
            engine.last_error = f"{type(exc).__name__}: {exc}"
        # saved with the state: the queue files this step took, so that a step stopped
        # between the save and their removal does not count them twice
        self.document[APPLIED_KEY] = [path.name for path in applied]
        self.save()
        self.store.dequeue(applied)
        return not stopped

    def _maybe_resample(self, table: Table, snap: Snapshot, engine: OnlineEngine) -> None:
        """Take a new sample when the table grew or shrank by half since the last one
        (only when a candidate round is due: the virtual files are rebuilt)."""
        due = (engine.manager.queries + 1) % engine.manager.interval == 0
        rows = int(snap.files.total_rows)
        base = int(self.document.get("sample_base_rows", 0))
        if not due or rows == 0:
            return
        moved = abs(rows - base) > RESAMPLE_GROWTH * max(base, 1)
        # a DELETE and an append of as many other rows: every candidate was priced on
        # rows no longer there, at no cost (an audit)
        if moved or outside_share(engine.sample, snap.files) > RESAMPLE_GROWTH:
            self._resample(table, snap, engine)

    def _resample(self, table: Table, snap: Snapshot, engine: OnlineEngine) -> None:
        sample = _take_sample(table, snap, int(self.document.get("sample_rows", SAMPLE_ROWS)))
        self.store.write_sample(sample)
        engine.replace_sample(sample)
        self.document["sample_base_rows"] = int(snap.files.total_rows)

    def _maybe_rewrite(self, table: Table, snap: Snapshot) -> None:
        """Start the rewrite to the reorganizer's state if it differs from the table's; or
        else a catch-up once the files the table's layout did not write cost the queries
        what it does (:func:`plan_catch_up`)."""
        engine = self.engine
        assert engine is not None
        if self._running_here() or engine.pending is not None:
            return
        if not engine.wants_switch():
            unlaid, keep = self.unlaid.of(snap, engine)
            written = self.unlaid.written(snap, engine)
            planned = plan_catch_up(engine, snap.files, unlaid, written)
            layout = engine.layout_of(engine.applied)
            if planned is not None and layout is not None:
                rewrite, share = planned
                record = engine.begin_catch_up(share)
                self._start_rewrite(table, snap, record, layout, rewrite, keep)
            return
        layout = engine.layout_of(engine.target)
        if layout is None:  # cannot happen: only the initial state has no layout
            engine.failed(engine.begin(), "the target state has no layout")
            return
        rewrite, keep = plan_switch(self.uri, snap.files, layout)
        self._start_rewrite(table, snap, engine.begin(), layout, rewrite, keep)

    def _start_rewrite(
        self,
        table: Table,
        snap: Snapshot,
        record: Switch,
        layout: Layout,
        rewrite: np.ndarray,
        keep: dict[str, int],
    ) -> None:
        """Mark ``record`` pending with what it rewrites, save, rewrite in a thread."""
        me = owner.this_process()
        record.owner, record.owner_host, record.owner_started = me["pid"], me["host"], me["started"]
        record.read_version = snap.version
        record.inputs = [str(p) for p, r in zip(snap.files.paths, rewrite, strict=True) if r]
        record.files_kept = int((~rewrite).sum())
        self.save()
        _finish_at_exit.register()
        self.worker = threading.Thread(
            target=self._rewrite,
            # the table's optimizer: the files it writes carry the table's index metadata
            args=(
                record.id,
                layout,
                list(record.inputs),
                keep,
                table,
                block_roll_size(snap.configuration),
            ),
            name=f"lakelayout-online-{record.id[:8]}",
            daemon=True,
        )
        self.worker.start()

    def _rewrite(
        self,
        record_id: str,
        layout: Layout,
        paths: list[str],
        keep: dict[str, int],
        table: Table,
        roll: int,
    ) -> None:
        started = time.perf_counter()
        error = ""
        metrics: OptimizeMetrics | None = None
        try:
            gone = _removed_since(table, [*paths, *keep])
            if gone:  # a commit (a DELETE, another engine's OPTIMIZE) removed inputs since
                error = f"yielded: {gone}"
            elif paths or keep:
                # candidates have about as many blocks as the table has files: a block up to
                # twice the target file size stays one file, a larger one is cut into several
                # (consecutive key ranges), not written as one file a single task would read;
                # the kept files are recorded as the blocks they are in
                metrics = table.optimize.apply(
                    layout, paths, hooks=self.hooks, target_file_size=roll, keep=keep
                )
        except AfterCommitError as exc:  # committed: the table is in the target's layout
            metrics = exc.metrics
            logger.warning("online state of %s: switch %s: %s", self.uri, record_id, exc)
        except Exception as exc:  # the table is unchanged: the commit did not happen
            error = f"{type(exc).__name__}: {exc}"
        if metrics is not None and metrics.yielded:  # lost its commit: nothing committed
            error = f"yielded: {metrics.yield_reason}"
        seconds = time.perf_counter() - started
        try:
            self._settle(table, record_id, error, metrics, seconds)
        except Exception as exc:  # e.g. StateLocked: the next load settles it from the log
            logger.warning(
                "online state of %s: rewrite %s not recorded: %s", self.uri, record_id, exc
            )

    def _settle(
        self,
        table: Table,
        record_id: str,
        error: str,
        metrics: OptimizeMetrics | None,
        seconds: float,
    ) -> None:
        """Record a rewrite's outcome in the state as it is now on disk (other processes
        may have stepped the reorganizer meanwhile)."""
        with self.store.locked(wait=True), self.lock:
            engine = self.load(table, table.snapshot())
            record = engine.find(record_id) if engine is not None else None
            if engine is None or record is None or record.status != "pending":
                return
            if error:
                engine.failed(record, error, seconds=seconds)
            else:
                engine.committed(
                    record,
                    seconds=seconds,
                    files_removed=metrics.files_removed if metrics else 0,
                    files_added=metrics.files_added if metrics else 0,
                    bytes_written=metrics.bytes_added if metrics else 0,
                    version=metrics.versions[-1] if metrics and metrics.versions else None,
                )
            self.save()

    def finish(self) -> None:
        """At the process's exit: let this process's background step and rewrite end
        rather than die with it (a killed rewrite is wasted: the next process finds it
        interrupted and the reorganizer has to switch again)."""
        stepper, worker = self.stepper, self.worker
        if stepper is not None and stepper.is_alive():
            logger.info("online state of %s: finishing the step before exit", self.uri)
            stepper.join(LOCK_WAIT)
        worker = self.worker or worker
        if worker is None or not worker.is_alive():
            return
        limit = exit_wait()
        if limit == 0:
            return
        logger.warning(
            "online reorganization of %s: waiting %s for its rewrite to finish before the "
            "process exits (t.online.wait() before the end avoids the surprise; %s bounds "
            "the wait; an interrupt abandons the rewrite, leaving the table as it was)",
            self.uri,
            "until it ends" if limit is None else f"up to {limit:g} s",
            EXIT_WAIT_ENV,
        )
        worker.join(limit)
        if worker.is_alive():
            logger.warning(
                "online reorganization of %s: the rewrite did not finish in %g s; it ends "
                "with the process (the table stays as it was)",
                self.uri,
                limit,
            )

    def start_from_property(self, table: Table, snap: Snapshot) -> None:
        """Enable it in a thread, with α from the table property or measured: a scan never
        waits for that (measuring α rewrites a copy of the table: seconds to minutes). One
        thread at a time; the scans until it is enabled are not fed to it."""
        with self.lock:
            if self.starter is not None and self.starter.is_alive():
                return
            self.starter = threading.Thread(
                target=self._start_from_property, args=(table, snap),
                name="lakelayout-online-enable", daemon=True,
            )  # fmt: skip
            self.starter.start()

    def _start_from_property(self, table: Table, snap: Snapshot) -> None:
        try:
            if not self.store.state.exists():
                _enable_from_property(table, snap)
        except LakelayoutError:
            pass  # reported (a bad α) or tried again at the next scan (e.g. nothing to measure)
        except Exception as exc:  # the reorganizer must never fail the user's work
            logger.warning("online reorganization of %s not started: %s", self.uri, exc)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for this process's enabling from the table property, its background step,
        then for the rewrite it may start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for attr in ("starter", "stepper", "worker"):
            thread = getattr(self, attr)
            if thread is None:
                continue
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        return True


class UnlaidFiles:
    """Per live file, whether the layout of the state the table is in did not write it and
    does not place it (:func:`plan_switch` to that state; all False for the table as it
    was), and the files it places. Worked out once per table version and state; the
    provenance only for the files it has not seen in that state (:meth:`plan`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._key: tuple[int, str] | None = None
        self._found: tuple[np.ndarray, dict[str, int]] = (np.zeros(0, bool), {})
        self._state: tuple[str, str] | None = None  # (state id, layout digest) of _seen
        #: per live path: (size, written by the layout)
        self._seen: dict[str, tuple[int, bool]] = {}
        self._written = np.zeros(0, bool)

    def of(self, snap: Snapshot, engine: OnlineEngine) -> tuple[np.ndarray, dict[str, int]]:
        key = (snap.version, engine.applied)
        if key != self._key:
            state = engine.manager.states[engine.applied]
            if state.layout is None or len(snap.files) == 0:
                self._found = (np.zeros(len(snap.files), bool), {})
                self._written = np.zeros(len(snap.files), bool)
            else:
                self._found = self.plan(snap.files, state)
                self._written = np.array(
                    [self._seen[str(p)][1] for p in snap.files.paths], dtype=bool
                )
            self._key = key
        return self._found

    def written(self, snap: Snapshot, engine: OnlineEngine) -> np.ndarray:
        """Per live file: written by the layout of the state the table is in
        (:func:`laid_out_by`), from the same work as :meth:`of`."""
        self.of(snap, engine)
        return self._written

    def plan(self, files: FileStats, state: ManagedState) -> tuple[np.ndarray, dict[str, int]]:
        """:func:`plan_switch` of ``files`` to ``state``'s layout, with the provenance
        worked out before for the files of the same path and size (a file's provenance
        depends on that file alone, and a path is written once). The block each file's
        statistics place it in is worked out every time (vectorized: about 13 ms for
        100,000 files): a writer may add a path again with other statistics, and a block
        remembered from the old ones was refused by ``optimize.apply`` (a review). The
        size floor depends on all the files and is applied to them every time. (Where
        placing gives up for a whole call, e.g. a rule on a function of a column that
        overflows on one file, the files of that call are not placed: rewritten, never
        placed wrongly, as with :func:`plan_switch`.)"""
        layout = state.layout
        assert layout is not None, "the table as it was has no layout to plan with"
        if self._state != (state.id, state.layout_digest):
            self._state, self._seen = (state.id, state.layout_digest), {}
        paths = [str(p) for p in files.paths]
        sizes = np.asarray(files.sizes, dtype=np.int64)
        seen = self._seen
        fresh = np.array(
            [seen.get(p, (-1,))[0] != s for p, s in zip(paths, sizes.tolist(), strict=True)],
            dtype=bool,
        )
        if fresh.any():
            part = files.take(fresh)
            found = zip(
                (p for p, f in zip(paths, fresh.tolist(), strict=True) if f),
                sizes[fresh].tolist(),
                laid_out_by(self.root, part, layout, state.layout_json).tolist(),
                strict=True,
            )
            for path, size, written in found:
                seen[path] = (size, written)
        self._seen = {p: seen[p] for p in paths}  # the files no longer live are dropped
        written = np.array([self._seen[p][1] for p in paths], dtype=bool)
        return _switch_plan(files, layout, written, file_blocks(layout, files))


def plan_catch_up(
    engine: OnlineEngine, files: FileStats, unlaid: np.ndarray, written: np.ndarray
) -> tuple[np.ndarray, float] | None:
    """The catch-up ``engine`` wants now, if any: the files to rewrite
    (:func:`catch_up_files`; ``unlaid`` and ``written`` from :class:`UnlaidFiles`) and
    their share of the table's bytes."""
    layout = engine.layout_of(engine.applied)
    sizes = np.asarray(files.sizes, dtype=np.float64)
    if layout is None or not unlaid.any() or sizes.sum() <= 0:
        return None
    # it rewrites at least the unlaid files: no need to look further when they do not pay
    if not engine.wants_catch_up(float(sizes[unlaid].sum() / sizes.sum())):
        return None
    rewrite, share = catch_up_files(files, layout, unlaid, written)
    return (rewrite, share) if engine.wants_catch_up(share) else None


def catch_up_files(
    files: FileStats, layout: Layout, unlaid: np.ndarray, written: np.ndarray
) -> tuple[np.ndarray, float]:
    """What a catch-up with ``layout`` rewrites: the ``unlaid`` files (not written or placed
    by it) and the small files it wrote (``written``, :func:`laid_out_by`; below
    :func:`~lakelayout.layouts.base.keep_floor`: earlier catch-ups' pieces, merged so that
    a block carries at most one small file); and the share of the table's bytes that is.
    Nothing when nothing is unlaid."""
    sizes = np.asarray(files.sizes, dtype=np.float64)
    total = float(sizes.sum())
    if total <= 0 or not unlaid.any():
        return np.zeros(len(files), dtype=bool), 0.0
    small = ~unlaid & (sizes < keep_floor(layout, sizes)) & written
    rewrite = unlaid | small
    return rewrite, float(sizes[rewrite].sum()) / total


def charge_unlaid(
    engine: OnlineEngine,
    predicates: Sequence[Predicate],
    snap: Snapshot,
    unlaid: np.ndarray,
) -> None:
    """Charge ``engine``'s catch-up account (:meth:`OnlineEngine.charge_unlaid`) with what
    ``predicates`` read in the ``unlaid`` files beyond what the table's layout would keep
    of them: per query ``share × max(0, read − laid)``, ``share`` their part of the
    table's bytes, ``read`` the fraction of their bytes the query keeps on their real
    statistics, ``laid`` the fraction it keeps of the layout's virtual files."""
    sizes = np.asarray(snap.files.sizes, dtype=np.float64)
    total = float(sizes.sum())
    layout = engine.layout_of(engine.applied)
    if layout is None or not predicates or not unlaid.any() or total <= 0:
        return
    share = float(sizes[unlaid].sum()) / total
    # min/max alone: files no layout wrote have no layout index to add
    files = snap.files.take(unlaid)
    read = np.array([fraction_read(p, files, schema=snap.schema) for p in predicates])
    laid = engine.book.costs(layout, predicates)
    engine.charge_unlaid(share * float(np.maximum(read - laid, 0.0).sum()))


def _binder(table: Table, snap: Snapshot, timezone: str) -> Callable[[str], Predicate | None]:
    """A window's or queue's SQL bound to the snapshot's schema; None when it no longer binds."""
    functions = table.indexes.functions()

    def bind(sql: str) -> Predicate | None:
        try:
            return parse_predicate(sql, snap.schema, functions=functions, timezone=timezone)
        except LakelayoutError:
            return None

    return bind


def _removed_since(table: Table, paths: Sequence[str]) -> str:
    """Why a switch planned on ``paths`` lost to a commit since (some are no longer
    live: its rewrite would be refused), or "" when every one is live."""
    snap = table.snapshot()
    gone = [p for p in paths if p not in snap.data_files]
    if not gone:
        return ""
    return (
        f"{len(gone)} of its input files were removed by a concurrent commit (the table "
        f"is at version {snap.version}), e.g. {gone[0]!r}"
    )


def outside_share(sample: pa.Table, files: FileStats) -> float:
    """The share of ``sample``'s rows a table of ``files`` cannot hold: a number, date or
    timestamp outside the range every file's statistics bound (columns whose bounds
    some file lacks say nothing; strings neither: other writers truncate their bounds)."""
    if sample.num_rows == 0 or len(files) == 0:
        return 0.0
    outside = np.zeros(sample.num_rows, dtype=bool)
    for name in sample.column_names:
        stats = files.column(name)
        kind = sample.schema.field(name).type
        orderable = (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
            or pa.types.is_date(kind) or pa.types.is_timestamp(kind)
        )  # fmt: skip
        if stats is None or not orderable or stats.min.null_count or stats.max.null_count:
            continue
        try:
            low = pc.min(stats.min).cast(kind)
            high = pc.max(stats.max).cast(kind)
            values = sample.column(name)
            beyond = pc.or_(pc.less(values, low), pc.greater(values, high))
            outside |= pc.fill_null(beyond, False).to_numpy(zero_copy_only=False)
        except (pa.ArrowException, ValueError, TypeError):  # bounds it cannot compare
            continue
    return float(outside.mean())


def _committed(uri: str, record: Switch, snap: Snapshot, layout: Layout | None) -> bool:
    """Did the rewrite of ``record`` commit? True when files laid out by its layout appeared
    after ``read_version`` (``optimize.apply`` commits all of them or none)."""
    from lakelayout.table import delta

    if layout is None or record.read_version is None:
        return False
    if not record.inputs:
        return True  # nothing to rewrite: the table was already in the target layout
    before = {str(p) for p in delta.snapshot(uri, record.read_version).files.paths}
    new = np.array([str(p) not in before for p in snap.files.paths], dtype=bool)
    if not new.any():
        return False
    return bool((laid_out_by(uri, snap.files, layout) & new).any())


def _same_columns(sample: pa.Schema, schema: pa.Schema) -> bool:
    """Whether the sample has the table's columns with the same Delta types (a sample read
    back through Spark or Parquet may differ in Arrow details: nullability, string
    views, zone spelling)."""
    from lakelayout.table.schema import delta_type_name

    def columns(s: pa.Schema) -> list[tuple[str, str]]:
        return [(f.name.lower(), delta_type_name(f.type)) for f in s]

    return columns(sample) == columns(schema)


def _take_sample(table: Table, snap: Snapshot, rows: int) -> pa.Table:
    from lakelayout.cluster.rewrite import sample_rows

    if len(snap.files) == 0:
        return snap.schema.empty_table()
    return sample_rows(table.to_df(version=snap.version), int(snap.files.total_rows), rows=rows)


_CONTROLLERS: dict[str, _Controller] = {}
_REGISTRY = threading.Lock()


def exit_wait() -> float | None:
    """:data:`EXIT_WAIT_ENV` in seconds (None: no limit). A value that is not a number of
    seconds >= 0 is named in a warning and means no limit (at exit, there is no caller
    to raise to)."""
    raw = os.environ.get(EXIT_WAIT_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0:  # (NaN too)
        logger.warning(
            "%s=%r is not a number of seconds >= 0: waiting until the rewrite ends",
            EXIT_WAIT_ENV,
            raw,
        )
        return None
    return value


class _AtExit:
    """Runs :meth:`_Controller.finish` for every table at the process's exit. Registered
    when the first background thread starts, after Spark's own exit handlers (the gateway),
    so it runs before them: the threads still have their session."""

    def __init__(self) -> None:
        self._registered = False
        self._lock = threading.Lock()

    def register(self) -> None:
        with self._lock:
            if not self._registered:
                atexit.register(self)
                self._registered = True

    def __call__(self) -> None:
        with _REGISTRY:
            controllers = list(_CONTROLLERS.values())
        for ctl in controllers:
            try:
                ctl.finish()
            except KeyboardInterrupt:
                logger.warning("online reorganization of %s: abandoned at exit", ctl.uri)
                return


_finish_at_exit = _AtExit()


def controller(uri: str) -> _Controller:
    """The one controller of table ``uri`` in this process."""
    with _REGISTRY:
        found = _CONTROLLERS.get(uri)
        if found is None:
            found = _CONTROLLERS[uri] = _Controller(uri)
        return found


def after_scan(table: Table, where: str, predicate: Predicate, snap: Snapshot) -> None:
    """``Table.scan``'s hook: feed the query to the reorganizer when it is enabled.

    It never raises: a state that cannot be locked, read or written (a read-only
    ``_lakelayout/``, a damaged file) must not fail the user's scan. The first
    failure of each kind on a table is logged as a warning; ``status()`` raises it.
    """
    if snap.configuration.get(ENABLED_PROPERTY, "").lower() != "true":
        return
    try:
        ctl = controller(table.uri)
        if not ctl.store.state.exists():
            ctl.start_from_property(table, snap)
            return
        ctl.observe(table, where, predicate, snap)
    except Exception as exc:
        key = (table.uri, type(exc).__name__)
        if key not in _SCAN_FAILURES_REPORTED:
            _SCAN_FAILURES_REPORTED.add(key)
            logger.warning(
                "online reorganization of %s did not see this scan (the scan is unaffected; "
                "t.online.status() shows the state): %s",
                table.uri,
                exc,
            )


#: (table, error type) pairs whose failure on a scan's path was reported in this process
_SCAN_FAILURES_REPORTED: set[tuple[str, str]] = set()


def check_properties(config: Mapping[str, str]) -> None:
    """Refuse a bad :data:`ENABLED_PROPERTY` or :data:`ALPHA_PROPERTY` (InvalidOption):
    ``Table.create`` checks them before anything is written."""
    enabled = config.get(ENABLED_PROPERTY, "").strip().lower()
    if enabled not in ("", "true", "false"):
        raise InvalidOption(
            f"table property {ENABLED_PROPERTY} must be 'true' or 'false', got "
            f"{config[ENABLED_PROPERTY]!r}"
        )
    property_alpha(config)


def property_alpha(config: Mapping[str, str]) -> float | str:
    """α from :data:`ALPHA_PROPERTY`: a number > 0, or ``"measured"`` when it is not set."""
    raw = config.get(ALPHA_PROPERTY, "").strip()
    if not raw:
        return "measured"
    try:
        alpha = float(raw)
    except ValueError:
        alpha = float("nan")
    if not math.isfinite(alpha) or alpha <= 0:
        raise InvalidOption(
            f"table property {ALPHA_PROPERTY} must be a number > 0 (a rewrite's cost in full "
            f"scans), got {raw!r}; leave it unset to have α measured"
        )
    return alpha


#: tables whose bad online properties were reported in this process (once each)
_REPORTED: set[str] = set()


def _enable_from_property(table: Table, snap: Snapshot) -> None:
    """The property alone turned it on: start with the defaults (α from the property or
    measured). A bad α in the property (written by another tool) is reported once per
    process and the table is left alone."""
    try:
        alpha = property_alpha(snap.configuration)
    except InvalidOption as exc:
        if table.uri not in _REPORTED:
            _REPORTED.add(table.uri)
            logger.warning("online reorganization of %s not started: %s", table.uri, exc)
        raise
    Online(table).enable(alpha=alpha, _set_property=False)


# --------------------------------------------------------------------------- Table.online


class Online:
    """``t.online``: enable, inspect and disable online reorganization of one table.

    ``enable()`` measures α (unless given), samples the table and writes the
    initial state: the table as it is is the only state. From then on every
    ``t.scan(where)`` of the latest version is a query for the reorganizer.
    """

    def __init__(self, table: Table) -> None:
        self._table = table
        self._ctl = controller(table.uri)

    @property
    def enabled(self) -> bool:
        config = self._table.snapshot().configuration
        return config.get(ENABLED_PROPERTY, "").lower() == "true" and self._ctl.store.state.exists()

    def enable(
        self,
        *,
        alpha: float | str = "measured",
        window: int = 200,
        interval: int = 50,
        max_states: int = 8,
        epsilon: float = 0.08,
        gamma: float = 0.0,
        predictor: str = "phase",
        predictor_window: int = 0,
        predictor_weight: str = "skipped",
        mid_phase_join: bool = False,
        fit_before_draw: bool = False,
        seed: int = 0,
        policy: str = "oreo",
        families: Sequence[str] = FAMILIES,
        history: int = 0,
        admission_sample: int = 0,
        half_life: int = 2000,
        sample_rows: int = SAMPLE_ROWS,
        catch_up: bool = True,
        _set_property: bool = True,
    ) -> dict[str, Any]:
        """Start online reorganization; the initial status.

        ``alpha``: a number (rewrite cost in full scans) or ``"measured"``
        (:func:`measure_alpha`). ``window``/``interval``: the manager's window
        and how often it fits candidates (queries); ``max_states``,
        ``epsilon``: the state space's size and admission distance;
        ``gamma``: predictor exponent (0: uniform draws, the analysed
        algorithm); ``predictor``: the predictor's weights from the last
        phase (``"phase"``) or the last ``predictor_window`` queries
        (``"recent"``; 0: ``window``); ``predictor_weight``: a state's weight is
        ``1 -`` its mean cost (``"skipped"``) or ``1 / (mean cost + 0.01)``
        (``"inverse"``: states weighed by the ratio of their costs);
        ``mid_phase_join``: a state admitted during a phase joins it at once
        (counter from its window costs) instead of at the next phase;
        ``fit_before_draw`` (with ``mid_phase_join``): when a scan fills the
        current state's counter, fit candidates on the window before the draw;
        ``seed``: the reorganizer's random generator;
        ``policy``: ``oreo`` (or the baselines ``greedy``, ``regret``);
        ``families``: candidate layout families; ``history``: queries sampled
        uniformly from the whole stream, on which a second set of candidates
        is fitted each round (0: the window only); ``admission_sample``: queries
        of the time-biased sample of the whole stream that admission and pruning
        compare layouts on, as the paper does (0: the window), a query
        ``half_life`` queries older weighing half; ``sample_rows``: rows of the
        sample virtual files are built on; ``catch_up``: lay out the files
        appended since the last rewrite with the table's layout once reading
        them costs what rewriting them does (docs/online.md, "Appends:
        catch-ups"). Everything is checked before any job runs.
        """
        if isinstance(alpha, str):
            if alpha != "measured":
                raise InvalidOption(f"alpha must be a number > 0 or 'measured', got {alpha!r}")
            check_alpha: float = 1.0
        else:
            check_alpha = alpha
        config = OnlineConfig(
            alpha=check_alpha,
            policy=policy,
            window=window,
            interval=interval,
            epsilon=epsilon,
            max_states=max_states,
            gamma=gamma,
            predictor=predictor,
            predictor_window=predictor_window,
            predictor_weight=predictor_weight,
            mid_phase_join=mid_phase_join,
            fit_before_draw=fit_before_draw,
            seed=seed,
            history=history,
            admission_sample=admission_sample,
            half_life=half_life,
            catch_up=catch_up,
        )
        unused = config.unused()
        if unused:
            raise InvalidOption(
                f"options this online policy would ignore: {'; '.join(unused)}; leave them out"
            )
        chosen = check_families(families)
        if isinstance(sample_rows, bool) or not isinstance(sample_rows, int) or sample_rows < 100:
            raise InvalidOption(f"sample_rows must be an integer >= 100, got {sample_rows!r}")
        self._check_can_enable()
        table = self._table
        if _set_property:  # before any job: the property commit must be possible
            table._properties_session()
        snap = table.snapshot()
        # the jobs run before the lock is taken: other processes' scans and status() go on
        if isinstance(alpha, str):
            measured = measure_alpha(table)
        else:
            measured = AlphaMeasurement(alpha=float(alpha), method="given")
        config = OnlineConfig(**{**config.to_dict(), "alpha": measured.alpha})
        sample = _take_sample(table, snap, sample_rows)
        with self._ctl.store.locked(wait=True), self._ctl.lock:
            self._check_can_enable()  # again: another process may have enabled it meanwhile
            self._ctl.store.write_sample(sample)
            self._ctl.store.clear_queue()  # scans queued for an earlier state
            engine = OnlineEngine(config, sample, self._ctl._fitter(chosen))
            self._ctl.engine = engine
            self._ctl.document = {
                "version": STATE_VERSION,
                "table": table.uri,
                "enabled_at": time.time(),
                "enabled_version": snap.version,
                "alpha_measurement": measured.to_dict(),
                "families": chosen,
                "sample_rows": sample_rows,
                "sample_base_rows": int(snap.files.total_rows),
                "timezone": table.spark.conf.get("spark.sql.session.timeZone") or "UTC",
            }
            self._ctl.save()
            if _set_property:
                table._set_properties({ENABLED_PROPERTY: "true"})
            return self.status()

    def _check_can_enable(self) -> None:
        with self._ctl.lock:
            if self._ctl._running_here():
                raise InvalidOption(
                    f"a rewrite of '{self._table.uri}' is still running; wait() before enable()"
                )
            if self.enabled:
                raise InvalidOption(
                    f"online reorganization is already enabled on '{self._table.uri}'; "
                    "disable it first to start over (t.online.disable() or lakelayout "
                    "online disable PATH)"
                )

    def disable(self) -> None:
        """Stop feeding scans to the reorganizer (a running rewrite finishes; the state
        stays on disk for ``status()``/``history()`` until the next ``enable()``). Nothing is
        committed when it is off already; a table it was never enabled on is an error."""
        config = self._table.snapshot().configuration
        on = config.get(ENABLED_PROPERTY, "").lower() == "true"
        if not on and not self._ctl.store.state.exists():
            raise self._never_enabled()
        if on:
            self._table._set_properties({ENABLED_PROPERTY: ""})

    def status(self) -> dict[str, Any]:
        """Layout the table is in, candidate states with counters and what each would have
        cost, phase, α and how it was measured, query and reorganization costs so far."""
        data = self._document()
        status = dict(data.get("status") or {})
        status["enabled"] = self.enabled
        status["alpha_measurement"] = data.get("alpha_measurement")
        status["families"] = data.get("families")
        status["table"] = self._table.uri
        return status

    def history(self) -> list[dict[str, Any]]:
        """Every switch: query number, from, to, why, status, seconds, files, error."""
        data = self._document()
        return list((data.get("engine") or {}).get("history") or [])

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background rewrite of this process; True when none is running."""
        args.require_seconds(timeout, "timeout", "online.wait", optional=True)
        return self._ctl.wait(timeout)

    def set_hooks(self, hooks: OptimizeHooks | None) -> None:
        """Callbacks around the rewrites' commits (progress, tests): see ``OptimizeHooks``."""
        from lakelayout.cluster import OptimizeHooks

        args.require_instance(hooks, OptimizeHooks, "hooks", "online.set_hooks", optional=True)
        self._ctl.hooks = hooks

    def _document(self) -> dict[str, Any]:
        """The state as stored, after settling a rewrite interrupted in another process and
        applying the scans other processes queued."""
        store = self._ctl.store
        stepper = self._ctl.stepper
        if stepper is not None:  # this process's step off a scan's path comes first
            stepper.join(LOCK_WAIT)
        if store.state.exists():  # (never enabled: nothing to lock, nothing written)
            with store.locked(wait=True), self._ctl.lock:
                snap = self._table.snapshot()
                self._ctl.load(self._table, snap)
                self._ctl.drain(self._table, snap)
        data = store.read()
        if data is None:
            raise self._never_enabled()
        return data

    def _never_enabled(self) -> InvalidOption:
        return InvalidOption(
            f"online reorganization was never enabled on '{self._table.uri}'; "
            "call t.online.enable() (or lakelayout online enable PATH) first"
        )
