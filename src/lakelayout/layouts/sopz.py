"""SOP+Z: the SOP partition index as one more space-filling-curve dimension.

Thesis §4.1.2, steps C1-C3:

* C1 — fit skipping-oriented partitioning (:class:`~lakelayout.layouts.sop.SOPLayout`)
  on the workload's predicate features; its blocks, numbered in MST-preorder
  of their bit vectors, are the *SOP partitions*;
* C2 — every row gets its SOP partition index (``SOPLayout.assign``);
* C3 — Z-order (or Hilbert, ``curve="hilbert"``) over the range ranks of the
  given columns *and* of the SOP index; blocks are equal-count ranges of the
  combined key (the same recipe as :class:`~lakelayout.layouts.zorder.CurveLayout`).

A block may mix rows of several SOP partitions; its bit vector is the OR of
theirs. Because SOP indexes are ordered so that neighbours have similar
vectors (few bits change between consecutive indexes), a key range that
spans neighbouring partitions keeps most of their zero bits.

``blocks_for`` returns None: a key range does not bound which SOP partitions
(or column values) it holds tightly enough to answer from the layout alone,
so skipping relies on the per-file bit vectors and min/max the writer records
from the rows it actually wrote. :meth:`SOPZLayout.estimate` uses the sample's
per-block vectors combined with min/max virtual files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.hilbert import hilbert_index
from lakelayout.layouts.ranks import (
    MAX_RANK_BITS,
    Dimension,
    RangeRanks,
    resolve_dimensions,
    target_block_count,
)
from lakelayout.layouts.sop import SOPLayout, combine_with_minmax, estimate_blocks
from lakelayout.layouts.zorder import (
    DEFAULT_MAX_DIMS,
    MAX_KEY_BITS,
    default_bits,
    interleave_bits,
    key_cut_bounds,
)

CURVES = ("z", "hilbert")


def curve_key(ranks: np.ndarray, bits: int, curve: str) -> np.ndarray:
    """Z-order or Hilbert key of each column of the ``(d, n)`` rank matrix."""
    if curve == "hilbert":
        return hilbert_index(ranks, bits)
    return interleave_bits(ranks, bits)


class SOPZLayout(Layout):
    """Range partitions of a curve key over columns plus the SOP partition index."""

    family = "sop-z"

    def __init__(
        self,
        sop: SOPLayout,
        dimensions: Sequence[Dimension],
        ranks: Sequence[RangeRanks],
        sop_ranks: RangeRanks,
        bits: int,
        key_bounds: np.ndarray,
        *,
        curve: str = "z",
        sample_rows: int = 0,
    ) -> None:
        if curve not in CURVES:
            raise LayoutError(f"curve={curve!r} is not one of {', '.join(CURVES)}")
        if len(dimensions) != len(ranks):
            raise LayoutError("one RangeRanks per dimension is required")
        self.sop = sop
        self.dimensions = list(dimensions)
        self.ranks = list(ranks)
        self.sop_ranks = sop_ranks
        self.bits = int(bits)
        self.key_bounds = np.asarray(key_bounds, dtype=np.uint64)
        self.curve = curve
        self.sample_rows = int(sample_rows)

    # ------------------------------------------------------------ fitting

    @classmethod
    def fit(
        cls,
        sample: pa.Table,
        workload: Sequence[WorkloadItem],
        *,
        columns: Sequence[str],
        rows_per_block: int | None = None,
        target_blocks: int | None = None,
        curve: str = "z",
        sop_rows_per_block: int | None = None,
        bits_per_dim: int | None = None,
        max_dims: int = DEFAULT_MAX_DIMS,
        **sop_opts: Any,
    ) -> SOPZLayout:
        """C1-C3 on a sample.

        ``rows_per_block`` / ``target_blocks`` size the final blocks (sample
        rows). ``sop_rows_per_block`` is the SOP partitions' minimum size
        (default: the final block size, so partitions are about a file each).
        Other keyword options go to :meth:`SOPLayout.fit` (``max_features``,
        ``min_frequency``, ``conjunctions``, ``unseen``, ``functions``).
        """
        if curve not in CURVES:
            raise LayoutError(f"curve={curve!r} is not one of {', '.join(CURVES)}")
        if sample.num_rows == 0:
            raise LayoutError("cannot fit an sop-z layout on an empty sample")
        n_blocks = target_block_count(sample.num_rows, target_blocks, rows_per_block)
        dims = resolve_dimensions(columns, sample.schema, max_dims=max(1, max_dims - 1))
        bits = default_bits(len(dims) + 1) if bits_per_dim is None else int(bits_per_dim)
        if not 1 <= bits <= MAX_RANK_BITS or bits * (len(dims) + 1) > MAX_KEY_BITS:
            raise LayoutError(
                f"bits_per_dim={bits} with {len(dims)} columns + the SOP index does not fit: "
                f"need 1 <= bits <= {MAX_RANK_BITS} and dims x bits <= {MAX_KEY_BITS}"
            )
        sop_min = sop_rows_per_block or -(-sample.num_rows // n_blocks)
        sop = SOPLayout.fit(sample, workload, rows_per_block=sop_min, **sop_opts)
        sop_ids = sop.assign(sample)
        sop_ranks = RangeRanks.fit(pa.array(sop_ids), bits)
        ranks = [RangeRanks.fit(dim.values(sample), bits) for dim in dims]
        layout = cls(
            sop,
            dims,
            ranks,
            sop_ranks,
            bits,
            np.zeros(0, np.uint64),
            curve=curve,
            sample_rows=sample.num_rows,
        )
        layout.key_bounds = key_cut_bounds(layout._key(sample, sop_ids), n_blocks)
        return layout

    # ------------------------------------------------------------ keys

    def _key(self, batch: pa.Table | pa.RecordBatch, sop_ids: np.ndarray) -> np.ndarray:
        """C2 + C3: ranks of the columns and of the SOP index, then the curve key."""
        rows = [
            r.transform(d.values(batch)) for d, r in zip(self.dimensions, self.ranks, strict=True)
        ]
        rows.append(self.sop_ranks.transform(pa.array(sop_ids, type=pa.int64())))
        return curve_key(np.vstack(rows), self.bits, self.curve)

    def curve_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """The combined key (uint64) of every row."""
        return self._key(batch, self.sop.assign(batch))

    # ------------------------------------------------------------ Layout

    @property
    def n_blocks(self) -> int:
        return len(self.key_bounds) + 1

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        key = self.curve_key(batch)
        return np.searchsorted(self.key_bounds, key, side="right").astype(np.int64)

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        return self.curve_key(batch).astype(np.int64)

    def block_vectors(self, sample: pa.Table) -> np.ndarray:
        """Per block, the OR of the feature vectors of the sample rows in it."""
        vecs = self.sop.features.vectors(sample)
        ors = np.zeros(self.n_blocks, dtype=np.uint64)
        np.bitwise_or.at(ors, self.assign(sample), vecs)
        return ors

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        """Per query: min of the bit-vector and min/max fractions of sample rows kept."""
        if sample.num_rows == 0:
            raise LayoutError("cannot estimate on an empty sample")
        vecs = self.sop.features.vectors(sample)
        blocks = self._assign_with(sample, vecs)
        ors = np.zeros(self.n_blocks, dtype=np.uint64)
        np.bitwise_or.at(ors, blocks, vecs)
        bits = estimate_blocks(self.sop.features, workload, blocks, ors, self.n_blocks)
        return combine_with_minmax(self, workload, sample, bits)

    def _assign_with(self, batch: pa.Table, vecs: np.ndarray) -> np.ndarray:
        key = self._key(batch, self.sop.assign_vectors(vecs))
        return np.searchsorted(self.key_bounds, key, side="right").astype(np.int64)

    # ------------------------------------------------------------ JSON / people

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "sop": self.sop.to_dict(),
            "dimensions": [d.sql for d in self.dimensions],
            "ranks": [r.to_dict() for r in self.ranks],
            "sop_ranks": self.sop_ranks.to_dict(),
            "bits": self.bits,
            "key_bounds": [int(k) for k in self.key_bounds],
            "curve": self.curve,
            "sample_rows": self.sample_rows,
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> SOPZLayout:
        try:
            return cls(
                SOPLayout.from_dict(state["sop"]),
                [Dimension(str(s)) for s in state["dimensions"]],
                [RangeRanks.from_dict(r) for r in state["ranks"]],
                RangeRanks.from_dict(state["sop_ranks"]),
                int(state["bits"]),
                np.array([int(k) for k in state["key_bounds"]], dtype=np.uint64),
                curve=str(state["curve"]),
                sample_rows=int(state.get("sample_rows", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"not an sop-z layout document: {exc!r}") from exc

    def describe(self) -> str:
        dims = ", ".join(d.sql for d in self.dimensions)
        curve = "Hilbert" if self.curve == "hilbert" else "Z-order"
        lines = [
            f"sop-z layout: {curve} on ({dims}, <SOP index>): {self.n_blocks} blocks",
            f"  {len(self.dimensions) + 1} dimensions x {self.bits} bits; "
            f"SOP index has {self.sop.n_blocks} partitions",
        ]
        if self.sample_rows:
            lines.append(
                f"  fitted on {self.sample_rows} sample rows (~{self.sample_rows / self.n_blocks:.0f} per block)"
            )
        lines.extend(self.sop.describe().splitlines()[2:])
        return "\n".join(lines)
