"""Spark's numeric comparisons: the type both sides are cast to, and what that cast rounds.

``term op literal`` is not an exact comparison of two numbers in Spark 4 (ANSI
mode); both sides are first cast to one *comparison type*, and casts round:

* a DOUBLE / FLOAT anywhere makes it DOUBLE (FLOAT only when both are FLOAT):
  ``bigint_col = 9007199254740992e0`` holds for 9007199254740993, whose double
  is 9007199254740992. The term's values are rounded to the nearest double
  (ties to even), so the rows that satisfy the comparison are the values lying
  in the interval of reals that round to the literal (:func:`double_preimage`);
* two DECIMALs (an integral type counts as DECIMAL(3|5|10|20, 0), an integer
  literal as the digits it needs) go to their wider decimal type; past 38
  digits Spark keeps the integral digits and drops fraction digits
  (``boundedPreferIntegralDigits``), rounding HALF_UP: ``int_col = 1E-38``
  compares with 0 and holds for 0. When the *term* would be rounded too, the
  comparison is not modelled (:class:`NotModelled`; the binder keeps it as an
  opaque predicate, which never skips);
* an integral term against a decimal literal in ``<  <=  >  >=`` is reduced
  to an integer comparison (floor/ceil), and a literal beyond the BIGINT range
  folds the comparison to a TRUE or FALSE *literal*: ``int_col > -1E30`` is
  TRUE even where ``int_col`` is NULL;
* a STRING literal is cast to BIGINT against an integral term (``'5.0'`` is an
  error) and to DOUBLE against a decimal or floating one;
* an IN list has one comparison type for the term and all its values.

Checked against Spark 4.2 (``tests/expr/test_spark_numbers.py``).
"""

from __future__ import annotations

import decimal
import math
import re
import struct
from dataclasses import dataclass

import pyarrow as pa

from lakelayout.expr.nodes import Literal
from lakelayout.expr.types import WIDE, family, spark_type_name, wider_decimal

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")
_RANGE_OPS = frozenset({"<", "<=", ">", ">="})


class NotModelled(Exception):
    """Spark's comparison rounds the term's own values: lakelayout does not model it."""


class BadLiteral(ValueError):
    """A literal Spark cannot cast to the comparison type (Spark raises an error)."""


# ---------------------------------------------------------------- types


def integral_decimal(dtype: pa.DataType) -> pa.DataType:
    """Spark's ``DecimalType.forType``: the decimal holding every value of an integral type."""
    return pa.decimal128({8: 3, 16: 5, 32: 10, 64: 20}[dtype.bit_width], 0)


def literal_type(lit: Literal) -> pa.DataType:
    """The Spark type of a bound literal (what the parser typed it as)."""
    value = lit.value
    if lit.dtype is not None and not pa.types.is_null(lit.dtype):
        return lit.dtype
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int32() if -(2**31) <= value < 2**31 else pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, decimal.Decimal):
        return _decimal_type_of(value)
    return pa.string()


def _decimal_type_of(value: decimal.Decimal) -> pa.DataType:
    digits = value.as_tuple()
    exponent = digits.exponent if isinstance(digits.exponent, int) else 0
    scale = max(0, -exponent)
    return pa.decimal128(max(len(digits.digits) + max(0, exponent), scale, 1), scale)


def _as_decimal_type(dtype: pa.DataType, value: object, *, minimal: bool) -> pa.DataType:
    """A numeric literal's or term's type in decimal comparisons (integers widened)."""
    if pa.types.is_decimal(dtype):
        return dtype
    if minimal and isinstance(value, int):
        return pa.decimal128(max(1, len(str(abs(value)))), 0)
    return integral_decimal(dtype)


def comparison_type(op: str, term_type: pa.DataType, lit: Literal, *, via: str) -> pa.DataType:
    """The type Spark casts ``term`` and ``lit`` to for ``term op lit``.

    ``via`` says where the comparison comes from: ``"compare"`` (a plain
    comparison, BETWEEN and ``<=>`` included) or ``"in"`` (an IN list of one
    value; longer lists use :func:`in_list_type`).
    See :func:`strength_reduced` for the case Spark turns into an integer comparison.
    """
    lit_type = literal_type(lit)
    fam, lit_fam = family(term_type), family(lit_type)
    if lit_fam == "string":
        return pa.int64() if fam == "int" else pa.float64()
    if "float" in (fam, lit_fam):
        both32 = pa.types.is_float32(term_type) and pa.types.is_float32(lit_type)
        return pa.float32() if both32 else pa.float64()
    if fam == "int" and lit_fam == "int":
        return pa.int64()
    minimal = via != "in"
    return wider_decimal(
        _as_decimal_type(term_type, None, minimal=False),
        _as_decimal_type(lit_type, lit.value, minimal=minimal),
    )


def strength_reduced(op: str, term_type: pa.DataType, lit: Literal, *, via: str) -> bool:
    """Spark's ``integralAndDecimalLiteral``: an integral term, a decimal literal, ``< <= > >=``.

    The comparison is then exact (floor / ceil of the literal), except that a
    literal beyond the BIGINT range becomes a TRUE or FALSE literal.
    """
    return (
        via == "compare"
        and op in _RANGE_OPS
        and family(term_type) == "int"
        and family(literal_type(lit)) == "decimal"
    )


def in_list_type(term_type: pa.DataType, literals: list[Literal]) -> pa.DataType:
    """The one type Spark casts an IN list's term and values to (``findWiderCommonType``)."""
    kinds = {family(literal_type(v)) for v in literals}
    if "string" in kinds and kinds != {"string"}:
        integral = family(term_type) == "int" and kinds == {"int", "string"}
        for v in literals:
            if isinstance(v.value, str):
                try:
                    integer_text(v.value) if integral else as_double(v.value)
                except BadLiteral as err:
                    raise BadLiteral(
                        f"cannot compare {spark_type_name(term_type)} with {v.sql()} ({err})"
                    ) from None
        raise NotModelled("an IN list mixing strings and numbers")
    out = term_type
    for lit in literals:
        out = comparison_type("=", out, Literal(lit.value, literal_type(lit)), via="in")
    return out


# ---------------------------------------------------------------- literal values


def integer_text(text: str) -> int:
    """Spark's ANSI cast of a string to BIGINT: optional sign and digits, nothing else."""
    cleaned = text.strip()
    if not _INTEGER_TEXT.match(cleaned):
        raise BadLiteral(f"Spark casts it to BIGINT, which {text!r} is not")
    value = int(cleaned)
    if not LONG_MIN <= value <= LONG_MAX:
        raise BadLiteral(f"Spark casts it to BIGINT, and {text!r} is out of range")
    return value


def as_double(value: object) -> float:
    """A literal value cast to DOUBLE, correctly rounded as Spark (Java) rounds it."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise BadLiteral(f"Spark casts it to DOUBLE, which {value!r} is not") from None
    if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        return float(value)
    raise BadLiteral(f"{value!r} is not a number")


def round_half_up(value: decimal.Decimal, dtype: pa.DataType) -> decimal.Decimal:
    """``CAST(value AS dtype)`` for a decimal ``dtype`` in a comparison (HALF_UP, exact)."""
    quantum = decimal.Decimal(1).scaleb(-dtype.scale, context=WIDE)
    return value.quantize(quantum, rounding=decimal.ROUND_HALF_UP, context=WIDE)


# ---------------------------------------------------------------- doubles


@dataclass(frozen=True)
class Preimage:
    """The reals that round to one double: ``low .. high``, closed ends where ties round to it."""

    low: decimal.Decimal
    high: decimal.Decimal
    closed: bool


def double_preimage(d: float) -> Preimage:
    """The interval of reals that round (to nearest, ties to even) to the finite double ``d``.

    Its ends are the midpoints to the neighbouring doubles; a value exactly on
    a midpoint rounds to the neighbour with an even significand, so both ends
    belong to the interval when ``d``'s significand is even.

    >>> p = double_preimage(9007199254740992.0)
    >>> (p.low, p.high, p.closed)
    (Decimal('9007199254740991.5'), Decimal('9007199254740993'), True)
    """
    if not math.isfinite(d):
        raise ValueError(d)
    d = d + 0.0  # -0.0 is 0.0
    exact = decimal.Decimal(d)
    below, above = math.nextafter(d, -math.inf), math.nextafter(d, math.inf)
    two = decimal.Decimal(2)
    low = (
        WIDE.divide(WIDE.add(decimal.Decimal(below), exact), two)
        if math.isfinite(below)
        else decimal.Decimal("-Infinity")
    )
    high = (
        WIDE.divide(WIDE.add(decimal.Decimal(above), exact), two)
        if math.isfinite(above)
        else decimal.Decimal("Infinity")
    )
    bits = struct.unpack("<q", struct.pack("<d", d))[0]
    return Preimage(low, high, closed=bits % 2 == 0)
