"""Replay an ordered stream of insert batches and queries under layout policies.

The stream is ``insert 0, queries…, insert 1, queries…, …``: the workload is
cut into as many consecutive chunks as there are insert batches. Every policy
gets its own table built from the same batches, in the same process, on the
same data (thesis ch. 6, OReO §VI).

Two modes share everything but the queries:

* ``logical``: a query costs what the metadata says it must read. The files
  kept are those the table's own pruning keeps (min/max plus declared
  indexes, exactly what :meth:`Table.scan` keeps), with no Spark job;
* ``spark``: each query runs ``Table.scan(sql).df.count()``, timed.

Rewrites are real in both modes (Spark jobs, timed), so both modes see the
same files and report the same files-scanned counts.

A dataset may carry Python UDFs and skipping-index declarations
(:class:`~lakelayout.evaluation.datasets.Dataset`): the UDFs are registered on
every table and in Spark; the indexes (unless ``ReplayConfig.indexes`` is
false) are declared right after the first insert and refreshed after every
insert and rewrite (inside its timing), so both modes prune with them.

Matching rows per file (for σ, λ, μ) are counted on the driver with
:func:`lakelayout.expr.evaluate` over the live files, read once per file and
cached while they stay live; a UDF call is computed once per file with the
registered Python function and evaluated as a stand-in column.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout.cluster.metrics import OptimizeMetrics
from lakelayout.errors import InvalidOption
from lakelayout.evaluation.datasets import Dataset
from lakelayout.evaluation.metrics import (
    FILE_COUNT_TOLERANCE,
    SCHEMA_VERSION,
    InsertRecord,
    PolicyRun,
    QueryRecord,
    RewriteRecord,
    file_count_warnings,
)
from lakelayout.evaluation.policies import Policy
from lakelayout.evaluation.workloads import Query
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.nodes import Column, Expr, Func, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes.base import Udf, compute_term

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.api import Table

MODES = ("logical", "spark")


@dataclass(frozen=True)
class ReplayConfig:
    mode: str = "logical"
    rows_per_file: int = 10_000
    sample_rows: int = 50_000
    seed: int = 0
    #: full scans timed to price logical costs and α (median)
    full_scans: int = 3
    #: declare the dataset's skipping indexes on every table (False: min/max only)
    indexes: bool = True


@dataclass(frozen=True)
class Event:
    kind: str  # "insert" or "query"
    batch: int = -1
    query: Query | None = None


def stream(batches: int, queries: Sequence[Query]) -> list[Event]:
    """``insert k`` followed by the k-th of ``batches`` equal consecutive query chunks."""
    events: list[Event] = []
    bounds = np.linspace(0, len(queries), batches + 1).round().astype(int)
    for k in range(batches):
        events.append(Event("insert", batch=k))
        events += [Event("query", query=q) for q in queries[bounds[k] : bounds[k + 1]]]
    return events


class MatchCounter:
    """Matching rows per (live file, query), counted on the driver and cached per file.

    Files never change once written, so a file's counts stay valid while it
    is live; only the columns the queries read are loaded.
    """

    def __init__(
        self, root: str, columns: Sequence[str], udfs: Mapping[str, Udf] | None = None
    ) -> None:
        self.root = root
        self.columns = list(columns)
        #: Python UDFs the predicates may call: their values become extra columns
        self.udfs = {k.lower(): v for k, v in (udfs or {}).items()}
        self._data: dict[str, pa.Table] = {}

    def counts(self, paths: Sequence[str], predicate: Predicate) -> np.ndarray:
        """Matching rows in each of ``paths``."""
        calls = udf_calls(predicate, self.udfs)
        if calls:
            predicate = replace_terms(
                predicate, {sql: Column(name, call.dtype) for sql, (name, call) in calls.items()}
            )
        out = np.zeros(len(paths), dtype=np.int64)
        for j, path in enumerate(paths):
            data = self._with_udf_columns(path, calls)
            if data.num_rows:
                out[j] = int(np.count_nonzero(evaluate(predicate, data)))
        return out

    def _with_udf_columns(self, path: str, calls: Mapping[str, tuple[str, Func]]) -> pa.Table:
        """The file's columns plus one column per UDF call (computed once per file)."""
        data = self._load(path)
        for name, call in calls.values():
            if name not in data.column_names:
                data = data.append_column(name, compute_term(call, data, self.udfs))
        self._data[path] = data
        return data

    def forget_except(self, live: set[str]) -> None:
        for path in [p for p in self._data if p not in live]:
            del self._data[path]

    def _load(self, path: str) -> pa.Table:
        if path not in self._data:
            data = pq.read_table(os.path.join(self.root, path), columns=self.columns)
            self._data[path] = _plain_strings(data)
        return self._data[path]


def udf_calls(predicate: Predicate, udfs: Mapping[str, Udf]) -> dict[str, tuple[str, Func]]:
    """Calls of ``udfs`` in ``predicate``: canonical SQL -> (stand-in column name, call)."""
    out: dict[str, tuple[str, Func]] = {}
    stack: list[Expr] = [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, Func) and node.name in udfs:
            out.setdefault(node.sql(), (f"__udf:{node.sql()}", node))
            continue
        stack.extend(node.children())
    return out


def replace_terms(node: Expr, by_sql: Mapping[str, Expr]) -> Any:
    """``node`` with every sub-expression whose canonical SQL is in ``by_sql`` replaced
    (the expression nodes are frozen dataclasses: rebuilt with ``dataclasses.replace``)."""
    if not isinstance(node, Predicate) and node.sql() in by_sql:
        return by_sql[node.sql()]
    if not dataclasses.is_dataclass(node):
        return node
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Expr):
            new: Any = replace_terms(value, by_sql)
        elif isinstance(value, tuple) and value and all(isinstance(v, Expr) for v in value):
            new = tuple(replace_terms(v, by_sql) for v in value)
        else:
            continue
        if new != value:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _plain_strings(data: pa.Table) -> pa.Table:
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in data.schema
    ]
    return data.cast(pa.schema(fields))


@dataclass
class ReplayContext:
    """The :class:`~lakelayout.evaluation.policies.Context` a policy sees."""

    spark: SparkSession
    dataset: Dataset
    workload: Sequence[Query]
    config: ReplayConfig
    blocks_per_batch: int
    full_scan_seconds: float
    position: int = 0
    seen: list[Query] = field(default_factory=list)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    #: files added by the inserts so far (what equal-file-count policies aim at)
    files_inserted: int = 0
    _table: Table | None = None
    _sample: pa.Table | None = None
    _schema: pa.Schema | None = None
    _parsed: dict[int, Predicate] = field(default_factory=dict)

    @property
    def table(self) -> Table:
        assert self._table is not None, "the first insert creates the table"
        return self._table

    @property
    def queries_total(self) -> int:
        return len(self.workload)

    @property
    def time_column(self) -> str:
        return self.dataset.time_column

    def sample(self) -> pa.Table:
        if self._sample is None:
            self._sample = self.dataset.sample(
                self.spark, self.config.sample_rows, seed=self.config.seed
            )
        return self._sample

    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = self.sample().schema
        return self._schema

    def predicates(self, queries: Sequence[Query]) -> list[Predicate]:
        out = []
        for q in queries:
            if q.i not in self._parsed:
                self._parsed[q.i] = parse_predicate(q.sql, self.schema(), timezone=_tz(self.spark))
            out.append(self._parsed[q.i])
        return out

    @property
    def indexed(self) -> bool:
        """Whether the replayed tables carry the dataset's skipping indexes."""
        return self.config.indexes and bool(self.dataset.indexes)

    def refresh_indexes(self) -> None:
        """Give index metadata to the live files that lack it (rewrites write none)."""
        if self.indexed and self._table is not None:
            self._table.indexes.refresh()

    def rewrite(self, kind: str, action: Callable[[], OptimizeMetrics]) -> None:
        started = time.perf_counter()
        m = action()
        self.refresh_indexes()  # the rewritten files' metadata is part of the rewrite's cost
        seconds = time.perf_counter() - started
        self.rewrites.append(
            RewriteRecord(
                position=self.position,
                kind=kind,
                seconds=seconds,
                files_removed=m.files_removed,
                files_added=m.files_added,
                bytes_removed=m.bytes_removed,
                bytes_written=m.bytes_added,
                rows_written=m.rows_added,
                alpha=seconds / self.full_scan_seconds if self.full_scan_seconds else 0.0,
            )
        )


def _tz(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.session.timeZone") or "UTC"


# --------------------------------------------------------------------------- one policy


def replay_policy(
    policy: Policy,
    ctx: ReplayContext,
    table_dir: Path,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> PolicyRun:
    """Run the whole stream under ``policy`` on a fresh table at ``table_dir``."""
    if ctx.config.mode not in MODES:
        raise InvalidOption(f"unknown replay mode {ctx.config.mode!r}; use one of {MODES}")
    if table_dir.exists():
        shutil.rmtree(table_dir)
    run = PolicyRun(policy=policy.name, description=policy.description)
    policy.prepare(ctx)
    run.fit_seconds = float(getattr(policy, "fit_seconds", 0.0))
    columns = sorted({c for p in ctx.predicates(ctx.workload) for c in p.columns()})
    counter: MatchCounter | None = None
    events = stream(ctx.dataset.batches, ctx.workload)
    for position, event in enumerate(events):
        ctx.position = position
        if event.kind == "insert":
            run.inserts.append(_insert(policy, ctx, table_dir, event.batch))
            counter = counter or MatchCounter(ctx.table.uri, columns, ctx.dataset.udfs)
            progress(f"{policy.name}: batch {event.batch} inserted")
        else:
            assert event.query is not None and counter is not None
            policy.may_reorganize(ctx)
            run.queries.append(_query(ctx, counter, event.query, position))
            ctx.seen.append(event.query)
            policy.on_query(ctx, event.query)
    run.rewrites = list(ctx.rewrites)
    run.description = policy.description
    final = ctx.table.snapshot().files
    run.final_files, run.final_bytes = len(final), int(final.total_bytes)
    run.final_rows = int(final.total_rows)
    run.final_max_rows = int(np.max(np.asarray(final.num_records))) if len(final) else 0
    return run


def _insert(policy: Policy, ctx: ReplayContext, table_dir: Path, batch: int) -> InsertRecord:
    df = ctx.dataset.batch(ctx.spark, batch, ctx.config.rows_per_file)
    started = time.perf_counter()
    if ctx._table is None:
        # lakelayout's writer unless the policy writes itself (Delta's connector for its peers)
        table = policy.create_table(ctx, str(table_dir), df)
        ctx._table = table
        prepare_table(ctx, table)
        before: set[str] = set()
    else:
        before = set(map(str, ctx.table.snapshot().files.paths))
        policy.append(ctx, df)
        ctx.refresh_indexes()  # the writer collected them; this fills any gap
    seconds = time.perf_counter() - started
    snap = ctx.table.snapshot().files
    new = [str(p) for p in snap.paths if str(p) not in before]
    idx = [j for j, p in enumerate(snap.paths) if str(p) not in before]
    record = InsertRecord(
        position=ctx.position,
        batch=batch,
        rows=int(np.asarray(snap.num_records)[idx].sum()),
        files=len(new),
        bytes=int(np.asarray(snap.sizes)[idx].sum()),
        seconds=seconds,
    )
    ctx.files_inserted += len(new)
    policy.on_insert(ctx, new)
    return record


def prepare_table(ctx: ReplayContext, table: Table) -> None:
    """Register the dataset's UDFs on a new table; declare and build its indexes."""
    if ctx.dataset.udfs:
        table.indexes.register_udfs(ctx.dataset.udfs, return_types=ctx.dataset.udf_types)
    if ctx.indexed:
        table.indexes.add(*ctx.dataset.indexes)
        table.indexes.refresh()


def _query(ctx: ReplayContext, counter: MatchCounter, q: Query, position: int) -> QueryRecord:
    table = ctx.table
    snap = table.snapshot()
    predicate = parse_predicate(
        q.sql, snap.schema, functions=table.indexes.functions(), timezone=_tz(ctx.spark)
    )
    keep = np.asarray(table.indexes.prune(predicate, snap.files, snap.schema).keep, dtype=bool)
    kept = snap.files.take(keep)
    paths = [str(p) for p in kept.paths]
    counter.forget_except({str(p) for p in snap.files.paths})
    matching = counter.counts(paths, predicate)
    kept_rows = np.asarray(kept.num_records, dtype=np.int64)
    seconds: float | None = None
    returned: int | None = None
    if ctx.config.mode == "spark":
        started = time.perf_counter()
        result = table.scan(q.sql)
        returned = int(result.df.count())
        seconds = time.perf_counter() - started
        if result.report.files_kept != len(paths):
            raise AssertionError(
                f"spark scan kept {result.report.files_kept} files, metadata said {len(paths)}"
            )
    bytes_total = int(snap.files.total_bytes)
    bytes_kept = int(kept.total_bytes)
    logical = bytes_kept * ctx.full_scan_seconds / bytes_total if bytes_total else 0.0
    return QueryRecord(
        position=position,
        i=q.i,
        template=q.template,
        segment=q.segment,
        version=snap.version,
        files_total=len(snap.files),
        files_kept=len(paths),
        bytes_total=bytes_total,
        bytes_kept=bytes_kept,
        rows_total=int(snap.files.total_rows),
        rows_kept=int(kept_rows.sum()),
        rows_matching=int(matching.sum()),
        files_relevant=int((matching > 0).sum()),
        rows_in_relevant_files=int(kept_rows[matching > 0].sum()),
        seconds=seconds,
        rows_returned=returned,
        cost_seconds=seconds if seconds is not None else logical,
    )


# --------------------------------------------------------------------------- all policies


def measure_full_scan(
    spark: SparkSession, dataset: Dataset, queries: Sequence[Query], n: int
) -> float:
    """Median seconds of ``n`` workload queries run over every row with no skipping."""
    from pyspark.sql import functions as F

    df = dataset.frame(spark)
    picks = [queries[int(i)] for i in np.linspace(0, len(queries) - 1, max(1, n)).astype(int)]
    times = []
    for q in picks:
        started = time.perf_counter()
        df.where(F.expr(q.sql)).count()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def replay(
    policies: Sequence[Policy],
    dataset: Dataset,
    workload: Sequence[Query],
    work_dir: Path,
    config: ReplayConfig,
    *,
    spark: SparkSession,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Replay the stream under every policy; the results document (see docs/evaluation.md)."""
    if config.mode not in MODES:
        raise InvalidOption(f"unknown replay mode {config.mode!r}; use one of {MODES}")
    if not workload:
        raise InvalidOption("the workload has no queries")
    if any(p.needs_delta_connector for p in policies):
        from lakelayout.evaluation.delta_oss import require_connector

        require_connector(spark)  # before any table is written
    started = time.perf_counter()
    dataset.register_functions(spark)  # workload SQL may call the dataset's UDFs
    full_scan = measure_full_scan(spark, dataset, workload, config.full_scans) if workload else 0.0
    progress(f"full scan (no skipping): {full_scan:.2f} s")
    blocks = max(1, int(np.ceil(dataset.rows / dataset.batches / config.rows_per_file)))
    sample: pa.Table | None = None
    runs = []
    for policy in policies:
        ctx = ReplayContext(spark, dataset, workload, config, blocks, full_scan, _sample=sample)
        t0 = time.perf_counter()
        run = replay_policy(policy, ctx, work_dir / "tables" / policy.name, progress=progress)
        sample = ctx._sample
        runs.append(run)
        progress(f"{policy.name}: done in {time.perf_counter() - t0:.1f} s")
    for warning in file_count_warnings(runs, FILE_COUNT_TOLERANCE):
        progress(warning)
    events = stream(dataset.batches, workload)
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": config.mode,
        "dataset": {
            "name": dataset.name,
            "rows": dataset.rows,
            "batches": dataset.batches,
            "rows_per_file": config.rows_per_file,
            "blocks_per_batch": blocks,
        },
        "config": {
            "seed": config.seed,
            "sample_rows": config.sample_rows,
            "queries": len(workload),
            "indexes": [i.name for i in dataset.indexes] if config.indexes else [],
        },
        "machine": machine(),
        "full_scan_seconds": full_scan,
        "events": len(events),
        "switches": switch_positions(events),
        "inserts_at": [p for p, e in enumerate(events) if e.kind == "insert"],
        "runs": [r.to_dict() for r in runs],
        "file_counts": {
            "tolerance": FILE_COUNT_TOLERANCE,
            "outside": [r.policy for r in runs if not r.file_count_ok(FILE_COUNT_TOLERANCE)],
        },
        "seconds": time.perf_counter() - started,
        "note": "timings are from one run on this machine",
    }


def switch_positions(events: Sequence[Event]) -> list[int]:
    """Stream positions of the first query of every new template segment."""
    out, last = [], None
    for p, e in enumerate(events):
        if e.query is not None:
            if last is not None and e.query.segment != last:
                out.append(p)
            last = e.query.segment
    return out


def machine() -> dict[str, Any]:
    """nproc, memory, platform: stated in every report."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        pages = 0
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "memory_gib": round(pages / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
