"""Linear layout: lexicographic range partitions over typed tuples."""

from __future__ import annotations

import datetime as dt
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import from_json
from lakelayout.layouts.linear import LinearLayout

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "40"))


def table(n: int, seed: int = 0, null_fraction: float = 0.0) -> pa.Table:
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < null_fraction
    days = rng.integers(0, 3000, n)
    return pa.table(
        {
            "a": pa.array(rng.integers(0, 1_000_000, n), mask=mask),
            "g": pa.array([f"g{v}" for v in rng.integers(0, 5, n)]),
            "day": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=int(d)) for d in days]),
            "x": rng.random(n),
        }
    )


def test_blocks_are_ranges_of_the_lexicographic_order() -> None:
    sample = table(5_000)
    layout = LinearLayout.fit(sample, columns=["g", "x"], target_blocks=12)
    ids = layout.assign(sample)
    keys = sorted(zip(sample["g"].to_pylist(), sample["x"].to_pylist(), ids.tolist(), strict=True))
    assert [k[2] for k in keys] == sorted(k[2] for k in keys)
    assert layout.n_blocks == 12


def test_block_sizes_within_tolerance() -> None:
    sample = table(10_007)
    layout = LinearLayout.fit(sample, columns=["day", "a"], rows_per_block=300)
    sizes = np.bincount(layout.assign(sample), minlength=layout.n_blocks)
    assert layout.n_blocks == 34
    assert sizes.min() >= 150 and sizes.max() <= 450


def test_sort_key_is_lexicographic_position() -> None:
    batch = pa.table({"k": [2, 1, None, 1], "v": ["a", "b", "c", "a"]})
    layout = LinearLayout.fit(batch, columns=["k", "v"], target_blocks=2)
    key = layout.sort_key(batch)
    assert key is not None and key.tolist() == [2, 1, 3, 0]


def test_nulls_sort_last_and_away_from_smallest_values() -> None:
    sample = table(10_000, null_fraction=0.1)
    layout = LinearLayout.fit(sample, columns=["a"], target_blocks=20)
    ids = layout.assign(sample)
    a = sample["a"].to_numpy(zero_copy_only=False)
    null = np.isnan(a)
    smallest = ~null & (a <= np.nanquantile(a, 0.05))
    assert ids[null].min() > ids[smallest].max()
    assert ids[null].max() == layout.n_blocks - 1


def test_nan_between_numbers_and_null() -> None:
    sample = pa.table({"x": [1.0, 2.0, float("nan"), None] * 10})
    layout = LinearLayout.fit(sample, columns=["x"], target_blocks=4)
    ids = layout.assign(pa.table({"x": [1.0, 2.0, float("inf"), float("nan"), None]}))
    assert ids.tolist() == [0, 1, 1, 2, 3]


def test_duplicates_do_not_split() -> None:
    sample = pa.table({"k": ["x"] * 900 + [f"y{i:03d}" for i in range(100)]})
    layout = LinearLayout.fit(sample, columns=["k"], target_blocks=10)
    ids = layout.assign(sample)
    assert len(set(ids[:900].tolist())) == 1
    assert layout.n_blocks == 2


def test_persistence_and_batches() -> None:
    sample = table(3_000, null_fraction=0.05)
    layout = LinearLayout.fit(sample, columns=["day", "g", "x"], target_blocks=9)
    ids = layout.assign(sample)
    assert np.array_equal(pickle.loads(pickle.dumps(layout)).assign(sample), ids)
    again = from_json(layout.to_json())
    assert isinstance(again, LinearLayout)
    assert np.array_equal(again.assign(sample), ids)
    assert again.to_json() == layout.to_json()
    parts = [layout.assign(b) for b in sample.to_batches(max_chunksize=1000)]
    assert np.array_equal(np.concatenate(parts), ids)
    assert layout.to_dict()["bounds"][0][0].startswith("20")  # dates as ISO text


def test_describe() -> None:
    layout = LinearLayout.fit(table(1_000), columns=["g", "a"], rows_per_block=250)
    assert layout.describe().splitlines()[0] == "linear layout sorted by (g, a): 4 blocks"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": [], "target_blocks": 2}, "at least one column"),
        ({"columns": ["aa"], "target_blocks": 2}, "unknown column 'aa'.*Did you mean 'a'"),
        ({"columns": ["a", "x"], "target_blocks": 2, "max_dims": 1}, "too many dimensions"),
        ({"columns": ["a"]}, "exactly one of"),
        ({"columns": ["a"], "target_blocks": 2, "rows_per_block": 3}, "exactly one of"),
        ({"columns": ["a"], "target_blocks": 0}, "target_blocks must be >= 1, got 0"),
        ({"columns": ["a"], "target_blocks": 2, "bits_per_dim": 3}, "unknown option"),
    ],
)
def test_fit_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        LinearLayout.fit(table(50), **kwargs)  # type: ignore[arg-type]


def test_empty_sample() -> None:
    with pytest.raises(LayoutError, match="empty sample"):
        LinearLayout.fit(table(0), columns=["a"], target_blocks=2)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    x=st.lists(st.one_of(st.none(), st.floats(allow_nan=True)), min_size=25, max_size=25),
    s=st.lists(st.one_of(st.none(), st.text(max_size=3)), min_size=25, max_size=25),
    blocks=st.integers(1, 8),
)
def test_assign_total_monotone_on_random_data(
    x: list[float | None], s: list[str | None], blocks: int
) -> None:
    data = pa.table({"x": pa.array(x, pa.float64()), "s": pa.array(s, pa.string())})
    layout = LinearLayout.fit(data.slice(0, 15), columns=["s", "x"], target_blocks=blocks)
    ids = layout.assign(data)
    assert ids.min() >= 0 and ids.max() < layout.n_blocks
    assert np.array_equal(from_json(layout.to_json()).assign(data), ids)
    key = layout.sort_key(data)
    assert key is not None
    assert np.all(np.diff(ids[np.argsort(key)]) >= 0)


def test_expression_dimension_sorts_by_its_value() -> None:
    sample = table(3_000)
    layout = LinearLayout.fit(sample, columns=["year(day)", "a"], target_blocks=6)
    ids = layout.assign(sample)
    years = np.array([d.year for d in sample["day"].to_pylist()])
    assert np.all(np.diff(ids[np.lexsort((sample["a"].to_numpy(), years))]) >= 0)
    assert np.array_equal(from_json(layout.to_json()).assign(sample), ids)
