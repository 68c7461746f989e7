"""The ``lakelayout`` command line: scan, describe, optimize, vacuum, the advisor (log,
advise, calibrate, decisions), online reorganization, bench, demo."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from lakelayout import arguments as args
from lakelayout.errors import InvalidOption, LakelayoutError
from lakelayout.units import format_bytes

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Self-organizing data layouts for Delta Lake tables on Spark.",
)
# no markup: every text printed holds data (values, paths, logged predicates) that
# Rich would read as tags ("[bold]x" shown as x, "[/]" an error after a commit; an audit);
# styles are given as Text spans instead
console = Console(width=None if Console().is_terminal else 132, markup=False)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


#: one name of ``--columns`` and the comma after it: in backticks (two are one) or bare
_COLUMN = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([^,`]*?))\s*(?:,|$)")


def column_list(text: str) -> list[str]:
    """Column names separated by commas; a name in backticks is taken as written, commas
    and spaces included (two backticks in it are one), as Spark quotes names (a column
    ``x,y`` could not be named; an audit). Spaces around a bare name are dropped.

    >>> column_list("a, `x,y` ,` b`,`q``t`")
    ['a', 'x,y', ' b', 'q`t']
    """
    names: list[str] = []
    at = 0
    while at < len(text):
        found = _COLUMN.match(text, at)
        if found is None or found.end() == at:
            raise InvalidOption(
                f"--columns: cannot read {text!r} from character {at + 1} (a backtick is not "
                "closed, or text follows a name in backticks)"
            )
        quoted, bare = found.groups()
        if quoted is not None:
            names.append(quoted.replace("``", "`"))
        elif bare:
            names.append(bare)
        at = found.end()
    return names


def _fail(exc: LakelayoutError) -> None:
    """One line on the console, exit code 2: the message as is (no markup, no wrapping)."""
    message = " ".join(str(exc).split())
    console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    raise typer.Exit(code=2)


def _at_least(value: int, low: int, option: str) -> None:
    """InvalidOption unless ``low <= value <= MAX_COUNT`` (beyond, Spark or delta-rs
    failed later with an "unexpected" error: an audit)."""
    if value < low:
        raise InvalidOption(f"{option} must be >= {low}, got {value}")
    if value > args.MAX_COUNT:
        raise InvalidOption(f"{option} must be <= {args.MAX_COUNT:,}, got {value:,}")


def _when(millis: Any) -> str:
    """A commit timestamp (milliseconds since the epoch) in UTC, ISO 8601."""
    if not isinstance(millis, int | float) or isinstance(millis, bool):
        return str(millis)
    moment = dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)
    return moment.isoformat(timespec="seconds")


@app.command()
def scan(
    path: Annotated[str, typer.Argument(help="table location")],
    where: Annotated[str, typer.Option("--where", "-w", help="Spark SQL predicate")] = "",
    columns: Annotated[
        str, typer.Option(help="comma-separated columns to read (`x,y` in backticks: one name)")
    ] = "",
    measure: Annotated[bool, typer.Option(help="count matching rows: σ, λ, μ, ψ")] = True,
    show: Annotated[int, typer.Option(help="print this many result rows")] = 10,
) -> None:
    """Scan a table with a predicate and print what was skipped."""
    from lakelayout.api import Table

    try:
        _at_least(show, 0, "--show")
        table = Table(path)
        cols = column_list(columns) or None
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
    grid.add_row("bytes", format_bytes(report.bytes_total), format_bytes(report.bytes_kept))
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
    console.print(Text.assemble((d.uri, "bold"), f" version {d.version}"))
    console.print(
        f"{d.files:,} files, {d.rows:,} rows, {format_bytes(d.bytes)} "
        f"(files from {format_bytes(d.smallest_file)} to {format_bytes(d.largest_file)})"
    )
    if d.partition_columns:
        console.print("partitioned by: " + ", ".join(d.partition_columns))
    if d.properties:
        console.print("properties: " + ", ".join(f"{k}={v}" for k, v in d.properties.items()))
    cov = RichTable(title="statistics coverage (files with stats)")
    for name in ("column", "type", "min/max", "null count"):
        cov.add_column(name, justify="left" if name in ("column", "type") else "right")
    for c in d.coverage:
        cov.add_row(
            c.name + (" (partition)" if c.name in d.partition_columns else ""),
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
            hist.add_row(str(h.get("version")), _when(h.get("timestamp")), str(h.get("operation")))
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
        columns = [c.strip() for c in zorder.split(",") if c.strip()]
        if columns and full:
            raise InvalidOption(
                "--full re-clusters a clustered table; it does not go with --zorder"
            )
        table = Table(path)
        # a bar only on a terminal (elsewhere Rich ended it with an empty line)
        with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
            task = progress.add_task("optimizing", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total or None)

            hooks = OptimizeHooks(progress=advance)
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


#: pyspark's loggers that print every analysis error again, stack trace and all, as JSON
#: on stderr: the error reaches the user once, as the command's one line
_SPARK_ERROR_ECHOES = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@app.callback()
def _before_every_command() -> None:
    if not os.environ.get("LAKELAYOUT_DEBUG"):
        for name in _SPARK_ERROR_ECHOES:
            logging.getLogger(name).setLevel(logging.CRITICAL)


online_app = typer.Typer(no_args_is_help=True, help="Online reorganization (OReO) of a table.")
app.add_typer(online_app, name="online")


def _fmt_num(value: object, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"  # type: ignore[arg-type]


@online_app.command("status")
def online_status(path: Annotated[str, typer.Argument(help="table location")]) -> None:
    """Layout the table is in, candidate states and their counters, phase, α, costs so far."""
    from lakelayout.api import Table

    try:
        online = Table(path).online
        s = online.status()
        running = [h for h in online.history() if h["status"] == "pending"]
    except LakelayoutError as exc:
        _fail(exc)
        return
    state = "enabled" if s["enabled"] else "disabled"
    console.print(
        Text.assemble(
            (str(s["table"]), "bold"), f" online reorganization {state} (policy {s['policy']})"
        )
    )
    m = s.get("alpha_measurement") or {}
    how = "given"
    if m.get("method") == "measured":
        how = (
            f"measured: rewrite {_fmt_num(m.get('rewrite_seconds'))} s / (full scan "
            f"{_fmt_num(m.get('scan_seconds'), 3)} s - fixed "
            f"{_fmt_num(m.get('fixed_seconds'), 3)} s) on {m.get('files')} files, "
            f"{format_bytes(int(m.get('bytes') or 0))}, {m.get('layout')}"
        )
    console.print(f"α = {_fmt_num(s['alpha'])} ({how})", highlight=False)
    console.print(
        f"queries {s['queries']}  phase {s['phase'] if s['phase'] is not None else '-'}  "
        f"switches {s['switches']}  catch-ups "
        f"{s.get('catch_ups', 0) if s.get('catch_up', True) else 'off'}  "
        f"failed rewrites {s['failed_rewrites']}  "
        f"window {s['window']}  interval {s['interval']}  ε {s['epsilon']:g}  "
        f"γ {s['gamma']:g}  predictor {s.get('predictor', 'phase')}"
        f"{_predictor_detail(s)}"
        f"{'  mid-phase join' if s.get('mid_phase_join') else ''}"
        f"{'  fit before a draw' if s.get('fit_before_draw') else ''}  "
        f"max states {s['max_states']}  history {s['history']}",
        highlight=False,
    )
    console.print(f"layouts compared {_admission(s)}", highlight=False)
    if s.get("families"):
        console.print(f"families {', '.join(s['families'])}", highlight=False)
    pending = "  (rewrite running)" if s["rewrite_pending"] else ""
    if running:
        h = running[-1]
        pending = (
            f"  ({h.get('kind', 'switch')} to {h['target_label']} [{h['target']}] running for "
            f"{max(0.0, time.time() - float(h['started'])):.0f} s: {len(h.get('inputs') or [])}"
            f" files to rewrite, process {h.get('owner') or '?'})"
        )
    console.print(
        f"table laid out by: {s['applied_label']} [{s['applied']}]{pending}",
        highlight=False,
    )
    console.print(
        f"cost so far (full scans): queries {_fmt_num(s['query_cost'])} + reorganizations "
        f"{_fmt_num(s['reorganization_cost'])} = "
        f"{_fmt_num(s['query_cost'] + s['reorganization_cost'])}; "
        f"rewrites took {_fmt_num(s['rewrite_seconds'])} s",
        highlight=False,
    )
    grid = RichTable(title="states")
    for name in ("id", "layout", "blocks", "counter", "active", "would have cost", ""):
        grid.add_column(name, justify="right" if name in ("blocks", "counter") else "left")
    for st in s["states"]:
        marks = " ".join(
            m for m, on in (("table", st["applied"]), ("reorganizer", st["current"])) if on
        )
        grid.add_row(
            st["id"],
            st["label"],
            "-" if st["blocks"] is None else str(st["blocks"]),
            _fmt_num(st["counter"]),
            "yes" if st["active"] else "no",
            _fmt_num(st["would_have_cost"]),
            marks,
        )
    console.print(grid)
    if s.get("last_error"):
        console.print(
            Text.assemble(("last error:", "bold red"), f" {s['last_error']}"), highlight=False
        )


@online_app.command("history")
def online_history(path: Annotated[str, typer.Argument(help="table location")]) -> None:
    """Every switch (and catch-up: the table's layout applied to the files it did not
    write): at which query, from, to, why, how it ended, time and files (removed, added,
    and kept as they were: already laid out by the target)."""
    from lakelayout.api import Table

    try:
        rows = Table(path).online.history()
    except LakelayoutError as exc:
        _fail(exc)
        return
    grid = RichTable(title=f"switches of {path}")
    for name in ("query", "from", "to", "why", "status", "seconds", "files", "error"):
        grid.add_column(name)
    for h in rows:
        grid.add_row(
            str(h["query"]),
            f"{h['source_label']} [{h['source']}]",
            f"{h['target_label']} [{h['target']}]",
            h["reason"],
            h["status"],
            _fmt_num(h.get("seconds")),
            f"-{h['files_removed']} +{h['files_added']} ={h.get('files_kept', 0)}",
            h.get("error") or "",
        )
    console.print(grid)
    if not rows:
        console.print("no switch yet")


@app.command()
def vacuum(
    path: Annotated[str, typer.Argument(help="table location")],
    retain_hours: Annotated[
        int | None,
        typer.Option(
            "--retain-hours",
            help="keep files needed by versions of the last N hours "
            "(default: the table's delta.deletedFileRetentionDuration, Delta's 7 days)",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what would be deleted; delete nothing")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="allow a retention shorter than the table's")
    ] = False,
    show: Annotated[int, typer.Option(help="list at most this many files")] = 20,
) -> None:
    """VACUUM a table: delete unreferenced data files and dead sidecars past the retention."""
    from lakelayout.api import Table

    try:
        _at_least(show, 0, "--show")  # before anything is deleted
        metrics = Table(path).vacuum(retain_hours=retain_hours, dry_run=dry_run, force=force)
    except LakelayoutError as exc:
        _fail(exc)
        return
    verb = "would delete" if metrics.dry_run else "deleted"
    grid = RichTable(
        title=f"VACUUM {metrics.uri} (version {metrics.version}, retention "
        f"{metrics.retention_hours:g} hours): {verb}"
    )
    for name in ("kind", "files", "bytes"):
        grid.add_column(name, justify="left" if name == "kind" else "right")
    for kind, files, nbytes in metrics.as_rows():
        grid.add_row(kind, files, format_bytes(int(nbytes)))
    console.print(grid)
    for item in sorted(metrics.files, key=lambda f: f.path)[: max(show, 0)]:
        console.print(f"  {item.kind:<12} {item.path}", highlight=False)
    if metrics.files_deleted > max(show, 0):
        console.print(f"  ... and {metrics.files_deleted - max(show, 0)} more", highlight=False)


@online_app.command("enable")
def online_enable(
    path: Annotated[str, typer.Argument(help="table location")],
    alpha: _Alpha = "measured",
    window: _Window = 200,
    interval: _Interval = 50,
    epsilon: _Epsilon = 0.08,
    max_states: _MaxStates = 8,
    gamma: _Gamma = 0.0,
    predictor: _Predictor = "phase",
    predictor_window: _PredictorWindow = 0,
    predictor_weight: _PredictorWeight = "skipped",
    mid_phase_join: _MidPhaseJoin = False,
    fit_before_draw: _FitBeforeDraw = False,
    catch_up: _CatchUp = True,
    history: _History = 0,
    admission_sample: _AdmissionSample = 0,
    half_life: _HalfLife = 2000,
    seed: Annotated[int, typer.Option(help="the reorganizer's random seed")] = 0,
    policy: Annotated[str, typer.Option(help="oreo, or the baselines greedy or regret")] = "oreo",
    families: Annotated[
        str,
        typer.Option(
            help="comma-separated candidate families (default: qdtree,pando,hilbert,sop-z)"
        ),
    ] = "",
    sample_rows: Annotated[
        int, typer.Option(help="rows of the sample candidates are priced on")
    ] = 20_000,
) -> None:
    """Enable online reorganization: measure α (unless given), sample the table, write the
    initial state. From then on every scan of the table is a query for the reorganizer
    (docs/online.md)."""
    from lakelayout.api import Table
    from lakelayout.online.candidates import FAMILIES

    options = {name: value for name, value in locals().items() if name in _ONLINE_OPTIONS}
    try:
        options["alpha"] = _alpha_value(alpha)
        table = Table(path)
        with console.status("measuring α and sampling the table" if alpha == "measured"
                            else "sampling the table"):  # fmt: skip
            table.online.enable(
                **options, seed=seed, policy=policy, sample_rows=sample_rows,
                families=families or FAMILIES,
            )  # fmt: skip
    except LakelayoutError as exc:
        _fail(exc)
        return
    online_status(path)


@online_app.command("disable")
def online_disable(path: Annotated[str, typer.Argument(help="table location")]) -> None:
    """Stop feeding scans to the reorganizer; the state stays for status and history."""
    from lakelayout.api import Table

    try:
        table = Table(path)
        table.online.disable()
    except LakelayoutError as exc:
        _fail(exc)
        return
    console.print(
        f"online reorganization of {table.uri} disabled (status and history kept)",
        highlight=False,
    )


# --------------------------------------------------------------------------- the advisor


def _advisor_table(path: str, model: Path | None) -> object:
    """The table at ``path`` with its advisor using ``model`` (a calibrated JSON file)."""
    from lakelayout.advisor.costmodel import CostModel
    from lakelayout.api import Table

    table = Table(path)
    if model is not None:
        table.advisor.model = CostModel.load(model)
    return table


#: characters of a logged predicate `lakelayout log` shows (a 70,000-term OR is 5 MB)
LOG_PREDICATE_CHARS = 500


def _clipped(text: str | None) -> str:
    """``text`` up to :data:`LOG_PREDICATE_CHARS`, then how much was left out."""
    if text is None or len(text) <= LOG_PREDICATE_CHARS:
        return text or ""
    return f"{text[:LOG_PREDICATE_CHARS]}… ({len(text):,} characters)"


@app.command("log")
def log_(
    path: Annotated[str, typer.Argument(help="table location")],
    last: Annotated[int, typer.Option(help="how many of the newest queries")] = 20,
) -> None:
    """Recent queries of a table's query log: predicate, columns, files/bytes kept, the
    scan call's time and (for a query run through its timed path) Spark's run time."""
    from lakelayout.advisor.querylog import QueryLog
    from lakelayout.api import Table

    try:
        table = Table(path)
        _at_least(last, 1, "--last")
        data = QueryLog(table.uri).read(last=last)
    except LakelayoutError as exc:
        _fail(exc)
        return
    grid = RichTable(title=f"query log of {table.uri}: the {data.num_rows} newest queries")
    numbers = ("version", "files", "scan ms", "run ms")
    for name in ("time (UTC)", "version", "predicate", "columns", "files", "bytes", *numbers[2:]):
        grid.add_column(name, justify="right" if name in numbers else "left")
    for r in data.to_pylist():
        grid.add_row(
            r["ts"].strftime("%Y-%m-%d %H:%M:%S"),
            str(r["table_version"]),
            _clipped(r["predicate"]),
            "*" if r["columns"] is None else ", ".join(r["columns"]),
            f"{_count(r['files_kept'])}/{_count(r['files_total'])}",
            f"{_bytes_or_dash(r['bytes_kept'])} of {_bytes_or_dash(r['bytes_total'])}",
            # (a column another tool left null: a raw TypeError; an audit)
            "" if r["scan_seconds"] is None else f"{r['scan_seconds'] * 1000:.0f}",
            "" if r["run_seconds"] is None else f"{r['run_seconds'] * 1000:.0f}",
        )
    console.print(grid)
    off = table.advisor.logging_off()
    if off:  # an empty log then says nothing (an audit)
        console.print(f"note: {off}: its scans are not recorded")


@app.command()
def advise(
    path: Annotated[str, typer.Argument(help="table location")],
    apply: Annotated[bool, typer.Option("--apply", help="rewrite now if it pays")] = False,
    model: Annotated[
        Path | None, typer.Option(help="cost model JSON (default: the calibrated one)")
    ] = None,
) -> None:
    """Features of the recent workload, candidate layouts, cost against benefit, the decision."""
    from lakelayout.api import Table

    try:
        table = _advisor_table(path, model)
        assert isinstance(table, Table)
        result = table.advisor.auto(trigger="cli", apply=apply)
    except LakelayoutError as exc:
        _fail(exc)
        return
    rec = result.recommendation
    if rec.analysis is not None:
        console.print(Text("features", "bold"), highlight=False)
        for line in rec.analysis.lines():
            console.print(f"  {line}", highlight=False)
    console.print(
        Text.assemble(("cost model", "bold"), f": {rec.inputs['cost_model']}"), highlight=False
    )
    console.print(Text("decision", "bold"), highlight=False)
    for line in result.lines():
        console.print(f"  {line}", highlight=False)
    if rec.rewrite and not apply:
        console.print("  (run with --apply to rewrite)", highlight=False)
    if result.error is not None:
        raise typer.Exit(code=1)


@app.command()
def calibrate(
    out: Annotated[
        Path | None, typer.Option(help="where to save (default: the user's config directory)")
    ] = None,
    quick: Annotated[bool, typer.Option(help="smaller tables: faster, less precise")] = False,
) -> None:
    """Measure this cluster's rewrite and query costs; save the cost model (reused later)."""
    from lakelayout.advisor.calibrate import DEFAULT_SIZES, QUICK_SIZES
    from lakelayout.advisor.calibrate import calibrate as run
    from lakelayout.advisor.costmodel import check_save_path
    from lakelayout.table.session import spark_session

    try:
        check_save_path(out)  # before minutes of measuring
        model = run(
            spark_session(),
            sizes=QUICK_SIZES if quick else DEFAULT_SIZES,
            progress=lambda m: console.print(m, highlight=False),
        )
        target = model.save(out)
    except LakelayoutError as exc:
        _fail(exc)
        return
    grid = RichTable(title=f"cost model ({model.source})")
    grid.add_column("coefficient")
    grid.add_column("value", justify="right")
    for name, value in model.to_dict().items():
        if isinstance(value, float):
            grid.add_row(name, f"{value:.4g}")
    console.print(grid)
    console.print(f"fit: {model.quality}; saved to {target}", highlight=False)


@app.command()
def decisions(
    path: Annotated[str, typer.Argument(help="table location")],
    measure: Annotated[
        bool, typer.Option(help="first measure applied decisions against later queries")
    ] = True,
) -> None:
    """Every automatic decision with its inputs, estimates and outcome (and what it saved)."""
    from lakelayout.api import Table

    try:
        table = Table(path)
        if measure:
            table.advisor.measure()
        rows = table.advisor.decisions()
    except LakelayoutError as exc:
        _fail(exc)
        return
    console.print(
        Text.assemble((f"decisions on {table.uri}", "bold"), f": {len(rows)}"), highlight=False
    )
    for i, r in enumerate(rows, 1):
        when = r["ts"].strftime("%Y-%m-%d %H:%M:%S")
        if r["kind"] == "measurement":
            seen = r["detail"] or {}
            window = (
                f" (on the {seen['window_queries']} queries it was priced on: "
                f"{_bytes_or_dash(seen.get('window_saved_bytes_per_query'))})"
                if seen.get("window_queries")
                else ""
            )
            console.print(
                f"#{i} {when} measured ({r['family']}): {r['measured_queries']} following queries, "
                f"saved/query actual {_bytes_or_dash(r['actual_saved_bytes_per_query'])}{window}, "
                f"estimated {_bytes_or_dash(r['estimated_saved_bytes_per_query'])}; rewrite "
                f"actual {_num(r['actual_seconds'])} s, estimated "
                f"{_num(r['estimated_cost_seconds'])} s",
                highlight=False,
            )
            continue
        console.print(
            f"#{i} {when} {r['trigger']}: {r['outcome']} (best layout: {r['family'] or '-'}, "
            f"version {r['table_version']})",
            highlight=False,
        )
        console.print(
            f"    estimated cost {_num(r['estimated_cost_seconds'])} s, saving "
            f"{_num(r['estimated_saving_seconds'])} s over {_count(r['expected_queries'])} queries "
            f"({_bytes_or_dash(r['estimated_saved_bytes_per_query'])} less each); actual "
            f"rewrite {_num(r['actual_seconds'])} s; advisor {_num(r['advisor_seconds'])} s",
            highlight=False,
        )
        console.print(f"    {r['reason']}", highlight=False)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _count(value: float | None) -> str:
    """A count as the reasons write it (4,872, not 4.87e+03: an audit)."""
    return "-" if value is None else f"{value:,.0f}"


def _bytes_or_dash(value: float | None) -> str:
    if value is None:
        return "-"
    return ("-" if value < 0 else "") + format_bytes(abs(int(value)))


bench_app = typer.Typer(
    no_args_is_help=True, help="Replay inserts and queries under layout policies (issue 6)."
)
app.add_typer(bench_app, name="bench")

_POLICY_HELP = (
    "comma-separated: none,sorted,zorder-halfway,liquid,qdtree,pando,sop-z,hilbert,"
    "deltars-zorder,delta-zorder,delta-liquid,auto,auto-breakeven (delta-*: Delta Lake's own "
    "connector; auto-breakeven: the advisor with margin 1; qdtree, "
    "pando, sop-z and hilbert are oracles: fitted on the whole workload); online: "
    "oreo,oreo-uniform,oreo-recent,oreo-recent-all-files,oreo-recent-per-block,"
    "oreo-recent-no-catch-up,greedy,regret "
    "(oreo-uniform: OReO with γ=0 whatever --gamma; oreo-recent: OReO with --predictor "
    "recent; oreo-recent-all-files: oreo-recent whose switches rewrite every file they did "
    "not write, not keeping those already in one block of the target; "
    "oreo-recent-per-block: oreo-recent whose switches write one file per block, not cutting "
    "a block over twice the target file size; oreo-recent-no-catch-up: oreo-recent without "
    "catch-ups whatever --catch-up); "
    "oracles: static,offline-optimal"
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
_OnlineSeed = Annotated[
    int | None,
    typer.Option(
        help="online policies: the reorganizer's seed alone, same stream (default: --seed)"
    ),
]
_Retime = Annotated[
    bool,
    typer.Option(help="spark mode: time every query again after the stream, in reverse order"),
]
_TimeEvery = Annotated[
    int,
    typer.Option(
        help="spark mode: time every k-th query only; the others cost the last timed one's "
        "time (a systematic sample, for long streams)"
    ),
]
_CountEvery = Annotated[
    int,
    typer.Option(
        help="count the rows every k-th query matches only (σ, λ, µ over those); costs "
        "and decisions never use the counts, and counting is most of a long logical run"
    ),
]
_RewriteCost = Annotated[
    str,
    typer.Option(
        help="logical mode: what a rewrite costs: 'measured' (its seconds) or 'alpha' "
        "(--alpha full scans per table rewritten, as OReO's simulation; needs a number)"
    ),
]
_DEFAULT_POLICIES = "none,sorted,zorder-halfway,liquid,qdtree,deltars-zorder"
_Alpha = Annotated[
    str, typer.Option(help="online policies: rewrite cost in full scans, or 'measured'")
]
_Window = Annotated[int, typer.Option(help="online policies: queries in the sliding window")]
_Interval = Annotated[int, typer.Option(help="online policies: queries between candidate fits")]
_Epsilon = Annotated[float, typer.Option(help="online policies: admission distance ε")]
_MaxStates = Annotated[int, typer.Option(help="online policies: most candidate layouts kept")]
_Gamma = Annotated[float, typer.Option(help="oreo: predictor exponent γ (0: uniform draws)")]
_MidPhaseJoin = Annotated[
    bool,
    typer.Option(help="oreo: a state admitted mid-phase joins the phase at once (window costs)"),
]
_FitBeforeDraw = Annotated[
    bool,
    typer.Option(
        help="oreo with --mid-phase-join: fit candidates on the window when a draw is due"
    ),
]
_CatchUp = Annotated[
    bool,
    typer.Option(
        help="online policies: lay out what is inserted after a switch with the table's "
        "layout when reading it costs what that rewrite does (a live table's catch-up)"
    ),
]
_PredictorWindow = Annotated[
    int,
    typer.Option(help="oreo --predictor recent: queries its weights average over (0: --window)"),
]
_Predictor = Annotated[
    str,
    typer.Option(help="oreo: predictor weights from the last phase or the last queries (recent)"),
]
_PredictorWeight = Annotated[
    str,
    typer.Option(
        help="oreo: a state's draw weight, 1 - its mean cost (skipped) or "
        "1 / (mean cost + 0.01) (inverse: by the ratio of costs)"
    ),
]
_History = Annotated[
    int,
    typer.Option(
        help="online policies: queries sampled from the whole stream to fit more candidates on "
        "(0: the window only)"
    ),
]
_AdmissionSample = Annotated[
    int,
    typer.Option(
        help="online policies: queries of a time-biased sample of the whole stream that "
        "admission and pruning compare layouts on, as the paper does (0: the window)"
    ),
]
_HalfLife = Annotated[
    int, typer.Option(help="online policies: queries after which a sampled query weighs half")
]


#: the bench commands' options that become :class:`OnlineSettings` (named as there)
_ONLINE_OPTIONS = frozenset(
    ("alpha", "window", "interval", "epsilon", "max_states", "gamma", "predictor",
     "predictor_window", "predictor_weight", "mid_phase_join", "fit_before_draw", "history", "admission_sample",
     "half_life", "catch_up")
)  # fmt: skip


def _online_settings(
    *,
    alpha: str,
    window: int,
    interval: int,
    epsilon: float,
    max_states: int,
    gamma: float,
    predictor: str,
    predictor_window: int,
    predictor_weight: str,
    mid_phase_join: bool,
    fit_before_draw: bool,
    history: int,
    admission_sample: int,
    half_life: int,
    seed: int,
    catch_up: bool = True,
) -> object:
    """The online policies' settings (InvalidOption on a bad value)."""
    from lakelayout.evaluation.policies import OnlineSettings

    return OnlineSettings(
        alpha=_alpha_value(alpha),
        window=window,
        interval=interval,
        epsilon=epsilon,
        max_states=max_states,
        gamma=gamma,
        predictor=predictor,
        predictor_window=predictor_window,
        predictor_weight=predictor_weight,
        mid_phase_join=mid_phase_join,
        fit_before_draw=fit_before_draw,
        seed=seed,
        history=history,
        admission_sample=admission_sample,
        half_life=half_life,
        catch_up=catch_up,
    )


def _alpha_value(alpha: str) -> float | str:
    """``--alpha``: a number, or 'measured' (InvalidOption otherwise)."""
    if alpha == "measured":
        return alpha
    try:
        return float(alpha)
    except ValueError:
        raise InvalidOption(f"--alpha must be a number or 'measured', got {alpha!r}") from None


def _predictor_detail(status: dict[str, Any]) -> str:
    """`` over N queries`` for the recent predictor and the weight if not the paper's,
    for ``online status``."""
    weight = status.get("predictor_weight", "skipped")
    tail = "" if weight == "skipped" else f", {weight} weights"
    if status.get("predictor") != "recent" or not status.get("predictor_window"):
        return tail
    return f" over {status['predictor_window']} queries{tail}"


def _admission(status: dict[str, Any]) -> str:
    """What the layout manager compares layouts on, for ``online status``."""
    size = int(status.get("admission_sample") or 0)
    if not size:
        return "on the window"
    return f"on a time-biased sample of {size} queries (half-life {status.get('half_life')})"


def _rewrite_alpha(rewrite_cost: str, alpha: str) -> float | None:
    """``--rewrite-cost``: None (measured seconds) or the α rewrites are charged at."""
    from lakelayout.errors import InvalidOption

    if rewrite_cost == "measured":
        return None
    if rewrite_cost != "alpha":
        raise InvalidOption(f"--rewrite-cost must be 'measured' or 'alpha', got {rewrite_cost!r}")
    if alpha == "measured":
        raise InvalidOption("--rewrite-cost alpha needs a number for --alpha, not 'measured'")
    return float(alpha)


def _print_results(results: dict[str, object], html_path: Path) -> None:
    from lakelayout.evaluation.online_report import online_table
    from lakelayout.evaluation.report import (
        COST_COLUMNS,
        SKIPPING_COLUMNS,
        footnote,
        rich_table,
    )

    console.print(rich_table(results, SKIPPING_COLUMNS))  # type: ignore[arg-type]
    console.print(rich_table(results, COST_COLUMNS))  # type: ignore[arg-type]
    online = online_table(results)
    if online is not None:
        console.print(online)
    console.print(footnote(results), highlight=False)  # type: ignore[arg-type]
    console.print(f"HTML report: {html_path}", highlight=False)


def _bench(
    dataset: str,
    out: Path | None,
    work_dir: Path,
    policies: str,
    online: dict[str, Any],
    **kw: object,
) -> None:
    import time

    from lakelayout.evaluation.runner import run_bench

    target = out or Path("runs") / time.strftime(f"%Y-%m-%d-%H%M%S-{dataset}")
    try:
        online_seed = kw.pop("online_seed", None)
        seed = int(kw["seed"] if online_seed is None else online_seed)  # type: ignore[call-overload]
        kw["online"] = _online_settings(**online, seed=seed)
        kw["rewrite_alpha"] = _rewrite_alpha(str(kw.pop("rewrite_cost")), online["alpha"])
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
    retime: _Retime = True,
    time_every: _TimeEvery = 1,
    count_every: _CountEvery = 1,
    rewrite_cost: _RewriteCost = "measured",
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-tpch)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
    alpha: _Alpha = "measured",
    window: _Window = 200,
    interval: _Interval = 50,
    epsilon: _Epsilon = 0.08,
    max_states: _MaxStates = 8,
    gamma: _Gamma = 0.0,
    predictor: _Predictor = "phase",
    predictor_window: _PredictorWindow = 0,
    predictor_weight: _PredictorWeight = "skipped",
    mid_phase_join: _MidPhaseJoin = False,
    fit_before_draw: _FitBeforeDraw = False,
    catch_up: _CatchUp = True,
    history: _History = 0,
    admission_sample: _AdmissionSample = 0,
    half_life: _HalfLife = 2000,
    online_seed: _OnlineSeed = None,
) -> None:
    """TPC-H lineitem denormalized, the 13 lineitem templates, replayed under each policy.

    B2-online: --policies oreo,greedy,regret,static,offline-optimal --batches 1 with a
    drifting stream (--shape drift, at least 20 template switches: queries / segment > 20).
    """
    online = {name: value for name, value in locals().items() if name in _ONLINE_OPTIONS}
    _bench("tpch", out, work_dir, policies, online, queries=queries, mode=mode, scale=scale,
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed, retime=retime, time_every=time_every,
           count_every=count_every, rewrite_cost=rewrite_cost,
           online_seed=online_seed)  # fmt: skip


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
    retime: _Retime = True,
    time_every: _TimeEvery = 1,
    count_every: _CountEvery = 1,
    rewrite_cost: _RewriteCost = "measured",
    indexes: Annotated[
        bool,
        typer.Option(help="declare the skipping indexes (Prefix, Suffix, UDF ValueList, ...)"),
    ] = True,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-logs)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
    alpha: _Alpha = "measured",
    window: _Window = 200,
    interval: _Interval = 50,
    epsilon: _Epsilon = 0.08,
    max_states: _MaxStates = 8,
    gamma: _Gamma = 0.0,
    predictor: _Predictor = "phase",
    predictor_window: _PredictorWindow = 0,
    predictor_weight: _PredictorWeight = "skipped",
    mid_phase_join: _MidPhaseJoin = False,
    fit_before_draw: _FitBeforeDraw = False,
    catch_up: _CatchUp = True,
    history: _History = 0,
    admission_sample: _AdmissionSample = 0,
    half_life: _HalfLife = 2000,
    online_seed: _OnlineSeed = None,
) -> None:
    """The logs table (LIKE, map extraction, month(ts), a UDF, bounding boxes) under each
    policy, with its skipping indexes declared on every table (--no-indexes: min/max only)."""
    online = {name: value for name, value in locals().items() if name in _ONLINE_OPTIONS}
    _bench("logs", out, work_dir, policies, online, queries=queries, mode=mode, rows=int(rows),
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed, indexes=indexes, retime=retime,
           time_every=time_every, count_every=count_every, rewrite_cost=rewrite_cost,
           online_seed=online_seed)  # fmt: skip


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
    retime: _Retime = True,
    time_every: _TimeEvery = 1,
    count_every: _CountEvery = 1,
    rewrite_cost: _RewriteCost = "measured",
    indexes: Annotated[
        bool, typer.Option(help="declare the dataset's skipping indexes (taxi declares none)")
    ] = True,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<time>-taxi)")
    ] = None,
    work_dir: _WorkDir = Path("bench-data"),
    alpha: _Alpha = "measured",
    window: _Window = 200,
    interval: _Interval = 50,
    epsilon: _Epsilon = 0.08,
    max_states: _MaxStates = 8,
    gamma: _Gamma = 0.0,
    predictor: _Predictor = "phase",
    predictor_window: _PredictorWindow = 0,
    predictor_weight: _PredictorWeight = "skipped",
    mid_phase_join: _MidPhaseJoin = False,
    fit_before_draw: _FitBeforeDraw = False,
    catch_up: _CatchUp = True,
    history: _History = 0,
    admission_sample: _AdmissionSample = 0,
    half_life: _HalfLife = 2000,
    online_seed: _OnlineSeed = None,
) -> None:
    """The correlated taxi table (distance, fare, duration, pickup time ranges and their
    correlated combinations) under each policy."""
    online = {name: value for name, value in locals().items() if name in _ONLINE_OPTIONS}
    _bench("taxi", out, work_dir, policies, online, queries=queries, mode=mode, rows=int(rows),
           batches=batches, rows_per_file=rows_per_file, shape=shape, segment_length=segment,
           seed=seed, indexes=indexes, retime=retime,
           time_every=time_every, count_every=count_every, rewrite_cost=rewrite_cost,
           online_seed=online_seed)  # fmt: skip


@bench_app.command("report")
def bench_report(
    run: Annotated[Path, typer.Argument(help="run directory or results.json")],
) -> None:
    """(Re)write the HTML report of a run and print its table."""
    from lakelayout.evaluation.report import load_json, write_report

    try:
        results = load_json(run)
    except (OSError, ValueError, KeyError) as exc:
        console.print(
            Text.assemble(("error:", "bold red"), f" cannot read results from {run}: {exc}")
        )
        raise typer.Exit(code=2) from None
    _, html_path = write_report(results, run if run.is_dir() else run.parent)
    _print_results(results, html_path)


@app.command()
def demo(
    scale: Annotated[float, typer.Option(help="TPC-H scale factor")] = 0.1,
    work_dir: Annotated[Path, typer.Option(help="where data and tables go")] = Path("demo-data"),
    queries: Annotated[int, typer.Option(help="queries in the replayed stream")] = 39,
) -> None:
    """TPC-H replay in spark mode: eight policies (auto: the advisor) side by side, HTML report."""
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
        "bytes scanned summed over queries; total = query + rewrite + overhead seconds.",
        highlight=False,
    )


def _reason(exc: BaseException) -> str:
    """One line saying why ``exc`` happened: its first line, or, for an error a Spark
    task's Python code raised (its first line says only that), the Python exception
    the traceback ends with ("PermissionError: [Errno 1] ...")."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if "exception was thrown from the Python worker" in lines[0]:
        raised = [line for line in lines[1:] if re.match(r"^[\w.]+(Error|Exception)\b", line)]
        if raised:
            return raised[-1]
    return lines[0]


class _WithoutPy4j(logging.Filter):
    """Drops py4j's records. py4j logs its own view of a call that failed or was
    interrupted, traceback included, through the root logger; on Ctrl-C, PySpark's
    handler cancels the jobs through py4j from inside the interrupted py4j call, and
    both calls log one. The interruption or the error itself reaches the user as the
    command's one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("py4j") or f"{os.sep}py4j{os.sep}" in record.pathname)


def _quiet_py4j() -> None:
    """Warnings go to stderr as before (the message alone), py4j's records nowhere."""
    root = logging.getLogger()
    if any(isinstance(f, _WithoutPy4j) for h in root.handlers for f in h.filters):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_WithoutPy4j())
    root.addHandler(handler)  # so logging.exception() adds no handler of its own


def _interrupt_of(done: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C behind an exit, if one is in its chain of causes."""
    seen: set[int] = set()
    exc: BaseException | None = done
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's kill, ``timeout``, ``docker stop``), raised as Ctrl-C is so
    that the same clean-ups run (``finally`` blocks and exit hooks: a calibration's or a
    replay's scratch tables removed, the query log's buffer flushed). Python's default
    for SIGTERM ends the process on the spot and ran none of them."""


#: whether a SIGTERM has come: later ones are ignored, so that they cannot cut short the
#: clean-ups the first one started (a scheduler that will not wait sends SIGKILL)
_terminating = threading.Event()


def _terminate(signum: int, frame: object) -> None:
    if _terminating.is_set():
        return
    _terminating.set()
    raise Terminated


def _interrupted_by(exc: BaseException) -> None:
    """An error the interruption caused is the interruption: PySpark's clean-up after a
    py4j call cut short fails in turn (``Py4JNetworkError: Answer from Java side is
    empty``, ``getResult`` of an Arrow read), with the Ctrl-C or SIGTERM as its context."""
    cause = _interrupt_of(exc)
    if cause is not None and not os.environ.get("LAKELAYOUT_DEBUG"):
        _interrupted(cause)


def _interrupted(stop: KeyboardInterrupt) -> NoReturn:
    """Ctrl-C or SIGTERM: one line, with what had committed before it (the interrupt's
    notes); exit code 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them."""
    terminated = isinstance(stop, Terminated)
    notes = "; ".join(getattr(stop, "__notes__", ()))
    console.print(
        Text.assemble(
            ("terminated" if terminated else "interrupted", "bold red"),
            f": {notes}" if notes else "",
        ),
        soft_wrap=True,
    )
    console.file.flush()  # Spark's exit may end the process before buffers are flushed
    raise SystemExit(143 if terminated else 130) from None


def main() -> None:
    """The console entry point: a lakelayout error is one line and exit code 2, not a traceback."""
    from lakelayout.table.session import LOG_LEVEL_ENV

    if not os.environ.get("LAKELAYOUT_DEBUG"):
        os.environ.setdefault(LOG_LEVEL_ENV, "OFF")  # the error is said in one line below
        _quiet_py4j()
    if threading.current_thread() is threading.main_thread():  # handlers live there
        # for the rest of the process: exit hooks run after main() returns (the query
        # log's flush, an online table's wait for its rewrite), and a SIGTERM there must
        # end them as Ctrl-C does, not kill the process half-way (an audit)
        signal.signal(signal.SIGTERM, _terminate)
    _run()


def _run() -> None:
    """The app, with every way out said in one line."""
    try:
        app()
    except KeyboardInterrupt as stop:  # Ctrl-C: one line, and what had committed before it
        if os.environ.get("LAKELAYOUT_DEBUG"):
            if isinstance(stop, Terminated):  # the traceback, and SIGTERM's exit code
                traceback.print_exc()
                raise SystemExit(143) from None
            raise
        _interrupted(stop)
    except SystemExit as done:
        # Typer turns Ctrl-C inside a command into exit code 130 and says nothing (an
        # audit: the line below was never printed); the interrupt is in the chain
        cause = _interrupt_of(done)
        if cause is None or os.environ.get("LAKELAYOUT_DEBUG"):
            raise
        _interrupted(cause)
    except LakelayoutError as exc:  # raised outside a command's own handler
        _interrupted_by(exc)
        try:
            _fail(exc)
        except typer.Exit as done:
            raise SystemExit(done.exit_code) from None
    except Exception as exc:  # a bug or an error from below (Spark, the filesystem)
        if os.environ.get("LAKELAYOUT_DEBUG"):
            raise
        _interrupted_by(exc)
        first = _reason(exc)
        console.print(
            Text.assemble(
                ("error:", "bold red"),
                f" unexpected {type(exc).__name__}: {first} "
                "(set LAKELAYOUT_DEBUG=1 for the traceback)",
            ),
            soft_wrap=True,
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
