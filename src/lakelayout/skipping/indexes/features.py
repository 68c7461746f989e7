"""Features: one bit per boolean SQL predicate per file (the SOP bit vector, thesis §4.1.3).

For each declared predicate ``p_i`` a file stores two bits: ``t_i`` -- some row
makes ``p_i`` TRUE -- and ``f_i`` -- some row makes it FALSE (NULL sets
neither). A query node whose canonical SQL is ``p_i`` is represented by
``t_i``; a node that is ``p_i``'s negation (``NOT p_i`` normalized, e.g.
``status != 'error'``) by ``f_i``; and each clause negates into the other, so
the merge can use them under NOT. Any predicate lakelayout can evaluate on
Arrow data works (``month(ts) = 12``, ``m['courier'] = 'ups'``, LIKE), because
bits are computed by evaluating the predicate on the rows, never by
reasoning about bounds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr.evaluate import evaluate, evaluate_all
from lakelayout.expr.nodes import Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes.base import Batch, Clause, Index, Udf, null_mask, register

MAX_FEATURES = 64
#: bound indexes by (predicate texts, schema); a bound index is never changed after
#: binding (its labels are built once, from its predicates alone), so binders share it
_BOUND: dict[tuple[tuple[str, ...], pa.Schema], Features] = {}
_MAX_BOUND = 256


@register
class Features(Index):
    """Feature bits per file for a list of boolean SQL predicates.

    >>> idx = Features(["s = 'error'"]).bind(pa.schema([("s", pa.string())]))
    >>> idx.collect(pa.table({"s": ["ok", None]}))
    {'t0': False, 'f0': True}
    """

    kind = "features"

    def __init__(self, predicates: Sequence[str]) -> None:
        if isinstance(predicates, str) or not predicates:
            raise InvalidOption(
                f"Features needs a non-empty list of SQL predicates, got {predicates!r}"
            )
        if len(predicates) > MAX_FEATURES:
            raise InvalidOption(
                f"Features takes at most {MAX_FEATURES} predicates, got {len(predicates)}"
            )
        self.texts = [str(p) for p in predicates]
        self._preds: list[Predicate] | None = None
        #: a bound index's predicates each followed by its negation: the bits ``t<i>`` and
        #: ``f<i>`` are where they hold
        self._bits: list[Predicate] | None = None
        #: a bound index's labels by the SQL of the node they label (built on first use)
        self._labels: dict[str, Clause] | None = None

    @property
    def key(self) -> str:
        if self._preds is not None:
            return "; ".join(p.sql() for p in self._preds)
        return "; ".join(t.strip() for t in self.texts)

    @property
    def predicates(self) -> list[Predicate]:
        if self._preds is None:
            raise self._not_bound()
        return self._preds

    def _not_bound(self) -> InvalidOption:
        return InvalidOption(f"index {self.name} is not bound: call bind(schema) first")

    def columns(self) -> frozenset[str] | None:
        if self._preds is None:
            return None
        return frozenset().union(*(p.columns() for p in self._preds))

    def bind(self, schema: pa.Schema) -> Features:
        """Parsed, negated and checked on ``schema``; the same declaration bound to the
        same schema again is the same bound index (a table's catalog binds its indexes
        for every plan: 8.6 ms per feature index of 2-6 TPC-H predicates)."""
        key = (tuple(self.texts), schema)
        bound = _BOUND.get(key)
        if bound is None:
            bound = self._bind(schema)
            if len(_BOUND) >= _MAX_BOUND:
                _BOUND.clear()
            _BOUND[key] = bound
        return bound

    def _bind(self, schema: pa.Schema) -> Features:
        preds = [parse_predicate(text, schema) for text in self.texts]
        bits = [q for p in preds for q in (p, p.negate())]
        empty = schema.empty_table()
        for k, pred in enumerate(bits):
            try:
                evaluate(pred, empty)
            except PredicateError as err:
                raise InvalidOption(
                    f"Features predicate {self.texts[k // 2]!r} cannot be evaluated on data: {err}"
                ) from None
        bound = copy.copy(self)
        bound._preds, bound._bits, bound._labels = preds, bits, None
        return bound

    def _bit_predicates(self) -> list[Predicate]:
        """Feature ``i``'s predicate at ``2 i``, its negation at ``2 i + 1``."""
        if self._bits is None:
            raise self._not_bound()
        return self._bits

    @property
    def arrow_type(self) -> pa.DataType:
        fields = []
        for i in range(len(self.texts)):
            fields += [(f"t{i}", pa.bool_()), (f"f{i}", pa.bool_())]
        return pa.struct(fields)

    def collector(self) -> _FeatureCollector:
        return _FeatureCollector(self._bit_predicates())

    def collect_blocks(self, rows: pa.Table, starts: Sequence[int]) -> list[Any]:
        """Every block's bits from one evaluation of each predicate over all rows."""
        if not len(starts):
            return []
        at = np.asarray(starts, dtype=np.int64)
        try:
            masks = evaluate_all(self._bit_predicates(), rows)
        except PredicateError:  # a block where it fails is unknown: decide block by block
            return super().collect_blocks(rows, starts)
        bits = {}
        for i in range(len(masks) // 2):
            bits[f"t{i}"] = np.logical_or.reduceat(masks[2 * i], at)
            bits[f"f{i}"] = np.logical_or.reduceat(masks[2 * i + 1], at)
        return [{name: bool(v[j]) for name, v in bits.items()} for j in range(len(at))]

    def label(self, node: Predicate) -> Clause | None:
        """The feature bit ``node`` is (feature i, or its negation), by SQL text; the
        first feature that matches wins, its own text before its negation's."""
        if self._labels is None:
            labels: dict[str, Clause] = {}
            for k, pred in enumerate(self._bit_predicates()):
                labels.setdefault(pred.sql(), FeatureClause(k // 2, k % 2 == 0))
            self._labels = labels
        return self._labels.get(node.sql())

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expression": list(self.texts), "params": {}}

    @classmethod
    def from_params(
        cls, expression: Any, params: dict[str, Any], udfs: Mapping[str, Udf] | None
    ) -> Index:
        if not isinstance(expression, list):
            raise InvalidOption(f"Features expects a list of predicates, got {expression!r}")
        return cls(expression, **params)


class _FeatureCollector:
    def __init__(self, bits: list[Predicate]) -> None:
        #: feature ``i``'s predicate at ``2 i``, its negation at ``2 i + 1``
        self.bits = bits
        self.any_true = np.zeros(len(bits) // 2, dtype=bool)
        self.any_false = np.zeros(len(bits) // 2, dtype=bool)
        self.failed = False

    def add(self, batch: Batch) -> None:
        try:
            masks = evaluate_all(self.bits, batch)
        except PredicateError:
            self.failed = True
            return
        for i in range(len(self.any_true)):
            self.any_true[i] |= bool(masks[2 * i].any())
            self.any_false[i] |= bool(masks[2 * i + 1].any())

    def result(self) -> dict[str, bool] | None:
        if self.failed:
            return None
        out: dict[str, bool] = {}
        for i in range(len(self.any_true)):
            out[f"t{i}"] = bool(self.any_true[i])
            out[f"f{i}"] = bool(self.any_false[i])
        return out


class FeatureClause(Clause):
    """Some row makes feature ``i`` TRUE (``truth``) or FALSE (``not truth``)."""

    def __init__(self, i: int, truth: bool) -> None:
        self.i = i
        self.truth = truth

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        field = f"{'t' if self.truth else 'f'}{self.i}"
        names = [meta.type.field(j).name for j in range(meta.type.num_fields)]
        if field not in names:
            return np.ones(len(meta), dtype=bool)
        bits = meta.flatten()[names.index(field)]
        values = np.asarray(pc.fill_null(bits, True).to_numpy(zero_copy_only=False), dtype=bool)
        return values | null_mask(meta)

    def negate(self) -> Clause:
        return FeatureClause(self.i, not self.truth)
