"""The logical indexes of the layouts a table's files were written by, for the planner.

:meth:`Optimizer.apply` records, per written file, the layout id and the
block the file holds (:mod:`lakelayout.cluster.provenance`). At scan time
:func:`layout_blocks` joins that provenance to a snapshot's files once
(``pc.index_in``), rebuilds every layout once from its JSON (cached by layout
id; layout documents are written once and never replaced) and hands the
planner (:func:`lakelayout.skipping.planner.plan`) one
:class:`~lakelayout.skipping.planner.LayoutBlocks` per layout: the layout and
the block of every file (-1 for files it did not write). The planner then
skips a file exactly when

    file has trusted provenance (layout L, block b)  and  b not in L.blocks_for(p)

Safety -- a file gets no block (-1, always kept by its layout) when:

* it has no provenance row, or the row names no layout or no block;
* the row is not *fresh*: rows are keyed by path only, so a row is trusted
  only where it recorded the file's size and the snapshot's file has that
  size (a file written later at the same path by another writer, or a row
  written before sizes were recorded, is ignored);
* the layout document is missing or does not load.

A layout is told which table columns it knows with the same type
(``LayoutBlocks.columns``), so that the planner relaxes the predicate to them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.cluster.provenance import (
    SCHEMA,
    ProvenanceStore,
    layout_columns,
    read_layout_document,
)
from lakelayout.errors import LakelayoutError
from lakelayout.layouts.base import Layout
from lakelayout.skipping.planner import LayoutBlocks
from lakelayout.stats.model import FileStats
from lakelayout.table.datafile import TableFormat

_COLUMNS = ("path", "layout_id", "block_id", "size")

#: (table root, provenance file name) -> rows with a layout id (path, layout_id, block_id, size)
_PROVENANCE: dict[str, tuple[str, pa.Table]] = {}
#: (table root, layout id) -> the rebuilt layout and its columns' binding
_LAYOUTS: dict[tuple[str, str], tuple[Layout, dict[str, str] | None]] = {}
_MAX_LAYOUTS = 64


def layout_blocks(
    root: str, files: FileStats, schema: pa.Schema, fmt: TableFormat | None = None
) -> list[LayoutBlocks]:
    """One entry per layout with trusted files in ``files`` (none when there is no provenance).

    With ``fmt`` (the snapshot ``files`` are of), a layout saved with the binding of
    its columns is left out when ``fmt`` binds them otherwise (a column renamed,
    dropped and added again, or widened since the rewrite; names swapped); a layout
    saved before bindings were recorded is judged by its schema alone.
    """
    if len(files) == 0:
        return []
    rows = _provenance(root)
    if rows is None or rows.num_rows == 0:
        return []
    layout_ids, blocks = _trusted(rows, files)
    out = []
    for layout_id in sorted(set(layout_ids.tolist()) - {""}):
        loaded = _layout(root, layout_id)
        if loaded is None:
            continue
        layout, binding = loaded
        if (
            fmt is not None
            and binding is not None
            and fmt.binding(layout_columns(layout)) != binding
        ):
            continue
        mine = np.where(layout_ids == layout_id, blocks, -1).astype(np.int64)
        out.append(LayoutBlocks(layout, mine, _known_columns(layout, schema)))
    return out


# --------------------------------------------------------------------------- provenance


def _provenance(root: str) -> pa.Table | None:
    """Provenance rows that name a layout (cached per live provenance file); None on error."""
    store = ProvenanceStore(root)
    try:
        name = store.pointer.read_text(encoding="utf-8").strip()
    except OSError:  # no sidecar yet (FileNotFoundError) or unreadable: nothing to use
        return None
    if not name:
        return None
    cached = _PROVENANCE.get(root)
    if cached is not None and cached[0] == name:
        return cached[1]
    try:
        table = pq.read_table(store.directory / name, schema=SCHEMA, columns=list(_COLUMNS))
    except (OSError, pa.ArrowException):
        return None
    table = table.filter(pc.is_valid(table.column("layout_id")))
    _PROVENANCE[root] = (name, table)
    return table


def _trusted(rows: pa.Table, files: FileStats) -> tuple[np.ndarray, np.ndarray]:
    """Per file: its layout id ("" = untrusted or none) and block id (-1 when none).

    A row is trusted when it has a block id and a recorded size equal to the
    snapshot's size of the file at that path.
    """
    n = len(files)
    paths = pa.array([str(p) for p in files.paths], pa.string())
    at = pc.index_in(paths, value_set=rows.column("path").combine_chunks())
    found = np.asarray(at.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if not found.any():
        return np.full(n, "", dtype=object), np.full(n, -1, dtype=np.int64)
    picked = rows.take(pc.fill_null(at, 0))
    recorded = pc.fill_null(picked.column("size"), -1).to_numpy()
    block = pc.fill_null(picked.column("block_id"), -1).to_numpy()
    sizes = np.asarray(files.sizes, dtype=np.int64)
    ok = found & (block >= 0) & (recorded >= 0) & (recorded == sizes)
    ids = np.asarray(picked.column("layout_id").to_pylist(), dtype=object)
    ids[~ok] = ""
    return ids, np.where(ok, block, -1).astype(np.int64)


# --------------------------------------------------------------------------- layouts


def _layout(root: str, layout_id: str) -> tuple[Layout, dict[str, str] | None] | None:
    """The layout stored under ``layout_id`` and its columns' binding (cached); None when
    it cannot be loaded."""
    key = (root, layout_id)
    cached = _LAYOUTS.get(key)
    if cached is not None:
        return cached
    path = ProvenanceStore(root).layouts / f"{layout_id}.json"
    try:
        loaded = read_layout_document(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError, LakelayoutError):
        return None
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.pop(next(iter(_LAYOUTS)))
    _LAYOUTS[key] = loaded
    return loaded


def _known_columns(layout: Layout, schema: pa.Schema) -> frozenset[str]:
    """Table columns the layout knows with the same type (so bound literals mean the same)."""
    mine = getattr(layout, "schema", None)
    if not isinstance(mine, pa.Schema):
        return frozenset()
    types: Mapping[str, pa.DataType] = {f.name: f.type for f in mine}
    return frozenset(f.name for f in schema if f.name in types and types[f.name].equals(f.type))
