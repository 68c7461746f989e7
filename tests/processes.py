"""Child processes for tests: start in their own process group, wait for them, always stop them.

Every process a test starts goes through :func:`start` (a new session, so the
process and everything it spawns -- a JVM, Spark's Python workers -- share one
process group) and is ended by :func:`stop` or :func:`kill` on that group,
by its id, in a ``finally`` or a fixture's teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: JVM option for short-lived child JVMs: tiered compilation stops at C1
C1_ONLY = "-XX:TieredStopAtLevel=1"
#: JIT thresholds of the test session's JVM: its top-tier (C2) compiler waits for ~10x the
#: calls and loops it waits for by default. A sampled cold run of a Delta-heavy file spent
#: 64 of its JVM's 150 CPU seconds in the C2 compiler thread; alone, that thread has the
#: second core to itself, but ``make test`` keeps both cores busy with two workers. Two
#: Delta-heavy files side by side, -n 2: 217 / 220 s by default, 195 s with these (197 s
#: with C1 alone, which slows the longer property runs). A test setting, as the children's
#: C1_ONLY (above): a user's long-lived session keeps the JVM's defaults.
LATE_C2 = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000 "
    "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000"
)
#: Spark SQL settings of the suite's shared session (tests/conftest.py): plans and
#: expressions are interpreted instead of compiled to Java bytecode by Janino. Its tables
#: hold tens to thousands of rows, and compiling each new query's code costs more than it
#: saves. The whole suite, -n 2, quiet machine, two runs each (2026-11-29): 780 / 761 s
#: compiled, 687 / 735 s interpreted (the Delta-heavy files 17-36 s less each). Not for the
#: children's drivers (C1 only), where it measured slower: the 5 files that start them,
#: two runs each, interleaved, 174 / 191 s compiled, 214 / 220 s interpreted. A test setting:
#: a user's session compiles as Spark does by default, and
#: tests/expr/test_spark_differential.py compares the evaluator with compiled expressions.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: Spark's defaults for the same settings (``conf.unset`` is not enough: the session keeps
#: the value its SparkContext started with)
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
#: the readiness waits of a loaded 2-core machine (not a timing assertion)
STARTUP_SECONDS = 300.0


def start(
    args: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``args`` in a new process group, output to ``log``."""
    merged = {**os.environ, **(env or {})}
    merged.setdefault("PYSPARK_PYTHON", sys.executable)
    merged.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    merged.pop("PYTEST_CURRENT_TEST", None)
    # a child's JVMs (a Spark driver, standalone daemons) live for seconds to a minute: the
    # quick C1 compiler alone starts them sooner and leaves the 2 cores to the tests rather
    # than to C2 compiler threads (the 5 files that start children: 260-268 s -> 232-242 s,
    # two runs each, interleaved). A test setting, not the library's: the shared test
    # session's long-lived JVM keeps the defaults (C1 alone slowed its Delta-heavy files).
    merged.setdefault("SPARK_SUBMIT_OPTS", C1_ONLY)
    merged.setdefault("SPARK_DAEMON_JAVA_OPTS", C1_ONLY)
    handle = open(log, "wb")  # noqa: SIM115 -- owned by the child, closed with it
    try:
        return subprocess.Popen(
            list(args),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=merged,
            start_new_session=True,
        )
    finally:
        handle.close()


def python(
    script: Path, *args: str, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``script`` with this interpreter (see :func:`start`)."""
    return start([sys.executable, str(script), *args], log=log, env=env)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of ``proc`` (a crash: nothing gets to clean up)."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def stop(proc: subprocess.Popen[bytes], *, grace: float = 20.0) -> None:
    """SIGTERM the process group of ``proc``; SIGKILL it if it is still there after ``grace``."""
    _signal_group(proc, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    kill(proc)  # the group may outlive its leader (a JVM's children)


def tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for(
    ready: Callable[[], bool],
    *,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
    timeout: float = STARTUP_SECONDS,
) -> None:
    """Poll ``ready`` until True; fail with the child's log if it dies or never gets there."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"{what}: the process exited with {proc.returncode}\n" + (tail(log) if log else "")
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: not ready after {timeout:.0f} s\n" + (tail(log) if log else "")
            )
        time.sleep(0.2)


def free_port() -> int:
    """A TCP port on localhost nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
