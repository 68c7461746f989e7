"""The per-file statistics model: one snapshot's (or one layout's) files as columns.

:class:`FileStats` holds, for N files, their paths, sizes, row counts and,
per statistics leaf, typed ``min``/``max`` arrays and a ``null_count`` vector
(:class:`ColumnStats`), so that pruning evaluates one predicate over all files
at once. Every bound is a true bound (:mod:`lakelayout.stats.bounds`); unknown
is always representable: a null ``min``/``max`` entry, a null count of ``-1``,
a row count of ``-1``. Pruning keeps a file whenever what it needs is unknown.

Where the files come from is someone else's concern:
:func:`lakelayout.stats.delta_stats.from_add_actions` builds one from a Delta
snapshot, :func:`lakelayout.stats.blocks.block_stats` from a sample split into
the blocks of a layout ("virtual files"). Pure: pyarrow and numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lakelayout.errors import InvalidOption
from lakelayout.stats.bounds import leaf_fields, stats_type


@dataclass(frozen=True)
class ColumnStats:
    """Bounds of one column over all files: ``min[i] <= every value of file i <= max[i]``.

    A null ``min``/``max`` entry is an unknown bound; ``null_count`` is -1 when unknown.
    """

    min: pa.Array
    max: pa.Array
    null_count: np.ndarray

    def take(self, indices: pa.Array) -> ColumnStats:
        return ColumnStats(
            self.min.take(indices),
            self.max.take(indices),
            self.null_count[indices.to_numpy(zero_copy_only=False)],
        )


@dataclass(frozen=True)
class FileStats:
    """A snapshot's per-file metadata as columns, for vectorized pruning.

    ``num_records`` is -1 where unknown; ``columns`` maps each statistics leaf
    (top-level column name, or dotted path inside a struct) to its bounds.
    """

    paths: np.ndarray
    sizes: np.ndarray
    num_records: np.ndarray
    modification_times: np.ndarray
    columns: Mapping[str, ColumnStats]
    schema: pa.Schema = field(default_factory=lambda: pa.schema([]))

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def total_rows(self) -> int:
        """Rows over files whose count is known."""
        known = self.num_records[self.num_records >= 0]
        return int(known.sum())

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    def column(self, name: str) -> ColumnStats | None:
        """Bounds of a column, or ``None`` when the snapshot keeps none for it."""
        return self.columns.get(name)

    def take(self, mask_or_indices: np.ndarray | Sequence[int]) -> FileStats:
        """The files selected by a boolean mask or by integer positions, in that order."""
        selector = np.asarray(mask_or_indices)
        if selector.dtype == bool:
            if len(selector) != len(self):
                raise InvalidOption(f"mask has {len(selector)} entries for {len(self)} files")
            selector = np.flatnonzero(selector)
        indices = selector.astype(np.int64, copy=False)
        arrow_indices = pa.array(indices, type=pa.int64())
        return FileStats(
            paths=self.paths[indices],
            sizes=self.sizes[indices],
            num_records=self.num_records[indices],
            modification_times=self.modification_times[indices],
            columns={k: c.take(arrow_indices) for k, c in self.columns.items()},
            schema=self.schema,
        )

    @classmethod
    def concat(cls, parts: Sequence[FileStats]) -> FileStats:
        """``parts`` one after the other in one :class:`FileStats` (the first part's schema).

        Every part must keep statistics on the same leaves with the same types
        (virtual files of one sample always do).
        """
        if not parts:
            raise InvalidOption("concat needs at least one FileStats")
        first = parts[0]
        for part in parts[1:]:
            if set(part.columns) != set(first.columns):
                raise InvalidOption("concat needs statistics on the same columns in every part")
        columns = {}
        for name in first.columns:
            stats = [p.columns[name] for p in parts]
            columns[name] = ColumnStats(
                _concat([c.min for c in stats]),
                _concat([c.max for c in stats]),
                np.concatenate([np.asarray(c.null_count, dtype=np.int64) for c in stats]),
            )
        return cls(
            paths=np.concatenate([p.paths for p in parts]),
            sizes=np.concatenate([p.sizes for p in parts]),
            num_records=np.concatenate([p.num_records for p in parts]),
            modification_times=np.concatenate([p.modification_times for p in parts]),
            columns=columns,
            schema=first.schema,
        )

    @classmethod
    def empty(cls, schema: pa.Schema) -> FileStats:
        """No files at all."""
        columns = {}
        for name, dtype in leaf_fields(schema):
            target = stats_type(dtype)
            columns[name] = ColumnStats(
                pa.array([], target), pa.array([], target), np.zeros(0, dtype=np.int64)
            )
        return cls(
            paths=np.array([], dtype=object),
            sizes=np.zeros(0, dtype=np.int64),
            num_records=np.zeros(0, dtype=np.int64),
            modification_times=np.zeros(0, dtype=np.int64),
            columns=columns,
            schema=schema,
        )


def _concat(arrays: Sequence[pa.Array | pa.ChunkedArray]) -> pa.Array:
    plain = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    return pa.concat_arrays(plain)
