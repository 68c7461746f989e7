"""Correlations between clustering features, on a sample (thesis §4.2.2, Algorithms 2-3).

Two features are *correlated* when clustering on one clusters the other, so
clustering on both wastes a curve dimension (or an SOP bit). Two measures:

* **sorting index** (curve features, §4.2.2.1): sort the sample by feature
  ``a``; the index of ``b`` is the fraction of the (ordered) pairs of rows
  whose ``b`` values are ascending, among the pairs whose ``b`` values differ:

      sorting_index(a -> b) = C / (C + D)

  with ``C`` / ``D`` the ascending / descending pairs (the thesis counts
  ``C / (n(n-1)/2)``; leaving out ties in ``b`` keeps a low-cardinality
  feature such as ``month(ts)`` from looking unsorted only because it
  repeats). 1 is sorted, 0 sorted descending, 0.5 no relation. A directed
  edge ``a -> b`` exists when the index is above ``1 - eps`` or below
  ``eps``. A feature with one value in the sample looks sorted after any
  sort (the thesis's false positive); only edges present in both directions
  are kept, and sorting by a constant leaves the other feature in sample
  (random) order, so such an edge is dropped.
* **mean-square contingency** (SOP features, §4.2.2.2, after CORDS): for two
  boolean features with cell fractions ``n_ij`` and marginals ``n_i.``,
  ``n_.j``, ``phi2 = sum (n_ij - n_i. n_.j)^2 / (n_i. n_.j)``, 1 for a
  perfect dependence (equal or complementary), 0 for independence; an edge
  when ``phi2 >= threshold``. It is symmetric, so every edge is bidirectional.

The graph is traversed by Algorithm 3 (:func:`traverse`). All pure numpy (no scipy:
``scipy.stats`` takes ~3 s to import, which every process's first decision paid).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def dense_ranks(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Dense ranks (0-based, equal values share a rank) with nulls after every value."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_string_view(values.type):
        values = values.cast(pa.string())
    order = np.asarray(pc.array_sort_indices(values, null_placement="at_end"), dtype=np.int64)
    ordered = values.take(pa.array(order))
    nulls = np.asarray(ordered.is_null(), dtype=bool)
    differ = pc.fill_null(pc.not_equal(ordered[1:], ordered[:-1]), True)
    step = np.asarray(differ, dtype=bool) & ~(nulls[1:] & nulls[:-1])
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.concatenate([[0], np.cumsum(step)])
    return ranks


def sorting_index(key_ranks: np.ndarray, value_ranks: np.ndarray) -> float:
    """How sorted ``value`` is once the rows are sorted by ``key`` (see module docstring).

    >>> sorting_index(np.array([0, 1, 2, 3]), np.array([5, 6, 7, 9]))
    1.0
    >>> sorting_index(np.array([0, 1, 2, 3]), np.array([3, 2, 1, 0]))
    0.0
    >>> sorting_index(np.array([0, 1, 2, 3]), np.array([1, 1, 1, 1]))  # constant: looks sorted
    1.0
    """
    n = len(key_ranks)
    if n < 2:
        return 1.0
    order = np.argsort(key_ranks, kind="stable")
    _, dense, counts = np.unique(
        np.asarray(value_ranks)[order], return_inverse=True, return_counts=True
    )
    y = dense.reshape(-1)
    pairs = n * (n - 1) / 2
    tied = float((counts * (counts - 1) / 2).sum())
    untied = pairs - tied
    if untied <= 0:
        return 1.0
    return 1.0 - discordant_pairs(y) / untied  # C / (C + D), C + D = untied


def discordant_pairs(y: np.ndarray) -> int:
    """Pairs ``i < j`` with ``y[i] > y[j]`` (ties are not discordant), ``y`` integers.

    A pair is counted once, at the highest bit where its two values differ:
    with the values grouped (stably) by their bits above ``b``, each 0 at bit
    ``b`` is discordant with every 1 before it in its group. Grouping by one
    more bit is a stable partition of each group, so every level is a few
    vectorized passes: O(n log max(y)) and no sort after the first.

    >>> discordant_pairs(np.array([3, 1, 2, 0])), discordant_pairs(np.array([0, 0, 1]))
    (5, 0)
    """
    values = np.asarray(y, dtype=np.int64)
    n = len(values)
    if n < 2:
        return 0
    values = values - values.min()  # the bit levels below read non-negative values
    position = np.arange(n, dtype=np.int64)
    first = np.ones(n, dtype=bool)
    total = 0
    for b in range(int(values.max()).bit_length() - 1, -1, -1):
        prefix = values >> (b + 1)
        bit = (values >> b) & 1
        np.not_equal(prefix[1:], prefix[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        sizes = np.diff(starts, append=n)
        ones_before = np.cumsum(bit) - bit
        ones_in_group = ones_before - np.repeat(ones_before[starts], sizes)
        zero = bit == 0
        total += int(ones_in_group[zero].sum())
        # regroup by one more bit: each group's zeros, then its ones, order kept
        ones_total = np.add.reduceat(bit, starts)
        zeros_end = np.repeat(starts + sizes - ones_total, sizes)
        moved = np.where(zero, position - ones_in_group, zeros_end + ones_in_group)
        regrouped = np.empty_like(values)
        regrouped[moved] = values
        values = regrouped
    return total


def mean_square_contingency(a: np.ndarray, b: np.ndarray) -> float:
    """phi^2 of two boolean features over the same rows (0 when either is constant).

    >>> x = np.array([True, False, True, False])
    >>> mean_square_contingency(x, x), mean_square_contingency(x, ~x)
    (1.0, 1.0)
    >>> mean_square_contingency(x, np.array([True, True, False, False]))
    0.0
    """
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    n = len(a)
    if n == 0:
        return 0.0
    pa_ = np.array([(~a).sum(), a.sum()], dtype=np.float64) / n
    pb = np.array([(~b).sum(), b.sum()], dtype=np.float64) / n
    if (pa_ == 0).any() or (pb == 0).any():
        return 0.0
    cells = np.array(
        [[(~a & ~b).sum(), (~a & b).sum()], [(a & ~b).sum(), (a & b).sum()]], dtype=np.float64
    )
    expected = np.outer(pa_, pb)
    return float((((cells / n) - expected) ** 2 / expected).sum())


@dataclass(frozen=True)
class Edge:
    """A kept (bidirectional) correlation: the index measured in each direction."""

    a: str
    b: str
    a_to_b: float
    b_to_a: float


@dataclass
class Graph:
    """Features and their bidirectional correlation edges (Algorithm 2's output)."""

    vertices: list[str]
    edges: list[Edge] = field(default_factory=list)
    #: directed edges dropped because the reverse direction did not hold
    one_way: list[tuple[str, str, float]] = field(default_factory=list)

    def neighbours(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {v: set() for v in self.vertices}
        for e in self.edges:
            out[e.a].add(e.b)
            out[e.b].add(e.a)
        return out

    def edge(self, a: str, b: str) -> Edge | None:
        for e in self.edges:
            if {e.a, e.b} == {a, b}:
                return e
        return None


def build_graph(
    vertices: Sequence[str],
    measure: Callable[[str, str], float],
    correlated: Callable[[float], bool],
) -> Graph:
    """Algorithm 2: a directed edge ``a -> b`` when ``correlated(measure(a, b))``;
    only pairs correlated in both directions become edges."""
    graph = Graph(list(vertices))
    for i, a in enumerate(vertices):
        for b in vertices[i + 1 :]:
            ab = measure(a, b)
            ba = measure(b, a)
            if correlated(ab) and correlated(ba):
                graph.edges.append(Edge(a, b, ab, ba))
            elif correlated(ab):
                graph.one_way.append((a, b, ab))
            elif correlated(ba):
                graph.one_way.append((b, a, ba))
    return graph


def sorting_graph(ranks: Mapping[str, np.ndarray], eps: float) -> Graph:
    """The curve features' graph: sorting index in both directions, edge beyond ``eps``."""
    return build_graph(
        list(ranks),
        lambda a, b: sorting_index(ranks[a], ranks[b]),
        lambda x: x >= 1.0 - eps or x <= eps,
    )


def contingency_graph(truth: Mapping[str, np.ndarray], threshold: float) -> Graph:
    """The SOP features' graph: mean-square contingency at or above ``threshold``."""
    return build_graph(
        list(truth),
        lambda a, b: mean_square_contingency(truth[a], truth[b]),
        lambda x: x >= threshold,
    )


@dataclass(frozen=True)
class Traversal:
    """Algorithm 3's result: primary (chosen) features, and correlated ones with the
    primary feature whose selection made them redundant."""

    primary: list[str]
    correlated: dict[str, str]
    unvisited: list[str]


def traverse(graph: Graph, order: Sequence[str], limit: int) -> Traversal:
    """Algorithm 3: visit features in ``order`` (most important first).

    The visited feature becomes primary; the edges between it and its
    neighbours, and between those neighbours, are cut; a neighbour left with
    no edge is *correlated* (covered by the primary feature), one with edges
    left stays in play (it correlates with something not yet visited). The
    walk stops after ``limit`` primary features; features neither primary
    nor correlated are returned as unvisited.

    >>> g = Graph(["1", "2", "3", "4", "5", "6"])
    >>> g.edges = [Edge(a, b, 1, 1) for a, b in
    ...            [("1", "2"), ("1", "3"), ("2", "3"), ("2", "4"), ("4", "5"), ("4", "6")]]
    >>> t = traverse(g, ["1", "4", "2", "3", "5", "6"], limit=4)
    >>> t.primary, sorted(t.correlated)
    (['1', '4'], ['2', '3', '5', '6'])
    """
    adj = graph.neighbours()
    primary: list[str] = []
    correlated: dict[str, str] = {}
    for crt in order:
        if crt in correlated or crt in primary:
            continue
        if len(primary) >= limit:
            break
        primary.append(crt)
        near = sorted(adj[crt] - set(primary))
        for n in near:
            adj[crt].discard(n)
            adj[n].discard(crt)
        for i, n in enumerate(near):
            for m in near[i + 1 :]:
                adj[n].discard(m)
                adj[m].discard(n)
        for n in near:
            if not adj[n] and n not in correlated:
                correlated[n] = crt
    unvisited = [v for v in order if v not in primary and v not in correlated]
    return Traversal(primary, correlated, unvisited)
