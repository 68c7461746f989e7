"""Offline optimum, static best, Greedy and Regret as decision procedures (pure)."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.errors import InvalidOption
from lakelayout.online.baselines import (
    Greedy,
    Regret,
    offline_optimum,
    schedule_cost,
    static_best,
)
from lakelayout.online.reorganizer import Reorganizer

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))


@st.composite
def small_streams(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float, int | None]:
    n = draw(st.integers(1, 3))
    t_count = draw(st.integers(1, 6))
    values = draw(
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=n * t_count, max_size=n * t_count)
    )
    costs = np.array(values).reshape(t_count, n)
    mask = np.array(
        draw(st.lists(st.booleans(), min_size=n * t_count, max_size=n * t_count))
    ).reshape(t_count, n)
    mask[
        np.arange(t_count),
        draw(st.lists(st.integers(0, n - 1), min_size=t_count, max_size=t_count)),
    ] = True
    alpha = draw(st.sampled_from([0.0, 0.5, 1.0, 2.5]))
    start = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    return costs, mask, alpha, start


def brute_force(costs: np.ndarray, mask: np.ndarray, alpha: float, start: int | None) -> float:
    t_count, n = costs.shape
    best = np.inf
    for path in itertools.product(range(n), repeat=t_count):
        if all(mask[t, s] for t, s in enumerate(path)):
            best = min(best, schedule_cost(path, costs, alpha, start=start))
    return float(best)


@settings(max_examples=EXAMPLES, deadline=None)
@given(stream=small_streams())
def test_the_dynamic_program_finds_the_cheapest_schedule(
    stream: tuple[np.ndarray, np.ndarray, float, int | None],
) -> None:
    costs, mask, alpha, start = stream
    schedule = offline_optimum(costs, alpha, start=start, available=mask)
    assert schedule.total == pytest.approx(brute_force(costs, mask, alpha, start))
    assert all(mask[t, s] for t, s in enumerate(schedule.path))
    assert schedule.total == pytest.approx(schedule_cost(schedule.path, costs, alpha, start=start))


def test_the_optimum_waits_for_a_switch_to_pay_off() -> None:
    cheap_later = np.array([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 3)
    assert offline_optimum(cheap_later, 2.0, start=0).path.tolist() == [0, 0, 0, 1, 1, 1]
    assert offline_optimum(cheap_later, 3.5, start=0).path.tolist() == [0] * 6
    assert offline_optimum(cheap_later, 3.0, start=1).total == pytest.approx(3.0)


def test_static_best_is_the_cheapest_state_available_all_along() -> None:
    costs = np.array([[0.1, 0.5, 0.0], [0.9, 0.5, 0.0], [0.2, 0.5, 0.0]])
    mask = np.array([[True, True, False], [True, True, True], [True, True, True]])
    assert static_best(costs) == (2, 0.0)
    assert static_best(costs, mask) == (0, pytest.approx(1.2))
    with pytest.raises(InvalidOption, match="no state is available for the whole stream"):
        static_best(
            costs, np.array([[True, False, False], [False, True, True], [True, True, True]])
        )


@settings(max_examples=EXAMPLES, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), alpha=st.sampled_from([0.5, 2.0, 6.0]))
def test_no_policy_beats_the_offline_optimum(seed: int, alpha: float) -> None:
    rng = np.random.default_rng(seed)
    costs = rng.random((60, 4))
    names = ["a", "b", "c", "d"]
    optimum = offline_optimum(costs, alpha, start=0).total
    for policy in (
        Reorganizer(names, initial="a", alpha=alpha, seed=seed),
        Greedy(names, initial="a", alpha=alpha, window=10),
        Regret(names, initial="a", alpha=alpha, window=10),
    ):
        for row in costs:
            policy.observe(dict(zip(names, row.tolist(), strict=True)))
        assert policy.total_cost >= optimum - 1e-9
    assert static_best(costs)[1] >= optimum - 1e-9 - alpha  # static may start elsewhere


def test_greedy_switches_as_soon_as_another_state_is_cheaper_on_the_window() -> None:
    g = Greedy(["a", "b"], initial="a", alpha=100.0, window=3)
    steps = [
        g.observe(c) for c in ({"a": 0.2, "b": 0.5}, {"a": 0.2, "b": 0.5}, {"a": 0.9, "b": 0.0})
    ]
    # window sums after each query: a 0.2/0.4/1.3, b 0.5/1.0/1.0
    assert [s.target for s in steps] == ["a", "a", "b"]
    assert g.switches == 1 and g.total_cost == pytest.approx(1.3 + 100.0)
    # a state added later brings its costs on the recent queries
    g.add_state("c", [0.0, 0.0, 0.0])
    assert g.observe({"a": 0.5, "b": 0.1, "c": 0.0}).target == "c"


def test_regret_switches_when_the_saving_since_adoption_exceeds_alpha() -> None:
    r = Regret(["a", "b"], initial="a", alpha=1.0, window=50)
    savings = []
    for _ in range(5):
        step = r.observe({"a": 0.3, "b": 0.0})
        savings.append(step.target)
    # b saves 0.3 per query: 0.3, 0.6, 0.9, 1.2 > α at the 4th query
    assert savings == ["a", "a", "a", "b", "b"]
    assert r.regrets == {"a": -0.3, "b": 0.0}
    # a state added later is credited retroactively, at most since adoption (1 query)
    r.add_state("c", [0.0] * 10)
    assert r.regrets["c"] == pytest.approx(0.0)  # b (current) cost 0 on that query


def test_regret_credits_a_new_state_with_its_recent_savings() -> None:
    r = Regret(["a"], initial="a", alpha=2.0, window=5)
    for _ in range(4):
        r.observe({"a": 0.5})
    r.add_state("b", [0.0, 0.0, 0.0])  # evaluated on the 3 latest queries only
    assert r.regrets["b"] == pytest.approx(1.5)
    assert r.observe({"a": 0.5, "b": 0.0}).target == "a"  # 2.0 is not above α
    assert r.observe({"a": 0.5, "b": 0.0}).target == "b"


def test_window_policies_survive_a_json_round_trip() -> None:
    rng = np.random.default_rng(3)
    costs = rng.random((80, 3))
    names = ["a", "b", "c"]
    for cls in (Greedy, Regret):
        one = cls(names, initial="a", alpha=1.5, window=7)
        for row in costs[:40]:
            one.observe(dict(zip(names, row.tolist(), strict=True)))
        two = cls.from_dict(json.loads(json.dumps(one.to_dict())))
        for row in costs[40:]:
            c = dict(zip(names, row.tolist(), strict=True))
            assert one.observe(c) == two.observe(c)


def test_bad_streams_are_refused() -> None:
    with pytest.raises(InvalidOption, match=r"\(queries, states\) array"):
        offline_optimum(np.zeros(3), 1.0)
    with pytest.raises(InvalidOption, match="finite and >= 0"):
        offline_optimum(np.array([[-1.0]]), 1.0)
    with pytest.raises(InvalidOption, match="at least one available state"):
        offline_optimum(np.zeros((2, 2)), 1.0, available=np.array([[True, False], [False, False]]))
