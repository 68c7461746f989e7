"""B3: OPTIMIZE (Hilbert, 2-4 columns) time / a plain Spark rewrite of the same rows.

A table of ``--rows`` rows (4 uniform int columns, a double, a 40-char string)
is written with lakelayout in files of ``--target-mb``. For each number of
clustering columns (2, 3, 4) a fresh copy is clustered with
``t.optimize.hilbert(cols)`` (sample -> range ranks -> Hilbert key in Spark
tasks -> shuffle by block -> sort -> write -> one commit), and the same files
are rewritten by plain Spark (``read.parquet -> repartition(n) ->
write.parquet`` with ``n`` = the number of files OPTIMIZE wrote). Each is run
``--repeats`` times, interleaved, and the medians are compared (single runs
on a shared 2-core machine swing by 30%). Goal: ratio <= 1.3.

    .venv/bin/python bench/bench_b3_optimize.py --rows 2000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.table.session import spark_session


def make_data(spark, rows: int):  # type: ignore[no-untyped-def]
    return spark.range(rows).select(
        *[(F.rand(i) * 1_000_000).cast("int").alias(f"k{i}") for i in range(4)],
        F.rand(9).alias("x"),
        F.sha1(F.col("id").cast("string")).substr(1, 40).alias("s"),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--target-mb", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="b3-")
    base = os.path.join(work, "base")
    target = args.target_mb * 1024 * 1024
    Table.create(base, make_data(spark, args.rows), target_file_size=target)
    snap = Table(base).snapshot()
    paths = [os.path.join(base, str(p)) for p in snap.files.paths]
    print(f"{args.rows:,} rows, {len(paths)} files, {snap.files.total_bytes / 1e6:.1f} MB")
    spark.read.parquet(*paths).count()  # warm up the JVM and the Python workers

    def plain(n_files: int) -> float:
        out = os.path.join(work, f"plain-{time.time_ns()}")
        started = time.perf_counter()
        spark.read.parquet(*paths).repartition(n_files).write.parquet(out)
        return time.perf_counter() - started

    def optimize(dims: int, rep: int) -> tuple[float, int]:
        copy = os.path.join(work, f"copy{dims}-{rep}")
        shutil.copytree(base, copy)
        started = time.perf_counter()
        m = Table(copy, spark=spark).optimize.hilbert([f"k{i}" for i in range(dims)])
        return time.perf_counter() - started, m.files_added

    print(
        "median of", args.repeats, "interleaved runs each; plain writes as many files as OPTIMIZE"
    )
    for dims in (2, 3, 4):
        ours, theirs = [], []
        for rep in range(args.repeats):
            took, files = optimize(dims, rep)
            ours.append(took)
            theirs.append(plain(files))
        o, p = statistics.median(ours), statistics.median(theirs)
        print(
            f"hilbert {dims} cols: OPTIMIZE {o:6.2f} s   plain Spark rewrite {p:6.2f} s   "
            f"ratio {o / p:.2f}   ({files} files; runs {_fmt(ours)} vs {_fmt(theirs)})"
        )
    shutil.rmtree(work, ignore_errors=True)


def _fmt(times: list[float]) -> str:
    return "/".join(f"{t:.2f}" for t in times)


if __name__ == "__main__":
    main()
