"""B4: write amplification of incremental OPTIMIZE over 10 appends.

A clustered table (``cluster_by=["k0", "k1"]``) receives 10 equal appends,
with ``OPTIMIZE`` after each. Write amplification = rows rewritten by OPTIMIZE
/ rows ingested. lakelayout's defaults (min cube = max(2 target files,
table/8), sticky) are compared with Delta's thresholds, which at this size
mean "every cube partial": every OPTIMIZE rewrites all clustered rows again
(simulated with ``lakelayout.minCubeSize`` = 100 GiB). Goal: <= 2.

    .venv/bin/python bench/bench_b4_write_amplification.py --rows-per-append 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.cluster import MIN_CUBE_SIZE, TARGET_CUBE_SIZE
from lakelayout.table.session import spark_session


def batch(spark, n: int, seed: int, start: int):  # type: ignore[no-untyped-def]
    return spark.range(start, start + n, numPartitions=2).select(
        "id",
        *[(F.rand(seed + i) * 1_000_000).cast("int").alias(f"k{i}") for i in range(2)],
        F.rand(seed + 7).alias("x"),
    )


def run(spark, root: str, n: int, target: int, props: dict[str, str] | None) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    t = Table.create(
        root,
        batch(spark, n, 0, 0),
        target_file_size=target,
        cluster_by=["k0", "k1"],
        properties=props,
    )
    rewritten = 0
    for i in range(10):
        if i:
            t.append(batch(spark, n, 10 * i, n * i))
        rewritten += t.optimize.run().rows_removed
    d = t.detail()
    return rewritten / (10 * n), len(d.cubes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows-per-append", type=int, default=100_000)
    ap.add_argument("--target-kb", type=int, default=512)
    args = ap.parse_args()
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="b4-")
    target = args.target_kb * 1024
    ours, cubes = run(spark, os.path.join(work, "ll"), args.rows_per_append, target, None)
    delta_like = {MIN_CUBE_SIZE: str(100 * 1024**3), TARGET_CUBE_SIZE: str(150 * 1024**3)}
    theirs, _ = run(spark, os.path.join(work, "dl"), args.rows_per_append, target, delta_like)
    print(f"10 appends x {args.rows_per_append:,} rows, OPTIMIZE after each")
    print(f"lakelayout defaults: write amplification {ours:.2f} ({cubes} cubes at the end)")
    print(f"Delta thresholds (100/150 GB): write amplification {theirs:.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
