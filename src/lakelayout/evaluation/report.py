"""Results of a replay for people: JSON on disk, a rich table, a self-contained HTML page.

The HTML has three inline SVG plots drawn here (no plotting dependency):
cumulative cost per policy over the stream with template switches and
inserts marked, bars of total query, rewrite and overhead cost, and per
template the scanning factor G(ψ) against the selectivity G(σ) (log–log; the
diagonal ψ = σ is a perfect layout).

Timings that depend on when they were taken are shown as such: next to each
policy's query seconds stand the same queries re-timed after the stream in
the reverse order and the spread between the two, and :func:`ranking_note`
says whether the query-time ranking is the same in both.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable

from lakelayout.errors import InvalidOption
from lakelayout.evaluation.metrics import PolicyRun, cumulative_cost
from lakelayout.evaluation.policies import policy_label

COLORS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip


#: the rewrite part of the stacked bars (query cost uses COLORS[0])
REWRITE_COLOR = "#ff7f0e"
#: the policy-overhead part of the stacked bars
OVERHEAD_COLOR = "#7f7f7f"


def save_json(results: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    return path


def load_json(path: Path) -> dict[str, Any]:
    """Results from a file or a run directory holding ``results.json``."""
    target = path / "results.json" if path.is_dir() else path
    return dict(json.loads(target.read_text(encoding="utf-8")))


def runs_of(results: dict[str, Any]) -> list[PolicyRun]:
    return [PolicyRun.from_dict(r) for r in results["runs"]]


def _f(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


COLUMNS = (
    "policy", "files", "rows/file (max)", "G(σ)", "G(ψ)", "G(ψ)/G(σ)", "bytes scanned", "vs none",
    "query s", "re-timed s", "spread", "rewrite s", "overhead s", "total s", "write amp.",
)  # fmt: skip


def _files(totals: dict[str, Any]) -> str:
    """Final live files, and how far from the files inserted when not equal."""
    ratio = totals.get("files_vs_inserted")
    if ratio is None or round(ratio - 1, 3) == 0:
        return str(totals["final_files"])
    return f"{totals['final_files']} ({ratio - 1:+.0%})"


def _retimed(totals: dict[str, Any]) -> tuple[str, str]:
    """(re-timed query seconds, spread vs the stream) of one policy, "-" when not re-timed.

    When some queries could not be re-timed with the same files, the count
    re-timed is shown and both figures cover only those queries.
    """
    again = totals.get("query_seconds_retimed")
    if again is None:
        return "-", "-"
    n, total = totals.get("queries_retimed", 0), totals["queries"]
    text = f"{again:.1f}" if n == total else f"{again:.1f} ({n} of {total} q)"
    ratio = totals.get("retime_ratio")
    return text, _f(None if ratio is None else ratio - 1, "+.0%")


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per policy (the terminal table and the HTML table)."""
    runs = results["runs"]
    base = next((r["totals"]["bytes_kept"] for r in runs if r["policy"] == "none"), None)
    rows = []
    for r in runs:
        t = r["totals"]
        retimed, spread = _retimed(t)
        rows.append(
            [
                policy_label(r["policy"]),
                _files(t),
                f"{_f(t.get('rows_per_file_mean'), ',.0f')} ({_f(t.get('rows_per_file_max'), ',')})",
                _f(t["g_sigma"]),
                _f(t["g_psi"]),
                _f(t["g_psi_over_g_sigma"], ".1f"),
                f"{t['bytes_kept'] / 2**20:,.0f} MiB",
                _f(t["bytes_kept"] / base if base else None, ".2f"),
                f"{t['query_cost_seconds']:.1f}",
                retimed,
                spread,
                f"{t['rewrite_seconds']:.1f}",
                f"{t.get('overhead_seconds', 0.0):.1f}",
                f"{t['total_cost_seconds']:.1f}",
                _f(t["write_amplification"], ".2f"),
            ]
        )
    return rows


#: the terminal shows COLUMNS as two tables that fit a ~110-column terminal
SKIPPING_COLUMNS = COLUMNS[:8]
COST_COLUMNS = (COLUMNS[0], *COLUMNS[8:])


def rich_table(results: dict[str, Any], columns: Sequence[str] = COLUMNS) -> RichTable:
    """The summary (``columns`` of it, in :data:`COLUMNS` order) as a rich table."""
    d = results["dataset"]
    title = (
        f"{d['name']} replay ({results['mode']} mode): {d['rows']:,} rows in {d['batches']} "
        f"inserts, {results['config']['queries']} queries"
    )
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise InvalidOption(f"unknown report column(s) {unknown}; known: {', '.join(COLUMNS)}")
    keep = [i for i, name in enumerate(COLUMNS) if name in columns]
    notes = [file_count_note(results)] if any(c in SKIPPING_COLUMNS[1:] for c in columns) else []
    if any(c in COST_COLUMNS[1:] for c in columns):
        notes.append(ranking_note(results))
    table = RichTable(title=title, caption=" ".join(n for n in notes if n) or None)
    for i in keep:
        name = COLUMNS[i]
        table.add_column(name, justify="left" if name == "policy" else "right", no_wrap=True)
    for row in summary_rows(results):
        table.add_row(*(row[i] for i in keep))
    return table


def file_count_note(results: dict[str, Any]) -> str:
    """How far file counts are from equal: the tolerance and the runs outside it."""
    check = results.get("file_counts")
    if not check:
        return ""
    outside = check.get("outside") or []
    tol = f"±{check['tolerance']:.0%}"
    if not outside:
        return f"every policy ends within {tol} of the files inserted (equal file counts)."
    return (
        f"outside {tol} of the files inserted: {', '.join(outside)} "
        "(their skipping is not compared at equal file counts)."
    )


def ranking_note(results: dict[str, Any]) -> str:
    """Whether the policies rank the same by query seconds in the stream and re-timed.

    Both rankings sum the same queries: those every policy re-timed with the
    same files (all of them unless an index lost the metadata of files a
    rewrite removed). "" when the run was not re-timed.
    """
    runs = results["runs"]
    if not runs:
        return ""
    common = set.intersection(
        *(
            {q["position"] for q in r["queries"] if q.get("seconds_retimed") is not None}
            for r in runs
        )
    )
    if not common:
        return ""

    def rank(key: str) -> list[str]:
        sums = {
            r["policy"]: sum(q[key] for q in r["queries"] if q["position"] in common) for r in runs
        }
        return sorted(sums, key=lambda name: (sums[name], name))

    first, again = rank("seconds"), rank("seconds_retimed")
    total = min(len(r["queries"]) for r in runs)
    over = "" if len(common) == total else f" (over the {len(common)} queries re-timed by all)"
    if first == again:
        return (
            f"Query-time ranking{over}: the same in the stream and re-timed in the reverse order."
        )
    return (
        f"Query-time ranking{over} depends on when it was measured: "
        f"stream {' < '.join(first)}; re-timed {' < '.join(again)}."
    )


def order_note(results: dict[str, Any]) -> str:
    """How the replay kept the policy order from deciding: warm-up, rotation, re-timing."""
    parts = []
    warm = results.get("warmup")
    if warm:
        parts.append(
            f"untimed warm-up first ({warm['queries']} queries, a write and a rewrite, "
            f"{warm['seconds']:.0f} s)"
        )
    order = results.get("order")
    if order:
        slots = [r["totals"].get("mean_slot") for r in results["runs"]]
        known = [s for s in slots if s is not None]
        spread = f"; mean place {min(known):.2f}–{max(known):.2f}" if known else ""
        parts.append(
            f"policies in lockstep, order rotated per event (seed {order['seed']}{spread}, "
            f"0 = first of {len(order['policies'])})"
        )
    if (results.get("retime") or {}).get("done"):
        parts.append("re-timed s: every query again after the stream, in the reverse order")
    zero = results.get("zero_file_scan")
    if zero:
        queries = results["config"]["queries"]
        parts.append(
            f"per-query fixed overhead {zero['seconds']:.3f} s (median scan keeping zero files: "
            f"{zero['predicate']}), × {queries} queries = {zero['seconds'] * queries:.1f} s "
            "of every policy's query s"
        )
    return "; ".join(parts)


def query_seconds_note(results: dict[str, Any]) -> str:
    """What a policy's query seconds are in this run.

    >>> query_seconds_note({"mode": "spark", "config": {"time_every": 10}})
    'query s = measured Spark time of every 10th query, each standing for the 10 from it'
    """
    if results["mode"] != "spark":
        return "query s = bytes read × full-scan s / table bytes"
    every = int(results["config"].get("time_every", 1))
    if every == 1:
        return "query s = measured Spark time"
    return (
        f"query s = measured Spark time of every {every}th query, "
        f"each standing for the {every} from it"
    )


def counts_note(results: dict[str, Any]) -> str:
    """Which queries the precision indicators (σ, λ, µ) are over ('' when all).

    >>> counts_note({"config": {"count_every": 5}})
    'σ, λ, µ over every 5th query (matching rows counted there only)'
    """
    every = int(results["config"].get("count_every", 1))
    if every == 1:
        return ""
    return f"σ, λ, µ over every {every}th query (matching rows counted there only)"


def footnote(results: dict[str, Any]) -> str:
    m = results["machine"]
    order = order_note(results)
    counts = counts_note(results)
    return (
        f"machine: nproc={m['nproc']}, {m['memory_gib']} GiB, {m['platform']}; "
        f"seed {results['config']['seed']}; full scan {results['full_scan_seconds']:.2f} s; "
        f"{query_seconds_note(results)}; "
        f"total s = query + rewrite + overhead s; "
        + (f"{counts}; " if counts else "")
        + (f"{order}; " if order else "")
        + "timings from one run."
    )


# --------------------------------------------------------------------------- SVG


def _svg(width: int, height: int, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">' + "".join(body) + "</svg>"
    )


def _legend(names: Sequence[str], x: int, y: int, colors: Sequence[str] = COLORS) -> list[str]:
    out = []
    for k, name in enumerate(names):
        c = colors[k % len(colors)]
        out.append(f'<rect x="{x}" y="{y + 15 * k}" width="10" height="10" fill="{c}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 9 + 15 * k}">{html.escape(name)}</text>')
    return out


def cumulative_svg(results: dict[str, Any]) -> str:
    """Cumulative cost (s) over stream positions; switches dashed grey, inserts dotted."""
    runs = runs_of(results)
    n = int(results["events"])
    curves = [cumulative_cost(r, n) for r in runs]
    top = max((c[-1] for c in curves if c), default=1.0) or 1.0
    w, h, left, bottom, right = 760, 320, 55, 30, 170
    pw, ph = w - left - right, h - bottom - 15

    def x(p: float) -> float:
        return left + pw * p / max(n - 1, 1)

    def y(v: float) -> float:
        return 15 + ph * (1 - v / top)

    body = [f'<line x1="{left}" y1="{15 + ph}" x2="{left + pw}" y2="{15 + ph}" stroke="#000"/>']
    body.append(f'<line x1="{left}" y1="15" x2="{left}" y2="{15 + ph}" stroke="#000"/>')
    for p in results.get("switches", []):
        body.append(
            f'<line x1="{x(p):.1f}" y1="15" x2="{x(p):.1f}" y2="{15 + ph}" '
            'stroke="#aaa" stroke-dasharray="4,3"/>'
        )
    for p in results.get("inserts_at", []):
        body.append(
            f'<line x1="{x(p):.1f}" y1="15" x2="{x(p):.1f}" y2="{15 + ph}" '
            'stroke="#444" stroke-dasharray="1,3"/>'
        )
    for k, curve in enumerate(curves):
        pts = " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in enumerate(curve))
        c = COLORS[k % len(COLORS)]
        body.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.6" points="{pts}"/>')
    for frac in (0.0, 0.5, 1.0):
        body.append(f'<text x="5" y="{y(top * frac) + 4:.1f}">{top * frac:.0f} s</text>')
    body.append(f'<text x="{left}" y="{h - 8}">stream position → (dashed: template switch, '
                "dotted: insert batch)</text>")  # fmt: skip
    body += _legend([policy_label(r.policy) for r in runs], left + pw + 12, 20)
    return _svg(w, h, body)


def bars_svg(results: dict[str, Any]) -> str:
    """Stacked bars: query cost, rewrite time and policy overhead per policy."""
    runs = results["runs"]
    totals = [(policy_label(r["policy"]), r["totals"]) for r in runs]
    top = max(
        (
            t["query_cost_seconds"] + t["rewrite_seconds"] + t.get("overhead_seconds", 0.0)
            for _, t in totals
        ),
        default=1.0,
    )
    top = top or 1.0
    w, row, left = 760, 22, 120
    h = 30 + row * len(totals) + 35
    pw = w - left - 120
    body = []
    for k, (name, t) in enumerate(totals):
        yy = 10 + row * k
        overhead = t.get("overhead_seconds", 0.0)
        q = pw * t["query_cost_seconds"] / top
        rw = pw * t["rewrite_seconds"] / top
        ov = pw * overhead / top
        body.append(f'<text x="5" y="{yy + 14}">{html.escape(name)}</text>')
        body.append(f'<rect x="{left}" y="{yy}" width="{q:.1f}" height="16" fill="{COLORS[0]}"/>')
        body.append(
            f'<rect x="{left + q:.1f}" y="{yy}" width="{rw:.1f}" height="16" fill="{REWRITE_COLOR}"/>'
        )
        body.append(
            f'<rect x="{left + q + rw:.1f}" y="{yy}" width="{ov:.1f}" height="16" '
            f'fill="{OVERHEAD_COLOR}"/>'
        )
        body.append(
            f'<text x="{left + q + rw + ov + 5:.1f}" y="{yy + 13}">'
            f"{t['query_cost_seconds']:.1f} + {t['rewrite_seconds']:.1f} + {overhead:.1f} s</text>"
        )
    body += _legend(
        ["query cost", "rewrite time", "policy overhead"],
        left,
        15 + row * len(totals),
        colors=(COLORS[0], REWRITE_COLOR, OVERHEAD_COLOR),
    )
    return _svg(w, h + 20, body)


def scatter_svg(results: dict[str, Any]) -> str:
    """Per template and policy: G(ψ) (fraction read) against G(σ) (fraction matching), log–log."""
    runs = runs_of(results)
    points = [
        (k, name, v["g_sigma"], v["g_psi"])
        for k, r in enumerate(runs)
        for name, v in r.per_template().items()
        if v["g_sigma"] and v["g_psi"]
    ]
    lo = min((min(float(s), float(p)) for _, _, s, p in points), default=1e-4)
    lo_exp = math.floor(math.log10(max(lo, 1e-9)))
    w, h, left, bottom, right = 760, 360, 55, 35, 170
    pw, ph = w - left - right, h - bottom - 15

    def pos(v: float, size: int) -> float:
        return size * (math.log10(v) - lo_exp) / (0 - lo_exp)

    body = [f'<rect x="{left}" y="15" width="{pw}" height="{ph}" fill="none" stroke="#000"/>']
    body.append(
        f'<line x1="{left}" y1="{15 + ph}" x2="{left + pw}" y2="15" stroke="#aaa" '
        'stroke-dasharray="4,3"/>'
    )
    for e in range(lo_exp, 1):
        xx, yy = left + pos(10.0**e, pw), 15 + ph - pos(10.0**e, ph)
        body.append(f'<text x="{xx - 10:.1f}" y="{h - 20}">1e{e}</text>')
        body.append(f'<text x="5" y="{yy + 4:.1f}">1e{e}</text>')
    for k, name, s, p in points:
        xx, yy = left + pos(float(s), pw), 15 + ph - pos(float(p), ph)
        c = COLORS[k % len(COLORS)]
        body.append(
            f'<circle cx="{xx:.1f}" cy="{yy:.1f}" r="3.5" fill="{c}" fill-opacity="0.75">'
            f"<title>{html.escape(runs[k].policy)} {html.escape(name)}: σ={float(s):.3g} "
            f"ψ={float(p):.3g}</title></circle>"
        )
    body.append(f'<text x="{left}" y="{h - 5}">G(σ) selectivity per template → '
                "(y: G(ψ) fraction of rows read; dashed: ψ = σ)</text>")  # fmt: skip
    body += _legend([policy_label(r.policy) for r in runs], left + pw + 12, 20)
    return _svg(w, h, body)


def html_report(results: dict[str, Any]) -> str:
    """The self-contained HTML page."""
    d = results["dataset"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>"
        for row in summary_rows(results)
    )
    described = "".join(
        f"<li><b>{html.escape(policy_label(r['policy']))}</b>: {html.escape(r['description'])}</li>"
        for r in results["runs"]
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>lakelayout replay: {html.escape(d["name"])}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
td:first-child{{text-align:left}}</style></head><body>
<h1>lakelayout replay: {html.escape(d["name"])} ({html.escape(results["mode"])} mode)</h1>
<p>{d["rows"]:,} rows inserted in {d["batches"]} batches (about {d["rows_per_file"]:,} rows
per file, {d["blocks_per_batch"]} files per batch), {results["config"]["queries"]} queries,
{len(results.get("switches", []))} template switches.</p>
<p>{html.escape(footnote(results))}</p>
<p>{html.escape(file_count_note(results))}</p>
<table><tr>{head}</tr>{body}</table>
<p>{html.escape(ranking_note(results))}</p>
<ul>{described}</ul>
<h2>Cumulative cost over the stream</h2>{cumulative_svg(results)}
<h2>Query cost, rewrite time and policy overhead</h2>{bars_svg(results)}
<h2>Scanning factor vs selectivity per template</h2>{scatter_svg(results)}
<p>σ: fraction of rows matching; ψ: fraction of rows read; G: geometric mean over queries
with σ &gt; 0 (Ta-Shma et al. §IV-A). Write amplification = (bytes inserted + bytes rewritten)
/ bytes inserted. Total s = query + rewrite + overhead s (overhead: the time a policy reports
spending on its own decisions). Re-timed s: the same queries timed again after the stream, in
the reverse order, at the table versions they first ran on; spread = re-timed / stream − 1.</p>
</body></html>
"""


def write_report(results: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """``results.json`` and ``report.html`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = save_json(results, out_dir / "results.json")
    html_path = out_dir / "report.html"
    html_path.write_text(html_report(results), encoding="utf-8")
    return json_path, html_path
