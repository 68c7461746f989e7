"""Skipping-oriented partitioning: merge, ordering, assignment, skipping safety."""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import minimum_spanning_tree

from lakelayout.errors import LayoutError, PredicateError
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts.base import Layout, WorkloadItem, from_json
from lakelayout.layouts.feature_set import popcount
from lakelayout.layouts.sop import (
    SOPLayout,
    combine_with_minmax,
    estimate_blocks,
    file_vectors,
    merge_groups,
    mst_order,
    mst_parents,
    ordering_zeros,
    skipping_cost,
)

FUZZ = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "25"))
COLORS = ["red", "blue", "green", "black"]
WORKLOAD = [
    "a < 10",
    "a < 10",
    "a >= 90",
    "b = 3",
    "b = 3 AND a < 10",
    "s = 'red'",
    "s = 'blue' AND b < 2",
    "c > 0.95",
]


def dataset(n: int, seed: int, a_max: int = 100) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "a": pa.array(rng.integers(0, a_max, n), pa.int64()),
            "b": pa.array(rng.integers(0, 10, n), pa.int64()),
            "c": pa.array(rng.random(n), pa.float64()),
            "s": pa.array(rng.choice(COLORS, n)),
        }
    )


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    return dataset(2000, seed=1)


@pytest.fixture(scope="module")
def layout(sample: pa.Table) -> SOPLayout:
    return SOPLayout.fit(sample, WORKLOAD, rows_per_block=100)


# ---------------------------------------------------------------- merge and cost


def test_merge_joins_small_groups_where_they_cost_least() -> None:
    vecs = np.array([0b00, 0b01, 0b10, 0b11], dtype=np.uint64)
    # min size 1: nothing to merge
    assert merge_groups(vecs, np.array([5, 5, 5, 5]), np.ones(2), 1).tolist() == [0, 1, 2, 3]
    labels = merge_groups(vecs, np.array([50, 2, 2, 50]), np.array([1.0, 1.0]), 10)
    # 0b01 and 0b10 each lose least by joining 0b11 (Δ = -2, vs -4 together, -50 with 0b00)
    assert labels.tolist() == [0, 1, 1, 1]


def test_merge_picks_the_pair_losing_least_skipping_cost() -> None:
    # 0b01 (small) is cheaper to merge with 0b11 (loses nothing on its own bits? no:
    # merging with 0b00 sets bit 0 for 0b00's rows) -- check against brute force
    vecs = np.array([0b00, 0b01, 0b11], dtype=np.uint64)
    sizes = np.array([40, 1, 40])
    w = np.array([1.0, 3.0])
    labels = merge_groups(vecs, sizes, w, 2)
    best = max(
        ([0, 0, 1], [0, 1, 1]),
        key=lambda lab: _cost(vecs, sizes, w, np.array(lab)),
    )
    assert labels.tolist() == best


def _cost(vecs: np.ndarray, sizes: np.ndarray, w: np.ndarray, labels: np.ndarray) -> float:
    n = int(labels.max()) + 1
    ors = np.zeros(n, np.uint64)
    np.bitwise_or.at(ors, labels, vecs)
    return skipping_cost(ors, np.bincount(labels, weights=sizes, minlength=n), w)


def test_merge_never_loses_rows_on_random_groups() -> None:
    rng = np.random.default_rng(7)
    vecs = np.unique(rng.integers(0, 2**10, 400).astype(np.uint64))
    sizes = rng.integers(1, 30, len(vecs))
    labels = merge_groups(vecs, sizes, rng.integers(1, 5, 10).astype(float), 150)
    block_sizes = np.bincount(labels, weights=sizes)
    assert block_sizes.sum() == sizes.sum()
    assert block_sizes.min() >= 150


def _greedy_reference(
    vecs: np.ndarray, sizes: np.ndarray, w: np.ndarray, min_size: int
) -> list[int]:
    """The greedy merge written plainly: every pair with a small member priced from
    scratch each step; the largest Δ wins, ties to the lowest small index, then the
    lowest partner; the survivor is the lower index."""
    groups = {i: (int(v), float(s)) for i, (v, s) in enumerate(zip(vecs, sizes, strict=True))}
    owner = list(range(len(vecs)))

    def z(v: int) -> float:
        return float(sum(wj for j, wj in enumerate(w) if not (v >> j) & 1))

    while len(groups) > 1 and any(s < min_size for _, s in groups.values()):
        best: tuple[float, int, int] | None = None
        for x in sorted(groups):
            vx, sx = groups[x]
            if sx >= min_size:
                continue
            for y in sorted(groups):
                if y == x:
                    continue
                vy, sy = groups[y]
                d = (sx + sy) * z(vx | vy) - sx * z(vx) - sy * z(vy)
                if best is None or d > best[0]:
                    best = (d, x, y)
        assert best is not None
        keep, gone = min(best[1], best[2]), max(best[1], best[2])
        groups[keep] = (groups[keep][0] | groups[gone][0], groups[keep][1] + groups[gone][1])
        del groups[gone]
        owner = [keep if o == gone else o for o in owner]
    survivors = sorted(set(owner))
    return [survivors.index(o) for o in owner]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 2**6 - 1), min_size=1, max_size=24, unique=True),
    st.data(),
)
def test_merge_is_the_plain_greedy_merge(vectors: list[int], data: st.DataObject) -> None:
    """The incremental merge (compact live arrays, bests kept between steps) picks the
    very pairs of the greedy merge recomputed from scratch, ties included (integral
    weights: exact sums;
    few bits, weights and sizes make ties common)."""
    vecs = np.array(vectors, dtype=np.uint64)
    sizes = np.array(data.draw(st.lists(st.integers(1, 6), min_size=len(vecs), max_size=len(vecs))))
    w = np.array(data.draw(st.lists(st.integers(0, 2), min_size=6, max_size=6)), dtype=float)
    min_size = data.draw(st.integers(1, 30))
    assert merge_groups(vecs, sizes, w, min_size).tolist() == _greedy_reference(
        vecs, sizes, w, min_size
    )


# ---------------------------------------------------------------- ordering


def test_mst_is_minimal_and_the_tour_within_twice_its_weight() -> None:
    rng = np.random.default_rng(3)
    vecs = np.unique(rng.integers(0, 2**12, 200).astype(np.uint64))
    order = mst_order(vecs)
    assert sorted(order.tolist()) == list(range(len(vecs)))
    parent, dist = mst_parents(vecs, int(order[0]))
    ours = int(dist[parent >= 0].sum())
    # scipy drops zero-weight edges, so shift every length by one (same tree)
    dense = popcount(vecs[:, None] ^ vecs[None, :]).astype(float) + 1.0
    reference = minimum_spanning_tree(dense).sum() - (len(vecs) - 1)
    assert ours == reference
    tour = int(popcount(vecs[order][1:] ^ vecs[order][:-1]).sum())
    assert tour <= 2 * ours


def test_file_vectors_or_blocks_that_share_a_file() -> None:
    vecs = np.array([0b001, 0b010, 0b100], np.uint64)
    files = file_vectors(vecs, np.array([3, 2, 5]), np.array([0, 1, 2]), rows_per_file=4)
    assert files.tolist() == [0b011, 0b110, 0b100]


def test_ordering_increases_zero_bits() -> None:
    """Thesis Fig. 4.2: more zeros in the file vectors with the MST ordering.

    "Without ordering" is an arbitrary mapping of SOP partitions to indexes
    (here: seeded random permutations). Files hold about ten partitions.
    """
    work = [f"a < {k}" for k in (10, 25, 50, 75)]
    work += ["c > 0.5", "c > 0.8", "s = 'red'", "s = 'blue'"]
    fine = SOPLayout.fit(dataset(4000, seed=5), work, rows_per_block=20)
    vecs, sizes = fine.fitted_vectors, fine.block_rows
    assert len(vecs) > 30
    rng = np.random.default_rng(11)
    for _ in range(3):
        zeros = ordering_zeros(
            vecs,
            sizes,
            n_features=len(work),
            rows_per_file=200,
            unordered=rng.permutation(len(vecs)),
        )
        assert zeros.n_files == 20
        assert zeros.ordered > zeros.unordered
        assert zeros.gain > 0.1
    # the layout's own block ids follow a tour at most twice the MST weight
    parent, dist = mst_parents(vecs, 0)
    assert popcount(vecs[1:] ^ vecs[:-1]).sum() <= 2 * dist[parent >= 0].sum()
    with pytest.raises(LayoutError, match="rows_per_file"):
        ordering_zeros(vecs, sizes, n_features=len(work), rows_per_file=0)


# ---------------------------------------------------------------- the layout


def test_blocks_reach_the_minimum_size(sample: pa.Table, layout: SOPLayout) -> None:
    counts = np.bincount(layout.assign(sample), minlength=layout.n_blocks)
    fitted = counts[: len(layout.fitted_vectors)]
    assert fitted.min() >= 100  # no tolerance needed: merging stops only when all are big
    assert counts[layout.outlier_block] == 0  # every sample vector was seen
    assert fitted.tolist() == layout.block_rows.tolist()
    assert fitted.sum() == sample.num_rows


def test_target_blocks_bounds_the_count(sample: pa.Table) -> None:
    sop = SOPLayout.fit(sample, WORKLOAD, target_blocks=8)
    assert len(sop.fitted_vectors) <= 8
    assert sop.min_rows == 250


def test_assign_total_deterministic_and_round_trips(layout: SOPLayout) -> None:
    fresh = dataset(3000, seed=99, a_max=150)  # a in 100..149 gives unseen vectors
    blocks = layout.assign(fresh)
    assert blocks.dtype == np.int64 and len(blocks) == fresh.num_rows
    assert ((blocks >= 0) & (blocks < layout.n_blocks)).all()
    assert (layout.assign(fresh) == blocks).all()
    again = from_json(layout.to_json())
    assert isinstance(again, SOPLayout)
    assert (again.assign(fresh) == blocks).all()
    assert again.to_json() == layout.to_json()
    assert (pickle.loads(pickle.dumps(layout)).assign(fresh) == blocks).all()
    # record batches and tables agree
    batch = fresh.to_batches()[0]
    assert (layout.assign(batch) == blocks[: batch.num_rows]).all()


def test_unseen_vectors_go_to_a_covering_block_or_the_outlier() -> None:
    # sample: "a < 10" and "b = 3" never hold together
    sample = pa.table(
        {
            "a": pa.array([1, 2, 50, 60] * 10, pa.int64()),
            "b": pa.array([0, 1, 3, 3] * 10, pa.int64()),
        }
    )
    work = ["a < 10", "b = 3"]
    both = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array([3], pa.int64())})
    neither = pa.table({"a": pa.array([70], pa.int64()), "b": pa.array([1], pa.int64())})
    out = SOPLayout.fit(sample, work, rows_per_block=5)
    assert out.assign(both).tolist() == [out.outlier_block]
    stored = out.block_vectors
    v = out.features.vectors(neither)[0]
    (b,) = out.assign(neither)
    assert stored[b] & v == v  # "neither" (vector 0) is covered by a fitted block
    near = SOPLayout.fit(sample, work, rows_per_block=5, unseen="nearest")
    assert near.outlier_block is None and near.n_blocks == len(near.fitted_vectors)
    assert 0 <= near.assign(both)[0] < near.n_blocks
    assert near.blocks_for("a < 10") is None


def test_blocks_for_uses_stored_vectors(layout: SOPLayout) -> None:
    kept = layout.blocks_for("a < 10 AND b = 3")
    assert kept is not None
    assert layout.outlier_block in kept.tolist()
    assert len(kept) < layout.n_blocks
    assert (np.diff(kept) > 0).all()
    everything = layout.blocks_for("a < 11")  # implies no feature
    assert everything is not None and everything.tolist() == list(range(layout.n_blocks))


class Arrival(Layout):
    """Rows in arrival order cut into fixed-size blocks (a test baseline only)."""

    def __init__(self, features: Any, rows: int, n: int) -> None:
        self.features, self.rows, self.n = features, rows, n

    @property
    def n_blocks(self) -> int:
        return -(-self.n // self.rows)

    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        return np.arange(batch.num_rows, dtype=np.int64) // self.rows

    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        vecs = self.features.vectors(sample)
        blocks = self.assign(sample)
        ors = np.zeros(self.n_blocks, np.uint64)
        np.bitwise_or.at(ors, blocks, vecs)
        bits = estimate_blocks(self.features, workload, blocks, ors, self.n_blocks)
        return combine_with_minmax(self, workload, sample, bits)

    def to_dict(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> Layout:
        raise LayoutError("test baseline")

    def describe(self) -> str:
        return "arrival"


def test_sop_beats_arrival_on_its_own_workload(sample: pa.Table, layout: SOPLayout) -> None:
    ours = layout.estimate(WORKLOAD, sample)
    base = Arrival(layout.features, 100, sample.num_rows).estimate(WORKLOAD, sample)
    assert ours.shape == (len(WORKLOAD),)
    assert ((ours >= 0) & (ours <= 1)).all()
    assert base.mean() > 0.9
    assert ours.mean() < base.mean() - 0.4
    # never below the true selectivity (no false negatives on the sample)
    for q, frac in zip(WORKLOAD, ours, strict=True):
        matching = evaluate(parse_predicate(q, sample.schema), sample).mean()
        assert frac >= matching


def test_estimate_combines_min_max(sample: pa.Table, layout: SOPLayout) -> None:
    # "a < 5" is no feature, but min/max of blocks built on "a < 10" still skip
    frac = layout.estimate(["a < 5"], sample)[0]
    assert frac < 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of"),
        ({"rows_per_block": 10, "target_blocks": 3}, "exactly one of"),
        ({"rows_per_block": 0}, "rows_per_block must be >= 1"),
        ({"target_blocks": 0}, "target_blocks must be >= 1"),
        ({"rows_per_block": 10, "unseen": "drop"}, "unseen='drop'"),
    ],
)
def test_fit_rejects_bad_sizes(sample: pa.Table, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        SOPLayout.fit(sample, WORKLOAD, **kwargs)


def test_fit_rejects_empty_inputs(sample: pa.Table) -> None:
    with pytest.raises(LayoutError, match="empty sample"):
        SOPLayout.fit(sample.slice(0, 0), WORKLOAD, rows_per_block=10)
    with pytest.raises(LayoutError, match="workload is empty"):
        SOPLayout.fit(sample, [], rows_per_block=10)
    with pytest.raises(LayoutError, match="not an SOP layout"):
        SOPLayout.from_dict({"family": "sop"})


def test_describe(layout: SOPLayout) -> None:
    text = layout.describe()
    assert text.startswith(f"sop: {len(layout.fitted_vectors)} blocks + 1 outlier block")
    assert "bit  0" in text


# ---------------------------------------------------------------- safety property

ATOMS = st.one_of(
    st.builds("a < {}".format, st.integers(-5, 160)),
    st.builds("a >= {}".format, st.integers(-5, 160)),
    st.builds("b = {}".format, st.integers(0, 10)),
    st.builds("a % 7 = {}".format, st.integers(0, 6)),
    st.builds("s = '{}'".format, st.sampled_from([*COLORS, "pink"])),
    st.builds("c > {}".format, st.sampled_from(["0.1", "0.5", "0.9"])),
)
QUERIES = st.one_of(
    ATOMS,
    st.builds("{} AND {}".format, ATOMS, ATOMS),
    st.builds("({} OR {})".format, ATOMS, ATOMS),
    st.builds("({} OR {}) AND {}".format, ATOMS, ATOMS, ATOMS),
)


@settings(
    max_examples=FUZZ,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    seed=st.integers(0, 2**16),
    workload=st.lists(QUERIES, min_size=1, max_size=8),
    probes=st.lists(QUERIES, min_size=0, max_size=4),
    rows=st.integers(1, 60),
)
def test_blocks_for_never_omits_a_block_with_a_matching_row(
    seed: int, workload: list[str], probes: list[str], rows: int
) -> None:
    sample = dataset(200, seed)
    try:
        sop = SOPLayout.fit(sample, workload, rows_per_block=rows)
    except LayoutError:
        return  # e.g. every predicate folded to a constant: nothing to cluster on
    fresh = dataset(300, seed + 1, a_max=150)
    blocks = sop.assign(fresh)
    for q in [*workload, *probes]:
        kept = sop.blocks_for(q)
        assert kept is not None
        hit = evaluate(parse_predicate(q, fresh.schema), fresh)
        needed = set(np.unique(blocks[hit]).tolist())
        assert needed <= set(kept.tolist()), q


def test_a_feature_spark_fails_on_for_a_row_fits_and_rules_out_no_block() -> None:
    """``k + 1 > 0`` overflows on k = 2**63 - 1 (Spark's ANSI error on that row): SOP
    and SOP+Z refused to fit the workload, and to place such rows, where Qd-tree and
    Pando fit it (an audit). Its bit is set on every row of a batch it fails on, so it
    never rules out a block that holds a row it may be TRUE on."""
    top = 2**63 - 1
    sample = pa.table({"k": pa.array([*range(-50, 50), top], pa.int64())})
    workload = ["k + 1 > 0", "k + 1 > 0", "k < -10", "k < -10"]
    layout = SOPLayout.fit(sample, workload, target_blocks=4)
    blocks = layout.assign(sample)
    assert set(layout.blocks_for("k + 1 > 0")) >= set(blocks)  # it rules nothing out
    # the others still skip: no row with k < -10 is in a block it rules out
    matching = blocks[np.asarray(sample.column("k").to_pylist()) < -10]
    kept = set(layout.blocks_for("k < -10"))
    assert set(matching) <= kept and len(kept) < layout.n_blocks
    fine = pa.table({"k": pa.array([-20, 0, 20], pa.int64())})  # a batch it does not fail on
    assert len(layout.assign(fine)) == 3


@settings(max_examples=FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.sampled_from([-(2**63), -(2**63) + 1, 2**63 - 2, 2**63 - 1, 0, None]),
        ),
        min_size=2,
        max_size=60,
    ),
    shift=st.sampled_from([1, -1, 2**62, -(2**62)]),
    bound=st.sampled_from([0, 10, -(2**62), 2**62]),
)
def test_property_no_block_holding_a_matching_row_is_ruled_out_where_features_may_fail(
    values: list[int | None], shift: int, bound: int
) -> None:
    """int64 edges and NULLs against ``k + c > d`` (which overflows on some rows) and
    ``k * 2 < d``: a row on which a workload predicate is TRUE (or which Spark fails on)
    is never in a block that predicate rules out."""
    sample = pa.table({"k": pa.array(values, pa.int64())})
    workload = [f"k + {shift} > {bound}", f"k * 2 < {bound}", "k IS NULL", f"k < {bound}"]
    layout = SOPLayout.fit(sample, workload * 2, target_blocks=3)
    blocks = layout.assign(sample)
    for text in workload:
        kept = set(layout.blocks_for(text).tolist())
        pred = parse_predicate(text, sample.schema)
        for i in range(sample.num_rows):
            row = sample.slice(i, 1)
            try:
                hit = bool(np.asarray(evaluate(pred, row))[0])
            except PredicateError:
                hit = True  # Spark fails on this row: it must stay readable
            if hit:
                assert int(blocks[i]) in kept, (text, values[i])
