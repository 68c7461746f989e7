"""B4 against Delta OSS: rows rewritten per row ingested over 10 appends, OPTIMIZE after each.

Four tables receive the same 10 appends (``--rows-per-append`` rows: an id,
two uniform int keys, a double), each followed by its OPTIMIZE, the four
interleaved append by append in one session:

* ``ll-liquid``: lakelayout ``cluster_by=[k0, k1]``, ``optimize.run()``
  (incremental ZCubes, lakelayout's cube thresholds);
* ``delta-liquid``: Delta ``CREATE TABLE ... CLUSTER BY (k0, k1)``, Delta's
  writer and Delta's ``OPTIMIZE`` (ZCubes below 100 GiB stay partial);
* ``ll-hilbert``: a Hilbert layout on (k0, k1) fitted on the first append,
  applied to each append's new files (``optimize.apply``);
* ``delta-zorder``: Delta's ``OPTIMIZE ZORDER BY (k0, k1)``, which rewrites
  the whole table each time.

Every table writes files of ``--target-kb`` (lakelayout's target file size,
Delta's ``maxFileSize``). Write amplification = rows removed by the
OPTIMIZEs / rows ingested; OPTIMIZE seconds are summed. Goal (issue 15):
ours / Delta's <= 0.5.

    .venv/bin/python bench/bench_delta_b4.py --rows-per-append 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import functions as F

from delta_peers import ratio
from lakelayout.api import Table
from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.evaluation import delta_oss
from lakelayout.layouts import HilbertLayout
from lakelayout.table.session import spark_session

APPENDS = 10
KEYS = ["k0", "k1"]
ORDER = ("ll-liquid", "delta-liquid", "ll-hilbert", "delta-zorder")
PAIRS = (("ll-liquid", "delta-liquid"), ("ll-hilbert", "delta-zorder"))


def batch(spark: Any, n: int, i: int) -> Any:
    return spark.range(n * i, n * (i + 1), numPartitions=2).select(
        "id",
        *[(F.rand(10 * i + j) * 1_000_000).cast("int").alias(k) for j, k in enumerate(KEYS)],
        F.rand(10 * i + 7).alias("x"),
    )


class Run:
    """One table: its appends and OPTIMIZEs, rows rewritten and seconds summed."""

    def __init__(self, name: str, spark: Any, path: str, target: int) -> None:
        self.name, self.spark, self.path, self.target = name, spark, path, target
        self.rewritten = 0
        self.seconds = 0.0
        self.layout: HilbertLayout | None = None

    def step(self, df: Any, first: bool) -> None:
        """Append ``df`` (create the table on the first) and OPTIMIZE."""
        before = set() if first else _live(self.path)
        self._write(df, first)
        new = sorted(_live(self.path) - before)
        started = time.perf_counter()
        m = self._optimize(new)
        self.seconds += m.seconds or time.perf_counter() - started
        self.rewritten += m.rows_removed

    def _write(self, df: Any, first: bool) -> None:
        if self.name == "delta-liquid":
            if first:
                delta_oss.create_clustered(self.spark, self.path, df, KEYS)
            else:
                delta_oss.append(self.spark, self.path, df)
        elif first:
            cluster = KEYS if self.name == "ll-liquid" else None
            Table.create(self.path, df, target_file_size=self.target, cluster_by=cluster)
            if self.name == "delta-zorder":
                delta_oss.collect_stats_on_every_column(self.spark, self.path)
            if self.name == "ll-hilbert":
                sample = Table(self.path, spark=self.spark).to_df().select(*KEYS).toArrow()
                blocks = max(1, round(_bytes(self.path) / self.target))
                self.layout = HilbertLayout.fit(sample, columns=KEYS, target_blocks=blocks)
        else:
            Table(self.path, spark=self.spark).append(df)

    def _optimize(self, new: list[str]) -> OptimizeMetrics:
        t = Table(self.path, spark=self.spark)
        if self.name == "ll-liquid":
            return _timed(lambda: t.optimize.run())
        if self.name == "ll-hilbert":
            layout = self.layout
            assert layout is not None
            return _timed(lambda: t.optimize.apply(layout, new))
        files = max(1, round(_bytes(self.path) / self.target))
        zorder = KEYS if self.name == "delta-zorder" else None
        return delta_oss.optimize(self.spark, self.path, zorder_by=zorder, files=files)


def _timed(action: Callable[[], OptimizeMetrics]) -> OptimizeMetrics:
    from dataclasses import replace

    started = time.perf_counter()
    m = action()
    return replace(m, seconds=time.perf_counter() - started)


def _live(path: str) -> set[str]:
    return {str(p) for p in Table(path).snapshot().files.paths}


def _bytes(path: str) -> int:
    return int(Table(path).snapshot().files.total_bytes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows-per-append", type=int, default=100_000)
    ap.add_argument("--target-kb", type=int, default=512)
    args = ap.parse_args()
    spark = spark_session(delta=True)
    delta_oss.require_connector(spark)
    work = tempfile.mkdtemp(prefix="b4-delta-")
    target = args.target_kb * 1024
    try:
        runs = {n: Run(n, spark, os.path.join(work, n), target) for n in ORDER}
        for i in range(APPENDS):
            df = batch(spark, args.rows_per_append, i).localCheckpoint()
            for k in range(len(ORDER)):  # rotate who goes first: interleaved
                run = runs[ORDER[(i + k) % len(ORDER)]]
                run.step(df, first=i == 0)
        ingested = APPENDS * args.rows_per_append
        print(f"{APPENDS} appends x {args.rows_per_append:,} rows, OPTIMIZE after each")
        for name in ORDER:
            r = runs[name]
            files = len(_live(r.path))
            print(
                f"  {name:>13}: write amplification {r.rewritten / ingested:5.2f}  "
                f"OPTIMIZE {r.seconds:7.2f} s  ({files} files at the end)"
            )
        for ours, theirs in PAIRS:
            o, t = runs[ours], runs[theirs]
            print(
                f"  B4 {ours} / {theirs}: rows rewritten {ratio(o.rewritten, t.rewritten)} "
                f"(goal <= 0.5); OPTIMIZE time {ratio(o.seconds, t.seconds)}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
