"""From a window of the query log and a sample to a decision (thesis Fig. 3.1, insert flow).

:func:`recommend` is the pure core of the advisor: the Spark side
(:mod:`lakelayout.advisor.advisor`) gathers :class:`Inputs` — the parsed
predicates of the recent queries and their times, a sample of the files a
rewrite would replace (never-clustered files) with the file each row came
from, those files' statistics, the table's declared indexes — and this
module analyzes the workload (:mod:`.analyzer`), fits every candidate layout
on the sample (:mod:`.estimate`), prices it (:mod:`.costmodel`,
:mod:`.benefit`) and says what to do, with the reasons.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.advisor.analyzer import Analysis, AnalyzerConfig, analyze, unparsed_words
from lakelayout.advisor.benefit import BenefitConfig, Estimate, Rate, decide, estimate
from lakelayout.advisor.benefit import expected_queries as expected_queries_of
from lakelayout.advisor.costmodel import CostModel, QueryObservation
from lakelayout.advisor.decisions import Persistence
from lakelayout.advisor.estimate import (
    FAMILIES,
    Candidate,
    additional_indexes,
    by_files,
    candidates,
    collect_seconds_per_row,
    files_written,
    per_distinct,
    read_plan,
    stacked_fractions,
    virtual_files,
)
from lakelayout.advisor.filters import leaf_filters
from lakelayout.cluster.config import BLOCK_ROLL_FACTOR
from lakelayout.errors import InvalidOption
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout, placed_blocks
from lakelayout.skipping.indexes.base import Index
from lakelayout.stats.model import FileStats


@dataclass
class Inputs:
    """What the advisor knows when it decides."""

    predicates: list[Predicate]
    timestamps: list[dt.datetime]
    #: the files a rewrite would replace (real statistics)
    candidate_files: FileStats
    #: bytes of the live files that are not candidates
    other_bytes: int
    target_file_size: int
    schema: pa.Schema
    #: a sample of the candidate files (None: ask the ``sampler`` given to :func:`recommend`)
    sample: pa.Table | None = None
    #: per sample row, the position in ``candidate_files`` of the file it came from
    sample_files: np.ndarray | None = None
    indexes: list[Index] = field(default_factory=list)
    udfs: Mapping[str, Any] = field(default_factory=dict)
    timezone: str = "UTC"
    #: logged queries that could not be parsed against the current schema
    unparsed: int = 0
    #: whether a rewrite of the candidate files goes through a shuffle (more than
    #: ``lakelayout.smallRewriteSize`` bytes of them, or a partitioned table)
    shuffled: bool = False
    #: earlier automatic rewrites whose files are candidates again (they did not deliver)
    again: list[dict[str, Any]] = field(default_factory=list)
    #: with ``again``: per candidate file, whether it was never clustered (the files a
    #: rewrite of new data alone would replace; see ``Advisor.recommend``)
    fresh: np.ndarray | None = None
    #: what share of their estimated saving the table's last automatic rewrites kept on
    #: the queries after them (:func:`.decisions.persistence`): scales the expected
    #: saving, in the bounds too; None: the window is assumed to repeat
    persistence: Persistence | None = None
    #: what the window's timed queries took (the table's own query cost: ``fit_reads``)
    runs: list[QueryObservation] = field(default_factory=list)
    #: per predicate, the share of a file's bytes the query reads (its columns,
    #: :mod:`.columns`); None: whole files
    read_shares: np.ndarray | None = None
    #: tasks that run at once on this cluster (Spark's default parallelism): the
    #: writing tasks of a rewrite collect the declared indexes side by side
    parallelism: int = 1
    #: the table's partition columns (each file holds one value of them: no feature)
    partition_columns: tuple[str, ...] = ()
    #: when the advisor decides: the query rate is measured up to it (None: up to the
    #: window's last query, as if it had just run)
    now: dt.datetime | None = None


Sampler = Callable[[], tuple[pa.Table, np.ndarray]]


@dataclass
class Recommendation:
    """The decision and everything behind it."""

    reason: str
    analysis: Analysis | None = None
    rate: Rate | None = None
    candidates: list[Candidate] = field(default_factory=list)
    estimates: list[Estimate] = field(default_factory=list)
    chosen: Estimate | None = None
    best: Estimate | None = None
    layout: Layout | None = None
    new_indexes: list[Index] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: of ``seconds``, fitting and pricing the candidate layouts (0 when a bound ended
    #: the decision first): what the next decisions learn their fitting cost from
    fit_seconds: float = 0.0
    #: queries the candidates were fitted to and priced on (a long window thinned; 0 when
    #: a bound ended the decision before any candidate was priced)
    priced_queries: int = 0
    #: the files priced as the rewrite's input (what applying it replaces), when known
    candidate_paths: list[str] | None = None
    #: candidate files the rewrite leaves in place, with the block of :attr:`layout`
    #: each is recorded as (``optimize.apply(keep=...)``); empty: every one is rewritten
    keep: dict[str, int] = field(default_factory=dict)
    #: seconds per row to collect the table's declared indexes and the new statistics,
    #: timed on the sample (0: no sample taken, or no index to collect)
    collect_seconds_per_row: float = 0.0

    @property
    def rewrite(self) -> bool:
        return self.chosen is not None and self.layout is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the decision log stores."""
        return {
            "rewrite": self.rewrite,
            "reason": self.reason,
            "inputs": self.inputs,
            "rate": None if self.rate is None else dataclasses.asdict(self.rate),
            "features": None if self.analysis is None else self.analysis.to_dict()["features"],
            "estimates": [e.to_dict() for e in self.estimates],
            "failed_candidates": {c.family: c.error for c in self.candidates if c.error},
            "chosen": None if self.chosen is None else self.chosen.to_dict(),
            "layout": None if self.layout is None else self.layout.to_dict(),
            "new_indexes": [i.name for i in self.new_indexes],
            "seconds": self.seconds,
            "fit_seconds": self.fit_seconds,
        }

    def lines(self) -> list[str]:
        """The decision for people: the reason, then each candidate's numbers."""
        out = [self.reason]
        unparsed = int(self.inputs.get("unparsed_queries") or 0)
        if unparsed and self.analysis is None:  # else its lines say it
            out.append(f"  {unparsed_words(unparsed)}")
        for e in sorted(self.estimates, key=lambda e: -e.net_seconds):
            payback = e.payback_queries
            out.append(
                f"  {e.layout}: reads {e.bytes_after_per_query / 2**20:,.2f} MiB in "
                f"{e.files_after_per_query:,.1f} files/query (now "
                f"{e.bytes_now_per_query / 2**20:,.2f} in {e.files_now_per_query:,.1f}), "
                f"saving {e.saving_seconds:.3g} s, "
                f"cost {e.cost_seconds:.3g} s"
                + _timed_parts(e)
                + f", net {e.net_seconds:+.3g} s, payback "
                + ("never" if payback is None else f"{math.ceil(payback):,} queries")
            )
        for c in self.candidates:
            if c.error and self.estimates:  # with none, the reason names every error
                out.append(f"  {c.family}: not fitted ({c.error})")
        for a in self.inputs.get("candidates_again", []):
            out.append(
                f"  candidates again: {a['files']} files of the automatic {a['family']} rewrite "
                f"(decision {a['decision_id']}): the {a['queries']} queries since read "
                f"{a['saved_bytes_per_query'] / 2**20:,.2f} MiB less per query from them, "
                f"estimated {a['estimated_saved_bytes_per_query'] / 2**20:,.2f}"
                + _expected_share(a.get("priced_persistence", 1.0))
            )
        if self.rate is not None and (self.rate.persistence != 1.0 or self.rate.idle_seconds):
            out.append(f"  expected queries: {self.rate.basis}")
        return out


def _expected_share(priced: float) -> str:
    """`` × 0.33 expected``: the persistence an earlier rewrite was priced with."""
    return "" if priced == 1.0 else f" × {priced:.2g} expected"


def _timed_parts(e: Estimate) -> str:
    """The parts of an estimate's cost timed on the sample, for :meth:`Recommendation.lines`."""
    parts = []
    if e.collect_seconds:
        parts.append(f"{e.collect_seconds:.3g} s collecting the indexes")
    if e.route_seconds:
        parts.append(f"{e.route_seconds:.3g} s routing rows")
    return f" (of it {', '.join(parts)})" if parts else ""


def recommend(
    inputs: Inputs,
    *,
    model: CostModel,
    analyzer: AnalyzerConfig | None = None,
    benefit: BenefitConfig | None = None,
    families: Sequence[str] = FAMILIES,
    sampler: Sampler | None = None,
    bounds: bool = True,
) -> Recommendation:
    """Analyze, fit candidates, price them, decide (see the module docstring).

    Two upper bounds on the saving end the work early (``bounds=False``
    prices every candidate instead; tests compare the two). Before anything
    is sampled: even a layout that made every recent query read nothing of
    the never-clustered files would save at most ``E × (bytes they read now)
    × cost per byte``; when that does not beat the cheapest rewrite (no
    curve dimension, one file) with the margin, the answer is no and no
    sample is taken (``sampler`` is only called past that point, when
    ``inputs.sample`` is None). After sampling and analysis, before any
    candidate is fitted: the same bound with "read now" measured on the
    sample as the estimate measures it, against the cheapest rewrite with the
    statistics every candidate would add (:func:`_cannot_pay`, exact). At the same
    point a third exit, not exact, weighs the fitting itself: when the most a
    rewrite could net (that ceiling − the cheapest rewrite) is not more than
    the cost model's ``fit_seconds_per_row`` (or ``benefit.fit_seconds_per_row``) ×
    the sample's rows, nothing is fitted.
    """
    started = time.perf_counter()
    cfg = benefit or BenefitConfig()
    files = inputs.candidate_files
    summary = {
        "queries": len(inputs.predicates),
        "unparsed_queries": inputs.unparsed,
        "candidate_files": len(files),
        "candidate_bytes": int(files.total_bytes),
        "other_bytes": int(inputs.other_bytes),
        "target_file_size": inputs.target_file_size,
        "shuffled": inputs.shuffled,
        "cost_model": model.source,
        "candidates_again": inputs.again,
        # the mean share of a file's bytes a query reads (its columns; 1: whole files)
        "read_share": round(float(np.mean(_shares_of(inputs))), 4) if inputs.predicates else 1.0,
    }
    rec = _recommend(
        inputs, model, analyzer or AnalyzerConfig(), cfg, families, sampler, bounds=bounds
    )
    summary["sample_rows"] = 0 if inputs.sample is None else inputs.sample.num_rows
    summary["parallelism"] = inputs.parallelism
    summary["collect_seconds_per_row"] = rec.collect_seconds_per_row
    summary["priced_queries"] = rec.priced_queries
    rec.inputs = summary
    if rec.analysis is not None:
        rec.analysis.unparsed = inputs.unparsed
    rec.seconds = time.perf_counter() - started
    return rec


def _recommend(
    inputs: Inputs,
    model: CostModel,
    analyzer_cfg: AnalyzerConfig,
    cfg: BenefitConfig,
    families: Sequence[str],
    sampler: Sampler | None,
    *,
    bounds: bool = True,
) -> Recommendation:
    n = len(inputs.predicates)
    if n < cfg.min_queries:
        return Recommendation(
            f"no rewrite: only {n} queries logged, the advisor waits for {cfg.min_queries}"
        )
    rate = expected_queries_of(inputs.timestamps, cfg, now=inputs.now)
    if inputs.persistence is not None:
        rate = rate.persisting(inputs.persistence.factor, inputs.persistence.describe())
    rec = Recommendation("", rate=rate)

    def without_sample() -> Recommendation:
        rec.analysis = analyze(
            inputs.predicates, None, config=analyzer_cfg, udfs=inputs.udfs,
            timezone=inputs.timezone, partition_columns=inputs.partition_columns,
        )  # fmt: skip
        return rec

    if not any(leaf_filters(p) for p in inputs.predicates):
        rec.reason = f"no rewrite: none of the {n} recent queries filters; no layout helps them"
        return without_sample()
    files = inputs.candidate_files
    nbytes = int(files.total_bytes)
    # every value of the candidate files is read and written again (rows of files whose
    # count is unknown are left out: a lower bound, used the same way on every candidate)
    values = files.total_rows * len(inputs.schema)
    blocks = max(1, round(nbytes / max(1, inputs.target_file_size)))
    if len(files) == 0:
        rec.reason = (
            "no rewrite: the table has no files"
            if inputs.other_bytes == 0
            else "no rewrite: every live file is already clustered"
        )
        return without_sample()
    if blocks < 2:
        rec.reason = (
            f"no rewrite: the {len(files)} never-clustered file(s) ({nbytes / 2**20:,.2f} MiB) fit "
            "in one file of the target size; there is nothing to cluster yet"
        )
        return without_sample()
    # the cheapest rewrite any candidate can cost: no curve dimension (a tree's routing is
    # timed, see TIMED_ROUTING), no SOP feature, no new statistics, one file written
    # (coefficients are >= 0, so every term only grows)
    cheapest = model.rewrite_seconds(nbytes, 1, n_curve=0, values=values, shuffled=inputs.shuffled)
    shares = _shares_of(inputs)
    read_now, files_now = _read_now_ceiling(inputs.predicates, files, shares)
    ceiling = rate.benefiting_queries * model.read_seconds(read_now, files_now)
    if bounds and ceiling <= cheapest * cfg.margin:
        rec.reason = (
            f"no rewrite: even a layout that made the recent queries read nothing of the "
            f"{nbytes / 2**20:,.2f} MiB of never-clustered data would save at most "
            f"{ceiling:.3g} s ({rate.describe_queries()} × "
            f"{read_now / 2**20:,.2f} MiB of their columns in {files_now:,.1f} files read now "
            f"each), not more "
            f"than the cheapest rewrite ({cheapest:.3g} s) × {cfg.margin:g}"
        )
        return without_sample()
    if inputs.sample is None:
        if sampler is None:
            raise InvalidOption("recommend() needs inputs.sample or a sampler")
        inputs.sample, inputs.sample_files = sampler()
    sample = inputs.sample
    sample_files = np.zeros(0, np.int64) if inputs.sample_files is None else inputs.sample_files
    rec.analysis = analyze(
        inputs.predicates, sample, config=analyzer_cfg, udfs=inputs.udfs,
        timezone=inputs.timezone, partition_columns=inputs.partition_columns,
    )  # fmt: skip
    analysis = rec.analysis
    if sample.num_rows == 0:
        rec.reason = "no rewrite: the sample of the never-clustered files is empty"
        return rec
    # the fits and the pricing below run on an even thinning of a long window
    kept = thinned(n, cfg.max_priced_queries)
    predicates = [inputs.predicates[k] for k in kept]
    shares = shares[kept]
    proposed = additional_indexes(analysis, inputs.indexes, inputs.schema)
    # only statistics that can be computed on the sample are proposed
    rec.new_indexes = list(virtual_files(sample, sample_files, proposed).indexes)
    n_additional = sum(_features_in(i) for i in rec.new_indexes)
    now = virtual_files(sample, sample_files, inputs.indexes).fractions(predicates)
    # every rewrite collects the declared indexes and the new statistics over the rows it
    # writes: their cost on this table's rows, timed on the sample (a Python UDF or a
    # Bloom filter over long strings can cost many times what the calibration's
    # rewrites did per row)
    collect_per_row = cfg.collect_seconds_per_row
    if collect_per_row is None:
        collect_per_row = collect_seconds_per_row(sample, [*inputs.indexes, *rec.new_indexes])
    rec.collect_seconds_per_row = collect_per_row
    parallelism = max(1, int(inputs.parallelism))
    rows_total = max(0, int(files.total_rows))
    if bounds and _cannot_pay(
        rec,
        now,
        shares,
        nbytes,
        len(files),
        values,
        n_additional,
        inputs.other_bytes,
        model,
        cfg,
        inputs.shuffled,
        sample.num_rows,
        collect_per_row * rows_total / parallelism,
    ):
        return rec
    fitting = time.perf_counter()
    rec.priced_queries = len(predicates)
    indexes = [*inputs.indexes, *rec.new_indexes]
    # the advisor's rewrites roll each block's files at twice the target (Advisor.apply):
    # a block the size of many targets is several files, each read by a query on it
    roll = BLOCK_ROLL_FACTOR * inputs.target_file_size
    rows_per_file = roll * sample.num_rows / max(1, nbytes)
    rec.candidates = candidates(
        analysis,
        predicates,
        sample,
        blocks,
        indexes=indexes,
        families=families,
        rows_per_file=rows_per_file,
        partition_columns=inputs.partition_columns,
    )

    def price(
        cand: Candidate,
        fractions_after: np.ndarray,
        kept: np.ndarray | None = None,
        kept_fractions: np.ndarray | None = None,
        kept_share: float | None = None,
        file_fractions_after: np.ndarray | None = None,
    ) -> Estimate:
        assert cand.layout is not None
        rows = np.asarray(files.num_records)
        kept_rows = 0 if kept is None else int(np.maximum(rows[kept], 0).sum())
        written = max(1, cand.layout.n_blocks)
        rewritten = max(0, rows_total - kept_rows)
        collect = spread_over_tasks(collect_per_row, rewritten, written, parallelism)
        route = None
        if cand.family in TIMED_ROUTING:
            per_row = cfg.route_seconds_per_row
            if per_row is None:
                per_row = cand.route_sample_seconds / sample.num_rows
            route = spread_over_tasks(per_row, rewritten, written, parallelism)
        files_after = cand.layout.n_blocks
        if cand.block_rows is not None:
            files_after = files_written(cand.block_rows, rows_per_file)
        return estimate(
            cand.family,
            cand.describe(),
            fractions_now=now,
            fractions_after=fractions_after,
            read_shares=shares,
            candidate_bytes=nbytes,
            candidate_files=len(files),
            candidate_values=values,
            files_after=files_after,
            other_bytes=inputs.other_bytes,
            model=model,
            expected=rate.expected_queries,
            persistence=rate.persistence,
            margin=cfg.margin,
            n_curve=len(cand.columns) + (1 if cand.family == "sop-z" else 0),
            n_sop=len(cand.sop_features),
            n_additional=n_additional,
            shuffled=inputs.shuffled,
            kept_files=0 if kept is None else int(kept.sum()),
            kept_bytes=0 if kept is None else int(np.asarray(files.sizes)[kept].sum()),
            kept_values=kept_rows * len(inputs.schema),
            kept_fractions=kept_fractions,
            kept_share=kept_share,
            collect_seconds=collect,
            route_seconds=route,
            file_fractions_after=file_fractions_after,
        )

    for cand in rec.candidates:
        if cand.fractions is None or cand.layout is None:
            continue
        rec.estimates.append(price(cand, cand.fractions, file_fractions_after=cand.file_fractions))
    chosen, best, reason = decide(
        rec.estimates, {c.family: c.error for c in rec.candidates if c.error}
    )
    rec.chosen, rec.best, rec.reason = chosen, best, reason
    if chosen is not None:
        cand = next(c for c in rec.candidates if c.describe() == chosen.layout)
        layout = cand.layout
        assert layout is not None
        rec.layout = layout
        blocks_after = np.asarray(layout.assign(sample), dtype=np.int64)
        # the decision priced rewriting every candidate file; a rewrite that leaves the
        # files already in one block as they are is taken instead when it nets more
        placed = placed_blocks(layout, files)
        kept = placed >= 0
        moved = ~kept[sample_files] if len(sample_files) == sample.num_rows else None
        if kept.any() and moved is not None and moved.any():
            # the rest of the sample laid out; the kept files read by their own statistics
            rest = virtual_files(sample.filter(pa.array(moved)), blocks_after[moved], indexes)
            kept_read = _file_fractions(predicates, files.take(kept))
            # weighed as the sample weighs them (the virtual files' bytes are its rows)
            share = 1.0 - float(moved.mean())
            rest_read, rest_files = stacked_fractions(
                [rest, by_files(rest, rows_per_file)], predicates
            )
            partial = price(cand, rest_read, kept, kept_read, share, rest_files)
            if partial.pays and partial.net_seconds >= chosen.net_seconds:
                paths = files.paths
                rec.keep = {str(paths[k]): int(placed[k]) for k in np.flatnonzero(kept)}
                rec.reason += (
                    f"; it keeps the {partial.kept_files} file(s) ({partial.kept_bytes / 2**20:,.2f}"
                    " MiB) already in one block each and rewrites the rest, at an estimated "
                    f"{partial.cost_seconds:.3g} s (net {partial.net_seconds:+.3g} s)"
                )
                # sample rows of a kept file stay in a file of their own
                keeping = np.where(moved, blocks_after, layout.n_blocks + sample_files)
                chosen, blocks_after = partial, keeping
        plain_now, plain_after = stacked_fractions(
            [virtual_files(sample, sample_files), virtual_files(sample, blocks_after)],
            predicates,
        )
        saved = float(np.mean(plain_now - plain_after)) * nbytes
        rec.chosen = dataclasses.replace(chosen, minmax_saved_bytes_per_query=saved)
        rec.best = rec.chosen  # a chosen estimate is the best one (decide)
    rec.fit_seconds = time.perf_counter() - fitting
    return rec


#: families whose routing a decision times on the sample
#: (``Candidate.route_sample_seconds``: leaf and in-file sort key, as the writing tasks
#: compute them) instead of pricing it with the calibrated curve term: calibration
#: times curves only, and a tree routes a row by testing its cuts (the logs replay:
#: 4 µs per row for a Qd-tree before cuts shared their terms, several times a curve key)
TIMED_ROUTING = frozenset({"qdtree", "pando"})


def spread_over_tasks(per_row: float, rows: int, files: int, parallelism: int) -> float:
    """Seconds the tasks of a rewrite spend on per-row work (collecting indexes, routing)
    over ``rows`` rows, ``per_row`` as timed on one core: the ``files`` files are
    written by as many tasks, at most ``parallelism`` of them at once."""
    return per_row * rows / max(1, min(parallelism, files))


def thinned(n: int, at_most: int | None) -> np.ndarray:
    """Positions of an even thinning of ``n`` queries to ``at_most`` (every position when
    there are no more, or ``at_most`` is None): the first, the last and every
    ``(n - 1) / (at_most - 1)``-th between, rounded down, so that each stretch of the
    window keeps its share of the queries (a drifting workload keeps its phases)."""
    if at_most is None or n <= at_most:
        return np.arange(n, dtype=np.int64)
    return np.arange(at_most, dtype=np.int64) * (n - 1) // max(1, at_most - 1)


def _shares_of(inputs: Inputs) -> np.ndarray:
    """Per predicate, the share of a file's bytes the query reads (1: whole files)."""
    n = len(inputs.predicates)
    shares = inputs.read_shares
    if shares is None or len(shares) != n:
        return np.ones(n, dtype=np.float64)
    return np.asarray(shares, dtype=np.float64)


def _file_fractions(predicates: Sequence[Predicate], files: FileStats) -> np.ndarray:
    """Per query, the share of the bytes of ``files`` it reads, by their min/max statistics
    (each distinct predicate planned once)."""
    total = float(files.total_bytes)
    if total <= 0:
        return np.zeros(len(predicates), dtype=np.float64)
    shares = per_distinct(predicates, lambda p: float(read_plan(p, files).bytes_kept) / total)
    return np.asarray(shares, dtype=np.float64)


def _read_now_ceiling(
    predicates: Sequence[Predicate], files: FileStats, shares: np.ndarray | None = None
) -> tuple[float, float]:
    """Bytes and files of ``files`` a recent query reads now, on average — the most any
    layout can save it — from the files' statistics alone (no sample). The bytes
    are those of the columns each query reads (``shares``, per predicate; None: whole
    files), as the estimate prices them.

    The estimate weighs a file by its *rows* in the sample (a virtual file's
    size is its rows × the sample's average row size) and a virtual file is
    kept only if its real file is (its bounds lie within the file's), while
    this weighs kept files by their bytes; the larger of the two weightings
    is taken. With the whole table in the sample (small tables, where this
    check matters most) the rows weighting is exactly the estimate's, so the
    ceiling is a true upper bound of every candidate's saving; with a partial
    sample it is one up to the sample's row counts per file. Files are
    counted the same two ways (the estimate counts its share of rows × the
    number of files).
    """
    nbytes = float(files.total_bytes)
    count = float(len(files))
    rows = np.asarray(files.num_records, dtype=np.float64)
    known = bool((rows >= 0).all()) and float(rows.sum()) > 0

    def read_now(pred: Predicate) -> tuple[float, float]:
        kept = read_plan(pred, files)
        if known:
            share = float(rows[kept.keep].sum()) / float(rows.sum())
        else:  # unknown row counts: any kept file may be the whole sample
            share = 1.0 if kept.keep.any() else 0.0
        return (
            max(float(kept.bytes_kept), share * nbytes),
            max(float(kept.keep.sum()), share * count),
        )

    out = per_distinct(predicates, read_now)
    weights = np.ones(len(out)) if shares is None else np.asarray(shares, dtype=np.float64)
    read = [b * w for (b, _), w in zip(out, weights, strict=True)]
    return float(np.mean(read)), float(np.mean([f for _, f in out]))


def _cannot_pay(
    rec: Recommendation,
    now: np.ndarray,
    shares: np.ndarray,
    nbytes: int,
    n_files: int,
    values: int,
    n_additional: int,
    other_bytes: int,
    model: CostModel,
    cfg: BenefitConfig,
    shuffled: bool,
    sample_rows: int,
    collect_floor: float = 0.0,
) -> bool:
    """Whether no candidate can pay, or none can pay for fitting the candidates, from the
    sample's "now" side alone (then ``rec.reason`` says so and nothing is fitted or priced).

    Exact bound, not a heuristic: a candidate saves ``E × ((now − after) ×
    bytes × cost per byte + (now × files − after × files after) × cost per
    file)`` with ``after >= 0``, so at most the same with ``after = 0``; it
    costs at least a rewrite with no curve dimension (a tree's routing is timed
    and added, a curve's is priced per dimension), no SOP feature, into
    one file, with the ``n_additional`` statistics every candidate builds over
    the other files (all coefficients are >= 0), plus ``collect_floor``:
    collecting the declared indexes and the new statistics over every row
    with every task at work, the least any candidate pays for them
    (:func:`spread_over_tasks`). When that saving does not
    beat that cost × margin, full pricing would say no rewrite as well.

    The second exit weighs the decision's own work: fitting every family on the
    sample takes about ``fit_seconds_per_row × sample_rows`` (the cost model's measure
    unless ``cfg`` gives one; seconds of the
    driver, paid whatever the answer). A rewrite that happens nets at most
    ``ceiling − floor``; when that is not more than the fitting, fitting cannot
    pay for itself, and the decision stops (not exact against full pricing: a
    candidate could still have passed the margin, netting less than the fit).
    """
    assert rec.rate is not None
    expected = rec.rate.benefiting_queries
    share_now = float(np.mean(now)) if len(now) else 1.0
    read_now = float(np.mean(now * shares)) * nbytes if len(now) else nbytes
    ceiling = expected * model.read_seconds(read_now, share_now * n_files)
    # the new statistics over the rewritten rows are in ``collect_floor`` (timed)
    floor = model.rewrite_seconds(nbytes, 1, n_curve=0, values=values, shuffled=shuffled)
    floor += model.statistics_seconds(other_bytes, n_additional)
    floor += collect_floor
    per_row = (
        model.fit_seconds_per_row if cfg.fit_seconds_per_row is None else cfg.fit_seconds_per_row
    )
    fitting = per_row * sample_rows
    if ceiling <= floor * cfg.margin:
        rec.reason = (
            f"no rewrite: even a layout that made the recent queries read nothing of the "
            f"{nbytes / 2**20:,.2f} MiB of never-clustered data would save at most "
            f"{ceiling:.3g} s ({rec.rate.describe_queries()} × {read_now / 2**20:,.2f} MiB "
            f"of their columns in {share_now * n_files:,.1f} files read now each, estimated on "
            f"the sample), not more than the cheapest rewrite with "
            f"its statistics ({floor:.3g} s) × {cfg.margin:g}; no candidate layout was fitted"
        )
        return True
    if ceiling - floor <= fitting:
        rec.reason = (
            f"no rewrite: the most a layout could save net of its rewrite is "
            f"{ceiling - floor:.3g} s (at most {ceiling:.3g} s saved over "
            f"{rec.rate.describe_queries()}, at least {floor:.3g} s to rewrite), not more than fitting the "
            f"candidate layouts would take (~{fitting:.3g} s for {sample_rows:,} sample rows); "
            f"no candidate layout was fitted"
        )
        return True
    return False


def _features_in(index: Index) -> int:
    """Features an index keeps statistics on (a Features index: one per predicate)."""
    from lakelayout.skipping.indexes import Features

    return len(index.texts) if isinstance(index, Features) else 1
