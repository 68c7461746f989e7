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
    kind = draw(st.sampled_from(["float"] * 3 + ["string"] * 2 + ["date_format"]))
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
