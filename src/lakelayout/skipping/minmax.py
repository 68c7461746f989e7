"""Min/max file pruning, vectorized over every file of a snapshot at once.

Two evaluators over the normalized predicate tree (:mod:`lakelayout.expr.nodes`)
and a :class:`~lakelayout.stats.model.FileStats`:

* :func:`might_match` -- ``False`` only for a file that surely holds no row the
  predicate keeps (``ROWS_CANNOT_MATCH``); everything unknown, unsupported or
  unreliable falls through to ``ROWS_MIGHT_MATCH``. Used to skip files.
* :func:`all_rows_match` -- ``True`` only for a file whose every row surely
  satisfies the predicate. Used for metadata-only deletes and "already
  clustered" checks; everything unknown falls through to ``False``.

Both rely on the :mod:`~lakelayout.stats.bounds` contract that every stored
bound is a true bound (``min <= v <= max`` for every non-null ``v``, NaN
excluded from ``min`` and voiding ``max``), so truncated string bounds need no
special case. The tree is *not* assumed NOT-free: a :class:`Not` node means
"might match" for its subtree (and "not all rows" for the strict evaluator).
Each rule is a small function taking one node and the snapshot and returning
a boolean vector with one entry per file.
"""

from __future__ import annotations

import decimal as _decimal
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    Predicate,
    StartsWith,
)
from lakelayout.stats.bounds import next_string
from lakelayout.stats.model import ColumnStats, FileStats

ROWS_MIGHT_MATCH = True
ROWS_CANNOT_MATCH = False
ALL_ROWS_MATCH = True
NOT_ALL_ROWS_MATCH = False

IN_LIST_CAP = 200
"""IN lists longer than this are pruned as the range ``[min(list), max(list)]``."""

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


# ---------------------------------------------------------------- public API


def might_match(pred: Predicate, stats: FileStats) -> np.ndarray:
    """Per file: ``False`` only where no row can satisfy ``pred`` (skip), else ``True``.

    A zero-row file never holds a matching row, whatever the predicate.
    """
    keep = _might(pred, stats)
    return np.asarray(keep & (stats.num_records != 0), dtype=bool)


def all_rows_match(pred: Predicate, stats: FileStats) -> np.ndarray:
    """Per file: ``True`` only where every row surely satisfies ``pred`` (vacuous for 0 rows)."""
    every = _strict(pred, stats)
    return np.asarray(every | (stats.num_records == 0), dtype=bool)


# ---------------------------------------------------------------- column view


@dataclass(frozen=True)
class _Bounds:
    """One column's bounds over all files, in the type literals are compared in."""

    low: pa.Array
    high: pa.Array
    null_count: np.ndarray
    num_records: np.ndarray

    @property
    def dtype(self) -> pa.DataType:
        return self.low.type

    def scalar(self, value: object) -> pa.Scalar | None:
        """``value`` as a scalar of the column type, or ``None`` if not exactly representable."""
        return coerce_literal(value, self.dtype)

    def low_vs(self, op: str, scalar: pa.Scalar, unknown: bool) -> np.ndarray:
        """``min op scalar`` per file, ``unknown`` where the min is unknown."""
        return _vector(_COMPARE[op](self.low, scalar), unknown)

    def high_vs(self, op: str, scalar: pa.Scalar, unknown: bool) -> np.ndarray:
        """``max op scalar`` per file, ``unknown`` where the max is unknown."""
        return _vector(_COMPARE[op](self.high, scalar), unknown)

    def no_nulls(self) -> np.ndarray:
        """Files known to hold no null in this column."""
        return np.asarray(self.null_count == 0)

    def all_nulls(self) -> np.ndarray:
        """Files known to hold only nulls in this column."""
        return np.asarray((self.null_count >= 0) & (self.null_count == self.num_records))


def _bounds(term: object, stats: FileStats) -> _Bounds | None:
    """Bounds of a plain column term; ``None`` for expressions and unknown columns."""
    if not isinstance(term, Column):
        return None
    column: ColumnStats | None = stats.column(term.name)
    if column is None:
        return None
    low, high = column.min, column.max
    if pa.types.is_floating(low.type) and low.type != pa.float64():
        low, high = low.cast(pa.float64()), high.cast(pa.float64())
    return _Bounds(low, high, column.null_count, stats.num_records)


def coerce_literal(value: object, dtype: pa.DataType) -> pa.Scalar | None:
    """A literal as an Arrow scalar of ``dtype``, or ``None`` when that would change it.

    ``None`` covers NaN (Spark orders NaN above every number, bounds exclude it),
    values out of the type's range and lossy conversions (``5.5`` to an integer).

    >>> coerce_literal(5, pa.int8()), coerce_literal(5.5, pa.int64()), coerce_literal(300, pa.int8())
    (<pyarrow.Int8Scalar: 5>, None, None)
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) != pa.types.is_boolean(dtype):
        return None
    try:
        scalar = pa.scalar(value, type=dtype)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        try:
            scalar = pa.scalar(value).cast(dtype)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
    if isinstance(value, (int, float, _decimal.Decimal)) and scalar.as_py() != value:
        return None
    return scalar


def _vector(mask: pa.Array | pa.ChunkedArray, unknown: bool) -> np.ndarray:
    """A nullable Arrow boolean result as numpy, nulls (unknown bounds) set to ``unknown``."""
    filled = pc.fill_null(mask, unknown)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)


def _fill(stats: FileStats, answer: bool) -> np.ndarray:
    return np.full(len(stats), answer, dtype=bool)


# ---------------------------------------------------------------- might match


def _might(pred: Predicate, stats: FileStats) -> np.ndarray:
    rule = _MIGHT_RULES.get(type(pred))
    if rule is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    return rule(pred, stats)


def _might_and(pred: Any, stats: FileStats) -> np.ndarray:
    """AND: a file is skipped when any conjunct skips it."""
    keep = _fill(stats, ROWS_MIGHT_MATCH)
    for child in pred.children_:
        keep &= _might(child, stats)
    return keep


def _might_or(pred: Any, stats: FileStats) -> np.ndarray:
    """OR: a file is skipped only when every disjunct skips it."""
    if not pred.children_:
        return _fill(stats, ROWS_MIGHT_MATCH)
    keep = _fill(stats, ROWS_CANNOT_MATCH)
    for child in pred.children_:
        keep |= _might(child, stats)
    return keep


def _might_const(pred: Any, stats: FileStats) -> np.ndarray:
    return _fill(stats, ROWS_MIGHT_MATCH if pred.value else ROWS_CANNOT_MATCH)


def _might_compare(pred: Any, stats: FileStats) -> np.ndarray:
    """``c op v`` can match where ``[min, max]`` holds a value that satisfies it.

    ``=`` needs ``min <= v <= max``; ``<`` needs ``min < v``; ``>`` needs
    ``max > v``; ``!=`` fails only where ``min = max = v`` (nulls never match).
    """
    if not isinstance(pred.value, Literal):
        return _fill(stats, ROWS_MIGHT_MATCH)
    if pred.value.value is None:
        return _fill(stats, ROWS_CANNOT_MATCH)
    bounds = _bounds(pred.term, stats)
    scalar = None if bounds is None else bounds.scalar(pred.value.value)
    if bounds is None or scalar is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    return _might_compare_scalar(pred.op, bounds, scalar)


def _might_compare_scalar(op: str, b: _Bounds, v: pa.Scalar) -> np.ndarray:
    keep = ROWS_MIGHT_MATCH
    if op == "=":
        return b.low_vs("<=", v, keep) & b.high_vs(">=", v, keep)
    if op in ("<", "<="):
        return b.low_vs(op, v, keep)
    if op in (">", ">="):
        return b.high_vs(op, v, keep)
    if op == "!=":
        return ~(b.low_vs("=", v, not keep) & b.high_vs("=", v, not keep))
    return np.full(len(b.null_count), keep, dtype=bool)


def _might_in(pred: Any, stats: FileStats) -> np.ndarray:
    """IN can match where some listed value lies in ``[min, max]``.

    NOT IN fails only where ``min = max`` and that one value is listed, or when
    the list holds NULL (``x NOT IN (.., NULL)`` is never TRUE).
    """
    raw = [lit.value for lit in pred.values]
    if pred.negated and any(v is None for v in raw):
        return _fill(stats, ROWS_CANNOT_MATCH)
    raw = [v for v in raw if v is not None]
    if not raw:
        return _fill(stats, ROWS_CANNOT_MATCH)
    bounds = _bounds(pred.term, stats)
    if bounds is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    scalars = [bounds.scalar(v) for v in raw]
    if pred.negated:
        listed = [s for s in scalars if s is not None]
        return ~_single_listed_value(bounds, listed)
    if any(s is None for s in scalars):
        return _fill(stats, ROWS_MIGHT_MATCH)
    return _range_holds_any(bounds, [s for s in scalars if s is not None])


def _single_listed_value(b: _Bounds, listed: Sequence[pa.Scalar]) -> np.ndarray:
    """Files whose every non-null value is one value of ``listed`` (``min = max``, listed)."""
    if not listed:
        return np.zeros(len(b.null_count), dtype=bool)
    value_set = pa.array([s.as_py() for s in listed], type=b.dtype)
    same = _vector(pc.equal(b.low, b.high), False)
    return same & _vector(pc.is_in(b.low, value_set=value_set), False)


def _range_holds_any(b: _Bounds, values: Sequence[pa.Scalar]) -> np.ndarray:
    """Files whose ``[min, max]`` contains at least one of ``values`` (unknown -> True).

    Sorted values and a binary search per file: the first value ``>= min`` is
    the only candidate that needs ``<= max``. Lists beyond :data:`IN_LIST_CAP`
    collapse to their range.
    """
    array = pc.unique(pa.array([s.as_py() for s in values], type=b.dtype))
    array = array.take(pc.sort_indices(array))
    if len(array) > IN_LIST_CAP:
        low, high = array[0], array[len(array) - 1]
        return b.low_vs("<=", high, True) & b.high_vs(">=", low, True)
    sorted_values = _sortable(array)
    low_known = _vector(pc.is_valid(b.low), False)
    high_known = _vector(pc.is_valid(b.high), False)
    lows = _sortable(pc.fill_null(b.low, array[0]))
    highs = _sortable(pc.fill_null(b.high, array[0]))
    first = np.searchsorted(sorted_values, lows, side="left")
    first = np.where(low_known, first, 0)
    exists = first < len(sorted_values)
    candidate = sorted_values[np.minimum(first, len(sorted_values) - 1)]
    fits = np.asarray(candidate <= highs, dtype=bool)
    return np.asarray(exists & (~high_known | fits), dtype=bool)


def _sortable(arr: pa.Array) -> np.ndarray:
    """A numpy array ordered like the Arrow values (physical ints for dates and times).

    Decimals become Python ``Decimal`` objects (exact; numpy compares them as
    objects): Arrow's cast to float64 is not correctly rounded, and 38-digit
    values one unit apart share a double, which would blur the search.
    """
    t = arr.type
    if pa.types.is_decimal(t):
        return np.array(arr.to_pylist(), dtype=object)
    if pa.types.is_timestamp(t) or pa.types.is_date64(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    elif pa.types.is_boolean(t):
        arr = arr.cast(pa.int8())
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _might_is_null(pred: Any, stats: FileStats) -> np.ndarray:
    """IS NULL fails where ``null_count = 0``; IS NOT NULL where all rows are null."""
    bounds = _bounds(pred.term, stats)
    if bounds is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    return ~(bounds.all_nulls() if pred.negated else bounds.no_nulls())


def _might_starts_with(pred: Any, stats: FileStats) -> np.ndarray:
    """Values starting with ``p`` fill the range ``[p, next(p))``.

    ``startswith(c, p)`` can match where ``[min, max]`` meets that range; its
    negation fails where ``[min, max]`` lies inside it (true bounds suffice:
    truncation only widens them).
    """
    bounds = _string_bounds(pred.term, stats)
    if bounds is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    inside = _prefix_range(bounds, pred.prefix, unknown=False)
    if pred.negated:
        return ~inside
    return _meets_prefix_range(bounds, pred.prefix)


def _meets_prefix_range(b: _Bounds, prefix: str) -> np.ndarray:
    keep = b.high_vs(">=", pa.scalar(prefix, b.dtype), ROWS_MIGHT_MATCH)
    upper = next_string(prefix)
    if upper is not None:
        keep &= b.low_vs("<", pa.scalar(upper, b.dtype), ROWS_MIGHT_MATCH)
    return keep


def _prefix_range(b: _Bounds, prefix: str, *, unknown: bool) -> np.ndarray:
    """Files whose ``[min, max]`` lies within ``[prefix, next(prefix))``."""
    inside = b.low_vs(">=", pa.scalar(prefix, b.dtype), unknown)
    upper = next_string(prefix)
    if upper is not None:
        inside &= b.high_vs("<", pa.scalar(upper, b.dtype), unknown)
    return inside


def _string_bounds(term: object, stats: FileStats) -> _Bounds | None:
    bounds = _bounds(term, stats)
    if bounds is None or not pa.types.is_string(bounds.dtype):
        return None
    return bounds


def _might_like(pred: Any, stats: FileStats) -> np.ndarray:
    """LIKE: a pattern without wildcards is ``=``; else its literal prefix is a range."""
    if pred.negated:
        return _fill(stats, ROWS_MIGHT_MATCH)
    parsed = like_prefix(pred.pattern)
    bounds = _string_bounds(pred.term, stats)
    if parsed is None or bounds is None:
        return _fill(stats, ROWS_MIGHT_MATCH)
    prefix, exact = parsed
    if exact:
        return _might_compare_scalar("=", bounds, pa.scalar(prefix, bounds.dtype))
    return _meets_prefix_range(bounds, prefix)


def like_prefix(pattern: str, escape: str = "\\") -> tuple[str, bool] | None:
    """The literal text before the first wildcard of a LIKE pattern, and whether there is none.

    ``None`` for a malformed escape (Spark rejects those; pruning just keeps).

    >>> like_prefix("ab%c"), like_prefix("a\\\\_b"), like_prefix("%x"), like_prefix("a\\\\q")
    (('ab', False), ('a_b', True), ('', False), None)
    """
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            following = next(chars, None)
            if following is None or following not in ("%", "_", escape):
                return None
            out.append(following)
        elif ch in ("%", "_"):
            return "".join(out), False
        else:
            out.append(ch)
    return "".join(out), True


def _might_bool_term(pred: Any, stats: FileStats) -> np.ndarray:
    """A BOOLEAN column used as a predicate is ``c = TRUE`` (``c = FALSE`` when negated)."""
    bounds = _bounds(pred.term, stats)
    if bounds is None or not pa.types.is_boolean(bounds.dtype):
        return _fill(stats, ROWS_MIGHT_MATCH)
    return _might_compare_scalar("=", bounds, pa.scalar(not pred.negated))


def _might_not(pred: Any, stats: FileStats) -> np.ndarray:
    """An unpushed NOT (over something opaque): nothing is known, keep every file."""
    return _fill(stats, ROWS_MIGHT_MATCH)


def _might_ends_with(pred: Any, stats: FileStats) -> np.ndarray:
    """Suffixes say nothing about the order of values: keep (nulls aside)."""
    return _fill(stats, ROWS_MIGHT_MATCH)


_Rule = Callable[[Any, FileStats], np.ndarray]


def _rejects_nulls(rule: _Rule) -> _Rule:
    """A predicate that is NULL on a NULL input cannot match a file of nulls only.

    Applies to every value test (comparisons, IN, prefix/suffix, LIKE, boolean
    terms), on top of what the bounds say.
    """

    def rule_or_all_null(pred: Any, stats: FileStats) -> np.ndarray:
        keep = rule(pred, stats)
        bounds = _bounds(pred.term, stats)
        return keep if bounds is None else keep & ~bounds.all_nulls()

    rule_or_all_null.__doc__ = rule.__doc__
    return rule_or_all_null


_MIGHT_RULES: dict[type, _Rule] = {
    And: _might_and,
    Or: _might_or,
    BoolConst: _might_const,
    Compare: _rejects_nulls(_might_compare),
    In: _rejects_nulls(_might_in),
    IsNull: _might_is_null,
    StartsWith: _rejects_nulls(_might_starts_with),
    EndsWith: _rejects_nulls(_might_ends_with),
    Like: _rejects_nulls(_might_like),
    BoolTerm: _rejects_nulls(_might_bool_term),
    Not: _might_not,
}


# ---------------------------------------------------------------- all rows match


def _strict(pred: Predicate, stats: FileStats) -> np.ndarray:
    rule = _STRICT_RULES.get(type(pred))
    if rule is None:
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    return rule(pred, stats)


def _strict_and(pred: Any, stats: FileStats) -> np.ndarray:
    every = _fill(stats, ALL_ROWS_MATCH)
    for child in pred.children_:
        every &= _strict(child, stats)
    return every


def _strict_or(pred: Any, stats: FileStats) -> np.ndarray:
    """OR: every row matches when one disjunct matches every row (sufficient, not necessary)."""
    every = _fill(stats, NOT_ALL_ROWS_MATCH)
    for child in pred.children_:
        every |= _strict(child, stats)
    return every


def _strict_const(pred: Any, stats: FileStats) -> np.ndarray:
    return _fill(stats, ALL_ROWS_MATCH if pred.value else NOT_ALL_ROWS_MATCH)


def _strict_compare(pred: Any, stats: FileStats) -> np.ndarray:
    """``c op v`` holds for every row when no row is null and ``[min, max]`` satisfies it."""
    if not isinstance(pred.value, Literal):
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    bounds = _bounds(pred.term, stats)
    scalar = None if bounds is None else bounds.scalar(pred.value.value)
    if bounds is None or scalar is None:
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    return bounds.no_nulls() & _strict_compare_scalar(pred.op, bounds, scalar)


def _strict_compare_scalar(op: str, b: _Bounds, v: pa.Scalar) -> np.ndarray:
    no = NOT_ALL_ROWS_MATCH
    if op == "=":
        return b.low_vs("=", v, no) & b.high_vs("=", v, no)
    if op in ("<", "<="):
        return b.high_vs(op, v, no)
    if op in (">", ">="):
        return b.low_vs(op, v, no)
    if op == "!=":
        return b.high_vs("<", v, no) | b.low_vs(">", v, no)
    return np.zeros(len(b.null_count), dtype=bool)


def _strict_in(pred: Any, stats: FileStats) -> np.ndarray:
    """IN: one listed value and no null; NOT IN: no listed value in ``[min, max]``, no null."""
    raw = [lit.value for lit in pred.values]
    bounds = _bounds(pred.term, stats)
    if bounds is None or (pred.negated and any(v is None for v in raw)):
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    scalars = [bounds.scalar(v) for v in raw if v is not None]
    if pred.negated:
        if any(s is None for s in scalars):
            return _fill(stats, NOT_ALL_ROWS_MATCH)
        known = _vector(pc.and_(pc.is_valid(bounds.low), pc.is_valid(bounds.high)), False)
        if not scalars:
            return bounds.no_nulls() & known
        listed = [s for s in scalars if s is not None]
        return bounds.no_nulls() & known & ~_range_holds_any(bounds, listed)
    listed = [s for s in scalars if s is not None]
    return bounds.no_nulls() & _single_listed_value(bounds, listed)


def _strict_is_null(pred: Any, stats: FileStats) -> np.ndarray:
    bounds = _bounds(pred.term, stats)
    if bounds is None:
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    return bounds.no_nulls() if pred.negated else bounds.all_nulls()


def _strict_starts_with(pred: Any, stats: FileStats) -> np.ndarray:
    """Every row starts with ``p`` when ``[min, max]`` lies in ``[p, next(p))``; negated: outside."""
    bounds = _string_bounds(pred.term, stats)
    if bounds is None:
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    if not pred.negated:
        return bounds.no_nulls() & _prefix_range(bounds, pred.prefix, unknown=False)
    outside = bounds.high_vs("<", pa.scalar(pred.prefix, bounds.dtype), NOT_ALL_ROWS_MATCH)
    upper = next_string(pred.prefix)
    if upper is not None:
        outside |= bounds.low_vs(">=", pa.scalar(upper, bounds.dtype), NOT_ALL_ROWS_MATCH)
    return bounds.no_nulls() & outside


def _strict_like(pred: Any, stats: FileStats) -> np.ndarray:
    """LIKE 'text' is ``=``; LIKE 'prefix%' is a prefix test; other patterns: unknown."""
    parsed = None if pred.negated else like_prefix(pred.pattern)
    bounds = _string_bounds(pred.term, stats)
    if parsed is None or bounds is None:
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    prefix, exact = parsed
    if exact:
        return bounds.no_nulls() & _strict_compare_scalar(
            "=", bounds, pa.scalar(prefix, bounds.dtype)
        )
    if pred.pattern != _escape_like(prefix) + "%":
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    return bounds.no_nulls() & _prefix_range(bounds, prefix, unknown=False)


def _escape_like(text: str) -> str:
    return "".join("\\" + ch if ch in ("%", "_", "\\") else ch for ch in text)


def _strict_bool_term(pred: Any, stats: FileStats) -> np.ndarray:
    bounds = _bounds(pred.term, stats)
    if bounds is None or not pa.types.is_boolean(bounds.dtype):
        return _fill(stats, NOT_ALL_ROWS_MATCH)
    return bounds.no_nulls() & _strict_compare_scalar("=", bounds, pa.scalar(not pred.negated))


_STRICT_RULES: dict[type, _Rule] = {
    And: _strict_and,
    Or: _strict_or,
    BoolConst: _strict_const,
    Compare: _strict_compare,
    In: _strict_in,
    IsNull: _strict_is_null,
    StartsWith: _strict_starts_with,
    Like: _strict_like,
    BoolTerm: _strict_bool_term,
}

__all__ = [
    "ALL_ROWS_MATCH",
    "IN_LIST_CAP",
    "NOT_ALL_ROWS_MATCH",
    "ROWS_CANNOT_MATCH",
    "ROWS_MIGHT_MATCH",
    "all_rows_match",
    "coerce_literal",
    "like_prefix",
    "might_match",
]
