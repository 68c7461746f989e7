"""Cuts, regions and the safe region/query intersection test."""

from __future__ import annotations

import datetime as dt
import decimal
import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import LayoutError
from lakelayout.expr.codec import expr_from_json, expr_to_json
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.nodes import Column, Compare, Literal, Opaque, Or
from lakelayout.expr.parse import _bind_predicate, parse_predicate
from lakelayout.layouts.cuts import (
    RECENT_PLANS,
    Region,
    candidate_cuts,
    cut_of,
    may_intersect,
    plan_query,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("m", pa.decimal128(10, 2)),
    ]
)


def p(sql: str):
    return parse_predicate(sql, SCHEMA)


def region(*outcomes: tuple[str, bool]) -> Region:
    """A region from (cut SQL, outcome) pairs; the SQL is put in cut form first."""
    r = Region()
    for sql, outcome in outcomes:
        cut = cut_of(p(sql))
        assert cut is not None, sql
        r = r.with_outcome(cut.atom, outcome)
    return r


# ---------------------------------------------------------------- candidate cuts

CUT_FORMS = [
    ("i > 5", "i <= 5L", "range"),
    ("i >= 5", "i < 5L", "range"),
    ("i < 5", "i < 5L", "range"),
    ("i = 3", "i IN (3L)", "in"),
    ("i != 3", "i IN (3L)", "in"),
    ("s NOT IN ('a', 'b')", "s IN ('a', 'b')", "in"),
    ("s NOT LIKE 'ab%'", "startswith(s, 'ab')", "advanced"),
    ("i IS NOT NULL", "i IS NULL", "advanced"),
    ("month(ts) = 12", "month(ts) IN (12)", "in"),
]


@pytest.mark.parametrize(("sql", "cut_sql", "kind"), CUT_FORMS)
def test_cut_positive_form(sql: str, cut_sql: str, kind: str) -> None:
    cut = cut_of(p(sql))
    assert cut is not None
    assert (cut.sql(), cut.kind) == (cut_sql, kind)


def test_candidate_cuts_dedupe_and_between() -> None:
    preds = [p("i BETWEEN 3 AND 7"), p("i > 7 OR s = 'q'"), p("i < 3")]
    assert sorted(c.sql() for c in candidate_cuts(preds)) == ["i < 3L", "i <= 7L", "s IN ('q')"]


def test_opaque_and_null_literals_give_no_cut() -> None:
    assert cut_of(Opaque("rand() < 0.5")) is None
    assert cut_of(Compare("<", Column("i"), Literal(None))) is None
    assert cut_of(Compare("<", Column("x"), Literal(float("nan")))) is None
    assert candidate_cuts([Or((Opaque("x"), Opaque("y")))]) == []


# ---------------------------------------------------------------- may_intersect rules

RULES = [
    # (outcomes, query, may intersect)
    ((("i < 10", True),), "i > 20", False),
    ((("i < 10", True),), "i >= 9", True),
    ((("i < 10", True),), "i = 10", False),
    ((("i < 10", True),), "i <= 10", True),
    ((("i < 10", True),), "i IS NULL", False),
    ((("i < 10", False),), "i IS NULL", True),  # NULL went to the NOT TRUE side
    ((("i < 10", False),), "i = 3", False),
    ((("i < 10", False),), "i >= 10", True),
    ((("i < 10", False),), "i IS NOT NULL", True),
    ((("i IS NULL", True),), "i IS NOT NULL", False),
    ((("i IS NULL", True),), "i < 3 OR i IS NULL", True),
    ((("i IS NULL", False),), "i IS NULL", False),
    ((("i < 10", True), ("i < 5", False)), "i < 5", False),
    ((("i < 10", True), ("i < 5", False)), "i BETWEEN 6 AND 7", True),
    ((("i < 10", True), ("i < 5", False)), "i BETWEEN 10 AND 20", False),
    ((("i < 10", True), ("i < 5", False)), "i > 20 OR i < 0", False),
    ((("i < 10", True), ("i < 5", False)), "i > 20 OR s = 'a'", True),
    ((("i = 4", True),), "i != 4", False),
    ((("i = 4", True),), "i IN (1, 4)", True),
    ((("i = 4", True),), "i NOT IN (1, 4)", False),
    ((("s IN ('x', 'y')", True),), "s = 'z'", False),
    ((("s IN ('x', 'y')", True),), "s IN ('y', 'q')", True),
    ((("s IN ('x', 'y')", True),), "s LIKE 'x%'", True),
    ((("s IN ('x', 'y')", True),), "s LIKE 'q%'", False),
    ((("s IN ('x', 'y')", True),), "s LIKE '%y'", True),
    ((("s IN ('x', 'y')", True),), "s LIKE '%z'", False),
    ((("s IN ('x', 'y')", False),), "s = 'x'", False),
    ((("s IN ('x', 'y')", False),), "s != 'x'", True),
    ((("s IN ('x', 'y')", False),), "s IS NULL", True),
    ((("s < 'm'", True),), "s LIKE 'z%'", False),
    ((("s < 'm'", True),), "s LIKE 'a%'", True),
    ((("s < 'm'", True),), "s LIKE 'm%'", False),
    ((("s < 'm'", False),), "s LIKE 'l%'", False),
    ((("s < 'm'", False),), "s LIKE 'mz%'", True),
    ((("s LIKE 'ab%'", True),), "s < 'aa'", False),
    ((("s LIKE 'ab%'", True),), "s NOT LIKE 'ab%'", False),
    ((("s LIKE '%ab%'", False),), "s LIKE '%ab%'", False),
    ((("s LIKE '%ab%'", False),), "s LIKE '%ab%' AND i < 3", False),
    ((("s LIKE '%ab%'", False),), "s LIKE '%ab%' OR i < 3", True),
    ((("s LIKE '%ab%'", True),), "s NOT LIKE '%ab%'", False),
    ((("s LIKE '%ab%'", False),), "s NOT LIKE '%ab%'", True),
    ((("month(ts) = 12", True),), "month(ts) = 11", False),
    ((("month(ts) = 12", True),), "month(ts) >= 6", True),
    ((("month(ts) = 12", False),), "month(ts) = 12", False),
    ((("d < DATE '2020-01-01'", True),), "d >= DATE '2020-01-01'", False),
    ((("d < DATE '2020-01-01'", True),), "d > DATE '2019-12-31'", False),
    ((("d < DATE '2020-01-01'", True),), "d >= DATE '2019-12-31'", True),
    ((("m < 1.50", True),), "m >= 1.50", False),
    ((("m < 1.50", True),), "m > 1.49", True),
    ((("x < 1.5", True),), "x > 2.0", False),
    ((("x < 1.5", True),), "x = CAST('NaN' AS DOUBLE)", True),  # unknown: keep
    ((("x < 1.5", False),), "x > 1e300", True),  # NaN sorts above every number
    ((("i < 10", True),), "FALSE", False),
    ((("i < 10", True),), "TRUE", True),
]


@pytest.mark.parametrize(("outcomes", "query", "expected"), RULES)
def test_may_intersect_rules(outcomes, query: str, expected: bool) -> None:
    assert may_intersect(p(query), region(*outcomes)) is expected


def test_mismatched_value_kinds_never_skip() -> None:
    a = Column("a")
    r = Region().with_outcome(Compare("<", a, Literal(dt.date(2020, 1, 1))), True)
    assert may_intersect(Compare(">", a, Literal(dt.datetime(2021, 1, 1))), r)
    assert may_intersect(Compare("=", a, Literal("2021-01-01")), r)


def test_region_describe_spells_null_side() -> None:
    text = region(("i < 10", False)).describe()
    assert "IS NULL" in text and "i < 10L" in text


# ---------------------------------------------------------------- JSON codec

LITERALS = [
    1,
    -(2**62),
    1.5,
    float("inf"),
    True,
    "it's",
    dt.date(1999, 12, 31),
    dt.datetime(2020, 1, 2, 3, 4, 5, 6),
    dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
    decimal.Decimal("12.30"),
    b"\x00\xff",
    None,
]


@pytest.mark.parametrize("value", LITERALS, ids=repr)
def test_json_round_trip_literals(value: object) -> None:
    node = Compare("=", Column("c", pa.int32()), Literal(value, pa.int64()))
    back = expr_from_json(expr_to_json(node))
    assert back == node
    assert type(back.value.value) is type(value)
    assert back.value.dtype == pa.int64() and back.term.dtype == pa.int32()


@pytest.mark.parametrize(
    "sql",
    [
        "i BETWEEN 1 AND 3 OR s LIKE '%a_b%'",
        "month(ts) = 12 AND d > DATE '2020-01-01' AND m IN (1.25, 2.50)",
        "NOT (s LIKE 'x%') AND i IS NOT NULL AND lower(s) = 'q'",
        "i + 1 > 3 OR x < 2.5",
    ],
)
def test_json_round_trip_predicates(sql: str) -> None:
    pred = p(sql)
    back = expr_from_json(expr_to_json(pred))
    assert back == pred and back.sql() == pred.sql()


def test_json_rejects_garbage() -> None:
    with pytest.raises(LayoutError, match="bad serialized expression"):
        expr_from_json({"node": "Nope"})


# ---------------------------------------------------------------- safety property

ATOM_TEMPLATES = st.one_of(
    st.tuples(
        st.just("i"), st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.integers(-3, 12)
    ).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.floats(-5, 5)).map(
        lambda t: f"x {t[0]} {t[1]!r}"
    ),
    st.tuples(
        st.sampled_from(["<", ">=", "=", "!="]), st.sampled_from(["", "a", "ab", "b", "ba"])
    ).map(lambda t: f"s {t[0]} '{t[1]}'"),
    st.lists(st.integers(-2, 10), min_size=1, max_size=3).map(
        lambda v: f"i IN ({', '.join(map(str, v))})"
    ),
    st.lists(st.integers(-2, 10), min_size=1, max_size=3).map(
        lambda v: f"i NOT IN ({', '.join(map(str, v))})"
    ),
    st.sampled_from(
        [
            "i IS NULL",
            "i IS NOT NULL",
            "x IS NULL",
            "s IS NULL",
            "s LIKE 'a%'",
            "s LIKE '%b'",
            "s LIKE '%a%'",
            "s NOT LIKE 'b%'",
            "x = CAST('NaN' AS DOUBLE)",
            "x > CAST('Infinity' AS DOUBLE)",
            "i % 3 = 1",
        ]
    ),
)


@st.composite
def predicates(draw: st.DrawFn, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(ATOM_TEMPLATES)
    op = draw(st.sampled_from(["AND", "OR"]))
    parts = draw(st.lists(predicates(depth - 1), min_size=2, max_size=3))
    text = f" {op} ".join(f"({q})" for q in parts)
    return f"NOT ({text})" if draw(st.booleans()) else text


def random_rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ints = rng.integers(-3, 13, n).astype(object)
    ints[rng.random(n) < 0.15] = None
    xs = rng.choice([-1.5, 0.0, -0.0, 1.0, 2.5, 4.0, float("nan"), float("inf")], n).astype(object)
    xs[rng.random(n) < 0.1] = None
    ss = rng.choice(["", "a", "ab", "abb", "b", "ba", "zz"], n).astype(object)
    ss[rng.random(n) < 0.1] = None
    return pa.table(
        {
            "i": pa.array(ints, pa.int64()),
            "x": pa.array(xs, pa.float64()),
            "s": pa.array(ss, pa.string()),
        }
    )


SMALL = pa.schema([("i", pa.int64()), ("x", pa.float64()), ("s", pa.string())])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    cuts=st.lists(st.tuples(ATOM_TEMPLATES, st.booleans()), min_size=1, max_size=4),
    query=predicates(),
    seed=st.integers(0, 2**16),
)
def test_region_never_rules_out_a_matching_row(cuts, query: str, seed: int) -> None:
    """If a row lies in the region and satisfies the query, may_intersect says True."""
    rows = random_rows(seed, 300)
    in_region = np.ones(rows.num_rows, dtype=bool)
    r = Region()
    for sql, outcome in cuts:
        cut = cut_of(parse_predicate(sql, SMALL))
        if cut is None:
            continue
        hit = evaluate(cut.atom, rows)
        in_region &= hit if outcome else ~hit
        r = r.with_outcome(cut.atom, outcome)
    q = parse_predicate(query, SMALL)
    if (in_region & evaluate(q, rows)).any():
        assert may_intersect(q, r), (r.describe(), q.sql())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    cuts=st.lists(st.tuples(ATOM_TEMPLATES, st.booleans()), min_size=1, max_size=4),
    queries=st.lists(predicates(), min_size=1, max_size=6),
)
def test_a_region_answers_the_same_with_its_remembered_atoms(cuts, queries: list[str]) -> None:
    """A region remembers its answer per atom: a region that answered other queries first
    must answer each query as a fresh region does."""
    used = Region()
    fresh_cuts = []
    for sql, outcome in cuts:
        cut = cut_of(parse_predicate(sql, SMALL))
        if cut is not None:
            used = used.with_outcome(cut.atom, outcome)
            fresh_cuts.append((cut.atom, outcome))
    parsed = [parse_predicate(q, SMALL) for q in queries]
    for q in [*parsed, *parsed]:
        fresh = Region()
        for atom, outcome in fresh_cuts:
            fresh = fresh.with_outcome(atom, outcome)
        assert may_intersect(q, used) == may_intersect(q, fresh), q.sql()


def test_a_predicate_s_plan_is_built_once_and_kept_by_identity() -> None:
    """Pricing one query on many trees plans it once; an equal but distinct predicate (or
    one whose plan was evicted) is planned afresh, to the same plan."""
    schema = pa.schema([("a", pa.int64()), ("s", pa.string())])
    sql = "a < 10 AND (s LIKE 'x%' OR a > 90)"
    query = parse_predicate(sql, schema)
    plan = plan_query(query)
    assert plan_query(query) is plan
    assert parse_predicate(sql, schema) is query  # the same text binds to the same tree
    twin = _bind_predicate(sql, schema, None, "UTC")  # an equal tree bound apart
    assert twin is not query and twin == query and plan_query(twin) is not plan
    assert plan_query(twin) == plan
    for k in range(RECENT_PLANS):  # push it out of the cache
        plan_query(parse_predicate(f"a = {k}", schema))
    again = plan_query(query)
    assert again is not plan and again == plan
