"""Spark's numeric comparison model (pure): comparison types, double rounding, folds.

Each expectation here was checked against Spark 4.2 (the same predicates run
through Spark in ``test_spark_differential.py``'s extreme corners).
"""

from __future__ import annotations

import decimal
import math

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.expr import parse_predicate
from lakelayout.expr.nodes import Literal
from lakelayout.expr.numbers import (
    comparison_type,
    double_preimage,
    in_list_type,
    wider_decimal,
)

D = decimal.Decimal
SCHEMA = pa.schema(
    [
        ("big", pa.int64()),
        ("ti", pa.int8()),
        ("f", pa.float32()),
        ("d38_0", pa.decimal128(38, 0)),
        ("d38_18", pa.decimal128(38, 18)),
        ("d10_2", pa.decimal128(10, 2)),
    ]
)


def sql(text: str) -> str:
    return parse_predicate(text, SCHEMA).sql()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((38, 18), (30, 19), (38, 18)),  # 20 + 19 digits: one fraction digit dropped
        ((10, 0), (38, 38), (38, 28)),
        ((20, 0), (30, 30), (38, 18)),
        ((10, 2), (3, 1), (10, 2)),
        ((38, 0), (38, 38), (38, 0)),
    ],
)
def test_wider_decimal_keeps_integral_digits(
    a: tuple[int, int], b: tuple[int, int], expected: tuple[int, int]
) -> None:
    assert wider_decimal(pa.decimal128(*a), pa.decimal128(*b)) == pa.decimal128(*expected)


@pytest.mark.parametrize(
    ("term", "literal", "expected"),
    [
        (pa.int64(), Literal(1.5), pa.float64()),
        (pa.float32(), Literal(1), pa.float64()),
        (pa.float32(), Literal(1.5, pa.float32()), pa.float32()),
        (pa.int32(), Literal("5"), pa.int64()),
        (pa.decimal128(10, 2), Literal("5"), pa.float64()),
        (pa.decimal128(38, 18), Literal(5), pa.decimal128(38, 18)),  # 5 needs one digit
        (pa.int32(), Literal(D("1E-38"), pa.decimal128(38, 38)), pa.decimal128(38, 28)),
    ],
)
def test_comparison_type(term: pa.DataType, literal: Literal, expected: pa.DataType) -> None:
    assert comparison_type("=", term, literal, via="compare") == expected


def test_in_list_type_widens_over_every_value() -> None:
    values = [Literal(D("0.5"), pa.decimal128(1, 1)), Literal(5, pa.int32())]
    # an INT literal in a list counts as DECIMAL(10, 0), not the digits it needs
    assert in_list_type(pa.decimal128(38, 30), values) == pa.decimal128(38, 28)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the literal is rounded HALF_UP to the comparison type's scale
        (
            "d38_18 < -12345678901.1234567890123456785",
            "d38_18 < CAST('-12345678901.123456789012345679' AS DECIMAL(38, 18))",
        ),
        (
            "d38_18 > -12345678901.1234567890123456785",
            "d38_18 > CAST('-12345678901.123456789012345679' AS DECIMAL(38, 18))",
        ),
        ("d38_0 = 0.00000000000000000000000000000000000001", "d38_0 = CAST('0' AS DECIMAL(38, 0))"),
        ("ti = 1E-38BD", "ti = 0"),
        # integral term, decimal literal, < <= > >=: Spark's exact floor / ceil rewrite,
        # and a literal past the BIGINT range becomes TRUE even for NULL rows
        ("ti BETWEEN 0.00000000000000000000000000000000000001 AND 5", "(ti <= 5 AND ti >= 1)"),
        ("ti > -99999999999999999999.5", "TRUE"),
        ("ti <= -99999999999999999999.5", "FALSE"),
        ("ti < 99999999999999999999.5", "TRUE"),
        # doubles: the exact term's values round to a double first
        (
            "big = 9007199254740992e0",
            "(big <= 9007199254740993L AND big >= 9007199254740992L)",
        ),
        ("big >= 9.223372036854775807E18D", "big >= 9223372036854775296L"),
        ("big < 9.223372036854775807E18D", "big < 9223372036854775296L"),
        ("d10_2 = 0.1D", "d10_2 = CAST('0.10' AS DECIMAL(10, 2))"),
        ("f = 16777217", "f = 16777217.0D"),
        ("f = '0.1'", "f = 0.1D"),
        ("big = '9007199254740993'", "big = 9007199254740993L"),
    ],
)
def test_binding_follows_spark(text: str, expected: str) -> None:
    assert sql(text) == expected


def test_term_rounded_by_spark_is_not_modelled() -> None:
    # DECIMAL(38,18) against a 21-digit integer: Spark rounds the column to 17 digits
    assert sql("d38_18 < 100000000000000000000") == "(d38_18 < 100000000000000000000)"
    assert sql("d38_18 IN (-0.000000000000000001, 100000000000000000000)") == (
        "(d38_18 IN (-0.000000000000000001, 100000000000000000000))"
    )


doubles = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda d: (
        math.isfinite(math.nextafter(d, math.inf)) and math.isfinite(math.nextafter(d, -math.inf))
    )
)


@given(doubles)
def test_double_preimage_is_exactly_what_rounds_to_the_double(d: float) -> None:
    p = double_preimage(d)
    ctx = decimal.Context(prec=2000)
    inside = [p.low, p.high] if p.closed else []
    for x in inside:
        assert float(x) == d
    for x in [] if p.closed else [p.low, p.high]:
        assert float(x) != d
    tiny = D(1).scaleb(-1100)
    assert float(ctx.subtract(p.low, tiny)) < d
    assert float(ctx.add(p.high, tiny)) > d
    assert float(ctx.add(p.low, tiny)) == d
    assert float(ctx.subtract(p.high, tiny)) == d
