"""lakelayout's normalized predicate tree.

Predicates arrive as Spark SQL text; :mod:`lakelayout.expr.parse` turns them
into these immutable nodes, bound to a table schema (columns resolved to the
schema's spelling, literals coerced to the column type). Pruning, indexes and
layouts all work on this tree; Spark itself always evaluates the original text.

Two kinds of node:

* *terms* produce values: :class:`Column`, :class:`Literal`, :class:`Func`;
* *predicates* produce booleans under SQL three-valued logic: comparisons,
  IN, IS NULL, LIKE / prefix / suffix, AND / OR / NOT, constants, and
  :class:`Opaque` for anything lakelayout does not understand. An opaque node
  can never make a file be skipped.

Comparisons are normalized to ``term op literal`` (``5 < a`` becomes ``a > 5``).
Every node renders back to canonical Spark SQL with :meth:`Expr.sql`; two
predicates that mean the same thing after normalization render the same text,
which is what indexes and layouts use as a feature key.
"""

from __future__ import annotations

import abc
import datetime as _dt
import decimal as _decimal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

COMPARE_OPS = ("=", "!=", "<", "<=", ">", ">=")
NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
FLIPPED_OP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Expr(abc.ABC):
    """Base of every node."""

    @abc.abstractmethod
    def sql(self) -> str:
        """Canonical Spark SQL text of this node."""

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, pre-order (parents before children).

        Iterative, so trees deeper than Python's recursion limit can be walked.

        >>> [type(n).__name__ for n in And((Compare("<", Column("a"), Literal(1)),)).walk()]
        ['And', 'Compare', 'Column', 'Literal']
        """
        stack: list[Expr] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))

    def columns(self) -> frozenset[str]:
        """Names of the table columns this node reads."""
        out: set[str] = set()
        for node in self.walk():
            if isinstance(node, Column):
                out.add(node.name)
            elif isinstance(node, Opaque):
                out |= node.reads
        return frozenset(out)

    def __str__(self) -> str:
        return self.sql()


# ---------------------------------------------------------------- terms


class Term(Expr):
    """An expression that produces a value (not a boolean predicate)."""

    dtype: pa.DataType | None


@dataclass(frozen=True)
class Column(Term):
    """A table column, by its name in the table schema."""

    name: str
    dtype: pa.DataType | None = field(default=None, compare=False)

    def sql(self) -> str:
        return quote_identifier(self.name)


@dataclass(frozen=True)
class Literal(Term):
    """A constant, already coerced to ``dtype`` when bound."""

    value: object
    dtype: pa.DataType | None = field(default=None, compare=False)

    def sql(self) -> str:
        return literal_sql(self.value, self.dtype)


@dataclass(frozen=True)
class Func(Term):
    """A deterministic function or operator over terms.

    ``name`` is the lower-case Spark function name (``month``, ``lower``,
    ``substring``) or an operator symbol (``+``, ``-``, ``*``, ``/``, ``%``,
    ``[]`` for map/array element access).
    """

    name: str
    args: tuple[Expr, ...]
    dtype: pa.DataType | None = field(default=None, compare=False)

    OPERATORS: ClassVar[frozenset[str]] = frozenset({"+", "-", "*", "/", "%"})

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def sql(self) -> str:
        if self.name in self.OPERATORS and len(self.args) == 2:
            return f"({self.args[0].sql()} {self.name} {self.args[1].sql()})"
        if self.name == "[]" and len(self.args) == 2:
            return f"{self.args[0].sql()}[{self.args[1].sql()}]"
        return f"{self.name}({', '.join(a.sql() for a in self.args)})"


# ---------------------------------------------------------------- predicates


class Predicate(Expr):
    """An expression that produces a boolean (TRUE / FALSE / NULL)."""

    def negate(self) -> Predicate:
        """The predicate true exactly where this one is FALSE (3-valued logic).

        NULL stays NULL under negation, so ``NOT p`` and ``p.negate()`` select
        the same rows in a WHERE clause.
        """
        return Not(self)


@dataclass(frozen=True)
class Compare(Predicate):
    """``term op value`` with op one of ``= != < <= > >=``."""

    op: str
    term: Expr
    value: Literal

    def children(self) -> tuple[Expr, ...]:
        return (self.term, self.value)

    def sql(self) -> str:
        return f"{self.term.sql()} {self.op} {self.value.sql()}"

    def negate(self) -> Predicate:
        return Compare(NEGATED_OP[self.op], self.term, self.value)


@dataclass(frozen=True)
class TermCompare(Predicate):
    """``left op right`` between two non-literal terms (``l_commitdate < l_receiptdate``).

    Canonical form: ``left.sql() <= right.sql()`` (``b > a`` is stored as ``a < b``),
    so the same comparison written either way has one feature key.
    """

    op: str
    left: Expr
    right: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def sql(self) -> str:
        return f"{self.left.sql()} {self.op} {self.right.sql()}"

    def negate(self) -> Predicate:
        return TermCompare(NEGATED_OP[self.op], self.left, self.right)


@dataclass(frozen=True)
class In(Predicate):
    """``term [NOT] IN (values)``; values are sorted and de-duplicated when bound."""

    term: Expr
    values: tuple[Literal, ...]
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term, *self.values)

    def sql(self) -> str:
        kw = "NOT IN" if self.negated else "IN"
        return f"{self.term.sql()} {kw} ({', '.join(v.sql() for v in self.values)})"

    def negate(self) -> Predicate:
        return In(self.term, self.values, not self.negated)


@dataclass(frozen=True)
class IsNull(Predicate):
    """``term IS [NOT] NULL`` (never NULL itself)."""

    term: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term,)

    def sql(self) -> str:
        return f"{self.term.sql()} IS {'NOT ' if self.negated else ''}NULL"

    def negate(self) -> Predicate:
        return IsNull(self.term, not self.negated)


@dataclass(frozen=True)
class Like(Predicate):
    """``term [NOT] LIKE pattern`` with Spark's ``%`` / ``_`` / ``\\`` escape."""

    term: Expr
    pattern: str
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term,)

    def sql(self) -> str:
        kw = "NOT LIKE" if self.negated else "LIKE"
        return f"{self.term.sql()} {kw} {literal_sql(self.pattern, pa.string())}"

    def negate(self) -> Predicate:
        return Like(self.term, self.pattern, not self.negated)


@dataclass(frozen=True)
class StartsWith(Predicate):
    """``startswith(term, prefix)``; also what ``LIKE 'abc%'`` normalizes to."""

    term: Expr
    prefix: str
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term,)

    def sql(self) -> str:
        text = f"startswith({self.term.sql()}, {literal_sql(self.prefix, pa.string())})"
        return f"NOT {text}" if self.negated else text

    def negate(self) -> Predicate:
        return StartsWith(self.term, self.prefix, not self.negated)


@dataclass(frozen=True)
class EndsWith(Predicate):
    """``endswith(term, suffix)``; also what ``LIKE '%abc'`` normalizes to."""

    term: Expr
    suffix: str
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term,)

    def sql(self) -> str:
        text = f"endswith({self.term.sql()}, {literal_sql(self.suffix, pa.string())})"
        return f"NOT {text}" if self.negated else text

    def negate(self) -> Predicate:
        return EndsWith(self.term, self.suffix, not self.negated)


@dataclass(frozen=True)
class And(Predicate):
    children_: tuple[Predicate, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.children_

    def sql(self) -> str:
        return "(" + " AND ".join(c.sql() for c in self.children_) + ")"

    def negate(self) -> Predicate:
        return Or(tuple(c.negate() for c in self.children_))


@dataclass(frozen=True)
class Or(Predicate):
    children_: tuple[Predicate, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.children_

    def sql(self) -> str:
        return "(" + " OR ".join(c.sql() for c in self.children_) + ")"

    def negate(self) -> Predicate:
        return And(tuple(c.negate() for c in self.children_))


@dataclass(frozen=True)
class Not(Predicate):
    """A NOT that normalization could not push further (over an opaque node)."""

    child: Predicate

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)

    def sql(self) -> str:
        return f"NOT ({self.child.sql()})"

    def negate(self) -> Predicate:
        return self.child


@dataclass(frozen=True)
class BoolConst(Predicate):
    """TRUE or FALSE, e.g. from folding a literal outside the column's range."""

    value: bool

    def sql(self) -> str:
        return "TRUE" if self.value else "FALSE"

    def negate(self) -> Predicate:
        return BoolConst(not self.value)


@dataclass(frozen=True)
class BoolTerm(Predicate):
    """A boolean-valued term used as a predicate: a BOOLEAN column, a UDF call.

    ``f(x)`` as a predicate means ``f(x) = TRUE``; its negation is
    ``f(x) = FALSE`` (NULL selects neither), kept here as ``negated``.
    """

    term: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.term,)

    def sql(self) -> str:
        return f"{self.term.sql()} = {'false' if self.negated else 'true'}"

    def negate(self) -> Predicate:
        return BoolTerm(self.term, not self.negated)


@dataclass(frozen=True)
class Opaque(Predicate):
    """A predicate lakelayout does not understand: it never causes a skip."""

    text: str
    reads: frozenset[str] = frozenset()

    def sql(self) -> str:
        return f"({self.text})"


# ---------------------------------------------------------------- rendering


def quote_identifier(name: str) -> str:
    """Backtick-quote a column name when Spark would need it.

    >>> quote_identifier("l_shipdate"), quote_identifier("my col")
    ('l_shipdate', '`my col`')
    """
    if name.replace("_", "a").isalnum() and not name[:1].isdigit() and name.isascii():
        return name
    return "`" + name.replace("`", "``") + "`"


def literal_sql(value: object, dtype: pa.DataType | None = None) -> str:
    """Spark SQL text of a literal of the given Arrow type.

    >>> literal_sql("it's"), literal_sql(_dt.date(1995, 3, 1)), literal_sql(None)
    ("'it\\\\'s'", "DATE '1995-03-01'", 'NULL')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, _dt.datetime):
        text = value.isoformat(sep=" ")
        return f"TIMESTAMP '{text}'" if value.tzinfo is not None else f"TIMESTAMP_NTZ '{text}'"
    if isinstance(value, _dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, _decimal.Decimal):
        if dtype is not None and pa.types.is_decimal(dtype):
            return f"CAST('{value}' AS DECIMAL({dtype.precision}, {dtype.scale}))"
        return f"{value}BD"
    if isinstance(value, float):
        if value != value:
            return "CAST('NaN' AS DOUBLE)"
        if value in (float("inf"), float("-inf")):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
        return repr(value) + ("D" if dtype is None or pa.types.is_float64(dtype) else "F")
    if isinstance(value, int):
        if dtype is not None and pa.types.is_int64(dtype):
            return f"{value}L"
        return str(value)
    return "'" + str(value).replace("'", "\\'") + "'"
