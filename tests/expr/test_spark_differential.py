"""Differential test: ``evaluate`` keeps exactly the rows Spark's ``df.where(F.expr(sql))`` keeps.

One Spark DataFrame over the edge-case table, many random predicates (hypothesis).
When lakelayout's evaluator raises an ANSI error (overflow, division by zero),
Spark must either raise too or have short-circuited past the failing branch.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakelayout.errors import PredicateError
from lakelayout.expr import evaluate, parse_predicate
from lakelayout.expr.nodes import Opaque

from ..processes import COMPILED, INTERPRETED
from .predicates import (
    TEXT_SESSIONS,
    edge_predicates,
    edge_table,
    extreme_predicates,
    extreme_table,
    planner_predicates,
    planner_table,
    predicates,
    session_conf,
    session_text_cases,
    session_zone,
)

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "50"))
TABLE = edge_table()

#: fixed corners checked on every run, besides the random ones
CORNERS = [
    "x = CAST('NaN' AS DOUBLE)",
    "x > CAST('Infinity' AS DOUBLE)",
    "x IN (0.0)",
    "x IN (-0.0, CAST('NaN' AS DOUBLE))",
    "x = -0.0",
    "x < 'NaN'",
    "s > 'Z'",
    "s < '😀'",
    "s LIKE 'a_b'",
    "s LIKE '_x'",
    "s LIKE '%'",
    "s LIKE 'a\\\\_b'",
    "s ILIKE 'ABC'",
    "lower(s) = 'héllo'",
    "upper(s) = 'HÉLLO'",
    "length(s) = 2",
    "substring(s, -2) = 'bc'",
    "substring(s, 0, 1) = 'a'",
    "substring(s, -5, 3) = 'a'",
    "i NOT IN (5, NULL)",
    "NOT (i IN (5, 7))",
    "ti < 1000",
    "NOT (ti = 1000)",
    "i < 5.5",
    "i = 5.0",
    "i < CAST('NaN' AS DOUBLE)",
    "dec < 1.505",
    "dec = 1.5BD",
    "dec % 1 = 0.5",
    "i % 3 = -1",
    "d < TIMESTAMP '1995-03-01 12:00:00'",
    "d = TIMESTAMP '1995-03-01 00:00:00'",
    "d < ts",
    "ts >= '1995-03-01'",
    "ts > DATE '1995-03-01'",
    "hour(ts) = 23",
    "month(d) = 2",
    "dayofweek(d) = 4",
    "date_trunc('MONTH', ts) = TIMESTAMP '1995-03-01 00:00:00'",
    "b IS NOT TRUE",
    "b = 'true'",
    "b IN ('yes', '0')",
    "b != ' F '",
    "NOT (i <=> 5)",
    "coalesce(x, 1.5) = 1.5",
    "x / 2 > 0.5",
    "i IN (0, '5')",  # opaque to us (a mixed IN list): nothing to compare, never an error
]


@pytest.fixture(scope="module", autouse=True)
def compiled(spark: Any) -> Iterator[None]:
    """Spark's expressions compiled, as a user's session runs them: the suite's session
    interprets them (tests/processes.py, INTERPRETED), and this module compares the
    evaluator with what users get."""
    for key, value in COMPILED.items():
        spark.conf.set(key, value)
    plan = spark.range(3).where("id > 1")._jdf.queryExecution().executedPlan().toString()
    assert plan.startswith("*(1) "), plan  # a whole-stage compiled plan
    yield
    for key, value in INTERPRETED.items():
        spark.conf.set(key, value)


@pytest.fixture(scope="module")
def frame(spark: Any) -> Any:
    # Deliberately not .cache(): Spark's in-memory batch pruning drops NaN rows for
    # ``x = NaN`` and ``x > Infinity`` (its min/max stats ignore NaN); the LocalRelation
    # path evaluates the filter row by row, as a file scan does.
    return spark.createDataFrame(TABLE)


def spark_rows(spark: Any, frame: Any, sql: str) -> list[int] | str:
    from pyspark.sql import functions as F

    try:
        return sorted(r.id for r in frame.where(F.expr(sql)).select("id").collect())
    except Exception as err:  # any Spark error: ANSI runtime errors, analysis errors
        return f"spark error: {str(err).splitlines()[0][:200]}"


#: what our_rows answers for a predicate with a leaf it does not model
OPAQUE = "opaque"


def our_rows(sql: str, timezone: str, table: Any = TABLE) -> list[int] | str:
    try:
        pred = parse_predicate(sql, table.schema, timezone=timezone)
    except PredicateError as err:
        return f"lakelayout error: {err}"
    if any(isinstance(node, Opaque) for node in pred.walk()):
        return OPAQUE  # not modelled: an opaque leaf never lets a file be skipped
    try:
        return [int(i) for i in np.flatnonzero(evaluate(pred, table, timezone=timezone))]
    except PredicateError as err:
        if "not evaluated outside Spark" in str(err):
            return OPAQUE  # left to Spark (case mappings, zone offsets before 1970): kept
        return f"lakelayout error: {err}"


def spark_fails_on_the_named_leaf(spark: Any, frame: Any, message: str) -> bool:
    """Whether Spark fails on the comparison a bind-time rejection names, evaluated on
    every row. Spark raises ANSI runtime errors (a malformed cast) only for rows it
    evaluates: ``x = <never true> AND ti = '127.0'`` short-circuits past the cast that
    ``ti = '127.0'`` alone fails on."""
    named = re.search(r'type mismatch in "(.+?)": ', message)
    return named is not None and isinstance(spark_rows(spark, frame, named.group(1)), str)


def check(spark: Any, frame: Any, sql: str, table: Any = TABLE) -> None:
    timezone = spark.conf.get("spark.sql.session.timeZone")
    ours = our_rows(sql, timezone, table)
    if ours == OPAQUE:
        return
    theirs = spark_rows(spark, frame, sql)
    if isinstance(ours, str):
        parse_failed = ours.startswith("lakelayout error: ") and not any(
            key in ours for key in ("overflow", "by zero")
        )
        if parse_failed:  # rejected at bind time: Spark must fail too (ANSI) on this data
            assert isinstance(theirs, str) or spark_fails_on_the_named_leaf(spark, frame, ours), (
                f"{sql!r}: we rejected ({ours}), Spark kept {theirs}"
            )
        return  # an ANSI runtime error: Spark raises too, or short-circuits past it
    if isinstance(theirs, str) and "spark error" in theirs:
        # Spark fails the query (e.g. overflow in a branch we folded away): it returns
        # no rows for skipping to lose, so there is nothing to compare
        return
    assert ours == theirs, f"{sql!r}: lakelayout {ours} != Spark {theirs}"


@pytest.mark.parametrize("sql", CORNERS)
def test_corner_matches_spark(spark: Any, frame: Any, sql: str) -> None:
    check(spark, frame, sql)


#: instants whose wall-clock time the system's zone database and the JVM's disagree on
#: in the zones below (an audit: rows lost there), beside ones they agree on
OLD_TIMES = pa.table(
    {
        "id": [0, 1, 2, 3, 4],
        "ts": pa.array(
            [
                dt.datetime(1960, 6, 1, 12, tzinfo=dt.timezone.utc),
                dt.datetime(1900, 1, 1, 0, tzinfo=dt.timezone.utc),
                dt.datetime(1950, 1, 15, 0, 30, tzinfo=dt.timezone.utc),
                dt.datetime(1995, 3, 1, 12, tzinfo=dt.timezone.utc),
                None,
            ],
            pa.timestamp("us", tz="UTC"),
        ),
    }
)


@pytest.mark.parametrize("zone", ["Europe/Oslo", "Europe/Amsterdam", "Atlantic/Reykjavik"])
@pytest.mark.parametrize(
    "sql",
    [
        "hour(ts) = 13",
        "minute(ts) = 0",
        "to_date(ts) = DATE '1950-01-15'",
        "ts = TIMESTAMP '1960-06-01 13:00:00'",
        "ts < TIMESTAMP '1960-06-01 14:00:00'",
        "date_format(ts, 'yyyy-MM-dd HH') = '1960-06-01 13'",
    ],
)
def test_times_before_1970_where_zone_databases_differ(spark: Any, sql: str, zone: str) -> None:
    with session_zone(spark, zone):
        check(spark, spark.createDataFrame(OLD_TIMES), sql, OLD_TIMES)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=predicates(max_leaves=4))
def test_random_predicates_match_spark(spark: Any, frame: Any, sql: str) -> None:
    check(spark, frame, sql)


# ---------------------------------------------------------------- the kinds issue 11 added

PLANNER = planner_table()

PLANNER_CORNERS = [
    "st.x = 5",
    "st.y.z < 5",
    "ST.Y.Z IS NULL",
    "st IS NULL",
    "`st.x` = 5",
    "`st.x` > st.x",
    "st.x IN (1, NULL)",
    "st.x NOT IN (1, NULL)",
    "ts > TIMESTAMP '1995-03-01 12:30:01.000004'",
    "ts < TIMESTAMP '1995-03-01 12:30:01.001'",
    "ts >= TIMESTAMP '1995-03-01 04:30:01.000005 PST'",
    "ts = TIMESTAMP '1995-03-01 18:00:01.000005 +05:30'",
    "ts < TIMESTAMP '2020-06-15 10:00:00 Europe/Paris'",
    "ts < TIMESTAMP '+10000-01-01 00:00:00'",
    "ts > TIMESTAMP '-0001-01-01 00:00:00'",
    "ts <= TIMESTAMP '9999-12-31 23:59:59.999999'",
    "date_format(d, 'yyyy-MM') = '1995-03'",
    "date_format(d, 'yyyy-MM-dd') < '1995-03-02'",
    "date_format(ts, 'yyyy-MM-dd HH') = '1995-03-01 12'",
    "year(d) = 1995",
    "CAST(i AS STRING) = '5'",
    "CAST(d AS STRING) = '1995-03-01'",
    "CAST(dec AS STRING) = '1.50'",
    "CAST(dec AS STRING) = '-0.01'",
    "CAST(b AS STRING) = 'true'",
    "CAST(ti AS BIGINT) > 3",
    "substring(s, 1, 2) = 'ab'",
    "(i > 0) IS NULL",
    "(i > ti) IS NOT NULL",
    "(s LIKE 'a%') IS NULL",
    "(i BETWEEN 1 AND 5) IS NULL",
    "(ti = 1000) IS NULL",
    "year(d) IS NULL",
    "(st.x = 5) IS NOT NULL",
    "isnull(i)",
    "isnotnull(st.x)",
    "i IN (5, NULL)",
    "i NOT IN (5, NULL)",
    "s NOT IN ('abc', NULL)",
    "d IN (NULL)",
]


@pytest.fixture(scope="module")
def planner_frame(spark: Any) -> Any:
    return spark.createDataFrame(PLANNER)


@pytest.mark.parametrize("sql", PLANNER_CORNERS)
def test_planner_corner_matches_spark(spark: Any, planner_frame: Any, sql: str) -> None:
    check(spark, planner_frame, sql, PLANNER)


@pytest.mark.parametrize(
    "sql",
    [
        "ts <= TIMESTAMP '9999-12-31 23:59:59.999999'",
        "ts > TIMESTAMP '1995-03-01 07:30:01'",
        "date_format(ts, 'yyyy-MM-dd HH') = '1995-03-01 07'",
        "year(ts) = 1969",
        "to_date(ts) = DATE '1969-12-31'",
        "CAST(ts AS DATE) < DATE '1995-03-01'",
        "to_date(ts) >= '2020-06-15'",
    ],
)
def test_planner_corner_in_another_session_zone(spark: Any, planner_frame: Any, sql: str) -> None:
    with session_zone(spark, "America/New_York"):
        check(spark, planner_frame, sql, PLANNER)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=planner_predicates(max_leaves=4))
def test_random_planner_predicates_match_spark(spark: Any, planner_frame: Any, sql: str) -> None:
    check(spark, planner_frame, sql, PLANNER)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=edge_predicates(max_leaves=3))
def test_random_edge_kind_predicates_match_spark(spark: Any, frame: Any, sql: str) -> None:
    """``<=>`` / IS DISTINCT FROM with NULL, IN lists mixing NULL and NaN, date arithmetic
    at the first and last days, casts, chains of string functions."""
    check(spark, frame, sql)


# ---------------------------------------------------------------- extreme values (issue 10)

EXTREME = extreme_table()

#: fixed corners: rounded literals, Spark's comparison types, doubles beside exact values
EXTREME_CORNERS = [
    "d38_18 >= -12345678901.123456789012345678",
    "d38_18 = -12345678901234567890.123456789012345678",
    "d38_18 < -12345678901234567890.1234567890123456785",
    "d38_18 > 12345678901234567890.1234567890123456785",
    "d38_18 = 0.0000000000000000005",
    "d38_0 = 0.00000000000000000000000000000000000001",
    "d38_0 < 0.00000000000000000000000000000000000001",
    "d38_0 IN (0.5, 1)",
    "d38_2 IN (0.005, 12345678901234567890123456789012345678)",
    "d38_18 IN (-0.000000000000000001, 100000000000000000000)",
    "big = 9007199254740992e0",
    "big < 9223372036854775807e0",
    "big >= 9.223372036854775807E18D",
    "big IN (9007199254740992e0, 1)",
    "ti = 1E-38",
    "ti > -99999999999999999999.5",
    "ti <= -99999999999999999999.5",
    "ti BETWEEN 0.00000000000000000000000000000000000001 AND 5",
    # Spark folds an integral term against a decimal beyond BIGINT to a bare
    # FALSE / TRUE (NULL rows flip under NOT); a type-range fold stays NULL there
    "NOT (big > 9223372036854775808)",
    "NOT (big < -9223372036854775809)",
    "NOT (big < 9223372036854775808)",
    "(big > 9223372036854775808) IS NULL",
    "NOT (ti > -99999999999999999999.5)",
    "NOT (ti > 1000.5)",
    "NOT (ti < 1000.5)",
    "(ti > 1000.5) IS NULL",
    "big = '9007199254740993'",
    "d38_18 = '12345678901234567890.1234567890123456789'",
    "d10_2 = 12345678.9D",
    "d38_38 < 1E-38D",
    "d38_38 = 0.0D",
    "d38_0 = 1.2345678901234568E37D",
    "f32 = 16777217",
    "f32 = CAST(16777217 AS FLOAT)",
    "f32 = '0.1'",
    "f32 = CAST(0.1 AS FLOAT)",
    "f64 = -0.0D",
    "f64 > 0.0D",
    "f64 < 5e-324D",
    "f64 <= CAST('Infinity' AS DOUBLE)",
    "f64 = CAST('NaN' AS DOUBLE)",
    "dt = DATE '0001-01-01'",
    "dt > DATE '9999-12-30'",
    "ts >= TIMESTAMP '9999-12-31 23:59:59.999999'",
    "ts < TIMESTAMP '0001-01-01 00:00:00.000001'",
    "ts <= TIMESTAMP '1969-12-31 23:59:59.999'",
    "ts > TIMESTAMP '1969-12-31 23:59:59.998999'",
    # rejected at bind time ('127.0' is not a BIGINT); Spark short-circuits past the cast
    "(d10_2 = 100000000.00 AND ti = '127.0')",
]


@pytest.fixture(scope="module")
def extreme_frame(spark: Any) -> Any:
    return spark.createDataFrame(EXTREME)


def check_extreme(spark: Any, frame: Any, sql: str) -> None:
    timezone = spark.conf.get("spark.sql.session.timeZone")
    try:
        pred = parse_predicate(sql, EXTREME.schema, timezone=timezone)
    except PredicateError as err:
        theirs = spark_rows(spark, frame, sql)
        assert isinstance(theirs, str) or spark_fails_on_the_named_leaf(spark, frame, str(err)), (
            f"{sql!r}: we rejected ({err}), Spark kept {theirs}"
        )
        return
    if any(isinstance(node, Opaque) for node in pred.walk()):
        return  # not modelled: an opaque leaf never lets a file be skipped
    ours: list[int] | str
    try:
        ours = [int(i) for i in np.flatnonzero(evaluate(pred, EXTREME, timezone=timezone))]
    except PredicateError as err:
        ours = f"lakelayout error: {err}"
    theirs = spark_rows(spark, frame, sql)
    if isinstance(ours, str):
        assert isinstance(theirs, str), f"{sql!r}: we rejected ({ours}), Spark kept {theirs}"
        return
    if isinstance(theirs, str):
        return  # Spark fails the query: no rows to lose
    assert ours == theirs, f"{sql!r}: lakelayout {ours} != Spark {theirs} ({pred.sql()})"


@pytest.mark.parametrize("sql", EXTREME_CORNERS)
def test_extreme_corner_matches_spark(spark: Any, extreme_frame: Any, sql: str) -> None:
    check_extreme(spark, extreme_frame, sql)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=extreme_predicates())
def test_random_extreme_predicates_match_spark(spark: Any, extreme_frame: Any, sql: str) -> None:
    check_extreme(spark, extreme_frame, sql)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=extreme_predicates())
def test_random_extreme_predicates_without_ansi_match_spark(
    spark: Any, extreme_frame: Any, sql: str
) -> None:
    """The same comparisons in a session without ANSI, whose legacy rules compare some
    types otherwise (a FLOAT with an integer as FLOAT: an audit found f32 = 16777217 read
    as DOUBLE, and the row of 16777216 lost)."""
    check_in_session(spark, extreme_frame, EXTREME, sql, {"spark.sql.ansi.enabled": "false"})


def test_case_mapping_is_sparks(spark: Any, tmp_path: Any) -> None:
    """upper()/lower() as Spark computes them, on text whose case mapping is not one
    character to one ('ß' -> 'SS', 'İ' -> 'i̇', a final 'Σ' -> 'ς', 'ﬁ' -> 'FI') and on
    random letters of the Basic Multilingual Plane: the evaluator (which decides
    single-valued files, index values and DELETE's whole files) must agree with Spark."""
    import unicodedata

    import pyarrow as pa

    from lakelayout.expr import parse_term
    from lakelayout.expr.evaluate import evaluate_term

    rng = np.random.default_rng(60)
    letters = [
        c
        for c in map(chr, rng.integers(0xA0, 0x3000, 4000))
        if unicodedata.category(c).startswith("L")
    ]
    texts = ["ß", "straße", "İstanbul", "ΟΔΟΣ", "ΣΑΣ ΣΑΣ", "ﬁx", "ŉ", "ǰ", "ᾳ", "ABC", "", None]
    texts += ["".join(rng.choice(letters, 3)) for _ in range(300)]
    table = pa.table({"s": pa.array(texts, pa.string())})
    # nested too: Spark's optimizer keeps only the outer one of lower(upper(s)) (found
    # by an audit: lakelayout computed 'ss' for lower(upper('ß')) where Spark gives 'ß'
    # reading files; a local relation is evaluated before that rule, so read a file)
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "s.parquet")
    stored = spark.read.parquet(str(tmp_path / "s.parquet"))
    terms = ["upper(s)", "lower(s)", "lower(upper(s))", "upper(lower(s))", "upper(upper(s))"]
    terms += ["lower(upper(lower(s)))"]
    got = stored.selectExpr(*[f"{t} AS c{k}" for k, t in enumerate(terms)]).toArrow()
    assert got.column("c2").to_pylist()[0] == "ß"  # the optimizer's rule did apply
    from lakelayout.errors import PredicateError
    from lakelayout.expr.evaluate import uncertain_case

    certain = [uncertain_case(t or "") is None for t in texts]
    assert 0 < sum(certain) < len(texts)
    for k, term in enumerate(terms):
        bound = parse_term(term, table.schema)
        ours = evaluate_term(bound, table.filter(pa.array(certain))).to_pylist()
        theirs = [s for s, c in zip(got.column(f"c{k}").to_pylist(), certain, strict=True) if c]
        kept = [t for t, c in zip(texts, certain, strict=True) if c]
        wrong = [(t, o, s) for t, o, s in zip(kept, ours, theirs, strict=True) if o != s]
        assert not wrong, (term, wrong[:5])
        # text whose case Spark may map otherwise is not evaluated (an audit: 'ƛ' has an
        # upper case since Unicode 16, which Python 3.11's tables lack)
        with pytest.raises(PredicateError, match="case mapping of"):
            evaluate_term(bound, table)


def test_every_character_lakelayout_case_maps_is_mapped_as_spark_maps_it(spark: Any) -> None:
    """Over every character up to U+1FFFF (surrogates aside): where uncertain_case lets
    lakelayout map a character's case, upper() and lower() give exactly Spark's answer;
    the characters Spark maps otherwise (Unicode 15-17 additions: 'ƛ', 'ɤ', U+A7CC)
    are among the uncertain ones."""
    import pyarrow as pa

    from lakelayout.expr import parse_term
    from lakelayout.expr.evaluate import evaluate_term, uncertain_case

    chars = [chr(c) for c in range(0x80, 0x20000) if not 0xD800 <= c <= 0xDFFF]
    certain = [c for c in chars if uncertain_case(c) is None]
    assert {"ƛ", "ɤ", "\ua7cc"}.isdisjoint(certain) and "ß" in certain
    table = pa.table({"s": pa.array(certain, pa.string())})
    got = spark.createDataFrame(table.to_pandas()).selectExpr("upper(s) u", "lower(s) l")
    theirs = got.toArrow()
    for term, column in (("upper(s)", "u"), ("lower(s)", "l")):
        ours = evaluate_term(parse_term(term, table.schema), table).to_pylist()
        wrong = [
            (f"U+{ord(c):04X}", o, s)
            for c, o, s in zip(certain, ours, theirs.column(column).to_pylist(), strict=True)
            if o != s
        ]
        assert not wrong, (term, len(wrong), wrong[:8])


def test_null_safe_equality_of_two_terms_is_sparks(spark: Any) -> None:
    """``a <=> b`` of two columns is TRUE where both are NULL; lakelayout bound it as
    ``a = b AND a IS NOT NULL AND b IS NOT NULL``, so a file of NULLs was skipped and
    ``DELETE WHERE NOT (a <=> b)`` removed it whole (found by an audit)."""
    import pyarrow as pa

    from lakelayout.skipping.stats_rules import all_rows_match, might_match
    from lakelayout.stats.blocks import block_stats

    table = pa.table({
        "i": pa.array([None, None, 1, 2, None, 3], pa.int32()),
        "j": pa.array([None, None, 1, 5, 4, None], pa.int32()),
    })  # fmt: skip
    frame = spark.createDataFrame(table)
    for sql in (
        "i <=> j", "NOT (i <=> j)", "i IS NOT DISTINCT FROM j", "i <=> j OR i = 10",
        "i IS DISTINCT FROM j", "i IS DISTINCT FROM 1", "NOT (i IS DISTINCT FROM NULL)",
    ):  # fmt: skip
        predicate = parse_predicate(sql, table.schema)
        theirs = [bool(r[0]) for r in frame.selectExpr(f"coalesce({sql}, false)").collect()]
        assert np.asarray(evaluate(predicate, table)).tolist() == theirs, sql
        files = block_stats(table, np.array([0, 0, 1, 1, 2, 2]))  # file 0: only NULLs
        kept = np.asarray(might_match(predicate, files), dtype=bool)
        every = np.asarray(all_rows_match(predicate, files), dtype=bool)
        for f in range(3):
            rows = theirs[2 * f : 2 * f + 2]
            assert kept[f] or not any(rows), (sql, f)
            assert not every[f] or all(rows), (sql, f)


def test_nested_string_reference_is_sparks(spark: Any, tmp_path: Any) -> None:
    """The reference of the nested string functions property
    (tests/skipping/test_function_terms_property.py: :func:`nested_value`,
    :func:`nested_like`) is what Spark computes reading a Parquet file, on every chain of
    one or two of its functions, the case conversions three deep, their ``length()``,
    and LIKE / ILIKE of some of them: the optimizer's collapse of nested case conversions
    and ILIKE's ``lower`` are Spark's, not a copy of lakelayout's binder."""
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..skipping.test_function_terms_property import (
        CASE_CONVERSIONS,
        NESTED_ALPHABET,
        STRING_WRAPPERS,
        chain_sql,
        nested_like,
        nested_value,
    )

    rng = np.random.default_rng(61)
    texts = ["", "ß", "SS", "straße", "İ", "i̇", "ΣΑΣ", "σς", "ﬁ", "  a ", "%_", "a", None]
    texts += ["".join(rng.choice(NESTED_ALPHABET, int(rng.integers(1, 5)))) for _ in range(40)]
    pq.write_table(pa.table({"s": pa.array(texts, pa.string())}), tmp_path / "s.parquet")
    stored = spark.read.parquet(str(tmp_path / "s.parquet"))
    names = sorted(STRING_WRAPPERS)
    chains = [(a,) for a in names] + list(itertools.product(names, names))
    chains += list(itertools.product(CASE_CONVERSIONS, repeat=3))
    columns = [f"{chain_sql(c)} AS v{k}" for k, c in enumerate(chains)]
    columns += [f"length({chain_sql(c)}) AS n{k}" for k, c in enumerate(chains)]
    got = stored.selectExpr(*columns).toArrow()
    for k, chain in enumerate(chains):
        ours = [nested_value(chain, t) for t in texts]
        assert got.column(f"v{k}").to_pylist() == ours, chain_sql(chain)
        lengths = [None if v is None else len(v) for v in ours]
        assert got.column(f"n{k}").to_pylist() == lengths, chain_sql(chain)
    patterns = ["ss", "SS%", "ß", "%i̇%", "ς", "Σ%", "_", "%a", "ﬁ"]
    liked = [("upper",), ("lower",), ("lower", "upper"), ("upper", "lower")]
    liked += [("substring-1-2", "upper"), ("upper", "substring-1-2"), ("trim", "upper")]
    cases = [(c, p, i) for c in liked for p in patterns for i in (False, True)]
    tests = [
        f"{chain_sql(c)} {'ILIKE' if i else 'LIKE'} '{p}' AS t{k}"
        for k, (c, p, i) in enumerate(cases)
    ]
    got = stored.selectExpr(*tests).toArrow()
    for k, (chain, pattern, ilike) in enumerate(cases):
        ours_like = [nested_like(chain, pattern, t, ilike=ilike) for t in texts]
        assert got.column(f"t{k}").to_pylist() == ours_like, tests[k]


# ------------------------------------------- sessions whose settings change what a text means

#: the session settings :class:`lakelayout.expr.parse.SessionRules` follows
SESSIONS = [
    {  # a DATE or TIMESTAMP compared with a string as strings
        "spark.sql.ansi.enabled": "false",
        "spark.sql.legacy.typeCoercion.datetimeToString.enabled": "true",
    },
    {  # TIMESTAMP names TIMESTAMP_NTZ, in a zone with daylight saving
        "spark.sql.timestampType": "TIMESTAMP_NTZ",
        "spark.sql.session.timeZone": "America/Los_Angeles",
    },
    {"spark.sql.ansi.enabled": "false"},  # Spark's legacy casts
]


def check_in_session(spark: Any, frame: Any, table: Any, sql: str, conf: dict[str, str]) -> None:
    """In a session with ``conf``, what lakelayout binds with the session's rules and does
    not leave to Spark selects Spark's rows (a refusal loses none, nor does a failure)."""
    from lakelayout.table.session import session_rules

    with session_conf(spark, conf):
        timezone = spark.conf.get("spark.sql.session.timeZone")
        try:
            pred = parse_predicate(
                sql, table.schema, timezone=timezone, session=session_rules(spark)
            )
        except PredicateError:
            return
        if any(isinstance(node, Opaque) for node in pred.walk()):
            return  # never lets a file be skipped
        try:
            ours = [int(i) for i in np.flatnonzero(evaluate(pred, table, timezone=timezone))]
        except PredicateError:
            return
        theirs = spark_rows(spark, frame, sql)
        if isinstance(theirs, str):
            return  # Spark fails the query: no rows to lose
        assert ours == theirs, (
            f"{sql!r} in {conf}: lakelayout {ours} != Spark {theirs} ({pred.sql()})"
        )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(  # a 38-digit string against a DECIMAL(38, 0) without ANSI: not a double compare
    sql="d38_0 = '99999999999999999999999999999999999999'", conf=SESSIONS[2]
)
@given(sql=extreme_predicates(), conf=st.sampled_from(SESSIONS))
def test_random_extreme_predicates_in_other_sessions_match_spark(
    spark: Any, extreme_frame: Any, sql: str, conf: dict[str, str]
) -> None:
    """38-digit decimals, extreme dates and timestamps, NULL in IN lists (the extreme
    table), bound with the rules of a legacy, a TIMESTAMP_NTZ and an ANSI-off session."""
    check_in_session(spark, extreme_frame, EXTREME, sql, conf)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=predicates(max_leaves=3), conf=st.sampled_from(SESSIONS))
def test_random_predicates_in_other_sessions_match_spark(
    spark: Any, frame: Any, sql: str, conf: dict[str, str]
) -> None:
    """String literals against dates and numbers, casts, NULLs and NaN (the edge table)
    in the same sessions."""
    check_in_session(spark, frame, TABLE, sql, conf)


def with_backslashes(table: pa.Table) -> pa.Table:
    """The edge table and three rows whose strings hold a backslash (the rest NULL)."""
    extra = {name: pa.nulls(3, table.schema.field(name).type) for name in table.column_names}
    extra["id"] = pa.array(range(table.num_rows, table.num_rows + 3), pa.int32())
    extra["s"] = pa.array(["a\\b", "\\n", "a\\%b"], pa.string())
    return pa.concat_tables([table, pa.table(extra, schema=table.schema)])


BACKSLASHES = with_backslashes(TABLE)


@pytest.fixture(scope="module")
def backslash_frame(spark: Any) -> Any:
    return spark.createDataFrame(BACKSLASHES)


@pytest.mark.parametrize(
    ("conf", "sql", "rows"),
    [  # Spark's reading of each text, written out: the property below relies on it
        (TEXT_SESSIONS[0], "s = 'a\\b'", [12]),
        (TEXT_SESSIONS[4], "s = 'a\\nb'", [9]),
        (TEXT_SESSIONS[1], "\"s\" = 'ab'", [10]),
        (TEXT_SESSIONS[2], "\"s\" = 's'", list(range(15))),
    ],
)
def test_text_sessions_read_as_spark_reads_them(
    spark: Any, backslash_frame: Any, conf: dict[str, str], sql: str, rows: list[int]
) -> None:
    """The settings reach ``F.expr`` (the property's ground truth) and lakelayout."""
    with session_conf(spark, conf):
        assert spark_rows(spark, backslash_frame, sql) == rows
    check_in_session(spark, backslash_frame, BACKSLASHES, sql, conf)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=session_text_cases())
def test_random_texts_in_sessions_that_read_them_otherwise_match_spark(
    spark: Any, backslash_frame: Any, case: tuple[dict[str, str], str]
) -> None:
    """Literals with backslash escapes and double-quoted column names, bound with the rules
    of sessions that keep backslashes, read "..." as names, or both."""
    conf, sql = case
    check_in_session(spark, backslash_frame, BACKSLASHES, sql, conf)


@pytest.mark.parametrize(
    ("sql", "some"),
    [  # some: whether Spark finds rows (the 08:00 UTC ones, or earlier): written out
        ("ts = TIMESTAMP '2020-06-15 08:00:00+00:00'", True),
        ("ts >= TIMESTAMP '2020-06-15T10:00:00+02:00'", True),
        ("ts < TIMESTAMP '1995-03-01 12:30:01.000005 UTC'", True),
        ("ts = TIMESTAMP '2020-06-15 01:00:00 America/Los_Angeles'", True),
        ("ts = timestamp('2020-06-15 08:00:00+00:00')", True),  # a cast to an instant
        ("ts = TIMESTAMP '2020-06-15 08:00:00'", False),  # 08:00 wall time there
        ("ts = CAST('2020-06-15 08:00:00+00:00' AS TIMESTAMP)", False),  # a cast drops it
    ],
)
def test_timestamp_literals_with_zones_where_timestamp_means_ntz(
    spark: Any, frame: Any, sql: str, some: bool
) -> None:
    """Under spark.sql.timestampType=TIMESTAMP_NTZ Spark makes a TIMESTAMP literal whose
    text writes a zone an instant (TIMESTAMP_LTZ), and timestamp(x) casts to
    TIMESTAMP_LTZ; lakelayout read both as wall-clock times in the session zone and
    skipped the file holding 2020-06-15 08:00 UTC (an audit)."""
    conf = SESSIONS[1]
    with session_conf(spark, conf):
        assert bool(spark_rows(spark, frame, sql)) is some
    check_in_session(spark, frame, TABLE, sql, conf)
