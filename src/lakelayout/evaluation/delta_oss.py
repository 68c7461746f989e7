"""Delta Lake's own Spark connector as a peer: its writer, OPTIMIZE, ZORDER BY, liquid clustering.

The replay's peer policies (``delta-zorder``, ``delta-liquid``) and the
benches that set lakelayout's clustering against Delta OSS's go through these
few functions, so the peer is driven the same way everywhere:

* every statement runs through Delta's connector in the session
  (``spark_session()`` adds it when ``make jars`` fetched its jars), on the
  table's path (``delta.`/path```); :func:`require_connector` refuses a
  session without it before anything is written;
* Delta writes Parquet with the session's codec; the peers' writes use zstd
  like lakelayout's writer, so bytes compare layouts, not codecs
  (:data:`WRITE_CONF`);
* equal file counts: Delta's ZORDER BY and liquid clustering cut each bin
  into ``max(1, bin bytes // spark.databricks.delta.optimize.maxFileSize)``
  range partitions (``OptimizeExecutor.runOptimizeBinJob``), one file each,
  and a bin is a whole partition (ZORDER BY) or a ZCube of up to 150 GiB
  (clustering). :func:`optimize` sets ``maxFileSize`` to
  :func:`max_file_size_for` ``(table bytes, files)`` for the one statement,
  so a whole-table rewrite ends with ``files`` files;
* what an operation did is read from the log before and after
  (:func:`files_changed`): Delta's own metrics have no row counts.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.errors import EnvironmentProblem, InvalidOption

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.stats.model import FileStats

#: Delta's session setting for the output file size of OPTIMIZE (compaction, ZORDER, clustering)
MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
#: settings every peer write runs with: zstd Parquet, as lakelayout's writer
WRITE_CONF: Mapping[str, str] = {"spark.sql.parquet.compression.codec": "zstd"}
#: table property making Delta collect statistics on every column (default: the first 32)
STATS_COLUMNS = "delta.dataSkippingNumIndexedCols"


def require_connector(spark: SparkSession) -> None:
    """EnvironmentProblem unless Delta's SQL extension is in ``spark`` (checked before work)."""
    from lakelayout.table.session import DELTA_EXTENSION

    extensions = spark.conf.get("spark.sql.extensions", None) or ""
    if DELTA_EXTENSION not in extensions.split(","):
        raise EnvironmentProblem(
            "Delta Lake's Spark connector is not in this Spark session (no "
            f"{DELTA_EXTENSION} in spark.sql.extensions): run 'make jars' in the lakelayout "
            "checkout and start the session with spark_session(delta=True)"
        )


def table_ref(uri: str) -> str:
    """The SQL name of the Delta table at ``uri``: ``delta.`/path```, a relative local path
    made absolute.

    >>> table_ref("/tmp/t")
    'delta.`/tmp/t`'
    >>> table_ref("/tmp/odd`name")
    'delta.`/tmp/odd``name`'
    """
    return "delta.`" + absolute(uri).replace("`", "``") + "`"


def absolute(uri: str) -> str:
    """``uri`` with a relative local path made absolute against this process's folder.

    Delta reads ``delta.`...``` as a path only when it is absolute, and the
    JVM resolves a relative ``save(path)`` against its own working folder,
    which need not be Python's.
    """
    text = str(uri)
    if "://" in text or text.startswith("file:"):
        return text
    return os.path.abspath(text)


def quote(column: str) -> str:
    """A column name as a SQL identifier.

    >>> quote("l_shipdate"), quote("a`b")
    ('`l_shipdate`', '`a``b`')
    """
    return "`" + column.replace("`", "``") + "`"


def max_file_size_for(nbytes: int, files: int) -> int:
    """The ``maxFileSize`` with which Delta cuts ``nbytes`` into exactly ``files`` files.

    Delta makes ``max(1, nbytes // maxFileSize)`` range partitions of a bin;
    with ``maxFileSize = nbytes // files`` that is ``files`` whenever
    ``nbytes >= files * (files + 1)`` (any real table).

    >>> max_file_size_for(1_000_000, 184)
    5434
    >>> 1_000_000 // 5434
    184
    """
    if files < 1 or nbytes < 1:
        raise InvalidOption(
            f"max_file_size_for needs bytes >= 1 and files >= 1, got {nbytes}, {files}"
        )
    return max(1, nbytes // files)


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set Spark session settings for the duration of a block, then put the old values back."""
    old: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in old.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def create_clustered(
    spark: SparkSession,
    uri: str,
    df: DataFrame,
    columns: Sequence[str],
    *,
    properties: Mapping[str, str] | None = None,
) -> None:
    """``CREATE TABLE delta.`uri` USING delta CLUSTER BY (columns) AS SELECT ...`` from ``df``.

    Delta collects statistics on every column (:data:`STATS_COLUMNS` = -1), as
    lakelayout's writer does: clustering columns need them, and pruning then
    compares layouts on the same metadata.
    """
    require_connector(spark)
    if not columns:
        raise InvalidOption("Delta's CLUSTER BY needs at least one column")
    props = {STATS_COLUMNS: "-1", **(properties or {})}
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    view = f"_lakelayout_ctas_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        with session_conf(spark, WRITE_CONF):
            spark.sql(
                f"CREATE TABLE {table_ref(uri)} USING delta "
                f"CLUSTER BY ({', '.join(quote(c) for c in columns)}) "
                f"TBLPROPERTIES ({listed}) AS SELECT * FROM {quote(view)}"
            )
    finally:
        spark.catalog.dropTempView(view)


def append(spark: SparkSession, uri: str, df: DataFrame) -> None:
    """Append ``df`` with Delta's writer (one file per non-empty partition)."""
    require_connector(spark)
    with session_conf(spark, WRITE_CONF):
        df.write.format("delta").mode("append").save(absolute(uri))


def collect_stats_on_every_column(spark: SparkSession, uri: str) -> None:
    """``ALTER TABLE ... SET TBLPROPERTIES (delta.dataSkippingNumIndexedCols = -1)``.

    Delta's ZORDER BY refuses columns it collects no statistics on, and by
    default it collects them on the first 32 columns only.
    """
    require_connector(spark)
    spark.sql(f"ALTER TABLE {table_ref(uri)} SET TBLPROPERTIES ('{STATS_COLUMNS}' = '-1')")


def optimize(
    spark: SparkSession,
    uri: str,
    *,
    zorder_by: Sequence[str] | None = None,
    files: int | None = None,
) -> OptimizeMetrics:
    """Delta's ``OPTIMIZE`` (liquid clustering on a clustered table, else compaction), or
    ``OPTIMIZE ... ZORDER BY (zorder_by)``; what it did, read from the log.

    ``files``: aim a whole-table rewrite at that many files (``maxFileSize`` =
    table bytes // files for this statement only); None keeps Delta's setting.
    ``seconds`` of the result times the statement alone (not the log reads).
    """
    from lakelayout.table import delta

    require_connector(spark)
    before = delta.snapshot(uri).files
    settings = dict(WRITE_CONF)
    if files is not None:
        settings[MAX_FILE_SIZE_CONF] = str(max_file_size_for(max(before.total_bytes, 1), files))
    statement = f"OPTIMIZE {table_ref(uri)}"
    if zorder_by:
        statement += f" ZORDER BY ({', '.join(quote(c) for c in zorder_by)})"
    with session_conf(spark, settings):
        started = time.perf_counter()
        spark.sql(statement).collect()
        seconds = time.perf_counter() - started
    after = delta.snapshot(uri).files
    operation = "DELTA ZORDER" if zorder_by else "DELTA OPTIMIZE"
    return replace(files_changed(before, after, operation), seconds=seconds)


def files_changed(before: FileStats, after: FileStats, operation: str) -> OptimizeMetrics:
    """The files, bytes and rows an operation removed and added, from two snapshots."""
    old = {str(p) for p in before.paths}
    new = {str(p) for p in after.paths}
    added = np.array([str(p) not in old for p in after.paths], dtype=bool)
    removed = np.array([str(p) not in new for p in before.paths], dtype=bool)
    return OptimizeMetrics(
        operation=operation,
        files_removed=int(removed.sum()),
        files_added=int(added.sum()),
        bytes_removed=int(np.asarray(before.sizes)[removed].sum()),
        bytes_added=int(np.asarray(after.sizes)[added].sum()),
        rows_removed=int(np.maximum(np.asarray(before.num_records)[removed], 0).sum()),
        rows_added=int(np.maximum(np.asarray(after.num_records)[added], 0).sum()),
    )
