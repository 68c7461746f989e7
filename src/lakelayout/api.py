"""The user-facing :class:`Table`: one object per Delta table, verbs as methods.

``Table`` composes the layers below it: the Delta log and the Spark writer
(:mod:`lakelayout.table`), predicate parsing (:mod:`lakelayout.expr`) and the
scan planner (:func:`lakelayout.skipping.planner.plan`). Metadata-only work
(snapshots, :meth:`Table.plan`, describing) needs no Spark; writing and
scanning data runs Spark jobs on the session given, or on
:func:`spark_session` created on first use (and again after that session is
stopped: a notebook that restarts Spark keeps its tables). :meth:`Table.scan` is
:meth:`Table.plan` followed by a read of the kept files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout import arguments as args
from lakelayout.errors import (
    EnvironmentProblem,
    InvalidOption,
    LakelayoutError,
    PredicateError,
    SchemaMismatch,
    TableCorrupt,
    TableExists,
    UnsupportedTable,
    closest,
)
from lakelayout.expr.nodes import BoolConst, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.planner import MetadataSource, ScanPlan, on_current_columns, plan
from lakelayout.skipping.scan_report import Measured, ScanReport
from lakelayout.stats.bounds import LAKELAYOUT_FILE_PREFIX, stats_key
from lakelayout.stats.model import FileStats
from lakelayout.table import delta
from lakelayout.table.datafile import column_mapping_mode, raw_path
from lakelayout.table.features import Kind
from lakelayout.table.location import STATE_FOLDER, is_local, local_path, normalize_uri
from lakelayout.table.reader import FILE_COLUMN, spark_where
from lakelayout.table.schema import check_append_schema, stats_columns_property
from lakelayout.table.session import running_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.advisor.advisor import Advisor, AutoOptimizer
    from lakelayout.advisor.querylog import PendingRecord
    from lakelayout.cluster.detail import TableDetail
    from lakelayout.cluster.optimize import OptimizeHooks
    from lakelayout.cluster.optimize_metrics import OptimizeMetrics
    from lakelayout.cluster.vacuum import VacuumMetrics
    from lakelayout.indexing import Indexes
    from lakelayout.online_table import Online
    from lakelayout.skipping.indexes.base import Udf
    from lakelayout.table.conflicts import RetryPolicy
    from lakelayout.table.delta import Snapshot
    from lakelayout.table.files import WrittenFile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteMetrics:
    """What one write (create or append) committed."""

    version: int
    files_added: int
    rows_added: int
    bytes_added: int
    seconds: float
    #: times the commit was retried after losing a race (the files are written once)
    retries: int = 0


@dataclass(frozen=True)
class ScanResult:
    """A scan: the Spark DataFrame over the kept files, and its report.

    Spark runs ``df`` later, outside :meth:`Table.scan`; an action run through
    :meth:`count` or inside :meth:`timed` also puts what it took in the scan's
    query-log record (``run_seconds``), from which the advisor learns what a
    byte read costs on this table (docs/advisor.md).
    """

    df: DataFrame
    report: ScanReport
    predicate: Predicate
    #: the scan's query-log record while it is queued (None: logging is off)
    logged: PendingRecord | None = field(default=None, repr=False, compare=False)

    def count(self) -> int:
        """``df.count()``, timed into the query log (whose record then names the
        predicate's columns as the columns read: Spark reads no other for a count)."""
        if self.logged is None:
            return int(self.df.count())
        with self.logged.timed(columns=sorted(self.predicate.columns())):
            return int(self.df.count())

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Time the block (an action on ``df``) as this scan's run in the query log."""
        if self.logged is None:
            yield
        else:
            with self.logged.timed():
                yield


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
    #: rows a reader sees: over the files whose row count the log gives, less the rows
    #: their deletion vectors remove (as ``detail().rows`` and Spark's count)
    rows: int
    bytes: int
    smallest_file: int
    largest_file: int
    properties: dict[str, str]
    coverage: list[ColumnCoverage]
    history: list[dict[str, Any]] = field(default_factory=list)
    #: the partition columns; their coverage counts every file (the partition value in
    #: the log is each file's exact value, null included), not Parquet statistics
    partition_columns: list[str] = field(default_factory=list)


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
        where = "Table()"
        args.require_path(uri, "uri", where)
        args.require_spark(spark, "spark", where, optional=True)
        args.require_mapping(udfs, "udfs", where, optional=True)
        self.uri = normalize_uri(uri)
        delta.open_table(self.uri)  # raises TableNotFound early
        self._session = spark
        self._given = spark is not None
        self._udfs = dict(udfs or {})
        self._indexes: Indexes | None = None
        self._advisor: Advisor | None = None

    # ------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        uri: str,
        df: DataFrame | pa.Table | None = None,
        *,
        schema: pa.Schema | None = None,
        spark: SparkSession | None = None,
        target_file_size: int | None = None,
        properties: Mapping[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        cluster_by: Sequence[str] | None = None,
        auto_optimize: bool = False,
        partition_by: Sequence[str] | None = None,
    ) -> Table:
        """Create a Delta table at ``uri`` from a DataFrame, or empty from a schema.

        All files of ``df`` are committed in one transaction: version 0, or version 1
        when ``properties`` holds lakelayout's own (``lakelayout.*``), which version 0
        creates the empty table with (under column mapping, with ``cluster_by``, one
        more commit before the files records the columns' physical names).
        ``df`` may also be a ``pyarrow.Table`` (e.g. from pandas or polars): its
        rows are written in this process by the same writer Spark tasks run, with
        no Spark job (as delta-rs' ``write_deltalake`` does); the table's types
        are its Delta types (:func:`~lakelayout.table.writer.arrow_data_schema`:
        large strings as strings, timestamps in microseconds, no unsigned
        integers).
        ``cluster_by`` (at most 4 columns or deterministic expressions) makes it
        a liquid-clustered table: they are validated before anything is written
        and stored as ``lakelayout.clusteringColumns``; ``optimize.run()`` then
        clusters incrementally (see :mod:`lakelayout.cluster`).
        ``auto_optimize=True`` sets ``lakelayout.autoOptimize=true``: every append
        then asks the advisor whether a rewrite pays (:mod:`lakelayout.advisor`).

        ``partition_by`` makes a partitioned table, written as Delta writes one
        (``part=a/...parquet`` files without the partition columns, values in
        ``partitionValues``); the columns are checked first (they exist, are of
        an atomic type, are not all the columns, and the table is not also
        clustered, as Delta requires). An empty string partition value is
        stored as NULL, as every Delta reader reads it.
        """
        from lakelayout.table.datafile import TableFormat
        from lakelayout.table.writer import check_file_properties, parquet_codec, row_group_size

        where = "Table.create"
        args.require_path(uri, "uri", where)
        args.require_data(df, "df", where, optional=True)
        args.require_schema(schema, "schema", where, optional=True)
        args.require_spark(spark, "spark", where, optional=True)
        args.require_int(target_file_size, "target_file_size", where, optional=True)
        args.require_str_mapping(properties, "properties", where, optional=True)
        args.require_str(name, "name", where, optional=True)
        args.require_str(description, "description", where, optional=True)
        args.require_bool(auto_optimize, "auto_optimize", where)
        args.require_names(cluster_by, "cluster_by", where, optional=True)
        args.require_names(partition_by, "partition_by", where, optional=True)
        if (df is None) == (schema is None):
            raise InvalidOption("Table.create needs exactly one of df= or schema=")
        from lakelayout.cluster import config as cluster_config

        root = normalize_uri(uri)
        delta.ensure_new_location(root)  # no table, no stray files: before anything is written
        config = dict(properties or {})
        if target_file_size is not None:
            given = str(_check_target_size(target_file_size))
            _same_as_property(config, cluster_config.TARGET_FILE_SIZE, given, "target_file_size")
            config[cluster_config.TARGET_FILE_SIZE] = given
        table_schema = schema if schema is not None else _schema_of_data(df)  # type: ignore[arg-type]
        _check_table_schema(table_schema)
        partitions = check_partition_columns(partition_by, table_schema)
        if partitions and cluster_by is not None:
            raise InvalidOption(
                "a table cannot be both partitioned and clustered (Delta refuses "
                "PARTITIONED BY with CLUSTER BY); drop partition_by= or cluster_by="
            )
        # statistics are written for every column: make readers use them past the 32nd
        config = {**stats_columns_property(table_schema), **config}
        if cluster_by is not None:
            config.update(_clustering_config(cluster_by, table_schema))
        if auto_optimize:
            _same_as_property(config, "lakelayout.autoOptimize", "true", "auto_optimize=True")
            config["lakelayout.autoOptimize"] = "true"
        check_file_properties(config)  # an empty table too: its appends would fail
        cluster_config.check_properties(config)
        if cluster_by is None:  # clustering columns given as the property itself
            cluster_config.validate_clustering(
                cluster_config.parse_clustering(config), table_schema
            )
        if any(key.startswith("lakelayout.online") for key in config):
            from lakelayout.online_table import check_properties

            check_properties(config)
        if any(
            key.startswith(("lakelayout.queryLog.", "lakelayout.autoOptimize")) for key in config
        ):
            from lakelayout.advisor.advisor import check_properties as check_advisor_properties

            check_advisor_properties(config)
        mapping = column_mapping_mode(config)
        if mapping == "id":
            raise UnsupportedTable(
                "column mapping mode 'id' (columns matched by Parquet field id) is not "
                "supported: lakelayout writes and reads column mapping mode 'name'"
            )
        delta_props = {k: v for k, v in config.items() if k.startswith("delta.")}
        if delta_props:  # delta-rs checks them only when it commits: after the files
            delta.check_delta_properties(table_schema, delta_props)
        existed = is_local(root) and os.path.isdir(root)  # empty (checked above)
        session = spark if spark is not None else _session_of(df)
        create = functools.partial(
            delta.create_table, root, table_schema, name=name, description=description,
            configuration=config or None, partition_by=partitions,
        )  # fmt: skip
        # (lakelayout.targetFileSize 'abc' raised int()'s raw ValueError: an audit)
        size = _check_target_size(target_file_size or cluster_config.target_file_size(config))
        options = dict(
            target_file_size=size,
            row_group_bytes=row_group_size(config),
            codec=parquet_codec(config),
        )
        delta.claim_location(root, existed=existed)  # TableExists when another got here first
        written: list[WrittenFile] = []
        try:
            if df is None:
                create([])
                if mapping == "name":
                    _record_physical_clustering(root, session)
            elif mapping == "name":
                # the files hold the physical names delta-rs gives the columns when it
                # creates the table: first the empty table, then the files with its names
                create([])
                _record_physical_clustering(root, session)
                snap = delta.snapshot(root)
                written = _write(df, root, schema=snap.schema, fmt=snap.table_format, **options)
                delta.commit(root, adds=written, read_version=snap.version, operation="WRITE")
            else:
                fmt = TableFormat.plain(table_schema, partitions)
                written = _write(df, root, schema=table_schema, fmt=fmt, **options)
                create(written)
        except TableExists:
            # another writer (not a lakelayout create: those claim the location first)
            # committed a table here: it is theirs, only this create's files go
            _remove_written(root, [f.path for f in written])
            _release_claim(root)
            raise
        except BaseException:
            _remove_created(root, existed)
            raise
        delta.release_creator(root)
        table = cls(root, spark=session)
        table._given = spark is not None  # one picked up from df: followed as Table() does
        return table

    # ------------------------------------------------------------ metadata

    @property
    def spark(self) -> SparkSession:
        """The SparkSession this table runs its jobs on (created on first use)."""
        session = self._spark
        if session is None:
            from lakelayout.table.session import spark_session

            session = self._session = spark_session()
        return session

    @property
    def _spark(self) -> SparkSession | None:
        """The session in use, or None before one is needed. One this table picked up
        itself is dropped once it stops (a notebook restarted Spark: the table follows
        the new one; it failed with Spark's raw NullPointerException, an audit); one
        given to ``Table(spark=...)`` that stopped is an error naming it."""
        from lakelayout.table.session import session_stopped

        if self._session is None or not session_stopped(self._session):
            return self._session
        if self._given:
            raise EnvironmentProblem(
                f"the SparkSession given to Table({self.uri!r}, spark=...) has been stopped; "
                "open the table again with a running session (or without spark= to use "
                "the running one)"
            )
        self._session = None
        return None

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The live files and their statistics, at the latest or a given version."""
        args.require_int(version, "version", "Table.snapshot", optional=True)
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
        args.require_int(limit, "limit", "Table.history", optional=True)
        return delta.history(self.uri, limit)

    def describe(self, *, history: int = 10) -> TableDescription:
        """Files, sizes, rows, per-column statistics coverage and recent history."""
        args.require_int(history, "history", "Table.describe", low=0, high=args.MAX_COUNT)
        snap = self.snapshot()
        files = snap.files
        sizes = files.sizes
        coverage = []
        partitions = list(snap.table_format.partition_columns)
        for column in snap.schema:
            stats = files.columns.get(stats_key([column.name]))
            with_bounds = with_nulls = 0
            if column.name in partitions:
                with_bounds = with_nulls = len(files)
            elif stats is not None:
                known = np.asarray(stats.min.is_valid()) & np.asarray(stats.max.is_valid())
                with_bounds = int(known.sum())
                with_nulls = int((stats.null_count >= 0).sum())
            coverage.append(ColumnCoverage(column.name, str(column.type), with_bounds, with_nulls))
        return TableDescription(
            uri=self.uri,
            version=snap.version,
            schema=snap.schema,
            files=len(files),
            rows=int(files.total_rows) - snap.deleted_rows,
            bytes=int(files.total_bytes),
            smallest_file=int(sizes.min()) if len(files) else 0,
            largest_file=int(sizes.max()) if len(files) else 0,
            properties=dict(snap.configuration),
            coverage=coverage,
            history=self.history(history) if history > 0 else [],
            partition_columns=partitions,
        )

    # ------------------------------------------------------------ writing

    def append(
        self, df: DataFrame | pa.Table, *, target_file_size: int | None = None
    ) -> WriteMetrics:
        """Append the rows of ``df`` in one commit; the schema must match the table's.

        ``df`` is a Spark DataFrame, or a ``pyarrow.Table`` written in this
        process with no Spark job (see :meth:`create`).
        """
        from lakelayout.table.writer import parquet_codec, row_group_size

        args.require_data(df, "df", "Table.append")
        args.require_int(target_file_size, "target_file_size", "Table.append", optional=True)
        started = time.perf_counter()
        # the latest version without its files (an append reads no existing row): one load
        # of the log, reused by the commit
        snap = delta.head(self.uri)
        check_append_schema(snap.schema, _schema_of_data(df, table=snap.schema))
        # refuse before writing (Arrow data: no Spark session is started for the check; one
        # already running serves a commit that needs Delta's connector)
        spark = (self._spark or running_session()) if isinstance(df, pa.Table) else self.spark
        delta.check_commit(snap, Kind.APPEND, spark=spark)
        size = _check_target_size(target_file_size or self._target_file_size(snap))
        # skipping indexes: collected by the writer, stored after the commit (lakelayout.indexing)
        indexes = self.indexes.for_write(snap.schema)
        # this write's own file names: a write failing in its tasks leaves the files its
        # other tasks finished, found by the name (they waited for VACUUM: an audit)
        prefix = f"part-{uuid.uuid4().hex[:12]}"
        try:
            files = _write(
                df,
                self.uri,
                schema=snap.schema,
                target_file_size=size,
                collectors=indexes,
                fmt=snap.append_format,
                row_group_bytes=row_group_size(snap.configuration),
                codec=parquet_codec(snap.configuration),
                prefix=prefix,
            )
        except BaseException:
            _remove_named(self.uri, f"{LAKELAYOUT_FILE_PREFIX}{prefix}-")
            raise
        version, retries = self._commit_append(files, snap, spark) if files else (snap.version, 0)
        delta.release(snap)
        self.indexes.record_written(files, indexes, snap.table_format)
        metrics = WriteMetrics(
            version=version,
            files_added=len(files),
            rows_added=sum(f.num_records for f in files),
            bytes_added=sum(f.size for f in files),
            seconds=time.perf_counter() - started,
            retries=retries,
        )
        self._after_append(metrics, snap.configuration)
        return metrics

    def _commit_append(
        self, files: Sequence[WrittenFile], snap: delta.TableHead, spark: SparkSession | None
    ) -> tuple[int, int]:
        """Commit appended files; (version, retries).

        An append plans on no existing row, only on the schema: when its commit
        loses a race it re-checks the schema against the latest version and
        commits the same files again (bounded, with backoff; see
        :mod:`lakelayout.table.conflicts`). If it finally fails, the files it
        wrote are deleted and the table is unchanged.
        """
        from lakelayout.table.conflicts import run_with_retries

        def attempt(n: int) -> int:
            if n > 0:
                check_append_schema(delta.head(self.uri).schema, snap.schema)
            return delta.commit(
                self.uri,
                adds=files,
                read_version=snap.version,
                operation="WRITE",
                spark=spark,
                table=snap.table if n == 0 else None,
            )

        try:
            return run_with_retries(self.uri, "append", attempt)
        except LakelayoutError:
            _remove_written(self.uri, [f.path for f in files])
            raise

    # ------------------------------------------------------------ reading

    def plan(
        self,
        where: str | Predicate | None = None,
        *,
        version: int | None = None,
        snapshot: Snapshot | None = None,
        timezone: str | None = None,
    ) -> ScanPlan:
        """Which files a scan of ``where`` would read, and why the others are skipped.

        No Spark job runs: the planner (:func:`lakelayout.skipping.planner.plan`)
        combines the snapshot's statistics, every declared index with metadata
        and the logical indexes of the layouts the files were written by.
        ``where`` is Spark SQL text or an already bound predicate; ``snapshot``
        (of this table) saves reading the log again; ``timezone`` is the
        session time zone (default: the table's session's, else UTC, the zone
        :func:`spark_session` sets).
        """
        method = "Table.plan"
        if not isinstance(where, Predicate):
            args.require_str(where, "where", method, optional=True)
        args.require_int(version, "version", method, optional=True)
        args.require_str(timezone, "timezone", method, optional=True)
        snap = snapshot if snapshot is not None else self.snapshot(version)
        zone = timezone or self._timezone(start=False)
        bound = where if isinstance(where, Predicate) else self._bind(where, snap.schema, zone)
        return self._plan(bound, snap, zone)

    def scan(
        self,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        *,
        version: int | None = None,
        measure: bool = False,
    ) -> ScanResult:
        """Rows matching ``where`` (Spark SQL), reading only files that may hold them.

        :meth:`plan`, then a read of the kept files: ``res.df`` is a Spark
        DataFrame over them with the predicate applied by Spark itself, so
        results are exactly Spark's. ``res.report`` says how many files, bytes
        and rows existed and were kept; with ``measure=True`` a Spark job also
        counts the matching rows per file and the report carries σ, λ, μ and ψ.
        """
        from pyspark.sql import functions as F

        method = "Table.scan"
        args.require_str(where, "where", method, optional=True)
        args.require_names(columns, "columns", method, optional=True)
        args.require_int(version, "version", method, optional=True)
        args.require_bool(measure, "measure", method)
        zone = self._timezone(start=True)  # before the clock: starting Spark is not the scan's
        scan_started = time.perf_counter()
        snap = self.snapshot(version)
        from lakelayout.table.session import session_rules

        exact = session_rules(self._spark).case_sensitive
        select = _resolve_columns(columns, snap.schema, case_sensitive=exact)
        predicate = self._bind(where, snap.schema, zone)
        planned = self._plan(predicate, snap, zone)
        kept = planned.kept

        if where is not None:
            self._check_file_context(where, snap, kept, with_file=measure)
        df = self._read(snap, kept, with_file=measure)
        if where is not None:
            self.indexes.register_in_spark(self.spark)
            df = spark_where(df, where, analysed=predicate.has_opaque())
        measured = None
        if measure:
            measured = self._measure(df, snap, kept)
            df = df.drop(FILE_COLUMN)
        if select is not None:
            # quoted: a name with a dot or a backtick is one column (Spark read `a.b` as
            # field b of a, and refused it; found by an audit)
            df = df.select(*[F.col("`" + c.replace("`", "``") + "`") for c in select])
        report = ScanReport(
            predicate=where or "",
            version=snap.version,
            files_total=planned.files_total,
            files_kept=planned.files_kept,
            bytes_total=planned.bytes_total,
            bytes_kept=planned.bytes_kept,
            rows_total=planned.rows_total,
            rows_kept=planned.rows_kept,
            pruning_seconds=planned.seconds,
            skipped_by=planned.skipped_by,
            measured=measured,
            bytes_skipped_by=planned.bytes_skipped_by,
            unused_indexes=planned.unused,
        )
        result = ScanResult(df=df, report=report, predicate=predicate)
        logged = self._after_scan(
            snap, result, select, time.perf_counter() - scan_started, where, version
        )
        return dataclasses.replace(result, logged=logged) if logged is not None else result

    def to_df(self, *, version: int | None = None) -> DataFrame:
        """Every row of the table (at ``version``) as a Spark DataFrame."""
        args.require_int(version, "version", "Table.to_df", optional=True)
        snap = self.snapshot(version)
        return self._read(snap, snap.files)

    # ------------------------------------------------------------ clustering & OPTIMIZE
    # (lakelayout.cluster holds the logic; these are the Table-level verbs)

    @property
    def optimize(self) -> AutoOptimizer:
        """The OPTIMIZE namespace: ``run()``, ``compact()``, ``zorder()``, ``hilbert()``,
        ``apply()``, and ``auto()`` (only when the advisor finds that it pays)."""
        from lakelayout.advisor.advisor import AutoOptimizer

        return AutoOptimizer(self)

    @property
    def advisor(self) -> Advisor:
        """The workload advisor: ``features()``, ``recommend()``, ``auto()``, ``decisions()``."""
        if self._advisor is None:
            from lakelayout.advisor.advisor import Advisor

            self._advisor = Advisor(self)
        return self._advisor

    @property
    def clustering_columns(self) -> list[str] | None:
        """The liquid clustering columns/expressions, or None when not clustered."""
        from lakelayout.cluster import delta_liquid
        from lakelayout.cluster.config import table_clustering

        snap = self.snapshot()
        if delta_liquid.is_delta_clustered(snap):
            return delta_liquid.clustering_columns(snap, self.spark)
        return table_clustering(snap.configuration, snap.table_format)

    def cluster_by(self, columns: Sequence[str] | None) -> int:
        """ALTER TABLE CLUSTER BY (``columns``, at most 4 as Delta allows) or NONE
        (``None``); the new version.

        Only data not yet clustered by the new columns is clustered by them:
        files already clustered by older columns are left as they are.
        """
        from lakelayout.cluster import delta_liquid
        from lakelayout.cluster.config import clustering_properties, validate_clustering

        args.require_names(columns, "columns", "Table.cluster_by", optional=True)
        snap = self.snapshot()
        if delta_liquid.is_delta_clustered(snap):
            raise UnsupportedTable(
                f"'{self.uri}' is clustered by Delta's liquid clustering: change its clustering "
                "columns with Delta (ALTER TABLE ... CLUSTER BY); lakelayout follows them"
            )
        partitions = snap.table_format.partition_columns
        if partitions and columns is not None:
            raise InvalidOption(
                f"'{self.uri}' is partitioned by {list(partitions)}: a partitioned table cannot "
                "be clustered (Delta refuses CLUSTER BY on partitioned tables)"
            )
        checked = validate_clustering(columns, snap.schema)
        props = clustering_properties(checked, snap.table_format, snap.configuration)
        if all(snap.configuration.get(key, "") == value for key, value in props.items()):
            return snap.version
        return self._set_properties(props)

    def _set_properties(self, props: dict[str, str]) -> int:
        """Set table properties (:func:`delta.set_properties`), with this table's session
        where Delta's connector must commit them (started then if it was not yet)."""
        return delta.set_properties(self.uri, props, spark=self._properties_session())

    def _properties_session(self) -> SparkSession | None:
        """This table's session where properties must be committed by Delta's connector
        (UnsupportedTable when it cannot); else the session if one was started."""
        if delta.properties_need_connector(self.uri):
            delta.check_properties_committer(self.uri, self.spark)
            return self.spark
        return self._spark

    def detail(self) -> TableDetail:
        """DESCRIBE DETAIL: clustering columns, files, sizes, cubes (no Spark job)."""
        from lakelayout.cluster import delta_liquid
        from lakelayout.cluster.detail import detail

        clustered_by_delta = delta_liquid.is_delta_clustered(self.snapshot())
        return detail(self.uri, self.spark if clustered_by_delta else self._spark)

    def delete(
        self,
        where: str,
        *,
        hooks: OptimizeHooks | None = None,
        retry: RetryPolicy | None = None,
    ) -> OptimizeMetrics:
        """Delete rows where ``where`` (Spark SQL) is TRUE; only affected files are rewritten.

        A DELETE that loses a race to a rewrite that changed no data (OPTIMIZE)
        re-plans and retries (``retry``: attempts and backoff); ``retries`` in
        the metrics counts how often. See :mod:`lakelayout.table.conflicts`.
        """
        from lakelayout.cluster import OptimizeHooks
        from lakelayout.cluster.delete import delete
        from lakelayout.table.conflicts import DEFAULT_RETRY, RetryPolicy

        args.require_str(where, "where", "Table.delete")
        args.require_instance(hooks, OptimizeHooks, "hooks", "Table.delete", optional=True)
        args.require_instance(retry, RetryPolicy, "retry", "Table.delete", optional=True)
        return delete(
            self.uri,
            self.spark,
            where,
            hooks=hooks,
            retry=retry or DEFAULT_RETRY,
            indexes=self.indexes,
        )

    def vacuum(
        self, *, retain_hours: int | None = None, dry_run: bool = False, force: bool = False
    ) -> VacuumMetrics:
        """VACUUM: delete files no version inside the retention needs; what was deleted.

        Data files no longer referenced (removed by a commit older than the
        retention, or never committed and older than it: orphans of crashed
        writes) and lakelayout's dead sidecar files. ``retain_hours`` defaults
        to the table's ``delta.deletedFileRetentionDuration`` (Delta: 7 days);
        a shorter one is refused unless ``force=True``. ``dry_run`` deletes
        nothing and lists what a real run would delete. No Spark job.
        """
        from lakelayout.cluster.vacuum import vacuum

        args.require_bool(dry_run, "dry_run", "Table.vacuum")
        args.require_bool(force, "force", "Table.vacuum")
        return vacuum(self.uri, retain_hours=retain_hours, dry_run=dry_run, force=force)

    # ------------------------------------------------------------ skipping indexes
    # (lakelayout.indexing holds the logic)

    @property
    def indexes(self) -> Indexes:
        """Skipping indexes: ``add()``, ``drop()``, ``refresh()``, ``describe()``, ``list()``."""
        if self._indexes is None:
            from lakelayout.indexing import Indexes

            self._indexes = Indexes(self.uri, lambda: self.spark, udfs=self._udfs)
        return self._indexes

    # ------------------------------------------------------------ online reorganization
    # (lakelayout.online holds the algorithm, lakelayout.online_table the live loop)

    @property
    def online(self) -> Online:
        """OReO on this table: ``enable()``, ``status()``, ``history()``, ``disable()``."""
        from lakelayout.online_table import Online

        return Online(self)

    # ------------------------------------------------------------ internals

    def _after_scan(
        self,
        snap: Snapshot,
        result: ScanResult,
        columns: Sequence[str] | None,
        seconds: float,
        where: str | None,
        version: int | None,
    ) -> PendingRecord | None:
        """What follows every scan: its record in the query log (returned, None when not
        logged), and (for a scan of the latest version with a predicate) the online
        reorganizer's update.

        The query log never raises: a log that cannot be written must not fail
        the query. The reorganizer is a no-op unless ``online`` is enabled.
        """
        logged = self._log_scan(snap, result, columns, seconds)
        if where is not None and version is None:
            from lakelayout.online_table import after_scan

            after_scan(self, where, result.predicate, snap)
        return logged

    def _log_scan(
        self, snap: Snapshot, result: ScanResult, columns: Sequence[str] | None, seconds: float
    ) -> PendingRecord | None:
        try:
            from lakelayout.advisor import querylog

            session = self.spark.conf.get(querylog.SESSION_CONF, None)
            return querylog.log_scan(
                self.uri, snap.configuration, result.report, result.predicate, columns, seconds,
                session_value=session, table_id=snap.metadata.id if snap.metadata else None,
            )  # fmt: skip
        except Exception as exc:
            logger.warning("query log of %s: scan not recorded: %s", self.uri, exc)
            return None

    def _after_append(self, metrics: WriteMetrics, configuration: Mapping[str, str]) -> None:
        """Ask the advisor after a committed append (``lakelayout.autoOptimize``); it
        never raises, so the append stands whatever the advisor does."""
        try:
            from lakelayout.advisor.advisor import after_append

            after_append(self, metrics.files_added, configuration)
        except Exception as exc:
            logger.warning("advisor on %s after an append: %s", self.uri, exc)
        except KeyboardInterrupt as stop:
            # the user stops the process, not the append: it is committed, and whoever
            # reads the interruption must know so, or a retry appends the rows twice
            stop.add_note(
                f"the append to '{self.uri}' had committed as version {metrics.version} "
                "(do not append it again); the advisor's rewrite after it was interrupted"
            )
            raise

    def _bind(self, where: str | None, schema: pa.Schema, timezone: str | None = None) -> Predicate:
        if where is None:
            return BoolConst(True)
        from lakelayout.table.session import session_rules

        zone = timezone or self._timezone(start=True)
        functions = self.indexes.functions()  # st_within_box and registered UDFs
        return parse_predicate(
            where, schema, functions=functions, timezone=zone, session=session_rules(self._spark)
        )

    def _timezone(self, *, start: bool) -> str:
        """The session time zone; without a session (and ``start`` False) UTC, as spark_session sets."""
        if self._spark is None and not start:
            return "UTC"
        return str(self.spark.conf.get("spark.sql.session.timeZone") or "UTC")

    def _plan(self, predicate: Predicate, snap: Snapshot, timezone: str) -> ScanPlan:
        """The planner over ``snap`` with the declared indexes and the layouts' logical indexes."""
        from lakelayout.cluster.logical import layout_blocks

        started = time.perf_counter()
        indexes, unusable = self.indexes.usable(snap.schema, snap.table_format)
        metadata: MetadataSource = self.indexes.store
        layouts = layout_blocks(self.uri, snap.files, snap.schema, snap.table_format)
        if snap.table_format.column_mapping:  # a name may now be another column's
            metadata, layouts = on_current_columns(snap.files, indexes, metadata, layouts)
        planned = plan(
            predicate,
            snap.files,
            indexes=indexes,
            metadata=metadata,
            layouts=layouts,
            unused=unusable,
            timezone=timezone,
            partition_columns=snap.table_format.partition_columns,
        )
        return dataclasses.replace(planned, seconds=time.perf_counter() - started)

    def _read(self, snap: Snapshot, files: FileStats, *, with_file: bool = False) -> DataFrame:
        """The live rows of ``files`` of ``snap``; ``__ll_file`` holds each row's file."""
        from lakelayout.table.reader import read_table_files

        data = snap.data_files_for([str(p) for p in files.paths])
        try:
            # (with the bounds: a file in Spark's legacy calendar the read tasks would
            # refuse at the user's first action is refused now, naming it)
            return read_table_files(
                self.spark,
                self.uri,
                snap.table_format,
                data,
                with_file=with_file,
                bounds=files.columns,
            )
        except TableCorrupt as exc:
            latest = delta.snapshot(self.uri).version
            if snap.version >= latest:
                raise
            # an older version whose files VACUUM removed is not a corrupt table (an audit)
            raise TableCorrupt(
                f"version {snap.version} of '{self.uri}' can no longer be read: {exc}. "
                "VACUUM removes the files older versions need once the retention passes; "
                f"the latest version ({latest}) reads"
            ) from None

    def _check_file_context(
        self, where: str, snap: Snapshot, kept: FileStats, *, with_file: bool
    ) -> None:
        """PredicateError when ``where`` reads the file a row came from and the kept files
        are read by lakelayout's pyarrow tasks: Spark knows no input file there
        (``input_file_name()`` was '' and a scan returned other rows than Delta's)."""
        from lakelayout.table.reader import file_context_used, reads_with_spark
        from lakelayout.table.session import session_rules

        used = file_context_used(where, snap.schema.names, session_rules(self._spark))
        if used is None or not len(kept):
            return
        data = snap.data_files_for([str(p) for p in kept.paths])
        if not reads_with_spark(self.uri, snap.table_format, data, with_file=with_file):
            raise PredicateError(
                f"the predicate {where!r} reads {used}, the file a row was read from: "
                "lakelayout reads this table's rows with its own Arrow tasks (partition "
                "columns, column mapping, deletion vectors or an unusual path), where "
                "Spark knows no input file; filter on the file after the scan with "
                "spark.read.format('delta') instead"
            )

    def _measure(self, filtered: DataFrame, snap: Snapshot, kept: FileStats) -> Measured:
        """Count matching rows per kept file with one Spark job (a damaged data file is
        TableCorrupt naming it)."""
        from lakelayout.table.writer import task_errors

        with task_errors():
            rows = filtered.groupBy(FILE_COLUMN).count().collect()
        matching = {str(r[FILE_COLUMN]): int(r["count"]) for r in rows}
        relevant = [
            max(snap.live_rows(str(p)), 0) for p in kept.paths if matching.get(str(p), 0) > 0
        ]
        return Measured(
            rows_matching=sum(matching.values()),
            files_relevant=len(relevant),
            rows_in_relevant_files=sum(relevant),
        )

    def _target_file_size(self, snap: Snapshot | delta.TableHead) -> int:
        from lakelayout.cluster.config import target_file_size

        return target_file_size(snap.configuration)

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


def check_partition_columns(columns: Sequence[str] | None, schema: pa.Schema) -> tuple[str, ...]:
    """Partition columns in the table's spelling, or InvalidOption naming what Delta refuses."""
    from lakelayout.table.datafile import partitionable

    if columns is None:
        return ()
    if isinstance(columns, str):
        raise InvalidOption("partition_by= takes a list of column names, not a single string")
    by_lower = {name.lower(): name for name in schema.names}
    out: list[str] = []
    for name in columns:
        resolved = by_lower.get(str(name).lower())
        if resolved is None:
            hint = closest(str(name), schema.names)
            raise InvalidOption(f"partition column '{name}' is not in the table.{hint}".rstrip("."))
        if resolved in out:
            raise InvalidOption(f"partition column '{resolved}' is given twice")
        dtype = schema.field(resolved).type
        if not partitionable(dtype):
            raise InvalidOption(
                f"cannot partition by '{resolved}' of type {dtype}: partition columns must be "
                "string, boolean, integer, floating point, decimal, date or timestamp"
            )
        out.append(resolved)
    if out and len(out) == len(schema):
        raise InvalidOption(
            "cannot use all columns as partition columns (Delta needs at least one data column)"
        )
    return tuple(out)


def _record_physical_clustering(root: str, spark: SparkSession | None) -> None:
    """Under column mapping, record the physical names of the clustering columns of a table
    just created (delta-rs names the columns when it creates it, so one more commit), so
    that a later RENAME COLUMN by any writer is followed: without them a rename made every
    OPTIMIZE fail until ``cluster_by`` again. A table whose property commits need Delta's
    connector (a table-features protocol) gets them only with a session that has it."""
    from lakelayout.cluster import config as cluster_config

    snap = delta.snapshot(root)
    entries = cluster_config.parse_clustering(snap.configuration)
    if not entries:
        return
    props = cluster_config.clustering_properties(entries, snap.table_format, snap.configuration)
    physical = props.get(cluster_config.CLUSTERING_PHYSICAL_NAMES)
    if not physical:
        return
    with contextlib.suppress(UnsupportedTable):  # no connector: followed by name only
        delta.set_properties(
            root, {cluster_config.CLUSTERING_PHYSICAL_NAMES: physical}, spark=spark
        )


def _same_as_property(config: Mapping[str, str], key: str, value: str, argument: str) -> None:
    """InvalidOption when ``config`` gives the property ``key`` another value than the
    argument that sets it (``auto_optimize=True`` with ``lakelayout.autoOptimize=false``
    was taken, the property silently overridden; an audit)."""
    given = config.get(key)
    if given is not None and given.strip().lower() != value:
        raise InvalidOption(
            f"Table.create: {argument} and properties={{{key!r}: {given!r}}} disagree; "
            "give one of them"
        )


def _check_target_size(size: int) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1024:
        raise InvalidOption(
            f"target file size must be an integer number of bytes >= 1024, got {size!r}"
        )
    return size


def _resolve_columns(
    columns: Sequence[str] | None, schema: pa.Schema, *, case_sensitive: bool = False
) -> list[str] | None:
    """The table's names of ``columns``: found without case, as Spark finds them, or as
    spelt under ``spark.sql.caseSensitive=true`` (where Spark refuses another case)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        raise InvalidOption("columns= takes a list of column names, not a single string")
    if not columns:
        raise InvalidOption(
            "columns= is empty: name at least one column, or leave it out to read them all"
        )
    fold = str if case_sensitive else str.lower
    by_name = {fold(name): name for name in schema.names}
    out: list[str] = []
    for name in columns:
        resolved = by_name.get(fold(str(name)))
        if resolved is None:
            other = [n for n in schema.names if n.lower() == str(name).lower()]
            hint = (
                f" (spark.sql.caseSensitive is true: the column is spelt {other[0]!r})"
                if other
                else ";" + closest(str(name), schema.names)
            )
            raise PredicateError(f"unknown column '{name}' in columns{hint}".rstrip(";"))
        if resolved in out:
            raise InvalidOption(f"column '{resolved}' is named twice in columns=")
        out.append(resolved)
    return out


def _remove_written(root: str, paths: Sequence[str]) -> None:
    """Delete data files a failed write left (local tables; VACUUM collects the rest)."""
    if "://" in root:
        return
    for path in paths:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(root, raw_path(path)))  # log paths are URI-encoded


def _remove_named(root: str, start: str) -> None:
    """Delete the data files under ``root`` whose names begin with ``start`` (one write's
    own prefix), in partition folders too; local tables (VACUUM collects the rest)."""
    if not is_local(root):
        return
    for folder, subfolders, names in os.walk(local_path(root)):
        subfolders[:] = [d for d in subfolders if not d.startswith("_")]  # log, sidecars
        for name in names:
            if name.startswith(start):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))


def _check_table_schema(schema: pa.Schema) -> None:
    """Before anything is written: no two top-level columns whose names differ only in
    case (Delta's names are case-insensitive), and a Delta type for every column
    (SchemaMismatch naming it); delta-rs raised a bare Exception for both (an audit)."""
    from lakelayout.table.schema import RESERVED_PREFIX, duplicate_names, reserved_names

    reserved = reserved_names(schema.names)
    if reserved:
        raise SchemaMismatch(
            f"column {reserved[0]!r}: names starting with {RESERVED_PREFIX!r} are the columns "
            "lakelayout adds to rows while it reads and rewrites them; rename it"
        )
    repeated = duplicate_names(schema.names)
    if repeated:
        first = next(n for n in schema.names if n.lower() == repeated[0].lower())
        raise SchemaMismatch(
            f"columns {first!r} and {repeated[0]!r}: a Delta table's column names are "
            "case-insensitive, so they name one column; rename one"
        )
    delta.delta_arrow_schema(schema)


def _release_claim(root: str) -> None:
    """Remove the (empty) state folder :func:`delta.claim_location` made, if still empty."""
    delta.release_creator(root)
    if is_local(root):
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(local_path(root), STATE_FOLDER))


def _remove_created(root: str, existed: bool) -> None:
    """Delete what a failed :meth:`Table.create` left at ``root``: an empty or absent
    folder before (local tables; elsewhere the error names what to remove)."""
    import shutil

    if not is_local(root):
        logger.warning("Table.create of %s failed: remove what it left there", root)
        return
    if not existed:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in os.listdir(root):
        target = os.path.join(root, entry)
        if os.path.isdir(target):
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(target)


def _session_of(df: DataFrame | pa.Table | None) -> SparkSession | None:
    return None if df is None or isinstance(df, pa.Table) else df.sparkSession


def _schema_of_data(df: DataFrame | pa.Table, *, table: pa.Schema | None = None) -> pa.Schema:
    """The Arrow schema of the rows to write (Arrow data: as a Delta table holds it).

    Appending Arrow data to a table: columns with the table's types as Delta
    types are taken as they are (e.g. ``large_string`` into ``string``).
    """
    from lakelayout.table.writer import arrow_data_schema, arrow_schema_of

    if not isinstance(df, pa.Table):
        return arrow_schema_of(df)
    if table is not None:
        return df.schema
    return arrow_data_schema(df.schema)


def _write(df: DataFrame | pa.Table, uri: str, **options: Any) -> list[WrittenFile]:
    """Write ``df``'s rows as data files: Spark tasks for a DataFrame, this process for
    Arrow data (the same writer); nothing committed."""
    from lakelayout.table.writer import write_arrow, write_files

    if isinstance(df, pa.Table):
        return write_arrow(df, uri, **options)
    return write_files(df, uri, **options)
