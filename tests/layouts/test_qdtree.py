"""QdTreeLayout: greedy construction, routing, the block index, JSON, errors."""

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
from lakelayout.layouts.qdtree import CutMemo, QdTreeLayout, Workspace

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "25"))


def table(n: int, seed: int) -> pa.Table:
    """Ints with nulls, floats with NaN, strings with nulls, a date."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(0, 100, n).astype(object)
    ints[rng.random(n) < 0.1] = None
    xs = rng.normal(0, 10, n)
    xs[rng.random(n) < 0.05] = np.nan
    ss = rng.choice(["apple", "apricot", "banana", "blueberry", "cherry", ""], n).astype(object)
    ss[rng.random(n) < 0.1] = None
    return pa.table(
        {
            "i": pa.array(ints, pa.int64()),
            "x": pa.array(xs, pa.float64()),
            "s": pa.array(ss, pa.string()),
            "d": pa.array(rng.integers(18000, 18400, n).astype("int32"), pa.int32()).cast(
                pa.date32()
            ),
        }
    )


WORKLOAD = [
    "i < 20",
    "i >= 80",
    "i BETWEEN 40 AND 60",
    "x > 5.0",
    "x <= -5.0",
    "s IN ('apple', 'cherry')",
    "s LIKE 'b%'",
    "month(d) = 3",
    "i IS NULL",
    "i < 30 AND s = 'banana'",
    "x > 10.0 OR i > 90",
]


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    return table(4000, seed=1)


@pytest.fixture(scope="module")
def fitted(sample: pa.Table) -> QdTreeLayout:
    return QdTreeLayout.fit(sample, WORKLOAD, rows_per_block=200)


def test_leaves_are_blocks_of_at_least_min_rows(fitted: QdTreeLayout, sample: pa.Table) -> None:
    ids = fitted.assign(sample)
    sizes = np.bincount(ids, minlength=fitted.n_blocks)
    assert fitted.n_blocks > 4
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < fitted.n_blocks
    assert sizes.min() >= 200


def test_target_blocks_caps_leaves(sample: pa.Table) -> None:
    layout = QdTreeLayout.fit(sample, WORKLOAD, target_blocks=5)
    assert 1 < layout.n_blocks <= 5


def test_estimate_bounds_and_skipping(fitted: QdTreeLayout, sample: pa.Table) -> None:
    est = fitted.estimate(WORKLOAD, sample)
    assert est.shape == (len(WORKLOAD),)
    for q, e in zip(WORKLOAD, est, strict=True):
        matching = evaluate(parse_predicate(q, sample.schema), sample).mean()
        assert matching <= e <= 1.0
    assert est.mean() < 0.6  # the tree really skips for its own workload


def test_blocks_for_skips_and_keeps(fitted: QdTreeLayout, sample: pa.Table) -> None:
    narrow = fitted.blocks_for("i < 5")
    assert 0 < narrow.size < fitted.n_blocks
    assert np.all(np.diff(narrow) > 0) and narrow.dtype == np.int64
    assert fitted.blocks_for("FALSE").size == 0
    assert fitted.blocks_for("rand() < 0.5").size == fitted.n_blocks  # opaque: keep all


def test_assign_is_deterministic_and_picklable(fitted: QdTreeLayout) -> None:
    fresh = table(500, seed=9)
    again = pickle.loads(pickle.dumps(fitted))
    assert np.array_equal(fitted.assign(fresh), again.assign(fresh))
    assert np.array_equal(fitted.assign(fresh), fitted.assign(fresh))
    assert fitted.assign(fresh.slice(0, 0)).size == 0


def test_json_round_trip(fitted: QdTreeLayout, sample: pa.Table) -> None:
    back = from_json(fitted.to_json())
    assert isinstance(back, QdTreeLayout)
    assert back.n_blocks == fitted.n_blocks
    fresh = table(500, seed=5)
    assert np.array_equal(back.assign(fresh), fitted.assign(fresh))
    for q in WORKLOAD:
        assert np.array_equal(back.blocks_for(q), fitted.blocks_for(q))
    assert back.to_json() == fitted.to_json()


def test_rows_inside_a_block_follow_the_columns_the_tree_cuts_on_most(
    fitted: QdTreeLayout, sample: pa.Table
) -> None:
    """A leaf is cut no further; its rows are ordered by a Z-order over the plain columns
    the tree's nodes cut on most, which survives JSON and pickling."""
    from collections import Counter

    tree = fitted.tree
    counts = Counter(c for cut in tree.node_cut if cut >= 0 for c in tree.cuts[cut].atom.columns())
    assert fitted.inner is not None
    inner = [d.sql for d in fitted.inner.dimensions]
    assert len(inner) == min(3, len(counts))
    assert [counts[c] for c in inner] == sorted(counts.values(), reverse=True)[: len(inner)]
    fresh = table(500, seed=5)
    key = fitted.sort_key(fresh)
    assert key is not None and key.dtype == np.int64 and len(key) == fresh.num_rows
    # the key orders rows by those columns: the rows with the lowest keys hold low
    # values of the first column, the highest keys high ones (Z-order's top bits)
    first = fresh.column(inner[0]).to_numpy(zero_copy_only=False)
    by_key = np.argsort(key, kind="stable")
    low, high = by_key[:50], by_key[-50:]
    assert inner[0] in ("i", "x")  # numeric columns lead in this workload
    with np.errstate(all="ignore"):
        assert np.nanmean(first[low].astype(float)) < np.nanmean(first[high].astype(float))
    for back in (from_json(fitted.to_json()), pickle.loads(pickle.dumps(fitted))):
        assert np.array_equal(back.sort_key(fresh), key)
    # a document written before the order existed loads, with rows left unordered
    state = fitted.to_dict()
    del state["inner"]
    old = QdTreeLayout.from_dict(state)
    assert old.sort_key(fresh) is None
    assert np.array_equal(old.assign(fresh), fitted.assign(fresh))


def test_a_tree_that_cuts_no_plain_column_leaves_blocks_unordered() -> None:
    t = pa.table({"m": pa.array([{"k": i % 7} for i in range(400)], pa.map_(pa.string(), pa.int64())), "i": list(range(400))})  # fmt: skip
    layout = QdTreeLayout.fit(t, ["m['k'] = 3", "m['k'] > 4"], target_blocks=3)
    assert layout.n_blocks > 1 and layout.inner is None
    assert layout.sort_key(t) is None


def test_describe(fitted: QdTreeLayout) -> None:
    text = fitted.describe()
    assert text.startswith(f"qdtree: {fitted.n_blocks} blocks")
    assert "tree:" in text


def test_single_leaf_when_nothing_to_cut(sample: pa.Table) -> None:
    layout = QdTreeLayout.fit(sample, ["rand() < 0.5"], rows_per_block=10)
    assert layout.n_blocks == 1
    assert layout.assign(sample).max() == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of target_blocks"),
        ({"rows_per_block": 10, "target_blocks": 3}, "exactly one of target_blocks"),
        ({"rows_per_block": 0}, "rows_per_block must be an integer >= 1, got 0"),
        ({"target_blocks": -2}, "target_blocks must be an integer >= 1, got -2"),
        ({"rows_per_block": 10, "min_leaf_row": 3}, "Did you mean 'min_leaf_rows'"),
    ],
)
def test_fit_errors(sample: pa.Table, kwargs: dict, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        QdTreeLayout.fit(sample, WORKLOAD, **kwargs)


def test_fit_input_errors(sample: pa.Table) -> None:
    with pytest.raises(LayoutError, match="empty sample"):
        QdTreeLayout.fit(sample.slice(0, 0), WORKLOAD, rows_per_block=10)
    with pytest.raises(LayoutError, match="at least one predicate"):
        QdTreeLayout.fit(sample, [], rows_per_block=10)
    with pytest.raises(LayoutError, match="single"):
        QdTreeLayout.fit(sample, "i < 3", rows_per_block=10)
    with pytest.raises(LayoutError, match="SQL strings or Predicate"):
        QdTreeLayout.fit(sample, [42], rows_per_block=10)
    with pytest.raises(LayoutError, match="pyarrow Table"):
        QdTreeLayout.fit({"i": [1]}, WORKLOAD, rows_per_block=10)


def test_from_dict_rejects_bad_documents(fitted: QdTreeLayout) -> None:
    state = fitted.to_dict()
    state["tree"]["nodes"][0] = [0, 0, 0]
    with pytest.raises(LayoutError, match="malformed"):
        QdTreeLayout.from_dict(state)
    with pytest.raises(LayoutError, match="not a qdtree layout"):
        QdTreeLayout.from_dict({"family": "pando"})


# ---------------------------------------------------------------- safety property

ATOMS = st.one_of(
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.integers(-5, 105)).map(
        lambda t: f"i {t[0]} {t[1]}"
    ),
    st.tuples(st.sampled_from(["<", "<=", ">", ">="]), st.floats(-30, 30)).map(
        lambda t: f"x {t[0]} {t[1]!r}"
    ),
    st.lists(
        st.sampled_from(["apple", "banana", "cherry", "", "kiwi"]), min_size=1, max_size=3
    ).map(lambda v: "s IN (" + ", ".join(f"'{x}'" for x in v) + ")"),
    st.tuples(st.integers(-5, 100), st.integers(0, 40)).map(
        lambda t: f"i BETWEEN {t[0]} AND {t[0] + t[1]}"
    ),
    st.integers(1, 12).map(lambda m: f"month(d) = {m}"),
    st.sampled_from(
        [
            "s LIKE 'a%'",
            "s LIKE 'bl%'",
            "s NOT LIKE 'b%'",
            "s LIKE '%rry'",
            "i IS NULL",
            "i IS NOT NULL",
            "s IS NULL",
            "x = CAST('NaN' AS DOUBLE)",
            "x != x",
            "s < 'b'",
            "s >= 'c'",
        ]
    ),
)


@st.composite
def queries(draw: st.DrawFn, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(ATOMS)
    op = draw(st.sampled_from([" AND ", " OR "]))
    text = op.join(f"({q})" for q in draw(st.lists(queries(depth - 1), min_size=2, max_size=3)))
    return f"NOT ({text})" if draw(st.integers(0, 4)) == 0 else text


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=st.lists(queries(), min_size=1, max_size=8),
    unseen=st.lists(queries(), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
    rows_per_block=st.integers(5, 60),
)
def test_blocks_for_never_omits_a_matching_row(
    workload: list[str], unseen: list[str], seed: int, rows_per_block: int
) -> None:
    sample = table(400, seed)
    layout = QdTreeLayout.fit(sample, workload, rows_per_block=rows_per_block)
    fresh = table(600, seed + 1)  # rows the layout never saw
    blocks = layout.assign(fresh)
    for q in workload + unseen:
        hit = evaluate(parse_predicate(q, fresh.schema), fresh)
        needed = np.unique(blocks[hit])
        kept = layout.blocks_for(q)
        assert np.isin(needed, kept).all(), (q, layout.describe())


def _workspace_facts(ws: Workspace) -> tuple[object, ...]:
    return (
        [c.sql() for c in ws.cuts],
        ws.masks.tobytes(),
        ws.masks.shape,
        ws.skip_true.tobytes(),
        ws.skip_false.tobytes(),
        ws.skip_true.shape,
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(queries(), min_size=4, max_size=24),
    window=st.integers(2, 8),
    step=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_a_workspace_built_with_the_memo_is_the_one_built_without(
    stream: list[str], window: int, step: int, seed: int
) -> None:
    """Windows sliding over a stream, built with one memo (as the online manager does)
    and each from scratch: the same cuts, masks and skip outcomes; a new sample object
    in the middle starts the memo over."""
    first, second = table(300, seed), table(300, seed + 1)
    memo = CutMemo()
    for n, end in enumerate(range(window, len(stream) + step, step)):
        sample = first if n < 3 else second
        preds = [parse_predicate(q, sample.schema) for q in stream[max(0, end - window) : end]]
        assert _workspace_facts(Workspace.build(sample, preds, memo=memo)) == _workspace_facts(
            Workspace.build(sample, preds)
        )


def test_the_memo_answers_a_repeated_window_and_forgets_older_ones() -> None:
    sample = table(300, 0)
    a = [parse_predicate(q, sample.schema) for q in WORKLOAD[:6]]
    b = [parse_predicate(q, sample.schema) for q in WORKLOAD[6:]]
    memo = CutMemo()
    Workspace.build(sample, a, memo=memo)
    assert memo.hits == 0 and memo.misses > 0
    misses = memo.misses
    Workspace.build(sample, a, memo=memo)  # the same window again: nothing recomputed
    assert memo.misses == misses and memo.hits > 0
    Workspace.build(sample, b, memo=memo)  # a window sharing no query
    Workspace.build(sample, a, memo=memo)  # a's entries were dropped by b's build
    assert memo.misses >= 2 * misses
    hits = memo.hits
    Workspace.build(table(300, 0), a, memo=memo)  # an equal but new sample: nothing reused
    assert memo.hits == hits
