"""B5 (second half): pruning time as a share of scan time on the demo table.

Builds the `make demo` table (TPC-H lineitem, scale 0.1, ~32 files in arrival
order) and, for every demo predicate, times the pruning step (``Table.plan`` on a
snapshot read before the clock starts: parse + bind, the scan planner over
the snapshot with the index catalog and layout provenance) and the Spark scan of the kept files
(count of matching rows). Goal: pruning <= 2% of the scan. One run; figures
printed.

    .venv/bin/python bench/bench_b5_demo_ratio.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from lakelayout.api import Table
from lakelayout.demo import DEMO_PREDICATES, generate_lineitem
from lakelayout.table.session import spark_session


def main() -> None:
    spark = spark_session()
    with tempfile.TemporaryDirectory() as tmp:
        source = generate_lineitem(0.1, Path("demo-data") / "tpch-0.1")
        df = spark.read.parquet(str(source))
        table = Table.create(
            f"{tmp}/lineitem", df, target_file_size=max(1024, source.stat().st_size // 32)
        )
        snap = table.snapshot()
        print(
            f"demo table: {len(snap.files)} files, {snap.files.total_rows:,} rows (nproc={os.cpu_count()})"
        )
        table.scan("l_orderkey > 0").df.count()  # warm the JVM and the file listing
        ratios = []
        for label, text in DEMO_PREDICATES:
            started = time.perf_counter()
            keep = table.plan(text, snapshot=snap).keep
            pruning = time.perf_counter() - started
            started = time.perf_counter()
            rows = table.scan(text).df.count()
            scan = time.perf_counter() - started
            ratios.append(pruning / scan)
            print(
                f"{label:>20}: kept {int(keep.sum()):>2}/{len(keep)} files, {rows:>7,} rows, "
                f"pruning {pruning * 1000:6.2f} ms, scan {scan:5.2f} s, ratio {100 * pruning / scan:.2f}%"
            )
        print(
            f"B5 pruning / scan on the demo table: median {100 * statistics.median(ratios):.2f}%, "
            f"max {100 * max(ratios):.2f}% (goal <= 2%)"
        )


if __name__ == "__main__":
    main()
