"""Child process of the commit race test: rewrites or deletes through ``delta.commit`` in a loop.

``python commit_race.py rewrite TABLE STOP_FILE LOG_FILE``: merges every live
file into one (``data_change=False``, as OPTIMIZE commits) until STOP_FILE
exists. ``python commit_race.py delete TABLE BUCKETS LOG_FILE``: for each
bucket k in 0..BUCKETS-1 removes the rows with ``id // 100 == k`` (files
rewritten without them, ``data_change=True``), re-planning after a lost race
to a rewrite. One JSON line per attempt in LOG_FILE. No JVM: files are written
with pyarrow, commits go through lakelayout's delta layer only.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelayout.errors import CommitConflict
from lakelayout.table import delta
from lakelayout.table.files import WrittenFile


def _write(root: Path, rows: pa.Table) -> WrittenFile:
    name = f"race-{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, root / name)
    stats = {"numRecords": rows.num_rows}
    return WrittenFile(name, (root / name).stat().st_size, rows.num_rows, json.dumps(stats))


def _read(root: Path, paths: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(root / p) for p in paths])


def rewrite(root: Path, stop: Path, log: Path) -> None:
    with open(log, "a", encoding="utf-8") as out:
        while not stop.exists():
            snap = delta.snapshot(root)
            paths = [str(p) for p in snap.files.paths]
            merged = _write(root, _read(root, paths))
            try:
                delta.commit(
                    root,
                    adds=[merged],
                    removes=paths,
                    data_change=False,
                    read_version=snap.version,
                    operation="OPTIMIZE",
                )
                row = {"committed": True}
            except CommitConflict as exc:
                (root / merged.path).unlink()
                row = {"committed": False, "unchanged": exc.rows_unchanged}
            out.write(json.dumps(row) + "\n")
            out.flush()


def delete(root: Path, buckets: int, log: Path) -> None:
    with open(log, "a", encoding="utf-8") as out:
        for k in range(buckets):
            while True:
                snap = delta.snapshot(root)
                paths = [str(p) for p in snap.files.paths]
                adds = []
                for path in paths:
                    rows = pq.read_table(root / path)
                    adds.append(
                        _write(root, rows.filter(pc.not_equal(pc.divide(rows["id"], 100), k)))
                    )
                try:
                    delta.commit(
                        root,
                        adds=adds,
                        removes=paths,
                        read_version=snap.version,
                        operation="DELETE",
                    )
                    out.write(json.dumps({"committed": True}) + "\n")
                    break
                except CommitConflict as exc:
                    out.write(
                        json.dumps({"committed": False, "unchanged": exc.rows_unchanged}) + "\n"
                    )
                    for a in adds:
                        (root / a.path).unlink()
                    if not exc.rows_unchanged:
                        raise
                finally:
                    out.flush()


if __name__ == "__main__":
    role, table, arg, log_file = sys.argv[1:5]
    if role == "rewrite":
        rewrite(Path(table), Path(arg), Path(log_file))
    else:
        delete(Path(table), int(arg), Path(log_file))
