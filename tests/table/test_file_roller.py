"""The task-side file roller without Spark: when it measures compression, where it rolls."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout.table.writer import FileRoller, TaskWriter

KIB = 1024


def _spec(root: Path, target: int) -> TaskWriter:
    schema = pa.schema([("k", pa.int64()), ("blob", pa.binary())])
    return TaskWriter(
        table_uri=str(root), schema=schema, target_file_size=target, prefix="t", codec="zstd"
    )


def _batch(rows: int, width: int, start: int = 0) -> pa.RecordBatch:
    blobs = [os.urandom(width) for _ in range(rows)]  # incompressible
    return pa.record_batch(
        [pa.array(range(start, start + rows), pa.int64()), pa.array(blobs, pa.binary())],
        names=["k", "blob"],
    )


def test_a_task_far_below_the_target_compresses_no_sample(tmp_path: Path) -> None:
    roller = FileRoller(_spec(tmp_path, 4 * 1024 * KIB), 0)
    batch = _batch(200, 100)  # ~21 KB of Arrow against a 4 MiB target
    assert list(roller.add(batch)) == []
    assert roller.ratio is None
    done = roller.finish()
    assert done.rows == 200
    assert pq.read_table(tmp_path / done.path).num_rows == 200
    # once a file is written its measured ratio is known for the next one
    assert roller.ratio is not None and roller.ratio > 0


def test_incompressible_rows_still_roll_at_the_target(tmp_path: Path) -> None:
    """Batches that could fill a file make the roller measure its ratio first, so files
    of incompressible data stay near the target instead of ``UNCALIBRATED_RATIO`` × it."""
    target = 64 * KIB
    roller = FileRoller(_spec(tmp_path, target), 0)
    done = []
    for i in range(12):  # 12 × 50 rows × ~1 KiB: ~9 targets of Arrow bytes
        done += list(roller.add(_batch(50, 1000, start=i * 50)))
    done.append(roller.finish())
    assert sum(f.rows for f in done) == 600
    full = done[:-1]
    assert len(full) >= 7
    assert all(f.size <= 1.3 * target for f in done), [f.size for f in done]
    # without a measured ratio the roller would assume UNCALIBRATED_RATIO (2) and cut
    # files at about half the target
    assert all(f.size >= 0.6 * target for f in full), [f.size for f in full]
    keys = sorted(k for f in done for k in pq.read_table(tmp_path / f.path).column("k").to_pylist())
    assert keys == list(range(600))
