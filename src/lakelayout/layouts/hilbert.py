"""Hilbert curve layout: Liquid clustering's curve over range ranks.

Same pipeline as Z-order (:class:`~lakelayout.layouts.zorder.CurveLayout`):
ranks per dimension, one key per row, equal-count key ranges as blocks. Only
the key differs: the n-dimensional Hilbert index, computed with Skilling's
"transpose" algorithm (J. Skilling, *Programming the Hilbert curve*, AIP
Conf. Proc. 707, 2004):

1. ``axes_to_transpose`` turns the coordinates ``X[0..d-1]`` (``b`` bits each)
   into the *transpose* of the Hilbert index, by undoing the curve's
   rotations/reflections from the top bit down (``X[0] ^= P`` inverts,
   swapping low bits of ``X[0]`` and ``X[i]`` exchanges) and Gray-encoding;
2. interleaving the transpose's bits (dimension 0 leading each group, as in
   Z-order) gives the index.

Every step is a whole-array numpy operation over the rows; the Python loops
run over bits and dimensions only. Consecutive Hilbert indexes are cells one
step apart along exactly one axis, so a range of the key spans a compact
box, where a Z-order range can jump across the space.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from lakelayout.layouts.zorder import CurveLayout, interleave_bits


def axes_to_transpose(coords: np.ndarray, bits: int) -> np.ndarray:
    """Skilling's AxesToTranspose, vectorized over columns of a ``(d, n)`` array.

    Returns a new uint64 array; ``coords`` is not modified. Works in uint32
    when ``bits <= 32`` (half the memory traffic of uint64).
    """
    word: Any = np.uint32 if bits <= 32 else np.uint64
    x: np.ndarray = np.array(coords, dtype=word, copy=True)
    d, n = x.shape
    if bits < 1 or d == 0:
        return x.astype(np.uint64)
    t: np.ndarray = np.empty(n, dtype=word)
    flag: np.ndarray = np.empty(n, dtype=word)
    q = 1 << (bits - 1)
    while q > 1:
        p, qq = word(q - 1), word(q)
        for i in range(d):
            # flag = all ones where bit q of x[i] is set, else 0
            np.bitwise_and(x[i], qq, out=flag)
            np.right_shift(flag, word(q.bit_length() - 1), out=flag)
            np.negative(flag, out=flag)
            # set: invert the low bits of x[0]; clear: exchange them with x[i]'s
            np.bitwise_xor(x[0], x[i], out=t)
            t &= p
            t &= ~flag
            x[0] ^= (flag & p) | t
            if i:
                x[i] ^= t
        q >>= 1
    for i in range(1, d):
        x[i] ^= x[i - 1]
    t[:] = 0
    q = 1 << (bits - 1)
    while q > 1:
        np.bitwise_and(x[d - 1], word(q), out=flag)
        np.right_shift(flag, word(q.bit_length() - 1), out=flag)
        np.negative(flag, out=flag)
        t ^= flag & word(q - 1)
        q >>= 1
    x ^= t
    return x.astype(np.uint64)


def hilbert_index(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert index (uint64) of every column of the ``(d, n)`` coordinate array.

    >>> cells = np.array([[0, 0, 1, 1], [0, 1, 1, 0]], dtype=np.uint64)
    >>> hilbert_index(cells, 1).tolist()
    [0, 1, 2, 3]
    """
    return interleave_bits(axes_to_transpose(coords, bits), bits)


class HilbertLayout(CurveLayout):
    """Hilbert curve over range ranks; see the module docstring."""

    family: ClassVar[str] = "hilbert"

    @staticmethod
    def curve(ranks: np.ndarray, bits: int) -> np.ndarray:
        return hilbert_index(ranks, bits)
