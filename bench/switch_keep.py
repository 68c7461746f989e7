"""What a layout switch could have kept, read from a replayed table's history.

Every rewrite a replay policy made (an ``OPTIMIZE`` commit of ``optimize.apply``)
wrote the files of one layout, stored under ``_lakelayout/clustering/layouts``.
For each such commit this reads the snapshot before it and asks the layout
which of the files it removed lie, by their statistics, in one of its blocks
(``Layout.blocks_of_files``), and which of those also hold at least
``KEEP_MIN_BLOCK_SHARE`` of an average block (what ``online_table.plan_switch`` keeps).
Printed per commit and in total: the share of the rewritten bytes in such files.
Run it on the tables of a replay made before switches kept files, to see what
keeping saves on that stream:

    .venv/bin/python bench/switch_keep.py bench-data-s1/replay-tpch/tables/regret

Layouts are matched to commits by order (file modification time against
version); a table whose counts differ (a layout store that was cleaned) is
reported and skipped. Not part of `make bench` (it needs a replay's tables).
"""

from __future__ import annotations

import argparse
import glob
import os

import numpy as np

from lakelayout.layouts.base import from_json
from lakelayout.online_table import KEEP_MIN_BLOCK_SHARE
from lakelayout.table import delta


def rewrites(root: str) -> list[tuple[int, str]] | None:
    """(version, layout file) of every ``optimize.apply`` commit, in order; None when the
    layouts stored do not match the commits one to one."""
    pattern = os.path.join(root, "_lakelayout", "**", "layouts", "*.json")
    layouts = sorted(glob.glob(pattern, recursive=True), key=os.path.getmtime)
    versions = []
    for path in sorted(glob.glob(os.path.join(root, "_delta_log", "*.json"))):
        with open(path, encoding="utf-8") as f:
            if '"OPTIMIZE"' in f.read():
                versions.append(int(os.path.basename(path).split(".")[0]))
    if len(layouts) != len(versions):
        return None
    return list(zip(versions, layouts, strict=True))


def table_report(root: str) -> tuple[int, int, int] | None:
    """Print one line per rewrite; (bytes rewritten, placed, placed and large enough)."""
    found = rewrites(root)
    if found is None:
        print(f"{root}: layouts and OPTIMIZE commits do not match one to one; skipped")
        return None
    total = placed_total = kept_total = 0
    for version, path in found:
        with open(path, encoding="utf-8") as f:
            layout = from_json(f.read())
        before = delta.snapshot(root, version - 1).files
        after = {str(p) for p in delta.snapshot(root, version).files.paths}
        removed = np.array([str(p) not in after for p in before.paths], dtype=bool)
        sizes = np.asarray(before.sizes, dtype=np.int64)
        blocks = layout.blocks_of_files(before)
        placed = np.zeros(len(before), dtype=bool) if blocks is None else blocks >= 0
        floor = KEEP_MIN_BLOCK_SHARE * float(sizes.sum()) / max(1, layout.n_blocks)
        kept = placed & (sizes >= floor)
        moved = int(sizes[removed].sum())
        total += moved
        placed_total += int(sizes[placed & removed].sum())
        kept_total += int(sizes[kept & removed].sum())
        print(
            f"  v{version:<4} {layout.family:<8} {layout.n_blocks:>3} blocks: "
            f"{int(removed.sum()):>3} of {len(before):>3} files rewritten; in one block "
            f"{_share(sizes, placed & removed, moved):6.1%} of their bytes, "
            f"kept {_share(sizes, kept & removed, moved):6.1%}"
        )
    return total, placed_total, kept_total


def _share(sizes: np.ndarray, mask: np.ndarray, total: int) -> float:
    return float(sizes[mask].sum()) / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", help="replayed policy tables")
    args = parser.parse_args()
    for root in args.tables:
        print(root)
        out = table_report(root)
        if out is None:
            continue
        total, placed, kept = out
        if total:
            print(
                f"  all rewrites: {total:,} bytes rewritten; in one block of the next layout "
                f"{placed / total:.1%}, of which kept (half an average block or more) "
                f"{kept / total:.1%}"
            )


if __name__ == "__main__":
    main()
