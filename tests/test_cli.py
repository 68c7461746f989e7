"""The command line on a real table: scan and describe print what they should."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakelayout.api import Table
from lakelayout.cli import app

pytestmark = pytest.mark.spark
runner = CliRunner()


@pytest.fixture(autouse=True)
def _root_handlers_restored() -> Iterator[None]:
    """``cli.main()`` adds a stderr handler to the root logger (bound to the capture of
    the test that called it): each test leaves the root logger as it found it."""
    root = logging.getLogger()
    before = list(root.handlers)
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)


@pytest.fixture(scope="module")
def table_path(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli") / "t"
    data = pa.table({"id": list(range(400)), "name": [f"n{i % 7}" for i in range(400)]})
    Table.create(str(path), spark.createDataFrame(data).repartitionByRange(4, "id"))
    return str(path)


def test_scan_prints_kept_files_and_indicators(table_path: str) -> None:
    result = runner.invoke(app, ["scan", table_path, "--where", "id < 50", "--show", "3"])
    assert result.exit_code == 0, result.output
    files_row = next(line for line in result.output.splitlines() if "files" in line)
    cells = [c.strip() for c in files_row.split("│") if c.strip()]
    assert cells == ["files", "4", "1"]  # total, kept
    assert "matching rows 50" in result.output
    assert "σ=0.125" in result.output


def test_scan_reports_bad_predicate_as_error(table_path: str) -> None:
    result = runner.invoke(app, ["scan", table_path, "--where", "nmae = 'x'"])
    assert result.exit_code == 2
    assert "Did you mean 'name'?" in result.output


def test_scan_columns_in_backticks_may_hold_commas(spark: Any, tmp_path: Path) -> None:
    """A column ``x,y`` could not be named by ``--columns`` (an audit)."""
    path = str(tmp_path / "t")
    Table.create(path, pa.table({"x,y": [1, 2], "z": [3, 4]}))
    result = runner.invoke(app, ["scan", path, "--columns", " `x,y` , z", "--show", "1"])
    assert result.exit_code == 0, result.output
    assert "x,y" in result.output.splitlines()[-4]  # the result's header names it
    result = runner.invoke(app, ["scan", path, "--columns", "`x,y"])
    assert result.exit_code == 2 and "a backtick is not closed" in result.output


def test_describe_lists_files_coverage_and_history(table_path: str) -> None:
    result = runner.invoke(app, ["describe", table_path])
    assert result.exit_code == 0, result.output
    assert "4 files, 400 rows" in result.output
    assert "│ id     │ int64  │     4/4 │" in result.output
    assert "CREATE TABLE" in result.output


def test_describe_names_lakelayout_operations_and_times_in_utc(spark: Any, tmp_path: Path) -> None:
    """delta-rs records every commit it makes as WRITE: the history printed an OPTIMIZE
    or a DELETE of lakelayout's as WRITE, and times as epoch milliseconds (audit)."""
    data = pa.table({"id": list(range(100)), "k": [i % 5 for i in range(100)]})
    t = Table.create(str(tmp_path / "t"), spark.createDataFrame(data).repartition(3))
    t.optimize.zorder(["k"])
    t.delete("id < 10")
    result = runner.invoke(app, ["describe", t.uri, "--history", "5"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│ ")]
    operations = [cells[2] for cells in ([c.strip() for c in r.split("│")[1:-1]] for r in rows)
                  if len(cells) == 3 and cells[0].isdigit()]  # fmt: skip
    assert operations[:2] == ["DELETE", "OPTIMIZE"], result.output
    assert "+00:00" in result.output and "WRITE" not in operations[:2]


def test_optimize_output_starts_with_its_table_off_a_terminal(spark: Any, tmp_path: Path) -> None:
    """Rich's progress bar printed an empty line when it ended on a console that is not
    a terminal (a pipe, a log file), before the table and before 'interrupted'; the bar
    is shown on terminals only."""
    data = pa.table({"id": list(range(100)), "k": [i % 5 for i in range(100)]})
    t = Table.create(str(tmp_path / "t"), spark.createDataFrame(data).repartition(3))
    result = runner.invoke(app, ["optimize", t.uri, "--zorder", "k"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].strip().startswith("OPTIMIZE"), result.output


def test_missing_table_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["describe", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no Delta table at" in result.output


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            "id < 3; DROP TABLE x",
            "error: predicate 'id < 3; DROP TABLE x' holds more than one statement "
            "(';' at line 1, col 7); a predicate is one Spark SQL expression",
        ),
        (
            "(" * 300 + "id < 3" + ")" * 300,
            f"error: predicate '{'(' * 77}...' nests 300 levels deep (parentheses and NOT); "
            "lakelayout accepts at most 256 (Spark's parser stops near 270)",
        ),
        (
            "m['k'] = 1",
            "error: unknown column 'm' in predicate; columns are: id, name",
        ),
    ],
    ids=["second-statement", "too-deep", "brackets-not-markup"],
)
def test_predicate_errors_are_one_line(table_path: str, where: str, message: str) -> None:
    result = runner.invoke(app, ["scan", table_path, "--where", where])
    assert result.exit_code == 2
    assert result.output.splitlines() == [message]


@pytest.mark.parametrize(
    ("where", "reason"),
    [("nosuchfn(id) < 5", "[UNRESOLVED_ROUTINE]"), ("sum(id) > 5", "[INVALID_WHERE_CONDITION]")],
    ids=["unknown-function", "aggregate"],
)
def test_a_predicate_only_spark_rejects_is_one_line(
    table_path: str, where: str, reason: str
) -> None:
    """lakelayout passes what it does not model on to Spark; what Spark's analyser refuses
    comes back as one line with its reason, exit code 2, as lakelayout's own errors do."""
    result = runner.invoke(app, ["scan", table_path, "--where", where])
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith(f"error: Spark rejects the predicate {where!r}: {reason}"), line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "--show", "-1"], "error: --show must be >= 0, got -1"),
        (["vacuum", "--dry-run", "--show", "-1"], "error: --show must be >= 0, got -1"),
        (["describe", "--history", "-1"], "error: Table.describe: history must be >= 0, got -1"),
        (["log", "--last", "0"], "error: --last must be >= 1, got 0"),
        # beyond a Java int: Spark's limit / delta-rs's history failed late, "unexpected"
        # (exit 1), the scan's report printed and the query logged first (an audit)
        (
            ["scan", "--show", str(10**20)],
            f"error: --show must be <= 2,147,483,647, got {10**20:,}",
        ),
        (
            ["describe", "--history", str(2**31)],
            "error: Table.describe: history must be <= 2,147,483,647, got 2,147,483,648",
        ),
    ],
    ids=["scan-show", "vacuum-show", "describe-history", "log-last", "show-big", "history-big"],
)
def test_a_count_out_of_range_is_refused(table_path: str, argv: list[str], message: str) -> None:
    result = runner.invoke(app, [argv[0], table_path, *argv[1:]])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [message]


def test_the_console_script_prints_what_spark_rejects_once(table_path: str) -> None:
    """pyspark logs each analysis error again (JSON with the JVM stack trace, ~10 KB on
    stderr); the console script says it once, in its one line."""
    import subprocess
    import sys

    script = Path(sys.executable).with_name("lakelayout")
    done = subprocess.run(
        [str(script), "scan", table_path, "--where", "nosuchfn(id) < 5"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("error: Spark rejects the predicate")
    assert "UNRESOLVED_ROUTINE" not in done.stderr and "Traceback" not in done.stderr
    # the JVM starts quiet: Spark's default profile announced itself and its level on
    # stderr (three lines) before lakelayout could set the level (an audit)
    assert "log4j" not in done.stderr and "log level" not in done.stderr, done.stderr


def test_an_unexpected_error_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The console script: a table whose log is corrupt is a TableCorrupt (exit 2, one
    line; it was deltalake's own error with a native backtrace), and an error lakelayout
    does not expect (here a RuntimeError planted in Table.open's place in a child) is one
    line too (exit 1)."""
    import subprocess
    import sys

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{not json\n")
    script = Path(sys.executable).with_name("lakelayout")
    done = subprocess.run(
        [str(script), "describe", str(tmp_path / "t")], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "the Delta log of" in lines[0], done.stdout
    planted = (
        "import sys, lakelayout.api as api, lakelayout.cli as cli\n"
        "def boom(*a, **k): raise RuntimeError('planted')\n"
        "api.Table.describe = boom\n"
        "sys.argv = ['lakelayout', 'describe', sys.argv[1]]\n"
        "cli.main()\n"
    )
    ok = tmp_path / "ok"
    ok.mkdir()
    from deltalake import write_deltalake

    write_deltalake(str(ok), pa.table({"a": [1]}))
    done = subprocess.run(
        [sys.executable, "-c", planted, str(ok)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unexpected RuntimeError: planted")


def test_values_and_paths_are_printed_as_they_are(spark: Any, tmp_path: Path) -> None:
    """Rich read data as markup (an audit): "[bold]hi" was shown as "hi", and a value
    "[/]" failed the command with a MarkupError after its report (for OPTIMIZE, after
    its commit)."""
    path = str(tmp_path / "t[/]x")
    Table.create(path, pa.table({"id": [1, 2], "s": ["[bold]hi", "[/]"]}))
    result = runner.invoke(app, ["scan", path, "--show", "5"])
    assert result.exit_code == 0, result.output
    assert "[bold]hi" in result.output and "[/]" in result.output
    described = runner.invoke(app, ["describe", path])
    assert described.exit_code == 0 and "t[/]x" in described.output, described.output


def test_an_error_from_a_spark_task_is_one_line(tmp_path: Path) -> None:
    """A Python exception in a Spark task printed the worker's first line ("An exception
    was thrown from the Python worker") and its traceback; the CLI says the exception."""
    from lakelayout.cli import _reason

    worker = RuntimeError(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        'Traceback (most recent call last):\n  File "w.py", line 3, in write\n'
        "PermissionError: [Errno 1] Operation not permitted: '/t/part-0.parquet'\n"
    )
    assert (
        _reason(worker) == "PermissionError: [Errno 1] Operation not permitted: '/t/part-0.parquet'"
    )
    assert _reason(RuntimeError("[DIVIDE_BY_ZERO] Division by zero.\n  at x")) == (
        "[DIVIDE_BY_ZERO] Division by zero."
    )


def test_describe_names_partition_columns(tmp_path: Path) -> None:
    """describe said nothing of a table's partitioning and showed its partition column
    with statistics in 0 of N files, though every file carries its exact value."""
    data = pa.table({"id": list(range(60)), "day": [f"d{i % 3}" for i in range(60)]})
    t = Table.create(str(tmp_path / "t"), data, partition_by=["day"])
    d = t.describe()
    assert d.partition_columns == ["day"] and d.files == 3
    assert {c.name: c.files_with_min_max for c in d.coverage} == {"id": 3, "day": 3}
    result = runner.invoke(app, ["describe", t.uri])
    assert result.exit_code == 0, result.output
    assert "partitioned by: day" in result.output
    assert "│ day (partition) │ string │     3/3 │" in result.output


def test_log_clips_a_huge_predicate_and_says_how_long_it_was() -> None:
    """``lakelayout log`` printed a logged 70,000-term OR whole: 5.7 MB (an audit)."""
    from lakelayout.cli import LOG_PREDICATE_CHARS, _clipped

    text = " OR ".join(f"i = {k}" for k in range(70_000))
    shown = _clipped(text)
    assert shown.startswith(text[:LOG_PREDICATE_CHARS]) and len(shown) < LOG_PREDICATE_CHARS + 40
    assert shown.endswith(f"… ({len(text):,} characters)")
    assert _clipped("i < 3") == "i < 3" and _clipped(None) == ""


def test_an_interrupt_is_one_line_with_what_had_committed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C ends the CLI with exit code 130 and one line carrying the interruption's notes
    (an append that committed before it), not tracebacks (an audit). Inside a command, as
    a user's Ctrl-C comes: Typer turned it into exit code 130 and the line was never
    printed (a later audit; the test then replaced the whole app)."""
    import lakelayout.api
    import lakelayout.cli as cli

    def interrupted(path: str) -> None:
        stop = KeyboardInterrupt()
        stop.add_note("the append to 't' had committed as version 3 (do not append it again)")
        raise stop

    monkeypatch.setattr(lakelayout.api, "Table", interrupted)  # where `log` opens the table
    monkeypatch.setattr(sys, "argv", ["lakelayout", "log", "t"])
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as done:
            cli.main()
        assert signal.getsignal(signal.SIGTERM) is cli._terminate  # through the exit hooks
    finally:
        signal.signal(signal.SIGTERM, before)
    assert done.value.code == 130
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert " ".join(out.split()) == (
        "interrupted: the append to 't' had committed as version 3 (do not append it again)"
    )


PLANTED = """
import atexit, pathlib, shutil, sys, time
import lakelayout.api, lakelayout.cli

root = pathlib.Path(sys.argv[1])

def hook():  # an exit hook (the query log's flush) that takes a while
    (root / "hook-started").touch()
    time.sleep(1.0)
    (root / "hook-done").touch()

def working(path):
    atexit.register(hook)
    scratch = root / "scratch"
    scratch.mkdir()
    try:
        (root / "started").touch()
        time.sleep(60)
    finally:
        (root / "cleaning").touch()
        time.sleep(1.0)
        shutil.rmtree(scratch)
        # PySpark's clean-up after a py4j call cut short fails in turn
        raise RuntimeError("Answer from Java side is empty")

lakelayout.api.Table = working
sys.argv = ["lakelayout", "log", "t"]
lakelayout.cli.main()
"""


def test_sigterm_runs_the_clean_ups_and_says_so(tmp_path: Path) -> None:
    """SIGTERM (a scheduler's kill, ``timeout``) ended the CLI on the spot: no ``finally``
    ran, so scratch tables stayed behind and the query log's buffer was lost, and the user
    saw nothing. It now ends as Ctrl-C does: the clean-ups run, one line, exit code 143.
    An audit then found three ways out of it, each sent here: a second SIGTERM cut the
    clean-up short (later ones are ignored), one during the exit hooks killed the process
    (the handler stays for the whole process), and an error PySpark raised while cleaning
    up after the interrupted call said "unexpected" with exit code 1."""
    child = subprocess.Popen(
        [sys.executable, "-c", PLANTED, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 60
    for marker in ("started", "cleaning", "hook-started"):
        while not (tmp_path / marker).exists():
            assert child.poll() is None, (marker, child.communicate())
            assert time.monotonic() < deadline, f"never reached {marker}"
            time.sleep(0.02)
        child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 143, (out, err)
    assert not (tmp_path / "scratch").exists() and (tmp_path / "hook-done").exists()
    assert out.split() == ["terminated"] and "Traceback" not in err


def test_py4j_s_own_tracebacks_stay_off_the_cli_s_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real Ctrl-C of `lakelayout optimize` during a Spark job printed four tracebacks:
    PySpark cancels the jobs through py4j from inside the interrupted py4j call, and py4j
    logs both failures through the root logger (`logging.exception`, which also adds a
    stderr handler of its own). The CLI drops py4j's records; other warnings still show,
    as the message alone."""
    import py4j.java_gateway

    import lakelayout.cli as cli

    root = logging.getLogger()
    before = list(root.handlers)
    cli._quiet_py4j()
    cli._quiet_py4j()  # main() may run twice in one process: one handler
    assert len(root.handlers) == len(before) + 1
    # py4j's own code path: a module-level logging.exception() from its file
    code = compile(
        "import logging\n"
        "try:\n"
        "    raise KeyboardInterrupt\n"
        "except KeyboardInterrupt:\n"
        "    logging.exception('KeyboardInterrupt while sending command.')\n",
        py4j.java_gateway.__file__,
        "exec",
    )
    exec(code, {})
    logging.getLogger("py4j.clientserver").error("Error while sending or receiving")
    logging.getLogger("lakelayout.table.delta").warning("commit 7 landed: see the log")
    err = capsys.readouterr().err
    assert "Traceback" not in err and "sending" not in err
    assert err.strip() == "commit 7 landed: see the log"


def test_optimize_prints_counts_and_bytes_as_the_other_commands_do() -> None:
    """OPTIMIZE printed ``rows removed 5000`` and ``bytes removed 17991`` where scan,
    describe and vacuum print ``5,000`` and ``17.6 KiB`` (an audit)."""
    from lakelayout.cluster.optimize_metrics import OptimizeMetrics

    rows = dict(
        OptimizeMetrics("zorder", rows_removed=5000, bytes_removed=17991, bytes_added=512).as_rows()
    )
    assert rows["rows removed"] == "5,000"
    assert (rows["bytes removed"], rows["bytes added"]) == ("17.6 KiB", "512 B")
