"""The fixed cost of a query through lakelayout: the snapshot a scan starts from.

Every ``Table.scan`` / ``Table.plan`` (and the advisor's logging of a query)
starts from the table's latest snapshot. Since this bench's change
:func:`lakelayout.table.delta.snapshot` keeps it until the table's log has a
new commit; before, it read the Delta log and rebuilt the file statistics on
every call. Measured on one local table of ``--files`` small files, both ways
in the same run (``SNAPSHOT_CACHE_TABLES`` 16 = kept, 0 = read every call),
repeats interleaved and the order alternated, medians:

* ``plan``: ``Table.plan(predicate)`` — driver only, no Spark job;
* ``scan``: ``Table.scan(predicate).df.count()`` with a predicate that keeps
  no file — the whole per-query fixed overhead, Spark's job included.

    .venv/bin/python bench/bench_scan_overhead.py --files 600
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lakelayout.api import Table
from lakelayout.table import delta
from lakelayout.table.session import spark_session

SELECTIVE = "k < 0"  # no file holds a negative k: every file is skipped


def make_table(path: str, files: int, rows_per_file: int) -> Table:
    rng = np.random.default_rng(0)
    n = files * rows_per_file
    data = pa.table(
        {
            "k": np.repeat(np.arange(files, dtype=np.int64), rows_per_file),
            "x": rng.random(n),
            "s": pa.array([f"v{i % 997}" for i in range(n)]),
        }
    )
    Table.create(path, data.slice(0, rows_per_file))
    table = Table(path)
    for f in range(1, files):  # one file per commit, as a stream of small inserts writes them
        table.append(data.slice(f * rows_per_file, rows_per_file))
    return table


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--rows-per-file", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    spark = spark_session("local[2]", **{"spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        table = make_table(f"{tmp}/t", args.files, args.rows_per_file)
        table = Table(table.uri, spark=spark)
        print(
            f"table: {len(table.snapshot().files)} files, version {table.version} "
            f"(built in {time.perf_counter() - started:.1f} s)"
        )
        verbs: dict[str, Callable[[], object]] = {
            "plan": lambda: table.plan(SELECTIVE),
            "scan": lambda: table.scan(SELECTIVE).df.count(),
        }
        for fn in verbs.values():  # warm: JVM, Python workers, imports
            for _ in range(3):
                fn()
        times: dict[tuple[str, str], list[float]] = {}
        for r in range(args.repeats):
            modes = ["kept", "read"] if r % 2 == 0 else ["read", "kept"]
            for mode in modes:
                delta.SNAPSHOT_CACHE_TABLES = 16 if mode == "kept" else 0
                delta.forget_snapshots()
                table.plan(SELECTIVE)  # the first call of "kept" reads the log: not timed
                for verb, fn in verbs.items():
                    times.setdefault((verb, mode), []).append(timed(fn))
        delta.SNAPSHOT_CACHE_TABLES = 16
    print(f"median seconds of {args.repeats} interleaved repeats (one run):")
    for verb in verbs:
        kept = statistics.median(times[(verb, "kept")])
        read = statistics.median(times[(verb, "read")])
        print(
            f"  {verb:5s} snapshot kept {kept * 1000:8.1f} ms   read every call "
            f"{read * 1000:8.1f} ms   kept / read {kept / read:.2f}"
        )


if __name__ == "__main__":
    main()
