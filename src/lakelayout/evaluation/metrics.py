"""Per-event records of a replay and their totals (the results JSON schema, version 2).

Every event of the stream leaves one record: :class:`InsertRecord`,
:class:`QueryRecord` or :class:`RewriteRecord`; a policy's own bookkeeping
(an advisor's analysis, an online reorganizer's decisions) leaves
:class:`OverheadRecord` entries. A :class:`PolicyRun` holds a policy's
records; its :meth:`PolicyRun.totals` are *sums of those records* (nothing is
counted twice or elsewhere), plus the skipping indicators of Ta-Shma et al.
§IV-A over the queries (σ, λ, μ, ψ and their geometric means, through
:mod:`lakelayout.skipping.scan_report`).

Costs are in seconds. In ``spark`` mode a query costs its measured time; in
``logical`` mode it costs ``bytes_kept × full_scan_seconds / bytes_total``
(the fraction of a full scan it reads, priced by the full-scan time measured
on this machine). A rewrite costs its measured time in both modes;
``alpha = rewrite seconds / full_scan_seconds`` is OReO's α. A policy's total
cost is queries + rewrites + its recorded overhead.

Policies run in lockstep (docs/evaluation.md): every timed record carries the
``slot`` its policy had in that event's rotated order (0 = ran first). In
spark mode every query is timed a second time after the stream, in the
reverse order, at the table version it first ran on (``seconds_retimed``);
the two sums side by side show how much a query total owes to when it ran.

Layouts are compared at equal file counts: a run reports its live files at
the end against the files inserted (the ``none`` policy's count) and the
mean and largest rows per file; :func:`file_count_warnings` names the runs
outside :data:`FILE_COUNT_TOLERANCE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lakelayout.skipping.scan_report import geometric_mean

SCHEMA_VERSION = 2
#: a run's final live file count may differ from the files inserted by this fraction
FILE_COUNT_TOLERANCE = 0.05


@dataclass(frozen=True)
class QueryRecord:
    """One query: what existed, what the metadata kept, what matched, what it cost."""

    position: int
    i: int
    template: str
    segment: int
    version: int
    files_total: int
    files_kept: int
    bytes_total: int
    bytes_kept: int
    rows_total: int
    rows_kept: int
    #: None where the replay did not count (``ReplayConfig.count_every``)
    rows_matching: int | None
    files_relevant: int | None
    rows_in_relevant_files: int | None
    #: measured Spark time (scan + count), None in logical mode
    seconds: float | None
    #: rows Spark returned (spark mode; must equal rows_matching)
    rows_returned: int | None
    cost_seconds: float
    #: the policy's place in this event's order (0 = first); None in schema 1 documents
    slot: int | None = None
    #: the same scan timed again after the stream, in the reverse order, at ``version``
    #: (spark mode); None when not re-timed or when it did not keep the same files
    seconds_retimed: float | None = None

    @property
    def sigma(self) -> float | None:
        return None if self.rows_matching is None else _ratio(self.rows_matching, self.rows_total)

    @property
    def psi(self) -> float | None:
        return _ratio(self.rows_kept, self.rows_total)

    @property
    def lam(self) -> float | None:
        if not self.rows_matching or self.rows_in_relevant_files is None:
            return None
        return _ratio(self.rows_matching, self.rows_in_relevant_files)

    @property
    def mu(self) -> float | None:
        if not self.rows_matching or self.rows_in_relevant_files is None:
            return None
        return _ratio(self.rows_in_relevant_files, self.rows_kept)


@dataclass(frozen=True)
class RewriteRecord:
    """One reorganization (OPTIMIZE, layout apply, delta-rs z-order)."""

    position: int
    kind: str
    seconds: float
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_written: int
    rows_written: int
    alpha: float
    #: the policy's place in this event's order (0 = first); None in schema 1 documents
    slot: int | None = None
    #: what the rewrite is charged when not its measured ``seconds`` (a logical replay
    #: with ``ReplayConfig.rewrite_alpha``: α full scans per table rewritten)
    cost_seconds: float | None = None

    @property
    def charged(self) -> float:
        """The rewrite's cost in the policy's total: ``cost_seconds``, else ``seconds``."""
        return self.seconds if self.cost_seconds is None else self.cost_seconds


@dataclass(frozen=True)
class OverheadRecord:
    """Seconds a policy spent deciding (``Context.record_overhead``): an advisor's
    analysis, an online reorganizer's bookkeeping. Part of the policy's total cost."""

    position: int
    kind: str
    seconds: float
    slot: int | None = None


@dataclass(frozen=True)
class InsertRecord:
    """One insert batch (the same for every policy; not a policy cost)."""

    position: int
    batch: int
    rows: int
    files: int
    bytes: int
    seconds: float
    slot: int | None = None


@dataclass
class PolicyRun:
    """Everything one policy did over the stream."""

    policy: str
    description: str
    queries: list[QueryRecord] = field(default_factory=list)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    inserts: list[InsertRecord] = field(default_factory=list)
    overheads: list[OverheadRecord] = field(default_factory=list)
    fit_seconds: float = 0.0
    final_files: int = 0
    final_bytes: int = 0
    final_rows: int = 0
    #: rows of the largest live file at the end
    final_max_rows: int = 0

    @property
    def files_inserted(self) -> int:
        """Files the inserts added (= the live files at the end under ``none``)."""
        return sum(i.files for i in self.inserts)

    def files_vs_inserted(self) -> float | None:
        """Final live files / files inserted (1.0: the same count as ``none``)."""
        inserted = self.files_inserted
        return self.final_files / inserted if inserted else None

    def file_count_ok(self, tolerance: float = FILE_COUNT_TOLERANCE) -> bool:
        """Whether the final live file count is within ``tolerance`` of the files inserted."""
        ratio = self.files_vs_inserted()
        return ratio is None or abs(ratio - 1.0) <= tolerance + 1e-12

    def totals(self) -> dict[str, Any]:
        """Sums over the records and the indicators' geometric means."""
        q, r, o = self.queries, self.rewrites, self.overheads
        inserted = sum(i.bytes for i in self.inserts)
        written = sum(w.bytes_written for w in r)
        measured = [x for x in q if x.rows_matching]
        g_sigma = geometric_mean(x.sigma for x in measured)
        g_psi = geometric_mean(x.psi for x in measured)
        query_cost = sum(x.cost_seconds for x in q)
        rewrite_seconds = sum(w.charged for w in r)
        overhead_seconds = sum(x.seconds for x in o)
        return {
            "queries": len(q),
            "rewrites": len(r),
            "files_kept": sum(x.files_kept for x in q),
            "bytes_kept": sum(x.bytes_kept for x in q),
            "rows_kept": sum(x.rows_kept for x in q),
            "rows_matching": sum(x.rows_matching or 0 for x in q),
            "queries_counted": sum(x.rows_matching is not None for x in q),
            "query_seconds": sum(x.seconds or 0.0 for x in q),
            "query_cost_seconds": query_cost,
            "rewrite_seconds": rewrite_seconds,
            "rewrite_seconds_measured": sum(w.seconds for w in r),
            "rewrite_bytes_written": written,
            "overhead_seconds": overhead_seconds,
            "overheads": len(o),
            "total_cost_seconds": query_cost + rewrite_seconds + overhead_seconds,
            **self.retimed(),
            "mean_slot": self.mean_slot(),
            "insert_bytes": inserted,
            "write_amplification": (inserted + written) / inserted if inserted else None,
            "g_sigma": g_sigma,
            "g_lambda": geometric_mean(x.lam for x in measured),
            "g_mu": geometric_mean(x.mu for x in measured),
            "g_psi": g_psi,
            "g_psi_over_g_sigma": g_psi / g_sigma if g_psi and g_sigma else None,
            "final_files": self.final_files,
            "final_bytes": self.final_bytes,
            "final_rows": self.final_rows,
            "files_inserted": self.files_inserted,
            "files_vs_inserted": self.files_vs_inserted(),
            "rows_per_file_mean": self.final_rows / self.final_files if self.final_files else None,
            "rows_per_file_max": self.final_max_rows,
            "fit_seconds": self.fit_seconds,
        }

    def mean_slot(self) -> float | None:
        """Mean place of this policy in the order of its timed events (0 = always first);
        with ``n`` policies rotated evenly it is about ``(n - 1) / 2`` for every policy."""
        slots = [x.slot for x in self.queries if x.slot is not None]
        slots += [x.slot for x in self.rewrites if x.slot is not None]
        slots += [x.slot for x in self.overheads if x.slot is not None]
        return sum(slots) / len(slots) if slots else None

    def retimed(self) -> dict[str, Any]:
        """The stream's query seconds against the same scans re-timed after the stream.

        Only queries re-timed with the same files count (``queries_retimed`` of
        them): ``query_seconds_compared`` is their time in the stream,
        ``query_seconds_retimed`` their second time, ``retime_ratio`` the second
        over the first (1.0: the order and the moment did not matter).
        """
        pairs = [
            (x.seconds, x.seconds_retimed)
            for x in self.queries
            if x.seconds is not None and x.seconds_retimed is not None
        ]
        first = sum(a for a, _ in pairs)
        second = sum(b for _, b in pairs)
        return {
            "queries_retimed": len(pairs),
            "query_seconds_compared": first if pairs else None,
            "query_seconds_retimed": second if pairs else None,
            "retime_ratio": second / first if pairs and first > 0 else None,
        }

    def per_template(self) -> dict[str, dict[str, float | int | None]]:
        """Per template: queries, mean σ and ψ, bytes kept (for the scatter plot)."""
        out: dict[str, dict[str, float | int | None]] = {}
        for name in sorted({x.template for x in self.queries}):
            rows = [x for x in self.queries if x.template == name]
            out[name] = {
                "queries": len(rows),
                "g_sigma": geometric_mean(x.sigma for x in rows if x.rows_matching),
                "g_psi": geometric_mean(x.psi for x in rows if x.rows_matching),
                "bytes_kept": sum(x.bytes_kept for x in rows),
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "description": self.description,
            "totals": self.totals(),
            "per_template": self.per_template(),
            "queries": [asdict(x) for x in self.queries],
            "rewrites": [asdict(x) for x in self.rewrites],
            "inserts": [asdict(x) for x in self.inserts],
            "overheads": [asdict(x) for x in self.overheads],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyRun:
        run = cls(policy=data["policy"], description=data.get("description", ""))
        run.queries = [QueryRecord(**x) for x in data["queries"]]
        run.rewrites = [RewriteRecord(**x) for x in data["rewrites"]]
        run.inserts = [InsertRecord(**x) for x in data["inserts"]]
        run.overheads = [OverheadRecord(**x) for x in data.get("overheads", [])]
        totals = data.get("totals", {})
        run.final_files = int(totals.get("final_files", 0))
        run.final_bytes = int(totals.get("final_bytes", 0))
        run.final_rows = int(totals.get("final_rows", 0))
        run.final_max_rows = int(totals.get("rows_per_file_max", 0))
        run.fit_seconds = float(totals.get("fit_seconds", 0.0))
        return run


def file_count_warnings(
    runs: Sequence[PolicyRun], tolerance: float = FILE_COUNT_TOLERANCE
) -> list[str]:
    """One message per run whose final live file count is off the files inserted by more
    than ``tolerance`` (its skipping is then not comparable at equal file counts)."""
    out = []
    for run in runs:
        ratio = run.files_vs_inserted()
        if ratio is not None and not run.file_count_ok(tolerance):
            out.append(
                f"WARNING: {run.policy} ends with {run.final_files} live files, "
                f"{ratio - 1:+.1%} off the {run.files_inserted} inserted "
                f"(tolerance ±{tolerance:.0%}): its skipping is not compared at equal file counts"
            )
    return out


def cumulative_cost(run: PolicyRun, events: int) -> list[float]:
    """Cost (seconds) accumulated after each stream position 0..events-1."""
    step = [0.0] * events
    for q in run.queries:
        step[q.position] += q.cost_seconds
    for w in run.rewrites:
        step[w.position] += w.charged
    for o in run.overheads:
        step[o.position] += o.seconds
    out, total = [], 0.0
    for s in step:
        total += s
        out.append(total)
    return out


def sum_records(records: Sequence[QueryRecord], attr: str) -> float:
    """Σ of one numeric attribute over query records (used by tests and the report)."""
    return float(sum(getattr(r, attr) or 0 for r in records))


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den
