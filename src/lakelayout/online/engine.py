"""One online reorganization loop: prices, decider, layout manager, switch book-keeping.

:class:`OnlineEngine` is what a live table (``Table.online``) and the
replay's online policies (``oreo``, ``greedy``, ``regret``) share. Per query:

1. every state is priced (:mod:`lakelayout.online.costs`): the state the
   table's files are in (``applied``) on the real files, through the
   caller's :class:`RealCosts`; every other state on its virtual files;
2. the decider (:class:`~.reorganizer.Reorganizer`, :class:`~.baselines.Greedy`
   or :class:`~.baselines.Regret`) serves the query and names the state for
   the next one;
3. the layout manager adds the query to its window and, every ``interval``
   queries, proposes candidates; admitted and pruned states are passed on to
   the decider as Algorithm 4's state updates. Its distances compare every
   layout on virtual files, the table's state too (:meth:`OnlineEngine._price_item`).

When the decider's state differs from ``applied`` the caller rewrites the
table (:meth:`begin`) and reports :meth:`committed` or :meth:`failed`. A
switch the table could not make is undone in the decider (:meth:`failed`:
the table is still in ``applied``), so decider and table never disagree for
longer than one rewrite. The initial state (the table as it was) has no
layout to rebuild it from: it leaves the state space once a rewrite away
from it commits.

Everything is pure and JSON-serializable (:meth:`to_dict`); the sample the
virtual files are built on is kept by the caller. Virtual-file costs go
through a :class:`~.costs.CostBook` on that sample, which the caller may share
between engines (the replay's online policies and oracles price the same
candidates on the same queries).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lakelayout.errors import InvalidOption, closest
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout
from lakelayout.online.baselines import Greedy, Regret
from lakelayout.online.costs import CostBook, VirtualState
from lakelayout.online.manager import (
    AS_IS,
    Admission,
    Candidate,
    LayoutManager,
    LayoutResolver,
    ManagedState,
)
from lakelayout.online.reorganizer import Reorganizer, Step, check_predictor, check_weight

POLICIES = ("oreo", "greedy", "regret")

Decider = Reorganizer | Greedy | Regret


@dataclass(frozen=True)
class OnlineConfig:
    """Settings of one online loop (validated on creation).

    ``alpha``: rewrite cost in full-scan units; ``window``: queries the
    manager keeps; ``interval``: queries between candidate rounds;
    ``epsilon``: admission distance; ``max_states``: size of the state space;
    ``gamma``: predictor exponent (0 = uniform draws, the analysed algorithm);
    ``predictor``: what the predictor's weights are over, ``"phase"`` (the last
    phase, the paper's example) or ``"recent"`` (the last ``predictor_window``
    queries, 0: ``window``); ``predictor_weight``: ``"skipped"`` (``1 -`` the mean
    cost, the paper's example) or ``"inverse"`` (``1 / (mean cost + 0.01)``: states
    weighed by the ratio of their costs, :mod:`~.reorganizer`);
    ``mid_phase_join``: a state admitted during a phase joins it at once with the
    counter its window costs give (:class:`~.reorganizer.Reorganizer`), not at the
    next phase;
    ``fit_before_draw`` (OReO with ``mid_phase_join``): when a query fills the
    current state's counter, fit candidates on the window ending with that query
    before the draw, so that the draw can land on a layout fitted for the queries
    that filled it (the periodic round may be up to ``interval`` queries away);
    ``stay_on_reset``: stay in the current state when a phase starts;
    ``history``: queries in the manager's uniform sample of the whole stream,
    on which a second set of candidates is fitted (0: the window only, as in
    the paper); ``admission_sample``: queries in the time-biased sample of the
    whole stream that admission and pruning compare layouts on (0: the window),
    a query ``half_life`` queries older weighing half as much; ``catch_up``: lay
    out files appended since the last rewrite with the table's layout when they
    cost what that rewrite does (:meth:`OnlineEngine.wants_catch_up`).
    """

    alpha: float
    policy: str = "oreo"
    window: int = 200
    interval: int = 50
    epsilon: float = 0.08
    max_states: int = 8
    gamma: float = 0.0
    predictor: str = "phase"
    predictor_window: int = 0
    predictor_weight: str = "skipped"
    mid_phase_join: bool = False
    fit_before_draw: bool = False
    seed: int = 0
    stay_on_reset: bool = True
    history: int = 0
    admission_sample: int = 0
    half_life: int = 2000
    catch_up: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str):
            raise InvalidOption(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.policy not in POLICIES:
            raise InvalidOption(
                f"unknown online policy {self.policy!r}{closest(self.policy, POLICIES)}; "
                f"known: {', '.join(POLICIES)}"
            )
        _number(self.alpha, "alpha", low=0.0, strict=True)
        _number(self.gamma, "gamma", low=0.0)
        if not isinstance(self.mid_phase_join, bool):
            raise InvalidOption(
                f"mid_phase_join must be true or false, got {self.mid_phase_join!r}"
            )
        if not isinstance(self.catch_up, bool):
            raise InvalidOption(f"catch_up must be true or false, got {self.catch_up!r}")
        if not isinstance(self.fit_before_draw, bool):
            raise InvalidOption(
                f"fit_before_draw must be true or false, got {self.fit_before_draw!r}"
            )
        if self.fit_before_draw and (self.policy != "oreo" or not self.mid_phase_join):
            raise InvalidOption(
                "fit_before_draw needs policy 'oreo' with mid_phase_join: only a state that "
                "joins the phase at once can be drawn by the draw it was fitted for "
                f"(policy {self.policy!r}, mid_phase_join {self.mid_phase_join})"
            )
        check_predictor(self.predictor)
        check_weight(self.predictor_weight)
        _number(self.epsilon, "epsilon", low=0.0, high=1.0)
        for name in (
            "window",
            "interval",
            "max_states",
            "predictor_window",
            "seed",
            "history",
            "admission_sample",
            "half_life",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidOption(f"{name} must be an integer, got {value!r}")
        if self.window < 1 or self.interval < 1:
            raise InvalidOption(
                f"window and interval must be >= 1 query, got {self.window}, {self.interval}"
            )
        if self.seed < 0:
            raise InvalidOption(f"seed must be >= 0, got {self.seed}")
        if self.max_states < 2:
            raise InvalidOption(f"max_states must be >= 2, got {self.max_states}")
        if self.predictor_window < 0:
            raise InvalidOption(
                f"predictor_window must be >= 0 queries (0: the window), "
                f"got {self.predictor_window}"
            )
        if self.history < 0:
            raise InvalidOption(f"history must be >= 0 queries, got {self.history}")
        if self.admission_sample < 0:
            raise InvalidOption(
                f"admission_sample must be >= 0 queries, got {self.admission_sample}"
            )
        if self.half_life < 1:
            raise InvalidOption(f"half_life must be >= 1 query, got {self.half_life}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def unused(self) -> list[str]:
        """The options set away from their defaults that this policy never reads (named
        with the reason): greedy and regret draw nothing, a uniform draw (``gamma=0``)
        weighs no state, ``predictor_window`` is read by ``predictor="recent"`` only and
        ``half_life`` by the time-biased ``admission_sample`` only."""
        fields = self.__dataclass_fields__

        def changed(name: str) -> bool:
            return bool(getattr(self, name) != fields[name].default)

        draw = ("gamma", "predictor", "predictor_window", "predictor_weight", "mid_phase_join")
        out = []
        if self.policy != "oreo":
            out += [f"{n} (policy {self.policy!r} draws no state)" for n in draw if changed(n)]
        else:
            weights = ("predictor", "predictor_window", "predictor_weight")
            if self.gamma == 0:
                out += [f"{n} (gamma=0 draws uniformly)" for n in weights if changed(n)]
            elif changed("predictor_window") and self.predictor != "recent":
                out.append("predictor_window (read with predictor='recent' only)")
        if changed("half_life") and self.admission_sample == 0:
            out.append("half_life (read with admission_sample > 0 only)")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OnlineConfig:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _number(
    value: Any, name: str, *, low: float, high: float | None = None, strict: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOption(f"{name} must be a finite number, got {value!r}")
    if value < low or (strict and value == low) or (high is not None and value > high):
        bounds = f"> {low:g}" if strict else f">= {low:g}"
        if high is not None:
            bounds += f" and <= {high:g}"
        raise InvalidOption(f"{name} must be {bounds}, got {value!r}")


class RealCosts(Protocol):
    """``c(applied, q)`` on the table's real files (see :func:`~.costs.table_costs`)."""

    def __call__(self, predicates: Sequence[Predicate]) -> np.ndarray: ...


Fitter = Callable[[Sequence[Predicate]], Sequence[Candidate]]


#: the least share of the table a catch-up is charged for (:meth:`OnlineEngine.catch_up_cost`)
CATCH_UP_MIN_SHARE = 0.05


#: finished rewrites whose input paths history keeps (older ones keep their counts)
KEEP_INPUTS = 16


@dataclass
class Switch:
    """One switch of the table's layout, as history reports it."""

    query: int
    source: str
    target: str
    reason: str
    source_label: str
    target_label: str
    phase: int
    status: str = "pending"  # pending -> done | failed
    started: float = field(default_factory=time.time)
    finished: float | None = None
    seconds: float | None = None
    files_removed: int = 0
    files_added: int = 0
    #: live files the switch kept as they are (already laid out by its target)
    files_kept: int = 0
    bytes_written: int = 0
    version: int | None = None
    error: str = ""
    #: the table version the rewrite planned against, the files it rewrites, its process id
    read_version: int | None = None
    #: the files it rewrites (emptied once KEEP_INPUTS newer rewrites have finished)
    inputs: list[str] = field(default_factory=list)
    owner: int = 0
    #: the owner's host and start time (:mod:`lakelayout.table.owner`; "" and 0 in states
    #: written before them): a live process given the owner's id is not the owner
    owner_host: str = ""
    owner_started: int = 0
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: ``"switch"`` (to another state) or ``"catch-up"`` (the table's own layout applied
    #: to the files it did not write: appends since the switch)
    kind: str = "switch"
    #: the share of the table's bytes the rewrite was planned on (a switch: the whole
    #: table, α full scans; a catch-up: its files, α × share)
    share: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Switch:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _routes(layout: Layout, rows: pa.Table) -> bool:
    """Whether ``layout`` can route ``rows`` (a column it cuts on may be gone or of another
    type since the table's schema was replaced; the rows, not their schema alone: a
    string column cast to the integers a layout cut on routes no row of 'x999' and every
    row of an empty table)."""
    try:
        layout.assign(rows)
    except Exception:  # any failure to route: the layout does not bind
        return False
    return True


def make_decider(config: OnlineConfig, states: Sequence[str], initial: str) -> Decider:
    if config.policy == "oreo":
        return Reorganizer(
            states,
            initial=initial,
            alpha=config.alpha,
            gamma=config.gamma,
            seed=config.seed,
            stay_on_reset=config.stay_on_reset,
            predictor=config.predictor,
            recent=config.predictor_window or config.window,
            mid_phase_join=config.mid_phase_join,
            weight=config.predictor_weight,
        )
    if config.policy == "greedy":
        return Greedy(states, initial=initial, alpha=config.alpha, window=config.window)
    return Regret(states, initial=initial, alpha=config.alpha, window=config.window)


def decider_from_dict(data: Mapping[str, Any]) -> Decider:
    kind = data.get("kind")
    if kind == "oreo":
        return Reorganizer.from_dict(data)
    if kind == "greedy":
        return Greedy.from_dict(data)
    if kind == "regret":
        return Regret.from_dict(data)
    raise InvalidOption(f"unknown saved decider kind {kind!r}")


class OnlineEngine:
    """Decider + layout manager + prices; the caller rewrites and reports back."""

    def __init__(
        self,
        config: OnlineConfig,
        sample: pa.Table,
        fit: Fitter,
        *,
        initial_label: str = "the table as it is",
        book: CostBook | None = None,
    ) -> None:
        """``book``: the cost book of ``sample`` to share (a new one when None)."""
        if book is not None and book.sample is not sample:
            raise InvalidOption("the cost book must be built on the engine's sample")
        self.config = config
        self.sample = sample
        self.book = book if book is not None else CostBook(sample)
        self.fit = fit
        self.manager = LayoutManager(
            window=config.window,
            interval=config.interval,
            epsilon=config.epsilon,
            max_states=config.max_states,
            initial_label=initial_label,
            history=config.history,
            seed=config.seed,
            admission_sample=config.admission_sample,
            half_life=config.half_life,
        )
        self.decider: Decider = make_decider(config, [AS_IS], AS_IS)
        #: the state the table's files are in
        self.applied = AS_IS
        self.history: list[Switch] = []
        self.query_cost = 0.0
        self.last_error = ""
        self._pending_reason = ""
        #: the manager's query count at the last candidate round
        self._fitted_at = 0
        #: candidate rounds run because a draw was due (``fit_before_draw``)
        self.draw_fits = 0
        #: full scans queries spent since the last rewrite reading files the table's
        #: layout did not write beyond what that layout would have kept of them
        self.unlaid_extra = 0.0

    # ------------------------------------------------------------------ pricing

    def drop_unbound(self, rows: pa.Table) -> list[str]:
        """Remove the states whose layouts cannot route ``rows`` (the table's new sample: a
        column they cut on is gone or of another type, the table's schema was replaced);
        their ids.

        Such a state was kept and drawn: every switch to it ran a rewrite that failed in
        its tasks (an audit: Delta overwrote the table with ``c`` a STRING, and the
        history filled with failed switches). The state the table is in, the one a
        pending rewrite goes to, and the last remaining one stay.

        The state the table is in stays, but when its layout no longer binds, the
        table's files are no layout's: it becomes the table as it is (no layout, priced
        on its real files, left behind at the next switch). Pricing it on virtual files
        failed at every candidate round, after the round's query was counted, and no
        state was admitted again (an audit).
        """
        applied = self.manager.states.get(self.applied)
        if applied is not None and applied.layout is not None and not _routes(applied.layout, rows):
            self.manager.states[self.applied] = ManagedState(
                self.applied, f"as-is (was {applied.label})", None, applied.added_at
            )
            self.unlaid_extra = 0.0  # no layout: no files it did not lay out
        keep = {self.applied, *(() if self.pending is None else (self.pending.target,))}
        dropped = []
        for sid, state in list(self.manager.states.items()):
            if state.layout is None or sid in keep or len(self.manager.states) <= 1:
                continue
            if not _routes(state.layout, rows):
                self.manager.remove(sid)
                step = self.decider.remove_state(sid)
                if step.switched:
                    self._pending_reason = step.reason
                dropped.append(sid)
        return dropped

    def replace_sample(self, sample: pa.Table) -> None:
        """Price virtual files on a new sample from now on (the table changed)."""
        self.sample = sample
        self.book = CostBook(sample)

    def virtual(self, sid: str) -> VirtualState:
        """The virtual files of a state with a layout (built once per layout, from the sample)."""
        state = self.manager.states[sid]
        if state.layout is None:
            raise InvalidOption(f"state {sid!r} has no layout to price on virtual files")
        return self.book.state(state.layout)

    def _layouts(self, ids: Sequence[str]) -> list[Layout]:
        out = []
        for sid in ids:
            layout = self.manager.states[sid].layout
            if layout is None:
                raise InvalidOption(f"state {sid!r} has no layout to price on virtual files")
            out.append(layout)
        return out

    def prices(self, predicates: Sequence[Predicate], real: RealCosts) -> dict[str, np.ndarray]:
        """``c(s, q)`` for every state of the decider and every predicate (the states
        other than ``applied`` in one :meth:`CostBook.matrix` call)."""
        others = [sid for sid in self.decider.states if sid != self.applied]
        matrix = self.book.matrix(self._layouts(others), predicates)
        out = {sid: matrix[:, j] for j, sid in enumerate(others)}
        if self.applied in self.decider.states:
            out[self.applied] = np.asarray(real(predicates), dtype=np.float64)
        return {sid: out[sid] for sid in self.decider.states}

    def _price_item(
        self, item: ManagedState | Candidate, predicates: Sequence[Predicate], real: RealCosts
    ) -> np.ndarray:
        """A state's or candidate's cost vector for the layout manager's distances.

        Every layout is priced on its virtual files, the table's too: the distance asks
        whether two *layouts* cost alike, and the table's real files (a switch cuts large
        blocks into several) would measure the gap between the two estimators instead
        (docs/online.md, "Limits"). Only the table as it is, which has no layout, is
        priced on its real files. The decider's counters keep the real costs
        (:meth:`prices`)."""
        if item.layout is None:  # the table as it is
            return np.asarray(real(predicates), dtype=np.float64)
        return self.book.costs(item.layout, predicates)

    # ------------------------------------------------------------------ the loop

    def observe(self, sql: str, predicate: Predicate, real: RealCosts) -> Step:
        """Serve one query; refresh the state space when due. The step of the decider."""
        costs = self._costs(predicate, real)
        early = (
            self.config.fit_before_draw
            and isinstance(self.decider, Reorganizer)
            and self._fitted_at < self.manager.queries
            and self.decider.draws_after(costs)
        )
        if early:
            # the window takes the query first; the states admitted now join the phase
            # with their costs up to the previous query and are charged this one below
            self.manager.observe(sql, predicate)
            self.refresh(real, uncharged=1)
            self.draw_fits += 1
            costs = self._costs(predicate, real)
        step = self.decider.observe(costs)
        # the query read the table as it is: while a switch is written the decider is in
        # its target already, the table is not (the query's real cost, not the target's
        # estimate; an audit found the reported cost under half of what scans read)
        self.query_cost += costs.get(self.applied, step.cost)
        if step.switched:
            self._pending_reason = step.reason
        if not early and self.manager.observe(sql, predicate):
            self.refresh(real)
        return step

    def fits_next(self, predicate: Predicate, real: RealCosts) -> bool:
        """Whether serving ``predicate`` next fits candidates: a round is due at it, or
        (``fit_before_draw``) it makes the reorganizer draw. That step takes seconds where
        the others take milliseconds. Nothing changes."""
        if (self.manager.queries + 1) % self.manager.interval == 0:
            return True
        return bool(
            self.config.fit_before_draw
            and isinstance(self.decider, Reorganizer)
            and self._fitted_at < self.manager.queries
            and self.decider.draws_after(self._costs(predicate, real))
        )

    def _costs(self, predicate: Predicate, real: RealCosts) -> dict[str, float]:
        return {sid: float(v[0]) for sid, v in self.prices([predicate], real).items()}

    def refresh(self, real: RealCosts, *, uncharged: int = 0) -> Admission:
        """A candidate round now (the manager calls it every ``interval`` queries).

        ``uncharged``: the window's last queries the decider has not served yet; the
        admitted states join without their costs of those queries.
        """
        self._fitted_at = self.manager.queries
        protected = {self.applied, self.decider.current}
        if self.pending is not None:
            protected.add(self.pending.target)  # the table may be in it when the rewrite ends

        def fit(predicates: Sequence[Predicate]) -> list[Candidate]:
            if self.sample.num_rows == 0:  # an empty table: nothing to fit on yet
                return []
            # price every candidate and state with a layout on the window in one go (the
            # book stacks their virtual files); the manager's calls below hit its memo
            found = list(self.fit(predicates))
            stated = [
                s.layout
                for s in self.manager.states.values()
                if s.layout is not None and s.id != self.applied
            ]
            self.book.matrix([c.layout for c in found] + stated, predicates)
            return found

        def price(item: ManagedState | Candidate, predicates: Sequence[Predicate]) -> np.ndarray:
            return self._price_item(item, predicates, real)

        admission = self.manager.refresh(fit, price, protected=protected)
        for sid in admission.added:
            vector = admission.vectors[sid].tolist()
            self.decider.add_state(sid, vector[: len(vector) - uncharged])
        for sid in admission.removed:
            step = self.decider.remove_state(sid)
            if step.switched:
                self._pending_reason = step.reason
        return admission

    # ------------------------------------------------------------------ switches

    @property
    def target(self) -> str:
        """The state the decider wants the table in."""
        return self.decider.current

    def wants_switch(self) -> bool:
        return self.decider.current != self.applied

    def layout_of(self, sid: str) -> Layout | None:
        return self.manager.states[sid].layout

    def label_of(self, sid: str) -> str:
        state = self.manager.states.get(sid)
        return state.label if state is not None else sid

    def begin(self) -> Switch:
        """Record the start of a rewrite of the table from ``applied`` to :attr:`target`."""
        target = self.target
        record = Switch(
            query=self.manager.queries,
            source=self.applied,
            target=target,
            reason=self._pending_reason or "switch",
            source_label=self.label_of(self.applied),
            target_label=self.label_of(target),
            phase=int(getattr(self.decider, "phase", 0)),
        )
        self.history.append(record)
        return record

    # ------------------------------------------------------------------ catch-ups

    def charge_unlaid(self, extra: float) -> None:
        """Queries read ``extra`` full scans more than they would have if the files the
        table's layout did not write (appends since the switch) were laid out by it."""
        self.unlaid_extra += max(0.0, float(extra))

    def catch_up_cost(self, share: float) -> float:
        """What rewriting ``share`` of the table's bytes costs, in full scans: α × share,
        at least α × :data:`CATCH_UP_MIN_SHARE` (a rewrite's fixed costs do not shrink
        with its files)."""
        return self.config.alpha * max(float(share), CATCH_UP_MIN_SHARE)

    def wants_catch_up(self, share: float) -> bool:
        """Rent or buy: lay the files the table's layout did not write (``share`` of the
        table's bytes) out with it once the queries' extra cost reading them reached what
        rewriting them costs (:meth:`catch_up_cost`). Never while a rewrite is pending or
        the decider wants another state, nor for the table as it was (no layout)."""
        layout = self.layout_of(self.applied)
        return (
            self.config.catch_up
            and share > 0.0
            and self.pending is None
            and not self.wants_switch()
            and layout is not None
            and self.unlaid_extra >= self.catch_up_cost(share)
            and _routes(layout, self.sample)
        )

    def begin_catch_up(self, share: float) -> Switch:
        """Record the start of a catch-up: the table's layout applied to its other files."""
        record = Switch(
            query=self.manager.queries,
            source=self.applied,
            target=self.applied,
            reason=(
                f"catch-up: {self.unlaid_extra:.2f} full scans read beyond the layout in "
                f"{share:.1%} of the table not laid out by it"
            ),
            source_label=self.label_of(self.applied),
            target_label=self.label_of(self.applied),
            phase=int(getattr(self.decider, "phase", 0)),
            kind="catch-up",
            share=float(share),
        )
        self.history.append(record)
        self.unlaid_extra = 0.0
        return record

    def last_commit(self) -> int | None:
        """The table version the newest committed rewrite (switch or catch-up) made; None
        before the first. A snapshot older than it shows files that rewrite removed."""
        for record in reversed(self.history):
            if record.status == "done" and record.version is not None:
                return record.version
        return None

    def find(self, record_id: str) -> Switch | None:
        """The history record with ``record_id`` (None if unknown)."""
        return next((s for s in self.history if s.id == record_id), None)

    @property
    def pending(self) -> Switch | None:
        """The rewrite started and not finished, if any."""
        return next((s for s in reversed(self.history) if s.status == "pending"), None)

    def committed(self, record: Switch, **metrics: Any) -> None:
        """The rewrite of ``record`` committed: the table is in its target now."""
        self._finish(record, "done", **metrics)
        if record.kind == "catch-up":
            return
        self.unlaid_extra = 0.0  # a new layout: what its files cost starts over
        previous, self.applied = self.applied, record.target
        state = self.manager.states.get(previous)
        if previous != record.target and state is not None and state.layout is None:
            # the table as it was cannot be rebuilt: it leaves the state space
            if previous in self.decider.states:
                step = self.decider.remove_state(previous)
                if step.switched:
                    self._pending_reason = step.reason
            self.manager.remove(previous)

    def failed(self, record: Switch, error: str, **metrics: Any) -> None:
        """The rewrite failed: the table is still in ``applied``; so is the decider now
        (a failed catch-up changes no state: its files wait for the next rewrite)."""
        self._finish(record, "failed", error=error, **metrics)
        if record.kind != "catch-up":
            self.decider.revert(self.applied)

    def _finish(self, record: Switch, status: str, **metrics: Any) -> None:
        record.status = status
        record.finished = time.time()
        for key, value in metrics.items():
            setattr(record, key, value)
        # a finished rewrite's input paths are history only: the newest KEEP_INPUTS keep
        # them (state.json grew by every file of every switch, for the table's life)
        finished = [s for s in self.history if s.status != "pending"]
        for old in finished[:-KEEP_INPUTS]:
            old.inputs = []

    # ------------------------------------------------------------------ reports

    def status(self) -> dict[str, Any]:
        """Current layout, states with counters and costs, phase, alpha, costs so far."""
        decider = self.decider
        counters = decider.counters if isinstance(decider, Reorganizer) else {}
        active = set(decider.active) if isinstance(decider, Reorganizer) else set()
        totals = decider.totals
        states = []
        for sid in decider.states:
            managed = self.manager.states.get(sid)
            states.append(
                {
                    "id": sid,
                    "label": managed.label if managed else sid,
                    "family": managed.layout.family if managed and managed.layout else None,
                    "blocks": managed.layout.n_blocks if managed and managed.layout else None,
                    "added_at": managed.added_at if managed else 0,
                    "counter": counters.get(sid),
                    "active": sid in active,
                    "would_have_cost": totals.get(sid, 0.0),
                    "current": sid == decider.current,
                    "applied": sid == self.applied,
                }
            )
        done = [s for s in self.history if s.status == "done" and s.kind == "switch"]
        caught = [s for s in self.history if s.status == "done" and s.kind == "catch-up"]
        return {
            "policy": self.config.policy,
            "alpha": self.config.alpha,
            "gamma": self.config.gamma,
            "predictor": self.config.predictor,
            "predictor_window": self.config.predictor_window or self.config.window,
            "predictor_weight": self.config.predictor_weight,
            "mid_phase_join": self.config.mid_phase_join,
            "fit_before_draw": self.config.fit_before_draw,
            "draw_fits": self.draw_fits,
            "epsilon": self.config.epsilon,
            "window": self.config.window,
            "interval": self.config.interval,
            "max_states": self.config.max_states,
            "history": self.config.history,
            "admission_sample": self.config.admission_sample,
            "half_life": self.config.half_life,
            "queries": self.manager.queries,
            "phase": getattr(decider, "phase", None),
            "applied": self.applied,
            "applied_label": self.label_of(self.applied),
            "current": decider.current,
            "rewrite_pending": self.pending is not None,
            "states": states,
            "query_cost": self.query_cost,
            "switches": len(done),
            "catch_up": self.config.catch_up,
            "catch_ups": len(caught),
            "unlaid_extra": self.unlaid_extra,
            "reorganization_cost": self.config.alpha * len(done)
            + sum(self.catch_up_cost(s.share) for s in caught),
            "failed_rewrites": sum(s.status == "failed" for s in self.history),
            "rewrite_seconds": sum(s.seconds or 0.0 for s in self.history),
            "last_error": self.last_error,
        }

    # ------------------------------------------------------------------ persistence

    def to_dict(self, *, refs: bool = False) -> dict[str, Any]:
        """``refs``: states name their layouts (:meth:`ManagedState.to_dict`)."""
        return {
            "config": self.config.to_dict(),
            "manager": self.manager.to_dict(refs=refs),
            "decider": self.decider.to_dict(),
            "applied": self.applied,
            "history": [s.to_dict() for s in self.history],
            "query_cost": self.query_cost,
            "last_error": self.last_error,
            "pending_reason": self._pending_reason,
            "fitted_at": self._fitted_at,
            "draw_fits": self.draw_fits,
            "unlaid_extra": self.unlaid_extra,
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        sample: pa.Table,
        fit: Fitter,
        bind: Callable[[str], Predicate | None],
        layouts: LayoutResolver | None = None,
        book: CostBook | None = None,
    ) -> OnlineEngine:
        """Inverse of :meth:`to_dict`; ``bind`` parses the window's SQL again, ``layouts``
        finds the layouts states name; ``book``: a cost book of ``sample`` to go on with
        (a reload keeps the virtual files and costs already made)."""
        try:
            out = cls(OnlineConfig.from_dict(data["config"]), sample, fit, book=book)
            out.manager = LayoutManager.from_dict(data["manager"], bind, layouts)
            out.decider = decider_from_dict(data["decider"])
            out.applied = str(data["applied"])
            out.history = [Switch.from_dict(s) for s in data["history"]]
            out.query_cost = float(data["query_cost"])
            out.last_error = str(data.get("last_error", ""))
            out._pending_reason = str(data.get("pending_reason", ""))
            out._fitted_at = int(data.get("fitted_at", 0))
            out.draw_fits = int(data.get("draw_fits", 0))
            out.unlaid_extra = float(data.get("unlaid_extra", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidOption(f"not a saved online state: {exc!r}") from exc
        return out
