"""The ``lakelayout`` command line: scan, describe, optimize, bench, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table as RichTable

from lakelayout.errors import LakelayoutError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Self-organizing data layouts for Delta Lake tables on Spark.",
)
console = Console(width=None if Console().is_terminal else 132)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} TiB"


def _fail(exc: LakelayoutError) -> None:
    console.print(f"[bold red]error:[/] {exc}")
    raise typer.Exit(code=2)


@app.command()
def scan(
    path: Annotated[str, typer.Argument(help="table location")],
    where: Annotated[str, typer.Option("--where", "-w", help="Spark SQL predicate")] = "",
    columns: Annotated[str, typer.Option(help="comma-separated columns to read")] = "",
    measure: Annotated[bool, typer.Option(help="count matching rows: σ, λ, μ, ψ")] = True,
    show: Annotated[int, typer.Option(help="print this many result rows")] = 10,
) -> None:
    """Scan a table with a predicate and print what was skipped."""
    from lakelayout.api import Table

    try:
        table = Table(path)
        cols = [c.strip() for c in columns.split(",") if c.strip()] or None
        result = table.scan(where if where else None, cols, measure=measure)
    except LakelayoutError as exc:
        _fail(exc)
        return
    report = result.report
    grid = RichTable(title=f"scan of {table.uri} at version {report.version}")
    grid.add_column("")
    grid.add_column("total", justify="right")
    grid.add_column("kept", justify="right")
    grid.add_row("files", f"{report.files_total:,}", f"{report.files_kept:,}")
    grid.add_row("bytes", _fmt_bytes(report.bytes_total), _fmt_bytes(report.bytes_kept))
    grid.add_row("rows", f"{report.rows_total:,}", f"{report.rows_kept:,}")
    console.print(grid)
    if report.measured is not None:
        console.print(
            f"matching rows {report.measured.rows_matching:,}  σ={_fmt_ratio(report.sigma)}  "
            f"ψ={_fmt_ratio(report.psi)}  λ={_fmt_ratio(report.lam)}  μ={_fmt_ratio(report.mu)}"
        )
    console.print(f"pruning took {report.pruning_seconds * 1000:.1f} ms")
    if show > 0:
        rows = result.df.limit(show).collect()
        if rows:
            out = RichTable(*rows[0].asDict().keys())
            for row in rows:
                out.add_row(*(str(v) for v in row))
            console.print(out)


@app.command()
def describe(
    path: Annotated[str, typer.Argument(help="table location")],
    history: Annotated[int, typer.Option(help="how many commits to list")] = 10,
) -> None:
    """Files, sizes, rows, per-column statistics coverage and history of a table."""
    from lakelayout.api import Table

    try:
        d = Table(path).describe(history=history)
    except LakelayoutError as exc:
        _fail(exc)
        return
    console.print(f"[bold]{d.uri}[/] version {d.version}")
    console.print(
        f"{d.files:,} files, {d.rows:,} rows, {_fmt_bytes(d.bytes)} "
        f"(files from {_fmt_bytes(d.smallest_file)} to {_fmt_bytes(d.largest_file)})"
    )
    if d.properties:
        console.print("properties: " + ", ".join(f"{k}={v}" for k, v in d.properties.items()))
    cov = RichTable(title="statistics coverage (files with stats)")
    for name in ("column", "type", "min/max", "null count"):
        cov.add_column(name, justify="left" if name in ("column", "type") else "right")
    for c in d.coverage:
        cov.add_row(
            c.name,
            c.dtype,
            f"{c.files_with_min_max}/{d.files}",
            f"{c.files_with_null_count}/{d.files}",
        )
    console.print(cov)
    if d.history:
        hist = RichTable(title="history")
        for name in ("version", "timestamp", "operation"):
            hist.add_column(name)
        for h in d.history:
            hist.add_row(str(h.get("version")), str(h.get("timestamp")), str(h.get("operation")))
        console.print(hist)


@app.command()
def optimize(
    path: Annotated[str, typer.Argument(help="table location")],
    zorder: Annotated[str, typer.Option(help="comma-separated ZORDER BY columns")] = "",
    full: Annotated[bool, typer.Option(help="re-cluster every file (OPTIMIZE FULL)")] = False,
) -> None:
    """OPTIMIZE a table: incremental clustering if clustered, else compaction (or ZORDER BY)."""
    from rich.progress import Progress

    from lakelayout.api import Table
    from lakelayout.cluster import OptimizeHooks

    try:
        table = Table(path)
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("optimizing", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total or None)

            hooks = OptimizeHooks(progress=advance)
            columns = [c.strip() for c in zorder.split(",") if c.strip()]
            if columns:
                metrics = table.optimize.zorder(columns, hooks=hooks)
            else:
                metrics = table.optimize.run(full=full, hooks=hooks)
    except LakelayoutError as exc:
        _fail(exc)
        return
    grid = RichTable(title=f"OPTIMIZE {table.uri}")
    grid.add_column("metric")
    grid.add_column("value", justify="right")
    for name, value in metrics.as_rows():
        grid.add_row(name, value)
    console.print(grid)


bench_app = typer.Typer(
    no_args_is_help=True, help="Replay inserts and queries under layout policies (issue 6)."
)
app.add_typer(bench_app, name="bench")

_POLICY_HELP = (
    "comma-separated: none,sorted,zorder-halfway,liquid,qdtree,pando,sop-z,hilbert,"
    "deltars-zorder,delta-zorder,delta-liquid (delta-*: Delta Lake's own connector)"
)


#: options every ``bench`` dataset command takes (one definition, three commands)
_Queries = Annotated[int, typer.Option(help="queries in the stream")]
_Policies = Annotated[str, typer.Option(help=_POLICY_HELP)]
_Batches = Annotated[int, typer.Option(help="insert batches")]
_Shape = Annotated[str, typer.Option(help="drift or mixed")]
_Segment = Annotated[int, typer.Option(help="queries per drift segment")]
_WorkDir = Annotated[Path, typer.Option(help="data and tables")]
_Mode = Annotated[str, typer.Option(help="logical (metadata costs) or spark (timed scans)")]
_RowsPerFile = Annotated[int, typer.Option(help="rows per inserted file")]
_Seed = Annotated[int, typer.Option(help="workload, data and sampling seed")]
_DEFAULT_POLICIES = "none,sorted,zorder-halfway,liquid,qdtree,deltars-zorder"


def _print_results(results: dict[str, object], html_path: Path) -> None:
    from lakelayout.evaluation.report import (
        COST_COLUMNS,
        SKIPPING_COLUMNS,
        footnote,
        rich_table,
    )

    console.print(rich_table(results, SKIPPING_COLUMNS))  # type: ignore[arg-type]
    console.print(rich_table(results, COST_COLUMNS))  # type: ignore[arg-type]
    console.print(footnote(results), highlight=False)  # type: ignore[arg-type]
    console.print(f"HTML report: {html_path}", highlight=False)


def _bench(dataset: str, out: Path | None, work_dir: Path, policies: str, **kw: object) -> None:
    import time

    from lakelayout.evaluation.runner import run_bench

    target = out or Path("runs") / time.strftime(f"%Y-%m-%d-%H%M%S-{dataset}")
    try:
        results, html_path = run_bench(
            dataset,
            work_dir=work_dir,
            out_dir=target,
            policies=[p.strip() for p in policies.split(",") if p.strip()],
            progress=console.print,
            **kw,  # type: ignore[arg-type]
        )
    except LakelayoutError as exc:
        _fail(exc)
        return
    _print_results(results, html_path)


@bench_app.command("tpch")
def bench_tpch(
    scale: Annotated[float, typer.Option(help="TPC-H scale factor")] = 0.1,
    queries: _Queries = 200,
    policies: _Policies = _DEFAULT_POLICIES,
    mode: _Mode = "logical",
    batches: _Batches = 4,
    rows_per_file: _RowsPerFile = 10_000,
    shape: _Shape = "drift",
    segment: _Segment = 20,
    seed: _Seed = 0,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-tpch)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
) -> None:
    """TPC-H lineitem denormalized, the 13 lineitem templates, replayed under each policy."""
    _bench("tpch", out, work_dir, policies, queries=queries, mode=mode, scale=scale,
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed)  # fmt: skip


@bench_app.command("logs")
def bench_logs(
    rows: Annotated[float, typer.Option(help="rows in the logs table (2e6 is fine)")] = 1e6,
    queries: _Queries = 200,
    policies: _Policies = _DEFAULT_POLICIES,
    mode: _Mode = "logical",
    batches: _Batches = 4,
    rows_per_file: _RowsPerFile = 20_000,
    shape: _Shape = "drift",
    segment: _Segment = 20,
    seed: _Seed = 0,
    indexes: Annotated[
        bool,
        typer.Option(help="declare the skipping indexes (Prefix, Suffix, UDF ValueList, ...)"),
    ] = True,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-logs)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
) -> None:
    """The logs table (LIKE, map extraction, month(ts), a UDF, bounding boxes) under each
    policy, with its skipping indexes declared on every table (--no-indexes: min/max only)."""
    _bench("logs", out, work_dir, policies, queries=queries, mode=mode, rows=int(rows),
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed, indexes=indexes)  # fmt: skip


@bench_app.command("taxi")
def bench_taxi(
    rows: Annotated[float, typer.Option(help="rows in the taxi table (2e6 is fine)")] = 1e6,
    queries: _Queries = 200,
    policies: _Policies = _DEFAULT_POLICIES,
    mode: _Mode = "logical",
    batches: _Batches = 4,
    rows_per_file: _RowsPerFile = 20_000,
    shape: _Shape = "drift",
    segment: _Segment = 20,
    seed: _Seed = 0,
    indexes: Annotated[
        bool, typer.Option(help="declare the dataset's skipping indexes (taxi declares none)")
    ] = True,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-taxi)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
) -> None:
    """The correlated taxi table (distance, fare, duration, pickup time ranges and their
    correlated combinations) under each policy."""
    _bench("taxi", out, work_dir, policies, queries=queries, mode=mode, rows=int(rows),
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed, indexes=indexes)  # fmt: skip


@bench_app.command("report")
def bench_report(
    run: Annotated[Path, typer.Argument(help="run directory or results.json")],
) -> None:
    """(Re)write the HTML report of a run and print its table."""
    from lakelayout.evaluation.report import load_json, write_report

    try:
        results = load_json(run)
    except (OSError, ValueError, KeyError) as exc:
        console.print(f"[bold red]error:[/] cannot read results from {run}: {exc}")
        raise typer.Exit(code=2) from None
    _, html_path = write_report(results, run if run.is_dir() else run.parent)
    _print_results(results, html_path)


@app.command()
def demo(
    scale: Annotated[float, typer.Option(help="TPC-H scale factor")] = 0.1,
    work_dir: Annotated[Path, typer.Option(help="where data and tables go")] = Path("demo-data"),
    queries: Annotated[int, typer.Option(help="queries in the replayed stream")] = 39,
) -> None:
    """TPC-H replay in spark mode: seven policies side by side, HTML report written next to it."""
    from lakelayout.demo import run_demo

    try:
        results, html_path = run_demo(
            scale=scale, work_dir=work_dir, queries=queries, progress=console.print
        )
    except LakelayoutError as exc:
        _fail(exc)
        return
    _print_results(results, html_path)
    console.print(
        "σ selectivity, ψ fraction of rows read (Ta-Shma et al. §IV-A); G = geometric mean; "
        "bytes scanned summed over queries; total = query + rewrite seconds.",
        highlight=False,
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
