"""The workload analyzer (thesis Algorithms 1-3) on constructed workloads, no Spark."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.advisor.analyzer import (
    ADDITIONAL,
    CHOSEN,
    CURVE,
    DROPPED,
    SOP,
    AnalyzerConfig,
    analyze,
)
from lakelayout.advisor.correlation import (
    Edge,
    Graph,
    discordant_pairs,
    mean_square_contingency,
    sorting_index,
    traverse,
)
from lakelayout.errors import InvalidOption
from lakelayout.expr.nodes import Predicate
from lakelayout.expr.parse import parse_predicate

N = 3000
RNG = np.random.default_rng(7)
PRICE = RNG.uniform(0, 1000, N)
SAMPLE = pa.table(
    {
        "price": PRICE,
        "price_cents": np.round(PRICE * 100).astype(np.int64),  # perfectly correlated with price
        "weight": RNG.uniform(0, 50, N),  # independent
        "kind": RNG.integers(0, 4, N),
        "agent": [f"agent-{i % 5}/1.{i % 3}" for i in range(N)],
        "constant": np.full(N, 3, dtype=np.int64),
        "a": RNG.uniform(0, 1, N),
        "b": RNG.uniform(0, 1, N),
        "c": RNG.uniform(0, 1, N),
        "d": RNG.uniform(0, 1, N),
        "e": RNG.uniform(0, 1, N),
    }
)
FUNCTIONS = {"isbot": pa.bool_()}
UDFS = {"isbot": lambda arr: pa.array([v.endswith(".0") for v in arr.to_pylist()])}


def _parse(queries: Sequence[str]) -> list[Predicate]:
    return [parse_predicate(q, SAMPLE.schema, functions=FUNCTIONS) for q in queries]


def _ranges(column: str, n: int, low: float, high: float, width: float) -> list[str]:
    # a seed of the name that is the same in every process (``hash`` of a str is not: with
    # 19 of its 1000 values two of 30 bounds rounded alike and the counts came out wrong)
    rng = np.random.default_rng(zlib.crc32(column.encode()))
    starts = rng.uniform(low, high - width, n)
    return [f"{column} BETWEEN {s:.2f} AND {s + width:.2f}" for s in starts]


def test_a_frequent_range_column_is_chosen_for_the_curve() -> None:
    queries = _ranges("price", 30, 0, 1000, 40) + _ranges("weight", 2, 0, 50, 5)
    result = analyze(_parse(queries), SAMPLE)
    price = result.feature("price", CURVE)
    assert price.status == CHOSEN and result.curve[0] == "price"
    assert price.queries == 30 and price.points == 60
    assert "in 30 of 32 queries (94%), 60 distinct comparison points" in price.reasons[0]
    assert "chosen for the curve (#1 by frequency)" in price.reasons[-1]


def test_a_perfectly_correlated_column_is_additional_not_chosen() -> None:
    queries = _ranges("price", 20, 0, 1000, 40) + _ranges("price_cents", 12, 0, 100_000, 4000)
    result = analyze(_parse(queries), SAMPLE)
    cents = result.feature("price_cents", CURVE)
    assert result.curve == ["price"]
    assert cents.status == ADDITIONAL and cents.correlated_with == "price"
    assert "additional: correlated with price (sorting index 1.00 / 1.00)" in cents.reasons[-1]
    # an independent column of the same frequency is chosen beside it
    mixed = analyze(_parse(queries + _ranges("weight", 12, 0, 50, 5)), SAMPLE)
    assert mixed.curve == ["price", "weight"] and mixed.curve_additional == ["price_cents"]


def test_without_a_sample_correlated_columns_are_both_chosen() -> None:
    queries = _ranges("price", 20, 0, 1000, 40) + _ranges("price_cents", 12, 0, 100_000, 4000)
    result = analyze(_parse(queries), None)
    assert result.curve == ["price", "price_cents"]
    assert "no sample rows: correlations were not checked" in result.lines()[1]


def test_a_constant_column_is_not_correlated_with_everything() -> None:
    # sorted by price, the constant column looks sorted (the thesis's false positive);
    # the reverse direction does not hold, so there is no edge
    queries = _ranges("price", 20, 0, 1000, 40) + [f"constant >= {i}" for i in range(12)]
    result = analyze(_parse(queries), SAMPLE)
    assert set(result.curve) == {"price", "constant"}
    assert result.curve_graph is not None and result.curve_graph.edges == []
    assert any(a == "price" and b == "constant" for a, b, _ in result.curve_graph.one_way)
    assert "needs both directions" in result.feature("constant").reasons[-1]


def test_like_and_udf_predicates_become_sop_features() -> None:
    queries = _ranges("price", 10, 0, 1000, 40)
    queries += ["agent LIKE '%agent-3%'"] * 6 + ["isbot(agent)"] * 5 + ["agent != 'x'"] * 4
    result = analyze(_parse(queries), SAMPLE, udfs=UDFS)
    like = result.feature("agent LIKE '%agent-3%'", SOP)
    udf = result.feature("isbot(agent) = true", SOP)
    assert like.status == CHOSEN and udf.status == CHOSEN
    assert "LIKE pattern: not a range, evaluated per row by SOP" in like.reasons
    assert "boolean expression or UDF call: not a range, evaluated per row by SOP" in udf.reasons
    assert udf.calls_udf and not like.calls_udf
    assert result.feature("agent != 'x'", SOP).status == CHOSEN
    assert result.sop == ["agent LIKE '%agent-3%'", "isbot(agent) = true", "agent != 'x'"]


def test_few_comparison_points_move_a_column_to_sop() -> None:
    queries = _ranges("price", 10, 0, 1000, 40) + [f"kind = {i % 2}" for i in range(8)]
    result = analyze(_parse(queries), SAMPLE, config=AnalyzerConfig(theta=3))
    kind = result.feature("kind", CURVE)
    assert kind.status == DROPPED and kind.points == 2
    assert "moved to SOP: only 2 distinct comparison points (< θ=3)" in kind.reasons[-1]
    assert result.feature("kind = 0L", SOP).status == CHOSEN
    assert result.feature("kind = 1L", SOP).status == CHOSEN
    assert (
        "range filter on kind: only 2 distinct comparison points (< θ=3)"
        in result.feature("kind = 1L", SOP).reasons
    )
    # with enough comparison points the same column is a curve feature
    many = analyze(_parse(queries + [f"kind = {i}" for i in range(2, 4)]), SAMPLE,
                   config=AnalyzerConfig(theta=3))  # fmt: skip
    assert "kind" in many.curve


def test_dependent_sop_features_keep_one_and_the_other_is_additional() -> None:
    # price < 500 and price_cents < 50000 select the same rows: contingency 1
    queries = ["price < 500.0"] * 8 + ["price_cents < 50000"] * 5 + ["agent LIKE '%-1/%'"] * 5
    result = analyze(_parse(queries), SAMPLE)
    assert result.sop == ["price < 500.0D", "agent LIKE '%-1/%'"]
    dependent = result.feature("price_cents < 50000L", SOP)
    assert dependent.status == ADDITIONAL and dependent.correlated_with == "price < 500.0D"
    assert "mean-square contingency 1.00 / 1.00" in dependent.reasons[-1]


def test_infrequent_and_opaque_filters_are_dropped_with_reasons() -> None:
    queries = [*_ranges("price", 40, 0, 1000, 40), "weight > 3.0", "rand() > 0.5", "rand() > 0.5"]
    result = analyze(_parse(queries), SAMPLE)
    weight = result.feature("weight", CURVE)
    assert weight.status == DROPPED
    assert result.feature("weight > 3.0D", SOP).status == DROPPED
    assert (
        "dropped: used by too few queries (needs 3: min_share=5%)"
        in result.feature("weight > 3.0D", SOP).reasons
    )
    opaque = result.feature("(RAND() > 0.5)", SOP)
    assert opaque.status == DROPPED and opaque.queries == 2
    assert "dropped: not understood by lakelayout, cannot be evaluated" in opaque.reasons


def test_the_curve_takes_at_most_four_features() -> None:
    queries: list[str] = []
    for i, column in enumerate("abcde"):
        queries += _ranges(column, 10 - i, 0, 1, 0.1)
    result = analyze(_parse(queries), SAMPLE)
    assert result.curve == ["a", "b", "c", "d"]
    e = result.feature("e", CURVE)
    assert e.status == ADDITIONAL
    assert "the curve already has 4 features" in e.reasons[-1]
    lines = result.lines()
    assert lines[0] == "40 queries analyzed"
    assert lines[1].startswith("chosen     curve a: in 10 of 40 queries")


def test_bad_thresholds_are_refused_by_name() -> None:
    with pytest.raises(InvalidOption, match=r"max_curve=5, sort_eps=0.7"):
        AnalyzerConfig(max_curve=5, sort_eps=0.7)
    # of the wrong type: 10.5 rows were taken, then a raw TypeError (an audit)
    with pytest.raises(
        InvalidOption, match=r"wrong type: theta='5', correlation_rows=10.5 \(theta"
    ):
        AnalyzerConfig(theta="5", correlation_rows=10.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match=r"wrong type: min_share=None"):
        AnalyzerConfig(min_share=None)  # type: ignore[arg-type]


def test_sorting_index_and_contingency() -> None:
    x = np.arange(100)
    assert sorting_index(x, x) == 1.0
    assert sorting_index(x, -x) == 0.0
    noisy = np.random.default_rng(0).permutation(100)
    assert 0.35 < sorting_index(x, noisy) < 0.65
    month = x // 10  # ties in the sorted feature do not count against it
    assert sorting_index(x, month) == 1.0
    # booleans and unsigned values near the top of their range rank like any others
    assert sorting_index(x[:3], np.array([True, False, True])) == 0.5
    top = np.array([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64)
    assert sorting_index(x[:3], top) == 0.5
    a = np.arange(100) % 2 == 0
    assert mean_square_contingency(a, a) == 1.0
    assert mean_square_contingency(a, np.ones(100, bool)) == 0.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=60), st.integers(1, 2**40), st.booleans())
def test_discordant_pairs_count_every_descending_pair_once(
    values: list[int], span: int, negative: bool
) -> None:
    y = np.array([v % span for v in values], dtype=np.int64)  # small spans: many ties
    if negative:
        y = y - 2**41
    expected = sum(1 for i in range(len(y)) for j in range(i + 1, len(y)) if y[i] > y[j])
    assert discordant_pairs(y) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-5, 5), st.integers(-(2**62), 2**62)), min_size=2, max_size=80)
)
def test_sorting_index_is_ascending_pairs_over_untied_pairs(rows: list[tuple[int, int]]) -> None:
    from scipy import stats

    keys = np.array([k for k, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    y = values[np.argsort(keys, kind="stable")]
    n = len(y)
    ascending = sum(1 for i in range(n) for j in range(i + 1, n) if y[i] < y[j])
    descending = sum(1 for i in range(n) for j in range(i + 1, n) if y[i] > y[j])
    if ascending + descending == 0:
        assert sorting_index(keys, values) == 1.0
        return
    assert sorting_index(keys, values) == pytest.approx(ascending / (ascending + descending))
    # the same as Kendall's tau-b (the x side untied) rescaled to the untied pairs
    pairs, untied = n * (n - 1) / 2, ascending + descending
    tau = stats.kendalltau(np.arange(n), y).statistic
    assert sorting_index(keys, values) == pytest.approx((1 + tau * (pairs / untied) ** 0.5) / 2)


def test_traversal_keeps_a_neighbour_with_other_correlations_in_play() -> None:
    g = Graph(["1", "2", "3", "4"], [Edge("1", "2", 1, 1), Edge("2", "4", 1, 1)])
    walk = traverse(g, ["1", "3", "4", "2"], limit=2)
    assert walk.primary == ["1", "3"]  # 2 still correlates with 4: not covered by 1 alone
    assert walk.correlated == {} and walk.unvisited == ["4", "2"]
    walk = traverse(g, ["1", "4", "3", "2"], limit=3)
    assert walk.primary == ["1", "4", "3"] and walk.correlated == {"2": "4"}


def test_partition_columns_and_expressions_only_over_them_are_not_features() -> None:
    # weight partitions the table: every file holds one weight, so no layout separates it
    queries = (
        _ranges("weight", 20, 0, 50, 5)
        + _ranges("price", 20, 0, 1000, 40)
        + [f"weight * 2 > {i}" for i in range(20)]
        + ["weight != 3"] * 10
    )
    plain = analyze(_parse(queries), SAMPLE)
    assert "weight" in plain.curve and plain.sop  # a feature of an unpartitioned table
    result = analyze(_parse(queries), SAMPLE, partition_columns=["weight", "kind"])
    assert result.curve == ["price"] and result.sop == []
    reason = "dropped: partition column: files are already split by it"
    dropped = [f for f in result.features if f.key != "price"]
    assert {f.key for f in dropped if f.kind == CURVE} == {"weight", "(2 * weight)"}
    assert "weight != 3.0D" in {f.key for f in dropped if f.kind == SOP}
    for f in dropped:
        assert f.status == DROPPED and f.reasons[-1] == reason, (f.key, f.reasons)
    assert sum(line.endswith(reason) for line in result.lines()) == len(dropped)


def test_chosen_features_are_listed_in_the_order_of_their_ranks() -> None:
    """Two curve features in as many queries: b has more comparison points and ranks
    first, a comes first in the log; the lines listed a (#2) before b (#1) (an audit)."""
    queries = []
    for a, b in zip(_ranges("a", 10, 0, 1, 0.1), _ranges("b", 10, 0, 1, 0.1), strict=True):
        queries += [a, b]
    result = analyze(_parse(queries), SAMPLE)
    assert result.feature("b", CURVE).points > result.feature("a", CURVE).points  # type: ignore[operator]
    chosen = [line for line in result.lines() if line.startswith("chosen")]
    assert [line.split(":")[0].split()[-1] for line in chosen] == ["b", "a"]
    assert "(#1 by frequency)" in chosen[0] and "(#2 by frequency)" in chosen[1]
