"""Benefit against cost: does a rewrite pay for itself? (thesis §5, f = improvement - cost)

For one candidate layout and the files it would rewrite (``B`` bytes):

    saved bytes per query = B × mean over the recent queries q of
                            (scanned_now(q) - scanned_after(q))       (fractions, §5.2)
    saved files per query = the same with files: scanned_now(q) × files now
                            - scanned_after(q) × files after (a layout's blocks
                            hold equal shares of the rows)
    expected queries E    = query rate of the log window × horizon (a window
                            shorter than an hour counts as an hour), or a given
                            number of queries
    saving  (seconds)     = E × P × (saved bytes per query × query cost per byte
                                     + saved files per query × query cost per file)
    P                     = the share of its estimated saving the table's last
                            automatic rewrites kept on the queries after them
                            (1 before any; a drifting workload keeps little)
    cost    (seconds)     = the cost model's rewrite of B bytes (rows × columns values)
                            into the layout's files, plus indexing the other files
                            for new statistics

The rewrite is worth doing when ``saving > cost × margin``; the margin
(default 1.5) absorbs estimation error (the thesis measured up to 1.44×,
table 5.1). The *payback* is the number of queries (and, from the rate, the
time) after which the saving has covered the cost. Pure arithmetic.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lakelayout.advisor.costmodel import CostModel
from lakelayout.arguments import real_number, whole_number
from lakelayout.errors import InvalidOption

DEFAULT_HORIZON_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class BenefitConfig:
    """How far ahead a saving counts, and how sure it must be."""

    #: future queries are counted over this many seconds at the log's query rate ...
    horizon_seconds: float = DEFAULT_HORIZON_SECONDS
    #: ... unless this many future queries are given
    horizon_queries: float | None = None
    #: rewrite only when saving > cost × margin
    margin: float = 1.5
    #: fewest logged queries before anything is decided
    min_queries: int = 5
    #: a window shorter than this is stretched to it when computing the rate (a burst
    #: of queries in a few seconds says little about the next week)
    min_span_seconds: float = 3600.0
    #: seconds the candidate layouts take to fit, per sample row (every family together):
    #: a decision fits them only when the most a rewrite could save, net of its cheapest
    #: cost, exceeds this × the sample's rows. None: the cost model's measured
    #: ``fit_seconds_per_row`` (``lakelayout calibrate``); 0 turns the check off
    fit_seconds_per_row: float | None = None
    #: seconds per row (one core) to collect the table's declared indexes and the new
    #: statistics in a rewrite's writing tasks. None: timed on each decision's sample
    collect_seconds_per_row: float | None = None
    #: seconds per row (one core) for a tree layout (Qd-tree, Pando) to route a row to
    #: its block. None: timed on each decision's sample, per candidate
    route_seconds_per_row: float | None = None
    #: queries a decision fits the tree layouts to and prices every candidate on, at
    #: most: a longer window is thinned evenly over time (every k-th query, so each
    #: stretch of the stream keeps its share); the bounds before sampling, the
    #: analyzer's features and the query rate still see every query. None: all
    max_priced_queries: int | None = 150

    def __post_init__(self) -> None:
        # (a whole number where one is counted: 2.5 priced queries and '5' were taken,
        # then a raw TypeError; an audit)
        if not whole_number(self.min_queries):
            raise InvalidOption(
                f"min_queries must be a whole number >= 1, got {self.min_queries!r}"
            )
        if self.max_priced_queries is not None and not whole_number(self.max_priced_queries):
            raise InvalidOption(
                f"max_priced_queries must be a whole number >= 1 (or None: every query), "
                f"got {self.max_priced_queries!r}"
            )
        for name in ("horizon_seconds", "margin", "min_span_seconds"):
            if not real_number(getattr(self, name)):
                raise InvalidOption(f"{name} must be a number, got {getattr(self, name)!r}")
        if self.max_priced_queries is not None and self.max_priced_queries < 1:
            raise InvalidOption(
                f"max_priced_queries must be >= 1 (or None: every query), "
                f"got {self.max_priced_queries}"
            )
        for name in ("fit_seconds_per_row", "collect_seconds_per_row", "route_seconds_per_row"):
            value = getattr(self, name)
            if value is not None and not (_finite(value) and value >= 0):
                raise InvalidOption(f"{name} must be a finite number >= 0, got {value}")
        if not (_finite(self.horizon_seconds) and self.horizon_seconds > 0):
            raise InvalidOption(
                f"horizon_seconds must be a finite number > 0, got {self.horizon_seconds}"
            )
        if not (_finite(self.margin) and self.margin >= 1.0):
            raise InvalidOption(f"margin must be a finite number >= 1, got {self.margin}")
        if self.min_queries < 1:
            raise InvalidOption(f"min_queries must be >= 1, got {self.min_queries}")
        if not (_finite(self.min_span_seconds) and self.min_span_seconds >= 0):
            raise InvalidOption(
                f"min_span_seconds must be a finite number >= 0, got {self.min_span_seconds}"
            )
        if self.horizon_queries is not None and not (
            _finite(self.horizon_queries) and self.horizon_queries >= 0
        ):
            raise InvalidOption(
                f"horizon_queries must be a finite number >= 0 (or None: from the query "
                f"rate), got {self.horizon_queries}"
            )


def _finite(value: object) -> bool:
    """Whether ``value`` is a real number, neither NaN nor infinite (not a bool)."""
    return real_number(value) and math.isfinite(value)


@dataclass(frozen=True)
class Rate:
    """The recent workload's pace: queries in the window over its time span."""

    queries: int
    span_seconds: float
    expected_queries: float
    basis: str
    #: the share of the window's saving the expected queries are expected to keep (1: the
    #: window repeats; :func:`.decisions.persistence` learns it from earlier rewrites)
    persistence: float = 1.0
    #: how long before the decision the window's last query ran, when the rate counts
    #: that time (from ``min_span_seconds`` on; else 0); ``span_seconds`` includes it
    idle_seconds: float = 0.0

    @property
    def per_hour(self) -> float | None:
        return self.queries / self.span_seconds * 3600 if self.span_seconds > 0 else None

    @property
    def benefiting_queries(self) -> float:
        """Expected queries × persistence: how many queries like the window's the saving
        is worth (every saving and its upper bounds are priced on this)."""
        return self.expected_queries * self.persistence

    def persisting(self, factor: float, why: str) -> Rate:
        """This rate with the saving kept at ``factor`` (``why``: where it comes from)."""
        return dataclasses.replace(self, persistence=factor, basis=f"{self.basis}; {why}")

    def describe_queries(self) -> str:
        """``400 expected queries``, or ``400 expected queries × 0.25 kept``."""
        return f"{self.expected_queries:,.0f} expected queries{kept_words(self.persistence)}"


def kept_words(persistence: float) -> str:
    """`` × 0.25 kept`` (nothing at 1): the persistence a saving is priced with."""
    return "" if persistence == 1.0 else f" × {persistence:.2g} kept"


def expected_queries(
    timestamps: Sequence[dt.datetime], config: BenefitConfig, now: dt.datetime | None = None
) -> Rate:
    """How many queries the horizon will see, from the window's rate (or as configured).

    The rate is measured from the window's first query to ``now`` (the time of
    the decision; None: its last query) once the last query is at least
    ``min_span_seconds`` old: a burst of queries long ago is not a rate that
    goes on. A burst of 60 queries in a minute, 20 days before the
    advisor ran, was priced as 59 queries an hour for the week ahead (an audit).
    """
    n = len(timestamps)
    span = (max(timestamps) - min(timestamps)).total_seconds() if n >= 2 else 0.0
    idle = 0.0
    if n >= 2 and now is not None:
        # a pause shorter than the shortest span counted is no idleness (and the same
        # window decides the same way moments apart)
        idle = max(0.0, (now - max(timestamps)).total_seconds())
        idle = idle if idle >= config.min_span_seconds else 0.0
        span += idle
    if config.horizon_queries is not None:
        return Rate(n, span, float(config.horizon_queries), "given horizon in queries")
    if n < 2:
        return Rate(n, span, float(n), "too few timestamps for a rate: the window's queries again")
    rate = (n - 1) / max(span, config.min_span_seconds)
    expected = rate * config.horizon_seconds
    hours = config.horizon_seconds / 3600
    basis = f"{rate * 3600:.3g} queries/hour over a {hours:.3g} h horizon"
    if not idle:
        return Rate(n, span, expected, basis)
    basis += f" (measured up to now: the last query was {idle / 3600:,.3g} h ago)"
    return Rate(n, span, expected, basis, idle_seconds=idle)


@dataclass(frozen=True)
class Estimate:
    """Cost and benefit of one candidate layout."""

    family: str
    layout: str
    candidate_bytes: int
    candidate_files: int
    files_after: int
    n_curve: int
    n_sop: int
    n_additional: int
    bytes_now_per_query: float
    bytes_after_per_query: float
    expected_queries: float
    saving_seconds: float
    cost_seconds: float
    margin: float
    #: the share of the per-query saving the expected queries keep (``Rate.persistence``);
    #: ``saving_seconds`` includes it
    persistence: float = 1.0
    #: the same saving with min/max statistics only (what a later measurement compares)
    minmax_saved_bytes_per_query: float | None = None
    #: files the recent queries read now and would read after, on average
    files_now_per_query: float = 0.0
    files_after_per_query: float = 0.0
    #: candidate files the rewrite leaves in place, each already in one block of the
    #: layout (:func:`~lakelayout.layouts.base.placed_blocks`), and their bytes: the
    #: cost is that of rewriting the rest
    kept_files: int = 0
    kept_bytes: int = 0
    #: of ``cost_seconds``, the fixed part (job start-up, commit, and the start-up of the
    #: index job that builds new statistics over files left in place: what does not grow
    #: with the data); a learned correction scales only the rest
    fixed_cost_seconds: float = 0.0
    #: of ``cost_seconds``, collecting the table's declared indexes and the new
    #: statistics over the rows rewritten, timed on the sample (not a calibrated term:
    #: a learned correction leaves it out, as it leaves out the fixed part)
    collect_seconds: float = 0.0
    #: of ``cost_seconds``, routing the rows rewritten to their blocks when the family's
    #: routing is timed on the sample (trees: calibration times curves only); not
    #: corrected either
    route_seconds: float = 0.0

    @property
    def saved_bytes_per_query(self) -> float:
        return self.bytes_now_per_query - self.bytes_after_per_query

    @property
    def net_seconds(self) -> float:
        return self.saving_seconds - self.cost_seconds

    @property
    def pays(self) -> bool:
        return self.saving_seconds > self.cost_seconds * self.margin

    @property
    def payback_queries(self) -> float | None:
        """Queries after which the saving covers the cost (None: never)."""
        if self.expected_queries <= 0 or self.saving_seconds <= 0:
            return None
        return self.cost_seconds / (self.saving_seconds / self.expected_queries)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(
            saved_bytes_per_query=self.saved_bytes_per_query,
            net_seconds=self.net_seconds,
            pays=self.pays,
            payback_queries=self.payback_queries,
        )
        return out


def estimate(
    family: str,
    layout: str,
    *,
    fractions_now: np.ndarray,
    fractions_after: np.ndarray,
    candidate_bytes: int,
    candidate_files: int,
    files_after: int,
    other_bytes: int,
    model: CostModel,
    expected: float,
    margin: float,
    n_curve: int,
    n_sop: int,
    n_additional: int,
    candidate_values: int = 0,
    shuffled: bool = False,
    read_shares: np.ndarray | None = None,
    kept_files: int = 0,
    kept_bytes: int = 0,
    kept_values: int = 0,
    kept_fractions: np.ndarray | None = None,
    kept_share: float | None = None,
    collect_seconds: float | None = None,
    route_seconds: float | None = None,
    persistence: float = 1.0,
    file_fractions_after: np.ndarray | None = None,
) -> Estimate:
    """The :class:`Estimate` of one candidate (see the module docstring).

    ``file_fractions_after``: per query, the share of the ``files_after`` files
    (of the rest laid out, with kept files) it reads (None: its share of the
    bytes stands in, as if every file held as many rows).

    ``persistence``: the share of the window's per-query saving each of the
    ``expected`` queries is expected to keep (:attr:`Rate.persistence`).

    ``read_shares``: per query, the share of a file's bytes it reads (its
    columns, :mod:`.columns`; None: whole files). The bytes reported are the
    files' (what pruning keeps, as the decision log measures them); the
    seconds price only the columns read.

    ``kept_files`` of the candidate files (``kept_bytes``, ``kept_values``)
    stay as they are: ``fractions_after`` is then, per query, the share it
    reads of the rest laid out, and ``kept_fractions`` the share it reads of
    the kept files (each a file of its own), the two weighed by ``kept_share``
    (the kept files' share of the candidate data as ``fractions_now`` weighs
    it, e.g. of the sample's rows; default: of the bytes). The
    rewrite is priced on the rest, into as many of the ``files_after`` blocks
    as its share of the bytes; the kept files' new statistics are built like
    the other files'.

    ``collect_seconds``: what the writing tasks spend collecting the table's
    declared indexes and the ``n_additional`` new statistics over the rows
    rewritten, measured on the sample by the caller; it is added to the cost as
    it is and replaces the calibrated per-feature term over the rewritten bytes
    (which then prices only building the new statistics over the files that are
    not rewritten). None: the calibrated term prices the new statistics
    everywhere and the declared indexes are not priced.

    ``route_seconds``: routing the rows rewritten to their blocks, timed on the
    sample by the caller (the tree families, whose routing the calibration
    does not measure); it then replaces the calibrated curve term's floor of
    one dimension (``n_curve`` counts as given, 0 for a tree). None: at least
    one curve dimension is priced, as calibrated.
    """
    route = _timed_part("route_seconds", route_seconds)
    measured = collect_seconds is not None
    collect = _timed_part("collect_seconds", collect_seconds)
    rewritten = max(0, candidate_bytes - kept_bytes)
    written = files_after
    files_share = fractions_after if file_fractions_after is None else file_fractions_after
    if len(files_share) != len(fractions_after):
        raise InvalidOption("estimate(): file_fractions_after needs one share per query")
    if kept_bytes:
        if kept_fractions is None or len(kept_fractions) != len(fractions_after):
            raise InvalidOption("estimate(): kept files need kept_fractions, one per query")
        if kept_share is None:
            kept_share = kept_bytes / max(1, candidate_bytes)
        if not 0 <= kept_share < 1:
            raise InvalidOption(f"estimate(): kept_share must be in [0, 1), got {kept_share}")
        written = max(1, round(files_after * (1 - kept_bytes / max(1, candidate_bytes))))
        kept_read = kept_fractions
        fractions_after = kept_share * kept_fractions + (1 - kept_share) * fractions_after
    now = float(np.mean(fractions_now)) if len(fractions_now) else 1.0
    after = float(np.mean(fractions_after)) if len(fractions_after) else 1.0
    bytes_now = now * candidate_bytes
    bytes_after = after * candidate_bytes
    files_now = now * candidate_files
    files_after_read = (float(np.mean(files_share)) if len(files_share) else 1.0) * files_after
    if kept_bytes and len(fractions_after):
        files_after_read = (
            float(np.mean(kept_read)) * kept_files + float(np.mean(files_share)) * written
        )
    read_now, read_after = bytes_now, bytes_after
    if read_shares is not None and len(read_shares) == len(fractions_now) and len(read_shares):
        read_now = float(np.mean(fractions_now * read_shares)) * candidate_bytes
        read_after = float(np.mean(fractions_after * read_shares)) * candidate_bytes
    saving = (
        expected
        * persistence
        * (
            model.read_seconds(read_now, files_now)
            - model.read_seconds(read_after, files_after_read)
        )
    )
    cost = model.rewrite_seconds(
        rewritten,
        written,
        n_curve=max(0 if route_seconds is not None else 1, n_curve),
        n_sop=n_sop,
        n_additional=0 if measured else n_additional,
        values=max(0, candidate_values - kept_values),
        shuffled=shuffled,
    )
    statistics = model.statistics_seconds(other_bytes + kept_bytes, n_additional)
    cost += statistics + collect + route
    fixed = model.rewrite_fixed(shuffled=shuffled)
    if statistics:  # the index job's start-up does not grow with the data either
        fixed += model.statistics_fixed_seconds
    return Estimate(
        family=family,
        layout=layout,
        candidate_bytes=int(candidate_bytes),
        candidate_files=int(candidate_files),
        files_after=int(files_after),
        n_curve=n_curve,
        n_sop=n_sop,
        n_additional=n_additional,
        bytes_now_per_query=bytes_now,
        bytes_after_per_query=bytes_after,
        files_now_per_query=files_now,
        files_after_per_query=files_after_read,
        expected_queries=float(expected),
        saving_seconds=float(saving),
        cost_seconds=float(cost),
        margin=margin,
        persistence=float(persistence),
        kept_files=int(kept_files),
        kept_bytes=int(kept_bytes),
        fixed_cost_seconds=float(fixed),
        collect_seconds=collect,
        route_seconds=route,
    )


def decide(
    estimates: Sequence[Estimate], failed: Mapping[str, str] | None = None
) -> tuple[Estimate | None, Estimate | None, str]:
    """(the estimate to apply or None, the best one seen, the reason in words).

    The best candidate is the one with the largest net saving; it is applied
    only when it pays with the margin. ``failed``: the error of each candidate
    family that could not be fitted or priced, named when none could.
    """
    if not estimates:
        why = "; ".join(f"{family}: {error}" for family, error in (failed or {}).items())
        return None, None, "no candidate layout could be fitted" + (f" ({why})" if why else "")
    for e in estimates:
        if not all(map(math.isfinite, (e.cost_seconds, e.saving_seconds, e.net_seconds))):
            # a model of coefficients near the float range (1e308 s per byte) gave NaN,
            # and a raw ValueError from the reason's words (an audit)
            raise InvalidOption(
                f"the cost model and the advisor's benefit settings price {e.layout} at a "
                f"cost of {e.cost_seconds} s and a saving of {e.saving_seconds} s: not "
                "finite numbers; the model's coefficients or the horizon are too large"
            )
    best = max(estimates, key=lambda e: e.net_seconds)
    if best.saved_bytes_per_query <= 0:
        # a layout is chosen for the bytes it saves; a saving from fewer files alone is
        # what compaction gives (the candidates' own lines may show one: say why it is
        # not taken, an audit found the two contradicting)
        files = (
            f"; its estimated saving of {best.saving_seconds:.3g} s comes from reading fewer "
            f"files ({best.files_now_per_query:,.1f} -> {best.files_after_per_query:,.1f} "
            "per query) only, which compaction (OPTIMIZE without a layout) gives too"
            if best.saving_seconds > 0
            else ""
        )
        return (
            None,
            best,
            (
                "no rewrite: the recent workload would not read fewer bytes under any "
                f"candidate layout (best: {best.layout}){files}; nothing to gain from a "
                "layout"
            ),
        )
    kept = kept_words(best.persistence)
    if kept:
        kept += " (what earlier rewrites kept of their saving)"
    words = (
        f"{best.layout} would save {_mib(best.saved_bytes_per_query)} per query "
        f"(of {_mib(best.bytes_now_per_query)} read now; files read "
        f"{best.files_now_per_query:,.1f} -> {best.files_after_per_query:,.1f}) × "
        f"{best.expected_queries:,.0f} expected queries{kept} = {best.saving_seconds:.3g} s, "
        "against a rewrite of "
        f"{_mib(best.candidate_bytes)} costing {best.cost_seconds:.3g} s"
    )
    payback = best.payback_queries
    if best.pays:
        tail = f" (pays back after {math.ceil(payback):,} queries)" if payback is not None else ""
        return best, best, f"rewrite: {words}; saving > cost × {best.margin:g}{tail}"
    if payback is None:
        need = "it would never pay back"
    else:  # the point the margin asks for, and the break-even the candidate lines show
        need = (
            f"it would be chosen after {math.ceil(payback * best.margin):,} expected queries; "
            f"it breaks even after {math.ceil(payback):,}"
        )
    return None, best, f"no rewrite: {words}; saving ≤ cost × {best.margin:g} ({need})"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _timed_part(name: str, seconds: float | None) -> float:
    """A part of an estimate's cost timed by the caller (None: not timed, 0)."""
    value = 0.0 if seconds is None else float(seconds)
    if not math.isfinite(value) or value < 0:
        raise InvalidOption(f"estimate(): {name} must be >= 0, got {seconds}")
    return value
