"""B3: OPTIMIZE (Hilbert, 2-4 columns) time / a plain Spark rewrite of the same rows.

A table of ``--rows`` rows (4 uniform int columns, a double, a 40-char string)
is written with lakelayout in files of ``--target-mb``. For each number of
clustering columns (2, 3, 4) a fresh copy is clustered with
``t.optimize.hilbert(cols)`` (sample -> range ranks -> Hilbert key in Spark
tasks -> shuffle by block -> sort -> write -> one commit), and the same files
are rewritten by plain Spark (``read.parquet -> repartition(n) ->
write.parquet``, same file count). Goal: ratio <= 1.3.

    .venv/bin/python bench/bench_b3_optimize.py --rows 2000000
"""

from __future__ import annotations

import argparse
import os
import shutil
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
    args = ap.parse_args()
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="b3-")
    base = os.path.join(work, "base")
    target = args.target_mb * 1024 * 1024
    Table.create(base, make_data(spark, args.rows), target_file_size=target)
    snap = Table(base).snapshot()
    paths = [os.path.join(base, str(p)) for p in snap.files.paths]
    n_files = max(1, snap.files.total_bytes // target)
    print(f"{args.rows:,} rows, {len(paths)} files, {snap.files.total_bytes / 1e6:.1f} MB")
    spark.read.parquet(*paths).count()  # warm up the JVM and the Python workers

    def plain() -> float:
        out = os.path.join(work, f"plain-{time.time_ns()}")
        started = time.perf_counter()
        spark.read.parquet(*paths).repartition(int(n_files)).write.parquet(out)
        return time.perf_counter() - started

    def plain_lakelayout() -> float:
        from lakelayout.table.writer import write_files

        out = os.path.join(work, f"pl-{time.time_ns()}")
        started = time.perf_counter()
        df = spark.read.parquet(*paths).repartition(int(n_files))
        write_files(df, out, schema=snap.schema, target_file_size=target * 2)
        return time.perf_counter() - started

    for dims in (2, 3, 4):
        cols = [f"k{i}" for i in range(dims)]
        copy = os.path.join(work, f"copy{dims}")
        shutil.copytree(base, copy)
        baseline = plain()
        baseline_ll = plain_lakelayout()
        started = time.perf_counter()
        m = Table(copy, spark=spark).optimize.hilbert(cols)
        took = time.perf_counter() - started
        print(
            f"hilbert {dims} cols: {took:6.2f} s   plain rewrite {baseline:6.2f} s   "
            f"ratio {took / baseline:.2f}   | vs lakelayout writer {baseline_ll:6.2f} s "
            f"ratio {took / baseline_ll:.2f}   ({m.files_added} files)"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
