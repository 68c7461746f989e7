"""A Table.create of Arrow rows that hangs just before its first commit (its files
written, its claim made), for a test to kill it: ``create_hang.py PATH READY``; with a
third argument ``between``, a create with lakelayout properties that hangs between its
commits (the empty table committed, its rows not yet)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa

from lakelayout.api import Table
from lakelayout.table import delta


def _hang(*args: object, **kwargs: object) -> None:
    Path(sys.argv[2]).write_text("ready")
    time.sleep(600)


def main() -> None:
    rows = pa.table({"id": pa.array(range(1000, 1050), pa.int64())})
    if sys.argv[3:] == ["between"]:
        delta.commit = _hang  # type: ignore[assignment]
        Table.create(sys.argv[1], rows, cluster_by=["id"])
    else:
        delta.create_table = _hang  # type: ignore[assignment]
        Table.create(sys.argv[1], rows)


if __name__ == "__main__":  # (pytest imports every module under tests/: nothing on import)
    main()
