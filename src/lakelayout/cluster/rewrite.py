"""Spark side of every rewrite: read live files, route rows to blocks, write, describe.

One mechanism serves compaction, curve clustering, :meth:`apply` and DELETE:

1. :class:`Router` (a ``mapInArrow`` function) adds two columns to every row:
   the *block* it belongs to and a *sort key* inside the block. The block comes
   from ``layout.assign`` (the layout library's vectorized code, run in the
   task) or, for compaction and DELETE, from the file the row was read from.
   The key is the layout's curve key (``sort_key``) or 0; ``layout.route``
   gives both from one computation.
2. Rows are shuffled so that a block is never split across tasks, then
   ordered by ``(block, key)`` inside each task. They travel packed
   (:class:`Packer`): the rows of one block in one routed batch become one
   Arrow IPC message, so Spark shuffles and sorts (by block) a few large
   binary values instead of converting every row Arrow -> Spark row ->
   Arrow, and the writing task orders each block by its key in Arrow
   (:class:`BlockOrder`), holding one block at a time. A linear layout's
   key ranks the rows of one batch only, so its order is computed there, over
   the whole block (no row ever goes through Spark's row format; until
   2026-11-28 Spark sorted a linear layout's rows by its dimensions, 2-3.4x
   slower). Blocks are spread evenly over
   the shuffle partitions: the router also emits a *partition key* chosen so
   that Spark's hash partitioning (``pmod(murmur3(key), n)``) sends block ``b``
   to partition ``b * n // n_blocks``. Hashing the block id itself would
   collide (7 blocks hash into only 3 of 7 partitions), and one task would then
   write most of the table while the other cores wait.
3. :class:`RoutedWriter` writes the sorted rows with the table writer's file
   roller, closing a file whenever the block changes and rolling at the target
   file size inside a block. A file therefore holds one block (one contiguous
   key range), and a block larger than the target is cut into consecutive key
   ranges: no record cap ever mixes distant keys into one file (delta#1718).

Small inputs (at most ``lakelayout.smallRewriteSize`` bytes of files, 128
MiB by default, read by the routing tasks themselves) skip Spark's shuffle and sort: each of a few tasks
reads every file, keeps the rows of its own blocks, orders them by
``(block, key)`` in Arrow and writes them with the same writer
(:class:`LocalRewrite`); one Spark stage instead of two, and no row ever
leaves Arrow. The routing, the order inside a block and the files written
are the same as on the shuffle path.

Each descriptor carries the seconds its task spent reading, routing,
shuffling, sorting and writing since the previous descriptor (summed into
``OptimizeMetrics.task_steps`` by :func:`write_routed`); on the shuffle path
each routing task sends its own seconds through the shuffle (a packed row of
block :data:`TIMINGS_BLOCK`) to the writing task that reports them.

Nothing here commits: the caller commits the returned descriptors.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.cluster.config import DEFAULT_SMALL_REWRITE_SIZE, rewrite_shuffles
from lakelayout.cluster.optimize_metrics import StepClock
from lakelayout.errors import LakelayoutError
from lakelayout.layouts.base import Layout
from lakelayout.table.datafile import READ_BATCH_ROWS, DataFile, TableFormat, read_data_file
from lakelayout.table.files import INDEX_METADATA, WrittenFile
from lakelayout.table.reader import FILE_COLUMN, read_table_files, spread, with_file_column
from lakelayout.table.writer import (
    DEFAULT_CODEC,
    ROW_GROUP_ARROW_BYTES,
    FileRoller,
    FinishedFile,
    IndexSpec,
    TaskWriter,
    map_in_arrow,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.table.delta import Snapshot

BLOCK_COLUMN = "__ll_block"
KEY_COLUMN = "__ll_key"
PART_COLUMN = "__ll_part"
#: rows sampled from the rewritten files to fit ranks and key ranges
SAMPLE_ROWS = 50_000
#: the driver samples the clustering columns itself (no Spark job) up to this many rows
DRIVER_SAMPLE_MAX_ROWS = 10_000_000
#: task-side steps a descriptor reports seconds for (``OptimizeMetrics.task_steps``)
TASK_TIMERS = ("read", "route", "shuffle", "sort", "write")
#: the Arrow IPC message of one block's rows of one routed batch (shuffle path)
CHUNK_COLUMN = "__ll_chunk"
#: a block's order key beside its partition columns while :class:`BlockOrder` sorts
RANK_COLUMN = "__ll_rank"
#: block id of the one row per routing task that carries its timings through the shuffle
TIMINGS_BLOCK = -1
_PACKED_DDL = f"{PART_COLUMN} long, {BLOCK_COLUMN} long, {CHUNK_COLUMN} binary"

_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("rows", pa.int64()),
        ("stats", pa.string()),
        ("partition", pa.string()),
        ("block", pa.int64()),
        # the file's skipping-index metadata (encode_metadata), null without declared indexes
        ("meta", pa.binary()),
        *[(f"t_{name}", pa.float64()) for name in TASK_TIMERS],
    ]
)
_DESCRIPTOR_DDL = (
    "path string, size long, rows long, stats string, partition string, block long, "
    "meta binary, " + ", ".join(f"t_{name} double" for name in TASK_TIMERS)
)


class TaskTimer:
    """Seconds a task spent per step since its last descriptor (see :data:`TASK_TIMERS`)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(TASK_TIMERS, 0.0)

    def add(self, name: str, started: float) -> float:
        """Add the time since ``started`` to ``name``; the current clock reading."""
        now = time.perf_counter()
        self.seconds[name] += now - started
        return now

    def take(self) -> dict[str, float]:
        """The seconds so far, then start again from zero."""
        out, self.seconds = self.seconds, dict.fromkeys(TASK_TIMERS, 0.0)
        return out


@dataclass(frozen=True)
class RoutedFile:
    """A written file and the block its rows belong to."""

    file: WrittenFile
    block: int


# --------------------------------------------------------------------------- reading


def read_files(
    spark: SparkSession, snap: Snapshot, paths: Sequence[str], *, with_file: bool
) -> DataFrame:
    """The live rows of ``paths`` (log paths of ``snap``) as a DataFrame with the table schema.

    Partition values, deletion vectors and column mapping are applied
    (:func:`lakelayout.table.reader.read_table_files`). With ``with_file`` a
    ``__ll_file`` column holds the log path of the file each row came from.
    """
    if not paths:
        raise LakelayoutError("nothing to read: no files given")
    files = snap.data_files_for(paths)
    return read_table_files(spark, snap.uri, snap.table_format, files, with_file=with_file)


def sample_rows(df: DataFrame, total_rows: int, *, rows: int = SAMPLE_ROWS) -> pa.Table:
    """About ``rows`` rows of ``df`` (all of them when it is small), as Arrow."""
    if total_rows <= rows:
        sample = df.toArrow()
    else:
        sample = df.sample(withReplacement=False, fraction=rows / total_rows, seed=17).toArrow()
        if sample.num_rows == 0:
            sample = df.limit(rows).toArrow()
    return sample


def sample_files(
    root: str,
    files: Sequence[DataFile],
    fmt: TableFormat,
    columns: Sequence[str],
    total_rows: int,
    *,
    rows: int = SAMPLE_ROWS,
    seed: int = 17,
    fraction: float | None = None,
) -> pa.Table:
    """About ``rows`` live rows of ``columns`` of the files, read on the driver (no Spark job).

    Every row is kept with probability ``fraction`` when given, else
    ``rows / total_rows`` (all of them when the files are small): the same Bernoulli sample ``DataFrame.sample`` draws,
    without a job's start-up cost. Only ``columns`` are decoded, one batch at a
    time, so memory holds a batch and the sample. Rows are read as the rewrite
    reads them (:func:`~lakelayout.table.datafile.read_data_file`: partition
    values, physical names, deleted rows dropped).
    """
    from lakelayout.table.location import resolve_location
    from lakelayout.table.writer import conform_batch

    filesystem, base = resolve_location(root)
    wanted = pa.schema([fmt.schema.field(c) for c in columns])
    if fraction is None:
        fraction = 1.0 if total_rows <= rows else rows / total_rows
    rng = np.random.default_rng(seed)
    parts: list[pa.RecordBatch] = []
    for file in files:
        for raw in read_data_file(filesystem, base, fmt, file, columns=list(columns)):
            batch = conform_batch(raw, wanted)
            if fraction < 1.0:
                batch = batch.filter(pa.array(rng.random(batch.num_rows) < fraction))
            parts.append(batch)
    return pa.Table.from_batches(parts, schema=wanted)


@dataclass(frozen=True)
class FileSource:
    """Live files a rewrite reads itself: pyarrow in the Spark task that routes their rows.

    Reading in the routing task skips Spark's Parquet reader -> rows -> Arrow
    round trip before the router (the largest cost of a rewrite after the
    shuffle; see docs/benchmarks.md, B3). Files are the unit of work: they are
    spread over tasks by size (largest first onto the lightest task). Rows are
    read by :func:`~lakelayout.table.datafile.read_data_file`: partition
    values from the log, deleted rows dropped, physical names mapped.
    """

    spark: SparkSession
    files: tuple[DataFile, ...]
    format: TableFormat
    #: inputs up to this many bytes are rewritten without a shuffle (:class:`LocalRewrite`)
    small_bytes: int = DEFAULT_SMALL_REWRITE_SIZE

    @property
    def small(self) -> bool:
        """Whether the files are few enough bytes for one task to hold in memory."""
        return sum(f.size for f in self.files) <= self.small_bytes

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    def groups(self, tasks: int) -> list[list[DataFile]]:
        """``files`` cut into at most ``tasks`` groups of about equal bytes."""
        return spread(self.files, tasks)


# --------------------------------------------------------------------------- routing


@dataclass(frozen=True)
class Router:
    """``mapInArrow`` function: append the block id and sort key of every row.

    Exactly one of ``layout`` (rows routed by ``layout.assign``) and
    ``file_blocks`` (log path -> block, for per-file rewrites; rows carry
    their file's log path in ``__ll_file``) is set.
    """

    names: tuple[str, ...]
    root: str
    layout: Layout | None = None
    file_blocks: Mapping[str, int] | None = None
    use_sort_key: bool = True
    #: partition key of each shuffle partition (see :func:`partition_keys`)
    part_keys: tuple[int, ...] = (0,)
    n_blocks: int = 1

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            data = pa.RecordBatch.from_arrays(
                [batch.column(n) for n in self.names], names=list(self.names)
            )
            block, key = self._route(batch, data)
            part = np.asarray(self.part_keys, dtype=np.int64)[
                block_partitions(block, self.n_blocks, len(self.part_keys))
            ]
            yield pa.RecordBatch.from_arrays(
                [
                    *data.columns,
                    pa.array(block, pa.int64()),
                    pa.array(key, pa.int64()),
                    pa.array(part, pa.int64()),
                ],
                names=[*self.names, BLOCK_COLUMN, KEY_COLUMN, PART_COLUMN],
            )

    def _route(self, batch: pa.RecordBatch, data: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        zeros = np.zeros(batch.num_rows, dtype=np.int64)
        if self.layout is not None:
            if self.use_sort_key:
                assigned, key = self.layout.route(data)
            else:
                assigned, key = self.layout.assign(data), None
            block = np.asarray(assigned, dtype=np.int64)
            return block, (np.asarray(key, dtype=np.int64) if key is not None else zeros)
        assert self.file_blocks is not None
        files = batch.column(FILE_COLUMN).to_pylist()
        lookup = {u: self.file_blocks[u] for u in set(files)}
        return np.array([lookup[u] for u in files], dtype=np.int64), zeros


@dataclass(frozen=True)
class FileRouter:
    """``mapInArrow`` function over task ids: read a group of files, route their rows.

    Task ``i`` reads ``groups[i]`` with :func:`read_data_file` (the table's
    logical schema, the file's live rows) and passes every batch through
    ``router``, with the file's log path in ``__ll_file`` when the router
    routes by file.
    """

    router: Router
    format: TableFormat
    groups: tuple[tuple[DataFile, ...], ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield from self.routed(self.groups[int(task)], TaskTimer())

    def routed(self, files: Sequence[DataFile], timer: TaskTimer) -> Iterator[pa.RecordBatch]:
        """The live rows of ``files``, routed; reading and routing time go to ``timer``."""
        from lakelayout.table.location import resolve_location
        from lakelayout.table.writer import conform_batch

        filesystem, root = resolve_location(self.router.root)
        by_file = self.router.file_blocks is not None
        for file in files:
            batches = read_data_file(filesystem, root, self.format, file)
            while True:
                started = time.perf_counter()
                raw = next(batches, None)
                if raw is None:
                    break
                data = conform_batch(raw, self.format.schema)
                if by_file:
                    data = with_file_column(data, file.path)
                started = timer.add("read", started)
                out = list(self.router(iter([data])))
                timer.add("route", started)
                yield from out


def block_partitions(block: np.ndarray, n_blocks: int, parts: int) -> np.ndarray:
    """Shuffle partition of each block id: contiguous, even runs of blocks per partition.

    Blocks ``0 .. n_blocks - 1`` go to ``block * parts // n_blocks``; an id
    outside that range (never produced by a layout) still gets a valid partition.

    >>> block_partitions(np.arange(7), 7, 3).tolist()
    [0, 0, 0, 1, 1, 2, 2]
    """
    block = np.asarray(block, dtype=np.int64)
    inside = (block >= 0) & (block < n_blocks)
    spread = block * parts // max(n_blocks, 1)
    return np.where(inside, spread, np.mod(block, parts))


_M32 = np.uint64(0xFFFFFFFF)


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 = (k1 * np.uint64(0xCC9E2D51)) & _M32
    return (_rotl32(k1, 15) * np.uint64(0x1B873593)) & _M32


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    h1 = _rotl32(h1 ^ k1, 13)
    return (h1 * np.uint64(5) + np.uint64(0xE6546B64)) & _M32


def spark_hash_long(values: np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark's ``hash()`` (Murmur3 x86_32, seed 42) of 64-bit integers, as int32.

    The same function Spark's hash partitioning applies to a ``long`` column,
    so ``spark_hash_long(v) mod n`` is the partition ``repartition(n, col)``
    sends ``v`` to.
    """
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    h1 = np.full(v.shape, np.uint64(seed), dtype=np.uint64)
    h1 = _mix_h1(h1, _mix_k1(v & _M32))
    h1 = _mix_h1(h1, _mix_k1(v >> np.uint64(32)))
    h1 ^= np.uint64(8)
    h1 ^= h1 >> np.uint64(16)
    h1 = (h1 * np.uint64(0x85EBCA6B)) & _M32
    h1 ^= h1 >> np.uint64(13)
    h1 = (h1 * np.uint64(0xC2B2AE35)) & _M32
    h1 ^= h1 >> np.uint64(16)
    return h1.astype(np.uint32).view(np.int32)


def partition_keys(parts: int) -> tuple[int, ...]:
    """For each shuffle partition ``i < parts``, a long Spark hash-partitions to ``i``.

    The smallest non-negative such value, found by hashing candidates in bulk.
    """
    found = np.full(parts, -1, dtype=np.int64)
    start = 0
    while (found < 0).any():
        candidates = np.arange(start, start + 16 * parts + 1024, dtype=np.int64)
        target = np.mod(spark_hash_long(candidates).astype(np.int64), parts)
        for i in np.flatnonzero(found < 0):
            hits = candidates[target == i]
            if len(hits):
                found[i] = hits[0]
        start += len(candidates)
    return tuple(int(k) for k in found)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class BlockOrder:
    """How the rows of one block are ordered in Arrow before they are written.

    By the routed key (``use_key``; a curve's key), after the partition
    columns of a partitioned table (a file never holds two partitions, so each
    partition of a block must be one run). Without either, rows keep the
    order they arrived in (compaction and DELETE keep their files' order).
    Partition values ascending, NULL last (which partition comes first does
    not matter, only that each is one run).
    """

    use_key: bool = True
    partition_columns: tuple[str, ...] = ()
    #: a layout whose ``sort_key`` ranks the rows it is given (a linear layout,
    #: ``Layout.key_is_batch_rank``): the block's rows are ordered by their rank among
    #: themselves, computed here, over the whole block (the routed key is not used)
    rank_by: Layout | None = None

    def key(self, table: pa.Table) -> np.ndarray | None:
        """The order key of ``table``'s rows: their rank among themselves (``rank_by``),
        the routed key (``use_key``), or None (arrival order)."""
        if self.rank_by is not None:
            rank = self.rank_by.sort_key(table)
            assert rank is not None, "a layout that ranks rows gives a key"
            return rank
        return table.column(KEY_COLUMN).to_numpy() if self.use_key else None

    def sort(self, table: pa.Table) -> pa.Table:
        """``table`` (one block's rows, with the key column) in this order."""
        ordered = self.use_key or self.rank_by is not None or bool(self.partition_columns)
        if table.num_rows < 2 or not ordered:
            return table
        key = self.key(table)
        if not self.partition_columns:
            assert key is not None
            if bool((key[1:] >= key[:-1]).all()):
                return table
            return table.take(pa.array(np.argsort(key, kind="stable")))
        import pyarrow.compute as pc

        keys = [(c, "ascending") for c in self.partition_columns]
        by = table.select(list(self.partition_columns))
        if key is not None:
            by = by.append_column(RANK_COLUMN, pa.array(key, pa.int64()))
            keys.append((RANK_COLUMN, "ascending"))
        return table.take(pc.sort_indices(by, sort_keys=keys))


@dataclass(frozen=True)
class Packer:
    """``mapInArrow`` function of the shuffle's map side: route rows, pack them per block.

    Every routed batch becomes one row per block it holds: the partition key,
    the block and the block's rows (table columns and key) as one Arrow IPC
    message (``RecordBatch.serialize``, no schema: both sides know
    ``schema``). Spark then shuffles a few large binary values instead of
    every row: no Arrow -> row -> Arrow conversion of the data, and a sort of
    a few keys instead of the whole table (see :class:`RoutedWriter`).

    Rows come from ``reader`` (task ids in, the task reads its files) or,
    without one, from the input batches (a DataFrame routed by ``router``).
    The last row of every task carries its timings (block
    :data:`TIMINGS_BLOCK`, JSON) to a writing task, which reports them.
    """

    router: Router
    #: the packed rows' schema: the table's columns, then the key
    schema: pa.Schema
    reader: FileRouter | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        timer = TaskTimer()
        routed: Iterator[pa.RecordBatch]
        if self.reader is not None:
            reader = self.reader
            routed = (
                out
                for batch in batches
                for group in batch.column(0).to_pylist()
                for out in reader.routed(reader.groups[int(group)], timer)
            )
        else:
            routed = self._route(batches, timer)
        while True:
            batch = next(routed, None)  # reading and routing time themselves
            if batch is None:
                break
            started = time.perf_counter()
            packed = self.pack(batch)
            started = timer.add("shuffle", started)
            yield packed  # Spark turns it into rows and writes them to the shuffle meanwhile
            timer.add("shuffle", started)
        keys = self.router.part_keys
        yield _packed_rows([keys[task % len(keys)]], [TIMINGS_BLOCK], [_timings(timer.take())])

    def _route(
        self, batches: Iterator[pa.RecordBatch], timer: TaskTimer
    ) -> Iterator[pa.RecordBatch]:
        while True:
            started = time.perf_counter()
            batch = next(batches, None)
            if batch is None:
                return
            started = timer.add("read", started)
            out = list(self.router(iter([batch])))
            timer.add("route", started)
            yield from out

    def pack(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One packed row per block of a routed ``batch`` (rows of a block keep their order)."""
        from lakelayout.table.writer import conform_batch

        block = np.asarray(batch.column(BLOCK_COLUMN).to_numpy(zero_copy_only=False))
        if len(block) > 1 and bool((block[1:] < block[:-1]).any()):
            order = np.argsort(block, kind="stable")
            batch, block = batch.take(pa.array(order)), block[order]
        data = conform_batch(
            pa.RecordBatch.from_arrays(
                [batch.column(n) for n in self.schema.names], names=self.schema.names
            ),
            self.schema,
        )
        lows = np.concatenate([[0], np.flatnonzero(np.diff(block)) + 1]).astype(np.int64)
        highs = [*lows[1:].tolist(), len(block)]
        parts = np.asarray(batch.column(PART_COLUMN).to_numpy(zero_copy_only=False))[lows]
        chunks = [
            data.slice(lo, hi - lo).serialize() for lo, hi in zip(lows.tolist(), highs, strict=True)
        ]
        return _packed_rows(parts.tolist(), block[lows].tolist(), chunks)


def _timings(seconds: Mapping[str, float]) -> bytes:
    """A task's timings as JSON, padded to 8 bytes so the packed messages after it
    in a shuffled batch stay 8-byte aligned."""
    raw = json.dumps(dict(seconds)).encode()
    return raw + b" " * (-len(raw) % 8)


def _packed_rows(
    parts: Sequence[int], blocks: Sequence[int], chunks: Sequence[Any]
) -> pa.RecordBatch:
    """Packed rows (:data:`_PACKED_DDL`); ``chunks`` are bytes or Arrow buffers."""
    sizes = np.fromiter((len(memoryview(c)) for c in chunks), dtype=np.int64, count=len(chunks))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    data = pa.py_buffer(b"".join(memoryview(c) for c in chunks))
    binary = pa.Array.from_buffers(pa.binary(), len(chunks), [None, pa.py_buffer(offsets), data])
    return pa.RecordBatch.from_arrays(
        [pa.array(parts, pa.int64()), pa.array(blocks, pa.int64()), binary],
        names=[PART_COLUMN, BLOCK_COLUMN, CHUNK_COLUMN],
    )


def _messages(values: pa.Array) -> list[pa.Buffer]:
    """The packed values of a binary column as buffers over its data (no copy), each copied
    only when it is not 8-byte aligned (Arrow's readers expect aligned buffers)."""
    wide = pa.types.is_large_binary(values.type)
    _, offsets_buffer, data = values.buffers()[:3]
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if wide else np.int32)
    offsets = offsets[values.offset : values.offset + len(values) + 1].tolist()
    out = []
    for lo, hi in itertools.pairwise(offsets):
        buffer = data.slice(lo, hi - lo)
        out.append(buffer if buffer.address % 8 == 0 else pa.py_buffer(buffer.to_pybytes()))
    return out


def block_runs(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(block, rows)`` runs of batches that carry the block column, in order."""
    for batch in batches:
        blocks = np.asarray(batch.column(BLOCK_COLUMN).to_numpy(zero_copy_only=False))
        starts = np.flatnonzero(np.diff(blocks)) + 1
        bounds = [0, *starts.tolist(), len(blocks)] if len(blocks) else []
        for lo, hi in itertools.pairwise(bounds):
            yield int(blocks[lo]), batch.slice(lo, hi - lo)


@dataclass(frozen=True)
class RoutedWriter:
    """``mapInArrow`` function: write the rows of a task's blocks, one block per file.

    The input is packed rows sorted by block (``packed``: the schema of
    :class:`Packer`'s messages): the messages of one block are gathered,
    ordered by ``order`` in Arrow and written before the next block's arrive,
    so a task holds one block's rows at a time (about one target file of
    Arrow data, twice while it is sorted) plus the batch Spark hands over
    (``spark.sql.execution.arrow.maxBytesPerBatch``, 64 MiB by default).
    Spark's sort of the packed rows spills to disk like any sort.
    :class:`LocalRewrite` calls :meth:`write` with runs it ordered itself.
    """

    spec: TaskWriter
    packed: pa.Schema | None = None
    order: BlockOrder = BlockOrder()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        timer = TaskTimer()
        yield from self.write(self.unpacked(batches, timer), partition, timer)
        if any(timer.seconds.values()):  # a task that wrote no file still reports its time
            yield _timings_row(timer)

    def unpacked(
        self, batches: Iterator[pa.RecordBatch], timer: TaskTimer
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Packed rows sorted by block -> each block's rows, ordered (``(block, rows)`` runs).

        Waiting for packed rows counts as ``shuffle``, decoding and ordering
        them as ``sort``; timings of routing tasks are added to ``timer``.
        """
        assert self.packed is not None
        current: int | None = None
        chunks: list[pa.RecordBatch] = []
        for batch in _timed(batches, timer, "shuffle"):
            started = time.perf_counter()
            blocks = batch.column(BLOCK_COLUMN).to_pylist()
            messages = _messages(batch.column(CHUNK_COLUMN))
            for block, message in zip(blocks, messages, strict=True):
                if block == TIMINGS_BLOCK:
                    for name, seconds in json.loads(message.to_pybytes()).items():
                        timer.seconds[name] = timer.seconds.get(name, 0.0) + float(seconds)
                    continue
                if block != current and chunks and current is not None:
                    timer.add("sort", started)
                    yield from self._ordered(current, chunks, timer)
                    chunks, started = [], time.perf_counter()
                current = block
                chunks.append(pa.ipc.read_record_batch(message, self.packed))
            timer.add("sort", started)
        if chunks and current is not None:
            yield from self._ordered(current, chunks, timer)

    def _ordered(
        self, block: int, chunks: list[pa.RecordBatch], timer: TaskTimer
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        started = time.perf_counter()
        # one chunk per routing batch that held the block: hundreds of chunks of a few rows
        # each when a layout has hundreds of blocks. Written as they come, every one pays the
        # writer's per-batch cost (conform, statistics of every column): a 3M-row, 300-block
        # Qd-tree rewrite spent 70 s there instead of 3 s. One copy of one block joins them.
        table = self.order.sort(pa.Table.from_batches(chunks, self.packed)).combine_chunks()
        chunks.clear()
        batches = table.to_batches(READ_BATCH_ROWS)
        del table
        timer.add("sort", started)
        for batch in batches:
            yield block, batch

    def write(
        self,
        runs: Iterator[tuple[int, pa.RecordBatch]],
        partition: int,
        timer: TaskTimer,
    ) -> Iterator[pa.RecordBatch]:
        """Write ``(block, rows)`` runs (a block's runs consecutive, rows in file order).

        One descriptor per file, with ``timer``'s seconds; producing the runs
        is timed by their producer.
        """
        roller = FileRoller(self.spec, partition)
        try:
            yield from self._write(roller, runs, timer)
        except Exception:
            roller.abort()  # the task fails: none of its files is committed
            raise

    def _write(
        self,
        roller: FileRoller,
        runs: Iterator[tuple[int, pa.RecordBatch]],
        timer: TaskTimer,
    ) -> Iterator[pa.RecordBatch]:
        names = self.spec.schema.names
        current: int | None = None
        done: list[pa.RecordBatch] = []
        for block, rows in runs:
            started = time.perf_counter()
            if current is not None and block != current and roller.has_open_file:
                done.append(_descriptor(roller, roller.finish(), current, timer))
            current = block
            data = pa.RecordBatch.from_arrays([rows.column(n) for n in names], names=list(names))
            done.extend(_descriptor(roller, f, block, timer) for f in roller.add(data))
            timer.add("write", started)
            yield from done
            done = []
        if roller.has_open_file and current is not None:
            started = time.perf_counter()
            finished = roller.finish()
            timer.add("write", started)
            yield _descriptor(roller, finished, current, timer)


def _timed(
    batches: Iterator[pa.RecordBatch], timer: TaskTimer, name: str
) -> Iterator[pa.RecordBatch]:
    """``batches``, the time spent waiting for each added to step ``name``."""
    while True:
        started = time.perf_counter()
        batch = next(batches, None)
        timer.add(name, started)
        if batch is None:
            return
        yield batch


def _timings_row(timer: TaskTimer) -> pa.RecordBatch:
    """A descriptor without a file: only the task seconds not reported yet."""
    seconds = {f"t_{name}": value for name, value in timer.take().items()}
    empty = dict.fromkeys(("path", "size", "rows", "stats", "partition", "block", "meta"))
    return pa.RecordBatch.from_pylist([{**empty, **seconds}], schema=_DESCRIPTOR_SCHEMA)


def _descriptor(
    roller: FileRoller, done: FinishedFile, block: int, timer: TaskTimer
) -> pa.RecordBatch:
    """One file's descriptor row: the file, its block, the index metadata ``roller``
    collected for it, and the task seconds spent since the last descriptor."""
    seconds = {f"t_{name}": value for name, value in timer.take().items()}
    row = {
        "path": done.path,
        "size": done.size,
        "rows": done.rows,
        "stats": done.stats,
        "partition": done.partition_json,
        "block": block,
        "meta": roller.metadata.pop(done.path, None),
        **seconds,
    }
    return pa.RecordBatch.from_pylist([row], schema=_DESCRIPTOR_SCHEMA)


@dataclass(frozen=True)
class LocalRewrite:
    """``mapInArrow`` over task ids: a rewrite of a small input without a shuffle.

    Task ``i`` (of ``parts``) reads every file through ``reader`` (routing
    every row), keeps the rows whose block goes to partition ``i`` (the same
    :func:`block_partitions` split the shuffle path uses), orders them by
    ``(block, key)`` (stable: without a key, rows of a block keep their read
    order) and writes them with :class:`RoutedWriter`. Every task holds its
    rows in Arrow memory, hence the size limit (:attr:`FileSource.small_bytes`).
    """

    reader: FileRouter
    writer: RoutedWriter
    files: tuple[DataFile, ...]
    parts: int
    #: files read and routed at once inside a task (cores the other tasks leave idle)
    threads: int = 1

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield from self._task(int(task))

    def _mine(self, files: Sequence[DataFile], task: int, timer: TaskTimer) -> list[pa.RecordBatch]:
        """The routed rows of ``files`` whose blocks belong to partition ``task``."""
        n_blocks = self.reader.router.n_blocks
        kept: list[pa.RecordBatch] = []
        for routed in self.reader.routed(files, timer):
            started = time.perf_counter()
            block = routed.column(BLOCK_COLUMN).to_numpy()
            mine = block_partitions(block, n_blocks, self.parts) == task
            if mine.all():
                kept.append(routed)
            elif mine.any():
                kept.append(routed.filter(pa.array(mine)))
            timer.add("route", started)
        return kept

    def _read(self, task: int, timer: TaskTimer) -> list[pa.RecordBatch]:
        """Every file's rows of partition ``task``, files read by up to ``threads`` threads.

        Decoding Parquet and computing curve keys (pyarrow, numpy) release the
        GIL, so threads use cores a one-task rewrite would leave idle.
        """
        threads = max(1, min(self.threads, len(self.files)))
        if threads == 1:
            return self._mine(self.files, task, timer)
        from concurrent.futures import ThreadPoolExecutor

        timers = [TaskTimer() for _ in self.files]
        with ThreadPoolExecutor(threads) as pool:
            parts = list(
                pool.map(lambda i: self._mine([self.files[i]], task, timers[i]), range(len(timers)))
            )
        for part_timer in timers:
            for name, seconds in part_timer.take().items():
                timer.seconds[name] += seconds
        return [batch for part in parts for batch in part]

    def _task(self, task: int) -> Iterator[pa.RecordBatch]:
        timer = TaskTimer()
        kept = self._read(task, timer)
        if not kept:
            return
        started = time.perf_counter()
        table = pa.Table.from_batches(kept).combine_chunks()
        del kept
        block_order = self.writer.order
        key = block_order.key(table)  # a rank is over all of this task's rows
        block = table.column(BLOCK_COLUMN).to_numpy()
        layout = self.reader.router.layout
        if key is None:
            order = np.argsort(block, kind="stable")
        elif block_order.rank_by is None and layout is not None and layout.key_orders_blocks:
            order = np.argsort(key, kind="stable")  # a curve's key orders its blocks too
        else:
            order = np.lexsort((key, block))
        ordered = table.take(pa.array(order))
        del table
        timer.add("sort", started)
        yield from self.writer.write(
            block_runs(iter(ordered.to_batches(READ_BATCH_ROWS))), task, timer
        )


def write_routed(
    source: DataFrame | FileSource,
    root: str,
    schema: pa.Schema,
    *,
    router: Router,
    n_blocks: int,
    target_file_size: int,
    order_by: Layout | None = None,
    prefix: str = "opt",
    fmt: TableFormat | None = None,
    clock: StepClock | None = None,
    row_group_bytes: int = ROW_GROUP_ARROW_BYTES,
    codec: str = DEFAULT_CODEC,
    indexes: Sequence[IndexSpec] = (),
) -> list[RoutedFile]:
    """Route, shuffle by block, sort, write; one :class:`RoutedFile` per file written.

    ``source`` is a DataFrame with the table's columns (plus ``__ll_file`` for
    routing by file) or a :class:`FileSource` the routing tasks read
    themselves. ``order_by`` (a layout whose key ranks the rows it is given: a
    linear layout) orders each block's rows by their rank among themselves,
    computed once all of the block's rows are together, instead of a routed key.

    On a partitioned table (``fmt``, or the source's format) rows of a block
    are also ordered by the partition columns and a file never holds two
    partitions: a block that spans partitions becomes one or more files per
    partition, each with its ``partitionValues``.
    A small :class:`FileSource` input is rewritten without a shuffle
    (:class:`LocalRewrite`). ``clock`` receives the task seconds per step.
    Row groups hold about ``row_group_bytes`` of Arrow data each: rows are in
    key order, so each row group covers a narrow key range Spark can skip.
    Files are compressed with ``codec`` (the table's ``lakelayout.parquetCodec``).
    ``indexes`` (the table's declared skipping indexes, bound) are collected
    by the writing tasks on the rows they write, as an append collects them;
    every file's values come back in ``WrittenFile.extra[INDEX_METADATA]``.
    """
    from pyspark.sql import functions as F

    spark = source.spark if isinstance(source, FileSource) else source.sparkSession
    parallelism = _parallelism(spark)
    if fmt is None:
        fmt = source.format if isinstance(source, FileSource) else TableFormat.plain(schema)
    spec = TaskWriter(
        root,
        schema,
        target_file_size,
        prefix,
        codec,
        indexes=tuple(indexes),
        row_group_bytes=row_group_bytes,
        format=fmt,
    )
    order = BlockOrder(
        use_key=router.layout is not None and router.use_sort_key,
        partition_columns=tuple(fmt.partition_columns),
        rank_by=order_by,
    )
    writer = RoutedWriter(spec, order=order)
    if isinstance(source, FileSource) and _is_small(source):
        # one stage: every task reads the (small) input and writes its own blocks
        parts = max(1, min(n_blocks, parallelism))
        router = dataclasses.replace(router, n_blocks=n_blocks)
        threads = max(1, parallelism // parts)
        local = LocalRewrite(FileRouter(router, fmt, ()), writer, source.files, parts, threads)
        tasks = spark.range(0, parts, 1, numPartitions=parts)
        return _collect(tasks.mapInArrow(local, _DESCRIPTOR_DDL), clock, bool(indexes))
    parts = max(1, min(n_blocks, parallelism * 4))
    router = dataclasses.replace(router, part_keys=partition_keys(parts), n_blocks=n_blocks)
    reader: FileRouter | None = None
    inputs: DataFrame = source  # type: ignore[assignment]
    if isinstance(source, FileSource):
        groups = tuple(tuple(g) for g in source.groups(parallelism * 2))
        inputs = spark.range(0, len(groups), 1, numPartitions=len(groups))
        reader = FileRouter(router, fmt, groups)
    # the rows of a block travel as Arrow messages; Spark sorts only (block, message)
    packed_schema = pa.schema([*schema, pa.field(KEY_COLUMN, pa.int64(), nullable=False)])
    packed = map_in_arrow(inputs, Packer(router, packed_schema, reader), _PACKED_DDL)
    shuffled = packed.repartition(parts, F.col(PART_COLUMN)).sortWithinPartitions(BLOCK_COLUMN)
    writer = dataclasses.replace(writer, packed=packed_schema)
    return _collect(shuffled.mapInArrow(writer, _DESCRIPTOR_DDL), clock, bool(indexes))


def _is_small(source: FileSource) -> bool:
    """Whether a rewrite takes the no-shuffle path: a small, unpartitioned input.

    Partitioned tables take the shuffle path, whose rows of a block are ordered by
    partition first.
    """
    nbytes = sum(f.size for f in source.files)
    return not rewrite_shuffles(nbytes, source.small_bytes, partitioned=source.format.partitioned)


def _collect(
    descriptors: DataFrame, clock: StepClock | None, with_indexes: bool
) -> list[RoutedFile]:
    """Run the rewrite job; its files (with their index metadata when ``with_indexes``),
    and its task seconds added to ``clock``."""
    from lakelayout.table.writer import decode_metadata, task_errors

    started = time.perf_counter()
    with task_errors():
        rows = descriptors.collect()
    if clock is not None:
        clock.add("rewrite", time.perf_counter() - started)
        for name in TASK_TIMERS:
            clock.add_task(name, sum(float(r[f"t_{name}"] or 0.0) for r in rows))
    return [
        RoutedFile(
            WrittenFile(
                path=r["path"],
                size=r["size"],
                num_records=r["rows"],
                stats_json=r["stats"],
                partition_values=json.loads(r["partition"] or "{}"),
                extra={INDEX_METADATA: decode_metadata(r["meta"])} if with_indexes else {},
            ),
            int(r["block"]),
        )
        for r in rows
        if r["path"] is not None  # a row of task seconds only
    ]


def _parallelism(spark: SparkSession) -> int:
    from lakelayout.table.session import default_parallelism  # classic and Spark Connect

    return default_parallelism(spark)
