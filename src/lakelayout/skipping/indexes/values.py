"""Value lists, bloom filters and the hybrid of both (Table I, §IV-E).

* :class:`ValueList` stores a file's distinct non-null values. A node over the
  indexed term can match a file only if *some stored value* satisfies it, so
  its clause simply evaluates the node on the stored values with Spark's
  semantics (``=``, IN, ``!=``, NOT IN, ranges, LIKE / startswith / endswith --
  the LIKE support xskipper documented but never shipped). The negation of the
  clause w.r.t. the node is the same test on ``node.negate()``: a file can hold
  a row where the node is FALSE only if some stored value makes it FALSE.
* :class:`BloomFilter` stores ``k`` hashes of every value in ``m`` bits sized
  for ``expected_values`` distinct values at false-positive rate ``fpp``
  (``m = -n ln p / ln² 2``, ``k = (m / n) ln 2``); it labels ``=`` and IN.
* :class:`Hybrid` keeps a value list up to ``max_values`` distinct values per
  file and a bloom filter above: the paper's threshold of 10,000 minimizes
  bytes read (metadata + data) for 64 MB objects of 64-character strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import Compare, In, IsNull, Predicate
from lakelayout.skipping.indexes.base import (
    Batch,
    Clause,
    TermIndex,
    Udf,
    any_per_file,
    check_int,
    check_positive,
    literal_values,
    null_mask,
    register,
    values_satisfying,
)
from lakelayout.skipping.indexes.hashing import bloom_positions, hash_values, hashable

DEFAULT_HYBRID_THRESHOLD = 10_000
MAX_HASHES = 30


# ---------------------------------------------------------------- value list


def _list_label(index: TermIndex, node: Predicate) -> ValuesClause | None:
    """A value-set clause for a single-term node (not ``IS NULL``: nulls are not stored)."""
    if not index.matches(node) or (isinstance(node, IsNull) and not node.negated):
        return None
    return ValuesClause(index.on_values(node))


def _distinct(values: pa.Array) -> pa.Array:
    unique = pc.unique(values.drop_null())
    return unique.take(pc.sort_indices(unique))


@register
class ValueList(TermIndex):
    """The distinct values of a column or expression per file.

    >>> idx = ValueList("l_shipmode").bind(pa.schema([("l_shipmode", pa.string())]))
    >>> idx.collect(pa.table({"l_shipmode": ["RAIL", None, "AIR", "RAIL"]}))
    ['AIR', 'RAIL']
    """

    kind = "valuelist"

    def supports(self, dtype: pa.DataType) -> bool:
        return not (pa.types.is_nested(dtype) or pa.types.is_null(dtype))

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.dtype)

    def collector(self) -> ValueListCollector:
        return ValueListCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        return _list_label(self, node)


class ValueListCollector:
    def __init__(self, index: TermIndex) -> None:
        self.index = index
        self.parts: list[pa.Array] = []
        self.failed = False

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        self.parts.append(_distinct(values))
        if len(self.parts) > 8:
            self.parts = [self.distinct()]

    def distinct(self) -> pa.Array:
        if not self.parts:
            return pa.array([], type=self.index.dtype)
        return _distinct(pa.concat_arrays(self.parts))

    def result(self) -> list[Any] | None:
        return None if self.failed else self.distinct().to_pylist()


class ValuesClause(Clause):
    """Some stored value satisfies ``node`` (a node over :data:`VALUE_COLUMN`)."""

    def __init__(self, node: Predicate) -> None:
        self.node = node

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        values = pc.list_flatten(meta)
        return any_per_file(meta, values_satisfying(self.node, values))

    def negate(self) -> Clause | None:
        negated = self.node.negate()
        if isinstance(negated, IsNull) and not negated.negated:
            return None
        return ValuesClause(negated)


# ---------------------------------------------------------------- bloom filter


def bloom_shape(fpp: float, expected_values: int) -> tuple[int, int]:
    """``(bits, hashes)`` of a bloom filter for ``expected_values`` at rate ``fpp``.

    >>> bloom_shape(0.01, 1000)
    (9592, 7)
    """
    bits = math.ceil(-expected_values * math.log(fpp) / math.log(2) ** 2)
    bits = max(64, -(-bits // 8) * 8)
    hashes = max(1, min(MAX_HASHES, round(bits / expected_values * math.log(2))))
    return bits, hashes


class Bloom:
    """Building and probing one shape of bloom filter; stored as ``bytes([k]) + bits``."""

    def __init__(self, bits: int, hashes: int) -> None:
        self.bits = bits
        self.hashes = hashes

    def empty(self) -> np.ndarray:
        return np.zeros(self.bits, dtype=bool)

    def add(self, filled: np.ndarray, values: pa.Array) -> None:
        # each distinct value hashed once (values equal to Arrow hash alike, see hash_values)
        values = pc.unique(values.drop_null())
        if len(values):
            filled[bloom_positions(hash_values(values), self.bits, self.hashes).ravel()] = True

    def encode(self, filled: np.ndarray) -> bytes:
        return bytes([self.hashes]) + np.packbits(filled).tobytes()

    def might_contain(self, meta: pa.Array, values: pa.Array) -> np.ndarray:
        """Per file: some of ``values`` may be in the filter (null/foreign filters -> True)."""
        n = len(meta)
        out = np.ones(n, dtype=bool)
        size = 1 + self.bits // 8
        lengths = pc.fill_null(pc.binary_length(meta), -1).to_numpy(zero_copy_only=False)
        usable = np.flatnonzero(np.asarray(lengths) == size)
        if len(usable) == 0:
            return out
        ours = _fixed_rows(meta, usable, np.zeros(1, dtype=np.int64))[:, 0] == self.hashes
        found = np.zeros(len(usable), dtype=bool)
        if len(values):
            positions = bloom_positions(hash_values(values), self.bits, self.hashes)
            # values in chunks of at most _PROBE_CELLS bits over the files not yet found:
            # files x values x hashes at once took 113 bytes per file and value (2.3 GB
            # for 20,000 values over 2,000 files; an audit)
            step = max(1, _PROBE_CELLS // (len(usable) * self.hashes))
            for start in range(0, len(positions), step):
                todo = np.flatnonzero(~found)
                if len(todo) == 0:
                    break
                chunk = positions[start : start + step]
                flat = chunk.ravel()
                needed = _fixed_rows(meta, usable[todo], 1 + (flat >> 3))
                shifts = (7 - (flat & 7)).astype(np.uint8)
                bits = ((needed >> shifts[None, :]) & 1).astype(bool)
                per_value = np.all(bits.reshape(len(todo), len(chunk), self.hashes), axis=2)
                found[todo] = np.any(per_value, axis=1)
        out[usable] = found | ~ours
        return out


def _probe_values(index: TermIndex, node: Predicate) -> pa.Array | None:
    """The literal values an ``=`` / IN node asks for (``None``: not a bloom question)."""
    if not index.matches(node):
        return None
    if isinstance(node, Compare) and node.op == "=":
        return literal_values([node.value], index.dtype)
    if isinstance(node, In) and not node.negated:
        return literal_values(node.values, index.dtype)
    return None


@register
class BloomFilter(TermIndex):
    """A bloom filter of a column's (or expression's) values per file; labels ``=`` and IN."""

    kind = "bloomfilter"

    def __init__(
        self,
        expression: str,
        *,
        fpp: float = 0.01,
        expected_values: int = 10_000,
        functions: Mapping[str, pa.DataType | str] | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        super().__init__(expression, functions=functions, udfs=udfs)
        check_positive(type(self).__name__, "fpp", fpp, upper=1)
        check_int(type(self).__name__, "expected_values", expected_values)
        self.fpp = float(fpp)
        self.expected_values = expected_values
        self.bloom = Bloom(*bloom_shape(self.fpp, expected_values))

    def params(self) -> dict[str, Any]:
        return {**super().params(), "fpp": self.fpp, "expected_values": self.expected_values}

    def supports(self, dtype: pa.DataType) -> bool:
        return hashable(dtype)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def collector(self) -> _BloomCollector:
        return _BloomCollector(self)

    def collect_values(self, rows: pa.Table, starts: Sequence[int], values: pa.Array) -> list[Any]:
        """Every block's filter, each distinct value hashed once (a value's bits depend on
        its hash alone, so each block sets the bits of its distinct hashes: the filter
        :meth:`collect` gives the block)."""
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        encoded = values.dictionary_encode()  # each distinct value hashed once
        codes = np.asarray(encoded.indices.drop_null().to_numpy(zero_copy_only=False))
        hashes = hash_values(encoded.dictionary)[codes]
        # where each block's values start among the non-null ones
        at = np.concatenate([[0], np.cumsum(valid)])[[*starts, rows.num_rows]]
        out = []
        for a, b in pairwise(at.tolist()):
            filled = self.bloom.empty()
            distinct = np.unique(hashes[a:b])
            if len(distinct):
                filled[bloom_positions(distinct, self.bloom.bits, self.bloom.hashes).ravel()] = True
            out.append(self.bloom.encode(filled))
        return out

    def label(self, node: Predicate) -> Clause | None:
        values = _probe_values(self, node)
        return None if values is None else BloomClause(self.bloom, values)


class _BloomCollector:
    def __init__(self, index: BloomFilter) -> None:
        self.index = index
        self.filled = index.bloom.empty()
        self.failed = False

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        self.index.bloom.add(self.filled, values)

    def result(self) -> bytes | None:
        return None if self.failed else self.index.bloom.encode(self.filled)


class BloomClause(Clause):
    """Some probed value may be in the file's bloom filter."""

    def __init__(self, bloom: Bloom, values: pa.Array) -> None:
        self.bloom = bloom
        self.values = values

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        return self.bloom.might_contain(meta, self.values)


# ---------------------------------------------------------------- hybrid


@register
class Hybrid(TermIndex):
    """A value list per file up to ``max_values`` distinct values, a bloom filter above."""

    kind = "hybrid"

    def __init__(
        self,
        expression: str,
        *,
        max_values: int = DEFAULT_HYBRID_THRESHOLD,
        fpp: float = 0.01,
        expected_values: int | None = None,
        functions: Mapping[str, pa.DataType | str] | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        super().__init__(expression, functions=functions, udfs=udfs)
        check_int(type(self).__name__, "max_values", max_values)
        check_positive(type(self).__name__, "fpp", fpp, upper=1)
        if expected_values is not None:
            check_int(type(self).__name__, "expected_values", expected_values)
        self.max_values = max_values
        self.fpp = float(fpp)
        self.expected_values = expected_values
        self.bloom = Bloom(*bloom_shape(self.fpp, expected_values or 10 * max_values))

    def params(self) -> dict[str, Any]:
        out = {**super().params(), "max_values": self.max_values, "fpp": self.fpp}
        if self.expected_values is not None:
            out["expected_values"] = self.expected_values
        return out

    def supports(self, dtype: pa.DataType) -> bool:
        return hashable(dtype)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct([("values", pa.list_(self.dtype)), ("bloom", pa.binary())])

    def collector(self) -> _HybridCollector:
        return _HybridCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        listed = _list_label(self, node)
        if listed is None:
            return None
        probe = _probe_values(self, node)
        return HybridClause(listed, None if probe is None else BloomClause(self.bloom, probe))


class _HybridCollector:
    def __init__(self, index: Hybrid) -> None:
        self.index = index
        self.listed = ValueListCollector(index)
        self.filled: np.ndarray | None = None
        self.failed = False

    def add(self, batch: Batch) -> None:
        values = self.index.values(batch)
        if values is None:
            self.failed = True
            return
        if self.filled is not None:
            self.index.bloom.add(self.filled, values)
            return
        self.listed.parts.append(_distinct(values))
        distinct = self.listed.distinct()
        self.listed.parts = [distinct]
        if len(distinct) > self.index.max_values:
            self.filled = self.index.bloom.empty()
            self.index.bloom.add(self.filled, distinct)

    def result(self) -> dict[str, Any] | None:
        if self.failed:
            return None
        if self.filled is not None:
            return {"values": None, "bloom": self.index.bloom.encode(self.filled)}
        return {"values": self.listed.distinct().to_pylist(), "bloom": None}


class HybridClause(Clause):
    """The value-list clause where a file has a list, the bloom clause where it has a filter."""

    def __init__(self, listed: Clause, bloom: Clause | None) -> None:
        self.listed = listed
        self.bloom = bloom

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        values, filters = meta.flatten()
        out = np.ones(len(meta), dtype=bool)
        has_list = ~null_mask(values)
        if has_list.any():
            out &= self.listed.evaluate(values) | ~has_list
        if self.bloom is not None:
            out &= self.bloom.evaluate(filters)
        return out

    def negate(self) -> Clause | None:
        negated = self.listed.negate()
        return None if negated is None else HybridClause(negated, None)


#: bits a bloom probe reads at once (files x values x hashes): about 40 MB of work arrays
_PROBE_CELLS = 1 << 22


def _fixed_rows(meta: pa.Array, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Bytes ``at`` of the binary entries ``rows``, as a ``(len(rows), len(at))`` matrix."""
    binary = meta.cast(pa.large_binary())
    offsets = np.frombuffer(binary.buffers()[1], dtype=np.int64)[binary.offset :]
    data = np.frombuffer(binary.buffers()[2], dtype=np.uint8)
    return data[offsets[rows][:, None] + np.asarray(at, dtype=np.int64)[None, :]]
