"""One way to interpret a predicate tree: a visitor with one method per node type.

On the model of pyiceberg's ``BooleanExpressionVisitor``: :class:`Visitor`
declares an abstract ``visit_<node>`` method for *every* node type of
:mod:`lakelayout.expr.nodes` (:class:`~lakelayout.expr.nodes.Opaque`
included), and :meth:`Visitor.visit` dispatches on the exact type. A visitor
that lacks a rule cannot be instantiated, and a node type that no visitor
knows makes :meth:`Visitor.visit` raise: adding a node type fails loudly
(``tests/expr/test_visitor.py`` lists every node type against every visitor)
instead of silently keeping files.

Predicates and terms are different worlds: :class:`PredicateVisitor` is for
interpreters of predicates (pruning rules, evaluation, clause generation),
:class:`TermVisitor` for interpreters of values (bounds of an expression, its
values on a batch). Each answers a node of the other world with an error, so
a tree whose shape is wrong is reported, not guessed at.

Visitors recurse through AND / OR / NOT. Normalized trees are flat (nested
ANDs and ORs merged, :func:`lakelayout.expr.normalize.flatten`), so the depth
is the alternation depth of AND and OR, not the length of a chain.
"""

from __future__ import annotations

import abc
from typing import Generic, TypeVar

from lakelayout.errors import PredicateError
from lakelayout.expr.nodes import (
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
    StartsWith,
    TermCompare,
)

T = TypeVar("T")

#: node type -> the visitor method that handles it (every concrete node type)
METHODS: dict[type[Expr], str] = {
    Column: "visit_column",
    Literal: "visit_literal",
    Func: "visit_func",
    Compare: "visit_compare",
    TermCompare: "visit_term_compare",
    In: "visit_in",
    IsNull: "visit_is_null",
    Like: "visit_like",
    StartsWith: "visit_starts_with",
    EndsWith: "visit_ends_with",
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    BoolConst: "visit_bool_const",
    BoolTerm: "visit_bool_term",
    Opaque: "visit_opaque",
}


class Visitor(abc.ABC, Generic[T]):
    """Interprets an expression tree: one abstract method per node type."""

    def visit(self, node: Expr) -> T:
        """Dispatch ``node`` to the method for its exact type."""
        name = METHODS.get(type(node))
        if name is None:
            raise TypeError(
                f"{type(self).__name__} has no rule for node type {type(node).__name__}; "
                "add it to lakelayout.expr.visitor.METHODS and to every visitor"
            )
        method = getattr(self, name)
        return method(node)  # type: ignore[no-any-return]

    # ------------------------------------------------------------ terms

    @abc.abstractmethod
    def visit_column(self, node: Column) -> T: ...

    @abc.abstractmethod
    def visit_literal(self, node: Literal) -> T: ...

    @abc.abstractmethod
    def visit_func(self, node: Func) -> T: ...

    # ------------------------------------------------------------ predicates

    @abc.abstractmethod
    def visit_compare(self, node: Compare) -> T: ...

    @abc.abstractmethod
    def visit_term_compare(self, node: TermCompare) -> T: ...

    @abc.abstractmethod
    def visit_in(self, node: In) -> T: ...

    @abc.abstractmethod
    def visit_is_null(self, node: IsNull) -> T: ...

    @abc.abstractmethod
    def visit_like(self, node: Like) -> T: ...

    @abc.abstractmethod
    def visit_starts_with(self, node: StartsWith) -> T: ...

    @abc.abstractmethod
    def visit_ends_with(self, node: EndsWith) -> T: ...

    @abc.abstractmethod
    def visit_and(self, node: And) -> T: ...

    @abc.abstractmethod
    def visit_or(self, node: Or) -> T: ...

    @abc.abstractmethod
    def visit_not(self, node: Not) -> T: ...

    @abc.abstractmethod
    def visit_bool_const(self, node: BoolConst) -> T: ...

    @abc.abstractmethod
    def visit_bool_term(self, node: BoolTerm) -> T: ...

    @abc.abstractmethod
    def visit_opaque(self, node: Opaque) -> T: ...


class PredicateVisitor(Visitor[T]):
    """A visitor of predicates: a term where a predicate belongs is an error."""

    def _not_a_predicate(self, node: Expr) -> T:
        raise PredicateError(f"{node.sql()!r} is a value, not a predicate")

    def visit_column(self, node: Column) -> T:
        return self._not_a_predicate(node)

    def visit_literal(self, node: Literal) -> T:
        return self._not_a_predicate(node)

    def visit_func(self, node: Func) -> T:
        return self._not_a_predicate(node)


class TermVisitor(Visitor[T]):
    """A visitor of value expressions: a predicate where a value belongs is an error."""

    def _not_a_term(self, node: Expr) -> T:
        raise PredicateError(f"{node.sql()!r} is a predicate, not a value")

    def visit_compare(self, node: Compare) -> T:
        return self._not_a_term(node)

    def visit_term_compare(self, node: TermCompare) -> T:
        return self._not_a_term(node)

    def visit_in(self, node: In) -> T:
        return self._not_a_term(node)

    def visit_is_null(self, node: IsNull) -> T:
        return self._not_a_term(node)

    def visit_like(self, node: Like) -> T:
        return self._not_a_term(node)

    def visit_starts_with(self, node: StartsWith) -> T:
        return self._not_a_term(node)

    def visit_ends_with(self, node: EndsWith) -> T:
        return self._not_a_term(node)

    def visit_and(self, node: And) -> T:
        return self._not_a_term(node)

    def visit_or(self, node: Or) -> T:
        return self._not_a_term(node)

    def visit_not(self, node: Not) -> T:
        return self._not_a_term(node)

    def visit_bool_const(self, node: BoolConst) -> T:
        return self._not_a_term(node)

    def visit_bool_term(self, node: BoolTerm) -> T:
        return self._not_a_term(node)

    def visit_opaque(self, node: Opaque) -> T:
        return self._not_a_term(node)


__all__ = ["METHODS", "PredicateVisitor", "TermVisitor", "Visitor"]
