"""B8: writing a table -- ``Table.create`` / ``append`` next to Spark and delta-rs.

The same rows (``--rows``: 4 int columns, a double, a 40-char string) are
written by

* ``create``: ``Table.create(path, df)`` (Spark tasks write Parquet with
  pyarrow and Delta statistics, one delta-rs commit);
* ``append``: ``Table(path).append(df)`` to a table created empty;
* ``create-snappy``: ``create`` of a table whose ``lakelayout.parquetCodec``
  is snappy, Spark's default: the like-for-like peer of ``parquet``;
* ``create-arrow`` / ``append-arrow``: the same two with the rows as a
  ``pyarrow.Table`` on the driver (written in this process by the same
  writer, no Spark job): the like-for-like peer of delta-rs;
* ``parquet``: ``df.write.parquet(path)`` (plain Spark, no Delta log, no
  statistics beyond Parquet's own; Spark's default codec, snappy);
* ``parquet-zstd``: the same with zstd, the codec lakelayout writes (its files
  are smaller than snappy's; zstd costs more CPU to compress);
* ``delta-rs``: ``deltalake.write_deltalake(path, arrow)`` of the same rows
  already in Arrow on the driver (the collect is not timed);
* ``delta-rs-df``: what delta-rs costs a user who holds the DataFrame:
  ``df.toArrow()`` then ``write_deltalake`` (the collect timed), the peer of
  ``create`` / ``append`` from a DataFrame.

``df`` is cached and counted first, so every Spark writer reads the same rows
from memory. The JVM and workers are warmed, repeats interleaved in
balanced orders (``balanced_orders``: each order, then its reverse). Printed: median seconds and the ratios ``create / parquet`` (goal
<= 1.2) and ``create / delta-rs`` (goal <= 1), for DataFrame and Arrow input,
and each DataFrame writer over ``delta-rs-df``.

    .venv/bin/python bench/bench_b8_write.py --rows 2000000
    .venv/bin/python bench/bench_b8_write.py --rows 1500000 --partitions 150  # small files
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.evaluation.replay import balanced_orders
from lakelayout.table.session import spark_session
from lakelayout.table.writer import PARQUET_CODEC, arrow_schema_of


def make_data(spark: Any, rows: int) -> Any:
    return spark.range(rows).select(
        *[(F.rand(i) * 1_000_000).cast("int").alias(f"k{i}") for i in range(4)],
        F.rand(9).alias("x"),
        F.sha1(F.col("id").cast("string")).substr(1, 40).alias("s"),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="spread the DataFrame over this many partitions (one file each for the Spark "
        "writers: many small files, as a replay's inserts write); default: Spark's",
    )
    args = ap.parse_args()
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="b8-")
    df = make_data(spark, args.rows)
    if args.partitions > 0:
        df = df.repartition(args.partitions)
    df = df.cache()
    df.count()
    arrow = df.toArrow()
    schema = arrow_schema_of(df)

    def out() -> str:
        return os.path.join(work, f"t-{time.time_ns()}")

    def create() -> float:
        started = time.perf_counter()
        Table.create(out(), df)
        return time.perf_counter() - started

    def append() -> float:
        t = Table.create(out(), schema=schema)
        started = time.perf_counter()
        t.append(df)
        return time.perf_counter() - started

    def create_snappy() -> float:
        started = time.perf_counter()
        Table.create(out(), df, properties={PARQUET_CODEC: "snappy"})
        return time.perf_counter() - started

    def create_arrow() -> float:
        started = time.perf_counter()
        Table.create(out(), arrow)
        return time.perf_counter() - started

    def append_arrow() -> float:
        t = Table.create(out(), schema=schema)
        started = time.perf_counter()
        t.append(arrow)
        return time.perf_counter() - started

    def parquet() -> float:
        started = time.perf_counter()
        df.write.parquet(out())
        return time.perf_counter() - started

    def parquet_zstd() -> float:
        started = time.perf_counter()
        df.write.option("compression", "zstd").parquet(out())
        return time.perf_counter() - started

    def delta_rs() -> float:
        from deltalake import write_deltalake

        started = time.perf_counter()
        write_deltalake(out(), arrow)
        return time.perf_counter() - started

    def delta_rs_df() -> float:
        from deltalake import write_deltalake

        started = time.perf_counter()
        write_deltalake(out(), df.toArrow())
        return time.perf_counter() - started

    writers: dict[str, Callable[[], float]] = {
        "create": create,
        "append": append,
        "create-snappy": create_snappy,
        "create-arrow": create_arrow,
        "append-arrow": append_arrow,
        "parquet": parquet,
        "parquet-zstd": parquet_zstd,
        "delta-rs": delta_rs,
        "delta-rs-df": delta_rs_df,
    }
    for writer in writers.values():  # warm-up
        writer()
    names = list(writers)
    times: dict[str, list[float]] = {n: [] for n in names}
    for order in balanced_orders(names, args.repeats):
        for name in order:
            times[name].append(writers[name]())
    medians = {n: statistics.median(ts) for n, ts in times.items()}
    print(
        f"{args.rows:,} rows in {df.rdd.getNumPartitions()} partitions; "
        f"median of {args.repeats} interleaved runs"
    )
    for name in names:
        print(
            f"   {name:13s} {medians[name]:6.2f} s  ({'/'.join(f'{t:.2f}' for t in times[name])})"
        )
    for ours in ("create", "append", "create-snappy", "create-arrow", "append-arrow"):
        codec = " (the same codec, snappy)" if ours == "create-snappy" else ""
        print(
            f"   {ours} / parquet {medians[ours] / medians['parquet']:.2f} (goal <= 1.2){codec}   "
            f"{ours} / delta-rs {medians[ours] / medians['delta-rs']:.2f} (goal <= 1)"
        )
    for ours in ("create", "append"):
        print(
            f"   {ours} / parquet-zstd {medians[ours] / medians['parquet-zstd']:.2f} "
            "(the same codec)"
        )
        print(
            f"   {ours} / delta-rs-df {medians[ours] / medians['delta-rs-df']:.2f} "
            "(both from the DataFrame)"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
