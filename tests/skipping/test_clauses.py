"""The clause merge (Algorithm 1) on hand-built trees with fixed clauses."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.expr.nodes import And, Column, Compare, Literal, Not, Opaque, Or, Predicate
from lakelayout.skipping.clauses import (
    Both,
    Conjunction,
    Disjunction,
    Labelled,
    evaluate,
    generate,
)
from lakelayout.skipping.indexes.base import Clause

N = 4


class Fixed(Clause):
    """A clause with a fixed answer per file, and optionally a fixed negation."""

    def __init__(self, keep: list[bool], negation: list[bool] | None = None) -> None:
        self.keep = np.array(keep)
        self.negation = negation

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        return self.keep.copy()

    def negate(self) -> Clause | None:
        return None if self.negation is None else Fixed(self.negation, self.keep.tolist())


class Table:
    """A labeller answering from a table: node sql -> clause."""

    def __init__(self, name: str, clauses: Mapping[str, Clause]) -> None:
        self.name = name
        self.clauses = dict(clauses)

    def label(self, node: Predicate) -> Clause | None:
        return self.clauses.get(node.sql())


def leaf(name: str) -> Predicate:
    return Compare("=", Column(name), Literal(1, pa.int32()))


A, B, C = leaf("a"), leaf("b"), leaf("c")
COLUMNS: dict[str, pa.Array | None] = {"x": None, "y": None}


def run(pred: Predicate, *labellers: Table, only: set[str] | None = None) -> list[bool]:
    return evaluate(generate(pred, labellers), COLUMNS, N, only).tolist()


def test_and_ignores_children_without_clause() -> None:
    x = Table("x", {A.sql(): Fixed([1, 0, 1, 0])})
    assert run(And((A, B)), x) == [True, False, True, False]


def test_and_combines_children_and_own_clauses() -> None:
    node = And((A, B))
    x = Table("x", {A.sql(): Fixed([1, 1, 1, 0]), B.sql(): Fixed([1, 1, 0, 1])})
    y = Table("y", {node.sql(): Fixed([1, 0, 1, 1])})
    assert run(node, x, y) == [True, False, False, False]


def test_or_needs_a_clause_for_every_child() -> None:
    x = Table("x", {A.sql(): Fixed([1, 0, 0, 0])})
    assert run(Or((A, B)), x) == [True] * N
    x.clauses[B.sql()] = Fixed([0, 1, 0, 0])
    assert run(Or((A, B)), x) == [True, True, False, False]


def test_or_keeps_its_own_clauses_when_a_child_has_none() -> None:
    node = Or((A, B))
    x = Table("x", {A.sql(): Fixed([0, 0, 0, 0]), node.sql(): Fixed([1, 1, 0, 0])})
    assert run(node, x) == [True, True, False, False]


def test_not_uses_the_negation_when_it_exists() -> None:
    x = Table("x", {A.sql(): Fixed([1, 1, 0, 0], negation=[0, 1, 1, 0])})
    assert run(Not(A), x) == [False, True, True, False]


def test_not_without_negation_keeps_everything() -> None:
    x = Table("x", {A.sql(): Fixed([0, 0, 0, 0])})
    assert run(Not(A), x) == [True] * N


def test_not_over_and_is_de_morgan() -> None:
    """NOT (a AND b) = NOT a OR NOT b: needs a negation for both children."""
    x = Table(
        "x",
        {
            A.sql(): Fixed([1, 1, 1, 1], negation=[1, 0, 0, 0]),
            B.sql(): Fixed([1, 1, 1, 1], [0, 1, 0, 0]),
        },
    )
    assert run(Not(And((A, B))), x) == [True, True, False, False]
    del x.clauses[B.sql()]
    assert run(Not(And((A, B))), x) == [True] * N


def test_not_over_or_needs_only_some_negations() -> None:
    """NOT (a OR b) = NOT a AND NOT b: one negated child already represents it."""
    x = Table(
        "x",
        {A.sql(): Fixed([1, 1, 1, 1], negation=[1, 0, 1, 0]), B.sql(): Fixed([1, 1, 1, 1])},
    )
    assert run(Not(Or((A, B))), x) == [True, False, True, False]


def test_double_negation_returns_the_original_clause() -> None:
    x = Table("x", {A.sql(): Fixed([1, 0, 1, 0], negation=[0, 1, 1, 1])})
    assert run(Not(Not(A)), x) == [True, False, True, False]


def test_opaque_and_unlabelled_nodes_keep() -> None:
    assert generate(Opaque("rand() > 0.5"), []) is None
    assert run(And((Opaque("x"), Not(Opaque("y")))), Table("x", {})) == [True] * N


def test_only_restricts_to_one_labeller() -> None:
    x = Table("x", {A.sql(): Fixed([0, 1, 1, 1])})
    y = Table("y", {B.sql(): Fixed([1, 0, 1, 1])})
    assert run(And((A, B)), x, y) == [False, False, True, True]
    assert run(And((A, B)), x, y, only={"x"}) == [False, True, True, True]
    assert run(And((A, B)), x, y, only={"y"}) == [True, False, True, True]


def test_merged_structure_follows_the_tree() -> None:
    x = Table("x", {A.sql(): Fixed([1] * N), B.sql(): Fixed([1] * N), C.sql(): Fixed([1] * N)})
    merged = generate(And((A, Or((B, C)))), [x])
    assert isinstance(merged, Conjunction) and merged.complete
    assert isinstance(merged.children[0], Labelled)
    assert isinstance(merged.children[1], Disjunction)
    y = Table("y", {A.sql(): Fixed([1] * N)})
    assert isinstance(generate(A, [x, y]), Both)


@pytest.mark.parametrize("depth", [1, 3, 6])
def test_clause_length_mismatch_is_an_error(depth: int) -> None:
    class Bad(Clause):
        def evaluate(self, meta: pa.Array) -> np.ndarray:
            return np.ones(depth + N, dtype=bool)

    with pytest.raises(ValueError, match="returned"):
        run(A, Table("x", {A.sql(): Bad()}))
