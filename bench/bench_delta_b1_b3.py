"""B1 and B3 against Delta OSS: bytes and files read per query, and OPTIMIZE time,
for lakelayout's liquid clustering and Hilbert against Delta's liquid clustering and
ZORDER BY, on copies of the same table, in one run.

TPC-H lineitem denormalized (``--scale``, tpchgen-cli) is written once by
lakelayout in arrival order (two appends), ``--rows-per-file`` rows per file. For each of
``--warmup`` + ``--repeats`` rounds, every method (bench/delta_peers.py)
clusters a fresh copy of it on the 3 columns the workload queries most,
aiming at the same file count; the method order rotates from round to round
(interleaved), warm-up rounds are not counted, and B3 compares medians.

The copies of the last round are then queried with ``--queries`` TPC-H
queries (13 templates, mixed): B1 counts the files and bytes each system's
own reader reads (lakelayout: ``Table.scan``'s pruning; Delta:
``spark.read.format("delta")...inputFiles()``), and the same-reader figures
(lakelayout's pruning on every table) beside them. Goals (issue 15): bytes
ours / Delta's <= 0.7, OPTIMIZE time ours / Delta's <= 1.0.

    .venv/bin/python bench/bench_delta_b1_b3.py --scale 0.3 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from delta_peers import BY_NAME, METHODS, PAIRS, ratio
from lakelayout.api import Table
from lakelayout.evaluation import workloads
from lakelayout.evaluation.datasets import tpch_dataset
from lakelayout.evaluation.delta_oss import require_connector
from lakelayout.evaluation.policies import INSERT_TARGET, most_queried
from lakelayout.evaluation.replay import balanced_orders
from lakelayout.expr.parse import parse_predicate
from lakelayout.table.session import spark_session


def optimize_rounds(
    spark: Any, base: str, work: str, columns: list[str], files: int, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, str], dict[str, int]]:
    """Seconds per method over the counted rounds, the last round's copies, their file counts."""
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    copies: dict[str, str] = {}
    made: dict[str, int] = {}
    rounds = args.warmup + args.repeats
    # warm-up rounds in the given order, then the counted rounds balanced (balanced_orders)
    orders = [list(METHODS)] * args.warmup + balanced_orders(list(METHODS), args.repeats)
    for r, order in enumerate(orders):
        for name in order:
            path = os.path.join(work, f"{name}-{r}")
            shutil.copytree(base, path)
            method = BY_NAME[name]
            method.prepare(spark, path, columns, files)
            m = method.run(spark, path, columns, files)
            if r >= args.warmup:
                seconds[name].append(m.seconds)
            made[name] = m.files_added
            if name in copies:
                shutil.rmtree(copies[name], ignore_errors=True)
            copies[name] = path
        if r < args.warmup:
            print(f"round {r + 1}/{rounds} (warm-up): {', '.join(order)}")
        else:
            took = ", ".join(f"{n} {seconds[n][-1]:.2f} s" for n in order)
            print(f"round {r + 1}/{rounds}: {took}")
    return seconds, copies, made


def reads(spark: Any, path: str, queries: list[str]) -> dict[str, list[int]]:
    """Per query: files and bytes kept by lakelayout's pruning and read by Delta's reader."""
    t = Table(path, spark=spark)
    snap = t.snapshot()
    sizes = {
        os.path.basename(str(p)): int(s)
        for p, s in zip(snap.files.paths, snap.files.sizes, strict=True)
    }
    out: dict[str, list[int]] = {"ll_files": [], "ll_bytes": [], "dl_files": [], "dl_bytes": []}
    delta = spark.read.format("delta").load(path)
    for sql in queries:
        report = t.scan(sql).report
        out["ll_files"].append(report.files_kept)
        out["ll_bytes"].append(report.bytes_kept)
        read = {os.path.basename(f) for f in delta.where(sql).inputFiles()}
        out["dl_files"].append(len(read))
        out["dl_bytes"].append(sum(sizes[f] for f in read))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--rows-per-file", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=39)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir", type=Path, default=None)
    args = ap.parse_args()
    spark = spark_session(delta=True)
    require_connector(spark)
    work = tempfile.mkdtemp(prefix="b1b3-", dir=args.work_dir)
    try:
        ds = tpch_dataset(spark, args.scale, Path(work) / "data", batches=2)
        base = os.path.join(work, "base")
        t = Table.create(
            base, ds.batch(spark, 0, args.rows_per_file), target_file_size=INSERT_TARGET
        )
        t.append(ds.batch(spark, 1, args.rows_per_file), target_file_size=INSERT_TARGET)
        snap = t.snapshot()
        files = len(snap.files)
        wl = workloads.generate(
            workloads.TPCH_TEMPLATES, args.queries, seed=args.seed, shape="mixed"
        )
        columns = most_queried([parse_predicate(q.sql, snap.schema) for q in wl], 3)
        print(
            f"TPC-H {args.scale}: {ds.rows:,} rows, {len(snap.files)} files "
            f"({snap.files.total_bytes / 2**20:.1f} MiB); clustering on {', '.join(columns)}; "
            f"{args.warmup} warm-up + {args.repeats} counted rounds, order balanced"
        )
        seconds, copies, made = optimize_rounds(spark, base, work, columns, files, args)
        print("\nB3: OPTIMIZE seconds (median of counted rounds; files written)")
        for name in METHODS:
            runs = "/".join(f"{s:.2f}" for s in seconds[name])
            med = statistics.median(seconds[name])
            print(f"  {name:>13}: {med:7.2f} s  ({made[name]} files; runs {runs})")
        for ours, theirs in PAIRS:
            o, t = statistics.median(seconds[ours]), statistics.median(seconds[theirs])
            print(f"  B3 {ours} / {theirs}: {ratio(o, t)} (goal <= 1.0)")

        sqls = [q.sql for q in wl]
        got = {name: reads(spark, copies[name], sqls) for name in METHODS}
        got["none"] = reads(spark, base, sqls)
        print(f"\nB1: per query over {len(sqls)} queries (mean files, total MiB read)")
        print(f"  {'table':>13}  {'lakelayout reader':>24}  {'Delta reader':>24}")
        for name in ("none", *METHODS):
            g = got[name]
            print(
                f"  {name:>13}  {statistics.mean(g['ll_files']):8.1f} files "
                f"{sum(g['ll_bytes']) / 2**20:9.1f} MiB  "
                f"{statistics.mean(g['dl_files']):8.1f} files {sum(g['dl_bytes']) / 2**20:9.1f} MiB"
            )
        for ours, theirs in PAIRS:
            own = ratio(sum(got[ours]["ll_bytes"]), sum(got[theirs]["dl_bytes"]))
            same = ratio(sum(got[ours]["ll_bytes"]), sum(got[theirs]["ll_bytes"]))
            files = ratio(sum(got[ours]["ll_files"]), sum(got[theirs]["dl_files"]))
            print(
                f"  B1 {ours} / {theirs}: bytes {own} (each its own reader; goal <= 0.7), "
                f"{same} (both lakelayout's pruning); files {files}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
