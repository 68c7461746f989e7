"""MinMax over any deterministic expression (thesis §4.1.2: expression min/max).

Delta statistics already give min/max of plain columns; this index is for
``month(ts)``, ``lower(url)``, ``a + b``, ``m['k']`` and UDF calls. Per file it
stores ``{min, max, nulls, rows}`` of the term's values, following the same
*true bound* contract as :mod:`lakelayout.stats.bounds` (NaN excluded from the
min and voiding the max, long strings cut to a prefix and an incremented
prefix), so the clauses are exactly :func:`lakelayout.skipping.stats_rules.might_match`
evaluated on a one-column :class:`~lakelayout.stats.model.FileStats` view of the
metadata. Negation w.r.t. a node is the same test on ``node.negate()``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import EndsWith, Predicate
from lakelayout.skipping.indexes.base import (
    VALUE_COLUMN,
    Batch,
    Clause,
    TermIndex,
    register,
)
from lakelayout.skipping.stats_rules import might_match
from lakelayout.stats.bounds import has_bounds, string_lower_bound, string_upper_bound
from lakelayout.stats.model import ColumnStats, FileStats

STRING_PREFIX = 64
"""Code points kept of string bounds."""


@register
class MinMax(TermIndex):
    """Per-file min and max of a column or deterministic expression.

    >>> schema = pa.schema([("ts", pa.date32())])
    >>> idx = MinMax("MONTH(ts)").bind(schema)
    >>> idx.name, idx.collect(pa.table({"ts": pa.array([0, 40], pa.date32())}))
    ('minmax(month(ts))', {'min': 1, 'max': 2, 'nulls': 0, 'rows': 2})
    """

    kind = "minmax"

    def supports(self, dtype: pa.DataType) -> bool:
        return has_bounds(dtype)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct(
            [("min", self.dtype), ("max", self.dtype), ("nulls", pa.int64()), ("rows", pa.int64())]
        )

    def collector(self) -> _MinMaxCollector:
        return _MinMaxCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        if not self.matches(node) or isinstance(node, EndsWith):
            return None
        return MinMaxClause(self.on_values(node))


class _MinMaxCollector:
    def __init__(self, index: MinMax) -> None:
        self.index = index
        self.low: Any = None
        self.high: Any = None
        self.nan = False
        self.nulls = 0
        self.rows = 0
        self.failed = False

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        self.rows += len(values)
        self.nulls += values.null_count
        if values.null_count == len(values):
            return
        if pa.types.is_floating(values.type):
            self.nan = self.nan or bool(pc.any(pc.is_nan(values)).as_py())
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if isinstance(low, float) and math.isnan(low):
            return
        if low is not None and (self.low is None or low < self.low):
            self.low = low
        if high is not None and (self.high is None or high > self.high):
            self.high = high

    def result(self) -> dict[str, Any] | None:
        if self.failed:
            return None
        low, high = self.low, self.high
        if isinstance(low, str):
            low = string_lower_bound(low, STRING_PREFIX)
            high = string_upper_bound(high, STRING_PREFIX)
        if self.nan:
            high = None
        return {"min": low, "max": high, "nulls": self.nulls, "rows": self.rows}


class MinMaxClause(Clause):
    """``might_match(node)`` on the stored bounds (``node`` is over :data:`VALUE_COLUMN`)."""

    def __init__(self, node: Predicate) -> None:
        self.node = node

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        n = len(meta)
        known = np.asarray(meta.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if not known.any():
            return np.ones(n, dtype=bool)
        rows = pc.fill_null(meta.field("rows"), -1).to_numpy(zero_copy_only=False)
        nulls = pc.fill_null(meta.field("nulls"), -1).to_numpy(zero_copy_only=False)
        stats = FileStats(
            paths=np.full(n, "", dtype=object),
            sizes=np.zeros(n, dtype=np.int64),
            num_records=np.where(known, rows, -1).astype(np.int64),
            modification_times=np.zeros(n, dtype=np.int64),
            columns={
                VALUE_COLUMN: ColumnStats(
                    _nulled(meta.field("min"), known),
                    _nulled(meta.field("max"), known),
                    np.where(known, nulls, -1).astype(np.int64),
                )
            },
        )
        return np.asarray(might_match(self.node, stats), dtype=bool) | ~known

    def negate(self) -> Clause:
        return MinMaxClause(self.node.negate())


def _nulled(values: pa.Array, known: np.ndarray) -> pa.Array:
    """A struct field with entries of null structs forced to null."""
    return pc.if_else(pa.array(known), values, pa.scalar(None, values.type))
