"""The second process of the concurrent-writer tests: Delta Lake's own connector writing.

Run by ``test_concurrent_writers.py`` as a separate Python process with its own
JVM (never imported by pytest), started once for the module and given one job per
test (one JVM start and one warm-up of Delta's classes instead of one per test)::

    python delta_writer.py JOBS

runs ``JOBS/1.json``, ``JOBS/2.json``, ... in turn as they appear (each a JSON list
of arguments, one of)::

    writes   TABLE STATE --initial N --rounds R --rows K [--gated]
    optimize TABLE STATE --zorder a,k

and exits once ``JOBS/exit`` exists. It writes ``JOBS/ready`` once its session runs.

``writes``: R rounds of one Delta append (ids ``[N + r*K, N + (r+1)*K)``) and
one Delta DELETE (initial rows with ``id % 2R == r``); with ``--gated`` the
n-th statement starts only once the file ``STATE.go`` holds a number >= n, so
the test can place a statement inside lakelayout's commit window. ``optimize``: Delta's
OPTIMIZE and OPTIMIZE ZORDER BY, alternately, until the file ``STATE.stop``
exists. A statement that loses a race to a concurrent commit raises one of
Delta's ``DeltaConcurrentModificationException`` subclasses and is retried
(writes) or counted and run again (optimize), as a Delta user would.

A job writes ``STATE.ready`` when it starts, ``STATE.progress`` (statements
committed so far) after each commit, and ``STATE`` (JSON) when done: statements
committed, conflicts by exception class, other errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

#: attempts of one statement before the process gives up
MAX_ATTEMPTS = 100
#: pause between two OPTIMIZEs, so the other writer's statements get a window to commit
PAUSE_SECONDS = 0.5
#: how long a gated statement waits to be let through, and the server for its next job
GATE_SECONDS = 1200


def _session() -> Any:
    from lakelayout.table.session import spark_session

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    return spark_session("local[1]", app_name="delta-writer", delta=True, **conf)


def _run(spark: Any, statement: str, conflicts: Counter[str]) -> bool:
    """Run ``statement``; False when Delta reports a concurrent modification."""
    from delta import exceptions as dx

    # Delta's Python conflict exceptions are siblings, not subclasses of one base
    lost = (
        dx.DeltaConcurrentModificationException,
        dx.ConcurrentWriteException,
        dx.MetadataChangedException,
        dx.ProtocolChangedException,
        dx.ConcurrentAppendException,
        dx.ConcurrentDeleteReadException,
        dx.ConcurrentDeleteDeleteException,
        dx.ConcurrentTransactionException,
    )
    try:
        spark.sql(statement).collect()
    except lost as exc:
        conflicts[type(exc).__name__] += 1
        return False
    return True


def _committed(state: dict[str, Any], args: argparse.Namespace, text: str) -> None:
    """Record a committed statement; ``STATE.progress`` holds how many so far."""
    state["committed"].append(text)
    with open(args.state + ".progress", "w") as fh:
        fh.write(str(len(state["committed"])))


def _gate(args: argparse.Namespace, n: int) -> None:
    """With ``--gated``, wait until ``STATE.go`` allows statement ``n`` (1-based) to start."""
    if not args.gated:
        return
    deadline = time.monotonic() + GATE_SECONDS
    while True:
        try:
            with open(args.state + ".go") as fh:
                if int(fh.read() or 0) >= n:
                    return
        except (FileNotFoundError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"statement {n} was never let through the gate")
        time.sleep(0.1)


def writes(spark: Any, ref: str, args: argparse.Namespace, state: dict[str, Any]) -> None:
    conflicts: Counter[str] = state["conflicts"]
    started = 0
    for r in range(args.rounds):
        lo = args.initial + r * args.rows
        spark.range(lo, lo + args.rows).selectExpr(
            "id", "cast(id * 7 % 1000 as int) as a", "cast(id % 10 as int) as k"
        ).createOrReplaceTempView("batch")
        for text in (
            f"INSERT INTO {ref} SELECT * FROM batch",
            f"DELETE FROM {ref} WHERE id < {args.initial} AND id % {2 * args.rounds} = {r}",
        ):
            started += 1
            _gate(args, started)
            for _ in range(MAX_ATTEMPTS):
                if _run(spark, text, conflicts):
                    _committed(state, args, text)
                    break
            else:
                raise RuntimeError(f"gave up after {MAX_ATTEMPTS} conflicts: {text}")


def optimize(spark: Any, ref: str, args: argparse.Namespace, state: dict[str, Any]) -> None:
    statements = [f"OPTIMIZE {ref}", f"OPTIMIZE {ref} ZORDER BY ({args.zorder})"]
    k = 0
    while not os.path.exists(args.state + ".stop"):
        text = statements[k % 2]
        if _run(spark, text, state["conflicts"]):
            _committed(state, args, text)
        k += 1
        time.sleep(PAUSE_SECONDS)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["writes", "optimize"])
    ap.add_argument("table")
    ap.add_argument("state")
    ap.add_argument("--initial", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--zorder", default="a, k")
    ap.add_argument("--gated", action="store_true", help="statement n waits for STATE.go >= n")
    return ap


def job(spark: Any, argv: list[str]) -> None:
    """Run one job; its outcome (errors included) goes to its STATE file."""
    args = _parser().parse_args(argv)
    state: dict[str, Any] = {"committed": [], "conflicts": Counter(), "errors": []}
    with open(args.state + ".ready", "w") as fh:
        fh.write("ready")
    ref = "delta.`" + args.table.replace("`", "``") + "`"
    try:
        (writes if args.mode == "writes" else optimize)(spark, ref, args, state)
    except Exception:  # reported to the test, which fails on it
        state["errors"].append(traceback.format_exc())
    with open(args.state + ".tmp", "w") as fh:
        json.dump({**state, "conflicts": dict(state["conflicts"])}, fh)
    os.replace(args.state + ".tmp", args.state)


def main() -> int:
    jobs = Path(sys.argv[1])
    spark = _session()
    spark.range(1).collect()  # the JVM and Delta's classes are up before any race starts
    (jobs / "ready").write_text("ready")
    n, idle = 1, time.monotonic()
    while not (jobs / "exit").exists():
        path = jobs / f"{n}.json"
        if path.exists():
            job(spark, json.loads(path.read_text()))
            n, idle = n + 1, time.monotonic()
        elif time.monotonic() - idle > GATE_SECONDS:
            break  # the test process is gone
        else:
            time.sleep(0.1)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
