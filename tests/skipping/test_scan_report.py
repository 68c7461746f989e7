"""The skipping indicators follow Ta-Shma et al. §IV-A exactly."""

from __future__ import annotations

import math

import pytest

from lakelayout.skipping.scan_report import Measured, ScanReport, WorkloadSummary, geometric_mean


def _report(rows_kept: int, measured: Measured | None) -> ScanReport:
    return ScanReport(
        predicate="x = 1",
        version=0,
        files_total=10,
        files_kept=4,
        bytes_total=1000,
        bytes_kept=400,
        rows_total=1000,
        rows_kept=rows_kept,
        pruning_seconds=0.0,
        measured=measured,
    )


def test_indicators_match_definitions_and_identity() -> None:
    # 4 files of 100 rows kept; 2 of them hold 30 matching rows
    r = _report(400, Measured(rows_matching=30, files_relevant=2, rows_in_relevant_files=200))
    assert r.sigma == pytest.approx(0.03)
    assert r.lam == pytest.approx(30 / 200)
    assert r.mu == pytest.approx(200 / 400)
    assert r.psi == pytest.approx(0.4)
    # equation (1): ψ = σ / (λ μ)
    assert r.psi == pytest.approx(r.sigma / (r.lam * r.mu))
    assert r.files_skipped == 6 and r.bytes_skipped == 600


def test_unmeasured_report_has_only_psi() -> None:
    r = _report(250, None)
    assert r.psi == pytest.approx(0.25)
    assert r.sigma is None and r.lam is None and r.mu is None
    assert "sigma" not in r.as_dict()


def test_no_matching_rows_leaves_lambda_and_mu_undefined() -> None:
    r = _report(100, Measured(rows_matching=0, files_relevant=0, rows_in_relevant_files=0))
    assert r.sigma == 0.0
    assert r.lam is None and r.mu is None


def test_geometric_means_obey_equation_two() -> None:
    reports = [
        _report(400, Measured(30, 2, 200)),
        _report(100, Measured(5, 1, 100)),
        _report(900, Measured(300, 8, 800)),
        _report(100, Measured(0, 0, 0)),  # σ = 0: left out, as in the paper
    ]
    s = WorkloadSummary.of(reports)
    assert s.queries == 4
    assert s.g_psi == pytest.approx(s.g_sigma / (s.g_lambda * s.g_mu))
    assert s.g_sigma == pytest.approx(
        math.exp((math.log(0.03) + math.log(0.005) + math.log(0.3)) / 3)
    )


def test_geometric_mean_ignores_undefined() -> None:
    assert geometric_mean([0.5, None, 2.0]) == pytest.approx(1.0)
    assert geometric_mean([]) is None
