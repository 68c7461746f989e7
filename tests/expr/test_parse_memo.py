"""A text bound again to the same schema, functions and time zone is the same predicate."""

from __future__ import annotations

import traceback

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr import parse as parse_module
from lakelayout.expr import parse_predicate, parse_term
from lakelayout.expr.nodes import Opaque
from lakelayout.expr.parse import SessionRules

SCHEMA = pa.schema([("a", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])


def test_the_same_text_in_the_same_context_is_bound_once() -> None:
    text = "a > 3 AND ts < '2024-01-01 00:00:00'"
    first = parse_predicate(text, SCHEMA)
    again = parse_predicate(
        text, pa.schema([("a", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    )
    assert again is first  # an equal schema built apart is the same context
    # another time zone reads the local timestamp literal at another instant
    zoned = parse_predicate(text, SCHEMA, timezone="America/New_York")
    assert zoned is not first and zoned.sql() != first.sql()
    assert zoned.sql() == parse_module._bind_predicate(text, SCHEMA, None, "America/New_York").sql()
    # another schema binds on its own types
    wide = parse_predicate(
        text, pa.schema([("a", pa.float64()), ("ts", pa.timestamp("us", tz="UTC"))])
    )
    assert wide is not first and "3.0" in wide.sql()
    # a call to an unknown function is opaque; declared, it binds
    assert isinstance(parse_predicate("f(a) = 'x'", SCHEMA, functions={}), Opaque)
    called = parse_predicate("f(a) = 'x'", SCHEMA, functions={"f": pa.string()})
    assert not isinstance(called, Opaque)
    assert called is parse_predicate("f(a) = 'x'", SCHEMA, functions={"f": pa.string()})


def test_a_text_that_does_not_bind_fails_every_time_with_the_same_message() -> None:
    def failure() -> tuple[str, int]:
        with pytest.raises(PredicateError) as info:
            parse_predicate("no_such_column > 1", SCHEMA)
        return str(info.value), len(traceback.extract_tb(info.value.__traceback__))

    first = failure()
    assert "unknown column 'no_such_column'" in first[0]
    assert failure() == first == failure()  # the message, and a traceback that does not grow


def test_the_memo_is_bounded() -> None:
    parse_module._MEMO.clear()
    limit = parse_module._MEMO.size
    bound = [parse_predicate(f"a > {k}", SCHEMA) for k in range(limit + 10)]
    assert len(parse_module._MEMO) == limit
    assert [p.sql() for p in bound[:3]] == ["a > 0L", "a > 1L", "a > 2L"]
    assert parse_predicate("a > 0", SCHEMA) is not bound[0]  # the oldest was let go
    assert parse_predicate(f"a > {limit + 9}", SCHEMA) is bound[-1]


def test_a_predicates_rendering_is_that_predicate_in_the_same_context() -> None:
    """The query log stores ``pred.sql()`` and the advisor binds it again: that text in
    the same context answers the very tree (a bind would build a new one); in another
    context it is bound on its own."""
    parse_module._MEMO.clear()
    text = "5 < a AND ts >= '2024-01-01'"
    pred = parse_predicate(text, SCHEMA, functions={"f": "string"})
    rendered = pred.sql()
    assert rendered != text
    assert parse_predicate(rendered, SCHEMA, functions={"f": pa.string()}) is pred
    # another time zone or other functions: bound on their own
    zoned = parse_predicate(rendered, SCHEMA, functions={"f": "string"}, timezone="Asia/Tokyo")
    assert zoned is not pred and zoned.sql() == rendered
    assert parse_predicate(rendered, SCHEMA) is not pred
    # a rendering already bound on its own keeps its own tree
    parse_module._MEMO.clear()
    first = parse_predicate(rendered, SCHEMA)
    assert parse_predicate(text, SCHEMA).sql() == rendered
    assert parse_predicate(rendered, SCHEMA) is first


def test_terms_are_remembered_apart_from_predicates() -> None:
    term = parse_term("a", SCHEMA)
    assert parse_term("a", SCHEMA) is term and term.sql() == "a"
    with pytest.raises(PredicateError):  # the same text as a predicate is not boolean
        parse_predicate("a", SCHEMA)
    assert parse_term("a", SCHEMA) is term
    with pytest.raises(PredicateError, match="references no column") as first:
        parse_term("1 + 2", SCHEMA)
    with pytest.raises(PredicateError, match="references no column") as second:
        parse_term("1 + 2", SCHEMA)
    assert str(first.value) == str(second.value)


def test_function_return_types_may_be_aliases_and_bad_ones_are_named() -> None:
    """``functions`` maps a name to a pyarrow type or its alias ("string"); a type alias
    is the same context as the type itself, and a bad mapping is an InvalidOption that
    names the function (not an AttributeError from inside the binder)."""
    schema = pa.schema([("u", pa.string())])
    by_alias = parse_predicate("getagent(u) = 'curl'", schema, functions={"getagent": "string"})
    by_type = parse_predicate("getagent(u) = 'curl'", schema, functions={"GETAGENT": pa.string()})
    assert by_alias is by_type
    with pytest.raises(InvalidOption, match=r"'nonsense' for the return type of function g\(\)"):
        parse_predicate("g(u) = 'x'", schema, functions={"g": "nonsense"})
    with pytest.raises(InvalidOption, match="must map function names to return types"):
        parse_predicate("g(u) = 'x'", schema, functions="g")  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="non-empty string, got 3"):
        parse_predicate("g(u) = 'x'", schema, functions={3: "string"})  # type: ignore[dict-item]
    with pytest.raises(InvalidOption, match="expected a pyarrow schema, got dict"):
        parse_predicate("u = 'x'", {"u": pa.string()})  # type: ignore[arg-type]


def test_dates_against_strings_are_left_to_spark_where_it_compares_them_as_strings() -> None:
    schema = pa.schema([*SCHEMA, ("d", pa.date32()), ("s", pa.string())])
    text = "a > 3 AND d < '2024-1-5' AND ts IN ('2024-01-01', '2024-1-2') AND d > DATE'2020-01-01'"
    plain = parse_predicate(text, schema)
    assert not plain.has_opaque()
    legacy = parse_predicate(text, schema, session=SessionRules(string_dates=True))
    assert legacy is not plain and legacy is parse_predicate(
        text, schema, session=SessionRules(string_dates=True)
    )
    leaves = [n for n in legacy.walk() if isinstance(n, Opaque)]
    # the two comparisons with strings, as Spark reads them; the rest still modelled
    assert sorted(o.sql() for o in leaves) == [
        "(d < '2024-1-5')",
        "(ts IN ('2024-01-01', '2024-1-2'))",
    ]
    assert "a > 3" in legacy.sql() and "d > DATE '2020-01-01'" in legacy.sql()
    # a date against a string column too; numbers against strings are not concerned
    assert parse_predicate("d = s", schema, session=SessionRules(string_dates=True)).has_opaque()
    assert not parse_predicate(
        "a = '7'", schema, session=SessionRules(string_dates=True)
    ).has_opaque()


def test_timestamp_names_timestamp_ntz_where_the_session_says_so() -> None:
    schema = pa.schema([("n", pa.timestamp("us")), ("d", pa.date32())])
    text = "n = TIMESTAMP '2024-03-10 02:30:00'"
    ntz = SessionRules(ntz_timestamps=True)
    # in Los Angeles 02:30 on 2024-03-10 does not exist: as an instant it is 03:30 local,
    # which no TIMESTAMP_NTZ value 02:30 equals; as TIMESTAMP_NTZ it is that value
    zone = "America/Los_Angeles"
    plain = parse_predicate(text, schema, timezone=zone)
    bound = parse_predicate(text, schema, timezone=zone, session=ntz)
    assert bound is not plain and bound is parse_predicate(text, schema, timezone=zone, session=ntz)
    same = parse_predicate("n = TIMESTAMP_NTZ '2024-03-10 02:30:00'", schema, timezone=zone)
    assert bound.sql() == same.sql() != plain.sql()
    cast = parse_predicate(
        "n = CAST('2024-03-10 02:30:00' AS TIMESTAMP)", schema, timezone=zone, session=ntz
    )
    assert cast.sql() == same.sql()
    # a DATE made a timestamp of the session's kind: left to Spark
    assert parse_predicate(
        "date_trunc('DAY', d) = TIMESTAMP '2024-01-01 00:00:00'", schema, session=ntz
    ).has_opaque()
    # to_timestamp() and timestamp() both read as a cast to TIMESTAMP: which it was is lost
    assert parse_predicate(
        "n >= to_timestamp('2024-03-10 02:00:00')", schema, timezone=zone, session=ntz
    ).has_opaque()
    # date_trunc of a TIMESTAMP_NTZ is an instant of the session zone, in any session
    for rules in (None, ntz):
        assert parse_predicate(
            "date_trunc('HOUR', n) = TIMESTAMP '2024-03-10 02:00:00'", schema, session=rules
        ).has_opaque()


def test_without_ansi_the_legacy_casts_spark_answers_are_left_to_it() -> None:
    from lakelayout.errors import PredicateError as Refused

    schema = pa.schema([("i", pa.int32()), ("s", pa.string()), ("d", pa.date32())])
    legacy = SessionRules(ansi=False)
    texts = [
        "i = '1.5'",
        "i IN ('50', 'x')",
        "s = 7",
        "d = '2024-13-01'",
        "CAST('x' AS INT) IS NULL",
    ]
    for text in texts:
        if text != "s = 7":  # ANSI casts each string and answers where they all cast
            with pytest.raises(Refused):  # ANSI (Spark 4's default): Spark raises at run time
                parse_predicate(text, schema)
        bound = parse_predicate(f"i > 0 AND {text}", schema, session=legacy)
        assert bound.has_opaque() and "i > 0" in bound.sql(), text
    # a string against another type follows other coercions without ANSI (a DECIMAL(38, 0)
    # against a 38-digit string: a property test found a row lakelayout matched and Spark
    # did not): left to Spark; the rest of the predicate is still modelled
    mixed = parse_predicate("i = '5' AND d < '2024-1-5' AND i > 0", schema, session=legacy)
    opaque = sorted(n.sql() for n in mixed.walk() if isinstance(n, Opaque))
    assert opaque == ["(d < '2024-1-5')", "(i = '5')"]
    assert "i > 0" in mixed.sql()


def test_spark_s_bang_comparisons_and_quoting_settings_are_read_as_spark_reads_them() -> None:
    """``!<`` is Spark's ``>=`` and ``!>`` its ``<=`` (one token each; ``! <`` is not);
    ``"s"`` is a column under double-quoted identifiers, a string otherwise; under
    escaped string literals a literal keeps its backslashes (an audit: rows lost)."""
    schema = pa.schema([("i", pa.int64()), ("s", pa.string())])
    assert parse_predicate("i !< 5", schema) == parse_predicate("i >= 5", schema)
    assert parse_predicate("i!>2", schema) == parse_predicate("i <= 2", schema)
    assert parse_predicate("NOT i !< 5", schema) == parse_predicate("i < 5", schema)
    assert parse_predicate("s = '!<'", schema).sql() == "s = '!<'"
    with pytest.raises(PredicateError):
        parse_predicate("i ! < 5", schema)
    quoted = SessionRules(double_quoted_identifiers=True)
    assert parse_predicate("\"s\" = 'abc'", schema).sql() == "FALSE"  # the string 's'
    assert parse_predicate("\"s\" = 'abc'", schema, session=quoted).sql() == "s = 'abc'"
    assert parse_predicate('"S" IS NULL', schema, session=quoted).sql() == "s IS NULL"
    odd = pa.schema([('a"b', pa.string())])  # "a""b" is the one name a"b (a review)
    assert parse_predicate('"a""b" = \'x\'', odd, session=quoted).sql() == "`a\"b` = 'x'"
    raw = SessionRules(escaped_string_literals=True)
    assert parse_predicate(r"s = 'C:\dir'", schema).sql() == "s = 'C:dir'"
    assert parse_predicate(r"s = 'C:\dir'", schema, session=raw) == parse_predicate(
        r"s = 'C:\\dir'", schema
    )
    assert parse_predicate(r"s = 'a\'b'", schema, session=raw) == parse_predicate(
        r"s = 'a\\\'b'", schema
    )


_PIECES = [*'ab\\"%_ \n\t', "é", "\x00", "𝔘", "\\u0041", "\\'", "\\\\"]


def _closes(text: str) -> bool:
    """Whether ``'text'`` is one literal in Spark's lexer: every quote inside escaped (an
    odd run of backslashes before it), none before the closing one."""
    import re

    inner = all(len(m.group(1)) % 2 for m in re.finditer(r"(\\*)'", text))
    return inner and (len(text) - len(text.rstrip("\\"))) % 2 == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=10).map("".join).filter(_closes))
def test_under_escaped_string_literals_a_literal_is_its_text_as_written(text: str) -> None:
    """Backslashes, escaped quotes, unicode escapes, NUL and unicode: the bound literal is
    the text between the quotes, as Spark's session with the setting reads it."""
    from lakelayout.expr.nodes import Compare

    schema = pa.schema([("s", pa.string())])
    bound = parse_predicate(
        f"s = '{text}'", schema, session=SessionRules(escaped_string_literals=True)
    )
    assert isinstance(bound, Compare) and bound.value.value == text


@pytest.mark.parametrize(
    "text", ["n = timestamp('2026-11-01 05:30:00')", "ts < timestamp(d)", "n = timestamp(s)"]
)
def test_a_rendering_that_may_mean_otherwise_is_not_remembered(text: str) -> None:
    """Where TIMESTAMP means TIMESTAMP_NTZ, timestamp(x) (TIMESTAMP_LTZ) renders as
    CAST(x AS TIMESTAMP), which there is TIMESTAMP_NTZ: the memo tied that text to the
    first one's meaning (a review). Its rendering now binds as it would alone."""
    from lakelayout.expr import parse as P

    rules = SessionRules(ntz_timestamps=True)
    schema = pa.schema(
        [("ts", pa.timestamp("us", tz="UTC")), ("n", pa.timestamp("us")), ("s", pa.string()),
         ("d", pa.date32())]
    )  # fmt: skip
    P._MEMO.clear()
    rendering = parse_predicate(text, schema, session=rules, timezone="America/New_York").sql()
    again = parse_predicate(rendering, schema, session=rules, timezone="America/New_York")
    P._MEMO.clear()
    alone = parse_predicate(rendering, schema, session=rules, timezone="America/New_York")
    assert again == alone


def test_names_are_bound_as_spelt_under_a_case_sensitive_session() -> None:
    schema = pa.schema([("UserId", pa.int64()), ("s", pa.struct([("x", pa.int64())]))])
    exact = SessionRules(case_sensitive=True)
    assert parse_predicate("userid < 3", schema).sql() == "UserId < 3L"
    assert parse_predicate("UserId < 3", schema, session=exact).sql() == "UserId < 3L"
    with pytest.raises(PredicateError, match=r"unknown column 'userid'.*'UserId'"):
        parse_predicate("userid < 3", schema, session=exact)
    with pytest.raises(PredicateError, match=r"no field 'X' in struct column 's'"):
        parse_predicate("s.X = 1", schema, session=exact)
