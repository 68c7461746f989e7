"""The OReO reorganizer: D-UMTS counters and phases (Rong et al., §IV, Algorithms 1–4).

States are opaque ids (layouts, for the caller). For every query the caller
gives ``c(s, q)`` for every state ``s`` in the state space ``S``; the
reorganizer answers with the state to be in for the next query.

* Every *active* state ``s`` (``S_A``) has a counter ``C(s)``, the cost ``s``
  would have paid for the queries of the current *phase*. After a query,
  ``C(s) += c(s, q)`` for ``s`` in ``S_A``, and states whose counter reached
  ``α`` leave ``S_A`` (Algorithm 3).
* When the current state leaves ``S_A`` the reorganizer switches to a state
  drawn from ``S_A`` (uniformly, or weighted by the predictor, §IV-C). When
  ``S_A`` is empty a new phase starts: all counters go back to 0 and every
  state of ``S`` is active again (Algorithm 2).
* At a phase start the reorganizer *stays* in its current state
  (``stay_on_reset=True``, the paper's optimization, §IV-A) or draws a state
  uniformly as the analysed algorithm does (``stay_on_reset=False``).
* Dynamic state space (Algorithm 4): a state added mid-phase joins ``S_A``
  at the next phase (or at once with ``mid_phase_join``, below); a removed
  state leaves ``S`` and ``S_A`` (its counter is as good as full); if ``S_A``
  becomes empty a new phase starts; if the current state is removed the
  reorganizer switches to a drawn active state.

Predictor (§IV-C, ``gamma``): a state is drawn with probability
``w**gamma / sum(w**gamma)``, its weight ``w`` computed from its mean cost per
query. ``gamma = 0`` is the uniform draw. The mean is over the last finished
phase (``predictor="phase"``, the paper's example) or over the last ``recent``
queries (``predictor="recent"``: a phase spans several template changes when
``α`` is large, so the last phase says little about the template that just
arrived; the last queries say what it is). States without a weight yet get the
median weight of the others. The weight is

* ``weight="skipped"`` (the paper's example): ``1 -`` the mean cost, the
  fraction of data the state would have skipped when costs are fractions of
  the table. It tells states apart by what they read in absolute terms: of
  two states reading 2 % and 20 % of the table (0.98 and 0.80), the dearer
  keeps two fifths of the draws at ``gamma = 2``. A state that reads the whole
  table weighs 0 and is never drawn.
* ``weight="inverse"``: ``1 / (mean cost + 0.01)``, which weighs states by
  the ratio of their costs: the same two weigh 1/0.03 and 1/0.21, the dearer 2 %
  of the draws at ``gamma = 2``. The floor of 1 % of the table keeps a state
  that reads nothing from taking every draw against one that reads little,
  and every state keeps a positive probability.

The analysed bound (Theorem IV.1) is the uniform draw's; §IV-C's bound for a
predictor holds for one whose draws land in the better fraction of states.

Mid-phase join (``mid_phase_join=True``; off by default, as Algorithm 4 has
it): a state added during a phase, with its costs on the queries of the phase
so far (the caller priced it on its recent queries), joins the phase at once
with the counter it would have had had it been there from the phase's start;
it is active if that counter is below ``α``. The paper suggests this replay
for the predictor's counts (§IV-C). It keeps what the analysis uses -- in
every phase each state is visited at most once and every state in ``S`` at
the phase's end has paid ``α`` since its start (or left) -- because the
state is treated as one that was there all along; a state whose costs do
not cover the phase joins at the next one. It lets a specialist fitted for a
template that just arrived be drawn in the phase the template arrived in.

Randomness comes from one ``numpy.random.Generator`` (PCG64) seeded by
``seed``: the same costs give the same decisions, and :meth:`to_dict` /
:meth:`from_dict` carry the generator's position, so a reorganizer restored
in another process draws exactly what the original would have drawn.

The guarantee (Theorem IV.1) and its constants are stated, as proved, in
:func:`worst_case_bound`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lakelayout.errors import InvalidOption, closest

#: reasons a :class:`Step` gives for a switch
COUNTER_FULL = "counter full"
PHASE_RESET = "phase reset"
STATE_REMOVED = "state removed"
INITIAL_DRAW = "initial draw"

#: what the predictor's weights are computed over (module docstring)
PREDICTORS = ("phase", "recent")
#: how a state's mean cost becomes its predictor weight (module docstring)
WEIGHTS = ("skipped", "inverse")
#: the inverse weight's floor, in full-scan units: ``1 / (mean cost + INVERSE_FLOOR)``
INVERSE_FLOOR = 0.01


@dataclass(frozen=True)
class Step:
    """What one query (or one state update) did.

    ``cost`` is the service cost paid for the query, in ``source`` (the state
    the query ran in); ``target`` is the state for the next query. ``reason``
    is empty when the reorganizer stays, else why it switched. ``new_phase``
    is true when a phase started during this step.
    """

    query: int
    cost: float
    source: str
    target: str
    reason: str
    phase: int
    new_phase: bool = False

    @property
    def switched(self) -> bool:
        return self.source != self.target

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def harmonic(n: int) -> float:
    """``H(n) = 1 + 1/2 + … + 1/n`` (``H(0) = 0``).

    >>> harmonic(1), round(harmonic(4), 4)
    (1.0, 2.0833)
    """
    return float(sum(1.0 / k for k in range(1, n + 1)))


def phase_cost_bound(
    states: int, alpha: float, max_cost: float, *, stay_on_reset: bool = False
) -> float:
    """Upper bound of the reorganizer's expected cost in one phase (uniform draws).

    From the proof of Theorem IV.1: order the active states by the moment
    they leave ``S_A``; a uniform draw among ``j`` active states is followed
    by at most ``g(j) = 1 + (1/j) Σ_{r<j} g(r) = H(j)`` visits in expectation.
    A visit pays at most ``α`` of service before its counter reaches ``α``,
    plus the cost of the query that fills it (at most ``max_cost``: the
    paper's proof rounds this overshoot away), plus one move (``α``):

    * drawing at the phase start (``stay_on_reset=False``):
      ``(2α + c_max) · H(n)``;
    * staying at the phase start: the first visit is the state the last phase
      ended in, which an oblivious adversary can make the first to fill, so
      ``(α + c_max) · (1 + H(n-1)) + α · H(n-1)`` — and never less than the
      drawing bound, since a removal of the current state forces a draw.
    """
    if states < 1:
        raise InvalidOption(f"a phase needs at least one state, got {states}")
    draw = (2 * alpha + max_cost) * harmonic(states)
    if not stay_on_reset:
        return draw
    rest = harmonic(states - 1)
    return max(draw, (alpha + max_cost) * (1 + rest) + alpha * rest)


def worst_case_bound(
    optimum: float,
    *,
    states: int,
    alpha: float,
    max_cost: float,
    stay_on_reset: bool = False,
    removal_resets: int = 0,
) -> float:
    """Theorem IV.1 with its constants: a bound on the reorganizer's expected total cost.

    ``optimum`` is the offline optimum (:func:`lakelayout.online.baselines.offline_optimum`)
    over the same states, from the same initial state, with the same
    availability of states, switching cost ``α``; ``states`` is ``|S_max|``,
    the largest size of the state space; ``max_cost`` bounds every ``c(s, q)``.

    The proof counts phases. The optimum pays at least ``α`` in every phase
    that ended because all counters reached ``α``: either it moved during the
    phase, or it stayed in one state that was active all phase, whose counter
    (its cost in the phase) is at least ``α``. The reorganizer pays at most
    :func:`phase_cost_bound` per phase in expectation, and there is one more
    phase than the full ones (the last, unfinished one), plus every phase
    that ended because a removal emptied ``S_A`` (``removal_resets``; zero
    when the current state is never removed). So::

        E[cost] <= phase_cost_bound / α · (optimum + α · (1 + removal_resets))

    which for ``stay_on_reset=False`` is
    ``2 H(|S_max|) (1 + c_max / 2α) · (OPT + α (1 + R))``: the paper's ratio
    ``2 H(|S_max|)``, with the additive term and the overshoot made explicit.
    """
    if alpha <= 0:
        raise InvalidOption(f"alpha must be > 0, got {alpha}")
    per_phase = phase_cost_bound(states, alpha, max_cost, stay_on_reset=stay_on_reset)
    return per_phase / alpha * (optimum + alpha * (1 + removal_resets))


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise InvalidOption(f"alpha must be a number > 0, got {alpha!r}")
    if not math.isfinite(alpha) or alpha <= 0:
        raise InvalidOption(f"alpha must be a finite number > 0, got {alpha!r}")
    return float(alpha)


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, int | float):
        raise InvalidOption(f"gamma must be a number >= 0, got {gamma!r}")
    if not math.isfinite(gamma) or gamma < 0:
        raise InvalidOption(f"gamma must be a finite number >= 0, got {gamma!r}")
    return float(gamma)


def predictor_weight(mean_cost: float, weight: str) -> float:
    """A state's predictor weight from its mean cost, the cost clipped to ``[0, 1]``:
    ``1 -`` it (``"skipped"``) or ``1 / (it + INVERSE_FLOOR)`` (``"inverse"``)."""
    cost = min(1.0, max(0.0, mean_cost))
    return 1.0 - cost if weight == "skipped" else 1.0 / (cost + INVERSE_FLOOR)


def _one_of(value: str, known: Sequence[str], what: str) -> str:
    """``value`` if it is one of ``known``, else InvalidOption naming it and the closest."""
    if not isinstance(value, str):
        raise InvalidOption(f"{what} must be one of {', '.join(known)}, got {value!r}")
    if value not in known:
        raise InvalidOption(
            f"unknown {what} {value!r}{closest(value, known)}; known: {', '.join(known)}"
        )
    return value


def check_predictor(predictor: str) -> str:
    """``predictor`` if it is one of :data:`PREDICTORS`, else InvalidOption naming it."""
    return _one_of(predictor, PREDICTORS, "predictor")


def check_weight(weight: str) -> str:
    """``weight`` if it is one of :data:`WEIGHTS`, else InvalidOption naming it."""
    return _one_of(weight, WEIGHTS, "predictor weight")


def _check_recent(recent: int) -> int:
    if isinstance(recent, bool) or not isinstance(recent, int) or recent < 1:
        raise InvalidOption(f"recent must be an integer >= 1 query, got {recent!r}")
    return recent


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The generator's position, JSON-safe (PCG64's 128-bit integers as decimal strings)."""
    state = rng.bit_generator.state
    inner = state["state"]
    return {
        "bit_generator": state["bit_generator"],
        "state": {"state": str(inner["state"]), "inc": str(inner["inc"])},
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def rng_from_state(data: Mapping[str, Any]) -> np.random.Generator:
    """Inverse of :func:`rng_state`."""
    if data.get("bit_generator") != "PCG64":
        raise InvalidOption(f"unsupported random generator {data.get('bit_generator')!r}")
    bit = np.random.PCG64()
    bit.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(data["state"]["state"]), "inc": int(data["state"]["inc"])},
        "has_uint32": int(data["has_uint32"]),
        "uinteger": int(data["uinteger"]),
    }
    return np.random.Generator(bit)


class Reorganizer:
    """D-UMTS over a dynamic set of states (Algorithm 4 with Algorithms 2–3).

    >>> r = Reorganizer(["a", "b"], initial="a", alpha=2.0, seed=0)
    >>> r.observe({"a": 1.0, "b": 0.0}).target
    'a'
    >>> step = r.observe({"a": 1.0, "b": 0.0})  # a's counter reaches α: switch to b
    >>> step.target, step.reason
    ('b', 'counter full')
    """

    name = "oreo"

    def __init__(
        self,
        states: Sequence[str],
        *,
        initial: str,
        alpha: float,
        gamma: float = 0.0,
        seed: int = 0,
        stay_on_reset: bool = True,
        predictor: str = "phase",
        recent: int = 200,
        mid_phase_join: bool = False,
        weight: str = "skipped",
    ) -> None:
        ids = list(states)
        if not ids:
            raise InvalidOption("the reorganizer needs at least one state")
        if len(set(ids)) != len(ids):
            raise InvalidOption(f"state ids must be unique, got {ids}")
        if initial not in ids:
            raise InvalidOption(f"initial state {initial!r} is not one of the states {ids}")
        self.alpha = _check_alpha(alpha)
        self.gamma = _check_gamma(gamma)
        self.predictor = check_predictor(predictor)
        self.weight = check_weight(weight)
        self.recent = _check_recent(recent)
        self.seed = int(seed)
        self.stay_on_reset = bool(stay_on_reset)
        self.mid_phase_join = bool(mid_phase_join)
        self._rng = np.random.default_rng(self.seed)
        self._states = ids
        self._active = list(ids)
        self._counters = dict.fromkeys(ids, 0.0)
        self._current = initial
        self.phase = 1
        self.queries = 0
        self.switches = 0
        self.service_cost = 0.0
        #: predictor: each state's cost and query count in the current phase
        self._phase_cost = dict.fromkeys(ids, 0.0)
        self._phase_queries = dict.fromkeys(ids, 0)
        #: predictor weights from the last finished phase
        self._weights: dict[str, float] = {}
        #: each state's costs of the last ``recent`` queries (kept for ``predictor="recent"``
        #: only: the state is saved after every query)
        self._recent: dict[str, deque[float]] = {}
        if self.predictor == "recent":
            self._recent = {s: deque(maxlen=self.recent) for s in ids}
        #: what every state would have cost since it joined (status reports)
        self._totals = dict.fromkeys(ids, 0.0)
        self._seen = dict.fromkeys(ids, 0)
        #: the initial uniform draw of the analysed algorithm (Algorithm 4, line 3)
        self.initial_step: Step | None = None
        if not self.stay_on_reset:
            drawn = self._draw(self._active)
            if drawn != initial:
                self.switches += 1
            self._current = drawn
            self.initial_step = Step(0, 0.0, initial, drawn, INITIAL_DRAW, self.phase, True)

    # ------------------------------------------------------------------ views

    @property
    def current(self) -> str:
        """The state the next query runs in."""
        return self._current

    @property
    def states(self) -> list[str]:
        """``S``, in the order states joined."""
        return list(self._states)

    @property
    def active(self) -> list[str]:
        """``S_A``: states whose counter has not reached ``α`` in this phase."""
        return list(self._active)

    @property
    def counters(self) -> dict[str, float]:
        """``C(s)`` of the states taking part in this phase (states added during the
        phase have none until the next one starts)."""
        return {s: self._counters[s] for s in self._states if s in self._counters}

    @property
    def totals(self) -> dict[str, float]:
        """What each state would have cost for every query since it joined."""
        return dict(self._totals)

    @property
    def reorganization_cost(self) -> float:
        return self.alpha * self.switches

    @property
    def total_cost(self) -> float:
        """Service cost paid plus ``α`` per switch."""
        return self.service_cost + self.reorganization_cost

    # ------------------------------------------------------------------ Algorithm 3

    def observe(self, costs: Mapping[str, float]) -> Step:
        """Serve one query in the current state; the state for the next query.

        ``costs`` must give ``c(s, q) >= 0`` for every state of ``S`` (more
        keys are an error too: a caller out of step with the state space is a bug).
        """
        self._check_costs(costs)
        source = self._current
        paid = float(costs[source])
        self.queries += 1
        self.service_cost += paid
        for s in self._states:
            c = float(costs[s])
            self._phase_cost[s] += c
            self._phase_queries[s] += 1
            self._totals[s] += c
            self._seen[s] += 1
        for s, window in self._recent.items():
            window.append(float(costs[s]))
        for s in self._active:
            self._counters[s] += float(costs[s])
        self._active = [s for s in self._active if self._counters[s] < self.alpha]
        if source in self._active:
            return Step(self.queries, paid, source, source, "", self.phase)
        new_phase = False
        reason = COUNTER_FULL
        if not self._active:
            self._reset()
            new_phase = True
            reason = PHASE_RESET
            if self.stay_on_reset and source in self._active:
                return Step(self.queries, paid, source, source, "", self.phase, True)
        self._move(self._draw(self._active))
        return Step(self.queries, paid, source, self._current, reason, self.phase, new_phase)

    def draws_after(self, costs: Mapping[str, float]) -> bool:
        """True when serving a query at ``costs`` ends the current state's stay (its
        counter reaches ``α``, or it is no longer active): :meth:`observe` will then
        draw the next state (or start a phase). Nothing changes."""
        s = self._current
        if s not in self._active:
            return True
        return self._counters[s] + float(costs[s]) >= self.alpha

    # ------------------------------------------------------------------ Algorithm 4

    def add_state(self, state: str, recent: Sequence[float] = ()) -> None:
        """Add ``state`` to ``S``; it becomes active when the next phase starts, or now
        with ``mid_phase_join`` when ``recent`` -- its costs on the latest queries,
        oldest first -- covers the phase so far (module docstring).

        ``recent`` also seeds the state's costs for ``predictor="recent"``.
        """
        if state in self._states:
            raise InvalidOption(f"state {state!r} is already in the state space")
        costs = [float(c) for c in recent]
        if any(not math.isfinite(c) or c < 0 for c in costs):
            raise InvalidOption(f"costs of state {state!r} must be finite and >= 0")
        self._states.append(state)
        self._phase_cost[state] = 0.0
        self._phase_queries[state] = 0
        self._totals[state] = 0.0
        self._seen[state] = 0
        if self.predictor == "recent":
            self._recent[state] = deque(costs, maxlen=self.recent)
        # queries of the phase so far: the current state has taken part in all of them
        in_phase = self._phase_queries[self._current]
        if self.mid_phase_join and len(costs) >= in_phase:
            spent = float(sum(costs[len(costs) - in_phase :]))
            self._phase_cost[state] = spent
            self._phase_queries[state] = in_phase
            self._counters[state] = spent
            if spent < self.alpha:
                self._active.append(state)

    def remove_state(self, state: str) -> Step:
        """Remove ``state`` from ``S`` (Algorithm 4, lines 6–12); what it did to the current state."""
        if state not in self._states:
            raise InvalidOption(f"state {state!r} is not in the state space {self._states}")
        if len(self._states) == 1:
            raise InvalidOption(f"cannot remove {state!r}: it is the only state")
        self._states.remove(state)
        if state in self._active:
            self._active.remove(state)
        for table in (self._counters, self._phase_cost, self._phase_queries, self._totals):
            table.pop(state, None)
        self._seen.pop(state, None)
        self._weights.pop(state, None)
        self._recent.pop(state, None)
        new_phase = False
        if not self._active:
            self._reset()
            new_phase = True
        source = self._current
        if state == source:
            self._move(self._draw(self._active))
            return Step(
                self.queries, 0.0, source, self._current, STATE_REMOVED, self.phase, new_phase
            )
        return Step(self.queries, 0.0, source, source, "", self.phase, new_phase)

    def revert(self, state: str) -> None:
        """Put the reorganizer back in ``state`` without a switch: the rewrite to the state
        it chose failed, so the table is still in ``state``. If that state's counter is
        full the next query draws again (Algorithm 3, line 4)."""
        if state not in self._states:
            raise InvalidOption(f"state {state!r} is not in the state space {self._states}")
        self._current = state

    # ------------------------------------------------------------------ internals

    def _check_costs(self, costs: Mapping[str, float]) -> None:
        missing = [s for s in self._states if s not in costs]
        known = set(self._states)
        extra = [s for s in costs if s not in known]
        if missing or extra:
            raise InvalidOption(
                f"costs must cover exactly the states {self._states}; "
                f"missing {missing}, unknown {extra}"
            )
        for s in self._states:
            c = float(costs[s])
            if not math.isfinite(c) or c < 0:
                raise InvalidOption(f"cost of state {s!r} must be finite and >= 0, got {c}")

    def _reset(self) -> None:
        """Algorithm 2: a new phase, every state of ``S`` active with a zero counter."""
        self._weights = self._phase_weights()
        self._active = list(self._states)
        self._counters = dict.fromkeys(self._states, 0.0)
        self._phase_cost = dict.fromkeys(self._states, 0.0)
        self._phase_queries = dict.fromkeys(self._states, 0)
        self.phase += 1

    def _phase_weights(self) -> dict[str, float]:
        """Each state's weight from its mean cost per query in the phase that ends."""
        out = {}
        for s in self._states:
            n = self._phase_queries.get(s, 0)
            if n:
                out[s] = predictor_weight(self._phase_cost[s] / n, self.weight)
        return out

    def _recent_weights(self) -> dict[str, float]:
        """Each state's weight from its mean cost per query over its last ``recent`` queries."""
        return {
            s: predictor_weight(sum(w) / len(w), self.weight) for s, w in self._recent.items() if w
        }

    def _move(self, target: str) -> None:
        if target != self._current:
            self.switches += 1
        self._current = target

    def _draw(self, candidates: Sequence[str]) -> str:
        """One state of ``candidates``: uniform, or weighted by ``w ** gamma``."""
        if len(candidates) == 1:
            return candidates[0]
        weights = self._weights if self.predictor == "phase" else self._recent_weights()
        if self.gamma == 0.0 or not weights:
            return candidates[int(self._rng.integers(len(candidates)))]
        known = [weights[s] for s in candidates if s in weights]
        fallback = float(np.median(known)) if known else 1.0
        w = np.array([weights.get(s, fallback) for s in candidates], dtype=np.float64)
        p = w**self.gamma
        total = float(p.sum())
        if total <= 0 or not math.isfinite(total):
            return candidates[int(self._rng.integers(len(candidates)))]
        u = float(self._rng.random()) * total
        at = int(np.searchsorted(np.cumsum(p), u, side="right"))
        return candidates[min(at, len(candidates) - 1)]

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Everything needed to continue, JSON-safe (the generator position included)."""
        return {
            "kind": self.name,
            "alpha": self.alpha,
            "gamma": self.gamma,
            "seed": self.seed,
            "stay_on_reset": self.stay_on_reset,
            "mid_phase_join": self.mid_phase_join,
            "predictor": self.predictor,
            "weight": self.weight,
            "recent": self.recent,
            "recent_costs": {s: list(costs) for s, costs in self._recent.items()},
            "states": list(self._states),
            "active": list(self._active),
            "counters": dict(self._counters),
            "current": self._current,
            "phase": self.phase,
            "queries": self.queries,
            "switches": self.switches,
            "service_cost": self.service_cost,
            "phase_cost": dict(self._phase_cost),
            "phase_queries": dict(self._phase_queries),
            "weights": dict(self._weights),
            "totals": dict(self._totals),
            "seen": dict(self._seen),
            "rng": rng_state(self._rng),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reorganizer:
        """Inverse of :meth:`to_dict`."""
        try:
            out = cls(
                data["states"],
                initial=data["current"],
                alpha=data["alpha"],
                gamma=data["gamma"],
                seed=data["seed"],
                stay_on_reset=True,  # no initial draw: the state is restored below
                predictor=data.get("predictor", "phase"),
                recent=data.get("recent", 200),
                mid_phase_join=data.get("mid_phase_join", False),
                weight=data.get("weight", "skipped"),
            )
            out.stay_on_reset = bool(data["stay_on_reset"])
            out._active = list(data["active"])
            out._counters = {k: float(v) for k, v in data["counters"].items()}
            out.phase = int(data["phase"])
            out.queries = int(data["queries"])
            out.switches = int(data["switches"])
            out.service_cost = float(data["service_cost"])
            out._phase_cost = {k: float(v) for k, v in data["phase_cost"].items()}
            out._phase_queries = {k: int(v) for k, v in data["phase_queries"].items()}
            out._weights = {k: float(v) for k, v in data["weights"].items()}
            out._totals = {k: float(v) for k, v in data["totals"].items()}
            out._seen = {k: int(v) for k, v in data["seen"].items()}
            if out.predictor == "recent":
                for k, costs in data.get("recent_costs", {}).items():
                    out._recent[k] = deque((float(c) for c in costs), maxlen=out.recent)
            out._rng = rng_from_state(data["rng"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidOption(f"not a saved reorganizer state: {exc!r}") from exc
        return out
