"""Spark SQL predicate text -> lakelayout's bound, normalized predicate tree.

Three steps, as in pyiceberg's ``bind``:

1. **parse** the text with sqlglot (``read="spark"``), with the parser's
   line/column context on errors;
2. **bind** it to an Arrow schema: column names resolved case-insensitively
   (the schema's spelling wins), literals typed as Spark types them and coerced
   to the type of the term they are compared with (:mod:`.coerce`), BETWEEN /
   IN / LIKE / ILIKE rewritten into the node the pruner knows best. The bound
   tree is *exact* in three-valued logic: NOT stays where it was written, and
   a rewrite that only holds in a WHERE clause is spelled so that it also
   holds under a NOT (``tinyint_col = 1000`` is ``tinyint_col IS NULL AND
   NULL``: FALSE for values, NULL for NULL, like the comparison);
3. **normalize** (:mod:`.normalize`): NOT pushed to the leaves, NULL read as
   FALSE, AND / OR flattened, constants folded, children sorted.

Anything Spark accepts but lakelayout does not model (subqueries, CASE, window
functions, rand(), unknown functions, RLIKE, ...) becomes :class:`Opaque`: it
never lets a file be skipped. Text Spark itself would reject (unknown column,
malformed SQL, comparing a DATE with ``'abc'``) raises :class:`PredicateError`;
what only Spark's analyser knows to reject (a function that does not exist, an
aggregate in a row filter) passes here as Opaque and is refused by Spark where
a scan or DELETE builds its DataFrame (:func:`lakelayout.table.reader.spark_where`).

The normalized tree has WHERE semantics: it selects exactly the rows Spark
keeps, but NULL and FALSE are no longer told apart, so negate the SQL text and
re-parse rather than calling ``negate()`` on a normalized tree.

Type choices (Spark 4 runs with ANSI mode on): comparing a STRING column with a
number or a DATE/TIMESTAMP literal is rejected — Spark would cast every value
of the column and fail at run time on the first one that does not parse — so
we ask for an explicit cast instead. A numeric column compared with a quoted
number (``i = '1'``) is accepted, as Spark casts the literal.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from lakelayout.errors import InvalidOption, LakelayoutError, PredicateError, closest
from lakelayout.expr import coerce, numbers
from lakelayout.expr.evaluate import uncertain_case
from lakelayout.expr.like import shape, tokenize
from lakelayout.expr.nodes import (
    FLIPPED_OP,
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    StartsWith,
    Term,
    TermCompare,
)
from lakelayout.expr.normalize import canonical_args, normalize
from lakelayout.expr.temporal import FarTimestamp, NonDeterministic, UncertainOffset
from lakelayout.expr.types import (
    arithmetic_type,
    common_type,
    decimal_cast,
    family,
    function_types,
    spark_type_name,
)
from lakelayout.expr.visitor import PredicateVisitor

#: functions a predicate may call, by name: their Arrow return types (or aliases: "string")
Functions = Mapping[str, pa.DataType | str]

_COMPARISONS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ARITHMETIC: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_DATE_PARTS: dict[type[exp.Expression], str] = {
    exp.Year: "year",
    exp.Quarter: "quarter",
    exp.Month: "month",
    exp.Day: "dayofmonth",
    exp.DayOfMonth: "dayofmonth",
    exp.DayOfWeek: "dayofweek",
    exp.DayOfYear: "dayofyear",
    exp.Hour: "hour",
    exp.Minute: "minute",
    exp.Second: "second",
}
_STRING_FUNCS: dict[type[exp.Expression], str] = {exp.Lower: "lower", exp.Upper: "upper"}
NONDETERMINISTIC = frozenset(
    {
        "rand",
        "random",
        "randn",
        "uuid",
        "shuffle",
        "now",
        "current_date",
        "current_timestamp",
        "current_timezone",
        "localtimestamp",
        "curdate",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "unix_timestamp",
    }
)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_NUMBER_RE = re.compile(r"^\d+$")
_SPARK_CAST_TYPES: dict[Any, pa.DataType] = {
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMPLTZ: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMPNTZ: pa.timestamp("us"),
}


class CastFailed(PredicateError):
    """A literal that cannot be cast to its type: an error under ANSI; without ANSI Spark
    casts it to NULL (:attr:`SessionRules.ansi`)."""


class Unsupported(Exception):
    """Valid Spark that lakelayout does not model; becomes Opaque in a predicate."""

    def __init__(self, reason: str, *, nondeterministic: bool = False) -> None:
        super().__init__(reason)
        self.nondeterministic = nondeterministic


# ---------------------------------------------------------------- public API


def parse_predicate(
    sql: str,
    schema: pa.Schema,
    *,
    functions: Functions | None = None,
    timezone: str = "UTC",
    session: SessionRules | None = None,
) -> Predicate:
    """Parse, bind and normalize a Spark SQL boolean expression against ``schema``.

    ``session``: the Spark settings of the session the predicate runs in that
    change what it means (:class:`SessionRules`; None: Spark's defaults).

    The same text bound again with an equal schema, the same functions and
    time zone is the same (immutable) predicate, and a text that failed
    fails again with the same error (the last 8,192 are remembered); a
    predicate's rendering (``.sql()``) in the same context is that predicate.

    >>> schema = pa.schema([("l_shipdate", pa.date32()), ("l_quantity", pa.int32())])
    >>> parse_predicate("5 < L_QUANTITY AND l_shipdate >= '1995-03-01'", schema).sql()
    "(l_quantity > 5 AND l_shipdate >= DATE '1995-03-01')"
    >>> parse_predicate("l_quantity BETWEEN 1 AND 10.5", schema).sql()
    '(l_quantity <= 10 AND l_quantity >= 1)'
    """
    return _remembered(_binder_for(session), sql, schema, functions, timezone)


@dataclass(frozen=True)
class SessionRules:
    """Spark settings that change what a predicate means, read from the session it runs
    in (:func:`lakelayout.table.session.session_rules`).

    ``string_dates``: a DATE or TIMESTAMP compares with a string as strings
    (``spark.sql.legacy.typeCoercion.datetimeToString.enabled``): such comparisons
    are left to Spark (opaque); lakelayout compared dates, and a scan lost rows.
    ``ansi``: Spark's ANSI mode; where it is off, the type mismatches lakelayout refuses
    (ANSI's errors) are answered by Spark with legacy casts, and are left to Spark
    (an audit found 16 such predicates refused).
    ``ntz_timestamps``: ``TIMESTAMP`` names TIMESTAMP_NTZ
    (``spark.sql.timestampType=TIMESTAMP_NTZ``): ``TIMESTAMP '...'`` and
    ``CAST(... AS TIMESTAMP)`` are bound as TIMESTAMP_NTZ; read as instants in the
    session zone, a value in a daylight-saving gap skipped its file (an audit).
    """

    string_dates: bool = False
    ntz_timestamps: bool = False
    #: ``spark.sql.ansi.enabled``: off, a comparison or cast Spark answers by its legacy
    #: rules (``i = '1.5'``, ``CAST('x' AS INT)`` is NULL) is left to Spark, not refused
    ansi: bool = True
    #: ``spark.sql.ansi.doubleQuotedIdentifiers`` (with ANSI on): ``"s"`` names column
    #: ``s``, not the string 's' (read as a string, ``"s" <> 'x'`` was TRUE and a DELETE
    #: dropped every file; an audit)
    double_quoted_identifiers: bool = False
    #: ``spark.sql.parser.escapedStringLiterals``: a string literal is its text as
    #: written, backslashes included (``'C:\dir'``); unescaped, a scan lost the rows
    escaped_string_literals: bool = False
    #: ``spark.sql.caseSensitive``: column and field names are bound as spelt (``userid``
    #: does not name ``UserId``), as Spark's analyser binds them; ``plan()`` answered for
    #: text a scan and a DELETE refuse (an audit)
    case_sensitive: bool = False


_BINDERS: dict[SessionRules, Callable[[str, pa.Schema, Mapping[str, pa.DataType], str], Predicate]]
_BINDERS = {}


def _binder_for(
    rules: SessionRules | None,
) -> Callable[[str, pa.Schema, Mapping[str, pa.DataType], str], Predicate]:
    """The bind function of ``rules`` (one per rules: the memo keys on it)."""
    if rules is None or rules == SessionRules():
        return _bind_predicate
    found = _BINDERS.get(rules)
    if found is None:

        def bind(
            sql: str, schema: pa.Schema, functions: Mapping[str, pa.DataType], timezone: str
        ) -> Predicate:
            return _bind_predicate(sql, schema, functions, timezone, rules=rules)

        found = _BINDERS.setdefault(rules, bind)
    return found


_T = TypeVar("_T", Predicate, Term)


def _remembered(
    bind: Callable[[str, pa.Schema, Mapping[str, pa.DataType], str], _T],
    sql: str,
    schema: pa.Schema,
    functions: Functions | None,
    timezone: str,
) -> _T:
    """What ``bind`` gives for these arguments, bound once (:data:`_MEMO`)."""
    if not isinstance(schema, pa.Schema):
        raise InvalidOption(f"expected a pyarrow schema, got {type(schema).__name__}")
    types = tuple(sorted(function_types(functions).items()))
    key = (bind, sql, schema, types, timezone)
    bound = _MEMO.get(key)
    if bound is None:
        try:
            bound = bind(sql, schema, dict(types), timezone)
        except LakelayoutError as err:
            bound = err
        _MEMO.put(key, bound)
        rendering = bound.sql() if isinstance(bound, Predicate) else None
        # its rendering names the same predicate: the query log stores it and the advisor
        # binds it again (re-binding a rendering renders the same text and selects the
        # same rows: tests/expr/test_evaluate.py). Not under other session rules when it
        # holds a backslash: a rendering escapes backslashes, escaped string literals
        # read them as written ('\\b' renders a one-backslash value; a property test)
        # Nor when it holds a leaf left to Spark: under other rules its rendering may mean
        # something else (timestamp(x) renders as CAST(x AS TIMESTAMP), TIMESTAMP_NTZ under
        # spark.sql.timestampType=TIMESTAMP_NTZ; a review)
        if rendering is not None and (
            bind is _bind_predicate
            or ("\\" not in rendering and not cast(Predicate, bound).has_opaque())
        ):
            _MEMO.put((bind, rendering, schema, types, timezone), bound, replace=False)
    if isinstance(bound, LakelayoutError):
        raise bound.with_traceback(None)
    return bound  # type: ignore[return-value]


class _Memo:
    """The last ``size`` texts bound, by (binder, text, schema, function types, time
    zone): their trees, or the error they raised.

    A scan, the query log, the advisor's window and the replay bind the same
    predicate texts again (2-6 ms each), and every plan binds each declared
    index's expression; nodes are frozen, so one bound tree is shared. A
    predicate is also remembered by its rendering (``.sql()``). Thread-safe.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], Predicate | Term | LakelayoutError] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Predicate | Term | LakelayoutError | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(
        self,
        key: tuple[Any, ...],
        value: Predicate | Term | LakelayoutError,
        *,
        replace: bool = True,
    ) -> None:
        """Remember ``value`` for ``key`` (not over a value already there: ``replace=False``)."""
        with self._lock:
            if replace or key not in self._items:
                self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


_MEMO = _Memo(8192)


def _bind_predicate(
    sql: str,
    schema: pa.Schema,
    functions: Mapping[str, pa.DataType],
    timezone: str,
    *,
    rules: SessionRules | None = None,
) -> Predicate:
    rules = rules or SessionRules()
    node, depth = _parse(sql, "predicate", rules)
    if rules.ntz_timestamps:
        node = _ntz_timestamps(node, sql)
    with _headroom(depth, sql, "predicate"):
        binder = Binder(schema, functions, timezone, "predicate", rules=rules)
        bound = normalize(binder.predicate(node))
    _check_term_nesting(bound, sql, "predicate")
    return bound


def _check_term_nesting(bound: Expr, sql: str, what: str) -> None:
    """PredicateError when functions nest deeper than :data:`MAX_TERM_NESTING` in ``bound``."""
    deepest, stack = 0, [(bound, 0)]
    while stack:
        node, depth = stack.pop()
        depth += isinstance(node, Func)
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in node.children())
    if deepest > MAX_TERM_NESTING:
        raise PredicateError(
            f"{what} {_short(sql)!r} nests functions, casts or arithmetic {deepest} levels "
            f"deep; lakelayout accepts at most {MAX_TERM_NESTING}"
        )


def _ntz_timestamps(node: exp.Expression, sql: str) -> exp.Expression:
    """``node`` (parsed from ``sql``) with the type ``TIMESTAMP`` read as TIMESTAMP_NTZ, as
    Spark reads it under ``spark.sql.timestampType=TIMESTAMP_NTZ`` (sqlglot reads Spark's
    ``TIMESTAMP`` as TIMESTAMPTZ; ``TIMESTAMP_LTZ`` stays).

    Two stay TIMESTAMP_LTZ there, as in Spark: a ``TIMESTAMP '...'`` literal whose text
    writes a zone or offset (``TIMESTAMP'2026-11-01 05:30:00+00:00'`` is an instant; an
    audit: bound as a wall-clock time in the session zone, it skipped the file holding
    it), and the function ``timestamp(x)``, which always casts to TIMESTAMP_LTZ."""
    from lakelayout.expr.temporal import written_zone

    copy = node.copy()
    for kind in list(copy.find_all(exp.DataType)):
        if kind.this != exp.DataType.Type.TIMESTAMPTZ:
            continue
        cast_node = kind.parent
        if isinstance(cast_node, exp.Cast) and not isinstance(cast_node, exp.TryCast):
            start, end = cast_node.meta.get("start"), cast_node.meta.get("end")
            if (
                isinstance(start, int)
                and isinstance(end, int)
                and sql[start : end + 1].lower() == "timestamp"
            ):
                continue  # timestamp(x): a function call, TIMESTAMP_LTZ in Spark
            value = cast_node.this
            if isinstance(value, exp.Literal) and value.is_string and written_zone(value.this):
                continue  # TIMESTAMP '... +05:30': an instant
        kind.set("this", exp.DataType.Type.TIMESTAMPNTZ)
    return copy


def parse_term(
    sql: str,
    schema: pa.Schema,
    *,
    functions: Functions | None = None,
    timezone: str = "UTC",
) -> Term:
    """Parse and bind a deterministic value expression (``month(l_shipdate)``, ``lower(url)``).

    Remembered as :func:`parse_predicate` remembers predicates.

    >>> parse_term("MONTH(l_shipdate)", pa.schema([("l_shipdate", pa.date32())])).sql()
    'month(l_shipdate)'
    """
    return _remembered(_bind_term, sql, schema, functions, timezone)


def _bind_term(
    sql: str, schema: pa.Schema, functions: Mapping[str, pa.DataType], timezone: str
) -> Term:
    node, depth = _parse(sql, "expression")
    binder = Binder(schema, functions, timezone, "expression")
    try:
        with _headroom(depth, sql, "expression"):
            term = binder.term(node)
    except UncertainOffset as err:
        raise PredicateError(f"unsupported expression {sql.strip()!r}: {err}") from None
    except Unsupported as err:
        if err.nondeterministic:
            raise PredicateError(
                f"expression {sql.strip()!r} is non-deterministic ({err}); "
                "clustering and index expressions must be deterministic"
            ) from None
        raise PredicateError(f"unsupported expression {sql.strip()!r}: {err}") from None
    if not term.columns():
        raise PredicateError(f"expression {sql.strip()!r} references no column")
    _check_term_nesting(term, sql, "expression")
    return term


# ---------------------------------------------------------------- parsing


MAX_NESTING = 256
"""The deepest nesting of parentheses and NOTs a predicate or expression may have.

Measured on Spark 4.2 (``F.expr`` in local mode), Spark's own parser stops at
436 nested parentheses, 556 chained NOTs, 266 nested AND/OR groups and 377
nested arithmetic groups; lakelayout takes every form up to 256 levels and
names the limit past it. Flat AND / OR chains are not nesting: Spark took
50,000 terms, and lakelayout flattens them without recursion.
"""

MAX_TERM_NESTING = 64
"""The deepest nesting of functions, casts and arithmetic (``abs(abs(...))``,
``-(-(...))``, ``CAST(CAST(...))``) in a bound predicate or expression. Past
about 245 levels the planner's, evaluator's and renderer's recursion (under
Python's default limit, where scans, DELETE and the advisor run them) failed
with a raw RecursionError (an audit); the evaluator takes about five frames a
level. A unary ``- - - i`` chain counts although it has no parentheses."""

#: Python frames sqlglot's recursive-descent parser and the binder may use at
#: :data:`MAX_NESTING` (about 21 per level of parentheses), with room to spare.
_DEEP_RECURSION_LIMIT = 30_000
_SHALLOW = 30
_recursion_lock = threading.Lock()
_recursion_users = 0
_recursion_saved = 0


def _parse(sql: str, what: str, rules: SessionRules | None = None) -> tuple[exp.Expression, int]:
    """The sqlglot tree of one expression and its nesting depth; PredicateError otherwise."""
    if not isinstance(sql, str) or not sql.strip():
        raise PredicateError(f'empty {what}: expected Spark SQL text such as "l_quantity > 5"')
    dialect = sqlglot.Dialect.get_or_raise("spark")
    try:
        tokens = _as_spark_reads(dialect.tokenize(sql), sql, rules or SessionRules())
    except TokenError as err:
        raise PredicateError(f"malformed {what} {_short(sql)!r}: {err}") from None
    _check_one_statement(tokens, sql, what)
    depth = _nesting(tokens)
    if depth > MAX_NESTING:
        raise PredicateError(
            f"{what} {_short(sql)!r} nests {depth} levels deep (parentheses and NOT); "
            f"lakelayout accepts at most {MAX_NESTING} (Spark's parser stops near 270)"
        )
    try:
        with _headroom(depth, sql, what):
            parsed = dialect.parser().parse(tokens, sql)  # the tokens, not the text again
        node = cast(exp.Expression, parsed[0] if parsed else None)
    except ParseError as err:
        detail = err.errors[0] if err.errors else {}
        where = f" at line {detail.get('line', '?')}, col {detail.get('col', '?')}"
        desc = _plain_parse_error(detail.get("description") or str(err).splitlines()[0])
        raise PredicateError(f"malformed {what} {_short(sql)!r}: {desc}{where}") from None
    except TokenError as err:
        raise PredicateError(f"malformed {what} {_short(sql)!r}: {err}") from None
    if node is None or isinstance(node, exp.Alias):
        raise PredicateError(f"malformed {what} {_short(sql)!r}: unexpected trailing text")
    if isinstance(node, exp.Query | exp.DDL | exp.DML | exp.Command):
        kind = node.key.upper()
        raise PredicateError(f"malformed {what} {_short(sql)!r}: got a {kind} statement")
    _check_decimal_types(node, sql, what)
    for found in node.find_all(exp.In):
        if not found.expressions and not any(
            found.args.get(k) for k in ("query", "unnest", "field")
        ):
            # sqlglot reads it; Spark's parser refuses it (EMPTY_IN_PREDICATE), and text
            # Spark refuses must not be answered here (a DELETE would delete nothing)
            raise PredicateError(
                f"malformed {what} {_short(sql)!r}: an IN list needs at least one value "
                "(Spark refuses `IN ()`)"
            )
    return node, depth


def _check_decimal_types(node: exp.Expression, sql: str, what: str) -> None:
    """Refuse a DECIMAL type Spark's parser refuses: more than 38 digits
    (DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION) or a scale past the precision.

    Around a column (``CAST(c AS DECIMAL(39, 0))``) the cast is opaque to lakelayout
    and was left to Spark, so plan() answered for text a scan and a DELETE refuse."""
    for found in node.find_all(exp.DataType):
        if found.this != exp.DataType.Type.DECIMAL or not found.expressions:
            continue
        params = [p.this.this for p in found.expressions if isinstance(p.this, exp.Literal)]
        if len(params) != len(found.expressions) or not all(x.isdigit() for x in params):
            continue  # sqlglot refuses a negative scale itself; nothing else reaches here
        precision, scale = [*map(int, params), 0][:2]
        if precision > 38 or scale > precision:
            raise PredicateError(
                f"{found.sql(dialect='spark')} in {what} {_short(sql)!r}: Spark's decimals "
                "hold 1 to 38 digits, with a scale of at most the precision (Spark refuses it)"
            )


#: sqlglot's node names of the operators a parse error most often names, as SQL
_OPERATOR_SQL = {
    "EQ": "=", "NEQ": "<>", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">=",
    "NullSafeEQ": "<=>", "NullSafeNEQ": "IS DISTINCT FROM", "And": "AND", "Or": "OR",
    "Not": "NOT", "Between": "BETWEEN", "In": "IN", "Like": "LIKE", "ILike": "ILIKE", "Is": "IS", "Add": "+", "Sub": "-",
    "Mul": "*", "Div": "/", "Mod": "%", "BitwiseLeftShift": "<<",
    "BitwiseRightShift": ">>", "BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^",
}  # fmt: skip
#: the parts of a node a parse error says are missing, in words
_PART_WORDS = {
    "expression": "its right-hand side",
    "this": "its operand",
    "low": "its lower bound",
    "high": "its upper bound",
}
_MISSING_RE = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")


def _plain_parse_error(desc: str) -> str:
    """sqlglot's description of a parse error without its Python class names:
    ``Required keyword: 'expression' missing for <class '...LT'>`` becomes
    ``'<' is missing its right-hand side``.

    >>> _plain_parse_error("Required keyword: 'high' missing for <class 'x.core.Between'>")
    "'BETWEEN' is missing its upper bound"
    >>> _plain_parse_error("Expecting )")
    'Expecting )'
    """
    match = _MISSING_RE.search(desc)
    if match is None:
        return desc
    part, node = match.groups()
    operator = _OPERATOR_SQL.get(node) or re.sub(r"(?<!^)(?=[A-Z])", " ", node).lower()
    return f"'{operator}' is missing {_PART_WORDS.get(part, repr(part))}"


#: Spark's one-token ``!<`` (``>=``) and ``!>`` (``<=``), which sqlglot reads as NOT and
#: a comparison
_BANG_COMPARISONS = {TokenType.LT: (TokenType.GTE, ">="), TokenType.GT: (TokenType.LTE, "<=")}


#: functions of the query's start time, by what they return; Spark evaluates them once per
#: query (``current_timestamp()``, ``now()``...), and bare ``CURRENT_DATE`` and
#: ``CURRENT_TIMESTAMP`` are the same calls
NOW_FUNCTIONS = {
    "current_timestamp": "timestamp",
    "now": "timestamp",
    "current_date": "date",
    "curdate": "date",
    "localtimestamp": "local",
    "unix_timestamp": "unix",
}
_BARE_NOW = frozenset({"current_date", "current_timestamp"})


def now_calls(
    sql: str, rules: SessionRules | None = None, columns: Collection[str] = ()
) -> list[tuple[int, int, str]]:
    """The calls in ``sql`` that read the query's start time, as ``(start, end, kind)``
    (character offsets, ``end`` inclusive; ``kind`` a value of :data:`NOW_FUNCTIONS`):
    ``name()`` with nothing between the parentheses, not qualified (``x.now()``) nor
    quoted, and a bare ``CURRENT_DATE`` / ``CURRENT_TIMESTAMP`` unless ``columns`` has
    one of that name (Spark reads the column then). Text in string literals is not a
    call, nor a bare name that a lambda in the text names its variable
    (``current_date -> ...``). ``unix_timestamp(col)`` is not the time of the query:
    only ``unix_timestamp()``."""
    tokens = spark_tokens(sql, rules)
    # a lambda may name its variable current_date (`current_date` -> ...): the bare name
    # may be the variable anywhere in the text then (a review)
    shadowed = {c.lower() for c in columns} | _lambda_variables(tokens)
    out = []
    for i, token in enumerate(tokens):
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        if sql[token.start] in "`\"'":
            continue
        name = token.text.lower()
        if name not in NOW_FUNCTIONS:
            continue
        if i > 0 and tokens[i - 1].token_type == TokenType.DOT:
            continue
        after = tokens[i + 1 : i + 3]
        if (
            len(after) == 2
            and after[0].token_type == TokenType.L_PAREN
            and after[1].token_type == TokenType.R_PAREN
        ):
            out.append((token.start, after[1].end, NOW_FUNCTIONS[name]))
        elif (
            name in _BARE_NOW
            and name not in shadowed
            and not (after and after[0].token_type == TokenType.L_PAREN)
        ):
            out.append((token.start, token.end, NOW_FUNCTIONS[name]))
    return out


def _lambda_variables(tokens: list[Token]) -> set[str]:
    """The names (lower case) the lambdas among ``tokens`` give their variables:
    ``x -> ...`` and ``(x, y) -> ...``."""
    names: set[str] = set()
    for i, token in enumerate(tokens):
        if token.token_type != TokenType.ARROW or i == 0:
            continue
        j = i - 1
        if tokens[j].token_type == TokenType.R_PAREN:
            while j > 0 and tokens[j - 1].token_type != TokenType.L_PAREN:
                j -= 1
                names.add(tokens[j].text.lower())
        else:
            names.add(tokens[j].text.lower())
    return names


def spark_tokens(sql: str, rules: SessionRules | None = None) -> list[Token]:
    """The tokens of ``sql`` as Spark reads them under ``rules`` (:func:`_as_spark_reads`);
    sqlglot's TokenError when it cannot lex the text."""
    dialect = sqlglot.Dialect.get_or_raise("spark")
    return _as_spark_reads(dialect.tokenize(sql), sql, rules or SessionRules())


def _as_spark_reads(tokens: list[Token], sql: str, rules: SessionRules) -> list[Token]:
    """sqlglot's tokens of ``sql`` as Spark's lexer and ``rules`` read the text: ``!<``
    and ``!>`` are comparisons; with double-quoted identifiers a ``"..."`` token names
    a column; with escaped string literals a string is its text as written."""
    out: list[Token] = []
    for token in tokens:
        kind = token.token_type
        previous = out[-1] if out else None
        if (
            kind in _BANG_COMPARISONS
            and previous is not None
            and previous.token_type == TokenType.NOT
            and sql[previous.start : previous.end + 1] == "!"
            and previous.end + 1 == token.start
        ):
            merged, text = _BANG_COMPARISONS[kind]
            out[-1] = _token(previous, merged, text, end=token.end)
            continue
        if kind == TokenType.STRING:
            raw = sql[token.start : token.end + 1]
            if rules.double_quoted_identifiers and raw.startswith('"'):
                name = raw[1:-1]
                if (
                    previous is not None
                    and previous.token_type == TokenType.IDENTIFIER
                    and previous.end + 1 == token.start
                    and sql[previous.start] == '"'
                ):  # "a""b": sqlglot's two strings, Spark's one name a"b
                    out[-1] = _token(
                        previous, TokenType.IDENTIFIER, f'{previous.text}"{name}', end=token.end
                    )
                    continue
                token = _token(token, TokenType.IDENTIFIER, name)
            elif rules.escaped_string_literals and raw[:1] in ("'", '"'):
                token = _token(token, TokenType.STRING, raw[1:-1])
        out.append(token)
    return out


def _token(like: Token, kind: TokenType, text: str, *, end: int | None = None) -> Token:
    return Token(
        kind,
        text,
        line=like.line,
        col=like.col,
        start=like.start,
        end=like.end if end is None else end,
        comments=like.comments,
    )


def _check_one_statement(tokens: list[Any], sql: str, what: str) -> None:
    """A predicate is one expression: a ``;`` (a second statement, even empty) is refused."""
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            raise PredicateError(
                f"{what} {_short(sql)!r} holds more than one statement (';' at line "
                f"{token.line}, col {token.col}); a {what} is one Spark SQL expression"
            )


def _nesting(tokens: list[Any]) -> int:
    """How deep the text nests: open parentheses plus a run of chained NOTs."""
    depth = run = deepest = 0
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth, run = depth + 1, 0
        elif kind == TokenType.R_PAREN:
            depth, run = depth - 1, 0
        elif kind == TokenType.NOT:
            run += 1
        else:
            run = 0
        deepest = max(deepest, depth + run)
    return deepest


@contextlib.contextmanager
def _headroom(depth: int, sql: str, what: str) -> Iterator[None]:
    """Room for the recursive parser and binder on nested text; RecursionError becomes ours.

    The interpreter's recursion limit is raised only for text nesting deeper
    than a few levels, and restored when the last user leaves.
    """
    global _recursion_users, _recursion_saved
    deep = depth > _SHALLOW
    if deep:
        with _recursion_lock:
            if _recursion_users == 0:
                _recursion_saved = sys.getrecursionlimit()
                sys.setrecursionlimit(max(_recursion_saved, _DEEP_RECURSION_LIMIT))
            _recursion_users += 1
    try:
        yield
    except RecursionError:
        raise PredicateError(
            f"{what} {_short(sql)!r} is nested too deeply for lakelayout "
            f"(at most {MAX_NESTING} levels of parentheses and NOT)"
        ) from None
    finally:
        if deep:
            with _recursion_lock:
                _recursion_users -= 1
                if _recursion_users == 0:
                    sys.setrecursionlimit(_recursion_saved)


def _short(sql: str, limit: int = 80) -> str:
    text = sql.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- binding


def _string_against(left: Expr, right: Expr, others: Collection[str]) -> bool:
    """One side a string (a literal, a column, a call), the other of a family in ``others``."""
    kinds = {family(_dtype(left)), family(_dtype(right))}
    return "string" in kinds and bool(kinds & set(others))


def _float_with_integer(*terms: Expr) -> bool:
    """A FLOAT among ``terms`` and an integer (of any width): Spark's legacy rules make
    them FLOAT, its ANSI ones DOUBLE (comparisons, arithmetic, COALESCE)."""
    types = [_dtype(t) for t in terms]
    kinds = {family(t) for t in types}
    return {"int", "float"} <= kinds and any(
        t is not None and pa.types.is_float32(t) for t in types
    )


#: literals Spark's ANSI rules compare with a STRING term by casting each of the term's
#: values (``zip = 12345``, ``s > DATE '2024-01-01'``): valid where every value casts, a
#: failed query where one does not; the string's own order is no guide to the cast's
_CAST_PER_VALUE = {"string": ("int", "decimal", "float", "date", "timestamp", "bool")}


def _cast_per_value(term: Expr, lit: Literal) -> bool:
    """Whether Spark (ANSI) compares ``term`` with ``lit`` by casting the term's values,
    which lakelayout leaves to Spark; a BINARY term against a string literal is compared
    with the literal's bytes (``bin = 'a'``)."""
    term_family, lit_family = family(_dtype(term)), family(_dtype(lit))
    if term_family == "binary":
        return lit_family == "string"
    return lit_family in _CAST_PER_VALUE.get(term_family, ())


#: what a string compared with is coerced to by other rules than ANSI's when ANSI is off
#: (a DECIMAL(38, 0) against a 38-digit string: ANSI compares doubles, Spark without ANSI
#: did not, and a property test found a row lakelayout matched and Spark did not)
_NON_ANSI_STRING_PEERS = ("int", "decimal", "float", "date", "timestamp", "bool", "binary")


class Binder:
    """Binds one sqlglot tree to a schema; ``what`` names the text in error messages."""

    def __init__(
        self,
        schema: pa.Schema,
        functions: Mapping[str, pa.DataType] | None,
        timezone: str,
        what: str,
        *,
        rules: SessionRules | None = None,
    ) -> None:
        #: the rules' spelling of a name for a lookup: itself, or in lower case
        self.fold: Callable[[str], str] = (
            str if rules is not None and rules.case_sensitive else str.lower
        )
        self.fields = {self.fold(f.name): f for f in schema}
        #: already by lower-case name with Arrow types (:func:`_remembered` normalizes them)
        self.functions = dict(functions or {})
        self.timezone = timezone
        self.what = what
        #: the session's settings that change what the text means (with NTZ timestamps
        #: the tree's TIMESTAMP types were mapped by :func:`_ntz_timestamps` already)
        self.rules = rules or SessionRules()
        coerce.zone(timezone)

    # ------------------------------------------------------------ predicates

    def predicate(self, node: exp.Expression) -> Predicate:
        """Bind a boolean expression, exactly (NOT stays; normalization pushes it down)."""
        if isinstance(node, exp.Paren):
            return self.predicate(node.this)
        if isinstance(node, exp.Not):
            return Not(self.predicate(node.this))
        if isinstance(node, exp.And | exp.Or):
            operands = _chain(node)
            kids = tuple(self.predicate(operand) for operand in operands)
            return And(kids) if isinstance(node, exp.And) else Or(kids)
        try:
            return self._leaf(node)
        except (Unsupported, UncertainOffset):  # (an offset only Spark knows: any path)
            return self.opaque(node)

    def _leaf(self, node: exp.Expression) -> Predicate:
        handler = self._leaf_handler(node)
        if handler is not None:
            return handler(node)
        if isinstance(node, exp.Boolean):
            return BoolConst(bool(node.this))
        if isinstance(node, exp.Null):
            return NULL
        if _func_name(node) in ("isnull", "isnotnull") and len(_call_args(node)) == 1:
            return self._null_test(node)
        return self._bool_term(node)

    def _null_test(self, node: exp.Expression) -> Predicate:
        """``isnull(x)`` / ``isnotnull(x)``: the function forms of ``x IS [NOT] NULL``."""
        (arg,) = _call_args(node)
        term = self.term(arg)
        negated = _func_name(node) == "isnotnull"
        if isinstance(term, Literal):
            return BoolConst((term.value is None) != negated)
        return IsNull(term, negated=negated)

    def _leaf_handler(self, node: exp.Expression) -> Callable[[exp.Expression], Predicate] | None:
        table: tuple[tuple[type[exp.Expression], Callable[[exp.Expression], Predicate]], ...]
        table = (
            (exp.NullSafeEQ, self._null_safe_eq),
            (exp.NullSafeNEQ, self._null_safe_neq),
            (exp.Between, self._between),
            (exp.In, self._in),
            (exp.Is, self._is),
            (exp.Escape, self._like),
            (exp.Like, self._like),
            (exp.ILike, self._like),
            (exp.StartsWith, self._affix),
            (exp.EndsWith, self._affix),
        )
        if type(node) in _COMPARISONS:
            return self._comparison
        for kind, handler in table:
            if isinstance(node, kind):
                return handler
        return None

    def _comparison(self, node: exp.Expression) -> Predicate:
        return self.compare(_COMPARISONS[type(node)], node.this, node.expression, node)

    def compare(
        self,
        op: str,
        left_node: exp.Expression,
        right_node: exp.Expression,
        whole: exp.Expression,
        *,
        via: str = "compare",
    ) -> Predicate:
        """``left op right``, bound, normalized to ``term op literal`` and coerced."""
        left, right = self.term(left_node), self.term(right_node)
        return self.compare_terms(op, left, right, whole, via=via)

    def compare_terms(
        self,
        op: str,
        left: Expr,
        right: Expr,
        whole: exp.Expression,
        *,
        via: str = "compare",
        list_type: pa.DataType | None = None,
    ) -> Predicate:
        """``left op right`` exactly: NULL with a NULL operand, folds spelled for three values.

        ``via`` / ``list_type`` select Spark's numeric coercion (:func:`coerce.compare`).
        """
        if _is_null(left) or _is_null(right):
            return NULL
        self._check_string_rules(left, right)
        if isinstance(left, Literal) and not isinstance(right, Literal):
            left, right, op = right, left, FLIPPED_OP[op]
        if isinstance(right, Literal):
            folded = self._coerced(op, left, right, whole, via=via, list_type=list_type)
            if coerce.literal_fold(op, left, right, via=via, list_type=list_type):
                return folded
            return _exact(left, folded)
        if common_type([_dtype(left), _dtype(right)]) is None:
            raise Unsupported("comparison between incompatible types")
        if left.sql() > right.sql():
            left, right, op = right, left, FLIPPED_OP[op]
        return TermCompare(op, left, right)

    def _check_string_rules(self, left: Expr, right: Expr) -> None:
        """Unsupported where this session compares ``left`` with ``right`` by other rules
        than the ANSI ones lakelayout models (:class:`SessionRules`): a string with
        another type, a FLOAT with an integer."""
        if self.rules.string_dates and _string_against(left, right, ("date", "timestamp")):
            raise Unsupported("a date compared with a string, as strings in this session")
        if not self.rules.ansi and _string_against(left, right, _NON_ANSI_STRING_PEERS):
            raise Unsupported("a string compared with another type without ANSI")
        if not self.rules.ansi and _float_with_integer(left, right):
            # Spark's legacy rules compare them as FLOAT, the ANSI ones as DOUBLE: x FLOAT
            # holding 16777216 equals 16777217 as FLOAT only, and the file was skipped
            # (an audit)
            raise Unsupported("a FLOAT compared with an integer without ANSI")

    def _coerced(
        self,
        op: str,
        term: Expr,
        lit: Literal,
        whole: exp.Expression,
        *,
        via: str = "compare",
        list_type: pa.DataType | None = None,
    ) -> Predicate:
        """``term op lit`` coerced and folded by :func:`coerce.compare` (WHERE semantics).

        Numbers are compared in Spark's comparison type (:mod:`.numbers`):
        ``via="in"`` with the whole list's ``list_type`` for IN lists; where
        Spark would round the term's own values the comparison stays opaque.
        """
        self._check_string_rules(term, lit)
        try:
            bound = coerce.compare(op, term, lit, self.timezone, via=via, list_type=list_type)
        except coerce.TypeMismatch as err:
            if not self.rules.ansi:
                raise Unsupported(f"a legacy (non-ANSI) comparison: {err}") from None
            if _cast_per_value(term, lit):
                raise Unsupported(f"{err}: Spark casts each value of the term") from None
            raise PredicateError(f"type mismatch in {_text(whole)!r}: {err}") from None
        except (
            coerce.Unrepresentable,
            NonDeterministic,
            numbers.NotModelled,
            UncertainOffset,
        ) as err:
            raise Unsupported(str(err)) from None
        return _fold_literal_compare(bound)

    def _null_safe_eq(self, node: exp.Expression) -> Predicate:
        """``a <=> v`` is ``a = v AND a IS NOT NULL`` (never NULL); ``a <=> NULL`` is ``a IS NULL``;
        ``a <=> b`` of two terms is also TRUE where both are NULL."""
        left, right = self.term(node.this), self.term(node.expression)
        if isinstance(left, Literal):
            left, right = right, left
        if isinstance(right, Literal) and right.value is None:
            return _fold_literal_compare(IsNull(left))
        equal = self.compare_terms("=", left, right, node)
        present = tuple(
            IsNull(t, negated=True) for t in (left, right) if not isinstance(t, Literal)
        )
        if not present:
            return equal
        if len(present) == 1:
            return And((equal, *present))
        return Or((And((equal, *present)), And((IsNull(left), IsNull(right)))))

    def _null_safe_neq(self, node: exp.Expression) -> Predicate:
        """``a IS DISTINCT FROM b`` is ``NOT (a <=> b)`` (never NULL either)."""
        return Not(self._null_safe_eq(node))

    def _between(self, node: exp.Expression) -> Predicate:
        """``x BETWEEN a AND b`` is ``x >= a AND x <= b`` (also under NOT: De Morgan)."""
        low = self.compare(">=", node.this, node.args["low"], node)
        high = self.compare("<=", node.this, node.args["high"], node)
        return And((low, high))

    def _in(self, node: exp.Expression) -> Predicate:
        """IN lists: values coerced, impossible ones dropped, sorted, de-duplicated.

        ``x IN (1, NULL)`` is ``x = 1 OR NULL`` (NULL where ``x`` is not 1), so
        that its negation ``x NOT IN (1, NULL)`` is never TRUE, as in Spark.
        """
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise Unsupported("IN subquery")
        term = self.term(node.this)
        values = [self.term(v) for v in node.expressions]
        if not all(isinstance(v, Literal) for v in values) or isinstance(term, Literal):
            return Or(tuple(self.compare_terms("=", term, v, node) for v in values))
        literals = [v for v in values if isinstance(v, Literal)]
        listed = [v for v in literals if v.value is not None]
        list_type = self._in_list_type(term, listed, node)
        folded = [self._coerced("=", term, v, node, via="in", list_type=list_type) for v in listed]
        if all(_is_equality(b) or b == BoolConst(False) for b in folded):
            kept = {b.value.sql(): b.value for b in folded if isinstance(b, Compare)}
            ordered = tuple(sorted(kept.values(), key=_sort_key))
            hit: Predicate
            if not ordered:
                hit = _exact(term, BoolConst(False))
            elif len(ordered) == 1:
                hit = Compare("=", term, ordered[0])
            else:
                hit = In(term, ordered)
        else:
            hit = Or(tuple(_exact(term, b) for b in folded))
        return Or((hit, NULL)) if len(listed) < len(literals) else hit

    def _in_list_type(
        self, term: Expr, listed: list[Literal], node: exp.Expression
    ) -> pa.DataType | None:
        """The one type Spark compares a numeric term and all its IN values in, or None."""
        dtype = _dtype(term)
        if not listed or dtype is None or family(dtype) not in ("int", "decimal", "float"):
            return None
        try:
            return numbers.in_list_type(dtype, listed)
        except numbers.NotModelled as err:
            raise Unsupported(str(err)) from None
        except numbers.BadLiteral as err:
            if not self.rules.ansi:
                raise Unsupported(f"a legacy (non-ANSI) comparison: {err}") from None
            raise PredicateError(f"type mismatch in {_text(node)!r}: {err}") from None

    def _is(self, node: exp.Expression) -> Predicate:
        """``x IS NULL``; ``b IS TRUE`` is ``b = true AND b IS NOT NULL`` (never NULL).

        ``(a > 0) IS NULL`` -- IS NULL of a comparison or another null-propagating
        test -- is NULL-ness of its operands: ``a IS NULL``.
        """
        target = node.expression
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(target, exp.Null) and isinstance(inner, _NULL_PROPAGATING):
            return _nullness(self.predicate(inner))
        term = self.term(node.this)
        if isinstance(target, exp.Null):
            if isinstance(term, Literal):
                return BoolConst(term.value is None)
            return IsNull(term)
        if isinstance(target, exp.Boolean) and family(_dtype(term)) == "bool":
            hit = BoolTerm(term, negated=not bool(target.this))
            return And((hit, IsNull(term, negated=True)))
        raise Unsupported("IS with a non-NULL, non-boolean operand")

    def _like(self, node: exp.Expression) -> Predicate:
        """LIKE / ILIKE with Spark's escape rules, reduced to =, prefix, suffix when possible."""
        escape = "\\"
        if isinstance(node, exp.Escape):
            esc = self.term(node.expression)
            if not isinstance(esc, Literal) or not isinstance(esc.value, str):
                raise Unsupported("non-literal ESCAPE")
            escape, node = esc.value, node.this
        if not isinstance(node, exp.Like | exp.ILike):
            raise Unsupported("ESCAPE outside LIKE")
        neg = bool(node.args.get("negate"))
        term = self.term(node.this)
        pattern = self.term(node.expression)
        if not isinstance(pattern, Literal) or not isinstance(pattern.value, str):
            raise Unsupported("LIKE with a non-literal pattern")
        if family(_dtype(term)) != "string":
            raise Unsupported("LIKE on a non-string value")
        text = pattern.value
        if isinstance(node, exp.ILike):
            doubt = uncertain_case(text)
            if doubt is not None:  # Spark lower-cases the pattern with its own tables
                raise Unsupported(
                    f"ILIKE pattern with {doubt!r}, whose case Spark may map otherwise"
                )
            term, text = _case_func("lower", term), text.lower()
        try:
            form = shape(tokenize(text, escape))
        except PredicateError as err:
            raise PredicateError(f"{err} in {_text(node)!r}") from None
        return _like_node(term, form.kind, form.text, neg)

    def _affix(self, node: exp.Expression) -> Predicate:
        """``startswith(s, 'x')`` / ``endswith(s, 'x')``."""
        term = self.term(node.this)
        affix = self.term(node.expression)
        if not isinstance(affix, Literal) or family(_dtype(term)) != "string":
            raise Unsupported("startswith/endswith needs a string term and a literal")
        if affix.value is None:
            return NULL
        if not isinstance(affix.value, str):
            raise PredicateError(f"type mismatch in {_text(node)!r}: expected a string literal")
        kind = "prefix" if isinstance(node, exp.StartsWith) else "suffix"
        return _like_node(term, kind, affix.value, False)

    def _bool_term(self, node: exp.Expression) -> Predicate:
        term = self.term(node)
        if isinstance(term, Literal):
            if term.value is None:
                return NULL
            if isinstance(term.value, bool):
                return BoolConst(term.value)
        dtype = _dtype(term)
        if family(dtype) != "bool":
            raise PredicateError(
                f"{self.what} {_text(node)!r} is not boolean: it has type {spark_type_name(dtype)}"
            )
        return BoolTerm(term)

    def opaque(self, node: exp.Expression) -> Predicate:
        """An Opaque leaf: canonical Spark text, with the columns it reads (validated)."""
        reads: set[str] = set()
        copy = node.copy()
        for col in list(copy.find_all(exp.Column)):
            if _inside_query(col):
                continue
            name = self.column_name(col.name) if not col.table else None
            if name is None:
                parts = _column_parts(col) or []
                for part in parts[:-1]:
                    base = self.fields.get(self.fold(part))
                    if base is not None:
                        reads.add(base.name)
                        break
                continue
            reads.add(name)
            col.replace(exp.column(name, quoted=not _plain(name)))
        return Opaque(copy.sql(dialect="spark"), frozenset(reads))

    # ------------------------------------------------------------ terms

    def column_name(self, name: str) -> str:
        """The schema's spelling of a column, or a PredicateError with a suggestion."""
        field = self.fields.get(self.fold(name))
        if field is None:
            hint = closest(name, [f.name for f in self.fields.values()])
            if not hint:
                hint = " columns are: " + ", ".join(f.name for f in self.fields.values())
            raise PredicateError(f"unknown column '{name}' in {self.what};{hint}")
        return str(field.name)

    def term(self, node: exp.Expression) -> Term:
        """Bind a value expression; Unsupported when lakelayout does not model it."""
        if isinstance(node, exp.Paren):
            return self.term(node.this)
        if (
            self.rules.ntz_timestamps
            and isinstance(node, exp.Cast)
            and node.to.this == exp.DataType.Type.TIMESTAMP
        ):
            # sqlglot reads both to_timestamp(x) (TIMESTAMP_NTZ in such a session) and
            # timestamp(x) (TIMESTAMP_LTZ) as this cast: which one the text had is lost (a
            # review found to_timestamp bound as an instant, and rows lost)
            raise Unsupported("to_timestamp() / timestamp() where TIMESTAMP is TIMESTAMP_NTZ")
        try:
            lit = literal_of(node, self.timezone)
        except CastFailed as err:
            if self.rules.ansi:
                raise
            raise Unsupported(f"a legacy (non-ANSI) cast: {err}") from None
        if lit is not None:
            return lit
        if isinstance(node, exp.Column | exp.Dot) and _column_parts(node) is not None:
            return self.column(node)
        builder = self._term_builder(node)
        if builder is None:
            raise self._unsupported(node)
        return builder(node)

    def column(self, node: exp.Expression) -> Term:
        """A column, or a field inside a struct column (``a.b.c``), resolved without case
        (as spelt under ``spark.sql.caseSensitive``: :attr:`SessionRules.case_sensitive`).

        The first part names a top-level column; the rest enter struct fields,
        as Spark resolves ``a.b`` on a DataFrame. Parts that do not start at a
        column (a table qualifier) are not modelled.
        """
        parts = _column_parts(node)
        assert parts is not None
        if len(parts) == 1:
            name = self.column_name(parts[0])
            return Column(name, self.fields[self.fold(name)].type)
        top = self.fields.get(self.fold(parts[0]))
        if top is None:
            self.opaque(node)
            raise Unsupported("qualified column reference")
        dtype: pa.DataType = top.type
        path: list[str] = []
        for part in parts[1:]:
            if not pa.types.is_struct(dtype):
                raise Unsupported(f"field access on a {spark_type_name(dtype)} value")
            found = [dtype.field(i) for i in range(dtype.num_fields)]
            match = [f for f in found if self.fold(f.name) == self.fold(part)]
            if len(match) != 1:
                known = ", ".join(f.name for f in found)
                where = ".".join([top.name, *path])
                raise PredicateError(
                    f"no field '{part}' in struct column '{where}' in {self.what}; "
                    f"its fields are: {known}"
                )
            path.append(match[0].name)
            dtype = match[0].type
        return Column(top.name, dtype, tuple(path))

    def _term_builder(self, node: exp.Expression) -> Callable[[exp.Expression], Term] | None:
        kind = type(node)
        if kind in _ARITHMETIC:
            return self._arithmetic
        if kind in _DATE_PARTS:
            return self._date_part
        if kind in _STRING_FUNCS:
            return self._string_func
        table: dict[type[exp.Expression], Callable[[exp.Expression], Term]] = {
            exp.Neg: self._negative,
            exp.Negative: self._negative,
            exp.Length: self._length,
            exp.Substring: self._substring,
            exp.Abs: self._abs,
            exp.Coalesce: self._coalesce,
            exp.Bracket: self._bracket,
            exp.TimestampTrunc: self._date_trunc,
            exp.TimeToStr: self._date_format,
            exp.Cast: self._cast,
            exp.TryCast: self._cast,
            exp.TsOrDsToDate: self._to_date,
            exp.Anonymous: self._udf,
        }
        return table.get(kind)

    def _unsupported(self, node: exp.Expression) -> Unsupported:
        name = _func_name(node)
        if name in NONDETERMINISTIC:
            return Unsupported(f"{name}() is non-deterministic", nondeterministic=True)
        if name is not None:
            return Unsupported(f"function {name}() is not modelled")
        return Unsupported(f"{node.key.upper()} is not modelled")

    def _arithmetic(self, node: exp.Expression) -> Term:
        op = _ARITHMETIC[type(node)]
        left, right = self.term(node.this), self.term(node.expression)
        lt, rt = _dtype(left), _dtype(right)
        if not self.rules.ansi and _float_with_integer(left, right):
            # x + 0 on x FLOAT 16777216 is 16777217 as DOUBLE, 16777216 as FLOAT (a review)
            raise Unsupported("FLOAT arithmetic with an integer without ANSI")
        if family(lt) == "date" and family(rt) == "int" and op in ("+", "-"):
            dtype: pa.DataType = pa.date32()
        elif family(lt) == "int" and family(rt) == "date" and op == "+":
            dtype = pa.date32()
        elif (
            op == "/"
            and "decimal" in (family(lt), family(rt))
            and "float"
            not in (
                family(lt),
                family(rt),
            )
        ):
            # Spark divides decimals as decimals, rounding HALF_UP twice (to 38 digits,
            # then to the result type); lakelayout does not model it
            raise Unsupported("decimal division")
        elif _is_number(lt) and _is_number(rt):
            assert lt is not None and rt is not None
            dtype = arithmetic_type(op, lt, rt)
        else:
            raise Unsupported(f"arithmetic on {spark_type_name(lt)} and {spark_type_name(rt)}")
        return Func(op, canonical_args(op, (left, right)), dtype)

    def _negative(self, node: exp.Expression) -> Term:
        arg = self.term(node.this)
        if not _is_number(_dtype(arg)):
            raise Unsupported("negation of a non-number")
        return Func("negative", (arg,), _dtype(arg))

    def _date_part(self, node: exp.Expression) -> Term:
        name = _DATE_PARTS[type(node)]
        inner = node.this
        if isinstance(inner, exp.TsOrDsToDate):
            inner = inner.this
        arg = self.term(inner)
        if family(_dtype(arg)) not in ("date", "timestamp"):
            raise PredicateError(
                f"type mismatch in {_text(node)!r}: {name}() needs a DATE or TIMESTAMP, "
                f"got {spark_type_name(_dtype(arg))} (cast explicitly)"
            )
        return Func(name, (arg,), pa.int32())

    def _string_func(self, node: exp.Expression) -> Term:
        return _case_func(_STRING_FUNCS[type(node)], self._string_arg(node))

    def _length(self, node: exp.Expression) -> Term:
        return Func("length", (self._string_arg(node),), pa.int32())

    def _string_arg(self, node: exp.Expression) -> Term:
        arg = self.term(node.this)
        if family(_dtype(arg)) != "string":
            raise Unsupported(f"{node.key}() of a non-string value")
        return arg

    def _substring(self, node: exp.Expression) -> Term:
        arg = self._string_arg(node)
        rest = [self.term(node.args[k]) for k in ("start", "length") if node.args.get(k)]
        if any(family(_dtype(r)) != "int" for r in rest):
            raise Unsupported("substring() with non-integer positions")
        return Func("substring", (arg, *rest), pa.string())

    def _abs(self, node: exp.Expression) -> Term:
        arg = self.term(node.this)
        if not _is_number(_dtype(arg)):
            raise Unsupported("abs() of a non-number")
        return Func("abs", (arg,), _dtype(arg))

    def _coalesce(self, node: exp.Expression) -> Term:
        args = tuple(self.term(a) for a in (node.this, *node.expressions))
        typed = [_dtype(a) for a in args if not _is_null(a)]
        if not self.rules.ansi and _float_with_integer(*(a for a in args if not _is_null(a))):
            raise Unsupported("coalesce() of a FLOAT and an integer without ANSI")
        dtype = common_type([t for t in typed if t is not None]) if typed else None
        if dtype is None:
            raise Unsupported("coalesce() over incompatible types")
        return Func("coalesce", args, dtype)

    def _bracket(self, node: exp.Expression) -> Term:
        """``m['k']`` and ``element_at(m, 'k')`` on a MAP column: Func('[]', (m, key))."""
        base = self.term(node.this)
        dtype = _dtype(base)
        if dtype is None or not pa.types.is_map(dtype) or len(node.expressions) != 1:
            raise Unsupported("element access on a non-map value")
        key = self.term(node.expressions[0])
        if not isinstance(key, Literal) or key.value is None:
            raise Unsupported("map access with a non-literal key")
        # Spark casts the key to the map's key type (mi[1.5] reads key 1, mi['1'] key 1);
        # lakelayout binds it as `key = literal`: where the two differ (the comparison
        # can never hold, or Spark's comparison type is another) the access is left to
        # Spark (it was refused as a key that "cannot exist": an audit)
        try:
            bound = coerce.compare("=", Column("key", dtype.key_type), key, self.timezone)
        except (coerce.TypeMismatch, numbers.NotModelled) as err:
            raise Unsupported(f"map key {key.sql()}: {err}") from None
        if bound == BoolConst(False):
            raise Unsupported(f"map key {key.sql()} that Spark casts to the key type")
        if not _is_equality(bound):
            raise Unsupported("map key that is not one value of the key type")
        assert isinstance(bound, Compare)
        return Func("[]", (base, bound.value), dtype.item_type)

    def _date_trunc(self, node: exp.Expression) -> Term:
        arg = self.term(node.this)
        unit = node.args.get("unit")
        unit_name = unit.name.upper() if unit is not None else ""
        arg_type = _dtype(arg)
        fam = family(arg_type)
        if fam not in ("date", "timestamp") or not unit_name:
            raise Unsupported("date_trunc() of a non-temporal value")
        if fam == "date" and self.rules.ntz_timestamps:
            raise Unsupported("date_trunc() of a DATE where TIMESTAMP is TIMESTAMP_NTZ")
        if isinstance(arg_type, pa.TimestampType) and arg_type.tz is None:
            # Spark's date_trunc returns TIMESTAMP: a TIMESTAMP_NTZ is first read as an
            # instant in the session zone, not modelled (typed as the NTZ argument, a scan
            # lost the rows of a daylight-saving day; a review)
            raise Unsupported("date_trunc() of a TIMESTAMP_NTZ")
        dtype = _dtype(arg) if fam == "timestamp" else pa.timestamp("us", tz="UTC")
        return Func("date_trunc", (Literal(unit_name, pa.string()), arg), dtype)

    def _date_format(self, node: exp.Expression) -> Term:
        """``date_format(d, 'yyyy-MM')`` for DATE / TIMESTAMP and the patterns of :data:`DATE_FORMAT_RE`."""
        inner = node.this
        if isinstance(inner, exp.TimeStrToTime | exp.TsOrDsToDate):
            inner = inner.this
        arg = self.term(inner)
        if family(_dtype(arg)) not in ("date", "timestamp"):
            raise Unsupported("date_format() of a non-temporal value")
        pattern = _spark_time_format(node)
        if pattern is None or not DATE_FORMAT_RE.fullmatch(pattern):
            raise Unsupported(f"date_format() pattern {pattern!r} is not modelled")
        return Func("date_format", (arg, Literal(pattern, pa.string())), pa.string())

    def _cast(self, node: exp.Expression) -> Term:
        """``CAST(x AS STRING)`` of integers, decimals, dates, booleans and strings; integer widening."""
        assert isinstance(node, exp.Cast)
        arg = self.term(node.this)
        source = _dtype(arg)
        to = node.to
        target = _SPARK_CAST_TYPES.get(to.this)
        if target is not None and pa.types.is_string(target):
            if family(source) not in ("int", "decimal", "date", "bool", "string"):
                raise Unsupported(f"CAST of {spark_type_name(source)} to STRING is not modelled")
            return Func("cast", (arg,), pa.string())
        if target is not None and pa.types.is_date(target):
            return _date_of(arg, node)
        if target is not None and pa.types.is_integer(target) and family(source) == "int":
            assert source is not None
            if target.bit_width >= source.bit_width:
                return Func("cast", (arg,), target)
        raise Unsupported(f"CAST to {to.sql(dialect='spark')} is not modelled")

    def _to_date(self, node: exp.Expression) -> Term:
        """``to_date(x)`` (no format): ``CAST(x AS DATE)``."""
        if node.args.get("format") is not None:
            raise Unsupported("to_date() with a format is not modelled")
        return _date_of(self.term(node.this), node)

    def _udf(self, node: exp.Expression) -> Term:
        name = str(node.name).lower()
        if name not in self.functions:
            raise self._unsupported(node)
        args = tuple(self.term(a) for a in node.expressions)
        return Func(name, args, self.functions[name])


def _date_of(arg: Term, node: exp.Expression) -> Term:
    """The DATE of a DATE (itself) or of a TIMESTAMP (its day in the session zone;
    a TIMESTAMP_NTZ's own day): ``to_date``. Strings parse by rules not modelled."""
    fam = family(_dtype(arg))
    if fam == "date":
        return arg
    if fam == "timestamp":
        return Func("to_date", (arg,), pa.date32())
    raise Unsupported(f"{node.key}() of {spark_type_name(_dtype(arg))} to DATE is not modelled")


# ---------------------------------------------------------------- literals


def literal_of(node: exp.Expression, timezone: str) -> Literal | None:
    """The typed literal a sqlglot node denotes (Spark's literal typing), or None.

    >>> literal_of(sqlglot.parse_one("5.50"), "UTC")
    Literal(value=Decimal('5.50'), dtype=Decimal128Type(decimal128(3, 2)))
    """
    if isinstance(node, exp.Paren):
        return literal_of(node.this, timezone)
    if isinstance(node, exp.Literal):
        return Literal(node.this, pa.string()) if node.is_string else _number(node.this)
    if isinstance(node, exp.Boolean):
        return Literal(bool(node.this), pa.bool_())
    if isinstance(node, exp.Null):
        return Literal(None, pa.null())
    if isinstance(node, exp.Neg):
        inner = literal_of(node.this, timezone)
        if inner is None or inner.value is None:
            return inner
        if isinstance(inner.value, decimal.Decimal):
            # copy_negate is exact; unary minus rounds to the context's 28 digits
            return _number_literal(inner.value.copy_negate(), inner.dtype)
        if isinstance(inner.value, int | float) and not isinstance(inner.value, bool):
            return _number_literal(-inner.value, inner.dtype)
        return None
    if isinstance(node, exp.Cast):
        return _cast_literal(node, timezone)
    return None


def _number(text: str) -> Literal:
    if _NUMBER_RE.match(text):
        return _number_literal(int(text), None)
    if "e" in text.lower():
        return Literal(float(text), pa.float64())
    return _number_literal(decimal.Decimal(text), None)


def _number_literal(value: int | float | decimal.Decimal, hint: pa.DataType | None) -> Literal:
    """Spark's literal type: INT, then BIGINT, then DECIMAL(n, 0); decimals by their digits."""
    if isinstance(value, float):
        return Literal(value, hint or pa.float64())
    if isinstance(value, int):
        if hint is not None and pa.types.is_integer(hint):
            return Literal(value, hint)
        if _INT32[0] <= value <= _INT32[1]:
            return Literal(value, pa.int32())
        if _INT64[0] <= value <= _INT64[1]:
            return Literal(value, pa.int64())
        value = decimal.Decimal(value)
    digits = value.as_tuple()
    exponent = digits.exponent if isinstance(digits.exponent, int) else 0
    scale = max(0, -exponent)
    precision = max(len(digits.digits) + max(0, exponent), scale, 1)
    if precision > 38:
        # Spark's parser refuses such a literal (DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION):
        # plan() answered for text a scan and a DELETE refuse (an audit)
        raise PredicateError(
            f"the number {value} needs {precision} digits, and Spark's decimals hold 38 at "
            "most (Spark refuses it); write it as a DOUBLE (a D suffix or an exponent)"
        )
    return Literal(value, pa.decimal128(precision, scale))


def _cast_literal(node: exp.Cast, timezone: str) -> Literal | None:
    """``DATE '...'``, ``TIMESTAMP '...'``, ``1L``, ``1.5BD``, ``CAST('NaN' AS DOUBLE)``."""
    floating = node.to.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
    if floating and isinstance(node.this, exp.Literal) and not node.this.is_string:
        # ``1e41D`` / ``99…9D``: a number read as a double, past a decimal's 38 digits too
        inner: Literal | None = Literal(float(node.this.this), pa.float64())
    else:
        inner = literal_of(node.this, timezone)
    if inner is None:
        return None
    to = node.to
    if inner.value is None:
        return inner
    if to.this == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in to.expressions] or [10, 0]
        precision, scale = [*params, 0][:2]
        if precision < 1:
            # (past 38 digits or a scale past the precision: refused by
            # _check_decimal_types when the text is parsed; DECIMAL(0, 0) is a Spark
            # type that holds no literal: pyarrow has no such type)
            raise PredicateError(
                f"DECIMAL({precision}, {scale}) in {node.sql(dialect='spark')}: Spark's "
                "decimals hold 1 to 38 digits (Spark refuses it)"
            )
        target: pa.DataType = pa.decimal128(precision, scale)
    else:
        found = _SPARK_CAST_TYPES.get(to.this)
        if found is None:
            return None
        target = found
    try:
        value = _convert(inner, target, timezone)
    except NonDeterministic as err:
        raise Unsupported(str(err), nondeterministic=True) from None
    except (UncertainOffset, coerce.Unrepresentable) as err:
        raise Unsupported(str(err)) from None
    except (ValueError, decimal.InvalidOperation, ArithmeticError):
        raise CastFailed(f"cannot cast {inner.sql()} to {spark_type_name(target)}") from None
    return Literal(value, target)


def _convert(lit: Literal, target: pa.DataType, timezone: str) -> object:
    value = lit.value
    fam = family(target)
    if fam == "string":
        return value if isinstance(value, str) else lit.sql()
    if fam == "date":
        return coerce.parse_date(str(value))
    if fam == "timestamp":
        if isinstance(value, datetime.datetime | FarTimestamp):
            if target.tz:
                return coerce.to_instant(value, timezone)
            return coerce.to_local_naive(value, timezone)
        return coerce.parse_timestamp(str(value), timezone if target.tz else None)
    if fam == "bool":
        text = str(value).strip().lower()
        if text not in ("true", "false", "t", "f", "1", "0", "yes", "no", "y", "n"):
            raise ValueError(text)
        return text in ("true", "t", "1", "yes", "y")
    if fam == "float":
        number = float(str(value).strip())
        return float(pa.scalar(number, pa.float32()).as_py()) if target.bit_width == 32 else number
    number_text = str(value).strip()
    if fam == "int":
        exact = decimal.Decimal(number_text)
        if exact != exact.to_integral_value():
            raise ValueError(number_text)
        return int(exact)
    return decimal_cast(decimal.Decimal(number_text), target.precision, target.scale)


# ---------------------------------------------------------------- helpers


NULL = BoolConst(None)
"""The NULL predicate (``a = NULL``): normalization reads it as FALSE once NOT is pushed down."""


def _chain(node: exp.Expression) -> list[exp.Expression]:
    """Operands of a chain of one connective (``a AND b AND c``), left to right, without recursion.

    sqlglot nests a chain one level per operand; parentheses around a same-kind
    sub-chain are looked through (AND and OR are associative).
    """
    kind = type(node)
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        item = stack.pop()
        inner = item
        while isinstance(inner, exp.Paren) and type(inner.this) is kind:
            inner = inner.this
        if type(inner) is kind:
            stack.extend((inner.expression, inner.this))
        else:
            out.append(item)
    return out


#: sqlglot predicates that are NULL exactly when an operand is (after binding)
_NULL_PROPAGATING = (
    exp.EQ,
    exp.NEQ,
    exp.LT,
    exp.LTE,
    exp.GT,
    exp.GTE,
    exp.Like,
    exp.ILike,
    exp.StartsWith,
    exp.EndsWith,
    exp.In,
    exp.Between,
)


def _nullness(pred: Predicate) -> Predicate:
    """``pred IS NULL`` for a bound null-propagating test: its operands' NULL-ness.

    A comparison (or IN, LIKE, prefix/suffix test) with non-null literals is
    NULL exactly when its term is; a comparison of two terms when either is;
    a constant is never NULL unless it is NULL. Anything else is not modelled.
    """
    return _Nullness().visit(pred)


class _Nullness(PredicateVisitor[Predicate]):
    """:func:`_nullness`, one rule per node type (Unsupported where it is not modelled)."""

    def visit_bool_const(self, node: BoolConst) -> Predicate:
        return BoolConst(node.value is None)

    def _term(self, node: Compare | In | Like | StartsWith | EndsWith | BoolTerm) -> Predicate:
        return IsNull(node.term)

    visit_compare = visit_in = visit_like = visit_starts_with = _term
    visit_ends_with = visit_bool_term = _term

    def visit_term_compare(self, node: TermCompare) -> Predicate:
        return Or((IsNull(node.left), IsNull(node.right)))

    def visit_is_null(self, node: IsNull) -> Predicate:
        return BoolConst(False)

    def visit_and(self, node: And) -> Predicate:
        """BETWEEN (two comparisons of one term) and the folds of :func:`_exact`."""
        kids = node.children_
        if len(kids) == 2 and kids[1] == NULL and isinstance(kids[0], IsNull):
            return IsNull(kids[0].term)
        terms = {c.term.sql(): c.term for c in kids if isinstance(c, Compare)}
        if len(terms) == 1 and all(isinstance(c, Compare) for c in kids):
            return IsNull(next(iter(terms.values())))
        return self._unsupported(node)

    def visit_or(self, node: Or) -> Predicate:
        """The fold ``t IS NOT NULL OR NULL`` of :func:`_exact`: NULL exactly where ``t`` is.

        Also comparisons of one term joined by OR (``x != 1e20`` on a BIGINT
        binds as ``x < a OR x > b``): NULL exactly where the term is.
        """
        kids = node.children_
        if len(kids) == 2 and kids[1] == NULL and isinstance(kids[0], IsNull):
            return IsNull(kids[0].term)
        terms = {c.term.sql(): c.term for c in kids if isinstance(c, Compare)}
        if len(terms) == 1 and all(isinstance(c, Compare) for c in kids):
            return IsNull(next(iter(terms.values())))
        return self._unsupported(node)

    def _unsupported(self, node: Predicate) -> Predicate:
        raise Unsupported("IS NULL of a predicate that is not a plain comparison")

    visit_not = visit_opaque = _unsupported


def _exact(term: Expr, folded: Predicate) -> Predicate:
    """A WHERE-semantics fold of ``term op literal`` spelled exactly in three-valued logic.

    :func:`coerce.compare` decides some comparisons from the type alone: FALSE
    ("no value satisfies it") or ``term IS NOT NULL`` ("every value does").
    The comparison itself is NULL where ``term`` is NULL, so FALSE is really
    ``term IS NULL AND NULL`` and IS NOT NULL is ``term IS NOT NULL OR NULL``;
    both read the same in a WHERE clause and stay right under a NOT.

    Spark's own rewrite of an integral term against a decimal literal beyond
    the BIGINT range (``int_col > -1E30``, :func:`coerce.literal_fold`) is not
    passed here: Spark replaces it by a bare TRUE or FALSE, which holds for
    NULL rows too and flips for them under a NOT. A TRUE fold is left alone.
    """
    if isinstance(term, Literal):
        return folded
    if folded == BoolConst(False):
        return And((IsNull(term), NULL))
    if isinstance(folded, IsNull) and folded.negated and folded.term == term:
        return Or((folded, NULL))
    return folded


def _is_equality(pred: Predicate) -> bool:
    """``term = value``: what an IN list keeps as one of its values.

    A value's fold may also be a range (``bigint_col IN (-9.223372036854775808E18)``
    holds for every value that rounds to that double), which is not a list value.
    """
    return isinstance(pred, Compare) and pred.op == "="


def _case_func(name: str, arg: Term) -> Term:
    """``upper(arg)`` / ``lower(arg)`` as Spark's optimizer leaves it: of an ``upper`` or
    ``lower`` of a column or expression only the outer function counts
    (``SimplifyCaseConversionExpressions``: ``lower(upper(s))`` is ``lower(s)``, which
    differs for 'ß', whose upper case is 'SS'); one of a literal is computed as written
    (Spark folds constants first)."""
    if isinstance(arg, Func) and arg.name in ("upper", "lower"):
        inner = arg.args[0]
        if not isinstance(inner, Literal):
            return _case_func(name, inner)  # type: ignore[arg-type]
    return Func(name, (arg,), pa.string())


def _like_node(term: Expr, kind: str, text: str, neg: bool) -> Predicate:
    """The node a LIKE shape reduces to (exact in three-valued logic), NOT LIKE wrapped in a NOT."""
    node: Predicate
    if kind == "equals":
        node = Compare("=", term, Literal(text, pa.string()))
    elif kind == "prefix":
        node = StartsWith(term, text)
    elif kind == "suffix":
        node = EndsWith(term, text)
    elif kind == "any":
        node = Or((IsNull(term, negated=True), NULL))
    else:
        node = Like(term, text)
    return Not(node) if neg else node


def _fold_literal_compare(pred: Predicate) -> Predicate:
    """Decide a comparison of two literals (``1 = 1``, ``1 = 1e0``); a NULL side gives NULL."""
    if isinstance(pred, And | Or):
        kids = [_fold_literal_compare(k) for k in pred.children_]
        if not all(isinstance(k, BoolConst) for k in kids):
            return pred
        values = [k.value for k in kids if isinstance(k, BoolConst)]
        return BoolConst(all(values) if isinstance(pred, And) else any(values))
    if isinstance(pred, IsNull) and isinstance(pred.term, Literal):
        return BoolConst((pred.term.value is None) != pred.negated)
    if isinstance(pred, BoolTerm) and isinstance(pred.term, Literal):
        return BoolConst(bool(pred.term.value) != pred.negated)
    if isinstance(pred, Compare) and isinstance(pred.term, Literal):
        return BoolConst(_python_compare(pred.op, pred.term.value, pred.value.value))
    return pred


def _python_compare(op: str, a: object, b: object) -> bool:
    """Spark comparison of two non-null literal values (NaN largest and equal to itself)."""
    ka, kb = _sort_key_value(a), _sort_key_value(b)
    try:
        results = {
            "=": ka == kb,
            "!=": ka != kb,
            "<": ka < kb,  # type: ignore[operator]
            "<=": ka <= kb,  # type: ignore[operator]
            ">": ka > kb,  # type: ignore[operator]
            ">=": ka >= kb,  # type: ignore[operator]
        }
    except TypeError:
        raise Unsupported("comparison of literals of different types") from None
    return bool(results[op])


def _sort_key_value(value: object) -> object:
    if isinstance(value, float) and value != value:
        return (1, 0.0)
    if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        return (0, value)
    return value


def _sort_key(lit: Literal) -> tuple[int, object]:
    value = lit.value
    if isinstance(value, float) and value != value:
        return (1, 0.0)
    return (0, value)


#: date_format() patterns lakelayout evaluates exactly: fixed-width fields, plain separators
DATE_FORMAT_RE = re.compile(r"(?:yyyy|MM|dd|HH|mm|ss|[-/ :._T])+")


def _spark_time_format(node: exp.Expression) -> str | None:
    """The Spark pattern of a sqlglot time-format node (sqlglot holds it as strftime text)."""
    text = Spark().generator().format_time(node)
    if text is None:
        return None
    parsed = sqlglot.parse_one(text, read="spark")
    return parsed.this if isinstance(parsed, exp.Literal) and parsed.is_string else None


def _column_parts(node: exp.Expression) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]`` (sqlglot spreads it over Column parts and Dots)."""
    if isinstance(node, exp.Dot):
        base = _column_parts(node.this)
        field = node.expression
        if base is None or not isinstance(field, exp.Identifier):
            return None
        return [*base, str(field.this)]
    if isinstance(node, exp.Column):
        parts = [node.args.get(k) for k in ("catalog", "db", "table")]
        names = [str(p.this) for p in parts if p is not None and str(p.this)]
        if not isinstance(node.this, exp.Identifier):
            return None
        return [*names, str(node.this.this)]
    return None


def _dtype(term: Expr) -> pa.DataType | None:
    return getattr(term, "dtype", None)


def _is_number(dtype: pa.DataType | None) -> bool:
    return family(dtype) in ("int", "decimal", "float")


def _is_null(term: Expr) -> bool:
    return isinstance(term, Literal) and term.value is None


def _call_args(node: exp.Expression) -> list[exp.Expression]:
    """The arguments of a function call node (sqlglot keeps them in ``this`` / ``expressions``)."""
    args = [a for a in (node.args.get("this"),) if isinstance(a, exp.Expression)]
    return [*args, *node.expressions] if not isinstance(node, exp.Anonymous) else node.expressions


def _func_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return str(node.sql_name()).lower()
    return None


def _inside_query(node: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Query | exp.Subquery | exp.Lambda):
            return True
        parent = parent.parent
    return False


def _plain(name: str) -> bool:
    return name.replace("_", "a").isalnum() and not name[:1].isdigit() and name.isascii()


def _text(node: exp.Expression) -> str:
    return str(node.sql(dialect="spark"))
