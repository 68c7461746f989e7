"""SOP+Z: the SOP partition index as one more curve dimension (thesis C1-C3)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import from_json
from lakelayout.layouts.sop import SOPLayout
from lakelayout.layouts.sopz import SOPZLayout
from lakelayout.layouts.zorder import ZOrderLayout

FEATURE_QUERIES = ["s = 'red'", "s = 'red' AND b = 3", "b = 3", "c > 0.9"]
RANGE_QUERIES = ["d >= 100 AND d < 120", "d >= 500 AND d < 530", "d < 40", "d >= 960"]
WORKLOAD = FEATURE_QUERIES + RANGE_QUERIES
# same expression, literals never seen by the fit (thesis Table 4.1)
PROBES = ["d >= 300 AND d < 330", "d >= 700 AND d < 720", "d < 150", "d >= 880"]


def dataset(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "b": pa.array(rng.integers(0, 10, n), pa.int64()),
            "c": pa.array(rng.random(n), pa.float64()),
            "d": pa.array(rng.integers(0, 1000, n), pa.int64()),
            "s": pa.array(rng.choice(["red", "blue", "green", "black"], n)),
        }
    )


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    return dataset(3000, seed=2)


@pytest.fixture(scope="module", params=["z", "hilbert"])
def layout(request: pytest.FixtureRequest, sample: pa.Table) -> SOPZLayout:
    return SOPZLayout.fit(sample, WORKLOAD, columns=["d"], rows_per_block=100, curve=request.param)


def test_assign_total_deterministic_and_round_trips(layout: SOPZLayout) -> None:
    fresh = dataset(2000, seed=77)
    blocks = layout.assign(fresh)
    assert blocks.dtype == np.int64 and len(blocks) == fresh.num_rows
    assert ((blocks >= 0) & (blocks < layout.n_blocks)).all()
    assert (layout.assign(fresh) == blocks).all()
    again = from_json(layout.to_json())
    assert isinstance(again, SOPZLayout)
    assert (again.assign(fresh) == blocks).all()
    assert again.to_json() == layout.to_json()
    assert (pickle.loads(pickle.dumps(layout)).assign(fresh) == blocks).all()
    key = layout.sort_key(fresh)
    assert key is not None and key.dtype == np.int64
    # blocks are ranges of the key: block ids never decrease along the key
    order = np.argsort(key, kind="stable")
    assert (np.diff(blocks[order]) >= 0).all()


def test_blocks_are_equal_count_ranges(sample: pa.Table, layout: SOPZLayout) -> None:
    counts = np.bincount(layout.assign(sample), minlength=layout.n_blocks)
    assert layout.n_blocks == 30
    assert counts.sum() == sample.num_rows
    # runs of equal keys never split, so a block may grow; none is empty or huge
    assert counts.min() > 0 and counts.max() <= 3 * 100


def test_block_vectors_or_the_rows(sample: pa.Table, layout: SOPZLayout) -> None:
    ors = layout.block_vectors(sample)
    vecs = layout.sop.features.vectors(sample)
    blocks = layout.assign(sample)
    for b in range(layout.n_blocks):
        expect = np.bitwise_or.reduce(vecs[blocks == b]) if (blocks == b).any() else 0
        assert int(ors[b]) == int(expect)
    assert layout.blocks_for("s = 'red'") is None


def test_sopz_serves_both_kinds_of_query(sample: pa.Table, layout: SOPZLayout) -> None:
    """Feature queries skip like SOP, ranges with new literals skip like Z-order."""
    queries = FEATURE_QUERIES + PROBES
    ours = layout.estimate(queries, sample)
    z = ZOrderLayout.fit(sample, WORKLOAD, columns=["d"], rows_per_block=100)
    sop = SOPLayout.fit(sample, WORKLOAD, rows_per_block=100)
    theirs_z = z.estimate(queries, sample)
    theirs_sop = sop.estimate(queries, sample)
    n_feat = len(FEATURE_QUERIES)
    assert ours[:n_feat].mean() < theirs_z[:n_feat].mean() - 0.2
    assert ours[n_feat:].mean() < theirs_sop[n_feat:].mean() - 0.2
    assert ours.mean() < min(theirs_z.mean(), theirs_sop.mean())


def test_sop_index_is_a_dimension(sample: pa.Table) -> None:
    sopz = SOPZLayout.fit(sample, FEATURE_QUERIES, columns=["d"], target_blocks=10)
    assert sopz.n_blocks == 10
    assert sopz.sop.n_blocks >= 2
    text = sopz.describe()
    assert text.startswith("sop-z layout: Z-order on (d, <SOP index>): 10 blocks")
    assert "features" in text or "bit" in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": ["d"]}, "exactly one of"),
        ({"columns": ["d"], "rows_per_block": 10, "curve": "peano"}, "curve='peano'"),
        ({"columns": [], "rows_per_block": 10}, "at least one column"),
        ({"columns": ["dd"], "rows_per_block": 10}, "Did you mean 'd'"),
        ({"columns": ["d"], "rows_per_block": 10, "bits_per_dim": 40}, "bits_per_dim=40"),
    ],
)
def test_fit_rejects_bad_input(sample: pa.Table, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        SOPZLayout.fit(sample, WORKLOAD, **kwargs)


def test_fit_rejects_empty_inputs(sample: pa.Table) -> None:
    with pytest.raises(LayoutError, match="empty sample"):
        SOPZLayout.fit(sample.slice(0, 0), WORKLOAD, columns=["d"], rows_per_block=10)
    with pytest.raises(LayoutError, match="workload is empty"):
        SOPZLayout.fit(sample, [], columns=["d"], rows_per_block=10)
    with pytest.raises(LayoutError, match="not an sop-z layout"):
        SOPZLayout.from_dict({"family": "sop-z"})
