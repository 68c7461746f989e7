"""Every node type has a rule in every visitor; walk and transform need no recursion.

A node type added to :mod:`lakelayout.expr.nodes` without a visitor method, or
a visitor lacking a rule, fails here instead of silently keeping files.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys

import pyarrow as pa
import pytest

import lakelayout
from lakelayout.expr import nodes
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
    Predicate,
    StartsWith,
    TermCompare,
)
from lakelayout.expr.normalize import normalize
from lakelayout.expr.parse import parse_predicate
from lakelayout.expr.visitor import METHODS, PredicateVisitor, TermVisitor, Visitor

#: the abstract bases; every other visitor must implement every method
BASES = {Visitor, PredicateVisitor, TermVisitor}


def _concrete_node_types() -> set[type]:
    found = set()
    for _, value in vars(nodes).items():
        if (
            isinstance(value, type)
            and issubclass(value, Expr)
            and value.__module__ == nodes.__name__
            and not inspect.isabstract(value)
            and value not in (nodes.Term, nodes.Predicate)
        ):
            found.add(value)
    return found


def _all_visitors() -> set[type]:
    for info in pkgutil.walk_packages(lakelayout.__path__, "lakelayout."):
        if info.name in sys.modules or not _is_pure(info.name):
            continue
        importlib.import_module(info.name)
    out: set[type] = set()
    stack = [Visitor]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in out:
                out.add(sub)
                stack.append(sub)
    return out - BASES


def _is_pure(name: str) -> bool:
    return name.startswith(("lakelayout.expr", "lakelayout.skipping", "lakelayout.layouts"))


VISITORS = sorted(_all_visitors(), key=lambda c: f"{c.__module__}.{c.__qualname__}")
NODE_TYPES = sorted(_concrete_node_types(), key=lambda c: c.__name__)


def test_the_visitor_base_has_one_method_per_node_type() -> None:
    assert set(METHODS) == set(NODE_TYPES)
    for node_type, name in METHODS.items():
        assert name in Visitor.__abstractmethods__, node_type


def test_visitors_are_found() -> None:
    names = {c.__qualname__ for c in VISITORS}
    for expected in ("MightMatch", "AllRowsMatch", "TermBounds", "Generate", "_Mask", "_Values"):
        assert expected in names, names


@pytest.mark.parametrize("visitor", VISITORS, ids=[v.__qualname__ for v in VISITORS])
def test_every_visitor_has_a_rule_for_every_node_type(visitor: type) -> None:
    assert not inspect.isabstract(visitor), (
        f"{visitor.__qualname__} lacks rules for {sorted(visitor.__abstractmethods__)}"
    )
    for node_type in NODE_TYPES:
        owner = next(c for c in visitor.__mro__ if METHODS[node_type] in vars(c))
        assert owner is not Visitor, (visitor, node_type)


def test_a_node_type_without_a_rule_fails_loudly() -> None:
    class Strange(Predicate):
        def sql(self) -> str:
            return "strange"

    from lakelayout.skipping.stats_rules import might_match
    from lakelayout.stats.model import FileStats

    with pytest.raises(TypeError, match="no rule for node type Strange"):
        might_match(Strange(), FileStats.empty(pa.schema([("a", pa.int64())])))


def _long(kind: type[And] | type[Or], n: int) -> Predicate:
    """A chain nested one level per operand, as a naive builder would write it."""
    a = Column("a", pa.int64())
    tree: Predicate = Compare("=", a, Literal(0, pa.int64()))
    for i in range(1, n):
        tree = kind((tree, Compare("=", a, Literal(i, pa.int64()))))
    return tree


def test_walk_and_transform_do_not_recurse() -> None:
    deep = _long(Or, 5 * sys.getrecursionlimit())
    assert sum(1 for node in deep.walk() if isinstance(node, Compare)) == 5 * (
        sys.getrecursionlimit()
    )
    same = deep.transform(lambda n: n)
    assert same is deep
    flat = normalize(Not(deep))
    assert isinstance(flat, And) and len(flat.children_) == 5 * sys.getrecursionlimit()


def test_a_long_chain_of_ors_parses_and_prunes() -> None:
    from lakelayout.skipping.stats_rules import might_match
    from lakelayout.stats.blocks import block_stats

    n = 3 * sys.getrecursionlimit()
    schema = pa.schema([("a", pa.int64())])
    pred = parse_predicate(" OR ".join(f"a = {i}" for i in range(n)), schema)
    assert isinstance(pred, Or) and len(pred.children_) == n
    text = " AND ".join(f"a != {i}" for i in range(n))
    conj = parse_predicate(text, schema)
    assert isinstance(conj, And) and len(conj.children_) == n
    files = block_stats(pa.table({"a": [0, 1, n + 5]}), __import__("numpy").array([0, 0, 1]))
    assert might_match(conj, files).tolist() == [True, True]


def test_transform_rebuilds_only_what_changed() -> None:
    a, b = Column("a", pa.int64()), Column("b", pa.int64())
    left = Compare("<", a, Literal(1, pa.int64()))
    right = Compare(">", b, Literal(2, pa.int64()))
    tree = And((left, right))
    renamed = tree.transform(lambda n: Column("c", pa.int64()) if n == b else n)
    assert renamed.sql() == "(a < 1L AND c > 2L)"
    assert renamed.children()[0] is left


@pytest.mark.parametrize(
    "node",
    [
        Func("abs", (Column("a"),), pa.int64()),
        TermCompare("<", Column("a"), Column("b")),
        In(Column("a"), (Literal(1), Literal(2))),
        IsNull(Column("a")),
        Like(Column("s"), "a%b"),
        StartsWith(Column("s"), "a"),
        EndsWith(Column("s"), "a"),
        Not(Opaque("x")),
        BoolTerm(Column("b")),
        Or((BoolConst(True), BoolConst(None))),
    ],
    ids=lambda n: type(n).__name__,
)
def test_with_children_round_trips(node: Expr) -> None:
    assert node.with_children(node.children()) == node


def test_a_term_where_a_predicate_belongs_is_reported() -> None:
    from lakelayout.errors import PredicateError
    from lakelayout.skipping.stats_rules import MightMatch, TermBounds
    from lakelayout.stats.model import FileStats

    files = FileStats.empty(pa.schema([("a", pa.int64())]))
    with pytest.raises(PredicateError, match="is a value, not a predicate"):
        MightMatch(files).visit(Column("a", pa.int64()))
    with pytest.raises(PredicateError, match="is a predicate, not a value"):
        TermBounds(files, "UTC").visit(IsNull(Column("a", pa.int64())))
