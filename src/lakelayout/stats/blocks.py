"""Virtual files: exact per-block bounds of a sample, before any file is written.

A layout assigns every sample row to a block; :func:`block_stats` turns the
sample and its block ids into a :class:`FileStats` with one "virtual file" per
block, so the same pruning that real scans use can estimate what a layout
would skip (layouts, the advisor, the online reorganizer). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption
from lakelayout.stats.bounds import (
    flatten_struct,
    has_bounds,
    nan_to_null,
    normalize_array,
    stats_type,
    timestamps_to_us,
)
from lakelayout.stats.model import ColumnStats, FileStats


def block_stats(data: pa.Table, block_ids: np.ndarray) -> FileStats:
    """One "virtual file" per distinct block id, with exact bounds of its rows.

    Used by layouts to estimate skipping before any file is written. Files
    come in ascending block id order, named ``block-<id>``; sizes are row
    count times the sample's average row size.
    """
    ids = np.asarray(block_ids)
    if len(ids) != data.num_rows:
        raise InvalidOption(f"block_ids has {len(ids)} entries for a table of {data.num_rows} rows")
    leaves = [
        (name, normalize_array(arr))
        for f in data.schema
        for name, arr in flatten_struct(f.name, data.column(f.name))
    ]
    grouped = _group_bounds(ids, leaves)
    keys = grouped.column("__block").to_numpy(zero_copy_only=False)
    counts = grouped.column("__block_count").to_numpy(zero_copy_only=False).astype(np.int64)
    row_bytes = data.nbytes / data.num_rows if data.num_rows else 0.0
    columns = {name: _column_from_groups(grouped, name, arr.type) for name, arr in leaves}
    return FileStats(
        paths=np.array([f"block-{k}" for k in keys], dtype=object),
        sizes=np.round(counts * row_bytes).astype(np.int64),
        num_records=counts,
        modification_times=np.zeros(len(keys), dtype=np.int64),
        columns=columns,
        schema=data.schema,
    )


def _group_bounds(ids: np.ndarray, leaves: Iterable[tuple[str, pa.Array]]) -> pa.Table:
    """Per block: row count, and per leaf min/max/null count/NaN presence."""
    data: dict[str, pa.Array] = {"__block": pa.array(ids)}
    aggregations: list[tuple[Any, ...]] = [("__block", "count", pc.CountOptions("all"))]
    for name, arr in leaves:
        data[f"{name}\x00v"] = arr
        aggregations.append((f"{name}\x00v", "count", pc.CountOptions("only_null")))
        if has_bounds(arr.type):
            aggregations.append((f"{name}\x00v", "min_max"))
        if pa.types.is_floating(arr.type):
            data[f"{name}\x00nan"] = pc.fill_null(pc.is_nan(arr), False)
            aggregations.append((f"{name}\x00nan", "any"))
    table = pa.table(data)
    grouped = table.group_by("__block", use_threads=False).aggregate(aggregations)
    return grouped.sort_by("__block")


def _column_from_groups(grouped: pa.Table, name: str, dtype: pa.DataType) -> ColumnStats:
    n = grouped.num_rows
    null_count = np.asarray(
        grouped.column(f"{name}\x00v_count").to_numpy(zero_copy_only=False), dtype=np.int64
    )
    if not has_bounds(dtype):
        target = stats_type(dtype)
        return ColumnStats(pa.nulls(n, target), pa.nulls(n, target), null_count)
    bounds = grouped.column(f"{name}\x00v_min_max").combine_chunks()
    low, high = bounds.field("min"), bounds.field("max")
    if pa.types.is_timestamp(dtype):
        low = timestamps_to_us(low, round_up=False)
        high = timestamps_to_us(high, round_up=True)
    if pa.types.is_floating(dtype):
        nan = grouped.column(f"{name}\x00nan_any").combine_chunks()
        high = pc.if_else(nan, pa.scalar(None, dtype), high)
    return ColumnStats(nan_to_null(low), nan_to_null(high), null_count)
