"""Stable, vectorized 64-bit hashing of Arrow values for bloom filters.

Bloom filters are written by one process (a Spark task) and read by another,
so the hash must not depend on the process (Python's ``hash()`` is salted).
Every value is reduced to 64 bits with numpy only:

* strings / binary: a polynomial hash of the bytes (``sum (b_i + 1) * P^i`` mod
  2^64, computed for all values at once with ``np.add.reduceat``) mixed with the
  length;
* numbers, dates, timestamps, booleans: their integer bits (floats as IEEE-754
  doubles after -0.0 -> 0.0 and one canonical NaN, so equal values hash
  equally), decimals via their canonical text;

and then finalized with SplitMix64's mixer. Callers hash values already cast to
the index's value type, so a literal and the data it equals hash the same.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_P = np.uint64(0x100000001B3)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SALT = np.uint64(0x9E3779B97F4A7C15)


def hashable(dtype: pa.DataType) -> bool:
    """Whether :func:`hash_values` supports values of this type."""
    t = pa.types
    return bool(
        t.is_string(dtype)
        or t.is_binary(dtype)
        or t.is_integer(dtype)
        or t.is_floating(dtype)
        or t.is_boolean(dtype)
        or t.is_date(dtype)
        or t.is_timestamp(dtype)
        or t.is_time(dtype)
        or t.is_decimal(dtype)
    )


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection on uint64 with good avalanche."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def hash_values(arr: pa.Array) -> np.ndarray:
    """One uint64 per (non-null) value; nulls must have been dropped by the caller.

    >>> a = hash_values(pa.array(["x", "yz"]))
    >>> bool((a == hash_values(pa.array(["x", "yz"], pa.large_string()))).all())
    True
    """
    t = arr.type
    if pa.types.is_decimal(t):
        return _hash_bytes(arr.cast(pa.string()).cast(pa.large_binary()))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _hash_bytes(arr.cast(pa.large_binary()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _hash_bytes(arr.cast(pa.large_binary()))
    return mix64(_integer_bits(arr))


def _integer_bits(arr: pa.Array) -> np.ndarray:
    t = arr.type
    if pa.types.is_floating(t):
        floats = np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        floats = np.where(np.isnan(floats), np.nan, floats + 0.0)
        return floats.view(np.uint64)
    if pa.types.is_boolean(t):
        arr = arr.cast(pa.int8())
    elif pa.types.is_date(t):
        arr = arr.cast(pa.date32()).cast(pa.int32())
    elif pa.types.is_timestamp(t) or pa.types.is_time(t):
        arr = arr.cast(pa.int64())
    ints = np.asarray(arr.to_numpy(zero_copy_only=False))
    if ints.dtype == np.uint64:
        return ints
    return ints.astype(np.int64).view(np.uint64)


def _hash_bytes(arr: pa.Array) -> np.ndarray:
    """Polynomial hash of every value's bytes, vectorized over the whole array."""
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    arr = pc.fill_null(arr, b"")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    buffer = arr.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    body = data[start:end].astype(np.uint64) + np.uint64(1)
    sums = np.zeros(n, dtype=np.uint64)
    if len(body):
        rel = offsets[:-1] - start
        position = np.arange(len(body), dtype=np.int64) - np.repeat(rel, lengths)
        powers = np.cumprod(np.full(int(lengths.max()), _P, dtype=np.uint64))
        contrib = body * powers[position]
        nonempty = lengths > 0
        sums[nonempty] = np.add.reduceat(contrib, rel[nonempty])
    return mix64(sums ^ mix64(lengths.astype(np.uint64) + _SALT))


def bloom_positions(hashes: np.ndarray, bits: int, k: int) -> np.ndarray:
    """The ``k`` bit positions of each hash (double hashing), shape ``(len(hashes), k)``."""
    h1 = mix64(hashes)
    h2 = mix64(hashes ^ _SALT) | np.uint64(1)
    steps = np.arange(k, dtype=np.uint64)
    combined = h1[:, None] + steps[None, :] * h2[:, None]
    return np.asarray(combined % np.uint64(bits), dtype=np.int64)
