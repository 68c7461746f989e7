"""The online policies' candidate rounds: seconds to fit a window's candidates.

Every ``interval`` queries an online policy (``oreo``, ``greedy``, ``regret``)
fits one candidate per family (Qd-tree, Pando, Hilbert/Z-order, SOP+Z) on the
window of the last ``window`` queries, as the B2-online replay does
(``timed_window_candidates``: each family fitted up to three times to reach the
table's file count). B2-online at TPC-H 0.3 charged each online policy about
20.6 s of such fits over 600 queries (12 rounds): about as much as all of
``oreo``'s queries in logical mode.

The sample is the replay's: ``--sample`` rows drawn from the denormalized
TPC-H table at ``--scale`` (made with Spark once, kept as Parquet under
``--work``); the queries are the replay's drifting template stream (seed 0,
segments of ``--segment``). Printed: the seconds of each round, its candidates' block
counts (``--blocks`` wanted) and the rounds' sum.
Nothing here compares with a peer: the figure is read against the same script
run on older code (``PYTHONPATH=<old checkout>/src``), in alternation, on a
quiet machine (docs/benchmarks.md, B2-online).

    .venv/bin/python bench/bench_online_fits.py --scale 0.3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--sample", type=int, default=50_000, help="sample rows (replay default)")
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--segment", type=int, default=24)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--interval", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=181, help="the table's file count")
    parser.add_argument("--work", default="runs/bench-online-fits")
    args = parser.parse_args()

    from lakelayout.evaluation import workloads
    from lakelayout.evaluation.policies import timed_window_candidates
    from lakelayout.expr.parse import parse_predicate
    from lakelayout.online.candidates import FAMILIES

    work = Path(args.work)
    cached = work / f"sample-{args.scale:g}-{args.sample}.parquet"
    if not cached.exists():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from lakelayout import spark_session
        from lakelayout.evaluation.datasets import tpch_dataset

        spark = spark_session("local[2]")
        data = tpch_dataset(spark, args.scale, work / "data", batches=1)
        work.mkdir(parents=True, exist_ok=True)
        pq.write_table(data.sample(spark, args.sample, seed=0), cached)
        spark.stop()
    sample = pq.read_table(cached)
    stream = workloads.generate(
        workloads.TPCH_TEMPLATES, args.queries, seed=0, shape="drift", segment_length=args.segment
    )
    predicates = [parse_predicate(q.sql, sample.schema, timezone="UTC") for q in stream]

    class Context:
        def sample(self) -> object:
            return sample

    rounds = []
    started = time.perf_counter()
    for end in range(args.interval, args.queries + 1, args.interval):
        window = predicates[max(0, end - args.window) : end]
        found, seconds = timed_window_candidates(Context(), window, args.blocks, FAMILIES)  # type: ignore[arg-type]
        rounds.append(seconds)
        labels = ", ".join(f"{c.label}: {c.layout.n_blocks}" for c in found)
        print(f"round at query {end:>5}: {seconds:6.2f} s  ({labels})", flush=True)
    print(
        f"{len(rounds)} rounds: {sum(rounds):.2f} s in all, {sum(rounds) / len(rounds):.2f} s a "
        f"round (wall {time.perf_counter() - started:.2f} s; sample {sample.num_rows:,} rows)"
    )


if __name__ == "__main__":
    main()
