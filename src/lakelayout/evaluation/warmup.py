"""What the replay runs before the stream: the warm-up and the machine's reference times.

All policies of a replay share one JVM. Its first Spark jobs are slow (the
JIT has not compiled the Parquet reader, the shuffle, the writer yet): a
policy that ran first used to pay about twice the query time of the same
policy run last. :func:`warm_up` therefore runs, untimed, every path the
replay times — a create and an append, a rewrite (``optimize.zorder``,
indexes refreshed when declared), and the workload's queries through
``Table.scan`` — on a table of the first insert batches in arrival order.

Then, on that warm table and the staged data:

* :func:`measure_zero_file_scan` (spark mode): the per-query fixed overhead,
  the median time of ``Table.scan(sql).df.count()`` for a predicate that
  keeps zero files (snapshot, parse, pruning, an empty Spark job);
* :func:`measure_full_scan`: the median time of a few workload queries over
  every row with no skipping (prices logical costs and α).
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lakelayout.evaluation.datasets import Dataset
from lakelayout.evaluation.policies import aim_file_count, most_queried
from lakelayout.evaluation.tables import (
    INSERT_TARGET,
    ReplayConfig,
    prepare_table,
    timed,
    timed_scan,
)
from lakelayout.evaluation.workloads import Query
from lakelayout.expr.parse import parse_predicate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.api import Table

#: insert batches the warm-up table is built from (a create, then appends)
WARMUP_BATCHES = 2


def warm_up(
    spark: SparkSession,
    dataset: Dataset,
    workload: Sequence[Query],
    config: ReplayConfig,
    table_dir: Path,
    *,
    delta_connector: bool = False,
) -> tuple[dict[str, Any], Table]:
    """Run, untimed, a write, a rewrite and the workload's queries; a summary and the table.

    The table holds the first :data:`WARMUP_BATCHES` insert batches in arrival
    order (created, then appended, like a policy's table, with the dataset's
    UDFs and indexes). The rewrite Z-orders it on the workload's three most
    queried columns, one file per block, as ``zorder-halfway`` does. In spark
    mode every workload query then runs once through ``Table.scan``; in logical
    mode (queries are not Spark jobs there) only ``config.full_scans`` of them.

    ``delta_connector`` (a Delta Lake peer is replayed): Delta's own writer and
    OPTIMIZE run too, on a clustered copy of the same batches, so the peer does
    not pay their first, cold run either.
    """
    from lakelayout.api import Table

    started = time.perf_counter()
    if table_dir.exists():
        shutil.rmtree(table_dir)
    indexed = config.indexes and bool(dataset.indexes)
    batches = min(WARMUP_BATCHES, dataset.batches)
    table = Table.create(
        str(table_dir),
        dataset.batch(spark, 0, config.rows_per_file),
        spark=spark,
        target_file_size=INSERT_TARGET,
    )
    prepare_table(table, dataset, indexes=indexed)
    for k in range(1, batches):
        table.append(dataset.batch(spark, k, config.rows_per_file), target_file_size=INSERT_TARGET)
        if indexed:
            table.indexes.refresh()
    files = len(table.snapshot().files)
    columns = _rewrite_columns(table, dataset, workload)
    aim_file_count(table, files)
    rewrite = table.optimize.zorder(columns, one_file_per_block=True)
    if indexed:
        table.indexes.refresh()
    if delta_connector:
        _warm_delta_connector(
            spark, dataset, config, table_dir.with_name(table_dir.name + "-delta")
        )
    # spark mode: every query the stream times (all, or every ``time_every``-th)
    picks = (
        [q for q in workload if timed(q, config)]
        if config.mode == "spark"
        else _spread(workload, config.full_scans)
    )
    for q in picks:
        table.scan(q.sql).df.count()
    summary = {
        "batches": batches,
        "files": files,
        "rewrite": {"kind": "zorder", "columns": columns, "files_added": rewrite.files_added},
        "queries": len(picks),
        "seconds": time.perf_counter() - started,
    }
    return summary, table


def _warm_delta_connector(
    spark: SparkSession, dataset: Dataset, config: ReplayConfig, table_dir: Path
) -> None:
    """Delta's CREATE ... CLUSTER BY, an append and an OPTIMIZE on the first batches."""
    from lakelayout.evaluation import delta_oss

    if table_dir.exists():
        shutil.rmtree(table_dir)
    uri = str(table_dir.resolve())
    first = dataset.batch(spark, 0, config.rows_per_file)
    delta_oss.create_clustered(spark, uri, first, [dataset.time_column])
    for k in range(1, min(WARMUP_BATCHES, dataset.batches)):
        delta_oss.append(spark, uri, dataset.batch(spark, k, config.rows_per_file))
    delta_oss.optimize(spark, uri)
    shutil.rmtree(table_dir)


def _rewrite_columns(table: Table, dataset: Dataset, workload: Sequence[Query]) -> list[str]:
    """The workload's three most queried (clusterable) columns, else the time column."""
    snap = table.snapshot()
    functions = table.indexes.functions()
    tz = table.spark.conf.get("spark.sql.session.timeZone") or "UTC"
    parsed = [
        parse_predicate(q.sql, snap.schema, functions=functions, timezone=tz) for q in workload
    ]
    return most_queried(parsed, 3) or [dataset.time_column]


def _spread(queries: Sequence[Query], n: int) -> list[Query]:
    """``n`` queries spread evenly over the stream (the first and the last included)."""
    picks = np.linspace(0, len(queries) - 1, max(1, n)).astype(int)
    return [queries[int(i)] for i in picks]


def measure_zero_file_scan(table: Table, dataset: Dataset, scans: int) -> dict[str, Any] | None:
    """Median seconds of ``scans`` timed scans whose predicate keeps zero files.

    The predicate is ``<column> IS NULL`` on the first column (the time
    column first) whose statistics say no file holds a null, so pruning
    keeps nothing and Spark counts an empty relation: what every query pays
    whatever it reads (it leaves out launching tasks over files). One untimed
    scan first warms this path (the warm-up's queries all read files). None
    when no column qualifies.
    """
    from lakelayout.online_table import zero_file_predicate

    sql = zero_file_predicate(table, prefer=[dataset.time_column])
    if sql is None:
        return None
    samples = []
    for k in range(max(1, scans) + 1):
        seconds, rows, files = timed_scan(table, sql)
        if files or rows:
            raise AssertionError(f"{sql!r} kept {files} files and {rows} rows, expected none")
        if k:
            samples.append(seconds)
    return {
        "predicate": sql,
        "files_kept": 0,
        "table_files": len(table.snapshot().files),
        "seconds": statistics.median(samples),
        "samples": samples,
    }


def measure_full_scan(
    spark: SparkSession, dataset: Dataset, queries: Sequence[Query], n: int
) -> float:
    """Median seconds of ``n`` workload queries run over every row with no skipping."""
    from pyspark.sql import functions as F

    df = dataset.frame(spark)
    times = []
    for q in _spread(queries, n):
        started = time.perf_counter()
        df.where(F.expr(q.sql)).count()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
