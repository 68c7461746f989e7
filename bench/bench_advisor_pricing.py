"""The advisor's estimate on a sample: index metadata of virtual files, and pricing (issue 12).

A decision lays the sample out as each candidate would (virtual files), collects every
declared index's metadata per block, and plans each query of its window on every
candidate. This bench times both steps on the logs table's sample (its six indexes: a
prefix, a Bloom filter, a suffix, a UDF's value list, a geo box and ``month(ts)``), with
``--candidates`` candidates of ``--blocks`` blocks and a ``--queries``-query drifting
logs window, each the way a decision does it now and the way it did before 2026-11-28,
interleaved in one process:

* metadata: each term index computes its term once over the sample and each block takes
  its slice (``Index.collect_blocks``), against block by block (the base class's loop);
* pricing: every query planned once over the stacked candidates
  (``stacked_fractions``; candidate by candidate only where a rule gives up), against the
  rule before, which stacked only predicates without a function or UDF.

It prints the medians, the ratios (now / before) and checks that both ways give the same
numbers. No Spark.

    .venv/bin/python bench/bench_advisor_pricing.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa

from lakelayout.advisor.estimate import VirtualFiles, stacked_fractions, virtual_files
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import LOGS_INDEXES, LOGS_UDF_TYPES, logs_arrow
from lakelayout.expr.nodes import Func, Opaque, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes.base import Index
from lakelayout.skipping.indexes.geobox import expand_within_box

_T = TypeVar("_T")


def block_by_block(rows: pa.Table, ids: np.ndarray, indexes: Sequence[Index]) -> VirtualFiles:
    """:func:`virtual_files` with every index collected block by block (before)."""

    class Alone:
        def __init__(self, index: Index) -> None:
            self.index = index

        def __getattr__(self, name: str) -> object:
            return getattr(self.index, name)

        def collect_blocks(self, ordered: pa.Table, starts: Sequence[int]) -> list[object]:
            return Index.collect_blocks(self.index, ordered, starts)

    return virtual_files(rows, ids, [Alone(ix) for ix in indexes])  # type: ignore[misc]


def _plain(predicate: Predicate) -> bool:
    """The rule before 2026-11-28 (``stats_rules.stackable`` of the expanded predicate)."""
    expanded = expand_within_box(predicate)
    return not any(isinstance(n, Func | Opaque) for n in expanded.walk())


def stacked_without_functions(
    sets: Sequence[VirtualFiles], predicates: Sequence[Predicate]
) -> list[np.ndarray]:
    """Pricing before: only predicates without a function or UDF went over the stack."""
    plain = [p for p in predicates if _plain(p)]
    other = [p for p in predicates if not any(p is q for q in plain)]
    together = stacked_fractions(sets, plain) if plain else [np.zeros(0) for _ in sets]
    alone = [files.fractions(other) for files in sets]
    out = []
    for k in range(len(sets)):
        by_id = {id(p): v for p, v in zip(plain, together[k], strict=True)}
        by_id.update({id(p): v for p, v in zip(other, alone[k], strict=True)})
        out.append(np.array([by_id[id(p)] for p in predicates]))
    return out


def timed(fn: Callable[..., _T], *args: object) -> tuple[float, _T]:
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def metadata_now(
    rows: pa.Table, layouts: list[np.ndarray], indexes: list[Index]
) -> list[VirtualFiles]:
    return [virtual_files(rows, ids, indexes) for ids in layouts]


def metadata_before(
    rows: pa.Table, layouts: list[np.ndarray], indexes: list[Index]
) -> list[VirtualFiles]:
    return [block_by_block(rows, ids, indexes) for ids in layouts]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000, help="sample rows")
    ap.add_argument("--candidates", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=52)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    rows = logs_arrow(args.rows, 0)
    indexes = [ix.bind(rows.schema) for ix in LOGS_INDEXES]
    rng = np.random.default_rng(0)
    layouts = [rng.integers(0, args.blocks, rows.num_rows) for _ in range(args.candidates)]
    queries = wl.generate(wl.LOGS_TEMPLATES, args.queries, seed=0, shape="drift")
    predicates = [parse_predicate(q.sql, rows.schema, functions=LOGS_UDF_TYPES) for q in queries]
    with_functions = sum(not _plain(p) for p in predicates)
    print(
        f"logs sample of {rows.num_rows:,} rows, {len(indexes)} indexes, {args.candidates} "
        f"candidates of {args.blocks} blocks, {len(predicates)} queries "
        f"({with_functions} with a function or UDF); {args.repeats} interleaved repeats"
    )

    seconds: dict[str, list[float]] = {k: [] for k in ("meta", "meta0", "price", "price0")}
    for r in range(args.repeats):
        first_now = r % 2 == 0  # the order alternates between repeats
        if first_now:
            seconds["meta"].append((got := timed(metadata_now, rows, layouts, indexes))[0])
            seconds["meta0"].append((ref := timed(metadata_before, rows, layouts, indexes))[0])
        else:
            seconds["meta0"].append((ref := timed(metadata_before, rows, layouts, indexes))[0])
            seconds["meta"].append((got := timed(metadata_now, rows, layouts, indexes))[0])
        sets = got[1]
        for a, b in zip(sets, ref[1], strict=True):
            assert all(a.metadata[n].equals(b.metadata[n]) for n in a.metadata), "metadata"
        if first_now:
            seconds["price"].append((now := timed(stacked_fractions, sets, predicates))[0])
            seconds["price0"].append((old := timed(stacked_without_functions, sets, predicates))[0])
        else:
            seconds["price0"].append((old := timed(stacked_without_functions, sets, predicates))[0])
            seconds["price"].append((now := timed(stacked_fractions, sets, predicates))[0])
        assert all(np.array_equal(a, b) for a, b in zip(now[1], old[1], strict=True)), "shares"

    med = {k: statistics.median(v) for k, v in seconds.items()}
    print(f"index metadata of {args.candidates} candidates: one pass {med['meta']:.3f} s, "
          f"block by block {med['meta0']:.3f} s -> ratio {med['meta'] / med['meta0']:.2f}")  # fmt: skip
    print(f"pricing {len(predicates)} queries: over the stack {med['price']:.3f} s, "
          f"functions one candidate at a time {med['price0']:.3f} s -> ratio "
          f"{med['price'] / med['price0']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
