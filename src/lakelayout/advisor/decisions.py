"""The decision log: every automatic decision, its inputs, estimates and outcome.

A Delta table at ``<table>/_lakelayout/decisions`` (written with deltalake,
like the query log, but directly: decisions are rare). Two kinds of rows:

* ``decision``: when, why (trigger), the table version, the decision and its
  reason, the chosen layout's estimated cost and saving, what happened
  (``applied``, ``skipped``, ``failed: ...``), the measured rewrite seconds and
  the version it committed, and the whole recommendation as JSON (``detail``);
* ``measurement``: later, for an applied decision, what the queries that
  followed really saved: per query, the bytes the rewritten files would have
  had to be read from before the rewrite minus the bytes read from the files
  it wrote, both through the same pruning (:func:`.estimate.bytes_read`,
  min/max statistics: the old files' index metadata is gone once they are
  replaced), next to the estimate made the same way.

The applied decisions also correct the next ones: :func:`rewrite_correction`
is the median, over the table's last few automatic rewrites, of what each
took over what the cost model (uncorrected) said it would take; the advisor
scales the model's rewrite terms by it (``CostModel.scaled_rewrites``). The
calibration measures generated tables; this learns the table at hand. The
same for the advisor's own work: :func:`fitting_per_row` is the median
seconds per sample row that the table's last decisions spent fitting and
pricing candidate layouts (it grows with the workload's distinct filters,
which calibration cannot know), and replaces the calibrated figure. And the
saving: :func:`persistence` is the median share of its estimated saving each
of the last rewrites kept on the queries after it (a drifting workload keeps
little), and scales the next decision's expected saving.

Pure: deltalake and Arrow.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import statistics
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakelayout.advisor import querylog

LOG_DIR = os.path.join("_lakelayout", "decisions")
#: rows the decision log keeps (the newest; the oldest go when the log is maintained)
KEPT_ROWS = 10_000

logger = logging.getLogger(__name__)

SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("decision_id", pa.string()),
        pa.field("trigger", pa.string()),
        pa.field("table_version", pa.int64()),
        pa.field("rewrite", pa.bool_()),
        pa.field("family", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("outcome", pa.string()),
        pa.field("estimated_cost_seconds", pa.float64()),
        pa.field("estimated_saving_seconds", pa.float64()),
        pa.field("expected_queries", pa.float64()),
        pa.field("estimated_saved_bytes_per_query", pa.float64()),
        pa.field("actual_seconds", pa.float64()),
        pa.field("version_after", pa.int64()),
        pa.field("measured_queries", pa.int64()),
        pa.field("actual_saved_bytes_per_query", pa.float64()),
        pa.field("advisor_seconds", pa.float64()),
        pa.field("detail", pa.string()),
    ]
)


@dataclass
class DecisionRow:
    """One row of the decision log (see :data:`SCHEMA`)."""

    kind: str
    trigger: str | None = None
    table_version: int | None = None
    rewrite: bool | None = None
    family: str | None = None
    reason: str | None = None
    outcome: str | None = None
    estimated_cost_seconds: float | None = None
    estimated_saving_seconds: float | None = None
    expected_queries: float | None = None
    estimated_saved_bytes_per_query: float | None = None
    actual_seconds: float | None = None
    version_after: int | None = None
    measured_queries: int | None = None
    actual_saved_bytes_per_query: float | None = None
    advisor_seconds: float | None = None
    decision_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ts: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def row(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in SCHEMA.names}
        out["detail"] = json.dumps(self.detail, default=str, sort_keys=True)
        return out


class DecisionLog:
    """The decision log of one table."""

    def __init__(self, table_uri: str) -> None:
        self.path = os.path.join(table_uri, LOG_DIR)

    def append(self, *rows: DecisionRow) -> None:
        data = pa.Table.from_pylist([r.row() for r in rows], schema=SCHEMA)
        querylog.append_once(self.path, data, name="lakelayout decision log")
        if querylog.maintenance_due(self.path):
            try:
                self.maintain()
            except Exception as exc:  # a decision is logged; its log's upkeep waits
                logger.warning("decision log of %s: maintenance failed: %s", self.path, exc)

    def maintain(self, *, max_rows: int = KEPT_ROWS) -> querylog.MaintenanceResult:
        """Keep the newest ``max_rows`` rows in one file and vacuum the rest, as the query
        log is maintained (one append in :data:`~.querylog.MAINTAIN_EVERY` does it, in
        whichever process makes it: an append adds a commit and a file)."""
        return querylog.compact_log(
            self.path,
            retention_days=querylog.MAX_RETENTION_DAYS,
            max_records=max_rows,
            prefix="decisions",
            operation="DECISION LOG MAINTENANCE",
        )

    def read(self) -> pa.Table:
        """Every row, oldest first (empty when nothing was decided yet)."""
        if not os.path.isdir(os.path.join(self.path, "_delta_log")):
            return SCHEMA.empty_table()
        from lakelayout.table.delta import read_rows

        data = querylog.conform(read_rows(self.path), SCHEMA, self.path, "decision log")
        return data.sort_by([("ts", "ascending")])

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a dict, with ``detail`` parsed back from JSON."""
        out = self.read().to_pylist()
        for row in out:
            row["detail"] = json.loads(row["detail"]) if row["detail"] else {}
        return out


#: how many of the table's latest automatic rewrites the correction looks at
CORRECTION_REWRITES = 5
#: the correction is kept within these bounds (one odd rewrite, e.g. on a machine
#: busy with something else, must not turn the advisor off or make it reckless)
CORRECTION_BOUNDS = (0.25, 8.0)
#: where a decision's ``detail`` keeps the correction it was priced with
CORRECTION_KEY = "rewrite_correction"


@dataclass(frozen=True)
class RewriteCorrection:
    """What this table's rewrites took over what the cost model said (see the module doc)."""

    factor: float
    #: actual / model-estimated seconds of each rewrite looked at, oldest first
    ratios: tuple[float, ...]

    def describe(self) -> str:
        shown = ", ".join(f"{r:.2f}" for r in self.ratios)
        n = len(self.ratios)
        bounded = (
            ""
            if min(CORRECTION_BOUNDS) < self.factor < max(CORRECTION_BOUNDS)
            else (f", bounded to {CORRECTION_BOUNDS[0]:g}..{CORRECTION_BOUNDS[1]:g}")
        )
        return (
            "median actual / estimated beyond the fixed start-up, of this table's last "
            f"{n} automatic rewrite{'s' if n > 1 else ''}: {shown}{bounded}"
        )


#: the persistence is kept within these bounds: a rewrite whose queries moved on entirely
#: must not turn the advisor off for good, and one that saved more than estimated does
#: not make the next estimate larger (the queries drifted towards that layout, which
#: says nothing of the next one)
PERSISTENCE_BOUNDS = (0.1, 1.0)
#: where a decision's ``detail.inputs`` keeps the persistence it was priced with
PERSISTENCE_KEY = "persistence"


@dataclass(frozen=True)
class Persistence:
    """How much of their estimated saving this table's automatic rewrites kept on the
    queries that came after them (see :func:`persistence`)."""

    factor: float
    #: measured / estimated saved bytes per query of each rewrite looked at, oldest first
    ratios: tuple[float, ...]

    def describe(self) -> str:
        shown = ", ".join(f"{r:.2f}" for r in self.ratios)
        n = len(self.ratios)
        low, high = PERSISTENCE_BOUNDS
        bounded = "" if low < self.factor < high else f", bounded to {low:g}..{high:g}"
        return (
            f"savings x {self.factor:.2f}: the median saved / estimated bytes per query on "
            f"the queries after this table's last {n} automatic rewrite{'s' if n > 1 else ''}"
            f": {shown}{bounded}"
        )


def persistence(
    measured: Iterable[tuple[float, float]], *, last: int = CORRECTION_REWRITES
) -> Persistence | None:
    """The share of an estimated saving this table's rewrites kept, from ``measured``:
    (bytes per query the queries after a rewrite saved on its files, bytes per query
    its decision estimated), one pair per applied automatic rewrite, oldest first;
    None before one.

    An estimate assumes the window it was priced on repeats. On a drifting
    workload it does not: the queries after a rewrite filter other columns, or
    other ranges, and save less. The median ratio over the last ``last``
    rewrites, within :data:`PERSISTENCE_BOUNDS`, scales the next decision's
    expected saving (its expected queries, in every bound too), as the rewrite
    correction scales its cost. Both sides are min/max pruning of the same
    files, so the ratio is the workload moving on plus the estimator's own
    error, which is what the next estimate needs corrected.
    """
    ratios = []
    for saved, estimated in measured:
        if not estimated > 0 or not math.isfinite(saved):
            continue
        ratios.append(max(saved, 0.0) / estimated)
    if not ratios:
        return None
    recent = tuple(ratios[-last:])
    low, high = PERSISTENCE_BOUNDS
    return Persistence(min(high, max(low, statistics.median(recent))), recent)


@dataclass(frozen=True)
class FittingCost:
    """Seconds per sample row this table's last decisions spent fitting candidates."""

    per_row: float
    #: per decision looked at, oldest first
    measured: tuple[float, ...]

    def describe(self) -> str:
        n = len(self.measured)
        return (
            f"fitting {self.per_row * 1e6:.3g} µs per sample row: the median of this table's "
            f"last {n} decision{'s' if n > 1 else ''} that fitted candidates"
        )


def fitting_per_row(
    rows: Iterable[Mapping[str, Any]], *, last: int = CORRECTION_REWRITES
) -> FittingCost | None:
    """What fitting the candidate layouts cost this table's last ``last`` decisions that
    fitted any (decision-log ``rows``, oldest first), per sample row; None before one."""
    measured = []
    for row in rows:
        if row.get("kind") != "decision":
            continue
        detail = row.get("detail") or {}
        seconds = detail.get("fit_seconds")
        sample_rows = (detail.get("inputs") or {}).get("sample_rows")
        if not seconds or not sample_rows or not seconds > 0 or not sample_rows > 0:
            continue
        per_row = float(seconds) / float(sample_rows)
        if math.isfinite(per_row):
            measured.append(per_row)
    if not measured:
        return None
    recent = tuple(measured[-last:])
    return FittingCost(statistics.median(recent), recent)


def rewrite_correction(
    rows: Iterable[Mapping[str, Any]], *, last: int = CORRECTION_REWRITES
) -> RewriteCorrection | None:
    """The rewrite-cost correction learned from decision-log ``rows`` (oldest first);
    None before the first applied automatic rewrite with both times known.

    Only rows of rewrites that committed (``outcome`` 'applied' and a
    ``version_after``) count: a rewrite that yielded or failed timed no rewrite.

    The correction scales the part of a rewrite's cost that grows with the
    data (:meth:`.costmodel.CostModel.scaled_rewrites`); the fixed part ``f``
    each decision recorded (``detail.chosen.fixed_cost_seconds``; 0 in rows
    written before it was) is taken off both sides, and so is the collection of
    the declared indexes and the routing of a tree the decision timed on its
    sample (``detail.chosen.collect_seconds``, ``route_seconds``: measurements
    on the table's own rows, not calibrated terms). A decision priced with a
    correction ``c`` recorded a variable part ``c`` times the model's, so its
    ratio is ``(actual - f) × c / (estimated - f)``: the corrections never
    compound. A rewrite that took no longer than the fixed part has ratio 0.
    """
    ratios = []
    for row in rows:
        if row.get("kind") != "decision" or row.get("outcome") != "applied":
            continue
        if row.get("version_after") is None:  # nothing committed: no rewrite was timed
            continue
        actual, estimated = row.get("actual_seconds"), row.get("estimated_cost_seconds")
        if actual is None or estimated is None or not estimated > 0 or not actual > 0:
            continue
        detail = row.get("detail") or {}
        applied = float((detail.get("inputs") or {}).get(CORRECTION_KEY) or 1.0)
        chosen = detail.get("chosen") or {}
        # the fixed part and the collection timed on the sample are not corrected
        fixed = float(chosen.get("fixed_cost_seconds") or 0.0)
        fixed += float(chosen.get("collect_seconds") or 0.0)
        fixed += float(chosen.get("route_seconds") or 0.0)
        variable = float(estimated) - fixed
        if not variable > 0:
            continue
        ratio = max(float(actual) - fixed, 0.0) * applied / variable
        if math.isfinite(ratio):
            ratios.append(ratio)
    if not ratios:
        return None
    recent = tuple(ratios[-last:])
    low, high = CORRECTION_BOUNDS
    return RewriteCorrection(min(high, max(low, statistics.median(recent))), recent)
