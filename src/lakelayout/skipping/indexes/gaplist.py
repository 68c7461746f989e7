"""GapList(k): min, max and the k widest empty gaps of a file's values (Table I).

Per file: ``min``, ``max`` and up to ``k`` open intervals ``(lo, hi)`` between
consecutive distinct values -- ``lo`` and ``hi`` are values of the file, nothing
lies strictly between them. A range query ``[a, b]`` can match a file only if
it meets ``[min, max]`` and is not inside one gap (``lo < a`` and ``b < hi``;
with open query bounds ``lo <= a`` / ``b <= hi``). The index labels single
comparisons, IN lists and -- where gaps pay off -- AND nodes whose children
bound the term from both sides (BETWEEN), like the paper's GeoBox filter
matches an AND node.

Mergeable across batches: each batch's summary says which closed segments
``[min, gap1.lo], [gap1.hi, gap2.lo], ...`` may hold values; the union of two
summaries' segments, with the k widest holes kept, is a true summary of both.
NaN values are not in ``[min, max]``; a ``nan`` flag records them, and since
Spark orders NaN above every number, they can only match intervals without an
upper bound. ``-0.0`` is ``0.0``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import And, Compare, In, Predicate
from lakelayout.skipping.indexes.base import (
    Batch,
    Clause,
    TermIndex,
    Udf,
    check_int,
    literal_scalar,
    null_mask,
    register,
)

Segment = tuple[Any, Any]


@dataclass(frozen=True)
class Bound:
    """One end of a query interval: ``value`` (None = unbounded) and whether it is closed."""

    value: Any
    closed: bool


def _sizes(low: pa.Array, high: pa.Array) -> np.ndarray:
    """Widths ``high - low`` as float64 (only used to rank gaps)."""

    def num(a: pa.Array) -> np.ndarray:
        t = a.type
        if pa.types.is_date(t):
            a = a.cast(pa.date32()).cast(pa.int32())
        elif pa.types.is_timestamp(t):
            a = a.cast(pa.int64())
        # nearest double, not a range error: a timestamp past 2255 or a bigint past 2**53 has
        # no exact double, and widths only rank the gaps
        return np.asarray(
            a.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64
        )

    with np.errstate(invalid="ignore", over="ignore"):
        widths = num(high) - num(low)
    return np.nan_to_num(widths, nan=np.inf, posinf=np.inf)


@register
class GapList(TermIndex):
    """Min, max and the ``gaps`` widest value-free intervals per file.

    >>> idx = GapList("price", gaps=1).bind(pa.schema([("price", pa.int64())]))
    >>> idx.collect(pa.table({"price": [1, 2, 3, 100, 101]}))
    {'min': 1, 'max': 101, 'gaps': [{'lo': 3, 'hi': 100}], 'nan': False}
    """

    kind = "gaplist"

    def __init__(
        self,
        expression: str,
        *,
        gaps: int = 8,
        functions: Mapping[str, pa.DataType | str] | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        super().__init__(expression, functions=functions, udfs=udfs)
        check_int(type(self).__name__, "gaps", gaps)
        self.gaps = gaps

    def params(self) -> dict[str, Any]:
        return {**super().params(), "gaps": self.gaps}

    def supports(self, dtype: pa.DataType) -> bool:
        t = pa.types
        return bool(
            t.is_integer(dtype)
            or t.is_floating(dtype)
            or t.is_decimal(dtype)
            or t.is_date(dtype)
            or t.is_timestamp(dtype)
        )

    @property
    def arrow_type(self) -> pa.DataType:
        gap = pa.struct([("lo", self.dtype), ("hi", self.dtype)])
        return pa.struct(
            [
                ("min", self.dtype),
                ("max", self.dtype),
                ("gaps", pa.list_(gap)),
                ("nan", pa.bool_()),
            ]
        )

    def collector(self) -> _GapCollector:
        return _GapCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        if isinstance(node, And):
            return self._label_range(node)
        if not self.matches(node):
            return None
        if isinstance(node, In) and not node.negated:
            scalars = [literal_scalar(v.value, self.dtype) for v in node.values]
            try:
                points = [s.as_py() for s in scalars if s is not None]
            except (OverflowError, ValueError):  # beyond Python's years: no answer
                return None
            if len(points) != len(scalars) or any(_is_nan(p) for p in points):
                return None
            return GapClause([(Bound(p, True), Bound(p, True)) for p in points])
        if isinstance(node, Compare):
            interval = self._interval([node])
            return None if interval is None else GapClause([interval])
        return None

    def _label_range(self, node: And) -> Clause | None:
        mine = [c for c in node.children_ if isinstance(c, Compare) and self.matches(c)]
        if len(mine) < 2:
            return None
        interval = self._interval(mine)
        return None if interval is None else GapClause([interval])

    def _interval(self, comparisons: list[Compare]) -> tuple[Bound, Bound] | None:
        """The intersection of ``term op literal`` constraints as one interval (or None)."""
        low, high = Bound(None, False), Bound(None, False)
        for c in comparisons:
            scalar = literal_scalar(c.value.value, self.dtype)
            if c.op == "!=" or scalar is None:
                continue
            try:
                value = scalar.as_py()
            except (OverflowError, ValueError):  # beyond Python's years: no constraint, wider
                continue
            if _is_nan(value):
                continue
            if c.op in ("=", ">", ">="):
                low = _tighter_low(low, Bound(value, c.op != ">"))
            if c.op in ("=", "<", "<="):
                high = _tighter_high(high, Bound(value, c.op != "<"))
        if low.value is None and high.value is None:
            return None
        return low, high


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _tighter_low(a: Bound, b: Bound) -> Bound:
    if a.value is None:
        return b
    if b.value > a.value or (b.value == a.value and not b.closed):
        return b
    return a


def _tighter_high(a: Bound, b: Bound) -> Bound:
    if a.value is None:
        return b
    if b.value < a.value or (b.value == a.value and not b.closed):
        return b
    return a


class _GapCollector:
    def __init__(self, index: GapList) -> None:
        self.index = index
        self.segments: list[Segment] = []
        self.nan = False
        self.failed = False

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        values = values.drop_null()
        if pa.types.is_floating(values.type):
            is_nan = pc.is_nan(values)
            self.nan = self.nan or bool(pc.any(is_nan).as_py())
            values = values.filter(pc.invert(is_nan))
        if len(values) == 0:
            return
        unique = pc.unique(values)
        unique = unique.take(pc.sort_indices(unique))
        self.segments = self._merge(self.segments + self._segments(unique))

    def _segments(self, unique: pa.Array) -> list[Segment]:
        """Closed segments covering the sorted distinct values, split at the k widest holes."""
        n = len(unique)
        widths = _sizes(unique.slice(0, n - 1), unique.slice(1))
        order = np.argsort(-widths, kind="stable")[: self.index.gaps]
        cuts = sorted(int(i) for i in order)
        py = unique.to_pylist()
        starts, segments = 0, []
        for cut in cuts:
            segments.append((py[starts], py[cut]))
            starts = cut + 1
        segments.append((py[starts], py[n - 1]))
        return segments

    def _merge(self, segments: list[Segment]) -> list[Segment]:
        """Union of closed segments, then keep only the k widest holes."""
        merged: list[list[Any]] = []
        for low, high in sorted(segments, key=lambda s: s[0]):
            if merged and low <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        if len(merged) <= self.index.gaps + 1:
            return [(a, b) for a, b in merged]
        dtype = self.index.dtype
        ends = pa.array([m[1] for m in merged[:-1]], dtype)
        starts = pa.array([m[0] for m in merged[1:]], dtype)
        keep = set(
            int(i) for i in np.argsort(-_sizes(ends, starts), kind="stable")[: self.index.gaps]
        )
        out: list[Segment] = []
        low = merged[0][0]
        for i in range(len(merged) - 1):
            if i in keep:
                out.append((low, merged[i][1]))
                low = merged[i + 1][0]
        out.append((low, merged[-1][1]))
        return out

    def result(self) -> dict[str, Any] | None:
        if self.failed:
            return None
        if not self.segments:
            return {"min": None, "max": None, "gaps": [], "nan": self.nan}
        gaps = [
            {"lo": self.segments[i][1], "hi": self.segments[i + 1][0]}
            for i in range(len(self.segments) - 1)
        ]
        low, high = self.segments[0][0], self.segments[-1][1]
        return {"min": low, "max": high, "gaps": gaps, "nan": self.nan}


class GapClause(Clause):
    """Some interval meets ``[min, max]`` outside every stored gap."""

    def __init__(self, intervals: list[tuple[Bound, Bound]]) -> None:
        self.intervals = intervals

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        low, high, gaps, nan = meta.flatten()
        has_nan = np.asarray(pc.fill_null(nan, True).to_numpy(zero_copy_only=False), dtype=bool)
        out = np.zeros(len(meta), dtype=bool)
        for interval in self.intervals:
            out |= _interval_may_match(interval, low, high, gaps)
            if interval[1].value is None:
                out |= has_nan
        return out | null_mask(meta)

    def negate(self) -> Clause | None:
        return None


def _cmp(op: str, arr: pa.Array, value: Any, unknown: bool = True) -> np.ndarray:
    """``arr op value`` per entry; ``unknown`` where the entry is null."""
    fn = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}[op]
    result = fn(arr, pa.scalar(value, arr.type))
    return np.asarray(pc.fill_null(result, unknown).to_numpy(zero_copy_only=False), dtype=bool)


def _interval_may_match(
    interval: tuple[Bound, Bound], low: pa.Array, high: pa.Array, gaps: pa.Array
) -> np.ndarray:
    a, b = interval
    keep = np.ones(len(low), dtype=bool)
    if a.value is not None:
        keep &= _cmp(">=" if a.closed else ">", high, a.value)
    if b.value is not None:
        keep &= _cmp("<=" if b.closed else "<", low, b.value)
    if a.value is None or b.value is None:
        return keep
    if a.value > b.value or (a.value == b.value and not (a.closed and b.closed)):
        return np.zeros(len(low), dtype=bool)
    flat = pc.list_flatten(gaps)
    if len(flat) == 0:
        return keep
    lo, hi = flat.flatten()
    inside = _cmp("<" if a.closed else "<=", lo, a.value, False)
    inside &= _cmp(">" if b.closed else ">=", hi, b.value, False)
    parents = np.asarray(pc.list_parent_indices(gaps).to_numpy(zero_copy_only=False))
    in_gap = np.zeros(len(low), dtype=bool)
    in_gap[parents[inside]] = True
    return keep & ~in_gap
