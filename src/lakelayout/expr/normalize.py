"""Normalization rules on bound predicate trees, each ``rule(pred) -> pred``.

* ``flatten``: ``(a AND b) AND c`` -> ``a AND b AND c`` (same for OR).
* ``fold_constants``: ``p AND FALSE`` -> FALSE, ``p AND TRUE`` -> ``p``,
  ``p OR TRUE`` -> TRUE, ``p OR FALSE`` -> ``p``; an empty AND is TRUE, an
  empty OR is FALSE. These hold in three-valued logic, not only in WHERE.
* ``canonical_order``: children of AND / OR sorted by their ``sql()`` and
  de-duplicated (``p AND p`` -> ``p``), so the rendered text is a stable
  feature key regardless of how the user ordered the clauses.

``simplify`` applies all of them bottom-up.
"""

from __future__ import annotations

from lakelayout.expr.nodes import And, BoolConst, Expr, Func, Or, Predicate

COMMUTATIVE = frozenset({"+", "*"})


def simplify(pred: Predicate) -> Predicate:
    """Flatten, fold constants and order AND / OR children, bottom-up."""
    if isinstance(pred, And | Or):
        kids = [simplify(c) for c in pred.children_]
        return _junction(type(pred), kids)
    return pred


def _junction(kind: type[And] | type[Or], kids: list[Predicate]) -> Predicate:
    absorbing = kind is Or  # TRUE absorbs an OR, FALSE absorbs an AND
    flat: list[Predicate] = []
    for kid in kids:
        flat.extend(kid.children_ if isinstance(kid, kind) else (kid,))
    kept: dict[str, Predicate] = {}
    for kid in flat:
        if isinstance(kid, BoolConst):
            if kid.value == absorbing:
                return BoolConst(absorbing)
            continue
        kept.setdefault(kid.sql(), kid)
    if not kept:
        return BoolConst(not absorbing)
    if len(kept) == 1:
        return next(iter(kept.values()))
    ordered = tuple(kept[key] for key in sorted(kept))
    return kind(ordered)


def canonical_args(name: str, args: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """Argument order of a function: commutative operators sort their operands by ``sql()``."""
    if name in COMMUTATIVE and len(args) == 2:
        return tuple(sorted(args, key=lambda a: a.sql()))
    return args


def canonical_func(func: Func) -> Func:
    return Func(func.name, canonical_args(func.name, func.args), func.dtype)
