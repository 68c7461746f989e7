"""Virtual files: estimate a layout's skipping on a sample before writing anything.

The thesis's benefit estimation (Tufă 2019, §5.2): lay the *sample* out as the
layout would lay out the table, treat every block as a file with min/max and
null-count statistics (a "virtual file"), and replay the workload's filters
against those statistics. A query reads the virtual files it cannot rule out;
its cost is the fraction of sample rows in them:

    scanned(q) = sum(rows(V) for V kept by q) / rows(sample)

Rows stand in for the thesis's per-column sizes: inside one sample every
block holds rows of the same schema, so the two ratios agree up to column
width variation. Pruning is the scan planner's (:func:`lakelayout.skipping.planner.plan`
on the virtual files), so the estimate keeps the no-false-negative guarantee
of the real scan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout, WorkloadItem


def bind_workload(workload: Sequence[WorkloadItem], schema: pa.Schema) -> list[Predicate]:
    """Workload items as bound predicates: SQL text is parsed against ``schema``."""
    bound: list[Predicate] = []
    for item in workload:
        if isinstance(item, Predicate):
            bound.append(item)
        elif isinstance(item, str):
            from lakelayout.expr.parse import parse_predicate

            bound.append(parse_predicate(item, schema))
        else:
            raise LayoutError(
                f"workload items must be SQL strings or Predicate trees, got {type(item).__name__}"
            )
    return bound


def block_metadata(layout: Layout, sample: pa.Table) -> Any:
    """Per-block :class:`~lakelayout.stats.model.FileStats` of ``sample`` laid out by ``layout``."""
    from lakelayout.stats.blocks import block_stats

    block_ids = np.asarray(layout.assign(sample), dtype=np.int64)
    return block_stats(sample, block_ids)


def estimate_by_minmax(
    layout: Layout, workload: Sequence[WorkloadItem], sample: pa.Table
) -> np.ndarray:
    """Fraction of sample rows each query would scan if the sample were laid out so.

    Returns a float64 array with one entry per workload item, each in
    ``[0, 1]``. Raises :class:`LayoutError` on an empty sample (there is
    nothing to estimate from) and re-raises parse errors for bad SQL.
    """
    predicates = bind_workload(workload, sample.schema)
    if sample.num_rows == 0:
        raise LayoutError("cannot estimate a layout on an empty sample")
    if not predicates:
        return np.zeros(0, dtype=np.float64)
    from lakelayout.skipping.planner import plan

    stats = block_metadata(layout, sample)
    rows = np.asarray(stats.num_records, dtype=np.float64)
    total = float(rows.sum())
    out = np.empty(len(predicates), dtype=np.float64)
    for i, predicate in enumerate(predicates):
        keep = plan(predicate, stats).keep
        out[i] = float(rows[keep].sum()) / total if total else 0.0
    return out
