"""The cost book's fast path prices exactly as the straightforward per-query planner call.

:class:`CostBook` stacks the virtual files of many layouts, runs the min/max
rules once per predicate over the stack, memoizes by (layout, predicate) and
skips the logical-index rule where min/max keeps nothing. None of that may
change a single cost: every entry must be the very float
:meth:`VirtualState.cost` (one ``plan`` call per query and layout) gives.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import LakelayoutError
from lakelayout.expr.nodes import Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts import HilbertLayout, LinearLayout, PandoLayout, QdTreeLayout, SOPZLayout
from lakelayout.layouts.base import Layout
from lakelayout.layouts.zorder import ZOrderLayout
from lakelayout.online.costs import CostBook, VirtualState
from tests.expr.predicates import planner_predicates, planner_table

#: predicates the workload-aware layouts are fitted on (the tested ones are drawn)
FIT_ON = [
    "i < 5",
    "i >= 100",
    "d >= DATE '1995-03-01' AND d < DATE '1996-01-01'",
    "s = 'abc' OR s IS NULL",
    "ts > TIMESTAMP '2000-01-01 00:00:00'",
    "x BETWEEN 0 AND 3",
    "ti IN (1, 3, 10)",
]


#: predicates where a layout's logical index rules out files min/max keeps (checked below)
INDEX_MATTERS = ["x BETWEEN 0 AND 3", "ti IN (1, 3, 10)", "ti NOT IN (1, 3, 10)"]


def queries() -> st.SearchStrategy[str]:
    """The edge-case grammar, the fitted-on predicates, and those combined with it."""
    fixed = st.sampled_from(FIT_ON + INDEX_MATTERS)
    return st.one_of(
        planner_predicates(),
        fixed,
        st.builds("({} AND {})".format, fixed, planner_predicates(max_leaves=2)),
        st.builds("({} OR {})".format, fixed, fixed),
    )


def _sample() -> pa.Table:
    """The edge-case table resampled to 400 rows (blocks then hold several distinct values,
    some one value only: the exact single-value rule and the bounds rules both run)."""
    base = planner_table()
    rng = np.random.default_rng(11)
    return base.take(pa.array(rng.integers(0, base.num_rows, 400)))


SAMPLE = _sample()


def _layouts() -> list[Layout]:
    fits = [
        lambda: QdTreeLayout.fit(SAMPLE, FIT_ON, target_blocks=12),
        lambda: QdTreeLayout.fit(SAMPLE, FIT_ON[:3], target_blocks=5),
        lambda: PandoLayout.fit(SAMPLE, FIT_ON, target_blocks=10, k=2, max_leaves=8),
        lambda: SOPZLayout.fit(SAMPLE, FIT_ON, columns=["i", "d"], target_blocks=8),
        lambda: HilbertLayout.fit(SAMPLE, columns=["i", "d", "ts"], target_blocks=9),
        lambda: ZOrderLayout.fit(SAMPLE, columns=["x"], target_blocks=6),
        lambda: LinearLayout.fit(SAMPLE, columns=["s"], target_blocks=7),
    ]
    return [fit() for fit in fits]


LAYOUTS = _layouts()


def _parsed(texts: list[str]) -> list[Predicate]:
    out = []
    for text in texts:
        try:
            out.append(parse_predicate(text, SAMPLE.schema))
        except LakelayoutError:
            continue  # a drawn text that does not bind (a type mismatch): not a query
    return out


def _reference(layouts: list[Layout], predicates: list[Predicate]) -> np.ndarray:
    """The straightforward computation: one planner call per (query, layout), no sharing."""
    out = np.zeros((len(predicates), len(layouts)))
    for j, layout in enumerate(layouts):
        state = VirtualState(layout, SAMPLE)
        for i, p in enumerate(predicates):
            out[i, j] = state.cost(p)
    return out


def test_every_family_was_fitted_with_several_blocks() -> None:
    assert [layout.family for layout in LAYOUTS] == [
        "qdtree",
        "qdtree",
        "pando",
        "sop-z",
        "hilbert",
        "zorder",
        "linear",
    ]
    assert all(layout.n_blocks >= 2 for layout in LAYOUTS)


def test_the_logical_index_rules_out_more_than_min_max_on_some_queries() -> None:
    """Else the comparison below would not cover the layout rule of the fast path."""
    from lakelayout.online.costs import files_kept

    differs = 0
    for layout in LAYOUTS:
        state = VirtualState(layout, SAMPLE)
        for p in _parsed(INDEX_MATTERS):
            with_index = files_kept(p, state.files, schema=SAMPLE.schema, index=state.index)
            minmax = files_kept(p, state.files, schema=SAMPLE.schema)
            differs += int((with_index != minmax).any())
    assert differs >= 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(queries(), min_size=1, max_size=8),
    chosen=st.lists(st.integers(0, len(LAYOUTS) - 1), min_size=1, max_size=9),
    warm=st.lists(st.integers(0, len(LAYOUTS) - 1), max_size=3),
    repeat=st.booleans(),
)
def test_the_book_prices_exactly_as_one_planner_call_per_query(
    texts: list[str], chosen: list[int], warm: list[int], repeat: bool
) -> None:
    predicates = _parsed(texts)
    if repeat and predicates:
        predicates = predicates + predicates[:2]  # a query asked again: served from the memo
    layouts = [LAYOUTS[j] for j in chosen]  # duplicates allowed
    book = CostBook(SAMPLE)
    if warm and predicates:
        # some pairs already priced (one layout at a time): the rest goes through the stack
        book.matrix([LAYOUTS[j] for j in warm], predicates[: len(predicates) // 2 + 1])
    got = book.matrix(layouts, predicates)
    expected = _reference(layouts, predicates)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected), (texts, chosen, got - expected)
    again = book.matrix(layouts, predicates)
    assert np.array_equal(again, expected)


def test_a_query_asked_again_is_priced_once() -> None:
    book = CostBook(SAMPLE)
    p = _parsed(["i < 5 AND s = 'abc'"])
    first = book.matrix(LAYOUTS, p + p)
    assert book.priced == len(LAYOUTS)
    assert book.hits == len(LAYOUTS)
    assert np.array_equal(first[0], first[1])
    book.matrix(LAYOUTS[:2], _parsed(["i < 5 AND s = 'abc'"]))  # a new parse of the same text
    assert book.priced == len(LAYOUTS)


def test_a_layout_rebuilt_from_its_json_shares_the_costs() -> None:
    from lakelayout.layouts.base import from_json

    book = CostBook(SAMPLE)
    p = _parsed(["d >= DATE '1995-03-01'", "i IN (0, 5)"])
    book.matrix([LAYOUTS[0]], p)
    copy = from_json(LAYOUTS[0].to_json())
    assert copy is not LAYOUTS[0]
    assert np.array_equal(book.costs(copy, p), book.costs(LAYOUTS[0], p))
    assert book.priced == len(p)


def test_retain_forgets_other_layouts_and_old_costs_and_prices_the_same() -> None:
    predicates = _parsed([*FIT_ON, "ti NOT IN (1, 3, 10)"])
    expected = _reference(LAYOUTS, predicates)
    book = CostBook(SAMPLE)
    assert np.array_equal(book.matrix(LAYOUTS, predicates), expected)
    kept = [LAYOUTS[0], LAYOUTS[4]]
    book.retain(kept, predicates=len(predicates))  # no more predicates than the limit
    assert set(book._states) == {book.key(layout) for layout in kept}
    assert all(len(book._costs[key]) == len(predicates) for key in book._states)
    priced = book.priced
    assert np.array_equal(book.matrix(kept, predicates), expected[:, [0, 4]])
    assert book.priced == priced  # the kept layouts' costs were kept
    # beyond the limit every memoized cost goes; the layouts' virtual files stay
    book.retain(kept, predicates=len(predicates) - 1)
    assert set(book._states) == {book.key(layout) for layout in kept}
    assert not book._pids and all(not memo for memo in book._costs.values())
    # what was forgotten is rebuilt on demand, the same floats
    assert np.array_equal(book.matrix(LAYOUTS, predicates), expected)
    assert book.priced == priced + len(LAYOUTS) * len(predicates)


def test_a_function_of_a_column_is_priced_one_layout_at_a_time() -> None:
    """``i + 1`` overflows on a single-valued block holding INT_MAX: the rule gives up for
    every file it was asked about at once, so stacked files would lose the skipping other
    layouts' files get alone."""
    predicates = _parsed(["NOT (i + 1 != 1)", "i + 1 = 1 AND s = 'abc'"])
    layouts = [LAYOUTS[0], LAYOUTS[2], LAYOUTS[3]]
    assert np.array_equal(
        CostBook(SAMPLE).matrix(layouts, predicates), _reference(layouts, predicates)
    )


def test_a_book_on_an_empty_sample_refuses_to_price_a_layout() -> None:
    book = CostBook(SAMPLE.slice(0, 0))  # an empty table's: built, prices nothing
    with pytest.raises(LakelayoutError, match="empty sample"):
        book.costs(LAYOUTS[0], _parsed(["i < 3"]))
