"""Literals keep every digit Spark keeps: no 28-digit default context anywhere.

Regressions for issue 10, part 1 (a negated 29-digit literal was rounded before
binding) and the places the audit found doing decimal arithmetic in Python's
default context.
"""

from __future__ import annotations

import decimal
import os
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import parse_one

from lakelayout.errors import PredicateError
from lakelayout.expr import parse_predicate
from lakelayout.expr.nodes import Compare, Literal
from lakelayout.expr.parse import literal_of
from lakelayout.expr.types import exact_scale_and_range

D = decimal.Decimal
SCHEMA = pa.schema([("dec", pa.decimal128(38, 18)), ("d0", pa.decimal128(38, 0))])


def _bound(sql: str) -> Compare:
    pred = parse_predicate(sql, SCHEMA)
    assert isinstance(pred, Compare), pred
    return pred


@pytest.mark.parametrize(
    "text",
    [
        "-12345678901.123456789012345678",
        "-99999999999999999999.999999999999999999",
        "-0.000000000000000001",
        "-1234567890123456789012345678901234567.8",
    ],
)
def test_negated_decimal_literal_keeps_every_digit(text: str) -> None:
    import sqlglot

    lit = literal_of(sqlglot.parse_one(text, read="spark"), "UTC")
    assert lit is not None and lit.value == D(text)
    digits = lit.value.as_tuple()  # type: ignore[union-attr]
    scale = -int(digits.exponent)
    assert lit.dtype == pa.decimal128(max(len(digits.digits), scale), scale)  # Spark's typing


def test_repro_literal_binds_exactly() -> None:
    pred = _bound("dec >= -12345678901.123456789012345678")
    assert pred.value == Literal(D("-12345678901.123456789012345678"))
    assert pred.op == ">="


def test_cast_to_decimal_38_rounds_half_up_at_full_precision() -> None:
    pred = _bound("dec = CAST('-12345678901.1234567890123456785' AS DECIMAL(38,18))")
    assert pred.value == Literal(D("-12345678901.123456789012345679"))
    pred = _bound("d0 = CAST('-99999999999999999999999999999999999998.5' AS DECIMAL(38,0))")
    assert pred.value == Literal(D("-99999999999999999999999999999999999999"))


def test_cast_that_overflows_the_decimal_type_is_an_error() -> None:
    with pytest.raises(PredicateError) as err:
        parse_predicate(
            "dec = CAST('99999999999999999999999999999999999999.5' AS DECIMAL(38,0))", SCHEMA
        )
    assert str(err.value) == (
        "cannot cast '99999999999999999999999999999999999999.5' to DECIMAL(38,0)"
    )


@pytest.mark.parametrize("scale", [0, 1, 18, 37, 38])
def test_decimal_38_range_is_exact(scale: int) -> None:
    got_scale, lowest, highest = exact_scale_and_range(pa.decimal128(38, scale))
    nines = "9" * (38 - scale) + "." + "9" * scale
    assert (got_scale, lowest, highest) == (scale, D("-" + nines), D(nines))
    assert len(highest.as_tuple().digits) == 38


def test_numbers_past_38_digits_are_refused_as_spark_refuses_them() -> None:
    """Spark's parser refuses a number that needs more than 38 digits, and a DECIMAL
    type past 38: plan() answered for such text (read as a double) where scans and
    DELETEs were refused, and ``…BD`` of 39 digits raised pyarrow's ValueError (an
    audit). A ``D`` suffix or an exponent makes it a double, as in Spark."""
    for text in (
        "d0 > 99999999999999999999999999999999999998.5",
        "d0 < -99999999999999999999999999999999999999999",
        "dec = 1.000000000000000000000000000000000000001",
    ):
        with pytest.raises(PredicateError, match=r"needs (39|40|41) digits.*38 at most"):
            parse_predicate(text, SCHEMA)
    for text in ("d0 > 99999999999999999999999999999999999998.5BD",
                 "d0 = CAST(1 AS DECIMAL(39, 0))"):  # fmt: skip
        with pytest.raises(PredicateError, match=r"DECIMAL\(39, [01]\) in .*1 to 38 digits"):
            parse_predicate(text, SCHEMA)
    # around a column the cast is opaque to lakelayout: it was left to Spark, which
    # refuses the type, so plan() answered for text scans and DELETEs refuse (an audit)
    for text in ("CAST(d0 AS DECIMAL(39, 0)) > 0", "try_cast(d0 AS DEC(40, 2)) > 0",
                 "d0::NUMERIC(39) > 0", "CAST(d0 AS DECIMAL(5, 6)) > 0",
                 "d0 IN (1, CAST(d0 AS DECIMAL(39, 0)))"):  # fmt: skip
        with pytest.raises(PredicateError, match=r"DECIMAL\(\d+(, \d)?\) in .*1 to 38 digits"):
            parse_predicate(text, SCHEMA)
    for text in ("CAST(d0 AS DECIMAL(38, 0)) > 0", "CAST(d0 AS DECIMAL) > 0",
                 "CAST(d0 AS DECIMAL(38, 38)) > 0"):  # fmt: skip
        parse_predicate(text, SCHEMA)  # Spark's types: not refused
    # (no DECIMAL(38, 0) reaches 1e41: both fold to FALSE)
    as_double = parse_predicate("d0 > 99999999999999999999999999999999999999999D", SCHEMA)
    assert as_double.sql() == parse_predicate("d0 > 1E41", SCHEMA).sql() == "FALSE"


@settings(max_examples=int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "200")), deadline=None)
@given(
    whole=st.integers(1, 42),
    fraction=st.integers(0, 42),
    negative=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_number_literals_bind_exactly_up_to_38_digits_and_no_further(
    whole: int, fraction: int, negative: bool, seed: int
) -> None:
    """Around the edge of Spark's decimals: a literal of up to 38 digits binds to its
    exact value (a DECIMAL, or an INT/BIGINT), one past 38 is refused, as Spark's parser
    refuses it; never a double in between."""
    digits = str(random.Random(seed).randrange(10 ** (whole + fraction))).zfill(whole + fraction)
    digits = "1" + digits[1:]  # a leading digit that counts
    text = digits[:whole] + (f".{digits[whole:]}" if fraction else "")
    text = f"-{text}" if negative else text
    precision = whole + fraction
    if precision > 38:
        with pytest.raises(PredicateError, match=f"needs {precision} digits"):
            parse_predicate(f"d0 = {text}", SCHEMA)
        return
    lit = literal_of(parse_one(text, read="spark"), "UTC")
    assert lit is not None and D(str(lit.value)) == D(text)
    assert not pa.types.is_floating(lit.dtype)


@settings(max_examples=int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "200")), deadline=None)
@given(
    precision=st.integers(1, 42),
    scale=st.integers(0, 44),
    spelling=st.sampled_from(["CAST(d0 AS {})", "try_cast(d0 AS {})", "d0::{}"]),
    name=st.sampled_from(["DECIMAL", "DEC", "NUMERIC"]),
    inside=st.sampled_from(["{} > 0", "{} IS NULL", "d0 IN (1, NULL, {})", "{} = 1.5"]),
)
def test_property_decimal_types_are_refused_exactly_where_spark_refuses_them(
    precision: int, scale: int, spelling: str, name: str, inside: str
) -> None:
    """A DECIMAL type around a column binds (as text lakelayout may leave to Spark) up to
    38 digits with a scale of at most the precision, and is refused past either, as
    Spark's parser refuses it; in any spelling, anywhere in the predicate."""
    text = inside.format(spelling.format(f"{name}({precision}, {scale})"))
    if precision > 38 or scale > precision:
        with pytest.raises(PredicateError, match=r"1 to 38 digits"):
            parse_predicate(text, SCHEMA)
    else:
        parse_predicate(text, SCHEMA)
