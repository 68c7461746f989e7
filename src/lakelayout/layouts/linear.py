"""Linear layout: sort lexicographically by the dimensions, cut into equal ranges.

The classic "sort by (a, b, c)" clustering. Rows compare as tuples of the
dimensions' values in Spark's ascending order (numbers < NaN < NULL in every
position). Fitting sorts the sample the same way and keeps the tuples at the
equal-count cut points as *block start rows*; a row belongs to block ``b`` =
the number of start rows ``<=`` it (range partitioning over tuples).
Assignment merges the start rows with the batch in one Arrow sort
(:func:`~lakelayout.layouts.ranks.count_preceding`), so it is exact for every
supported type and vectorized. Only the leading dimension gets tight min/max
ranges; later ones help within runs of equal leading values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.ranks import (
    Dimension,
    count_preceding,
    cut_positions,
    domain_type,
    null_mask,
    resolve_dimensions,
    target_block_count,
    to_domain,
    type_from_json,
    type_to_json,
    values_from_json,
    values_to_json,
)

DEFAULT_MAX_DIMS = 8


def _same_as_previous(column: pa.Array) -> np.ndarray:
    """``out[i]`` is True when row ``i + 1`` equals row ``i`` (NULL = NULL, NaN = NaN)."""
    if len(column) < 2:
        return np.zeros(0, dtype=bool)
    head, tail = column.slice(0, len(column) - 1), column.slice(1)
    equal = np.asarray(pc.equal(head, tail).fill_null(False).to_numpy(zero_copy_only=False))
    both_null = null_mask(head) & null_mask(tail)
    out = equal.astype(bool) | both_null
    if pa.types.is_floating(column.type):
        nan_h = np.asarray(pc.is_nan(head).fill_null(False).to_numpy(zero_copy_only=False))
        nan_t = np.asarray(pc.is_nan(tail).fill_null(False).to_numpy(zero_copy_only=False))
        out |= nan_h & nan_t
    return out


def _lexsort_indices(columns: Sequence[pa.Array]) -> pa.Array:
    """Indices sorting the rows of ``columns`` lexicographically (Spark order, NULL last)."""
    table = pa.table({f"k{i}": c for i, c in enumerate(columns)})
    return pc.sort_indices(table, sort_keys=[(n, "ascending") for n in table.column_names])


class LinearLayout(Layout):
    """Range partitions of the lexicographic order of ``dimensions``."""

    family: ClassVar[str] = "linear"
    key_is_batch_rank: ClassVar[bool] = True

    def __init__(
        self,
        dimensions: Sequence[Dimension],
        domains: Sequence[pa.DataType],
        bounds: Sequence[pa.Array],
        *,
        sample_rows: int = 0,
    ) -> None:
        if not len(dimensions) == len(domains) == len(bounds):
            raise LayoutError("linear layout needs one domain and one bound column per dimension")
        self.dimensions = list(dimensions)
        self.domains = list(domains)
        self.bounds = [b.cast(t) for b, t in zip(bounds, domains, strict=True)]
        self.sample_rows = int(sample_rows)

    def _columns(self, batch: pa.Table | pa.RecordBatch) -> list[pa.Array]:
        return [
            to_domain(dim.values(batch), dom)
            for dim, dom in zip(self.dimensions, self.domains, strict=True)
        ]

    @property
    def n_blocks(self) -> int:
        return len(self.bounds[0]) + 1

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Block of each row: how many block start rows are ``<=`` it."""
        return count_preceding(self.bounds, self._columns(batch), inclusive=True)

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        """Position of each row in the batch's lexicographic order (int64)."""
        order = _lexsort_indices(self._columns(batch)).to_numpy()
        key = np.empty(len(order), dtype=np.int64)
        key[order] = np.arange(len(order), dtype=np.int64)
        return key

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
    ) -> LinearLayout:
        """Start rows of ``n_blocks`` equal-count ranges of the sorted sample.

        Option: ``max_dims`` (default 8). The workload is not used.
        """
        options = dict(opts)
        max_dims = options.pop("max_dims", DEFAULT_MAX_DIMS)
        if options:
            raise LayoutError(
                f"unknown option(s) for linear: {', '.join(sorted(options))}; supported: max_dims"
            )
        if sample.num_rows == 0:
            raise LayoutError("cannot fit a linear layout on an empty sample")
        n_blocks = target_block_count(sample.num_rows, target_blocks, rows_per_block)
        dims = resolve_dimensions(columns, sample.schema, max_dims=int(max_dims))
        values = [dim.values(sample) for dim in dims]
        domains = [domain_type(v.type) for v in values]
        data = [to_domain(v, t) for v, t in zip(values, domains, strict=True)]
        ordered = _lexsort_indices(data).to_numpy()
        picks = ordered[cut_positions(len(ordered), n_blocks)]
        starts = [c.take(pa.array(picks, type=pa.int64())) for c in data]
        first = [c.take(pa.array(ordered[:1], type=pa.int64())) for c in data]
        starts = cls._distinct_starts(first, starts)
        return cls(dims, domains, starts, sample_rows=sample.num_rows)

    @staticmethod
    def _distinct_starts(first: list[pa.Array], starts: list[pa.Array]) -> list[pa.Array]:
        """Drop start rows equal to their predecessor (or to the sample's first row)."""
        with_first = [pa.concat_arrays([f, s]) for f, s in zip(first, starts, strict=True)]
        duplicate = np.ones(len(starts[0]), dtype=bool)
        for column in with_first:
            duplicate &= _same_as_previous(column)
        keep = pa.array(np.flatnonzero(~duplicate), type=pa.int64())
        return [s.take(keep) for s in starts]

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "dimensions": [d.sql for d in self.dimensions],
            "types": [type_to_json(t) for t in self.domains],
            "bounds": [values_to_json(b) for b in self.bounds],
            "sample_rows": self.sample_rows,
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> LinearLayout:
        if state.get("family") != cls.family:
            raise LayoutError(f"expected a linear layout, got family {state.get('family')!r}")
        try:
            domains = [type_from_json(t) for t in state["types"]]
            bounds = [values_from_json(b, t) for b, t in zip(state["bounds"], domains, strict=True)]
            dims = [Dimension(str(s)) for s in state["dimensions"]]
            return cls(dims, domains, bounds, sample_rows=int(state.get("sample_rows", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad linear layout JSON: {exc}") from exc

    def describe(self) -> str:
        dims = ", ".join(d.sql for d in self.dimensions)
        lines = [f"linear layout sorted by ({dims}): {self.n_blocks} blocks"]
        if self.sample_rows:
            per_block = self.sample_rows / self.n_blocks
            lines.append(f"  fitted on {self.sample_rows} sample rows (~{per_block:.0f} per block)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        dims = ", ".join(d.sql for d in self.dimensions)
        return f"LinearLayout(columns=[{dims}], n_blocks={self.n_blocks})"
