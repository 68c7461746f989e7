"""Evaluating bound predicates on Arrow data with Spark's WHERE semantics.

``evaluate(pred, data)`` is True exactly on the rows ``df.where(sql)`` keeps:

* a predicate that is NULL keeps nothing. Because NOT has been pushed to the
  leaves (a :class:`Not` only wraps an :class:`Opaque`, which cannot be
  evaluated here), AND / OR are monotone and NULL can be folded to FALSE at
  each leaf: a two-valued mask per node is exact;
* doubles follow Spark's total order: NaN = NaN is true and NaN is greater than
  every other value (including +Infinity); -0.0 = 0.0;
* strings compare by code point (UTF-8 byte order, as Arrow does);
* ANSI errors are errors here too: integer overflow, division or remainder by
  zero raise :class:`PredicateError` instead of producing a value.

Evaluation is vectorized with ``pyarrow.compute`` and numpy; UDFs and opaque
predicates raise: only Spark can evaluate them.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import PredicateError
from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    StartsWith,
    TermCompare,
)
from lakelayout.expr.types import WIDE, common_type, family, is_string

Data: TypeAlias = "pa.Table | pa.RecordBatch"
Value: TypeAlias = "pa.Array | pa.Scalar"

_DATE_TRUNC_UNITS = {
    "YEAR": "year",
    "YYYY": "year",
    "YY": "year",
    "QUARTER": "quarter",
    "MONTH": "month",
    "MM": "month",
    "MON": "month",
    "WEEK": "week",
    "DAY": "day",
    "DD": "day",
    "HOUR": "hour",
    "MINUTE": "minute",
    "SECOND": "second",
    "MILLISECOND": "millisecond",
    "MICROSECOND": "microsecond",
}


class _Context:
    """The batch being evaluated and the session time zone (for LTZ timestamps)."""

    def __init__(self, data: Data, timezone: str) -> None:
        self.data = data
        self.rows = data.num_rows
        self.timezone = timezone


def evaluate(pred: Predicate, data: Data, *, timezone: str = "UTC") -> np.ndarray:
    """Boolean mask (numpy, one per row): True where Spark's WHERE keeps the row.

    >>> t = pa.table({"x": [1.0, float("nan"), None]})
    >>> evaluate(Compare(">", Column("x", pa.float64()), Literal(5.0, pa.float64())), t)
    array([False,  True, False])
    """
    try:
        return _predicate(pred, _Context(data, timezone))
    except pa.ArrowException as err:
        raise PredicateError(f"evaluating {pred.sql()!r} failed: {err}") from None


def evaluate_term(term: Expr, data: Data, *, timezone: str = "UTC") -> pa.Array:
    """Values of a term, one per row, as Spark computes them."""
    ctx = _Context(data, timezone)
    try:
        value = _term(term, ctx)
    except pa.ArrowException as err:
        raise PredicateError(f"evaluating {term.sql()!r} failed: {err}") from None
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * ctx.rows, type=value.type)
    return value


# ---------------------------------------------------------------- predicates


def _predicate(pred: Predicate, ctx: _Context) -> np.ndarray:
    handler = _PREDICATES.get(type(pred))
    if handler is None:
        raise PredicateError(f"cannot evaluate {pred.sql()!r} outside Spark")
    return handler(pred, ctx)


def _and(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, And)
    out = np.ones(ctx.rows, dtype=bool)
    for child in pred.children_:
        out &= _predicate(child, ctx)
    return out


def _or(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, Or)
    out = np.zeros(ctx.rows, dtype=bool)
    for child in pred.children_:
        out |= _predicate(child, ctx)
    return out


def _not(pred: Predicate, ctx: _Context) -> np.ndarray:
    """NOT over a pushable child is evaluated as the child's negation (3-valued exact)."""
    assert isinstance(pred, Not)
    negated = pred.child.negate()
    if isinstance(negated, Not) or isinstance(pred.child, Opaque):
        raise PredicateError(f"cannot evaluate {pred.sql()!r} outside Spark")
    return _predicate(negated, ctx)


def _const(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, BoolConst)
    return np.full(ctx.rows, pred.value, dtype=bool)


def _compare(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, Compare)
    return compare_values(pred.op, _term(pred.term, ctx), _term(pred.value, ctx), ctx)


def _term_compare(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, TermCompare)
    return compare_values(pred.op, _term(pred.left, ctx), _term(pred.right, ctx), ctx)


def _in(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, In)
    values = [_term(v, ctx) for v in pred.values]
    arr = _as_array(_term(pred.term, ctx), ctx)
    target = common_type([arr.type, *(v.type for v in values)])
    if target is None:
        raise PredicateError(f"cannot evaluate {pred.sql()!r}: incompatible IN list")
    arr = _cast(arr, target, ctx)
    if pa.types.is_floating(target):
        hit = np.zeros(ctx.rows, dtype=bool)
        for value in values:
            hit |= _float_compare("=", arr, _cast(value, target, ctx), ctx)
        return _mask(pc.is_valid(arr)) & ~hit if pred.negated else hit
    value_set = pa.array([_cast(v, target, ctx).as_py() for v in values], type=target)
    hit = _mask(pc.is_in(arr, value_set=value_set))
    valid = _mask(pc.is_valid(arr))
    return valid & ~hit if pred.negated else hit


def _is_null(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, IsNull)
    value = _term(pred.term, ctx)
    if isinstance(value, pa.Scalar):
        return np.full(ctx.rows, value.is_valid == pred.negated, dtype=bool)
    return _mask(pc.is_valid(value) if pred.negated else pc.is_null(value))


def _string_match(
    arr: Value, ctx: _Context, negated: bool, fn: Callable[[pa.Array], pa.Array]
) -> np.ndarray:
    strings = _cast(_as_array(arr, ctx), pa.string(), ctx)
    hit = fn(strings)
    return _mask(pc.invert(hit) if negated else hit)


def _like(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, Like)
    return _string_match(
        _term(pred.term, ctx), ctx, pred.negated, lambda a: pc.match_like(a, pred.pattern)
    )


def _starts(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, StartsWith)
    return _string_match(
        _term(pred.term, ctx), ctx, pred.negated, lambda a: pc.starts_with(a, pred.prefix)
    )


def _ends(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, EndsWith)
    return _string_match(
        _term(pred.term, ctx), ctx, pred.negated, lambda a: pc.ends_with(a, pred.suffix)
    )


def _bool_term(pred: Predicate, ctx: _Context) -> np.ndarray:
    assert isinstance(pred, BoolTerm)
    arr = _cast(_as_array(_term(pred.term, ctx), ctx), pa.bool_(), ctx)
    return _mask(pc.invert(arr) if pred.negated else arr)


_PREDICATES: dict[type, Callable[[Predicate, _Context], np.ndarray]] = {
    And: _and,
    Or: _or,
    Not: _not,
    BoolConst: _const,
    Compare: _compare,
    TermCompare: _term_compare,
    In: _in,
    IsNull: _is_null,
    Like: _like,
    StartsWith: _starts,
    EndsWith: _ends,
    BoolTerm: _bool_term,
}


# ---------------------------------------------------------------- comparisons


def compare_values(op: str, left: Value, right: Value, ctx: _Context) -> np.ndarray:
    """``left op right`` under Spark's ordering, NULL folded to False."""
    target = common_type([left.type, right.type])
    if target is None:
        raise PredicateError(f"cannot compare {left.type} with {right.type}")
    left, right = _cast(left, target, ctx), _cast(right, target, ctx)
    if pa.types.is_floating(target):
        return _float_compare(op, left, right, ctx)
    fn = {
        "=": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[op]
    out = fn(left, right)
    if isinstance(out, pa.Scalar):
        return np.full(ctx.rows, bool(out.as_py()), dtype=bool)
    return _mask(out)


def _float_compare(op: str, left: Value, right: Value, ctx: _Context) -> np.ndarray:
    """Spark's total order on doubles: NaN equals NaN and sorts above +Infinity."""
    lv, lvalid = _float_numpy(left, ctx)
    rv, rvalid = _float_numpy(right, ctx)
    lnan, rnan = np.isnan(lv), np.isnan(rv)
    with np.errstate(invalid="ignore"):
        eq = (lv == rv) | (lnan & rnan)
        lt = ~lnan & (rnan | (lv < rv))
        gt = ~rnan & (lnan | (lv > rv))
    result = {"=": eq, "!=": ~eq, "<": lt, "<=": lt | eq, ">": gt, ">=": gt | eq}[op]
    return np.asarray(result & lvalid & rvalid, dtype=bool)


def _float_numpy(value: Value, ctx: _Context) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(value, pa.Scalar):
        if not value.is_valid:
            return np.zeros(ctx.rows), np.zeros(ctx.rows, dtype=bool)
        return np.full(ctx.rows, float(value.as_py())), np.ones(ctx.rows, dtype=bool)
    valid = _mask(pc.is_valid(value))
    filled = pc.fill_null(value, 0.0).to_numpy(zero_copy_only=False)
    return np.asarray(filled, dtype=np.float64), valid


# ---------------------------------------------------------------- terms


def _term(term: Expr, ctx: _Context) -> Value:
    if isinstance(term, Column):
        return _column(term.name, ctx)
    if isinstance(term, Literal):
        dtype = term.dtype if term.value is not None else pa.null()
        return pa.scalar(term.value, type=dtype)
    if isinstance(term, Func):
        fn = _FUNCTIONS.get(term.name)
        if fn is None:
            raise PredicateError(
                f"cannot evaluate {term.sql()!r} outside Spark: {term.name}() is a user "
                "function or not supported by lakelayout's evaluator"
            )
        try:
            return fn(term, ctx)
        except pa.ArrowInvalid as err:
            raise PredicateError(f"evaluating {term.sql()!r} failed: {err}") from None
    raise PredicateError(f"cannot evaluate {term.sql()!r} outside Spark")


def _column(name: str, ctx: _Context) -> pa.Array:
    try:
        column = ctx.data.column(name)
    except KeyError:
        raise PredicateError(f"data has no column '{name}'") from None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if is_string(column.type) and not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return column


def _as_array(value: Value, ctx: _Context) -> pa.Array:
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * ctx.rows, type=value.type)
    return value


def _cast(value: Value, target: pa.DataType, ctx: _Context) -> Value:
    """Cast to ``target``; dates become local midnight when widened to an LTZ timestamp."""
    if value.type.equals(target):
        return value
    if pa.types.is_date(value.type) and pa.types.is_timestamp(target):
        naive = value.cast(pa.timestamp(target.unit))
        if target.tz is None:
            return naive
        arr = _as_array(naive, ctx)
        return pc.assume_timezone(arr, ctx.timezone).cast(target)
    if pa.types.is_null(value.type):
        return pa.scalar(None, target) if isinstance(value, pa.Scalar) else value.cast(target)
    if pa.types.is_floating(target) and pa.types.is_decimal(value.type):
        return _decimal_to_float(value, target)
    if pa.types.is_floating(target) and pa.types.is_integer(value.type):
        return value.cast(target, safe=False)  # nearest double, as Spark's cast (not an error)
    return value.cast(target, safe=not pa.types.is_timestamp(target))


def _decimal_to_float(value: Value, target: pa.DataType) -> Value:
    """DECIMAL to DOUBLE correctly rounded, as Spark (Java's BigDecimal.doubleValue) does.

    Arrow's cast is not correctly rounded for wide decimals (a DECIMAL(38, s)
    value can land one double away from Spark's).
    """
    if isinstance(value, pa.Scalar):
        py = value.as_py()
        return pa.scalar(None if py is None else float(py), target)
    return pa.array([None if v is None else float(v) for v in value.to_pylist()], target)


def _mask(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _arith(term: Func, ctx: _Context) -> Value:
    """+ - * with Spark's ANSI overflow errors; date +/- days."""
    a, b = (_term(x, ctx) for x in term.args)
    target = term.dtype
    assert target is not None
    if pa.types.is_date(target):
        days = [_cast(x, pa.int32(), ctx) if pa.types.is_date(x.type) else x for x in (a, b)]
        days = [_cast(x, pa.int32(), ctx) for x in days]
        fn = pc.add_checked if term.name == "+" else pc.subtract_checked
        return _cast(fn(days[0], days[1]), pa.date32(), ctx)
    fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[term.name]
    if family(target) == "decimal":
        result = fn(a, b)
        return result.cast(target)
    return fn(_cast(a, target, ctx), _cast(b, target, ctx))


def _nonzero_divisor(divisor: Value, term: Func, ctx: _Context) -> None:
    zero = compare_values("=", divisor, pa.scalar(0, pa.int8()), ctx)
    if zero.any():
        kind = "division" if term.name == "/" else "remainder"
        raise PredicateError(f"{kind} by zero in {term.sql()!r} (Spark raises DIVIDE_BY_ZERO)")


def _divide(term: Func, ctx: _Context) -> Value:
    a, b = (_cast(_term(x, ctx), pa.float64(), ctx) for x in term.args)
    _nonzero_divisor(b, term, ctx)
    return pc.divide(a, b)


def _remainder(term: Func, ctx: _Context) -> Value:
    """Spark's ``%``: the sign of the dividend (C fmod), for integers, doubles and decimals."""
    target = term.dtype
    assert target is not None
    a, b = (_as_array(_term(x, ctx), ctx) for x in term.args)
    _nonzero_divisor(b, term, ctx)
    if family(target) == "decimal":
        values = [
            None
            if x is None or y is None
            else WIDE.remainder(decimal.Decimal(x), decimal.Decimal(y))
            for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)
        ]
        return pa.array(values, type=pa.decimal128(38, target.scale)).cast(target)
    a, b = _cast(a, target, ctx), _cast(b, target, ctx)
    valid = pc.and_(pc.is_valid(a), pc.is_valid(b))
    an = pc.fill_null(a, 0).to_numpy(zero_copy_only=False)
    bn = pc.fill_null(b, 1).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.fmod(an, np.where(bn == 0, 1, bn))
    return pa.array(out, type=target, mask=~_mask(valid))


def _negative(term: Func, ctx: _Context) -> Value:
    return pc.negate_checked(_term(term.args[0], ctx))


def _abs(term: Func, ctx: _Context) -> Value:
    return pc.abs_checked(_term(term.args[0], ctx))


def _local_temporal(value: Value, ctx: _Context) -> Value:
    """Timestamps as wall-clock time in the session zone (Spark's datetime functions)."""
    if pa.types.is_timestamp(value.type) and value.type.tz is not None:
        return value.cast(pa.timestamp(value.type.unit, tz=ctx.timezone))
    return value


def _date_part(term: Func, ctx: _Context) -> Value:
    value = _local_temporal(_as_array(_term(term.args[0], ctx), ctx), ctx)
    if pa.types.is_date(value.type) and term.name in ("hour", "minute", "second"):
        return pc.if_else(pc.is_valid(value), 0, None).cast(pa.int32())
    part = {
        "year": pc.year,
        "quarter": pc.quarter,
        "month": pc.month,
        "dayofmonth": pc.day,
        "dayofyear": pc.day_of_year,
        "hour": pc.hour,
        "minute": pc.minute,
        "second": pc.second,
    }
    if term.name == "dayofweek":
        return pc.day_of_week(value, count_from_zero=False, week_start=7).cast(pa.int32())
    return part[term.name](value).cast(pa.int32())


def _string_arg(term: Func, ctx: _Context) -> pa.Array:
    return _cast(_as_array(_term(term.args[0], ctx), ctx), pa.string(), ctx)


def _lower(term: Func, ctx: _Context) -> Value:
    return pc.utf8_lower(_string_arg(term, ctx))


def _upper(term: Func, ctx: _Context) -> Value:
    return pc.utf8_upper(_string_arg(term, ctx))


def _length(term: Func, ctx: _Context) -> Value:
    return pc.utf8_length(_string_arg(term, ctx)).cast(pa.int32())


def _literal_int(term: Expr, what: str) -> int | None:
    if not isinstance(term, Literal) or not isinstance(term.value, int | None):
        raise PredicateError(f"cannot evaluate substring() with a non-literal {what}")
    return term.value


def _substring(term: Func, ctx: _Context) -> Value:
    """Spark's substring(s, pos[, len]): 1-based, pos 0 acts as 1, negative pos from the end."""
    strings = _string_arg(term, ctx)
    pos = _literal_int(term.args[1], "position")
    length = _literal_int(term.args[2], "length") if len(term.args) > 2 else 2**31 - 1
    if pos is None or length is None:
        return pa.nulls(len(strings), pa.string())
    if pos > 0:
        start = pos - 1
        return pc.utf8_slice_codeunits(strings, start, max(start, start + length))
    if pos == 0:
        return pc.utf8_slice_codeunits(strings, 0, max(0, length))
    stop = pos + length
    if length <= 0:
        return pc.utf8_slice_codeunits(strings, 0, 0)
    if stop >= 0:
        return pc.utf8_slice_codeunits(strings, pos)
    return pc.utf8_slice_codeunits(strings, pos, stop)


def _coalesce(term: Func, ctx: _Context) -> Value:
    target = term.dtype
    assert target is not None
    args = [_cast(_as_array(_term(a, ctx), ctx), target, ctx) for a in term.args]
    return pc.coalesce(*args)


def _element(term: Func, ctx: _Context) -> Value:
    base = _as_array(_term(term.args[0], ctx), ctx)
    key = _term(term.args[1], ctx)
    return pc.map_lookup(base, query_key=key.cast(base.type.key_type), occurrence="first")


def _date_trunc(term: Func, ctx: _Context) -> Value:
    unit_lit = term.args[0]
    assert isinstance(unit_lit, Literal)
    unit = _DATE_TRUNC_UNITS.get(str(unit_lit.value).upper())
    value = _as_array(_term(term.args[1], ctx), ctx)
    if unit is None:
        return pa.nulls(len(value), term.dtype)
    if pa.types.is_date(value.type):
        value = _cast(value, pa.timestamp("us", tz="UTC"), ctx)
    local = _local_temporal(value, ctx)
    floored = pc.floor_temporal(local, unit=unit, week_starts_monday=True)
    assert term.dtype is not None
    return floored.cast(term.dtype)


_FUNCTIONS: dict[str, Callable[[Func, _Context], Value]] = {
    "+": _arith,
    "-": _arith,
    "*": _arith,
    "/": _divide,
    "%": _remainder,
    "negative": _negative,
    "abs": _abs,
    "year": _date_part,
    "quarter": _date_part,
    "month": _date_part,
    "dayofmonth": _date_part,
    "dayofweek": _date_part,
    "dayofyear": _date_part,
    "hour": _date_part,
    "minute": _date_part,
    "second": _date_part,
    "lower": _lower,
    "upper": _upper,
    "length": _length,
    "substring": _substring,
    "coalesce": _coalesce,
    "[]": _element,
    "date_trunc": _date_trunc,
}

__all__ = ["compare_values", "evaluate", "evaluate_term"]
