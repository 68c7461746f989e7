"""Hilbert index: bijection, adjacency (one unit step per index), tighter blocks than Z-order."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.layouts.hilbert import HilbertLayout, axes_to_transpose, hilbert_index
from lakelayout.layouts.zorder import CurveLayout, ZOrderLayout


def all_cells(dims: int, bits: int) -> np.ndarray:
    grid = itertools.product(range(1 << bits), repeat=dims)
    return np.array(list(grid), dtype=np.uint64).T


@pytest.mark.parametrize(("dims", "bits"), [(1, 4), (2, 1), (2, 3), (2, 5), (3, 2), (3, 3), (4, 2)])
def test_index_is_a_bijection_onto_the_cells(dims: int, bits: int) -> None:
    index = hilbert_index(all_cells(dims, bits), bits)
    assert sorted(index.tolist()) == list(range(1 << (dims * bits)))


@pytest.mark.parametrize(("dims", "bits"), [(1, 4), (2, 1), (2, 3), (2, 5), (3, 2), (3, 3), (4, 2)])
def test_consecutive_indexes_are_one_step_apart_on_one_axis(dims: int, bits: int) -> None:
    cells = all_cells(dims, bits)
    path = cells[:, np.argsort(hilbert_index(cells, bits))].astype(np.int64)
    steps = np.abs(np.diff(path, axis=1))
    assert np.all(steps.sum(axis=0) == 1)
    assert np.all(steps.max(axis=0) == 1)


def test_curve_starts_at_origin_and_ends_on_one_axis() -> None:
    cells = all_cells(2, 3)
    path = cells[:, np.argsort(hilbert_index(cells, 3))].astype(np.int64)
    assert path[:, 0].tolist() == [0, 0]
    assert sorted(path[:, -1].tolist()) == [0, 7]


def test_transpose_does_not_modify_input() -> None:
    cells = all_cells(2, 2)
    before = cells.copy()
    axes_to_transpose(cells, 2)
    assert np.array_equal(cells, before)


def mean_block_area(layout: CurveLayout, table: pa.Table) -> float:
    ids = layout.assign(table)
    x, y = table["x"].to_numpy(), table["y"].to_numpy()
    areas = []
    for b in np.unique(ids):
        in_block = ids == b
        areas.append(np.ptp(x[in_block]) * np.ptp(y[in_block]))
    return float(np.mean(areas))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hilbert_blocks_are_no_larger_than_zorder_blocks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = pa.table({"x": rng.random(20_000), "y": rng.random(20_000)})
    hilbert = HilbertLayout.fit(table, columns=["x", "y"], target_blocks=16)
    zorder = ZOrderLayout.fit(table, columns=["x", "y"], target_blocks=16)
    assert hilbert.n_blocks == zorder.n_blocks == 16
    assert mean_block_area(hilbert, table) <= mean_block_area(zorder, table)


def test_layout_key_is_the_hilbert_index_of_the_ranks() -> None:
    # 7 distinct values in 3 bits: ranks are the values themselves (rank 7 is NULL's)
    x, y = np.arange(49) % 7, np.arange(49) // 7
    table = pa.table({"x": x, "y": y})
    hilbert = HilbertLayout.fit(table, columns=["x", "y"], target_blocks=4, bits_per_dim=3)
    zorder = ZOrderLayout.fit(table, columns=["x", "y"], target_blocks=4, bits_per_dim=3)
    expected = hilbert_index(np.vstack([x, y]).astype(np.uint64), 3).astype(np.int64)
    assert np.array_equal(hilbert.sort_key(table), expected)
    assert not np.array_equal(zorder.sort_key(table), expected)
