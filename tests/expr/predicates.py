"""A small edge-case table and a hypothesis strategy for predicate text over it.

Shared by the pure property tests and the Spark differential test. The table
holds the corners Spark's semantics hinge on: NULLs everywhere, NaN, +/-inf,
-0.0, unicode and empty strings, LIKE metacharacters in the data, dates and
timestamps around midnight, decimals with scale.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

UTC = dt.timezone.utc
NAN = float("nan")


@contextlib.contextmanager
def session_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """The Spark session's ``settings`` for the block, then back as they were (unset
    where they were not set)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def session_zone(spark: Any, zone: str) -> contextlib.AbstractContextManager[None]:
    """The Spark session's time zone set to ``zone`` for the block, then back."""
    return session_conf(spark, {"spark.sql.session.timeZone": zone})


INF = float("inf")


def edge_table() -> pa.Table:
    """Twelve rows of corner cases (the ``id`` column identifies rows)."""
    rows = 12
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int32()),
            "i": pa.array([0, 1, -1, 5, None, 2**31 - 1, -(2**31), 7, 5, None, 100, 3], pa.int32()),
            "ti": pa.array([1, -128, 127, 0, 5, None, 3, 3, -1, 10, None, 2], pa.int8()),
            "x": pa.array(
                [0.0, -0.0, NAN, INF, -INF, None, 1.5, 2.5, NAN, -3.25, 1e300, 5.0], pa.float64()
            ),
            "s": pa.array(
                ["abc", "ABC", "", None, "a%b", "a_b", "héllo", "日本語", "😀x", "a\nb", "ab", "Z"],
                pa.string(),
            ),
            "d": pa.array(
                [
                    dt.date(1995, 3, 1),
                    dt.date(1995, 2, 28),
                    dt.date(2000, 1, 1),
                    None,
                    dt.date(1970, 1, 1),
                    dt.date(1969, 12, 31),
                    dt.date(2024, 2, 29),
                    dt.date(1995, 3, 2),
                    dt.date(1995, 12, 31),
                    dt.date(1, 1, 1),
                    dt.date(9999, 12, 31),
                    None,
                ],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    dt.datetime(1995, 3, 1, 0, 0, tzinfo=UTC),
                    dt.datetime(1995, 3, 1, 12, 30, 1, 5, tzinfo=UTC),
                    None,
                    dt.datetime(2000, 1, 1, 23, 59, 59, 999999, tzinfo=UTC),
                    dt.datetime(1970, 1, 1, tzinfo=UTC),
                    dt.datetime(1969, 12, 31, 23, tzinfo=UTC),
                    dt.datetime(2024, 2, 29, 6, tzinfo=UTC),
                    None,
                    dt.datetime(1995, 2, 28, 23, 59, tzinfo=UTC),
                    dt.datetime(2020, 6, 15, 8, tzinfo=UTC),
                    dt.datetime(2020, 6, 15, 8, tzinfo=UTC),
                    dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "dec": pa.array(
                [
                    decimal.Decimal(v) if v is not None else None
                    for v in [
                        "1.50",
                        "-1.50",
                        "0.00",
                        None,
                        "99999999.99",
                        "-99999999.99",
                        "2.25",
                        "1.51",
                        "1.49",
                        "0.01",
                        None,
                        "-0.01",
                    ]
                ],
                pa.decimal128(10, 2),
            ),
            "b": pa.array(
                [True, False, None, True, False, True, None, False, True, True, False, None]
            ),
        }
    )


INT_LITERALS = st.sampled_from(
    [
        "0",
        "1",
        "-1",
        "5",
        "3",
        "7",
        "100",
        "2147483647",
        "-2147483648",
        "2147483648",
        "5.5",
        "-0.5",
        "1e3",
        "CAST('NaN' AS DOUBLE)",
        "'5'",
        "NULL",
        "5L",
        "127",
        "128",
        "-129",
        "2.0",
    ]
)
FLOAT_LITERALS = st.sampled_from(
    [
        "0",
        "0.0",
        "-0.0",
        "1.5",
        "2.5",
        "-3.25",
        "1e300",
        "CAST('NaN' AS DOUBLE)",
        "'NaN'",
        "CAST('Infinity' AS DOUBLE)",
        "CAST('-Infinity' AS DOUBLE)",
        "5",
        "NULL",
        "1.5D",
        "1e-5",
    ]
)
STRING_CHARS = st.sampled_from([*"abcABZ%_hé日😀\n", "\\\\%", "\\\\_"])
DATE_LITERALS = st.sampled_from(
    [
        "DATE '1995-03-01'",
        "'1995-03-01'",
        "DATE '1970-01-01'",
        "'2024-02-29'",
        "DATE '0001-01-01'",
        "TIMESTAMP '1995-03-01 12:00:00'",
        "TIMESTAMP '1995-03-01 00:00:00'",
        "DATE '9999-12-31'",
        "'1995-3-2'",
    ]
)
TS_LITERALS = st.sampled_from(
    [
        "TIMESTAMP '1995-03-01 00:00:00'",
        "TIMESTAMP '1995-03-01 12:30:01.000005'",
        "'1995-03-01 12:30:01'",
        "DATE '1995-03-01'",
        "TIMESTAMP '1970-01-01 00:00:00'",
        "'2020-06-15T08:00:00Z'",
        "TIMESTAMP '2000-01-01 23:59:59.999999'",
        # a zone written in a TIMESTAMP literal: an instant even where TIMESTAMP means
        # TIMESTAMP_NTZ; timestamp(x) casts to TIMESTAMP_LTZ there too
        "TIMESTAMP '2020-06-15 08:00:00+00:00'",
        "TIMESTAMP '2020-06-15T10:00:00+02:00'",
        "TIMESTAMP '1995-03-01 12:30:01.000005 UTC'",
        "timestamp('2020-06-15 08:00:00')",
    ]
)
DEC_LITERALS = st.sampled_from(
    [
        "1.5",
        "1.50",
        "1.505",
        "1",
        "0",
        "-0.01",
        "99999999.99",
        "100000000",
        "1.5BD",
        "2.25D",
        "CAST('NaN' AS DOUBLE)",
        "NULL",
        "-1.5",
    ]
)
OPS = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">=", "<=>"])


def double_literal(value: float) -> str:
    """A DOUBLE literal Spark reads back as ``value``: NaN and the infinities spelled as casts."""
    if value != value:
        return "CAST('NaN' AS DOUBLE)"
    if value in (float("inf"), float("-inf")):
        return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
    return f"{value!r}D"


def string_literal(text: str) -> str:
    return "'" + text.replace("'", "\\'") + "'"


@st.composite
def like_pattern(draw: st.DrawFn) -> str:
    parts = draw(st.lists(STRING_CHARS, min_size=0, max_size=4))
    return "'" + "".join(parts) + "'"


@st.composite
def comparison(draw: st.DrawFn) -> str:
    column, literals = draw(
        st.sampled_from(
            [
                ("i", INT_LITERALS),
                ("ti", INT_LITERALS),
                ("x", FLOAT_LITERALS),
                ("d", DATE_LITERALS),
                ("ts", TS_LITERALS),
                ("dec", DEC_LITERALS),
                ("s", st.builds(string_literal, st.text(alphabet="abAZ%_é😀", max_size=3))),
                ("month(d)", st.sampled_from(["3", "2", "12", "13", "2.5"])),
                ("year(ts)", st.sampled_from(["1995", "2020", "1969"])),
                ("dayofmonth(d)", st.sampled_from(["1", "29", "31"])),
                ("hour(ts)", st.sampled_from(["0", "12", "23"])),
                ("lower(s)", st.sampled_from(["'abc'", "'héllo'", "''"])),
                ("upper(s)", st.sampled_from(["'ABC'", "'HÉLLO'"])),
                ("length(s)", st.sampled_from(["0", "1", "2", "3"])),
                ("substring(s, 2, 2)", st.sampled_from(["'bc'", "'BC'", "''", "'_b'"])),
                ("substring(s, -2)", st.sampled_from(["'bc'", "'%b'", "'ab'"])),
                ("substr(s, 0, 1)", st.sampled_from(["'a'", "'A'"])),
                ("abs(ti)", st.sampled_from(["1", "128", "3"])),
                ("i + 1", st.sampled_from(["1", "6", "0"])),
                ("ti * 2", st.sampled_from(["6", "0", "-2"])),
                ("x * 2", st.sampled_from(["3.0", "0", "CAST('NaN' AS DOUBLE)"])),
                ("i % 3", st.sampled_from(["0", "1", "-1", "2"])),
                ("coalesce(i, 0)", st.sampled_from(["0", "5"])),
                ("coalesce(x, 1.5)", st.sampled_from(["1.5", "2.5"])),
                ("-ti", st.sampled_from(["-3", "3", "128"])),
                ("dec + 1", st.sampled_from(["2.5", "0"])),
            ]
        )
    )
    op = draw(OPS)
    literal = draw(literals)
    if draw(st.booleans()):
        return f"{literal} {op} {column}"
    return f"{column} {op} {literal}"


@st.composite
def leaf(draw: st.DrawFn) -> str:
    kind = draw(
        st.sampled_from(
            ["cmp", "cmp", "cmp", "between", "in", "null", "like", "ilike", "affix", "cols", "bool"]
        )
    )
    if kind == "cmp":
        return draw(comparison())
    if kind == "between":
        column, values = draw(
            st.sampled_from([("i", INT_LITERALS), ("x", FLOAT_LITERALS), ("d", DATE_LITERALS)])
        )
        negated = "NOT " if draw(st.booleans()) else ""
        return f"{column} {negated}BETWEEN {draw(values)} AND {draw(values)}"
    if kind == "in":
        column, values = draw(
            st.sampled_from(
                [
                    ("i", INT_LITERALS),
                    ("x", FLOAT_LITERALS),
                    ("s", st.sampled_from(["'abc'", "''", "'ab'", "NULL", "'Z'"])),
                    ("d", st.sampled_from(["DATE '1995-03-01'", "'2000-01-01'", "NULL"])),
                    ("dec", DEC_LITERALS),
                ]
            )
        )
        items = draw(st.lists(values, min_size=1, max_size=4))
        negated = "NOT " if draw(st.booleans()) else ""
        return f"{column} {negated}IN ({', '.join(items)})"
    if kind == "null":
        column = draw(st.sampled_from(["i", "x", "s", "d", "ts", "dec", "b", "lower(s)"]))
        return f"{column} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    if kind in ("like", "ilike"):
        negated = "NOT " if draw(st.booleans()) else ""
        return f"s {negated}{kind.upper()} {draw(like_pattern())}"
    if kind == "affix":
        fn = draw(st.sampled_from(["startswith", "endswith"]))
        affix = draw(st.sampled_from(["'a'", "'ab'", "''", "'b'", "'😀'"]))
        return f"{fn}(s, {affix})"
    if kind == "cols":
        return draw(
            st.sampled_from(["i < ti", "ti >= i", "d < ts", "ts <= d", "x > i", "i = ti", "x = x"])
        )
    return draw(st.sampled_from(["b", "NOT b", "b = false", "b IS TRUE", "b IS NOT FALSE", "TRUE"]))


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """One level of AND / OR / NOT over smaller predicates."""
    return st.one_of(
        st.builds("({} AND {})".format, inner, inner),
        st.builds("({} OR {})".format, inner, inner),
        st.builds("NOT ({})".format, inner),
    )


def predicates(max_leaves: int = 4) -> st.SearchStrategy[str]:
    """Random predicate text: leaves combined with AND / OR / NOT."""
    return st.recursive(leaf(), _combine, max_leaves=max_leaves)


# ------------------------------------ texts whose meaning a session's parser settings change
# spark.sql.parser.escapedStringLiterals keeps a string literal's backslashes as written;
# spark.sql.ansi.doubleQuotedIdentifiers (with ANSI) reads "..." as a column name.

#: pieces of a string literal's text: escapes Spark's default reading resolves (\n, \',
#: \\, \u00e9, \%, an unknown \q) and plain characters of the edge table's strings
ESCAPE_PIECES = st.sampled_from(
    ["a", "b", "c", "%", "_", "é", "\\n", "\\\\", "\\'", "\\u00e9", "\\%", "\\_", "\\q", "\\t"]
)


@st.composite
def escaped_text_leaf(draw: st.DrawFn) -> str:
    """A comparison, LIKE or IN of ``s`` with literals holding backslash escapes."""
    if draw(st.booleans()):  # a text one of the two readings finds in the table
        text = draw(st.sampled_from(["a\\b", "\\n", "a\\%b", "a\\nb", "a\\\\b", "é"]))
    else:
        text = "".join(draw(st.lists(ESCAPE_PIECES, min_size=0, max_size=4)))
    kind = draw(st.sampled_from(["cmp", "like", "in", "fn"]))
    if kind == "cmp":
        return f"s {draw(OPS)} '{text}'"
    if kind == "like":
        return f"s {'NOT ' if draw(st.booleans()) else ''}LIKE '{text}'"
    if kind == "in":
        other = "".join(draw(st.lists(ESCAPE_PIECES, min_size=0, max_size=3)))
        return f"s IN ('{text}', '{other}', NULL)"
    return f"{draw(st.sampled_from(['startswith', 'endswith', 'contains']))}(s, '{text}')"


#: the edge table's columns, as a predicate names them
EDGE_COLUMNS = re.compile(r"\b(id|i|ti|x|s|d|ts|dec|b)\b")
#: a single-quoted string literal, escapes included
QUOTED_STRING = re.compile(r"'(?:[^'\\]|\\.)*'")


#: settings that change how a predicate's text is read: backslashes kept as written in
#: string literals, "..." a column name (only with ANSI), both, and neither (the
#: session's defaults: "..." a string)
TEXT_SESSIONS = [
    {"spark.sql.parser.escapedStringLiterals": "true"},
    {"spark.sql.ansi.enabled": "true", "spark.sql.ansi.doubleQuotedIdentifiers": "true"},
    {"spark.sql.ansi.enabled": "false", "spark.sql.ansi.doubleQuotedIdentifiers": "true"},
    {
        "spark.sql.ansi.enabled": "true",
        "spark.sql.ansi.doubleQuotedIdentifiers": "true",
        "spark.sql.parser.escapedStringLiterals": "true",
    },
    {},
]


def reads_double_quotes_as_names(conf: dict[str, str]) -> bool:
    return (
        conf.get("spark.sql.ansi.doubleQuotedIdentifiers") == "true"
        and conf.get("spark.sql.ansi.enabled") == "true"
    )


def double_quote_columns(sql: str, quote: list[bool]) -> str:
    """``sql`` with its n-th column name written "name" where ``quote[n % len(quote)]``
    (string literals left as they are)."""
    seen = iter(range(10**6))

    def name(match: re.Match[str]) -> str:
        return f'"{match.group(1)}"' if quote[next(seen) % len(quote)] else match.group(1)

    parts, last = [], 0
    for literal in QUOTED_STRING.finditer(sql):
        parts.append(EDGE_COLUMNS.sub(name, sql[last : literal.start()]))
        parts.append(literal.group(0))
        last = literal.end()
    parts.append(EDGE_COLUMNS.sub(name, sql[last:]))
    return "".join(parts)


@st.composite
def session_text_cases(draw: st.DrawFn, max_leaves: int = 3) -> tuple[dict[str, str], str]:
    """A session of :data:`TEXT_SESSIONS` and a predicate of the edge grammar and of
    backslash-escaped literals, two in three leaves escaped. Where the session reads
    "..." as a name, about half the column names are double-quoted; elsewhere one in
    ten (there "s" is the string 's': a text both readings must agree on)."""
    conf = draw(st.sampled_from(TEXT_SESSIONS))
    leaves = st.one_of(leaf(), escaped_text_leaf(), escaped_text_leaf())
    sql = draw(st.recursive(leaves, _combine, max_leaves=max_leaves))
    odds = 2 if reads_double_quotes_as_names(conf) else 10
    quote = draw(st.lists(st.integers(0, odds - 1).map(lambda n: n == 0), min_size=8, max_size=8))
    return conf, double_quote_columns(sql, quote)


# ---------------------------------------------------------------- planner kinds (issue 11)
# Kinds the scan planner skips on since issue 11, kept apart from the grammar above:
# struct fields and a top-level column whose name has a dot, timestamps near
# bounds and with zones, expressions over columns, IS NULL over expressions, IN
# lists with NULL.

STRUCT = pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.int64())]))])


def planner_table() -> pa.Table:
    """:func:`edge_table` plus a struct column ``st`` and a top-level column named ``st.x``."""
    base = edge_table()
    st_values = [
        {"x": 1, "y": {"z": 10}},
        {"x": 5, "y": {"z": None}},
        None,
        {"x": None, "y": None},
        {"x": -3, "y": {"z": -1}},
        {"x": 5, "y": {"z": 10}},
        None,
        {"x": 2, "y": {"z": 7}},
        {"x": 7, "y": {"z": 0}},
        {"x": 1, "y": {"z": 10}},
        {"x": 0, "y": {"z": 3}},
        {"x": 5, "y": None},
    ]
    dotted = [100, 5, None, 1, 2, 5, None, 3, 3, 0, -1, 5]
    return base.append_column("st", pa.array(st_values, STRUCT)).append_column(
        "st.x", pa.array(dotted, pa.int32())
    )


TS_NEAR_BOUNDS = st.sampled_from(
    [
        "TIMESTAMP '1995-03-01 12:30:01.000005'",
        "TIMESTAMP '1995-03-01 12:30:01.000004'",
        "TIMESTAMP '1995-03-01 12:30:01.000006'",
        "TIMESTAMP '1995-03-01 12:30:01.001'",
        "TIMESTAMP '1995-03-01 12:30:01'",
        "TIMESTAMP '2000-01-01 23:59:59.999999'",
        "TIMESTAMP '2000-01-01 23:59:59.999'",
        "TIMESTAMP '2000-01-02 00:00:00'",
        "TIMESTAMP '1995-03-01 12:30:01.000005 UTC'",
        "TIMESTAMP '1995-03-01 04:30:01.000005 PST'",
        "TIMESTAMP '1995-03-01 18:00:01.000005 +05:30'",
        "TIMESTAMP '2020-06-15 10:00:00 Europe/Paris'",
        "TIMESTAMP '1969-12-31 23:00:00Z'",
        "TIMESTAMP '+10000-01-01 00:00:00'",
        "TIMESTAMP '-0001-01-01 00:00:00'",
        "TIMESTAMP '9999-12-31 23:59:59.999999'",
    ]
)


@st.composite
def struct_leaf(draw: st.DrawFn) -> str:
    """Tests on struct fields (``st.x``, ``st.y.z``) and on the column named ``st.x``."""
    term = draw(st.sampled_from(["st.x", "st.y.z", "ST.X", "`st.x`", "st.x + 1"]))
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "null"]))
    if kind == "null":
        return f"{term} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    values = st.sampled_from(["1", "5", "7", "-3", "0", "10", "100", "NULL"])
    if kind == "in":
        items = draw(st.lists(values, min_size=1, max_size=3))
        return f"{term} {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(items)})"
    return f"{term} {draw(OPS)} {draw(values)}"


@st.composite
def timestamp_leaf(draw: st.DrawFn) -> str:
    """Timestamps compared with literals a microsecond or a millisecond off the data."""
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return f"ts {op} {draw(TS_NEAR_BOUNDS)}"


EXPRESSIONS = [
    ("date_format(d, 'yyyy-MM')", ["'1995-03'", "'2000-01'", "'1970-01'", "'0001-01'"]),
    ("date_format(d, 'yyyy-MM-dd')", ["'1995-03-01'", "'1995-3-1'"]),
    ("date_format(ts, 'yyyy-MM-dd HH')", ["'1995-03-01 12'", "'2020-06-15 08'"]),
    ("date_format(d, 'MM')", ["'03'", "'12'"]),
    ("year(d)", ["1995", "2024", "1", "9999"]),
    ("year(ts)", ["1995", "2020"]),
    ("to_date(ts)", ["DATE'1995-03-01'", "DATE'1969-12-31'", "'2020-06-15'", "DATE'1995-02-28'"]),
    ("CAST(ts AS DATE)", ["DATE'1970-01-01'", "'2000-01-01'", "DATE'2024-02-29'"]),
    ("CAST(i AS STRING)", ["'5'", "'7'", "'-1'", "'0'"]),
    ("CAST(ti AS STRING)", ["'3'", "'-128'"]),
    ("CAST(d AS STRING)", ["'1995-03-01'", "'9999-12-31'"]),
    ("CAST(dec AS STRING)", ["'1.50'", "'1.5'", "'-0.01'"]),
    ("CAST(b AS STRING)", ["'true'", "'false'"]),
    ("CAST(ti AS BIGINT)", ["3", "127"]),
    ("substring(s, 1, 2)", ["'ab'", "'AB'", "'a%'", "''"]),
    ("substring(s, 1, 1)", ["'a'", "'Z'"]),
]


@st.composite
def expression_leaf(draw: st.DrawFn) -> str:
    """Functions of columns with no declared index (exact on single-valued files)."""
    term, literals = draw(st.sampled_from(EXPRESSIONS))
    return f"{term} {draw(OPS)} {draw(st.sampled_from(literals))}"


@st.composite
def is_null_of_expression(draw: st.DrawFn) -> str:
    """IS [NOT] NULL over comparisons and functions (their columns' NULL-ness)."""
    inner = draw(
        st.sampled_from(
            [
                "(i > 0)",
                "(i + 1)",
                "(x < 1.5)",
                "(s LIKE 'a%')",
                "year(d)",
                "(i > ti)",
                "(i BETWEEN 1 AND 5)",
                "(ti = 1000)",
                "coalesce(i, 0)",
                "CAST(i AS STRING)",
                "(st.x = 5)",
            ]
        )
    )
    return f"{inner} IS {'NOT ' if draw(st.booleans()) else ''}NULL"


@st.composite
def in_with_nulls(draw: st.DrawFn) -> str:
    """IN and NOT IN lists holding NULL."""
    column, values = draw(
        st.sampled_from(
            [
                ("i", ["5", "7", "0", "-1"]),
                ("s", ["'abc'", "''", "'Z'"]),
                ("d", ["DATE '1995-03-01'", "DATE '2000-01-01'"]),
                ("x", ["1.5", "CAST('NaN' AS DOUBLE)"]),
            ]
        )
    )
    items = [*draw(st.lists(st.sampled_from(values), min_size=0, max_size=3)), "NULL"]
    items = draw(st.permutations(items))
    return f"{column} {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(items)})"


def planner_leaf() -> st.SearchStrategy[str]:
    """One leaf of the issue-11 kinds."""
    return st.one_of(
        struct_leaf(), timestamp_leaf(), expression_leaf(), is_null_of_expression(), in_with_nulls()
    )


#: the issue-11 kinds, by name (for counting what the property tests draw)
PLANNER_KINDS = (
    "struct",
    "timestamp near bounds",
    "expression",
    "IS NULL of expression",
    "IN with NULL",
)


def planner_predicates(max_leaves: int = 4) -> st.SearchStrategy[str]:
    """Random predicate text mixing :func:`leaf` and :func:`planner_leaf` under AND / OR / NOT."""
    return st.recursive(
        st.one_of(leaf(), planner_leaf(), planner_leaf()), _combine, max_leaves=max_leaves
    )


# ---------------------------------------------------------------- edges the grammars missed
# Over the columns of :func:`edge_table`: ``<=>`` with a NULL literal on either side,
# IS [NOT] DISTINCT FROM (and NOT over it), IN / NOT IN lists mixing NULL, NaN, -0.0 and
# infinities, date arithmetic next to the first and last days, casts (integer widening,
# to STRING, and the ones lakelayout leaves opaque), and chains of string functions
# (Spark keeps only the outer one of two nested case conversions).

NULL_SAFE_TERMS = ["i", "x", "s", "d", "ts", "dec", "b", "lower(s)", "i + 1", "d + 1"]
DATE_TERMS = ["d + 1", "d - 1", "1 + d", "d - 30", "d + 366", "d - -1"]
CASTS = [
    ("CAST(ti AS INT)", ["3", "-128", "127", "0"]),
    ("CAST(i AS BIGINT) + 1", ["6", "-2147483647", "2147483648"]),
    ("CAST(ti AS SMALLINT) * 2", ["6", "-256"]),
    ("CAST(s AS STRING)", ["'abc'", "''", "'Z'"]),
    ("CAST(b AS STRING)", ["'true'", "'false'", "'TRUE'"]),
    ("CAST(dec AS STRING)", ["'1.50'", "'-0.01'", "'0.00'"]),
    ("CAST(d AS STRING)", ["'0001-01-01'", "'9999-12-31'", "'1995-03-01'"]),
    ("CAST(x AS STRING)", ["'NaN'", "'-0.0'", "'1.5'"]),
    ("CAST(ts AS DATE)", ["DATE '1995-03-01'", "DATE '2020-06-15'"]),
    ("CAST(d AS TIMESTAMP)", ["TIMESTAMP '1995-03-01 00:00:00'"]),
    ("CAST(i AS DOUBLE)", ["5.0", "2147483647.0"]),
]
STRING_CHAINS = [
    "lower(upper(s))",
    "upper(lower(s))",
    "upper(upper(s))",
    "lower(upper(lower(s)))",
    "upper(substring(s, 1, 2))",
    "lower(substring(s, -2))",
    "substring(upper(s), 1, 1)",
    "length(upper(s))",
    "length(lower(upper(s)))",
    "upper(CAST(s AS STRING))",
    "upper(trim(s))",
    "concat(lower(s), 'x')",
]


@st.composite
def null_safe_leaf(draw: st.DrawFn) -> str:
    """``t <=> NULL``, ``NULL <=> t``, IS [NOT] DISTINCT FROM a value or NULL, NOT over them."""
    term = draw(st.sampled_from(NULL_SAFE_TERMS))
    other = draw(st.sampled_from(["NULL", "NULL", "5", "'abc'", "DATE '1995-03-01'", "i", "ti"]))
    other = {"'abc'": "'abc'" if term in ("s", "lower(s)") else "NULL"}.get(other, other)
    if other == "DATE '1995-03-01'" and term not in ("d", "d + 1", "ts"):
        other = "NULL"
    if other in ("5", "i", "ti") and term in ("s", "lower(s)", "d", "d + 1", "ts", "b"):
        other = "NULL"
    form = draw(st.sampled_from(["<=>", "<=>", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"]))
    text = f"{other} {form} {term}" if draw(st.booleans()) else f"{term} {form} {other}"
    return f"NOT ({text})" if draw(st.booleans()) else text


@st.composite
def float_in_list(draw: st.DrawFn) -> str:
    """IN / NOT IN over ``x`` mixing NULL, NaN (as a cast and as a string), -0.0, infinities."""
    values = st.sampled_from(
        [
            "NULL",
            "CAST('NaN' AS DOUBLE)",
            "'NaN'",
            "-0.0",
            "0.0",
            "CAST('Infinity' AS DOUBLE)",
            "CAST('-Infinity' AS DOUBLE)",
            "1.5",
            "1e300",
        ]
    )
    items = draw(st.lists(values, min_size=1, max_size=5))
    return f"x {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(items)})"


@st.composite
def date_arithmetic_leaf(draw: st.DrawFn) -> str:
    """``d + n`` / ``d - n`` compared with dates next to the first and last days."""
    term = draw(st.sampled_from(DATE_TERMS))
    literal = draw(
        st.sampled_from(
            [
                "DATE '0001-01-02'",
                "DATE '0001-01-01'",
                "DATE '9999-12-31'",
                "DATE '1995-03-02'",
                "DATE '1970-01-01'",
                "DATE '2024-03-01'",
                "'1995-03-01'",
            ]
        )
    )
    return f"{term} {draw(OPS)} {literal}"


@st.composite
def cast_leaf(draw: st.DrawFn) -> str:
    term, literals = draw(st.sampled_from(CASTS))
    return f"{term} {draw(OPS)} {draw(st.sampled_from(literals))}"


@st.composite
def string_chain_leaf(draw: st.DrawFn) -> str:
    term = draw(st.sampled_from(STRING_CHAINS))
    if term.startswith("length"):
        return f"{term} {draw(OPS)} {draw(st.sampled_from(['0', '2', '3', '5']))}"
    kind = draw(st.sampled_from(["cmp", "cmp", "like", "ilike", "in"]))
    text = draw(st.sampled_from(["'abc'", "'ABC'", "'HÉLLO'", "'héllo'", "''", "'A'", "'Z'"]))
    if kind == "like" or kind == "ilike":
        pattern = draw(like_pattern())
        return f"{term} {'NOT ' if draw(st.booleans()) else ''}{kind.upper()} {pattern}"
    if kind == "in":
        return f"{term} IN ({text}, 'ABC', NULL)"
    return f"{term} {draw(OPS)} {text}"


def edge_leaf() -> st.SearchStrategy[str]:
    """One leaf of the kinds above."""
    return st.one_of(
        null_safe_leaf(), float_in_list(), date_arithmetic_leaf(), cast_leaf(), string_chain_leaf()
    )


def edge_predicates(max_leaves: int = 4) -> st.SearchStrategy[str]:
    """:func:`edge_leaf` mixed with :func:`leaf` under AND / OR / NOT."""
    return st.recursive(
        st.one_of(edge_leaf(), edge_leaf(), leaf()), _combine, max_leaves=max_leaves
    )


# ---------------------------------------------------------------- extreme values (issue 10)
#
# A second table and grammar, kept apart from the one above, for the corners
# where a literal or a bound is rounded: DECIMAL(38, s) at both ends of its
# range for several scales, literals with up to 38 significant digits one
# unit of the last place (10^-s) away from stored values, doubles next to
# decimals and integers (the double rounding Spark applies), subnormals, -0.0,
# NaN, infinities, and the first and last dates and timestamps.

D = decimal.Decimal
EXACT = decimal.Context(prec=100)
"""Arithmetic on test values in Python's default context would round them to 28 digits."""

#: DECIMAL columns of the extreme table: name -> scale (all of precision 38 but ``d10_2``)
DECIMAL_SCALES = {"d38_0": 0, "d38_2": 2, "d38_18": 18, "d38_37": 37, "d38_38": 38}


def _top(precision: int, scale: int) -> decimal.Decimal:
    return D("9" * (precision - scale) + ("." + "9" * scale if scale else ""))


def _ulp(scale: int) -> decimal.Decimal:
    return D(1).scaleb(-scale, EXACT)


def decimal_corners(precision: int, scale: int) -> list[decimal.Decimal]:
    """Both ends of DECIMAL(precision, scale), one ulp inside them, around zero, and 38-digit values."""
    top, ulp = _top(precision, scale), _ulp(scale)
    wide = D("1234567890123456789012345678901234567890"[:precision]).scaleb(-scale, EXACT)
    below_top = EXACT.subtract(top, ulp)
    return [
        top,
        top.copy_negate(),
        below_top,
        below_top.copy_negate(),
        D(0).scaleb(-scale),
        ulp,
        ulp.copy_negate(),
        wide,
        wide.copy_negate(),
        EXACT.add(wide, ulp),
    ]


def extreme_table() -> pa.Table:
    """Twelve rows at the edges of every numeric and temporal type (``id`` identifies rows)."""
    rows = 12

    def column(values: list[object], dtype: pa.DataType) -> pa.Array:
        padded = (values + [None] * rows)[:rows]
        return pa.array(padded, dtype)

    data: dict[str, pa.Array] = {"id": pa.array(range(rows), pa.int32())}
    for name, scale in DECIMAL_SCALES.items():
        data[name] = column([*decimal_corners(38, scale), None], pa.decimal128(38, scale))
    data["d10_2"] = column([*decimal_corners(10, 2), None], pa.decimal128(10, 2))
    data["ti"] = column([127, -128, 126, -127, 0, 1, -1, None], pa.int8())
    data["big"] = column(
        [2**63 - 1, -(2**63), 2**53 + 1, 2**53, -(2**53) - 1, 0, 1, -1, 9007199254740993, None],
        pa.int64(),
    )
    data["f32"] = column(
        [
            3.4028234663852886e38,
            -1.401298464324817e-45,
            16777216.0,
            16777217.0,
            -0.0,
            0.0,
            NAN,
            INF,
            -INF,
            0.10000000149011612,
            None,
        ],
        pa.float32(),
    )
    data["f64"] = column(
        [
            1.7976931348623157e308,
            5e-324,
            -5e-324,
            -0.0,
            0.0,
            NAN,
            INF,
            -INF,
            2.2250738585072014e-308,
            9007199254740992.0,
            0.1,
            None,
        ],
        pa.float64(),
    )
    data["dt"] = column(
        [
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(1969, 12, 31),
            dt.date(1970, 1, 1),
            dt.date(1582, 10, 4),
            dt.date(2000, 2, 29),
            None,
        ],
        pa.date32(),
    )
    data["ts"] = column(
        [
            dt.datetime(1, 1, 1, tzinfo=UTC),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            dt.datetime(1970, 1, 1, tzinfo=UTC),
            dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 998999, tzinfo=UTC),
            dt.datetime(2000, 1, 1, 0, 0, 0, 999, tzinfo=UTC),
            None,
        ],
        pa.timestamp("us", tz="UTC"),
    )
    return pa.table(data)


def _decimal_text(value: decimal.Decimal) -> str:
    return format(value, "f")


@st.composite
def near_decimal(draw: st.DrawFn, values: list[decimal.Decimal], scale: int) -> decimal.Decimal:
    """A value at most a few units of the last place (or half of one) away from one of ``values``."""
    base = draw(st.sampled_from(values))
    shift_scale = draw(st.sampled_from([scale, scale, scale + 1, max(scale - 1, 0)]))
    steps = draw(st.sampled_from([0, 0, 1, -1, 2, -2, 5, -5]))
    return EXACT.add(base, D(steps).scaleb(-shift_scale, EXACT))


def decimal_literal_text(value: decimal.Decimal, *, max_digits: int = 38) -> str | None:
    """Spark SQL text of a decimal literal (negatives as ``-x``), or None beyond ``max_digits``."""
    text = _decimal_text(value)
    digits = value.as_tuple().digits
    if len(digits) > max_digits:
        return None
    return text


def double_literal_text(value: float) -> str:
    """Spark SQL text of a double literal, NaN and infinities as casts."""
    if value != value:
        return "CAST('NaN' AS DOUBLE)"
    if value in (INF, -INF):
        return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
    return f"{value!r}D".replace("e+", "E").replace("e-", "E-")


@st.composite
def near_double(draw: st.DrawFn, anchors: list[float]) -> float:
    """A double on, or one or two ulps beside, an anchor."""
    import math

    value = draw(st.sampled_from(anchors))
    for _ in range(draw(st.integers(0, 2))):
        value = math.nextafter(value, draw(st.sampled_from([INF, -INF])))
    return value


EXTREME_OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"])


@st.composite
def extreme_decimal_comparison(draw: st.DrawFn) -> str:
    """A DECIMAL(38, s) or integral column against a literal one ulp from its stored values."""
    table = extreme_table()
    column = draw(st.sampled_from([*DECIMAL_SCALES, "d10_2", "ti", "big"]))
    values = [v for v in table.column(column).to_pylist() if v is not None]
    scale = DECIMAL_SCALES.get(column, 2 if column == "d10_2" else 0)
    exact = [D(v) for v in values]
    kind = draw(st.sampled_from(["decimal", "decimal", "decimal", "double", "string", "integer"]))
    if kind == "double":
        anchors = [float(v) for v in exact] + [0.0, -0.0, 5e-324, 1e38, -1e38]
        literal = double_literal_text(draw(near_double(anchors)))
    elif kind == "integer":
        literal = str(int(draw(near_decimal(exact, 0))))
    else:
        value = draw(near_decimal(exact, scale))
        text = decimal_literal_text(value)
        if text is None:
            text = decimal_literal_text(values[0] if isinstance(values[0], D) else D(values[0]))
        assert text is not None
        literal = f"'{text}'" if kind == "string" else text
    op = draw(EXTREME_OPS)
    if draw(st.booleans()):
        return f"{literal} {op} {column}"
    return f"{column} {op} {literal}"


@st.composite
def extreme_float_comparison(draw: st.DrawFn) -> str:
    """A FLOAT or DOUBLE column against subnormals, +/-0.0, NaN, infinities and neighbours."""
    column = draw(st.sampled_from(["f32", "f64"]))
    anchors = [
        v for v in extreme_table().column(column).to_pylist() if v is not None and v == v
    ] + [5e-324, 1.17549435e-38, 16777217.0]
    value = draw(st.one_of(st.sampled_from([NAN, INF, -INF, 0.0, -0.0]), near_double(anchors)))
    kind = draw(st.sampled_from(["double", "double", "float", "integer", "decimal"]))
    if kind == "float" and value == value and abs(value) < 3.4e38:
        literal = f"CAST({double_literal_text(value)} AS FLOAT)"
    elif kind == "integer" and value == value and abs(value) < 2**63:
        literal = str(int(value))
    elif kind == "decimal" and value == value and abs(value) not in (INF,):
        text = decimal_literal_text(D(value).normalize() if value else D(0))
        literal = text if text is not None and "E" not in text else double_literal_text(value)
    else:
        literal = double_literal_text(value)
    return f"{column} {draw(EXTREME_OPS)} {literal}"


#: days at the ends of DATE, beside the epoch and the Julian / Gregorian switch
EDGE_DAYS = [
    dt.date(1, 1, 1),
    dt.date(1, 1, 2),
    dt.date(9999, 12, 31),
    dt.date(9999, 12, 30),
    dt.date(1969, 12, 31),
    dt.date(1970, 1, 1),
    dt.date(1582, 10, 4),
    dt.date(1582, 10, 15),
]


@st.composite
def extreme_temporal_comparison(draw: st.DrawFn) -> str:
    """A DATE or TIMESTAMP column (or the DATE of the TIMESTAMP) at the first or last day,
    the epoch, microseconds apart."""
    column = draw(st.sampled_from(["dt", "ts", "to_date(ts)"]))
    if column != "ts":
        day = draw(st.sampled_from(EDGE_DAYS))
        literal = f"DATE '{day.isoformat()}'"
    else:
        moments = [v for v in extreme_table().column("ts").to_pylist() if v is not None]
        base = draw(st.sampled_from(moments))
        shift = dt.timedelta(microseconds=draw(st.sampled_from([0, 0, 1, -1, 1000, -1000])))
        try:
            moment = base + shift
        except OverflowError:
            moment = base
        literal = f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f').rjust(26, '0')}'"
    return f"{column} {draw(EXTREME_OPS)} {literal}"


@st.composite
def extreme_in_list(draw: st.DrawFn) -> str:
    """IN lists over DECIMAL(38, s) columns, mixing scales and integers (one comparison type)."""
    column = draw(st.sampled_from([*DECIMAL_SCALES, "big", "ti"]))
    table = extreme_table()
    exact = [D(v) for v in table.column(column).to_pylist() if v is not None]
    scale = DECIMAL_SCALES.get(column, 0)
    items = []
    for _ in range(draw(st.integers(1, 3))):
        text = decimal_literal_text(draw(near_decimal(exact, scale)))
        items.append(text if text is not None else "0")
    if draw(st.booleans()):
        items.append(draw(st.sampled_from(["0", "1", "-1", "0.5", "1E0"])))
    negated = "NOT " if draw(st.booleans()) else ""
    return f"{column} {negated}IN ({', '.join(items)})"


@st.composite
def float_against_integer(draw: st.DrawFn) -> str:
    """The FLOAT column against integers around 2^24, which FLOAT cannot all hold: Spark's
    ANSI rules compare them as DOUBLE, its legacy ones as FLOAT (16777217 is 16777216
    there)."""
    # as FLOAT 2^24 + 1 is 2^24 and 2^24 + 3 is 2^24 + 4; the table holds 2^24
    near = [2**24 + 1, 2**24 + 1, 2**24 + 3, 2**24, 2**24 - 1, -(2**24) - 1]
    values = draw(st.lists(st.sampled_from(near), min_size=1, max_size=3))
    texts = [f"{v}{draw(st.sampled_from(['', 'L']))}" for v in values]
    # the column alone, or in arithmetic or COALESCE with an integer (typed alike)
    term = draw(st.sampled_from(["f32", "f32", "f32 + 0", "1 * f32", "coalesce(f32, 0)"]))
    if len(texts) > 1:
        return f"{term} IN ({', '.join(texts)})"
    if draw(st.booleans()):
        return f"{texts[0]} {draw(EXTREME_OPS)} {term}"
    return f"{term} {draw(EXTREME_OPS)} {texts[0]}"


def extreme_leaf() -> st.SearchStrategy[str]:
    """One extreme comparison: decimal, floating, temporal or IN list."""
    return st.one_of(
        extreme_decimal_comparison(),
        extreme_decimal_comparison(),
        extreme_float_comparison(),
        float_against_integer(),
        extreme_temporal_comparison(),
        extreme_in_list(),
    )


def extreme_predicates(max_leaves: int = 3) -> st.SearchStrategy[str]:
    """Extreme comparisons combined with AND / OR / NOT (negations push literals through ``-``)."""
    return st.recursive(extreme_leaf(), _combine, max_leaves=max_leaves)


@st.composite
def comparison_near_values(draw: st.DrawFn, table: pa.Table, column: str) -> str:
    """A comparison of ``column`` with a literal on, or one ulp beside, one of ``table``'s values.

    Aimed at the values a table really holds, so that DELETE and pruning meet
    files whose bounds sit exactly at (or one unit from) the literal.
    """
    values = [v for v in table.column(column).to_pylist() if v is not None]
    dtype = table.schema.field(column).type
    op = draw(EXTREME_OPS)
    if not values:
        return f"{column} IS NULL"
    if pa.types.is_decimal(dtype) or pa.types.is_integer(dtype):
        scale = dtype.scale if pa.types.is_decimal(dtype) else 0
        text = decimal_literal_text(draw(near_decimal([D(v) for v in values], scale)))
        literal = text if text is not None else str(values[0])
    elif pa.types.is_floating(dtype):
        finite = [float(v) for v in values if v == v and v not in (INF, -INF)]
        literal = double_literal_text(draw(near_double(finite or [0.0])))
    elif pa.types.is_date(dtype):
        day = draw(st.sampled_from(values))
        shift = dt.timedelta(days=draw(st.sampled_from([0, 1, -1])))
        room = day <= dt.date.max - shift if shift.days >= 0 else day >= dt.date.min - shift
        day = day + shift if room else day
        literal = f"DATE '{day.isoformat().rjust(10, '0')}'"
    else:
        base = draw(st.sampled_from(values))
        try:
            moment = base + dt.timedelta(microseconds=draw(st.sampled_from([0, 1, -1, 1000])))
        except OverflowError:
            moment = base
        literal = f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f').rjust(26, '0')}'"
    negated = "NOT " if draw(st.integers(0, 3)) == 0 else ""
    return f"{negated}{column} {op} {literal}"
