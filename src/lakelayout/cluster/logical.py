"""Query-time use of a layout's logical index (Qd-tree, Pando, ...).

:meth:`Optimizer.apply` records, per written file, the layout id and the
block the file holds (:mod:`lakelayout.cluster.provenance`). At scan time a
layout with a logical index answers ``blocks_for(predicate)``: the sorted
block ids that may hold a matching row. A file is skipped exactly when

    file has trusted provenance (layout L, block b)  and  b not in L.blocks_for(p)

Per query: the provenance is joined to the snapshot's files once
(``pc.index_in``), every layout is rebuilt once from its JSON (cached by
layout id; layout documents are written once and never replaced), asked once,
and its files are tested with one ``np.isin``.

Safety -- a file is KEPT when any of these holds:

* it has no provenance row, or the row names no layout or no block;
* the row is not *fresh*: rows are keyed by path only, so a row is trusted
  only where it recorded the file's size and the snapshot's file has that
  size (a file written later at the same path by another writer, or a row
  written before sizes were recorded, is ignored);
* the layout document is missing or does not load;
* ``blocks_for`` returns None (curve layouts), raises, or returns something
  that is not a 1-D integer array.

A predicate is first *relaxed* to the layout's columns: a sub-predicate in a
positive position (not under a ``Not``) reading a column the layout does not
know, or knows with another type, is replaced by TRUE. Replacing a positive
sub-formula by TRUE only weakens the predicate (every row it selected is
still selected), so the blocks of the relaxed predicate cover the blocks of
the original one.

Attribution follows :mod:`lakelayout.skipping.engine`: ``layout(<family>)``
counts the files that the logical index alone rules out (so it overlaps with
``minmax``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.cluster.provenance import SCHEMA, ProvenanceStore
from lakelayout.errors import LakelayoutError
from lakelayout.expr.nodes import And, BoolConst, Or, Predicate
from lakelayout.layouts.base import Layout, from_json
from lakelayout.stats.model import FileStats

_COLUMNS = ("path", "layout_id", "block_id", "size")

#: (table root, provenance file name) -> rows with a layout id (path, layout_id, block_id, size)
_PROVENANCE: dict[str, tuple[str, pa.Table]] = {}
#: (table root, layout id) -> the rebuilt layout
_LAYOUTS: dict[tuple[str, str], Layout] = {}
_MAX_LAYOUTS = 64


@dataclass(frozen=True)
class LogicalPruned:
    """Files a logical index keeps, and the files/bytes each layout family rules out."""

    keep: np.ndarray
    skipped_by: dict[str, int] = field(default_factory=dict)
    bytes_skipped_by: dict[str, int] = field(default_factory=dict)


def label(layout: Layout) -> str:
    """The ``skipped_by`` key of a layout: ``layout(<family>)``."""
    return f"layout({layout.family})"


def prune(root: str, predicate: Predicate, files: FileStats, schema: pa.Schema) -> LogicalPruned:
    """Per file of ``files``: False only where a trusted layout block cannot match."""
    n = len(files)
    keep = np.ones(n, dtype=bool)
    if n == 0 or (isinstance(predicate, BoolConst) and predicate.value):
        return LogicalPruned(keep)
    rows = _provenance(root)
    if rows is None or rows.num_rows == 0:
        return LogicalPruned(keep)
    layout_ids, blocks = _trusted(rows, files)
    sizes = np.asarray(files.sizes, dtype=np.int64)
    skipped: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for layout_id in sorted(set(layout_ids.tolist()) - {""}):
        layout = _layout(root, layout_id)
        allowed = allowed_blocks(layout, predicate, schema) if layout is not None else None
        if layout is None or allowed is None:
            continue
        mine = (layout_ids == layout_id) & (blocks < layout.n_blocks)
        out = mine & ~np.isin(blocks, allowed)
        keep &= ~out
        key = label(layout)
        skipped[key] = skipped.get(key, 0) + int(out.sum())
        nbytes[key] = nbytes.get(key, 0) + int(sizes[out].sum())
    return LogicalPruned(keep, skipped, nbytes)


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


def _layout(root: str, layout_id: str) -> Layout | None:
    """The layout stored under ``layout_id`` (cached); None when it cannot be loaded."""
    key = (root, layout_id)
    cached = _LAYOUTS.get(key)
    if cached is not None:
        return cached
    path = ProvenanceStore(root).layouts / f"{layout_id}.json"
    try:
        layout = from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError, LakelayoutError):
        return None
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.pop(next(iter(_LAYOUTS)))
    _LAYOUTS[key] = layout
    return layout


def allowed_blocks(layout: Layout, predicate: Predicate, schema: pa.Schema) -> np.ndarray | None:
    """``layout.blocks_for`` of the relaxed predicate; None when it gives no usable answer."""
    known = _known_columns(layout, schema)
    relaxed = relax(predicate, known)
    if isinstance(relaxed, BoolConst) and relaxed.value:
        return None
    try:
        answer = layout.blocks_for(relaxed)
    except Exception:  # a layout that cannot answer must never fail a scan: keep its files
        return None
    if answer is None:
        return None
    try:
        blocks = np.asarray(answer)
    except (TypeError, ValueError):
        return None
    if blocks.ndim != 1 or (blocks.size and not np.issubdtype(blocks.dtype, np.integer)):
        return None
    return blocks.astype(np.int64, copy=False)


def _known_columns(layout: Layout, schema: pa.Schema) -> frozenset[str]:
    """Table columns the layout knows with the same type (so bound literals mean the same)."""
    mine = getattr(layout, "schema", None)
    if not isinstance(mine, pa.Schema):
        return frozenset()
    types: Mapping[str, pa.DataType] = {f.name: f.type for f in mine}
    return frozenset(f.name for f in schema if f.name in types and types[f.name].equals(f.type))


def relax(pred: Predicate, known: frozenset[str]) -> Predicate:
    """``pred`` with every positive sub-predicate reading an unknown column replaced by TRUE.

    Only positions outside any ``Not`` are replaced (there TRUE is weaker than
    the sub-predicate); a ``Not`` reading an unknown column becomes TRUE as a whole.
    """
    if isinstance(pred, And):
        parts = [relax(c, known) for c in pred.children_]
        parts = [p for p in parts if not (isinstance(p, BoolConst) and p.value)]
        if not parts:
            return BoolConst(True)
        return parts[0] if len(parts) == 1 else And(tuple(parts))
    if isinstance(pred, Or):
        parts = [relax(c, known) for c in pred.children_]
        if any(isinstance(p, BoolConst) and p.value for p in parts):
            return BoolConst(True)
        return Or(tuple(parts))
    return pred if pred.columns() <= known else BoolConst(True)
