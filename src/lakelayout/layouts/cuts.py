"""Cuts, regions and the safe "may this region hold a matching row?" test.

A *cut* is one boolean atom taken from the workload (Qd-tree §3, Pando §6.1).
It splits rows in two: the rows where the atom is TRUE, and the rest, where it
is FALSE *or NULL* (a WHERE clause keeps neither of the latter). Three kinds:

* ``range``: ``term < v`` or ``term <= v`` (``>`` / ``>=`` atoms become their
  complement ``<=`` / ``<``: the same split of non-null values);
* ``in``: ``term IN (v1, ..)`` (``=`` is IN of one value; ``!=`` / NOT IN become
  the positive form), meant for categoricals;
* ``advanced``: any other atom lakelayout can evaluate on rows: LIKE, prefix or
  suffix tests, IS NULL, a comparison of two terms (``a < b``), a boolean UDF
  (``BoolTerm``). A comparison over a complex term is a range or IN cut on
  that term: ``month(ts) = 12`` is an ``in`` cut on ``month(ts)``.

A tree node's *region* is the conjunction of the cut outcomes on its path
(``TRUE`` or ``NOT TRUE``). :class:`Region` keeps it symbolically:

* per term (keyed by ``term.sql()``) a :class:`TermBox`: the set of values the
  term may take in the region, as an interval with open/closed ends, an
  optional allowed value set, an excluded value set, and two flags: may the
  term be NULL, may it be non-null;
* the SQL text of atoms known TRUE and atoms known NOT TRUE.

:func:`may_intersect` answers whether some row of the region - any possible
row, not only sample rows - can satisfy a query. It must never answer False
wrongly, so it only says False when the algebra proves it:

* an atom on a boxed term is unsatisfiable if no value of the box makes it
  TRUE (NULL makes no comparison TRUE);
* an atom whose exact SQL is known NOT TRUE, or whose negation is known TRUE,
  is unsatisfiable;
* ``AND`` is unsatisfiable if any conjunct is, ``OR`` if every disjunct is,
  ``FALSE`` always is; anything else may match.

Values are compared in Spark's order: NaN is greater than every number, so an
interval with no upper bound may hold NaN and one with an upper bound cannot.
Values of different kinds (a date against a timestamp, a string against a
number) are never compared: the answer is then "may match".
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Compare,
    EndsWith,
    In,
    IsNull,
    Like,
    Not,
    Opaque,
    Or,
    Predicate,
    StartsWith,
    TermCompare,
)
from lakelayout.expr.visitor import PredicateVisitor

MAX_IN_VALUES = 64
"""IN lists longer than this are not used as cuts (they rarely split well)."""

RANGE_OPS = ("<", "<=", ">", ">=")
_COMPLEMENT_OP = {">": "<=", ">=": "<"}


# ---------------------------------------------------------------- cuts


@dataclass(frozen=True)
class Cut:
    """One candidate split: rows where ``atom`` is TRUE vs the rest."""

    atom: Predicate
    kind: str

    def sql(self) -> str:
        return self.atom.sql()


def candidate_cuts(predicates: Iterable[Predicate]) -> list[Cut]:
    """Distinct cuts from the atoms of the workload's predicates, in first-seen order.

    Atoms are found under AND / OR (a NOT that normalization left in place
    hides an opaque node and gives nothing). Each atom is put in its cut form
    (:func:`cut_of`); atoms that cannot be evaluated on rows (opaque text,
    constants, NULL or NaN literals, long IN lists) give no cut.

    >>> from lakelayout.expr.nodes import Column, Literal
    >>> a = Column("a", pa.int64())
    >>> p = And((Compare(">", a, Literal(5)), Compare("<=", a, Literal(5))))
    >>> [c.sql() for c in candidate_cuts([p])]
    ['a <= 5']
    """
    seen: dict[str, Cut] = {}
    for pred in predicates:
        for atom in atoms_of(pred):
            cut = cut_of(atom)
            if cut is not None and cut.sql() not in seen:
                seen[cut.sql()] = cut
    return list(seen.values())


def atoms_of(pred: Predicate) -> list[Predicate]:
    """The leaves of ``pred`` under AND / OR, left to right (a NOT is one leaf)."""
    out: list[Predicate] = []
    stack: list[Predicate] = [pred]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack.extend(reversed(node.children_))
        else:
            out.append(node)
    return out


def cut_of(atom: Predicate) -> Cut | None:
    """The cut an atom gives, in positive normal form, or None if it gives none.

    ``a > 5`` -> ``a <= 5``; ``a != 3`` -> ``a IN (3)``; ``a = 3`` -> ``a IN (3)``;
    ``NOT startswith(s, 'x')`` -> ``startswith(s, 'x')``; ``a IS NOT NULL`` ->
    ``a IS NULL``. The positive form splits non-null values exactly as the atom
    does; only the side NULLs fall on may differ, which the region records.
    """
    return _CutOf().visit(atom)


class _CutOf(PredicateVisitor["Cut | None"]):
    """:func:`cut_of`, one rule per node type."""

    def visit_compare(self, node: Compare) -> Cut | None:
        """A range cut (``<`` / ``<=`` form) or an IN cut of one value."""
        if not _usable_literal(node.value.value):
            return None
        if node.op in RANGE_OPS:
            op = _COMPLEMENT_OP.get(node.op, node.op)
            return Cut(Compare(op, node.term, node.value), "range")
        return Cut(In(node.term, (node.value,)), "in")

    def visit_in(self, node: In) -> Cut | None:
        """IN / NOT IN of a short list of usable values: the IN cut."""
        values = node.values
        if not values or len(values) > MAX_IN_VALUES:
            return None
        if not all(_usable_literal(v.value) for v in values):
            return None
        return Cut(In(node.term, values), "in")

    def visit_term_compare(self, node: TermCompare) -> Cut | None:
        op = {**_COMPLEMENT_OP, "!=": "="}.get(node.op, node.op)
        return Cut(TermCompare(op, node.left, node.right), "advanced")

    def _positive(self, node: StartsWith | EndsWith | Like | BoolTerm | IsNull) -> Cut | None:
        """An advanced cut on the positive form of the test."""
        return Cut(node.negate() if node.negated else node, "advanced")

    visit_starts_with = visit_ends_with = visit_like = visit_bool_term = visit_is_null = _positive

    def _none(self, node: Predicate) -> Cut | None:
        """Junctions, constants and opaque text give no cut."""
        return None

    visit_and = visit_or = visit_not = visit_bool_const = visit_opaque = _none


def _usable_literal(value: object) -> bool:
    """A literal a cut can be built on: non-null, hashable, not NaN."""
    if value is None or isinstance(value, (list, dict, tuple)):
        return False
    return not (isinstance(value, float) and math.isnan(value))


# ---------------------------------------------------------------- value comparison


def _kind(value: object) -> str | None:
    """Comparison family of a Python literal; values of different families never compare."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, _decimal.Decimal)):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, _dt.datetime):
        return "ts_tz" if value.tzinfo is not None else "ts"
    if isinstance(value, _dt.date):
        return "date"
    if isinstance(value, _dt.time):
        return "time"
    if isinstance(value, _dt.timedelta):
        return "interval"
    return None


def comparable(a: object, b: object) -> bool:
    """True when ``a`` and ``b`` are non-null, non-NaN values of one comparison family."""
    ka = _kind(a)
    if ka is None or ka != _kind(b):
        return False
    return not any(isinstance(v, float) and math.isnan(v) for v in (a, b))


def _compare(v: Any, op: str, c: Any) -> bool:
    if op == "<":
        return bool(v < c)
    if op == "<=":
        return bool(v <= c)
    if op == ">":
        return bool(v > c)
    if op == ">=":
        return bool(v >= c)
    if op == "=":
        return bool(v == c)
    return bool(v != c)


# ---------------------------------------------------------------- term boxes


@dataclass(frozen=True)
class TermBox:
    """The values one term may take in a region.

    Non-null values lie in the interval ``lo .. hi`` (None = unbounded; the
    ``*_incl`` flags say whether the end is closed), belong to ``allowed``
    when it is set, and avoid ``excluded``. ``may_null`` says the term may be
    NULL, ``may_value`` that it may be non-null at all. The box is an
    over-approximation: every possible value is in it, not every value in it
    need be possible.
    """

    lo: Any = None
    lo_incl: bool = True
    hi: Any = None
    hi_incl: bool = True
    allowed: frozenset[Any] | None = None
    excluded: frozenset[Any] = frozenset()
    may_null: bool = True
    may_value: bool = True

    # -------- narrowing by a cut outcome

    def when_true(self, atom: Predicate) -> TermBox:
        """The box narrowed by "``atom`` is TRUE" (so the term is non-null)."""
        return _WhenTrue(self).visit(atom)

    def when_not_true(self, atom: Predicate) -> TermBox:
        """The box narrowed by "``atom`` is FALSE or NULL".

        For comparisons and IN (non-null literals) the atom is NULL exactly
        where the term is, so this is "negation TRUE, or term NULL": the
        negation narrows the non-null values and ``may_null`` is unchanged.
        IS NULL is never NULL itself, so its negation is exact.
        """
        return _WhenNotTrue(self).visit(atom)

    def _with_compare(self, op: str, c: Any) -> TermBox:
        if op == "=":
            allowed = frozenset([c]) if self.allowed is None else self.allowed & {c}
            return replace(self, allowed=allowed)
        if op == "!=":
            return replace(self, excluded=self.excluded | {c})
        if op in ("<", "<="):
            incl = op == "<="
            if self.hi is None or not comparable(self.hi, c) or c < self.hi:
                return replace(self, hi=c, hi_incl=incl)
            if c == self.hi:
                return replace(self, hi_incl=self.hi_incl and incl)
            return self
        incl = op == ">="
        if self.lo is None or not comparable(self.lo, c) or c > self.lo:
            return replace(self, lo=c, lo_incl=incl)
        if c == self.lo:
            return replace(self, lo_incl=self.lo_incl and incl)
        return self

    # -------- satisfiability

    def interval_empty(self) -> bool:
        """True when the interval provably holds no value."""
        if self.lo is None or self.hi is None or not comparable(self.lo, self.hi):
            return False
        if self.lo > self.hi:
            return True
        return bool(self.lo == self.hi and not (self.lo_incl and self.hi_incl))

    def _in_interval(self, v: Any) -> bool:
        """False only when ``v`` is provably outside the interval."""
        if self.lo is not None:
            if not comparable(self.lo, v):
                return True
            if v < self.lo or (v == self.lo and not self.lo_incl):
                return False
        if self.hi is not None:
            if not comparable(self.hi, v):
                return True
            if v > self.hi or (v == self.hi and not self.hi_incl):
                return False
        return True

    def _candidates(self) -> list[Any] | None:
        """The explicit values the term may take, when an allowed set is known."""
        if self.allowed is None:
            return None
        return [v for v in self.allowed if v not in self.excluded and self._in_interval(v)]

    def has_value(self) -> bool:
        """False only when no non-null value is possible."""
        if not self.may_value or self.interval_empty():
            return False
        cands = self._candidates()
        return cands is None or len(cands) > 0

    def may_satisfy(self, atom: Predicate) -> bool:
        """False only when no value of the box makes ``atom`` TRUE."""
        return _MaySatisfy(self).visit(atom)

    def _may_compare(self, op: str, c: Any) -> bool:
        if c is None:
            return False  # a comparison with NULL is never TRUE
        cands = self._candidates()
        if cands is not None:
            return any(not comparable(v, c) or _compare(v, op, c) for v in cands)
        if op == "=":
            return (not comparable(c, c)) or (c not in self.excluded and self._in_interval(c))
        if op == "!=":
            point = (
                self.lo is not None
                and self.hi is not None
                and comparable(self.lo, c)
                and comparable(self.hi, c)
                and self.lo == self.hi == c
            )
            return not point
        if op in ("<", "<="):
            if self.lo is None or not comparable(self.lo, c):
                return True
            return bool(self.lo < c or (op == "<=" and self.lo == c and self.lo_incl))
        if self.hi is None or not comparable(self.hi, c):
            return True
        return bool(self.hi > c or (op == ">=" and self.hi == c and self.hi_incl))

    def _may_in(self, atom: In) -> bool:
        values = [v.value for v in atom.values]
        if not atom.negated:
            return any(self._may_compare("=", v) for v in values if v is not None)
        if any(v is None for v in values):
            return False  # x NOT IN (.., NULL) is never TRUE
        cands = self._candidates()
        if cands is not None:
            return any(not all(comparable(v, w) for w in values) or v not in values for v in cands)
        if _pointlike(self) and self.lo == self.hi and all(comparable(self.lo, w) for w in values):
            return self.lo not in values
        return True

    def _may_prefix(self, prefix: str) -> bool:
        cands = self._candidates()
        if cands is not None:
            return any(not isinstance(v, str) or v.startswith(prefix) for v in cands)
        lo, hi = self.lo, self.hi
        if isinstance(lo, str) and lo > prefix and not lo.startswith(prefix):
            return False  # every string above lo is above all strings starting with prefix
        return not (isinstance(hi, str) and (hi < prefix or (hi == prefix and not self.hi_incl)))


def _closed(atom: Compare) -> tuple[str, Any]:
    """(op, value) with strict bounds made closed on discrete domains.

    On an integer or DATE term ``t < c`` is ``t <= c - 1`` and ``t > c`` is
    ``t >= c + 1``, which lets ``d > DATE '2019-12-31'`` be ruled out by
    ``d < DATE '2020-01-01'``. Other types keep the strict bound.
    """
    op, c = atom.op, atom.value.value
    if op not in ("<", ">"):
        return op, c
    dtype = getattr(atom.term, "dtype", None)
    step: Any = None
    if isinstance(c, int) and not isinstance(c, bool) and dtype is not None:
        if pa.types.is_integer(dtype):
            step = 1
    elif type(c) is _dt.date and dtype is not None and pa.types.is_date(dtype):
        step = _dt.timedelta(days=1)
    if step is None:
        return op, c
    try:
        return ("<=", c - step) if op == "<" else (">=", c + step)
    except OverflowError:
        return op, c


def _pointlike(box: TermBox) -> bool:
    return (
        box.lo is not None
        and box.hi is not None
        and comparable(box.lo, box.hi)
        and box.lo_incl
        and box.hi_incl
    )


class _WhenTrue(PredicateVisitor[TermBox]):
    """:meth:`TermBox.when_true`: the box narrowed by one atom being TRUE."""

    def __init__(self, box: TermBox) -> None:
        self.box = box

    def _present(self) -> TermBox:
        return replace(self.box, may_null=False)

    def visit_is_null(self, node: IsNull) -> TermBox:
        if node.negated:
            return replace(self.box, may_null=False)
        return replace(self.box, may_value=False)

    def visit_compare(self, node: Compare) -> TermBox:
        return self._present()._with_compare(*_closed(node))

    def visit_starts_with(self, node: StartsWith) -> TermBox:
        if node.negated:
            return self._present()
        return self._present()._with_compare(">=", node.prefix)

    def visit_in(self, node: In) -> TermBox:
        box = self._present()
        values = frozenset(v.value for v in node.values if v.value is not None)
        if node.negated:
            return replace(box, excluded=box.excluded | values)
        allowed = values if box.allowed is None else box.allowed & values
        return replace(box, allowed=allowed)

    def _non_null(self, node: Predicate) -> TermBox:
        """Any other test on the term: TRUE says only that the term is not NULL."""
        return self._present()

    visit_ends_with = visit_like = visit_bool_term = visit_term_compare = _non_null

    def _unchanged(self, node: Predicate) -> TermBox:
        """Junctions, constants and opaque text are not atoms on one term."""
        return self.box

    visit_and = visit_or = visit_not = visit_bool_const = visit_opaque = _unchanged


class _WhenNotTrue(PredicateVisitor[TermBox]):
    """:meth:`TermBox.when_not_true`: the box narrowed by one atom being FALSE or NULL."""

    def __init__(self, box: TermBox) -> None:
        self.box = box

    def visit_is_null(self, node: IsNull) -> TermBox:
        """IS NULL is never NULL: NOT TRUE is exactly its negation TRUE."""
        return self.box.when_true(node.negate())

    def _negation_or_null(self, node: Compare | In) -> TermBox:
        return replace(self.box.when_true(node.negate()), may_null=self.box.may_null)

    visit_compare = visit_in = _negation_or_null

    def _unchanged(self, node: Predicate) -> TermBox:
        """Other atoms narrow nothing when they are not TRUE."""
        return self.box

    visit_starts_with = visit_ends_with = visit_like = visit_bool_term = _unchanged
    visit_term_compare = visit_and = visit_or = visit_not = _unchanged
    visit_bool_const = visit_opaque = _unchanged


class _MaySatisfy(PredicateVisitor[bool]):
    """:meth:`TermBox.may_satisfy`: False only when no value of the box makes the atom TRUE."""

    def __init__(self, box: TermBox) -> None:
        self.box = box

    def visit_is_null(self, node: IsNull) -> bool:
        return self.box.has_value() if node.negated else self.box.may_null

    def visit_compare(self, node: Compare) -> bool:
        return self.box.has_value() and self.box._may_compare(*_closed(node))

    def visit_in(self, node: In) -> bool:
        return self.box.has_value() and self.box._may_in(node)

    def visit_starts_with(self, node: StartsWith) -> bool:
        if not self.box.has_value():
            return False
        return node.negated or self.box._may_prefix(node.prefix)

    def visit_ends_with(self, node: EndsWith) -> bool:
        if not self.box.has_value():
            return False
        cands = self.box._candidates()
        if not node.negated and cands is not None and all(isinstance(v, str) for v in cands):
            return any(v.endswith(node.suffix) for v in cands)
        return True

    def _needs_a_value(self, node: Predicate) -> bool:
        """Other tests on the term need it to be non-null, nothing more is known."""
        return self.box.has_value()

    visit_like = visit_bool_term = visit_term_compare = _needs_a_value

    def _maybe(self, node: Predicate) -> bool:
        """Not an atom on one term: may match."""
        return True

    visit_and = visit_or = visit_not = visit_bool_const = visit_opaque = _maybe


# ---------------------------------------------------------------- regions


def term_key(atom: Predicate) -> str | None:
    """The key of the term an atom constrains (``term.sql()``), or None."""
    return _TermKey().visit(atom)


class _TermKey(PredicateVisitor["str | None"]):
    """:func:`term_key`: atoms that box one term name it; the others none."""

    def _boxed(self, node: Compare | In | IsNull | StartsWith | EndsWith) -> str | None:
        return node.term.sql()

    visit_compare = visit_in = visit_is_null = visit_starts_with = visit_ends_with = _boxed

    def _unboxed(self, node: Predicate) -> str | None:
        return None

    visit_like = visit_bool_term = visit_term_compare = _unboxed
    visit_and = visit_or = visit_not = visit_bool_const = visit_opaque = _unboxed


@dataclass(frozen=True)
class Region:
    """A conjunction of cut outcomes: per-term boxes plus atoms known TRUE / NOT TRUE."""

    boxes: tuple[tuple[str, TermBox], ...] = ()
    true_atoms: frozenset[str] = frozenset()
    not_true_atoms: frozenset[str] = frozenset()
    _index: dict[str, TermBox] = field(default_factory=dict, compare=False, repr=False)
    #: :func:`atom_key` -> may the atom hold here? (a region never changes: see _plan_may)
    _answers: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update(self.boxes)

    def box(self, key: str) -> TermBox | None:
        return self._index.get(key)

    def with_outcome(self, atom: Predicate, outcome: bool) -> Region:
        """This region narrowed by ``atom`` being TRUE (``outcome``) or NOT TRUE."""
        key = term_key(atom)
        boxes = self.boxes
        if key is not None:
            old = self._index.get(key, TermBox())
            new = old.when_true(atom) if outcome else old.when_not_true(atom)
            boxes = tuple(sorted({**self._index, key: new}.items()))
        sql = atom.sql()
        if outcome:
            return Region(boxes, self.true_atoms | {sql}, self.not_true_atoms)
        return Region(boxes, self.true_atoms, self.not_true_atoms | {sql})

    def describe(self) -> str:
        """The region as SQL-ish text (``NOT TRUE`` outcomes spelled out)."""
        parts = sorted(self.true_atoms) + [
            f"NOT ({s}) OR ({s}) IS NULL" for s in sorted(self.not_true_atoms)
        ]
        return " AND ".join(parts) if parts else "TRUE"


def region_of(outcomes: Sequence[tuple[Cut, bool]]) -> Region:
    """The region reached by a path of cut outcomes from the root."""
    region = Region()
    for cut, outcome in outcomes:
        region = region.with_outcome(cut.atom, outcome)
    return region


@dataclass(frozen=True)
class QueryPlan:
    """A query prepared for many region tests: its AND / OR shape with each
    atom's SQL, negated SQL and term key computed once."""

    op: str  # "and" | "or" | "const" | "atom"
    children: tuple[QueryPlan, ...] = ()
    value: bool = True
    atom: Predicate | None = None
    sql: str = ""
    neg_sql: str | None = None
    key: str | None = None
    #: :func:`atom_key` of ``atom`` (what a region remembers its answer by)
    memo: str = ""


def atom_key(atom: Predicate, sql: str) -> str:
    """``sql`` with the type of every node of ``atom``: two atoms with the same key are the
    same bound tree (SQL text alone does not show a column's type)."""
    types = ";".join(f"{type(n).__name__}:{getattr(n, 'dtype', '')}" for n in atom.walk())
    return f"{sql}\x00{types}"


def plan_query(query: Predicate) -> QueryPlan:
    """The :class:`QueryPlan` of a predicate.

    Plans of the last :data:`RECENT_PLANS` predicates are kept by identity: pricing one
    query on many layouts (the online reorganizer's states, an oracle's hundreds of
    candidates) walks every tree with the same predicate object, and building its plan
    (each atom's SQL and its negation's) cost more than walking the trees.
    """
    return _recent_plan(_Same(query))


#: predicates whose plans are kept (by identity; a plan only depends on the predicate)
RECENT_PLANS = 256


class _Same:
    """A cache key that is its predicate's identity (it holds the predicate, so the
    identity cannot be reused while the entry lives)."""

    __slots__ = ("query",)

    def __init__(self, query: Predicate) -> None:
        self.query = query

    def __hash__(self) -> int:
        return id(self.query)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.query is self.query


@functools.lru_cache(maxsize=RECENT_PLANS)
def _recent_plan(key: _Same) -> QueryPlan:
    return _PlanQuery().visit(key.query)


class _PlanQuery(PredicateVisitor[QueryPlan]):
    """:func:`plan_query`: AND / OR keep their shape, constants fold, the rest are atoms."""

    def visit_and(self, node: And) -> QueryPlan:
        return QueryPlan("and", tuple(self.visit(c) for c in node.children_))

    def visit_or(self, node: Or) -> QueryPlan:
        return QueryPlan("or", tuple(self.visit(c) for c in node.children_))

    def visit_bool_const(self, node: BoolConst) -> QueryPlan:
        return QueryPlan("const", value=bool(node.value))

    def _opaque(self, node: Not | Opaque) -> QueryPlan:
        """An atom without a known negation."""
        sql = node.sql()
        return QueryPlan(
            "atom", atom=node, sql=sql, neg_sql=None, key=None, memo=atom_key(node, sql)
        )

    visit_not = visit_opaque = _opaque

    def _atom(self, node: Predicate) -> QueryPlan:
        neg = node.negate().sql()
        sql = node.sql()
        return QueryPlan(
            "atom", atom=node, sql=sql, neg_sql=neg, key=term_key(node), memo=atom_key(node, sql)
        )

    visit_compare = visit_term_compare = visit_in = visit_is_null = _atom
    visit_like = visit_starts_with = visit_ends_with = visit_bool_term = _atom


def may_intersect(query: Predicate | QueryPlan, region: Region) -> bool:
    """False only if no possible row of ``region`` satisfies ``query`` (safe).

    >>> from lakelayout.expr.nodes import Column, Literal
    >>> a = Column("a", pa.int64())
    >>> r = Region().with_outcome(Compare("<", a, Literal(10)), True)
    >>> may_intersect(Compare(">", a, Literal(20)), r), may_intersect(Compare("<", a, Literal(3)), r)
    (False, True)
    >>> nulls = Region().with_outcome(Compare("<", a, Literal(10)), False)
    >>> may_intersect(IsNull(a), nulls), may_intersect(Compare("=", a, Literal(3)), nulls)
    (True, False)
    """
    plan = query if isinstance(query, QueryPlan) else plan_query(query)
    return _plan_may(plan, region)


def _plan_may(plan: QueryPlan, region: Region) -> bool:
    if plan.op == "and":
        return all(_plan_may(c, region) for c in plan.children)
    if plan.op == "or":
        return any(_plan_may(c, region) for c in plan.children)
    if plan.op == "const":
        return plan.value
    # an atom's answer depends on the atom and the (immutable) region only; the trees of a
    # layout ask the same regions about the same atoms again and again (queries of one
    # template share most atoms), so each region remembers its answers by atom_key
    if not plan.memo:
        return _atom_may(plan, region)
    hit = region._answers.get(plan.memo)
    if hit is None:
        hit = _atom_may(plan, region)
        if len(region._answers) < REGION_ANSWERS:
            region._answers[plan.memo] = hit
    return hit


#: atom answers a region remembers (beyond that it answers without remembering)
REGION_ANSWERS = 1024


def _atom_may(plan: QueryPlan, region: Region) -> bool:
    """:func:`_plan_may` of one atom."""
    if plan.sql in region.not_true_atoms:
        return False
    if plan.neg_sql is not None and plan.neg_sql in region.true_atoms:
        return False
    if plan.key is None:
        return True
    box = region.box(plan.key)
    return True if box is None else box.may_satisfy(plan.atom)  # type: ignore[arg-type]


def query_keys(query: Predicate) -> frozenset[str]:
    """Term keys and atom SQL a query mentions: a region constraining none of them
    cannot rule the query out (used to skip pointless checks)."""
    keys: set[str] = set()
    for atom in atoms_of(query):
        keys.add(atom.sql())
        plan = plan_query(atom)
        if plan.neg_sql is not None:
            keys.add(plan.neg_sql)
        key = term_key(atom)
        if key is not None:
            keys.add(key)
    return frozenset(keys)


def cut_keys(cut: Cut) -> frozenset[str]:
    """Keys (term key, atom SQL) through which a cut outcome can rule a query out."""
    key = term_key(cut.atom)
    keys = {cut.sql()}
    if key is not None:
        keys.add(key)
    return frozenset(keys)


__all__ = [
    "MAX_IN_VALUES",
    "Cut",
    "QueryPlan",
    "Region",
    "TermBox",
    "atoms_of",
    "candidate_cuts",
    "comparable",
    "cut_keys",
    "cut_of",
    "may_intersect",
    "plan_query",
    "query_keys",
    "region_of",
    "term_key",
]
