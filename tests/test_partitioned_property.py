"""Differential properties on PARTITIONED tables: lakelayout reads, prunes and deletes as Spark.

A random small table has an ``id``, an int ``v`` and two columns ``p`` and ``q`` of
any partitionable type -- ints of every width; strings with '/', '=', '%', spaces,
unicode, '' and the text ``__HIVE_DEFAULT_PARTITION__``; dates; timestamps and
timestamp_ntz (year 1 included); DECIMAL(38, 18), (38, 0) and (5, 2); doubles with
NaN, -0.0 and infinity; booleans -- with NULLs anywhere. It is partitioned by a
random non-empty subset of ``p`` and ``q``, written by lakelayout (from Arrow or
from a Spark DataFrame) or by delta-rs under one session time zone, and read under
another, with ANSI on or off. The predicates mix partition and data columns:
comparisons and ``<=>`` with literals of other types, IS [NOT] DISTINCT FROM,
BETWEEN, casts, functions of partition columns, IN / NOT IN lists with NULL and
lists longer than :data:`~lakelayout.skipping.stats_rules.IN_LIST_CAP`, nested in
NOT, OR, CASE, coalesce and IS NOT TRUE. Spark's truth is Delta's own reader,
``spark.read.format("delta").load(path)``, in the shared session:

* ``Table.to_df()`` reads the rows Delta's reader reads, partition values included;
* ``Table.plan(pred)`` keeps every file holding a row Delta's reader selects
  ``WHERE pred``;
* for the first predicate lakelayout plans: ``Table.scan`` and ``lakelayout.sql``'s
  SELECT return exactly those rows, and ``Table.delete`` (on a copy) leaves exactly
  the rows Spark keeps with ``NOT (pred) OR (pred) IS NULL``;
* a predicate Spark refuses at analysis is refused with a LakelayoutError.

A fixed example (:func:`negative_zero_case`) runs on every run. ``make test`` runs
three random tables per property; ``LAKELAYOUT_FUZZ_EXAMPLES`` scales them
(``make fuzz``: 200 each).
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

import lakelayout
from lakelayout.api import Table
from lakelayout.errors import LakelayoutError
from lakelayout.skipping.stats_rules import IN_LIST_CAP

from .expr.predicates import double_literal, session_conf
from .processes import COMPILED

pytestmark = pytest.mark.spark

#: tables per property: each costs a write, two full reads, a DELETE and about six Spark
#: jobs, 3-8 s. The file alone, 3 per property (2026-12-01, the machine shared with two
#: busy processes): 96-112 s wall, 90 CPU seconds with the session's start and warm-up;
#: 72-77 s at a load of 1-2
EXAMPLES = max(3, int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "0")) // 50)
#: predicates checked against the plan per table (one Spark job decides them all)
PREDICATES_PER_TABLE = 10
UTC = dt.timezone.utc
D = decimal.Decimal


# ------------------------------------------------------------------ types and values


class Kind(NamedTuple):
    """A partitionable column type: its Arrow type, the values drawn for its rows
    (None: NULL) and SQL literals of other types compared with it."""

    arrow: pa.DataType
    values: list[Any]
    foreign: list[str]


KINDS: dict[str, Kind] = {
    "int": Kind(
        pa.int32(),
        [0, 1, -1, 7, 2**31 - 1, -(2**31), None],
        ["2147483648", "1.5", "'7'", "7L", "-0.5", "CAST('NaN' AS DOUBLE)"],
    ),
    "bigint": Kind(
        pa.int64(),
        [0, 2**53 + 1, 2**53, -(2**63), 2**63 - 1, 5, None],
        ["9007199254740993", "9007199254740992.0", "9223372036854775808", "5.0", "'5'"],
    ),
    "smallint": Kind(pa.int16(), [0, 32767, -32768, 3, None], ["32768", "3.0", "'3'", "-32769"]),
    "tinyint": Kind(pa.int8(), [0, 127, -128, 3, -1, None], ["128", "-129", "3.5", "'3'"]),
    "string": Kind(
        pa.string(),
        [
            "a",
            "a b",
            "x/y",
            "k=v",
            "50%",
            "",
            " ",
            "ü日😀",
            "a%b",
            "A",
            "__HIVE_DEFAULT_PARTITION__",
            "1",
            "2020-01-01",
            None,
        ],
        ["'a%'", "'ü日'", "''", "'1'", "1", "'2020-01-01'"],
    ),
    "date": Kind(
        pa.date32(),
        [
            dt.date(1970, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(2024, 2, 29),
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(2020, 1, 1),
            None,
        ],
        [
            "'2020-01-01'",
            "TIMESTAMP '2020-01-01 00:00:00'",
            "TIMESTAMP '2019-12-31 23:00:00'",
            "'2024-2-29'",
            "DATE '2020-01-02'",
        ],
    ),
    "timestamp": Kind(
        pa.timestamp("us", tz="UTC"),
        [
            dt.datetime(2020, 1, 1, tzinfo=UTC),
            dt.datetime(2019, 12, 31, 23, 30, tzinfo=UTC),
            dt.datetime(2020, 6, 15, 8, 0, 0, 1, tzinfo=UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            dt.datetime(1, 1, 1, 12, tzinfo=UTC),
            None,
        ],
        [
            "DATE '2020-01-01'",
            "'2020-01-01 00:00:00'",
            "TIMESTAMP '2020-01-01 05:30:00+05:30'",
            "TIMESTAMP_NTZ '2020-01-01 00:00:00'",
            "TIMESTAMP '2020-01-01T00:00:00Z'",
        ],
    ),
    "timestamp_ntz": Kind(
        pa.timestamp("us"),
        [
            dt.datetime(2020, 1, 1),
            dt.datetime(2019, 12, 31, 23, 30),
            dt.datetime(2020, 6, 15, 8, 0, 0, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            None,
        ],
        [
            "DATE '2020-01-01'",
            "TIMESTAMP '2020-01-01 00:00:00'",
            "'2020-01-01 00:00:00'",
            "TIMESTAMP '2020-01-01 00:00:00Z'",
        ],
    ),
    "dec38_18": Kind(
        pa.decimal128(38, 18),
        [
            D("0"),
            D("1.5"),
            D("-1.500000000000000001"),
            D("0.000000000000000001"),
            None,
            D("99999999999999999999.999999999999999999"),
        ],
        [
            "1.5",
            "1.50",
            "0.0000000000000000001",
            "1.5D",
            "100000000000000000000",
            "CAST('NaN' AS DOUBLE)",
        ],
    ),
    "dec38_0": Kind(
        pa.decimal128(38, 0),
        [D("0"), D("12345678901234567890123456789012345678"), D("-1"), D("7"), None],
        ["7.0", "7.5", "12345678901234567890123456789012345678.5", "1e38"],
    ),
    "dec5_2": Kind(
        pa.decimal128(5, 2),
        [D("1.50"), D("-1.50"), D("0.00"), D("999.99"), None],
        ["1.5", "1.505", "1000", "'1.5'"],
    ),
    "double": Kind(
        pa.float64(),
        [0.0, -0.0, float("nan"), float("inf"), 1.5, -3.25, None],
        ["0", "-0.0", "CAST('NaN' AS DOUBLE)", "'NaN'", "CAST('Infinity' AS DOUBLE)", "1.5"],
    ),
    "boolean": Kind(pa.bool_(), [True, False, None], ["'true'", "1", "0"]),
}
KIND_NAMES = sorted(KINDS)
INTEGERS = ("int", "bigint", "smallint", "tinyint")


def _text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _wall_clock(value: dt.datetime) -> str:
    return f"{value.year:04d}-{value.strftime('%m-%d %H:%M:%S.%f')}"  # year 1 as 0001


def literal(kind: str, value: Any) -> str:
    """``value`` written as a SQL literal of the column type ``kind``."""
    if value is None:
        return "NULL"
    if kind in INTEGERS:
        return str(value)
    if kind == "string":
        return _text(value)
    if kind == "date":
        return f"DATE '{value.isoformat()}'"
    if kind == "timestamp":
        return f"TIMESTAMP '{_wall_clock(value)}Z'"
    if kind == "timestamp_ntz":
        return f"TIMESTAMP_NTZ '{_wall_clock(value)}'"
    if kind.startswith("dec"):
        return f"{format(value, 'f')}BD"
    if kind == "double":
        return double_literal(value)
    assert kind == "boolean", kind
    return "true" if value else "false"


def filler(kind: str, k: int) -> str:
    """The ``k``-th literal of type ``kind`` that pads an IN list past the cap."""
    if kind == "string":
        return _text(f"f{k}")
    if kind == "date":
        return literal(kind, dt.date(2001, 1, 1) + dt.timedelta(days=k))
    if kind in ("timestamp", "timestamp_ntz"):
        zone = UTC if kind == "timestamp" else None
        return literal(kind, dt.datetime(2001, 1, 1, tzinfo=zone) + dt.timedelta(hours=k))
    if kind == "boolean":
        return literal(kind, k % 2 == 0)
    return str(100 + k)  # an int literal, coerced to the numeric type


def long_list_padding(kind: str) -> list[str]:
    """Enough fillers of ``kind`` to take any IN list past :data:`IN_LIST_CAP`."""
    return [filler(kind, k) for k in range(IN_LIST_CAP + 1)]


@st.composite
def literal_of(draw: st.DrawFn, kind: str) -> str:
    """A literal compared with a ``kind`` column: mostly one of its values, sometimes
    text or a number of another type that Spark coerces."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(KINDS[kind].foreign))
    return literal(kind, draw(st.sampled_from(KINDS[kind].values)))


#: expressions of a column of each kind, with literals of the expression's result (None:
#: the expression is a predicate itself)
FUNCTIONS: dict[str, list[tuple[str, list[str] | None]]] = {
    "string": [
        ("substr({c}, 1, 2)", ["'a '", "'x/'", "'k='", "'50'", "'ü日'", "''", "'__'"]),
        ("length({c})", ["0", "1", "3"]),
        ("upper({c})", ["'A'", "'A B'", "'Ü日😀'"]),
        ("concat({c}, 'z')", ["'az'", "'z'"]),
        ("CAST({c} AS INT)", ["1", "0", "NULL"]),
        ("CAST({c} AS DATE)", ["DATE '2020-01-01'"]),
        ("{c} LIKE 'a%'", None),
        ("{c} LIKE '%\\\\%%'", None),
        ("startswith({c}, 'x')", None),
        ("{c} = ''", None),
        ("{c} IS NULL", None),
    ],
    "date": [
        ("year({c})", ["1970", "1969", "2024", "1", "9999"]),
        ("month({c})", ["1", "2", "12"]),
        ("date_trunc('MONTH', {c})", ["TIMESTAMP '2024-02-01 00:00:00'"]),
        ("date_add({c}, 1)", ["DATE '1970-01-01'", "DATE '2020-01-02'"]),
        ("CAST({c} AS STRING)", ["'2020-01-01'", "'0001-01-01'"]),
        ("CAST({c} AS TIMESTAMP)", ["TIMESTAMP '2020-01-01 00:00:00'"]),
        ("datediff({c}, DATE '1970-01-01')", ["0", "-1"]),
    ],
    "timestamp": [
        ("year({c})", ["2020", "2019", "1969", "1970", "1"]),
        ("hour({c})", ["0", "23", "8", "5", "12"]),
        ("date_trunc('DAY', {c})", ["TIMESTAMP '2020-01-01 00:00:00'"]),
        ("date_trunc('HOUR', {c})", ["TIMESTAMP '2020-01-01 00:00:00'"]),
        ("CAST({c} AS DATE)", ["DATE '2020-01-01'", "DATE '2019-12-31'", "DATE '1970-01-01'"]),
        ("to_date({c})", ["DATE '2020-01-01'", "DATE '2019-12-31'"]),
        ("CAST({c} AS STRING)", ["'2020-01-01 00:00:00'"]),
        ("CAST({c} AS TIMESTAMP_NTZ)", ["TIMESTAMP_NTZ '2020-01-01 00:00:00'"]),
        ("unix_timestamp({c})", ["1577836800", "-1"]),
    ],
    "timestamp_ntz": [
        ("year({c})", ["2020", "2019", "1969"]),
        ("hour({c})", ["0", "23", "8"]),
        ("CAST({c} AS DATE)", ["DATE '2020-01-01'", "DATE '2019-12-31'"]),
        ("CAST({c} AS TIMESTAMP)", ["TIMESTAMP '2020-01-01 00:00:00'"]),
        ("date_trunc('DAY', {c})", ["TIMESTAMP_NTZ '2020-01-01 00:00:00'"]),
    ],
    "int": [
        ("{c} + 1", ["1", "8", "-2147483648"]),
        ("CAST({c} AS STRING)", ["'7'", "'-1'"]),
        ("{c} % 2", ["0", "1", "-1"]),
        ("abs({c})", ["1", "7"]),
    ],
    "bigint": [("CAST({c} AS DOUBLE)", ["9007199254740992.0", "5.0"]), ("{c} DIV 2", ["2"])],
    "smallint": [("CAST({c} AS TINYINT)", ["3", "-1", "0"])],
    "tinyint": [("-{c}", ["-3", "128", "1"]), ("{c} * 2", ["6", "-2"])],
    "dec38_18": [("CAST({c} AS DOUBLE)", ["1.5", "0.0"]), ("round({c}, 0)", ["2", "0"])],
    "dec38_0": [("CAST({c} AS STRING)", ["'7'", "'-1'"])],
    "dec5_2": [("{c} * 2", ["3.00", "3"]), ("CAST({c} AS INT)", ["1", "-1"])],
    "double": [("CAST({c} AS INT)", ["0", "1"]), ("isnan({c})", None), ("{c} * 0", ["0.0"])],
    "boolean": [("NOT {c}", None), ("CAST({c} AS INT)", ["1", "0"]), ("{c} IS TRUE", None)],
}
OPS = ["=", "!=", "<>", "<", "<=", ">", ">=", "<=>"]
DATA_LEAVES = ["v < 3", "v IS NULL", "v IN (1, NULL)", "v NOT IN (2, NULL)", "id % 2 = 0"]
DATA_LEAVES += ["v <=> NULL", "v = 5", "id IN (0, 3, NULL)"]


# ------------------------------------------------------------------ predicates


@st.composite
def in_list(draw: st.DrawFn, column: str, kind: str) -> str:
    """``column [NOT] IN (...)``: a few literals, sometimes NULL among them, one list in
    eight padded past :data:`IN_LIST_CAP` (the rules for long lists)."""
    items = draw(st.lists(literal_of(kind), min_size=1, max_size=4))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), "NULL")
    if draw(st.integers(0, 7)) == 0:
        items += long_list_padding(kind)
    negated = "NOT " if draw(st.booleans()) else ""
    return f"{column} {negated}IN ({', '.join(items)})"


@st.composite
def function_leaf(draw: st.DrawFn, column: str, kind: str) -> str:
    """A function of ``column`` compared with (or listed among) literals of its result."""
    template, results = draw(st.sampled_from(FUNCTIONS[kind]))
    term = template.format(c=column)
    if results is None:
        return term
    if draw(st.integers(0, 3)) == 0:
        items = draw(st.lists(st.sampled_from([*results, "NULL"]), min_size=1, max_size=3))
        return f"{term} {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(items)})"
    return f"{term} {draw(st.sampled_from(OPS))} {draw(st.sampled_from(results))}"


@st.composite
def leaf(draw: st.DrawFn, columns: dict[str, str]) -> str:
    """One comparison, IN list, NULL test, function or cast of ``p`` or ``q`` (or of the
    data columns)."""
    name = draw(st.sampled_from(sorted(columns)))
    kind = columns[name]
    c = f"`{name}`"
    shape = draw(
        st.sampled_from(
            [
                "cmp",
                "cmp",
                "in",
                "in",
                "null",
                "distinct",
                "fn",
                "fn",
                "data",
                "between",
                "columns",
                "cast",
            ]
        )
    )
    if shape == "cmp":
        value, op = draw(literal_of(kind)), draw(st.sampled_from(OPS))
        return f"{value} {op} {c}" if draw(st.booleans()) else f"{c} {op} {value}"
    if shape == "in":
        return draw(in_list(c, kind))
    not_ = "NOT " if draw(st.booleans()) else ""
    if shape == "null":
        return f"{c} IS {not_}NULL"
    if shape == "distinct":
        return f"{c} IS {not_}DISTINCT FROM {draw(literal_of(kind))}"
    if shape == "fn":
        return draw(function_leaf(c, kind))
    if shape == "data":
        return draw(st.sampled_from(DATA_LEAVES))
    if shape == "between":
        return f"{c} {not_}BETWEEN {draw(literal_of(kind))} AND {draw(literal_of(kind))}"
    if shape == "columns":
        return f"{c} {draw(st.sampled_from(OPS))} `{draw(st.sampled_from(sorted(columns)))}`"
    target = draw(st.sampled_from(["STRING", "INT", "DOUBLE", "DATE", "BIGINT"]))
    return f"CAST({c} AS {target}) {draw(st.sampled_from(OPS))} {draw(literal_of(kind))}"


def combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Predicates made of ``inner`` ones: AND, OR, NOT, CASE, coalesce, IS NOT TRUE, <=>."""
    truths = st.sampled_from(["true", "false", "NULL"])
    return st.one_of(
        st.builds("({} AND {})".format, inner, inner),
        st.builds("({} OR {})".format, inner, inner),
        st.builds("NOT ({})".format, inner),
        st.builds("(CASE WHEN {} THEN {} ELSE {} END)".format, inner, inner, inner),
        st.builds("(CASE WHEN {} THEN {} END)".format, inner, inner),
        st.builds("coalesce({}, {})".format, inner, truths),
        st.builds("coalesce({}, {})".format, inner, inner),
        st.builds("(({}) IS NOT TRUE)".format, inner),
        st.builds("(({}) <=> {})".format, inner, truths),
    )


ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "+14:00", "Europe/Oslo"]
WRITERS = ["ll-arrow", "ll-spark", "delta-rs"]


class Case(NamedTuple):
    """A table, how it is partitioned and written, and what is asked of it."""

    table: pa.Table
    kinds: tuple[str, str]  # the types of p and q
    partition_by: list[str]
    writer: str
    predicates: list[str]
    zone: str  # the session zone of the queries
    write_zone: str  # the session zone of the write
    ansi: str

    def __str__(self) -> str:
        return (
            f"kinds={self.kinds} partition_by={self.partition_by} writer={self.writer} "
            f"zone={self.zone} write_zone={self.write_zone} ansi={self.ansi}\n"
            f"table={self.table.to_pylist()}\npredicates={self.predicates}"
        )


@st.composite
def cases(
    draw: st.DrawFn, leaves: Callable[[dict[str, str]], st.SearchStrategy[str]] = leaf
) -> Case:
    """A table of 1-14 rows partitioned by ``p``, ``q`` or both, and predicates of
    ``leaves``."""
    kp, kq = draw(st.sampled_from(KIND_NAMES)), draw(st.sampled_from(KIND_NAMES))
    n = draw(st.integers(1, 14))
    writer = draw(st.sampled_from(WRITERS))

    def column(kind: str) -> pa.Array:
        choices = KINDS[kind].values
        if writer == "delta-rs":
            # delta-rs logs an empty string partition value as '', which the protocol,
            # delta-rs and lakelayout read as NULL and Delta's connector as '': a
            # documented reading difference (docs/architecture.md, the partitions row)
            choices = [value for value in choices if value != ""]
        values = draw(st.lists(st.sampled_from(choices), min_size=n, max_size=n))
        return pa.array(values, KINDS[kind].arrow)

    v = draw(st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=n, max_size=n))
    table = pa.table({
        "id": pa.array(range(n), pa.int32()),
        "v": pa.array(v, pa.int32()),
        "p": column(kp),
        "q": column(kq),
    })  # fmt: skip
    grammar = st.recursive(leaves({"p": kp, "q": kq}), combine, max_leaves=3)
    zone = draw(st.sampled_from(ZONES))
    if writer == "delta-rs" and "timestamp" in (kp, kq):
        # delta-rs spells a TIMESTAMP partition value without a zone; Delta's connector
        # reads that in the session's zone, lakelayout (as delta-rs and polars) as UTC:
        # the documented reading difference (docs/architecture.md, the partitions row)
        zone = "UTC"
    return Case(
        table=table,
        kinds=(kp, kq),
        partition_by=draw(st.sampled_from([["p"], ["p", "q"], ["q", "p"], ["q"]])),
        writer=writer,
        predicates=draw(
            st.lists(grammar, min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE)
        ),
        zone=zone,
        write_zone=draw(st.sampled_from(ZONES)),
        ansi=draw(st.sampled_from(["true", "false"])),
    )


def in_list_leaf(columns: dict[str, str]) -> st.SearchStrategy[str]:
    return st.one_of(*(in_list(f"`{name}`", kind) for name, kind in sorted(columns.items())))


@st.composite
def in_list_cases(draw: st.DrawFn) -> Case:
    """Cases whose predicates are IN / NOT IN lists (with NULL, past the cap) in NOT,
    OR, CASE...; half of the tables are not partitioned (files pruned by min/max)."""
    case = draw(cases(in_list_leaf))
    if draw(st.booleans()):
        case = case._replace(partition_by=[])
    return case


def negative_zero_case() -> Case:
    """A DOUBLE partition of -0.0 and lists past the cap holding 0.0: ``pc.is_in`` hashed
    -0.0 apart from 0.0, so IN skipped the file and DELETE ... NOT IN dropped it unread
    (an audit; Spark's -0.0 = 0.0 is TRUE)."""
    padding = ", ".join(long_list_padding("double"))
    return Case(
        table=pa.table(
            {
                "id": pa.array([0, 1], pa.int32()),
                "v": pa.array([1, None], pa.int32()),
                "p": pa.array([-0.0, -0.0], pa.float64()),
                "q": pa.array([1, 2], pa.int32()),
            }
        ),
        kinds=("double", "int"),
        partition_by=["p"],
        writer="ll-arrow",
        predicates=[f"`p` NOT IN (0.0D, {padding})", f"`p` IN (0.0D, {padding})"],
        zone="UTC",
        write_zone="UTC",
        ansi="true",
    )


def nan_in_a_list_with_null_case() -> Case:
    """A DOUBLE NaN against a list past Spark's InSet threshold that holds NULL: SQL and
    Spark's compiled code say NULL (the row stays after a DELETE), Spark's interpreted
    InSet says false (found by a run of the property; the reference is compiled)."""
    padding = ", ".join(long_list_padding("double"))
    return Case(
        table=pa.table(
            {
                "id": pa.array([0, 1, 2], pa.int32()),
                "v": pa.array([None, None, None], pa.int32()),
                "p": pa.array([0.0, float("nan"), 0.0], pa.float64()),
                "q": pa.array([0, 0, 0], pa.int64()),
            }
        ),
        kinds=("double", "bigint"),
        partition_by=[],
        writer="ll-arrow",
        predicates=[f"`p` IN (NULL, 0, {padding})", f"`p` NOT IN (NULL, 0, {padding})"],
        zone="UTC",
        write_zone="UTC",
        ansi="true",
    )


# ------------------------------------------------------------------ the checks


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def all_rows(df: Any) -> list[str]:
    """Every row as text (PySpark cannot make a datetime of year 1 seen west of UTC)."""
    text = df.selectExpr("id", "v", "CAST(p AS STRING)", "CAST(q AS STRING)").collect()
    return sorted(repr(tuple(r)) for r in text)


def file_name(uri: str) -> str:
    """A data file's name from ``input_file_name()`` (its directories may be escaped twice)."""
    return unquote(unquote(uri)).rsplit("/", 1)[-1]


def spark_error(thunk: Callable[[], Any]) -> tuple[Any, str | None]:
    """``thunk()``, or the first line of the error Spark raised instead."""
    try:
        return thunk(), None
    except Exception as err:  # Spark's errors: analysis, parse, ANSI at run time
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"


def shown(text: str) -> str:
    """A predicate for a message: the padding of long IN lists cut to ``...``."""
    return repr(re.sub(r"((?:, [^,()]+){3})(?:, [^,()]+){20,}", r"\1, ...", text))


def refused_at_analysis(error: str) -> bool:
    return "AnalysisException" in error or "ParseException" in error


def write(spark: Any, path: str, case: Case) -> bool:
    """Write ``case``'s table; False when delta-rs refuses it (nothing to compare)."""
    if case.writer == "ll-arrow":
        Table.create(path, case.table, partition_by=case.partition_by, spark=spark)
    elif case.writer == "ll-spark":
        df = spark.createDataFrame(case.table)
        Table.create(path, df, partition_by=case.partition_by, spark=spark)
    else:
        from deltalake import write_deltalake

        try:
            write_deltalake(path, case.table, partition_by=case.partition_by or None)
        except Exception:  # delta-rs refuses some types and values
            return False
    return True


def selected(spark: Any, path: str, texts: list[str]) -> list[dict[int, str]]:
    """The rows (id -> file name) Delta's reader selects ``WHERE`` each of ``texts``, in
    one Spark job (a union)."""
    from functools import reduce

    from pyspark.sql import functions as F

    delta = spark.read.format("delta").load(path)
    where = [
        delta.where(text).select(F.lit(k).alias("k"), "id", F.input_file_name().alias("f"))
        for k, text in enumerate(texts)
    ]
    rows = reduce(lambda a, b: a.union(b), where).collect()
    return [{r["id"]: file_name(r["f"]) for r in rows if r["k"] == k} for k in range(len(texts))]


def matches(spark: Any, path: str, predicates: list[str]) -> list[dict[int, str] | str]:
    """For each predicate, the rows (id -> file name) of Delta's reader where it is TRUE,
    or Spark's error.

    One Spark job decides every predicate, each a column of a projection; when it fails,
    each runs alone. A projection can hold more rows than a ``WHERE`` selects (see
    :func:`check_plan`)."""
    from pyspark.sql import functions as F

    delta = spark.read.format("delta").load(path)

    def job(texts: list[str]) -> list[Any]:
        flags = [F.coalesce(F.expr(t), F.lit(False)).alias(f"m{k}") for k, t in enumerate(texts)]
        return delta.select("id", F.input_file_name().alias("f"), *flags).collect()

    def matching(rows: list[Any], k: int) -> dict[int, str]:
        return {r["id"]: file_name(r["f"]) for r in rows if r[f"m{k}"]}

    rows, error = spark_error(lambda: job(predicates))
    if error is None:
        return [matching(rows, k) for k in range(len(predicates))]
    answers: list[dict[int, str] | str] = []
    for text in predicates:
        rows, error = spark_error(lambda text=text: job([text]))
        answers.append(error if error is not None else matching(rows, 0))
    return answers


def check_refused(t: Table, text: str, error: str) -> list[str]:
    """A predicate Spark refuses at analysis is refused by lakelayout (a LakelayoutError)."""
    if not refused_at_analysis(error):
        return []  # a run-time error (ANSI): Spark returns no rows to compare
    try:
        t.plan(text)
        t.scan(text)
    except LakelayoutError:
        return []
    except Exception as err:
        return [
            f"{shown(text)}: Spark refuses ({error}); lakelayout raw {type(err).__name__}: {err}"
        ]
    return [f"{shown(text)}: Spark refuses ({error}); lakelayout accepts it"]


def check_plan(
    spark: Any, t: Table, path: str, text: str, match: dict[int, str], zone: str
) -> list[str] | None:
    """The plan keeps every file holding a row Delta's reader selects ``WHERE`` the
    predicate (None: lakelayout refuses it).

    ``match`` (a projection) may hold more rows than the ``WHERE``: Spark's optimizer
    reads ``NOT (x IN (NULL, <more than 10 values>))`` as NULL in a filter, and as an
    ``InSet`` in a projection, TRUE on NaN. Rows in skipped files are checked with the
    ``WHERE`` itself."""
    try:
        planned = t.plan(text, timezone=zone)
    except LakelayoutError:
        return None  # refusing loses no row
    kept = {file_name(str(kept_path)) for kept_path in planned.kept.paths}
    if all(f in kept for f in match.values()):
        return []
    where, error = spark_error(lambda: selected(spark, path, [text])[0])
    if error is not None:
        return []  # Spark's WHERE fails (ANSI): no row to lose
    lost = sorted(i for i, f in where.items() if f not in kept)
    if lost:
        return [
            f"plan {shown(text)}: skips the files of selected rows {lost} (all: {sorted(where)})"
        ]
    return []


def check_scan_and_sql(spark: Any, path: str, root: Path, text: str, want: list[int]) -> list[str]:
    """``Table.scan`` and ``lakelayout.sql``'s SELECT return Delta's reader's rows."""
    problems = []
    got = ids(Table(path, spark=spark).scan(text).df)
    if got != want:
        problems.append(f"scan {shown(text)}: lakelayout {got} != Spark {want}")
    sql = f"SELECT * FROM delta.`{path}` WHERE {text}"
    got = ids(lakelayout.sql(spark, sql, warehouse=str(root / "warehouse")))
    if got != want:
        problems.append(f"sql {shown(text)}: lakelayout.sql {got} != Spark {want}")
    return problems


def check_delete(spark: Any, path: str, root: Path, text: str) -> list[str]:
    """``Table.delete`` (on a copy) leaves the rows Spark keeps with ``NOT (pred) OR
    (pred) IS NULL``, read by Delta's reader and by lakelayout.

    Those rows are Spark's answer with its expressions compiled, as a user's session
    runs them: the suite's session interprets them (tests/processes.py), and interpreted,
    ``NaN IN (NULL, 0, ...)`` past Spark's InSet threshold is false where it is NULL
    (its NaN test comes before its NULL test; compiled code gives NULL, as SQL does)."""
    from pyspark.sql import functions as F

    delta = spark.read.format("delta").load(path)
    with session_conf(spark, COMPILED):
        keep, error = spark_error(
            lambda: ids(delta.where(F.expr(f"NOT ({text}) OR ({text}) IS NULL")))
        )
    if error is not None:
        return []
    copy = str(root / "copy")
    shutil.copytree(path, copy)
    Table(copy, spark=spark).delete(text)
    by_delta = ids(spark.read.format("delta").load(copy))
    by_lakelayout = ids(Table(copy, spark=spark).to_df())
    if by_delta != keep or by_lakelayout != keep:
        return [f"delete {shown(text)}: left {by_delta} (Delta) / {by_lakelayout} (lakelayout), Spark keeps {keep}"]  # fmt: skip
    return []


def disagreements(spark: Any, case: Case, root: Path, *, sql: bool = True) -> list[str]:
    """Where lakelayout disagrees with Delta's reader on ``case`` (empty: nowhere).

    Every row read by ``to_df()``; each predicate's plan; the first predicate lakelayout
    plans also through ``Table.scan``, ``lakelayout.sql`` (``sql``) and ``Table.delete``.
    """
    path = str(root / "table")
    with session_conf(spark, {"spark.sql.session.timeZone": case.write_zone}):
        if not write(spark, path, case):
            return []
    conf = {"spark.sql.session.timeZone": case.zone, "spark.sql.ansi.enabled": case.ansi}
    with session_conf(spark, conf):
        t = Table(path, spark=spark)
        theirs = all_rows(spark.read.format("delta").load(path))
        ours = all_rows(t.to_df())
        problems = [] if ours == theirs else [f"to_df: {ours} != Delta's reader {theirs}"]
        planned = []
        for text, match in zip(case.predicates, matches(spark, path, case.predicates), strict=True):
            if isinstance(match, str):
                problems += check_refused(t, text, match)
                continue
            found = check_plan(spark, t, path, text, match, case.zone)
            if found is not None:
                problems += found
                planned.append(text)
        if planned:
            text = planned[0]
            where, error = spark_error(lambda: selected(spark, path, [text])[0])
            if error is not None:
                return problems  # Spark's WHERE fails (ANSI): nothing to compare
            want = sorted(where)
            if sql:
                problems += check_scan_and_sql(spark, path, root, text, want)
            else:
                got = ids(t.scan(text).df)
                problems += [] if got == want else [f"scan {shown(text)}: {got} != Spark {want}"]
            problems += check_delete(spark, path, root, text)
    return problems


# ------------------------------------------------------------------ the properties

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@example(case=negative_zero_case())
@given(case=cases())
def test_property_partitioned_tables_read_prune_and_delete_as_spark(spark: Any, case: Case) -> None:
    """On a partitioned table, lakelayout reads Delta's reader's rows (partition values
    included); ``Table.plan`` keeps every file holding a row the predicate matches;
    ``Table.scan`` and ``lakelayout.sql`` return those rows and ``Table.delete`` leaves
    exactly the others; a predicate Spark refuses at analysis, lakelayout refuses."""
    note(str(case))
    with tempfile.TemporaryDirectory() as root:
        problems = disagreements(spark, case, Path(root))
    assert not problems, "\n".join(problems)


@SETTINGS
@example(case=nan_in_a_list_with_null_case())
@given(case=in_list_cases())
def test_property_in_lists_with_null_prune_and_delete_as_spark(spark: Any, case: Case) -> None:
    """The same on predicates made of IN / NOT IN lists with NULL and lists past the cap,
    on partitioned tables and unpartitioned ones."""
    note(str(case))
    with tempfile.TemporaryDirectory() as root:
        problems = disagreements(spark, case, Path(root), sql=False)
    assert not problems, "\n".join(problems)
