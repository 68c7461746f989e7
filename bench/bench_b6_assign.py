"""B6: layout assignment throughput against a plain numpy argsort.

Fits Z-order and Hilbert layouts on a 100,000-row sample, then times
``assign`` (ranks + curve key + block lookup) on 2,000,000 rows of 2, 3 and 4
numeric columns; then the tree layouts (Qd-tree, Pando with 2 and 3 trees)
fitted on the same sample for a workload of ranges and IN lists over the four
columns (routing every row down the trees, and Pando's cell -> block lookup). The baseline is ``np.argsort`` of one float64 column of the
same rows: the least work any sort-based clustering does per batch. Prints
one ``ratio`` line per case (assign time / argsort time; lower is better) and
rows per second. Runs in well under 60 s on 2 cores.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lakelayout.layouts.base import Layout
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.pando import PandoLayout
from lakelayout.layouts.qdtree import QdTreeLayout
from lakelayout.layouts.zorder import CurveLayout, ZOrderLayout

ROWS = 2_000_000
SAMPLE_ROWS = 100_000
BLOCKS = 64


def make_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "i": rng.integers(0, 10_000_000, n),
            "f": rng.normal(size=n),
            "u": rng.random(n),
            "k": rng.integers(0, 1_000, n).astype(np.int32),
        }
    )


def tree_workload(seed: int, n: int = 40) -> list[str]:
    """Ranges on i, f and u and IN lists on k, as a filtered workload writes them."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        lo = int(rng.integers(0, 9_000_000))
        out.append(
            [
                f"i >= {lo} AND i < {lo + 1_000_000}",
                f"f > {rng.normal():.3f}",
                f"u < {rng.random():.3f} AND k < {int(rng.integers(0, 1000))}",
                f"k IN ({', '.join(str(int(v)) for v in rng.integers(0, 1000, 3))})",
            ][q % 4]
        )
    return out


def best_of(fn: Callable[[], object], repeat: int = 2) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    data = make_table(ROWS, seed=1)
    sample = make_table(SAMPLE_ROWS, seed=2)
    column = data["f"].to_numpy()
    baseline = best_of(lambda: np.argsort(column))
    print(f"baseline numpy argsort of 1 column x {ROWS:,} rows: {baseline:.3f} s")
    families: list[type[CurveLayout]] = [ZOrderLayout, HilbertLayout]
    for dims in (2, 3, 4):
        columns = data.column_names[:dims]
        for cls in families:
            layout = cls.fit(sample, columns=columns, target_blocks=BLOCKS)
            seconds = best_of(functools.partial(layout.assign, data))
            print(
                f"ratio {cls.family} assign {dims} cols / argsort: {seconds / baseline:.2f} "
                f"({seconds:.3f} s, {ROWS / seconds / 1e6:.1f} M rows/s, "
                f"{layout.bits} bits/dim)"
            )
    workload = tree_workload(seed=3)
    trees: list[tuple[str, Layout]] = [
        ("qdtree", QdTreeLayout.fit(sample, workload, target_blocks=BLOCKS)),
        ("pando k=2", PandoLayout.fit(sample, workload, target_blocks=BLOCKS, k=2)),
        ("pando k=3", PandoLayout.fit(sample, workload, target_blocks=BLOCKS, k=3)),
    ]
    for name, tree in trees:
        seconds = best_of(functools.partial(tree.assign, data))
        print(
            f"ratio {name} assign / argsort: {seconds / baseline:.2f} "
            f"({seconds:.3f} s, {ROWS / seconds / 1e6:.1f} M rows/s, {tree.n_blocks} blocks)"
        )


if __name__ == "__main__":
    main()
