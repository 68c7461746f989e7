"""Pando: k logical partitioning trees over one physical blocking.

Sudhir et al., "Pando" (VLDB 2023) §4-6. A Qd-tree is both the index and the
partition function, so correlated cuts (``x < 25`` and ``y < 25`` on
correlated columns) cannot share a root-to-leaf path: the child "x < 25 AND
NOT y < 25" would be nearly empty. Pando keeps *k* cut trees that only index
the data, and chooses the blocks separately:

1. **Top-down** (§6.1): the k trees grow jointly and greedily, one
   (tree, leaf, cut) at a time; a cut's benefit in tree j counts only the
   (query, row) pairs no other tree already skips, so correlated cuts land in
   different trees (:func:`~lakelayout.layouts.qdtree.grow_forest`).
2. **Bottom-up** (§6.2): each sample row has a k-tuple of leaves, its *cell*.
   Cells with fewer than ``outlier_rows`` rows are outliers and go to their
   own outlier blocks. The other cells start as blocks and the pair with the
   least added scan cost is merged until every block holds ``b`` rows:

       scanned(B, q) = AND over trees t of [some cell of B has a tree-t leaf q reaches]
       cost(B)       = rows(B) * #{q : scanned(B, q)}
       added(Bi, Bj) = cost(Bi ∪ Bj) - cost(Bi) - cost(Bj)      (>= 0)

   (bit-packed over queries, one vectorized row of costs per merge).
3. **Truncation**: a cut whose two subtrees point at the same set of blocks
   separates nothing; such subtrees collapse into one index leaf.

At query time (§5) each tree gives the blocks of the (truncated) leaves the
query may reach; the answer is their intersection, plus every outlier block.
Outlier blocks are always kept because :meth:`PandoLayout.assign` sends a row
whose cell was never seen on the sample to an outlier block (the trees know
nothing of it). With ``k = 1`` and the same minimum leaf size the layout is
the Qd-tree's, block for block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.expr.codec import schema_from_json, schema_to_json
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.qdtree import (
    CutTree,
    Growing,
    GrownForest,
    Workspace,
    best_split,
    bind_queries,
    check_options,
    check_sample,
    estimate_by_index,
    grow_forest,
    inner_from_dict,
    inner_order,
    positive_int,
)
from lakelayout.layouts.virtual import bind_workload

if TYPE_CHECKING:
    from lakelayout.layouts.zorder import CurveLayout
    from lakelayout.stats.model import FileStats

DEFAULT_K = 2


class PandoLayout(Layout):
    """k cut trees indexing blocks built bottom-up from their cells (module docstring).

    >>> t = pa.table({"x": list(range(200)), "y": list(range(200))})
    >>> w = ["x < 50", "x >= 150", "y < 100", "y >= 50"]
    >>> layout = PandoLayout.fit(t, w, rows_per_block=40, k=2)
    >>> bool(layout.assign(t).max() < layout.n_blocks)
    True
    >>> layout.blocks_for("x < 20").size < layout.n_blocks
    True
    """

    family = "pando"
    sort_key_optional = True
    OPTIONS = ("k", "min_leaf_rows", "outlier_rows", "max_outlier_share", "max_leaves")

    def __init__(
        self,
        trees: list[CutTree],
        cells: np.ndarray,
        cell_block: np.ndarray,
        n_blocks: int,
        outlier_blocks: Sequence[int],
        schema: pa.Schema,
        *,
        sample_rows: int = 0,
        block_rows: Sequence[int] = (),
        inner: CurveLayout | None = None,
    ) -> None:
        self.trees = trees
        #: the order of rows inside a block (:func:`~lakelayout.layouts.qdtree.inner_order`)
        self.inner = inner
        self.cells = np.asarray(cells, dtype=np.int64).reshape(-1, len(trees))
        self.cell_block = np.asarray(cell_block, dtype=np.int64)
        self._n_blocks = int(n_blocks)
        self.outlier_blocks = sorted(int(b) for b in outlier_blocks)
        self.schema = schema
        self.sample_rows = sample_rows
        self.block_rows = list(block_rows)
        self._check()
        self._lookup = {
            tuple(int(v) for v in c): int(b) for c, b in zip(self.cells, cell_block, strict=False)
        }
        self._stop, self._node_blocks = zip(
            *(self._truncate(t) for t in range(len(trees))), strict=False
        )

    # ---------------------------------------------------------------- fitting

    @classmethod
    def fit(
        cls,
        sample: pa.Table,
        workload: Sequence[WorkloadItem],
        *,
        rows_per_block: int | None = None,
        target_blocks: int | None = None,
        workspace: Workspace | None = None,
        **opts: Any,
    ) -> PandoLayout:
        """Fit k trees and the blocking on ``sample`` for ``workload``.

        Give exactly one of ``rows_per_block`` (minimum block size ``b`` in
        sample rows) or ``target_blocks`` (``b = sample_rows // target_blocks``).
        Options: ``k`` (trees, default 2), ``min_leaf_rows`` (top-down
        threshold; default ``b * max(1, k - 1)``: more trees get coarser
        leaves so the number of cells, and the quadratic merge, stays small), ``outlier_rows`` (cells below it are
        outliers; default ``max(1, b // 20)``), ``max_outlier_share`` (cap on
        the share of sample rows in outlier blocks, which every query reads;
        default 0.05), ``max_leaves`` (per tree). ``workspace``: a
        :meth:`~lakelayout.layouts.qdtree.Workspace.build` of this sample and
        workload, shared between fits (as in :meth:`QdTreeLayout.fit`).
        """
        sample = check_sample(sample, cls.family)
        check_options(opts, cls.OPTIONS, cls.family)
        n = sample.num_rows
        b = _block_rows(n, rows_per_block, target_blocks)
        k = positive_int(opts.get("k", DEFAULT_K), "k")
        min_leaf = positive_int(opts.get("min_leaf_rows", b * max(1, k - 1)), "min_leaf_rows")
        outlier_rows = positive_int(opts.get("outlier_rows", max(1, b // 20)), "outlier_rows")
        share = float(opts.get("max_outlier_share", 0.05))
        if not 0.0 <= share <= 1.0:
            raise LayoutError(f"max_outlier_share must be within [0, 1], got {share!r}")
        max_leaves = opts.get("max_leaves")
        if max_leaves is not None:
            max_leaves = positive_int(max_leaves, "max_leaves")
        queries = bind_queries(workload, sample, cls.family)
        ws = Workspace.reuse(workspace, sample, queries, cls.family)
        forest = grow_forest(
            ws, n, k=k, min_leaf_rows=min_leaf, max_leaves=max_leaves, best_cut=JointScorer()
        )
        return cls._from_forest(
            forest, sample, b=b, outlier_rows=outlier_rows, max_outlier_share=share
        )

    @classmethod
    def _from_forest(
        cls,
        forest: GrownForest,
        sample: pa.Table,
        *,
        b: int,
        outlier_rows: int,
        max_outlier_share: float,
    ) -> PandoLayout:
        """Bottom-up phase: cells, outliers, merging, block numbering."""
        trees = forest.trees
        leaf_index = [np.array(t.leaf_nodes(), dtype=np.int64) for t in trees]
        numbers = np.stack(
            [_leaf_numbers(t, nodes) for t, nodes in zip(trees, forest.leaf_of_row, strict=True)],
            axis=1,
        )  # leaf number per row and tree; cells come out sorted by them
        leaf_numbers, row_cell, sizes = np.unique(
            numbers, axis=0, return_inverse=True, return_counts=True
        )
        row_cell = row_cell.reshape(-1)
        scanned = np.stack(
            [forest.alive[t][leaf_index[t][leaf_numbers[:, t]]] for t in range(len(trees))],
            axis=1,
        )  # (cells, k, queries)
        outlier = pick_outliers(sizes, outlier_rows, int(max_outlier_share * len(row_cell)))
        normal = np.setdiff1d(np.arange(len(sizes)), outlier)
        labels = merge_cells(scanned[normal], sizes[normal], b)
        # number normal blocks by their first cell, then the outlier blocks
        _, first = np.unique(labels, return_index=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        cell_block = np.empty(len(sizes), dtype=np.int64)
        cell_block[normal] = rank[np.unique(labels, return_inverse=True)[1].reshape(-1)]
        n_normal = len(first)
        groups = pack_outliers(sizes[outlier], b)
        for cell, group in zip(outlier, groups, strict=False):
            cell_block[cell] = n_normal + group
        n_outlier = (max(groups) + 1) if len(groups) else 0
        possible = int(np.prod([t.n_leaves for t in trees], dtype=np.float64))
        if n_outlier == 0 and possible > len(sizes):
            n_outlier = 1  # an empty block for rows whose cell the sample never showed
        n_blocks = n_normal + n_outlier
        block_rows = np.bincount(cell_block[row_cell], minlength=n_blocks)
        return cls(
            trees,
            leaf_numbers,
            cell_block,
            n_blocks,
            range(n_normal, n_blocks),
            sample.schema,
            sample_rows=sample.num_rows,
            block_rows=[int(r) for r in block_rows],
            inner=inner_order(trees, sample),
        )

    # ---------------------------------------------------------------- index

    def _truncate(self, t: int) -> tuple[list[bool], dict[int, np.ndarray]]:
        """Collapse subtrees whose children point at the same blocks (§6.2, truncation).

        Returns ``stop`` (node is an index leaf or inside a collapsed subtree)
        and the block mask of every node (normal blocks of the cells below it).
        """
        tree = self.trees[t]
        n_nodes = len(tree.node_cut)
        masks: dict[int, np.ndarray] = {}
        for node in tree.leaf_nodes():
            masks[node] = np.zeros(self._n_blocks, dtype=bool)
        leaf_nodes = tree.leaf_nodes()
        outliers = set(self.outlier_blocks)
        for cell, block in zip(self.cells[:, t].tolist(), self.cell_block.tolist(), strict=False):
            if block not in outliers:
                masks[leaf_nodes[cell]][block] = True
        stop = [False] * n_nodes
        for node in range(n_nodes - 1, -1, -1):  # children have larger ids than parents
            if tree.is_leaf(node):
                stop[node] = True
                continue
            a, b = tree.node_true[node], tree.node_false[node]
            masks[node] = masks[a] | masks[b]
            stop[node] = stop[a] and stop[b] and bool(np.array_equal(masks[a], masks[b]))
        return stop, masks

    def index_cuts(self) -> list[int]:
        """Number of cuts each tree keeps after truncation."""
        return [
            sum(1 for n in range(len(tr.node_cut)) if not tr.is_leaf(n) and not stop[n])
            for tr, stop in zip(self.trees, self._stop, strict=False)
        ]

    # ---------------------------------------------------------------- Layout API

    @property
    def n_blocks(self) -> int:
        return self._n_blocks

    @property
    def k(self) -> int:
        return len(self.trees)

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Route rows down every tree; a known cell goes to its block, an unseen one
        to an outlier block chosen by a fixed hash of its leaf numbers."""
        leaves = np.stack([tree.route(batch) for tree in self.trees], axis=1)
        if batch.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        cells, inverse = distinct_rows(leaves)
        blocks = np.array(
            [self._block_of_cell(tuple(int(v) for v in cell)) for cell in cells], dtype=np.int64
        )
        return blocks[inverse]

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        """Rows inside a block in the Z-order of the columns the trees cut on most."""
        return None if self.inner is None else self.inner.sort_key(batch)

    def _block_of_cell(self, cell: tuple[int, ...]) -> int:
        block = self._lookup.get(cell)
        if block is not None:
            return block
        if not self.outlier_blocks:
            raise LayoutError(f"cell {cell} is unknown and the layout has no outlier block")
        h = 0
        for v in cell:
            h = (h * 1_000_003 + v) % 2_147_483_647
        return self.outlier_blocks[h % len(self.outlier_blocks)]

    def blocks_for(self, predicate: WorkloadItem) -> np.ndarray:
        """Intersection over trees of the blocks of reached index leaves, plus outliers."""
        (query,) = bind_workload([predicate], self.schema)
        keep = np.ones(self._n_blocks, dtype=bool)
        for tree, stop, masks in zip(self.trees, self._stop, self._node_blocks, strict=False):
            reached = np.zeros(self._n_blocks, dtype=bool)
            for node in tree.matching_nodes(query, stop):
                reached |= masks[node]
            keep &= reached
        keep[self.outlier_blocks] = True
        return np.flatnonzero(keep).astype(np.int64)

    def blocks_of_files(self, files: FileStats) -> np.ndarray:
        """The block of a file whose statistics put all its rows in one leaf of every
        tree (that cell's block, as :meth:`assign` maps it); -1 otherwise."""
        leaves = np.stack([tree.route_files(files) for tree in self.trees], axis=1)
        out = np.full(len(files), -1, dtype=np.int64)
        for i in np.flatnonzero((leaves >= 0).all(axis=1)):
            try:
                out[i] = self._block_of_cell(tuple(int(v) for v in leaves[i]))
            except LayoutError:  # an unknown cell and no outlier block: assign fails too
                continue
        return out

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        return estimate_by_index(self, workload, sample)

    # ---------------------------------------------------------------- JSON and text

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "version": 1,
            "schema": schema_to_json(self.schema),
            "sample_rows": self.sample_rows,
            "trees": [t.to_json() for t in self.trees],
            "cells": self.cells.tolist(),
            "cell_block": self.cell_block.tolist(),
            "n_blocks": self._n_blocks,
            "outlier_blocks": list(self.outlier_blocks),
            "block_rows": list(self.block_rows),
            **({} if self.inner is None else {"inner": self.inner.to_dict()}),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> PandoLayout:
        if state.get("family") != cls.family:
            raise LayoutError(f"not a {cls.family} layout: family={state.get('family')!r}")
        try:
            trees = [CutTree.from_json(t) for t in state["trees"]]
            return cls(
                trees,
                np.array(state["cells"], dtype=np.int64).reshape(-1, len(trees)),
                np.array(state["cell_block"], dtype=np.int64),
                int(state["n_blocks"]),
                [int(b) for b in state["outlier_blocks"]],
                schema_from_json(state["schema"]),
                sample_rows=int(state.get("sample_rows", 0)),
                block_rows=[int(r) for r in state.get("block_rows", [])],
                inner=inner_from_dict(state),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad {cls.family} layout document: {exc}") from exc

    def _check(self) -> None:
        if not self.trees:
            raise LayoutError("a pando layout needs at least one tree")
        if len(self.cells) != len(self.cell_block):
            raise LayoutError(
                f"{len(self.cells)} cells but {len(self.cell_block)} cell block numbers"
            )
        bad = [
            b
            for b in [*self.cell_block.tolist(), *self.outlier_blocks]
            if not 0 <= b < self._n_blocks
        ]
        if bad:
            raise LayoutError(f"block number {bad[0]} outside 0..{self._n_blocks - 1}")
        for t, tree in enumerate(self.trees):
            col = self.cells[:, t]
            if len(col) and (col.min() < 0 or col.max() >= tree.n_leaves):
                raise LayoutError(f"a cell names a leaf tree {t} does not have")

    def describe(self) -> str:
        rows = np.array(self.block_rows or [0], dtype=np.int64)
        outlier_rows = int(rows[self.outlier_blocks].sum()) if self.block_rows else 0
        lines = [
            f"pando: k={self.k} trees, {self.n_blocks} blocks "
            f"({len(self.outlier_blocks)} outlier blocks holding {outlier_rows} sample rows), "
            f"{len(self.cells)} cells, fitted on {self.sample_rows} sample rows",
        ]
        for t, (tree, kept) in enumerate(zip(self.trees, self.index_cuts(), strict=False)):
            lines.append(
                f"tree {t}: {tree.n_leaves} leaves, {len(tree.cuts)} distinct cuts, "
                f"{kept} cuts kept after truncation"
            )
            lines += ["  " + s for s in tree.describe_lines(6)]
        if self.block_rows:
            normal = np.delete(rows, self.outlier_blocks)
            if normal.size:
                lines.append(
                    f"block rows (sample): min {normal.min()}, median {int(np.median(normal))}, "
                    f"max {normal.max()}"
                )
        return "\n".join(lines)


# ---------------------------------------------------------------- top-down scoring


class JointScorer:
    """Exact best cut of a leaf when the other trees already skip rows (§6.1), fast.

    Same result as :func:`lakelayout.layouts.qdtree.best_split`, benefit for
    benefit and tie for tie (lowest cut index), computed differently. The rows
    of the leaf fall into groups G by their leaves in the other trees; in a
    group the other trees leave the same queries unskipped, so with
    ``T[g, c]`` the group's rows where cut ``c`` is TRUE and
    ``Wt[g, c]`` / ``Wf[g, c]`` the unskipped queries the TRUE / NOT TRUE side
    of ``c`` rules out:

        benefit(c) = Σ_g T[g, c] Wt[g, c] + (|g| - T[g, c]) Wf[g, c]
                  <= Σ_g |g| max(Wt[g, c], Wf[g, c])          =: bound(c)

    The weights are small matrix products; counting ``T`` costs a pass over
    the leaf's rows per cut, which the old scorer paid for every cut. Here
    cuts are visited by decreasing bound, and the visit stops once the best
    exact benefit beats every remaining bound (ties still visited, so the
    lowest index wins as before). All quantities are integers below 2**53,
    so float64 arithmetic is exact and the comparisons are too. The TRUE
    count of every cut over a leaf never changes while it is a leaf, so it is
    cached per (tree, node).
    """

    def __init__(self) -> None:
        self._n_true: dict[tuple[int, int], np.ndarray] = {}
        self._masks_t: tuple[Workspace, np.ndarray] | None = None

    def _columns(self, ws: Workspace) -> np.ndarray:
        """``ws.masks`` column-major (cut x row): a cut's rows are one contiguous gather."""
        if self._masks_t is None or self._masks_t[0] is not ws:
            self._masks_t = (ws, np.ascontiguousarray(ws.masks.T))
        return self._masks_t[1]

    def __call__(
        self, ws: Workspace, trees: list[Growing], t: int, node: int, min_leaf_rows: int
    ) -> tuple[float, int] | None:
        others = [o for o in range(len(trees)) if o != t]
        tree = trees[t]
        rows = tree.rows[node]
        alive = tree.alive[node]
        if not others:
            return best_split(ws, trees, t, node, min_leaf_rows)
        if len(rows) < 2 * min_leaf_rows or not alive.any() or not ws.cuts:
            return None
        skip_t = ws.skip_true[:, alive]
        skip_f = ws.skip_false[:, alive]
        n_true = self._node_true(t, node, tree.sub[node])
        fits = (n_true >= min_leaf_rows) & (len(rows) - n_true >= min_leaf_rows)
        cand = np.flatnonzero((skip_t.any(axis=1) | skip_f.any(axis=1)) & fits)
        if cand.size == 0:
            return None
        groups, reps = group_rows(trees, others, rows)
        sizes = np.bincount(groups, minlength=len(reps)).astype(np.float64)
        unskipped = np.ones((len(reps), skip_t.shape[1]), dtype=bool)
        for o in others:
            unskipped &= trees[o].alive_matrix()[trees[o].leaf_of_row[reps]][:, alive]
        w_true = shared_bits(unskipped, skip_t[cand])  # (groups, candidates)
        w_false = shared_bits(unskipped, skip_f[cand])
        base = (sizes[:, None] * w_false).sum(axis=0)  # benefit if no row were on the TRUE side
        gain = w_true - w_false  # per row of group g moved to the TRUE side of cut c
        bound = base + fill_bound(gain, sizes, n_true[cand].astype(np.float64))
        columns = self._columns(ws)
        best, best_val = -1, 0.0
        for i in np.lexsort((cand, -bound)).tolist():
            if bound[i] <= 0.0 or (best >= 0 and bound[i] < best_val):
                break
            c = int(cand[i])
            t_g = np.bincount(groups, weights=columns[c, rows], minlength=len(reps))
            value = float(base[i] + (t_g * gain[:, i]).sum())
            if value > 0.0 and (value > best_val or (value == best_val and c < best)):
                best, best_val = c, value
        return None if best < 0 else (best_val, best)

    def _node_true(self, t: int, node: int, sub: np.ndarray) -> np.ndarray:
        key = (t, node)
        if key not in self._n_true:
            self._n_true[key] = np.count_nonzero(sub, axis=0)
        return self._n_true[key]


def shared_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b.T`` for boolean matrices, as float64 counts, by popcount of packed words.

    Exact and free of BLAS (whose threads stall on small products on a busy
    machine). Works through ``a`` in slices to bound the 3-d temporary.
    """
    pa_, pb = _pack_rows(a), _pack_rows(b)
    out = np.empty((len(a), len(b)), dtype=np.float64)
    step = max(1, (1 << 21) // max(1, pb.size))
    for lo in range(0, len(a), step):
        both = pa_[lo : lo + step, None, :] & pb[None, :, :]
        out[lo : lo + step] = np.bitwise_count(both).sum(axis=2)
    return out


def _pack_rows(bits: np.ndarray) -> np.ndarray:
    """Bool (rows, n) -> uint64 (rows, ceil(n / 64)) bit sets."""
    packed = np.packbits(bits, axis=1, bitorder="little")
    pad = (-packed.shape[1]) % 8 or (8 if packed.shape[1] == 0 else 0)
    if pad:
        packed = np.concatenate([packed, np.zeros((len(packed), pad), dtype=np.uint8)], axis=1)
    return np.ascontiguousarray(packed).view(np.uint64)


def fill_bound(gain: np.ndarray, sizes: np.ndarray, n_true: np.ndarray) -> np.ndarray:
    """Max of Σ_g T[g, c] gain[g, c] over 0 <= T[g, c] <= sizes[g], Σ_g T[g, c] = n_true[c].

    A fractional knapsack per column: the TRUE rows go to the groups of
    largest gain first. An upper bound on the true value (the real ``T`` is one
    feasible point); integral inputs give an integral, exactly computed result.
    """
    order = np.argsort(-gain, axis=0, kind="stable")
    filled = np.minimum(np.cumsum(sizes[order], axis=0), n_true[None, :])
    taken = np.diff(filled, axis=0, prepend=0.0)
    return np.asarray((taken * np.take_along_axis(gain, order, axis=0)).sum(axis=0))


def group_rows(
    trees: list[Growing], others: list[int], rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Group ``rows`` by their leaves in the ``others`` trees: (group per row, a row per group).

    Groups are the distinct rows of leaf node ids (:func:`distinct_rows`: one
    mixed-radix key, a lookup table when the key space is small).
    """
    _, groups = distinct_rows(np.stack([trees[o].leaf_of_row[rows] for o in others], axis=1))
    reps = np.empty(int(groups.max()) + 1 if len(groups) else 0, dtype=np.int64)
    reps[groups] = rows
    return groups, reps


# ---------------------------------------------------------------- bottom-up pieces


def _leaf_numbers(tree: CutTree, nodes: np.ndarray) -> np.ndarray:
    """Leaf numbers of an array of leaf node ids."""
    lookup = np.zeros(len(tree.node_cut), dtype=np.int64)
    for node in tree.leaf_nodes():
        lookup[node] = tree.leaf_number(node)
    return lookup[nodes]


def pick_outliers(sizes: np.ndarray, below: int, budget: int) -> np.ndarray:
    """Outlier cells: those under ``below`` rows, smallest first, up to ``budget`` rows.

    Every query reads the outlier blocks, so their total is capped; cells
    past the cap take part in merging like any other cell. Returned sorted.
    """
    small = np.flatnonzero(sizes < below)
    order = small[np.argsort(sizes[small], kind="stable")]
    within = np.cumsum(sizes[order]) <= budget
    return np.sort(order[within])


def _block_rows(n: int, rows_per_block: int | None, target_blocks: int | None) -> int:
    if (rows_per_block is None) == (target_blocks is None):
        raise LayoutError(
            "give exactly one of target_blocks=... or rows_per_block=... "
            f"(got target_blocks={target_blocks}, rows_per_block={rows_per_block})"
        )
    if rows_per_block is not None:
        return positive_int(rows_per_block, "rows_per_block")
    return max(1, n // positive_int(target_blocks, "target_blocks"))


def merge_cells(scanned: np.ndarray, sizes: np.ndarray, b: int) -> np.ndarray:
    """Greedy agglomerative merge of cells into blocks of at least ``b`` rows.

    ``scanned[c, t, q]``: tree ``t`` sends query ``q`` to cell ``c``. Returns a
    block label per cell (the index of the surviving cell of its block).
    Repeatedly merges the under-sized block with the cheapest partner (least
    added scan cost, module docstring), until no block is under ``b`` or one
    block remains. A block whose chosen partner grew keeps the exact cost to
    the grown block and is re-examined against all blocks when it comes up
    (lazily). Ties go to the lowest index, so the result is deterministic.
    """
    m = len(sizes)
    parent = np.arange(m)
    if m <= 1:
        return parent
    # (k, words, m): tree t's query bits of every cell are contiguous rows
    bits = np.ascontiguousarray(_pack(scanned).transpose(1, 2, 0))
    size = sizes.astype(np.float64)
    active = np.ones(m, dtype=bool)
    cost = size * _scanned_queries(bits)

    def costs_with(i: int) -> np.ndarray:
        both = bits[0] | bits[0][:, i : i + 1]
        for t in range(1, bits.shape[0]):
            both &= bits[t] | bits[t][:, i : i + 1]
        out = (size[i] + size) * np.bitwise_count(both).sum(axis=0) - cost[i] - cost
        out[~active] = np.inf
        out[i] = np.inf
        return out

    best_to = np.full(m, -1)
    best_cost = np.full(m, np.inf)
    for start in np.flatnonzero(size < b).tolist():
        first_row = costs_with(start)
        best_to[start] = int(np.argmin(first_row))
        best_cost[start] = first_row[best_to[start]]
    stale = np.zeros(m, dtype=bool)
    small = active & (size < b)
    n_active = m
    while n_active > 1 and small.any():
        i = int(np.argmin(np.where(small, best_cost, np.inf)))
        if stale[i]:
            fresh = costs_with(i)
            best_to[i] = int(np.argmin(fresh))
            best_cost[i] = fresh[best_to[i]]
            stale[i] = False
            continue
        j = int(best_to[i])
        keep, gone = (i, j) if i < j else (j, i)
        bits[:, :, keep] |= bits[:, :, gone]
        size[keep] += size[gone]
        active[gone] = False
        n_active -= 1
        parent[gone] = keep
        cost[keep] = size[keep] * _scanned_queries(bits[:, :, keep : keep + 1])[0]
        best_cost[gone] = np.inf
        row = costs_with(keep)
        if size[keep] < b:
            best_to[keep] = int(np.argmin(row))
            best_cost[keep] = row[best_to[keep]]
        else:
            best_cost[keep] = np.inf
        small = active & (size < b)
        _retarget(small, keep, (i, j), row, best_to, best_cost, stale)
    for c in range(m):  # resolve chains to the surviving root
        root = c
        while int(parent[root]) != root:
            root = int(parent[root])
        parent[c] = root
    return parent


def _retarget(
    small: np.ndarray,
    keep: int,
    merged: tuple[int, int],
    row: np.ndarray,
    best_to: np.ndarray,
    best_cost: np.ndarray,
    stale: np.ndarray,
) -> None:
    """After ``merged`` became ``keep`` (costs ``row``), update the small blocks' partners.

    A block whose partner was merged now points at the grown block with its
    exact cost, marked stale (a cheaper partner may exist); any other block
    takes ``keep`` if it is cheaper, or as cheap with a lower index.
    """
    u = np.flatnonzero(small)
    u = u[u != keep]
    lost = np.isin(best_to[u], merged)
    moved = u[lost]
    best_to[moved] = keep
    best_cost[moved] = row[moved]
    stale[moved] = True
    rest = u[~lost]
    cur = best_cost[rest]
    better = (row[rest] < cur) | ((row[rest] == cur) & (keep < best_to[rest]))
    best_to[rest[better]] = keep
    best_cost[rest[better]] = row[rest[better]]


def _scanned_queries(bits: np.ndarray) -> np.ndarray:
    """Queries every tree sends to the block, per block of a (k, words, blocks) bit array."""
    both = np.bitwise_and.reduce(bits, axis=0)
    return np.bitwise_count(both).sum(axis=0).astype(np.float64)


def _pack(scanned: np.ndarray) -> np.ndarray:
    """Bool (m, k, q) -> uint64 (m, k, ceil(q / 64)) bit sets."""
    m, k, _q = scanned.shape
    packed = np.packbits(scanned, axis=2, bitorder="little")
    pad = (-packed.shape[2]) % 8
    if pad or packed.shape[2] == 0:
        packed = np.concatenate([packed, np.zeros((m, k, pad or 8), dtype=np.uint8)], axis=2)
    return np.ascontiguousarray(packed).view(np.uint64)


def pack_outliers(sizes: np.ndarray, b: int) -> list[int]:
    """Outlier block number per outlier cell: cells in order, a new block every ``b`` rows.

    A last block smaller than ``b`` joins the previous one, so every outlier
    block but a lone one holds at least ``b`` rows.
    """
    groups: list[int] = []
    block, filled = 0, 0
    for s in sizes.tolist():
        if filled >= b:
            block, filled = block + 1, 0
        groups.append(block)
        filled += int(s)
    if block > 0 and filled < b:
        groups = [g if g < block else block - 1 for g in groups]
    return groups


#: :func:`distinct_rows` numbers cells through a lookup table up to this many possible cells
DENSE_CELLS = 1 << 22


def distinct_rows(leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D array of non-negative leaf numbers and, per row, the
    index of its distinct row: ``np.unique(leaves, axis=0, return_inverse=True)``.

    Each row is read as one number in mixed radix (each column's radix its largest
    value + 1), numbered through a lookup table when there are at most
    :data:`DENSE_CELLS` possible numbers, else by a unique over one int64 column:
    either is several times faster than a unique over rows, which remains for
    rows whose radices would overflow.
    """
    radix = leaves.max(axis=0).astype(np.int64) + 1 if leaves.size else None
    if radix is None or leaves.min() < 0 or float(np.prod(radix.astype(float))) >= 2.0**62:
        uniq, inverse = np.unique(leaves, axis=0, return_inverse=True)
        return uniq, inverse.reshape(-1)
    places = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]]).astype(np.int64)
    key = leaves.astype(np.int64) @ places
    space = int(radix.prod())
    if space <= DENSE_CELLS:  # a lookup table instead of a sort
        seen = np.zeros(space, dtype=bool)
        seen[key] = True
        keys = np.flatnonzero(seen)
        inverse = (np.cumsum(seen) - 1)[key]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
    cells = (keys[:, None] // places[None, :]) % radix[None, :]
    return cells, inverse.reshape(-1)
