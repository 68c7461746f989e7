"""Bench: an append after Spark's Python workers sat idle, Spark's daemon against lakelayout's.

Spark kills a Python worker after a minute without work; the next write forks
fresh ones. With ``spark.python.daemon.module=pyspark.daemon`` (Spark's own)
each imports pyarrow and lakelayout again; with ``lakelayout.table.daemon``
(what local sessions use) they arrive imported. Each round starts one process
per daemon, alternating which goes first; a process caches a 30-column table
(:func:`lakelayout.advisor.calibrate._frame`, ``--rows`` rows), appends it
three times warm, then ``--pauses`` times: ``--idle`` seconds of JVM-only jobs,
one append ("cold") and one more right after ("warm"). Printed: medians per
daemon over rounds and pauses, and the cold-start cost (cold - warm).

    .venv/bin/python bench/bench_cold_workers.py --rows 450000 --idle 70 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DAEMONS = {"spark": "pyspark.daemon", "lakelayout": "lakelayout.table.daemon"}


def child(daemon: str, rows: int, idle: float, pauses: int) -> dict[str, list[float]]:
    from lakelayout import Table
    from lakelayout.advisor.calibrate import _frame
    from lakelayout.table.session import spark_session

    spark = spark_session(**{"spark.python.daemon.module": DAEMONS[daemon]})
    df = _frame(spark, rows, wide=True).cache()
    df.count()
    out: dict[str, list[float]] = {"first": [], "warm": [], "cold": []}
    with tempfile.TemporaryDirectory() as d:
        table = Table.create(os.path.join(d, "t"), df.limit(1000))

        def append() -> float:
            started = time.perf_counter()
            table.append(df)
            return time.perf_counter() - started

        out["first"].append(append())
        append()
        append()
        for _ in range(pauses):
            end = time.time() + idle
            while time.time() < end:
                spark.range(1000).selectExpr("sum(id)").collect()  # JVM only, no Python worker
                time.sleep(1)
            out["cold"].append(append())
            out["warm"].append(append())
    spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--idle", type=float, default=70.0, help="seconds without Python work")
    parser.add_argument("--pauses", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", choices=sorted(DAEMONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.idle, args.pauses)))
        return
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    results: dict[str, dict[str, list[float]]] = {d: {} for d in DAEMONS}
    for r in range(args.rounds):
        order = list(DAEMONS) if r % 2 == 0 else list(reversed(DAEMONS))
        for daemon in order:
            cmd = [sys.executable, __file__, "--child", daemon, "--rows", str(args.rows),
                   "--idle", str(args.idle), "--pauses", str(args.pauses)]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"round {r + 1} {daemon}: {json.dumps(got)}", flush=True)
            for key, values in got.items():
                results[daemon].setdefault(key, []).extend(values)
    print(
        f"\n{args.rows:,} rows x 30 columns, {args.idle:.0f} s idle, {args.rounds} rounds, medians:"
    )
    print(f"{'daemon':<12} {'first':>7} {'warm':>7} {'cold':>7} {'cold-warm':>10}")
    for daemon, got in results.items():
        first, warm, cold = (statistics.median(got[k]) for k in ("first", "warm", "cold"))
        print(f"{DAEMONS[daemon]:<24} {first:7.2f} {warm:7.2f} {cold:7.2f} {cold - warm:10.2f}")


if __name__ == "__main__":
    main()
