"""Scan reports and the skipping-effectiveness indicators.

Definitions follow Ta-Shma et al., "Extensible Data Skipping" §IV-A, with
objects = data files and |o| = rows in a file. For a query over dataset D:

* selectivity        σ = |D_r| / |D|                  (relevant rows)
* layout factor      λ = |D_r| / Σ_{o ∈ O_r} |o|       (relevant rows in relevant files)
* metadata factor    μ = Σ_{o ∈ O_r} |o| / Σ_{o ∈ O_m} |o|
* scanning factor    ψ = Σ_{o ∈ O_m} |o| / |D|         (rows actually read)

where O_r are the files holding at least one relevant row and O_m the files
the metadata kept (O_r ⊆ O_m), so ψ = σ / (λ μ). Over a workload the
indicators are averaged geometrically, G(ψ) = G(σ) / (G(λ) G(μ)). σ, λ, μ
need the matching rows per file, which only a Spark job over the kept files
can count: they are filled in when a scan runs with ``measure=True``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Measured:
    """What a measuring Spark job counted over the kept files."""

    rows_matching: int
    files_relevant: int
    rows_in_relevant_files: int


@dataclass(frozen=True)
class ScanReport:
    """Honest numbers about one scan: what existed, what was kept, what matched."""

    predicate: str
    version: int
    files_total: int
    files_kept: int
    bytes_total: int
    bytes_kept: int
    rows_total: int
    rows_kept: int
    pruning_seconds: float
    #: files skipped by each skipping method (``"minmax"``, index names ...)
    skipped_by: dict[str, int] = field(default_factory=dict)
    measured: Measured | None = None
    #: bytes of the files each skipping method rules out on its own (overlapping)
    bytes_skipped_by: dict[str, int] = field(default_factory=dict)
    #: declared indexes not used by this scan, with the reason (e.g. an unregistered UDF)
    unused_indexes: dict[str, str] = field(default_factory=dict)

    @property
    def files_skipped(self) -> int:
        return self.files_total - self.files_kept

    @property
    def bytes_skipped(self) -> int:
        return self.bytes_total - self.bytes_kept

    @property
    def psi(self) -> float | None:
        """Scanning factor ψ: fraction of the table's rows the scan reads."""
        return _ratio(self.rows_kept, self.rows_total)

    @property
    def sigma(self) -> float | None:
        """Selectivity σ (needs ``measure=True``)."""
        return (
            None if self.measured is None else _ratio(self.measured.rows_matching, self.rows_total)
        )

    @property
    def lam(self) -> float | None:
        """Layout factor λ (needs ``measure=True``; undefined when nothing matches)."""
        if self.measured is None:
            return None
        return _ratio(self.measured.rows_matching, self.measured.rows_in_relevant_files)

    @property
    def mu(self) -> float | None:
        """Metadata factor μ (needs ``measure=True``; undefined when nothing matches)."""
        if self.measured is None or self.measured.rows_in_relevant_files == 0:
            return None
        return _ratio(self.measured.rows_in_relevant_files, self.rows_kept)

    def as_dict(self) -> dict[str, object]:
        """A flat JSON-ready dictionary (indicators included)."""
        out: dict[str, object] = {
            "predicate": self.predicate,
            "version": self.version,
            "files_total": self.files_total,
            "files_kept": self.files_kept,
            "bytes_total": self.bytes_total,
            "bytes_kept": self.bytes_kept,
            "rows_total": self.rows_total,
            "rows_kept": self.rows_kept,
            "pruning_seconds": self.pruning_seconds,
            "skipped_by": dict(self.skipped_by),
            "bytes_skipped_by": dict(self.bytes_skipped_by),
            "unused_indexes": dict(self.unused_indexes),
            "psi": self.psi,
        }
        if self.measured is not None:
            out.update(
                rows_matching=self.measured.rows_matching,
                files_relevant=self.measured.files_relevant,
                rows_in_relevant_files=self.measured.rows_in_relevant_files,
                sigma=self.sigma,
                lam=self.lam,
                mu=self.mu,
            )
        return out


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def geometric_mean(values: Iterable[float | None]) -> float | None:
    """G(x) = (Π x_i)^(1/n) over the defined, positive values; None if there are none.

    Queries with σ = 0 have no defined λ, μ or ψ/σ and are left out, as in
    the paper (footnote 7).

    >>> round(geometric_mean([0.1, 0.001]), 6)
    0.01
    >>> geometric_mean([None, 0.0]) is None
    True
    """
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass(frozen=True)
class WorkloadSummary:
    """Geometric means of the indicators over a set of measured scans."""

    queries: int
    g_sigma: float | None
    g_lambda: float | None
    g_mu: float | None
    g_psi: float | None

    @classmethod
    def of(cls, reports: Sequence[ScanReport]) -> WorkloadSummary:
        relevant = [r for r in reports if r.measured is not None and r.measured.rows_matching]
        return cls(
            queries=len(reports),
            g_sigma=geometric_mean(r.sigma for r in relevant),
            g_lambda=geometric_mean(r.lam for r in relevant),
            g_mu=geometric_mean(r.mu for r in relevant),
            g_psi=geometric_mean(r.psi for r in relevant),
        )
