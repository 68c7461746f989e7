"""Files kept per query after Hilbert vs Z-order vs linear vs delta-rs z_order.

One table (``--rows`` rows; k0, k1 uniform, k2 correlated with k0) is copied
four times and laid out by ``optimize.hilbert``, ``optimize.zorder``,
``optimize.apply(LinearLayout on k0)`` and delta-rs
``DeltaTable.optimize.z_order(["k0", "k1"], target_size=...)`` with the
target size that yields the same file count. A workload of random 2-D range
queries on (k0, k1) (each ~1% of rows) is pruned with lakelayout's min/max
skipping on every copy; the mean files kept per query is printed.

    .venv/bin/python bench/bench_skipping_by_layout.py --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np
from deltalake import DeltaTable
from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.layouts import LinearLayout
from lakelayout.skipping.stats_rules import might_match
from lakelayout.table.session import spark_session


def queries(n: int, seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = rng.integers(0, 900_000, 2)
        out.append(f"k0 BETWEEN {a} AND {a + 100_000} AND k1 BETWEEN {b} AND {b + 100_000}")
    return out


def kept(uri: str, workload: list[str], spark) -> float:  # type: ignore[no-untyped-def]
    t = Table(uri, spark=spark)
    snap = t.snapshot()
    return float(
        np.mean([might_match(t._bind(q, snap.schema), snap.files).sum() for q in workload])
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--target-kb", type=int, default=256)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="skip-")
    base = os.path.join(work, "base")
    df = (
        spark.range(args.rows)
        .select(
            (F.rand(1) * 1_000_000).cast("int").alias("k0"),
            (F.rand(2) * 1_000_000).cast("int").alias("k1"),
            F.rand(3).alias("x"),
        )
        .withColumn("k2", (F.col("k0") + F.rand(4) * 1000).cast("int"))
    )
    Table.create(base, df, target_file_size=args.target_kb * 1024)
    workload = queries(args.queries)
    results: dict[str, tuple[float, int]] = {}
    for name in ("hilbert", "zorder", "linear", "delta-rs z_order"):
        copy = os.path.join(work, name.replace(" ", "_"))
        shutil.copytree(base, copy)
        t = Table(copy, spark=spark)
        if name == "hilbert":
            t.optimize.hilbert(["k0", "k1"])
        elif name == "zorder":
            t.optimize.zorder(["k0", "k1"])
        elif name == "linear":
            sample = t.to_df().sample(0.05, seed=1).toArrow()
            n = len(Table(os.path.join(work, "hilbert")).snapshot().files)
            t.optimize.apply(LinearLayout.fit(sample, columns=["k0"], target_blocks=n))
        else:
            n = len(Table(os.path.join(work, "hilbert")).snapshot().files)
            size = int(t.snapshot().files.total_bytes / n)
            DeltaTable(copy).optimize.z_order(["k0", "k1"], target_size=size)
        results[name] = (kept(copy, workload, spark), len(t.snapshot().files))
    print(f"{args.rows:,} rows, {args.queries} queries on (k0, k1), each ~1% of rows")
    for name, (mean, files) in results.items():
        print(f"{name:18s} files {files:4d}   mean files kept per query {mean:6.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
