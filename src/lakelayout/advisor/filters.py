"""The filters of a query, and what kind of clustering feature each one can be.

The thesis's workload analysis (Tufă 2019, §4.2.1 and Algorithm 1, P1/P5)
looks at the *filters* of every query: the leaf predicates of its normalized
tree (the nodes below AND / OR; NOT has already been pushed to the leaves by
the parser, so a remaining :class:`~lakelayout.expr.nodes.Not` wraps
something opaque and is a leaf itself). Each filter is one of

* a **range filter** ``expr op const`` with ``op`` one of ``= < <= > >=``,
  ``startswith(expr, 'p')`` or ``expr IN (consts)``, where ``expr`` reads
  exactly one column (any deterministic expression: ``month(ts)``,
  ``m['k']``, ``lower(s)``). Its *curve feature* is ``expr`` (the constant
  is left out), and the constants are its *comparison points*;
* anything else (LIKE with a leading wildcard, ``!=``, NOT IN, IS NULL, a
  comparison of two columns, a boolean UDF call): a *predicate feature* for
  skipping-oriented partitioning (SOP), keyed by the whole filter;
* :class:`~lakelayout.expr.nodes.Opaque`: not understood, so it can be
  neither evaluated on a sample nor skipped on; it is reported and dropped.

Feature keys are canonical SQL (:meth:`~lakelayout.expr.nodes.Expr.sql`), so
the same filter written two ways has one key. This module is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from lakelayout.expr.nodes import (
    And,
    BoolConst,
    Compare,
    Expr,
    In,
    Not,
    Or,
    Predicate,
    StartsWith,
)

#: comparison operators that make a filter a range filter (min/max can use them)
RANGE_OPS = frozenset({"=", "<", "<=", ">", ">="})

RANGE = "range"
PREDICATE = "predicate"
OPAQUE = "opaque"


@dataclass(frozen=True)
class Filter:
    """One leaf filter of a query.

    ``kind`` is :data:`RANGE`, :data:`PREDICATE` or :data:`OPAQUE`; ``term`` is
    the curve feature key (range filters only) and ``points`` the canonical
    SQL of the constants it is compared with; ``key`` is the filter's own
    canonical SQL (its predicate-feature key); ``form`` names the shape for
    people (``comparison``, ``LIKE``, ``UDF call``...).
    """

    kind: str
    key: str
    node: Predicate
    form: str
    term: str | None = None
    term_node: Expr | None = None
    points: tuple[str, ...] = ()


def leaf_filters(pred: Predicate) -> list[Filter]:
    """The leaf filters of ``pred``, in tree order, duplicates (same key) removed.

    >>> import pyarrow as pa
    >>> from lakelayout.expr.parse import parse_predicate
    >>> schema = pa.schema([("a", pa.int32()), ("s", pa.string())])
    >>> p = parse_predicate("a BETWEEN 1 AND 5 AND s LIKE '%x%'", schema)
    >>> [(f.kind, f.term or f.key) for f in leaf_filters(p)]
    [('range', 'a'), ('range', 'a'), ('predicate', "s LIKE '%x%'")]
    """
    leaves = [n for n in pred.walk() if _is_leaf(n)]
    inside = {id(m) for leaf in leaves for m in islice(leaf.walk(), 1, None)}
    out: list[Filter] = []
    seen: set[str] = set()
    for leaf in leaves:
        if id(leaf) in inside:
            continue
        assert isinstance(leaf, Predicate)
        item = classify(leaf)
        if item.key not in seen:
            seen.add(item.key)
            out.append(item)
    return out


def _is_leaf(node: Expr) -> bool:
    return isinstance(node, Predicate) and not isinstance(node, And | Or | BoolConst)


def classify(leaf: Predicate) -> Filter:
    """The :class:`Filter` of one leaf predicate (see the module docstring)."""
    key = leaf.sql()
    if leaf.has_opaque():
        return Filter(OPAQUE, key, leaf, "not understood by lakelayout")
    if isinstance(leaf, Not):
        return Filter(PREDICATE, key, leaf, "NOT over an expression")
    if isinstance(leaf, Compare) and leaf.op in RANGE_OPS and _one_column(leaf.term):
        return _range(leaf, leaf.term, (leaf.value.sql(),), "comparison")
    if isinstance(leaf, StartsWith) and not leaf.negated and _one_column(leaf.term):
        return _range(leaf, leaf.term, (repr(leaf.prefix),), "prefix")
    if isinstance(leaf, In) and not leaf.negated and _one_column(leaf.term) and leaf.values:
        return _range(leaf, leaf.term, tuple(v.sql() for v in leaf.values), "IN list")
    return Filter(PREDICATE, key, leaf, _form(leaf))


def _range(leaf: Predicate, term: Expr, points: tuple[str, ...], form: str) -> Filter:
    return Filter(RANGE, leaf.sql(), leaf, form, term=term.sql(), term_node=term, points=points)


def _one_column(term: Expr) -> bool:
    return len(term.columns()) == 1


def _form(leaf: Predicate) -> str:
    name = type(leaf).__name__
    if name == "Compare":
        return "comparison with != or over several columns"
    return {
        "Like": "LIKE pattern",
        "EndsWith": "suffix",
        "StartsWith": "NOT prefix or prefix over several columns",
        "In": "NOT IN or IN over several columns",
        "IsNull": "IS [NOT] NULL",
        "TermCompare": "comparison of two expressions",
        "BoolTerm": "boolean expression or UDF call",
    }.get(name, name)


def feature_keys(pred: Predicate) -> list[str]:
    """What a query log records as the features of ``pred``: the curve key of every
    range filter and the key of every other filter, each once, in tree order.

    >>> import pyarrow as pa
    >>> from lakelayout.expr.parse import parse_predicate
    >>> schema = pa.schema([("ts", pa.timestamp("us")), ("s", pa.string())])
    >>> feature_keys(parse_predicate("month(ts) = 3 AND month(ts) < 5 OR s != 'x'", schema))
    ['month(ts)', "s != 'x'"]
    """
    keys: list[str] = []
    for f in leaf_filters(pred):
        key = f.term if f.kind == RANGE and f.term is not None else f.key
        if key not in keys:
            keys.append(key)
    return keys
