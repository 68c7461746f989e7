"""Workload features and per-row feature bit vectors (skipping-oriented partitioning).

A *feature* is a filter predicate taken from the workload, or a conjunction of
such predicates (thesis §1.2.6, after Sun et al.'s SOP): any boolean SQL works,
``month(ts) = 12`` and ``lower(url) LIKE '%x%'`` included, because a feature is
only ever *evaluated* on rows, never reasoned about with min/max.

A feature is a set of conjuncts, keyed by the normalized SQL of its conjuncts
(sorted, joined with `` AND ``). Its weight is its frequency: the number of
workload queries that *imply* it, i.e. whose top-level conjuncts include every
conjunct of the feature (exact key match).

Every row gets an m-bit vector (m <= 64, one ``uint64`` per row): bit i is 1
iff feature i is TRUE on the row (NULL and FALSE give 0). A block's vector is
the OR of its rows' vectors, so

    bit i of a block is 0  =>  no row of the block satisfies feature i
                           =>  the block holds no row of any query implying i,

which is what makes skipping on bit vectors safe: :meth:`FeatureSet.might_match`
keeps a block unless some feature implied by the query has a 0 bit there
(and it recurses through OR: ``p OR q`` is ruled out where both are).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError, PredicateError
from lakelayout.expr.codec import schema_from_json, schema_to_json
from lakelayout.expr.evaluate import Evaluator
from lakelayout.expr.nodes import And, BoolConst, Or, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.expr.visitor import PredicateVisitor

MAX_FEATURES = 64


@dataclass(frozen=True)
class Feature:
    """One feature: a conjunction of predicates with its workload weight."""

    conjuncts: tuple[Predicate, ...]
    weight: float

    @property
    def keys(self) -> frozenset[str]:
        """Normalized SQL text of each conjunct."""
        return frozenset(c.sql() for c in self.conjuncts)

    @property
    def key(self) -> str:
        """The feature's identity: its conjuncts' SQL, sorted, joined by AND."""
        return " AND ".join(sorted(self.keys))

    @property
    def predicate(self) -> Predicate:
        """The feature as one predicate (the conjunct itself, or their AND)."""
        if len(self.conjuncts) == 1:
            return self.conjuncts[0]
        return And(self.conjuncts)


# ---------------------------------------------------------------- predicate helpers


def conjuncts_of(pred: Predicate) -> tuple[Predicate, ...]:
    """Top-level conjuncts of ``pred`` (nested ANDs flattened, TRUE dropped, deduplicated).

    The result is sorted by SQL text, so equal conjunctions give equal tuples.
    """
    found: dict[str, Predicate] = {}
    stack: list[Predicate] = [pred]
    while stack:
        node = stack.pop()
        if isinstance(node, And):
            stack.extend(node.children_)
        elif isinstance(node, BoolConst) and node.value:
            continue
        else:
            found.setdefault(node.sql(), node)
    return tuple(found[k] for k in sorted(found))


def is_usable(pred: Predicate) -> bool:
    """Whether ``pred`` can be a feature: evaluable here and not a constant."""
    return not isinstance(pred, BoolConst) and not pred.has_opaque()


def _parse(
    item: str | Predicate, schema: pa.Schema, functions: Mapping[str, pa.DataType]
) -> Predicate:
    if isinstance(item, Predicate):
        return item
    if not isinstance(item, str):
        raise LayoutError(f"workload item {item!r} is neither SQL text nor a Predicate")
    return parse_predicate(item, schema, functions=dict(functions) or None)


# ---------------------------------------------------------------- feature selection


def _candidates(
    queries: Sequence[tuple[Predicate, ...]], conjunctions: bool
) -> dict[frozenset[str], tuple[Predicate, ...]]:
    """Every usable conjunct, plus each query's whole usable conjunction."""
    out: dict[frozenset[str], tuple[Predicate, ...]] = {}
    for conj in queries:
        usable = tuple(c for c in conj if is_usable(c))
        for c in usable:
            out.setdefault(frozenset([c.sql()]), (c,))
        if conjunctions and len(usable) > 1:
            out.setdefault(frozenset(c.sql() for c in usable), usable)
    return out


def _implying_queries(keys: frozenset[str], query_keys: Sequence[frozenset[str]]) -> frozenset[int]:
    return frozenset(i for i, qk in enumerate(query_keys) if keys <= qk)


def _drop_subsumed(support: dict[frozenset[str], frozenset[int]]) -> list[frozenset[str]]:
    """Drop a feature when a strictly more specific one serves exactly the same queries.

    If G ⊋ F (as conjunct sets) then every query implying G implies F; when the
    two sets of queries are equal, G rules out at least every block F does for
    each of those queries, so F adds nothing.
    """
    kept = []
    for keys, queries in support.items():
        dominated = any(
            other > keys and support[other] == queries for other in support if other != keys
        )
        if not dominated:
            kept.append(keys)
    return kept


@dataclass(frozen=True)
class FeatureSet:
    """An ordered set of at most 64 features bound to a table schema."""

    features: tuple[Feature, ...]
    schema: pa.Schema
    functions: tuple[tuple[str, pa.DataType], ...] = ()

    def __post_init__(self) -> None:
        if not self.features:
            raise LayoutError("a feature set needs at least one feature")
        if len(self.features) > MAX_FEATURES:
            raise LayoutError(
                f"{len(self.features)} features given; at most {MAX_FEATURES} fit a bit vector"
            )

    # ------------------------------------------------------------ construction

    @classmethod
    def from_workload(
        cls,
        workload: Iterable[str | Predicate],
        schema: pa.Schema,
        *,
        max_features: int = MAX_FEATURES,
        min_frequency: int = 1,
        conjunctions: bool = True,
        functions: Mapping[str, pa.DataType] | None = None,
    ) -> FeatureSet:
        """Features of a workload: its distinct conjuncts (and whole conjunctions).

        Weight = number of queries implying the feature. Features below
        ``min_frequency`` are dropped, then features subsumed by a more
        specific one with the same queries, then the ``max_features`` heaviest
        are kept (ties: fewer conjuncts first, then key order).
        """
        if not 1 <= max_features <= MAX_FEATURES:
            raise LayoutError(f"max_features={max_features} must be between 1 and {MAX_FEATURES}")
        if min_frequency < 1:
            raise LayoutError(f"min_frequency={min_frequency} must be at least 1")
        funcs = dict(functions or {})
        queries = [conjuncts_of(_parse(item, schema, funcs)) for item in workload]
        if not queries:
            raise LayoutError("the workload is empty: SOP needs filter predicates to cluster on")
        query_keys = [frozenset(c.sql() for c in q) for q in queries]
        cands = _candidates(queries, conjunctions)
        support = {k: _implying_queries(k, query_keys) for k in cands}
        support = {k: q for k, q in support.items() if len(q) >= min_frequency}
        if not support:
            raise LayoutError(
                f"no usable feature in a workload of {len(queries)} queries "
                f"(min_frequency={min_frequency}; constants and opaque predicates do not count)"
            )
        chosen = _drop_subsumed(support)
        chosen.sort(key=lambda k: (-len(support[k]), len(k), " AND ".join(sorted(k))))
        feats = tuple(Feature(cands[k], float(len(support[k]))) for k in chosen[:max_features])
        return cls(feats, schema, tuple(sorted(funcs.items())))

    # ------------------------------------------------------------ basic facts

    def __len__(self) -> int:
        return len(self.features)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f.key for f in self.features)

    @property
    def weights(self) -> np.ndarray:
        """float64 weight per feature, in bit order."""
        return np.array([f.weight for f in self.features], dtype=np.float64)

    @property
    def full_mask(self) -> int:
        """The vector with every feature bit set."""
        return (1 << len(self.features)) - 1

    # ------------------------------------------------------------ vectors

    def vectors(self, data: pa.Table | pa.RecordBatch) -> np.ndarray:
        """uint64 bit vector per row: bit i set iff feature i is TRUE on the row, or may
        be: a feature Spark fails on for some row of ``data`` (``k + 1 > 0`` overflowing)
        sets its bit on every row, so no block is ruled out by it (SOP and SOP+Z refused
        to fit such a workload, or to place such rows, where Qd-tree and Pando fit it:
        an audit)."""
        out = np.zeros(data.num_rows, dtype=np.uint64)
        ev = Evaluator(data)
        for i, feature in enumerate(self.features):
            try:
                hit = np.asarray(ev.mask(feature.predicate), dtype=bool)
            except PredicateError:
                hit = np.ones(data.num_rows, dtype=bool)
            out |= hit.astype(np.uint64) << np.uint64(i)
        return out

    def parse(self, item: str | Predicate) -> Predicate:
        """Bind a query against the feature set's schema."""
        return _parse(item, self.schema, dict(self.functions))

    def implied_mask(self, item: str | Predicate) -> int:
        """Bits of the features the query implies (their conjuncts are all query conjuncts)."""
        keys = frozenset(c.sql() for c in conjuncts_of(self.parse(item)))
        return _mask_within(self.features, keys)

    def might_match(self, item: str | Predicate, block_vectors: np.ndarray) -> np.ndarray:
        """Per block: False only if the block's OR-vector proves no row matches.

        A conjunction is ruled out where any implied feature bit is 0, or
        where any of its OR conjuncts is ruled out in every branch.
        """
        vecs = np.asarray(block_vectors, dtype=np.uint64)
        return _keep(self.parse(item), vecs, self.features)

    # ------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": schema_to_json(self.schema),
            "functions": schema_to_json(pa.schema(list(self.functions))),
            "features": [
                {"conjuncts": [c.sql() for c in f.conjuncts], "weight": f.weight}
                for f in self.features
            ],
        }

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> FeatureSet:
        try:
            schema = schema_from_json(state["schema"])
            funcs = {f.name: f.type for f in schema_from_json(state["functions"])}
            raw = state["features"]
            feats = tuple(
                Feature(
                    tuple(
                        parse_predicate(s, schema, functions=funcs or None) for s in f["conjuncts"]
                    ),
                    float(f["weight"]),
                )
                for f in raw
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"not a feature-set document: {exc!r}") from exc
        return cls(feats, schema, tuple(sorted(funcs.items())))

    def describe(self, limit: int = 8) -> list[str]:
        lines = [f"  bit {i:2d}  w={f.weight:g}  {f.key}" for i, f in enumerate(self.features)]
        if len(lines) > limit:
            lines = [*lines[:limit], f"  ... {len(lines) - limit} more"]
        return lines


def _mask_within(features: Sequence[Feature], keys: frozenset[str]) -> int:
    mask = 0
    for i, f in enumerate(features):
        if f.keys <= keys:
            mask |= 1 << i
    return mask


def _keep(pred: Predicate, vecs: np.ndarray, features: Sequence[Feature]) -> np.ndarray:
    return _FeatureKeep(vecs, features).visit(pred)


class _FeatureKeep(PredicateVisitor[np.ndarray]):
    """Per block: False only where the block's OR-vector proves no row satisfies the node.

    A node implies the features whose conjuncts are all among its own
    conjuncts: a block lacking one of those bits holds no matching row. An OR
    also needs one of its branches to be possible.
    """

    def __init__(self, vecs: np.ndarray, features: Sequence[Feature]) -> None:
        self.vecs = vecs
        self.features = features

    def _implied(self, conjuncts: Sequence[Predicate]) -> np.ndarray:
        mask = np.uint64(_mask_within(self.features, frozenset(c.sql() for c in conjuncts)))
        return np.asarray((self.vecs & mask) == mask, dtype=bool)

    def visit_and(self, node: And) -> np.ndarray:
        conj = conjuncts_of(node)
        keep = self._implied(conj)
        for c in conj:
            keep &= self.visit(c)
        return keep

    def visit_or(self, node: Or) -> np.ndarray:
        branches = np.zeros(len(self.vecs), dtype=bool)
        for child in node.children_:
            branches |= self.visit(child)
        return self._implied([node]) & branches

    def _leaf(self, node: Predicate) -> np.ndarray:
        return self._implied([node])

    visit_compare = visit_term_compare = visit_in = visit_is_null = _leaf
    visit_like = visit_starts_with = visit_ends_with = visit_bool_term = _leaf
    visit_not = visit_bool_const = visit_opaque = _leaf


# ---------------------------------------------------------------- bit helpers


def popcount(vectors: np.ndarray) -> np.ndarray:
    """Number of 1 bits of each uint64."""
    return np.bitwise_count(np.asarray(vectors, dtype=np.uint64)).astype(np.int64)


def bit_matrix(vectors: np.ndarray, n_bits: int) -> np.ndarray:
    """(len(vectors), n_bits) uint8 matrix of the bits, bit 0 first."""
    shifts = np.arange(n_bits, dtype=np.uint64)
    vecs = np.asarray(vectors, dtype=np.uint64)
    return ((vecs[:, None] >> shifts[None, :]) & np.uint64(1)).astype(np.uint8)


def zero_weight(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ_j w_j (1 - v_j) for each vector: the weight of the features it rules out."""
    w = np.asarray(weights, dtype=np.float64)
    ones = bit_matrix(vectors, len(w)).astype(np.float64) @ w
    return float(w.sum()) - ones
