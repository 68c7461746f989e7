"""Spark side of every rewrite: read live files, route rows to blocks, write, describe.

One mechanism serves compaction, curve clustering, :meth:`apply` and DELETE:

1. :class:`Router` (a ``mapInArrow`` function) adds two columns to every row:
   the *block* it belongs to and a *sort key* inside the block. The block comes
   from ``layout.assign`` (the layout library's vectorized code, run in the
   task) or, for compaction and DELETE, from the file the row was read from.
   The key is the layout's curve key (``sort_key``) or 0.
2. Rows are shuffled so that a block is never split across tasks
   (``repartition`` on the block id), then sorted by ``(block, key)`` inside
   each task.
3. :class:`RoutedWriter` writes the sorted rows with the table writer's file
   roller, closing a file whenever the block changes and rolling at the target
   file size inside a block. A file therefore holds one block (one contiguous
   key range), and a block larger than the target is cut into consecutive key
   ranges: no record cap ever mixes distant keys into one file (delta#1718).

Nothing here commits: the caller commits the returned descriptors.
"""

from __future__ import annotations

import itertools
import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import LakelayoutError
from lakelayout.layouts.base import Layout
from lakelayout.table.writer import FileRoller, TaskWriter, WrittenFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BLOCK_COLUMN = "__ll_block"
KEY_COLUMN = "__ll_key"
FILE_COLUMN = "__ll_file"
#: rows sampled from the rewritten files to fit ranks and key ranges
SAMPLE_ROWS = 50_000

_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("rows", pa.int64()),
        ("stats", pa.string()),
        ("block", pa.int64()),
    ]
)
_DESCRIPTOR_DDL = "path string, size long, rows long, stats string, block long"


@dataclass(frozen=True)
class RoutedFile:
    """A written file and the block its rows belong to."""

    file: WrittenFile
    block: int


# --------------------------------------------------------------------------- reading


def read_files(
    spark: SparkSession, root: str, paths: Sequence[str], schema: pa.Schema, *, with_file: bool
) -> DataFrame:
    """The rows of ``paths`` (table-relative) as a DataFrame with the table schema.

    With ``with_file`` a ``__ll_file`` column holds the table-relative path of
    the file each row came from.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if not paths:
        raise LakelayoutError("nothing to read: no files given")
    full = [os.path.join(root, p) for p in paths]
    df = spark.read.schema(from_arrow_schema(schema)).parquet(*full)
    if with_file:
        df = df.withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
    return df


def relative_path(file_uri: str, root: str) -> str:
    """Table-relative path of a file URI Spark reports in ``_metadata.file_path``."""
    parsed = urllib.parse.urlparse(file_uri)
    local = urllib.parse.unquote(parsed.path) if parsed.scheme in ("file", "") else file_uri
    return os.path.relpath(local, root)


def sample_rows(df: DataFrame, total_rows: int, *, rows: int = SAMPLE_ROWS) -> pa.Table:
    """About ``rows`` rows of ``df`` (all of them when it is small), as Arrow."""
    if total_rows <= rows:
        sample = df.toArrow()
    else:
        sample = df.sample(withReplacement=False, fraction=rows / total_rows, seed=17).toArrow()
        if sample.num_rows == 0:
            sample = df.limit(rows).toArrow()
    return sample


# --------------------------------------------------------------------------- routing


@dataclass(frozen=True)
class Router:
    """``mapInArrow`` function: append the block id and sort key of every row.

    Exactly one of ``layout`` (rows routed by ``layout.assign``) and
    ``file_blocks`` (table-relative path -> block, for per-file rewrites) is set.
    """

    names: tuple[str, ...]
    root: str
    layout: Layout | None = None
    file_blocks: Mapping[str, int] | None = None
    use_sort_key: bool = True

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            data = pa.RecordBatch.from_arrays(
                [batch.column(n) for n in self.names], names=list(self.names)
            )
            block, key = self._route(batch, data)
            yield pa.RecordBatch.from_arrays(
                [*data.columns, pa.array(block, pa.int64()), pa.array(key, pa.int64())],
                names=[*self.names, BLOCK_COLUMN, KEY_COLUMN],
            )

    def _route(self, batch: pa.RecordBatch, data: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        zeros = np.zeros(batch.num_rows, dtype=np.int64)
        if self.layout is not None:
            block = np.asarray(self.layout.assign(data), dtype=np.int64)
            key = self.layout.sort_key(data) if self.use_sort_key else None
            return block, (np.asarray(key, dtype=np.int64) if key is not None else zeros)
        assert self.file_blocks is not None
        files = batch.column(FILE_COLUMN).to_pylist()
        lookup = {u: self.file_blocks[relative_path(u, self.root)] for u in set(files)}
        return np.array([lookup[u] for u in files], dtype=np.int64), zeros


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class RoutedWriter:
    """``mapInArrow`` function: write ``(block, key)``-sorted rows, one block per file."""

    spec: TaskWriter

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        roller = FileRoller(self.spec, context.partitionId() if context is not None else 0)
        names = self.spec.schema.names
        current: int | None = None
        for batch in batches:
            blocks = np.asarray(batch.column(BLOCK_COLUMN).to_numpy(zero_copy_only=False))
            if len(blocks) == 0:
                continue
            starts = np.flatnonzero(np.diff(blocks)) + 1
            bounds = [0, *starts.tolist(), len(blocks)]
            for lo, hi in itertools.pairwise(bounds):
                block = int(blocks[lo])
                if current is not None and block != current and roller.has_open_file:
                    yield _descriptor(roller.finish(), current)
                current = block
                part = batch.slice(lo, hi - lo)
                data = pa.RecordBatch.from_arrays(
                    [part.column(n) for n in names], names=list(names)
                )
                for done in roller.add(data):
                    yield _descriptor(done, block)
        if roller.has_open_file and current is not None:
            yield _descriptor(roller.finish(), current)


def _descriptor(done: tuple[str, int, int, str], block: int) -> pa.RecordBatch:
    path, size, rows, stats = done
    return pa.RecordBatch.from_pylist(
        [{"path": path, "size": size, "rows": rows, "stats": stats, "block": block}],
        schema=_DESCRIPTOR_SCHEMA,
    )


def write_routed(
    df: DataFrame,
    root: str,
    schema: pa.Schema,
    *,
    router: Router,
    n_blocks: int,
    target_file_size: int,
    sort_columns: Sequence[Any] = (),
    prefix: str = "opt",
) -> list[RoutedFile]:
    """Route, shuffle by block, sort, write; one :class:`RoutedFile` per file written.

    ``sort_columns`` (Spark columns) replace the routed key as the order inside
    a block when given (a linear layout sorts by its dimensions themselves).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import LongType, StructField, StructType

    spark_schema = from_arrow_schema(schema)
    routed_schema = StructType(
        [
            *spark_schema.fields,
            StructField(BLOCK_COLUMN, LongType(), False),
            StructField(KEY_COLUMN, LongType(), False),
        ]
    )
    routed = df.mapInArrow(router, routed_schema)
    parts = max(1, min(n_blocks, _parallelism(df.sparkSession) * 4))
    order = [F.col(BLOCK_COLUMN), *sort_columns, F.col(KEY_COLUMN)]
    shuffled = routed.repartition(parts, F.col(BLOCK_COLUMN)).sortWithinPartitions(*order)
    spec = TaskWriter(root, schema, target_file_size, prefix, "zstd")
    rows = shuffled.mapInArrow(RoutedWriter(spec), _DESCRIPTOR_DDL).collect()
    return [
        RoutedFile(
            WrittenFile(
                path=r["path"], size=r["size"], num_records=r["rows"], stats_json=r["stats"]
            ),
            int(r["block"]),
        )
        for r in rows
    ]


def _parallelism(spark: SparkSession) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no sparkContext
        return 2
