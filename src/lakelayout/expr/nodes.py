"""lakelayout's normalized predicate tree.

Predicates arrive as Spark SQL text; :mod:`lakelayout.expr.parse` turns them
into these immutable nodes, bound to a table schema (columns resolved to the
schema's spelling, literals coerced to the column type). Pruning, indexes and
layouts all work on this tree; Spark itself always evaluates the original text.

Two kinds of node:

* *terms* produce values: :class:`Column`, :class:`Literal`, :class:`Func`;
* *predicates* produce booleans under SQL three-valued logic: comparisons,
  IN, IS NULL, LIKE / prefix / suffix, AND / OR / NOT, constants (TRUE, FALSE
  and, before normalization, NULL), and :class:`Opaque` for anything
  lakelayout does not understand. An opaque node can never make a file be
  skipped.

Trees are walked with :meth:`Expr.walk` (pre-order, iterative), rewritten with
:meth:`Expr.transform` (bottom-up, iterative, on the model of sqlglot's
``Expression.transform``) and interpreted by subclasses of
:class:`lakelayout.expr.visitor.Visitor`, which has one method per node type.

Comparisons are normalized to ``term op literal`` (``5 < a`` becomes ``a > 5``).
Every node renders back to canonical Spark SQL with :meth:`Expr.sql`; two
predicates that mean the same thing after normalization render the same text,
which is what indexes and layouts use as a feature key.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as _dt
import decimal as _decimal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from lakelayout.expr.temporal import FarTimestamp
from lakelayout.expr.types import spark_type_name

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        """This node rebuilt over new children (same order and kinds as :meth:`children`)."""
        if children:
            raise ValueError(f"{type(self).__name__} has no children, got {len(children)}")
        return self

    def transform(self, fn: Callable[[Expr], Expr]) -> Any:
        """Rewrite bottom-up: ``fn`` sees every node after its children were rewritten.

        A node whose children came back unchanged (``is``) is not rebuilt, so
        an identity ``fn`` returns the very same tree. Iterative: trees deeper
        than Python's recursion limit can be rewritten.

        >>> tree = And((Compare("<", Column("a"), Literal(1)), BoolConst(True)))
        >>> tree.transform(lambda n: Column("b") if n == Column("a") else n).sql()
        '(b < 1 AND TRUE)'
        """
        done: list[Expr] = []
        stack: list[tuple[Expr, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            kids = node.children()
            if not kids:
                done.append(fn(node))
                continue
            if not expanded:
                stack.append((node, True))
                stack.extend((kid, False) for kid in reversed(kids))
                continue
            new = tuple(done[len(done) - len(kids) :])
            del done[len(done) - len(kids) :]
            same = all(a is b for a, b in zip(new, kids, strict=True))
            done.append(fn(node if same else node.with_children(new)))
        return done[0]

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
        """Names of the (top-level) table columns this node reads."""
        out: set[str] = set()
        for node in self.walk():
            if isinstance(node, Column):
                out.add(node.name)
            elif isinstance(node, Opaque):
                out |= node.reads
        return frozenset(out)

    def has_opaque(self) -> bool:
        """Whether some part of this node is :class:`Opaque` (not modelled by lakelayout)."""
        return any(isinstance(node, Opaque) for node in self.walk())

    def __str__(self) -> str:
        return self.sql()


# ---------------------------------------------------------------- terms


class Term(Expr):
    """An expression that produces a value (not a boolean predicate)."""

    dtype: pa.DataType | None


@dataclass(frozen=True)
class Column(Term):
    """A table column by its name in the table schema, or a field inside a struct column.

    ``path`` names the struct fields below the column (``a.b.c`` is
    ``Column("a", path=("b", "c"))``); ``dtype`` is the type of what is read.
    A top-level column whose name contains a dot (```b.c```) is
    ``Column("b.c")``: the two never mix.
    """

    name: str
    dtype: pa.DataType | None = field(default=None, compare=False)
    path: tuple[str, ...] = ()

    def sql(self) -> str:
        return ".".join(quote_identifier(part) for part in (self.name, *self.path))

    @property
    def parts(self) -> tuple[str, ...]:
        """The column name followed by the struct fields below it."""
        return (self.name, *self.path)


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
    ``[]`` for map/array element access); ``cast`` converts its one argument
    to ``dtype`` (``CAST(e AS STRING)``).
    """

    name: str
    args: tuple[Expr, ...]
    dtype: pa.DataType | None = field(default=None, compare=False)

    OPERATORS: ClassVar[frozenset[str]] = frozenset({"+", "-", "*", "/", "%"})

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Func(self.name, children, self.dtype)

    def sql(self) -> str:
        if self.name in self.OPERATORS and len(self.args) == 2:
            return f"({self.args[0].sql()} {self.name} {self.args[1].sql()})"
        if self.name == "[]" and len(self.args) == 2:
            return f"{self.args[0].sql()}[{self.args[1].sql()}]"
        if self.name == "cast" and len(self.args) == 1:
            return f"CAST({self.args[0].sql()} AS {spark_type_name(self.dtype)})"
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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        term, value = children
        if not isinstance(value, Literal):
            raise ValueError(f"a comparison needs a literal value, got {value.sql()}")
        return Compare(self.op, term, value)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        left, right = children
        return TermCompare(self.op, left, right)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        values = children[1:]
        if not all(isinstance(v, Literal) for v in values):
            raise ValueError("IN needs literal values")
        return In(children[0], tuple(v for v in values if isinstance(v, Literal)), self.negated)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (term,) = children
        return dataclasses.replace(self, term=term)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (term,) = children
        return dataclasses.replace(self, term=term)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (term,) = children
        return dataclasses.replace(self, term=term)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (term,) = children
        return dataclasses.replace(self, term=term)

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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return And(_predicates(children))

    def sql(self) -> str:
        return "(" + " AND ".join(c.sql() for c in self.children_) + ")"

    def negate(self) -> Predicate:
        return Or(tuple(c.negate() for c in self.children_))


@dataclass(frozen=True)
class Or(Predicate):
    children_: tuple[Predicate, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.children_

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Or(_predicates(children))

    def sql(self) -> str:
        return "(" + " OR ".join(c.sql() for c in self.children_) + ")"

    def negate(self) -> Predicate:
        return And(tuple(c.negate() for c in self.children_))


@dataclass(frozen=True)
class Not(Predicate):
    """NOT of a predicate; after normalization only over an opaque node (it cannot be pushed)."""

    child: Predicate

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Not(_predicates(children)[0])

    def sql(self) -> str:
        return f"NOT ({self.child.sql()})"

    def negate(self) -> Predicate:
        return self.child


@dataclass(frozen=True)
class BoolConst(Predicate):
    """TRUE, FALSE, or (``value=None``) the NULL predicate.

    The binder keeps trees exact under three-valued logic, so ``a = NULL`` and
    ``tinyint_col = 1000`` become ``NULL`` and ``tinyint_col IS NULL AND NULL``;
    once NOT is pushed to the leaves, normalization reads NULL as FALSE (WHERE
    keeps no row where a predicate is NULL): normalized trees hold no NULL.
    """

    value: bool | None

    def sql(self) -> str:
        if self.value is None:
            return "NULL"
        return "TRUE" if self.value else "FALSE"

    def negate(self) -> Predicate:
        return self if self.value is None else BoolConst(not self.value)


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

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (term,) = children
        return dataclasses.replace(self, term=term)

    def sql(self) -> str:
        return f"{self.term.sql()} = {'false' if self.negated else 'true'}"

    def negate(self) -> Predicate:
        return BoolTerm(self.term, not self.negated)


def _predicates(children: tuple[Expr, ...]) -> tuple[Predicate, ...]:
    if not all(isinstance(c, Predicate) for c in children):
        raise ValueError("AND / OR / NOT take predicates")
    return tuple(c for c in children if isinstance(c, Predicate))


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
    if isinstance(value, FarTimestamp):
        return f"TIMESTAMP{'' if value.utc else '_NTZ'} '{value.isoformat()}'"
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
