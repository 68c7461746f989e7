"""Normalization: an ordered list of small pure rules, each ``rule(pred) -> pred``.

The binder (:mod:`lakelayout.expr.parse`) produces a tree that is exact under
SQL three-valued logic: NOT stays where it was written and a predicate that is
NULL stays NULL (``a = NULL`` is :class:`BoolConst` ``NULL``, ``tinyint_col =
1000`` is ``tinyint_col IS NULL AND NULL``). :data:`RULES` then turn it into
the normalized tree pruning works on, in this order (each rule's algebra is
in its docstring):

1. :func:`push_not_down` -- NOT to the leaves (exact in three-valued logic);
2. :func:`null_as_false` -- NULL constants read as FALSE (WHERE semantics;
   sound only once no NOT is above them);
3. :func:`flatten` -- nested AND / OR merged;
4. :func:`fold_constants` -- TRUE / FALSE absorbed or dropped;
5. :func:`drop_implied_not_null` -- ``t IS NOT NULL`` next to a conjunct that
   already rejects NULL ``t``;
6. :func:`canonical_order` -- children sorted by SQL text and de-duplicated,
   so the text is a stable feature key.

The rules repeat until the text no longer changes (a later rule can open
work for an earlier one), so rendering and re-parsing is a fixed point.

The result selects exactly the rows ``df.where(text)`` keeps. Every rule runs
without recursion (:meth:`Expr.transform` or an explicit stack), so a chain
of ten thousand ORs normalizes as well as a short one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Compare,
    EndsWith,
    Expr,
    Func,
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

COMMUTATIVE = frozenset({"+", "*"})
Rule = Callable[[Predicate], Predicate]


def push_not_down(pred: Predicate) -> Predicate:
    """NOT to the leaves: ``NOT (a AND b)`` -> ``NOT a OR NOT b``, ``NOT a < 5`` -> ``a >= 5``.

    Algebra (three-valued, exact): De Morgan holds in Kleene logic, ``NOT NOT
    p = p``, and every leaf has an exact complement (:meth:`Predicate.negate`:
    ``<`` / ``>=``, IN / NOT IN, IS NULL / IS NOT NULL, LIKE / NOT LIKE, a
    boolean term ``= true`` / ``= false``, NULL / NULL). A NOT over an
    :class:`Opaque` leaf stays: nothing is known about its complement.
    """
    done: list[Predicate] = []
    stack: list[tuple[Predicate, bool, bool]] = [(pred, False, False)]
    while stack:
        node, negated, expanded = stack.pop()
        if isinstance(node, Not) and not isinstance(node.child, Opaque):
            stack.append((node.child, not negated, False))
        elif isinstance(node, And | Or) and node.children_:
            if not expanded:
                stack.append((node, negated, True))
                stack.extend((child, negated, False) for child in reversed(node.children_))
                continue
            kids = tuple(done[len(done) - len(node.children_) :])
            del done[len(done) - len(node.children_) :]
            conjunction = isinstance(node, And) != negated
            done.append(And(kids) if conjunction else Or(kids))
        else:
            done.append(node.negate() if negated else node)
    return done[0]


def null_as_false(pred: Predicate) -> Predicate:
    """``NULL`` -> ``FALSE`` once NOT is at the leaves (WHERE semantics).

    Algebra: under AND / OR only (monotone in Kleene logic), a formula is TRUE
    with an unknown input exactly when it is TRUE with FALSE there; WHERE keeps
    only TRUE rows, so reading NULL as FALSE keeps the same rows. Not exact
    under a NOT, which is why :func:`push_not_down` runs first.
    """

    def rule(node: Expr) -> Expr:
        if isinstance(node, BoolConst) and node.value is None:
            return BoolConst(False)
        return node

    return _rewrite(pred, rule)


def flatten(pred: Predicate) -> Predicate:
    """``(a AND b) AND c`` -> ``a AND b AND c``; the same for OR.

    Algebra: AND and OR are associative (also in three-valued logic).
    """

    def rule(node: Expr) -> Expr:
        if isinstance(node, And | Or):
            flat = _merged(type(node), node.children_)
            return node if flat == node.children_ else type(node)(flat)
        return node

    return _rewrite(pred, rule)


def fold_constants(pred: Predicate) -> Predicate:
    """``p AND FALSE`` -> FALSE, ``p AND TRUE`` -> ``p``, ``p OR TRUE`` -> TRUE, ``p OR FALSE`` -> ``p``.

    Algebra: FALSE absorbs AND and TRUE absorbs OR, also when ``p`` is NULL;
    TRUE is the unit of AND and FALSE of OR. An empty AND is TRUE, an empty
    OR is FALSE; a junction of one child is that child. NULL constants are
    left alone (they only fold under WHERE semantics, :func:`null_as_false`).
    """

    def rule(node: Expr) -> Expr:
        if not isinstance(node, And | Or):
            return node
        absorbing = isinstance(node, Or)  # TRUE absorbs an OR, FALSE absorbs an AND
        kept: list[Predicate] = []
        for child in _merged(type(node), node.children_):
            if isinstance(child, BoolConst) and child.value is not None:
                if child.value == absorbing:
                    return BoolConst(absorbing)
                continue
            kept.append(child)
        return _junction(type(node), kept, empty=not absorbing)

    return _rewrite(pred, rule)


def drop_implied_not_null(pred: Predicate) -> Predicate:
    """``t IS NOT NULL AND p`` -> ``p`` when ``p`` is NULL wherever ``t`` is NULL.

    ``p`` rejects NULL ``t`` when it is a comparison, IN, LIKE, prefix or
    suffix test or boolean term on ``t`` itself, or a comparison of two terms
    one of which is ``t``. Algebra (WHERE semantics, after NOT push-down): rows
    with ``t`` NULL make ``p`` NULL, so the AND is not TRUE there either way;
    on the other rows ``t IS NOT NULL`` is TRUE, the unit of AND. This is how
    ``a <=> 1`` (exactly ``a = 1 AND a IS NOT NULL``) and ``b IS TRUE`` end up
    as ``a = 1`` and ``b = true``.
    """

    def rule(node: Expr) -> Expr:
        if not isinstance(node, And):
            return node
        rejected = {t.sql() for c in node.children_ for t in _null_rejected_terms(c)}
        kept = [
            c
            for c in node.children_
            if not (isinstance(c, IsNull) and c.negated and c.term.sql() in rejected)
        ]
        if len(kept) == len(node.children_):
            return node
        return _junction(And, kept, empty=True)

    return _rewrite(pred, rule)


def canonical_order(pred: Predicate) -> Predicate:
    """Children of AND / OR sorted by ``sql()`` and de-duplicated (``p AND p`` -> ``p``).

    Algebra: AND and OR are commutative and idempotent, so order and
    repetition do not change the value; the rendered text then is a stable
    feature key whatever order the user wrote the clauses in.
    """

    def rule(node: Expr) -> Expr:
        if not isinstance(node, And | Or):
            return node
        kept: dict[str, Predicate] = {}
        for child in _merged(type(node), node.children_):
            kept.setdefault(child.sql(), child)
        ordered = [kept[key] for key in sorted(kept)]
        return _junction(type(node), ordered, empty=isinstance(node, And))

    return _rewrite(pred, rule)


#: the normalization rules, in the order :func:`normalize` applies them
RULES: tuple[Rule, ...] = (
    push_not_down,
    null_as_false,
    flatten,
    fold_constants,
    drop_implied_not_null,
    canonical_order,
)


def normalize(pred: Predicate, rules: Sequence[Rule] = RULES) -> Predicate:
    """Apply ``rules`` in order (all of :data:`RULES` by default), again until the text is stable.

    One pass is not always a fixed point: de-duplication can leave a single
    child that merges into its parent AND, next to an ``IS NOT NULL`` the
    previous rule would have dropped there (``(a < b OR a < b) AND a IS NOT
    NULL``). Passes repeat until the rendered text stops changing, so the text
    re-parses to itself. It ends: after the first pass a pass only removes
    nodes (de-duplication, folding, implied tests) or leaves the tree as it was.

    >>> from lakelayout.expr.nodes import Column, Literal
    >>> a = Compare("<", Column("a"), Literal(1))
    >>> normalize(Not(And((a, And((BoolConst(True), BoolConst(None))))))).sql()
    'a >= 1'
    """
    text = None  # rendered only after a pass: the input may be nested too deep to render
    while True:
        for rule in rules:
            pred = rule(pred)
        again = pred.sql()
        if again == text:
            return pred
        text = again


# ---------------------------------------------------------------- helpers


def _rewrite(pred: Predicate, rule: Callable[[Expr], Expr]) -> Predicate:
    out = pred.transform(rule)
    assert isinstance(out, Predicate)
    return out


def _merged(kind: type[And] | type[Or], children: tuple[Predicate, ...]) -> tuple[Predicate, ...]:
    """Children with same-kind junction children spliced in (one level: rules run bottom-up)."""
    if not any(isinstance(c, kind) for c in children):
        return children
    out: list[Predicate] = []
    for child in children:
        out.extend(child.children_ if isinstance(child, kind) else (child,))
    return tuple(out)


def _junction(kind: type[And] | type[Or], kids: Sequence[Predicate], *, empty: bool) -> Predicate:
    if not kids:
        return BoolConst(empty)
    if len(kids) == 1:
        return kids[0]
    return kind(tuple(kids))


def _null_rejected_terms(pred: Predicate) -> tuple[Expr, ...]:
    """Terms whose NULL makes ``pred`` NULL (one level: the leaf's own operands)."""
    return _NullRejected().visit(pred)


class _NullRejected(PredicateVisitor[tuple[Expr, ...]]):
    """The operands a predicate node is NULL on: its term for value tests, none otherwise."""

    def _term(
        self, node: Compare | In | Like | StartsWith | EndsWith | BoolTerm
    ) -> tuple[Expr, ...]:
        return (node.term,)

    visit_compare = visit_in = visit_like = visit_starts_with = _term
    visit_ends_with = visit_bool_term = _term

    def visit_term_compare(self, node: TermCompare) -> tuple[Expr, ...]:
        return (node.left, node.right)

    def _none(self, node: Predicate) -> tuple[Expr, ...]:
        """IS NULL is never NULL; junctions, constants and opaque text are not one test."""
        return ()

    visit_is_null = visit_and = visit_or = visit_not = visit_bool_const = visit_opaque = _none


def canonical_args(name: str, args: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """Argument order of a function: commutative operators sort their operands by ``sql()``."""
    if name in COMMUTATIVE and len(args) == 2:
        return tuple(sorted(args, key=lambda a: a.sql()))
    return args


def canonical_func(func: Func) -> Func:
    return Func(func.name, canonical_args(func.name, func.args), func.dtype)


__all__ = [
    "RULES",
    "canonical_args",
    "canonical_func",
    "canonical_order",
    "drop_implied_not_null",
    "flatten",
    "fold_constants",
    "normalize",
    "null_as_false",
    "push_not_down",
]
