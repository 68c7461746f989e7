"""Reading a table's data files in Spark: the rows of a set of live files as a DataFrame.

:func:`read_table_files` is the one entry point every Spark-side read of table
data goes through (scans, ``to_df``, DELETE's matching job, samples for
fitting layouts). It honours what the log adds to each file
(:mod:`lakelayout.table.datafile`): partition values, deletion vectors,
column mapping, URI-encoded paths.

Two ways, same rows:

* **Spark's Parquet reader** when nothing needs the log: no partition
  columns, no column mapping, no deleted rows, file names that are their
  own URI form, and a location without glob characters (``[]{}*?\\``). This is the path of every table lakelayout writes without
  partitions, and it keeps Spark's vectorized reader and Parquet filter
  pushdown.
* **pyarrow in Spark tasks** otherwise: files are spread over tasks by size
  (largest first onto the lightest task), and each task reads its files with
  :func:`~lakelayout.table.datafile.read_data_file`, the same function the
  rewrite tasks of OPTIMIZE and DELETE use, so a scan and a rewrite can never
  disagree on the rows of a file.

With ``with_file`` a ``__ll_file`` column holds the log path of the file
each row came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakelayout.errors import TableCorrupt
from lakelayout.table.datafile import (
    DataFile,
    TableFormat,
    calendar_unsettled,
    check_file_calendar,
    file_location,
    is_plain_path,
    read_data_file,
)
from lakelayout.table.schema import check_reserved

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.expr.parse import SessionRules
    from lakelayout.stats.model import ColumnStats

#: column holding the log path of the file a row was read from
FILE_COLUMN = "__ll_file"


def needs_log(fmt: TableFormat, files: Sequence[DataFile]) -> bool:
    """Whether the rows of ``files`` differ from what Spark's Parquet reader returns."""
    return (
        fmt.partitioned
        or fmt.column_mapping
        or any(f.has_deletions or not is_plain_path(f.path) for f in files)
    )


def reads_with_spark(
    root: str, fmt: TableFormat, files: Sequence[DataFile], *, with_file: bool = False
) -> bool:
    """Whether :func:`read_table_files` reads ``files`` with Spark's Parquet reader; else
    lakelayout's pyarrow tasks (partition values, column mapping, deletion vectors, odd
    paths), where Spark knows no input file."""
    # a table column named _metadata hides Spark's file metadata column (an audit:
    # AnalysisException reading its file_name): such rows are read by the pyarrow tasks
    hidden = with_file and any(n.lower() == "_metadata" for n in fmt.schema.names)
    return not needs_log(fmt, files) and not any(c in _GLOB for c in root) and not hidden


#: Spark's functions of the file a row was read from, and its file metadata column
FILE_CONTEXT = ("input_file_name", "input_file_block_start", "input_file_block_length")


def file_context_used(
    where: str, columns: Sequence[str], rules: SessionRules | None = None
) -> str | None:
    """The first of Spark's file functions (:data:`FILE_CONTEXT`) or its ``_metadata``
    column that ``where`` reads, its tokens read as Spark's session reads them
    (``rules``: ``"input_file_name"()`` under double-quoted identifiers); a table column
    named ``_metadata`` is that column, and ``s._metadata`` a field. None when it reads
    none."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from lakelayout.expr.parse import spark_tokens

    lowered = where.lower()  # every scan asks: most predicates name none of them
    if "_metadata" not in lowered and "input_file" not in lowered:
        return None
    try:
        tokens = spark_tokens(where, rules)
    except TokenError:
        return None  # the predicate's own parse names the problem
    own = {c.lower() for c in columns}
    for at, token in enumerate(tokens):
        if token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
            continue
        if at > 0 and tokens[at - 1].token_type == TokenType.DOT:
            continue  # a field of a struct, not a column or a function
        name = token.text.lower()
        after = tokens[at + 1] if at + 1 < len(tokens) else None
        if after is not None and after.token_type == TokenType.L_PAREN and name in FILE_CONTEXT:
            return f"{name}()"
        if name == "_metadata" and name not in own:
            return name
    return None


def read_table_files(
    spark: SparkSession,
    root: str,
    fmt: TableFormat,
    files: Sequence[DataFile],
    *,
    with_file: bool = False,
    bounds: Mapping[str, ColumnStats] | None = None,
) -> DataFrame:
    """The live rows of ``files`` in the table's logical schema (see the module docstring).

    With ``bounds`` (the files' column statistics, in their order), a file the pyarrow
    tasks would refuse for its legacy calendar is refused here, when the DataFrame is
    made: a scan's returned DataFrame failed at the user's first action with a raw
    PythonException (:func:`_refuse_legacy_files`). Jobs lakelayout runs itself name
    such a file through :func:`~lakelayout.table.writer.task_errors` instead.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if with_file:
        check_reserved(fmt.schema.names, "reading rows with their file")
    schema = _output_schema(fmt.schema, with_file)
    if not files:
        # an empty Arrow table becomes a local relation Spark counts without a job
        # (from an empty list it builds an RDD: 2x the time of a zero-file scan)
        return spark.createDataFrame(schema.empty_table(), from_arrow_schema(schema))
    if reads_with_spark(root, fmt, files, with_file=with_file):
        from pyspark.errors import AnalysisException

        locations = [file_location(root, f.path) for f in files]
        try:
            df = (
                spark.read.schema(from_arrow_schema(fmt.schema))
                # a file without Spark's calendar keys in its footer (delta-rs, pyarrow,
                # lakelayout before it wrote them) holds proleptic Gregorian days as the
                # Delta protocol has them: read as stored, as the pyarrow tasks read it, and
                # not as the session's rebase mode says (under LEGACY a DELETE wrote the
                # rows it kept back moved by days; an audit); files Spark wrote in the
                # legacy calendar say so in their footer and are still rebased
                .option("datetimeRebaseMode", "CORRECTED")
                .option("int96RebaseMode", "CORRECTED")
                .parquet(*locations)
            )
        except AnalysisException as exc:
            if "PATH_NOT_FOUND" not in str(exc):
                raise
            raise TableCorrupt(
                f"a data file the Delta log of '{root}' lists is missing: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
        return df.withColumn(FILE_COLUMN, F.col("_metadata.file_name")) if with_file else df
    check_files_exist(root, [f.path for f in files])  # the tasks would fail with a raw error
    if bounds is not None:
        unsettled = calendar_unsettled(fmt, bounds, len(files))
        _refuse_legacy_files(root, fmt, [f for f, u in zip(files, unsettled, strict=True) if u])
    groups = spread(files, _parallelism(spark) * 2)
    tasks = spark.range(0, len(groups), 1, numPartitions=len(groups))
    reader = FileReader(root, fmt, tuple(tuple(g) for g in groups), with_file)
    return tasks.mapInArrow(reader, from_arrow_schema(schema))


#: characters Spark's Parquet reader takes for a glob in a path (Hadoop's GlobPattern):
#: a table whose location holds one (``/data/t[1]``) is read by the pyarrow tasks, as
#: Spark found no file there (found by an audit)
_GLOB = frozenset("[]{}*?\\")


def _refuse_legacy_files(root: str, fmt: TableFormat, files: Sequence[DataFile]) -> None:
    """UnsupportedTable, on the driver, for a file of ``files`` that the pyarrow tasks
    would refuse as they read it: dates or timestamps before 1900 written in Spark's
    legacy calendar (:func:`~lakelayout.table.datafile.check_file_calendar`).

    The caller passes only the files whose statistics leave that open
    (:func:`~lakelayout.table.datafile.calendar_unsettled`); the tasks' own check stays,
    for a read without statistics.
    """
    if not files:
        return
    from lakelayout.table.location import resolve_location

    filesystem, base = resolve_location(root)
    for file in files:
        check_file_calendar(filesystem, base, fmt, file)


def check_files_exist(root: str, paths: Sequence[str]) -> None:
    """TableCorrupt naming the files of ``paths`` (log paths of a local table) that are
    not on disk; nothing is checked on remote storage."""
    import os

    from lakelayout.table.location import is_local

    if not is_local(root):
        return
    missing = [p for p in paths if not os.path.exists(file_location(root, p))]
    if missing:
        raise TableCorrupt(
            f"{len(missing)} data file(s) the Delta log of '{root}' lists are missing "
            f"(e.g. {missing[0]})"
        )


def spark_where(df: DataFrame, where: str, *, analysed: bool = False) -> DataFrame:
    """``df.where(F.expr(where))``, with what Spark rejects in ``where`` raised here.

    lakelayout binds what it models and passes the rest through (an unknown
    function is an opaque filter that keeps every file), so text only Spark's
    analyser refuses — a function that does not exist, an aggregate or a window
    function in a row filter — reaches Spark. A classic session analyses a
    DataFrame as it is built; a Spark Connect one only at the first action, so
    there ``analysed=True`` asks for the schema now (one round trip: callers pass
    it when the bound predicate holds something lakelayout did not model). Either
    way the error is a :class:`~lakelayout.errors.PredicateError` naming the text
    and Spark's reason, before any job runs or anything is written.
    """
    from pyspark.errors import (
        AnalysisException,
        ArithmeticException,
        DateTimeException,
        NumberFormatException,
    )
    from pyspark.sql import functions as F

    from lakelayout.errors import PredicateError
    from lakelayout.table.session import is_connect

    try:
        filtered = df.where(F.expr(where))
        if analysed and is_connect(df.sparkSession):
            filtered.schema  # noqa: B018 (the analysis is the point)
    except (
        AnalysisException,
        ArithmeticException,
        DateTimeException,
        NumberFormatException,
    ) as exc:
        # (Spark's parser refuses a literal it cannot hold, a decimal of 39 digits, with an
        # ArithmeticException: it was raised raw; an audit)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # (Spark's suggestions listed lakelayout's own row-file column; an audit)
        reason = re.sub(rf",?\s*`{FILE_COLUMN}`", "", reason).replace("[, ", "[")
        raise PredicateError(f"Spark rejects the predicate {where!r}: {reason}") from None
    return filtered


def spread(files: Sequence[DataFile], tasks: int) -> list[list[DataFile]]:
    """``files`` cut into at most ``tasks`` groups of about equal bytes."""
    n = max(1, min(tasks, len(files)))
    loads = [0] * n
    groups: list[list[DataFile]] = [[] for _ in range(n)]
    for file in sorted(files, key=lambda f: (f.size, f.path), reverse=True):
        lightest = loads.index(min(loads))
        groups[lightest].append(file)
        loads[lightest] += max(file.size, 1)
    return [g for g in groups if g]


def _output_schema(schema: pa.Schema, with_file: bool) -> pa.Schema:
    return schema.append(pa.field(FILE_COLUMN, pa.string())) if with_file else schema


@dataclass(frozen=True)
class FileReader:
    """``mapInArrow`` function over task ids: task ``i`` reads ``groups[i]`` with pyarrow."""

    root: str
    format: TableFormat
    groups: tuple[tuple[DataFile, ...], ...]
    with_file: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lakelayout.table.location import resolve_location

        filesystem, root = resolve_location(self.root)
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for file in self.groups[int(task)]:
                    for data in read_data_file(filesystem, root, self.format, file):
                        yield with_file_column(data, file.path) if self.with_file else data


def with_file_column(data: pa.RecordBatch, path: str) -> pa.RecordBatch:
    """``data`` plus a ``__ll_file`` column holding ``path``."""
    location = pa.repeat(pa.scalar(path, pa.string()), data.num_rows)
    return pa.RecordBatch.from_arrays(
        [*data.columns, location], names=[*data.schema.names, FILE_COLUMN]
    )


def _parallelism(spark: SparkSession) -> int:
    from lakelayout.table.session import default_parallelism

    return default_parallelism(spark)
