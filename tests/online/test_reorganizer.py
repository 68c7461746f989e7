"""The D-UMTS reorganizer against Theorem IV.1, and Algorithms 2–4 step by step (pure)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import InvalidOption
from lakelayout.online.baselines import offline_optimum
from lakelayout.online.reorganizer import (
    COUNTER_FULL,
    PHASE_RESET,
    PREDICTORS,
    STATE_REMOVED,
    WEIGHTS,
    Reorganizer,
    harmonic,
    phase_cost_bound,
    worst_case_bound,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "30"))
#: seeds averaged for "expected cost" (the bound is on the expectation over the draws)
SEEDS = 64


def ids(n: int) -> list[str]:
    return [f"s{i}" for i in range(n)]


def run(
    costs: np.ndarray,
    *,
    alpha: float,
    seed: int,
    stay: bool,
    gamma: float = 0.0,
    initial: int = 0,
    predictor: str = "phase",
    weight: str = "skipped",
) -> Reorganizer:
    """The reorganizer over a fixed state space, fed the whole cost stream."""
    names = ids(costs.shape[1])
    r = Reorganizer(
        names,
        initial=names[initial],
        alpha=alpha,
        seed=seed,
        stay_on_reset=stay,
        gamma=gamma,
        predictor=predictor,
        recent=20,
        weight=weight,
    )
    for row in costs:
        r.observe(dict(zip(names, row.tolist(), strict=True)))
    return r


def mean_cost(costs: np.ndarray, *, alpha: float, stay: bool, seeds: int = SEEDS) -> float:
    return float(
        np.mean([run(costs, alpha=alpha, seed=s, stay=stay).total_cost for s in range(seeds)])
    )


def exact_expected_cost(costs: np.ndarray, alpha: float, *, stay: bool, initial: int = 0) -> float:
    """E[cost] of the uniform reorganizer, computed by carrying the distribution of the
    current state (counters and phases do not depend on the draws)."""
    t_count, n = costs.shape
    p = np.zeros(n)
    moves = 0.0
    if stay:
        p[initial] = 1.0
    else:
        p[:] = 1.0 / n
        moves += 1.0 - 1.0 / n
    counters = np.zeros(n)
    active = np.ones(n, dtype=bool)
    service = 0.0
    for t in range(t_count):
        service += float(p @ costs[t])
        counters[active] += costs[t, active]
        still = active & (counters < alpha)
        if still.any():
            leaving = float(p[~still].sum())
            p = np.where(still, p, 0.0) + leaving * still / still.sum()
            moves += leaving
            active = still
        else:
            active = np.ones(n, dtype=bool)
            counters = np.zeros(n)
            if not stay:
                moves += 1.0 - 1.0 / n
                p = np.full(n, 1.0 / n)
    return service + alpha * moves


# --------------------------------------------------------------------------- cost streams


@st.composite
def cost_streams(draw: st.DrawFn) -> tuple[np.ndarray, float]:
    """Random, sparse and drifting cost streams in [0, 1], with α >= 1 (the paper's α > 1)."""
    n = draw(st.integers(2, 6))
    t_count = draw(st.integers(1, 90))
    alpha = draw(st.sampled_from([1.0, 1.5, 2.0, 3.0, 5.0, 8.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    kind = draw(st.sampled_from(["uniform", "sparse", "drift"]))
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        costs = rng.random((t_count, n))
    elif kind == "sparse":
        costs = (rng.random((t_count, n)) < 0.3).astype(float)
    else:
        costs = rng.uniform(0.6, 1.0, (t_count, n))
        start = 0
        while start < t_count:
            length = int(rng.integers(1, 25))
            costs[start : start + length, int(rng.integers(n))] = rng.uniform(0, 0.1)
            start += length
    return costs, alpha


def cruel_stream(n: int, alpha: int, phases: int) -> np.ndarray:
    """The classic worst case of a deterministic policy: every query costs 1 in the state
    the deterministic counter algorithm (next active state in order, stay at a phase
    start) is in, and 0 everywhere else."""
    counters = np.zeros(n)
    active = np.ones(n, dtype=bool)
    current = 0
    rows = []
    for _ in range(phases * n * alpha):
        row = np.zeros(n)
        row[current] = 1.0
        rows.append(row)
        counters[active] += row[active]
        active &= counters < alpha
        if not active[current]:
            if not active.any():
                active[:] = True
                counters[:] = 0
            else:
                current = int(np.flatnonzero(active)[0])
    return np.array(rows)


def deterministic_cost(costs: np.ndarray, alpha: float) -> float:
    """Cost of the deterministic counter algorithm on ``costs`` (same counters as OReO)."""
    n = costs.shape[1]
    counters = np.zeros(n)
    active = np.ones(n, dtype=bool)
    current, total = 0, 0.0
    for row in costs:
        total += row[current]
        counters[active] += row[active]
        active &= counters < alpha
        if not active[current]:
            if not active.any():
                active[:] = True
                counters[:] = 0
            else:
                current = int(np.flatnonzero(active)[0])
                total += alpha
    return total


# --------------------------------------------------------------------------- Theorem IV.1


@pytest.mark.parametrize("stay", [False, True])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=cost_streams())
def test_expected_cost_is_within_the_theorem_bound_of_the_offline_optimum(
    stream: tuple[np.ndarray, float], stay: bool
) -> None:
    costs, alpha = stream
    n = costs.shape[1]
    optimum = offline_optimum(costs, alpha, start=0).total
    bound = worst_case_bound(
        optimum, states=n, alpha=alpha, max_cost=float(costs.max()), stay_on_reset=stay
    )
    exact = exact_expected_cost(costs, alpha, stay=stay)
    assert exact <= bound + 1e-9
    assert mean_cost(costs, alpha=alpha, stay=stay) <= bound + 1e-9


@pytest.mark.parametrize("stay", [False, True])
@settings(max_examples=max(10, EXAMPLES // 3), deadline=None)
@given(stream=cost_streams())
def test_the_draws_are_uniform_the_seed_average_matches_the_exact_expectation(
    stream: tuple[np.ndarray, float], stay: bool
) -> None:
    costs, alpha = stream
    totals = [run(costs, alpha=alpha, seed=s, stay=stay).total_cost for s in range(400)]
    exact = exact_expected_cost(costs, alpha, stay=stay)
    spread = float(np.std(totals)) / np.sqrt(len(totals))
    assert abs(float(np.mean(totals)) - exact) <= 5 * spread + 1e-9


@pytest.mark.parametrize("n", [2, 4, 6])
def test_the_deterministic_worst_case_breaks_a_deterministic_policy_not_oreo(n: int) -> None:
    alpha = 4
    costs = cruel_stream(n, alpha, phases=8)
    optimum = offline_optimum(costs, alpha, start=0).total
    for stay in (False, True):
        bound = worst_case_bound(optimum, states=n, alpha=alpha, max_cost=1.0, stay_on_reset=stay)
        assert mean_cost(costs, alpha=alpha, stay=stay, seeds=200) <= bound
        assert exact_expected_cost(costs, alpha, stay=stay) <= bound
    # the deterministic counter algorithm pays (2n - 1) α per phase, the optimum about α:
    # the 2n - 1 lower bound of deterministic policies (Borodin, Linial, Saks)
    det = deterministic_cost(costs, alpha)
    assert det >= (2 * n - 1) * (optimum - alpha)
    if n >= 4:
        assert det > worst_case_bound(
            optimum, states=n, alpha=alpha, max_cost=1.0, stay_on_reset=True
        )


@pytest.mark.parametrize("weight", WEIGHTS)
@pytest.mark.parametrize("predictor", PREDICTORS)
def test_every_state_is_visited_at_most_once_per_phase_whatever_gamma(
    predictor: str, weight: str
) -> None:
    rng = np.random.default_rng(5)
    costs = rng.random((300, 5))
    alpha = 3.0
    for gamma in (0.0, 1.0, 4.0):
        for seed in range(20):
            r = run(
                costs,
                alpha=alpha,
                seed=seed,
                stay=True,
                gamma=gamma,
                predictor=predictor,
                weight=weight,
            )
            assert r.switches <= r.phase * (5 - 1)
            assert r.service_cost <= r.phase * 5 * (alpha + 1.0)


def test_the_bound_reads_as_the_paper_states_it() -> None:
    # 2 H(n) (1 + c/2α) (OPT + α) for the analysed algorithm
    assert worst_case_bound(10.0, states=4, alpha=2.0, max_cost=1.0) == pytest.approx(
        2 * harmonic(4) * (1 + 1.0 / 4.0) * 12.0
    )
    # staying at a phase start costs one deterministic visit: never below the drawn bound
    for n in range(1, 9):
        assert phase_cost_bound(n, 80.0, 1.0, stay_on_reset=True) >= phase_cost_bound(n, 80.0, 1.0)
    with pytest.raises(InvalidOption, match="alpha must be > 0"):
        worst_case_bound(1.0, states=2, alpha=0.0, max_cost=1.0)


# --------------------------------------------------------------------------- dynamic states


@st.composite
def dynamic_streams(draw: st.DrawFn) -> tuple[np.ndarray, list[list[tuple[str, int]]], float]:
    """A cost stream over states that come and go: ``events[t]`` happen before query t."""
    total = draw(st.integers(2, 7))
    t_count = draw(st.integers(5, 80))
    alpha = draw(st.sampled_from([1.0, 2.0, 4.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    costs = rng.random((t_count, total))
    alive = [0, 1]
    born = 2
    events: list[list[tuple[str, int]]] = [[] for _ in range(t_count)]
    for t in range(1, t_count):
        u = rng.random()
        if u < 0.15 and born < total:
            events[t].append(("add", born))
            alive.append(born)
            born += 1
        elif u < 0.3 and len(alive) > 1:
            gone = alive[int(rng.integers(len(alive)))]
            events[t].append(("remove", gone))
            alive.remove(gone)
    return costs, events, alpha


def run_dynamic(
    costs: np.ndarray,
    events: list[list[tuple[str, int]]],
    alpha: float,
    seed: int,
    stay: bool,
    join: bool = False,
) -> tuple[float, int, int, np.ndarray]:
    """(total cost, |S_max|, removal resets, availability) of one run; with ``join`` an
    added state joins the phase at once, given its costs on every query so far."""
    names = ids(costs.shape[1])
    r = Reorganizer(
        names[:2],
        initial=names[0],
        alpha=alpha,
        seed=seed,
        stay_on_reset=stay,
        mid_phase_join=join,
    )
    alive = {0, 1}
    s_max, resets = 2, 0
    available = np.zeros(costs.shape, dtype=bool)
    for t, row in enumerate(costs):
        for kind, k in events[t]:
            if kind == "add":
                r.add_state(names[k], costs[:t, k].tolist() if join else ())
                alive.add(k)
            else:
                resets += int(r.remove_state(names[k]).new_phase)
                alive.discard(k)
        s_max = max(s_max, len(alive))
        available[t, sorted(alive)] = True
        r.observe({names[k]: float(row[k]) for k in alive})
    return r.total_cost, s_max, resets, available


@pytest.mark.parametrize("join", [False, True])
@pytest.mark.parametrize("stay", [False, True])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=dynamic_streams())
def test_dynamic_state_space_stays_within_the_bound(
    stream: tuple[np.ndarray, list[list[tuple[str, int]]], float], stay: bool, join: bool
) -> None:
    costs, events, alpha = stream
    runs = [run_dynamic(costs, events, alpha, seed, stay, join) for seed in range(SEEDS)]
    _, s_max, resets, available = runs[0]
    assert all(r[1:3] == (s_max, resets) for r in runs)  # counters and phases ignore the draws
    optimum = offline_optimum(costs, alpha, start=0, available=available).total
    bound = worst_case_bound(
        optimum,
        states=s_max,
        alpha=alpha,
        max_cost=float(costs.max()),
        stay_on_reset=stay,
        removal_resets=resets,
    )
    assert float(np.mean([r[0] for r in runs])) <= bound + 1e-9


def test_a_state_added_mid_phase_joins_at_the_next_phase() -> None:
    r = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=0)
    r.observe({"a": 1.0, "b": 0.5})
    r.add_state("c")
    assert r.states == ["a", "b", "c"] and r.active == ["a", "b"]
    assert "c" not in r.counters
    # c costs nothing, yet it is not drawn while the phase lasts
    step = r.observe({"a": 1.0, "b": 0.5, "c": 0.0})
    assert (step.target, step.reason) == ("b", COUNTER_FULL)
    step = r.observe({"a": 1.0, "b": 1.0, "c": 0.0})  # b reaches 2.0: the phase ends
    assert step.new_phase and step.reason == "" and step.target == "b"  # stays at the reset
    assert r.active == ["a", "b", "c"] and r.counters == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert r.phase == 2


def test_with_mid_phase_join_a_state_joins_with_the_counter_it_would_have() -> None:
    r = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=0, mid_phase_join=True)
    r.observe({"a": 1.0, "b": 0.5})
    r.observe({"a": 0.5, "b": 0.5})
    # c's costs on the queries so far (older ones first): 0.25 and 0.25 in this phase
    r.add_state("c", [0.9, 0.25, 0.25])
    assert r.active == ["a", "b", "c"] and r.counters["c"] == pytest.approx(0.5)
    # a state that would have paid α already joins with a full counter, inactive
    r.add_state("d", [1.5, 0.5])
    assert r.counters["d"] == pytest.approx(2.0) and "d" not in r.active
    # costs that do not cover the phase: the next phase, as Algorithm 4 has it
    r.add_state("e", [0.0])
    assert "e" not in r.counters and "e" not in r.active
    step = r.observe({"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0, "e": 0.0})  # a fills
    assert step.reason == COUNTER_FULL and step.target in ("b", "c")
    # the phase still ends when every state of the phase has paid α
    while not step.new_phase:
        step = r.observe({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0})
    assert r.active == ["a", "b", "c", "d", "e"]
    # the same additions without the option wait for the next phase
    plain = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=0)
    plain.observe({"a": 1.0, "b": 0.5})
    plain.add_state("c", [0.9, 0.25])
    assert plain.active == ["a", "b"] and "c" not in plain.counters


def test_draws_after_says_whether_a_query_ends_the_current_state_s_stay() -> None:
    r = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=0)
    r.observe({"a": 1.5, "b": 0.0})
    before = r.to_dict()
    assert not r.draws_after({"a": 0.49, "b": 1.0})  # 1.99 < α: a stays
    assert r.draws_after({"a": 0.5, "b": 0.0})  # reaches α exactly: a draw follows
    assert r.to_dict() == before  # asking changes nothing
    step = r.observe({"a": 0.5, "b": 0.0})
    assert step.reason == COUNTER_FULL and step.target == "b"
    # a state the table was put back in after a failed rewrite is not active: the next
    # query draws whatever its cost
    r.revert("a")
    assert r.draws_after({"a": 0.0, "b": 0.0})


def test_a_joined_state_survives_a_restore() -> None:
    r = Reorganizer(["a", "b"], initial="a", alpha=3.0, seed=2, mid_phase_join=True)
    r.observe({"a": 1.0, "b": 1.0})
    restored = Reorganizer.from_dict(json.loads(json.dumps(r.to_dict())))
    for x in (r, restored):
        x.add_state("c", [0.5])
    assert r.to_dict() == restored.to_dict() and restored.counters["c"] == 0.5
    with pytest.raises(InvalidOption, match="costs of state 'd' must be finite and >= 0"):
        r.add_state("d", [float("nan")])


def test_removing_a_state_follows_algorithm_4() -> None:
    r = Reorganizer(["a", "b", "c"], initial="a", alpha=3.0, seed=1)
    r.observe({"a": 1.0, "b": 1.0, "c": 1.0})
    # a non-current active state: it leaves S and S_A, nothing else changes
    step = r.remove_state("b")
    assert not step.switched and not step.new_phase
    assert r.states == ["a", "c"] and r.active == ["a", "c"] and r.current == "a"
    assert r.counters == {"a": 1.0, "c": 1.0}
    # the current state: switch to an active one, a counted switch
    switches = r.switches
    step = r.remove_state("a")
    assert (step.source, step.target, step.reason) == ("a", "c", STATE_REMOVED)
    assert r.switches == switches + 1 and r.phase == 1
    r.add_state("d")
    # removing the last active state starts a new phase with the remaining states
    step = r.remove_state("c")
    assert step.new_phase and r.phase == 2
    assert r.states == ["d"] and r.active == ["d"] and r.current == "d"
    with pytest.raises(InvalidOption, match="it is the only state"):
        r.remove_state("d")


def test_a_full_counter_of_every_state_starts_a_new_phase() -> None:
    stay = Reorganizer(["a", "b"], initial="a", alpha=1.0, seed=0)
    step = stay.observe({"a": 1.0, "b": 1.0})
    assert step.new_phase and step.target == "a" and stay.switches == 0
    drawn = [
        Reorganizer(["a", "b"], initial="a", alpha=1.0, seed=s, stay_on_reset=False)
        for s in range(60)
    ]
    targets = {r.observe({"a": 1.0, "b": 1.0}).target for r in drawn}
    assert targets == {"a", "b"}  # the analysed algorithm draws again at every phase start
    assert all(r.phase == 2 for r in drawn)


def test_bad_input_is_refused_with_the_name_of_the_problem() -> None:
    with pytest.raises(InvalidOption, match="alpha must be a finite number > 0"):
        Reorganizer(["a"], initial="a", alpha=0.0)
    with pytest.raises(InvalidOption, match="gamma must be a finite number >= 0"):
        Reorganizer(["a"], initial="a", alpha=1.0, gamma=-1.0)
    with pytest.raises(InvalidOption, match="unknown predictor 'window'; known: phase, recent"):
        Reorganizer(["a"], initial="a", alpha=1.0, predictor="window")
    with pytest.raises(
        InvalidOption, match=r"unknown predictor weight 'inverted'.*; known: skipped, inverse"
    ):
        Reorganizer(["a"], initial="a", alpha=1.0, weight="inverted")
    with pytest.raises(InvalidOption, match="predictor weight must be one of skipped, inverse"):
        Reorganizer(["a"], initial="a", alpha=1.0, weight=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="recent must be an integer >= 1 query, got 0"):
        Reorganizer(["a"], initial="a", alpha=1.0, predictor="recent", recent=0)
    with pytest.raises(InvalidOption, match="initial state 'x'"):
        Reorganizer(["a"], initial="x", alpha=1.0)
    r = Reorganizer(["a", "b"], initial="a", alpha=1.0)
    with pytest.raises(InvalidOption, match=r"missing \['b'\], unknown \['z'\]"):
        r.observe({"a": 0.1, "z": 0.2})
    with pytest.raises(InvalidOption, match="cost of state 'b' must be finite and >= 0"):
        r.observe({"a": 0.1, "b": -1.0})
    with pytest.raises(InvalidOption, match="already in the state space"):
        r.add_state("a")


# --------------------------------------------------------------------------- seeds, state


@pytest.mark.parametrize(
    ("predictor", "weight"), [(p, "skipped") for p in PREDICTORS] + [("recent", "inverse")]
)
def test_same_seed_same_decisions_and_a_restored_copy_continues_identically(
    predictor: str, weight: str
) -> None:
    rng = np.random.default_rng(11)
    costs = rng.random((400, 5))
    names = ids(5)
    kw = {
        "alpha": 2.5,
        "seed": 7,
        "gamma": 1.0,
        "predictor": predictor,
        "recent": 30,
        "weight": weight,
    }
    a = Reorganizer(names, initial="s0", **kw)
    b = Reorganizer(names, initial="s0", **kw)
    for row in costs[:200]:
        c = dict(zip(names, row.tolist(), strict=True))
        assert a.observe(c) == b.observe(c)
    saved = json.loads(json.dumps(a.to_dict()))  # through JSON text: JSON-safe
    restored = Reorganizer.from_dict(saved)
    for row in costs[200:]:
        c = dict(zip(names, row.tolist(), strict=True))
        assert a.observe(c) == restored.observe(c)
    assert a.to_dict() == restored.to_dict()
    assert a.switches > 10  # the stream really exercised the draws
    assert restored.weight == weight
    other = run(costs, alpha=2.5, seed=8, stay=True, gamma=1.0, predictor=predictor)
    assert other.to_dict()["rng"] != a.to_dict()["rng"]


def test_a_state_saved_before_the_recent_predictor_existed_restores_with_the_phase_one() -> None:
    r = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=1, gamma=1.0)
    r.observe({"a": 0.5, "b": 0.1})
    old = {k: v for k, v in r.to_dict().items() if k not in ("predictor", "recent", "recent_costs")}
    restored = Reorganizer.from_dict(old)
    assert restored.predictor == "phase"
    assert restored.observe({"a": 0.5, "b": 0.1}) == r.observe({"a": 0.5, "b": 0.1})


def test_the_predictor_favours_the_state_that_did_well_in_the_last_phase() -> None:
    def chose_b(gamma: float) -> int:
        count = 0
        for seed in range(200):
            r = Reorganizer(["x", "b", "c"], initial="x", alpha=1.0, seed=seed, gamma=gamma)
            for _ in range(10):  # c fills, then b; x stays current at cost 0
                r.observe({"x": 0.0, "b": 0.1, "c": 0.9})
            r.observe({"x": 1.0, "b": 0.1, "c": 0.9})  # x fills last: phase 2, still in x
            assert r.phase == 2 and r.current == "x"
            # last phase's weights: b 0.9, c 0.1; x fills first, the draw is between b and c
            count += r.observe({"x": 1.0, "b": 0.0, "c": 0.0}).target == "b"
        return count

    assert chose_b(2.0) >= 185  # p(b) = 0.81 / 0.82
    assert 70 <= chose_b(0.0) <= 130  # uniform


def test_the_recent_predictor_favours_the_state_cheap_on_the_last_queries() -> None:
    """After a template change the last phase favours the wrong state; the last queries
    do not. Phase 1: b costs 0.9 and c 0.1 a query. Phase 2: the new template costs b
    nothing and c 0.24; the window of 4 queries sees only phase 2."""

    def chose_b(predictor: str) -> int:
        count = 0
        for seed in range(200):
            r = Reorganizer(
                ["x", "b", "c"],
                initial="x",
                alpha=1.0,
                seed=seed,
                gamma=8.0,
                predictor=predictor,
                recent=4,
            )
            for _ in range(10):  # b fills, then c; x stays current at cost 0
                r.observe({"x": 0.0, "b": 0.9, "c": 0.1})
            r.observe({"x": 1.0, "b": 0.9, "c": 0.1})  # x fills last: phase 2, still in x
            assert r.phase == 2 and r.current == "x"
            for _ in range(3):  # the new template: no counter fills
                assert r.observe({"x": 0.2, "b": 0.0, "c": 0.24}).target == "x"
            # x fills: the draw is between b and c
            count += r.observe({"x": 1.0, "b": 0.0, "c": 0.0}).target == "b"
        return count

    # recent weights b 1, c 1 - 0.72/4 = 0.82: p(b) = 1 / (1 + 0.82**8) = 0.83
    assert chose_b("recent") >= 140
    # last phase's weights b 0.1 (mean 0.9), c 0.9 (mean 0.1): p(b) = 0.1**8 / (0.1**8 + 0.9**8)
    assert chose_b("phase") <= 2


def drawn(
    target: str,
    costs: list[dict[str, float]],
    *,
    weight: str,
    alpha: float,
    gamma: float,
    recent: int,
    seeds: int,
) -> int:
    """How many of ``seeds`` reorganizers, started in ``x`` with the recent predictor and
    fed ``costs`` (only the last filling x's counter), draw ``target``."""
    count = 0
    for seed in range(seeds):
        r = Reorganizer(
            ["x", "b", "c"],
            initial="x",
            alpha=alpha,
            seed=seed,
            gamma=gamma,
            predictor="recent",
            recent=recent,
            weight=weight,
        )
        for c in costs[:-1]:
            assert r.observe(c).target == "x"
        step = r.observe(costs[-1])
        assert step.reason == COUNTER_FULL
        count += step.target == target
    return count


def test_the_inverse_weight_tells_cheap_states_apart_by_the_ratio_of_their_costs() -> None:
    """Two states that both skip most of the table: b reads 2 % of it a query, c 18 %.
    The skipped fraction weighs them 0.98 and 0.82; the inverse 1/0.03 and 1/0.19."""
    # x fills at the fifth query (1.8); b (0.1) and c (0.9) are active, means 0.02 and 0.18
    costs = [{"x": 0.2, "b": 0.02, "c": 0.18}] * 4 + [{"x": 1.0, "b": 0.02, "c": 0.18}]
    kw = {"alpha": 1.0, "gamma": 2.0, "recent": 4, "seeds": 400}
    # skipped: 0.98**2 / (0.98**2 + 0.82**2) = 0.59 of 400 = 235
    assert 200 <= drawn("b", costs, weight="skipped", **kw) <= 270
    # inverse: (1/0.03)**2 / ((1/0.03)**2 + (1/0.19)**2) = 0.976 of 400 = 390
    assert drawn("b", costs, weight="inverse", **kw) >= 375


def test_the_inverse_weight_leaves_a_state_that_reads_the_whole_table_drawable() -> None:
    """A state that read the whole table on every recent query weighs 0 as a skipped
    fraction and is never drawn; its inverse weight is 1 / 1.01, not 0."""
    # x fills at the second query (3.0); b (1.0) and c (2.0) are active, means 0.5 and 1.0
    costs = [{"x": 1.5, "b": 0.5, "c": 1.0}] * 2
    kw = {"alpha": 3.0, "gamma": 1.0, "recent": 2, "seeds": 600}
    assert drawn("c", costs, weight="skipped", **kw) == 0
    # inverse: (1/1.01) / (1/1.01 + 1/0.51) = 0.336 of 600 = 202
    assert 160 <= drawn("c", costs, weight="inverse", **kw) <= 245


def test_a_revert_puts_the_reorganizer_back_and_the_next_query_draws_again() -> None:
    r = Reorganizer(["a", "b", "c"], initial="a", alpha=1.0, seed=3)
    step = r.observe({"a": 1.0, "b": 0.0, "c": 0.0})
    assert step.switched
    r.revert("a")  # the rewrite to step.target failed: the table is still in a
    assert r.current == "a"
    step = r.observe({"a": 0.0, "b": 0.0, "c": 0.0})
    assert step.source == "a" and step.target in {"b", "c"} and step.reason == COUNTER_FULL
    assert PHASE_RESET != COUNTER_FULL
