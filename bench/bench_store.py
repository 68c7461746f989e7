"""Storing index metadata: one upsert into a table's metadata store (issue 13).

A write or rewrite stores its files' index metadata after its commit with
``MetadataStore.upsert``, which appends one segment holding only those rows
(the store compacts into one segment when it would have more than
``max_segments`` segments, or more dead rows than live). This bench fills a
store for ``--files`` data files with a Bloom filter per file (the largest kind
of index value, ~1.2 MB each at the default 1M expected values) and a min/max
struct, then times, interleaved over ``--repeats`` rounds:

* ``upsert-append``: an upsert of two files' rows onto a one-segment store of
  ``--files`` rows (what a small write pays now: one segment of two rows);
* ``upsert-compact``: the same upsert on a store with ``max_segments=1``, so it
  compacts: every row read and written again (what every upsert paid before
  segments);
* ``write``: a full store write of the same rows (one segment);
* ``read-1`` / ``read-K``: reading the Bloom filter column for every file from
  one segment, and from ``--segments`` segments holding the same live rows (the
  first write and ``--segments`` - 1 upserts of two other files each, their
  replaced rows left dead in the first segment): what a pruned scan pays.

Printed: medians, and the ratios of each upsert to the full write and of the
K-segment read to the one-segment read. Both reads are checked to return the
same values before timing.

Run: ``.venv/bin/python bench/bench_store.py [--files 40] [--repeats 5] [--segments 8]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakelayout.evaluation.replay import balanced_orders
from lakelayout.skipping.indexes import BloomFilter
from lakelayout.skipping.store import MetadataStore, atomic_write_text
from lakelayout.stats.model import FileStats


def metadata_rows(paths: list[str], bloom: BloomFilter, seed: int) -> pa.Table:
    """One row per file: keys, a Bloom filter over 1M random ints, a min/max struct."""
    rng = np.random.default_rng(seed)
    filters = []
    for _ in paths:
        filled = bloom.bloom.empty()
        bloom.bloom.add(filled, pa.array(rng.integers(0, 2**40, 1_000_000)))
        filters.append(bloom.bloom.encode(filled))
    bounds = [{"min": int(i), "max": int(i) + 10} for i in range(len(paths))]
    return pa.table(
        {
            "path": pa.array(paths, pa.string()),
            "size": pa.array([1 << 20] * len(paths), pa.int64()),
            "modification_time": pa.array([seed] * len(paths), pa.int64()),
            "bloom_k": pa.array(filters, pa.binary()),
            "minmax_k": pa.array(bounds),
        }
    )


def snapshot(table: pa.Table) -> FileStats:
    """The files whose keys are the rows of ``table``: every row fresh."""
    return FileStats(
        paths=np.array(table.column("path").to_pylist(), dtype=object),
        sizes=table.column("size").to_numpy(),
        num_records=np.full(table.num_rows, -1, dtype=np.int64),
        modification_times=table.column("modification_time").to_numpy(),
        columns={},
    )


def megabytes(store: MetadataStore) -> float:
    return sum(p.stat().st_size for p in store.segments()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--segments", type=int, default=MetadataStore.max_segments)
    args = parser.parse_args()
    if not 2 <= args.segments <= args.files // 2:
        parser.error("--segments must be between 2 and --files / 2")
    bloom = BloomFilter("k", expected_values=1_000_000)
    paths = [f"part-{i:05d}.parquet" for i in range(args.files)]
    live = list(paths)
    base = metadata_rows(paths, bloom, seed=1)
    changed = metadata_rows(paths[:2], bloom, seed=2)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        appending = MetadataStore(root / "append")
        appending.write(base)
        one_segment = appending.current_file()
        assert one_segment is not None
        compacting = MetadataStore(root / "compact", max_segments=1)
        compacting.write(base)
        written = MetadataStore(root / "write")

        segmented = MetadataStore(root / "segments", max_segments=args.segments)
        segmented.write(base)
        for k in range(1, args.segments):
            pair = paths[2 * k : 2 * k + 2]
            segmented.upsert(metadata_rows(pair, bloom, seed=10 + k), live_paths=live)
        assert len(segmented.segments()) == args.segments
        single = MetadataStore(root / "single")
        single.write(segmented.read_all())
        files = snapshot(single.read_all())
        want = single.read(files, ["bloom_k"])["bloom_k"]
        assert segmented.read(files, ["bloom_k"])["bloom_k"].equals(want)
        full = single.read_all()

        def upsert_append() -> None:
            appending.upsert(changed, live_paths=live)

        def reset_append() -> None:  # back to one segment, untimed
            atomic_write_text(appending.pointer, one_segment.name)
            keep = {one_segment.name, *(p.name for p in appending.segments())}
            for pattern in ("store-*.parquet", "manifest-*.json"):
                for path in appending.directory.glob(pattern):
                    if path.name not in keep:
                        path.unlink()

        steps: list[tuple[str, Callable[[], object], Callable[[], None] | None]] = [
            ("upsert-append", upsert_append, reset_append),
            ("upsert-compact", lambda: compacting.upsert(changed, live_paths=live), None),
            ("write", lambda: written.write(full), None),
            ("read-1", lambda: single.read(files, ["bloom_k"]), None),
            (f"read-{args.segments}", lambda: segmented.read(files, ["bloom_k"]), None),
        ]
        timings: dict[str, list[float]] = {name: [] for name, _, _ in steps}
        by_name = {name: (name, step, after) for name, step, after in steps}
        for names in balanced_orders(list(by_name), args.repeats):
            for name, step, after in (by_name[n] for n in names):
                start = time.perf_counter()
                step()
                timings[name].append(time.perf_counter() - start)
                if after is not None:
                    after()
        sizes = (megabytes(single), megabytes(segmented))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(
        f"store: {args.files} files, {sizes[0]:.1f} MB in one segment, {sizes[1]:.1f} MB in "
        f"{args.segments}; {args.repeats} interleaved rounds"
    )
    for name, value in medians.items():
        runs = " / ".join(f"{v:.3f}" for v in timings[name])
        print(f"  {name:<15} median {value:.3f} s   ({runs})")
    write = medians["write"]
    print(f"upsert-append / write:  {medians['upsert-append'] / write:.2f}")
    print(f"upsert-compact / write: {medians['upsert-compact'] / write:.2f}")
    print(
        f"read-{args.segments} / read-1:       {medians[f'read-{args.segments}'] / medians['read-1']:.2f}"
    )


if __name__ == "__main__":
    main()
