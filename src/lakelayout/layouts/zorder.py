"""Z-order: interleave the bits of per-dimension ranks, cut the key into ranges.

Every dimension is turned into a rank of ``b`` bits by :class:`RangeRanks`
(sample quantiles, NULL in its own top rank). The Z-order key of a row puts
bit ``j`` of dimension ``i`` (of ``d``) at position ``j*d + (d - 1 - i)``:
the most significant bits of all dimensions come first, dimension 0 leading
each group. ``d * b <= 63``, so keys fit a signed 64-bit integer.

Blocks are range partitions of the key: the sample's keys are sorted and cut
into equal-count ranges (:class:`CurveLayout`), the same recipe Delta's
``OPTIMIZE ZORDER BY`` uses. Inside a block, rows are ordered by the key.
:class:`CurveLayout` is shared with :mod:`lakelayout.layouts.hilbert`, which
only changes how ranks become a key.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.ranks import (
    MAX_RANK_BITS,
    Dimension,
    RangeRanks,
    cut_positions,
    domain_type,
    resolve_dimensions,
    target_block_count,
)

if TYPE_CHECKING:
    from lakelayout.stats.model import FileStats

MAX_KEY_BITS = 63
DEFAULT_MAX_DIMS = 8
DEFAULT_MAX_BITS_PER_DIM = 20


@functools.lru_cache(maxsize=64)
def _spread_table(stride: int) -> np.ndarray:
    """``table[v]`` = the 8 bits of ``v`` moved to positions ``0, stride, 2*stride, ...``."""
    values = np.arange(256, dtype=np.uint64)
    out = np.zeros(256, dtype=np.uint64)
    for k in range(8):
        out |= ((values >> np.uint64(k)) & np.uint64(1)) << np.uint64(k * stride)
    return out


def interleave_bits(ranks: np.ndarray, bits: int) -> np.ndarray:
    """Interleave ``d`` rank rows of ``bits`` bits into one uint64 key per column.

    ``ranks`` has shape ``(d, n)``; bit ``j`` of row ``i`` lands at
    ``j*d + (d - 1 - i)``. Done a byte at a time with a 256-entry spread
    table, so the cost is ``d * ceil(bits / 8)`` vectorized gathers.

    >>> interleave_bits(np.array([[1], [0]], dtype=np.uint64), 1).tolist()
    [2]
    >>> interleave_bits(np.array([[0b10], [0b11]], dtype=np.uint64), 2).tolist()  # 0b1101
    [13]
    """
    d, n = ranks.shape
    if d * bits > MAX_KEY_BITS + 1:
        raise LayoutError(f"{d} dimensions x {bits} bits do not fit a 64-bit key")
    table = _spread_table(d)
    key = np.zeros(n, dtype=np.uint64)
    for i in range(d):
        row = ranks[i].astype(np.uint64, copy=False)
        for byte in range(-(-bits // 8)):
            chunk = (row >> np.uint64(8 * byte)) & np.uint64(0xFF)
            shift = 8 * byte * d + (d - 1 - i)
            key |= table[chunk] << np.uint64(shift)
    return key


def default_bits(n_dims: int) -> int:
    """Bits per dimension: as many as fit 63 bits, capped at 20.

    >>> default_bits(1), default_bits(3), default_bits(8)
    (20, 20, 7)
    """
    return max(1, min(MAX_KEY_BITS // n_dims, DEFAULT_MAX_BITS_PER_DIM, MAX_RANK_BITS))


def key_cut_bounds(keys: np.ndarray, n_blocks: int) -> np.ndarray:
    """Sorted distinct first keys of blocks ``1 .. n_blocks-1`` (equal-count ranges).

    A block is ``[bounds[b-1], bounds[b])``; a run of equal keys never splits,
    so heavy duplicates make fewer, larger blocks rather than ragged ones.

    >>> key_cut_bounds(np.array([5, 1, 1, 1, 9, 7], dtype=np.uint64), 3).tolist()
    [7]
    """
    ordered = np.sort(keys)
    if len(ordered) == 0:
        return np.zeros(0, dtype=np.uint64)
    bounds = np.unique(ordered[cut_positions(len(ordered), n_blocks)])
    return bounds[bounds > ordered[0]].astype(np.uint64)


def _pop_int(opts: dict[str, Any], name: str, default: int | None) -> int | None:
    value = opts.pop(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise LayoutError(f"{name} must be an integer, got {value!r}")
    return int(value)


class CurveLayout(Layout):
    """Rows ranked per dimension, mapped to a space-filling-curve key, cut into ranges."""

    family: ClassVar[str]
    key_orders_blocks: ClassVar[bool] = True

    def __init__(
        self,
        dimensions: Sequence[Dimension],
        ranks: Sequence[RangeRanks],
        bits: int,
        key_bounds: np.ndarray,
        *,
        sample_rows: int = 0,
    ) -> None:
        if len(dimensions) != len(ranks):
            raise LayoutError("one RangeRanks per dimension is required")
        self.dimensions = list(dimensions)
        self.ranks = list(ranks)
        self.bits = int(bits)
        self.key_bounds = np.asarray(key_bounds, dtype=np.uint64)
        self.sample_rows = int(sample_rows)

    # -- the curve ---------------------------------------------------------

    @staticmethod
    def curve(ranks: np.ndarray, bits: int) -> np.ndarray:
        """Key (uint64) of every column of the ``(d, n)`` rank matrix."""
        return interleave_bits(ranks, bits)

    def rank_matrix(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """The ``(d, n)`` uint64 ranks of ``batch``'s rows."""
        rows = [
            r.transform(dim.values(batch))
            for dim, r in zip(self.dimensions, self.ranks, strict=True)
        ]
        return np.vstack(rows) if rows else np.zeros((0, batch.num_rows), np.uint64)

    def curve_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        return self.curve(self.rank_matrix(batch), self.bits)

    # -- Layout -----------------------------------------------------------

    @property
    def n_blocks(self) -> int:
        return len(self.key_bounds) + 1

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Block of each row: the number of block start keys ``<=`` its key."""
        key = self.curve_key(batch)
        return np.searchsorted(self.key_bounds, key, side="right").astype(np.int64)

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        """The curve key itself (int64; keys use at most 63 bits)."""
        return self.curve_key(batch).astype(np.int64)

    def route(self, batch: pa.Table | pa.RecordBatch) -> tuple[np.ndarray, np.ndarray | None]:
        """Block and curve key from one key computation (ranks dominate the cost)."""
        key = self.curve_key(batch)
        block = np.searchsorted(self.key_bounds, key, side="right").astype(np.int64)
        return block, key.astype(np.int64)

    def blocks_of_files(self, files: FileStats) -> np.ndarray:
        """The block every row of a file is in, from its statistics (-1: may span several).

        Each dimension that is a plain column with statistics gives a file's
        ranks an interval: the ranks of its min and max (ranks are monotone in
        Spark's order), up to the NULL rank (the top one) when the file may
        hold NULLs; a file of NULLs only has the NULL rank. Unknown bounds, a
        dimension that is an expression, or statistics of another type than
        the layout ranks leave the file unplaced. The curve maps the box of
        rank intervals into a range of keys (:meth:`key_range`); when both
        ends fall in one block, so does every row.
        """
        n = len(files)
        out = np.full(n, -1, dtype=np.int64)
        d = len(self.dimensions)
        rows = np.asarray(files.num_records, dtype=np.int64)
        placeable = rows > 0
        lo = np.zeros((d, n), dtype=np.uint64)
        hi = np.zeros((d, n), dtype=np.uint64)
        for i, (dim, ranks) in enumerate(zip(self.dimensions, self.ranks, strict=True)):
            interval = _rank_interval(dim, ranks, files)
            if interval is None:
                return out
            lo[i], hi[i], known = interval
            placeable &= known
        idx = np.flatnonzero(placeable)
        if not idx.size or not d:
            return out
        key_lo, key_hi = self.key_range(lo[:, idx], hi[:, idx])
        first = np.searchsorted(self.key_bounds, key_lo, side="right")
        last = np.searchsorted(self.key_bounds, key_hi, side="right")
        one = first == last
        out[idx[one]] = first[one]
        return out

    def key_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest key (uint64) of every box of ranks ``[lo, hi]`` (``(d, n)``).

        Valid for any curve that visits each aligned sub-cube of the rank
        space in one run of keys (Hilbert does): the smallest sub-cube holding
        the box is the one of the ranks' common leading bits in every
        dimension, and its keys share the curve key's leading ``d × common``
        bits.
        """
        d, n = lo.shape
        bits = self.bits
        differ = lo ^ hi
        length = np.zeros((d, n), dtype=np.int64)  # bit length of each difference
        for j in range(bits):
            length = np.where((differ >> np.uint64(j)) != 0, j + 1, length)
        common = bits - length.max(axis=0)
        free = (d * (bits - common)).astype(np.int64)  # low key bits that vary in the sub-cube
        key = self.curve(lo, bits)
        wide = free >= 64
        shift = np.where(wide, 0, free).astype(np.uint64)
        mask = np.where(wide, ~np.uint64(0), (np.uint64(1) << shift) - np.uint64(1))
        start = key & ~mask
        return start, start | mask

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        from lakelayout.layouts.virtual import estimate_by_minmax

        return estimate_by_minmax(self, workload, sample)

    @classmethod
    def fit(
        cls,
        sample: pa.Table,
        workload: Sequence[WorkloadItem] = (),
        *,
        columns: Sequence[str],
        target_blocks: int | None = None,
        rows_per_block: int | None = None,
        **opts: Any,
    ) -> CurveLayout:
        """Fit ranks and block ranges on ``sample``.

        Options: ``max_dims`` (default 8), ``bits_per_dim`` (default: as many
        as fit 63 bits, at most 20). The workload is not used by curve
        layouts (they cluster on ``columns`` only); it is accepted so every
        family fits the same way.
        """
        options = dict(opts)
        max_dims = _pop_int(options, "max_dims", DEFAULT_MAX_DIMS)
        bits_opt = _pop_int(options, "bits_per_dim", None)
        if options:
            raise LayoutError(
                f"unknown option(s) for {cls.family}: {', '.join(sorted(options))}; "
                "supported: max_dims, bits_per_dim"
            )
        assert max_dims is not None
        if sample.num_rows == 0:
            raise LayoutError(f"cannot fit a {cls.family} layout on an empty sample")
        n_blocks = target_block_count(sample.num_rows, target_blocks, rows_per_block)
        dims = resolve_dimensions(columns, sample.schema, max_dims=min(max_dims, MAX_KEY_BITS))
        bits = default_bits(len(dims)) if bits_opt is None else bits_opt
        if not 1 <= bits <= MAX_RANK_BITS or bits * len(dims) > MAX_KEY_BITS:
            raise LayoutError(
                f"bits_per_dim={bits} with {len(dims)} dimensions does not fit: need "
                f"1 <= bits <= {MAX_RANK_BITS} and dims x bits <= {MAX_KEY_BITS}"
            )
        ranks = [RangeRanks.fit(dim.values(sample), bits) for dim in dims]
        layout = cls(dims, ranks, bits, np.zeros(0, np.uint64), sample_rows=sample.num_rows)
        layout.key_bounds = key_cut_bounds(layout.curve_key(sample), n_blocks)
        return layout

    # -- persistence --------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "dimensions": [d.sql for d in self.dimensions],
            "bits": self.bits,
            "ranks": [r.to_dict() for r in self.ranks],
            "key_bounds": [int(k) for k in self.key_bounds],
            "sample_rows": self.sample_rows,
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> CurveLayout:
        if state.get("family") != cls.family:
            raise LayoutError(f"expected a {cls.family} layout, got family {state.get('family')!r}")
        try:
            return cls(
                [Dimension(str(s)) for s in state["dimensions"]],
                [RangeRanks.from_dict(r) for r in state["ranks"]],
                int(state["bits"]),
                np.array([int(k) for k in state["key_bounds"]], dtype=np.uint64),
                sample_rows=int(state.get("sample_rows", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad {cls.family} layout JSON: {exc}") from exc

    def describe(self) -> str:
        dims = ", ".join(d.sql for d in self.dimensions)
        lines = [
            f"{self.family} layout on ({dims}): {self.n_blocks} blocks",
            f"  {len(self.dimensions)} dimension(s) x {self.bits} bits per dimension",
        ]
        if self.sample_rows:
            per_block = self.sample_rows / self.n_blocks
            lines.append(f"  fitted on {self.sample_rows} sample rows (~{per_block:.0f} per block)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        dims = ", ".join(d.sql for d in self.dimensions)
        return (
            f"{type(self).__name__}(columns=[{dims}], bits={self.bits}, n_blocks={self.n_blocks})"
        )


class ZOrderLayout(CurveLayout):
    """Z-order (Morton) curve over range ranks; see the module docstring."""

    family: ClassVar[str] = "zorder"

    def key_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The keys of the box's corners: a Z-order key never decreases when one
        dimension's rank grows (its bits only move up), so every key of the box
        lies between them."""
        return self.curve(lo, self.bits), self.curve(hi, self.bits)


def _rank_interval(
    dim: Dimension, ranks: RangeRanks, files: FileStats
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(lowest rank, highest rank, known) per file for one dimension, or None when its
    statistics cannot tell for any file (an expression, no statistics, another type)."""
    name = dim.column_name(files.schema) if len(files.schema) else None
    name = name or dim.sql
    if "." in name:  # a statistics leaf named so may be a struct's field: do not guess
        return None
    stats = files.column(name)
    if stats is None:
        return None
    try:
        if (
            domain_type(stats.min.type) != ranks.domain
            or domain_type(stats.max.type) != ranks.domain
        ):
            return None
    except LayoutError:
        return None
    rows = np.asarray(files.num_records, dtype=np.int64)
    nulls = np.asarray(stats.null_count, dtype=np.int64)
    bounded = np.asarray(stats.min.is_valid().to_numpy(zero_copy_only=False), dtype=bool) & (
        np.asarray(stats.max.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    )
    only_nulls = (rows > 0) & (nulls == rows)
    top = np.uint64(ranks.null_rank)
    lo = np.where(only_nulls, top, ranks.transform(stats.min))
    hi = np.where(nulls != 0, top, ranks.transform(stats.max))  # -1: NULLs unknown, may be some
    return lo.astype(np.uint64), hi.astype(np.uint64), bounded | only_nulls
