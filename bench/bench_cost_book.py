"""Pricing many candidate layouts on a stream: ``CostBook.matrix`` seconds (issue 14).

What the online reorganizer does on every scan (price the query on every state) and what
the B2-online oracles do before a replay (price every candidate on every query of the
stream) is one call: ``CostBook(sample).matrix(layouts, predicates)``. This bench stages
the denormalized TPC-H table (``--scale``, Spark), draws a ``--sample-rows`` sample,
generates a drifting stream of ``--queries`` TPC-H queries, fits the four online families
(Qd-tree, Pando, Hilbert, SOP+Z; 30 blocks) on a 200-query window every ``--every``
queries, and times the matrix of every candidate on every query, ``--repeats`` times with
a fresh book each time (the memo starts empty). It prints the seconds, the microseconds per
(layout, query) cell and a checksum of the matrix: run it once with the code before a
change (``PYTHONPATH=<old checkout>/src``) and once after; the checksums must be equal.

    .venv/bin/python bench/bench_cost_book.py
    PYTHONPATH=/tmp/old/src .venv/bin/python bench/bench_cost_book.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import tpch_dataset
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts import cuts
from lakelayout.online.candidates import FAMILIES, fit_candidates
from lakelayout.online.costs import CostBook
from lakelayout.table.session import spark_session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.05, help="TPC-H scale factor")
    ap.add_argument("--sample-rows", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--every", type=int, default=25, help="queries between candidate fits")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "bench-cb")
    args = ap.parse_args()
    print(f"lakelayout from {Path(cuts.__file__).parents[1]}")
    spark = spark_session()
    ds = tpch_dataset(spark, args.scale, args.work_dir, batches=1)
    sample = ds.sample(spark, args.sample_rows, seed=0)
    queries = wl.generate(wl.TPCH_TEMPLATES, args.queries, seed=0, shape="drift", segment_length=50)
    predicates = [parse_predicate(q.sql, sample.schema) for q in queries]
    layouts = []
    for end in range(min(200, len(predicates)), len(predicates) + 1, args.every):
        window = predicates[max(0, end - 200) : end]
        layouts += [c.layout for c in fit_candidates(sample, window, blocks=30, families=FAMILIES)]
    print(
        f"{sample.num_rows:,}-row sample, {len(layouts)} candidate layouts x "
        f"{len(predicates)} queries"
    )
    times = []
    for _ in range(args.repeats):
        book = CostBook(sample)
        started = time.perf_counter()
        matrix = book.matrix(layouts, predicates)
        times.append(time.perf_counter() - started)
        print(f"   matrix {times[-1]:.2f} s, checksum {float(matrix.sum()):.6f}")
    median = statistics.median(times)
    cells = len(layouts) * len(predicates)
    print(f"median {median:.2f} s, {1e6 * median / cells:.1f} µs per (layout, query)")


if __name__ == "__main__":
    main()
