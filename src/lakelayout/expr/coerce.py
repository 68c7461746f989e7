"""Coercing a literal to the type of the term it is compared with, and folding.

``term op literal`` is rewritten into an exactly equivalent predicate whose
literal has the term's type (Spark 4 ANSI coercion), folding the cases the
type decides on its own (WHERE semantics: a row where the predicate is NULL
is not kept):

* literal outside the term type's range: ``tinyint_col = 1000`` -> FALSE,
  ``tinyint_col < 1000`` -> ``tinyint_col IS NOT NULL``;
* literal between two representable values: ``int_col < 5.5`` -> ``int_col <= 5``,
  ``int_col = 5.5`` -> FALSE, ``date_col < TIMESTAMP'1995-03-01 12:00'`` ->
  ``date_col <= DATE'1995-03-01'``;
* NaN (the largest double in Spark's total order): ``x <= NaN`` -> ``x IS NOT NULL``,
  ``x > NaN`` -> FALSE, ``x < NaN`` -> ``x != NaN``, ``x >= NaN`` -> ``x = NaN``;
* a NULL literal: every comparison with it is NULL -> FALSE.

These folds hold in a WHERE clause; the binder spells them exactly in
three-valued logic (:func:`lakelayout.expr.parse._exact`) so that a NOT above
them, pushed down later by normalization, stays right.

Timestamp literals may lie beyond Python's years 1..9999 (Spark allows
-290308..+294247): they are then :class:`~lakelayout.expr.temporal.FarTimestamp`
values, and conversions go through microseconds (:mod:`lakelayout.expr.temporal`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re

import pyarrow as pa

from lakelayout.errors import PredicateError
from lakelayout.expr import numbers, temporal
from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Compare,
    Expr,
    IsNull,
    Literal,
    Or,
    Predicate,
)
from lakelayout.expr.temporal import FarTimestamp, TimestampValue
from lakelayout.expr.types import WIDE, exact_scale_and_range, family, spark_type_name

_DATE_RE = re.compile(r"^\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?:[T ].*)?\s*$")


class TypeMismatch(PredicateError):
    """A literal cannot be compared with a term of the given type (Spark would fail)."""


class Unrepresentable(Exception):
    """Valid Spark whose literal lakelayout cannot hold (a DATE beyond Python's range)."""


def compare(
    op: str,
    term: Expr,
    lit: Literal,
    timezone: str,
    *,
    via: str = "compare",
    list_type: pa.DataType | None = None,
) -> Predicate:
    """``term op lit`` with ``lit`` coerced to the term's type, folded when decided.

    ``via`` (``"compare"`` or ``"in"``) and ``list_type`` (the
    comparison type of a whole IN list, :func:`.numbers.in_list_type`) select
    Spark's numeric coercion (:mod:`.numbers`). Raises
    :class:`~.numbers.NotModelled` where Spark would round the term's own values.
    """
    if lit.value is None:
        return BoolConst(False)
    dtype = getattr(term, "dtype", None)
    fam = family(dtype)
    if dtype is None or fam in ("map", "other", "binary"):
        raise TypeMismatch(f"cannot compare {spark_type_name(dtype)} values with literals")
    assert dtype is not None
    if fam in ("int", "decimal", "float"):
        return _compare_number(op, term, dtype, lit, via, list_type)
    if fam == "string":
        return Compare(op, term, Literal(_as_string(lit, dtype), pa.string()))
    if fam == "date":
        return _compare_date(op, term, lit, timezone)
    if fam == "timestamp":
        return Compare(op, term, Literal(_as_timestamp(lit, dtype, timezone), dtype))
    return _compare_bool(op, term, lit)


# ---------------------------------------------------------------- numbers


def _compare_number(
    op: str,
    term: Expr,
    dtype: pa.DataType,
    lit: Literal,
    via: str,
    list_type: pa.DataType | None,
) -> Predicate:
    """Numeric term: compared in Spark's comparison type (:mod:`.numbers`), then folded."""
    value = lit.value
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal | str):
        raise _mismatch(lit, dtype)
    target = list_type or numbers.comparison_type(op, dtype, lit, via=via)
    try:
        if family(target) == "float":
            return _compare_as_double(op, term, dtype, numbers.as_double(value), target)
        if list_type is None and numbers.strength_reduced(op, dtype, lit, via=via):
            assert isinstance(value, decimal.Decimal)
            return _strength_reduced(op, term, dtype, value)
        if isinstance(value, str):
            return _compare_exact(op, term, dtype, decimal.Decimal(numbers.integer_text(value)))
        exact = decimal.Decimal(value)
        if family(target) == "decimal":
            if exact_scale_and_range(dtype)[0] > target.scale:
                raise numbers.NotModelled(
                    f"Spark compares {spark_type_name(dtype)} with {lit.sql()} as "
                    f"{spark_type_name(target)}, rounding the column's values"
                )
            exact = numbers.round_half_up(exact, target)
        return _compare_exact(op, term, dtype, exact)
    except numbers.BadLiteral as err:
        raise _mismatch(lit, dtype, hint=str(err)) from None


def literal_fold(
    op: str, term: Expr, lit: Literal, *, via: str = "compare", list_type: pa.DataType | None = None
) -> bool:
    """Spark replaces ``term op lit`` by a bare TRUE or FALSE literal, NULL rows included.

    Its ``integralAndDecimalLiteral`` rewrite does so for an integral term
    against a decimal literal beyond the BIGINT range (``big > 1E30``): under a
    NOT the result flips for every row, a NULL term included. Every other fold
    of :func:`compare` decides from the type alone and stays NULL where the
    term is NULL.
    """
    dtype = getattr(term, "dtype", None)
    value = lit.value
    return (
        list_type is None
        and dtype is not None
        and isinstance(value, decimal.Decimal)
        and numbers.strength_reduced(op, dtype, lit, via=via)
        and not numbers.LONG_MIN <= value <= numbers.LONG_MAX
    )


def _strength_reduced(op: str, term: Expr, dtype: pa.DataType, value: decimal.Decimal) -> Predicate:
    """Integral term vs decimal literal in a range comparison, as Spark rewrites it.

    Exact within the BIGINT range; beyond it Spark replaces the comparison by
    a TRUE or FALSE literal, TRUE even where the term is NULL.
    """
    if value < numbers.LONG_MIN:
        return BoolConst(op in (">", ">="))
    if value > numbers.LONG_MAX:
        return BoolConst(op in ("<", "<="))
    return _compare_exact(op, term, dtype, value)


def _compare_exact(op: str, term: Expr, dtype: pa.DataType, value: decimal.Decimal) -> Predicate:
    """Integer/decimal term against an exact value: the bound rounded to the term's scale."""
    if value.is_nan():
        return IsNull(term, negated=True) if op in ("<", "<=", "!=") else BoolConst(False)
    scale, lowest, highest = exact_scale_and_range(dtype)
    if value > highest:
        return IsNull(term, negated=True) if op in ("<", "<=", "!=") else BoolConst(False)
    if value < lowest:
        return IsNull(term, negated=True) if op in (">", ">=", "!=") else BoolConst(False)
    quantum = decimal.Decimal(1).scaleb(-scale, context=WIDE)
    floor = value.quantize(quantum, rounding=decimal.ROUND_FLOOR, context=WIDE)
    ceiling = value.quantize(quantum, rounding=decimal.ROUND_CEILING, context=WIDE)
    exact = floor == value
    if op == "=":
        return Compare(op, term, _typed(floor, dtype)) if exact else BoolConst(False)
    if op == "!=":
        return Compare(op, term, _typed(floor, dtype)) if exact else IsNull(term, negated=True)
    if op in ("<", "<="):
        op = op if exact else "<="
        return _bounded(op, term, floor, lowest, highest, dtype)
    op = op if exact else ">="
    return _bounded(op, term, ceiling, lowest, highest, dtype)


def _bounded(
    op: str,
    term: Expr,
    bound: decimal.Decimal,
    lowest: decimal.Decimal,
    highest: decimal.Decimal,
    dtype: pa.DataType,
) -> Predicate:
    """Fold a range comparison that every / no value of the type satisfies."""
    always = {
        "<": bound > highest,
        "<=": bound >= highest,
        ">": bound < lowest,
        ">=": bound <= lowest,
    }[op]
    never = {
        "<": bound <= lowest,
        "<=": bound < lowest,
        ">": bound >= highest,
        ">=": bound > highest,
    }[op]
    if never:
        return BoolConst(False)
    if always:
        return IsNull(term, negated=True)
    return Compare(op, term, _typed(bound, dtype))


def _typed(value: decimal.Decimal, dtype: pa.DataType) -> Literal:
    if pa.types.is_decimal(dtype):
        quantum = decimal.Decimal(1).scaleb(-dtype.scale, context=WIDE)
        return Literal(value.quantize(quantum, context=WIDE), dtype)
    return Literal(int(value), dtype)


# ---------------------------------------------------------------- doubles


def _compare_as_double(
    op: str, term: Expr, dtype: pa.DataType, value: float, target: pa.DataType
) -> Predicate:
    """``CAST(term AS DOUBLE) op value``: a float term as is, an exact one through rounding."""
    if family(dtype) == "float":
        return _compare_float(op, term, Literal(value, target))
    if not math.isfinite(value):
        return _compare_exact(op, term, dtype, decimal.Decimal(value))
    return _compare_rounded(op, term, dtype, numbers.double_preimage(value))


def _compare_rounded(op: str, term: Expr, dtype: pa.DataType, p: numbers.Preimage) -> Predicate:
    """An exact term whose values are rounded to a double ``d`` before ``op d``.

    Rounding is monotonic, so ``double(x) op d`` is a range of ``x`` bounded
    by the midpoints between ``d`` and its neighbours (:class:`~.numbers.Preimage`).
    """
    at_low = ">=" if p.closed else ">"  # x rounds to d or above
    below_low = "<" if p.closed else "<="  # x rounds below d
    at_high = "<=" if p.closed else "<"  # x rounds to d or below
    above_high = ">" if p.closed else ">="  # x rounds above d

    def side(side_op: str, bound: decimal.Decimal) -> Predicate:
        return _compare_exact(side_op, term, dtype, bound)

    if op in ("=", "!="):
        low, high = side(at_low, p.low), side(at_high, p.high)
        if isinstance(low, Compare) and isinstance(high, Compare) and low.value == high.value:
            return Compare(op, term, low.value)  # one value of the term's type rounds to d
        if op == "=":
            return _both(term, low, high)
        return _either(term, side(below_low, p.low), side(above_high, p.high))
    if op == "<":
        return side(below_low, p.low)
    if op == "<=":
        return side(at_high, p.high)
    if op == ">":
        return side(above_high, p.high)
    return side(at_low, p.low)


def _not_null(pred: Predicate, term: Expr) -> bool:
    return isinstance(pred, IsNull) and pred.negated and pred.term == term


def _both(term: Expr, a: Predicate, b: Predicate) -> Predicate:
    """WHERE-semantics AND of two folds over one term (each exact in 3-valued logic alone)."""
    if BoolConst(False) in (a, b):
        return BoolConst(False)
    if _not_null(a, term):
        return b
    if _not_null(b, term):
        return a
    return And((a, b))


def _either(term: Expr, a: Predicate, b: Predicate) -> Predicate:
    """WHERE-semantics OR of two folds over one term."""
    if _not_null(a, term) or _not_null(b, term):
        return IsNull(term, negated=True)
    if a == BoolConst(False):
        return b
    if b == BoolConst(False):
        return a
    return Or((a, b))


def _compare_float(op: str, term: Expr, lit: Literal) -> Predicate:
    """Float term and a literal of the comparison type: NaN is the largest value."""
    value = float(lit.value)  # type: ignore[arg-type]
    if math.isnan(value):
        folded: dict[str, Predicate] = {
            "=": Compare("=", term, lit),
            "!=": Compare("!=", term, lit),
            "<": Compare("!=", term, lit),
            "<=": IsNull(term, negated=True),
            ">": BoolConst(False),
            ">=": Compare("=", term, lit),
        }
        return folded[op]
    return Compare(op, term, lit)


# ---------------------------------------------------------------- strings, booleans


def _as_string(lit: Literal, dtype: pa.DataType) -> str:
    if isinstance(lit.value, str):
        return lit.value
    raise _mismatch(lit, dtype, hint="cast explicitly, e.g. CAST(col AS ...) or a quoted literal")


#: the strings Spark casts to a BOOLEAN (trimmed, any case); any other fails the cast
_TRUE_STRINGS = frozenset({"t", "true", "y", "yes", "1"})
_FALSE_STRINGS = frozenset({"f", "false", "n", "no", "0"})


def _compare_bool(op: str, term: Expr, lit: Literal) -> Predicate:
    """Boolean term: ``b = true`` is the predicate ``b``; FALSE < TRUE orders the rest.
    A quoted literal is cast as Spark casts it (``b = 'true'``, ``'yes'``, ``'0'``)."""
    value = lit.value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE_STRINGS | _FALSE_STRINGS:
            value = text in _TRUE_STRINGS
    if not isinstance(value, bool):
        raise _mismatch(lit, pa.bool_())
    v = int(value)
    keep = {
        "=": {v},
        "!=": {1 - v},
        "<": {x for x in (0, 1) if x < v},
        "<=": {x for x in (0, 1) if x <= v},
        ">": {x for x in (0, 1) if x > v},
        ">=": {x for x in (0, 1) if x >= v},
    }[op]
    if not keep:
        return BoolConst(False)
    if len(keep) == 2:
        return IsNull(term, negated=True)
    return BoolTerm(term, negated=keep == {0})


# ---------------------------------------------------------------- dates, timestamps


def _compare_date(op: str, term: Expr, lit: Literal, timezone: str) -> Predicate:
    """Date term; a timestamp literal is compared as Spark does (date at local midnight)."""
    value = lit.value
    if temporal.is_timestamp_value(value):
        assert isinstance(value, dt.datetime | FarTimestamp)
        wall = temporal.timestamp_micros(to_local_naive(value, timezone))
        days, rest = divmod(wall, temporal.MICROS_PER_DAY)
        day = _python_date(days)
        if rest == 0:
            return Compare(op, term, Literal(day, pa.date32()))
        if op == "=":
            return BoolConst(False)
        if op == "!=":
            return IsNull(term, negated=True)
        if op in ("<", "<="):
            return Compare("<=", term, Literal(day, pa.date32()))
        return Compare(">=", term, Literal(_python_date(days + 1), pa.date32()))
    if isinstance(value, dt.date):
        return Compare(op, term, Literal(value, pa.date32()))
    if isinstance(value, str):
        return Compare(op, term, Literal(parse_date(value), pa.date32()))
    raise _mismatch(lit, pa.date32())


def _python_date(days: int) -> dt.date:
    year, month, day = temporal.civil_from_days(days)
    if not 1 <= year <= 9999:
        raise Unrepresentable(f"date of year {year} is beyond what lakelayout models")
    return dt.date(year, month, day)


def _as_timestamp(lit: Literal, dtype: pa.DataType, timezone: str) -> TimestampValue:
    """The literal as a timestamp of the column's kind: aware UTC (LTZ) or naive (NTZ)."""
    value = lit.value
    if isinstance(value, str):
        value = parse_timestamp(value, timezone if dtype.tz is not None else None)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time(0))
    if not temporal.is_timestamp_value(value):
        raise _mismatch(lit, dtype)
    assert isinstance(value, dt.datetime | FarTimestamp)
    if dtype.tz is None:
        return to_local_naive(value, timezone)
    return to_instant(value, timezone)


def zone(name: str) -> dt.tzinfo:
    """A tzinfo for a Spark session time zone name ('UTC', 'Europe/Paris', '+02:00')."""
    try:
        return temporal.zone(name)
    except temporal.InvalidTimestamp:
        raise PredicateError(f"unknown time zone {name!r}") from None


def _is_utc(value: TimestampValue) -> bool:
    return value.utc if isinstance(value, FarTimestamp) else value.tzinfo is not None


def to_local_naive(value: TimestampValue, timezone: str) -> TimestampValue:
    """Wall-clock time of an instant in the session time zone (naive values pass through)."""
    if not _is_utc(value):
        return value
    wall = temporal.to_wall_micros(temporal.timestamp_micros(value), zone(timezone))
    return temporal.timestamp_value(wall, utc=False)


def to_instant(value: TimestampValue, timezone: str) -> TimestampValue:
    """An instant (aware UTC): naive values are wall-clock time in the session time zone."""
    micros = temporal.timestamp_micros(value)
    if not _is_utc(value):
        micros = temporal.to_utc_micros(micros, zone(timezone))
    return temporal.timestamp_value(micros, utc=True)


def parse_date(text: str) -> dt.date:
    """A date from Spark's accepted string forms ('1995', '1995-3', '1995-03-01T...').

    >>> parse_date("1995-3-1"), parse_date("2020-01-01 10:00:00")
    (datetime.date(1995, 3, 1), datetime.date(2020, 1, 1))
    """
    match = _DATE_RE.match(text)
    try:
        if match is None:
            raise ValueError(text)
        year, month, day = (int(g) if g else 1 for g in match.groups())
        if not 1 <= year <= 9999 and 1 <= month <= 12 and 1 <= day <= 31:
            exists = temporal.civil_from_days(temporal.days_from_civil(year, month, day))
            if exists == (year, month, day):  # a real day Spark holds, Python does not
                raise Unrepresentable(
                    f"DATE {text.strip()!r} is outside the years 1-9999 lakelayout holds"
                )
        return dt.date(year, month, day)
    except ValueError:
        raise TypeMismatch(f"{text!r} is not a valid DATE") from None


def parse_timestamp(text: str, timezone: str | None) -> TimestampValue:
    """A timestamp string in Spark's forms; without a zone it is local time in ``timezone``.

    ``timezone`` None parses a TIMESTAMP_NTZ (a zone in the text is ignored, as
    Spark does). Raises :class:`temporal.NonDeterministic` for a time without
    a date.

    >>> parse_timestamp("2020-01-01 10:00", "UTC")
    datetime.datetime(2020, 1, 1, 10, 0, tzinfo=datetime.timezone.utc)
    """
    try:
        return temporal.parse_timestamp_text(text, timezone)
    except temporal.NonDeterministic:
        raise
    except temporal.InvalidTimestamp as err:
        raise TypeMismatch(str(err)) from None


# ---------------------------------------------------------------- literal values as Arrow scalars


def coerce_literal(value: object, dtype: pa.DataType) -> pa.Scalar | None:
    """A literal value as an Arrow scalar of ``dtype``, or ``None`` when that would change it.

    ``None`` covers NaN (Spark orders NaN above every number, bounds exclude it),
    values out of the type's range and lossy conversions (``5.5`` to an integer).
    Timestamps beyond Python's years (:class:`FarTimestamp`) go through their
    microseconds.

    >>> coerce_literal(5, pa.int8()), coerce_literal(5.5, pa.int64()), coerce_literal(300, pa.int8())
    (<pyarrow.Int8Scalar: 5>, None, None)
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) != pa.types.is_boolean(dtype):
        return None
    if isinstance(value, FarTimestamp):
        if not pa.types.is_timestamp(dtype) or (dtype.tz is not None) != value.utc:
            return None
        micros = pa.scalar(value.micros, pa.int64())
        try:
            return micros.cast(pa.timestamp("us", tz=dtype.tz)).cast(dtype)
        except (pa.ArrowException, OverflowError):
            return None
    try:
        scalar = pa.scalar(value, type=dtype)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        try:
            scalar = pa.scalar(value).cast(dtype)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
    if isinstance(value, (int, float, decimal.Decimal)) and scalar.as_py() != value:
        return None
    return scalar


def _mismatch(lit: Literal, dtype: pa.DataType, hint: str = "") -> TypeMismatch:
    message = f"cannot compare {spark_type_name(dtype)} with {lit.sql()}"
    return TypeMismatch(message + (f" ({hint})" if hint else ""))
