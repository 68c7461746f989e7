"""Normalization as a rule table: ``input ;; expected sql()`` cases in normalize_cases.txt."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakelayout.expr import parse_predicate

SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("ti", pa.int8()),
        ("big", pa.int64()),
        ("x", pa.float64()),
        ("f", pa.float32()),
        ("dec", pa.decimal128(10, 2)),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("m", pa.map_(pa.string(), pa.int64())),
        ("My Col", pa.int32()),
    ]
)


def _cases() -> list[tuple[str, str]]:
    text = (Path(__file__).parent / "normalize_cases.txt").read_text(encoding="utf-8")
    cases = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        source, expected = line.split(";;")
        cases.append((source.strip(), expected.strip()))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_normalized_sql(source: str, expected: str) -> None:
    assert parse_predicate(source, SCHEMA).sql() == expected


@pytest.mark.parametrize(("source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_canonical_text_is_a_fixed_point(source: str, expected: str) -> None:
    """The rendered text parses back to itself: it is a stable feature key."""
    assert parse_predicate(expected, SCHEMA).sql() == expected


def test_same_predicate_written_differently_has_one_key() -> None:
    spellings = [
        "l_shipdate >= '1995-01-01' AND l_quantity < 24",
        "24 > L_QUANTITY and  L_SHIPDATE >= DATE'1995-01-01'",
        "(l_quantity<24) AND (DATE '1995-01-01' <= l_shipdate)",
        "NOT (l_quantity >= 24 OR l_shipdate < '1995-01-01')",
    ]
    schema = pa.schema([("l_shipdate", pa.date32()), ("l_quantity", pa.int64())])
    keys = {parse_predicate(s, schema).sql() for s in spellings}
    assert keys == {"(l_quantity < 24L AND l_shipdate >= DATE '1995-01-01')"}


def test_columns_bind_to_schema_spelling_and_type() -> None:
    pred = parse_predicate("MY_VALUE > 3", pa.schema([("My_Value", pa.int16())]))
    assert pred.columns() == frozenset({"My_Value"})
    assert pred.term.dtype == pa.int16()  # type: ignore[attr-defined]


def test_timestamp_literal_uses_session_time_zone() -> None:
    pred = parse_predicate("ts >= TIMESTAMP '2020-01-01 01:00:00'", SCHEMA, timezone="Europe/Paris")
    assert pred.sql() == "ts >= TIMESTAMP '2020-01-01 00:00:00+00:00'"
    naive = parse_predicate(
        "ntz >= TIMESTAMP '2020-01-01 01:00:00'", SCHEMA, timezone="Europe/Paris"
    )
    assert naive.sql() == "ntz >= TIMESTAMP_NTZ '2020-01-01 01:00:00'"


def test_registered_udf_is_a_function_term() -> None:
    funcs = {"is_spam": pa.bool_(), "score": pa.float64()}
    assert parse_predicate("IS_SPAM(s)", SCHEMA, functions=funcs).sql() == "is_spam(s) = true"
    assert parse_predicate("NOT is_spam(s)", SCHEMA, functions=funcs).sql() == "is_spam(s) = false"
    assert parse_predicate("score(s) > 1", SCHEMA, functions=funcs).sql() == "score(s) > 1.0D"


def test_opaque_records_the_columns_it_reads() -> None:
    pred = parse_predicate("S RLIKE 'a' AND rand() < I", SCHEMA)
    assert pred.columns() == frozenset({"s", "i"})
