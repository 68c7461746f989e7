"""Differential property: pruning on functions of columns never drops a matching file,
and never calls a file all-matching when a row does not match (DELETE drops those).

The functions where the audit of stop 60 found rows lost: decreasing arithmetic on a
double column holding NaN (``-f``, ``5 - f``, ``f * -2``, ``i - f``; Spark orders NaN
above every number, and ``f(NaN)`` is NaN), ``upper``/``lower`` of text whose case
mapping is not one character to one (``'ß'`` -> ``'SS'``), and ``date_format`` with
seconds of timestamps with a fraction of a second. Files are often single-valued, so
the exact evaluation of such files is exercised as well as the bounds. The reference
computes each row's value in Python with Spark's semantics (Python's string case
mapping is Unicode's full mapping, as Spark's; ``test_case_mapping_is_sparks`` in
tests/expr/test_spark_differential.py compares the two on this alphabet).
"""

from __future__ import annotations

import datetime as dt
import math
import operator
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.expr import parse_predicate

from .index_helpers import file_stats
from .test_minmax_property import FUZZ, assert_sound, split

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
FLOATS = [-2.5, -1.0, -0.0, 0.0, 1.0, 3.0, math.nan, math.inf, -math.inf]
#: text whose upper or lower case is longer, or depends on the position ('Σ')
ALPHABET = ["a", "ß", "s", "S", "İ", "i", "Σ", "σ", "ς", "ﬁ", "é"]
STAMPS = [
    dt.datetime(2024, 6, 1, 12, 30, 0, tzinfo=UTC),
    dt.datetime(2024, 6, 1, 12, 30, 0, 500_000, tzinfo=UTC),
    dt.datetime(2024, 6, 1, 12, 30, 1, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
]

#: days around STAMPS
DAYS = [dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 5, 31), dt.date(2024, 6, 1),
        dt.date(2024, 6, 2)]  # fmt: skip


def _key(value: float) -> tuple[int, float]:
    """Spark's order of doubles: NaN above every number, -0.0 equal to 0.0."""
    return (1, 0.0) if value != value else (0, value + 0.0)


def _float_cmp(op: str, x: float, v: float) -> bool:
    a, b = _key(x), _key(v)
    return {"=": a == b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "!=": a != b}[op]


def _double(v: float) -> str:
    if v != v:
        return "CAST('NaN' AS DOUBLE)"
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
    return f"CAST({v!r} AS DOUBLE)"


#: name -> (SQL of the term, its value of a row: None when NULL)
FLOAT_TERMS: dict[str, tuple[str, Callable[[dict[str, Any]], float | None]]] = {
    "neg": ("-f", lambda r: None if r["f"] is None else -r["f"]),
    "five-minus": ("5 - f", lambda r: None if r["f"] is None else 5.0 - r["f"]),
    "times-minus-two": ("f * -2", lambda r: None if r["f"] is None else r["f"] * -2.0),
    "plus-one": ("f + 1", lambda r: None if r["f"] is None else r["f"] + 1.0),
    "i-minus-f": (
        "i - f",
        lambda r: None if r["f"] is None or r["i"] is None else r["i"] - r["f"],
    ),
}
STRING_TERMS: dict[str, tuple[str, Callable[[str], str]]] = {
    "upper": ("upper(s)", str.upper),
    "lower": ("lower(s)", str.lower),
}


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    """Up to 12 rows drawn from few values, so that whole files are often one value."""
    n = draw(st.integers(0, 12))
    floats = draw(st.lists(st.sampled_from(FLOATS), min_size=1, max_size=3))
    texts = draw(
        st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), min_size=1, max_size=3)
    )
    row = st.fixed_dictionaries(
        {
            "i": st.one_of(st.none(), st.integers(-3, 3)),
            "f": st.one_of(st.none(), st.sampled_from(floats)),
            "s": st.one_of(st.none(), st.sampled_from(texts)),
            "ts": st.one_of(st.none(), st.sampled_from(STAMPS)),
        }
    )
    return pa.Table.from_pylist(draw(st.lists(row, min_size=n, max_size=n)), schema=SCHEMA)


@st.composite
def leaves(draw: st.DrawFn, rows: list[dict[str, Any]]) -> tuple[str, Callable[..., Any]]:
    """(SQL of a comparison, its truth per row: True, False or None)."""
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    kind = draw(st.sampled_from(["float"] * 3 + ["string"] * 2 + ["date_format", "to_date"]))
    if kind == "float":
        name = draw(st.sampled_from(sorted(FLOAT_TERMS)))
        sql, value = FLOAT_TERMS[name]
        seen = [v for r in rows if (v := value(r)) is not None]
        lit = draw(
            st.sampled_from(seen) if seen and draw(st.booleans()) else st.sampled_from(FLOATS)
        )

        def float_truth(r: dict[str, Any]) -> bool | None:
            v = value(r)
            return None if v is None else _float_cmp(op, v, lit)

        return f"{sql} {op} {_double(lit)}", float_truth
    if kind == "string":
        sql, fn = STRING_TERMS[draw(st.sampled_from(sorted(STRING_TERMS)))]
        seen = [fn(r["s"]) for r in rows if r["s"] is not None]
        text = draw(
            st.sampled_from(seen)
            if seen and draw(st.booleans())
            else st.one_of(
                st.text(alphabet=ALPHABET, min_size=1, max_size=4),
                st.sampled_from(["SS", "FI", "I", "i̇", "ας"]),
            )
        )
        sop = draw(st.sampled_from(["=", "!="]))  # equality: code-point order is not asked

        def string_truth(r: dict[str, Any]) -> bool | None:
            if r["s"] is None:
                return None
            return (fn(r["s"]) == text) == (sop == "=")

        return f"{sql} {sop} '{text}'", string_truth
    if kind == "to_date":  # the day of a UTC session: the UTC day (rounded down before 1970)
        day = draw(st.sampled_from(DAYS))

        def day_truth(r: dict[str, Any]) -> bool | None:
            if r["ts"] is None:
                return None
            ours, theirs = r["ts"].date(), day
            return {"=": ours == theirs, "!=": ours != theirs, "<": ours < theirs,
                    "<=": ours <= theirs, ">": ours > theirs, ">=": ours >= theirs}[op]  # fmt: skip

        cast = draw(st.sampled_from(["to_date(ts)", "CAST(ts AS DATE)"]))
        return f"{cast} {op} DATE '{day.isoformat()}'", day_truth
    stamp = draw(st.sampled_from(STAMPS)).strftime("%H:%M:%S")
    dop = draw(st.sampled_from(["=", "!="]))

    def format_truth(r: dict[str, Any]) -> bool | None:
        if r["ts"] is None:
            return None
        return (r["ts"].strftime("%H:%M:%S") == stamp) == (dop == "=")

    return f"date_format(ts, 'HH:mm:ss') {dop} '{stamp}'", format_truth


@FUZZ
@given(table=tables(), data=st.data())
def test_functions_of_columns_never_drop_a_matching_file(
    table: pa.Table, data: st.DataObject
) -> None:
    n = table.num_rows
    ids = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    parts = split(table, ids)
    files = file_stats(parts, SCHEMA)
    rows = table.to_pylist()
    for sql, truth in data.draw(st.lists(leaves(rows), min_size=1, max_size=4)):
        assert_sound(sql, parse_predicate(sql, SCHEMA), files, parts, truth)


# ---------------------------------------------------------------- nested string functions
#
# Chains of string functions over ``s`` (``lower(upper(s))``, ``upper(substring(s, 1,
# 2))``, ``length(lower(s))``, ``substring(upper(s), 2)``, ``trim(lower(s))``, ...)
# compared with literals (=, !=, <, >=, IN), matched with LIKE / ILIKE / startswith.
# Spark's optimizer keeps only the outer one of two directly nested case conversions
# (SimplifyCaseConversionExpressions: ``lower(upper(s))`` is ``lower(s)``, which differs
# for 'ß'), and ILIKE is ``lower(x) LIKE lower(pattern)`` before that rule runs, so
# ``upper(s) ILIKE p`` reads ``lower(s)``; :func:`nested_value` follows both rules.
# ``test_nested_string_reference_is_sparks`` (tests/expr/test_spark_differential.py)
# checks it against Spark reading a Parquet file. ``trim`` and ``concat`` are not
# modelled by the binder (opaque leaves): drawn so that a binder that learns them is
# judged too. Statistics keep a 2-character prefix, so truncated bounds meet functions.

#: name -> (SQL around ``{}``, the function on a non-NULL string)
STRING_WRAPPERS: dict[str, tuple[str, Callable[[str], str]]] = {
    "upper": ("upper({})", str.upper),
    "lower": ("lower({})", str.lower),
    "substring-1-2": ("substring({}, 1, 2)", lambda x: x[:2]),
    "substring-0-1": ("substring({}, 0, 1)", lambda x: x[:1]),
    "substring-2": ("substring({}, 2)", lambda x: x[1:]),
    "substring-neg": ("substring({}, -2, 1)", lambda x: x[-2:][:1] if len(x) >= 2 else ""),
    "substr-1-3": ("substr({}, 1, 3)", lambda x: x[:3]),
    "cast": ("CAST({} AS STRING)", lambda x: x),
    "trim": ("trim({})", lambda x: x.strip(" ")),
    "concat": ("concat({}, 'x')", lambda x: x + "x"),
}
CASE_CONVERSIONS = ("upper", "lower")
NESTED_ALPHABET = ["a", "A", "ß", "s", "S", "İ", "i", "Σ", "ς", "ﬁ", "é", " ", "%", "_"]
NESTED_PREFIX = 2
NESTED_SCHEMA = pa.schema([("s", pa.string())])
ORDER: dict[str, Callable[[str, str], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def collapsed(chain: tuple[str, ...]) -> tuple[str, ...]:
    """``chain`` (innermost first) as Spark's optimizer leaves it: of two directly nested
    case conversions only the outer one stays."""
    out: list[str] = []
    for name in chain:
        if name in CASE_CONVERSIONS and out and out[-1] in CASE_CONVERSIONS:
            out.pop()
        out.append(name)
    return tuple(out)


def chain_sql(chain: tuple[str, ...], base: str = "s") -> str:
    for name in chain:
        base = STRING_WRAPPERS[name][0].format(base)
    return base


def nested_value(chain: tuple[str, ...], text: str | None) -> str | None:
    """The value Spark computes for :func:`chain_sql` of ``text`` (NULL stays NULL)."""
    if text is None:
        return None
    for name in collapsed(chain):
        text = STRING_WRAPPERS[name][1](text)
    return text


def nested_like(
    chain: tuple[str, ...], pattern: str, text: str | None, *, ilike: bool
) -> bool | None:
    """``chain_sql(chain) [I]LIKE pattern`` as Spark computes it: ILIKE is ``lower(term)
    LIKE lower(pattern)``, and then the collapse rule applies to ``lower(term)``."""
    if ilike:
        chain, pattern = (*chain, "lower"), pattern.lower()
    value = nested_value(chain, text)
    return None if value is None else _like_regex(pattern).fullmatch(value) is not None


@st.composite
def nested_tables(draw: st.DrawFn) -> pa.Table:
    """Up to 12 rows of few strings (whole files often one value), case-mapping traps."""
    n = draw(st.integers(0, 12))
    texts = draw(st.lists(st.text(alphabet=NESTED_ALPHABET, max_size=4), min_size=1, max_size=3))
    values = st.lists(st.one_of(st.none(), st.sampled_from(texts)), min_size=n, max_size=n)
    return pa.table({"s": pa.array(draw(values), pa.string())})


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _like_regex(pattern: str) -> Any:
    import re

    out = []
    for ch in pattern:  # NESTED_ALPHABET has no backslash: % and _ are wildcards
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


@st.composite
def nested_leaves(draw: st.DrawFn, rows: list[dict[str, Any]]) -> tuple[str, Callable[..., Any]]:
    """(SQL of a test on a chain of string functions of ``s``, its truth per row)."""
    wrappers = st.lists(st.sampled_from(sorted(STRING_WRAPPERS)), min_size=1, max_size=3)
    chain = tuple(draw(wrappers))
    if draw(st.integers(0, 2)) == 0:  # nested case conversions often
        cases = st.lists(st.sampled_from(CASE_CONVERSIONS), min_size=1, max_size=2)
        chain = (*chain, *draw(cases))
    term = chain_sql(chain)
    seen = [v for r in rows if (v := nested_value(chain, r["s"])) is not None]
    if draw(st.integers(0, 3)) == 0:  # length() of the chain: an integer term
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        lengths = [len(v) for v in seen] or [0]
        number = draw(st.one_of(st.sampled_from(lengths), st.integers(0, 5)))

        def length_truth(r: dict[str, Any]) -> bool | None:
            v = nested_value(chain, r["s"])
            return None if v is None else _float_cmp(op, float(len(v)), float(number))

        return f"length({term}) {op} {number}", length_truth
    text = draw(
        st.sampled_from(seen)
        if seen and draw(st.booleans())
        else st.one_of(
            st.text(alphabet=NESTED_ALPHABET, max_size=3),
            st.sampled_from(["SS", "ss", "FI", "i̇", "ς", "σ", "A"]),
        )
    )
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "like", "ilike", "startswith"]))
    negated = draw(st.booleans())
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        ordered = ORDER[op]  # code-point order: Spark's order of UTF-8 bytes

        def compare_truth(r: dict[str, Any]) -> bool | None:
            v = nested_value(chain, r["s"])
            return None if v is None else ordered(v, text)

        return f"{term} {op} {_sql_text(text)}", compare_truth
    if kind == "in":
        listed = [text, *draw(st.lists(st.sampled_from([*seen, "ß", "SS"]), max_size=2))]
        with_null = draw(st.integers(0, 3)) == 0
        items = ", ".join([*map(_sql_text, listed), *(["NULL"] if with_null else [])])

        def in_truth(r: dict[str, Any]) -> bool | None:
            v = nested_value(chain, r["s"])
            if v is None:
                return None
            found: bool | None = True if v in listed else (None if with_null else False)
            return (None if found is None else not found) if negated else found

        return f"{term} {'NOT ' if negated else ''}IN ({items})", in_truth
    if kind == "startswith":

        def starts_truth(r: dict[str, Any]) -> bool | None:
            v = nested_value(chain, r["s"])
            return None if v is None else v.startswith(text)

        return f"startswith({term}, {_sql_text(text)})", starts_truth
    pattern = text + draw(st.sampled_from(["", "%", "_", "%a"]))
    ilike = kind == "ilike"

    def like_truth(r: dict[str, Any]) -> bool | None:
        hit = nested_like(chain, pattern, r["s"], ilike=ilike)
        return None if hit is None else hit != negated

    word = ("NOT " if negated else "") + kind.upper()
    return f"{term} {word} {_sql_text(pattern)}", like_truth


@FUZZ
@given(table=nested_tables(), data=st.data())
def test_nested_string_functions_never_drop_a_matching_file(
    table: pa.Table, data: st.DataObject
) -> None:
    import json

    from lakelayout.stats.delta_stats import from_delta_stats
    from lakelayout.table.collect import StatsCollector

    n = table.num_rows
    ids = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    parts = [*split(table, ids), NESTED_SCHEMA.empty_table()]
    stats = []
    for part in parts:
        collector = StatsCollector(NESTED_SCHEMA, string_prefix_length=NESTED_PREFIX)
        collector.add(part)
        stats.append(json.dumps(collector.result()))
    files = from_delta_stats(stats, NESTED_SCHEMA, string_prefix_length=NESTED_PREFIX)
    rows = table.to_pylist()
    for sql, truth in data.draw(st.lists(nested_leaves(rows), min_size=1, max_size=4)):
        assert_sound(sql, parse_predicate(sql, NESTED_SCHEMA), files, parts, truth)
