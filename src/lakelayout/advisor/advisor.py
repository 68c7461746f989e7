"""``table.advisor`` and ``table.optimize.auto()``: the advisor on a real table.

This is the execution side of the thesis's flow (Fig. 3.1): read a window of
the query log, sample the never-clustered files in Spark (only files not
sampled before: files never change, so their sample rows are cached), hand
everything to :func:`lakelayout.advisor.recommend.recommend`, and when the
rewrite pays, apply the layout to exactly those files
(``optimize.apply``, one file per block), declare the additional statistics
(indexes) and build them. Every decision goes to the decision log
(:mod:`.decisions`), with the measured cost of the rewrite.

After an append commits, :func:`after_append` asks the advisor when the
table has ``lakelayout.autoOptimize=true`` and enough never-clustered bytes
arrived (``lakelayout.autoOptimize.minBytes``, default twice the target file
size). A failing decision or rewrite is logged and recorded; it never fails
or undoes the append.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from lakelayout import arguments as args
from lakelayout.advisor.analyzer import Analysis, AnalyzerConfig, analyze
from lakelayout.advisor.benefit import BenefitConfig
from lakelayout.advisor.columns import column_shares, query_shares
from lakelayout.advisor.costmodel import (
    READ_FIT_TRUST,
    CostModel,
    QueryObservation,
    ReadFit,
    fit_reads,
)
from lakelayout.advisor.decisions import (
    CORRECTION_KEY,
    PERSISTENCE_KEY,
    DecisionLog,
    DecisionRow,
    Persistence,
    RewriteCorrection,
    fitting_per_row,
    persistence,
    rewrite_correction,
)
from lakelayout.advisor.estimate import FAMILIES, bytes_read, per_distinct, read_plan
from lakelayout.advisor.querylog import (
    SESSION_CONF,
    QueryLog,
    bad_limits_because,
    off_because,
    unwritable_because,
)
from lakelayout.advisor.recommend import Inputs, Recommendation, recommend
from lakelayout.cluster.optimize import OptimizeHooks, Optimizer
from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.errors import AfterCommitError, InvalidOption, LakelayoutError, closest
from lakelayout.expr.nodes import Predicate
from lakelayout.skipping.indexes.base import Index
from lakelayout.skipping.stats_rules import FileStack
from lakelayout.stats.model import FileStats
from lakelayout.table import owner
from lakelayout.table.location import is_local, local_path

if TYPE_CHECKING:
    from lakelayout.api import Table
    from lakelayout.cluster.provenance import FileProvenance
    from lakelayout.table.datafile import DataFile
    from lakelayout.table.delta import Snapshot

logger = logging.getLogger(__name__)

#: table property: ask the advisor after every append ("true")
AUTO_OPTIMIZE = "lakelayout.autoOptimize"
#: table property: never-clustered bytes needed before an append asks the advisor
AUTO_MIN_BYTES = "lakelayout.autoOptimize.minBytes"
#: the queries of the log the advisor looks at (the newest ones) ...
DEFAULT_WINDOW = 500
#: ... within this many days
DEFAULT_WINDOW_DAYS = 30.0
#: sample rows of the never-clustered files
DEFAULT_SAMPLE_ROWS = 20_000
#: following queries a measurement of an applied decision looks at
MEASURE_QUERIES = 200
#: queries of the window after an automatic rewrite before its files may be
#: candidates again (:meth:`Advisor.candidate_files`)
RECHECK_QUERIES = 10


@dataclass(frozen=True)
class _Sampled:
    """A file's cached sample rows (:data:`_SAMPLES`)."""

    #: the fraction of the file's live rows drawn
    fraction: float
    #: the rows drawn, in a random order: the columns read so far
    rows: pa.Table
    #: drawn on the driver (:func:`_driver_sample`), whose draws and order depend only on
    #: the file and the fraction, so another column can be read for the same rows; a
    #: Spark job's draws depend on its partitions, so its rows are never extended
    on_driver: bool


#: :func:`_sample_key` -> the file's sample
_SAMPLES: dict[tuple[str, str, str, pa.Schema], _Sampled] = {}
_MAX_CACHED_FILES = 20_000
#: threads that read files' samples on the driver (:func:`_per_file`)
_SAMPLE_THREADS = 8

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class EarlierRewrite:
    """An applied automatic rewrite of this table, measured on the queries after it."""

    #: its decision-log row
    row: dict[str, Any]
    #: queries of the window after it
    queries: int
    #: bytes per query those queries saved on its files (min/max pruning)
    saved: float
    #: bytes per query its decision estimated it would save (min/max pruning)
    estimated: float
    #: positions among the live files of those it wrote or kept
    still: list[int]
    #: the persistence its decision was priced with (1: the window was to repeat)
    priced_persistence: float = 1.0

    def left_behind(self, margin: float) -> bool:
        """Whether the queries after it saved less than its decision expected, with
        the margin: below ``estimated × priced_persistence ÷ margin`` bytes per query.
        A decision that already expected the saving to fade (a persistence below 1)
        is judged on what it expected, not on the window's full saving."""
        return self.saved < self.estimated * self.priced_persistence / margin


@dataclass
class AutoResult:
    """What ``optimize.auto()`` decided and did."""

    recommendation: Recommendation
    applied: bool
    metrics: OptimizeMetrics | None = None
    error: str | None = None
    #: why the rewrite yielded (it lost its commit to a concurrent change and
    #: committed nothing; try later), None when it did not
    yielded: str | None = None
    seconds: float = 0.0
    #: the measured cost of acting: the rewrite and building its statistics
    apply_seconds: float = 0.0
    decision_id: str = ""

    @property
    def reason(self) -> str:
        return self.recommendation.reason if self.error is None else f"failed: {self.error}"

    def lines(self) -> list[str]:
        head = "applied" if self.applied else ("failed" if self.error else "not applied")
        out = [f"{head}: {self.reason}"] if self.error else [*self.recommendation.lines()]
        if self.yielded is not None:
            out.append(f"yielded, nothing committed (try later): {self.yielded}")
        elif self.metrics is not None:
            m = self.metrics
            out.append(
                f"rewrote {m.files_removed} files ({m.bytes_removed / 2**20:,.2f} MiB) into "
                f"{m.files_added} in {self.apply_seconds:.2f} s"
            )
        return out


@dataclass
class Advisor:
    """The advisor of one table: ``features()``, ``recommend()``, ``auto()``, ``decisions()``.

    Options are attributes, so they can be tuned on ``table.advisor`` before
    an append triggers it: ``model`` (the cost model; default: the calibrated
    one, read again when it changes, else the documented defaults), ``analyzer`` and ``benefit``
    (thresholds), ``window`` / ``window_days`` (queries looked at),
    ``sample_rows``, ``families`` (candidate layouts), ``hooks`` (around the
    rewrite's commit, for tests and progress).
    """

    table: Table
    model: CostModel | None = None
    analyzer: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    benefit: BenefitConfig = field(default_factory=BenefitConfig)
    window: int = DEFAULT_WINDOW
    window_days: float = DEFAULT_WINDOW_DAYS
    sample_rows: int = DEFAULT_SAMPLE_ROWS
    families: Sequence[str] = FAMILIES
    hooks: OptimizeHooks | None = None
    #: end early when an upper bound shows no rewrite can pay (False: price every
    #: candidate; slower, the same decision — see :func:`recommend`)
    bounds: bool = True
    #: scale the model's rewrite cost by what this table's last automatic rewrites
    #: took over their estimate (:func:`.decisions.rewrite_correction`; False: the
    #: model as calibrated)
    learn_rewrite_cost: bool = True
    #: replace the model's query terms with a fit on the window's timed queries when
    #: they allow one (:func:`.costmodel.fit_reads`; False: the model as calibrated)
    learn_query_cost: bool = True
    #: files of automatic rewrites that did not deliver are candidates again (see
    #: :meth:`candidate_files`; False: never-clustered files only, the thesis's rule)
    recluster: bool = True
    #: scale the expected saving by the share of their estimate this table's last
    #: automatic rewrites kept on the queries after them (:func:`.decisions.persistence`;
    #: False: the window is assumed to repeat, the thesis's model)
    learn_persistence: bool = True

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an option, checked first (InvalidOption naming it and the bad value)."""
        if name not in self.__dataclass_fields__:  # a misspelt option did nothing
            options = sorted(self.__dataclass_fields__)
            hint = closest(name, options) or f" Its options: {', '.join(options)}"
            raise InvalidOption(f"advisor has no option {name!r}.{hint}")
        check = _OPTION_CHECKS.get(name)
        super().__setattr__(name, value if check is None else check(value))

    @property
    def log(self) -> QueryLog:
        return QueryLog(self.table.uri)

    @property
    def decision_log(self) -> DecisionLog:
        return DecisionLog(self.table.uri)

    def cost_model(self) -> CostModel:
        """The cost model given (``model``), else the calibrated one (read again when
        ``lakelayout calibrate`` saves another), before this table's correction."""
        from lakelayout.advisor.costmodel import calibrated

        return self.model if self.model is not None else calibrated()

    def correction(self, rows: list[dict[str, Any]] | None = None) -> RewriteCorrection | None:
        """What this table's automatic rewrites took over their estimates (None before
        the first one, or with ``learn_rewrite_cost`` off); ``rows``: the decision log
        already read."""
        if not self.learn_rewrite_cost:
            return None
        return rewrite_correction(self.decisions() if rows is None else rows)

    def reads(self, runs: Sequence[QueryObservation]) -> ReadFit | None:
        """The query terms fitted on ``runs`` (the window's timed queries), None when
        they cannot tell or ``learn_query_cost`` is off."""
        return fit_reads(runs) if self.learn_query_cost else None

    def decision_model(
        self,
        runs: Sequence[QueryObservation] = (),
        rows: list[dict[str, Any]] | None = None,
    ) -> tuple[CostModel, RewriteCorrection | None]:
        """The model a decision is priced with: :meth:`cost_model` with the query terms
        the window's timed queries ``runs`` measured (:meth:`reads`) when they price a
        file's read more than ``READ_FIT_TRUST`` times off the model's, the table's
        rewrite correction applied and the fitting cost its last decisions measured
        (:func:`.decisions.fitting_per_row`); and the correction. ``rows``: the
        decision log already read."""
        model = self.cost_model()
        reads = self.reads(runs)
        if reads is not None:
            factor = reads.disagreement(model)
            if factor > READ_FIT_TRUST:
                model = model.with_reads(reads).noted(
                    f"the model priced a {reads.file_bytes / 1e3:,.0f} kB file's read "
                    f"{factor:.2g}x off: replaced"
                )
            else:
                model = model.noted(
                    f"{reads.describe()} agrees within {READ_FIT_TRUST:g}x ({factor:.2g}x) "
                    "on a file's read: kept"
                )
        rows = self.decisions() if rows is None else rows
        fitting = fitting_per_row(rows)
        if fitting is not None:
            model = model.with_fitting(fitting.per_row, fitting.describe())
        correction = self.correction(rows)
        if correction is None:
            return model, None
        return model.scaled_rewrites(correction.factor, correction.describe()), correction

    # ------------------------------------------------------------ the questions

    def features(self) -> Analysis:
        """Clustering features of the recent workload, ranked, with reasons (no rewrite)."""
        snap = self.table.snapshot()
        window = self._window(snap.schema)
        predicates = window.predicates
        files, _ = self.candidate_files(snap, predicates, window.stamps)
        reads = read_columns(predicates, snap.schema)
        sample, _ = self._sample(files, snap, reads) if len(files) else (None, None)
        analysis = analyze(
            predicates,
            sample,
            config=self.analyzer,
            udfs=self.table.indexes.udfs,
            timezone=self._timezone(),
            partition_columns=snap.table_format.partition_columns,
        )
        analysis.unparsed = window.unparsed
        return analysis

    def recommend(self) -> Recommendation:
        """The best layout for the recent workload, its estimated cost, saving and payback.

        The never-clustered files are sampled only when the cost model's upper
        bound leaves a chance that a rewrite pays.
        """
        snap = self.table.snapshot()
        rows = self.decisions()  # read once for the candidates and the model
        inputs = self.inputs(snap, rows)
        model, correction = self.decision_model(inputs.runs, rows)
        rec = self._recommend_for(inputs, snap, model)
        alone = None if rec.rewrite else self._fresh_only(inputs, snap)
        if alone is not None:
            # the files of earlier rewrites made the rewrite too dear: the never-clustered
            # files alone may still pay (the thesis's rule: only new data is clustered)
            fresh = self._recommend_for(alone, snap, model)
            spent = rec.seconds + fresh.seconds  # the decision took both
            if fresh.rewrite:
                held = len(inputs.candidate_files) - len(alone.candidate_files)
                bundled = rec.reason.removeprefix("no rewrite: ")
                fresh.reason += (
                    f"; only the {len(alone.candidate_files)} never-clustered file(s): with the "
                    f"{held} file(s) of earlier rewrites that did not deliver it would not pay "
                    f"({bundled})"
                )
                rec = fresh
            rec.seconds = spent
        rec.inputs[CORRECTION_KEY] = 1.0 if correction is None else correction.factor
        rec.inputs[PERSISTENCE_KEY] = (
            1.0 if inputs.persistence is None else inputs.persistence.factor
        )
        if not rec.rewrite and len(inputs.predicates) < self.benefit.min_queries:
            off = self.logging_off()
            if off:  # it would wait for ever (an audit): say why
                rec.reason += f"; {off}, so no query reaches the advisor"
        return rec

    def logging_off(self) -> str:
        """Why this table's scans are not logged here ('' when they are): the process,
        the Spark session if one runs (none is started to ask), or the table property."""
        from pyspark.sql import SparkSession

        session = self.table._spark or SparkSession.getActiveSession()
        value = None if session is None else session.conf.get(SESSION_CONF, None)
        properties = self.table.properties
        return (
            off_because(properties, value)
            or bad_limits_because(properties)
            or unwritable_because(self.table.uri)
        )

    def _recommend_for(self, inputs: Inputs, snap: Snapshot, model: CostModel) -> Recommendation:
        """:func:`recommend` on ``inputs``, sampling their candidate files when it asks."""
        files = inputs.candidate_files
        rec = recommend(
            inputs,
            model=model,
            analyzer=self.analyzer,
            benefit=self.benefit,
            families=self.families,
            sampler=lambda: self._sample(
                files,
                snap,
                sample_columns(
                    inputs.predicates,
                    inputs.indexes,
                    snap.schema,
                    partition_columns=snap.table_format.partition_columns,
                ),
            ),
            bounds=self.bounds,
        )
        rec.candidate_paths = [str(p) for p in files.paths]
        return rec

    def inputs(
        self, snap: Snapshot | None = None, rows: list[dict[str, Any]] | None = None
    ) -> Inputs:
        """Everything :func:`recommend` needs but the sample, from the log and the table
        (at ``snap``, default: its current version); ``rows``: the decision log
        already read."""
        from lakelayout.cluster import config as cluster_config
        from lakelayout.table.session import default_parallelism

        snap = self.table.snapshot() if snap is None else snap
        window = self._window(snap.schema)
        predicates, stamps = window.predicates, window.stamps
        files, again, earlier, fresh = self._candidates(
            snap, predicates, stamps, rows, measure=self.recluster or self.learn_persistence
        )
        shares = self._column_shares(snap, files)
        indexes, _ = self.table.indexes.usable(snap.schema, snap.table_format)
        return Inputs(
            predicates=predicates,
            timestamps=stamps,
            candidate_files=files,
            other_bytes=int(snap.files.total_bytes) - int(files.total_bytes),
            target_file_size=cluster_config.target_file_size(snap.configuration),
            schema=snap.schema,
            indexes=indexes,
            udfs=self.table.indexes.udfs,
            timezone=self._timezone(),
            unparsed=window.unparsed,
            shuffled=_shuffled(snap, files),
            again=again,
            fresh=fresh if again else None,
            persistence=self.persistence(earlier),
            runs=window.observations(shares),
            read_shares=query_shares(window.columns, shares),
            parallelism=default_parallelism(self.table.spark),
            partition_columns=snap.table_format.partition_columns,
            now=dt.datetime.now(dt.UTC),
        )

    def _column_shares(self, snap: Snapshot, files: FileStats) -> dict[str, float]:
        """Each column's share of the bytes of ``files`` (else of the live files), from
        a few Parquet footers; partition columns cost nothing to read. Empty (whole
        files priced) when no footer can be read."""
        fmt = snap.table_format
        paths = files.paths if len(files) else snap.files.paths
        physical = {fmt.physical_name(name): name for name in fmt.data_schema.names}
        shares = column_shares(self.table.uri, [str(p) for p in paths], physical)
        if shares:
            shares.update({name: 0.0 for name in fmt.partition_columns})
        return shares

    def _earlier_rewrites(
        self,
        snap: Snapshot,
        predicates: Sequence[Predicate],
        stamps: Sequence[dt.datetime],
        rows: Sequence[dict[str, Any]],
        prov: Mapping[str, FileProvenance],
    ) -> list[EarlierRewrite]:
        """This table's applied automatic rewrites with at least :data:`RECHECK_QUERIES`
        queries of the window after them, oldest first, each with the bytes per query
        those queries saved on its files (min/max pruning of the files it replaced
        against those it wrote, as the decision log's measurement) and its live files.
        ``rows``: the decision log; ``prov``: the live files' provenance."""
        from lakelayout.table import delta

        live = {str(p): k for k, p in enumerate(snap.files.paths)}
        out = []
        for row in rows:
            if row["kind"] != "decision" or row["outcome"] != "applied":
                continue
            estimated = (row["detail"] or {}).get("chosen", {}) or {}
            estimated_saving = estimated.get("minmax_saved_bytes_per_query")
            if row["version_after"] is None or not estimated_saving:
                continue
            after = [p for p, ts in zip(predicates, stamps, strict=True) if ts > row["ts"]]
            if len(after) < RECHECK_QUERIES:
                continue
            replaced = _rewrite_files(self.table.uri, int(row["version_after"]))
            if replaced is None:
                continue  # its versions left the log: too old to re-check
            old, new = replaced
            # its files: those it wrote, and those it kept (recorded as blocks of its layout)
            written = {str(p) for p in new.paths}
            layouts = {p.layout_id for path in written if (p := prov.get(path)) and p.layout_id}
            still = [
                k
                for path, k in live.items()
                if path in written or ((p := prov.get(path)) and p.layout_id in layouts)
            ]
            version = int(row["version_after"])
            identity = delta.commit_identity(self.table.uri, version)  # a re-created table's
            memo_key = (self.table.uri, version, identity, snap.schema.to_string())
            saved = float(np.mean(_saved_bytes(after, old, new, memo_key)))
            priced = ((row["detail"] or {}).get("inputs") or {}).get(PERSISTENCE_KEY)
            out.append(
                EarlierRewrite(
                    row, len(after), saved, float(estimated_saving), still, float(priced or 1.0)
                )
            )
        return out

    def persistence(self, earlier: Sequence[EarlierRewrite]) -> Persistence | None:
        """What share of their estimated saving the ``earlier`` rewrites kept on the
        queries after them (:func:`.decisions.persistence`); None with
        ``learn_persistence`` off or before a rewrite was measured."""
        if not self.learn_persistence:
            return None
        return persistence((e.saved, e.estimated) for e in earlier)

    def candidate_files(
        self,
        snap: Snapshot,
        predicates: Sequence[Predicate],
        stamps: Sequence[dt.datetime],
        rows: list[dict[str, Any]] | None = None,
    ) -> tuple[FileStats, list[dict[str, Any]]]:
        """The live files a rewrite may replace: the never-clustered ones and, with
        ``recluster`` on, those written by an automatic rewrite of this table that did
        not deliver; and a description of each such rewrite (``rows``: the decision
        log already read).

        A rewrite's estimate assumes the window it was fitted on repeats. When at
        least :data:`RECHECK_QUERIES` queries of the current window came after it
        and they read less than its estimated saving × the persistence it was
        priced with ÷ ``margin`` fewer bytes from its files than from the files it
        replaced (min/max pruning on both sides, as the decision log's
        measurement; :meth:`EarlierRewrite.left_behind`), the workload has moved on:
        its files are no better placed than fresh data, and the same cost and
        benefit decide whether rewriting them pays. Files of a rewrite that
        delivered stay as they are (the thesis's rule for clustered data).
        """
        files, again, _, _ = self._candidates(
            snap, predicates, stamps, rows, measure=self.recluster
        )
        return files, again

    def _candidates(
        self,
        snap: Snapshot,
        predicates: Sequence[Predicate],
        stamps: Sequence[dt.datetime],
        rows: list[dict[str, Any]] | None,
        *,
        measure: bool,
    ) -> tuple[FileStats, list[dict[str, Any]], list[EarlierRewrite], np.ndarray]:
        """:meth:`candidate_files`, the earlier rewrites measured (:meth:`_earlier_rewrites`)
        when ``measure`` (empty otherwise), and per candidate file whether it was never
        clustered (not one of an earlier rewrite's): the live files' provenance is read
        once."""
        if not len(snap.files):
            return snap.files, [], [], np.ones(0, dtype=bool)
        prov = _provenance(self.table.uri, snap.files)
        unclustered = _unclustered_mask(self.table.uri, snap.files, prov)
        chosen = unclustered.copy()
        if not measure or not predicates:
            return snap.files.take(chosen), [], [], unclustered[chosen]
        rows = self.decisions() if rows is None else rows
        earlier = self._earlier_rewrites(snap, predicates, stamps, rows, prov)
        again = []
        for e in earlier if self.recluster else []:
            if not e.still or not e.left_behind(self.benefit.margin):
                continue
            chosen[e.still] = True
            again.append(
                {
                    "decision_id": e.row["id"],
                    "family": e.row["family"],
                    "files": len(e.still),
                    "queries": e.queries,
                    "saved_bytes_per_query": e.saved,
                    "estimated_saved_bytes_per_query": e.estimated,
                    "priced_persistence": e.priced_persistence,
                }
            )
        return snap.files.take(chosen), again, earlier, unclustered[chosen]

    def _fresh_only(self, inputs: Inputs, snap: Snapshot) -> Inputs | None:
        """``inputs`` with the never-clustered files alone as candidates, when the candidates
        also hold files of earlier rewrites that did not deliver (None otherwise)."""
        fresh = inputs.fresh
        if fresh is None or not fresh.any() or fresh.all():
            return None
        alone = inputs.candidate_files.take(fresh)
        return dataclasses.replace(
            inputs,
            candidate_files=alone,
            other_bytes=int(snap.files.total_bytes) - int(alone.total_bytes),
            shuffled=_shuffled(snap, alone),
            again=[],
            fresh=None,
            sample=None,
            sample_files=None,
        )

    def record_query(self, where: str | None, *, source: str = "plan") -> bool:
        """Log a query that did not go through ``Table.scan`` (planned elsewhere, or
        replayed): it is parsed and pruned like a scan, nothing is read. Whether it was
        logged: the table property and the session's ``spark.lakelayout.queryLog.enabled``
        turn it off as they do a scan's record."""
        from lakelayout.advisor.querylog import log_scan
        from lakelayout.expr.nodes import BoolConst
        from lakelayout.skipping.scan_report import ScanReport

        started = time.perf_counter()
        snap = self.table.snapshot()
        zone = self._timezone()  # one call into the JVM per query
        if where is None:
            pred: Predicate = BoolConst(True)
        else:
            functions = self.table.indexes.functions()
            from lakelayout.expr.parse import parse_predicate

            pred = parse_predicate(where, snap.schema, functions=functions, timezone=zone)
        planned = self.table.plan(pred, snapshot=snap, timezone=zone)
        report = ScanReport(
            predicate=where or "",
            version=snap.version,
            files_total=planned.files_total,
            files_kept=planned.files_kept,
            bytes_total=planned.bytes_total,
            bytes_kept=planned.bytes_kept,
            rows_total=planned.rows_total,
            rows_kept=planned.rows_kept,
            pruning_seconds=time.perf_counter() - started,
            skipped_by=planned.skipped_by,
            bytes_skipped_by=planned.bytes_skipped_by,
        )
        seconds = time.perf_counter() - started
        session = self.table.spark.conf.get(SESSION_CONF, None)
        logged = log_scan(self.table.uri, snap.configuration, report, pred, None, seconds,
                          session_value=session, source=source,
                          table_id=snap.metadata.id if snap.metadata else None)  # fmt: skip
        return logged is not None

    # ------------------------------------------------------------ acting

    def auto(self, *, trigger: str = "manual", apply: bool = True) -> AutoResult:
        """Decide, rewrite when it pays (``apply``), record the decision; never half-done.

        The rewrite is one commit that replaces only the never-clustered files;
        if it fails the table is as it was (and the error is in the result and
        the decision log, not raised).
        """
        args.require_bool(apply, "apply", "advisor.auto")
        started = time.perf_counter()
        snap = self.table.snapshot()
        version = snap.version
        rec = _online_owns(self.table.uri, snap.configuration) or self.recommend()
        result = AutoResult(rec, applied=False)
        if rec.rewrite and apply:
            self.try_apply(result)
        result.seconds = time.perf_counter() - started
        result.decision_id = self.record(result, trigger=trigger, version=version, apply=apply)
        return result

    def try_apply(self, result: AutoResult) -> OptimizeMetrics:
        """Apply ``result.recommendation``; a failure is noted in ``result``, not raised.

        A rewrite that yielded (lost its commit to a concurrent change, so nothing
        was committed) is not applied: ``result.yielded`` says why, to try later.
        Returns the rewrite's metrics (empty ones when it failed).
        """
        # the rewrite's time is its estimate's actual (and teaches the table its rewrite
        # cost): a process whose first Spark job is the rewrite (the CLI's advise --apply)
        # counted the session's start-up, 20 s and more, as rewrite time (an audit)
        started = time.perf_counter()
        try:
            self.table.spark  # noqa: B018 (started here, not timed; a failure is noted)
            started = time.perf_counter()
            result.metrics = self.apply(result.recommendation)
            if result.metrics.yielded:
                result.yielded = result.metrics.yield_reason or "yielded"
                logger.info("advisor on %s: rewrite yielded: %s", self.table.uri, result.yielded)
            else:
                result.applied = True
            return result.metrics
        except AfterCommitError as exc:  # committed, then a hook failed: it was applied
            result.metrics = exc.metrics
            result.applied = True
            logger.warning("advisor on %s: %s", self.table.uri, exc)
            return result.metrics
        except Exception as exc:  # the table stays as it was; say so, do not raise
            result.error = f"{type(exc).__name__}: {exc}"
            logger.warning("advisor on %s: rewrite failed: %s", self.table.uri, exc)
            return OptimizeMetrics("auto (failed)")
        finally:
            result.apply_seconds = time.perf_counter() - started

    def apply(self, rec: Recommendation) -> OptimizeMetrics:
        """Rewrite the files the recommendation priced (never-clustered ones and those
        of automatic rewrites that did not deliver, see :meth:`candidate_files`) with the
        recommended layout, and give the table its additional statistics. Files the
        recommendation keeps (``rec.keep``: already in one block each) stay in place and
        are recorded as their block.

        The statistics are declared before the rewrite, so its tasks collect them
        on the rows they write (no second read of the rewritten files); a refresh
        afterwards builds them only for files the rewrite did not touch. If the
        rewrite fails or yields (``metrics.yielded``: it lost its commit to a
        concurrent change), the new declarations are dropped again: the table is
        as it was.
        """
        from lakelayout.cluster import config as cluster_config

        if rec.layout is None or rec.chosen is None:
            raise InvalidOption(f"nothing to apply: {rec.reason}")
        paths = rec.candidate_paths
        if paths is None:
            snap = self.table.snapshot()
            window = self._window(snap.schema)
            files = self.candidate_files(snap, window.predicates, window.stamps)[0]
            paths = [str(p) for p in files.paths]
        # the files the recommendation keeps (already in one block each) stay in place
        paths = [p for p in paths if p not in rec.keep]
        self.settle_interrupted()
        version = self.table.version
        added = self._declare_statistics(rec)
        marker = self._mark_statistics(added, version)
        try:
            # the layout's blocks were sized for the target the recommendation read: one
            # file each up to twice it (no small remainder files); a larger block — a leaf
            # no query cuts — is cut into several
            target = rec.inputs.get("target_file_size") or cluster_config.target_file_size(
                self.table.properties
            )
            metrics = self.table.optimize.apply(
                rec.layout,
                paths,
                hooks=self.hooks,
                target_file_size=cluster_config.BLOCK_ROLL_FACTOR * int(target),
                keep=rec.keep,
            )
        except AfterCommitError:  # committed: the rewritten files' statistics are wanted
            self._build_statistics(added)
            _unmark(marker)
            raise
        except BaseException:
            self._drop_statistics(added)
            _unmark(marker)
            raise
        if metrics.yielded:  # nothing committed: nothing to build statistics for
            self._drop_statistics(added)
        else:
            self._build_statistics(added)
        _unmark(marker)
        return metrics

    def _mark_statistics(self, added: Sequence[str], version: int) -> Path | None:
        """Note the statistics declared for a rewrite not committed yet (process, host,
        the table's version): a process killed before the rewrite ends leaves them
        declared, and the next rewrite of this table drops them (:meth:`settle_interrupted`)."""
        if not added or not is_local(self.table.uri):
            return None
        # one note per rewrite: two at once (threads, processes) each keep their own
        token = uuid.uuid4().hex
        target = Path(local_path(self.table.uri)) / STATISTICS_MARKERS / f"{token}.json"
        record = {**owner.this_process(), "names": list(added), "version": version}
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = target.with_name(f".{token}.tmp")
            scratch.write_text(json.dumps(record), encoding="utf-8")
            os.replace(scratch, target)
        except OSError as exc:  # statistics only help skipping: never a reason not to rewrite
            logger.warning("advisor on %s: %s not written: %s", self.table.uri, target, exc)
            return None
        return target

    def settle_interrupted(self) -> list[str]:
        """The statistics advisor rewrites killed before their end declared (their process
        is gone): dropped when nothing was committed since (the table is as it was), built
        otherwise (the rewrite may have committed: its files carry them); the names
        dropped. A killed rewrite left them declared for good (an audit). Local tables
        only (the notes live beside the table)."""
        if not is_local(self.table.uri):
            return []
        folder = Path(local_path(self.table.uri)) / STATISTICS_MARKERS
        try:
            notes = sorted(folder.glob("*.json"))
        except OSError:
            return []
        dropped: list[str] = []
        for note in notes:
            try:
                record = json.loads(note.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict) or not owner.gone(record):
                continue  # its rewrite may still run (or another host's: not told)
            dropped += self._settle(record)
            _unmark(note)
        return dropped

    def _settle(self, record: Mapping[str, Any]) -> list[str]:
        """One interrupted rewrite's statistics: dropped or built; the names dropped."""
        names = [n for n in record.get("names") or [] if isinstance(n, str)]
        declared = {d.name for d in self.table.indexes.describe()}
        names = [n for n in names if n in declared]
        if not names:
            return []
        drop = self.table.version == record.get("version")
        if drop:
            self._drop_statistics(names)
        else:
            self._build_statistics(names)
        logger.warning(
            "advisor on %s: statistics %s of a rewrite interrupted in process %s %s",
            self.table.uri, ", ".join(names), record.get("pid"), "dropped" if drop else "built",
        )  # fmt: skip
        return names if drop else []

    def _declare_statistics(self, rec: Recommendation) -> list[str]:
        """Declare the recommendation's statistics the table lacks; their names.

        Statistics only help skipping: a declaration that fails is logged and
        left out, never a reason not to rewrite.
        """
        declared = {d.name for d in self.table.indexes.describe()}
        new = [i for i in rec.new_indexes if i.name not in declared]
        if not new:
            return []
        try:
            return self.table.indexes.add(*new)
        except Exception as exc:
            logger.warning("advisor on %s: statistics not declared: %s", self.table.uri, exc)
            return []

    def _build_statistics(self, added: Sequence[str]) -> None:
        """After the rewrite committed: build the new statistics for the files it did not
        write (the rewritten ones got every declared index from the rewrite itself).

        If that fails, the new declarations are dropped again (a failing index
        would fail every later refresh) and the rewrite stands.
        """
        if not added:
            return
        try:
            self.table.indexes.refresh()
        except Exception as exc:
            logger.warning("advisor on %s: statistics not built: %s", self.table.uri, exc)
            self._drop_statistics(added)

    def _drop_statistics(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.table.indexes.drop(name)
            except LakelayoutError as exc:
                logger.warning("advisor on %s: %s", self.table.uri, exc)

    # ------------------------------------------------------------ the decision log

    def decisions(self) -> list[dict[str, Any]]:
        """Every recorded decision and measurement, oldest first."""
        return self.decision_log.rows()

    def measure(self) -> list[DecisionRow]:
        """Measure applied decisions not measured yet against the queries that followed
        them; the measurement rows written (see :mod:`.decisions`)."""
        rows = self.decisions()
        measured = {r["decision_id"] for r in rows if r["kind"] == "measurement"}
        out = []
        log = self.log.read()
        for row in rows:
            if row["kind"] != "decision" or row["outcome"] != "applied":
                continue
            if row["id"] in measured or row["version_after"] is None:
                continue
            m = self._measure_one(row, log)
            if m is not None:
                out.append(m)
        if out:
            self.decision_log.append(*out)
        return out

    def _measure_one(self, row: dict[str, Any], log: pa.Table) -> DecisionRow | None:
        from lakelayout.table import delta

        after_version = int(row["version_after"])
        replaced = _rewrite_files(self.table.uri, after_version)
        if replaced is None:
            return None  # its versions left the log: it can no longer be measured
        old, new = replaced
        after = delta.snapshot(self.table.uri, after_version)
        times = log.column("ts").to_pylist()
        later = [i for i, ts in enumerate(times) if ts > row["ts"]][:MEASURE_QUERIES]
        if not later:
            return None
        functions = self.table.indexes.functions()
        context = (after.schema, tuple(sorted(functions.items())), self._timezone())
        texts = log.column("predicate").to_pylist()

        def parsed(rows: Sequence[int]) -> list[Predicate]:
            """The predicates of log ``rows`` that bind to the table after the rewrite."""
            bound = (_parse(str(texts[i]), context) for i in rows)
            return [p for p in bound if p is not None]

        saved = _saved_bytes(parsed(later), old, new)
        if not saved:
            return None
        detail = row["detail"] or {}
        chosen = detail.get("chosen") or {}
        estimated = detail.get("minmax_saved_bytes_per_query")
        reason = (
            f"{len(saved)} following queries read {np.mean(saved) / 2**20:,.3f} MiB less "
            "from the rewritten data (min/max pruning on both sides)"
        )
        # the same real files on the queries the decision was priced on: what separates the
        # estimator's own error (virtual files of a sample) from the workload moving on
        n_window = int((detail.get("inputs") or {}).get("queries") or 0)
        earlier = (
            [i for i, ts in enumerate(times) if ts <= row["ts"]][-n_window:] if n_window else []
        )
        seen = parsed(earlier)
        measured: dict[str, Any] = {}
        if seen:
            window = float(np.mean(_saved_bytes(seen, old, new)))
            measured = {"window_queries": len(seen), "window_saved_bytes_per_query": window}
            reason += (
                f"; on the {len(seen)} queries the decision was priced on, they read "
                f"{window / 2**20:,.3f} MiB less"
                + ("" if estimated is None else f" (estimated {estimated / 2**20:,.3f} MiB)")
            )
        return DecisionRow(
            kind="measurement",
            decision_id=row["id"],
            trigger=row["trigger"],
            table_version=after_version,
            family=row["family"],
            measured_queries=len(saved),
            actual_saved_bytes_per_query=float(np.mean(saved)),
            estimated_saved_bytes_per_query=estimated,
            estimated_cost_seconds=chosen.get("cost_seconds"),
            actual_seconds=row["actual_seconds"],
            reason=reason,
            detail=measured,
        )

    def record(self, result: AutoResult, *, trigger: str, version: int, apply: bool = True) -> str:
        """Write the decision of ``result`` to the decision log; its id (never raises)."""
        rec = result.recommendation
        if result.applied:
            outcome = "applied"
        elif result.error is not None:
            outcome = f"failed: {result.error}"
        elif result.yielded is not None:
            outcome = f"yielded: {result.yielded}"
        elif rec.rewrite and not apply:
            outcome = "recommended (not applied)"
        else:
            outcome = "skipped"
        detail = rec.to_dict()
        detail["minmax_saved_bytes_per_query"] = (
            None if rec.chosen is None else rec.chosen.minmax_saved_bytes_per_query
        )
        row = DecisionRow(
            kind="decision",
            trigger=trigger,
            table_version=version,
            rewrite=rec.rewrite,
            family=None if rec.best is None else rec.best.family,
            reason=rec.reason,
            outcome=outcome,
            estimated_cost_seconds=None if rec.best is None else rec.best.cost_seconds,
            estimated_saving_seconds=None if rec.best is None else rec.best.saving_seconds,
            expected_queries=None if rec.rate is None else rec.rate.expected_queries,
            estimated_saved_bytes_per_query=(
                None if rec.best is None else rec.best.saved_bytes_per_query
            ),
            actual_seconds=result.apply_seconds if result.applied else None,
            version_after=(
                max(result.metrics.versions)
                if result.metrics is not None and result.metrics.versions
                else None
            ),
            advisor_seconds=rec.seconds,
            detail=detail,
        )
        try:
            self.decision_log.append(row)
        except Exception as exc:  # recording must not turn a decision into a failure
            logger.warning("advisor on %s: decision not recorded: %s", self.table.uri, exc)
        return row.id

    # ------------------------------------------------------------ gathering

    def _timezone(self) -> str:
        return self.table.spark.conf.get("spark.sql.session.timeZone") or "UTC"

    def _window(self, schema: pa.Schema) -> _Window:
        """The newest logged queries: parsed predicates, their times and the columns each
        read; how many did not parse; what the parsed ones that were timed took."""
        since: dt.datetime | None
        try:
            since = dt.datetime.now(dt.UTC) - dt.timedelta(days=self.window_days)
        except OverflowError:  # a window longer than the calendar (1e6 days; an audit)
            since = None  # every logged query
        data = self.log.read(since=since, last=self.window, flush=False)
        functions = self.table.indexes.functions()
        timezone = self._timezone()
        context = (schema, tuple(sorted(functions.items())), timezone)
        out = _Window()
        versions = data.column("table_version").to_pylist()
        moved = _moved_columns(self.table.uri, versions)
        for text, version, ts, columns, scan, run, nbytes, files in zip(
            data.column("predicate").to_pylist(),
            versions,
            data.column("ts").to_pylist(),
            data.column("columns").to_pylist(),
            data.column("scan_seconds").to_pylist(),
            data.column("run_seconds").to_pylist(),
            data.column("bytes_kept").to_pylist(),
            data.column("files_kept").to_pylist(),
            strict=True,
        ):
            pred = _parse(text, context)
            if pred is None or pred.columns() & moved(version):
                out.unparsed += 1  # (or it names a column that is another one now)
                continue
            # what the query read: its projection (None: every column) and its filter's
            read = None if columns is None else sorted(set(columns) | pred.columns())
            out.predicates.append(pred)
            out.stamps.append(ts)
            out.columns.append(read)
            if run is not None:
                out.runs.append(
                    (float(scan or 0.0) + float(run), int(nbytes or 0), int(files or 0), read)
                )
        return out

    def _sample(
        self, files: FileStats, snap: Snapshot, columns: Sequence[str] | None = None
    ) -> tuple[pa.Table, np.ndarray]:
        """About ``sample_rows`` rows of ``files`` (live files of ``snap``) and, per row,
        the file it came from.

        Only ``columns`` (default: all; :func:`read_columns` of the window's
        predicates) are read; the sample has the table's schema, the other
        columns all NULL. Everything the advisor computes on a sample is about
        the window's predicates (features, correlations, fitted layouts, virtual
        files, whose sizes are rows × the average row size) or the declared
        indexes (what collecting them costs per row, :func:`sample_columns`): a
        column neither reads changes no number. Files sampled before at a higher
        fraction are subsampled from the cache (see :func:`_sample_key`); a cached
        sample that lacks some of ``columns`` gains them (:meth:`_extend_samples`:
        only those columns are read, for the same rows); the others are read again,
        with the columns the cache held too, so a cached sample never loses a column.
        """
        schema = snap.schema
        wanted = list(schema.names) if columns is None else list(columns)
        rows = max(1, int(files.total_rows))
        fraction = min(1.0, self.sample_rows / rows)
        paths = [str(p) for p in files.paths]
        keys = {p: _sample_key(self.table.uri, p, snap) for p in paths}
        want = set(wanted)
        got: dict[str, _Sampled] = {}
        todo, held, extend = [], set(wanted), {}
        for p in paths:
            cached = _SAMPLES.get(keys[p])
            if cached is None:
                todo.append(p)
            elif cached.fraction < fraction * 0.999 or (
                not cached.on_driver and not want.issubset(cached.rows.column_names)
            ):
                todo.append(p)
                held.update(cached.rows.column_names)
            elif not want.issubset(cached.rows.column_names):
                extend[p] = cached
            else:
                got[p] = cached
        if extend and not self._small(snap, list(extend)):  # one Spark job reads them all
            todo.extend(extend)
            held.update(*(c.rows.column_names for c in extend.values()))
            extend = {}
        if todo:
            read = [n for n in schema.names if n in held]
            got.update(self._sample_files(todo, snap, fraction, read))
        if extend:
            got.update(self._extend_samples(extend, snap, wanted))
        if len(_SAMPLES) + len(todo) > _MAX_CACHED_FILES:
            _SAMPLES.clear()
        for p in [*todo, *extend]:
            _SAMPLES[keys[p]] = got[p]
        parts, ids = [], []
        for position, p in enumerate(paths):
            have, data = got[p].fraction, got[p].rows
            keep = data.num_rows if have <= fraction else round(data.num_rows * fraction / have)
            parts.append(data.slice(0, keep).select(wanted))  # a cache may hold more columns
            ids.append(np.full(keep, position, dtype=np.int64))
        if not parts:
            return schema.empty_table(), np.zeros(0, np.int64)
        # the unread columns, all NULL, once for the whole sample (not per file)
        return _with_schema(pa.concat_tables(parts), schema, wanted), np.concatenate(ids)

    def _sample_files(
        self,
        paths: Sequence[str],
        snap: Snapshot,
        fraction: float,
        columns: Sequence[str],
    ) -> dict[str, _Sampled]:
        """Sample ``columns`` of ``paths`` at ``fraction``, each file's rows
        in a random order (so a prefix is a smaller random sample of the file); which
        rows are drawn does not depend on the columns.

        Files of at most ``lakelayout.smallRewriteSize`` bytes in all are read
        on the driver with pyarrow (:func:`_driver_sample`: no Spark job, whose
        start-up was most of a decision's time); larger inputs by one Spark job,
        whose tasks spread the decoding over the cluster. Both read rows as every
        reader does (partition values, deletion vectors, column mapping) and keep
        each row with probability ``fraction``.
        """
        on_driver = self._small(snap, paths)
        if on_driver:
            drawn = _per_file(
                lambda f: _driver_sample(self.table.uri, snap, f, fraction, columns),
                snap.data_files_for(paths),
            )
            sampled = dict(zip(paths, drawn, strict=True))
        else:
            sampled = self._spark_sample(paths, snap, fraction, columns)
        return {p: _Sampled(fraction, sampled[p], on_driver) for p in paths}

    @staticmethod
    def _small(snap: Snapshot, paths: Sequence[str]) -> bool:
        """Whether ``paths`` are read on the driver: at most ``lakelayout.smallRewriteSize``
        bytes of files in all (the rewriter's rule for a shuffle-free rewrite)."""
        from lakelayout.cluster.config import small_rewrite_size

        size = sum(f.size for f in snap.data_files_for(paths))
        return size <= small_rewrite_size(snap.configuration)

    def _extend_samples(
        self, cached: Mapping[str, _Sampled], snap: Snapshot, columns: Sequence[str]
    ) -> dict[str, _Sampled]:
        """The ``cached`` samples (all drawn on the driver) with the ``columns`` they lack:
        only those are read, at each file's cached fraction, so the draws and their
        order are those of the cached rows (:func:`_driver_sample`).

        A window that filters on a new column (a workload that drifts) used to
        read every file again with every column; decoding the new columns alone
        costs a fraction of that.
        """
        paths = list(cached)

        def extend(p: str, f: DataFile) -> _Sampled:
            before = cached[p]
            rows, have = before.rows, set(before.rows.column_names)
            missing = [c for c in columns if c not in have]
            more = _driver_sample(self.table.uri, snap, f, before.fraction, missing)
            if more.num_rows != rows.num_rows:  # not expected: read the file anew
                read = [n for n in snap.schema.names if n in have or n in missing]
                rows = _driver_sample(self.table.uri, snap, f, before.fraction, read)
            else:
                for name in missing:
                    rows = rows.append_column(more.schema.field(name), more.column(name))
            return _Sampled(before.fraction, rows, on_driver=True)

        pairs = list(zip(paths, snap.data_files_for(paths), strict=True))
        return dict(zip(paths, _per_file(lambda pf: extend(*pf), pairs), strict=True))

    def _spark_sample(
        self, paths: Sequence[str], snap: Snapshot, fraction: float, columns: Sequence[str]
    ) -> dict[str, pa.Table]:
        """Each file's sample rows, drawn by one Spark job, in a random order."""
        from lakelayout.cluster.rewrite import FILE_COLUMN, read_files
        from lakelayout.table.writer import spark_column, task_errors

        df = read_files(self.table.spark, snap, list(paths), with_file=True)
        df = df.select(*[spark_column(c) for c in columns], FILE_COLUMN)
        if fraction < 1.0:
            df = df.sample(withReplacement=False, fraction=fraction, seed=17)
        with task_errors():  # a file the read tasks refuse (legacy calendar): named
            data = df.toArrow()
        files = [str(f) for f in data.column(FILE_COLUMN).to_pylist()]  # log paths
        read = pa.schema([snap.schema.field(c) for c in columns])
        data = _to_schema(data.drop_columns([FILE_COLUMN]), read)
        shuffle = np.random.default_rng(17).permutation(data.num_rows)
        data = data.take(pa.array(shuffle))
        files_arr = np.asarray(files, dtype=object)[shuffle]
        return {p: data.take(pa.array(np.flatnonzero(files_arr == p), pa.int64())) for p in paths}


def _whole(name: str, unit: str) -> Callable[[Any], int]:
    """The check of an option that is a whole number of ``unit`` >= 1."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InvalidOption(
                f"advisor.{name} must be a whole number of {unit} >= 1, got {value!r}"
            )
        return int(value)

    return check


def _check_window_days(value: Any) -> float:
    ok = isinstance(value, int | float | np.number) and not isinstance(value, bool)
    if not (ok and np.isfinite(value) and value > 0):
        raise InvalidOption(f"advisor.window_days must be a finite number > 0, got {value!r}")
    return float(value)


def _check_families(value: Any) -> tuple[str, ...]:
    known = ", ".join(FAMILIES)
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset) or not value:
        raise InvalidOption(
            f"advisor.families must be a non-empty list of layout families ({known}), got {value!r}"
        )
    for family in value:
        if family not in FAMILIES:
            hint = closest(family, FAMILIES) if isinstance(family, str) else ""
            raise InvalidOption(
                f"advisor.families: unknown layout family {family!r}.{hint} Known: {known}"
            )
    return tuple(value)


def _check_type(name: str, kind: type, optional: bool = False) -> Callable[[Any], Any]:
    """The check of an option that must be a ``kind`` (or None when ``optional``)."""

    def check(value: Any) -> Any:
        if not (isinstance(value, kind) or (optional and value is None)):
            article = "an" if kind.__name__[0] in "AEIOU" else "a"
            wanted = f"{article} {kind.__name__}" + (" or None" if optional else "")
            raise InvalidOption(f"advisor.{name} must be {wanted}, got {type(value).__name__}")
        return value

    return check


#: the Advisor options checked when set (``__setattr__``)
_OPTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "window": _whole("window", "queries"),
    "window_days": _check_window_days,
    "sample_rows": _whole("sample_rows", "rows"),
    "families": _check_families,
    "model": _check_type("model", CostModel, optional=True),
    "analyzer": _check_type("analyzer", AnalyzerConfig),
    "benefit": _check_type("benefit", BenefitConfig),
    "hooks": _check_type("hooks", OptimizeHooks, optional=True),
    **{
        name: _check_type(name, bool)
        for name in (
            "bounds",
            "learn_rewrite_cost",
            "learn_query_cost",
            "recluster",
            "learn_persistence",
        )
    },
}


#: under a table: a note per advisor rewrite running, of the statistics it declared
STATISTICS_MARKERS = os.path.join("_lakelayout", "advisor-statistics")


def _unmark(marker: Path | None) -> None:
    if marker is not None:
        with contextlib.suppress(OSError):
            marker.unlink()


def _per_file(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` of every item, in order, by up to one thread per core (at most
    :data:`_SAMPLE_THREADS`): decoding Parquet and drawing rows (pyarrow, numpy)
    release the GIL, and the driver's cores are idle while the advisor decides. A
    file's draws depend only on the file (:func:`_sample_seed`), so the threads do
    not change a sample."""
    threads = min(len(items), os.cpu_count() or 1, _SAMPLE_THREADS)
    if threads <= 1:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


def _driver_sample(
    table_uri: str, snap: Snapshot, file: DataFile, fraction: float, columns: Sequence[str]
) -> pa.Table:
    """``columns`` of the live rows of ``file``, each row kept with probability
    ``fraction``, in a random order; read with pyarrow on the driver, one batch at a time.

    The random draws depend only on the file (:func:`_sample_seed`), so a
    file's sample is the same whichever files and columns are sampled with it.
    """
    from lakelayout.cluster.rewrite import sample_files

    fmt = snap.table_format
    seed = _sample_seed(file)
    rows = sample_files(
        table_uri, [file], fmt, list(columns), file.num_records, seed=seed, fraction=fraction
    )
    data = _to_schema(rows, pa.schema([snap.schema.field(c) for c in columns]))
    rng = np.random.default_rng(seed + 1)  # the order: draws apart from the filter's
    return data.take(pa.array(rng.permutation(data.num_rows)))


def _sample_seed(file: DataFile) -> int:
    """The seed of a file's sample draws: from what the log says the file holds (size,
    row count, partition values, deleted rows), not from its name.

    Writers name files with random ids; seeding by name made two runs of the
    same replay on the same data sample different rows and, near a margin,
    decide differently. Files with the same record draw the same row
    positions, each still a uniform sample of its own rows.
    """
    digest = hashlib.blake2b(digest_size=8)
    parts = sorted((str(k), str(v)) for k, v in file.partition_values.items())
    digest.update(repr((file.size, file.num_records, parts)).encode())
    digest.update(np.asarray(file.deleted_rows, dtype=np.int64).tobytes())
    return int.from_bytes(digest.digest(), "little")


def _sample_key(table_uri: str, path: str, snap: Snapshot) -> tuple[str, str, str, pa.Schema]:
    """The key of a file's cached sample rows: (table root, file path, its deletion
    vector, the table schema).

    Delta never rewrites a data file in place: a path names the same rows until
    a deletion vector hides some (a new vector, so a new digest here) or the
    schema the rows are read under changes (columns added, renamed with column
    mapping, types widened: a new schema). A file that a later version adds is
    a new path. So a cached sample is only ever reused for the same rows.
    """
    deleted = snap.data_file(path).deleted_rows
    digest = (
        "" if len(deleted) == 0 else hashlib.blake2b(deleted.tobytes(), digest_size=16).hexdigest()
    )
    return (table_uri, path, digest, snap.schema)


@dataclass
class _Window:
    """The logged queries a decision looks at (:meth:`Advisor._window`)."""

    predicates: list[Predicate] = field(default_factory=list)
    stamps: list[dt.datetime] = field(default_factory=list)
    #: per predicate, the columns the query read (None: every column)
    columns: list[list[str] | None] = field(default_factory=list)
    unparsed: int = 0
    #: the timed ones: seconds (scan call + Spark's run), bytes and files kept, columns read
    runs: list[tuple[float, int, int, list[str] | None]] = field(default_factory=list)

    def observations(self, shares: Mapping[str, float]) -> list[QueryObservation]:
        """The timed queries as measurements of the query model, their bytes those of
        the columns each read (``shares``: each column's share of a file's bytes)."""
        weights = query_shares([r[3] for r in self.runs], shares)
        return [
            QueryObservation(seconds, round(nbytes * w), files)
            for (seconds, nbytes, files, _), w in zip(self.runs, weights, strict=True)
        ]


def read_columns(predicates: Sequence[Predicate], schema: pa.Schema) -> list[str] | None:
    """The columns of ``schema`` the predicates read, in table order; ``None`` (every
    column) when one reads a name the schema lacks or none reads a column."""
    names = set().union(*(p.columns() for p in predicates)) if predicates else set()
    if not names or not names.issubset(schema.names):
        return None
    return [n for n in schema.names if n in names]


def sample_columns(
    predicates: Sequence[Predicate],
    indexes: Sequence[Index],
    schema: pa.Schema,
    *,
    partition_columns: Sequence[str] = (),
) -> list[str] | None:
    """The columns a decision samples: those the predicates read (:func:`read_columns`),
    those the declared ``indexes`` read, whose collection a rewrite pays and the
    decision times on the sample, and the partition columns (they cost no read, and a
    rewrite splits every block by them); ``None`` (every column) when the first two
    are not known."""
    names = read_columns(predicates, schema)
    if names is None:
        return None
    wanted = set(names) | set(partition_columns)
    for index in indexes:
        reads = index.columns()
        if reads is None or not reads.issubset(schema.names):
            return None
        wanted |= reads
    return [n for n in schema.names if n in wanted]


def _with_schema(data: pa.Table, schema: pa.Schema, columns: Sequence[str]) -> pa.Table:
    """``columns`` of ``data`` under ``schema``, every other column of it all NULL."""
    keep = set(columns)
    return pa.table(
        [
            data.column(f.name) if f.name in keep else pa.nulls(data.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )


def _to_schema(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Spark's Arrow output in the table's own types (string views, time zones...)."""
    return pa.table([data.column(name).cast(schema.field(name).type) for name in schema.names],
                    schema=schema)  # fmt: skip


#: (schema, functions, time zone) a logged predicate is parsed against
_ParseContext = tuple[pa.Schema, tuple[tuple[str, pa.DataType], ...], str]


#: (table root, version) -> top-level column name -> physical name at that version
#: (a committed version never changes)
_PHYSICAL: dict[tuple[str, int], dict[str, str] | None] = {}


def _physical_names(table_uri: str, version: int | None) -> dict[str, str] | None:
    """Each top-level column's physical name at ``version`` (latest: None); None when
    that version cannot be read (it then counts as unchanged)."""
    from lakelayout.table import delta

    key = (table_uri, -1 if version is None else int(version))
    if version is None or key not in _PHYSICAL:
        try:
            fmt = delta.snapshot(table_uri, version).table_format
        except LakelayoutError:
            return None
        names = {name: fmt.physical_name(name) for name in fmt.schema.names}
        if version is None:
            return names
        if len(_PHYSICAL) > 4096:
            _PHYSICAL.clear()
        _PHYSICAL[key] = names
    return _PHYSICAL[key]


def _moved_columns(
    table_uri: str, versions: Sequence[int | None]
) -> Callable[[int | None], frozenset[str]]:
    """For a query logged at a version, the columns whose names meant another column
    then (column mapping: a column renamed, or dropped, and a new one given its name).

    Without column mapping nothing moves. The versions between two that agree are
    taken to agree too (a column renamed and renamed back in between is missed);
    only where two differ is the range split, so a window without renames reads two
    snapshots at most.
    """
    now = _physical_names(table_uri, None)
    if now is None or all(name == physical for name, physical in now.items()):
        return lambda version: frozenset()
    current: dict[str, str] = now
    known = sorted({int(v) for v in versions if v is not None})
    by_version: dict[int, frozenset[str]] = {}

    def moved(names: dict[str, str] | None) -> frozenset[str]:
        if names is None:
            return frozenset()
        return frozenset(c for c, p in current.items() if names.get(c) != p)

    def fill(lo: int, hi: int) -> None:
        first = moved(_physical_names(table_uri, known[lo]))
        last = moved(_physical_names(table_uri, known[hi]))
        if first == last or hi - lo <= 1:
            for k in range(lo, hi + 1):
                by_version[known[k]] = first if (first == last or k == lo) else last
            return
        mid = (lo + hi) // 2
        fill(lo, mid)
        fill(mid, hi)

    if known:
        fill(0, len(known) - 1)

    def of(version: int | None) -> frozenset[str]:
        return frozenset() if version is None else by_version.get(int(version), frozenset())

    return of


def _parse(text: str, context: _ParseContext) -> Predicate | None:
    """A logged predicate bound in ``context``; None when it does not bind.

    Every decision re-reads its window: the texts are bound once
    (:func:`~lakelayout.expr.parse.parse_predicate` remembers a text bound to a
    schema, functions and time zone, and a scan has bound most of them already);
    a changed schema, a new UDF or another time zone binds again.
    """
    from lakelayout.expr.parse import parse_predicate

    schema, functions, timezone = context
    try:
        return parse_predicate(text, schema, functions=dict(functions), timezone=timezone)
    except LakelayoutError:
        return None


#: (table root, version, its commit file's identity) -> the files a rewrite committed at
#: that version replaced and wrote. A committed version never changes, but a table
#: deleted and created again at the same path has other commits under the same numbers
#: (the identity tells them apart on local tables; an audit found the old table's files
#: answered for the new one's), and a long-lived process decides for many tables: at
#: most _MAX_REWRITES, of at most _MAX_REWRITE_FILES files in all, are kept (the cache
#: starts over when full, as _SAVED does; a 100-file rewrite holds about 0.5 MB)
_REWRITES: dict[tuple[str, int, Any], tuple[FileStats, FileStats]] = {}
_MAX_REWRITES = 64
_MAX_REWRITE_FILES = 200_000


def _rewrite_files(table_uri: str, version: int) -> tuple[FileStats, FileStats] | None:
    """(files replaced, files written) by the commit that made ``version``; None when
    the log no longer holds that version or the one before (Delta's log clean-up
    removes commits older than ``delta.logRetentionDuration``, 30 days by default, once
    a checkpoint follows them: every decision, the append trigger's and
    ``lakelayout decisions`` failed on a table rewritten that long ago; an audit)."""
    from lakelayout.table import delta

    key = (table_uri, version, delta.commit_identity(table_uri, version))
    if key not in _REWRITES:
        try:
            before = delta.snapshot(table_uri, version - 1).files
            after = delta.snapshot(table_uri, version).files
        except InvalidOption:  # not kept: a version that left the log does not come back
            return None
        old_paths = {str(p) for p in before.paths}
        new_paths = {str(p) for p in after.paths}
        found = (
            before.take(np.array([str(p) not in new_paths for p in before.paths], dtype=bool)),
            after.take(np.array([str(p) not in old_paths for p in after.paths], dtype=bool)),
        )
        held = sum(len(a) + len(b) for a, b in _REWRITES.values())
        if len(_REWRITES) >= _MAX_REWRITES or held + len(found[0]) + len(found[1]) > (
            _MAX_REWRITE_FILES
        ):
            _REWRITES.clear()
        _REWRITES[key] = found
        return found
    return _REWRITES[key]


#: (table root, version of a rewrite, its commit identity, schema) -> predicate text ->
#: bytes it read less from the files that rewrite wrote than from those it replaced: each
#: decision re-checks the rewrites of the table over its window, and consecutive windows
#: share most queries
_SAVED: dict[tuple[str, int, Any, str], dict[str, float]] = {}
#: rewrites whose answers are kept at once (a process that decides for many tables)
_MAX_SAVED = 256


def _saved_bytes(
    predicates: Sequence[Predicate],
    old: FileStats,
    new: FileStats,
    key: tuple[str, int, Any, str] | None = None,
) -> list[float]:
    """Per predicate: bytes it reads from ``old`` minus from ``new`` (min/max pruning on
    both sides). Each distinct predicate text is planned once, over both sets stacked
    (:class:`~lakelayout.skipping.stats_rules.FileStack`; each set alone where a rule
    gives up on the stack, or where the two versions' files cannot be stacked); with
    ``key`` (the rewrite ``old`` -> ``new`` is) once only across the calls for that
    rewrite (the answers kept are those of the latest call's predicates: a window's
    worth)."""
    stack = FileStack.of_any([old, new])
    sizes = [np.asarray(files.sizes, dtype=np.int64) for files in (old, new)]

    def saved(pred: Predicate) -> float:
        parts = None if stack is None else stack.keep_each(lambda f: read_plan(pred, f).keep)
        if parts is None:
            return float(bytes_read(pred, old) - bytes_read(pred, new))
        return float(int(sizes[0][parts[0]].sum()) - int(sizes[1][parts[1]].sum()))

    kept: dict[str, float] = {}
    out = per_distinct(predicates, saved, known=None if key is None else _SAVED.get(key), seen=kept)
    if key is not None:
        if key not in _SAVED and len(_SAVED) >= _MAX_SAVED:
            _SAVED.clear()
        _SAVED[key] = kept
    return out


def _unclustered(table_uri: str, files: FileStats) -> FileStats:
    """The live files no clustering operation wrote (no layout, no cube)."""
    return files.take(_unclustered_mask(table_uri, files)) if len(files) else files


def _provenance(table_uri: str, files: FileStats) -> dict[str, FileProvenance]:
    """What the clustering sidecar records of ``files`` (path -> provenance)."""
    from lakelayout.cluster.provenance import ProvenanceStore

    return ProvenanceStore(table_uri).read([str(p) for p in files.paths])


def _shuffled(snap: Snapshot, files: FileStats) -> bool:
    """Whether a rewrite of ``files`` goes through a shuffle (the rewriter's rule:
    :func:`~lakelayout.cluster.config.rewrite_shuffles`)."""
    from lakelayout.cluster import config as cluster_config

    return cluster_config.rewrite_shuffles(
        int(files.total_bytes),
        cluster_config.small_rewrite_size(snap.configuration),
        partitioned=snap.table_format.partitioned,
    )


def _unclustered_mask(
    table_uri: str, files: FileStats, prov: Mapping[str, FileProvenance] | None = None
) -> np.ndarray:
    """Per file of ``files``: whether no clustering operation wrote (or placed) it."""
    if prov is None:
        prov = _provenance(table_uri, files)
    return np.array(
        [
            (p := prov.get(str(path))) is None or (p.cube_id is None and p.layout_id is None)
            for path in files.paths
        ],
        dtype=bool,
    )


# --------------------------------------------------------------------------- wiring


class AutoOptimizer(Optimizer):
    """``table.optimize`` with ``auto()``: OPTIMIZE only when the advisor says it pays."""

    def __init__(self, table: Table) -> None:
        super().__init__(table.uri, lambda: table.spark, lambda: table.indexes)
        self._table = table

    def auto(self, *, apply: bool = True) -> AutoResult:
        """Optimize now if the benefit exceeds the cost (with margin); else say why not."""
        args.require_bool(apply, "apply", "optimize.auto")
        return self._table.advisor.auto(trigger="manual", apply=apply)


def _online_owns(uri: str, config: Mapping[str, str]) -> Recommendation | None:
    """The answer while online reorganization is enabled on the table: it decides the
    layout (switches, and catch-ups for appended files), and a rewrite by the advisor
    would be undone by its next catch-up — two reorganizers rewriting each other's files."""
    from lakelayout.online_table import ENABLED_PROPERTY

    if not _online_enabled(config):
        return None
    return Recommendation(
        f"no rewrite: online reorganization manages the layout of '{uri}' "
        f"({ENABLED_PROPERTY}=true; its catch-ups lay appended files out); "
        "t.online.disable() to let the advisor decide"
    )


def _online_enabled(config: Mapping[str, str]) -> bool:
    from lakelayout.online_table import ENABLED_PROPERTY
    from lakelayout.table.features import is_true

    return is_true(config.get(ENABLED_PROPERTY))


def check_properties(config: Mapping[str, str]) -> None:
    """Refuse a bad :data:`AUTO_OPTIMIZE` (not 'true' or 'false'), :data:`AUTO_MIN_BYTES`
    (not a whole number >= 0) or query-log property
    (:func:`.querylog.check_properties`) with InvalidOption naming it and the value:
    ``Table.create`` checks them before anything is written."""
    from lakelayout.advisor import querylog
    from lakelayout.table.features import check_flag

    check_flag(config, AUTO_OPTIMIZE)
    if config.get(AUTO_MIN_BYTES) is not None:
        _min_bytes(config)
    querylog.check_properties(config)


def _min_bytes(config: Mapping[str, str]) -> int:
    """:data:`AUTO_MIN_BYTES` of ``config``; InvalidOption naming it and its value when it
    is not a whole number >= 0 (the append trigger's warning said only "invalid literal
    for int()" when another tool had set 'abc'; an audit)."""
    raw = config.get(AUTO_MIN_BYTES)
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidOption(
            f"table property {AUTO_MIN_BYTES} must be a whole number of bytes >= 0, got {raw!r}"
        )
    return value


def after_append(
    table: Table, files_added: int, configuration: Mapping[str, str] | None = None
) -> AutoResult | None:
    """The append trigger: ask the advisor when auto-optimize is on and enough
    never-clustered bytes arrived. Never raises (the append is committed).

    ``configuration`` is the table's as the append read it: when auto-optimize
    is off there, no snapshot is read after the commit (a property turned on by
    another writer meanwhile is seen at the next append)."""
    from lakelayout.cluster import config as cluster_config
    from lakelayout.table.features import is_true

    try:
        on = configuration is None or is_true(configuration.get(AUTO_OPTIMIZE))
        if files_added <= 0 or not on:
            return None
        snap = table.snapshot()
        config = snap.configuration
        if not is_true(config.get(AUTO_OPTIMIZE)) or _online_enabled(config):
            return None  # (online reorganization lays appended files out: its catch-ups)
        target = cluster_config.target_file_size(config)
        minimum = _min_bytes(config) if config.get(AUTO_MIN_BYTES) else 2 * target
        fresh = _unclustered(table.uri, snap.files)
        if int(fresh.total_bytes) < minimum:
            return None
        return table.advisor.auto(trigger="append")
    except Exception as exc:
        logger.warning("advisor on %s after an append: %s", table.uri, exc)
        return None
