"""B3: OPTIMIZE time next to its peers, per table size, with where the time went.

For each size in ``--rows`` a table (4 uniform int columns, a double, a
40-char string) is written once with lakelayout; every contender then
rewrites its own fresh copy of it, clustering on ``--dims`` columns:

* ``zorder`` / ``hilbert``: ``t.optimize.zorder(cols)`` / ``.hilbert(cols)``;
* ``liquid``: ``t.cluster_by(cols)`` (before the clock starts), then
  ``t.optimize.run()``;
* ``qdtree`` / ``pando``: ``t.optimize.apply(layout)`` of a Qd-tree / Pando
  (2 trees) fitted once per size, before any clock, on a 100,000-row sample
  for a workload of 40 ranges over the clustering columns, with as many
  blocks as the table has target files;
* ``linear``: ``t.optimize.apply(layout)`` of a linear layout (sort by the
  clustering columns, cut into as many ranges), fitted the same way;
* ``delta-rs``: ``DeltaTable(copy).optimize.z_order(cols, target_size=...)``;
* ``plain``: plain Spark, ``read.parquet -> repartition(n) -> write.parquet``
  with ``n`` the number of files lakelayout's Z-order wrote (no layout, no
  commit: the floor of any Spark rewrite, B3 in the issue).

With ``--indexes`` the base table declares four skipping indexes (a Bloom
filter, a value list over an expression, a string prefix, min/max of a sum)
and every copy carries their metadata; the lakelayout verbs collect them on
the rows they write, and one more contender is timed:

* ``zorder-refresh``: the flow before rewrites collected indexes: a Z-order
  rewrite that collects nothing, then ``t.indexes.refresh()`` reading the new
  files again (ratio ``zorder / zorder-refresh``: what collecting saves).

The JVM and Python workers are warmed first; repeats are interleaved in
balanced orders (each order followed by its reverse: every contender's mean place is
the middle; ``balanced_orders``), so drift on a shared machine hits all of them
alike. Printed: median seconds, the ratio of each lakelayout verb
to delta-rs and to plain Spark (goal: <= 1 for both), the steps of the last
lakelayout run (``metrics.steps``: plan, sample, fit, rewrite, provenance,
commit, and the rewrite job's task seconds), and the peak memory of the
driver's Python process and of the JVM (driver and, in local mode, the
executors) after the size's runs. Peaks only grow: run one size per process
(``--rows 8000000``) to read a size's own figure.

    .venv/bin/python bench/bench_b3_optimize.py --rows 500000 2000000 8000000
    .venv/bin/python bench/bench_b3_optimize.py --rows 2000000 --indexes --only zorder zorder-refresh
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from lakelayout.api import Table
from lakelayout.cluster.optimize import Optimizer
from lakelayout.cluster.optimize_metrics import STEPS, TASK_STEPS
from lakelayout.cluster.rewrite import sample_rows
from lakelayout.evaluation.replay import balanced_orders
from lakelayout.layouts import LinearLayout, PandoLayout, QdTreeLayout
from lakelayout.layouts.base import Layout
from lakelayout.skipping.indexes import BloomFilter, Index, MinMax, Prefix, ValueList
from lakelayout.table.session import spark_session

LAKELAYOUT = ("zorder", "hilbert", "liquid", "qdtree", "pando", "linear")
#: the verbs that apply a fitted layout (``optimize.apply``)
APPLIED = ("qdtree", "pando", "linear")
PEERS = ("delta-rs", "plain")
#: with --indexes: a Z-order rewrite that collects no index, then a refresh
REFRESHED = "zorder-refresh"


def bench_indexes() -> list[Index]:
    """The skipping indexes ``--indexes`` declares on the base table."""
    return [BloomFilter("k3", fpp=0.01), ValueList("k0 % 16"), Prefix("s", length=8),
            MinMax("k1 + k2")]  # fmt: skip


def make_data(spark: Any, rows: int) -> Any:
    return spark.range(rows).select(
        *[(F.rand(i) * 1_000_000).cast("int").alias(f"k{i}") for i in range(4)],
        F.rand(9).alias("x"),
        F.sha1(F.col("id").cast("string")).substr(1, 40).alias("s"),
    )


def peak_memory_mb(spark: Any) -> tuple[float, float]:
    """Peak resident MB of this (driver) Python process and of the JVM (Linux: VmHWM)."""
    python = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    jvm = float("nan")
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    jvm = int(line.split()[1]) / 1024
    except (OSError, AttributeError):
        pass
    return python, jvm


class Run:
    """One size: the base table and a fresh copy per timed rewrite."""

    def __init__(
        self, spark: Any, work: str, rows: int, dims: list[str], target: int, indexed: bool
    ) -> None:
        self.spark, self.work, self.dims, self.target = spark, work, dims, target
        self.base = os.path.join(work, f"base-{rows}")
        base = Table.create(self.base, make_data(spark, rows), target_file_size=target)
        if indexed:
            base.indexes.add(*bench_indexes())
            base.indexes.refresh()
        snap = Table(self.base).snapshot()
        self.paths = [os.path.join(self.base, str(p)) for p in snap.files.paths]
        self.nbytes = int(snap.files.total_bytes)
        self.files_written = 1
        self.steps: dict[str, dict[str, float]] = {}
        self.task_steps: dict[str, dict[str, float]] = {}
        self._layouts: dict[str, Layout] = {}

    def layout(self, family: str) -> Layout:
        """The ``family`` layout ``apply`` writes (fitted once, on a sample of the base)."""
        if family not in self._layouts:
            rng = random.Random(7)
            workload = [
                f"{d} >= {lo} AND {d} < {lo + 100_000}"
                for d, lo in ((rng.choice(self.dims), rng.randrange(900_000)) for _ in range(40))
            ]
            base = Table(self.base, spark=self.spark)
            total = int(base.snapshot().files.total_rows)
            sample = sample_rows(base.to_df().select(*self.dims), total, rows=100_000)
            blocks = max(2, round(self.nbytes / self.target))
            if family == "qdtree":
                fitted: Layout = QdTreeLayout.fit(sample, workload, target_blocks=blocks)
            elif family == "linear":
                fitted = LinearLayout.fit(sample, columns=self.dims, target_blocks=blocks)
            else:
                fitted = PandoLayout.fit(sample, workload, target_blocks=blocks, k=2)
            self._layouts[family] = fitted
        return self._layouts[family]

    def copy(self) -> str:
        out = os.path.join(self.work, f"copy-{time.time_ns()}")
        shutil.copytree(self.base, out)
        return out

    def contender(self, name: str) -> Callable[[], float]:
        """A function that prepares a copy, then times ``name`` on it."""

        def lakelayout() -> float:
            t = Table(self.copy(), spark=self.spark)
            if name == "liquid":
                t.cluster_by(self.dims)
            layout = self.layout(name) if name in APPLIED else None
            started = time.perf_counter()
            if layout is not None:
                m = t.optimize.apply(layout)
            elif name == "liquid":
                m = t.optimize.run()
            else:
                m = getattr(t.optimize, name)(self.dims)
            took = time.perf_counter() - started
            self.steps[name], self.task_steps[name] = m.steps, m.task_steps
            if name == "zorder":
                self.files_written = max(1, m.files_added)
            return took

        def delta_rs() -> float:
            from deltalake import DeltaTable

            copy = self.copy()
            started = time.perf_counter()
            DeltaTable(copy).optimize.z_order(self.dims, target_size=self.target)
            return time.perf_counter() - started

        def plain() -> float:
            out = os.path.join(self.work, f"plain-{time.time_ns()}")
            started = time.perf_counter()
            self.spark.read.parquet(*self.paths).repartition(self.files_written).write.parquet(out)
            return time.perf_counter() - started

        def zorder_refresh() -> float:
            t = Table(self.copy(), spark=self.spark)
            started = time.perf_counter()
            Optimizer(t.uri, lambda: self.spark).zorder(self.dims)  # collects no index
            t.indexes.refresh()
            return time.perf_counter() - started

        return {"delta-rs": delta_rs, "plain": plain, REFRESHED: zorder_refresh}.get(
            name, lakelayout
        )


def _steps(steps: dict[str, float], order: tuple[str, ...]) -> str:
    return ", ".join(f"{n} {steps[n]:.2f}" for n in order if n in steps) or "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000])
    ap.add_argument("--dims", type=int, default=3, help="clustering columns (2-4)")
    ap.add_argument("--target-mb", type=int, default=128, help="target file size")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--only", nargs="+", default=[*LAKELAYOUT, *PEERS], help="contenders to run")
    ap.add_argument(
        "--indexes", action="store_true", help=f"declare skipping indexes; adds {REFRESHED}"
    )
    args = ap.parse_args()
    spark = spark_session()
    dims = [f"k{i}" for i in range(args.dims)]
    everyone = (*LAKELAYOUT, *PEERS, *((REFRESHED,) if args.indexes else ()))
    names = [n for n in everyone if n in args.only or (n == REFRESHED and args.indexes)]
    work = tempfile.mkdtemp(prefix="b3-")
    try:
        for rows in args.rows:
            run = Run(spark, work, rows, dims, args.target_mb << 20, args.indexes)
            print(
                f"== {rows:,} rows, {len(run.paths)} files, {run.nbytes / 1e6:.1f} MB; "
                f"clustering on {', '.join(dims)}; median of {args.repeats} interleaved runs"
            )
            spark.read.parquet(*run.paths).count()  # warm the JVM and the Python workers
            run.contender("zorder")()  # sets plain's file count
            for name in names:  # warm every code path once
                run.contender(name)()
            times: dict[str, list[float]] = {n: [] for n in names}
            for order in balanced_orders(names, args.repeats):
                for name in order:
                    times[name].append(run.contender(name)())
            medians = {n: statistics.median(ts) for n, ts in times.items()}
            for name in names:
                line = f"   {name:9s} {medians[name]:6.2f} s  ({'/'.join(f'{t:.2f}' for t in times[name])})"
                if name in LAKELAYOUT:
                    for peer in (*PEERS, REFRESHED):
                        if peer in medians:
                            line += f"   / {peer} {medians[name] / medians[peer]:.2f}"
                print(line)
            for name in names:
                if name in run.steps:
                    print(
                        f"   steps of {name} (s): {_steps(run.steps[name], STEPS)}; "
                        f"task s: {_steps(run.task_steps[name], TASK_STEPS)}"
                    )
            python, jvm = peak_memory_mb(spark)
            print(f"   peak memory so far: driver Python {python:.0f} MB, JVM {jvm:.0f} MB")
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work, exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
