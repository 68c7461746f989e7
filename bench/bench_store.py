"""Storing index metadata: one upsert into a table's metadata store (issue 13).

A rewrite stores its files' index metadata after its commit with
``MetadataStore.upsert``, which writes the whole store again. This bench fills a
store for ``--files`` data files with a Bloom filter per file (the largest kind
of index value, ~1.2 MB each at the default 1M expected values) and a min/max
struct, then times, interleaved over ``--repeats`` rounds:

* ``upsert``: the store's upsert of two files' rows (what a small rewrite pays);
* ``read``: reading one index column for every file (what a pruned scan pays);
* ``pyarrow-defaults``: the same merged rows written with pyarrow's default
  options (dictionary encoding on), the store's format before 2026-11-27.

Printed: medians and the ratio of ``upsert`` to ``pyarrow-defaults``.

Run: ``.venv/bin/python bench/bench_store.py [--files 40] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout.skipping.indexes import BloomFilter
from lakelayout.skipping.store import MetadataStore
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bloom = BloomFilter("k", expected_values=1_000_000)
    paths = [f"part-{i:05d}.parquet" for i in range(args.files)]
    with tempfile.TemporaryDirectory() as tmp:
        store = MetadataStore(tmp)
        store.write(metadata_rows(paths, bloom, seed=1))
        changed = metadata_rows(paths[:2], bloom, seed=2)
        files = FileStats(
            paths=np.array(paths, dtype=object),
            sizes=np.full(len(paths), 1 << 20, dtype=np.int64),
            num_records=np.full(len(paths), -1, dtype=np.int64),
            modification_times=np.full(len(paths), 2, dtype=np.int64),
            columns={},
        )
        timings: dict[str, list[float]] = {"upsert": [], "read": [], "pyarrow-defaults": []}
        merged = pa.concat_tables([store.read_all().slice(2), changed])

        def upsert() -> None:
            store.upsert(changed)

        def read() -> None:
            store.read(files, ["bloom_k"])

        def defaults() -> None:
            pq.write_table(merged, Path(tmp) / "defaults.parquet")

        steps = [("upsert", upsert), ("read", read), ("pyarrow-defaults", defaults)]
        for rep in range(args.repeats):
            order = steps[rep % len(steps) :] + steps[: rep % len(steps)]
            for name, step in order:
                start = time.perf_counter()
                step()
                timings[name].append(time.perf_counter() - start)
        megabytes = store.current_file().stat().st_size / 1e6
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"store: {args.files} files, {megabytes:.1f} MB; {args.repeats} interleaved rounds")
    for name, value in medians.items():
        runs = " / ".join(f"{v:.3f}" for v in timings[name])
        print(f"  {name:<17} median {value:.3f} s   ({runs})")
    print(f"upsert / pyarrow-defaults write: {medians['upsert'] / medians['pyarrow-defaults']:.2f}")


if __name__ == "__main__":
    main()
