"""Bad predicates get errors naming the problem (messages compared)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import PredicateError
from lakelayout.expr import And, Or, evaluate, parse_predicate, parse_term
from lakelayout.expr.parse import MAX_NESTING, MAX_TERM_NESTING

SCHEMA = pa.schema(
    [
        ("l_shipdate", pa.date32()),
        ("l_quantity", pa.int32()),
        ("l_comment", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)

PREDICATE_ERRORS = [
    ("", 'empty predicate: expected Spark SQL text such as "l_quantity > 5"'),
    ("   ", 'empty predicate: expected Spark SQL text such as "l_quantity > 5"'),
    (
        "l_shipdat > '1995-01-01'",
        "unknown column 'l_shipdat' in predicate; Did you mean 'l_shipdate'?",
    ),
    (
        "zzz = 1",
        "unknown column 'zzz' in predicate; columns are: l_shipdate, l_quantity, l_comment, ts",
    ),
    ("l_shipdate = 'abc'", "type mismatch in \"l_shipdate = 'abc'\": 'abc' is not a valid DATE"),
    (
        "l_quantity = 'x'",
        "type mismatch in \"l_quantity = 'x'\": cannot compare INT with 'x' "
        "(Spark casts it to BIGINT, which 'x' is not)",
    ),
    ("l_shipdate = 5", "type mismatch in 'l_shipdate = 5': cannot compare DATE with 5"),
    (
        "l_quantity IN (1, 'x')",
        "type mismatch in \"l_quantity IN (1, 'x')\": cannot compare INT with 'x' "
        "(Spark casts it to BIGINT, which 'x' is not)",
    ),
    ("l_quantity + 1", "predicate 'l_quantity + 1' is not boolean: it has type INT"),
    ("l_comment", "predicate 'l_comment' is not boolean: it has type STRING"),
    (
        "month(l_comment) = 1",
        "type mismatch in 'MONTH(l_comment)': month() needs a DATE or TIMESTAMP, got STRING "
        "(cast explicitly)",
    ),
    (
        "l_comment LIKE 'a\\\\x'",
        "invalid LIKE pattern 'a\\\\x': the escape character cannot precede 'x' "
        "in \"l_comment LIKE 'a\\\\\\\\x'\"",
    ),
    (
        "l_comment LIKE 'a\\\\'",
        "invalid LIKE pattern 'a\\\\': the escape character cannot end it "
        "in \"l_comment LIKE 'a\\\\\\\\'\"",
    ),
    ("SELECT 1", "malformed predicate 'SELECT 1': got a SELECT statement"),
    ("l_quantity = 1 junk", "malformed predicate 'l_quantity = 1 junk': unexpected trailing text"),
    # what the parser misses is said in SQL, not with the parser's Python class names
    (
        "l_quantity <<< 5",
        "malformed predicate 'l_quantity <<< 5': '<<' is missing its right-hand side "
        "at line 1, col 14",
    ),
    (
        "l_quantity BETWEEN 1",
        "malformed predicate 'l_quantity BETWEEN 1': 'BETWEEN' is missing its upper bound "
        "at line 1, col 20",
    ),
    ("NOT", "malformed predicate 'NOT': 'NOT' is missing its operand at line 1, col 3"),
    # Spark's parser refuses it; answered as FALSE here, a DELETE deleted nothing without an
    # error and a Spark Connect scan failed at its first action (found by an audit)
    (
        "l_quantity > 1 AND l_quantity NOT IN ()",
        "malformed predicate 'l_quantity > 1 AND l_quantity NOT IN ()': an IN list needs at "
        "least one value (Spark refuses `IN ()`)",
    ),
]


@pytest.mark.parametrize(("sql", "message"), PREDICATE_ERRORS, ids=[p[0] for p in PREDICATE_ERRORS])
def test_predicate_error_messages(sql: str, message: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate(sql, SCHEMA)
    assert str(info.value) == message


def test_malformed_sql_names_line_and_column() -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate("l_quantity >", SCHEMA)
    assert str(info.value).startswith("malformed predicate 'l_quantity >': ")
    assert str(info.value) == (
        "malformed predicate 'l_quantity >': '>' is missing its right-hand side at line 1, col 12"
    )


def test_unknown_time_zone() -> None:
    with pytest.raises(PredicateError, match="unknown time zone 'Mars/Base'"):
        parse_predicate("l_quantity > 1", SCHEMA, timezone="Mars/Base")


TERM_ERRORS = [
    ("", 'empty expression: expected Spark SQL text such as "l_quantity > 5"'),
    (
        "rand()",
        "expression 'rand()' is non-deterministic (rand() is non-deterministic); "
        "clustering and index expressions must be deterministic",
    ),
    (
        "l_quantity + rand()",
        "expression 'l_quantity + rand()' is non-deterministic (rand() is non-deterministic); "
        "clustering and index expressions must be deterministic",
    ),
    (
        "current_date()",
        "expression 'current_date()' is non-deterministic (current_date() is "
        "non-deterministic); clustering and index expressions must be deterministic",
    ),
    ("1 + 1", "expression '1 + 1' references no column"),
    (
        "monthh(l_shipdate)",
        "unsupported expression 'monthh(l_shipdate)': function monthh() is not modelled",
    ),
    ("l_shipdat", "unknown column 'l_shipdat' in expression; Did you mean 'l_shipdate'?"),
]


@pytest.mark.parametrize(
    ("sql", "message"), TERM_ERRORS, ids=[p[0] or "empty" for p in TERM_ERRORS]
)
def test_term_error_messages(sql: str, message: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_term(sql, SCHEMA)
    assert str(info.value) == message


def test_terms_parse() -> None:
    assert parse_term("MONTH(l_shipdate)", SCHEMA).sql() == "month(l_shipdate)"
    assert parse_term("lower(L_COMMENT)", SCHEMA).sql() == "lower(l_comment)"
    assert parse_term("l_quantity * 2 + 1", SCHEMA).sql() == "((2 * l_quantity) + 1)"
    term = parse_term("my_hash(l_comment)", SCHEMA, functions={"my_hash": pa.int64()})
    assert term.sql() == "my_hash(l_comment)"
    assert term.dtype == pa.int64()


def test_opaque_and_udf_cannot_be_evaluated() -> None:
    table = pa.table({"l_comment": ["a"]})
    schema = table.schema
    with pytest.raises(PredicateError, match=r"cannot evaluate .*RLIKE.* outside Spark"):
        evaluate(parse_predicate("l_comment RLIKE 'a'", schema), table)
    with pytest.raises(PredicateError, match=re.escape("cannot evaluate 'NOT ((RAND() < 0.5))'")):
        evaluate(parse_predicate("NOT rand() < 0.5", schema), table)
    udf = parse_predicate("spam(l_comment)", schema, functions={"spam": pa.bool_()})
    with pytest.raises(PredicateError, match=re.escape("spam() is a user function")):
        evaluate(udf, table)


@pytest.mark.parametrize(
    "sql",
    ["l_comment = 5", "l_comment > DATE '1995-01-01'", "l_comment = TRUE", "3 > l_comment"],
)
def test_a_string_column_spark_casts_per_value_is_left_to_spark(sql: str) -> None:
    """Spark's ANSI rules cast each value of a STRING column compared with a number, date
    or boolean: valid where every value casts (``zip = 12345``), so no refusal; the
    string's order says nothing of the cast's, so nothing is skipped on it."""
    pred = parse_predicate(sql, SCHEMA)
    assert [type(node).__name__ for node in pred.walk()] == ["Opaque"]
    binary = parse_predicate("b = 'a'", pa.schema([("b", pa.binary())]))
    assert [type(node).__name__ for node in binary.walk()] == ["Opaque"]


@pytest.mark.parametrize(
    ("sql", "fails"),
    [
        ("l_quantity >= 0", False),
        ("month(l_shipdate) = 1 OR lower(l_comment) = 'a'", False),
        ("CAST(l_quantity AS BIGINT) > 3", False),
        ("CAST(l_quantity AS STRING) = '3'", False),
        ("l_comment = 5 OR l_quantity >= 0", True),  # Opaque: Spark casts each string
        ("l_quantity + 1 > 0 OR l_quantity >= 0", True),  # ANSI overflow
        ("1 / l_quantity > 0", True),  # division by zero
        ("CAST(l_comment AS INT) = 3", True),
        ("CAST(ts AS INT) > 3", True),
    ],
)
def test_what_spark_may_fail_on_is_known(sql: str, fails: bool) -> None:
    """A DELETE drops a file whole from its statistics only when Spark cannot fail on any
    of its rows (a review: Spark's and Delta's DELETE fail where lakelayout deleted)."""
    from lakelayout.expr.evaluate import may_fail_in_spark

    assert may_fail_in_spark(parse_predicate(sql, SCHEMA)) is fails


def test_ansi_errors_are_errors() -> None:
    table = pa.table({"a": pa.array([2**31 - 1, 0], pa.int32())})
    with pytest.raises(PredicateError, match="overflow"):
        evaluate(parse_predicate("a + 1 > 0", table.schema), table)
    with pytest.raises(PredicateError, match="division by zero"):
        evaluate(parse_predicate("1 / a > 0", table.schema), table)
    with pytest.raises(PredicateError, match="remainder by zero"):
        evaluate(parse_predicate("1 % a > 0", table.schema), table)


# ---------------------------------------------------------------- statements and nesting (issue 10)

NEST = pa.schema([("a", pa.int32()), ("b", pa.int32())])


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "a < 3; DROP TABLE x",
            "predicate 'a < 3; DROP TABLE x' holds more than one statement "
            "(';' at line 1, col 6); a predicate is one Spark SQL expression",
        ),
        (
            "a < 3;",
            "predicate 'a < 3;' holds more than one statement "
            "(';' at line 1, col 6); a predicate is one Spark SQL expression",
        ),
    ],
)
def test_a_second_statement_is_refused(sql: str, message: str) -> None:
    with pytest.raises(PredicateError) as err:
        parse_predicate(sql, NEST)
    assert str(err.value) == message


def test_a_semicolon_inside_a_string_is_data() -> None:
    assert parse_predicate("a = 1 OR b = length(';')", NEST).sql() == "(a = 1 OR b = length(';'))"


def _alternating(levels: int) -> str:
    text = "a < 0"
    for k in range(levels):
        text = f"(a > {k} {'AND' if k % 2 else 'OR'} {text})"
    return text


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("(" * MAX_NESTING + "a < 2" + ")" * MAX_NESTING, "a < 2"),
        ("NOT " * MAX_NESTING + "a < 2", "a < 2"),
        ("NOT " * (MAX_NESTING - 1) + "a < 2", "a >= 2"),
        ("NOT (" * (MAX_NESTING // 2) + "a < 2" + ")" * (MAX_NESTING // 2), "a < 2"),
        ("abs(" * MAX_TERM_NESTING + "a" + ")" * MAX_TERM_NESTING + " > 3", None),
        ("(" * MAX_TERM_NESTING + "a" + " + 1)" * MAX_TERM_NESTING + " > 3", None),
    ],
    ids=["parentheses", "nots", "nots-odd", "not-parentheses", "functions", "arithmetic"],
)
def test_nesting_up_to_the_limit_binds(sql: str, expected: str | None) -> None:
    pred = parse_predicate(sql, NEST)
    if expected is not None:
        assert pred.sql() == expected


_TERMS = {
    "functions": lambda n: "abs(" * n + "a" + ")" * n + " > 3",
    "arithmetic": lambda n: "(" * n + "a" + " + 1)" * n + " > 3",
    "negation": lambda n: "-(" * n + "a" + ")" * n + " > 3",
    "unary minus": lambda n: "- " * n + "a < 0",
    "casts": lambda n: "CAST(" * n + "a" + " AS BIGINT)" * n + " = 3",
}


@pytest.mark.parametrize("shape", list(_TERMS))
def test_terms_nest_up_to_their_limit_and_every_consumer_copes(shape: str) -> None:
    """Functions, casts and arithmetic nest at most MAX_TERM_NESTING deep: past about 245
    levels the planner and the renderer failed under Python's default recursion limit
    with a raw RecursionError (an audit), at 250 where the parser accepted 256. At the
    limit, inside boolean nesting up to the parentheses' limit, with 150 frames already
    on the stack, binding, pruning, evaluation and rendering work."""
    import sys

    from lakelayout.skipping.stats_rules import all_rows_match, might_match
    from lakelayout.stats.blocks import block_stats

    table = pa.table({"a": pa.array([1, 300], pa.int32()), "b": pa.array([0, 0], pa.int32())})
    files = block_stats(table, np.array([0, 1]))
    levels = (MAX_NESTING - MAX_TERM_NESTING) // 2 - 1
    text = _TERMS[shape](MAX_TERM_NESTING)
    for k in range(levels):
        text = f"(a > {k} {'AND' if k % 2 else 'OR'} ({text}))"

    def deep(frames: int) -> None:
        if frames:
            return deep(frames - 1)
        assert sys.getrecursionlimit() <= 1000
        pred = parse_predicate(text, NEST)
        truth = evaluate(pred, table)
        assert not (truth & ~might_match(pred, files)).any()
        assert not (all_rows_match(pred, files) & ~truth).any()
        assert parse_predicate(pred.sql(), NEST) == pred
        return None

    deep(150)
    deeper = _TERMS[shape](MAX_TERM_NESTING + 1)
    with pytest.raises(PredicateError, match=f"{MAX_TERM_NESTING + 1} levels deep; lakelayout"):
        parse_predicate(deeper, NEST)


def test_alternating_and_or_up_to_the_limit_binds_and_prunes() -> None:
    from lakelayout.skipping.stats_rules import all_rows_match, might_match
    from lakelayout.stats.blocks import block_stats

    table = pa.table({"a": pa.array([1, 300], pa.int32()), "b": pa.array([0, 0], pa.int32())})
    pred = parse_predicate(_alternating(MAX_NESTING - 1), NEST)
    files = block_stats(table, np.array([0, 1]))
    truth = evaluate(pred, table)
    keep = might_match(pred, files)
    assert not (truth & ~keep).any()
    assert not (all_rows_match(pred, files) & ~truth).any()


def test_nesting_past_the_limit_is_a_clear_error() -> None:
    deeper = MAX_NESTING + 1
    with pytest.raises(PredicateError) as err:
        parse_predicate("(" * deeper + "a < 2" + ")" * deeper, NEST)
    assert str(err.value) == (
        f"predicate '{'(' * 77}...' nests {deeper} levels deep (parentheses and NOT); "
        f"lakelayout accepts at most {MAX_NESTING} (Spark's parser stops near 270)"
    )
    with pytest.raises(PredicateError) as err:
        parse_predicate("NOT " * deeper + "a < 2", NEST)
    assert f"nests {deeper} levels deep" in str(err.value)


def test_long_and_or_chains_are_flat() -> None:
    """Spark takes 50,000-term chains; sqlglot nests them one level per term."""
    terms = 5_000
    pred = parse_predicate(" AND ".join(f"a != {k}" for k in range(terms)), NEST)
    assert isinstance(pred, And) and len(pred.children_) == terms
    ors = parse_predicate(" OR ".join(f"(a = {k} OR b = {k})" for k in range(terms)), NEST)
    assert isinstance(ors, Or) and len(ors.children_) == 2 * terms


def test_recursion_limit_is_restored_after_deep_text() -> None:
    import sys

    before = sys.getrecursionlimit()
    parse_predicate("(" * MAX_NESTING + "a < 2" + ")" * MAX_NESTING, NEST)
    assert sys.getrecursionlimit() == before
