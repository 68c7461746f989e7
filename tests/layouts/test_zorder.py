"""Z-order bit interleaving and the curve-layout contract (shared with Hilbert)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.errors import LayoutError
from lakelayout.layouts.base import from_json
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.zorder import (
    CurveLayout,
    ZOrderLayout,
    default_bits,
    interleave_bits,
    key_cut_bounds,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "40"))
CURVES = [ZOrderLayout, HilbertLayout]


def uniform_table(n: int, seed: int = 0, null_fraction: float = 0.0) -> pa.Table:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1_000_000, n)
    mask = rng.random(n) < null_fraction
    return pa.table(
        {
            "a": pa.array(a, mask=mask),
            "b": rng.random(n),
            "c": pa.array([f"k{v:05d}" for v in rng.integers(0, 50_000, n)]),
            "d": rng.normal(size=n),
        }
    )


# ---------------------------------------------------------------- Z-order key


def naive_interleave(ranks: list[int], bits: int) -> int:
    d = len(ranks)
    key = 0
    for j in range(bits):
        for i, r in enumerate(ranks):
            key |= ((r >> j) & 1) << (j * d + (d - 1 - i))
    return key


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.integers(1, 8).flatmap(lambda d: st.tuples(st.just(d), st.integers(1, 63 // d))), st.data()
)
def test_interleave_matches_bitwise_definition(shape: tuple[int, int], data: st.DataObject) -> None:
    d, bits = shape
    rows = data.draw(
        st.lists(st.lists(st.integers(0, (1 << bits) - 1), min_size=d, max_size=d), min_size=1)
    )
    ranks = np.array(rows, dtype=np.uint64).T
    got = interleave_bits(ranks, bits).tolist()
    assert got == [naive_interleave(r, bits) for r in rows]


def test_zorder_visits_2d_cells_in_z_pattern() -> None:
    cells = np.array([[0, 0, 1, 1], [0, 1, 0, 1]], dtype=np.uint64)
    assert interleave_bits(cells, 1).tolist() == [0, 1, 2, 3]


def test_default_bits_fit_63() -> None:
    for d in range(1, 9):
        assert default_bits(d) >= 1 and default_bits(d) * d <= 63


def test_key_cut_bounds_never_split_a_run() -> None:
    keys = np.array([3] * 50 + list(range(100, 150)), dtype=np.uint64)
    bounds = key_cut_bounds(keys, 4)
    blocks = np.searchsorted(bounds, keys, side="right")
    assert len(set(blocks[:50].tolist())) == 1
    assert 3 not in bounds.tolist()


# ---------------------------------------------------------------- layout contract


@pytest.mark.parametrize("cls", CURVES)
def test_block_sizes_on_sample_within_tolerance(cls: type[CurveLayout]) -> None:
    sample = uniform_table(10_007)
    layout = cls.fit(sample, columns=["a", "b"], rows_per_block=300)
    sizes = np.bincount(layout.assign(sample), minlength=layout.n_blocks)
    assert layout.n_blocks == 34
    assert sizes.min() >= 0.5 * 300 and sizes.max() <= 1.5 * 300


@pytest.mark.parametrize("cls", CURVES)
def test_block_sizes_on_fresh_data_follow_the_sample(cls: type[CurveLayout]) -> None:
    layout = cls.fit(uniform_table(8_000, seed=1), columns=["b", "d", "c"], target_blocks=10)
    fresh = uniform_table(40_000, seed=2)
    sizes = np.bincount(layout.assign(fresh), minlength=layout.n_blocks)
    assert layout.n_blocks == 10
    assert sizes.min() >= 0.6 * 4_000 and sizes.max() <= 1.4 * 4_000


@pytest.mark.parametrize("cls", CURVES)
def test_assign_total_deterministic_and_persistent(cls: type[CurveLayout]) -> None:
    sample = uniform_table(3_000, null_fraction=0.1)
    layout = cls.fit(sample, columns=["a", "c", "d"], target_blocks=7)
    ids = layout.assign(sample)
    assert ids.dtype == np.int64 and len(ids) == sample.num_rows
    assert ids.min() >= 0 and ids.max() < layout.n_blocks
    assert np.array_equal(layout.assign(sample), ids)
    assert np.array_equal(pickle.loads(pickle.dumps(layout)).assign(sample), ids)
    again = from_json(layout.to_json())
    assert type(again) is cls
    assert np.array_equal(again.assign(sample), ids)
    assert again.to_json() == layout.to_json()
    batches = sample.to_batches(max_chunksize=700)
    assert np.array_equal(np.concatenate([layout.assign(b) for b in batches]), ids)


@pytest.mark.parametrize("cls", CURVES)
def test_sort_key_orders_blocks(cls: type[CurveLayout]) -> None:
    sample = uniform_table(2_000)
    layout = cls.fit(sample, columns=["a", "b"], target_blocks=5)
    key = layout.sort_key(sample)
    assert key is not None and key.dtype == np.int64 and key.min() >= 0
    ids = layout.assign(sample)
    order = np.argsort(key, kind="stable")
    assert np.all(np.diff(ids[order]) >= 0)


@pytest.mark.parametrize("cls", CURVES)
def test_nulls_do_not_share_a_block_with_smallest_values(cls: type[CurveLayout]) -> None:
    sample = uniform_table(20_000, null_fraction=0.1)
    layout = cls.fit(sample, columns=["a", "b"], target_blocks=20)
    ids = layout.assign(sample)
    a = sample["a"].to_numpy(zero_copy_only=False)
    null = np.isnan(a)
    smallest = ~null & (a <= np.nanquantile(a, 0.05))
    assert not set(ids[null].tolist()) & set(ids[smallest].tolist())


@pytest.mark.parametrize("cls", CURVES)
def test_one_dimension_is_a_range_partition(cls: type[CurveLayout]) -> None:
    sample = uniform_table(5_000)
    layout = cls.fit(sample, columns=["d"], target_blocks=8)
    ids = layout.assign(sample)
    d = sample["d"].to_numpy()
    order = np.argsort(d, kind="stable")
    assert np.all(np.diff(ids[order]) >= 0)


@pytest.mark.parametrize("cls", CURVES)
def test_heavy_duplicates_make_fewer_blocks_not_ragged_ones(cls: type[CurveLayout]) -> None:
    sample = pa.table({"k": [7] * 900 + list(range(100)), "v": [1.0] * 1000})
    layout = cls.fit(sample, columns=["k", "v"], target_blocks=10)
    ids = layout.assign(sample)
    assert len(set(ids[:900].tolist())) == 1
    assert layout.n_blocks <= 10


@pytest.mark.parametrize("cls", CURVES)
def test_describe_is_short_and_names_things(cls: type[CurveLayout]) -> None:
    layout = cls.fit(uniform_table(1_000), columns=["a", "b"], rows_per_block=100)
    text = layout.describe()
    assert text.startswith(f"{cls.family} layout on (a, b): 10 blocks")
    assert "1000 sample rows" in text and len(text.splitlines()) <= 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": []}, "at least one column"),
        ({"columns": ["a", "zz"]}, "unknown column 'zz'"),
        ({"columns": ["A", "b", "c"], "max_dims": 2}, "too many dimensions: 3 given"),
        ({"columns": ["a"], "target_blocks": 4, "rows_per_block": 10}, "exactly one of"),
        ({"columns": ["a"], "target_blocks": None}, "exactly one of"),
        ({"columns": ["a"], "target_blocks": 4, "colour": 1}, "unknown option.*colour"),
        ({"columns": ["a", "b"], "target_blocks": 4, "bits_per_dim": 40}, "bits_per_dim=40"),
        ({"columns": ["a"], "target_blocks": 4, "bits_per_dim": "x"}, "must be an integer"),
    ],
)
@pytest.mark.parametrize("cls", CURVES)
def test_fit_errors(cls: type[CurveLayout], kwargs: dict[str, object], message: str) -> None:
    kwargs = {"rows_per_block": 10, **kwargs} if "target_blocks" not in kwargs else kwargs
    with pytest.raises(LayoutError, match=message):
        cls.fit(uniform_table(100), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", CURVES)
def test_empty_sample_and_nine_dims(cls: type[CurveLayout]) -> None:
    with pytest.raises(LayoutError, match="empty sample"):
        cls.fit(uniform_table(0), columns=["a"], target_blocks=2)
    wide = pa.table({f"c{i}": [1, 2, 3] for i in range(9)})
    with pytest.raises(LayoutError, match=r"too many dimensions: 9 given.*at most 8"):
        cls.fit(wide, columns=wide.column_names, target_blocks=2)


def test_from_dict_checks_family() -> None:
    state = ZOrderLayout.fit(uniform_table(100), columns=["a"], target_blocks=2).to_dict()
    with pytest.raises(LayoutError, match="expected a hilbert layout, got family 'zorder'"):
        HilbertLayout.from_dict(state)


# ---------------------------------------------------------------- properties

column_data = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), min_size=30, max_size=30).map(
        lambda v: pa.array(v, pa.int64())
    ),
    st.lists(
        st.one_of(st.none(), st.floats(allow_nan=True, width=64)), min_size=30, max_size=30
    ).map(lambda v: pa.array(v, pa.float64())),
    st.lists(st.one_of(st.none(), st.text(max_size=4)), min_size=30, max_size=30).map(
        lambda v: pa.array(v, pa.string())
    ),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(x=column_data, y=column_data, blocks=st.integers(1, 12), curve=st.sampled_from(CURVES))
def test_assign_total_and_deterministic_on_random_data(
    x: pa.Array, y: pa.Array, blocks: int, curve: type[CurveLayout]
) -> None:
    table = pa.table({"x": x, "y": y})
    layout = curve.fit(table.slice(0, 20), columns=["x", "y"], target_blocks=blocks)
    ids = layout.assign(table)
    assert len(ids) == 30 and ids.min() >= 0 and ids.max() < layout.n_blocks
    assert np.array_equal(from_json(layout.to_json()).assign(table), ids)
    assert np.array_equal(layout.assign(table), ids)


# ---------------------------------------------------------------- expression dimensions


def test_nondeterministic_expression_is_refused() -> None:
    with pytest.raises(LayoutError, match="cannot use 'a \\* rand\\(\\)' as a dimension"):
        ZOrderLayout.fit(uniform_table(50), columns=["a * rand()"], target_blocks=2)


def test_expression_over_unknown_column_is_refused() -> None:
    with pytest.raises(LayoutError, match="cannot use 'nope % 10' as a dimension"):
        ZOrderLayout.fit(uniform_table(50), columns=["nope % 10"], target_blocks=2)


@pytest.mark.parametrize("cls", CURVES)
def test_expression_dimension_clusters_on_its_value(cls: type[CurveLayout]) -> None:
    sample = uniform_table(4_000)
    layout = cls.fit(sample, columns=["a % 10"], target_blocks=10)
    ids = layout.assign(sample)
    residue = sample["a"].to_numpy() % 10
    # the expression's value decides the block: one residue class, one block
    assert layout.n_blocks == 10
    assert [len(set(ids[residue == r].tolist())) for r in range(10)] == [1] * 10
    assert np.all(np.diff(ids[np.argsort(residue, kind="stable")]) >= 0)
    again = from_json(layout.to_json())
    assert np.array_equal(again.assign(sample), ids)
    assert np.array_equal(pickle.loads(pickle.dumps(layout)).assign(sample), ids)
