"""Skipping-oriented partitioning (SOP): blocks chosen for bit-vector skipping.

Thesis §1.2.6 after Sun et al. (SIGMOD 2014). Every sample row gets the bit
vector of the workload features it satisfies (:mod:`.feature_set`); rows with
equal vectors start as one group, and groups are merged bottom-up. For a
partitioning P = {P_1 .. P_k}, with v(P_i) the OR of the vectors in P_i and
w_j the weight (frequency) of feature j, the *skipping cost* is

    C(P_i) = |P_i| * Σ_j w_j * (1 - v(P_i)_j)        C(P) = Σ_i C(P_i)

the weighted number of rows the workload can skip. Merging A and B changes it
by Δ = |A∪B| z(v_A | v_B) - |A| z(v_A) - |B| z(v_B) <= 0, where
z(v) = Σ_j w_j (1 - v_j); the greedy step merges the pair with the largest Δ
among pairs holding at least one block smaller than the minimum size, until no
such block remains.

The merged blocks are then *ordered* (thesis §4.1.2, P1-P3) so consecutive
block ids have related vectors: a minimum spanning tree over the Hamming
distances (Prim's algorithm), walked in preorder — the 2-approximation of the
travelling-salesman tour, valid because Hamming distance obeys the triangle
inequality. This matters whenever neighbouring blocks share a file (SOP+Z,
or a writer packing small blocks); :func:`ordering_zeros` measures it the
way the thesis's Fig. 4.2 does.

Applying the layout to unseen rows. A row whose vector was seen in the sample
goes to its group's block. An unseen vector goes to the block whose fitted
OR-vector *contains* it (the tightest such block). With ``unseen="outlier"``
(default) a vector contained in no block goes to one extra *outlier block*
whose vector is all ones; so every row lands in a block whose stored vector
covers it, and :meth:`SOPLayout.blocks_for` can answer from the stored vectors
without ever omitting a block holding a matching row. With
``unseen="nearest"`` such a vector instead goes to the block adding the least
feature weight (then Hamming distance, then lowest id); the stored vectors
then under-approximate, so ``blocks_for`` returns None and skipping relies on
per-file vectors, which the writer recomputes from the rows it actually wrote.
:meth:`SOPLayout.estimate` always uses the OR of the sample rows in each block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.feature_set import FeatureSet, bit_matrix, popcount, zero_weight

UNSEEN_MODES = ("outlier", "nearest")


# ---------------------------------------------------------------- skipping cost


def skipping_cost(block_vectors: np.ndarray, block_sizes: np.ndarray, weights: np.ndarray) -> float:
    """C(P) = Σ_i |P_i| Σ_j w_j (1 - v(P_i)_j): weighted rows the features can skip.

    >>> skipping_cost(np.array([0b01, 0b10], np.uint64), np.array([3, 2]), np.array([1.0, 2.0]))
    8.0
    """
    z = zero_weight(np.asarray(block_vectors, np.uint64), weights)
    return float(np.dot(np.asarray(block_sizes, np.float64), z))


# ---------------------------------------------------------------- bottom-up merge


class _MergeState:
    """Groups being merged, kept compact: position i holds the i-th live group (in
    order of original index), with its OR-vector, size, zero weight, whether it is
    small, and, when small, its best partner (original index) and that merge's Δ.

    A merge deletes the absorbed group's position, so every vectorized step works on
    the live groups only (they fall from thousands to the block count).
    """

    def __init__(
        self, vectors: np.ndarray, sizes: np.ndarray, weights: np.ndarray, min_size: float
    ) -> None:
        self.table = _byte_tables(np.asarray(weights, dtype=np.float64))
        self.min_size = float(min_size)
        self.idx = np.arange(len(vectors), dtype=np.int64)
        self.vec = np.asarray(vectors, dtype=np.uint64).copy()
        self.size = np.asarray(sizes, dtype=np.float64).copy()
        self.z = self.zw(self.vec)
        self.small = self.size < self.min_size
        self.best_val = np.full(len(vectors), -np.inf)
        self.best_j = np.full(len(vectors), -1, dtype=np.int64)

    def zw(self, vectors: np.ndarray) -> np.ndarray:
        """:func:`zero_weight` by byte lookup: Σ over bytes p of table[p, byte p of v].

        ``table[p, b]`` is the weight of the features of byte ``p`` absent from
        ``b``; integral weights give the same (exact) sums as the bit matrix.
        """
        v = np.ascontiguousarray(vectors, dtype="<u8")
        chunks = v.view("<u2").reshape(*v.shape, 4)  # 16-bit chunks, lowest first
        out = self.table[0][chunks[..., 0]]
        for p in range(1, len(self.table)):
            out = out + self.table[p][chunks[..., p]]
        return np.asarray(out, dtype=np.float64)

    def deltas(self, x: int) -> np.ndarray:
        """Δ C of merging the group at position ``x`` with each live group."""
        zz = self.zw(self.vec | self.vec[x])
        sx = self.size[x]
        return np.asarray((sx + self.size) * zz - sx * self.z[x] - self.size * self.z)

    def refresh(self, xs: np.ndarray) -> None:
        """Recompute the best partner of the groups at positions ``xs`` over every other
        live group, in slices of a (groups x live) table."""
        n = len(self.idx)
        sz = self.size * self.z
        step = max(1, (1 << 20) // max(1, n))
        for lo in range(0, len(xs), step):
            x = xs[lo : lo + step]
            zz = self.zw(self.vec[None, :] | self.vec[x][:, None])
            sx = self.size[x][:, None]
            d = (sx + self.size[None, :]) * zz - sx * self.z[x][:, None] - sz[None, :]
            d[np.arange(len(x)), x] = -np.inf
            j = np.argmax(d, axis=1)
            self.best_val[x] = d[np.arange(len(x)), j]
            self.best_j[x] = self.idx[j]

    def best_pair(self) -> tuple[int, int]:
        """Positions of the next pair: the small group with the largest Δ (lowest index
        on ties) and its best partner."""
        x = int(np.argmax(np.where(self.small, self.best_val, -np.inf)))
        return x, int(np.searchsorted(self.idx, self.best_j[x]))

    def merge(self, x: int, y: int) -> tuple[int, int]:
        """Merge the groups at positions ``x`` and ``y`` into the lower one and update
        the bests; the original indices (kept, absorbed)."""
        keep, gone = min(x, y), max(x, y)
        merged = (int(self.idx[keep]), int(self.idx[gone]))
        self.vec[keep] |= self.vec[gone]
        self.size[keep] += self.size[gone]
        self.z[keep] = self.zw(self.vec[keep : keep + 1])[0]
        self.small[keep] = self.size[keep] < self.min_size
        for name in ("idx", "vec", "size", "z", "small", "best_val", "best_j"):
            setattr(self, name, np.delete(getattr(self, name), gone))
        self._update_bests(keep, merged)
        return merged

    def _update_bests(self, keep: int, merged: tuple[int, int]) -> None:
        """Small groups whose best partner vanished are recomputed; others also try ``keep``."""
        others = self.small.copy()
        others[keep] = False
        stale = others & ((self.best_j == merged[0]) | (self.best_j == merged[1]))
        if stale.any():
            self.refresh(np.flatnonzero(stale))
        fresh = np.flatnonzero(others & ~stale)
        refresh_keep = bool(self.small[keep]) and len(self.idx) > 1
        if not (len(fresh) or refresh_keep):
            return
        row = self.deltas(keep)  # one pass serves both updates below
        if len(fresh):
            d = row[fresh]
            cur_v, cur_j = self.best_val[fresh], self.best_j[fresh]
            better = (d > cur_v) | ((d == cur_v) & (merged[0] < cur_j))
            self.best_val[fresh[better]] = d[better]
            self.best_j[fresh[better]] = merged[0]
        if refresh_keep:  # as refresh([keep]): keep itself at -inf
            row[keep] = -np.inf
            j = int(np.argmax(row))
            self.best_val[keep], self.best_j[keep] = row[j], self.idx[j]


def merge_groups(
    vectors: np.ndarray, sizes: np.ndarray, weights: np.ndarray, min_size: int
) -> np.ndarray:
    """Block label (0..b-1) of each group after greedy bottom-up merging.

    Groups start as given (typically one per distinct vector). While some
    group is smaller than ``min_size`` and more than one group is left, the
    pair with the largest Δ C(P) having at least one small member is merged
    (ties: lowest indices). Labels number the surviving groups in order of
    their lowest original index.
    """
    k = len(vectors)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    state = _MergeState(vectors, sizes, weights, float(min_size))
    owner = np.arange(k, dtype=np.int64)
    if k > 1:
        state.refresh(np.flatnonzero(state.small))
    while len(state.idx) > 1 and state.small.any():
        keep, gone = state.merge(*state.best_pair())
        owner[gone] = keep  # a pointer to the survivor; chains resolve below
    while True:
        up = owner[owner]
        if np.array_equal(up, owner):
            break
        owner = up
    _, labels = np.unique(owner, return_inverse=True)
    return labels.astype(np.int64)


CHUNK_BITS = 16
"""Bits per lookup in :meth:`_MergeState.zw` (tables of 2**16 float64: 512 KiB each)."""


def _byte_tables(weights: np.ndarray) -> np.ndarray:
    """(chunks, 2**CHUNK_BITS) table: weight of the features of chunk p absent from value b."""
    n = len(weights)
    n_chunks = max(1, -(-n // CHUNK_BITS))
    w = np.zeros(CHUNK_BITS * n_chunks, dtype=np.float64)
    w[:n] = weights
    values = np.arange(1 << CHUNK_BITS, dtype=np.uint64)
    out = np.zeros((n_chunks, 1 << CHUNK_BITS), dtype=np.float64)
    for p in range(n_chunks):
        for bit in range(CHUNK_BITS):
            absent = ((values >> np.uint64(bit)) & np.uint64(1)) == 0
            out[p] += np.where(absent, w[CHUNK_BITS * p + bit], 0.0)
    return out


# ---------------------------------------------------------------- ordering


def hamming(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Number of differing bits (elementwise over uint64)."""
    return popcount(np.bitwise_xor(np.asarray(a, np.uint64), np.asarray(b, np.uint64)))


def mst_parents(vectors: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Prim's MST over the complete Hamming graph: (parent, edge length) per vertex.

    O(k^2) time and O(k) memory; ties go to the lowest vertex index.
    The root's parent is -1.
    """
    v = np.asarray(vectors, dtype=np.uint64)
    k = len(v)
    in_tree = np.zeros(k, dtype=bool)
    dist = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    parent = np.full(k, -1, dtype=np.int64)
    dist[start] = 0
    for _ in range(k):
        u = int(np.argmin(np.where(in_tree, np.iinfo(np.int64).max, dist)))
        in_tree[u] = True
        d = hamming(v, v[u])
        closer = ~in_tree & (d < dist)
        dist[closer] = d[closer]
        parent[closer] = u
    return parent, dist


def mst_order(vectors: np.ndarray) -> np.ndarray:
    """Vertex order of the MST preorder walk: the 2-approximate Hamming TSP tour.

    Starts at the vector with the fewest 1 bits (ties: lowest index); each
    vertex's children are visited nearest first. Returns a permutation.

    >>> mst_order(np.array([0b111, 0b000, 0b110, 0b001], np.uint64)).tolist()
    [1, 3, 0, 2]
    """
    v = np.asarray(vectors, dtype=np.uint64)
    k = len(v)
    if k <= 1:
        return np.arange(k, dtype=np.int64)
    start = int(np.argmin(popcount(v)))
    parent, dist = mst_parents(v, start)
    return preorder(parent, dist, start)


def preorder(parent: np.ndarray, dist: np.ndarray, root: int) -> np.ndarray:
    """Preorder walk of a tree given by parent pointers; children nearest first, then by id."""
    child = np.flatnonzero(parent >= 0)
    ordered = child[np.lexsort((child, dist[child], parent[child]))]
    children: dict[int, list[int]] = {}
    for c in ordered:
        children.setdefault(int(parent[c]), []).append(int(c))
    out: list[int] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children.get(node, [])))
    return np.asarray(out, dtype=np.int64)


@dataclass(frozen=True)
class OrderingZeros:
    """Thesis Fig. 4.2: zero bits of the file vectors with and without ordering."""

    ordered: int
    unordered: int
    n_files: int

    @property
    def gain(self) -> float:
        """Relative increase of zero bits due to ordering (0.11 = 11 % more)."""
        return self.ordered / self.unordered - 1.0 if self.unordered else math.inf


def file_vectors(
    block_vectors: np.ndarray, block_sizes: np.ndarray, order: np.ndarray, rows_per_file: int
) -> np.ndarray:
    """OR-vector of each file when blocks are written in ``order`` and cut every ``rows_per_file`` rows."""
    vec = np.asarray(block_vectors, np.uint64)[order]
    size = np.asarray(block_sizes, np.int64)[order]
    ends = np.cumsum(size)
    starts = ends - size
    n_files = int(-(-int(ends[-1]) // rows_per_file)) if len(ends) else 0
    out = np.zeros(n_files, dtype=np.uint64)
    nonempty = size > 0
    first = starts[nonempty] // rows_per_file
    last = (ends[nonempty] - 1) // rows_per_file
    span = last - first + 1
    files = np.repeat(first, span) + _ramp(span)
    np.bitwise_or.at(out, files, np.repeat(vec[nonempty], span))
    return out


def _ramp(span: np.ndarray) -> np.ndarray:
    """0..s-1 for each s in ``span``, concatenated."""
    total = int(span.sum())
    offsets = np.repeat(np.cumsum(span) - span, span)
    return np.arange(total, dtype=np.int64) - offsets


def ordering_zeros(
    block_vectors: np.ndarray,
    block_sizes: np.ndarray,
    *,
    n_features: int,
    rows_per_file: int,
    unordered: np.ndarray | None = None,
) -> OrderingZeros:
    """Zero bits in the file vectors with the MST ordering vs without it (Fig. 4.2).

    The thesis counts, per SOP feature, the files it can skip — the zero bits
    of the file vectors — when SOP partitions are written one after another
    and cut into files. Here the blocks are laid out in MST-preorder (ordered)
    or in ``unordered`` (default: the order given), cut into files of
    ``rows_per_file`` rows, and the zeros of every file's OR-vector summed.
    """
    if rows_per_file < 1:
        raise LayoutError(f"rows_per_file must be >= 1, got {rows_per_file}")
    vec = np.asarray(block_vectors, np.uint64)
    base = np.arange(len(vec)) if unordered is None else np.asarray(unordered, np.int64)

    def zeros(order: np.ndarray) -> tuple[int, int]:
        files = file_vectors(vec, block_sizes, order, rows_per_file)
        return int((n_features - popcount(files)).sum()), len(files)

    ordered, n_files = zeros(mst_order(vec))
    plain, _ = zeros(base)
    return OrderingZeros(ordered=ordered, unordered=plain, n_files=n_files)


# ---------------------------------------------------------------- the layout


def min_block_rows(n_rows: int, rows_per_block: int | None, target_blocks: int | None) -> int:
    """Minimum block size in sample rows from exactly one of the two targets.

    ``target_blocks`` t gives ceil(n / t), so at most t blocks are made.
    """
    if (rows_per_block is None) == (target_blocks is None):
        raise LayoutError(
            "give exactly one of rows_per_block=... or target_blocks=... "
            f"(got rows_per_block={rows_per_block}, target_blocks={target_blocks})"
        )
    if rows_per_block is not None:
        if int(rows_per_block) < 1:
            raise LayoutError(f"rows_per_block must be >= 1, got {rows_per_block}")
        return int(rows_per_block)
    assert target_blocks is not None
    if int(target_blocks) < 1:
        raise LayoutError(f"target_blocks must be >= 1, got {target_blocks}")
    return max(1, -(-n_rows // int(target_blocks)))


class SOPLayout(Layout):
    """Blocks = greedily merged groups of equal feature vectors, ordered by MST preorder."""

    family = "sop"

    def __init__(
        self,
        features: FeatureSet,
        block_vectors: np.ndarray,
        seen_vectors: np.ndarray,
        seen_blocks: np.ndarray,
        *,
        unseen: str = "outlier",
        min_rows: int = 1,
        block_rows: np.ndarray | None = None,
    ) -> None:
        if unseen not in UNSEEN_MODES:
            raise LayoutError(f"unseen={unseen!r} is not one of {', '.join(UNSEEN_MODES)}")
        self.features = features
        self.fitted_vectors = np.asarray(block_vectors, dtype=np.uint64)
        order = np.argsort(np.asarray(seen_vectors, dtype=np.uint64), kind="stable")
        self.seen_vectors = np.asarray(seen_vectors, dtype=np.uint64)[order]
        self.seen_blocks = np.asarray(seen_blocks, dtype=np.int64)[order]
        self.unseen = unseen
        self.min_rows = int(min_rows)
        n = len(self.fitted_vectors)
        self.block_rows = (
            np.zeros(n, np.int64) if block_rows is None else np.asarray(block_rows, np.int64)
        )
        self._weights = features.weights
        self._fitted_z = zero_weight(self.fitted_vectors, self._weights)

    # ------------------------------------------------------------ fitting

    @classmethod
    def fit(
        cls,
        sample: pa.Table,
        workload: Sequence[WorkloadItem],
        *,
        rows_per_block: int | None = None,
        target_blocks: int | None = None,
        max_features: int = 64,
        min_frequency: int = 1,
        conjunctions: bool = True,
        unseen: str = "outlier",
        functions: dict[str, pa.DataType] | None = None,
    ) -> SOPLayout:
        """Fit on a sample: features, row vectors, bottom-up merge, MST ordering.

        ``rows_per_block`` is the minimum block size in *sample* rows;
        ``target_blocks`` t sets it to ceil(sample rows / t).
        """
        if sample.num_rows == 0:
            raise LayoutError("cannot fit an SOP layout on an empty sample")
        min_rows = min_block_rows(sample.num_rows, rows_per_block, target_blocks)
        if unseen not in UNSEEN_MODES:
            raise LayoutError(f"unseen={unseen!r} is not one of {', '.join(UNSEEN_MODES)}")
        features = FeatureSet.from_workload(
            workload,
            sample.schema,
            max_features=max_features,
            min_frequency=min_frequency,
            conjunctions=conjunctions,
            functions=functions,
        )
        vecs = features.vectors(sample)
        uniq, counts = np.unique(vecs, return_counts=True)
        labels = merge_groups(uniq, counts, features.weights, min_rows)
        n_blocks = int(labels.max()) + 1
        merged = np.zeros(n_blocks, dtype=np.uint64)
        np.bitwise_or.at(merged, labels, uniq)
        sizes = np.bincount(labels, weights=counts, minlength=n_blocks).astype(np.int64)
        order = mst_order(merged)
        block_of_label = np.empty(n_blocks, dtype=np.int64)
        block_of_label[order] = np.arange(n_blocks)
        return cls(
            features,
            merged[order],
            uniq,
            block_of_label[labels],
            unseen=unseen,
            min_rows=min_rows,
            block_rows=sizes[order],
        )

    # ------------------------------------------------------------ the Layout contract

    @property
    def outlier_block(self) -> int | None:
        """Id of the block collecting vectors no fitted block covers (outlier mode)."""
        return len(self.fitted_vectors) if self.unseen == "outlier" else None

    @property
    def n_blocks(self) -> int:
        return len(self.fitted_vectors) + (1 if self.unseen == "outlier" else 0)

    @property
    def block_vectors(self) -> np.ndarray:
        """Stored OR-vector per block (the outlier block: all ones)."""
        if self.unseen != "outlier":
            return self.fitted_vectors.copy()
        return np.append(self.fitted_vectors, np.uint64(self.features.full_mask))

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        return self.assign_vectors(self.features.vectors(batch))

    def assign_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """Block id of each feature vector (seen: its group's block; unseen: see module doc)."""
        uniq, inverse = np.unique(np.asarray(vectors, np.uint64), return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int64)
        pos = np.searchsorted(self.seen_vectors, uniq)
        pos_c = np.minimum(pos, max(len(self.seen_vectors) - 1, 0))
        found = (pos < len(self.seen_vectors)) & (self.seen_vectors[pos_c] == uniq)
        out[found] = self.seen_blocks[pos_c[found]]
        for i in np.flatnonzero(~found):
            out[i] = self._place_unseen(uniq[i])
        return out[inverse.reshape(-1)]

    def _place_unseen(self, vector: np.uint64) -> int:
        """Block for a vector absent from the sample (deterministic, see module doc)."""
        blocks = self.fitted_vectors
        added = vector & ~blocks
        added_w = bit_matrix(added, len(self._weights)).astype(np.float64) @ self._weights
        if self.unseen == "outlier" and not (added == 0).any():
            return len(blocks)
        ids = np.arange(len(blocks))
        best = np.lexsort((ids, hamming(blocks, int(vector)), added_w))[0]
        return int(best)

    def blocks_for(self, predicate: WorkloadItem) -> np.ndarray | None:
        """Blocks whose stored vector has every implied feature bit (outlier mode only).

        Safe because assign puts a row only in a block whose stored vector
        covers the row's vector (the outlier block covers everything). In
        ``unseen="nearest"`` mode that does not hold, so this returns None.
        """
        if self.unseen != "outlier":
            return None
        keep = self.features.might_match(predicate, self.block_vectors)
        return np.flatnonzero(keep).astype(np.int64)

    def sample_block_vectors(self, sample: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(blocks of the sample rows, per-block OR of their vectors)."""
        vecs = self.features.vectors(sample)
        blocks = self.assign_vectors(vecs)
        ors = np.zeros(self.n_blocks, dtype=np.uint64)
        np.bitwise_or.at(ors, blocks, vecs)
        return blocks, ors

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        """Fraction of sample rows in blocks each query's features cannot rule out.

        Per-block vectors are the OR of the sample rows assigned there (virtual
        files, thesis §5.2); min/max metadata of the same blocks is combined
        (:func:`combine_with_minmax`).
        """
        if sample.num_rows == 0:
            raise LayoutError("cannot estimate on an empty sample")
        blocks, ors = self.sample_block_vectors(sample)
        bits = estimate_blocks(self.features, workload, blocks, ors, self.n_blocks)
        return combine_with_minmax(self, workload, sample, bits)

    # ------------------------------------------------------------ JSON / people

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "features": self.features.to_dict(),
            "block_vectors": [int(v) for v in self.fitted_vectors],
            "seen_vectors": [int(v) for v in self.seen_vectors],
            "seen_blocks": [int(b) for b in self.seen_blocks],
            "unseen": self.unseen,
            "min_rows": self.min_rows,
            "block_rows": [int(s) for s in self.block_rows],
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> SOPLayout:
        try:
            return cls(
                FeatureSet.from_dict(state["features"]),
                np.array(state["block_vectors"], dtype=np.uint64),
                np.array(state["seen_vectors"], dtype=np.uint64),
                np.array(state["seen_blocks"], dtype=np.int64),
                unseen=state["unseen"],
                min_rows=int(state["min_rows"]),
                block_rows=np.array(state["block_rows"], dtype=np.int64),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise LayoutError(f"not an SOP layout document: {exc!r}") from exc

    def describe(self) -> str:
        rows = self.block_rows
        sizes = (
            f"sample rows per block min {rows.min()} / median {int(np.median(rows))} / max {rows.max()}"
            if len(rows)
            else "no blocks"
        )
        outlier = " + 1 outlier block" if self.unseen == "outlier" else ""
        lines = [
            f"sop: {len(self.fitted_vectors)} blocks{outlier}, {len(self.features)} features, "
            f"min block {self.min_rows} sample rows",
            f"  {sizes}",
            *self.features.describe(),
        ]
        return "\n".join(lines)


# ---------------------------------------------------------------- estimation


def estimate_blocks(
    features: FeatureSet,
    workload: Sequence[WorkloadItem],
    blocks: np.ndarray,
    block_vectors: np.ndarray,
    n_blocks: int,
) -> np.ndarray:
    """Per query, the fraction of rows in blocks whose OR-vector cannot rule it out."""
    sizes = np.bincount(blocks, minlength=n_blocks).astype(np.float64)
    total = float(sizes.sum())
    out = np.empty(len(workload), dtype=np.float64)
    for i, item in enumerate(workload):
        keep = features.might_match(item, block_vectors)
        out[i] = sizes[keep].sum() / total if total else 0.0
    return out


def combine_with_minmax(
    layout: Layout, workload: Sequence[WorkloadItem], sample: pa.Table, bits: np.ndarray
) -> np.ndarray:
    """Elementwise min of the bit-vector fractions and the min/max virtual-file fractions.

    Both are valid ways to skip a block, so a query reads at most what the
    better one keeps for it.
    """
    from lakelayout.layouts.virtual import estimate_by_minmax

    return np.minimum(bits, np.asarray(estimate_by_minmax(layout, workload, sample), np.float64))
