"""Qd-tree: a greedy binary tree of workload cuts whose leaves are the blocks.

Yang et al.'s Qd-tree (as used by OReO §III-B, "generate_layout") partitions
the data space with cuts taken from the workload's predicates. Every inner
node holds a :class:`~lakelayout.layouts.cuts.Cut`; its TRUE child gets the
rows where the cut's atom is TRUE, its FALSE child the rest (FALSE or NULL).
A leaf's region is the conjunction of the outcomes on its path, and a query
reads exactly the leaves whose region :func:`~lakelayout.layouts.cuts.may_intersect`
it, which is a safe block index for rows never seen at fitting time.

Greedy construction on a sample (the "greedy" Qd-tree, no learned cuts):

    benefit(node, cut) = sum over queries q alive at node of
        |rows(node) ∩ cut|  * [q cannot touch cut = TRUE]
      + |rows(node) \\ cut| * [q cannot touch cut = NOT TRUE]

i.e. the sample rows the workload would newly skip. The leaf with the best
(cut, benefit) is split first (best-first), only when both children keep at
least ``min_leaf_rows`` sample rows, until ``max_leaves`` or no cut helps.

Everything that touches rows is vectorized: each candidate cut is evaluated
once on the whole sample into a column of a boolean matrix, and "q cannot
touch cut side s" is a precomputed (cuts x queries) boolean table; a node's
benefit is then a few counts over its rows. The same engine, with k trees
and a benefit that counts only rows the *other* trees do not already skip,
is Pando's top-down phase (:mod:`lakelayout.layouts.pando`).
"""

from __future__ import annotations

import heapq
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LakelayoutError, LayoutError, closest
from lakelayout.expr.codec import expr_from_json, expr_to_json, schema_from_json, schema_to_json
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout, WorkloadItem
from lakelayout.layouts.cuts import (
    Cut,
    QueryPlan,
    Region,
    candidate_cuts,
    cut_keys,
    may_intersect,
    plan_query,
    query_keys,
)
from lakelayout.layouts.virtual import bind_workload

if TYPE_CHECKING:
    from lakelayout.expr.evaluate import Evaluator
    from lakelayout.layouts.zorder import CurveLayout
    from lakelayout.stats.model import FileStats

# ---------------------------------------------------------------- the tree


@dataclass
class CutTree:
    """A binary tree of cuts in array form (node 0 is the root).

    ``node_cut[i]`` indexes ``cuts`` (-1 for a leaf); ``node_true[i]`` /
    ``node_false[i]`` are the children. Leaves are numbered 0.. in depth-first
    order, TRUE child first: that number is what :meth:`route` returns.
    """

    cuts: list[Cut]
    node_cut: list[int]
    node_true: list[int]
    node_false: list[int]
    _regions: list[Region] = field(default_factory=list, repr=False, compare=False)
    _leaf_of_node: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check()
        self._leaf_of_node = {node: i for i, node in enumerate(self._leaves_dfs())}

    # -------- structure

    def _leaves_dfs(self) -> list[int]:
        out: list[int] = []
        stack = [0]
        while stack:
            node = stack.pop()
            if self.node_cut[node] < 0:
                out.append(node)
            else:
                stack.append(self.node_false[node])
                stack.append(self.node_true[node])
        return out

    @property
    def n_leaves(self) -> int:
        return len(self._leaf_of_node)

    def leaf_nodes(self) -> list[int]:
        """Node ids of the leaves, in leaf-number order."""
        return sorted(self._leaf_of_node, key=self._leaf_of_node.__getitem__)

    def leaf_number(self, node: int) -> int:
        return self._leaf_of_node[node]

    def is_leaf(self, node: int) -> bool:
        return self.node_cut[node] < 0

    def depth(self) -> int:
        best, stack = 0, [(0, 0)]
        while stack:
            node, d = stack.pop()
            best = max(best, d)
            if not self.is_leaf(node):
                stack += [(self.node_true[node], d + 1), (self.node_false[node], d + 1)]
        return best

    def region(self, node: int) -> Region:
        """The conjunction of cut outcomes from the root to ``node`` (cached)."""
        if not self._regions:
            regions = [Region()] * len(self.node_cut)
            for parent in range(len(self.node_cut)):  # parents precede children
                c = self.node_cut[parent]
                if c >= 0:
                    atom = self.cuts[c].atom
                    regions[self.node_true[parent]] = regions[parent].with_outcome(atom, True)
                    regions[self.node_false[parent]] = regions[parent].with_outcome(atom, False)
            self._regions = regions
        return self._regions[node]

    # -------- rows and queries

    def route(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Leaf number (int64) of every row: one mask per distinct cut, index arrays per node."""
        from lakelayout.expr.evaluate import Evaluator

        out = np.zeros(batch.num_rows, dtype=np.int64)
        masks: dict[int, np.ndarray] = {}
        ev = Evaluator(batch)
        stack: list[tuple[int, np.ndarray]] = [(0, np.arange(batch.num_rows))]
        while stack:
            node, idx = stack.pop()
            c = self.node_cut[node]
            if c < 0:
                out[idx] = self._leaf_of_node[node]
                continue
            if c not in masks:
                masks[c] = _evaluate_cut(self.cuts[c], ev)
            m = masks[c][idx]
            stack.append((self.node_true[node], idx[m]))
            stack.append((self.node_false[node], idx[~m]))
        return out

    def route_files(self, files: FileStats) -> np.ndarray:
        """Leaf number (int64) of every file whose rows all fall in one leaf, by its
        statistics alone; -1 where they may span several leaves (or the statistics
        cannot tell).

        At each cut a file goes down the FALSE branch when the min/max rules prove
        no row of it makes the atom TRUE, down the TRUE branch when they prove every
        row does, and stops (-1) otherwise. Both rules are the scan's skipping rules
        (unknown or imprecise statistics answer "may"), evaluated in UTC as
        :meth:`route` evaluates cuts, so a leaf given here is the leaf :meth:`route`
        gives every row of the file. A file without rows gets -1.
        """
        from lakelayout.skipping.stats_rules import all_rows_match, might_match

        n = len(files)
        out = np.full(n, -1, dtype=np.int64)
        some_true: dict[int, np.ndarray] = {}
        every_true: dict[int, np.ndarray] = {}
        rows = np.asarray(files.num_records, dtype=np.int64)
        stack: list[tuple[int, np.ndarray]] = [(0, np.flatnonzero(rows > 0))]
        while stack:
            node, idx = stack.pop()
            if idx.size == 0:
                continue
            c = self.node_cut[node]
            if c < 0:
                out[idx] = self._leaf_of_node[node]
                continue
            if c not in some_true:
                atom = self.cuts[c].atom
                try:
                    some_true[c] = might_match(atom, files, timezone="UTC")
                    every_true[c] = all_rows_match(atom, files, timezone="UTC")
                except LakelayoutError:  # the rules cannot read this atom: may span both
                    some_true[c] = np.ones(n, dtype=bool)
                    every_true[c] = np.zeros(n, dtype=bool)
            none_true = ~some_true[c][idx]
            all_true = every_true[c][idx] & ~none_true
            stack.append((self.node_false[node], idx[none_true]))
            stack.append((self.node_true[node], idx[all_true]))
        return out

    def matching_nodes(self, query: Predicate, stop: Sequence[bool] | None = None) -> list[int]:
        """Nodes reached by ``query``: leaves (or ``stop`` nodes) whose region may intersect it.

        The walk prunes a subtree as soon as its region cannot intersect the
        query (regions only narrow going down, so the pruning is exact).
        """
        plan = plan_query(query)
        found: list[int] = []
        stack = [0]
        while stack:
            node = stack.pop()
            if not may_intersect(plan, self.region(node)):
                continue
            if self.is_leaf(node) or (stop is not None and stop[node]):
                found.append(node)
            else:
                stack += [self.node_false[node], self.node_true[node]]
        return found

    def matching_leaves(self, query: Predicate) -> np.ndarray:
        """Sorted leaf numbers whose region may hold a row matching ``query``."""
        leaves = [self._leaf_of_node[n] for n in self.matching_nodes(query)]
        return np.array(sorted(leaves), dtype=np.int64)

    # -------- text and JSON

    def describe_lines(self, max_lines: int = 12) -> list[str]:
        """The first inner nodes as indented text (TRUE branch first)."""
        lines: list[str] = []
        stack = [(0, 0)]
        while stack and len(lines) < max_lines:
            node, d = stack.pop()
            c = self.node_cut[node]
            if c >= 0:
                lines.append("  " * d + self.cuts[c].sql())
                stack += [(self.node_false[node], d + 1), (self.node_true[node], d + 1)]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "cuts": [{"kind": c.kind, "atom": expr_to_json(c.atom)} for c in self.cuts],
            "nodes": [
                list(t) for t in zip(self.node_cut, self.node_true, self.node_false, strict=False)
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CutTree:
        try:
            cuts = [Cut(expr_from_json(c["atom"]), str(c["kind"])) for c in data["cuts"]]
            nodes = [(int(a), int(b), int(c)) for a, b, c in data["nodes"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad serialized cut tree: {exc}") from exc
        return cls(cuts, [n[0] for n in nodes], [n[1] for n in nodes], [n[2] for n in nodes])

    def _check(self) -> None:
        n = len(self.node_cut)
        if n == 0:
            raise LayoutError("a cut tree needs at least a root node")
        if not len(self.node_true) == len(self.node_false) == n:
            raise LayoutError("a cut tree needs as many child entries as nodes")
        for i, (c, t, f) in enumerate(
            zip(self.node_cut, self.node_true, self.node_false, strict=False)
        ):
            inner_ok = 0 <= c < len(self.cuts) and i < t < n and i < f < n
            if c >= 0 and not inner_ok:
                raise LayoutError(f"cut tree node {i} is malformed: cut={c} children=({t}, {f})")


def _evaluate_cut(cut: Cut, ev: Evaluator) -> np.ndarray:
    try:
        return np.asarray(ev.mask(cut.atom), dtype=bool)
    except LakelayoutError as exc:
        raise LayoutError(f"cannot evaluate cut {cut.sql()!r} on the batch: {exc}") from exc


# ---------------------------------------------------------------- fitting data


@dataclass
class Workspace:
    """What greedy construction needs, computed once per fit.

    ``masks[r, c]``: cut ``c`` is TRUE on sample row ``r``.
    ``skip_true[c, q]`` / ``skip_false[c, q]``: query ``q`` cannot touch the
    region "cut c TRUE" / "cut c NOT TRUE" (from the cut alone).
    """

    queries: list[QueryPlan]
    cuts: list[Cut]
    masks: np.ndarray
    skip_true: np.ndarray
    skip_false: np.ndarray
    query_keys: list[frozenset[str]]
    #: the sample and the bound queries it was built for (what :meth:`reuse` checks)
    sample: pa.Table | None = None
    predicates: list[Predicate] = field(default_factory=list)
    #: forests grown on this workspace (:func:`grow_forest`), by their growth arguments
    _forests: dict[tuple[Any, ...], GrownForest] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def build(
        cls, sample: pa.Table, queries: list[Predicate], *, memo: CutMemo | None = None
    ) -> Workspace:
        """Candidate cuts that can be evaluated, split the sample, and skip something.

        ``memo``: what the last build on this sample computed per cut and per (cut,
        query), reused where this workload repeats it (an online window sliding over
        a stream); the workspace is the one built without it.
        """
        from lakelayout.expr.evaluate import Evaluator

        ev = Evaluator(sample)
        build = memo.start(sample) if memo is not None else None
        qkeys = [query_keys(q) for q in queries]
        plans = [plan_query(q) for q in queries]
        qsql = [q.sql() for q in queries] if build is not None else []
        by_key: dict[str, list[int]] = {}
        for qi, keys in enumerate(qkeys):
            for key in keys:
                by_key.setdefault(key, []).append(qi)
        cuts: list[Cut] = []
        columns: list[np.ndarray] = []
        rows_t: list[np.ndarray] = []
        rows_f: list[np.ndarray] = []
        n = sample.num_rows
        for cut in candidate_cuts(queries):
            skip_t, skip_f = _skip_rows(cut, plans, by_key, build, qsql)
            if not (skip_t.any() or skip_f.any()):
                continue
            found = build.mask(cut, ev) if build is not None else _try_mask(cut, ev)
            if found is None:
                continue  # a cut the evaluator cannot compute cannot route rows
            mask = found
            hits = int(mask.sum())
            if hits in (0, n):
                continue
            cuts.append(cut)
            columns.append(mask)
            rows_t.append(skip_t)
            rows_f.append(skip_f)
        q = len(queries)
        masks = np.empty((n, len(cuts)), dtype=bool)
        for i, col in enumerate(columns):
            masks[:, i] = col
        skip_true = np.array(rows_t, dtype=bool).reshape(len(cuts), q)
        skip_false = np.array(rows_f, dtype=bool).reshape(len(cuts), q)
        if build is not None:
            build.finish()
        return cls(plans, cuts, masks, skip_true, skip_false, qkeys, sample, list(queries))

    @classmethod
    def reuse(
        cls, given: Workspace | None, sample: pa.Table, queries: list[Predicate], family: str
    ) -> Workspace:
        """``given`` when it was built for ``sample`` and ``queries``, else a new build.

        A workspace depends only on the sample and the workload, so fits of one
        sample and workload at several block sizes (or as Qd-tree and Pando)
        share it. A workspace of another sample or workload is refused: the
        sample must be the same table (the same object, or equal rows), each
        query the same text.
        """
        if given is None:
            return cls.build(sample, queries)
        same_sample = given.sample is not None and (
            given.sample is sample or given.sample.equals(sample)
        )
        if (
            not same_sample
            or len(given.queries) != len(queries)
            or any(p.sql() != q.sql() for p, q in zip(given.predicates, queries, strict=True))
        ):
            raise LayoutError(
                f"{family}: the workspace given was built for another sample or workload "
                f"({given.masks.shape[0]} rows, {len(given.queries)} queries; "
                f"the fit has {sample.num_rows} rows, {len(queries)} queries)"
            )
        return given


def _try_mask(cut: Cut, ev: Evaluator) -> np.ndarray | None:
    """Where ``cut`` is TRUE on the evaluator's rows; None if it cannot be evaluated."""
    try:
        return np.asarray(ev.mask(cut.atom), dtype=bool)
    except LakelayoutError:
        return None


class CutMemo:
    """What :meth:`Workspace.build` computed on one sample, for the next build.

    An online layout manager fits candidates every ``interval`` queries on a window of
    the last ``window`` queries: consecutive windows share most of their queries and
    cuts, and a build spent most of its time on them again (each cut's mask over the
    sample, and for each cut and query whether one outcome of the cut rules the query
    out). The memo keeps, per cut SQL, the mask (None: the evaluator cannot compute
    it) and, per (cut SQL, query SQL), the two outcomes; a build reads the last
    finished build's entries and keeps only its own, so the memo holds one window's
    worth. A build on another sample starts empty. Only facts of the sample and of
    the two predicates are kept, so a build with the memo equals one without. Builds
    from several threads each read the last finished build and publish their own.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._last: tuple[pa.Table | None, _MemoEntries] = (None, _MemoEntries())
        #: lookups answered from the last build / computed (for tests and tuning)
        self.hits = 0
        self.misses = 0

    def start(self, sample: pa.Table) -> _MemoBuild:
        """A build on ``sample`` (a new sample starts from nothing)."""
        with self._guard:
            last_sample, entries = self._last
        return _MemoBuild(self, sample, entries if last_sample is sample else _MemoEntries())

    def _publish(self, sample: pa.Table, entries: _MemoEntries, hits: int, misses: int) -> None:
        with self._guard:
            self._last = (sample, entries)
            self.hits += hits
            self.misses += misses


@dataclass
class _MemoEntries:
    masks: dict[str, np.ndarray | None] = field(default_factory=dict)
    skips: dict[tuple[str, str], tuple[bool, bool]] = field(default_factory=dict)


class _MemoBuild:
    """One build's use of a :class:`CutMemo`: reads the last build's entries (never
    changed once published), records its own, publishes them at :meth:`finish`."""

    def __init__(self, memo: CutMemo, sample: pa.Table, last: _MemoEntries) -> None:
        self.memo, self.sample, self.last, self.now = memo, sample, last, _MemoEntries()
        self.hits = self.misses = 0

    def finish(self) -> None:
        self.memo._publish(self.sample, self.now, self.hits, self.misses)

    def mask(self, cut: Cut, ev: Evaluator) -> np.ndarray | None:
        key = cut.sql()
        if key in self.now.masks:
            return self.now.masks[key]
        if key in self.last.masks:
            self.hits += 1
            found = self.last.masks[key]
        else:
            self.misses += 1
            found = _try_mask(cut, ev)
        self.now.masks[key] = found
        return found

    def skip(self, key: tuple[str, str]) -> tuple[bool, bool] | None:
        """The two outcomes of (cut SQL, query SQL) if this or the last build found them."""
        got = self.now.skips.get(key)
        if got is None:
            got = self.last.skips.get(key)
            if got is None:
                self.misses += 1
                return None
            self.hits += 1
            self.now.skips[key] = got
        return got

    def record(self, key: tuple[str, str], got: tuple[bool, bool]) -> None:
        self.now.skips[key] = got


def _outcome_regions(cut: Cut) -> tuple[Region, Region]:
    """The regions "cut TRUE" and "cut NOT TRUE"."""
    return Region().with_outcome(cut.atom, True), Region().with_outcome(cut.atom, False)


def _skip_rows(
    cut: Cut,
    queries: list[QueryPlan],
    by_key: dict[str, list[int]],
    build: _MemoBuild | None = None,
    qsql: Sequence[str] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Which queries the single outcome "cut TRUE" / "cut NOT TRUE" rules out; with a
    memo ``build`` (and the queries' SQL ``qsql``) each pair is looked up first."""
    skip_t = np.zeros(len(queries), dtype=bool)
    skip_f = np.zeros(len(queries), dtype=bool)
    touched = sorted({qi for key in cut_keys(cut) for qi in by_key.get(key, ())})
    regions: tuple[Region, Region] | None = None
    csql = cut.sql() if build is not None else ""
    for qi in touched:
        key = (csql, qsql[qi]) if build is not None else None
        got = build.skip(key) if build is not None and key is not None else None
        if got is None:
            if regions is None:
                regions = _outcome_regions(cut)
            got = (
                not may_intersect(queries[qi], regions[0]),
                not may_intersect(queries[qi], regions[1]),
            )
            if build is not None and key is not None:
                build.record(key, got)
        skip_t[qi], skip_f[qi] = got
    return skip_t, skip_f


# ---------------------------------------------------------------- greedy growth


@dataclass
class Growing:
    """One tree under construction."""

    node_cut: list[int] = field(default_factory=lambda: [-1])
    node_true: list[int] = field(default_factory=lambda: [-1])
    node_false: list[int] = field(default_factory=lambda: [-1])
    regions: list[Region] = field(default_factory=lambda: [Region()])
    alive: list[np.ndarray] = field(default_factory=list)
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    sub: dict[int, np.ndarray] = field(default_factory=dict)
    leaf_of_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_leaves: int = 1
    last_split: int = -1
    _alive_arr: np.ndarray | None = None

    def alive_matrix(self) -> np.ndarray:
        """Alive-query vectors of all nodes as one (nodes x queries) array (cached)."""
        if self._alive_arr is None:
            self._alive_arr = np.array(self.alive, dtype=bool)
        return self._alive_arr


@dataclass
class GrownForest:
    """Result of :func:`grow_forest`: trees, and per tree each sample row's node and
    each node's alive-query vector (queries whose region test passes)."""

    trees: list[CutTree]
    leaf_of_row: list[np.ndarray]
    alive: list[np.ndarray]


def grow_forest(
    ws: Workspace,
    n_rows: int,
    *,
    k: int,
    min_leaf_rows: int,
    max_leaves: int | None,
    best_cut: Callable[[Workspace, list[Growing], int, int, int], tuple[float, int] | None]
    | None = None,
) -> GrownForest:
    """Grow ``k`` cut trees jointly, greedily, best split first (lazy re-evaluation).

    The benefit of splitting a leaf of tree ``t`` with a cut counts the
    (query, row) pairs it newly skips that no *other* tree already skips
    (Pando §6.1); with ``k = 1`` that is the Qd-tree's rows-skipped benefit.
    Splits in one tree only lower benefits in the others (their skipped sets
    grow), so a stale heap entry is an upper bound: it is recomputed when it
    reaches the top, and accepted once fresh (lazy greedy). ``best_cut``
    replaces the scorer (:func:`best_split`, same signature and result) with a
    faster exact one, such as Pando's.

    A forest depends on the workspace, these arguments and the scorer, not on
    the block count a fit then merges or numbers it into, so the workspace
    keeps every forest grown on it: fits of one workload at several block
    counts with the same bounds (Pando's refits with a fixed
    ``min_leaf_rows``) grow it once. The layouts built from a forest read it
    and never change it. A scorer object is told apart by its type (scorer
    classes keep no state between growths), a plain function by itself.
    """
    scorer: object = best_cut if best_cut is None or inspect.isroutine(best_cut) else type(best_cut)
    key = (n_rows, k, min_leaf_rows, max_leaves, scorer)
    if key not in ws._forests:
        ws._forests[key] = _grow(ws, n_rows, k, min_leaf_rows, max_leaves, best_cut)
    return ws._forests[key]


def _grow(
    ws: Workspace,
    n_rows: int,
    k: int,
    min_leaf_rows: int,
    max_leaves: int | None,
    best_cut: Callable[[Workspace, list[Growing], int, int, int], tuple[float, int] | None] | None,
) -> GrownForest:
    """:func:`grow_forest`, every time."""
    score = best_split if best_cut is None else best_cut
    n_q = len(ws.queries)
    trees = [Growing() for _ in range(k)]
    for tree in trees:
        tree.alive.append(np.ones(n_q, dtype=bool))
        tree.rows[0] = np.arange(n_rows)
        tree.sub[0] = ws.masks
        tree.leaf_of_row = np.zeros(n_rows, dtype=np.int64)
    heap: list[tuple[float, int, int, int, int, int]] = []
    seq = 0
    step = 0

    def push(t: int, node: int) -> None:
        nonlocal seq
        found = score(ws, trees, t, node, min_leaf_rows)
        if found is None:  # benefits only fall: this leaf stays a leaf
            trees[t].rows.pop(node, None)
            trees[t].sub.pop(node, None)
        else:
            benefit, cut = found
            heapq.heappush(heap, (-benefit, seq, t, node, cut, step))
            seq += 1

    for t in range(k):
        push(t, 0)
    while heap:
        _, _, t, node, cut, computed = heapq.heappop(heap)
        if max_leaves is not None and trees[t].n_leaves >= max_leaves:
            continue
        newest_other = max((trees[o].last_split for o in range(k) if o != t), default=-1)
        if computed < newest_other:
            push(t, node)
            continue
        step += 1
        true_node, false_node = _split(ws, trees[t], node, cut)
        trees[t].last_split = step
        push(t, true_node)
        push(t, false_node)
    return GrownForest(
        trees=[_freeze(ws, g) for g in trees],
        leaf_of_row=[g.leaf_of_row for g in trees],
        alive=[np.array(g.alive, dtype=bool) for g in trees],
    )


def best_split(
    ws: Workspace, trees: list[Growing], t: int, node: int, min_leaf_rows: int
) -> tuple[float, int] | None:
    """(benefit, cut column) of the best valid split of a leaf, or None."""
    tree = trees[t]
    rows = tree.rows[node]
    alive = tree.alive[node]
    if len(rows) < 2 * min_leaf_rows or not alive.any() or not ws.cuts:
        return None
    skip_t = ws.skip_true[:, alive]
    skip_f = ws.skip_false[:, alive]
    relevant = np.flatnonzero(skip_t.any(axis=1) | skip_f.any(axis=1))
    if relevant.size == 0:
        return None
    sub = tree.sub[node]  # (rows of the node) x (all cuts), rows contiguous
    others = [o for o in range(len(trees)) if o != t]
    if not others:
        n_true = np.count_nonzero(sub, axis=0)[relevant].astype(np.float64)
        n_false = len(rows) - n_true
        benefit = skip_t[relevant].sum(axis=1) * n_true + skip_f[relevant].sum(axis=1) * n_false
    else:
        groups, reps = _group_by_other_leaves(trees, others, rows)
        order = np.argsort(groups, kind="stable")
        counts = np.bincount(groups)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        sorted_sub = sub[order].view(np.uint8)
        true_g = np.add.reduceat(sorted_sub, starts, axis=0, dtype=np.int32)[:, relevant]
        true_g = true_g.astype(np.float64)
        false_g = counts[:, None] - true_g
        unskipped = np.ones((len(reps), int(alive.sum())), dtype=np.float64)
        for o in others:
            leaves = trees[o].leaf_of_row[reps]
            unskipped *= trees[o].alive_matrix()[leaves][:, alive]
        w_true = unskipped @ skip_t[relevant].T.astype(np.float64)
        w_false = unskipped @ skip_f[relevant].T.astype(np.float64)
        benefit = (true_g * w_true).sum(axis=0) + (false_g * w_false).sum(axis=0)
        n_true = true_g.sum(axis=0)
        n_false = len(rows) - n_true
    valid = (n_true >= min_leaf_rows) & (n_false >= min_leaf_rows) & (benefit > 0)
    if not valid.any():
        return None
    scored = np.where(valid, benefit, -1.0)
    best = int(np.argmax(scored))
    return float(scored[best]), int(relevant[best])


def _group_by_other_leaves(
    trees: list[Growing], others: list[int], rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Group ``rows`` by their leaves in the other trees: (group per row, a row per group)."""
    if len(others) == 1:
        keys = trees[others[0]].leaf_of_row[rows]
        _, first, groups = np.unique(keys, return_index=True, return_inverse=True)
    else:
        stacked = np.stack([trees[o].leaf_of_row[rows] for o in others], axis=1)
        _, first, groups = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    return groups.reshape(-1), rows[first]


def _split(ws: Workspace, tree: Growing, node: int, cut: int) -> tuple[int, int]:
    """Cut a leaf: two children with their rows, regions and alive queries."""
    rows = tree.rows.pop(node)
    sub = tree.sub.pop(node)
    mask = sub[:, cut]
    atom = ws.cuts[cut].atom
    keys = cut_keys(ws.cuts[cut])
    parent_alive = tree.alive[node]
    children = []
    for outcome, side in ((True, mask), (False, ~mask)):
        child_rows = rows[side]
        child = len(tree.node_cut)
        region = tree.regions[node].with_outcome(atom, outcome)
        alive = parent_alive.copy()
        for qi in np.flatnonzero(parent_alive):
            if ws.query_keys[qi] & keys:
                alive[qi] = may_intersect(ws.queries[qi], region)
        tree.node_cut.append(-1)
        tree.node_true.append(-1)
        tree.node_false.append(-1)
        tree.regions.append(region)
        tree.alive.append(alive)
        tree.rows[child] = child_rows
        tree.sub[child] = sub[side]
        tree.leaf_of_row[child_rows] = child
        children.append(child)
    tree.node_cut[node] = cut
    tree.node_true[node], tree.node_false[node] = children
    tree.n_leaves += 1
    tree._alive_arr = None
    return children[0], children[1]


def _freeze(ws: Workspace, g: Growing) -> CutTree:
    """The grown tree as a :class:`CutTree` holding only the cuts it uses."""
    used = sorted({c for c in g.node_cut if c >= 0})
    remap = {c: i for i, c in enumerate(used)}
    tree = CutTree(
        cuts=[ws.cuts[c] for c in used],
        node_cut=[remap[c] if c >= 0 else -1 for c in g.node_cut],
        node_true=list(g.node_true),
        node_false=list(g.node_false),
    )
    tree._regions = list(g.regions)
    return tree


# ---------------------------------------------------------------- shared fit helpers


def check_sample(sample: Any, family: str) -> pa.Table:
    if isinstance(sample, pa.RecordBatch):
        sample = pa.Table.from_batches([sample])
    if not isinstance(sample, pa.Table):
        raise LayoutError(
            f"{family} needs the sample as a pyarrow Table, got {type(sample).__name__}"
        )
    if sample.num_rows == 0:
        raise LayoutError(f"cannot fit a {family} layout on an empty sample")
    return sample


def bind_queries(
    workload: Sequence[WorkloadItem], sample: pa.Table, family: str
) -> list[Predicate]:
    if isinstance(workload, (str, Predicate)):
        raise LayoutError(f"{family} needs a sequence of predicates, got a single {workload!r}")
    queries = bind_workload(list(workload), sample.schema)
    if not queries:
        raise LayoutError(f"{family} needs a workload with at least one predicate to cut on")
    return queries


def check_options(opts: Mapping[str, Any], known: Sequence[str], family: str) -> None:
    for name in opts:
        if name not in known:
            raise LayoutError(
                f"unknown {family} option {name!r}; known: {', '.join(known)}."
                + closest(name, known)
            )


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise LayoutError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def block_sizes(layout: Layout, sample: pa.Table) -> np.ndarray:
    return np.bincount(layout.assign(sample), minlength=layout.n_blocks)


def estimate_by_index(
    layout: Layout, workload: Sequence[WorkloadItem], sample: pa.Table
) -> np.ndarray:
    """Fraction of sample rows in the blocks ``blocks_for`` keeps, per query."""
    sample = check_sample(sample, layout.family)
    queries = bind_workload(list(workload), sample.schema)
    sizes = block_sizes(layout, sample).astype(np.float64)
    total = float(sizes.sum())
    out = np.empty(len(queries), dtype=np.float64)
    for i, query in enumerate(queries):
        blocks = layout.blocks_for(query)
        assert blocks is not None
        out[i] = float(sizes[blocks].sum()) / total
    return out


# ---------------------------------------------------------------- the order inside a block

#: most columns the order of rows inside a tree layout's block interleaves
INNER_DIMS = 3


def inner_order(trees: Sequence[CutTree], sample: pa.Table) -> CurveLayout | None:
    """The order of rows inside a block of a tree layout: a Z-order over the plain
    columns the trees cut on most (by the number of nodes whose cut reads them), ranks
    fitted on ``sample``; ``None`` when no cut reads a plain column.

    A leaf is cut no further, so without an order its rows keep the order they
    arrived in, and a reader can skip nothing inside a file. Sorted by this key,
    a file's rows cluster on the columns the workload filters on, so the row
    groups and pages of a large file have narrow ranges that Parquet's
    statistics and page index let the reader skip (bench B7).
    """
    from collections import Counter

    from lakelayout.layouts.zorder import ZOrderLayout

    plain = {
        f.name
        for f in sample.schema
        if not pa.types.is_nested(f.type) and not pa.types.is_null(f.type)
    }
    counts: Counter[str] = Counter()
    for tree in trees:
        for cut in tree.node_cut:
            if cut >= 0:
                counts.update(c for c in tree.cuts[cut].atom.columns() if c in plain)
    columns = [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if not columns or sample.num_rows == 0:
        return None
    try:
        return ZOrderLayout.fit(sample, columns=columns[:INNER_DIMS], target_blocks=1)
    except LayoutError:  # a column a curve cannot rank: the blocks stay unordered
        return None


def inner_from_dict(state: Mapping[str, Any]) -> CurveLayout | None:
    """The in-block order of a tree layout's JSON document (absent in older ones)."""
    from lakelayout.layouts.zorder import ZOrderLayout

    inner = state.get("inner")
    return None if inner is None else ZOrderLayout.from_dict(dict(inner))


# ---------------------------------------------------------------- the layout


class QdTreeLayout(Layout):
    """Blocks are the leaves of a greedy Qd-tree (see the module docstring).

    >>> t = pa.table({"a": list(range(100)), "b": ["x", "y"] * 50})
    >>> layout = QdTreeLayout.fit(t, ["a < 30", "a >= 70", "b = 'x'"], rows_per_block=10)
    >>> bool(layout.n_blocks > 1 and layout.assign(t).max() < layout.n_blocks)
    True
    >>> bool(layout.blocks_for("a >= 70 AND b = 'x'").size < layout.n_blocks)
    True
    """

    family = "qdtree"
    sort_key_optional = True
    OPTIONS = ("min_leaf_rows",)

    def __init__(
        self,
        tree: CutTree,
        schema: pa.Schema,
        sample_rows: int = 0,
        inner: CurveLayout | None = None,
    ) -> None:
        self.tree = tree
        self.schema = schema
        self.sample_rows = sample_rows
        #: the order of rows inside a block (:func:`inner_order`)
        self.inner = inner

    @classmethod
    def fit(
        cls,
        sample: pa.Table,
        workload: Sequence[WorkloadItem],
        *,
        rows_per_block: int | None = None,
        target_blocks: int | None = None,
        workspace: Workspace | None = None,
        **opts: Any,
    ) -> QdTreeLayout:
        """Grow the tree on ``sample`` for ``workload``.

        Give exactly one of ``rows_per_block`` (the minimum leaf size, in
        *sample* rows) or ``target_blocks`` (at most that many leaves, each of
        at least ``sample_rows // (2 * target_blocks)`` rows). Option
        ``min_leaf_rows`` overrides the minimum leaf size. ``workspace``: a
        :meth:`Workspace.build` of this very sample and workload, to share
        between several fits of them (it depends on neither the block size nor
        the family; growing never modifies it).
        """
        sample = check_sample(sample, cls.family)
        check_options(opts, cls.OPTIONS, cls.family)
        min_leaf, max_leaves = leaf_limits(sample.num_rows, rows_per_block, target_blocks)
        if "min_leaf_rows" in opts:
            min_leaf = positive_int(opts["min_leaf_rows"], "min_leaf_rows")
        queries = bind_queries(workload, sample, cls.family)
        ws = Workspace.reuse(workspace, sample, queries, cls.family)
        forest = grow_forest(
            ws, sample.num_rows, k=1, min_leaf_rows=min_leaf, max_leaves=max_leaves
        )
        tree = forest.trees[0]
        return cls(tree, sample.schema, sample.num_rows, inner_order([tree], sample))

    @property
    def n_blocks(self) -> int:
        return self.tree.n_leaves

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        return self.tree.route(batch)

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        """Rows inside a block in the Z-order of the columns the tree cuts on most."""
        return None if self.inner is None else self.inner.sort_key(batch)

    def blocks_for(self, predicate: WorkloadItem) -> np.ndarray:
        (query,) = bind_workload([predicate], self.schema)
        return self.tree.matching_leaves(query)

    def blocks_of_files(self, files: FileStats) -> np.ndarray:
        """The leaf every row of a file belongs to, from its statistics (-1: may span
        several; see :meth:`CutTree.route_files`)."""
        return self.tree.route_files(files)

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        return estimate_by_index(self, workload, sample)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "version": 1,
            "schema": schema_to_json(self.schema),
            "sample_rows": self.sample_rows,
            "tree": self.tree.to_json(),
            **({} if self.inner is None else {"inner": self.inner.to_dict()}),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> QdTreeLayout:
        if state.get("family") != cls.family:
            raise LayoutError(f"not a {cls.family} layout: family={state.get('family')!r}")
        try:
            schema = schema_from_json(state["schema"])
            tree = CutTree.from_json(state["tree"])
            sample_rows = int(state.get("sample_rows", 0))
            inner = inner_from_dict(state)
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad {cls.family} layout document: {exc}") from exc
        return cls(tree, schema, sample_rows, inner)

    def describe(self) -> str:
        cuts = sorted({c.sql() for c in self.tree.cuts})
        lines = [
            f"qdtree: {self.n_blocks} blocks (leaves), depth {self.tree.depth()}, "
            f"{len(self.tree.cuts)} distinct cuts, fitted on {self.sample_rows} sample rows",
            f"columns: {', '.join(sorted({col for c in self.tree.cuts for col in c.atom.columns()}))}",
        ]
        lines += ["tree:"] + ["  " + s for s in self.tree.describe_lines()]
        if len(cuts) > 12:
            lines.append(f"  ... ({len(cuts)} cuts in all)")
        return "\n".join(lines)


def leaf_limits(
    n_rows: int, rows_per_block: int | None, target_blocks: int | None
) -> tuple[int, int | None]:
    """(minimum leaf rows, maximum leaves) from exactly one of the two targets."""
    if (rows_per_block is None) == (target_blocks is None):
        raise LayoutError(
            "give exactly one of target_blocks=... or rows_per_block=... "
            f"(got target_blocks={target_blocks}, rows_per_block={rows_per_block})"
        )
    if rows_per_block is not None:
        return positive_int(rows_per_block, "rows_per_block"), None
    target = positive_int(target_blocks, "target_blocks")
    return max(1, n_rows // (2 * target)), target
