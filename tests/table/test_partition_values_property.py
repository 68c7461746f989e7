"""Property: partition values survive the log, and pruning on them never drops a match.

A table partitioned by one column of a type the other partition properties do
not draw (TIMESTAMP and TIMESTAMP_NTZ from year 1 to 9999 with microseconds,
the Julian / Gregorian switch and the epoch; DATE at both ends; DECIMAL(38, 18)
at both ends; BIGINT at both ends; DOUBLE with NaN, -0.0, infinities and
subnormals; BOOLEAN; STRING with path metacharacters) is written from Arrow
(no Spark job: the writer serializes the values, :func:`serialize_partition_value`,
delta-rs parses them back into the snapshot). Then:

* every file read back (:func:`read_data_file`, partition values from the log)
  holds exactly the rows written to it;
* comparisons, IN lists (with NULL, NaN), ``<=>`` (with NULL), IS NULL, BETWEEN
  and NOT of them, with literals on or one unit beside the partition values,
  bound in a session zone drawn among UTC and zones whose offset in year 1 is
  local mean time: no file ``might_match`` skips holds a matching row, and
  every row of a file ``all_rows_match`` claims matches (:func:`assert_sound`).

The reference reads timestamp literals in the session zone with Python's
``zoneinfo`` (as Java's zone rules: local mean time before a zone's first
transition, the earlier offset in an overlap); ``test_partition_reference_is_sparks``
below compares it with Spark on a fixed sample.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.api import Table
from lakelayout.expr import parse_predicate
from lakelayout.table.datafile import read_data_file
from lakelayout.table.location import resolve_location

from ..expr.predicates import EDGE_DAYS
from ..skipping.test_minmax_property import assert_sound

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1)
ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]

TYPES: dict[str, pa.DataType] = {
    "ts": pa.timestamp("us", tz="UTC"),
    "ntz": pa.timestamp("us"),
    "day": pa.date32(),
    "dec": pa.decimal128(38, 18),
    "big": pa.int64(),
    "dbl": pa.float64(),
    "flag": pa.bool_(),
    "text": pa.string(),
}
NAIVE_EDGES = [
    dt.datetime(1, 1, 1),
    dt.datetime(1, 1, 1, 0, 0, 0, 1),
    dt.datetime(1582, 10, 4, 23, 59, 59, 999999),
    dt.datetime(1582, 10, 15),
    dt.datetime(1883, 11, 18, 17, 0),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1970, 1, 1),
    dt.datetime(2021, 3, 14, 7, 0),
    dt.datetime(2021, 11, 7, 5, 30),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(9999, 12, 31, 23, 59, 59),
]
WIDE = decimal.Context(prec=100)  # the default context would round to 28 digits
DEC_TOP = Decimal("99999999999999999999.999999999999999999")
DEC_ULP = Decimal("1E-18")
#: each type's edge values (every one is also drawn by DOMAINS)
EDGES: dict[str, list[Any]] = {
    "ts": [t.replace(tzinfo=UTC) for t in NAIVE_EDGES],
    "ntz": NAIVE_EDGES,
    "day": list(EDGE_DAYS),
    "dec": [
        DEC_TOP,
        DEC_TOP.copy_negate(),
        WIDE.subtract(DEC_TOP, DEC_ULP),
        DEC_ULP,
        DEC_ULP.copy_negate(),
        Decimal("0E-18"),
        Decimal("1.5"),
    ],
    "big": [2**63 - 1, -(2**63), 0, 2**53 + 1, -1],
    "dbl": [math.nan, -0.0, 0.0, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, 0.1],
    "flag": [True, False],
    "text": ["", "a b", "a/b", "x=y", "%2F", "ü", "__HIVE_DEFAULT_PARTITION__"],
}
NAIVE = st.one_of(st.sampled_from(NAIVE_EDGES), st.datetimes(dt.datetime(1, 1, 1)))
DOMAINS: dict[str, st.SearchStrategy[Any]] = {
    "ts": NAIVE.map(lambda t: t.replace(tzinfo=UTC)),
    "ntz": NAIVE,
    "day": st.one_of(st.sampled_from(EDGES["day"]), st.dates()),
    "dec": st.one_of(
        st.sampled_from(EDGES["dec"]),
        st.integers(-(10**38) + 1, 10**38 - 1).map(lambda n: Decimal(n).scaleb(-18, WIDE)),
    ),
    "big": st.one_of(st.sampled_from(EDGES["big"]), st.integers(-(2**63), 2**63 - 1)),
    "dbl": st.sampled_from(EDGES["dbl"]),
    "flag": st.booleans(),
    "text": st.one_of(st.sampled_from(EDGES["text"]), st.text(alphabet="ab/=%: é", max_size=3)),
}


# ---------------------------------------------------------------- literals and reference


def _micros(moment: dt.datetime) -> int:
    """Microseconds since the epoch of a naive (wall-clock) or UTC datetime."""
    naive = moment.replace(tzinfo=None) if moment.tzinfo is not None else moment
    delta = naive - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _stamp_text(moment: dt.datetime) -> str:
    return f"{moment.year:04d}-{moment.strftime('%m-%d %H:%M:%S.%f')}"


def _in_zone(local: dt.datetime, zone: str) -> int:
    """The instant (epoch microseconds) of wall-clock ``local`` in ``zone``."""
    offset = local.replace(tzinfo=ZoneInfo(zone)).utcoffset()
    assert offset is not None
    return _micros(local) - (offset.days * 86_400 + offset.seconds) * 1_000_000


def _step(column: str, value: Any, steps: int) -> Any:
    """``value`` moved by ``steps`` units of the column's last place (clamped to its type)."""
    try:
        if column in ("ts", "ntz"):
            return value + dt.timedelta(microseconds=steps)
        if column == "day":
            return value + dt.timedelta(days=steps)
        if column == "dec":
            return min(max(WIDE.add(value, steps * DEC_ULP), DEC_TOP.copy_negate()), DEC_TOP)
        if column == "big":
            return min(max(value + steps, -(2**63)), 2**63 - 1)
        if column == "dbl" and math.isfinite(value):
            for _ in range(abs(steps)):
                value = math.nextafter(value, math.inf if steps > 0 else -math.inf)
    except OverflowError:
        pass
    return value


def literal(column: str, value: Any, zone_form: str) -> tuple[str, Any]:
    """(SQL text, the value Spark compares) of a literal of ``column``'s type.

    TIMESTAMP literals are written as wall-clock text read in the session zone
    (``zone_form`` a zone name) or with an explicit ``Z`` (``zone_form`` "Z"); the value
    compared is then the epoch microseconds.
    """
    if column == "ts":
        naive = value.replace(tzinfo=None)
        if zone_form == "Z":
            return f"TIMESTAMP '{_stamp_text(naive)}Z'", _micros(naive)
        return f"TIMESTAMP '{_stamp_text(naive)}'", _in_zone(naive, zone_form)
    if column == "ntz":
        return f"TIMESTAMP_NTZ '{_stamp_text(value)}'", _micros(value)
    if column == "day":
        return f"DATE '{value.year:04d}-{value.strftime('%m-%d')}'", value
    if column == "dec":
        return format(value, "f") + "BD", value
    if column == "dbl":
        if value != value:
            return "CAST('NaN' AS DOUBLE)", value
        if math.isinf(value):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)", value
        return f"{value!r}D", value
    if column == "flag":
        return ("true" if value else "false"), value
    if column == "text":
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'", value
    return f"{value}L", value


def row_value(column: str, value: Any) -> Any:
    """A stored value as the reference compares it ('' is NULL in a partition)."""
    if value is None or (column == "text" and value == ""):
        return None
    if column in ("ts", "ntz"):
        return _micros(value)
    return value


def _key(value: Any) -> Any:
    """Spark's order: NaN above every double, -0.0 equal to 0.0."""
    if isinstance(value, float):
        return (1, 0.0) if value != value else (0, value + 0.0)
    return value


def _exact(value: Any) -> Any:
    """The value itself, as a round trip must keep it: -0.0 is not 0.0 (two partitions)."""
    if isinstance(value, float):
        return "NaN" if value != value else repr(value)
    return value


def _cmp(op: str, x: Any, v: Any) -> bool | None:
    if x is None or v is None:
        return None
    a, b = _key(x), _key(v)
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


Truth = Callable[[dict[str, Any]], "bool | None"]


@st.composite
def leaves(draw: st.DrawFn, column: str, values: list[Any], zone: str) -> tuple[str, Truth]:
    """(SQL of a test of the partition column ``p``, its truth per row)."""

    def near() -> tuple[str, Any]:
        seen = [v for v in values if row_value(column, v) is not None]
        base = draw(st.sampled_from(seen) if seen and draw(st.booleans()) else DOMAINS[column])
        moved = _step(column, base, draw(st.sampled_from([0, 0, 0, 1, -1])))
        form = draw(st.sampled_from([zone, "Z"]))
        return literal(column, moved, form)

    def value_of(r: dict[str, Any]) -> Any:
        return row_value(column, r["p"])

    kind = draw(st.sampled_from(["cmp"] * 3 + ["in", "nullsafe", "null", "between", "not"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        text, v = near()
        if draw(st.booleans()):
            flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
            return f"{text} {flipped} p", lambda r: _cmp(op, value_of(r), v)
        return f"p {op} {text}", lambda r: _cmp(op, value_of(r), v)
    if kind == "in":
        listed = [near() for _ in range(draw(st.integers(1, 3)))]
        extra = draw(st.sampled_from(["", "NULL", "NaN"] if column == "dbl" else ["", "NULL"]))
        if extra == "NaN":
            listed.append(("CAST('NaN' AS DOUBLE)", math.nan))
        items = [t for t, _ in listed] + (["NULL"] if extra == "NULL" else [])
        negated = draw(st.booleans())

        def in_truth(r: dict[str, Any]) -> bool | None:
            hits = [_cmp("=", value_of(r), v) for _, v in listed]
            found = True if True in hits else (None if None in hits or extra == "NULL" else False)
            if value_of(r) is None:
                found = None
            return _not(found) if negated else found

        return f"p {'NOT ' if negated else ''}IN ({', '.join(items)})", in_truth
    if kind == "nullsafe":
        if draw(st.booleans()):
            return "p <=> NULL", lambda r: value_of(r) is None
        text, v = near()
        return f"p <=> {text}", lambda r: value_of(r) is not None and _cmp("=", value_of(r), v)
    if kind == "null":
        negated = draw(st.booleans())
        return (
            f"p IS {'NOT ' if negated else ''}NULL",
            lambda r: (value_of(r) is None) != negated,
        )
    if kind == "between":
        (lo, low), (hi, high) = near(), near()

        def between(r: dict[str, Any]) -> bool | None:
            a, b = _cmp(">=", value_of(r), low), _cmp("<=", value_of(r), high)
            return False if False in (a, b) else (None if None in (a, b) else True)

        return f"p BETWEEN {lo} AND {hi}", between
    inner, truth = draw(leaves(column, values, zone))
    return f"NOT ({inner})", lambda r: _not(truth(r))


# ---------------------------------------------------------------- the property


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, pa.Table, str]:
    column = draw(st.sampled_from(sorted(TYPES)))
    distinct = draw(st.lists(st.one_of(st.none(), DOMAINS[column]), min_size=1, max_size=4))
    picks = draw(st.lists(st.sampled_from(distinct), min_size=1, max_size=10))
    schema = pa.schema([("id", pa.int64()), ("p", TYPES[column])])
    table = pa.table({"id": list(range(len(picks))), "p": pa.array(picks, TYPES[column])}, schema)
    return column, table, draw(st.sampled_from(ZONES))


def _files(path: Path) -> tuple[Any, list[pa.Table]]:
    """The snapshot's files and each one's rows read back through the log."""
    t = Table(str(path))
    snap = t.snapshot()
    filesystem, root = resolve_location(t.uri)
    fmt = snap.table_format
    parts = []
    for name in snap.files.paths:
        batches = list(read_data_file(filesystem, root, fmt, snap.data_files[str(name)]))
        parts.append(pa.Table.from_batches(batches, fmt.schema))
    return snap, parts


def _round_trip(column: str, table: pa.Table, path: Path) -> tuple[Any, list[pa.Table]]:
    """Create a table partitioned by ``table``'s ``p``; assert every row reads back from its
    own partition's file with exactly its value; the snapshot and each file's rows."""
    Table.create(str(path), table, partition_by=["p"])
    snap, parts = _files(path)
    written = {r["id"]: row_value(column, r["p"]) for r in table.to_pylist()}
    for part in parts:
        one = {repr(_exact(row_value(column, v))) for v in part.column("p").to_pylist()}
        assert len(one) <= 1, part.to_pylist()  # a file holds one partition
        for r in part.to_pylist():  # each row read back in its file, with its value
            assert _exact(row_value(column, r["p"])) == _exact(written.pop(r["id"])), (column, r)
        assert part.num_rows
    assert not written, f"rows not read back: {written}"
    return snap, parts


@pytest.mark.parametrize("column", sorted(TYPES))
def test_each_types_edge_values_round_trip(column: str, tmp_path: Path) -> None:
    """Every edge value of a type at once (the generator draws a few at a time and
    rarely two that compare equal but are two partitions, -0.0 and 0.0)."""
    edges = [*EDGES[column], None]
    picks = edges + edges[::-1]
    schema = pa.schema([("id", pa.int64()), ("p", TYPES[column])])
    table = pa.table({"id": list(range(len(picks))), "p": pa.array(picks, TYPES[column])}, schema)
    _round_trip(column, table, tmp_path / "t")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases(), data=st.data())
def test_partition_values_round_trip_and_never_drop_a_matching_file(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, pa.Table, str], data: st.DataObject
) -> None:
    column, table, zone = case
    path = tmp_path_factory.mktemp("parts") / "t"
    snap, parts = _round_trip(column, table, path)
    values = table.column("p").to_pylist()
    for text, truth in data.draw(st.lists(leaves(column, values, zone), min_size=1, max_size=6)):
        pred = parse_predicate(text, snap.schema, timezone=zone)
        assert_sound((zone, text, pred.sql()), pred, snap.files, parts, truth)


# ---------------------------------------------------------------- the reference is Spark's

#: the sample of the Spark check: each type's edge values (and a NULL), one file each
SAMPLE: dict[str, list[Any]] = {
    "ts": [t.replace(tzinfo=UTC) for t in NAIVE_EDGES] + [None],
    "ntz": [*NAIVE_EDGES, None],
    "day": [dt.date(1, 1, 1), dt.date(1582, 10, 4), dt.date(1582, 10, 15), dt.date(9999, 12, 31)],
    "dec": [DEC_TOP, DEC_TOP.copy_negate(), DEC_ULP, Decimal("0E-18"), None],
    "dbl": [math.nan, -0.0, math.inf, -math.inf, 5e-324, 0.1, None],
    "text": ["", "a/b", "x=y", "%2F", "ü", None],
}


@pytest.mark.spark
@pytest.mark.parametrize("column", sorted(SAMPLE))
def test_partition_reference_is_sparks(spark: Any, tmp_path: Path, column: str) -> None:
    """Delta's Spark reader reads the partition values lakelayout wrote as the values
    written, and the reference's truth of comparisons with literals on and one unit
    beside them (timestamps read in each of :data:`ZONES`) is Spark's."""
    from pyspark.sql import functions as F

    values = SAMPLE[column]
    schema = pa.schema([("id", pa.int64()), ("p", TYPES[column])])
    table = pa.table({"id": list(range(len(values))), "p": pa.array(values, TYPES[column])}, schema)
    Table.create(str(tmp_path / "t"), table, partition_by=["p"])
    frame = spark.read.format("delta").load(str(tmp_path / "t"))
    rows = [{"id": i, "p": v} for i, v in enumerate(values)]
    before = spark.conf.get("spark.sql.session.timeZone")
    try:
        for zone in ZONES if column == "ts" else ["UTC"]:
            spark.conf.set("spark.sql.session.timeZone", zone)
            tests: list[tuple[str, Truth]] = []
            for value in values:
                if row_value(column, value) is None:
                    continue
                for steps in (0, 1, -1):
                    for form in (zone, "Z"):
                        text, v = literal(column, _step(column, value, steps), form)
                        for op in ("=", "<", ">="):
                            tests.append((f"p {op} {text}", _compare_with(op, column, v)))
            got = frame.select("id", *[F.expr(t).alias(f"c{k}") for k, (t, _) in enumerate(tests)])
            by_id = {r["id"]: r for r in got.collect()}
            assert sorted(by_id) == list(range(len(values)))
            for k, (text, truth) in enumerate(tests):
                theirs = [by_id[r["id"]][f"c{k}"] for r in rows]
                ours = [truth(r) for r in rows]
                assert theirs == ours, (zone, text, values)
            if column in ("ts", "ntz"):  # the values themselves, as epoch microseconds
                micros = frame.select("id", F.expr("unix_micros(CAST(p AS TIMESTAMP))").alias("m"))
                found = {r["id"]: r["m"] for r in micros.collect()}
                want = {
                    r["id"]: None if r["p"] is None else _micros(r["p"]) if column == "ts"
                    else _in_zone(r["p"], zone)
                    for r in rows
                }  # fmt: skip
                assert found == want, zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def _compare_with(op: str, column: str, v: Any) -> Truth:
    return lambda r: _cmp(op, row_value(column, r["p"]), v)
