"""Spark's view of Arrow types: families, ranges and result types of operators.

Binding asks one question of a type: which *family* it belongs to (exact
numbers, floating point, string, date, timestamp, boolean, ...). Coercion
rules are written per family, the way Spark's (ANSI) type coercion is.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any
from typing import Literal as TypingLiteral

import pyarrow as pa

from lakelayout.errors import InvalidOption

Family = TypingLiteral[
    "int", "decimal", "float", "string", "date", "timestamp", "bool", "binary", "map", "other"
]


def function_types(functions: Mapping[str, pa.DataType | str] | None) -> dict[str, pa.DataType]:
    """The functions predicates may call, by lower-case name, with their Arrow return types
    (a ``pa.DataType`` or an alias such as ``"string"``, ``"int64"``).

    >>> function_types({"GetAgentName": "string"})
    {'getagentname': DataType(string)}
    """
    if functions is None:
        return {}
    if not isinstance(functions, Mapping):
        raise InvalidOption(
            f"functions must map function names to return types, got {type(functions).__name__}"
        )
    out = {}
    for name, value in functions.items():
        if not isinstance(name, str) or not name.strip():
            raise InvalidOption(f"a function name must be a non-empty string, got {name!r}")
        out[name.lower()] = return_type(name, value)
    return out


def return_type(name: str, value: Any) -> pa.DataType:
    """``value`` as the Arrow return type of function ``name`` (a type or an alias)."""
    if isinstance(value, pa.DataType):
        return value
    try:
        return pa.type_for_alias(str(value))
    except (ValueError, KeyError):
        raise InvalidOption(
            f"unknown Arrow type {value!r} for the return type of function {name}() "
            "(give a pyarrow type or an alias such as 'string', 'int64', 'double')"
        ) from None


def family(dtype: pa.DataType | None) -> Family:
    """The coercion family of an Arrow type (``other`` for nested/unknown types)."""
    if dtype is None:
        return "other"
    checks: tuple[tuple[Family, bool], ...] = (
        ("int", pa.types.is_integer(dtype)),
        ("decimal", pa.types.is_decimal(dtype)),
        ("float", pa.types.is_floating(dtype)),
        ("string", is_string(dtype)),
        ("date", pa.types.is_date(dtype)),
        ("timestamp", pa.types.is_timestamp(dtype)),
        ("bool", pa.types.is_boolean(dtype)),
        ("binary", pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)),
        ("map", pa.types.is_map(dtype)),
    )
    for name, hit in checks:
        if hit:
            return name
    return "other"


def is_string(dtype: pa.DataType) -> bool:
    """UTF-8 strings in any Arrow layout (string, large_string, string_view)."""
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    )


def is_numeric(dtype: pa.DataType | None) -> bool:
    return family(dtype) in ("int", "decimal", "float")


def is_tz_aware(dtype: pa.DataType) -> bool:
    """A Spark TIMESTAMP (LTZ) column; naive Arrow timestamps are TIMESTAMP_NTZ."""
    return pa.types.is_timestamp(dtype) and dtype.tz is not None


WIDE = decimal.Context(prec=2000, rounding=decimal.ROUND_HALF_EVEN)
"""A decimal context no literal, bound or double midpoint comes near: arithmetic in it is exact.

Python's default context keeps 28 significant digits, fewer than a Spark
DECIMAL(38, s) holds; every decimal operation on literals and bounds passes
this context (or is exact by construction, like ``copy_negate``).
"""


def decimal_cast(value: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """Spark's ``CAST(value AS DECIMAL(precision, scale))``: HALF_UP to the scale, then a range check.

    Raises :class:`ArithmeticError` where Spark (ANSI) raises NUMERIC_VALUE_OUT_OF_RANGE.

    >>> decimal_cast(decimal.Decimal("-12345678901.1234567890123456785"), 38, 18)
    Decimal('-12345678901.123456789012345679')
    >>> decimal_cast(decimal.Decimal("999.995"), 5, 2)
    Traceback (most recent call last):
    ...
    ArithmeticError: 999.995 does not fit DECIMAL(5,2)
    """
    rounded = value.quantize(
        decimal.Decimal(1).scaleb(-scale, context=WIDE),
        rounding=decimal.ROUND_HALF_UP,
        context=WIDE,
    )
    if rounded.is_finite() and len(rounded.as_tuple().digits) > precision and rounded != 0:
        raise ArithmeticError(f"{value} does not fit DECIMAL({precision},{scale})")
    return rounded


def exact_scale_and_range(dtype: pa.DataType) -> tuple[int, decimal.Decimal, decimal.Decimal]:
    """(scale, lowest, highest) of an integer or decimal type.

    >>> exact_scale_and_range(pa.int8())
    (0, Decimal('-128'), Decimal('127'))
    >>> exact_scale_and_range(pa.decimal128(4, 2))
    (2, Decimal('-99.99'), Decimal('99.99'))
    """
    if pa.types.is_decimal(dtype):
        top = decimal.Decimal(10**dtype.precision - 1).scaleb(-dtype.scale, context=WIDE)
        return dtype.scale, top.copy_negate(), top
    bits = dtype.bit_width
    if pa.types.is_unsigned_integer(dtype):
        return 0, decimal.Decimal(0), decimal.Decimal(2**bits - 1)
    return 0, decimal.Decimal(-(2 ** (bits - 1))), decimal.Decimal(2 ** (bits - 1) - 1)


_INT_ORDER = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def wider_int(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Spark's wider of two integral types (unsigned Arrow types map to the next signed)."""

    def rank(t: pa.DataType) -> int:
        signed = t.bit_width * (2 if pa.types.is_unsigned_integer(t) else 1)
        return min(3, {8: 0, 16: 1, 32: 2, 64: 3}.get(signed, 3))

    return _INT_ORDER[max(rank(a), rank(b))]


def int_as_decimal(dtype: pa.DataType) -> pa.DataType:
    """The decimal type Spark uses for an integral type in decimal arithmetic."""
    if pa.types.is_decimal(dtype):
        return dtype
    digits = {8: 3, 16: 5, 32: 10, 64: 20}[dtype.bit_width]
    return pa.decimal128(digits, 0)


def arithmetic_type(op: str, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Result type of ``a op b`` for numeric types, following Spark's promotion.

    Integers stay integers (``/`` always gives DOUBLE for non-decimals), any
    floating operand gives DOUBLE (FLOAT when both are FLOAT), decimals follow
    Spark's precision/scale rules for ``+ - * %`` (capped at 38).
    """
    fa, fb = family(a), family(b)
    if "float" in (fa, fb):
        if pa.types.is_float32(a) and pa.types.is_float32(b) and op != "/":
            return pa.float32()
        return pa.float64()
    if fa == "int" and fb == "int":
        return pa.float64() if op == "/" else wider_int(a, b)
    da, db = int_as_decimal(a), int_as_decimal(b)
    p1, s1, p2, s2 = da.precision, da.scale, db.precision, db.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    elif op == "*":
        scale, precision = s1 + s2, p1 + p2 + 1
    elif op == "%":
        scale = max(s1, s2)
        precision = min(p1 - s1, p2 - s2) + scale
    else:
        return pa.float64()
    return _bounded_decimal(precision, scale)


def _bounded_decimal(precision: int, scale: int) -> pa.DataType:
    if precision <= 38:
        return pa.decimal128(precision, scale)
    keep = max(min(scale, 6), scale - (precision - 38))
    return pa.decimal128(38, keep)


def wider_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Spark 4's wider decimal type (comparisons, IN, COALESCE): integral digits kept first.

    Past 38 digits, fraction digits are dropped (``boundedPreferIntegralDigits``),
    unlike arithmetic results, which keep at least 6 (:func:`arithmetic_type`).

    >>> wider_decimal(pa.decimal128(38, 18), pa.decimal128(30, 19))
    Decimal128Type(decimal128(38, 18))
    >>> wider_decimal(pa.decimal128(10, 0), pa.decimal128(38, 38))
    Decimal128Type(decimal128(38, 28))
    """
    scale = max(a.scale, b.scale)
    whole = max(a.precision - a.scale, b.precision - b.scale)
    if whole + scale <= 38:
        return pa.decimal128(whole + scale, scale)
    return pa.decimal128(38, max(0, scale - (whole + scale - 38)))


def common_type(types: list[pa.DataType]) -> pa.DataType | None:
    """The type Spark widens a list of types to (COALESCE, comparisons), or None."""
    out = types[0]
    for t in types[1:]:
        merged = _common_pair(out, t)
        if merged is None:
            return None
        out = merged
    return out


def _common_pair(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    fa, fb = family(a), family(b)
    if a.equals(b):
        return a
    if fa in ("int", "decimal", "float") and fb in ("int", "decimal", "float"):
        if "float" in (fa, fb):
            return pa.float64()
        if fa == "int" and fb == "int":
            return wider_int(a, b)
        return wider_decimal(int_as_decimal(a), int_as_decimal(b))
    if fa == fb == "string":
        return pa.string()
    if {fa, fb} == {"date", "timestamp"} or fa == fb == "timestamp":
        zones = [t.tz for t in (a, b) if family(t) == "timestamp"]
        instant = any(z is not None for z in zones)  # a TIMESTAMP (with local time zone)
        wall = any(family(t) == "date" or t.tz is None for t in (a, b))
        if instant and wall:
            # Spark reads the DATE / TIMESTAMP_NTZ side as wall time in the session zone,
            # which a type cannot carry (Arrow's cast would read it in UTC): not modelled
            return None
        return pa.timestamp("us", tz=next((z for z in zones if z is not None), None))
    return None


def spark_type_name(dtype: pa.DataType | None) -> str:
    """Spark SQL name of an Arrow type, for messages.

    >>> spark_type_name(pa.int32()), spark_type_name(pa.timestamp("us"))
    ('INT', 'TIMESTAMP_NTZ')
    """
    if dtype is None:
        return "UNKNOWN"
    simple = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
    }
    for arrow_type, name in simple.items():
        if dtype.equals(arrow_type):
            return name
    if pa.types.is_decimal(dtype):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    if pa.types.is_timestamp(dtype):
        return "TIMESTAMP" if dtype.tz is not None else "TIMESTAMP_NTZ"
    fam = family(dtype)
    return {"string": "STRING", "binary": "BINARY", "int": "BIGINT", "date": "DATE"}.get(
        fam, str(dtype).upper()
    )
