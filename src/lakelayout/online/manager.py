"""The layout manager (OReO §V): which layouts form the state space.

It keeps a sliding window of the most recent queries (the paper found a
window better than a reservoir sample, §V-A, §VI-D4). Every ``interval``
queries it asks a *fit* callback for candidate layouts fitted on the window,
prices every candidate and every state on the window's queries (a cost
vector ``c = (c(s, q_1), …, c(s, q_n))``), and admits a candidate only if it
is far from every state (Algorithm 5)::

    dist(c, c_i) = ||c - c_i||_1 / n        admit  iff  min_i dist(c, c_i) > ε

so the space stays small (the competitive ratio grows with ``log |S_max|``)
and does not fill with near-duplicates that would only make the reorganizer
switch back and forth.

With ``history > 0`` the manager also keeps a uniform sample of that many
queries from the whole stream (a bottom-k sample: the queries with the
smallest seeded hash of their position, so it is deterministic and needs no
random state to persist) and fits a second set of candidates on it every
round, labelled ``… on history``. The paper fits on the window only and found
a window better than a reservoir *instead of* it (§VI-D4); here the history
candidates come *beside* the window's, priced and admitted on the window like
any other. They put a generalist layout into the state space, which the
window alone never does: on a stream of many short template segments every
window candidate is a specialist for the last template or two.

At most ``max_states`` states are kept. When an admission goes beyond it,
the manager prunes the state that is most alike another (smallest distance
to its nearest state; §V-B: "remove candidates that incur similar query
costs to other layouts"), ties going to the state that costs more, then to
the older one. *Protected* states (the one the table is in, the one the
reorganizer is in) are never pruned.

Which queries the distances are measured on: by default the window. With
``admission_sample > 0`` it is a time-biased sample of that many queries of
the whole stream (:class:`TimeBiased`), as the paper does (§V-B: "we use a
reservoir-based time-biased sampling (R-TBS) algorithm ... to curate a
representative query sample"). On the window, layouts fitted for templates
that have left it all cost alike there, so pruning drops them first and a
template that returns finds no layout for it; on the sample they stay apart
as long as the sample remembers their templates. Candidates are still fitted
on the window (§V-A), and the deciders still get each new state's window
costs.

The manager is pure: fitting and pricing are callbacks, states are ids.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import heapq
import json
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from lakelayout.errors import InvalidOption
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout, from_json

#: the initial state: the table as it is when online reorganization starts
AS_IS = "as-is"


@dataclass(frozen=True)
class Candidate:
    """A fitted layout proposed for the state space, with a label for people."""

    label: str
    layout: Layout


#: a saved state's layout by reference: its :attr:`ManagedState.layout_digest` → the layout
LayoutResolver = Callable[[str], Layout]


@dataclass
class ManagedState:
    """A state of the space: its id, label, layout (None for :data:`AS_IS`), admission time."""

    id: str
    label: str
    layout: Layout | None
    added_at: int
    #: :attr:`layout_digest` when known already (the state was read from a reference)
    digest: str | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def layout_json(self) -> str:
        """The layout's JSON document, made once (a state's layout never changes; a curve
        layout's rank tables make it a few hundred kilobytes)."""
        return self.layout.to_json() if self.layout is not None else "null"

    @property
    def layout_digest(self) -> str:
        """A name for the layout's document: equal documents, equal names."""
        if self.digest is None:
            self.digest = hashlib.sha256(self.layout_json.encode("utf-8")).hexdigest()[:32]
        return self.digest

    def to_dict(self, *, refs: bool = False) -> dict[str, Any]:
        """With ``refs`` the layout is named by :attr:`layout_digest`, not written out: the
        caller keeps the documents (the live table's state is saved after every scan)."""
        out: dict[str, Any] = {"id": self.id, "label": self.label, "added_at": self.added_at}
        if refs and self.layout is not None:
            out["layout_ref"] = self.layout_digest
        else:
            out["layout"] = json.loads(self.layout_json)
        return out

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], layouts: LayoutResolver | None = None
    ) -> ManagedState:
        ref = data.get("layout_ref")
        if ref is not None:
            if layouts is None:
                raise InvalidOption(f"state {data.get('id')!r} names layout {ref}: no store given")
            layout: Layout | None = layouts(str(ref))
        else:
            document = data.get("layout")
            layout = from_json(json.dumps(document)) if document is not None else None
        return cls(
            id=str(data["id"]), label=str(data["label"]), layout=layout,
            added_at=int(data["added_at"]), digest=str(ref) if ref is not None else None,
        )  # fmt: skip


@dataclass(frozen=True)
class Admission:
    """What one refresh did: states added (with their window cost vectors), states
    removed, and candidates turned away (label, reason)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Normalized L1 distance of two cost vectors (Algorithm 5, line 8).

    >>> distance(np.array([0.1, 0.5]), np.array([0.3, 0.5]))
    0.1
    """
    if a.shape != b.shape:
        raise InvalidOption(f"cost vectors differ in length: {a.shape} vs {b.shape}")
    if a.size == 0:
        return 0.0
    return round(float(np.abs(a - b).sum()) / a.size, 12)


def _priority(seed: int, position: int) -> int:
    """A seeded 64-bit hash of a query's position: the bottom-k key."""
    digest = hashlib.blake2b(f"{seed}:{position}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class _SmallestKeys(abc.ABC):
    """The ``size`` queries of a stream with the smallest :meth:`key` of their position,
    in stream order; deterministic for a seed (keys are seeded hashes)."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = int(size)
        self.seed = int(seed)
        #: (-key, position, sql, predicate): a max-heap on the key (the largest leaves first)
        self._heap: list[tuple[float, int, str, Predicate]] = []

    @abc.abstractmethod
    def key(self, position: int) -> float:
        """The key of the query at ``position`` (the smallest ``size`` keys are kept)."""

    def add(self, position: int, sql: str, predicate: Predicate) -> None:
        if self.size == 0:
            return
        item = (-self.key(position), position, sql, predicate)
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, item)
        elif item[0] > self._heap[0][0]:  # a smaller key than the largest kept
            heapq.heapreplace(self._heap, item)

    def items(self) -> list[tuple[int, str, Predicate]]:
        """``(position, sql, predicate)`` in stream order."""
        return sorted((pos, sql, pred) for _, pos, sql, pred in self._heap)

    def __len__(self) -> int:
        return len(self._heap)


class History(_SmallestKeys):
    """A uniform sample of ``size`` queries of the whole stream (bottom-k by
    :func:`_priority`), in stream order; the same for the same seed and stream."""

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 0:
            raise InvalidOption(f"history must be >= 0 queries, got {size}")
        super().__init__(size, seed)

    def key(self, position: int) -> float:
        return _priority(self.seed, position)  # the exact 64-bit hash: no ties from rounding


def _uniform(seed: int, position: int) -> float:
    """A seeded uniform number in (0, 1) from a query's position (53 bits of a hash)."""
    digest = hashlib.blake2b(f"tbs:{seed}:{position}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 11) / float(1 << 53) + 2.0**-54


class TimeBiased(_SmallestKeys):
    """A time-biased sample of ``size`` queries of the whole stream (§V-B: the query
    sample admission and pruning compare layouts on; the paper uses R-TBS).

    Weighted sampling without replacement (Efraimidis–Spirakis A-Res), the weight
    of the query at position ``i`` being ``2 ** (i / half_life)``: a query
    ``half_life`` queries older weighs half as much. A-Res keeps the ``size`` largest
    keys ``u_i ** (1 / w_i)``; in logarithms that is the ``size`` smallest
    ``ln(-ln u_i) - i ln 2 / half_life``, which stays finite on any stream length.
    ``u_i`` is a seeded hash of the position: the sample is the same for the same
    seed and stream, and needs no random state to persist. Old queries stay with
    a probability that decays with their age, so the sample remembers templates
    the window has forgotten, biased to recent ones.

    >>> tb = TimeBiased(2, half_life=1)
    >>> for i in range(50):
    ...     tb.add(i, f"q{i}", None)  # type: ignore[arg-type]
    >>> len(tb), all(pos >= 40 for pos, _, _ in tb.items())
    (2, True)
    """

    def __init__(self, size: int, *, half_life: int, seed: int = 0) -> None:
        if size < 0:
            raise InvalidOption(f"admission_sample must be >= 0 queries, got {size}")
        if half_life < 1:
            raise InvalidOption(f"half_life must be >= 1 query, got {half_life}")
        super().__init__(size, seed)
        self.half_life = int(half_life)

    def key(self, position: int) -> float:
        """The A-Res key of a position in logarithms (smaller: more likely kept)."""
        return float(
            np.log(-np.log(_uniform(self.seed, position))) - position * np.log(2.0) / self.half_life
        )


Pricer = Callable[[ManagedState | Candidate, Sequence[Predicate]], np.ndarray]
Fitter = Callable[[Sequence[Predicate]], Sequence[Candidate]]


class LayoutManager:
    """Sliding window, periodic candidates, ε-admission, bounded state space."""

    def __init__(
        self,
        *,
        window: int = 200,
        interval: int = 50,
        epsilon: float = 0.08,
        max_states: int = 8,
        initial_label: str = "the table as it is",
        history: int = 0,
        seed: int = 0,
        admission_sample: int = 0,
        half_life: int = 2000,
    ) -> None:
        if window < 1:
            raise InvalidOption(f"window must be >= 1 query, got {window}")
        if interval < 1:
            raise InvalidOption(f"interval must be >= 1 query, got {interval}")
        if not 0 <= epsilon <= 1:
            raise InvalidOption(f"epsilon must be in [0, 1], got {epsilon}")
        if max_states < 2:
            raise InvalidOption(f"max_states must be >= 2, got {max_states}")
        self.window = int(window)
        self.interval = int(interval)
        self.epsilon = float(epsilon)
        self.max_states = int(max_states)
        self._recent: deque[tuple[str, Predicate]] = deque(maxlen=self.window)
        #: a uniform sample of the whole stream (``history`` queries; empty when 0)
        self.history = History(history, seed)
        #: the time-biased sample distances are measured on (``admission_sample``
        #: queries; the window when 0)
        self.sampled = TimeBiased(admission_sample, half_life=half_life, seed=seed)
        self.queries = 0
        self._next_id = 1
        self.states: dict[str, ManagedState] = {AS_IS: ManagedState(AS_IS, initial_label, None, 0)}

    # ------------------------------------------------------------------ window

    def observe(self, sql: str, predicate: Predicate) -> bool:
        """Add a query to the window; True when a refresh is due (every ``interval``)."""
        self._recent.append((sql, predicate))
        self.history.add(self.queries, sql, predicate)
        self.sampled.add(self.queries, sql, predicate)
        self.queries += 1
        return self.queries % self.interval == 0

    @property
    def window_sql(self) -> list[str]:
        return [sql for sql, _ in self._recent]

    @property
    def window_predicates(self) -> list[Predicate]:
        return [p for _, p in self._recent]

    @property
    def admission_predicates(self) -> list[Predicate]:
        """The queries admission and pruning compare cost vectors on: the time-biased
        sample when on, else the window."""
        if self.sampled.size:
            return [p for _, _, p in self.sampled.items()]
        return self.window_predicates

    @property
    def history_predicates(self) -> list[Predicate]:
        """The history sample's predicates in stream order (empty when off)."""
        return [p for _, _, p in self.history.items()]

    # ------------------------------------------------------------------ admission

    def refresh(self, fit: Fitter, price: Pricer, *, protected: Collection[str] = ()) -> Admission:
        """Fit candidates on the window (and on the history sample, once the stream is
        longer than the window), admit those more than ε from every state, prune back
        to ``max_states``."""
        predicates = self.window_predicates
        if not predicates:
            return Admission()
        candidates = list(fit(predicates))
        if len(self.history) and self.queries > self.window:
            candidates += [
                replace(c, label=f"{c.label} on history") for c in fit(self.history_predicates)
            ]
        return self.admit(candidates, price, protected=protected)

    def admit(
        self,
        candidates: Sequence[Candidate],
        price: Pricer,
        *,
        protected: Collection[str] = (),
    ) -> Admission:
        """Algorithm 5 for each candidate in turn (an admitted one counts as a state
        for the next), then prune beyond ``max_states``. Distances are measured on
        :attr:`admission_predicates`; the admitted states' vectors in the result are
        their costs on the window."""
        predicates = self.admission_predicates
        vectors = {sid: price(s, predicates) for sid, s in self.states.items()}
        added: list[str] = []
        rejected: list[tuple[str, str]] = []
        for cand in candidates:
            vector = price(cand, predicates)
            nearest, closest = self._nearest(vector, vectors)
            if nearest is not None and closest <= self.epsilon:
                why = f"within ε={self.epsilon:g} of {nearest} (distance {closest:.4f})"
                rejected.append((cand.label, why))
                continue
            sid = f"s{self._next_id}"
            self._next_id += 1
            self.states[sid] = ManagedState(sid, cand.label, cand.layout, self.queries)
            vectors[sid] = vector
            added.append(sid)
        removed: list[str] = []
        for sid in self._prune(vectors, set(protected)):
            state = self.states.pop(sid)
            if sid in added:
                added.remove(sid)
                rejected.append((state.label, "state space full and this one was the most alike"))
            else:
                removed.append(sid)
        window = self.window_predicates
        recent = {
            sid: vectors[sid] if not self.sampled.size else price(self.states[sid], window)
            for sid in added
        }
        return Admission(added, removed, rejected, recent)

    def remove(self, sid: str) -> None:
        """Forget a state (the caller tells the reorganizer)."""
        if sid not in self.states:
            raise InvalidOption(f"state {sid!r} is not managed; known: {', '.join(self.states)}")
        del self.states[sid]

    def _nearest(
        self, vector: np.ndarray, vectors: Mapping[str, np.ndarray]
    ) -> tuple[str | None, float]:
        best: str | None = None
        value = float("inf")
        for sid, other in vectors.items():
            d = distance(vector, other)
            if d < value:
                best, value = sid, d
        return best, value

    def _prune(self, vectors: dict[str, np.ndarray], protected: set[str]) -> list[str]:
        """States to drop so at most ``max_states`` remain (most alike first)."""
        out: list[str] = []
        while len(self.states) - len(out) > self.max_states:
            alive = [sid for sid in self.states if sid not in out]
            choices = []
            for sid in alive:
                if sid in protected:
                    continue
                others = {o: vectors[o] for o in alive if o != sid}
                _, near = self._nearest(vectors[sid], others)
                age = self.states[sid].added_at
                choices.append((near, -float(vectors[sid].sum()), age, sid))
            if not choices:
                break
            out.append(min(choices)[3])
        return out

    # ------------------------------------------------------------------ persistence

    def to_dict(self, *, refs: bool = False) -> dict[str, Any]:
        """``refs``: states name their layouts (:meth:`ManagedState.to_dict`)."""
        return {
            "window": self.window,
            "interval": self.interval,
            "epsilon": self.epsilon,
            "max_states": self.max_states,
            "queries": self.queries,
            "next_id": self._next_id,
            "recent": self.window_sql,
            "history": self.history.size,
            "seed": self.history.seed,
            "sampled": [[pos, sql] for pos, sql, _ in self.history.items()],
            "admission_sample": self.sampled.size,
            "half_life": self.sampled.half_life,
            "admission_sampled": [[pos, sql] for pos, sql, _ in self.sampled.items()],
            "states": [s.to_dict(refs=refs) for s in self.states.values()],
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        bind: Callable[[str], Predicate | None],
        layouts: LayoutResolver | None = None,
    ) -> LayoutManager:
        """Inverse of :meth:`to_dict`; ``bind`` parses the window's SQL again (None drops a
        query that no longer binds, e.g. after a schema change); ``layouts`` finds the
        layouts states name."""
        out = cls(
            window=int(data["window"]),
            interval=int(data["interval"]),
            epsilon=float(data["epsilon"]),
            max_states=int(data["max_states"]),
            history=int(data.get("history", 0)),
            seed=int(data.get("seed", 0)),
            admission_sample=int(data.get("admission_sample", 0)),
            half_life=int(data.get("half_life", 2000)),
        )
        out.queries = int(data["queries"])
        out._next_id = int(data["next_id"])
        for sql in data["recent"]:
            predicate = bind(sql)
            if predicate is not None:
                out._recent.append((sql, predicate))
        for pos, sql in data.get("sampled", []):
            predicate = bind(sql)
            if predicate is not None:
                out.history.add(int(pos), sql, predicate)
        for pos, sql in data.get("admission_sampled", []):
            predicate = bind(sql)
            if predicate is not None:
                out.sampled.add(int(pos), sql, predicate)
        out.states = {}
        for item in data["states"]:
            state = ManagedState.from_dict(item, layouts)
            out.states[state.id] = state
        return out
