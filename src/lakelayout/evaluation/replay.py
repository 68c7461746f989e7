"""Replay an ordered stream of insert batches and queries under layout policies.

The stream is ``insert 0, queries…, insert 1, queries…, …``: the workload is
cut into as many consecutive chunks as there are insert batches. Every policy
gets its own table built from the same batches, in the same process, on the
same data (thesis ch. 6, OReO §VI).

All policies share one JVM, so the order they run in must not decide what
they cost (the first one used to pay the JIT warm-up: twice its query time).
Hence:

* an untimed warm-up first runs a write, a rewrite and the workload's
  queries on an arrival-order table (:mod:`lakelayout.evaluation.warmup`);
* the policies advance in lockstep: each keeps its own table and context,
  and every stream position runs for all of them before the next, in an
  order rotated per event (:func:`rotated_orders`, independent of the order
  the policies were given), so machine noise and JVM state fall on all alike;
* in spark mode every query is timed again after the stream, in the reverse
  order, at the table version it ran on (:func:`retime_queries`): both sums
  are reported, so a figure that depends on when it was measured shows it.

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
import hashlib
import math
import os
import platform
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.errors import InvalidOption
from lakelayout.evaluation.datasets import Dataset
from lakelayout.evaluation.metrics import (
    FILE_COUNT_TOLERANCE,
    SCHEMA_VERSION,
    InsertRecord,
    OverheadRecord,
    PolicyRun,
    QueryRecord,
    RewriteRecord,
    file_count_warnings,
)
from lakelayout.evaluation.policies import Policy
from lakelayout.evaluation.tables import ReplayConfig, counted, prepare_table, timed, timed_scan
from lakelayout.evaluation.workloads import Query
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.nodes import Column, Expr, Func, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes.base import Udf, compute_term
from lakelayout.table import delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.api import Table
    from lakelayout.table.delta import Snapshot

#: Arrow bytes all policies' match counters may cache together (split evenly)
COUNTER_CACHE_BYTES = 4 << 30
#: a progress line every 1/PROGRESS_STEPS of the stream's queries
PROGRESS_STEPS = 10
#: how the results document describes the policy order (``order.scheme``)
ORDER_SCHEME = (
    "lockstep: each event runs for every policy before the next; per cycle of n events a "
    "seeded permutation of the sorted policy names, rotated by one place per event"
)
#: how the results document describes the re-timing pass (``retime.order``)
RETIME_ORDER = (
    "after the stream, every query again at the table version it first ran on, "
    "policies in the reverse of that event's order"
)


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


class SharedCounts:
    """Matching rows of the current query per file CONTENT, shared by every policy's counter.

    The policies' tables often hold byte-identical files (every table starts
    from the same insert; two policies that apply the same layout to the same
    files write the same bytes), and in lockstep they all count the same query
    one after the other. A file's count depends on its rows and the predicate
    only, so it is kept under (the file's digest, the predicate) for the
    query being counted; the next query starts afresh (nothing grows).
    """

    def __init__(self) -> None:
        self._predicate: Predicate | None = None
        self._counts: dict[bytes, int] = {}

    def for_predicate(self, predicate: Predicate) -> dict[bytes, int]:
        """The counts known for ``predicate`` (the same bound object; else a fresh map)."""
        if self._predicate is not predicate:
            self._predicate, self._counts = predicate, {}
        return self._counts


def file_digest(data: bytes) -> bytes:
    """What identifies a file's content: BLAKE2b of its bytes (with their length)."""
    return len(data).to_bytes(8, "little") + hashlib.blake2b(data, digest_size=20).digest()


class MatchCounter:
    """Matching rows per (live file, query), counted on the driver and cached per file.

    Files never change once written, so a file's counts stay valid while it
    is live; only the columns the queries read are loaded. Every policy of a
    replay keeps its counter for the whole stream (they run in lockstep), so
    the cache holds at most ``max_bytes`` of Arrow data: beyond it, the files
    cached longest ago are dropped (and read again if needed). Counters given
    the same ``shared`` :class:`SharedCounts` count a query once per distinct
    file content.
    """

    def __init__(
        self,
        root: str,
        columns: Sequence[str],
        udfs: Mapping[str, Udf] | None = None,
        *,
        max_bytes: int | None = None,
        shared: SharedCounts | None = None,
    ) -> None:
        self.root = root
        self.columns = list(columns)
        #: Python UDFs the predicates may call: their values become extra columns
        self.udfs = {k.lower(): v for k, v in (udfs or {}).items()}
        self.max_bytes = max_bytes
        self.shared = shared
        self._data: dict[str, pa.Table] = {}
        self._digests: dict[str, bytes] = {}
        self._bytes = 0

    def counts(self, paths: Sequence[str], predicate: Predicate) -> np.ndarray:
        """Matching rows in each of ``paths``."""
        if self.shared is None:
            return self._count(paths, predicate)
        known = self.shared.for_predicate(predicate)
        out = np.zeros(len(paths), dtype=np.int64)
        todo: list[int] = []
        for j, path in enumerate(paths):
            digest = self._digest(path)
            hit = known.get(digest)
            if hit is None:
                todo.append(j)
            else:
                out[j] = hit
        if todo:
            counted = self._count([paths[j] for j in todo], predicate)
            for j, n in zip(todo, counted, strict=True):
                out[j] = n
                known[self._digests[paths[j]]] = int(n)
        return out

    def _digest(self, path: str) -> bytes:
        if path not in self._digests:
            self._load(path)
        return self._digests[path]

    def _count(self, paths: Sequence[str], predicate: Predicate) -> np.ndarray:
        """Matching rows in each of ``paths``, evaluated here."""
        calls = udf_calls(predicate, self.udfs)
        if calls:
            predicate = replace_terms(
                predicate, {sql: Column(name, call.dtype) for sql, (name, call) in calls.items()}
            )
        out = np.zeros(len(paths), dtype=np.int64)
        tables = [self._with_udf_columns(path, calls) for path in paths]
        if not tables:
            return out
        schema = tables[0].schema
        if any(not t.schema.equals(schema) for t in tables[1:]):
            for j, data in enumerate(tables):  # files of differing types: one at a time
                if data.num_rows:
                    out[j] = int(np.count_nonzero(evaluate(predicate, data)))
            return out
        # one evaluation over all the files (zero-copy chunks), split at the files' bounds:
        # a WHERE mask is row by row, so this is the files' masks end to end, at the price of
        # one pass of Python work instead of one per file
        rows = np.array([t.num_rows for t in tables], dtype=np.int64)
        if not rows.any():
            return out
        mask = evaluate(predicate, pa.concat_tables(tables))
        matched = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
        ends = np.cumsum(rows)
        return np.asarray(matched[ends] - matched[ends - rows], dtype=np.int64)

    @property
    def cached_bytes(self) -> int:
        """Arrow bytes held in the cache."""
        return self._bytes

    def _with_udf_columns(self, path: str, calls: Mapping[str, tuple[str, Func]]) -> pa.Table:
        """The file's columns plus one column per UDF call (computed once per file)."""
        data = self._load(path)
        grown = data
        for name, call in calls.values():
            if name not in grown.column_names:
                grown = grown.append_column(name, compute_term(call, grown, self.udfs))
        if grown is not data:
            self._keep(path, grown)
        return grown

    def forget_except(self, live: set[str]) -> None:
        for path in [p for p in self._data if p not in live]:
            self._bytes -= self._data.pop(path).nbytes
        for path in [p for p in self._digests if p not in live]:
            del self._digests[path]

    def _load(self, path: str) -> pa.Table:
        if path in self._data:
            return self._data[path]
        with open(os.path.join(self.root, path), "rb") as f:
            raw = f.read()
        self._digests[path] = file_digest(raw)
        data = _plain_strings(pq.read_table(pa.BufferReader(raw), columns=self.columns))
        self._keep(path, data)
        return data

    def _keep(self, path: str, data: pa.Table) -> None:
        """Cache ``data`` for ``path``, dropping the oldest other files beyond ``max_bytes``."""
        if path in self._data:
            self._bytes -= self._data[path].nbytes
        self._data[path] = data
        self._bytes += data.nbytes
        if self.max_bytes is None or self._bytes <= self.max_bytes:
            return
        for old in list(self._data):
            if self._bytes <= self.max_bytes:
                break
            if old != path:
                self._bytes -= self._data.pop(old).nbytes


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
    """``node`` with every sub-expression whose canonical SQL is in ``by_sql`` replaced."""

    def swap(part: Expr) -> Expr:
        if isinstance(part, Predicate):
            return part
        return by_sql.get(part.sql(), part)

    return node.transform(swap)


def _plain_strings(data: pa.Table) -> pa.Table:
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in data.schema
    ]
    return data.cast(pa.schema(fields))


@dataclass
class ReplayCache:
    """What every policy's context shares: the data sample, its schema, parsed predicates
    (computed once per replay, whichever policy asks first)."""

    sample: pa.Table | None = None
    schema: pa.Schema | None = None
    parsed: dict[int, Predicate] = field(default_factory=dict)
    #: (SQL, table schema, callable functions) -> the predicate bound to a table's snapshot:
    #: every policy's table binds the same query text alike while these are equal
    bound: dict[tuple[str, pa.Schema, tuple[tuple[str, str], ...]], Predicate] = field(
        default_factory=dict
    )
    #: the Spark session's time zone, read once (a py4j call per query otherwise)
    timezone: str | None = None
    #: matching rows of the current query per file content, for every policy's counter
    counts: SharedCounts = field(default_factory=SharedCounts)
    #: results policies share by key (the oracles' candidates and their costs)
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReplayContext:
    """The :class:`~lakelayout.evaluation.policies.Context` a policy sees."""

    spark: SparkSession
    dataset: Dataset
    workload: Sequence[Query]
    config: ReplayConfig
    blocks_per_batch: int
    full_scan_seconds: float
    #: spark mode: what a scan keeping zero files costs (the per-query fixed part), else 0
    zero_scan_seconds: float = 0.0
    position: int = 0
    #: the policy's place in the current event's order (0 = first)
    slot: int = 0
    seen: list[Query] = field(default_factory=list)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    overheads: list[OverheadRecord] = field(default_factory=list)
    #: files added by the inserts so far (what equal-file-count policies aim at)
    files_inserted: int = 0
    #: spark mode with ``time_every > 1``: the seconds of this policy's last timed query,
    #: which the untimed queries after it cost
    held_seconds: float = 0.0
    cache: ReplayCache = field(default_factory=ReplayCache)
    _table: Table | None = None

    @property
    def table(self) -> Table:
        assert self._table is not None, "the first insert creates the table"
        return self._table

    @property
    def queries_total(self) -> int:
        return len(self.workload)

    def snapshot(self) -> Snapshot:
        """The table's latest snapshot: kept by :func:`lakelayout.table.delta.snapshot`
        until the log has a new commit, or read from the log at every ask when
        ``reuse_snapshots`` is off (the reference path tests compare it with)."""
        if self.config.reuse_snapshots:
            return self.table.snapshot()
        return delta.read_snapshot(self.table.uri)

    @property
    def time_column(self) -> str:
        return self.dataset.time_column

    @property
    def memo(self) -> dict[str, Any]:
        """Results every policy of this replay shares, by key (see :func:`policies.shared`)."""
        return self.cache.memo

    def sample(self) -> pa.Table:
        if self.cache.sample is None:
            self.cache.sample = self.dataset.sample(
                self.spark, self.config.sample_rows, seed=self.config.seed
            )
        return self.cache.sample

    def schema(self) -> pa.Schema:
        if self.cache.schema is None:
            self.cache.schema = self.sample().schema
        return self.cache.schema

    def predicates(self, queries: Sequence[Query]) -> list[Predicate]:
        parsed = self.cache.parsed
        out = []
        for q in queries:
            if q.i not in parsed:
                parsed[q.i] = parse_predicate(q.sql, self.schema(), timezone=self.timezone)
            out.append(parsed[q.i])
        return out

    @property
    def timezone(self) -> str:
        """The session time zone predicates are bound in (read from Spark once per replay)."""
        if self.cache.timezone is None:
            self.cache.timezone = _tz(self.spark)
        return self.cache.timezone

    def bind(self, sql: str, snap: Snapshot) -> Predicate:
        """``sql`` bound to ``snap``'s schema with the table's functions (UDFs), as a scan
        binds it; parsed once per replay for all tables with the same schema and functions."""
        functions = self.table.indexes.functions()
        key = (sql, snap.schema, tuple(sorted((k, str(v)) for k, v in functions.items())))
        bound = self.cache.bound.get(key)
        if bound is None:
            bound = parse_predicate(sql, snap.schema, functions=functions, timezone=self.timezone)
            self.cache.bound[key] = bound
        return bound

    @property
    def indexed(self) -> bool:
        """Whether the replayed tables carry the dataset's skipping indexes."""
        return self.config.indexes and bool(self.dataset.indexes)

    def refresh_indexes(self) -> None:
        """Give index metadata to the live files that lack it (rewrites and appends collect
        it as they write; this fills what a failed collector or store write left out)."""
        if self.indexed and self._table is not None:
            self._table.indexes.refresh()

    def rewrite(self, kind: str, action: Callable[[], OptimizeMetrics]) -> None:
        table_bytes = int(self.snapshot().files.total_bytes)
        started = time.perf_counter()
        m = action()
        # reading the rewritten table is part of every rewrite's cost: a peer's action
        # reads it itself (then this finds it kept), lakelayout's left it to the next scan,
        # which read it untimed (an audit)
        self.snapshot()
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
                slot=self.slot,
                cost_seconds=self._charge(m.bytes_removed, table_bytes),
            )
        )

    def _charge(self, bytes_removed: int, table_bytes: int) -> float | None:
        """``rewrite_alpha`` full scans per table rewritten (None: the measured seconds)."""
        alpha = self.config.rewrite_alpha
        if alpha is None:
            return None
        share = bytes_removed / table_bytes if table_bytes else 1.0
        return float(alpha) * self.full_scan_seconds * share

    def record_overhead(self, kind: str, seconds: float) -> None:
        """Count ``seconds`` the policy spent on ``kind`` of its own work (an advisor's
        analysis, an online reorganizer's decisions) in its total cost, at this event."""
        if not kind or not isinstance(kind, str):
            raise InvalidOption(f"record_overhead needs a non-empty kind, got {kind!r}")
        value = float(seconds)
        if not math.isfinite(value) or value < 0:
            raise InvalidOption(
                f"record_overhead({kind!r}) needs finite seconds >= 0, got {seconds!r}"
            )
        self.overheads.append(
            OverheadRecord(position=self.position, kind=kind, seconds=value, slot=self.slot)
        )


def _tz(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.session.timeZone") or "UTC"


# --------------------------------------------------------------------------- policy order


def rotated_orders(names: Sequence[str], events: int, seed: int) -> list[list[str]]:
    """The order in which the policies run each event; the order ``names`` are given in
    plays no part (they are sorted first).

    Events are taken in cycles of ``n = len(names)``. Each cycle draws a seeded
    permutation of the names, and event ``j`` of the cycle runs it rotated by
    ``j``: within a full cycle every policy holds every place exactly once, and
    who runs after whom changes from cycle to cycle.

    >>> orders = rotated_orders(["c", "a", "b"], 6, seed=1)
    >>> orders == rotated_orders(["a", "b", "c"], 6, seed=1)
    True
    >>> [sorted(o[place] for o in orders[:3]) for place in range(3)]
    [['a', 'b', 'c'], ['a', 'b', 'c'], ['a', 'b', 'c']]
    """
    ordered = sorted(names)
    n = len(ordered)
    if n == 0:
        return [[] for _ in range(events)]
    rng = np.random.default_rng(seed)
    out: list[list[str]] = []
    cycle: list[str] = []
    for position in range(events):
        j = position % n
        if j == 0:
            cycle = [ordered[int(k)] for k in rng.permutation(n)]
        out.append(cycle[j:] + cycle[:j])
    return out


def balanced_orders(names: Sequence[str], repeats: int) -> list[list[str]]:
    """The order of ``names`` in each of ``repeats`` interleaved repeats of a bench, such
    that no contender is systematically early or late.

    Repeats come in pairs: an order, then the same order reversed, so that over a pair
    every contender's mean place is the middle, ``(n - 1) / 2``, whatever ``n`` and
    however few the repeats; each pair starts the order at another place, so who runs
    after whom changes too. With an odd ``repeats`` the last repeat has no partner.
    (Rotating one place per repeat, with fewer repeats than contenders, left the last
    contenders late in every repeat.)

    >>> balanced_orders(["a", "b", "c"], 4)
    [['a', 'b', 'c'], ['c', 'b', 'a'], ['b', 'c', 'a'], ['a', 'c', 'b']]
    >>> orders = balanced_orders(list("abcdefgh"), 2)
    >>> {name: sum(o.index(name) for o in orders) / 2 for name in "ah"}
    {'a': 3.5, 'h': 3.5}
    """
    names = list(names)
    n = len(names)
    pairs = max(1, (repeats + 1) // 2)
    out: list[list[str]] = []
    for rep in range(repeats):
        shift = (rep // 2) * n // pairs if n else 0
        order = names[shift:] + names[:shift]
        out.append(order if rep % 2 == 0 else order[::-1])
    return out


# --------------------------------------------------------------------------- one policy's lane


@dataclass
class Lane:
    """One policy in a lockstep replay: its context (table, position, records) and run."""

    policy: Policy
    ctx: ReplayContext
    table_dir: Path
    run: PolicyRun
    counter: MatchCounter | None = None

    def prepare(self) -> None:
        """Fresh table directory; the policy's ``prepare`` (fitting static layouts)."""
        if self.table_dir.exists():
            shutil.rmtree(self.table_dir)
        self.ctx.position, self.ctx.slot = 0, 0
        self.policy.prepare(self.ctx)
        self.run.fit_seconds = float(getattr(self.policy, "fit_seconds", 0.0))

    def step(
        self, event: Event, position: int, slot: int, columns: Sequence[str], cache_bytes: int
    ) -> None:
        """Run one event of the stream under this policy."""
        ctx = self.ctx
        ctx.position, ctx.slot = position, slot
        if event.kind == "insert":
            self.run.inserts.append(_insert(self.policy, ctx, self.table_dir, event.batch))
            if self.counter is None:
                self.counter = MatchCounter(
                    ctx.table.uri,
                    columns,
                    ctx.dataset.udfs,
                    max_bytes=cache_bytes,
                    shared=ctx.cache.counts,
                )
            return
        assert event.query is not None and self.counter is not None
        self.policy.may_reorganize(ctx)
        self.run.queries.append(_query(ctx, self.counter, event.query, position))
        ctx.seen.append(event.query)
        self.policy.on_query(ctx, event.query)

    def finish(self) -> PolicyRun:
        """The run with the context's rewrites and overheads and the final table's files."""
        run, ctx = self.run, self.ctx
        run.rewrites = list(ctx.rewrites)
        run.overheads = list(ctx.overheads)
        run.description = self.policy.description
        final = ctx.table.snapshot().files
        run.final_files, run.final_bytes = len(final), int(final.total_bytes)
        run.final_rows = int(final.total_rows)
        run.final_max_rows = int(np.max(np.asarray(final.num_records))) if len(final) else 0
        self.counter = None  # frees the cached file data
        return run


def _insert(policy: Policy, ctx: ReplayContext, table_dir: Path, batch: int) -> InsertRecord:
    df = ctx.dataset.batch(ctx.spark, batch, ctx.config.rows_per_file)
    started = time.perf_counter()
    if ctx._table is None:
        # lakelayout's writer unless the policy writes itself (Delta's connector for its peers)
        table = policy.create_table(ctx, str(table_dir), df)
        ctx._table = table
        prepare_table(table, ctx.dataset, indexes=ctx.indexed)
        before: set[str] = set()
    else:
        before = set(map(str, ctx.snapshot().files.paths))
        policy.append(ctx, df)
        ctx.refresh_indexes()  # the writer collected them; this fills any gap
    seconds = time.perf_counter() - started
    snap = ctx.snapshot().files
    new = [str(p) for p in snap.paths if str(p) not in before]
    idx = [j for j, p in enumerate(snap.paths) if str(p) not in before]
    record = InsertRecord(
        position=ctx.position,
        batch=batch,
        rows=int(np.asarray(snap.num_records)[idx].sum()),
        files=len(new),
        bytes=int(np.asarray(snap.sizes)[idx].sum()),
        seconds=seconds,
        slot=ctx.slot,
    )
    ctx.files_inserted += len(new)
    policy.on_insert(ctx, new)
    return record


def _query(ctx: ReplayContext, counter: MatchCounter, q: Query, position: int) -> QueryRecord:
    table = ctx.table
    snap = ctx.snapshot()
    predicate = ctx.bind(q.sql, snap)
    planned = table.plan(predicate, snapshot=snap, timezone=ctx.timezone)
    kept = planned.kept
    paths = [str(p) for p in kept.paths]
    kept_rows = np.asarray(kept.num_records, dtype=np.int64)
    matching: np.ndarray | None = None
    if counted(q, ctx.config):
        counter.forget_except({str(p) for p in snap.files.paths})
        matching = counter.counts(paths, predicate)
    seconds: float | None = None
    returned: int | None = None
    spark_mode = ctx.config.mode == "spark"
    if spark_mode and timed(q, ctx.config):
        seconds, returned, files = timed_scan(table, q.sql)
        if files != len(paths):
            raise AssertionError(f"spark scan kept {files} files, metadata said {len(paths)}")
        ctx.held_seconds = seconds
    bytes_total = int(snap.files.total_bytes)
    bytes_kept = int(kept.total_bytes)
    logical = bytes_kept * ctx.full_scan_seconds / bytes_total if bytes_total else 0.0
    cost = (seconds if seconds is not None else ctx.held_seconds) if spark_mode else logical
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
        rows_matching=None if matching is None else int(matching.sum()),
        files_relevant=None if matching is None else int((matching > 0).sum()),
        rows_in_relevant_files=None if matching is None else int(kept_rows[matching > 0].sum()),
        seconds=seconds,
        rows_returned=returned,
        cost_seconds=cost,
        slot=ctx.slot,
    )


# --------------------------------------------------------------------------- all policies


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
    """Replay the stream under every policy in lockstep; the results document
    (see docs/evaluation.md).

    Before the stream, an untimed warm-up runs the paths the replay times
    (:func:`~lakelayout.evaluation.warmup.warm_up`), then the per-query fixed
    overhead (spark mode) and the full-scan time are measured. Every policy
    has its own table and context; at each stream position the event runs
    for every policy, in the order :func:`rotated_orders` gives that position.
    In spark mode every query is then timed again in the reverse order
    (:func:`retime_queries`).
    """
    from lakelayout.evaluation.warmup import measure_full_scan, measure_zero_file_scan, warm_up

    if not workload:
        raise InvalidOption("the workload has no queries")
    if not policies:
        raise InvalidOption("no policies to replay")
    names = [p.name for p in policies]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidOption(f"policies must have distinct names; repeated: {', '.join(repeated)}")
    if any(p.needs_delta_connector for p in policies):
        from lakelayout.evaluation.delta_oss import require_connector

        require_connector(spark)  # before any table is written
    started = time.perf_counter()
    dataset.register_functions(spark)  # workload SQL may call the dataset's UDFs
    warm = None
    zero = None
    if config.warmup:
        warm, warm_table = warm_up(
            spark,
            dataset,
            workload,
            config,
            work_dir / "warmup",
            delta_connector=any(p.needs_delta_connector for p in policies),
        )
        progress(
            f"warm-up (untimed): {warm['queries']} queries, a write and a rewrite "
            f"in {warm['seconds']:.1f} s"
        )
        if config.mode == "spark":
            zero = measure_zero_file_scan(warm_table, dataset, config.zero_file_scans)
    full_scan = measure_full_scan(spark, dataset, workload, config.full_scans)
    if zero is not None:
        progress(f"per-query fixed overhead (a scan keeping zero files): {zero['seconds']:.3f} s")
    progress(f"full scan (no skipping): {full_scan:.2f} s")
    blocks = max(1, int(np.ceil(dataset.rows / dataset.batches / config.rows_per_file)))
    cache = ReplayCache()
    lanes = {
        p.name: Lane(
            policy=p,
            ctx=ReplayContext(
                spark,
                dataset,
                workload,
                config,
                blocks,
                full_scan,
                zero_scan_seconds=float(zero["seconds"]) if zero else 0.0,
                cache=cache,
            ),
            table_dir=work_dir / "tables" / p.name,
            run=PolicyRun(policy=p.name, description=p.description),
        )
        for p in policies
    }
    events = stream(dataset.batches, workload)
    orders = rotated_orders(names, len(events), config.seed)
    for name in orders[0]:
        lanes[name].prepare()
    parsed = lanes[names[0]].ctx.predicates(workload)  # parsed once, in the shared cache
    columns = sorted({c for p in parsed for c in p.columns()})
    cache_bytes = COUNTER_CACHE_BYTES // max(len(lanes), 1)
    stream_started = time.perf_counter()
    n_queries = sum(1 for e in events if e.kind != "insert")
    report_every = max(1, n_queries // PROGRESS_STEPS)
    done = 0
    for position, event in enumerate(events):
        for slot, name in enumerate(orders[position]):
            lanes[name].step(event, position, slot, columns, cache_bytes)
        into = f"{time.perf_counter() - stream_started:.0f} s into the stream"
        if event.kind == "insert":
            progress(f"batch {event.batch} inserted under {len(lanes)} policies ({into})")
            continue
        done += 1
        if done % report_every == 0 and done < n_queries:
            progress(f"query {done}/{n_queries} under {len(lanes)} policies ({into})")
    runs = [lanes[name].finish() for name in names]
    progress(f"stream: {len(events)} events × {len(lanes)} policies in "
             f"{time.perf_counter() - stream_started:.1f} s")  # fmt: skip
    retimed = config.mode == "spark" and config.retime
    if retimed:
        t0 = time.perf_counter()
        n = retime_queries(list(lanes.values()), events, orders)
        progress(f"re-timed {n} queries in the reverse order in {time.perf_counter() - t0:.1f} s")
    for warning in file_count_warnings(runs, FILE_COUNT_TOLERANCE):
        progress(warning)
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
            # spark mode: every k-th query timed, the others priced by it (1: all timed)
            "time_every": config.time_every,
            "count_every": config.count_every,
        },
        "machine": machine(),
        "full_scan_seconds": full_scan,
        "warmup": warm,
        "zero_file_scan": zero,
        "order": {
            "scheme": ORDER_SCHEME,
            "seed": config.seed,
            "policies": sorted(names),
            "events": orders,
        },
        "retime": {"done": retimed, "order": RETIME_ORDER if retimed else None},
        "events": len(events),
        "switches": switch_positions(events),
        "inserts_at": [p for p, e in enumerate(events) if e.kind == "insert"],
        "runs": [r.to_dict() for r in runs],
        "file_counts": {
            "tolerance": FILE_COUNT_TOLERANCE,
            "outside": [r.policy for r in runs if not r.file_count_ok(FILE_COUNT_TOLERANCE)],
        },
        "seconds": time.perf_counter() - started,
        "note": "policies in lockstep, order rotated per event; timings from one run",
    }


def retime_queries(
    lanes: Sequence[Lane], events: Sequence[Event], orders: Sequence[Sequence[str]]
) -> int:
    """Time every policy's queries a second time, after the stream, in the reverse of
    each event's order, at the table version each query first ran on; the number re-timed.

    A re-timed scan that keeps other files than the first (an index's metadata
    for files a rewrite removed is gone, so an old version keeps more) is not
    the same work: its ``seconds_retimed`` stays None.
    """
    by_name = {lane.policy.name: lane for lane in lanes}
    at = {
        name: {q.position: k for k, q in enumerate(lane.run.queries)}
        for name, lane in by_name.items()
    }
    done = 0
    for position, event in enumerate(events):
        if event.query is None:
            continue
        for name in reversed(orders[position]):
            lane = by_name[name]
            k = at[name][position]
            record = lane.run.queries[k]
            if record.seconds is None:  # not timed in the stream (``time_every``)
                continue
            seconds, rows, files = timed_scan(
                lane.ctx.table, event.query.sql, version=record.version
            )
            if rows != record.rows_returned:
                raise AssertionError(
                    f"{name}: query {record.i} returned {rows} rows re-timed at version "
                    f"{record.version}, {record.rows_returned} in the stream"
                )
            same = files == record.files_kept
            lane.run.queries[k] = dataclasses.replace(
                record, seconds_retimed=seconds if same else None
            )
            done += same
    return done


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
