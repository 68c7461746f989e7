"""The per-table metadata store: Parquet segments under ``<table>/_lakelayout/index/``.

Layout::

    <table>/_lakelayout/indexes.json               declared indexes (kind, expression, params)
    <table>/_lakelayout/index/CURRENT              name of the live manifest
    <table>/_lakelayout/index/manifest-<id>.json   the live segments, oldest first
    <table>/_lakelayout/index/store-<id>.parquet   one segment

A segment has one row per data file: ``path``, ``size``, ``modification_time``
-- the freshness key -- and one column per index, named by the index name,
holding that index's per-file value (struct / list / binary). A path may have
rows in several segments; its row is the one of the *newest* segment listing
it, whatever older segments hold. Metadata is *fresh* for a snapshot file only
when all three keys of that row match; anything else (a replaced file, a file
appended without metadata, a newer segment without that index's column) reads
as null, and a null entry never lets a file be skipped.

The manifest is a small JSON document::

    {"version": 1, "live_rows": 98,
     "segments": [{"file": "store-<id>.parquet", "rows": 100, "columns": ["valuelist(s)"]},
                  {"file": "store-<id>.parquet", "rows": 2, "columns": ["valuelist(s)"]}]}

An upsert writes one new segment holding only its rows and a manifest listing
the old segments and the new one: old segments are neither read nor written,
so an upsert costs in proportion to the rows it adds. Rows superseded by a
newer segment, and rows of files that left the snapshot (``live_paths``), stay
on disk, dead, until a *compaction*: when the new manifest would list more
than ``max_segments`` segments (8 by default), or more than half of all rows
would be dead, the upsert writes instead one merged segment -- the newest row
of every path, only live paths when ``live_paths`` is given -- which is what
every upsert wrote before segments (``max_segments=1`` restores that).
``live_rows`` is an upper bound of the rows still live, kept without reading
old segments (the previous bound plus the rows added, capped by the number of
live paths when they are given; exact after a compaction and whenever the store
covers the snapshot, as after every write through the catalog); dead rows are
therefore not over-counted: a compaction comes no earlier than half, at worst
later, and the segment bound caps that. (One exception: a dead row whose file
comes back into the snapshot under the same path is live again without being
counted; at worst a compaction comes early.) A reader opens every segment (the
key columns and the asked-for index columns it has), so reading does more work
with more segments, at most ``max_segments`` of them.

A ``CURRENT`` that names a ``store-<id>.parquet`` (a store written before
segments) is read as a manifest of that one segment; the next upsert appends to
it.

Writes are atomic: the new segment and the new manifest are written completely
under new unique names, then ``CURRENT`` is replaced (written to a temporary
name, then ``os.replace``). A crash before the swap leaves the previous store
readable. After a swap, store files and manifests that neither the new nor the
previous manifest references are deleted (a reader that read the previous
pointer can finish); a segment the live manifest references is never deleted.
Reads open only the columns asked for, so pruning 100,000 files with one index
reads one metadata column (per segment).

Writers take turns: every read-modify-write of the store or of the
declarations (an upsert after an append or a rewrite, a refresh's write, a
declaration added or dropped) holds the table's index lock
(``_lakelayout/index.lock``, :meth:`MetadataStore.locked`: a file lock, so
threads of one process and processes on one machine alike), so no write's
rows are lost and no garbage collection deletes a segment another writer is
about to publish. (Without it, appends from four threads made the store
unreadable in 8 rounds of 10, and declarations added at once were lost;
found by an audit.)

Garbage: store files and manifests the live manifest does not reference, and a
temporary file an interrupted :func:`atomic_write_text` left
(``.<name>.<hex>.tmp``), are no longer read by anyone;
:meth:`MetadataStore.garbage` and :func:`temp_files` list them for VACUUM
(:mod:`lakelayout.cluster.vacuum`), which deletes them once they are older than
the table's retention.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.errors import InvalidOption, LakelayoutError, StateLocked, StateUnreadable
from lakelayout.skipping.indexes.base import Collector, Index, Udf
from lakelayout.stats.model import FileStats
from lakelayout.table.datafile import column_bytes
from lakelayout.table.location import STATE_FOLDER

KEY_COLUMNS = ("path", "size", "modification_time")
KEY_SCHEMA = pa.schema(
    [("path", pa.string()), ("size", pa.int64()), ("modification_time", pa.int64())]
)
SIDECAR = STATE_FOLDER
#: the lock every writer of a table's index store and declarations holds (in SIDECAR)
LOCK_FILE = "index.lock"
#: seconds a writer waits for the lock (a write takes milliseconds to a second)
LOCK_WAIT = 120.0
#: one FileLock per lock file in this process (re-entrant per thread)
_LOCKS: dict[str, Any] = {}
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class SidecarFile:
    """A file under ``<table>/_lakelayout/`` that no reader needs any more.

    ``dead_since`` (epoch seconds) is the latest moment it can have stopped
    being live: for a store file ``CURRENT`` no longer names, the later of its
    own and the pointer's modification time (it was superseded at the latest
    when the pointer was last written); otherwise its modification time.
    """

    path: Path
    kind: str
    dead_since: float


@dataclass(frozen=True)
class Coverage:
    """How much of a snapshot one index covers."""

    files_covered: int
    stale_files: int
    missing_files: int
    metadata_bytes: int


@dataclass(frozen=True)
class Segment:
    """One store file a manifest lists: its name, rows and index columns."""

    file: str
    rows: int
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    """The live store: its segments, oldest first, and an upper bound of the live rows.

    ``file`` is the name ``CURRENT`` gives it: a ``manifest-<id>.json``, or
    the ``store-<id>.parquet`` of a store written before segments.
    """

    file: str
    segments: tuple[Segment, ...]
    live_rows: int

    @property
    def rows(self) -> int:
        """Rows over all segments, dead ones included."""
        return sum(s.rows for s in self.segments)

    def columns(self) -> list[str]:
        """Index columns of any segment, in order of appearance."""
        return list(dict.fromkeys(c for s in self.segments for c in s.columns))

    def referenced(self) -> set[str]:
        """The file names a reader of this manifest opens: itself and its segments."""
        return {self.file, *(s.file for s in self.segments)}

    def to_json(self) -> str:
        segments = [
            {"file": s.file, "rows": s.rows, "columns": list(s.columns)} for s in self.segments
        ]
        document = {"version": MANIFEST_VERSION, "live_rows": self.live_rows, "segments": segments}
        return json.dumps(document, indent=1)

    @classmethod
    def from_json(cls, file: str, text: str) -> Manifest:
        """Parse a manifest document; a malformed one raises :class:`LakelayoutError`."""
        try:
            document = json.loads(text)
            version = document["version"]
            if version != MANIFEST_VERSION:
                raise ValueError(f"version {version!r}; this lakelayout reads {MANIFEST_VERSION}")
            segments = tuple(
                Segment(str(s["file"]), int(s["rows"]), tuple(str(c) for c in s["columns"]))
                for s in document["segments"]
            )
            if any(Path(s.file).name != s.file for s in segments):
                raise ValueError("a segment is not a file name in the store's directory")
            return cls(file, segments, int(document["live_rows"]))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise StateUnreadable(f"corrupt index store manifest {file}: {err}") from None


@dataclass(frozen=True)
class _Lookup:
    """Where each snapshot file's row is: the newest segment listing its path.

    ``tables`` are the segments as read (key columns and some index columns),
    oldest first; per snapshot file, ``segment`` is the index of the newest
    one listing its path (-1: none), ``row`` its row there and ``fresh``
    whether that row's key matches the file.
    """

    tables: list[pa.Table]
    segment: np.ndarray
    row: np.ndarray
    fresh: np.ndarray

    @classmethod
    def of(cls, tables: list[pa.Table], files: FileStats) -> _Lookup:
        paths = pa.array(list(files.paths), type=pa.string())
        segment = np.full(len(paths), -1, dtype=np.int64)
        row = np.zeros(len(paths), dtype=np.int64)
        for j, table in enumerate(tables):  # oldest first: a newer segment overrides
            at = pc.index_in(paths, value_set=table.column("path").combine_chunks())
            listed = _valid(at)
            segment[listed] = j
            row[listed] = _filled(at)[listed]
        fresh = np.zeros(len(paths), dtype=bool)
        sizes = np.asarray(files.sizes, dtype=np.int64)
        mtimes = np.asarray(files.modification_times, dtype=np.int64)
        for j, table in enumerate(tables):
            mine = np.flatnonzero(segment == j)
            if mine.size:
                at = row[mine]
                fresh[mine] = (table.column("size").to_numpy()[at] == sizes[mine]) & (
                    table.column("modification_time").to_numpy()[at] == mtimes[mine]
                )
        return cls(tables, segment, row, fresh)

    def column(self, name: str) -> pa.Array:
        """``name``'s value in each file's row; null where missing, stale or not in that segment."""
        pieces: list[pa.Array] = []
        where = np.full(len(self.segment), -1, dtype=np.int64)
        dtype: pa.DataType = pa.null()
        for j, table in enumerate(self.tables):
            if name not in table.column_names:
                continue
            dtype = table.schema.field(name).type
            mine = np.flatnonzero((self.segment == j) & self.fresh)
            if mine.size:
                where[mine] = sum(len(p) for p in pieces) + np.arange(mine.size)
                pieces.append(table.column(name).take(pa.array(self.row[mine])).combine_chunks())
        values = pa.concat_arrays(pieces) if pieces else pa.array([], type=dtype)
        return values.take(pa.array(where, type=pa.int64(), mask=where < 0))


#: the declaration key holding what an index's columns were bound to when its metadata
#: was built (:meth:`~lakelayout.table.datafile.TableFormat.binding`)
BINDING = "binding"


class MetadataStore:
    """Per-file index metadata of one table, kept next to its data.

    ``max_segments`` bounds the segments of the live manifest: an upsert that
    would exceed it compacts the store into one segment (1: every upsert does).
    """

    max_segments: int = 8

    def __init__(
        self, table_root: str | os.PathLike[str], *, max_segments: int | None = None
    ) -> None:
        self.root = Path(table_root)
        self.directory = self.root / SIDECAR / "index"
        self.pointer = self.directory / "CURRENT"
        self.declarations = self.root / SIDECAR / "indexes.json"
        if max_segments is not None:
            if max_segments < 1:
                raise InvalidOption(f"max_segments must be at least 1; got {max_segments}")
            self.max_segments = max_segments

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the table's index lock (see the module docstring); re-entrant in a
        thread. StateLocked after :data:`LOCK_WAIT` seconds; StateUnreadable when the
        lock cannot be taken (a read-only folder)."""
        from filelock import FileLock, Timeout

        folder = self.root / SIDECAR
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = str(folder / LOCK_FILE)
            lock = _LOCKS.get(path) or _LOCKS.setdefault(path, FileLock(path))
            lock.acquire(timeout=LOCK_WAIT)
        except Timeout:
            raise StateLocked(
                f"another writer has held {folder / LOCK_FILE} for more than {LOCK_WAIT:.0f} s"
            ) from None
        except OSError as exc:
            raise StateUnreadable(f"cannot take the index lock in {folder}: {exc}") from None
        try:
            yield
        finally:
            lock.release()

    def current_file(self) -> Path | None:
        """The file ``CURRENT`` names (the live manifest), or None when nothing was written yet."""
        try:
            name = self.pointer.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return self.directory / name if name else None

    def manifest(self) -> Manifest | None:
        """The live manifest, or None when nothing was written yet.

        A ``CURRENT`` naming a store file (written before segments) is a
        manifest of that one segment, every row live.
        """
        current = self.current_file()
        if current is None:
            return None
        try:
            if current.suffix == ".parquet":
                metadata = pq.read_metadata(current)
                names = metadata.schema.to_arrow_schema().names
                columns = tuple(n for n in names if n not in KEY_COLUMNS)
                segment = Segment(current.name, metadata.num_rows, columns)
                return Manifest(current.name, (segment,), metadata.num_rows)
            text = current.read_text(encoding="utf-8")
        except (OSError, pa.ArrowException) as exc:
            raise StateUnreadable(
                f"the index store's manifest {current} (named by {self.pointer}) cannot be "
                f"read: {exc}; remove {self.directory} and run t.indexes.refresh() to rebuild it"
            ) from exc
        return Manifest.from_json(current.name, text)

    def segments(self) -> list[Path]:
        """The live segments' files, oldest first."""
        manifest = self.manifest()
        if manifest is None:
            return []
        return [self.directory / s.file for s in manifest.segments]

    def columns(self) -> list[str]:
        """Index columns present in the live store (in any segment)."""
        manifest = self.manifest()
        return manifest.columns() if manifest is not None else []

    def read(self, files: FileStats, index_names: Iterable[str]) -> dict[str, pa.Array]:
        """Metadata of each index aligned with ``files``; null where missing or stale.

        Indexes without a column in the store are absent from the result.
        Only the key columns and the asked-for index columns are read, from
        every live segment.
        """
        wanted = list(dict.fromkeys(index_names))
        manifest = self.manifest()
        if manifest is None or not wanted:
            return {}
        present = set(manifest.columns())
        names = [n for n in wanted if n in present]
        if not names:
            return {}
        lookup = self._lookup(manifest, files, names)
        return {n: lookup.column(n) for n in names}

    def _lookup(self, manifest: Manifest, files: FileStats, names: Sequence[str]) -> _Lookup:
        """Read the key columns and those of ``names`` each segment has; find each file's row."""
        tables = []
        for segment in manifest.segments:
            columns = [*KEY_COLUMNS, *(n for n in names if n in segment.columns)]
            try:
                tables.append(pq.read_table(self.directory / segment.file, columns=columns))
            except (OSError, pa.ArrowException) as exc:
                raise StateUnreadable(
                    f"the index store's segment {self.directory / segment.file} cannot be "
                    f"read: {exc}; remove {self.directory} and run t.indexes.refresh() to rebuild it"
                ) from exc
        return _Lookup.of(tables, files)

    def read_all(self) -> pa.Table:
        """The newest row of every path in the live store, as one table.

        Rows of files that left the snapshot are still there until a
        compaction drops them. An empty key-only table when there is no store.
        """
        manifest = self.manifest()
        if manifest is None:
            return KEY_SCHEMA.empty_table()
        return self._merged(manifest)

    def _merged(
        self, manifest: Manifest, rows: pa.Table | None = None, live: pa.Array | None = None
    ) -> pa.Table:
        """``rows`` and, of each segment, its rows no newer segment (or ``rows``) supersedes.

        With ``live``, only rows of those paths are taken from the segments
        (``rows`` are all kept). A segment whose rows are all dropped has only
        its schema read, so its columns stay, null for the other files.
        """
        parts = [] if rows is None else [rows]
        newer = [] if rows is None else [rows.column("path").combine_chunks()]
        for segment in reversed(manifest.segments):
            with pq.ParquetFile(self.directory / segment.file) as source:
                paths = source.read(columns=["path"]).column("path").combine_chunks()
                keep = pc.invert(pc.is_in(paths, value_set=_strings(newer)))
                if live is not None:
                    keep = pc.and_(keep, pc.is_in(paths, value_set=live))
                if pc.any(keep).as_py():
                    parts.append(source.read().filter(keep))
                else:  # every row of it is dead: read its schema, not its metadata
                    parts.append(source.schema_arrow.empty_table())
            newer.append(paths)
        if not parts:
            return KEY_SCHEMA.empty_table()
        return pa.concat_tables(parts[::-1], promote_options="default")

    # ------------------------------------------------------------ writing

    def write(self, rows: pa.Table) -> Path:
        """Replace the store with ``rows``: one segment, its manifest, then the pointer swap."""
        rows = _check_rows(rows)
        with self.locked():
            try:
                previous = self.manifest()
            except (OSError, LakelayoutError, pa.ArrowException):
                previous = None  # unreadable: no reader can be using it
            segment = self._write_segment(rows)
            return self._swap((segment,), rows.num_rows, previous)

    def upsert(self, rows: pa.Table, live_paths: Iterable[str] | None = None) -> Path:
        """Add or replace rows by path; with ``live_paths``, rows of other files are dead.

        Appends one segment holding ``rows``, or compacts the store into one
        segment when it would have more than :attr:`max_segments` segments or
        more dead rows than live ones (see the module docstring). Returns the
        live manifest.
        """
        rows = _check_rows(rows)
        with self.locked():
            return self._upsert(rows, live_paths)

    def _upsert(self, rows: pa.Table, live_paths: Iterable[str] | None) -> Path:
        manifest = self.manifest()
        if manifest is None:
            return self.write(rows)
        live = None if live_paths is None else pa.array(list(live_paths), pa.string())
        live_rows = _live_bound(manifest.live_rows, rows, live)
        added = 1 if rows.num_rows else 0
        total = manifest.rows + rows.num_rows
        if len(manifest.segments) + added > self.max_segments or 2 * (total - live_rows) > total:
            merged = self._merged(manifest, rows, live)
            return self._swap((self._write_segment(merged),), merged.num_rows, manifest)
        if not added:  # nothing to add, nothing to compact
            return self.directory / manifest.file
        segments = (*manifest.segments, self._write_segment(rows))
        return self._swap(segments, live_rows, manifest)

    def drop_index(self, name: str) -> None:
        """Remove one index's column from the store (rewritten as one segment)."""
        with self.locked():
            if name in KEY_COLUMNS or name not in self.columns():
                return
            self.write(self.read_all().drop_columns([name]))

    def _write_segment(self, rows: pa.Table) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"store-{uuid.uuid4().hex}.parquet"
        # No dictionary encoding: paths are distinct and index values (a Bloom
        # filter is ~1 MB) rarely repeat, so a dictionary only costs: 1.4x the
        # write and 2x the read time on 100 random 1.2 MB values, timed with
        # pyarrow alone (docs/benchmarks.md, B3, "What the indexes step is").
        pq.write_table(rows, target, use_dictionary=False)
        columns = tuple(c for c in rows.column_names if c not in KEY_COLUMNS)
        return Segment(target.name, rows.num_rows, columns)

    def _swap(
        self, segments: tuple[Segment, ...], live_rows: int, previous: Manifest | None
    ) -> Path:
        """Write a manifest of ``segments``, point ``CURRENT`` at it, delete what none needs."""
        target = self.directory / f"manifest-{uuid.uuid4().hex}.json"
        manifest = Manifest(target.name, segments, live_rows)
        target.write_text(manifest.to_json(), encoding="utf-8")
        atomic_write_text(self.pointer, target.name)
        keep = manifest.referenced() | (previous.referenced() if previous is not None else set())
        self._collect_garbage(keep)
        return target

    def garbage(self) -> list[SidecarFile]:
        """Store files and manifests the live manifest does not reference.

        They were superseded, or written by a write that crashed before its
        swap. Each is dead since the later of its own and ``CURRENT``'s
        modification time. An unreadable manifest lists nothing (nothing is
        known to be dead).
        """
        try:
            manifest = self.manifest()
        except (OSError, LakelayoutError, pa.ArrowException):
            return []
        live = manifest.referenced() if manifest is not None else set()
        pointer_time = _mtime(self.pointer) or 0.0
        out = []
        for path in self._store_files():
            own = _mtime(path)
            if path.name not in live and own is not None:
                out.append(SidecarFile(path, "index-store", max(own, pointer_time)))
        return out

    def _collect_garbage(self, keep: set[str]) -> None:
        for path in self._store_files():
            if path.name not in keep:
                with contextlib.suppress(OSError):
                    path.unlink()

    def _store_files(self) -> list[Path]:
        """Every segment and manifest in the store's directory, live or not."""
        return sorted(
            [*self.directory.glob("store-*.parquet"), *self.directory.glob("manifest-*.json")]
        )

    # ------------------------------------------------------------ declarations

    def declaration_entries(self) -> list[dict[str, Any]]:
        """The raw declarations (``Index.to_dict()`` documents), [] when none."""
        try:
            text = self.declarations.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as err:
            raise LakelayoutError(
                f"corrupt index declarations in {self.declarations}: {err}"
            ) from None
        return [dict(e) for e in entries]

    def declared(
        self, *, udfs: Mapping[str, Udf] | None = None, schema: pa.Schema | None = None
    ) -> list[Index]:
        """Indexes declared on the table (bound to ``schema`` when given)."""
        indexes = [Index.from_dict(e, udfs=udfs) for e in self.declaration_entries()]
        return [i.bind(schema) for i in indexes] if schema is not None else indexes

    def declare(
        self, indexes: Sequence[Index], bindings: Sequence[Mapping[str, str] | None] = ()
    ) -> None:
        """Store the declarations atomically; names must be unique. ``bindings``: per
        index (in order), what its columns were bound to when its metadata was built
        (stored under :data:`BINDING`; missing: not known)."""
        names = [i.name for i in indexes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidOption(f"duplicate index name(s): {', '.join(duplicates)}")
        self.declarations.parent.mkdir(parents=True, exist_ok=True)
        documents = [i.to_dict() for i in indexes]
        for document, binding in zip(documents, bindings, strict=False):
            if binding is not None:
                document[BINDING] = dict(binding)
        text = json.dumps(documents, indent=2, sort_keys=True)
        with self.locked():
            atomic_write_text(self.declarations, text)

    # ------------------------------------------------------------ describing

    def describe(
        self, files: FileStats, index_names: Iterable[str] | None = None
    ) -> dict[str, Coverage]:
        """Per index: files with fresh metadata, stale rows, files without any, bytes.

        Bytes are those of the index's column over the live segments, dead rows
        included until a compaction.
        """
        manifest = self.manifest()
        names = list(index_names) if index_names is not None else self.columns()
        if manifest is None:
            return {n: Coverage(0, 0, len(files), 0) for n in names}
        present = set(manifest.columns())
        lookup = self._lookup(manifest, files, [n for n in names if n in present])
        sizes: dict[str, int] = {}
        for segment in manifest.segments:
            for name, size in column_bytes(pq.read_metadata(self.directory / segment.file)).items():
                sizes[name] = sizes.get(name, 0) + size
        listed = lookup.segment >= 0
        out: dict[str, Coverage] = {}
        for name in names:
            has = _valid(lookup.column(name)) if name in present else np.zeros(len(files), bool)
            covered = int((has & lookup.fresh).sum())
            stale = int((listed & ~lookup.fresh).sum())
            out[name] = Coverage(covered, stale, len(files) - covered - stale, sizes.get(name, 0))
        return out


# ---------------------------------------------------------------- collecting rows


def collectors(indexes: Sequence[Index]) -> dict[str, Collector]:
    """One fresh collector per index for one data file (what a writer task holds)."""
    return {i.name: i.collector() for i in indexes}


def metadata_rows(
    indexes: Sequence[Index],
    files: Sequence[tuple[str, int, int]],
    values: Sequence[Mapping[str, Any]],
) -> pa.Table:
    """Store rows from ``(path, size, modification_time)`` and per-file index values."""
    if len(files) != len(values):
        raise InvalidOption(f"{len(files)} files but {len(values)} metadata entries")
    data: dict[str, pa.Array] = {
        "path": pa.array([f[0] for f in files], pa.string()),
        "size": pa.array([f[1] for f in files], pa.int64()),
        "modification_time": pa.array([f[2] for f in files], pa.int64()),
    }
    for index in indexes:
        data[index.name] = pa.array([v.get(index.name) for v in values], type=index.arrow_type)
    return pa.table(data)


# ---------------------------------------------------------------- helpers


def _check_rows(rows: pa.Table) -> pa.Table:
    missing = [c for c in KEY_COLUMNS if c not in rows.column_names]
    if missing:
        raise InvalidOption(f"metadata rows lack key column(s) {missing}; got {rows.column_names}")
    paths = rows.column("path")
    if pc.count_distinct(paths).as_py() != rows.num_rows or paths.null_count:
        raise InvalidOption("metadata rows must have one row per distinct, non-null path")
    casts = {"path": pa.string(), "size": pa.int64(), "modification_time": pa.int64()}
    for name, dtype in casts.items():
        i = rows.schema.get_field_index(name)
        if rows.schema.field(i).type != dtype:
            rows = rows.set_column(i, name, rows.column(name).cast(dtype))
    return rows


def _live_bound(live_rows: int, rows: pa.Table, live: pa.Array | None) -> int:
    """An upper bound of the live rows once ``rows`` are added to a store of ``live_rows``.

    Every new row is live (an upsert keeps its own rows); old live rows stay
    live only if their path is in ``live`` and not among ``rows``.
    """
    if live is None:
        return live_rows + rows.num_rows
    renewed = int(
        pc.sum(pc.is_in(live, value_set=rows.column("path").combine_chunks())).as_py() or 0
    )
    return rows.num_rows + min(live_rows, len(live) - renewed)


def _valid(array: pa.Array) -> np.ndarray:
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _filled(array: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(array, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _strings(arrays: list[pa.Array]) -> pa.Array:
    return pa.concat_arrays(arrays) if arrays else pa.array([], pa.string())


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def superseded_files(directory: Path, pattern: str, pointer: Path, kind: str) -> list[SidecarFile]:
    """Files matching ``pattern`` in ``directory`` that the ``pointer`` file does not name.

    Each is dead since the later of its own and the pointer's modification
    time. An unreadable pointer lists nothing (nothing is known to be dead).
    """
    try:
        current = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        current = ""
    except OSError:
        return []
    pointer_time = _mtime(pointer) or 0.0
    out = []
    for path in sorted(directory.glob(pattern)):
        own = _mtime(path)
        if path.name != current and own is not None:
            out.append(SidecarFile(path, kind, max(own, pointer_time)))
    return out


def temp_files(table_root: str | os.PathLike[str]) -> list[SidecarFile]:
    """Temporary files :func:`atomic_write_text` left under ``<table>/_lakelayout/``."""
    out = []
    for path in sorted((Path(table_root) / SIDECAR).rglob(".*.tmp")):
        own = _mtime(path)
        if own is not None and path.is_file():
            out.append(SidecarFile(path, "temp", own))
    return out


def atomic_write_text(target: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling, then ``os.replace`` it onto ``target``."""
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    temp.write_text(text, encoding="utf-8")
    try:
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
