"""Appends to a table under online reorganization: catch-ups against none.

Two identical local tables of ``--rows`` rows (16 files), online reorganization
enabled on both with the same settings and the same α (measured once, on the
first, and given to both); one with catch-ups (the default), one without
(``catch_up=False``). Phase 1: ``--warm`` queries of one template (ranges on
``a``) until both have switched to a layout for it (the switch is waited for).
Phase 2: ``--rounds`` rounds of an append of ``--append-rows`` rows (one file,
``a`` spread over its whole range) to both, then ``--queries`` queries of the
template on each. Every query is ``Table.scan(sql).df.count()``, the two tables
alternated query by query, the first one swapped every round; a background
rewrite is waited for before the next query (so its seconds are not in a
query's). Printed per table, phase 2 only: bytes the queries kept (file
pruning), query seconds, rewrites and their seconds, the online step each scan paid
(the scan's hook, timed), and the ratio without / with catch-ups.

    .venv/bin/python bench/bench_online_appends.py --rows 400000 --rounds 8
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

from bench_online_step import write_in_files
from lakelayout import online_table
from lakelayout.api import Table
from lakelayout.table.session import spark_session


def batch(rows: int, seed: int, start: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(start, start + rows, dtype=np.int64),
            "a": rng.integers(0, 1_000_000, rows),
            "b": rng.integers(0, 1_000_000, rows),
            "c": rng.random(rows),
            "s": pa.array([f"v{i % 9973}" for i in range(rows)]),
        }
    )


def make_table(path: str, rows: int, files: int) -> Table:
    return write_in_files(path, batch(rows, 0, 0), files)


def queries(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"a >= {lo} AND a < {lo + 20_000}" for lo in rng.integers(0, 980_000, n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--warm", type=int, default=150, help="phase-1 queries at most")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--append-rows", type=int, default=25_000)
    ap.add_argument("--queries", type=int, default=40, help="queries per round")
    ap.add_argument("--alpha", type=float, default=0.0, help="0: measured once, on the first")
    args = ap.parse_args()
    spark = spark_session("local[2]", **{"spark.ui.enabled": "false"})
    names = ["catch-up", "none"]
    with tempfile.TemporaryDirectory() as tmp:
        tables = {
            name: Table(make_table(f"{tmp}/{name}", args.rows, args.files).uri, spark=spark)
            for name in names
        }
        alpha: float | str = args.alpha or "measured"
        for name in names:
            status = tables[name].online.enable(
                alpha=alpha, seed=0, interval=25, window=100, catch_up=name == "catch-up"
            )
            alpha = status["alpha"]  # the second table decides with the first's α
        print(f"α = {alpha:.1f} ({'given' if args.alpha else 'measured on the first table'})")

        # phase 1: until both switched to a layout for the template
        k = 0
        for sql in queries(args.warm, seed=1):
            k += 1
            for name in names:
                tables[name].scan(sql).df.count()
                tables[name].online.wait()
            if all(t.online.status()["switches"] >= 1 for t in tables.values()):
                break
        switched = {n: t.online.status()["applied_label"] for n, t in tables.items()}
        print(f"phase 1: {k} queries; laid out by {switched}")
        before = {n: len(t.online.history()) for n, t in tables.items()}

        # the online step of each scan (the hook Table.scan calls), timed per table
        steps: dict[str, list[float]] = {name: [] for name in names}
        hook = online_table.after_scan

        def timed_hook(table: Table, *args: object) -> None:
            started = time.perf_counter()
            hook(table, *args)  # type: ignore[arg-type]
            for name in names:
                if tables[name].uri == table.uri:
                    steps[name].append(time.perf_counter() - started)

        online_table.after_scan = timed_hook  # type: ignore[assignment]
        kept = dict.fromkeys(names, 0)
        seconds = dict.fromkeys(names, 0.0)
        for r in range(args.rounds):
            data = batch(args.append_rows, 100 + r, args.rows + r * args.append_rows)
            for name in names:
                tables[name].append(data)
            order = names if r % 2 == 0 else names[::-1]
            for sql in queries(args.queries, seed=10 + r):
                for name in order:
                    started = time.perf_counter()
                    result = tables[name].scan(sql)
                    result.df.count()
                    seconds[name] += time.perf_counter() - started
                    kept[name] += result.report.bytes_kept
                    tables[name].online.wait()
        online_table.after_scan = hook  # type: ignore[assignment]
        mib = 1 << 20
        print(
            f"phase 2: {args.rounds} rounds of an append of {args.append_rows:,} rows, then "
            f"{args.queries} queries; one run"
        )
        totals = {}
        for name in names:
            t = tables[name]
            history = t.online.history()[before[name] :]
            rewrites = sum(h.get("seconds") or 0.0 for h in history)
            kinds = [h.get("kind", "switch") for h in history]
            totals[name] = seconds[name] + rewrites
            status = t.online.status()
            print(
                f"  {name:9s} MiB kept {kept[name] / mib:9.1f}  query s {seconds[name]:7.1f}  "
                f"rewrites {len(history)} ({kinds.count('catch-up')} catch-ups, "
                f"{kinds.count('switch')} switches) {rewrites:6.1f} s  total s "
                f"{totals[name]:7.1f}  files {len(t.snapshot().files)}  "
                f"rows {t.snapshot().files.total_rows:,}"
            )
            assert status["queries"] > 0
            ms = [1000 * x for x in steps[name]]
            print(
                f"  {'':9s} online step per scan: median {statistics.median(ms):.1f} ms, "
                f"p90 {np.percentile(ms, 90):.1f} ms ({len(ms)} scans)"
            )
        print(
            f"  none / catch-up: MiB kept {kept['none'] / max(kept['catch-up'], 1):.2f}, "
            f"total s {totals['none'] / totals['catch-up']:.2f}"
        )


if __name__ == "__main__":
    main()
