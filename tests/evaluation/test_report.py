"""Totals are sums of the per-event records; the report names every policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakelayout.evaluation.metrics import (
    InsertRecord,
    PolicyRun,
    QueryRecord,
    RewriteRecord,
    cumulative_cost,
    sum_records,
)
from lakelayout.evaluation.report import html_report, load_json, rich_table, write_report


def _query(position: int, kept: int, matching: int, template: str) -> QueryRecord:
    return QueryRecord(
        position=position, i=position, template=template, segment=position // 3, version=1,
        files_total=10, files_kept=kept, bytes_total=1000, bytes_kept=100 * kept,
        rows_total=1000, rows_kept=100 * kept, rows_matching=matching,
        files_relevant=min(kept, 1) if matching else 0,
        rows_in_relevant_files=100 if matching else 0, seconds=None, rows_returned=None,
        cost_seconds=0.1 * kept,
    )  # fmt: skip


def _run(name: str, scale: int) -> PolicyRun:
    run = PolicyRun(policy=name, description=f"{name} policy")
    run.inserts = [InsertRecord(0, 0, 1000, 10, 1000, 1.0)]
    run.queries = [_query(p, (p * scale) % 10 + 1, p % 4 * 10, f"t{p % 3}") for p in range(1, 9)]
    run.rewrites = [RewriteRecord(4, "apply", 2.5, 10, 10, 1000, 900, 1000, 5.0)]
    run.final_files, run.final_bytes = 10, 900
    return run


def _results(runs: list[PolicyRun]) -> dict[str, object]:
    return {
        "schema_version": 1, "mode": "logical",
        "dataset": {"name": "toy", "rows": 1000, "batches": 1, "rows_per_file": 100,
                    "blocks_per_batch": 10},
        "config": {"seed": 0, "sample_rows": 10, "queries": 8},
        "machine": {"nproc": 2, "memory_gib": 1.0, "platform": "test", "usable_cpus": 2},
        "full_scan_seconds": 0.5, "events": 9, "switches": [4, 7], "inserts_at": [0],
        "runs": [r.to_dict() for r in runs], "seconds": 1.0, "note": "one run",
    }  # fmt: skip


def test_totals_are_sums_of_records() -> None:
    run = _run("qdtree", 3)
    t = run.totals()
    assert t["bytes_kept"] == sum_records(run.queries, "bytes_kept")
    assert t["files_kept"] == sum_records(run.queries, "files_kept")
    assert t["query_cost_seconds"] == pytest.approx(sum_records(run.queries, "cost_seconds"))
    assert t["rewrite_seconds"] == 2.5
    assert t["total_cost_seconds"] == pytest.approx(t["query_cost_seconds"] + 2.5)
    assert t["write_amplification"] == pytest.approx((1000 + 900) / 1000)
    assert cumulative_cost(run, 9)[-1] == pytest.approx(t["total_cost_seconds"])
    assert t["g_psi_over_g_sigma"] == pytest.approx(t["g_psi"] / t["g_sigma"])


def test_round_trip_keeps_totals() -> None:
    run = _run("none", 1)
    again = PolicyRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.totals() == run.totals()


def test_report_contains_every_policy(tmp_path: Path) -> None:
    results = _results([_run("none", 1), _run("sorted", 2), _run("qdtree", 3)])
    json_path, html_path = write_report(results, tmp_path)
    page = html_path.read_text()
    assert page.count("<svg") == 3
    for name in ("none", "sorted", "qdtree (oracle)"):  # fitted on the future: labelled
        assert f"<td>{name}</td>" in page
    assert "nproc=2" in page and "one run" in page
    assert load_json(tmp_path) == json.loads(json_path.read_text())
    assert next(c.header for c in rich_table(results).columns) == "policy"  # type: ignore[arg-type]
    assert "qdtree" in html_report(results)  # type: ignore[arg-type]


def test_terminal_tables_split_the_columns_and_reject_unknown_ones() -> None:
    from lakelayout.errors import InvalidOption
    from lakelayout.evaluation.report import COLUMNS, COST_COLUMNS, SKIPPING_COLUMNS

    results = _results([_run("none", 1), _run("qdtree", 3)])
    skipping = [c.header for c in rich_table(results, SKIPPING_COLUMNS).columns]  # type: ignore[arg-type]
    cost = [c.header for c in rich_table(results, COST_COLUMNS).columns]  # type: ignore[arg-type]
    assert skipping[0] == cost[0] == "policy"
    assert sorted(set(skipping) | set(cost)) == sorted(COLUMNS)  # together: every column
    assert "G(ψ)/G(σ)" in skipping and "rewrite s" in cost
    with pytest.raises(InvalidOption, match="bogus"):
        rich_table(results, ["policy", "bogus"])  # type: ignore[arg-type]
