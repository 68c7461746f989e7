"""The advisor's driver-side sample: one reading thread against one per core (issue 12).

A decision samples the never-clustered files it may rewrite; up to
``lakelayout.smallRewriteSize`` bytes of them are read on the driver with pyarrow,
file by file, by up to one thread per core (``advisor._per_file``). This bench stages
the denormalized TPC-H table (``--scale``), writes one insert batch of it as a table of
``--files`` files (what the B2 replay inserts at scale 0.3: 46 files of 10,000 rows),
and samples ``--sample-rows`` rows of the columns the TPC-H templates filter on, with
one thread and with one per core, alternated ``--repeats`` times with the cache emptied
each time. It prints the median seconds of each, the ratio, and whether both drew the
same rows (they must: a file's draws depend on the file alone).

    .venv/bin/python bench/bench_advisor_sample.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from lakelayout.advisor import advisor as advisor_module
from lakelayout.api import Table
from lakelayout.evaluation.datasets import tpch_dataset
from lakelayout.table.session import spark_session

#: columns the TPC-H templates filter on (what a window's sample reads)
COLUMNS = [
    "l_shipdate",
    "o_orderdate",
    "l_commitdate",
    "l_quantity",
    "l_discount",
    "p_brand",
    "p_container",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor")
    ap.add_argument("--files", type=int, default=46)
    ap.add_argument("--sample-rows", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "bench-as")
    args = ap.parse_args()
    spark = spark_session()
    ds = tpch_dataset(spark, args.scale, args.work_dir, batches=1)
    path = args.work_dir / "table"
    shutil.rmtree(path, ignore_errors=True)
    per_file = -(-ds.rows // args.files)
    t = Table.create(str(path), ds.batch(spark, 0, per_file), spark=spark)
    snap = t.snapshot()
    paths = [str(p) for p in snap.files.paths]
    fraction = min(1.0, args.sample_rows / max(1, int(snap.files.total_rows)))
    if not advisor_module.Advisor._small(snap, paths):
        raise SystemExit("the files exceed lakelayout.smallRewriteSize: a Spark job samples them")
    times: dict[int, list[float]] = {1: [], advisor_module._SAMPLE_THREADS: []}
    drawn = {}
    for rep in range(args.repeats):
        for threads in sorted(times, reverse=rep % 2 == 1):  # alternate which goes first
            advisor_module._SAMPLE_THREADS = threads
            advisor_module._SAMPLES.clear()
            started = time.perf_counter()
            got = t.advisor._sample_files(paths, snap, fraction, COLUMNS)
            times[threads].append(time.perf_counter() - started)
            drawn[threads] = [got[p].rows for p in paths]
    one, many = sorted(times)
    rows = sum(r.num_rows for r in drawn[one])
    same = all(a.equals(b) for a, b in zip(drawn[one], drawn[many], strict=True))
    print(f"{len(paths)} files, {rows:,} rows drawn of {int(snap.files.total_rows):,}, "
          f"{len(COLUMNS)} columns; the same rows both ways: {same}")  # fmt: skip
    for threads, seconds in times.items():
        label = "1 thread" if threads == 1 else f"up to {threads} threads (one per core)"
        print(f"{label}: median {statistics.median(seconds):.3f} s "
              f"({', '.join(f'{s:.3f}' for s in seconds)})")  # fmt: skip
    ratio = statistics.median(times[one]) / statistics.median(times[many])
    print(f"one thread / one per core: {ratio:.2f}")


if __name__ == "__main__":
    main()
