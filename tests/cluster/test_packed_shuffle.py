"""The shuffle path's packed rows: routed rows travel as one Arrow message per block and
batch, and the writer orders each block in Arrow.

The in-process tests run the map side (:class:`Packer`) and the reduce side
(:class:`RoutedWriter` with ``packed``) as Spark runs them, with what Spark
does in between (rows to the partition their key hashes to, then sorted by
block) done by hand; the Spark tests run whole rewrites down the shuffle path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelayout.api import Table
from lakelayout.cluster.config import SMALL_REWRITE_SIZE
from lakelayout.cluster.rewrite import (
    BLOCK_COLUMN,
    CHUNK_COLUMN,
    KEY_COLUMN,
    PART_COLUMN,
    TIMINGS_BLOCK,
    BlockOrder,
    FileRouter,
    Packer,
    RoutedWriter,
    Router,
    _messages,
    block_partitions,
    partition_keys,
)
from lakelayout.layouts import ZOrderLayout
from lakelayout.table.datafile import DataFile, TableFormat
from lakelayout.table.writer import TaskWriter

from .helpers import gen, live_paths, same_rows

#: table properties that send a rewrite down the shuffle path (any input is "large")
SHUFFLED = {SMALL_REWRITE_SIZE: "1"}

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("s", pa.string())])


def _input_files(root: Path, files: int, rows: int) -> tuple[DataFile, ...]:
    """Parquet files of ``rows`` rows each, in row groups of 700 rows (several batches a file);
    ``s`` has NULLs and strings of varied lengths, so sliced string buffers are exercised."""
    rng = np.random.default_rng(11)
    out = []
    for i in range(files):
        ids = np.arange(i * rows, (i + 1) * rows)
        strings = [None if j % 13 == 0 else "x" * int(j % 37) + str(j) for j in ids.tolist()]
        data = pa.table(
            {
                "id": ids,
                "a": rng.integers(0, 1000, rows),
                "b": rng.integers(0, 1000, rows),
                "s": pa.array(strings, pa.string()),
            },
            schema=SCHEMA,
        )
        name = f"in{i}.parquet"
        pq.write_table(data, root / name, row_group_size=700)
        out.append(DataFile(name, (root / name).stat().st_size))
    return tuple(out)


def _spark_between(packed: list[pa.RecordBatch], parts: int) -> list[list[pa.RecordBatch]]:
    """What Spark does between the two sides: each packed row to the partition its key
    hashes to (``partition_keys`` inverted), then every partition sorted by block and cut
    into batches of 3 rows (a block's messages arrive across batches)."""
    table = pa.Table.from_batches(packed)
    where = {key: i for i, key in enumerate(partition_keys(parts))}
    partition = np.array([where[k] for k in table.column(PART_COLUMN).to_pylist()])
    out = []
    for i in range(parts):
        mine = table.filter(pa.array(partition == i))
        order = np.argsort(mine.column(BLOCK_COLUMN).to_numpy(), kind="stable")
        out.append(mine.take(pa.array(order)).combine_chunks().to_batches(3))
    return out


@pytest.mark.parametrize("parts", [1, 3])
def test_packed_rows_are_written_once_each_one_block_per_file_in_key_order(
    tmp_path: Path, parts: int
) -> None:
    """Every row once (whole rows compared), files of one block in key order, several row
    groups each; the routing tasks' timings reach the descriptors."""
    files = _input_files(tmp_path, 3, 5000)
    source = pa.concat_tables(pq.read_table(tmp_path / f.path) for f in files)
    layout = ZOrderLayout.fit(source, columns=["a", "b"], target_blocks=5)
    router = Router(
        tuple(SCHEMA.names),
        str(tmp_path),
        layout=layout,
        n_blocks=layout.n_blocks,
        part_keys=partition_keys(parts),
    )
    fmt = TableFormat.plain(SCHEMA)
    packed_schema = pa.schema([*SCHEMA, pa.field(KEY_COLUMN, pa.int64(), nullable=False)])
    groups = (files[:2], files[2:])
    packer = Packer(router, packed_schema, FileRouter(router, fmt, groups))
    packed = [
        *packer(iter([pa.record_batch({"id": [0]})])),
        *packer(iter([pa.record_batch({"id": [1]})])),
    ]
    assert all(b.schema.names == [PART_COLUMN, BLOCK_COLUMN, CHUNK_COLUMN] for b in packed)
    # one message per block and batch, not a row per row
    assert sum(b.num_rows for b in packed) < source.num_rows // 100
    spec = TaskWriter(str(tmp_path), SCHEMA, 1 << 30, "t", "zstd", row_group_bytes=20_000)
    writer = RoutedWriter(spec, packed_schema, BlockOrder(use_key=True))
    descriptors = pa.Table.from_batches(
        [d for shuffled in _spark_between(packed, parts) for d in writer(iter(shuffled))]
    )
    written = descriptors.filter(descriptors.column("path").is_valid())
    assert sorted(written.column("block").to_pylist()) == list(range(layout.n_blocks))
    assert sum(descriptors.column("t_read").to_pylist()) > 0  # map-side timings came through
    assert sum(descriptors.column("t_route").to_pylist()) > 0
    out = []
    for path, block in zip(
        written.column("path").to_pylist(), written.column("block").to_pylist(), strict=True
    ):
        assert pq.ParquetFile(tmp_path / path).metadata.num_row_groups > 1
        data = pq.read_table(tmp_path / path)
        got, key = layout.route(data)
        assert set(got.tolist()) == {block} and key is not None
        assert (np.diff(key) >= 0).all()
        out.append(data)
    every = pa.concat_tables(out).sort_by("id")
    assert every.equals(source.sort_by("id"))


def test_block_order_puts_each_partition_in_one_run() -> None:
    """Partitioned tables: a block's rows by partition value (each one run), then key."""
    table = pa.table(
        {
            "p": pa.array(["y", None, "x", "y", "x", None, "x"]),
            KEY_COLUMN: pa.array([5, 9, 7, 1, 2, 0, 4], pa.int64()),
        }
    )
    out = BlockOrder(use_key=True, partition_columns=("p",)).sort(table)
    assert out.column("p").to_pylist() == ["x", "x", "x", "y", "y", None, None]
    assert out.column(KEY_COLUMN).to_pylist() == [2, 4, 7, 1, 5, 0, 9]
    kept = BlockOrder(use_key=False).sort(table)  # no key, no partitions: arrival order
    assert kept.equals(table)
    by_key = BlockOrder(use_key=True).sort(table)
    assert by_key.column(KEY_COLUMN).to_pylist() == [0, 1, 2, 4, 5, 7, 9]


def test_messages_are_read_in_place_and_copied_only_when_unaligned() -> None:
    """Arrow's readers want 8-byte aligned buffers: a message at an odd offset is copied,
    an aligned one is a view of the column's data; binary and large_binary alike."""
    batch = pa.record_batch({"a": pa.array(np.arange(5)), "s": ["p", "q", None, "r", "s"]})
    message = batch.slice(1, 3).serialize().to_pybytes()
    assert len(message) % 8 == 0
    for kind in (pa.binary(), pa.large_binary()):
        # after the slice: "x" at an aligned offset, both messages at odd ones
        values = pa.array([message, b"x", message, message], kind).slice(1)
        data = values.buffers()[2]
        got = _messages(values)
        assert [len(m) for m in got] == [1, len(message), len(message)]
        assert all(m.address % 8 == 0 for m in got[1:])
        inside = [data.address <= m.address < data.address + data.size for m in got]
        assert inside == [True, False, False]  # in place, then two copies
        for m in got[1:]:
            assert pa.ipc.read_record_batch(m, batch.schema).equals(batch.slice(1, 3))
    aligned = pa.array([message, message], pa.binary())
    views = _messages(aligned)
    start = aligned.buffers()[2].address
    assert [m.address - start for m in views] == [0, len(message)]  # no copy


def test_timings_are_sent_ahead_of_every_block() -> None:
    """The timings row sorts before every block, so a writer reads it before any data."""
    assert TIMINGS_BLOCK < 0
    assert block_partitions(np.array([TIMINGS_BLOCK]), 4, 4).tolist()[0] in range(4)


def _files_of(t: Table) -> list[pa.Table]:
    return [pq.read_table(os.path.join(t.uri, p)) for p in sorted(live_paths(t))]


@pytest.mark.spark
def test_shuffled_zorder_of_a_partitioned_table_keeps_rows_and_orders_files(
    spark: Any, tmp_path: Path
) -> None:
    """The shuffle path on a partitioned table: the same rows, a file per partition and block,
    rows in Z-order key order inside each file."""
    from pyspark.sql import functions as F

    df = gen(spark, 20_000, 21, parts=6).withColumn("p", (F.col("id") % 3).cast("string"))
    t = Table.create(
        str(tmp_path / "t"), df, partition_by=["p"], target_file_size=40_000, properties=SHUFFLED
    )
    v0 = t.version
    m = t.optimize.zorder(["a", "b"])
    assert m.rows_added == m.rows_removed == 20_000
    assert m.task_steps["shuffle"] > 0
    assert same_rows(t.to_df(version=v0), t.to_df())
    from lakelayout.cluster.provenance import ProvenanceStore

    store = ProvenanceStore(t.uri)
    prov = store.read(live_paths(t))
    layouts = {i: store.load_layout(i) for i in {p.layout_id for p in prov.values()}}  # type: ignore[arg-type]
    for path, p in prov.items():
        data = pq.read_table(os.path.join(t.uri, path), columns=["a", "b"])
        block, key = layouts[p.layout_id].route(data)
        assert set(block.tolist()) == {p.block_id} and key is not None
        assert (np.diff(key) >= 0).all()
        assert path.startswith("p=")  # one partition per file (its directory)


@pytest.mark.spark
def test_shuffled_compaction_and_delete_keep_every_other_row(spark: Any, tmp_path: Path) -> None:
    """Rewrites routed by file (compaction from files, DELETE from a DataFrame) on the shuffle
    path: rows preserved exactly; a DELETE drops exactly the matching rows."""
    t = Table.create(str(tmp_path / "t"), gen(spark, 8000, 5, parts=8), target_file_size=1 << 30)
    from lakelayout.table.delta import set_properties

    set_properties(t.uri, SHUFFLED)
    v0 = t.version
    files_before = len(live_paths(t))
    m = t.optimize.compact()
    assert m.files_removed == files_before and m.files_added < files_before
    assert same_rows(t.to_df(version=v0), t.to_df())
    t.delete("a < 300")
    expected = t.to_df(version=v0).where("a >= 300")
    assert same_rows(expected, t.to_df())
