"""Per-file clustering provenance: a Parquet sidecar under ``<table>/_lakelayout/clustering/``.

Delta's liquid clustering tags every ``add`` action with ``ZCUBE_ID`` and
``ZCUBE_ZORDER_BY``; delta-rs cannot write ``tags``, so lakelayout keeps the
same facts next to the table::

    <table>/_lakelayout/clustering/CURRENT              name of the live file
    <table>/_lakelayout/clustering/provenance-<id>.parquet
    <table>/_lakelayout/clustering/layouts/<layout_id>.json

One row per data file: ``path`` (table-relative), ``cube_id``,
``clustered_by`` (JSON list of the dimensions the file was clustered by),
``min_cube_size`` (the threshold in force when the cube was written),
``layout_id`` and ``block_id`` (for :meth:`Optimizer.apply`), ``operation``,
and ``size`` (bytes of the file the row describes; a reader trusts a row only
where the snapshot's file has that size, see :mod:`lakelayout.cluster.logical`).

Why a sidecar of its own rather than :mod:`lakelayout.skipping.store`: that
store is keyed by ``(path, size, modification_time)`` and the modification
time is only fixed inside the Delta commit, while provenance must be written
*before* the commit so it is never behind the log. Data file names are
unique (UUIDs), so the path alone is a safe key here, and rows for files that
never got committed are harmless: no snapshot lists them, and the next write
drops them.

Writes are atomic: a complete new Parquet file, then ``CURRENT`` replaced with
``os.replace``; a crash leaves the previous state readable. Provenance files
``CURRENT`` does not name, and layout documents no live file's row refers
to, are garbage (:meth:`ProvenanceStore.garbage`, deleted by VACUUM once
older than the retention). Two concurrent
OPTIMIZE runs may race on the pointer; the loser's rows are lost, which only
makes its files look "never clustered" (they are clustered again later): no
row is ever at risk.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.errors import LakelayoutError, LayoutError, StateUnreadable
from lakelayout.layouts.base import Layout, from_json
from lakelayout.skipping.store import SidecarFile, atomic_write_text, superseded_files

DIRECTORY = os.path.join("_lakelayout", "clustering")

SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("cube_id", pa.string()),
        ("clustered_by", pa.string()),
        ("min_cube_size", pa.int64()),
        ("layout_id", pa.string()),
        ("block_id", pa.int64()),
        ("operation", pa.string()),
        ("size", pa.int64()),  # lakelayout.cluster.logical: freshness check (nullable)
    ]
)


@dataclass(frozen=True)
class FileProvenance:
    """How one data file was produced by a clustering operation."""

    path: str
    cube_id: str | None = None
    clustered_by: tuple[str, ...] | None = None
    min_cube_size: int | None = None
    layout_id: str | None = None
    block_id: int | None = None
    operation: str = ""
    #: bytes of the data file (None: unknown, so query-time block pruning ignores the row)
    size: int | None = None

    def moved_to(self, path: str, size: int | None = None) -> FileProvenance:
        """The same provenance for a file rewritten from this one (DELETE keeps a subset)."""
        return FileProvenance(
            path,
            self.cube_id,
            self.clustered_by,
            self.min_cube_size,
            self.layout_id,
            self.block_id,
            self.operation,
            size,
        )


#: reads of the sidecar retried when another process replaced its file meanwhile
READ_ATTEMPTS = 20
#: a superseded provenance file younger than this is left to VACUUM: another process may
#: have written it and pointed ``CURRENT`` at it while this one was recording
RECORD_GRACE_SECONDS = 60.0


class ProvenanceStore:
    """The clustering sidecar of one (local) table."""

    def __init__(self, table_root: str | os.PathLike[str]) -> None:
        self.root = Path(table_root)
        self.directory = Path(table_root) / DIRECTORY
        self.pointer = self.directory / "CURRENT"
        self.layouts = self.directory / "layouts"

    def _current(self) -> Path | None:
        try:
            name = self.pointer.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return self.directory / name if name else None

    def read_table(self) -> pa.Table:
        """Every row (an empty table when nothing was written yet).

        Another process's :meth:`record` may delete the file ``CURRENT`` named
        a moment ago (it keeps only its own file and the one before); the new
        ``CURRENT`` then names a newer file, so the read starts over.
        """
        for _ in range(READ_ATTEMPTS):
            current = self._current()
            if current is None:
                return SCHEMA.empty_table()
            try:
                return pq.read_table(current, schema=SCHEMA)
            except FileNotFoundError as exc:
                if self._current() == current:  # not replaced meanwhile: it is missing
                    raise self._unreadable(current, exc) from exc
                continue
            except (OSError, pa.ArrowException) as exc:
                raise self._unreadable(current, exc) from exc
        raise LakelayoutError(
            f"the clustering sidecar {self.pointer} kept changing while being read "
            f"({READ_ATTEMPTS} attempts); retry the operation"
        )

    def _unreadable(self, current: Path, exc: BaseException) -> StateUnreadable:
        return StateUnreadable(
            f"the clustering sidecar {current} (named by {self.pointer}) cannot be read: "
            f"{exc}; removing {self.directory} makes lakelayout treat every file as not "
            "clustered (the next OPTIMIZE clusters them again)"
        )

    def read(self, paths: Iterable[str] | None = None) -> dict[str, FileProvenance]:
        """path -> provenance, for ``paths`` (all rows when None)."""
        table = self.read_table()
        if paths is not None:
            wanted = pa.array(list(paths), pa.string())
            table = table.filter(pc.is_in(table.column("path"), value_set=wanted))
        out: dict[str, FileProvenance] = {}
        for row in table.to_pylist():
            dims = json.loads(row["clustered_by"]) if row["clustered_by"] else None
            out[row["path"]] = FileProvenance(
                path=row["path"],
                cube_id=row["cube_id"],
                clustered_by=tuple(dims) if dims is not None else None,
                min_cube_size=row["min_cube_size"],
                layout_id=row["layout_id"],
                block_id=row["block_id"],
                operation=row["operation"] or "",
                size=row["size"],
            )
        return out

    def record(self, rows: Sequence[FileProvenance], removed: Iterable[str] = ()) -> None:
        """Add (or replace) ``rows`` and forget the ``removed`` files (atomic swap), under
        the table's sidecar lock: two processes recording at once each read the rows
        before the other's and one's rows were lost (an audit: 40 of 80 left)."""
        from lakelayout.skipping.store import MetadataStore

        with MetadataStore(str(self.root)).locked():
            self._record(rows, removed)

    def _record(self, rows: Sequence[FileProvenance], removed: Iterable[str]) -> None:
        old = self.read_table()
        if not rows and not old.num_rows:
            return
        dropped = set(removed) | {r.path for r in rows}
        keep = pc.invert(
            pc.is_in(old.column("path"), value_set=pa.array(sorted(dropped), pa.string()))
        )
        new = pa.Table.from_pylist([_row(r) for r in rows], schema=SCHEMA)
        merged = pa.concat_tables([old.filter(keep), new])
        self.directory.mkdir(parents=True, exist_ok=True)
        previous = self._current()
        target = self.directory / f"provenance-{uuid.uuid4().hex}.parquet"
        pq.write_table(merged, target)
        atomic_write_text(self.pointer, target.name)
        keep = {target.name, previous.name if previous else ""}
        now = time.time()
        for stale in self.directory.glob("provenance-*.parquet"):
            if stale.name in keep:
                continue
            # two processes recording at once: the other one's new file (which CURRENT may
            # name now) is young; deleting it would leave CURRENT naming nothing
            with contextlib.suppress(OSError):
                if now - stale.stat().st_mtime > RECORD_GRACE_SECONDS:
                    stale.unlink()

    def garbage(self, live_paths: Iterable[str]) -> list[SidecarFile]:
        """Provenance files ``CURRENT`` does not name, and layouts no live file uses.

        A layout document is live while the provenance row of some file in
        ``live_paths`` (the latest snapshot's files) names it: rows of removed
        files are dropped when they are removed, so older versions never
        consult a layout. A layout just saved by a rewrite that has not
        committed yet is referenced by no live file; only its age (VACUUM's
        retention) protects it.
        """
        out = superseded_files(self.directory, "provenance-*.parquet", self.pointer, "provenance")
        if not self.layouts.is_dir():
            return out
        try:
            rows = self.read_table()
        except (OSError, pa.ArrowException):  # unreadable: no layout is known to be unused
            return out
        live = pc.is_in(rows.column("path"), value_set=pa.array(list(live_paths), pa.string()))
        used = {str(v) for v in rows.filter(live).column("layout_id").to_pylist() if v}
        for path in sorted(self.layouts.glob("*.json")):
            if path.stem in used:
                continue
            with contextlib.suppress(OSError):
                out.append(SidecarFile(path, "layout", path.stat().st_mtime))
        return out

    def save_layout(self, layout: Layout, binding: Mapping[str, str] | None = None) -> str:
        """Store a layout's JSON; its id (written once, never replaced). ``binding``:
        what the columns it reads are stored as in the snapshot whose files it lays
        out (:meth:`TableFormat.binding`), kept in the document under
        :data:`BOUND_COLUMNS`: its blocks say nothing of a column bound otherwise."""
        layout_id = uuid.uuid4().hex
        self.layouts.mkdir(parents=True, exist_ok=True)
        document = json.loads(layout.to_json())
        if binding is not None:
            document[BOUND_COLUMNS] = dict(binding)
        atomic_write_text(self.layouts / f"{layout_id}.json", json.dumps(document, sort_keys=True))
        return layout_id

    def load_layout(self, layout_id: str) -> Layout:
        """The layout stored under ``layout_id``."""
        try:
            text = (self.layouts / f"{layout_id}.json").read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise LakelayoutError(f"no layout {layout_id!r} in {self.layouts}") from exc
        return read_layout_document(text)[0]


#: the key of a layout document holding the binding of the columns it read
BOUND_COLUMNS = "bound_columns"


def read_layout_document(text: str) -> tuple[Layout, dict[str, str] | None]:
    """The layout a stored document holds, and its columns' binding (None: saved before
    bindings were recorded)."""
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise LayoutError(f"not a layout JSON document: {exc}") from exc
    binding = state.pop(BOUND_COLUMNS, None) if isinstance(state, dict) else None
    return from_json(json.dumps(state)), binding if isinstance(binding, dict) else None


def layout_columns(layout: Layout) -> list[str] | None:
    """The table columns a layout's blocks depend on: those its cuts read (Qd-tree,
    Pando), else its schema's (the sample it was fitted on); None when it does not say.

    A column the blocks do not depend on may change (dropped, renamed, widened, a
    field added to it) without the blocks saying anything else of the rows.
    """
    trees = getattr(layout, "trees", None) or [getattr(layout, "tree", None)]
    cuts = [cut for tree in trees if tree is not None for cut in getattr(tree, "cuts", [])]
    if cuts:
        return sorted({c for cut in cuts for c in cut.atom.columns()})
    schema = getattr(layout, "schema", None)
    return list(schema.names) if isinstance(schema, pa.Schema) else None


def _row(p: FileProvenance) -> dict[str, object]:
    return {
        "path": p.path,
        "cube_id": p.cube_id,
        "clustered_by": json.dumps(list(p.clustered_by)) if p.clustered_by is not None else None,
        "min_cube_size": p.min_cube_size,
        "layout_id": p.layout_id,
        "block_id": p.block_id,
        "operation": p.operation,
        "size": p.size,
    }
