"""``c(s, q)``: the fraction of the table a query reads on a layout, from metadata only.

OReO's cost model (§III-A): the cost of query ``q`` in state ``s`` is the
fraction of the data ``q`` reads when the table is laid out as ``s``
(``bytes kept / bytes total``, in ``[0, 1]``), so a full scan costs 1 and a
rewrite costs ``α``. No data is read:

* the state the table is in is priced on its **real files**: the snapshot's
  Delta statistics and the provenance sidecar that records each file's
  layout block (:class:`TableBlocks`);
* any other state is priced on **virtual files**: a sample of the table laid
  out by the state's layout, one virtual file per block, with exact min/max
  (:class:`VirtualState`; ``stats.blocks.block_stats``). Virtual sizes are rows
  times the sample's mean row size, so their fraction is a row fraction.

Which files a query keeps is decided by ONE function, :func:`files_kept`,
which calls the shared scan planner (:func:`lakelayout.skipping.planner.plan`)
with the rules of a real scan: min/max statistics (no declared skipping
indexes: virtual files have none, so real files are priced without them too)
and the layout's logical index where it has one (Qd-tree, Pando:
``blocks_for``, relaxed to the layout's columns as at scan time).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from lakelayout.cluster import logical
from lakelayout.errors import LayoutError
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout
from lakelayout.skipping.planner import LayoutBlocks, plan
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.model import FileStats

#: predicates whose cost a state remembers (queries repeat within a window)
MEMO_SIZE = 4096


class LogicalIndex(Protocol):
    """The logical indexes of the layouts some of ``files`` were written by, for the planner."""

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]: ...


@dataclass(frozen=True)
class TableBlocks:
    """The logical indexes of a real table: every file's layout block, from provenance."""

    root: str

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]:
        return logical.layout_blocks(self.root, files, schema)


@dataclass(frozen=True)
class VirtualBlocks:
    """The logical index of one layout over virtual files (``blocks[i]``: file i's block)."""

    layout: Layout
    blocks: np.ndarray

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]:
        return [LayoutBlocks(self.layout, np.asarray(self.blocks, dtype=np.int64))]


def files_kept(
    predicate: Predicate,
    files: FileStats,
    *,
    schema: pa.Schema,
    index: LogicalIndex | None = None,
) -> np.ndarray:
    """Per file: may it hold a row matching ``predicate``? (the one planner call)."""
    layouts = index.layouts(files, schema) if index is not None and len(files) else ()
    return np.asarray(plan(predicate, files, layouts=layouts).keep, dtype=bool)


def fraction_read(
    predicate: Predicate,
    files: FileStats,
    *,
    schema: pa.Schema,
    index: LogicalIndex | None = None,
) -> float:
    """Bytes of the files ``predicate`` keeps over all bytes (0 for an empty table)."""
    sizes = np.asarray(files.sizes, dtype=np.float64)
    total = float(sizes.sum())
    if total <= 0:
        return 0.0
    keep = files_kept(predicate, files, schema=schema, index=index)
    return float(sizes[keep].sum()) / total


def table_costs(
    predicates: Sequence[Predicate], files: FileStats, *, root: str, schema: pa.Schema
) -> np.ndarray:
    """``c(current, q)`` for each predicate, on the table's real files."""
    index = TableBlocks(root)
    return np.array(
        [fraction_read(p, files, schema=schema, index=index) for p in predicates],
        dtype=np.float64,
    )


class VirtualState:
    """A layout's virtual files over a sample, and ``c(s, q)`` on them (memoized by SQL)."""

    def __init__(self, layout: Layout, sample: pa.Table) -> None:
        if sample.num_rows == 0:
            raise LayoutError("cannot price a layout on an empty sample")
        self.layout = layout
        self.schema = sample.schema
        block_ids = np.asarray(layout.assign(sample), dtype=np.int64)
        self.files = block_stats(sample, block_ids)
        blocks = np.array([int(str(p).rsplit("-", 1)[1]) for p in self.files.paths], np.int64)
        self.index = VirtualBlocks(layout, blocks)
        self._memo: OrderedDict[str, float] = OrderedDict()

    def cost(self, predicate: Predicate) -> float:
        key = predicate.sql()
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        value = fraction_read(predicate, self.files, schema=self.schema, index=self.index)
        self._memo[key] = value
        if len(self._memo) > MEMO_SIZE:
            self._memo.popitem(last=False)
        return value

    def costs(self, predicates: Sequence[Predicate]) -> np.ndarray:
        return np.array([self.cost(p) for p in predicates], dtype=np.float64)
