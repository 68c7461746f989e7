"""Labelling a predicate tree with clauses and merging them (Algorithms 1-2, Appendix A).

Every *labeller* (each index, and min/max statistics) looks at every node of
the normalized predicate tree and may attach a clause that *represents* it
(Definition 2: a file holding a row that satisfies the node satisfies the
clause). :func:`generate` is Algorithm 2 (label, then merge) and the merge is
Algorithm 1, bottom-up, with ``φ`` the conjunction of a node's own clauses:

* ``AND(a, b, ...)``  ->  ``α ∧ β ∧ ... ∧ φ``; a child without a clause is left
  out (Lemmas 17-18: a conjunction of clauses of some conjuncts still
  represents the AND);
* ``OR(a, b, ...)``   ->  ``(α ∨ β ∨ ...) ∧ φ`` -- the disjunction only when
  *every* child has a clause (Lemma 19), else just ``φ``;
* ``NOT(a)``          ->  ``α*_a ∧ φ`` where ``α*_a`` is the negation of α with
  respect to ``a`` (Definition 14) when it exists, else just ``φ``;
* any other node      ->  ``φ``;

and "no clause" (``None``) means "keep every file". The paper's NOT case
returns ``α*`` alone; also keeping ``φ`` is sound by Lemma 17 and never
weaker. Negation of a merged clause is structural: for ``Both`` (clauses that
each represent the same node) the conjunction of the negatable parts' negations;
for a complete ``Conjunction`` (De Morgan) the disjunction of every child's
negation; for a ``Disjunction`` the conjunction of the negatable children's
negations.

Clause expressions evaluate vectorized over all files given each index's
metadata array; ``only`` restricts evaluation to some labellers: the others'
clauses count as ``True``. That is sound, since negation has already been
applied structurally and what remains is monotone AND / OR over clauses, and
never weaker than re-running the merge with just those labellers.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
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
from lakelayout.skipping.indexes.base import Clause


class Labeller(Protocol):
    """Anything that labels nodes with clauses over its own metadata: an Index, min/max stats."""

    @property
    def name(self) -> str: ...

    def label(self, node: Predicate) -> Clause | None: ...


class Merged(abc.ABC):
    """A clause expression over several labellers' metadata."""

    @abc.abstractmethod
    def evaluate(
        self,
        columns: Mapping[str, pa.Array | None],
        n: int,
        only: Collection[str] | None = None,
        cache: dict[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        """One boolean per file: False only where the represented expression cannot match."""

    @abc.abstractmethod
    def negate(self) -> Merged | None:
        """A clause expression representing the negation of the represented node, or None."""

    @abc.abstractmethod
    def labellers(self) -> set[str]:
        """Names of the labellers whose clauses occur in this expression."""


@dataclass(frozen=True)
class Labelled(Merged):
    """One labeller's clause; evaluated over that labeller's metadata column."""

    __hash__ = object.__hash__

    labeller: str
    clause: Clause

    def evaluate(
        self,
        columns: Mapping[str, pa.Array | None],
        n: int,
        only: Collection[str] | None = None,
        cache: dict[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        if only is not None and self.labeller not in only:
            return np.ones(n, dtype=bool)
        if cache is not None and id(self) in cache:
            return cache[id(self)]
        meta = columns.get(self.labeller)
        if meta is None and self.labeller not in columns:
            return np.ones(n, dtype=bool)
        result = np.asarray(self.clause.evaluate(meta), dtype=bool)  # type: ignore[arg-type]
        if result.shape != (n,):
            raise ValueError(
                f"clause of {self.labeller} returned {result.shape} values for {n} files"
            )
        if cache is not None:
            cache[id(self)] = result
        return result

    def negate(self) -> Merged | None:
        negated = self.clause.negate()
        return None if negated is None else Labelled(self.labeller, negated)

    def labellers(self) -> set[str]:
        return {self.labeller}


def _all_hold(
    parts: Sequence[Merged],
    columns: Mapping[str, pa.Array | None],
    n: int,
    only: Collection[str] | None,
    cache: dict[int, np.ndarray] | None,
) -> np.ndarray:
    """Files every one of ``parts`` keeps (the AND of their keep masks)."""
    keep = np.ones(n, dtype=bool)
    for part in parts:
        keep &= part.evaluate(columns, n, only, cache)
    return keep


@dataclass(frozen=True)
class Both(Merged):
    """Clauses that each represent the same node (Lemma 17): all must hold."""

    parts: tuple[Merged, ...]

    def evaluate(
        self,
        columns: Mapping[str, pa.Array | None],
        n: int,
        only: Collection[str] | None = None,
        cache: dict[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        return _all_hold(self.parts, columns, n, only, cache)

    def negate(self) -> Merged | None:
        return both([p.negate() for p in self.parts])

    def labellers(self) -> set[str]:
        return set().union(*(p.labellers() for p in self.parts))


@dataclass(frozen=True)
class Conjunction(Merged):
    """Clauses of some children of an AND (Lemma 18); ``complete`` when every child has one."""

    children: tuple[Merged, ...]
    complete: bool

    def evaluate(
        self,
        columns: Mapping[str, pa.Array | None],
        n: int,
        only: Collection[str] | None = None,
        cache: dict[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        return _all_hold(self.children, columns, n, only, cache)

    def negate(self) -> Merged | None:
        """NOT (a AND b) = NOT a OR NOT b: needs a negation of every child."""
        if not self.complete:
            return None
        negated = [c.negate() for c in self.children]
        if any(c is None for c in negated):
            return None
        return Disjunction(tuple(c for c in negated if c is not None))

    def labellers(self) -> set[str]:
        return set().union(*(c.labellers() for c in self.children))


@dataclass(frozen=True)
class Disjunction(Merged):
    """Clauses of every child of an OR (Lemma 19): one must hold."""

    children: tuple[Merged, ...]

    def evaluate(
        self,
        columns: Mapping[str, pa.Array | None],
        n: int,
        only: Collection[str] | None = None,
        cache: dict[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        keep = np.zeros(n, dtype=bool)
        for child in self.children:
            keep |= child.evaluate(columns, n, only, cache)
        return keep

    def negate(self) -> Merged | None:
        """NOT (a OR b) = NOT a AND NOT b: the negations that exist suffice."""
        negated = [c.negate() for c in self.children]
        kept = tuple(c for c in negated if c is not None)
        if not kept:
            return None
        return Conjunction(kept, complete=len(kept) == len(self.children))

    def labellers(self) -> set[str]:
        return set().union(*(c.labellers() for c in self.children))


def both(parts: Sequence[Merged | None]) -> Merged | None:
    """``Both`` of the non-None parts; the part itself when only one; None when none."""
    kept = tuple(p for p in parts if p is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else Both(kept)


def own_clauses(node: Predicate, labellers: Sequence[Labeller]) -> list[Merged]:
    """``CS(v)``: every labeller's clause for this node."""
    out: list[Merged] = []
    for labeller in labellers:
        clause = labeller.label(node)
        if clause is not None:
            out.append(Labelled(labeller.name, clause))
    return out


def generate(pred: Predicate, labellers: Sequence[Labeller]) -> Merged | None:
    """Algorithm 2: label every node with every labeller, then merge (Algorithm 1)."""
    return Generate(labellers).visit(pred)


class Generate(PredicateVisitor["Merged | None"]):
    """Algorithm 1 as a visitor: a node's merged clause from its children's and its own."""

    def __init__(self, labellers: Sequence[Labeller]) -> None:
        self.labellers = labellers

    def _own(self, node: Predicate) -> list[Merged]:
        return own_clauses(node, self.labellers)

    def visit_and(self, node: And) -> Merged | None:
        """``α ∧ β ∧ ... ∧ φ`` over the children that have a clause (Lemmas 17-18)."""
        kids = [self.visit(c) for c in node.children_]
        present = tuple(k for k in kids if k is not None)
        conj = Conjunction(present, complete=len(present) == len(kids)) if present else None
        return both([conj, *self._own(node)])

    def visit_or(self, node: Or) -> Merged | None:
        """``(α ∨ β ∨ ...) ∧ φ`` when every child has a clause (Lemma 19), else ``φ``."""
        kids = [self.visit(c) for c in node.children_]
        disj = None
        if kids and all(k is not None for k in kids):
            disj = Disjunction(tuple(k for k in kids if k is not None))
        return both([disj, *self._own(node)])

    def visit_not(self, node: Not) -> Merged | None:
        """``α* ∧ φ`` with ``α*`` the negation of the child's clause when it exists."""
        inner = self.visit(node.child)
        return both([inner.negate() if inner is not None else None, *self._own(node)])

    def _leaf(self, node: Predicate) -> Merged | None:
        """Any other node: its own clauses ``φ``."""
        return both(self._own(node))

    def visit_compare(self, node: Compare) -> Merged | None:
        return self._leaf(node)

    def visit_term_compare(self, node: TermCompare) -> Merged | None:
        return self._leaf(node)

    def visit_in(self, node: In) -> Merged | None:
        return self._leaf(node)

    def visit_is_null(self, node: IsNull) -> Merged | None:
        return self._leaf(node)

    def visit_like(self, node: Like) -> Merged | None:
        return self._leaf(node)

    def visit_starts_with(self, node: StartsWith) -> Merged | None:
        return self._leaf(node)

    def visit_ends_with(self, node: EndsWith) -> Merged | None:
        return self._leaf(node)

    def visit_bool_const(self, node: BoolConst) -> Merged | None:
        return self._leaf(node)

    def visit_bool_term(self, node: BoolTerm) -> Merged | None:
        return self._leaf(node)

    def visit_opaque(self, node: Opaque) -> Merged | None:
        return self._leaf(node)


def evaluate(
    merged: Merged | None,
    columns: Mapping[str, pa.Array | None],
    n: int,
    only: Collection[str] | None = None,
    cache: dict[int, np.ndarray] | None = None,
) -> np.ndarray:
    """Evaluate a merged clause (``None`` keeps every file).

    ``cache`` memoizes each labelled clause's result across evaluations of the
    same merged expression (e.g. once overall, then per labeller).
    """
    if merged is None:
        return np.ones(n, dtype=bool)
    return merged.evaluate(columns, n, only, cache)
