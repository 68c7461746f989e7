"""Results of a replay for people: JSON on disk, a rich table, a self-contained HTML page.

The HTML has three inline SVG plots drawn here (no plotting dependency):
cumulative cost per policy over the stream with template switches and
inserts marked, bars of total query vs rewrite cost, and per template the
scanning factor G(ψ) against the selectivity G(σ) (log–log; the diagonal
ψ = σ is a perfect layout).
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
    "query s", "rewrite s", "total s", "write amp.",
)  # fmt: skip


def _files(totals: dict[str, Any]) -> str:
    """Final live files, and how far from the files inserted when not equal."""
    ratio = totals.get("files_vs_inserted")
    if ratio is None or round(ratio - 1, 3) == 0:
        return str(totals["final_files"])
    return f"{totals['final_files']} ({ratio - 1:+.0%})"


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per policy (the terminal table and the HTML table)."""
    runs = results["runs"]
    base = next((r["totals"]["bytes_kept"] for r in runs if r["policy"] == "none"), None)
    rows = []
    for r in runs:
        t = r["totals"]
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
                f"{t['rewrite_seconds']:.1f}",
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
    table = RichTable(title=title, caption=file_count_note(results) or None)
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


def footnote(results: dict[str, Any]) -> str:
    m = results["machine"]
    return (
        f"machine: nproc={m['nproc']}, {m['memory_gib']} GiB, {m['platform']}; "
        f"seed {results['config']['seed']}; full scan {results['full_scan_seconds']:.2f} s; "
        f"{'query s = measured Spark time' if results['mode'] == 'spark' else 'query s = bytes read × full-scan s / table bytes'}; "
        f"timings from one run."
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
    """Stacked bars: query cost and rewrite time per policy."""
    runs = results["runs"]
    totals = [(policy_label(r["policy"]), r["totals"]) for r in runs]
    top = max((t["query_cost_seconds"] + t["rewrite_seconds"] for _, t in totals), default=1.0)
    top = top or 1.0
    w, row, left = 760, 22, 120
    h = 30 + row * len(totals) + 20
    pw = w - left - 120
    body = []
    for k, (name, t) in enumerate(totals):
        yy = 10 + row * k
        q = pw * t["query_cost_seconds"] / top
        rw = pw * t["rewrite_seconds"] / top
        body.append(f'<text x="5" y="{yy + 14}">{html.escape(name)}</text>')
        body.append(f'<rect x="{left}" y="{yy}" width="{q:.1f}" height="16" fill="{COLORS[0]}"/>')
        body.append(
            f'<rect x="{left + q:.1f}" y="{yy}" width="{rw:.1f}" height="16" fill="{REWRITE_COLOR}"/>'
        )
        body.append(
            f'<text x="{left + q + rw + 5:.1f}" y="{yy + 13}">'
            f"{t['query_cost_seconds']:.1f} + {t['rewrite_seconds']:.1f} s</text>"
        )
    body += _legend(
        ["query cost", "rewrite time"],
        left,
        15 + row * len(totals),
        colors=(COLORS[0], REWRITE_COLOR),
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
<ul>{described}</ul>
<h2>Cumulative cost over the stream</h2>{cumulative_svg(results)}
<h2>Query cost vs rewrite time</h2>{bars_svg(results)}
<h2>Scanning factor vs selectivity per template</h2>{scatter_svg(results)}
<p>σ: fraction of rows matching; ψ: fraction of rows read; G: geometric mean over queries
with σ &gt; 0 (Ta-Shma et al. §IV-A). Write amplification = (bytes inserted + bytes rewritten)
/ bytes inserted.</p>
</body></html>
"""


def write_report(results: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """``results.json`` and ``report.html`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = save_json(results, out_dir / "results.json")
    html_path = out_dir / "report.html"
    html_path.write_text(html_report(results), encoding="utf-8")
    return json_path, html_path
