"""B2-online: the online policies and their oracles side by side, in full-scan units.

Every replay cost is in seconds (a logical query costs its fraction of the
full-scan time; a rewrite its measured time). Dividing by the replay's
full-scan time gives OReO's units: a query costs the fraction of the table
it reads, a rewrite costs α. The table reports per policy what it knows
(online: one query at a time; oracle: the whole workload), its switches,
query and rewrite costs in full scans, the total in full scans and seconds,
the policy's own deciding (its fits, pricing and planning during the stream; the
oracles' planning before it is apart), and the ratios the issue's goals are stated in: ``static / policy`` (how many
times cheaper than the best static layout) and ``policy / offline-optimal``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table as RichTable

#: what each policy knows
KNOWS = {
    "oreo": "online",
    "oreo-uniform": "online",
    "oreo-recent": "online",
    "oreo-recent-all-files": "online",
    "oreo-recent-per-block": "online",
    "oreo-recent-no-catch-up": "online",
    "greedy": "online",
    "regret": "online",
    "static": "oracle",
    "offline-optimal": "oracle",
}


def online_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per online policy or oracle of ``results`` (others are left out)."""
    full = float(results.get("full_scan_seconds") or 0.0)
    rows = []
    for run in results["runs"]:
        if run["policy"] not in KNOWS:
            continue
        totals = run["totals"]
        query_s = float(totals["query_cost_seconds"])
        rewrite_s = float(totals["rewrite_seconds"])
        # the policy's own deciding (an online policy's fits, pricing and planning; the
        # oracles' planning before the stream is apart, as ``fit_seconds``)
        deciding_s = float(totals.get("overhead_seconds", 0.0))
        switches = sum(str(r["kind"]).startswith("switch to") for r in run["rewrites"])
        catch_ups = sum(str(r["kind"]).startswith("catch-up") for r in run["rewrites"])
        rows.append(
            {
                "policy": run["policy"],
                "knows": KNOWS[run["policy"]],
                "switches": switches,
                "catch_ups": catch_ups,
                "rewrites": len(run["rewrites"]),
                "query_scans": query_s / full if full else None,
                "rewrite_scans": rewrite_s / full if full else None,
                "deciding_scans": deciding_s / full if full else None,
                "total_scans": (query_s + rewrite_s + deciding_s) / full if full else None,
                "total_seconds": query_s + rewrite_s + deciding_s,
                "description": run["description"],
            }
        )
    by_name = {r["policy"]: r for r in rows}
    for row in rows:
        static = by_name.get("static")
        best = by_name.get("offline-optimal")
        row["static_over_this"] = (
            static["total_seconds"] / row["total_seconds"]
            if static and row["total_seconds"]
            else None
        )
        row["this_over_optimal"] = (
            row["total_seconds"] / best["total_seconds"] if best and best["total_seconds"] else None
        )
    return rows


def _f(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def online_table(results: Mapping[str, Any]) -> RichTable | None:
    """The B2-online table, or None when the run has no online policy or oracle."""
    rows = online_rows(results)
    if not rows:
        return None
    table = RichTable(
        title=f"B2-online ({results['mode']} mode): costs in full scans "
        f"(1 full scan = {results['full_scan_seconds']:.3f} s)"
    )
    for name in (
        "policy",
        "knows",
        "switches",
        "queries",
        "rewrites",
        "deciding",
        "total",
        "total s",
        "static / this",
        "this / offline-opt",
    ):
        table.add_column(name, justify="left" if name in ("policy", "knows") else "right")
    for r in rows:
        table.add_row(
            r["policy"],
            r["knows"],
            str(r["switches"]) + (f" (+{r['catch_ups']} catch-ups)" if r["catch_ups"] else ""),
            _f(r["query_scans"], ".1f"),
            _f(r["rewrite_scans"], ".1f"),
            _f(r["deciding_scans"], ".2f"),
            _f(r["total_scans"], ".1f"),
            _f(r["total_seconds"], ".1f"),
            _f(r["static_over_this"]),
            _f(r["this_over_optimal"]),
        )
    return table
