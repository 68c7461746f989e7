"""PandoLayout: the paper's toy case, k = 1 equals the Qd-tree, safety, JSON, errors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import LayoutError
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts.base import from_json
from lakelayout.layouts.pando import PandoLayout, merge_cells, pack_outliers, pick_outliers
from lakelayout.layouts.qdtree import QdTreeLayout

from .test_qdtree import WORKLOAD, queries, table

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "20"))


def correlated(n: int, seed: int) -> pa.Table:
    """The paper's Fig. 2 data: y follows x, a few off-diagonal outliers."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 100, n)
    y = np.clip(x + rng.normal(0, 3, n), 0, 100)
    off = rng.random(n) < 0.03
    y[off] = rng.uniform(0, 100, off.sum())
    return pa.table({"x": x, "y": y})


def narrow_ranges(m: int, seed: int) -> list[str]:
    """Half the queries select a narrow range of x, half of y."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        lo = rng.uniform(0, 95)
        col = "x" if i % 2 == 0 else "y"
        out.append(f"{col} >= {lo:.2f} AND {col} < {lo + 5:.2f}")
    return out


@pytest.fixture(scope="module")
def toy() -> tuple[pa.Table, list[str]]:
    return correlated(2000, seed=0), narrow_ranges(40, seed=1)


def test_toy_two_trees_scan_less_than_one_qdtree(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    qd = QdTreeLayout.fit(sample, workload, rows_per_block=200)
    pando = PandoLayout.fit(sample, workload, rows_per_block=200, k=2, min_leaf_rows=100)
    qd_scan = qd.estimate(workload, sample).mean()
    pando_scan = pando.estimate(workload, sample).mean()
    assert pando_scan < 0.9 * qd_scan, (pando_scan, qd_scan)


@pytest.mark.parametrize("rows_per_block", [150, 400])
def test_one_tree_is_the_qdtree(toy: tuple[pa.Table, list[str]], rows_per_block: int) -> None:
    sample, workload = toy
    qd = QdTreeLayout.fit(sample, workload, rows_per_block=rows_per_block)
    pando = PandoLayout.fit(sample, workload, rows_per_block=rows_per_block, k=1)
    assert pando.n_blocks == qd.n_blocks and not pando.outlier_blocks
    fresh = correlated(1000, seed=3)
    assert np.array_equal(pando.assign(fresh), qd.assign(fresh))
    probes = [*workload, *narrow_ranges(20, seed=9), "x < 10 OR y > 90"]
    for q in probes:
        assert np.array_equal(pando.blocks_for(q), qd.blocks_for(q)), q
    assert np.allclose(pando.estimate(probes, fresh), qd.estimate(probes, fresh))


def test_blocks_meet_min_size_and_outliers_are_kept(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    pando = PandoLayout.fit(sample, workload, rows_per_block=200, k=2)
    sizes = np.bincount(pando.assign(sample), minlength=pando.n_blocks)
    normal = np.delete(sizes, pando.outlier_blocks)
    assert normal.min() >= 200
    assert sizes[pando.outlier_blocks].sum() <= 0.05 * sample.num_rows
    for q in workload:
        assert np.isin(pando.outlier_blocks, pando.blocks_for(q)).all()


def test_unseen_cell_goes_to_an_outlier_block(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    pando = PandoLayout.fit(sample, workload, rows_per_block=200, k=2)
    assert pando.outlier_blocks
    corner = pa.table({"x": [0.5, 0.5, 99.5], "y": [99.5, 99.5, 0.5]})
    ids = pando.assign(corner)
    assert ids[0] == ids[1]
    known = {tuple(c) for c in pando.cells.tolist()}
    leaves = np.stack([t.route(corner) for t in pando.trees], axis=1)
    for cell, block in zip(leaves.tolist(), ids.tolist(), strict=True):
        if tuple(cell) not in known:
            assert block in pando.outlier_blocks


def test_json_pickle_and_describe(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    pando = PandoLayout.fit(sample, workload, rows_per_block=200, k=3)
    back = from_json(pando.to_json())
    assert isinstance(back, PandoLayout) and back.k == 3
    fresh = correlated(700, seed=11)
    assert np.array_equal(back.assign(fresh), pando.assign(fresh))
    again = pickle.loads(pickle.dumps(pando))
    assert np.array_equal(again.assign(fresh), pando.assign(fresh))
    for q in workload[:10]:
        assert np.array_equal(back.blocks_for(q), pando.blocks_for(q))
    assert back.to_json() == pando.to_json()
    text = pando.describe()
    assert text.startswith("pando: k=3 trees") and "after truncation" in text


def test_truncation_keeps_answers(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    pando = PandoLayout.fit(sample, workload, rows_per_block=200, k=2)
    kept = pando.index_cuts()
    assert all(k <= len(t.node_cut) // 2 for k, t in zip(kept, pando.trees, strict=True))
    assert sum(kept) < sum(len(t.node_cut) // 2 for t in pando.trees)  # something collapsed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of target_blocks"),
        ({"rows_per_block": 100, "k": 0}, "k must be an integer >= 1, got 0"),
        ({"rows_per_block": 100, "outlier_row": 2}, "Did you mean 'outlier_rows'"),
        ({"rows_per_block": 100, "max_outlier_share": 2.0}, "max_outlier_share"),
    ],
)
def test_fit_errors(toy: tuple[pa.Table, list[str]], kwargs: dict, message: str) -> None:
    sample, workload = toy
    with pytest.raises(LayoutError, match=message):
        PandoLayout.fit(sample, workload, **kwargs)


def test_from_dict_rejects_bad_block_numbers(toy: tuple[pa.Table, list[str]]) -> None:
    sample, workload = toy
    state = PandoLayout.fit(sample, workload, target_blocks=5, k=2).to_dict()
    state["cell_block"][0] = 999
    with pytest.raises(LayoutError, match="block number 999"):
        PandoLayout.from_dict(state)


# ---------------------------------------------------------------- bottom-up pieces


def test_merge_cells_groups_cells_read_together() -> None:
    # 4 cells, 1 tree, 2 queries: cells 0 and 2 are read by q0, cells 1 and 3 by q1
    scanned = np.array([[[1, 0]], [[0, 1]], [[1, 0]], [[0, 1]]], dtype=bool)
    labels = merge_cells(scanned, np.array([5, 5, 5, 5]), b=10)
    assert labels[0] == labels[2] and labels[1] == labels[3] and labels[0] != labels[1]


def test_merge_cells_stops_at_block_size() -> None:
    scanned = np.zeros((6, 2, 3), dtype=bool)
    labels = merge_cells(scanned, np.array([10, 10, 10, 1, 1, 1]), b=5)
    sizes = np.bincount(labels, weights=[10, 10, 10, 1, 1, 1])
    assert sizes[sizes > 0].min() >= 5
    assert len(np.unique(labels)) >= 3


def test_pack_and_pick_outliers() -> None:
    assert pack_outliers(np.array([3, 3, 3, 3, 1]), b=5) == [0, 0, 1, 1, 1]
    assert pack_outliers(np.array([3, 3, 1]), b=5) == [0, 0, 0]
    sizes = np.array([1, 50, 2, 3, 4])
    assert pick_outliers(sizes, below=5, budget=6).tolist() == [0, 2, 3]


# ---------------------------------------------------------------- safety property


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=st.lists(queries(), min_size=1, max_size=8),
    unseen=st.lists(queries(), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
    rows_per_block=st.integers(10, 80),
    k=st.integers(1, 3),
)
def test_blocks_for_never_omits_a_matching_row(
    workload: list[str], unseen: list[str], seed: int, rows_per_block: int, k: int
) -> None:
    sample = table(400, seed)
    layout = PandoLayout.fit(
        sample, workload, rows_per_block=rows_per_block, k=k, min_leaf_rows=rows_per_block // 2
    )
    fresh = table(600, seed + 1)  # rows (and cells) the layout never saw
    blocks = layout.assign(fresh)
    assert blocks.min() >= 0 and blocks.max() < layout.n_blocks
    for q in workload + unseen:
        hit = evaluate(parse_predicate(q, fresh.schema), fresh)
        needed = np.unique(blocks[hit])
        kept = layout.blocks_for(q)
        assert np.isin(needed, kept).all(), (q, layout.describe())


def test_mixed_types_workload_fits(toy: tuple[pa.Table, list[str]]) -> None:
    sample = table(3000, seed=4)
    layout = PandoLayout.fit(sample, WORKLOAD, rows_per_block=200, k=2)
    est = layout.estimate(WORKLOAD, sample)
    assert ((est > 0) & (est <= 1)).all() and est.mean() < 0.8
