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
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--target-mb", type=int, default=32)
    args = ap.parse_args()
    spark = spark_session()
    # vectored reads bypass the input metrics (see above)
    spark.sparkContext._jsc.hadoopConfiguration().set("parquet.hadoop.vectored.io.enabled", "false")
    work = tempfile.mkdtemp(prefix="b7-")
    base = os.path.join(work, "base")
    Table.create(base, make_data(spark, args.rows), target_file_size=args.target_mb << 20)
    tables = {}
    for name, group in (("one row group", 1 << 40), ("default", ROW_GROUP_ARROW_BYTES)):
        copy = os.path.join(work, name.replace(" ", "-"))
        shutil.copytree(base, copy)
        t = Table(copy, spark=spark)
        from lakelayout.table.delta import set_properties

        set_properties(t.uri, {ROW_GROUP_SIZE: str(group)})
        t.optimize.zorder(["k0", "k1"])
        tables[name] = t
    print(f"{args.rows:,} rows, Z-order on k0, k1, files of {args.target_mb} MiB")
    for t in tables.values():
        t.to_df().count()  # warm up
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    runs = [  # (label, table, Spark uses the page index)
        ("1 row group, no page index", tables["one row group"], False),
        ("1 row group + page index", tables["one row group"], True),
        ("row groups + page index", tables["default"], True),
    ]
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
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
