"""The fast paths give the reference results: Pando's joint scorer against the Qd-tree
scorer it replaces, Pando's distinct cells against ``np.unique`` over rows, and SOP's
byte-table zero weights against the bit matrix."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lakelayout.layouts.feature_set import zero_weight
from lakelayout.layouts.pando import JointScorer, distinct_rows, fill_bound, shared_bits
from lakelayout.layouts.qdtree import Workspace, bind_queries, grow_forest
from lakelayout.layouts.sop import _byte_tables, merge_groups

from .test_pando import correlated, narrow_ranges


def _forest_doc(ws: Workspace, n: int, k: int, scorer: JointScorer | None) -> list[object]:
    forest = grow_forest(ws, n, k=k, min_leaf_rows=40, max_leaves=None, best_cut=scorer)
    return [t.to_json() for t in forest.trees] + [a.tolist() for a in forest.leaf_of_row]


@pytest.mark.parametrize("k", [2, 3])
def test_joint_scorer_grows_the_reference_forest(k: int) -> None:
    sample = correlated(3000, seed=k)
    t = sample.append_column("c", pa.array(np.arange(3000) % 7))
    workload = narrow_ranges(24, seed=5) + [f"c IN ({i}, {i + 2})" for i in range(5)]
    ws = Workspace.build(t, bind_queries(workload, t, "pando"))
    assert _forest_doc(ws, 3000, k, JointScorer()) == _forest_doc(ws, 3000, k, None)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda k: hnp.arrays(
            np.int64,
            st.tuples(st.integers(0, 60), st.just(k)),
            elements=st.integers(0, 50) | st.integers(0, 2**40),  # wide: the radix overflows
        )
    )
)
def test_property_distinct_cells_are_numpys_unique_rows(leaves: np.ndarray) -> None:
    cells, inverse = distinct_rows(leaves)
    uniq, expected = np.unique(leaves, axis=0, return_inverse=True)
    assert np.array_equal(cells, uniq) and np.array_equal(inverse, expected.reshape(-1))


def test_shared_bits_is_boolean_matmul() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random((37, 130)) < 0.3, rng.random((11, 130)) < 0.6
    assert shared_bits(a, b).tolist() == (a.astype(int) @ b.T.astype(int)).tolist()


def test_fill_bound_is_an_upper_bound_reached_by_greedy_fill() -> None:
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 9, 6).astype(float)
    gain = rng.integers(-5, 6, (6, 4)).astype(float)
    for _ in range(50):
        t_g = np.floor(rng.random((6, 4)) * (sizes[:, None] + 1))
        bound = fill_bound(gain, sizes, t_g.sum(axis=0))
        assert ((t_g * gain).sum(axis=0) <= bound).all()
    assert fill_bound(np.array([[3.0], [-1.0]]), np.array([2.0, 5.0]), np.array([4.0]))[0] == 4.0


def test_byte_tables_give_the_zero_weights() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 16, 17, 64):
        w = rng.integers(0, 9, n).astype(float)
        v = rng.integers(0, 2**63, 200, dtype=np.uint64) & np.uint64((1 << n) - 1)
        table = _byte_tables(w)
        chunks = v.astype("<u8").view("<u2").reshape(-1, 4)
        got = sum(table[p][chunks[:, p]] for p in range(len(table)))
        assert got.tolist() == zero_weight(v, w).tolist()


def test_merge_groups_reaches_min_size_with_many_groups() -> None:
    rng = np.random.default_rng(4)
    vecs = np.unique(rng.integers(0, 2**20, 400, dtype=np.uint64))
    sizes = rng.integers(1, 6, len(vecs))
    labels = merge_groups(vecs, sizes, rng.integers(1, 5, 20).astype(float), 40)
    blocks = np.bincount(labels, weights=sizes)
    assert blocks.min() >= 40 or len(blocks) == 1
