"""Spark tasks that write Delta data files (Parquet + statistics) themselves.

Spark cannot write the Delta log here (no Delta jars), so lakelayout splits a
write in two: every Spark task writes Parquet files with pyarrow and returns
one *descriptor* per file (path, size, rows, Delta stats JSON); the driver
collects the descriptors and commits them in one Delta transaction
(:mod:`lakelayout.table.delta`). A task or job that fails before the commit
leaves only unreferenced files (orphans, removed by VACUUM), never a visible
change.

Inside a task (:class:`TaskWriter` / :class:`FileRoller`):

* batches are cast to the *table's* Arrow schema (Spark hands out
  ``large_string``, session-zone timestamps, ...), so every file matches the
  Delta schema exactly;
* the statistics collector sees the same in-memory batches the file gets, and
  so do the collectors of the table's declared skipping indexes (``collectors=``
  of :func:`write_files`): their per-file values travel back with the
  descriptor (one Arrow IPC row) and land in :attr:`WrittenFile.extra`
  under :data:`INDEX_METADATA`, so appended files are indexed without a second
  read. A collector that raises makes only that index's value unknown (null);
* files roll at ``target_file_size`` bytes. The size of Parquet bytes not yet
  written is predicted as ``arrow_nbytes x ratio``, where ``ratio`` (Parquet
  bytes per Arrow byte) is first measured by compressing a sample of the
  task's first batch in memory, then replaced after every finished file by
  that file's real ``size / arrow_nbytes``. Batches are sliced so a file stops
  as soon as the prediction reaches the target; the data of one file is
  buffered up to the row group size (table property ``lakelayout.rowGroupSize``,
  :data:`ROW_GROUP_ARROW_BYTES` of Arrow data by default) and then flushed as
  a row group, and the writer's stream position counts what is already on
  disk.

Files are written for Spark's reader to skip *inside* them: several row groups
per file, each with min/max statistics, and Parquet page indexes (column
index + offset index, ``write_page_index``), so a selective filter on a
column whose rows are sorted or clustered in the file reads only the row
groups and pages that may match. Pages are small (:data:`DATA_PAGE_BYTES`) and
so are dictionaries (:data:`DICTIONARY_PAGE_BYTES`): a high-cardinality column
falls back to plain encoding early instead of carrying a 1 MiB dictionary
page that every read of the chunk must fetch. FLOAT/DOUBLE columns get
neither statistics nor a column index (see :func:`statistics_columns`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout import errors
from lakelayout.errors import InvalidOption, LakelayoutError, SchemaMismatch
from lakelayout.stats.bounds import LAKELAYOUT_FILE_PREFIX
from lakelayout.table.collect import StatsCollector, stats_json
from lakelayout.table.datafile import (
    SPARK_VERSION_KEY,
    TableFormat,
    log_path,
    partition_directory,
    partition_runs,
    partition_values_map,
)
from lakelayout.table.files import INDEX_METADATA, WrittenFile
from lakelayout.table.location import normalize_uri, prepare_location, resolve_location
from lakelayout.table.schema import check_append_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

#: Spark DDL of the rows a writing task yields (one per file)
DESCRIPTOR_DDL = "path string, size long, rows long, stats string, partition string, meta binary"
#: Arrow bytes of one file buffered before they are flushed as a row group (the default of
#: ``lakelayout.rowGroupSize``): about 4-8 MB of Parquet, 10-30 row groups in a 128 MiB file,
#: so Spark's reader can skip most of a file whose rows are clustered on the filter's columns
ROW_GROUP_ARROW_BYTES = 16 * 1024 * 1024
#: table property: Arrow bytes per row group
ROW_GROUP_SIZE = "lakelayout.rowGroupSize"
#: encoded bytes per data page (parquet-cpp's default is 1 MiB): the unit the page index skips
DATA_PAGE_BYTES = 128 * 1024
#: largest dictionary page before a column chunk falls back to plain encoding (default 1 MiB).
#: A reader that needs one page of a chunk reads its dictionary page too, so a large
#: dictionary of a high-cardinality column costs as much as the skipping saves (bench B7)
DICTIONARY_PAGE_BYTES = 128 * 1024
#: rows of the in-memory sample compressed to guess the first file's ratio
CALIBRATION_ROWS = 16_384
#: the most Parquet bytes per Arrow byte assumed before a ratio is measured: while the
#: Arrow bytes of a file stay under ``target / UNCALIBRATED_RATIO`` the file cannot reach
#: its target and no sample is compressed (Parquet is rarely larger than Arrow, even for
#: incompressible data; only data more than twice as large in Parquet could overshoot)
UNCALIBRATED_RATIO = 2.0
#: table property: the Parquet codec of the files lakelayout writes (one of ``CODECS``)
PARQUET_CODEC = "lakelayout.parquetCodec"
#: Parquet codecs the writer accepts, the default first: zstd files are smaller than
#: Spark's default snappy (less to read on every later scan) and cost more CPU to write
CODECS = ("zstd", "snappy", "gzip", "none")
DEFAULT_CODEC = CODECS[0]


class MetadataCollector(Protocol):
    """What a writing task feeds: ``add`` every batch of one file, then ``result``."""

    def add(self, batch: pa.RecordBatch) -> None: ...

    def result(self) -> Any: ...


class IndexSpec(Protocol):
    """A declared skipping index as the writer sees it (see ``lakelayout.skipping.indexes``).

    The table layer sits below ``skipping``, so it only names this shape.
    """

    @property
    def name(self) -> str: ...

    @property
    def arrow_type(self) -> pa.DataType: ...

    def collector(self) -> MetadataCollector: ...


def encode_metadata(specs: Sequence[IndexSpec], values: Mapping[str, Any]) -> bytes:
    """One Arrow IPC row, a column per index (null where unknown or not encodable)."""
    arrays = []
    for spec in specs:
        try:
            arrays.append(pa.array([values.get(spec.name)], type=spec.arrow_type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            arrays.append(pa.nulls(1, spec.arrow_type))
    table = pa.table(arrays, names=[spec.name for spec in specs])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def decode_metadata(data: bytes | None) -> dict[str, Any]:
    """Index name -> value of one file, from :func:`encode_metadata` bytes."""
    if not data:
        return {}
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    return {name: table.column(name)[0].as_py() for name in table.column_names}


class _GuardedCollector:
    """An index collector whose failures make its value unknown instead of failing the task."""

    def __init__(self, spec: IndexSpec) -> None:
        self.failed = False
        try:
            self.inner: MetadataCollector | None = spec.collector()
        except Exception:
            self.inner, self.failed = None, True

    def add(self, batch: pa.RecordBatch) -> None:
        if self.failed or self.inner is None:
            return
        try:
            self.inner.add(batch)
        except Exception:
            self.failed = True

    def result(self) -> Any:
        if self.failed or self.inner is None:
            return None
        try:
            return self.inner.result()
        except Exception:
            return None


def collect_file_metadata(specs: Sequence[IndexSpec], batches: Iterable[pa.RecordBatch]) -> bytes:
    """Run every index collector over the batches of one file; :func:`encode_metadata` bytes."""
    guarded = [_GuardedCollector(spec) for spec in specs]
    for batch in batches:
        for collector in guarded:
            collector.add(batch)
    return encode_metadata(specs, {s.name: c.result() for s, c in zip(specs, guarded, strict=True)})


# --------------------------------------------------------------------------- schemas


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema a Delta table holding ``df`` has.

    Spark types map as Delta expects: strings to ``string``, timestamps to
    ``timestamp[us, tz=UTC]`` (Delta ``timestamp``: an instant), timestamp_ntz
    to ``timestamp[us]``, decimals to ``decimal128``, and nested types
    recursively. Types Delta cannot hold (intervals, variant, ...) raise
    :class:`~lakelayout.errors.SchemaMismatch` naming the column.
    """
    return spark_to_arrow_schema(df.schema)


def spark_to_arrow_schema(schema: StructType) -> pa.Schema:
    """:func:`arrow_schema_of` for a Spark ``StructType``."""
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for spark_field in schema.fields:
        if "variant" in spark_field.dataType.simpleString().lower().replace(" ", ""):
            _refuse_variant(spark_field)
        _refuse_collation(spark_field)
        try:
            arrow_type = to_arrow_type(spark_field.dataType, timezone="UTC")
        except Exception as exc:  # pyspark raises several types for unsupported types
            raise SchemaMismatch(
                f"column '{spark_field.name}' has type {spark_field.dataType.simpleString()}, "
                "which a Delta table written by lakelayout cannot hold"
            ) from exc
        fields.append(pa.field(spark_field.name, arrow_type, nullable=spark_field.nullable))
    return pa.schema(fields)


def _refuse_collation(spark_field: Any) -> None:
    """SchemaMismatch when ``spark_field``'s type holds a string with a collation other
    than byte order (``STRING COLLATE UTF8_LCASE``): Arrow has no collation, the column
    would silently compare byte by byte (an audit); Delta's connector refuses it too."""
    text = spark_field.dataType.simpleString()
    collations = re.findall(r"collate\s+([A-Za-z0-9_.]+)", text, flags=re.IGNORECASE)
    odd = sorted({c for c in collations if not c.upper().endswith("UTF8_BINARY")})
    if odd:
        raise SchemaMismatch(
            f"column '{spark_field.name}' has type {text}: a collation ({', '.join(odd)}) "
            "lakelayout cannot keep (it compares strings byte by byte); cast the column "
            "to STRING, and compare with COLLATE in a query where needed"
        )


def _refuse_variant(spark_field: Any) -> None:
    """SchemaMismatch when ``spark_field``'s type holds a VARIANT anywhere (pyspark maps it
    to a struct of two binaries: the column would silently be another type; an audit)."""
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    def holds(t: Any) -> bool:
        if isinstance(t, VariantType):
            return True
        if isinstance(t, StructType):
            return any(holds(f.dataType) for f in t.fields)
        if isinstance(t, ArrayType):
            return holds(t.elementType)
        if isinstance(t, MapType):
            return holds(t.keyType) or holds(t.valueType)
        return False

    if holds(spark_field.dataType):
        raise SchemaMismatch(
            f"column '{spark_field.name}' has type {spark_field.dataType.simpleString()}: "
            "lakelayout cannot write VARIANT values (it would store them as a struct)"
        )


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the table's exact field names and types (cast column by column).

    Columns are matched by position (the writer selects them in table order);
    casts are the lossless kind Spark needs (``large_string`` -> ``string``,
    a session time zone -> UTC, list/map child names).
    """
    if batch.num_columns != len(schema):
        raise SchemaMismatch(
            f"a batch has {batch.num_columns} columns, the table schema {len(schema)}"
        )
    for column, target in zip(batch.columns, schema, strict=True):
        if not target.nullable and column.null_count:
            raise SchemaMismatch(
                f"column '{target.name}' is NOT NULL in the table but the data holds NULL "
                "values in it; nothing was committed (filter or fill the NULLs first)"
            )
    columns = []
    for column, target in zip(batch.columns, schema, strict=True):
        try:
            columns.append(column if column.type == target.type else column.cast(target.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatch(
                f"column '{target.name}': cannot store {column.type} as {target.type}: {exc}"
            ) from exc
        if _nested_not_null(target.type):
            where = _null_where_not_allowed(columns[-1], target.type, target.name)
            if where is not None:
                raise SchemaMismatch(
                    f"{where} of column '{target.name}' is NOT NULL in the table but the data "
                    "holds NULL values in it; nothing was committed (filter or fill the "
                    "NULLs first)"
                )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _nested_not_null(dtype: pa.DataType) -> bool:
    """Whether a nested type declares a child NOT NULL (array elements, map values,
    struct fields, at any depth)."""
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        field_ = dtype.value_field
        return not field_.nullable or _nested_not_null(field_.type)
    if pa.types.is_map(dtype):
        return not dtype.item_field.nullable or _nested_not_null(dtype.item_field.type)
    if pa.types.is_struct(dtype):
        return any(not f.nullable or _nested_not_null(f.type) for f in dtype)
    return False


def _null_where_not_allowed(values: pa.Array, dtype: pa.DataType, path: str) -> str | None:
    """Where ``values`` (of ``dtype``) hold a NULL a NOT NULL child forbids (e.g.
    ``xs[]``), None when nowhere. Children of NULL parents do not count."""
    children: list[tuple[pa.Array, pa.Field, str]] = []
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        children.append((values.flatten(), dtype.value_field, f"{path}[]"))
    elif pa.types.is_map(dtype):  # the entries of the rows (``items`` ignores a slice)
        entries = pa.list_(pa.struct([dtype.key_field, dtype.item_field.with_nullable(True)]))
        flat = values.cast(entries).flatten()
        children.append((flat.field(1), dtype.item_field, f"{path}[value]"))
    elif pa.types.is_struct(dtype):
        present = values.is_valid()
        for i, field_ in enumerate(dtype):
            child = values.field(i).filter(present)
            children.append((child, field_, f"{path}.{field_.name}"))
    for child, field_, where in children:
        if not field_.nullable and child.null_count:
            return where
        inner = _null_where_not_allowed(child, field_.type, where)
        if inner is not None:
            return inner
    return None


# --------------------------------------------------------------------------- task side


@dataclass(frozen=True)
class FinishedFile:
    """A data file a task closed: log path, bytes, rows, Delta stats, ``partitionValues``."""

    path: str
    size: int
    rows: int
    stats: str
    partition_values: Mapping[str, str | None]

    @property
    def partition_json(self) -> str:
        return json.dumps(dict(self.partition_values))


class FileRoller:
    """Writes the batches of one task into files of about ``target`` bytes.

    On a partitioned table every file holds one partition: a batch is split
    into runs of equal partition values (:func:`partition_runs`) and a change
    of partition closes the open file. Files go to the partition's directory
    (``part=a/ll-...parquet``, as Delta writes them) and hold only the data
    columns, under their physical names; the statistics describe what the
    file holds (physical names, no partition columns), as Delta's do.
    """

    def __init__(self, spec: TaskWriter, partition_id: int) -> None:
        self.spec = spec
        self.format = spec.table_format
        self.filesystem, self.root = resolve_location(spec.table_uri)
        self.partition_id = partition_id
        self.file_index = 0
        self._reshapes = self.format.partitioned or self.format.column_mapping
        self.ratio: float | None = None
        #: path -> encoded index metadata of the files finished so far
        self.metadata: dict[str, bytes] = {}
        #: every file this roller opened (filesystem paths), for :meth:`abort`
        self.created: list[str] = []
        self._reset()

    def _reset(self) -> None:
        self.sink: Any = None
        self.writer: pq.ParquetWriter | None = None
        self.path = ""
        self.partition: tuple[str | None, ...] = ()
        self.rows = 0
        self.file_arrow_bytes = 0.0
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0.0
        self.collector: StatsCollector | None = None
        self.index_collectors: list[_GuardedCollector] = []

    def _estimated_size(self) -> float:
        written = self.sink.tell() if self.sink is not None else 0
        return float(written) + self.pending_bytes * (self.ratio or 1.0)

    def _may_fill(self, arrow_bytes: float) -> bool:
        """Whether the open file plus ``arrow_bytes`` more could reach the target size.

        Until it could, the ratio is not needed: a task whose rows make one small file
        (the common case of an insert or a small rewrite) compresses no sample.
        """
        held = self.file_arrow_bytes + arrow_bytes
        return held * UNCALIBRATED_RATIO >= self.spec.target_file_size

    def _calibrate(self, batch: pa.RecordBatch) -> float:
        """Parquet bytes per Arrow byte of a sample compressed in memory."""
        sample = batch.slice(0, CALIBRATION_ROWS)
        buffer = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_batches([sample]), buffer, compression=self.spec.codec)
        return max(buffer.tell() / max(sample.nbytes, 1), 1e-3)

    def add(self, batch: pa.RecordBatch) -> Iterator[FinishedFile]:
        """Write ``batch`` (table columns); yield every file it completes."""
        if batch.num_rows == 0:
            return
        batch = conform_batch(batch, self.spec.schema)
        for key, run in partition_runs(batch, self.format):
            if self.writer is not None and key != self.partition and self.rows > 0:
                yield self.finish()
            yield from self._add_run(run, key)

    def _add_run(
        self, batch: pa.RecordBatch, key: tuple[str | None, ...]
    ) -> Iterator[FinishedFile]:
        per_row = batch.nbytes / batch.num_rows
        if self.ratio is None and self._may_fill(batch.nbytes):
            self.ratio = self._calibrate(batch)
        offset = 0
        while offset < batch.num_rows:
            room = self.spec.target_file_size - self._estimated_size()
            ratio = self.ratio if self.ratio is not None else UNCALIBRATED_RATIO
            fit = math.floor(room / (per_row * ratio)) if room > 0 else 0
            if fit <= 0 and self.rows > 0:
                yield self.finish()
                continue
            # a row group never spans more than the row group size, however large the batch
            group_room = math.ceil(
                (self.spec.row_group_bytes - self.pending_bytes) / max(per_row, 1e-9)
            )
            take = min(batch.num_rows - offset, max(fit, 1), max(group_room, 1))
            self._append(batch.slice(offset, take), take * per_row, key)
            offset += take
            if take == fit:
                yield self.finish()

    def _append(
        self, part: pa.RecordBatch, arrow_bytes: float, key: tuple[str | None, ...]
    ) -> None:
        if self.writer is None:
            self._open(key)
        assert self.collector is not None
        stored = self.format.to_physical(part) if self._reshapes else part
        self.collector.add(stored)
        for index_collector in self.index_collectors:
            index_collector.add(part)
        self.pending.append(stored)
        self.pending_bytes += arrow_bytes
        self.file_arrow_bytes += arrow_bytes
        self.rows += part.num_rows
        if self.pending_bytes >= self.spec.row_group_bytes:
            self._flush()

    def _open(self, key: tuple[str | None, ...]) -> None:
        spec = self.spec
        name = (
            f"{LAKELAYOUT_FILE_PREFIX}{spec.prefix}-{self.partition_id:05d}-{uuid.uuid4()}"
            f"-c{self.file_index:03d}.{spec.codec}.parquet"
        )
        directory = partition_directory(self.format, key) if self.format.partitioned else ""
        relative = f"{directory}/{name}" if directory else name
        self.path = log_path(relative)
        self.created.append(f"{self.root}/{relative}")
        self.partition = key
        self.file_index += 1
        if directory:
            self.filesystem.create_dir(f"{self.root}/{directory}", recursive=True)
        self.sink = self.filesystem.open_output_stream(f"{self.root}/{relative}")
        schema = self.format.file_schema if self._reshapes else spec.schema
        filterable = statistics_columns(schema)
        self.writer = pq.ParquetWriter(
            self.sink,
            schema.with_metadata({**(schema.metadata or {}), **calendar_footer()}),
            compression=spec.codec,
            write_statistics=filterable,
            use_dictionary=filterable,
            write_page_index=True,
            data_page_size=DATA_PAGE_BYTES,
            dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES,
        )
        self.collector = StatsCollector(schema, string_prefix_length=32)
        self.index_collectors = [_GuardedCollector(index) for index in spec.indexes]

    def _flush(self) -> None:
        if self.pending and self.writer is not None:
            table = pa.Table.from_batches(self.pending)
            self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.pending = []
        self.pending_bytes = 0.0

    def finish(self) -> FinishedFile:
        """Close the open file; its descriptor."""
        assert self.writer is not None and self.collector is not None
        self._flush()
        self.writer.close()
        size = int(self.sink.tell())
        self.sink.close()
        self.ratio = max(size / max(self.file_arrow_bytes, 1.0), 1e-3)
        done = FinishedFile(
            path=self.path,
            size=size,
            rows=self.rows,
            stats=stats_json(self.collector.result()),
            partition_values=(
                partition_values_map(self.format, self.partition) if self.format.partitioned else {}
            ),
        )
        if self.spec.indexes:
            values = {
                index.name: collector.result()
                for index, collector in zip(self.spec.indexes, self.index_collectors, strict=True)
            }
            self.metadata[self.path] = encode_metadata(self.spec.indexes, values)
        self._reset()
        return done

    def abort(self) -> None:
        """After a failure: close the open file and delete every file this roller wrote
        (a failed task's files are in no commit; a partial one is not even Parquet)."""
        with contextlib.suppress(Exception):
            if self.writer is not None:
                self.writer.close()
        with contextlib.suppress(Exception):
            if self.sink is not None:
                self.sink.close()
        for path in self.created:
            with contextlib.suppress(Exception):
                self.filesystem.delete_file(path)
        self.created = []

    @property
    def has_open_file(self) -> bool:
        return self.writer is not None and self.rows > 0


@dataclass(frozen=True)
class TaskWriter:
    """The picklable function ``mapInArrow`` runs in every task."""

    table_uri: str
    schema: pa.Schema
    target_file_size: int
    prefix: str
    codec: str
    #: declared skipping indexes collected on the same batches (bound, picklable)
    indexes: tuple[IndexSpec, ...] = ()
    #: Arrow bytes buffered per row group
    row_group_bytes: int = ROW_GROUP_ARROW_BYTES
    #: partition columns and physical names (default: unpartitioned, no column mapping)
    format: TableFormat | None = None

    @property
    def table_format(self) -> TableFormat:
        return self.format if self.format is not None else TableFormat.plain(self.schema)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        roller = FileRoller(self, context.partitionId() if context is not None else 0)
        try:
            for batch in batches:
                for done in roller.add(batch):
                    yield _descriptor_batch(done, roller.metadata.pop(done.path, None))
            if roller.has_open_file:
                done = roller.finish()
                yield _descriptor_batch(done, roller.metadata.pop(done.path, None))
        except Exception:
            roller.abort()  # the task fails: none of its files is committed
            raise


_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("rows", pa.int64()),
        ("stats", pa.string()),
        ("partition", pa.string()),
        ("meta", pa.binary()),
    ]
)


def _descriptor_batch(done: FinishedFile, meta: bytes | None = None) -> pa.RecordBatch:
    row = {
        "path": done.path,
        "size": done.size,
        "rows": done.rows,
        "stats": done.stats,
        "partition": done.partition_json,
        "meta": meta,
    }
    return pa.RecordBatch.from_pylist([row], schema=_DESCRIPTOR_SCHEMA)


# --------------------------------------------------------------------------- driver side


@functools.cache
def calendar_footer() -> dict[bytes, bytes]:
    """The footer metadata of every file lakelayout writes: the installed pyspark's
    version under :data:`~lakelayout.table.datafile.SPARK_VERSION_KEY` (pyarrow writes
    proleptic Gregorian days and microseconds, as Spark 3.1 and later do).

    By it Spark's Parquet reader knows the file's dates and timestamps are proleptic
    Gregorian (:func:`~lakelayout.table.datafile.legacy_calendar`): without it Spark goes
    by the reading session's ``spark.sql.parquet.datetimeRebaseModeInRead``, and under
    LEGACY it moved the days before 1582 of every file lakelayout wrote (an audit: a
    DELETE wrote the rows it kept back moved, for good)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        spark = version("pyspark")
    except PackageNotFoundError:
        spark = "4.0.0"
    return {SPARK_VERSION_KEY: spark.encode()}


def _select_in_table_order(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """``df``'s columns in table order, renamed to the table's spelling."""

    names = list(df.columns)
    if names == schema.names:  # already so: no projection to build over py4j
        return df
    by_lower = {name.lower(): name for name in names}
    columns = []
    for name in schema.names:
        columns.append(spark_column(by_lower[name.lower()]).alias(name))
    return df.select(*columns)


def row_group_size(config: Mapping[str, str]) -> int:
    """``lakelayout.rowGroupSize`` of a table configuration (Arrow bytes per row group)."""
    raw = (config.get(ROW_GROUP_SIZE) or "").strip()
    if not raw:
        return ROW_GROUP_ARROW_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidOption(
            f"table property {ROW_GROUP_SIZE} must be a positive number of bytes, got {raw!r}"
        )
    return value


def parquet_codec(config: Mapping[str, str]) -> str:
    """``lakelayout.parquetCodec`` of a table configuration (zstd when unset).

    Every file lakelayout writes to the table uses it: appends, OPTIMIZE and
    layout rewrites, DELETE's rewritten files. Names are Spark's
    (``spark.sql.parquet.compression.codec``), case-insensitive.
    """
    raw = (config.get(PARQUET_CODEC) or "").strip()
    if not raw:
        return DEFAULT_CODEC
    if raw.lower() not in CODECS:
        raise InvalidOption(
            f"table property {PARQUET_CODEC} must be one of {list(CODECS)}, got {raw!r}"
        )
    return raw.lower()


def check_file_properties(config: Mapping[str, str]) -> None:
    """Refuse a bad ``lakelayout.rowGroupSize`` or ``lakelayout.parquetCodec`` (InvalidOption)."""
    row_group_size(config)
    parquet_codec(config)


@functools.lru_cache(maxsize=64)
def statistics_columns(schema: pa.Schema) -> list[str]:
    """The Parquet columns whose row-group statistics and dictionaries are written:
    all but FLOAT / DOUBLE.

    parquet-cpp leaves NaN out of a float column's min/max, but Spark's Parquet
    reader prunes row groups with them as if they bounded every value: a
    filter such as ``x >= 1`` (NaN is above every number in Spark) drops the
    row group holding 0.5 and NaN, and its NaN row with it. Its dictionary
    filter compares floats bit by bit: ``x = 0.0`` drops a row group whose
    dictionary holds only ``-0.0``, which SQL's ``=`` matches. lakelayout
    prunes with its own Delta statistics, which account for both, so neither
    is written for floating-point columns (they are plain-encoded).
    """
    buffer = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buffer)
    parquet = pq.ParquetFile(pa.BufferReader(buffer.getvalue())).schema
    return [
        parquet.column(i).path
        for i in range(len(parquet))
        if parquet.column(i).physical_type not in ("FLOAT", "DOUBLE")
    ]


_WORKER_ERROR = re.compile(r"lakelayout\.errors\.(\w+): ([^\n]*)")
#: a task's Python worker failing on the filesystem (a full disk: ``[Errno 28]``)
_WORKER_IO = re.compile(
    r"^(?:builtins\.)?(OSError|PermissionError|FileNotFoundError|IsADirectoryError|"
    r"NotADirectoryError|FileExistsError|pyarrow\.lib\.ArrowIOError): ([^\n]*)$",
    re.MULTILINE,
)
#: Spark's reader failing on a data file (truncated, overwritten, not Parquet)
_FAILED_READ = re.compile(
    r"\[FAILED_READ_FILE[.\w]*\][^\n]*?reading file (?P<file>\S+?)\.?(?:\s|$)"
)


@contextlib.contextmanager
def task_errors() -> Iterator[None]:
    """A LakelayoutError raised inside a Spark task surfaces on the driver as itself.

    Spark wraps it in a ``PythonException`` whose text holds the worker's
    traceback; the last ``lakelayout.errors.<Class>: message`` line there is
    raised again as that class, so callers (and the CLI) see a one-line error.
    Jobs run before any commit, so such a failure leaves the table as it was.
    Spark's own reader failing on a data file (``FAILED_READ_FILE``) is a
    :class:`~lakelayout.errors.TableCorrupt` naming the file; a worker's filesystem
    error (a full disk) a LakelayoutError with its last line (a raw worker traceback
    before; an audit).
    """
    try:
        yield
    except LakelayoutError:
        raise
    except Exception as exc:
        found = _WORKER_ERROR.findall(str(exc))
        unreadable = _FAILED_READ.search(str(exc))
        if not found and unreadable is not None:
            raise errors.TableCorrupt(
                f"data file {unreadable.group('file')} cannot be read by Spark (it is "
                "damaged or not Parquet); the Delta log lists it, nothing was written"
            ) from None
        failed_io = _WORKER_IO.findall(str(exc))
        if not found and failed_io:
            name, message = failed_io[-1]
            raise LakelayoutError(
                f"a Spark task could not write the table's files: {name}: {message.strip()}; "
                "nothing was committed"
            ) from None
        if not found:
            raise
        name, message = found[-1]
        kind = getattr(errors, name, None)
        if not (isinstance(kind, type) and issubclass(kind, LakelayoutError)):
            raise
        raise kind(message.strip()) from None


def write_files(
    df: DataFrame,
    table_uri: str,
    *,
    schema: pa.Schema,
    target_file_size: int,
    prefix: str = "part",
    codec: str = DEFAULT_CODEC,
    collectors: Sequence[IndexSpec] = (),
    fmt: TableFormat | None = None,
    row_group_bytes: int = ROW_GROUP_ARROW_BYTES,
) -> list[WrittenFile]:
    """Write ``df`` as Parquet data files under ``table_uri``; one descriptor per file.

    Nothing is committed: the caller passes the result to
    :func:`lakelayout.table.delta.commit` or :func:`~lakelayout.table.delta.create_table`.
    ``df`` must have the table's columns (names case-insensitive, any order, the
    same types); otherwise :class:`~lakelayout.errors.SchemaMismatch` is raised
    before any Spark job runs. Empty partitions write no file.

    ``collectors`` are bound skipping indexes: each task runs their collectors
    on the same batches it writes, and every file's values come back in
    ``WrittenFile.extra[INDEX_METADATA]`` (index name -> value, None = unknown).

    ``fmt`` (the table's :class:`TableFormat`) makes a partitioned write: the
    rows of each task are sorted by the partition columns, so a task writes
    one run of files per partition it holds, each with its
    ``partitionValues``; with column mapping, files use physical names.
    Row groups hold about ``row_group_bytes`` of Arrow data each.
    """
    check_append_schema(schema, arrow_schema_of(df))
    task = _task_writer(
        table_uri, schema, target_file_size, prefix, codec, collectors, fmt, row_group_bytes
    )
    ordered = _select_in_table_order(df, schema)
    if fmt is not None and fmt.partitioned:
        ordered = ordered.sortWithinPartitions(*[spark_column(c) for c in fmt.partition_columns])
    with task_errors():
        rows = map_in_arrow(ordered, task, DESCRIPTOR_DDL).collect()
    return _written(rows, task, bool(collectors))


def write_arrow(
    data: pa.Table,
    table_uri: str,
    *,
    schema: pa.Schema,
    target_file_size: int,
    prefix: str = "part",
    codec: str = DEFAULT_CODEC,
    collectors: Sequence[IndexSpec] = (),
    fmt: TableFormat | None = None,
    row_group_bytes: int = ROW_GROUP_ARROW_BYTES,
) -> list[WrittenFile]:
    """:func:`write_files` for rows already in Arrow in this process: no Spark job.

    The same writer a Spark task runs (:class:`TaskWriter`: files rolled at
    the target size, row groups, Delta statistics, index metadata, partition
    directories, physical names), called here on ``data``'s batches. For data
    that is already Arrow (pandas, polars, a Flight stream), where starting a
    Spark job would cost more than writing it, as delta-rs' ``write_deltalake``
    does. Columns match the table's case-insensitively, in any order; types
    must be the table's Delta types (:func:`arrow_data_schema` maps physical
    variants; values are cast only losslessly). Nothing is committed.
    """
    check_append_schema(schema, data.schema)
    task = _task_writer(
        table_uri, schema, target_file_size, prefix, codec, collectors, fmt, row_group_bytes
    )
    by_lower = {name.lower(): name for name in data.column_names}
    ordered = data.select([by_lower[n.lower()] for n in schema.names]).rename_columns(schema.names)
    # string, binary and list views become the table's type first (lossless): Arrow
    # neither sorts nor takes string views (a raw ArrowTypeError on a partitioned table,
    # an audit), and a list view reached the file writer as a list (a raw ArrowInvalid)
    for at, name in enumerate(ordered.column_names):
        column = ordered.column(name)
        if (
            fmt is not None
            and name in fmt.partition_columns
            and pa.types.is_dictionary(column.type)
        ):
            # Arrow sorts only a dictionary's values
            ordered = ordered.set_column(at, name, _decoded(column, schema.field(name).type))
        elif _has_view(column.type):
            try:
                ordered = ordered.set_column(at, name, _cast_view(column, schema.field(name).type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatch(
                    f"column '{name}': cannot store {column.type} as "
                    f"{schema.field(name).type}: {exc}"
                ) from exc
    if fmt is not None and fmt.partitioned:
        ordered = ordered.sort_by([(c, "ascending") for c in fmt.partition_columns])
    try:
        rows = [row for batch in task(iter(ordered.to_batches())) for row in batch.to_pylist()]
    except OSError as exc:  # a full disk (an audit: a raw OSError); VACUUM removes what was
        # written before it (no log names it)
        raise LakelayoutError(
            f"writing the table's files failed: {type(exc).__name__}: {exc}; nothing was committed"
        ) from exc
    return _written(rows, task, bool(collectors))


def arrow_data_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema a Delta table created from Arrow data of ``schema`` has.

    Physical variants map to what the table reads back as (``large_string``
    and string views to ``string``, large lists to lists), timestamps to
    microseconds (a zone to UTC: the same instants; ``timestamp_ntz`` without
    one). Unsigned integers are refused (Delta has none, and a signed type of
    the same width would not hold every value: cast them first), as is any
    type Delta cannot hold, naming the column.
    """
    from lakelayout.table.delta import delta_arrow_schema

    fields = []
    for f in schema:
        if _has_unsigned(f.type):
            raise SchemaMismatch(
                f"column '{f.name}' is {f.type}: Delta has no unsigned integers; cast it to a "
                "signed type wide enough for its values"
            )
        t = f.type
        if pa.types.is_timestamp(t):
            t = pa.timestamp("us", tz="UTC" if t.tz else None)
        fields.append(pa.field(f.name, t, f.nullable))
    return delta_arrow_schema(pa.schema(fields))


def _decoded(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """A dictionary-encoded column decoded to ``target`` (the dictionary is cast first:
    Arrow can neither cast nor take a dictionary of string views)."""
    return pa.chunked_array(
        [chunk.dictionary.cast(target).take(chunk.indices) for chunk in column.chunks], target
    )


def _cast_view(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """``column`` (holding views) cast to ``target``, checked. Arrow 26 casts a list view
    to a list into an invalid array (its offsets buffer one entry short), so a column
    holding a list view is rebuilt from its values instead (slower; list views are rare,
    string views common and cast)."""
    if _has_list_view(column.type):
        return pa.chunked_array(
            [pa.array(chunk.to_pylist(), type=target) for chunk in column.chunks], target
        )
    out = column.cast(target)
    out.validate(full=True)  # an invalid cast is an error here, not in the file writer
    return out


def _has_list_view(t: pa.DataType) -> bool:
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_list_view(t.value_type)
    return any(_has_list_view(t.field(i).type) for i in range(t.num_fields))


def _has_view(t: pa.DataType) -> bool:
    """Whether ``t`` is or holds a string, binary or list view."""
    views = (pa.types.is_string_view, pa.types.is_binary_view, pa.types.is_list_view)
    if any(is_view(t) for is_view in views) or pa.types.is_large_list_view(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_view(t.value_type)
    return any(_has_view(t.field(i).type) for i in range(t.num_fields))


def _has_unsigned(t: pa.DataType) -> bool:
    if pa.types.is_unsigned_integer(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_unsigned(t.value_type)
    return any(_has_unsigned(t.field(i).type) for i in range(t.num_fields))


def _task_writer(
    table_uri: str,
    schema: pa.Schema,
    target_file_size: int,
    prefix: str,
    codec: str,
    collectors: Sequence[IndexSpec],
    fmt: TableFormat | None,
    row_group_bytes: int,
) -> TaskWriter:
    """The writer of one write, after checking its options; the location is prepared."""
    if not isinstance(target_file_size, int) or target_file_size <= 0:
        raise InvalidOption(f"target_file_size must be a positive int, got {target_file_size!r}")
    if codec not in CODECS:
        raise InvalidOption(f"codec {codec!r} is not supported; use one of {list(CODECS)}")
    if not prefix or "/" in prefix:
        raise InvalidOption(f"file prefix {prefix!r} must be non-empty and contain no '/'")
    location = normalize_uri(table_uri)
    prepare_location(location)
    return TaskWriter(
        location,
        schema,
        target_file_size,
        prefix,
        codec,
        tuple(collectors),
        row_group_bytes=row_group_bytes,
        format=fmt,
    )


def _written(rows: Sequence[Any], task: TaskWriter, with_indexes: bool) -> list[WrittenFile]:
    """The descriptors the writer returned (Spark rows or dicts) as :class:`WrittenFile`."""
    written = [
        WrittenFile(
            path=row["path"],
            size=row["size"],
            num_records=row["rows"],
            stats_json=row["stats"],
            partition_values=json.loads(row["partition"] or "{}"),
            extra={INDEX_METADATA: decode_metadata(row["meta"])} if with_indexes else {},
        )
        for row in rows
    ]
    fmt = task.table_format
    if fmt.partitioned:
        _check_partition_nulls(written, fmt, task.table_uri)
    return written


def _check_partition_nulls(written: Sequence[WrittenFile], fmt: TableFormat, root: str) -> None:
    """SchemaMismatch (written files deleted, nothing committed) for a NULL partition value
    of a non-nullable column; an empty string is one too, as a partition stores it as NULL."""
    from lakelayout.table.datafile import file_location

    for f in fmt.partition_fields():
        if f.nullable:
            continue
        key = fmt.physical_name(f.name)
        bad = [w for w in written if w.partition_values.get(key) is None]
        if bad:
            filesystem, base = resolve_location(root)
            for w in written:
                with contextlib.suppress(OSError):
                    filesystem.delete_file(file_location(base, w.path))
            raise SchemaMismatch(
                f"column '{f.name}' is not nullable, but {sum(w.num_records for w in bad)} "
                "row(s) have NULL or an empty string there (a partition stores '' as NULL)"
            )


def map_in_arrow(df: DataFrame, fn: Callable[[Iterator[pa.RecordBatch]], Any], ddl: str) -> Any:
    """``df.mapInArrow(fn, ddl)`` for any column names.

    PySpark's ``mapInArrow`` references each column by its bare name, which Spark
    cannot parse when it holds a backtick or a dot (``[INVALID_ATTRIBUTE_NAME_SYNTAX]``
    for ``x`y``). Then the columns travel under positional names and ``fn`` gets
    its batches with the original names back.
    """
    names = list(df.columns)
    if not any("`" in name or "." in name for name in names):
        return df.mapInArrow(fn, ddl)
    safe = df.select(*[spark_column(n).alias(f"_ll_col{i}") for i, n in enumerate(names)])
    return safe.mapInArrow(_Renamed(fn, tuple(names)), ddl)


@dataclass(frozen=True)
class _Renamed:
    """A ``mapInArrow`` function seeing its batches under ``names`` (see :func:`map_in_arrow`)."""

    fn: Callable[[Iterator[pa.RecordBatch]], Any]
    names: tuple[str, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Any:
        names = list(self.names)
        return self.fn(pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches)


def spark_column(name: str) -> Any:
    """``F.col`` of a column named ``name`` exactly (dots, backticks and spaces quoted)."""
    from pyspark.sql import functions as F

    return F.col(f"`{name.replace('`', '``')}`")
