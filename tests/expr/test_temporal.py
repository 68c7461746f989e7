"""Timestamp literal text as Spark reads it: zones, offsets, years beyond 9999.

The expected microseconds are Spark 4's ``unix_micros(TIMESTAMP'<text>')`` for
each text (checked against Spark on this machine); the Spark differential test
compares rows with Spark itself for a few of them.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from lakelayout.errors import PredicateError
from lakelayout.expr.codec import expr_from_json, expr_to_json
from lakelayout.expr.nodes import Column, Compare, Literal, Opaque
from lakelayout.expr.parse import parse_predicate
from lakelayout.expr.temporal import (
    FarTimestamp,
    InvalidTimestamp,
    NonDeterministic,
    parse_timestamp_text,
    timestamp_micros,
)

UTC = dt.timezone.utc

SPARK = [
    ("2019-09-09 01:02:03.456789 UTC", "UTC", 1567990923456789),
    ("2019-09-09 01:02:03.456789 PST", "UTC", 1568016123456789),
    ("2019-09-09 01:02:03.456789 +05:30", "UTC", 1567971123456789),
    ("2019-09-09 01:02:03.456789+05:30", "UTC", 1567971123456789),
    ("2019-09-09T01:02:03Z", "UTC", 1567990923000000),
    ("2019-09-09 01:02:03 America/New_York", "UTC", 1568005323000000),
    ("2019-09-09 01:02:03 UTC+01:00", "UTC", 1567987323000000),
    ("2019-09-09 01:02:03 GMT-8", "UTC", 1568019723000000),
    ("2019-09-09 01:02:03 EST", "UTC", 1568008923000000),
    ("2019-09-09 01:02:03 CET", "UTC", 1567983723000000),
    ("2019-09-09 01:02:03 UT", "UTC", 1567990923000000),
    ("2019-09-09 01:02:03 +5", "UTC", 1567972923000000),
    ("2019-09-09 01:02:03+0530", "UTC", 1567971123000000),
    ("2019-09-09 01:02:03 GMT+05:30:10", "UTC", 1567971113000000),
    ("2019-09-09 01:02:03 EST5EDT", "UTC", 1568005323000000),
    ("2019-09-09 01:02:03 Etc/GMT+5", "UTC", 1568008923000000),
    ("2019-9-9 1:2:3", "UTC", 1567990923000000),
    ("2019-09-09 01:02", "UTC", 1567990920000000),
    ("2019-09-09 ", "UTC", 1567987200000000),
    ("2019-09", "UTC", 1567296000000000),
    ("+2019-09-09", "UTC", 1567987200000000),
    ("2019-09-09 01:02:03.1234567", "UTC", 1567990923123456),
    ("+10000-01-01 00:00:00", "UTC", 253402300800000000),
    ("294247-01-10 04:00:54.775807", "UTC", 9223372036854775807),
    ("-290308-12-21 19:59:05.224192", "UTC", -9223372036854775808),
    ("-0001-01-01 00:00:00", "UTC", -62198755200000000),
    ("0000-01-01 00:00:00", "UTC", -62167219200000000),
    ("9999-12-31 23:59:59.999999", "America/New_York", 253402318799999999),
    ("+10000-06-01 00:00:00", "America/New_York", 253415448000000000),
    ("-0001-06-01 00:00:00", "America/New_York", -62185691038000000),
]

REJECTED = [
    "2019-09-09 UTC",
    "999-01-01 00:00:00",
    "1234567-01-01 00:00:00",
    "2019-09-09T",
    "2019-09-09 01:02:03 utc",
    "2019-09-09 01:02:03 pst",
    "2019-09-09 01:02:03 +24:00",
    "2019-09-09 24:00:00",
    "2019-02-29 00:00:00",
    "2019-09-09 01:02:60",
    "294247-01-10 04:00:54.775808",
]


@pytest.mark.parametrize(("text", "zone", "micros"), SPARK, ids=[t for t, _, _ in SPARK])
def test_parses_as_spark_does(text: str, zone: str, micros: int) -> None:
    from lakelayout.expr.temporal import UncertainOffset, trusted_zone
    from lakelayout.expr.temporal import zone as tzinfo

    if micros < 0 and not trusted_zone(tzinfo(zone)):
        # before 1970 a region zone's offsets are left to Spark: Python's zone database
        # and the JVM's disagree there for some zones (an audit: Europe/Oslo in 1960)
        with pytest.raises(UncertainOffset, match="before 1970"):
            parse_timestamp_text(text, zone)
        return
    assert timestamp_micros(parse_timestamp_text(text, zone)) == micros


def test_offsets_before_1970_are_left_to_spark_in_region_zones_only() -> None:
    from lakelayout.expr.temporal import UncertainOffset

    with pytest.raises(UncertainOffset, match="Europe/Oslo"):
        parse_timestamp_text("1960-06-01 13:00:00", "Europe/Oslo")
    assert parse_timestamp_text("1970-01-01 01:00:00", "Europe/Oslo") is not None
    for fixed in ("UTC", "+01:00", "Etc/GMT-1"):
        assert parse_timestamp_text("1960-06-01 13:00:00", fixed) is not None


@pytest.mark.parametrize("text", REJECTED)
def test_rejects_what_spark_rejects(text: str) -> None:
    with pytest.raises(InvalidTimestamp):
        parse_timestamp_text(text, "UTC")


def test_a_time_without_a_date_is_not_deterministic() -> None:
    with pytest.raises(NonDeterministic):
        parse_timestamp_text("01:02:03", "UTC")
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    assert isinstance(parse_predicate("ts > TIMESTAMP '01:02:03'", schema), Opaque)


def test_ntz_keeps_the_wall_clock_and_ignores_a_written_zone() -> None:
    assert parse_timestamp_text("2019-09-09 01:02:03 PST", None) == dt.datetime(2019, 9, 9, 1, 2, 3)
    with pytest.raises(InvalidTimestamp, match="unknown time zone"):
        parse_timestamp_text("2019-09-09 01:02:03 Nowhere/City", None)


def test_far_values_order_with_datetimes() -> None:
    far = parse_timestamp_text("+10000-01-01 00:00:00", "UTC")
    near = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert isinstance(far, FarTimestamp)
    assert near < far and far > near and not far < near and far >= near
    assert sorted([far, near]) == [near, far]
    naive = dt.datetime(2000, 1, 1)
    with pytest.raises(TypeError):
        _ = far < naive  # a TIMESTAMP and a TIMESTAMP_NTZ do not compare


SCHEMA = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us"))])


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        (
            "ts < TIMESTAMP'2019-09-09 01:02:03.456789 UTC'",
            "UTC",
            "ts < TIMESTAMP '2019-09-09 01:02:03.456789+00:00'",
        ),
        (
            "ts < TIMESTAMP'2019-09-09 01:02:03.456789 PST'",
            "UTC",
            "ts < TIMESTAMP '2019-09-09 08:02:03.456789+00:00'",
        ),
        (
            "ts < TIMESTAMP'2019-09-09 01:02:03 +05:30'",
            "UTC",
            "ts < TIMESTAMP '2019-09-08 19:32:03+00:00'",
        ),
        (
            "ts <= TIMESTAMP'9999-12-31 23:59:59.999999'",
            "America/New_York",
            "ts <= TIMESTAMP '+10000-01-01 04:59:59.999999+00:00'",
        ),
        (
            "ts > TIMESTAMP'294247-01-10 04:00:54.775807'",
            "UTC",
            "ts > TIMESTAMP '+294247-01-10 04:00:54.775807+00:00'",
        ),
        (
            "ntz > TIMESTAMP_NTZ'+10000-01-01 00:00:00'",
            "UTC",
            "ntz > TIMESTAMP_NTZ '+10000-01-01 00:00:00'",
        ),
    ],
)
def test_predicates_with_zoned_and_far_literals(text: str, zone: str, expected: str) -> None:
    pred = parse_predicate(text, SCHEMA, timezone=zone)
    assert pred.sql() == expected
    assert parse_predicate(expected, SCHEMA, timezone=zone).sql() == expected  # a fixed point


def test_an_invalid_timestamp_literal_is_a_predicate_error() -> None:
    with pytest.raises(PredicateError, match="not a valid TIMESTAMP"):
        parse_predicate("ts > TIMESTAMP'2019-02-29 00:00:00'", SCHEMA)


def test_far_literals_survive_the_json_codec() -> None:
    far = parse_timestamp_text("-0001-01-01 00:00:00", "UTC")
    node = Compare(
        "<", Column("ts", SCHEMA.field("ts").type), Literal(far, SCHEMA.field("ts").type)
    )
    assert expr_from_json(expr_to_json(node)) == node


@pytest.mark.parametrize(
    "sql",
    [
        "d < DATE'-0001-01-01'",
        "d BETWEEN DATE'-0100-01-01' AND DATE'0000-12-31'",
        "to_date(ts) = DATE'+12345-06-07'",
        "d > DATE'10000-01-01' OR d IS NULL",
    ],
)
def test_dates_spark_holds_beyond_python_s_years_are_left_to_spark(sql: str) -> None:
    """Spark reads DATE'-0001-01-01' and DATE'+12345-06-07'; lakelayout refused them as
    "not a valid DATE" (an audit). They are valid; not held here, they keep every file."""
    schema = pa.schema([("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])
    pred = parse_predicate(sql, schema)
    assert any(isinstance(node, Opaque) for node in pred.walk())
    with pytest.raises(PredicateError, match="not a valid DATE"):
        parse_predicate("d = DATE'+12345-02-30'", schema)  # no such day, in any year
