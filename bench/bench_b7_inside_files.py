"""B7: skipping inside files -- the bytes Spark's reader really reads after lakelayout prunes.

A table of ``--rows`` rows (4 uniform int columns, a double, a 40-char string)
is Z-ordered on ``k0, k1`` twice, from the same copy: once with one row group
per file (``lakelayout.rowGroupSize`` larger than any file) and once with the
default row group size. Every file has Parquet page indexes; the one-row-group
table is also read with Spark's use of them turned off
(``parquet.filter.columnindex.enabled=false``), which is what lakelayout's
files gave Spark before (one row group, no page index). For selective predicates on the clustering columns, each
table is scanned through ``Table.scan`` (lakelayout's file pruning) and the
matching rows counted; Spark's input metrics (bytes read, summed over its
executors from the status store) are compared with the bytes of the files
lakelayout kept. Every query reads all columns of the matching rows (a
checksum over them). Parquet's vectored reads (on by default in Spark 4) are
turned off for the run: their bytes are read on other threads and never reach
Spark's input metrics. Goal (issue 13): Spark reads <= 0.5x of the kept bytes on
selective predicates, with the same files kept.

    .venv/bin/python bench/bench_b7_inside_files.py --rows 2000000

``--dataset tpch`` runs the same three readings on the denormalized TPC-H
table (``--scale``), laid out by a Qd-tree fitted on a drifting stream of
the replay's templates (``--queries``, every template), for every query of
that stream: per template, the bytes Spark read over the bytes of the files
kept, and how much of the table the kept files are (a template is selective
when its files are a small part of the table).

    .venv/bin/python bench/bench_b7_inside_files.py --dataset tpch --scale 0.3
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.table.session import spark_session
from lakelayout.table.writer import ROW_GROUP_ARROW_BYTES, ROW_GROUP_SIZE

PREDICATES = (
    "k0 < 10000 AND k1 < 10000",
    "k0 BETWEEN 400000 AND 410000",
    "k1 >= 990000",
    "k0 < 100000",
)


def make_data(spark: Any, rows: int) -> Any:
    return spark.range(rows).select(
        *[(F.rand(i) * 1_000_000).cast("int").alias(f"k{i}") for i in range(4)],
        F.rand(9).alias("x"),
        F.sha1(F.col("id").cast("string")).substr(1, 40).alias("s"),
    )


def input_bytes(spark: Any) -> int:
    """Bytes every executor has read so far (Spark's input metrics, from the status store)."""
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty()
    executors = sc.statusStore().executorList(False)
    return sum(int(executors.apply(i).totalInputBytes()) for i in range(executors.size()))


def measure(spark: Any, t: Table, where: str) -> tuple[int, int, int, int]:
    """(files kept, bytes kept, bytes Spark read, checksum of the matching rows) of one scan."""
    result = t.scan(where)
    before = input_bytes(spark)
    df = result.df
    checksum = df.select(F.sum(F.hash(*df.columns)), F.count("*")).collect()[0]
    read = input_bytes(spark) - before
    return result.report.files_kept, result.report.bytes_kept, read, hash(tuple(checksum))


def laid_out_copies(base: str, work: str, spark: Any, layout: Callable[[Table], Any]) -> dict:
    """Two copies of the table at ``base``, one row group per file and the default row
    groups, each rewritten by ``layout``."""
    from lakelayout.table.delta import set_properties

    tables = {}
    for name, group in (("one row group", 1 << 40), ("default", ROW_GROUP_ARROW_BYTES)):
        copy = os.path.join(work, name.replace(" ", "-"))
        shutil.copytree(base, copy)
        t = Table(copy, spark=spark)
        set_properties(t.uri, {ROW_GROUP_SIZE: str(group)})
        layout(t)
        tables[name] = t
    for t in tables.values():
        t.to_df().count()  # warm up
    return tables


#: (label, table copy, Spark uses the page index)
READINGS = (
    ("1 row group, no page index", "one row group", False),
    ("1 row group + page index", "one row group", True),
    ("row groups + page index", "default", True),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", choices=("synthetic", "tpch"), default="synthetic")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--scale", type=float, default=0.3, help="tpch: TPC-H scale factor")
    ap.add_argument("--queries", type=int, default=78, help="tpch: queries in the stream")
    ap.add_argument("--work-dir", default="bench-data", help="tpch: where the data is staged")
    ap.add_argument("--target-mb", type=int, default=32)
    args = ap.parse_args()
    spark = spark_session()
    # vectored reads bypass the input metrics (see above)
    spark.sparkContext._jsc.hadoopConfiguration().set("parquet.hadoop.vectored.io.enabled", "false")
    work = tempfile.mkdtemp(prefix="b7-")
    try:
        if args.dataset == "tpch":
            tpch(spark, args, work)
        else:
            synthetic(spark, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def synthetic(spark: Any, args: argparse.Namespace, work: str) -> None:
    base = os.path.join(work, "base")
    Table.create(base, make_data(spark, args.rows), target_file_size=args.target_mb << 20)
    tables = laid_out_copies(base, work, spark, lambda t: t.optimize.zorder(["k0", "k1"]))
    print(f"{args.rows:,} rows, Z-order on k0, k1, files of {args.target_mb} MiB")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    runs = [(label, tables[copy], index) for label, copy, index in READINGS]
    for where in PREDICATES:
        print(f"-- {where}")
        found = set()
        for name, t, page_index in runs:
            hadoop.set("parquet.filter.columnindex.enabled", str(page_index).lower())
            files, kept, read, rows = measure(spark, t, where)
            found.add(rows)
            print(
                f"   {name:27s} files kept {files:3d}  bytes kept {kept / 1e6:8.2f} MB  "
                f"Spark read {read / 1e6:8.2f} MB  read/kept {read / max(kept, 1):.2f}"
            )
        assert len(found) == 1, f"the runs disagree on {where}: {found}"


def tpch(spark: Any, args: argparse.Namespace, work: str) -> None:
    from pathlib import Path

    from lakelayout.evaluation import workloads as wl
    from lakelayout.evaluation.datasets import BATCH_COLUMN, tpch_dataset
    from lakelayout.expr.parse import parse_predicate
    from lakelayout.layouts.qdtree import QdTreeLayout

    ds = tpch_dataset(spark, args.scale, Path(args.work_dir), batches=1)
    base = os.path.join(work, "base")
    target = args.target_mb << 20
    table = Table.create(base, ds.frame(spark).drop(BATCH_COLUMN), target_file_size=target)
    total = int(table.snapshot().files.total_bytes)
    queries = wl.generate(wl.TPCH_TEMPLATES, args.queries, seed=0, shape="drift", segment_length=3)
    schema = table.snapshot().schema
    workload = [parse_predicate(q.sql, schema) for q in queries]
    sample = ds.sample(spark, 100_000)
    blocks = max(2, math.ceil(total / target))
    layout = QdTreeLayout.fit(sample, workload, target_blocks=blocks)
    tables = laid_out_copies(base, work, spark, lambda t: t.optimize.apply(layout))
    files = tables["default"].snapshot().files
    arrival, total = total, int(files.total_bytes)
    order = ", ".join(d.sql for d in layout.inner.dimensions) if layout.inner else "none"
    print(
        f"TPC-H scale {args.scale:g}: {ds.rows:,} rows, {arrival / 2**20:,.1f} MiB in arrival "
        f"order; Qd-tree of {layout.n_blocks} blocks fitted on {len(queries)} queries, rows "
        f"inside a block in Z-order of {order}: {total / 2**20:,.1f} MiB in {len(files)} "
        f"files of <= {args.target_mb} MiB"
    )
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    # template -> [kept bytes, read bytes per reading]
    sums: dict[str, list[int]] = {}
    for q in queries:
        found = set()
        row = sums.setdefault(q.template, [0] * (1 + len(READINGS)))
        for i, (_, copy, page_index) in enumerate(READINGS):
            hadoop.set("parquet.filter.columnindex.enabled", str(page_index).lower())
            _, kept, read, rows = measure(spark, tables[copy], q.sql)
            found.add(rows)
            if i == 0:
                row[0] += kept
            row[1 + i] += read
        assert len(found) == 1, f"the readings disagree on {q.sql}: {found}"
    counts: dict[str, int] = {}
    for q in queries:
        counts[q.template] = counts.get(q.template, 0) + 1
    print(
        f"{'template':9s} {'queries':>7s} {'kept/table':>10s}  "
        + "  ".join(f"{label:>27s}" for label, _, _ in READINGS)
    )
    print(f"{'':9s} {'':7s} {'':10s}  " + "  ".join(f"{'read/kept':>27s}" for _ in READINGS))
    for name in sorted(sums, key=lambda n: sums[n][0] / counts[n]):
        kept, *reads = sums[name]
        print(
            f"{name:9s} {counts[name]:7d} {kept / counts[name] / total:10.3f}  "
            + "  ".join(f"{r / max(kept, 1):27.2f}" for r in reads)
        )
    kept = sum(r[0] for r in sums.values())
    reads = [sum(r[1 + i] for r in sums.values()) for i in range(len(READINGS))]
    print(
        f"{'all':9s} {len(queries):7d} {kept / len(queries) / total:10.3f}  "
        + "  ".join(f"{r / max(kept, 1):27.2f}" for r in reads)
    )


if __name__ == "__main__":
    main()
