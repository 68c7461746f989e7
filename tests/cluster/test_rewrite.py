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
from lakelayout.cluster.config import SMALL_REWRITE_SIZE
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.cluster.rewrite import (
    BLOCK_COLUMN,
    KEY_COLUMN,
    BlockOrder,
    Router,
    block_partitions,
    partition_keys,
    spark_hash_long,
)
from lakelayout.layouts import LinearLayout
from lakelayout.table.datafile import DataFile, TableFormat

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


def test_a_block_takes_the_lexicographic_order_of_a_linear_layout() -> None:
    """A linear layout's key ranks the rows of one batch, so the order is computed over the
    whole block: NULL last and NaN after every number, in each dimension, as the layout's
    ranges are cut; on a partitioned table each partition is one run. The rank column
    used to sort does not reach the rows written."""
    import pyarrow as pa

    table = pa.table(
        {
            "a": pa.array([2, None, 1, 2, 1, None, 2], pa.int64()),
            "x": pa.array([0.5, 1.0, float("nan"), -1.0, 3.0, None, None], pa.float64()),
            "p": pa.array(["q", "p", "q", "p", "p", "q", "p"]),
            KEY_COLUMN: pa.array([9, 8, 7, 6, 5, 4, 3], pa.int64()),  # routed per batch: unused
        }
    )
    layout = LinearLayout.fit(table, columns=["a", "x"], target_blocks=2)
    out = BlockOrder(use_key=False, rank_by=layout).sort(table)
    assert out.schema == table.schema
    rows = list(zip(out.column("a").to_pylist(), out.column("x").to_pylist(), strict=True))
    assert _same_with_nan(
        rows, [(1, 3.0), (1, "nan"), (2, -1.0), (2, 0.5), (2, None), (None, 1.0), (None, None)]
    )
    by_partition = BlockOrder(use_key=False, partition_columns=("p",), rank_by=layout).sort(table)
    assert by_partition.schema == table.schema
    assert by_partition.column("p").to_pylist() == ["p"] * 4 + ["q"] * 3
    a, x = by_partition.column("a").to_pylist(), by_partition.column("x").to_pylist()
    keys = list(zip(a, x, strict=True))
    assert keys[:4] == [(1, 3.0), (2, -1.0), (2, None), (None, 1.0)]
    assert keys[5:] == [(2, 0.5), (None, None)] and keys[4][0] == 1  # (1, NaN) first of "q"


def _same_with_nan(got: list[tuple[Any, Any]], want: list[tuple[Any, Any]]) -> bool:
    def norm(v: Any) -> Any:
        return "nan" if isinstance(v, float) and v != v else v

    return [(a, norm(x)) for a, x in got] == want


#: table properties that send a rewrite down the shuffle path (any input is "large")
SHUFFLED = {SMALL_REWRITE_SIZE: "1"}


def _small_files(spark: Any, tmp_path: Path, properties: dict[str, str] | None) -> Table:
    """20,000 rows in small files (a rewrite makes many more blocks than partitions)."""
    return Table.create(
        str(tmp_path / "t"),
        gen(spark, 20_000, 5, parts=8),
        target_file_size=24_000,
        properties=properties,
    )


@pytest.mark.spark
@pytest.mark.parametrize("properties", [None, SHUFFLED], ids=["small", "shuffled"])
def test_hilbert_writes_one_block_per_file_in_key_order(
    spark: Any, tmp_path: Path, properties: dict[str, str] | None
) -> None:
    """More blocks than shuffle partitions: every file still holds one block, sorted by key.

    Both paths: no shuffle for a small input, Spark's shuffle and sort otherwise.
    """
    t = _small_files(spark, tmp_path, properties)
    v0 = t.version
    m = t.optimize.hilbert(["a", "b"])
    # both paths report their reading tasks' time (the shuffle's map side through the shuffle)
    assert m.task_steps["read"] > 0 and m.task_steps["route"] > 0
    assert (m.task_steps.get("shuffle", 0.0) > 0) == (properties is not None)
    assert m.task_steps["write"] > 0 and set(m.steps) >= {"plan", "sample", "fit", "rewrite"}
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


@pytest.mark.spark
@pytest.mark.parametrize("properties", [None, SHUFFLED], ids=["small", "shuffled"])
def test_a_linear_layout_writes_one_block_per_file_in_its_order_in_arrow(
    spark: Any, tmp_path: Path, properties: dict[str, str] | None
) -> None:
    """``apply`` of a linear layout takes the same paths as a curve: no shuffle for a small
    input, packed Arrow messages otherwise (it used to make Spark shuffle and sort rows by
    its dimensions). Every file holds one block, in the layout's lexicographic order."""
    t = _small_files(spark, tmp_path, properties)
    v0 = t.version
    layout = LinearLayout.fit(t.to_df().toArrow(), columns=["b", "a"], target_blocks=12)
    m = t.optimize.apply(layout)
    assert (m.task_steps.get("shuffle", 0.0) > 0) == (properties is not None)
    assert m.task_steps["sort"] > 0
    prov = ProvenanceStore(t.uri).read(live_paths(t))
    seen = set()
    for path, p in prov.items():
        data = pq.read_table(os.path.join(t.uri, path))
        assert set(layout.assign(data).tolist()) == {p.block_id}
        rank = layout.sort_key(data)  # the file's rows ranked among themselves
        assert rank is not None and (rank == np.arange(data.num_rows)).all(), path
        seen.add(p.block_id)
    assert len(seen) == layout.n_blocks
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


@pytest.mark.spark
def test_small_and_shuffled_rewrites_route_every_row_alike(spark: Any, tmp_path: Path) -> None:
    """One layout applied on both paths: the same rows in the same blocks, none lost or doubled."""
    import shutil

    from lakelayout.layouts import ZOrderLayout

    base = Table.create(
        str(tmp_path / "base"), gen(spark, 6000, 7, parts=6), target_file_size=16_000
    )
    layout = ZOrderLayout.fit(base.to_df().toArrow(), columns=["a", "b"], target_blocks=5)
    placed: dict[str, set[tuple[int, int]]] = {}
    for name, properties in (("small", {}), ("shuffled", SHUFFLED)):
        shutil.copytree(base.uri, tmp_path / name)
        t = Table(str(tmp_path / name), spark=spark)
        if properties:
            from lakelayout.table.delta import set_properties

            set_properties(t.uri, properties)
        m = t.optimize.apply(layout)
        assert m.rows_added == 6000 and m.rows_removed == 6000
        rows: list[tuple[int, int]] = []
        for path, p in ProvenanceStore(t.uri).read(live_paths(t)).items():
            data = pq.read_table(os.path.join(t.uri, path))
            block, key = layout.route(data)
            assert key is not None and (np.diff(key) >= 0).all()  # sorted by the curve key
            assert set(block.tolist()) == {p.block_id}  # one block per file
            rows += [(int(i), int(p.block_id)) for i in data.column("id").to_pylist()]  # type: ignore[arg-type]
        assert len(rows) == len(set(rows)) == 6000
        placed[name] = set(rows)
        assert same_rows(base.to_df(), t.to_df())
    assert placed["small"] == placed["shuffled"]


def test_driver_sample_reads_only_the_columns_asked_in_table_types(tmp_path: Path) -> None:
    """The driver-side curve sample: a Bernoulli sample of the asked columns, table-typed."""
    import pyarrow as pa

    from lakelayout.cluster.rewrite import sample_files

    schema = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("s", pa.string())])
    pq.write_table(pa.table({"id": pa.array(range(30_000), pa.int32())}), tmp_path / "x.parquet")
    pq.write_table(
        pa.table({"id": range(30_000, 60_000), "a": range(30_000), "s": ["v"] * 30_000}),
        tmp_path / "y.parquet",
    )
    fmt = TableFormat.plain(schema)
    files = [
        DataFile(name, (tmp_path / name).stat().st_size) for name in ("x.parquet", "y.parquet")
    ]
    every = sample_files(str(tmp_path), files, fmt, ["id", "a"], 60_000, rows=60_000)
    assert every.schema == pa.schema([("id", pa.int64()), ("a", pa.int64())])
    assert sorted(every.column("id").to_pylist()) == list(range(60_000))
    assert every.column("a").null_count == 30_000  # x.parquet has no column a: NULL, as Spark reads
    part = sample_files(str(tmp_path), files, fmt, ["id"], 60_000, rows=6000)
    ids = part.column("id").to_numpy()
    assert 5000 < len(ids) < 7000 and len(set(ids.tolist())) == len(ids)
    assert 0.4 < (ids < 30_000).mean() < 0.6  # both files sampled at the same rate


@pytest.mark.parametrize("threads", [1, 3])
def test_local_rewrite_writes_every_row_once_in_key_order(tmp_path: Path, threads: int) -> None:
    """The no-shuffle rewrite, run in-process: each partition writes its blocks, keys sorted."""
    import pyarrow as pa

    from lakelayout.cluster.rewrite import FileRouter, LocalRewrite, RoutedWriter
    from lakelayout.layouts import ZOrderLayout
    from lakelayout.table.writer import TaskWriter

    rng = np.random.default_rng(3)
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.int64())])
    for i in range(3):
        ids = np.arange(i * 4000, (i + 1) * 4000)
        data = {"id": ids, "a": rng.integers(0, 1000, 4000), "b": rng.integers(0, 1000, 4000)}
        pq.write_table(pa.table(data, schema=schema), tmp_path / f"in{i}.parquet")
    layout = ZOrderLayout.fit(
        pq.read_table(tmp_path / "in0.parquet"), columns=["a", "b"], target_blocks=4
    )
    router = Router(tuple(schema.names), str(tmp_path), layout=layout, n_blocks=4)
    writer = RoutedWriter(TaskWriter(str(tmp_path), schema, 1 << 30, "t", "zstd"))
    files = tuple(
        DataFile(f"in{i}.parquet", (tmp_path / f"in{i}.parquet").stat().st_size) for i in range(3)
    )
    fmt = TableFormat.plain(schema)
    local = LocalRewrite(FileRouter(router, fmt, ()), writer, files, parts=2, threads=threads)
    out = pa.Table.from_batches(list(local(iter([pa.record_batch({"id": [0, 1]})]))))
    assert sorted(out.column("block").to_pylist()) == [0, 1, 2, 3]  # one file per block
    ids: list[int] = []
    for path, block in zip(
        out.column("path").to_pylist(), out.column("block").to_pylist(), strict=True
    ):
        data = pq.read_table(tmp_path / path)
        got_block, key = layout.route(data)
        assert set(got_block.tolist()) == {block} and key is not None
        assert (np.diff(key) >= 0).all()
        ids += data.column("id").to_pylist()
    assert sorted(ids) == list(range(12_000))
    assert sum(out.column("rows").to_pylist()) == 12_000


def test_shuffled_block_arrives_in_many_chunks_and_is_written_as_whole_batches(
    tmp_path: Path,
) -> None:
    """A layout with many blocks packs each routed batch into tiny per-block messages;
    the writing side joins a block's messages before writing, so the file writer sees
    batches of up to READ_BATCH_ROWS rows, not one per message (a 300-block rewrite of
    3M rows spent 70 s in per-batch writer costs before), and every row arrives once."""
    import pyarrow as pa

    from lakelayout.cluster.rewrite import PART_COLUMN, Packer, RoutedWriter, TaskTimer
    from lakelayout.table.datafile import READ_BATCH_ROWS
    from lakelayout.table.writer import TaskWriter

    blocks, batches, rows = 4, 150, 40  # every block in every batch: 150 messages per block
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64())])
    packed_schema = schema.append(pa.field(KEY_COLUMN, pa.int64()))
    router = Router(tuple(schema.names), str(tmp_path), n_blocks=blocks)
    packer = Packer(router, packed_schema)
    packed = []
    for i in range(batches):
        ids = np.arange(i * rows, (i + 1) * rows)
        packed.append(
            packer.pack(
                pa.record_batch(
                    {
                        "id": ids,
                        "a": ids * 2,
                        BLOCK_COLUMN: ids % blocks,
                        KEY_COLUMN: np.zeros(rows, dtype=np.int64),
                        PART_COLUMN: np.zeros(rows, dtype=np.int64),
                    }
                )
            )
        )
    table = pa.Table.from_batches(packed)
    order = np.argsort(table.column(BLOCK_COLUMN).to_numpy(), kind="stable")  # Spark's sort
    shuffled = table.take(pa.array(order)).to_batches(max_chunksize=97)
    writer = RoutedWriter(TaskWriter(str(tmp_path), schema, 1 << 30, "t", "zstd"), packed_schema)
    runs = list(writer.unpacked(iter(shuffled), TaskTimer()))
    per_block = rows * batches // blocks
    assert per_block <= READ_BATCH_ROWS
    assert [block for block, _ in runs] == list(range(blocks))  # one whole batch per block
    ids = [i for _, run in runs for i in run.column("id").to_pylist()]
    assert sorted(ids) == list(range(rows * batches))
    for block, run in runs:
        assert run.num_rows == per_block and {i % blocks for i in run.column("id").to_pylist()} == {
            block
        }
