"""B6: fitting time of the Qd-tree and Pando layouts, and the rows they scan.

Fits :class:`QdTreeLayout` and :class:`PandoLayout` (k = 2 and 3) on a
100,000-row synthetic sample with correlated columns (``price`` follows
``dist``; ``ts`` drifts with ``dist``), a categorical, a nullable integer and
a string column, for a mixed workload of 200 queries: narrow ranges on either
correlated column, categorical IN lists, month(ts) equalities (an advanced
cut), string prefixes, conjunctions and a few ORs. Each layout gets the same
block budget (100 blocks of at least 1,000 sample rows).

Prints, per layout, the fitting time (goal: < 30 s each on 2 cores) and the
mean estimated fraction of rows scanned per query, next to a random layout
with the same number of blocks (which scans almost everything) and the
fraction of rows that really match (the lower bound).
"""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pyarrow as pa

from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts.pando import PandoLayout
from lakelayout.layouts.qdtree import QdTreeLayout

SAMPLE_ROWS = 100_000
QUERIES = 200
BLOCKS = 100
GOAL_SECONDS = 30.0


def make_sample(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    dist = rng.gamma(2.0, 3.0, n)
    price = 2.5 + 1.8 * dist + rng.normal(0, 1.0, n)
    outliers = rng.random(n) < 0.02
    price[outliers] = rng.uniform(0, 80, outliers.sum())
    start = dt.datetime(2023, 1, 1)
    day = np.clip(dist * 20 + rng.normal(0, 15, n), 0, 364).astype(np.int64)
    ts = np.array([start + dt.timedelta(days=int(d)) for d in day], dtype="datetime64[us]")
    zone = rng.choice([f"z{i:02d}" for i in range(30)], n)
    passengers = rng.integers(1, 7, n).astype(object)
    passengers[rng.random(n) < 0.05] = None
    vendor = rng.choice(["alpha", "beta", "gamma", "delta", "epsilon"], n)
    return pa.table(
        {
            "dist": dist,
            "price": price,
            "ts": pa.array(ts, pa.timestamp("us")),
            "zone": zone,
            "passengers": pa.array(passengers, pa.int64()),
            "vendor": vendor,
        }
    )


def make_workload(m: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for i in range(m):
        kind = i % 8
        if kind in (0, 1):
            lo = rng.uniform(0, 20)
            out.append(f"dist >= {lo:.2f} AND dist < {lo + rng.uniform(0.5, 3):.2f}")
        elif kind in (2, 3):
            lo = rng.uniform(0, 40)
            out.append(f"price BETWEEN {lo:.2f} AND {lo + rng.uniform(1, 6):.2f}")
        elif kind == 4:
            zones = ", ".join(f"'z{z:02d}'" for z in rng.choice(30, 3, replace=False))
            out.append(f"zone IN ({zones}) AND passengers >= {rng.integers(1, 6)}")
        elif kind == 5:
            out.append(f"month(ts) = {rng.integers(1, 13)}")
        elif kind == 6:
            prefix = rng.choice(["al", "be", "ga", "de", "ep"])
            lo = rng.uniform(0, 15)
            out.append(f"vendor LIKE '{prefix}%' AND dist > {lo:.2f}")
        else:
            a, b = rng.uniform(0, 30, 2)
            out.append(f"price < {min(a, b):.2f} OR dist > {max(a, b):.2f}")
    return out


def scanned_random(sample: pa.Table, workload: list[str], blocks: int) -> float:
    """Mean fraction scanned when rows go to ``blocks`` blocks at random."""
    rng = np.random.default_rng(7)
    block = rng.integers(0, blocks, sample.num_rows)
    sizes = np.bincount(block, minlength=blocks)
    fractions = []
    for sql in workload:
        hit = evaluate(parse_predicate(sql, sample.schema), sample)
        touched = np.unique(block[hit])
        fractions.append(sizes[touched].sum() / sample.num_rows)
    return float(np.mean(fractions))


def selectivity(sample: pa.Table, workload: list[str]) -> float:
    return float(
        np.mean([evaluate(parse_predicate(q, sample.schema), sample).mean() for q in workload])
    )


def main() -> None:
    sample = make_sample(SAMPLE_ROWS, seed=1)
    workload = make_workload(QUERIES, seed=2)
    b = SAMPLE_ROWS // BLOCKS
    print(f"sample {SAMPLE_ROWS} rows, {QUERIES} queries, blocks of >= {b} rows")
    print(f"{'layout':<10} {'fit s':>7} {'blocks':>7} {'scanned':>8}")
    print(f"{'matching':<10} {'':>7} {'':>7} {selectivity(sample, workload):8.3f}")
    print(f"{'random':<10} {'':>7} {BLOCKS:>7} {scanned_random(sample, workload, BLOCKS):8.3f}")
    cases = [
        ("qdtree", lambda: QdTreeLayout.fit(sample, workload, rows_per_block=b)),
        ("pando-2", lambda: PandoLayout.fit(sample, workload, rows_per_block=b, k=2)),
        ("pando-3", lambda: PandoLayout.fit(sample, workload, rows_per_block=b, k=3)),
    ]
    slow = []
    for name, fit in cases:
        start = time.perf_counter()
        layout = fit()
        seconds = time.perf_counter() - start
        scanned = float(layout.estimate(workload, sample).mean())
        print(f"{name:<10} {seconds:7.2f} {layout.n_blocks:>7} {scanned:8.3f}")
        if seconds > GOAL_SECONDS:
            slow.append(name)
    print("goal < 30 s per fit:", "MISSED by " + ", ".join(slow) if slow else "met")


if __name__ == "__main__":
    main()
