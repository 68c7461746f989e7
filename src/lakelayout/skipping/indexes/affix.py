"""Prefix(n) and Suffix(n): the distinct n-character prefixes / suffixes per file (Table I).

Let ``q(v) = v[:n]`` (the whole value when shorter). A value ``v`` starts with
``p`` only if ``q(v)`` starts with ``p[:n]``: for ``len(p) >= n`` that says
``q(v) = p[:n]``, for shorter ``p`` it says ``q(v)`` starts with ``p``. So

    startswith(v, p)  =>  some stored q starts with p[:n]

for every ``p`` -- the clause of ``startswith``, ``LIKE 'p%...'`` (its literal
prefix), ``= 'p'`` and IN. When ``len(p) <= n`` the implication is an
equivalence, which makes ``NOT startswith(v, p)`` representable too: some
stored ``q`` does not start with ``p``. Suffixes mirror all of this with
``q(v) = v[-n:]``, ``endswith`` and ``LIKE '...%s'``. Lengths count code points,
as Spark's string functions do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.like import like_prefix, tokenize
from lakelayout.expr.nodes import Compare, EndsWith, In, Like, Predicate, StartsWith
from lakelayout.skipping.indexes.base import (
    Batch,
    Clause,
    TermIndex,
    Udf,
    any_per_file,
    check_int,
    register,
)
from lakelayout.skipping.indexes.values import ValueListCollector


class _AffixIndex(TermIndex):
    """Shared machinery; ``from_end`` selects suffixes."""

    from_end = False

    def __init__(
        self,
        expression: str,
        *,
        length: int,
        functions: Mapping[str, pa.DataType | str] | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        super().__init__(expression, functions=functions, udfs=udfs)
        check_int(type(self).__name__, "length", length)
        self.length = length

    def params(self) -> dict[str, Any]:
        return {**super().params(), "length": self.length}

    def supports(self, dtype: pa.DataType) -> bool:
        return pa.types.is_string(dtype)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.list_(pa.string())

    def cut(self, values: pa.Array) -> pa.Array:
        """``q(v)`` of every value."""
        if self.from_end:
            return pc.utf8_slice_codeunits(values, -self.length)
        return pc.utf8_slice_codeunits(values, 0, self.length)

    def cut_text(self, text: str) -> str:
        return text[-self.length :] if self.from_end else text[: self.length]

    def collector(self) -> _AffixCollector:
        return _AffixCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        if not self.matches(node):
            return None
        wanted = self.wanted(node)
        if wanted is not None:
            exact = isinstance(node, StartsWith | EndsWith)
            return AffixClause(self, wanted, negated=False, exact=exact)
        affix = self.negated_affix(node)
        if affix is not None and len(affix) <= self.length:
            return AffixClause(self, [affix], negated=True)
        return None

    def wanted(self, node: Predicate) -> list[str] | None:
        """Affixes of which a matching value must have one (positive forms only)."""
        if isinstance(node, Compare) and node.op == "=" and isinstance(node.value.value, str):
            return [node.value.value]
        if isinstance(node, In) and not node.negated:
            texts = [v.value for v in node.values if v.value is not None]
            strings = [t for t in texts if isinstance(t, str)]
            return strings if len(strings) == len(texts) else None
        if isinstance(node, Like) and not node.negated:
            affix = self.like_affix(node.pattern)
            return [affix] if affix else None
        own = EndsWith if self.from_end else StartsWith
        if isinstance(node, own) and not node.negated:
            return [node.suffix if isinstance(node, EndsWith) else node.prefix]
        return None

    def negated_affix(self, node: Predicate) -> str | None:
        own = EndsWith if self.from_end else StartsWith
        if isinstance(node, own) and node.negated:
            return node.suffix if isinstance(node, EndsWith) else node.prefix
        return None

    def like_affix(self, pattern: str) -> str | None:
        """Literal text before the first (after the last) wildcard of a LIKE pattern."""
        if not self.from_end:
            parsed = like_prefix(pattern)
            return parsed[0] if parsed is not None else None
        tokens = tokenize(pattern)
        tail: list[str] = []
        for token in reversed(tokens):
            if token.wildcard:
                break
            tail.append(token.char)
        return "".join(reversed(tail))


class _AffixCollector(ValueListCollector):
    def __init__(self, index: _AffixIndex) -> None:
        super().__init__(index)
        self.affix_index = index

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        self.parts.append(pc.unique(self.affix_index.cut(values.drop_null())))
        if len(self.parts) > 8:
            self.parts = [self.distinct()]

    def distinct(self) -> pa.Array:
        if not self.parts:
            return pa.array([], type=pa.string())
        unique = pc.unique(pa.concat_arrays(self.parts))
        return unique.take(pc.sort_indices(unique))


class AffixClause(Clause):
    """Some stored affix starts (ends) with one of ``affixes`` cut to n; negated: some does not.

    ``exact`` marks a clause made for ``startswith`` / ``endswith`` itself: only
    then is "some stored affix does not start with p" its negation (for ``= 'p'``
    or a LIKE, the node's negation is not a prefix test).
    """

    def __init__(
        self, index: _AffixIndex, affixes: Sequence[str], *, negated: bool, exact: bool = True
    ) -> None:
        self.index = index
        self.affixes = list(affixes)
        self.negated = negated
        self.exact = exact

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        stored = pc.list_flatten(meta)
        test = pc.ends_with if self.index.from_end else pc.starts_with
        if self.negated:
            hit = pc.invert(test(stored, self.affixes[0]))
        else:
            hit = pa.array(np.zeros(len(stored), dtype=bool))
            for affix in self.affixes:
                hit = pc.or_(hit, test(stored, self.index.cut_text(affix)))
        mask = np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)
        return any_per_file(meta, mask)

    def negate(self) -> Clause | None:
        if self.negated:
            return AffixClause(self.index, self.affixes, negated=False)
        if self.exact and len(self.affixes) == 1 and len(self.affixes[0]) <= self.index.length:
            return AffixClause(self.index, self.affixes, negated=True)
        return None


@register
class Prefix(_AffixIndex):
    """Distinct ``length``-character prefixes per file: ``startswith`` / ``LIKE 'p%'``.

    >>> idx = Prefix("url", length=3).bind(pa.schema([("url", pa.string())]))
    >>> idx.collect(pa.table({"url": ["https://a", "http://b", "ft"]}))
    ['ft', 'htt']
    """

    kind = "prefix"


@register
class Suffix(_AffixIndex):
    """Distinct ``length``-character suffixes per file: ``endswith`` / ``LIKE '%s'``."""

    kind = "suffix"
    from_end = True
