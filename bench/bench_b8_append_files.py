"""B8-append: a small append to a table of many files, next to delta-rs.

An append reads no existing row, yet each used to read the whole table state:
lakelayout's snapshot with every file's statistics, then delta-rs's log again
to commit (~3x delta-rs's append at 3,000 and 20,000 files). It now reads the
latest schema, properties and protocol once (``delta.head``) and commits with
the same delta-rs table; a ``Table`` appending again loads only the commits
made since (the table is kept between appends, ``delta.release``).

For each ``--files`` size a table of that many one-row files is made once,
then copied: one copy is appended to by lakelayout, one by delta-rs given the
path (``write_deltalake(path, ...)``, which loads the log each time) and one
by delta-rs given a ``DeltaTable`` the caller holds. Every writer appends the
same one-row Arrow table ``--repeats`` times, interleaved in balanced
orders (each order, then its reverse), after one untimed append each (imports, first loads). Printed: median
seconds per append and lakelayout / delta-rs. No Spark job runs.

    .venv/bin/python bench/bench_b8_append_files.py --files 1000,10000,40000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from lakelayout.api import Table
from lakelayout.evaluation.replay import balanced_orders
from lakelayout.table import delta


def many_files(path: str, files: int) -> None:
    """A table of ``files`` files of one row each, made fast: one file written by
    lakelayout, hard-linked under ``files - 1`` more names, all added in one commit
    with the first file's statistics (what an append reads of the table is its log)."""
    Table.create(path, pa.table({"k": pa.array([0], pa.int64()), "s": pa.array(["row"])}))
    first = pa.table(DeltaTable(path).get_add_actions(flatten=False)).to_pylist()[0]
    log = Path(path) / "_delta_log" / f"{0:020d}.json"
    stats = next(
        json.loads(line)["add"]["stats"] for line in log.read_text().splitlines() if '"add"' in line
    )
    now = int(time.time() * 1000)
    adds = []
    for i in range(1, files):
        name = f"copy-{i:06d}.parquet"
        os.link(Path(path) / first["path"], Path(path) / name)
        adds.append(AddAction(name, first["size_bytes"], {}, now, True, stats))
    table = DeltaTable(path)
    table.create_write_transaction(adds, mode="append", schema=table.schema())


def run(tmp: str, size: int, repeats: int) -> None:
    """Print the median append per writer to copies of a table of ``size`` files."""
    row = pa.table({"k": pa.array([-1], pa.int64()), "s": pa.array(["new"])})
    base = str(Path(tmp) / f"base{size}")
    started = time.perf_counter()
    many_files(base, size)
    live = len(DeltaTable(base).file_uris())
    print(f"\n{live:,} files (made in {time.perf_counter() - started:.1f} s)")
    paths = {name: str(Path(tmp) / f"{name}{size}") for name in ("ll", "rs", "held")}
    for path in paths.values():
        shutil.copytree(base, path)
    delta.forget_snapshots()
    table = Table(paths["ll"])
    held = DeltaTable(paths["held"])
    writers: dict[str, Callable[[], object]] = {
        "lakelayout": lambda: table.append(row),
        "delta-rs (path)": lambda: write_deltalake(paths["rs"], row, mode="append"),
        "delta-rs (held table)": lambda: write_deltalake(held, row, mode="append"),
    }
    for write in writers.values():  # untimed: first loads
        write()
    times: dict[str, list[float]] = {name: [] for name in writers}
    names = list(writers)
    for order in balanced_orders(names, repeats):
        for name in order:
            t0 = time.perf_counter()
            writers[name]()
            times[name].append(time.perf_counter() - t0)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    for name, m in median.items():
        print(f"  {name:24s} {m * 1000:8.1f} ms")
    for peer in ("delta-rs (path)", "delta-rs (held table)"):
        print(f"  lakelayout / {peer}: {median['lakelayout'] / median[peer]:.2f}")
    rows = {
        name: DeltaTable(p).to_pyarrow_table(columns=["k"]).num_rows for name, p in paths.items()
    }
    if set(rows.values()) != {live + 1 + repeats}:
        raise SystemExit(f"rows after the appends differ: {rows}, expected {live + 1 + repeats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000,10000,40000", help="table sizes, comma separated")
    parser.add_argument("--repeats", type=int, default=8)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="b8-append-") as tmp:
        for size in (int(s) for s in opts.files.split(",")):
            run(tmp, size, opts.repeats)


if __name__ == "__main__":
    main()
