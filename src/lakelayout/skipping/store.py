"""The per-table metadata store: a Parquet sidecar under ``<table>/_lakelayout/index/``.

Layout::

    <table>/_lakelayout/indexes.json          declared indexes (kind, expression, params)
    <table>/_lakelayout/index/CURRENT         name of the live store file
    <table>/_lakelayout/index/store-<id>.parquet

The store file has one row per data file: ``path``, ``size``,
``modification_time`` -- the freshness key -- and one column per index, named
by the index name, holding that index's per-file value (struct / list /
binary). Metadata is *fresh* for a snapshot file only when all three keys
match; anything else (a replaced file, a file appended without metadata) reads
as null, and a null entry never lets a file be skipped.

Writes are atomic: a new, uniquely named Parquet file is written completely,
then ``CURRENT`` is replaced (written to a temporary name, then
``os.replace``). A crash before the swap leaves the previous store readable;
older store files are deleted only after a successful swap. Reads open only
the columns asked for, so pruning 100,000 files with one index reads one
metadata column.

Garbage: a store file that ``CURRENT`` does not name, and a temporary file an
interrupted :func:`atomic_write_text` left (``.<name>.<hex>.tmp``), are no
longer read by anyone; :meth:`MetadataStore.garbage` and :func:`temp_files`
list them for VACUUM (:mod:`lakelayout.cluster.vacuum`), which deletes them
once they are older than the table's retention.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.errors import InvalidOption, LakelayoutError
from lakelayout.skipping.indexes.base import Collector, Index, Udf
from lakelayout.stats.model import FileStats
from lakelayout.table.datafile import column_bytes

KEY_COLUMNS = ("path", "size", "modification_time")
KEY_SCHEMA = pa.schema(
    [("path", pa.string()), ("size", pa.int64()), ("modification_time", pa.int64())]
)
SIDECAR = "_lakelayout"


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


class MetadataStore:
    """Per-file index metadata of one table, kept next to its data."""

    def __init__(self, table_root: str | os.PathLike[str]) -> None:
        self.root = Path(table_root)
        self.directory = self.root / SIDECAR / "index"
        self.pointer = self.directory / "CURRENT"
        self.declarations = self.root / SIDECAR / "indexes.json"

    # ------------------------------------------------------------ reading

    def current_file(self) -> Path | None:
        """The live store file, or None when nothing was written yet."""
        try:
            name = self.pointer.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return self.directory / name if name else None

    def columns(self) -> list[str]:
        """Index columns present in the live store."""
        current = self.current_file()
        if current is None:
            return []
        names = pq.read_schema(current).names
        return [n for n in names if n not in KEY_COLUMNS]

    def read(self, files: FileStats, index_names: Iterable[str]) -> dict[str, pa.Array]:
        """Metadata of each index aligned with ``files``; null where missing or stale.

        Indexes without a column in the store are absent from the result.
        Only the key columns and the asked-for index columns are read.
        """
        wanted = list(dict.fromkeys(index_names))
        current = self.current_file()
        if current is None or not wanted:
            return {}
        present = set(pq.read_schema(current).names)
        names = [n for n in wanted if n in present]
        if not names:
            return {}
        table = pq.read_table(current, columns=[*KEY_COLUMNS, *names])
        positions = self._fresh_positions(table, files)
        return {n: table.column(n).combine_chunks().take(positions) for n in names}

    @staticmethod
    def _fresh_positions(table: pa.Table, files: FileStats) -> pa.Array:
        """Row of each snapshot file in the store, null where absent or stale."""
        paths = pa.array(list(files.paths), type=pa.string())
        rows = pc.index_in(paths, value_set=table.column("path").combine_chunks())
        found = np.asarray(rows.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        at = np.asarray(pc.fill_null(rows, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        if table.num_rows == 0:
            return pa.nulls(len(files), pa.int64())
        sizes = table.column("size").to_numpy()[at]
        mtimes = table.column("modification_time").to_numpy()[at]
        fresh = (
            found
            & (sizes == np.asarray(files.sizes))
            & (mtimes == np.asarray(files.modification_times))
        )
        return pa.array(at, type=pa.int64(), mask=~fresh)

    def read_all(self) -> pa.Table:
        """The whole live store (empty key-only table when none)."""
        current = self.current_file()
        if current is None:
            return KEY_SCHEMA.empty_table()
        return pq.read_table(current)

    # ------------------------------------------------------------ writing

    def write(self, rows: pa.Table) -> Path:
        """Replace the store with ``rows`` atomically (new file, then pointer swap)."""
        rows = _check_rows(rows)
        self.directory.mkdir(parents=True, exist_ok=True)
        previous = self.current_file()
        target = self.directory / f"store-{uuid.uuid4().hex}.parquet"
        # No dictionary encoding: paths are distinct and index values (a Bloom
        # filter is ~1 MB) rarely repeat, so a dictionary only costs: 1.4x the
        # write and 2x the read time on 100 random 1.2 MB values, timed with
        # pyarrow alone (docs/benchmarks.md, B3, "What the indexes step is").
        pq.write_table(rows, target, use_dictionary=False)
        atomic_write_text(self.pointer, target.name)
        kept = {target.name} | ({previous.name} if previous is not None else set())
        self._collect_garbage(keep=kept)
        return target

    def upsert(self, rows: pa.Table, live_paths: Iterable[str] | None = None) -> Path:
        """Add or replace rows by path; with ``live_paths``, drop rows of other files."""
        rows = _check_rows(rows)
        current = self.current_file()
        if current is None:
            return self.write(rows)
        paths = pq.read_table(current, columns=["path"]).column("path")
        keep = pc.invert(pc.is_in(paths, value_set=rows.column("path").combine_chunks()))
        if live_paths is not None:
            live = pa.array(list(live_paths), pa.string())
            keep = pc.and_(keep, pc.is_in(paths, value_set=live))
        if pc.any(keep).as_py():
            kept = pq.read_table(current).filter(keep)
        else:  # every old row goes: read their schema, not their metadata
            kept = pq.read_schema(current).empty_table()
        merged = pa.concat_tables([kept, rows], promote_options="default")
        return self.write(merged)

    def drop_index(self, name: str) -> None:
        """Remove one index's column from the store."""
        table = self.read_all()
        if name in table.column_names and name not in KEY_COLUMNS:
            self.write(table.drop_columns([name]))

    def garbage(self) -> list[SidecarFile]:
        """Store files ``CURRENT`` does not name (superseded, or from a crashed write)."""
        return superseded_files(self.directory, "store-*.parquet", self.pointer, "index-store")

    def _collect_garbage(self, keep: set[str]) -> None:
        for path in self.directory.glob("store-*.parquet"):
            if path.name not in keep:
                with contextlib.suppress(OSError):
                    path.unlink()

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

    def declare(self, indexes: Sequence[Index]) -> None:
        """Store the declarations atomically; names must be unique."""
        names = [i.name for i in indexes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidOption(f"duplicate index name(s): {', '.join(duplicates)}")
        self.declarations.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps([i.to_dict() for i in indexes], indent=2, sort_keys=True)
        atomic_write_text(self.declarations, text)

    # ------------------------------------------------------------ describing

    def describe(
        self, files: FileStats, index_names: Iterable[str] | None = None
    ) -> dict[str, Coverage]:
        """Per index: files with fresh metadata, stale rows, files without any, bytes."""
        current = self.current_file()
        names = list(index_names) if index_names is not None else self.columns()
        if current is None:
            return {n: Coverage(0, 0, len(files), 0) for n in names}
        sizes = column_bytes(pq.ParquetFile(current).metadata)
        keys = pq.read_table(current, columns=list(KEY_COLUMNS))
        positions = self._fresh_positions(keys, files)
        fresh = np.asarray(positions.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        listed = np.asarray(
            pc.is_in(
                pa.array(list(files.paths), pa.string()), value_set=keys.column("path")
            ).to_numpy(zero_copy_only=False),
            dtype=bool,
        )
        columns = self.read(files, names)
        out: dict[str, Coverage] = {}
        for name in names:
            column = columns.get(name)
            has = (
                np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                if column is not None
                else np.zeros(len(files), dtype=bool)
            )
            covered = int((has & fresh).sum())
            stale = int((listed & ~fresh).sum())
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
