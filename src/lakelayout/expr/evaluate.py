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
import unicodedata
from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import PredicateError
from lakelayout.expr import temporal
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
from lakelayout.expr.temporal import FarTimestamp
from lakelayout.expr.types import WIDE, common_type, family, is_string
from lakelayout.expr.visitor import PredicateVisitor, TermVisitor

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
    ctx = _Context(data, timezone)
    try:
        return _Mask(ctx, _Values(ctx)).visit(pred)
    except pa.ArrowException as err:
        raise PredicateError(f"evaluating {pred.sql()!r} failed: {err}") from None


class Evaluator:
    """:func:`evaluate` of many predicates over one batch, every function term computed
    once for all of them (a predicate and its negation, a tree's cuts or a feature
    set's features on the same ``m['k']``, ``lower(s)`` or ``month(ts)`` share it)."""

    def __init__(self, data: Data, *, timezone: str = "UTC") -> None:
        ctx = _Context(data, timezone)
        self._mask = _Mask(ctx, _Values(ctx, memo={}))

    def mask(self, pred: Predicate) -> np.ndarray:
        """The WHERE mask of ``pred`` (as :func:`evaluate`)."""
        try:
            return self._mask.visit(pred)
        except pa.ArrowException as err:
            raise PredicateError(f"evaluating {pred.sql()!r} failed: {err}") from None


def evaluate_all(
    preds: Sequence[Predicate], data: Data, *, timezone: str = "UTC"
) -> list[np.ndarray]:
    """:func:`evaluate` of each predicate, through one :class:`Evaluator`."""
    ev = Evaluator(data, timezone=timezone)
    return [ev.mask(p) for p in preds]


def evaluate_term(term: Expr, data: Data, *, timezone: str = "UTC") -> pa.Array:
    """Values of a term, one per row, as Spark computes them."""
    ctx = _Context(data, timezone)
    try:
        return _as_array(_Values(ctx).visit(term), ctx)
    except pa.ArrowException as err:
        raise PredicateError(f"evaluating {term.sql()!r} failed: {err}") from None


# ---------------------------------------------------------------- predicates


class _Mask(PredicateVisitor[np.ndarray]):
    """A predicate's WHERE mask over the batch: one rule per predicate node."""

    def __init__(self, ctx: _Context, values: _Values) -> None:
        self.ctx = ctx
        self.values = values

    def _term(self, node: Expr) -> Value:
        return self.values.visit(node)

    def visit_and(self, node: And) -> np.ndarray:
        out = np.ones(self.ctx.rows, dtype=bool)
        for child in node.children_:
            out &= self.visit(child)
        return out

    def visit_or(self, node: Or) -> np.ndarray:
        out = np.zeros(self.ctx.rows, dtype=bool)
        for child in node.children_:
            out |= self.visit(child)
        return out

    def visit_not(self, node: Not) -> np.ndarray:
        """NOT over a pushable child is evaluated as the child's negation (3-valued exact)."""
        if isinstance(node.child, Opaque):
            raise PredicateError(f"cannot evaluate {node.sql()!r} outside Spark")
        return self.visit(node.child.negate())

    def visit_bool_const(self, node: BoolConst) -> np.ndarray:
        """TRUE keeps every row; FALSE and NULL none."""
        return np.full(self.ctx.rows, bool(node.value), dtype=bool)

    def visit_opaque(self, node: Opaque) -> np.ndarray:
        raise PredicateError(f"cannot evaluate {node.sql()!r} outside Spark")

    def visit_compare(self, node: Compare) -> np.ndarray:
        return compare_values(node.op, self._term(node.term), self._term(node.value), self.ctx)

    def visit_term_compare(self, node: TermCompare) -> np.ndarray:
        return compare_values(node.op, self._term(node.left), self._term(node.right), self.ctx)

    def visit_in(self, node: In) -> np.ndarray:
        ctx = self.ctx
        values = [self._term(v) for v in node.values]
        arr = _as_array(self._term(node.term), ctx)
        target = common_type([arr.type, *(v.type for v in values)])
        if target is None:
            raise PredicateError(f"cannot evaluate {node.sql()!r}: incompatible IN list")
        arr = _cast(arr, target, ctx)
        if pa.types.is_floating(target):
            hit = np.zeros(ctx.rows, dtype=bool)
            for value in values:
                hit |= _float_compare("=", arr, _cast(value, target, ctx), ctx)
            return _mask(pc.is_valid(arr)) & ~hit if node.negated else hit
        value_set = pa.array([_cast(v, target, ctx) for v in values], type=target)
        hit = _mask(pc.is_in(arr, value_set=value_set))
        valid = _mask(pc.is_valid(arr))
        return valid & ~hit if node.negated else hit

    def visit_is_null(self, node: IsNull) -> np.ndarray:
        value = self._term(node.term)
        if isinstance(value, pa.Scalar):
            return np.full(self.ctx.rows, value.is_valid == node.negated, dtype=bool)
        return _mask(pc.is_valid(value) if node.negated else pc.is_null(value))

    def _string_match(
        self, term: Expr, negated: bool, fn: Callable[[pa.Array], pa.Array]
    ) -> np.ndarray:
        strings = _cast(_as_array(self._term(term), self.ctx), pa.string(), self.ctx)
        hit = fn(strings)
        return _mask(pc.invert(hit) if negated else hit)

    def visit_like(self, node: Like) -> np.ndarray:
        return self._string_match(node.term, node.negated, lambda a: pc.match_like(a, node.pattern))

    def visit_starts_with(self, node: StartsWith) -> np.ndarray:
        return self._string_match(node.term, node.negated, lambda a: pc.starts_with(a, node.prefix))

    def visit_ends_with(self, node: EndsWith) -> np.ndarray:
        return self._string_match(node.term, node.negated, lambda a: pc.ends_with(a, node.suffix))

    def visit_bool_term(self, node: BoolTerm) -> np.ndarray:
        arr = _cast(_as_array(self._term(node.term), self.ctx), pa.bool_(), self.ctx)
        return _mask(pc.invert(arr) if node.negated else arr)


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


class _Values(TermVisitor[Value]):
    """A term's values over the batch: columns, literals, and one rule per function."""

    def __init__(self, ctx: _Context, memo: dict[tuple[Func, str], Value] | None = None) -> None:
        self.ctx = ctx
        #: function values already computed over this batch (None: none kept), by node
        #: and SQL text: ``x + 0.0D`` and ``x + -0.0D`` are equal nodes (``0.0 == -0.0``)
        #: with different values
        self.memo = memo

    def visit_column(self, node: Column) -> Value:
        return _column(node, self.ctx)

    def visit_literal(self, node: Literal) -> Value:
        return literal_scalar(node)

    def visit_func(self, node: Func) -> Value:
        if self.memo is None:
            return self._func(node)
        key = (node, node.sql())
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = self._func(node)
        return value

    def _func(self, node: Func) -> Value:
        fn = _FUNCTIONS.get(node.name)
        if fn is None:
            raise PredicateError(
                f"cannot evaluate {node.sql()!r} outside Spark: {node.name}() is a user "
                "function or not supported by lakelayout's evaluator"
            )
        try:
            return fn(node, self)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise PredicateError(f"evaluating {node.sql()!r} failed: {err}") from None


def literal_scalar(node: Literal) -> pa.Scalar:
    """A literal as the Arrow scalar of its type (far timestamps through their microseconds)."""
    if node.value is None:
        return pa.scalar(None, type=pa.null())
    if isinstance(node.value, FarTimestamp):
        return pa.scalar(node.value.micros, pa.int64()).cast(node.dtype or pa.timestamp("us"))
    return pa.scalar(node.value, type=node.dtype)


def _column(node: Column, ctx: _Context) -> pa.Array:
    """The column's values; a struct field's (NULL where a struct above it is NULL)."""
    try:
        column = ctx.data.column(node.name)
    except KeyError:
        raise PredicateError(f"data has no column '{node.name}'") from None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    for part in node.path:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(part) < 0:
            raise PredicateError(f"data has no field {node.sql()!r}")
        column = column.flatten()[column.type.get_field_index(part)]
    if is_string(column.type) and not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return column


def _as_array(value: Value, ctx: _Context) -> pa.Array:
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, ctx.rows)
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
        _check_trusted(arr.cast(pa.timestamp(target.unit, tz="UTC")), ctx)
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


def _arith(term: Func, v: _Values) -> Value:
    """+ - * with Spark's ANSI overflow errors; date +/- days."""
    ctx = v.ctx
    a, b = (v.visit(x) for x in term.args)
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


def _divide(term: Func, v: _Values) -> Value:
    ctx = v.ctx
    a, b = (_cast(v.visit(x), pa.float64(), ctx) for x in term.args)
    _nonzero_divisor(b, term, ctx)
    return pc.divide(a, b)


def _remainder(term: Func, v: _Values) -> Value:
    """Spark's ``%``: the sign of the dividend (C fmod), for integers, doubles and decimals."""
    ctx = v.ctx
    target = term.dtype
    assert target is not None
    a, b = (_as_array(v.visit(x), ctx) for x in term.args)
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


def _negative(term: Func, v: _Values) -> Value:
    return pc.negate_checked(v.visit(term.args[0]))


def _abs(term: Func, v: _Values) -> Value:
    return pc.abs_checked(v.visit(term.args[0]))


def _local_temporal(value: Value, ctx: _Context) -> Value:
    """Timestamps as wall-clock time in the session zone (Spark's datetime functions);
    PredicateError for one before 1970 in a region zone (:func:`temporal.check_trusted`)."""
    if pa.types.is_timestamp(value.type) and value.type.tz is not None:
        _check_trusted(value, ctx)
        return value.cast(pa.timestamp(value.type.unit, tz=ctx.timezone))
    return value


def _check_trusted(value: Value, ctx: _Context) -> None:
    tz = temporal.zone(ctx.timezone)
    if temporal.trusted_zone(tz):
        return
    earliest = pc.min(_as_array(value, ctx).cast(pa.timestamp("us", tz="UTC"))).as_py()
    if earliest is None:
        return
    try:
        temporal.check_trusted(tz, temporal.timestamp_micros(earliest))
    except temporal.UncertainOffset as err:
        raise PredicateError(f"{LEFT_TO_SPARK}: {err}") from None


def _date_part(term: Func, v: _Values) -> Value:
    ctx = v.ctx
    value = _local_temporal(_as_array(v.visit(term.args[0]), ctx), ctx)
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


def _to_date(term: Func, v: _Values) -> Value:
    """``CAST(ts AS DATE)``: the day of the wall-clock time in the session zone (of a
    TIMESTAMP_NTZ: its own day); days before the epoch round down."""
    ctx = v.ctx
    value = _as_array(v.visit(term.args[0]), ctx)
    if pa.types.is_timestamp(value.type) and value.type.tz is not None:
        value = pc.local_timestamp(_local_temporal(value, ctx))
    return value.cast(pa.date32())


def _string_arg(term: Func, v: _Values) -> pa.Array:
    return _cast(_as_array(v.visit(term.args[0]), v.ctx), pa.string(), v.ctx)


def _lower(term: Func, v: _Values) -> Value:
    return _case_mapped(_string_arg(term, v), pc.ascii_lower, str.lower)


def _upper(term: Func, v: _Values) -> Value:
    return _case_mapped(_string_arg(term, v), pc.ascii_upper, str.upper)


def _case_mapped(
    values: pa.Array, ascii_fn: Callable[[pa.Array], pa.Array], full: Callable[[str], str]
) -> pa.Array:
    """Spark's upper()/lower(): Unicode's full case mapping ('ß' -> 'SS', 'İ' -> 'i̇', a
    final 'Σ' -> 'ς'), as Java's and Python's string methods do. Arrow's utf8_upper and
    utf8_lower map one character to one ('ß' stays 'ß'), so a file or index value
    holding such a character was judged not to match, and skipped. ASCII text (the
    common case) takes Arrow's kernel; the rest goes through Python's methods."""
    if pc.all(pc.string_is_ascii(values)).as_py() is not False:
        return ascii_fn(values)
    out: list[str | None] = []
    for text in values.to_pylist():
        doubt = None if text is None else uncertain_case(text)
        if doubt is not None:
            raise PredicateError(
                f"the case mapping of {doubt!r} (U+{ord(doubt):04X}) may differ between "
                f"Python's Unicode {unicodedata.unidata_version} tables and Spark's (ICU): "
                f"{LEFT_TO_SPARK}"
            )
        out.append(None if text is None else full(text))
    return pa.array(out, pa.string())


#: the words of a PredicateError for a value whose answer only Spark knows (callers that
#: evaluate file values leave those files undecided)
LEFT_TO_SPARK = "not evaluated outside Spark"


def uncertain_case(text: str) -> str | None:
    """The first character of ``text`` whose upper or lower case Python's Unicode tables
    may not know as Spark does (None: every mapping is shared).

    Spark 4.2 maps case with ICU (Unicode 17), Python 3.11 with Unicode 14: 'ƛ' has an
    upper case since Unicode 16 (U+A7DC), so a file holding it was skipped for
    ``upper(s) = '\ua7dc'`` and DELETE removed rows Spark kept (an audit). Unicode's
    case-pair stability keeps every mapping Python knows; a newer version only adds
    mappings to characters that had none: ones Python does not know (unassigned) and
    cased letters without a partner.
    """
    for ch in text:
        if ch < "\x80":
            continue
        category = unicodedata.category(ch)
        if (
            category == "Cn"
            or (category == "Ll" and ch.upper() == ch)
            or (category == "Lu" and ch.lower() == ch)
        ):
            return ch
    return None


def _length(term: Func, v: _Values) -> Value:
    return pc.utf8_length(_string_arg(term, v)).cast(pa.int32())


def _literal_int(term: Expr, what: str) -> int | None:
    if not isinstance(term, Literal) or not isinstance(term.value, int | None):
        raise PredicateError(f"cannot evaluate substring() with a non-literal {what}")
    return term.value


def _substring(term: Func, v: _Values) -> Value:
    """Spark's substring(s, pos[, len]): 1-based, pos 0 acts as 1, negative pos from the end."""
    strings = _string_arg(term, v)
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


def _coalesce(term: Func, v: _Values) -> Value:
    ctx = v.ctx
    target = term.dtype
    assert target is not None
    args = [_cast(_as_array(v.visit(a), ctx), target, ctx) for a in term.args]
    return pc.coalesce(*args)


def _element(term: Func, v: _Values) -> Value:
    ctx = v.ctx
    base = _as_array(v.visit(term.args[0]), ctx)
    key = v.visit(term.args[1]).cast(base.type.key_type)
    if not isinstance(key, pa.Scalar) or not _exact_keys(key.type):
        return pc.map_lookup(base, query_key=key, occurrence="first")
    if isinstance(base, pa.ChunkedArray):
        return pa.chunked_array([_map_first(c, key) for c in base.chunks], base.type.item_type)
    return _map_first(base, key)


def _exact_keys(t: pa.DataType) -> bool:
    """Key types :func:`_map_first` serves: those whose ``==`` has one answer and that
    ``pc.map_lookup`` supports too (floating keys, where NaN and -0.0 make equality a
    question of semantics, go to ``map_lookup``, which refuses them: unknown)."""
    return (
        pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
        or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
        or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_decimal(t)
    )  # fmt: skip


def _map_first(maps: pa.MapArray, key: pa.Scalar) -> pa.Array:
    """``maps[key]``: the value of each map's first entry whose key equals ``key``, NULL
    where there is none or the map is NULL (``pc.map_lookup(..., occurrence="first")``,
    which tests the maps one by one: ~7x slower over a sample of 50,000 small maps)."""
    offsets = np.asarray(maps.offsets, dtype=np.int64)  # into the unsliced entries
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys, values = maps.keys.slice(lo, hi - lo), maps.items.slice(lo, hi - lo)
    hits = np.flatnonzero(pc.fill_null(pc.equal(keys, key), False).to_numpy(zero_copy_only=False))
    owner = np.searchsorted(offsets, hits + lo, side="right") - 1  # the map holding each hit
    found, first = np.unique(owner, return_index=True)  # the first hit of each map
    at = np.full(len(maps), -1, dtype=np.int64)
    at[found] = hits[first]
    if maps.null_count:
        at[maps.is_null().to_numpy(zero_copy_only=False)] = -1
    return values.take(pa.array(at, mask=at < 0))


def _date_trunc(term: Func, v: _Values) -> Value:
    ctx = v.ctx
    unit_lit = term.args[0]
    assert isinstance(unit_lit, Literal)
    unit = _DATE_TRUNC_UNITS.get(str(unit_lit.value).upper())
    value = _as_array(v.visit(term.args[1]), ctx)
    if unit is None:
        return pa.nulls(len(value), term.dtype)
    if pa.types.is_date(value.type):
        value = _cast(value, pa.timestamp("us", tz="UTC"), ctx)
    local = _local_temporal(value, ctx)
    floored = pc.floor_temporal(local, unit=unit, week_starts_monday=True)
    assert term.dtype is not None
    return floored.cast(term.dtype)


def _date_format(term: Func, v: _Values) -> Value:
    """Spark's ``date_format`` for fixed-width patterns (``yyyy``, ``MM``, ``dd``, ``HH``, ``mm``, ``ss``).

    Years outside 0..9999 (which Spark writes with a sign) are not evaluated.
    """
    pattern = term.args[1]
    assert isinstance(pattern, Literal) and isinstance(pattern.value, str)
    value = _as_array(v.visit(term.args[0]), v.ctx)
    if pa.types.is_date(value.type):
        value = value.cast(pa.timestamp("s"))
    local = _local_temporal(value, v.ctx)
    years = pc.year(local)
    if pc.any(pc.or_(pc.less(years, 0), pc.greater(years, 9999))).as_py():
        raise PredicateError(f"cannot evaluate {term.sql()!r}: a year outside 0..9999")
    # whole seconds: Arrow's %S prints a finer unit's fraction ('00.000000'), Spark's ss not
    unit = local.type.unit if pa.types.is_timestamp(local.type) else "s"
    if unit != "s":
        local = pc.floor_temporal(local, unit="second").cast(pa.timestamp("s", tz=local.type.tz))
    return pc.strftime(local, format=_strftime(pattern.value))


def _strftime(pattern: str) -> str:
    fields = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
    out, i = [], 0
    while i < len(pattern):
        for field, code in fields.items():
            if pattern.startswith(field, i):
                out.append(code)
                i += len(field)
                break
        else:
            out.append(pattern[i].replace("%", "%%"))
            i += 1
    return "".join(out)


def _cast_function(term: Func, v: _Values) -> Value:
    """``CAST(x AS STRING)`` as Spark writes values (decimals plainly, with their scale).

    Dates outside years 0..9999 (which Spark writes with a sign) are not evaluated.
    """
    target = term.dtype
    assert target is not None
    value = _as_array(v.visit(term.args[0]), v.ctx)
    if pa.types.is_date(value.type):
        years = pc.year(value)
        if pc.any(pc.or_(pc.less(years, 0), pc.greater(years, 9999))).as_py():
            raise PredicateError(f"cannot evaluate {term.sql()!r}: a year outside 0..9999")
    if pa.types.is_string(target) and pa.types.is_decimal(value.type):
        texts = [None if d is None else format(d, "f") for d in value.to_pylist()]
        return pa.array(texts, pa.string())
    if pa.types.is_string(target) and is_string(value.type):
        return value.cast(pa.string())
    return value.cast(target)


_FUNCTIONS: dict[str, Callable[[Func, _Values], Value]] = {
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
    "date_format": _date_format,
    "to_date": _to_date,
    "cast": _cast_function,
}


def evaluable(node: Expr) -> bool:
    """Whether :func:`evaluate` / :func:`evaluate_term` can compute ``node`` outside Spark.

    False for opaque text and for functions this evaluator does not model
    (Python UDFs among them).
    """
    for part in node.walk():
        if isinstance(part, Opaque):
            return False
        if isinstance(part, Func) and part.name not in _FUNCTIONS:
            return False
    return True


#: functions Spark (ANSI) evaluates without raising on any value of the types they take
_NEVER_FAIL = frozenset(
    {
        "year", "quarter", "month", "dayofmonth", "dayofweek", "dayofyear", "hour",
        "minute", "second", "lower", "upper", "length", "substring", "coalesce",
        "date_trunc",
    }
)  # fmt: skip


def may_fail_in_spark(node: Expr) -> bool:
    """Whether Spark may raise evaluating ``node`` on some row (ANSI overflow, division by
    zero, a cast or element that fails, text lakelayout leaves to Spark), so its answer on
    a file cannot be known from statistics alone: a DELETE must let Spark evaluate every
    file it would drop whole (Spark's and Delta's DELETE fail; lakelayout deleted a file
    whose every row satisfied ``i >= 0`` of ``s = 5 OR i >= 0`` though Spark failed on
    ``s = 5``; a review). Casts to a string, between DATE and TIMESTAMP and between
    integers widening never fail."""
    for part in node.walk():
        if isinstance(part, Opaque):
            return True
        if isinstance(part, Func) and part.name not in _NEVER_FAIL:
            if part.name == "cast" and _cast_never_fails(part):
                continue
            return True
    return False


def _cast_never_fails(cast: Func) -> bool:
    source = getattr(cast.args[0], "dtype", None) if cast.args else None
    target = cast.dtype
    if source is None or target is None:
        return False
    if is_string(target):
        return True
    kinds = (family(source), family(target))
    if kinds in {("date", "timestamp"), ("timestamp", "date"), ("date", "date")}:
        return True
    return (
        kinds == ("int", "int")
        and pa.types.is_integer(source)
        and pa.types.is_integer(target)
        and target.bit_width >= source.bit_width
    )


__all__ = ["compare_values", "evaluable", "evaluate", "evaluate_term", "may_fail_in_spark"]
