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

The layout manager's distances are the exception: they compare every layout on
its virtual files, the table's state too
(:meth:`lakelayout.online.engine.OnlineEngine._price_item`).

Which files a query keeps is decided by ONE function, :func:`files_kept`,
which calls the shared scan planner (:func:`lakelayout.skipping.planner.plan`)
with the rules of a real scan: min/max statistics (no declared skipping
indexes: virtual files have none, so real files are priced without them too)
and the layout's logical index where it has one (Qd-tree, Pando:
``blocks_for``, relaxed to the layout's columns as at scan time).

Pricing many layouts on many queries (the replay's oracles price every
candidate on every query of the stream; three online policies price the same
candidates on the same windows) goes through a :class:`CostBook`: one per
sample, shared, which memoizes ``c(s, q)`` by (layout, predicate) and
evaluates the min/max rules of one predicate over the virtual files of many
layouts at once (stacked into one :class:`FileStats`; the rules are per file).
It gives the same numbers as :meth:`VirtualState.cost` (tested for exact
equality).
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
from lakelayout.skipping.indexes.geobox import expand_within_box
from lakelayout.skipping.planner import LayoutBlocks, plan, ruled_out_by_layout
from lakelayout.skipping.stats_rules import FileStack, might_match
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.datafile import TableFormat

#: predicates whose cost a state remembers (queries repeat within a window)
MEMO_SIZE = 4096


class LogicalIndex(Protocol):
    """The logical indexes of the layouts some of ``files`` were written by, for the planner."""

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]: ...


@dataclass(frozen=True)
class TableBlocks:
    """The logical indexes of a real table: every file's layout block, from provenance.

    With ``fmt`` (the format of the snapshot the files are of), a layout whose
    columns that snapshot binds otherwise is left out, as a scan leaves it out
    (:func:`~lakelayout.cluster.logical.layout_blocks`)."""

    root: str
    fmt: TableFormat | None = None

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]:
        return logical.layout_blocks(self.root, files, schema, self.fmt)


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


@dataclass(frozen=True)
class FixedBlocks:
    """Logical indexes already joined to one set of files (``layouts`` ignores its arguments)."""

    entries: tuple[LayoutBlocks, ...]

    def layouts(self, files: FileStats, schema: pa.Schema) -> Sequence[LayoutBlocks]:
        return self.entries


def table_costs(
    predicates: Sequence[Predicate],
    files: FileStats,
    *,
    root: str,
    schema: pa.Schema,
    fmt: TableFormat | None = None,
) -> np.ndarray:
    """``c(current, q)`` for each predicate, on the table's real files.

    The files' logical indexes (provenance joined to ``files``, layouts bound
    as ``fmt`` binds their columns) are looked up once for all predicates: they
    depend on the files only.
    """
    index = (
        FixedBlocks(tuple(TableBlocks(root, fmt).layouts(files, schema))) if len(files) else None
    )
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


#: stacks of virtual files a :class:`CostBook` keeps (one per recent set of layouts priced)
STACKS = 4
#: distinct predicates whose costs :meth:`CostBook.retain` keeps memoized
PREDICATES_KEPT = 20_000


def predicate_key(predicate: Predicate) -> tuple[str, Predicate]:
    """What identifies a predicate for pricing: its SQL text and the bound tree itself.

    The text tells apart what equality of the tree does not (``-0.0`` and
    ``0.0`` are equal floats); the tree tells apart what the text does not (a
    column's bound type). Two predicates with the same key prune alike.
    """
    return predicate.sql(), predicate


def layout_key(layout: Layout) -> str:
    """What identifies a layout for pricing: its JSON document (it rebuilds the layout)."""
    return layout.to_json()


class CostBook:
    """``c(s, q)`` on virtual files of many layouts over ONE sample, memoized and shared.

    Cache keys, and why they cannot go stale:

    * a layout's virtual files: :func:`layout_key` (its JSON), on :attr:`sample`
      (the book holds the sample and never changes it; a new sample needs a
      new book). Same JSON, same ``assign`` and ``blocks_for``, same files;
    * a cost: (layout key, :func:`predicate_key`). The cost of a predicate on
      a layout's virtual files depends on nothing else.

    :meth:`matrix` prices the pairs it has not seen. Per predicate it runs
    the min/max rules once over the virtual files of every layout asked for
    (stacked, when every rule decides each file from that file's statistics
    alone, :func:`~lakelayout.skipping.stats_rules.each_file_alone`; else
    layout by layout), then per layout the layout's logical-index rule
    (``ruled_out_by_layout``, skipped when min/max already keeps none of that
    layout's files: it can only rule files out), and sums the kept sizes as
    :func:`fraction_read` does. The result equals :meth:`VirtualState.cost`.
    """

    def __init__(self, sample: pa.Table) -> None:
        # an empty sample (an empty table) prices nothing: VirtualState raises when asked
        self.sample = sample
        self.schema = sample.schema
        #: layout key -> its virtual files
        self._states: dict[str, VirtualState] = {}
        #: id(layout) -> (the layout, its key): the layout is held, so its id is not reused
        self._keys: dict[int, tuple[Layout, str]] = {}
        #: predicate key -> small int; layout key -> {predicate int: cost}
        self._pids: dict[tuple[str, Predicate], int] = {}
        self._costs: dict[str, dict[int, float]] = {}
        self._stacks: OrderedDict[tuple[str, ...], FileStack] = OrderedDict()
        #: (pairs priced, pairs served from the memo): for reports and tests
        self.priced = 0
        self.hits = 0

    def key(self, layout: Layout) -> str:
        """:func:`layout_key` of ``layout`` (computed once per layout object)."""
        known = self._keys.get(id(layout))
        if known is not None and known[0] is layout:
            return known[1]
        key = layout_key(layout)
        self._keys[id(layout)] = (layout, key)
        return key

    def state(self, layout: Layout) -> VirtualState:
        """The virtual files of ``layout`` on the sample (built once per layout key)."""
        key = self.key(layout)
        state = self._states.get(key)
        if state is None:
            state = VirtualState(layout, self.sample)
            self._states[key] = state
            self._costs[key] = {}
        return state

    def retain(self, layouts: Sequence[Layout], *, predicates: int = PREDICATES_KEPT) -> None:
        """Forget the virtual files and costs of every layout but ``layouts``, and every
        memoized cost once more than ``predicates`` distinct predicates were priced.

        A live table's engine prices each round's candidates once and then only its
        states, for as long as its process runs: without this the book would keep every
        candidate ever fitted. What is forgotten is rebuilt on demand, the same.
        """
        keep = {self.key(layout) for layout in layouts}
        if any(k not in keep for k in self._states):
            self._states = {k: v for k, v in self._states.items() if k in keep}
            self._costs = {k: v for k, v in self._costs.items() if k in keep}
            self._keys = {i: lk for i, lk in self._keys.items() if lk[1] in keep}
            self._stacks = OrderedDict(
                (keys, stack) for keys, stack in self._stacks.items() if keep.issuperset(keys)
            )
        if len(self._pids) > predicates:
            self._pids.clear()
            for memo in self._costs.values():
                memo.clear()

    def costs(self, layout: Layout, predicates: Sequence[Predicate]) -> np.ndarray:
        """``c(layout, q)`` for each predicate."""
        return self.matrix([layout], predicates)[:, 0]

    def matrix(self, layouts: Sequence[Layout], predicates: Sequence[Predicate]) -> np.ndarray:
        """``out[i, j] = c(layouts[j], predicates[i])``, shape ``(queries, layouts)``."""
        keys = []
        for layout in layouts:
            self.state(layout)
            keys.append(self.key(layout))
        out = np.zeros((len(predicates), len(keys)), dtype=np.float64)
        if not keys:
            return out
        memos = [self._costs[k] for k in keys]
        unique = tuple(dict.fromkeys(keys))
        for i, predicate in enumerate(predicates):
            pid = self._pid(predicate)
            missing = [k for k in unique if pid not in self._costs[k]]
            self.hits += len(unique) - len(missing)
            if missing:
                self._price(predicate, pid, missing, unique)
            out[i] = [memo[pid] for memo in memos]
        return out

    def _pid(self, predicate: Predicate) -> int:
        key = predicate_key(predicate)
        pid = self._pids.get(key)
        if pid is None:
            pid = len(self._pids)
            self._pids[key] = pid
        return pid

    def _price(
        self, predicate: Predicate, pid: int, missing: Sequence[str], asked: tuple[str, ...]
    ) -> None:
        """Price ``predicate`` on the ``missing`` layouts (min/max over the stack of all
        ``asked`` when more than one is missing)."""
        expanded = expand_within_box(predicate)
        parts = self._stacked(expanded, missing, asked) if len(missing) > 1 else None
        if parts is None:
            parts = {
                k: np.asarray(might_match(expanded, self._states[k].files), dtype=bool)
                for k in missing
            }
        for key, minmax in parts.items():
            state = self._states[key]
            keep = minmax.copy()
            if keep.any():
                (entry,) = state.index.layouts(state.files, state.schema)
                out = ruled_out_by_layout(expanded, entry, len(state.files))
                if out is not None:
                    keep &= ~out
            self._costs[key][pid] = _fraction(state.files, keep)
            self.priced += 1

    def _stacked(
        self, expanded: Predicate, missing: Sequence[str], asked: tuple[str, ...]
    ) -> dict[str, np.ndarray] | None:
        """Min/max's answer for each of ``missing`` from one call over the stack of all
        ``asked``; None where a rule could not decide each file alone."""
        parts = self._stack(asked).keep_each(lambda files: might_match(expanded, files))
        if parts is None:
            return None
        at = dict(zip(asked, parts, strict=True))
        return {k: at[k] for k in missing}

    def _stack(self, keys: tuple[str, ...]) -> FileStack:
        stack = self._stacks.get(keys)
        if stack is not None:
            self._stacks.move_to_end(keys)
            return stack
        stack = FileStack.of([self._states[k].files for k in keys])
        self._stacks[keys] = stack
        if len(self._stacks) > STACKS:
            self._stacks.popitem(last=False)
        return stack


def _fraction(files: FileStats, keep: np.ndarray) -> float:
    """Bytes kept over all bytes, computed as :func:`fraction_read` does (same float)."""
    sizes = np.asarray(files.sizes, dtype=np.float64)
    total = float(sizes.sum())
    if total <= 0:
        return 0.0
    return float(sizes[keep].sum()) / total
