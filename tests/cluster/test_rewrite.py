"""The rewrite pipeline's partitioning and ordering: blocks spread evenly, files one block each."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from lakelayout.api import Table
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.cluster.rewrite import (
    BLOCK_COLUMN,
    KEY_COLUMN,
    Router,
    _row_order,
    block_partitions,
    partition_keys,
    spark_hash_long,
)
from lakelayout.layouts import HilbertLayout, QdTreeLayout

from .helpers import gen, live_paths, same_rows

EDGE_LONGS = [0, 1, -1, 7, 42, 2**31 - 1, -(2**31), 2**32, 2**40 + 3, -(2**63), 2**63 - 1]


def test_block_partitions_are_contiguous_and_balanced() -> None:
    for n_blocks, parts in [(7, 7), (7, 3), (19, 8), (100, 8), (3, 8)]:
        got = block_partitions(np.arange(n_blocks), n_blocks, parts)
        assert (np.diff(got) >= 0).all()  # contiguous runs of blocks
        counts = np.bincount(got, minlength=parts)
        used = counts[counts > 0]
        assert used.max() - used.min() <= 1
        assert len(used) == min(parts, n_blocks)


def test_block_partitions_stay_valid_for_ids_outside_the_range() -> None:
    got = block_partitions(np.array([-5, 0, 9, 1000]), 4, 3)
    assert ((got >= 0) & (got < 3)).all()


def test_partition_keys_hash_to_their_own_partition() -> None:
    for parts in (1, 2, 7, 64, 500):
        keys = np.array(partition_keys(parts), dtype=np.int64)
        assert len(set(keys.tolist())) == parts
        assert (np.mod(spark_hash_long(keys).astype(np.int64), parts) == np.arange(parts)).all()


@pytest.mark.spark
def test_spark_hash_long_is_sparks_hash(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(v,) for v in EDGE_LONGS], "v long")
    theirs = [r.h for r in df.select(F.hash("v").alias("h")).collect()]
    assert spark_hash_long(np.array(EDGE_LONGS)).tolist() == theirs


@pytest.mark.spark
def test_partition_keys_put_one_key_in_each_spark_partition(spark: Any) -> None:
    keys = partition_keys(13)
    df = spark.createDataFrame([(k,) for k in keys], "k long").repartition(13, "k")
    assert df.rdd.glom().map(len).collect() == [1] * 13


def _names(columns: list[Any]) -> list[str]:
    return [str(c).split("'")[1] for c in columns]


@pytest.mark.spark
def test_rows_are_ordered_by_key_alone_for_curves(spark: Any) -> None:
    import pyarrow as pa

    sample = pa.table({"a": np.arange(1000), "b": np.arange(1000)[::-1].copy()})
    curve = HilbertLayout.fit(sample, columns=["a", "b"], target_blocks=4)
    tree = QdTreeLayout.fit(sample, ["a < 500"], rows_per_block=100)
    assert _names(_row_order(Router(("a", "b"), "/t", layout=curve), [])) == [KEY_COLUMN]
    assert _names(_row_order(Router(("a", "b"), "/t", layout=tree), [])) == [
        BLOCK_COLUMN,
        KEY_COLUMN,
    ]
    per_file = Router(("a", "b"), "/t", file_blocks={"x": 0})
    assert _names(_row_order(per_file, [])) == [BLOCK_COLUMN]
    # partitioned: each partition of a block is one run, so a file holds one partition
    from lakelayout.table.datafile import TableFormat

    fmt = TableFormat.plain(pa.schema([("a", pa.int64()), ("b", pa.int64())]), ["b"])
    routed = Router(("a", "b"), "/t", layout=curve)
    assert _names(_row_order(routed, [], fmt)) == [BLOCK_COLUMN, "b", KEY_COLUMN]
    assert _names(_row_order(per_file, [], fmt)) == [BLOCK_COLUMN, "b"]


@pytest.mark.spark
def test_hilbert_writes_one_block_per_file_in_key_order(spark: Any, tmp_path: Path) -> None:
    """More blocks than shuffle partitions: every file still holds one block, sorted by key."""
    t = Table.create(str(tmp_path / "t"), gen(spark, 20_000, 5, parts=8), target_file_size=24_000)
    v0 = t.version
    t.optimize.hilbert(["a", "b"])
    store = ProvenanceStore(t.uri)
    prov = store.read(live_paths(t))
    layout_ids = {p.layout_id for p in prov.values()}
    assert len(layout_ids) == 1
    layout = store.load_layout(next(iter(layout_ids)))  # type: ignore[arg-type]
    assert layout.n_blocks > 2 * 4  # more blocks than local[2] shuffle partitions (4 per core)
    ranges: dict[int, list[tuple[int, int]]] = {}
    for path, p in prov.items():
        data = pq.read_table(os.path.join(t.uri, path))
        block, key = layout.route(data)
        assert key is not None
        assert set(block.tolist()) == {p.block_id}
        assert (np.diff(key) >= 0).all()
        ranges.setdefault(int(p.block_id), []).append((int(key[0]), int(key[-1])))  # type: ignore[arg-type]
    assert len(ranges) == layout.n_blocks
    for spans in ranges.values():  # files of one block cover disjoint key ranges
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert same_rows(t.to_df(version=v0), t.to_df())


def test_file_router_reads_in_table_schema_and_tags_the_source_file(tmp_path: Path) -> None:
    """Columns by name, cast to the table types, a missing column as NULL, file-routed."""
    import pyarrow as pa

    from lakelayout.cluster.rewrite import FILE_COLUMN, PART_COLUMN, FileRouter, FileSource
    from lakelayout.table.datafile import DataFile, TableFormat

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    pq.write_table(
        pa.table({"name": ["x", "y"], "id": pa.array([1, 2], pa.int32())}), tmp_path / "a.parquet"
    )
    pq.write_table(pa.table({"id": [3], "name": ["z"], "score": [0.5]}), tmp_path / "b.parquet")
    router = Router(
        tuple(schema.names), str(tmp_path), file_blocks={"a.parquet": 0, "b.parquet": 1}
    )
    groups = ((DataFile("a.parquet", 1), DataFile("b.parquet", 1)),)
    fmt = TableFormat.plain(schema)
    out = pa.Table.from_batches(
        list(FileRouter(router, fmt, groups)(iter([pa.record_batch({"id": [0]})])))
    )
    assert out.column_names == [*schema.names, BLOCK_COLUMN, KEY_COLUMN, PART_COLUMN]
    assert out.column("id").to_pylist() == [1, 2, 3]
    assert out.column("score").to_pylist() == [None, None, 0.5]
    assert out.column(BLOCK_COLUMN).to_pylist() == [0, 0, 1]
    assert FILE_COLUMN not in out.column_names
    files = tuple(DataFile(p, s) for p, s in zip("abcd", (10, 40, 30, 20), strict=True))
    groups_by_size = FileSource(None, files, fmt).groups(2)  # type: ignore[arg-type]
    paths = sorted(sorted(f.path for f in g) for g in groups_by_size)
    assert paths == [["a", "b"], ["c", "d"]]  # 50 bytes each
