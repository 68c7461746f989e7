"""Shared helpers for the index tests: build per-file stats and metadata, prune, check."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes import WITHIN_BOX_FUNCTIONS, Index, expand_within_box
from lakelayout.skipping.planner import ScanPlan, plan
from lakelayout.stats.delta_stats import from_delta_stats
from lakelayout.stats.model import FileStats
from lakelayout.table.collect import StatsCollector

FUNCTIONS = {**WITHIN_BOX_FUNCTIONS}


def file_stats(files: Sequence[pa.Table], schema: pa.Schema) -> FileStats:
    """Delta stats of each table through the real collector -> JSON -> FileStats path."""
    stats = []
    for table in files:
        collector = StatsCollector(schema)
        collector.add(table)
        stats.append(collector.result())
    return from_delta_stats(
        stats,
        schema,
        paths=[f"part-{i}.parquet" for i in range(len(files))],
        sizes=[1000 + i for i in range(len(files))],
        modification_times=[7] * len(files),
    )


def metadata(indexes: Sequence[Index], files: Sequence[pa.Table]) -> dict[str, pa.Array]:
    """Each index's metadata column, one entry per file, collected batch by batch."""
    out = {}
    for index in indexes:
        values = [index.collect(t.to_batches(max_chunksize=2) or [t]) for t in files]
        out[index.name] = pa.array(values, type=index.arrow_type)
    return out


def truth(pred_sql: str, files: Sequence[pa.Table], schema: pa.Schema) -> np.ndarray:
    """Per file: does some row satisfy the predicate (Spark semantics)?"""
    pred = expand_within_box(parse_predicate(pred_sql, schema, functions=FUNCTIONS))
    return np.array([bool(evaluate(pred, t).any()) for t in files])


def run(
    pred_sql: str,
    files: Sequence[pa.Table],
    schema: pa.Schema,
    indexes: Sequence[Index],
    *,
    functions: dict[str, pa.DataType] | None = None,
) -> ScanPlan:
    """Prune, and assert no file holding a matching row was skipped."""
    bound = [i.bind(schema) for i in indexes]
    pred = parse_predicate(pred_sql, schema, functions={**FUNCTIONS, **(functions or {})})
    result = plan(pred, file_stats(files, schema), metadata=metadata(bound, files), indexes=bound)
    if functions is None:
        holds = truth(pred_sql, files, schema)
        assert not (holds & ~result.keep).any(), (pred_sql, result.keep, holds)
    return result
