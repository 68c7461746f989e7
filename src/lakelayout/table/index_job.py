"""The Spark job that computes skipping-index metadata for existing data files.

One job over a DataFrame of file ids: each task reads the files it is given
as every reader does (:func:`lakelayout.table.datafile.read_data_file`:
partition values from the log, physical names mapped), but with every row the
file holds, those a deletion vector deletes too, only the columns the missing
indexes use, and runs their
collectors (:func:`lakelayout.table.writer.collect_file_metadata`, the same
code the writer runs on the batches it writes). The driver gets one row per
file back. An index's entry for a file is kept by the file's path, size and
modification time, which a deletion vector does not change: values over the
live rows alone would be wrong for the same file under an older deletion
vector (time travel, Delta's RESTORE), where more rows are live. Values over
every row hold under any of them (the live rows are always a subset).
:meth:`lakelayout.skipping.catalog.IndexCatalog.refresh` decides which files
and indexes need it and stores the result; indexes are taken as
they come (anything with a ``name`` and a ``collector()``), so this module
needs nothing from :mod:`lakelayout.skipping`.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.table.datafile import DataFile, TableFormat, read_data_file
from lakelayout.table.location import resolve_location
from lakelayout.table.session import default_parallelism
from lakelayout.table.writer import IndexSpec, collect_file_metadata, decode_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def collect_metadata(
    spark: SparkSession,
    uri: str,
    fmt: TableFormat,
    files: Mapping[str, DataFile],
    todo: Mapping[str, Sequence[str]],
    indexes: Sequence[IndexSpec],
    columns: Mapping[str, tuple[str, ...] | None],
) -> dict[str, dict[str, Any]]:
    """Metadata of ``todo``'s files (path -> index names), one Spark job; path -> name -> value.

    ``fmt`` and ``files`` (log path -> what the log says about it) say how the
    rows are read; ``columns`` maps an index name to the table columns it
    reads (None: every column).
    """
    jobs = [(files[path], tuple(needed)) for path, needed in todo.items()]
    task = _MetadataTask(uri, fmt, tuple(jobs), tuple(indexes), dict(columns))
    slices = max(1, min(len(jobs), default_parallelism(spark) * 2))
    rows = spark.range(0, len(jobs), 1, slices).mapInArrow(task, _TASK_DDL).collect()
    return {row["path"]: decode_metadata(row["meta"]) for row in rows}


_TASK_DDL = "path string, meta binary"
_TASK_SCHEMA = pa.schema([("path", pa.string()), ("meta", pa.binary())])


@dataclass(frozen=True)
class _MetadataTask:
    """``mapInArrow`` over file ids: open each file with pyarrow, run its missing collectors."""

    uri: str
    format: TableFormat
    jobs: tuple[tuple[DataFile, tuple[str, ...]], ...]
    indexes: tuple[IndexSpec, ...]
    columns: Mapping[str, tuple[str, ...] | None]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem, root = resolve_location(self.uri)
        by_name = {i.name: i for i in self.indexes}
        for batch in batches:
            for file_id in batch.column(0).to_pylist():
                file, needed = self.jobs[int(file_id)]
                specs = [by_name[n] for n in needed]
                # every row, deleted ones too: the entry must hold under any deletion vector
                whole = dataclasses.replace(file, deleted_rows=np.zeros(0, dtype=np.int64))
                data = read_data_file(
                    filesystem, root, self.format, whole, columns=self._columns(needed)
                )
                meta = collect_file_metadata(specs, data)
                yield pa.RecordBatch.from_pylist(
                    [{"path": file.path, "meta": meta}], schema=_TASK_SCHEMA
                )

    def _columns(self, needed: Sequence[str]) -> builtins.list[str] | None:
        out: set[str] = set()
        for name in needed:
            columns = self.columns.get(name)
            if columns is None:
                return None
            out.update(columns)
        return sorted(out) or None
