"""Time ``optimize.apply`` of a stored layout on fresh copies of one table.

Not part of ``make bench`` (it needs data a replay left behind). The base table
is written once from Parquet files (``--parquet DIR``, e.g. a replay's staged
TPC-H rows, into ``--files`` files in arrival order) or taken as it is
(``--table PATH``); the layout is read from another table's clustering sidecar
(``--layout-from PATH``: the layout document its files name, e.g. a replay's
``static`` table). Every run copies the base and times
``t.optimize.apply(layout, one_file_per_block=True)`` on the copy; printed per
run: seconds and the rewrite's task seconds (``metrics.task_steps``). The first
run of a process pays what is cold; compare the later ones. To compare two
versions of the code, run this file with ``PYTHONPATH`` pointing at each
checkout in turn, alternating::

    .venv/bin/python bench/apply_copy.py --parquet bench-data-s1/tpch-denorm-1-b1-s2 \\
        --layout-from bench-data-s1/replay-tpch/tables/static --work /tmp/apply-copy
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

from lakelayout.api import Table
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.errors import LakelayoutError
from lakelayout.layouts.base import Layout
from lakelayout.table.session import spark_session


def stored_layout(table: str) -> Layout:
    """The layout document the live files of ``table`` name (the most common one)."""
    t = Table(table)
    paths = [str(p) for p in t.snapshot().files.paths]
    rows = ProvenanceStore(t.uri).read(paths)
    ids = [r.layout_id for r in rows.values() if r.layout_id]
    if not ids:
        raise LakelayoutError(f"no live file of {table} names a layout")
    return ProvenanceStore(t.uri).load_layout(max(set(ids), key=ids.count))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--parquet", help="Parquet directory the base table is written from")
    source.add_argument("--table", help="an existing table to copy as it is")
    ap.add_argument("--files", type=int, default=31, help="files of the base (with --parquet)")
    ap.add_argument("--layout-from", required=True, help="table whose sidecar holds the layout")
    ap.add_argument("--work", default="/tmp/apply-copy", help="scratch directory")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    spark = spark_session()
    layout = stored_layout(args.layout_from)
    print(f"layout: {layout.family}, {layout.n_blocks} blocks")
    os.makedirs(args.work, exist_ok=True)
    base = args.table
    if base is None:
        base = os.path.join(args.work, "base")
        if not os.path.exists(base):
            df = spark.read.parquet(args.parquet)
            df = df.drop(*[c for c in df.columns if c.startswith("_ll_")])
            Table.create(base, df.repartition(args.files),
                         properties={"lakelayout.queryLog.enabled": "false"})  # fmt: skip
    snap = Table(base).snapshot()
    print(f"base: {len(snap.files)} files, {int(snap.files.total_bytes):,} bytes, "
          f"{int(snap.files.total_rows):,} rows")  # fmt: skip
    copy = os.path.join(args.work, "copy")
    for k in range(args.runs):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(base, copy)
        t = Table(copy, spark=spark)
        started = time.perf_counter()
        m = t.optimize.apply(layout, one_file_per_block=True)
        seconds = time.perf_counter() - started
        steps = " ".join(f"{name} {s:.1f}" for name, s in m.task_steps.items())
        print(f"run {k}: apply {seconds:.2f} s, {m.files_added} files; task s: {steps}")
    shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    main()
