"""What OReO is compared with (§VI-A3, §VI-C), as pure decision procedures over costs.

Offline (they see the whole cost stream in advance):

* :func:`offline_optimum`: the exact minimum of service cost plus ``α`` per
  switch over the states, by dynamic programming (the lower bound of every
  policy over the same states; Theorem IV.1 is stated against it);
* :func:`static_best`: the best single state for the whole stream
  (the paper's *Static*).

Online (they see one query at a time, like :class:`~.reorganizer.Reorganizer`,
and share its interface: ``observe``, ``add_state``, ``remove_state``,
``revert``, ``to_dict``):

* :class:`Greedy`: switch as soon as another state would have cost less
  over the recent window of queries, ignoring the rewrite cost;
* :class:`Regret`: switch when the cost another state would have saved
  since the current state was adopted exceeds the rewrite cost ``α``
  (the video-storage rule the paper borrows, [23]).

A cost stream is a ``(queries, states)`` array; ``available[t, s]`` says
whether state ``s`` exists at query ``t`` (a dynamic state space).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lakelayout.errors import InvalidOption
from lakelayout.online.reorganizer import STATE_REMOVED, Step


@dataclass(frozen=True)
class Schedule:
    """A state per query, and what it costs (service + ``α`` per switch)."""

    path: np.ndarray
    total: float
    switches: int


def _check_stream(costs: np.ndarray, available: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.asarray(costs, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise InvalidOption(f"costs must be a (queries, states) array, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
        raise InvalidOption("costs must be finite and >= 0")
    if available is None:
        return matrix, np.ones(matrix.shape, dtype=bool)
    mask = np.asarray(available, dtype=bool)
    if mask.shape != matrix.shape:
        raise InvalidOption(f"available has shape {mask.shape}, costs {matrix.shape}")
    if matrix.shape[0] and not mask.any(axis=1).all():
        raise InvalidOption("every query needs at least one available state")
    return matrix, mask


def schedule_cost(
    path: Sequence[int] | np.ndarray, costs: np.ndarray, alpha: float, *, start: int | None = None
) -> float:
    """Service cost of ``path`` plus ``α`` per change (and from ``start`` to ``path[0]``)."""
    steps = np.asarray(path, dtype=np.int64)
    matrix = np.asarray(costs, dtype=np.float64)
    if len(steps) != matrix.shape[0]:
        raise InvalidOption(f"path has {len(steps)} entries for {matrix.shape[0]} queries")
    if not len(steps):
        return 0.0
    service = float(matrix[np.arange(len(steps)), steps].sum())
    changes = int(np.count_nonzero(steps[1:] != steps[:-1]))
    if start is not None and steps[0] != start:
        changes += 1
    return service + alpha * changes


def offline_optimum(
    costs: np.ndarray,
    alpha: float,
    *,
    start: int | None = None,
    available: np.ndarray | None = None,
) -> Schedule:
    """The cheapest schedule: ``V_t(s) = c(s, t) + min(V_{t-1}(s), min_u V_{t-1}(u) + α)``.

    ``start`` is the state before the first query (``None``: free choice, no
    switch charged for the first state). Ties keep the current state. Exact,
    ``O(queries × states)``.

    >>> c = np.array([[0, 1], [1, 0], [1, 0], [1, 0]], dtype=float)
    >>> s = offline_optimum(c, 1.5, start=0)
    >>> s.path.tolist(), s.total
    ([0, 1, 1, 1], 1.5)
    """
    matrix, mask = _check_stream(costs, available)
    if alpha < 0 or not math.isfinite(alpha):
        raise InvalidOption(f"alpha must be finite and >= 0, got {alpha}")
    t_count, n = matrix.shape
    if t_count == 0:
        return Schedule(np.zeros(0, dtype=np.int64), 0.0, 0)
    if start is not None and not 0 <= start < n:
        raise InvalidOption(f"start state {start} is not one of {n} states")
    states = np.arange(n)
    value = matrix[0].copy()
    if start is not None:
        value = value + alpha * (states != start)
    value[~mask[0]] = np.inf
    back = np.zeros((t_count, n), dtype=np.int64)
    for t in range(1, t_count):
        best = int(np.argmin(value))
        switch = value[best] + alpha
        stay = value <= switch
        back[t] = np.where(stay, states, best)
        value = np.where(stay, value, switch) + matrix[t]
        value[~mask[t]] = np.inf
    path = np.zeros(t_count, dtype=np.int64)
    path[-1] = int(np.argmin(value))
    for t in range(t_count - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    total = schedule_cost(path, matrix, alpha, start=start)
    changes = int(np.count_nonzero(path[1:] != path[:-1]))
    if start is not None and path[0] != start:
        changes += 1
    return Schedule(path, total, changes)


def static_best(costs: np.ndarray, available: np.ndarray | None = None) -> tuple[int, float]:
    """The state with the least total cost over the whole stream, among states available
    at every query; ``(state, its total cost)``."""
    matrix, mask = _check_stream(costs, available)
    always = mask.all(axis=0)
    if not always.any():
        raise InvalidOption("no state is available for the whole stream")
    totals = np.where(always, matrix.sum(axis=0), np.inf)
    best = int(np.argmin(totals))
    return best, float(totals[best])


class _WindowDecider:
    """Shared book-keeping of :class:`Greedy` and :class:`Regret`: the states, the
    current one, and every state's costs on the last ``window`` queries."""

    name = "window"

    def __init__(self, states: Sequence[str], *, initial: str, alpha: float, window: int) -> None:
        ids = list(states)
        if not ids or len(set(ids)) != len(ids):
            raise InvalidOption(f"states must be non-empty and unique, got {ids}")
        if initial not in ids:
            raise InvalidOption(f"initial state {initial!r} is not one of the states {ids}")
        if window < 1:
            raise InvalidOption(f"window must be >= 1, got {window}")
        self.alpha = float(alpha)
        self.window = int(window)
        self._states = ids
        self._current = initial
        self._recent: dict[str, deque[float]] = {s: deque(maxlen=window) for s in ids}
        self.queries = 0
        self.switches = 0
        self.service_cost = 0.0
        self._totals = dict.fromkeys(ids, 0.0)

    @property
    def current(self) -> str:
        return self._current

    @property
    def states(self) -> list[str]:
        return list(self._states)

    @property
    def totals(self) -> dict[str, float]:
        return dict(self._totals)

    @property
    def total_cost(self) -> float:
        return self.service_cost + self.alpha * self.switches

    def _record(self, costs: Mapping[str, float]) -> float:
        missing = [s for s in self._states if s not in costs]
        if missing:
            raise InvalidOption(f"costs are missing states {missing}")
        for s in self._states:
            c = float(costs[s])
            if not math.isfinite(c) or c < 0:
                raise InvalidOption(f"cost of state {s!r} must be finite and >= 0, got {c}")
            self._recent[s].append(c)
            self._totals[s] += c
        self.queries += 1
        paid = float(costs[self._current])
        self.service_cost += paid
        return paid

    def _saving(self, state: str, last: int | None = None) -> float:
        """What ``state`` would have saved over the current state on their common recent
        queries (at most ``last`` of them)."""
        mine, cur = self._recent[state], self._recent[self._current]
        m = min(len(mine), len(cur))
        if last is not None:
            m = min(m, last)
        if m == 0:
            return 0.0
        return float(sum(list(cur)[-m:]) - sum(list(mine)[-m:]))

    def add_state(self, state: str, recent: Sequence[float] = ()) -> None:
        """Add ``state``; ``recent`` are its costs on the latest queries (oldest first)."""
        if state in self._states:
            raise InvalidOption(f"state {state!r} is already in the state space")
        self._states.append(state)
        self._recent[state] = deque((float(c) for c in recent), maxlen=self.window)
        self._totals[state] = 0.0

    def remove_state(self, state: str) -> Step:
        if state not in self._states:
            raise InvalidOption(f"state {state!r} is not in the state space {self._states}")
        if len(self._states) == 1:
            raise InvalidOption(f"cannot remove {state!r}: it is the only state")
        self._states.remove(state)
        del self._recent[state]
        del self._totals[state]
        source = self._current
        if state == source:
            self._switch(self._states[0])
            return Step(self.queries, 0.0, source, self._current, STATE_REMOVED, 0)
        return Step(self.queries, 0.0, source, source, "", 0)

    def revert(self, state: str) -> None:
        if state not in self._states:
            raise InvalidOption(f"state {state!r} is not in the state space {self._states}")
        self._current = state

    def _switch(self, target: str) -> None:
        if target != self._current:
            self.switches += 1
            self._current = target

    def _best(self, savings: Mapping[str, float]) -> tuple[str, float]:
        """The state with the largest saving (first in state order on ties)."""
        best, value = self._current, 0.0
        for s in self._states:
            if s != self._current and savings[s] > value:
                best, value = s, savings[s]
        return best, value

    def _base_dict(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "alpha": self.alpha,
            "window": self.window,
            "states": list(self._states),
            "current": self._current,
            "recent": {s: list(v) for s, v in self._recent.items()},
            "queries": self.queries,
            "switches": self.switches,
            "service_cost": self.service_cost,
            "totals": dict(self._totals),
        }

    def _load_base(self, data: Mapping[str, Any]) -> None:
        self._recent = {
            s: deque((float(c) for c in v), maxlen=self.window) for s, v in data["recent"].items()
        }
        self.queries = int(data["queries"])
        self.switches = int(data["switches"])
        self.service_cost = float(data["service_cost"])
        self._totals = {k: float(v) for k, v in data["totals"].items()}


class Greedy(_WindowDecider):
    """Switch whenever another state would have cost less on the window (no regard for α).

    >>> g = Greedy(["a", "b"], initial="a", alpha=100.0, window=3)
    >>> g.observe({"a": 0.5, "b": 0.2}).target
    'b'
    """

    name = "greedy"

    def observe(self, costs: Mapping[str, float]) -> Step:
        source = self._current
        paid = self._record(costs)
        best, saving = self._best({s: self._saving(s) for s in self._states})
        if saving > 0:
            self._switch(best)
            return Step(self.queries, paid, source, best, "cheaper on the window", 0)
        return Step(self.queries, paid, source, source, "", 0)

    def to_dict(self) -> dict[str, Any]:
        return self._base_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Greedy:
        out = cls(
            data["states"], initial=data["current"], alpha=data["alpha"], window=data["window"]
        )
        out._load_base(data)
        return out


class Regret(_WindowDecider):
    """Switch when a state's saving since the current state was adopted exceeds ``α``.

    Savings accumulate query by query; a state added later is credited
    retroactively with its savings on the recent queries it was evaluated on
    (at most the window, at most the queries since adoption). A switch
    starts a new adoption: every saving goes back to zero.

    >>> r = Regret(["a", "b"], initial="a", alpha=1.0, window=10)
    >>> [r.observe({"a": 0.5, "b": 0.0}).target for _ in range(3)]
    ['a', 'a', 'b']
    """

    name = "regret"

    def __init__(
        self, states: Sequence[str], *, initial: str, alpha: float, window: int = 200
    ) -> None:
        super().__init__(states, initial=initial, alpha=alpha, window=window)
        self._regret = dict.fromkeys(self._states, 0.0)
        self._since = 0  # queries since the current state was adopted

    @property
    def regrets(self) -> dict[str, float]:
        return dict(self._regret)

    def observe(self, costs: Mapping[str, float]) -> Step:
        source = self._current
        paid = self._record(costs)
        self._since += 1
        for s in self._states:
            self._regret[s] += float(costs[source]) - float(costs[s])
        best, saving = self._best(self._regret)
        if saving > self.alpha:
            self._switch(best)
            self._regret = dict.fromkeys(self._states, 0.0)
            self._since = 0
            return Step(self.queries, paid, source, best, "regret above alpha", 0)
        return Step(self.queries, paid, source, source, "", 0)

    def add_state(self, state: str, recent: Sequence[float] = ()) -> None:
        super().add_state(state, recent)
        self._regret[state] = self._saving(state, last=self._since)

    def remove_state(self, state: str) -> Step:
        step = super().remove_state(state)
        self._regret.pop(state, None)
        if step.switched:
            self._regret = dict.fromkeys(self._states, 0.0)
            self._since = 0
        return step

    def revert(self, state: str) -> None:
        super().revert(state)
        self._regret = dict.fromkeys(self._states, 0.0)
        self._since = 0

    def to_dict(self) -> dict[str, Any]:
        return {**self._base_dict(), "regret": dict(self._regret), "since": self._since}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Regret:
        out = cls(
            data["states"], initial=data["current"], alpha=data["alpha"], window=data["window"]
        )
        out._load_base(data)
        out._regret = {k: float(v) for k, v in data["regret"].items()}
        out._since = int(data["since"])
        return out


__all__ = [
    "Greedy",
    "Regret",
    "Schedule",
    "offline_optimum",
    "schedule_cost",
    "static_best",
]
