"""Virtual files: per-block min/max of the sample and the fraction each query scans."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import LayoutError
from lakelayout.expr.nodes import Column, Compare, Literal
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.linear import LinearLayout
from lakelayout.layouts.virtual import block_metadata, estimate_by_minmax
from lakelayout.layouts.zorder import ZOrderLayout


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    rng = np.random.default_rng(7)
    n = 20_000
    return pa.table(
        {
            "a": rng.integers(0, 10_000, n),
            "b": rng.random(n),
            "s": pa.array([f"v{v:04d}" for v in rng.integers(0, 1000, n)]),
        }
    )


def test_block_metadata_has_one_virtual_file_per_block(sample: pa.Table) -> None:
    layout = LinearLayout.fit(sample, columns=["a"], target_blocks=10)
    stats = block_metadata(layout, sample)
    assert len(stats) == 10
    assert int(np.sum(stats.num_records)) == sample.num_rows


def test_range_query_on_the_sort_column_reads_its_share(sample: pa.Table) -> None:
    layout = LinearLayout.fit(sample, columns=["a"], target_blocks=10)
    scanned = layout.estimate(["a < 1000", "b < 0.1", "a >= 5000 AND a < 6000"], sample)
    assert scanned.shape == (3,)
    assert 0.1 <= scanned[0] <= 0.21
    assert scanned[1] == 1.0  # b is not clustered: every block spans it
    assert 0.1 <= scanned[2] <= 0.31


def test_predicate_nodes_are_accepted(sample: pa.Table) -> None:
    layout = ZOrderLayout.fit(sample, columns=["a", "b"], target_blocks=16)
    node = Compare("<", Column("a", pa.int64()), Literal(500, pa.int64()))
    assert np.array_equal(layout.estimate([node], sample), layout.estimate(["a < 500"], sample))


@pytest.mark.parametrize("cls", [LinearLayout, ZOrderLayout, HilbertLayout])
def test_never_below_the_matching_fraction(cls: type, sample: pa.Table) -> None:
    layout = cls.fit(sample, columns=["a", "s"], target_blocks=12)
    a = sample["a"].to_numpy()
    s = np.array(sample["s"].to_pylist())
    queries = {
        "a BETWEEN 100 AND 900": (a >= 100) & (a <= 900),
        "s = 'v0042'": s == "v0042",
        "s >= 'v0500' AND a < 2000": (s >= "v0500") & (a < 2000),
        "a = 7 OR s < 'v0010'": (a == 7) | (s < "v0010"),
    }
    scanned = layout.estimate(list(queries), sample)
    matching = np.array([m.mean() for m in queries.values()])
    assert np.all(scanned >= matching)
    assert np.all(scanned <= 1.0)
    assert scanned.min() < 0.5  # clustering skips something


def test_hilbert_scans_no_more_than_zorder_on_boxes(sample: pa.Table) -> None:
    rng = np.random.default_rng(3)
    boxes = []
    for _ in range(30):
        a0, b0 = rng.integers(0, 8000), rng.random() * 0.8
        boxes.append(f"a BETWEEN {a0} AND {a0 + 2000} AND b BETWEEN {b0} AND {b0 + 0.2}")
    hilbert = HilbertLayout.fit(sample, columns=["a", "b"], target_blocks=32)
    zorder = ZOrderLayout.fit(sample, columns=["a", "b"], target_blocks=32)
    assert hilbert.estimate(boxes, sample).mean() <= zorder.estimate(boxes, sample).mean()


def test_edge_cases(sample: pa.Table) -> None:
    layout = LinearLayout.fit(sample, columns=["a"], target_blocks=4)
    assert estimate_by_minmax(layout, [], sample).shape == (0,)
    with pytest.raises(LayoutError, match="empty sample"):
        estimate_by_minmax(layout, ["a < 3"], sample.slice(0, 0))
    with pytest.raises(LayoutError, match="SQL strings or Predicate trees, got int"):
        estimate_by_minmax(layout, [3], sample)  # type: ignore[list-item]
