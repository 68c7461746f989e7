"""Evaluation with Spark's WHERE semantics, negation push-down and folding (no JVM)."""

from __future__ import annotations

import datetime as dt
import decimal
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakelayout.errors import PredicateError
from lakelayout.expr import (
    And,
    Column,
    Compare,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    evaluate,
    evaluate_term,
    parse_predicate,
    parse_term,
)
from lakelayout.expr import parse as parse_module

from .predicates import edge_table, predicates

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))
TABLE = edge_table()


def rows(sql: str, table: pa.Table = TABLE, timezone: str = "UTC") -> list[int]:
    mask = evaluate(parse_predicate(sql, table.schema, timezone=timezone), table, timezone=timezone)
    return [int(i) for i in np.flatnonzero(mask)]


# ---------------------------------------------------------------- Spark corners, by hand

CASES = [
    # NULL is never kept, not even under NOT
    ("i = 5", [3, 8]),
    ("NOT (i = 5)", [0, 1, 2, 5, 6, 7, 10, 11]),
    ("i IS NULL", [4, 9]),
    ("i NOT IN (5, 7)", [0, 1, 2, 5, 6, 10, 11]),
    ("i IN (5, NULL)", [3, 8]),
    ("i NOT IN (5, NULL)", []),
    # NaN = NaN, NaN above +Infinity, -0.0 = 0.0
    ("x = CAST('NaN' AS DOUBLE)", [2, 8]),
    ("x > CAST('Infinity' AS DOUBLE)", [2, 8]),
    ("x >= 1e300", [2, 3, 8, 10]),
    ("x = 0", [0, 1]),
    ("x < 0", [4, 9]),
    ("x IN (CAST('NaN' AS DOUBLE), 0.0)", [0, 1, 2, 8]),
    ("x = x", [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]),
    # strings by code point; LIKE wildcards and escapes; '_' is one character
    ("s > 'Z'", [0, 4, 5, 6, 7, 8, 9, 10]),
    ("s LIKE 'a_b'", [4, 5, 9]),
    ("s LIKE 'a\\\\_b'", [5]),
    ("s LIKE '_x'", [8]),
    ("s LIKE '%'", [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]),
    ("s ILIKE 'abc'", [0, 1]),
    ("length(s) = 2", [8, 10]),
    ("upper(s) = 'HÉLLO'", [6]),
    ("substring(s, -2) = 'bc'", [0]),
    ("substring(s, 0, 1) = 'a'", [0, 4, 5, 9, 10]),
    # dates, timestamps, functions on them
    ("d < TIMESTAMP '1995-03-01 12:00:00'", [0, 1, 4, 5, 9]),
    ("month(d) = 2", [1, 6]),
    ("dayofmonth(d) = 29", [6]),
    ("ts >= '1995-03-01'", [0, 1, 3, 6, 9, 10, 11]),
    ("hour(ts) = 23", [3, 5, 8, 11]),
    ("year(ts) = 1969", [5]),
    # decimals and integer folding
    ("dec > 1.5", [4, 6, 7]),
    ("dec <= 1.505", [0, 1, 2, 5, 8, 9, 11]),
    ("ti < 1000", [0, 1, 2, 3, 4, 6, 7, 8, 9, 11]),
    ("i % 3 = -1", [2]),
    ("b", [0, 3, 5, 8, 9]),
    ("NOT b", [1, 4, 7, 10]),
    ("b IS NOT TRUE", [1, 2, 4, 6, 7, 10, 11]),
]


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=[c[0] for c in CASES])
def test_spark_corner(sql: str, expected: list[int]) -> None:
    assert rows(sql) == expected


def test_a_timestamp_against_a_date_or_ntz_term_is_not_modelled() -> None:
    """Spark reads the DATE / TIMESTAMP_NTZ side as wall time in the session zone; Arrow's
    cast reads it in UTC, which lost rows (a scan) and deleted rows that did not match (a
    DELETE) in any other zone. Such a comparison is opaque: it never lets a file go."""
    import pyarrow as pa

    from lakelayout.expr import parse_predicate
    from lakelayout.expr.nodes import Opaque

    schema = pa.schema(
        [("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("d", pa.date32())]
    )
    for sql in ("ts > ntz", "ntz = ts", "d < ts", "NOT (ts <= d)", "coalesce(ts, ntz) > ts"):
        pred = parse_predicate(sql, schema, timezone="Asia/Kolkata")
        assert any(isinstance(n, Opaque) for n in pred.walk()), (sql, pred)
    # TIMESTAMP with TIMESTAMP, and NTZ with DATE, stay modelled
    for sql in ("ntz > d", "ts > ts"):
        pred = parse_predicate(sql, schema, timezone="Asia/Kolkata")
        assert not any(isinstance(n, Opaque) for n in pred.walk()), (sql, pred)


def test_session_time_zone_changes_hour() -> None:
    # the edge table holds times before 1970: in a region zone they are left to Spark
    # (the zone databases of Python and of the JVM differ there; an audit)
    with pytest.raises(PredicateError, match="not evaluated outside Spark"):
        rows("hour(ts) = 8", timezone="Asia/Tokyo")
    assert rows("hour(ts) = 8", timezone="+09:00") == [3, 5, 8, 11]
    assert rows("ts < TIMESTAMP '1970-01-01 09:00:00'", timezone="Asia/Tokyo") == [5]


def test_evaluate_term_values() -> None:
    table = pa.table({"s": ["Hello", None], "d": [dt.date(2020, 5, 17), None]})
    assert evaluate_term(parse_term("lower(s)", table.schema), table).to_pylist() == ["hello", None]
    assert evaluate_term(parse_term("month(d)", table.schema), table).to_pylist() == [5, None]
    assert evaluate_term(Literal(3, pa.int32()), table).to_pylist() == [3, 3]


def test_map_element_access() -> None:
    maps = pa.array([[("k", 1)], [("j", 2)], None], pa.map_(pa.string(), pa.int64()))
    table = pa.table({"m": maps})
    assert rows("m['k'] = 1", table) == [0]
    assert rows("element_at(m, 'k') IS NULL", table) == [1, 2]


def test_a_map_key_spark_casts_is_left_to_spark() -> None:
    """Spark casts a map access's key to the key type (mi[1.5] reads key 1); lakelayout
    refused mi[1.5], mi['1.5'] and mi[4294967297] as keys that "cannot exist" (an audit).
    They are opaque now (files kept); a key that is one value of the type still binds."""
    from lakelayout.expr.nodes import Opaque

    schema = pa.schema([("mi", pa.map_(pa.int32(), pa.string()))])
    for sql in ("mi[1.5] = 'a'", "mi['1.5'] = 'a'", "mi[4294967297] = 'a'"):
        assert any(isinstance(n, Opaque) for n in parse_predicate(sql, schema).walk()), sql
    bound = parse_predicate("mi[1] = 'a'", schema)
    assert not any(isinstance(n, Opaque) for n in bound.walk())
    # a text key Spark casts to a TIMESTAMP before 1970 in a region zone: left to Spark
    # (it raised a raw UncertainOffset: a review)
    stamped = pa.schema([("m", pa.map_(pa.timestamp("us", tz="UTC"), pa.int32()))])
    tree = parse_predicate("m['1960-06-01 01:00:00'] = 1", stamped, timezone="Europe/Oslo")
    assert any(isinstance(n, Opaque) for n in tree.walk())


def test_decimal_and_string_view_columns() -> None:
    table = pa.table(
        {
            "v": pa.array(["b", "a", None], pa.string_view()),
            "p": pa.array(
                [decimal.Decimal("1.10"), None, decimal.Decimal("-2.00")], pa.decimal128(5, 2)
            ),
        }
    )
    assert rows("v >= 'b'", table) == [0]
    assert rows("p % 1 = 0.1", table) == [0]
    assert rows("p + 1 = -1", table) == [2]


def test_hand_built_not_is_pushed_when_possible() -> None:
    pred = Not(Compare("<", Column("i", pa.int32()), Literal(3, pa.int32())))
    assert rows_of(pred) == rows("i >= 3")
    with pytest.raises(PredicateError):
        evaluate(Not(Opaque("rand() < 1")), TABLE)


def rows_of(pred: object) -> list[int]:
    return [int(i) for i in np.flatnonzero(evaluate(pred, TABLE))]  # type: ignore[arg-type]


# ---------------------------------------------------------------- properties


def _evaluable(sql: str) -> np.ndarray | None:
    try:
        return evaluate(parse_predicate(sql, TABLE.schema), TABLE)
    except PredicateError:
        return None


def _rows(pred: Predicate) -> np.ndarray | None:
    try:
        return evaluate(pred, TABLE)
    except PredicateError:
        return None


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicates())
def test_not_pushdown_is_three_valued_negation(sql: str) -> None:
    """p and NOT p never both hold; NOT NOT p selects what p selects."""
    kept, dropped = _evaluable(sql), _evaluable(f"NOT ({sql})")
    if kept is None or dropped is None:
        return
    assert not np.any(kept & dropped)
    again = _evaluable(f"NOT (NOT ({sql}))")
    assert again is not None and np.array_equal(again, kept)


def _some_column_null(pred: Predicate, table: pa.Table) -> np.ndarray:
    """Rows where a column ``pred`` reads is NULL."""
    out = np.zeros(table.num_rows, dtype=bool)
    for node in pred.walk():
        if isinstance(node, Column):
            out |= evaluate_term(node, table).is_null().to_numpy(zero_copy_only=False)
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicates())
@example("(i IS NOT NULL AND i = 0)")
def test_negation_of_parsed_tree_covers_not_text(sql: str) -> None:
    """Predicate.negate() on the parsed tree selects what parsing ``NOT (sql)`` selects.

    The negation never overlaps the predicate. The parsed tree is normalized
    for WHERE semantics, so its negation is not exactly ``NOT (sql)``: folds
    that read NULL as FALSE (NULL or out-of-range literals, NaN, LIKE '%', ...)
    widen it, and dropping ``t IS NOT NULL`` beside a conjunct that is NULL
    where ``t`` is (``t IS NOT NULL AND t = 0`` -> ``t = 0``) narrows it, on
    rows where ``t`` is NULL only. So ``NOT (sql)`` ⊆ ``negate(tree)`` on rows
    where no column the tree reads is NULL; exact NOT push-down is pinned by
    the rule table in normalize_cases.txt. Two-valued forms (``IS [NOT]
    TRUE/FALSE``, ``<=>``) only keep disjointness.
    """
    try:
        pred = parse_predicate(sql, TABLE.schema)
        via_text = evaluate(parse_predicate(f"NOT ({sql})", TABLE.schema), TABLE)
        via_tree = evaluate(pred.negate(), TABLE)
    except PredicateError:
        return
    assert not np.any(via_tree & evaluate(pred, TABLE))
    if "<=>" in sql or " TRUE" in sql or " FALSE" in sql:
        return  # IS [NOT] TRUE/FALSE and <=> are two-valued: only disjointness holds
    assert not np.any(via_text & ~via_tree & ~_some_column_null(pred, TABLE))


@settings(max_examples=EXAMPLES, deadline=None)
@given(predicates(), st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata", "Europe/Oslo"]))
def test_sql_round_trip_is_stable(sql: str, zone: str) -> None:
    """Rendering, re-parsing and re-rendering is a fixed point selecting the same rows, in
    any session time zone (the parse memo answers a rendering with the tree it renders)."""
    try:
        pred = parse_predicate(sql, TABLE.schema, timezone=zone)
    except PredicateError:
        return
    # bound afresh (parse_predicate answers a rendering from its memo with ``pred``)
    try:
        again = parse_module._bind_predicate(pred.sql(), TABLE.schema, {}, zone)
    except PredicateError as err:
        raise AssertionError(f"{pred.sql()!r} does not bind again: {err}") from err
    assert again.sql() == pred.sql()
    first, second = _rows(pred), _rows(again)
    if first is not None and second is not None:
        assert np.array_equal(first, second)


INT_TYPES = st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.decimal128(6, 2)])


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    INT_TYPES,
    st.lists(st.integers(-(2**7), 2**7 - 1) | st.none(), min_size=1, max_size=20),
    st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False),
    st.booleans(),
)
def test_folding_against_column_type_is_exact(
    dtype: pa.DataType, values: list[int | None], op: str, bound: decimal.Decimal, flip: bool
) -> None:
    """``col op literal`` after range/scale folding keeps exactly the rows Python's exact
    arithmetic keeps (NULLs never)."""
    convert = decimal.Decimal if pa.types.is_decimal(dtype) else int
    column = pa.array([None if v is None else convert(v) for v in values], dtype)
    table = pa.table({"c": column})
    text = f"{bound} {_flip(op)} c" if flip else f"c {op} {bound}"
    got = evaluate(parse_predicate(text, table.schema), table)
    compare = {
        "=": lambda a: a == bound,
        "!=": lambda a: a != bound,
        "<": lambda a: a < bound,
        "<=": lambda a: a <= bound,
        ">": lambda a: a > bound,
        ">=": lambda a: a >= bound,
    }[op]
    expected = [v is not None and bool(compare(decimal.Decimal(v))) for v in column.to_pylist()]
    assert got.tolist() == expected


def _flip(op: str) -> str:
    return {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]


def test_folds_build_the_documented_nodes() -> None:
    schema = pa.schema([("t", pa.int8())])
    col = Column("t", pa.int8())
    assert parse_predicate("t < 1000", schema) == IsNull(col, negated=True)
    assert parse_predicate("t < 5.5 AND t > -0.5", schema) == And(
        (
            Compare("<=", col, Literal(5, pa.int8())),
            Compare(">=", col, Literal(0, pa.int8())),
        )
    )
    assert parse_predicate("NOT (t > 1 AND t = 1000)", schema) == Or(
        (Compare("<=", col, Literal(1, pa.int8())), IsNull(col, negated=True))
    )


# ---------------------------------------------------------------- numbers as Spark computes them (issue 10)

WIDE_TABLE = pa.table(
    {
        "d2": pa.array([decimal.Decimal("-42987701586.02"), None], pa.decimal128(38, 2)),
        "d0": pa.array(
            [decimal.Decimal("9" * 38), decimal.Decimal(-(10**37))], pa.decimal128(38, 0)
        ),
        "d18": pa.array([decimal.Decimal("1.5"), None], pa.decimal128(38, 18)),
        "big": pa.array([2**53 + 1, 2**63 - 1], pa.int64()),
        "x": pa.array([9007199254740992.0, 1.5]),
    }
)


def test_decimal_to_double_is_correctly_rounded() -> None:
    """Arrow's cast gives -42987701586.020004; Spark (Java) gives the nearest double."""
    term = parse_term("d2 + 0.0D", WIDE_TABLE.schema)
    assert evaluate_term(term, WIDE_TABLE).to_pylist() == [-42987701586.02, None]


def test_bigint_against_double_rounds_instead_of_failing() -> None:
    assert rows("big = x", WIDE_TABLE) == [0]  # 2**53 + 1 is 2**53 as a double
    term = parse_term("big + 0.5D", WIDE_TABLE.schema)
    assert evaluate_term(term, WIDE_TABLE).to_pylist() == [9007199254740992.0, 9.223372036854776e18]


def test_remainder_of_38_digit_decimals_is_exact() -> None:
    term = parse_term("d0 % 7", WIDE_TABLE.schema)
    assert evaluate_term(term, WIDE_TABLE).to_pylist() == [
        decimal.Decimal(int("9" * 38) % 7),
        decimal.Decimal(-(10**37 % 7)),
    ]


def test_decimal_division_is_not_modelled() -> None:
    assert parse_predicate("d2 / 3 > 0.41", WIDE_TABLE.schema) == Opaque(
        "d2 / 3 > 0.41", frozenset({"d2"})
    )
    with pytest.raises(PredicateError) as err:
        parse_term("d2 / 3", WIDE_TABLE.schema)
    assert str(err.value) == "unsupported expression 'd2 / 3': decimal division"


def test_arrow_failures_surface_as_predicate_errors() -> None:
    with pytest.raises(PredicateError) as err:
        evaluate(parse_predicate("d0 < d18", WIDE_TABLE.schema), WIDE_TABLE)
    assert str(err.value) == (
        "evaluating 'd0 < d18' failed: Rescaling Decimal value would cause data loss"
    )


MAP_KEYS = st.one_of(st.sampled_from(["a", "b", "", "é", "\x00"]), st.text(max_size=3))
MAPS = st.lists(
    st.one_of(
        st.none(),
        st.lists(st.tuples(MAP_KEYS, st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)))),
    ),
    max_size=12,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    maps=MAPS,
    key=st.one_of(st.none(), MAP_KEYS),
    cut=st.tuples(st.integers(0, 12), st.integers(0, 12)),
)
def test_property_map_element_is_arrows_first_lookup(
    maps: list[list[tuple[str, int | None]] | None], key: str | None, cut: tuple[int, int]
) -> None:
    """``m[k]`` on any slice (NULL maps, empty maps, repeated keys, NULL values) is the
    value of the first entry with that key, as Arrow's ``map_lookup`` finds it."""
    from lakelayout.expr.evaluate import _map_first

    array = pa.array(maps, pa.map_(pa.string(), pa.int64()))
    start = min(cut[0], len(maps))
    part = array.slice(start, cut[1])
    got = _map_first(part, pa.scalar(key, pa.string()))
    want = [None if m is None else next((v for k, v in m if k == key), None) for m in maps]
    assert got.to_pylist() == want[start : start + cut[1]]
    if key is not None:
        assert got.equals(pc.map_lookup(part, query_key=pa.scalar(key), occurrence="first"))
    # through the evaluator, on a table of two chunks
    table = pa.Table.from_batches(
        [pa.record_batch({"m": array.slice(0, start)}), pa.record_batch({"m": array.slice(start)})]
    )
    if key is not None and key.isprintable() and not {"'", "\\"} & set(key):
        term = parse_term(f"m['{key}']", table.schema)
        assert evaluate_term(term, table).to_pylist() == want


def test_map_element_of_a_null_map_is_null_even_when_it_spans_entries() -> None:
    """A NULL slot's offsets may cover entries (Arrow allows it): they are not its own."""
    from lakelayout.expr.evaluate import _map_first

    maps = pa.MapArray.from_arrays(
        pa.array([0, 1, 3, 4]), pa.array(["a", "a", "b", "a"]), pa.array([1, 2, 3, 4]),
        mask=pa.array([False, True, False]),
    )  # fmt: skip
    assert maps.to_pylist() == [[("a", 1)], None, [("a", 4)]]
    assert _map_first(maps, pa.scalar("a")).to_pylist() == [1, None, 4]
    assert _map_first(maps.slice(1), pa.scalar("a")).to_pylist() == [None, 4]


def test_map_element_with_floating_keys_is_refused_not_guessed() -> None:
    """NaN and -0.0 keys make equality a matter of semantics: no answer (unknown), as
    Arrow's ``map_lookup`` gives none, instead of ``==``'s."""
    maps = pa.array([[(float("nan"), 1), (0.0, 2)]], pa.map_(pa.float64(), pa.int64()))
    term = parse_term("m[0.0D]", pa.schema([("m", maps.type)]))
    with pytest.raises(PredicateError):
        evaluate_term(term, pa.table({"m": maps}))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(predicates(), min_size=1, max_size=6))
@example(["x * 2.0D > 1.5D", "x * 3.0D > 1.5D", "x + 0.0D > 0", "x + -0.0D >= 0"])
def test_property_one_evaluator_answers_as_separate_evaluations(texts: list[str]) -> None:
    """Sharing function terms between the predicates of one batch (and each one's
    negation) changes no answer, and a predicate that fails still fails alone."""
    from lakelayout.expr.evaluate import Evaluator

    preds = []
    for sql in texts:
        pred = parse_predicate(sql, TABLE.schema)
        preds += [pred, pred.negate()]
    ev = Evaluator(TABLE)
    for pred in preds + preds[::-1]:  # the second pass is answered from the shared terms
        try:
            alone = evaluate(pred, TABLE)
        except PredicateError:
            with pytest.raises(PredicateError):
                ev.mask(pred)
            continue
        assert np.array_equal(ev.mask(pred), alone), pred.sql()
