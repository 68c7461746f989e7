"""Totals are sums of the per-event records; the report names every policy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lakelayout.evaluation.metrics import (
    InsertRecord,
    OverheadRecord,
    PolicyRun,
    QueryRecord,
    RewriteRecord,
    cumulative_cost,
    sum_records,
)
from lakelayout.evaluation.report import (
    html_report,
    load_json,
    rich_table,
    runs_of,
    write_report,
)


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
    assert {"re-timed s", "spread", "overhead s"} <= set(cost)
    with pytest.raises(InvalidOption, match="bogus"):
        rich_table(results, ["policy", "bogus"])  # type: ignore[arg-type]


def _timed_run(name: str, stream: list[float], again: list[float | None]) -> PolicyRun:
    """A spark-mode run whose queries took ``stream`` seconds and ``again`` when re-timed."""
    run = _run(name, 1)
    run.queries = [
        replace(q, seconds=s, cost_seconds=s, seconds_retimed=a, slot=k % 2)
        for k, (q, s, a) in enumerate(zip(run.queries, stream, again, strict=False))
    ]
    run.overheads = [OverheadRecord(4, "advisor", 1.5, 0)]
    return run


def _v2(runs: list[PolicyRun]) -> dict[str, object]:
    results = _results(runs)
    results.update(
        schema_version=2, mode="spark", retime={"done": True, "order": "reverse"},
        warmup={"queries": 2, "seconds": 3.0}, zero_file_scan={"seconds": 0.125,
        "predicate": "x IS NULL", "files_kept": 0, "samples": [0.125]},
        order={"seed": 0, "policies": [r.policy for r in runs], "events": []},
    )  # fmt: skip
    results["config"]["queries"] = 2  # type: ignore[index]
    return results


def _cells(results: dict[str, object]) -> dict[str, dict[str, str]]:
    from lakelayout.evaluation.report import COLUMNS, summary_rows

    return {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in summary_rows(results)}  # type: ignore[arg-type]


def test_report_shows_retimed_seconds_spread_and_overhead() -> None:
    from lakelayout.evaluation.report import footnote, ranking_note

    fast = _timed_run("fast", [1.0, 1.0], [0.5, 1.0])
    slow = _timed_run("slow", [2.0, 2.0], [0.25, None])  # second query kept other files
    results = _v2([fast, slow])
    cells = _cells(results)
    assert cells["fast"]["query s"] == "2.0"
    assert cells["fast"]["re-timed s"] == "1.5" and cells["fast"]["spread"] == "-25%"
    assert cells["slow"]["re-timed s"] == "0.2 (1 of 2 q)" and cells["slow"]["spread"] == "-88%"
    assert cells["fast"]["overhead s"] == "1.5"
    assert cells["fast"]["total s"] == f"{2.0 + 2.5 + 1.5:.1f}"
    # ranked over the query both re-timed: 1.0 vs 2.0 in the stream, 0.5 vs 0.25 re-timed
    assert ranking_note(results) == (
        "Query-time ranking (over the 1 queries re-timed by all) depends on when it was "
        "measured: stream fast < slow; re-timed slow < fast."
    )
    note = footnote(results)
    assert "per-query fixed overhead 0.125 s" in note and "× 2 queries = 0.2 s" in note
    assert "total s = query + rewrite + overhead s" in note
    page = html_report(results)  # type: ignore[arg-type]
    assert "depends on when it was measured" in page and "policy overhead" in page


def test_ranking_note_says_when_both_timings_agree() -> None:
    from lakelayout.evaluation.report import ranking_note

    results = _v2(
        [_timed_run("a", [1.0, 1.0], [0.9, 0.9]), _timed_run("b", [2.0, 2.0], [2.5, 1.0])]
    )
    assert ranking_note(results) == (
        "Query-time ranking: the same in the stream and re-timed in the reverse order."
    )


def test_schema_1_documents_still_render_without_the_new_figures() -> None:
    from lakelayout.evaluation.report import footnote, ranking_note

    results = _results([_run("none", 1), _run("qdtree", 3)])
    for run in results["runs"]:  # type: ignore[attr-defined]
        for q in run["queries"]:
            del q["slot"], q["seconds_retimed"]
        del run["overheads"]
        for key in ("overhead_seconds", "queries_retimed", "query_seconds_retimed", "mean_slot"):
            del run["totals"][key]
    cells = _cells(results)
    assert cells["none"]["re-timed s"] == "-" and cells["none"]["overhead s"] == "0.0"
    assert ranking_note(results) == ""  # type: ignore[arg-type]
    assert "lockstep" not in footnote(results)  # type: ignore[arg-type]
    again = runs_of(results)  # type: ignore[arg-type]
    assert again[0].overheads == [] and again[0].queries[0].slot is None
