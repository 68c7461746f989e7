"""What online reorganization adds to a scan: the reorganizer's step on the query's path.

With ``t.online.enable()``, every ``Table.scan`` with a predicate steps the
table's reorganizer before it returns (:func:`lakelayout.online_table.after_scan`):
take the state's file lock, load the state if another process changed it,
price the query on every state, move the counters, save the state, release
the lock. Every ``interval`` scans the layout manager also fits candidate
layouts on its window (a *candidate round*), and when the reorganizer
switches, a rewrite starts in the background.

This bench times that step on one local table of ``--rows`` rows, against the
scan it follows, in the same run:

* ``scan`` — ``Table.scan(sql)`` with online reorganization off (planning,
  pruning, the query log; the DataFrame is built, not run);
* ``count`` — ``Table.scan(sql).df.count()``, the whole query, online off;
* ``step`` — :func:`after_scan` alone, for a scan that fits nothing;
* ``round`` — :func:`after_scan` for a scan that completes an interval;
* ``lock`` — taking and releasing the state's file lock, uncontended;
* ``reload`` — a step after another process wrote the state (as when two
  processes scan the table in turn: each step loads the other's state first);
* ``contended`` — a step while a second, real process feeds the same scans
  to the same table at full speed (both processes' scans must all be
  counted).

The rounds run in the scan's thread (``rounds="foreground"``, as before
this bench) or in a background thread of the process (``rounds="background"``,
the default): both are timed in the same run, alternated, on fresh states.
α is fixed very high so that no switch starts: the rewrite is not part of
the step.

    .venv/bin/python bench/bench_online_step.py --rows 400000 --scans 300
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lakelayout import online_table
from lakelayout.api import Table
from lakelayout.expr.parse import parse_predicate
from lakelayout.table import delta
from lakelayout.table.session import spark_session


def make_table(path: str, rows: int, files: int) -> Table:
    rng = np.random.default_rng(0)
    data = pa.table(
        {
            "a": rng.integers(0, 1_000_000, rows),
            "b": rng.integers(0, 1_000_000, rows),
            "c": rng.random(rows),
            "s": pa.array([f"v{i % 9973}" for i in range(rows)]),
        }
    )
    return write_in_files(path, data, files)


def write_in_files(path: str, data: pa.Table, files: int) -> Table:
    """A new table of ``data`` in ``files`` files, one commit each (as a stream of inserts)."""
    per = -(-data.num_rows // files)
    Table.create(path, data.slice(0, per))
    table = Table(path)
    for f in range(1, files):
        table.append(data.slice(f * per, per))
    return table


def queries(n: int, seed: int) -> list[str]:
    """Drifting ranges: a block of queries on ``a``, then on ``b``, then on both."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lo = int(rng.integers(0, 950_000))
        column = ("a", "b", "ab")[(i // 100) % 3]
        if column == "ab":
            out.append(f"a >= {lo} AND a < {lo + 50_000} AND b < {lo}")
        else:
            out.append(f"{column} >= {lo} AND {column} < {lo + 50_000}")
    return out


#: the other process of the contended phase: feeds the same scans through the hook
OTHER = """
import os, sys, time
from lakelayout import online_table
from lakelayout.api import Table
from lakelayout.expr.parse import parse_predicate

uri, ready, go = sys.argv[1:4]
t = Table(uri)
snap = t.snapshot()
bound = [(sql, parse_predicate(sql, snap.schema)) for sql in sys.argv[4:]]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
started = time.perf_counter()
for sql, predicate in bound:
    online_table.after_scan(t, sql, predicate, snap)
print(f"other process: {len(bound)} scans in {time.perf_counter() - started:.2f} s")
"""


def run_other(tmp: str, uri: str, sqls: list[str]) -> subprocess.Popen[bytes]:
    """Start the other process; return once it is ready and released (both loops then
    start together)."""
    script, ready, go = (os.path.join(tmp, n) for n in ("other.py", "ready", "go"))
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(OTHER)
    proc = subprocess.Popen([sys.executable, script, uri, ready, go, *sqls])
    while not os.path.exists(ready):
        if proc.poll() is not None:
            raise RuntimeError("the other scanning process stopped before it was ready")
        time.sleep(0.01)
    open(go, "w").close()
    return proc


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--scans", type=int, default=300)
    ap.add_argument("--interval", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=2, help="fresh states per mode")
    args = ap.parse_args()
    spark = spark_session("local[2]", **{"spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        table = Table(make_table(f"{tmp}/t", args.rows, args.files).uri, spark=spark)
        snap = table.snapshot()
        print(
            f"table: {args.rows:,} rows, {len(snap.files)} files "
            f"(built in {time.perf_counter() - started:.1f} s)"
        )
        sqls = queries(args.scans, seed=1)
        bound = [(sql, parse_predicate(sql, snap.schema)) for sql in sqls]
        # the scan it follows, online off: warm first (JVM, imports), then timed
        for sql in sqls[:20]:
            table.scan(sql).df.count()
        scan = [timed(lambda sql=sql: table.scan(sql)) for sql in sqls[:60]]
        count = [timed(lambda sql=sql: table.scan(sql).df.count()) for sql in sqls[:30]]
        store = online_table.OnlineStore(table.uri)
        lock = []
        for _ in range(200):
            t0 = time.perf_counter()
            with store.locked(wait=False):
                pass
            lock.append(time.perf_counter() - t0)

        steps: dict[str, list[float]] = {}
        rounds: dict[str, list[float]] = {}
        tails: dict[str, list[float]] = {}
        states: dict[str, list[int]] = {}
        finals: dict[tuple[str, int], object] = {}
        modes = ["foreground", "background"]
        for r in range(args.repeats):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                online_table.ROUNDS_IN_BACKGROUND = mode == "background"
                online_table._CONTROLLERS.clear()
                store.clear_queue()
                store.state.unlink(missing_ok=True)
                delta.set_properties(table.uri, {online_table.ENABLED_PROPERTY: ""})
                table.online.enable(alpha=1e9, interval=args.interval, seed=r)
                snap = table.snapshot()
                for k, (sql, predicate) in enumerate(bound, 1):
                    seconds = timed(
                        lambda sql=sql, predicate=predicate, snap=snap: online_table.after_scan(
                            table, sql, predicate, snap
                        )
                    )
                    due = k % args.interval == 0
                    (rounds if due else steps).setdefault(mode, []).append(seconds)
                tails.setdefault(mode, []).append(timed(lambda: table.online.wait()))
                status = table.online.status()
                states.setdefault(mode, []).append(len(status.get("states") or []))
                finals[(mode, r)] = status["states"]  # ids, labels, counters, costs
                assert status["queries"] == args.scans, status["queries"]
        online_table.ROUNDS_IN_BACKGROUND = True
        # two processes scanning one table: each step first reloads what the other wrote
        # (the state file's time is moved as another process's write moves it)
        reload = []
        for k, (sql, predicate) in enumerate(bound):
            table.online.wait()
            state = store.read()
            assert state is not None
            if (state["engine"]["manager"]["queries"] + 1) % args.interval == 0:
                online_table.after_scan(table, sql, predicate, snap)  # the round: not timed
                continue
            os.utime(store.state, ns=(time.time_ns(), time.time_ns() + k + 1))
            reload.append(
                timed(
                    lambda sql=sql, predicate=predicate, snap=snap: online_table.after_scan(
                        table, sql, predicate, snap
                    )
                )
            )

        # two real processes: another one scans the table (no JVM: a step reads the Delta
        # log and the stored sample) while this one's steps are timed, both at full speed
        before = table.online.status()["queries"]
        other = run_other(tmp, table.uri, sqls)
        contended = []
        try:
            for sql, predicate in bound:
                contended.append(
                    timed(
                        lambda sql=sql, predicate=predicate, snap=snap: online_table.after_scan(
                            table, sql, predicate, snap
                        )
                    )
                )
        finally:
            assert other.wait(timeout=600) == 0, "the other scanning process failed"
        took = sum(contended)
        table.online.wait()
        counted = table.online.status()["queries"] - before
        assert counted == 2 * len(bound), (counted, 2 * len(bound))

    ms = 1000.0
    print(
        f"one run, {args.scans} scans x {args.repeats} fresh states per mode, interval "
        f"{args.interval}; milliseconds"
    )
    print(f"  scan (online off, DataFrame built)  median {statistics.median(scan) * ms:8.1f}")
    print(f"  scan + count (online off)           median {statistics.median(count) * ms:8.1f}")
    print(f"  state lock, uncontended             median {statistics.median(lock) * ms:8.3f}")
    for mode in modes:
        s, rd = steps[mode], rounds[mode]
        print(
            f"  {mode:10s} step  median {statistics.median(s) * ms:7.1f}  p90 "
            f"{pct(s, 90) * ms:7.1f}  max {max(s) * ms:7.1f}   round median "
            f"{statistics.median(rd) * ms:8.1f}  max {max(rd) * ms:8.1f}   "
            f"(states at the end {states[mode]}, wait() after the last scan "
            f"{max(tails[mode]) * ms:.0f})"
        )
    print(
        f"  step after another process wrote the state: median "
        f"{statistics.median(reload) * ms:7.1f}  p90 {pct(reload, 90) * ms:7.1f}  max "
        f"{max(reload) * ms:7.1f}"
    )
    print(
        f"  step while another process scans too: median "
        f"{statistics.median(contended) * ms:7.1f}  p90 {pct(contended, 90) * ms:7.1f}  max "
        f"{max(contended) * ms:7.1f}  (this process's {len(contended)} scans in {took:.2f} s; "
        f"both processes' {2 * len(contended)} counted)"
    )
    same = all(finals[("foreground", r)] == finals[("background", r)] for r in range(args.repeats))
    print(f"  the same states, counters and costs at the end in both modes: {same}")
    fg, bg = rounds["foreground"], rounds["background"]
    print(
        f"  round on the scan's path, background / foreground (medians): "
        f"{statistics.median(bg) / statistics.median(fg):.3f}"
    )
    print(
        f"  ordinary step / scan (online off): "
        f"{statistics.median(steps['background']) / statistics.median(scan):.2f}; "
        f"/ scan + count: {statistics.median(steps['background']) / statistics.median(count):.2f}"
    )


if __name__ == "__main__":
    main()
