"""The user-facing :class:`Table`: one object per Delta table, verbs as methods.

``Table`` composes the layers below it: the Delta log and the Spark writer
(:mod:`lakelayout.table`), predicate parsing (:mod:`lakelayout.expr`) and file
pruning (:mod:`lakelayout.skipping`). Metadata-only work (snapshots, pruning,
describing) needs no Spark; writing and scanning data runs Spark jobs on the
session given, or on :func:`spark_session` created on first use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.errors import InvalidOption, PredicateError, closest
from lakelayout.expr.nodes import BoolConst, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.report import Measured, ScanReport
from lakelayout.stats.model import FileStats
from lakelayout.table import delta
from lakelayout.table.location import file_uri_path, normalize_uri
from lakelayout.table.schema import check_append_schema, stats_columns_property

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.cluster.detail import TableDetail
    from lakelayout.cluster.metrics import OptimizeMetrics
    from lakelayout.cluster.optimize import OptimizeHooks, Optimizer
    from lakelayout.indexing import Indexes
    from lakelayout.skipping.indexes.base import Udf
    from lakelayout.table.delta import Snapshot

#: table property holding the target size of written files, in bytes
TARGET_FILE_SIZE = "lakelayout.targetFileSize"
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024


@dataclass(frozen=True)
class WriteMetrics:
    """What one write (create or append) committed."""

    version: int
    files_added: int
    rows_added: int
    bytes_added: int
    seconds: float


@dataclass(frozen=True)
class ScanResult:
    """A scan: the Spark DataFrame over the kept files, and its report."""

    df: DataFrame
    report: ScanReport
    predicate: Predicate


@dataclass(frozen=True)
class ColumnCoverage:
    """How many files carry each kind of statistic for one column."""

    name: str
    dtype: str
    files_with_min_max: int
    files_with_null_count: int


@dataclass(frozen=True)
class TableDescription:
    """``describe()``: files, sizes, rows, stats coverage and recent history."""

    uri: str
    version: int
    schema: pa.Schema
    files: int
    rows: int
    bytes: int
    smallest_file: int
    largest_file: int
    properties: dict[str, str]
    coverage: list[ColumnCoverage]
    history: list[dict[str, Any]] = field(default_factory=list)


class Table:
    """A Delta Lake table that lakelayout writes, prunes and (later) reorganizes.

    Open an existing table with ``Table(path)``; make a new one with
    :meth:`Table.create`.
    """

    def __init__(
        self,
        uri: str,
        *,
        spark: SparkSession | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        self.uri = normalize_uri(uri)
        delta.open_table(self.uri)  # raises TableNotFound early
        self._spark = spark
        self._udfs = dict(udfs or {})
        self._indexes: Indexes | None = None

    # ------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        uri: str,
        df: DataFrame | None = None,
        *,
        schema: pa.Schema | None = None,
        spark: SparkSession | None = None,
        target_file_size: int | None = None,
        properties: Mapping[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        cluster_by: Sequence[str] | None = None,
    ) -> Table:
        """Create a Delta table at ``uri`` from a DataFrame, or empty from a schema.

        All files of ``df`` are committed in one transaction (version 0).
        ``cluster_by`` (at most 4 columns or deterministic expressions) makes it
        a liquid-clustered table: they are validated before anything is written
        and stored as ``lakelayout.clusteringColumns``; ``optimize.run()`` then
        clusters incrementally (see :mod:`lakelayout.cluster`).
        """
        from lakelayout.table.writer import arrow_schema_of, write_files

        if (df is None) == (schema is None):
            raise InvalidOption("Table.create needs exactly one of df= or schema=")
        root = normalize_uri(uri)
        config = dict(properties or {})
        if target_file_size is not None:
            config[TARGET_FILE_SIZE] = str(_check_target_size(target_file_size))
        table_schema = schema if schema is not None else arrow_schema_of(df)  # type: ignore[arg-type]
        # statistics are written for every column: make readers use them past the 32nd
        config = {**stats_columns_property(table_schema), **config}
        if cluster_by is not None:
            config.update(_clustering_config(cluster_by, table_schema))
        files = []
        if df is not None:
            delta.ensure_absent(root)
            size = _check_target_size(
                target_file_size or int(config.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))
            )
            files = write_files(df, root, schema=table_schema, target_file_size=size)
        delta.create_table(
            root,
            table_schema,
            files,
            name=name,
            description=description,
            configuration=config or None,
        )
        return cls(root, spark=spark if spark is not None else _session_of(df))

    # ------------------------------------------------------------ metadata

    @property
    def spark(self) -> SparkSession:
        """The SparkSession this table runs its jobs on (created on first use)."""
        if self._spark is None:
            from lakelayout.table.session import spark_session

            self._spark = spark_session()
        return self._spark

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The live files and their statistics, at the latest or a given version."""
        return delta.snapshot(self.uri, version)

    @property
    def version(self) -> int:
        return self.snapshot().version

    @property
    def schema(self) -> pa.Schema:
        return self.snapshot().schema

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.snapshot().configuration)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Commits, newest first."""
        return delta.history(self.uri, limit)

    def describe(self, *, history: int = 10) -> TableDescription:
        """Files, sizes, rows, per-column statistics coverage and recent history."""
        snap = self.snapshot()
        files = snap.files
        sizes = files.sizes
        coverage = []
        for column in snap.schema:
            stats = files.columns.get(column.name)
            with_bounds = with_nulls = 0
            if stats is not None:
                known = np.asarray(stats.min.is_valid()) & np.asarray(stats.max.is_valid())
                with_bounds = int(known.sum())
                with_nulls = int((stats.null_count >= 0).sum())
            coverage.append(ColumnCoverage(column.name, str(column.type), with_bounds, with_nulls))
        return TableDescription(
            uri=self.uri,
            version=snap.version,
            schema=snap.schema,
            files=len(files),
            rows=int(files.total_rows),
            bytes=int(files.total_bytes),
            smallest_file=int(sizes.min()) if len(files) else 0,
            largest_file=int(sizes.max()) if len(files) else 0,
            properties=dict(snap.configuration),
            coverage=coverage,
            history=self.history(history) if history > 0 else [],
        )

    # ------------------------------------------------------------ writing

    def append(self, df: DataFrame, *, target_file_size: int | None = None) -> WriteMetrics:
        """Append the rows of ``df`` in one commit; the schema must match the table's."""
        from lakelayout.table.writer import arrow_schema_of, write_files

        started = time.perf_counter()
        snap = self.snapshot()
        check_append_schema(snap.schema, arrow_schema_of(df))
        df = _select_in_table_order(df, snap.schema)
        size = _check_target_size(target_file_size or self._target_file_size(snap))
        # skipping indexes: collected by the writer, stored after the commit (lakelayout.indexing)
        indexes = self.indexes.for_write(snap.schema)
        files = write_files(
            df, self.uri, schema=snap.schema, target_file_size=size, collectors=indexes
        )
        version = delta.commit(self.uri, adds=files, operation="WRITE") if files else snap.version
        self.indexes.record_written(files, indexes)
        return WriteMetrics(
            version=version,
            files_added=len(files),
            rows_added=sum(f.num_records for f in files),
            bytes_added=sum(f.size for f in files),
            seconds=time.perf_counter() - started,
        )

    # ------------------------------------------------------------ reading

    def scan(
        self,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        *,
        version: int | None = None,
        measure: bool = False,
    ) -> ScanResult:
        """Rows matching ``where`` (Spark SQL), reading only files that may hold them.

        ``res.df`` is a Spark DataFrame over the kept files with the predicate
        applied by Spark itself, so results are exactly Spark's. ``res.report``
        says how many files, bytes and rows existed and were kept; with
        ``measure=True`` a Spark job also counts the matching rows per file
        and the report carries σ, λ, μ and ψ.
        """
        snap = self.snapshot(version)
        select = _resolve_columns(columns, snap.schema)
        predicate = self._bind(where, snap.schema)

        started = time.perf_counter()
        pruned = self.indexes.prune(predicate, snap.files, snap.schema)  # min/max + indexes
        keep = pruned.keep
        pruning_seconds = time.perf_counter() - started
        kept = snap.files.take(keep)

        df = self._read(kept, snap.schema)
        if where is not None:
            from pyspark.sql import functions as F

            self.indexes.register_in_spark(self.spark)
            df = df.where(F.expr(where))
        measured = self._measure(df, kept) if measure else None
        if select is not None:
            df = df.select(*select)
        files = snap.files
        report = ScanReport(
            predicate=where or "",
            version=snap.version,
            files_total=len(files),
            files_kept=len(kept),
            bytes_total=int(files.total_bytes),
            bytes_kept=int(kept.total_bytes),
            rows_total=int(files.total_rows),
            rows_kept=int(kept.total_rows),
            pruning_seconds=pruning_seconds,
            skipped_by=pruned.skipped_by,
            measured=measured,
            bytes_skipped_by=pruned.bytes_skipped_by,
            unused_indexes=pruned.unused,
        )
        return ScanResult(df=df, report=report, predicate=predicate)

    def to_df(self, *, version: int | None = None) -> DataFrame:
        """Every row of the table (at ``version``) as a Spark DataFrame."""
        snap = self.snapshot(version)
        return self._read(snap.files, snap.schema)

    # ------------------------------------------------------------ clustering & OPTIMIZE
    # (lakelayout.cluster holds the logic; these are the Table-level verbs)

    @property
    def optimize(self) -> Optimizer:
        """The OPTIMIZE namespace: ``run()``, ``compact()``, ``zorder()``, ``hilbert()``, ``apply()``."""
        from lakelayout.cluster.optimize import Optimizer

        return Optimizer(self.uri, lambda: self.spark)

    @property
    def clustering_columns(self) -> list[str] | None:
        """The liquid clustering columns/expressions, or None when not clustered."""
        from lakelayout.cluster.config import parse_clustering

        return parse_clustering(self.snapshot().configuration)

    def cluster_by(self, columns: Sequence[str] | None, *, max_columns: int = 4) -> int:
        """ALTER TABLE CLUSTER BY (``columns``) or NONE (``None``); the new version.

        Only data not yet clustered by the new columns is clustered by them:
        files already clustered by older columns are left as they are.
        """
        from lakelayout.cluster.config import (
            CLUSTERING_COLUMNS,
            clustering_property,
            validate_clustering,
        )

        snap = self.snapshot()
        checked = validate_clustering(columns, snap.schema, max_columns=max_columns)
        value = clustering_property(checked)
        if snap.configuration.get(CLUSTERING_COLUMNS, "") == value:
            return snap.version
        return delta.set_properties(self.uri, {CLUSTERING_COLUMNS: value})

    def detail(self) -> TableDetail:
        """DESCRIBE DETAIL: clustering columns, files, sizes, cubes (no Spark job)."""
        from lakelayout.cluster.detail import detail

        return detail(self.uri)

    def delete(self, where: str, *, hooks: OptimizeHooks | None = None) -> OptimizeMetrics:
        """Delete rows where ``where`` (Spark SQL) is TRUE; only affected files are rewritten."""
        from lakelayout.cluster.delete import delete

        return delete(self.uri, self.spark, where, hooks=hooks)

    # ------------------------------------------------------------ skipping indexes
    # (lakelayout.indexing holds the logic)

    @property
    def indexes(self) -> Indexes:
        """Skipping indexes: ``add()``, ``drop()``, ``refresh()``, ``describe()``, ``list()``."""
        if self._indexes is None:
            from lakelayout.indexing import Indexes

            self._indexes = Indexes(self.uri, lambda: self.spark, udfs=self._udfs)
        return self._indexes

    # ------------------------------------------------------------ internals

    def _bind(self, where: str | None, schema: pa.Schema) -> Predicate:
        if where is None:
            return BoolConst(True)
        timezone = self.spark.conf.get("spark.sql.session.timeZone") or "UTC"
        functions = self.indexes.functions()  # st_within_box and registered UDFs
        return parse_predicate(where, schema, functions=functions, timezone=timezone)

    def _read(self, files: FileStats, schema: pa.Schema) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        spark_schema = from_arrow_schema(schema)
        if len(files) == 0:
            return self.spark.createDataFrame([], spark_schema)
        paths = [os.path.join(self.uri, str(p)) for p in files.paths]
        return self.spark.read.schema(spark_schema).parquet(*paths)

    def _measure(self, filtered: DataFrame, kept: FileStats) -> Measured:
        """Count matching rows per kept file with one Spark job."""
        from pyspark.sql import functions as F

        rows = (
            filtered.select(F.col("_metadata.file_path").alias("file"))
            .groupBy("file")
            .count()
            .collect()
        )
        matching = {file_uri_path(r["file"]): int(r["count"]) for r in rows}
        relevant = [
            int(n)
            for p, n in zip(kept.paths, kept.num_records, strict=True)
            if matching.get(os.path.join(self.uri, str(p)), 0) > 0
        ]
        return Measured(
            rows_matching=sum(matching.values()),
            files_relevant=len(relevant),
            rows_in_relevant_files=sum(relevant),
        )

    def _target_file_size(self, snap: Snapshot) -> int:
        raw = snap.configuration.get(TARGET_FILE_SIZE)
        return int(raw) if raw else DEFAULT_TARGET_FILE_SIZE

    def __repr__(self) -> str:
        return f"Table({self.uri!r})"


def _clustering_config(
    columns: Sequence[str] | None, schema: pa.Schema, *, max_columns: int = 4
) -> dict[str, str]:
    from lakelayout.cluster.config import (
        CLUSTERING_COLUMNS,
        clustering_property,
        validate_clustering,
    )

    checked = validate_clustering(columns, schema, max_columns=max_columns)
    return {CLUSTERING_COLUMNS: clustering_property(checked)}


def _check_target_size(size: int) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1024:
        raise InvalidOption(
            f"target file size must be an integer number of bytes >= 1024, got {size!r}"
        )
    return size


def _resolve_columns(columns: Sequence[str] | None, schema: pa.Schema) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str):
        raise InvalidOption("columns= takes a list of column names, not a single string")
    by_lower = {name.lower(): name for name in schema.names}
    out = []
    for name in columns:
        resolved = by_lower.get(str(name).lower())
        if resolved is None:
            raise PredicateError(
                f"unknown column '{name}' in columns;{closest(str(name), schema.names)}".rstrip(";")
            )
        out.append(resolved)
    return out


def _select_in_table_order(df: DataFrame, schema: pa.Schema) -> DataFrame:
    by_lower = {c.lower(): c for c in df.columns}
    return df.select(*[df[by_lower[name.lower()]].alias(name) for name in schema.names])


def _session_of(df: DataFrame | None) -> SparkSession | None:
    return None if df is None else df.sparkSession
