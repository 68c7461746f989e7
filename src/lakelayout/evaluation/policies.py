"""Layout policies: what a table does on insert, on query, and when it may reorganize.

A policy sees the stream through three hooks, called by the replay in order:

* ``on_insert(ctx, new_files)`` after an insert batch was committed;
* ``on_query(ctx, query)`` after a query ran (to learn from the workload);
* ``may_reorganize(ctx)`` before every query: the moment to rewrite.

Every rewrite goes through ``ctx.rewrite(kind, action)``, which times it and
records files and bytes written, so policies never account for themselves.
The time a policy spends deciding (an advisor's analysis, an online
reorganizer's bookkeeping) it reports with ``ctx.record_overhead(kind,
seconds)``: it counts in the policy's total cost (queries + rewrites +
overhead). The advisor and the online reorganizer plug in through the same
interface.

Equal file counts (B1 compares layouts "with equal file counts"): every
policy ends the stream with about as many live files as were inserted (the
``none`` policy's count), so no layout is flattered by more, smaller files:

* fitted layouts (``sorted``, ``qdtree``, ``pando``, ``sop-z``, ``hilbert``)
  are fitted with as close to ``blocks_per_batch`` blocks as a few fits reach
  (:func:`fit_with_blocks`) and applied with one file per block;
* the online policies' and their oracles' candidates (``oreo``, ``greedy``,
  ``regret``, ``static``, ``offline-optimal``) are fitted once each, for
  about the table's file count, and written as a live table's switch writes
  them (:func:`apply_blocks`): one file per block up to twice the target
  file size, a larger block cut into several (a candidate fitted on a
  window often has fewer, larger blocks than asked: leaves no cut of the
  window's queries reaches), so their file count is what the product's
  would be, and the replay reports it;
* ``zorder-halfway`` and ``liquid`` set the table's target file size to
  ``ceil(live bytes / files inserted)`` (:func:`target_size_for`) and write
  one file per curve block;
* ``deltars-zorder`` calibrates delta-rs' ``target_size`` on a few of the
  table's files first (:func:`deltars_target_size`), since delta-rs' files
  come out smaller than the target it is given;
* ``delta-zorder`` and ``delta-liquid`` (Delta Lake's own connector, see
  :mod:`lakelayout.evaluation.delta_oss`) set Delta's
  ``spark.databricks.delta.optimize.maxFileSize`` to ``live bytes // files
  inserted`` for each OPTIMIZE: Delta cuts a bin into ``bin bytes //
  maxFileSize`` range partitions, one file each.

A policy creates its table from the first insert batch and appends the
others through :meth:`Policy.create_table` and :meth:`Policy.append`
(lakelayout's writer by default); ``delta-liquid`` overrides both, since a
Delta-clustered table is created by Delta (``CLUSTER BY``) and only Delta's
writer appends to it (delta-rs refuses to write to clustered tables).
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import numpy as np
import pyarrow as pa

from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.errors import InvalidOption, closest
from lakelayout.evaluation.tables import INSERT_TARGET
from lakelayout.evaluation.workloads import Query
from lakelayout.layouts.base import Layout
from lakelayout.layouts.qdtree import CutMemo
from lakelayout.online.candidates import FAMILIES, Sizer, check_families, fit_candidates
from lakelayout.online.costs import CostBook
from lakelayout.online.engine import OnlineConfig, OnlineEngine
from lakelayout.online.manager import Candidate, History

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from lakelayout.advisor.costmodel import CostModel
    from lakelayout.api import Table
    from lakelayout.expr.nodes import Expr, Predicate
    from lakelayout.online_table import UnlaidFiles
    from lakelayout.table.delta import Snapshot


_T = TypeVar("_T")


class Context(Protocol):
    """What the replay offers a policy."""

    @property
    def table(self) -> Table: ...

    @property
    def workload(self) -> Sequence[Query]: ...

    @property
    def seen(self) -> Sequence[Query]: ...

    @property
    def queries_total(self) -> int: ...

    @property
    def blocks_per_batch(self) -> int: ...

    @property
    def time_column(self) -> str: ...

    @property
    def files_inserted(self) -> int:
        """Files added by the inserts so far (the live file count of ``none``)."""
        ...

    def sample(self) -> pa.Table: ...

    def predicates(self, queries: Sequence[Query]) -> list[Predicate]: ...

    def rewrite(self, kind: str, action: Callable[[], OptimizeMetrics]) -> None: ...

    def record_overhead(self, kind: str, seconds: float) -> None:
        """Count ``seconds`` of the policy's own work (``kind``: e.g. ``"advisor"``) in its
        total cost, at the current stream position."""
        ...


class Policy:
    """The no-op policy (``none``): files stay as inserted, in arrival order."""

    name = "none"
    description = "files as inserted, in arrival order"
    #: what the policy knows of the workload ("online": the queries so far; "oracle": all)
    knows = ""
    #: whether the policy runs Delta Lake's own Spark connector (checked before the replay)
    needs_delta_connector = False
    #: a deciding policy's own seconds not handed to ``ctx.record_overhead`` (the replay
    #: adds them), and every second it charged: (stream position, what, seconds); set by
    #: the policies that charge (:meth:`_overhead`)
    overhead_seconds: float
    overhead_events: list[tuple[int, str, float]]

    def cluster_by(self, ctx: Context) -> list[str] | None:
        """Liquid clustering columns to create the table with (None: not clustered)."""
        return None

    def create_table(self, ctx: Context, path: str, df: DataFrame) -> Table:
        """Create the table at ``path`` from the first insert batch; the table.

        By default lakelayout's writer makes one file per partition of ``df``
        (clustered by :meth:`cluster_by`), and rewrites aim at the inserted
        file size, so every policy keeps about as many files.
        """
        from lakelayout.api import Table
        from lakelayout.cluster.config import TARGET_FILE_SIZE
        from lakelayout.table import delta

        table = Table.create(
            path,
            df,
            spark=df.sparkSession,
            target_file_size=INSERT_TARGET,
            cluster_by=self.cluster_by(ctx),
        )
        files = table.snapshot().files
        average = int(files.total_bytes) // max(len(files), 1)
        delta.set_properties(table.uri, {TARGET_FILE_SIZE: str(max(1024, average * 21 // 20))})
        return table

    def append(self, ctx: Context, df: DataFrame) -> None:
        """Append an insert batch (lakelayout's writer: one file per partition of ``df``)."""
        ctx.table.append(df, target_file_size=INSERT_TARGET)

    def prepare(self, ctx: Context) -> None:
        """Called once before the stream (fit static layouts here)."""

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        """Called after every insert batch with the files it added."""

    def on_query(self, ctx: Context, query: Query) -> None:
        """Called after every query."""

    def may_reorganize(self, ctx: Context) -> None:
        """Called before every query; rewrite through ``ctx.rewrite`` if wanted."""

    def _overhead(self, ctx: Context, kind: str, seconds: float) -> None:
        """Charge ``seconds`` of the policy's own work to its total: through
        ``ctx.record_overhead`` when the context has it, else summed in the policy's
        ``overhead_seconds`` for the replay to add (the policy keeps ``overhead_seconds``
        and ``overhead_events``, which it sets)."""
        record = getattr(ctx, "record_overhead", None)
        position = int(getattr(ctx, "position", -1))
        self.overhead_events.append((position, kind, seconds))
        if callable(record):
            record(kind, seconds)
        else:
            self.overhead_seconds += seconds


#: layout fits tried by :func:`fit_with_blocks` to reach the wanted block count
MAX_FITS = 6


def target_size_for(nbytes: int, files: int) -> int:
    """The target file size that cuts ``nbytes`` into exactly ``files`` blocks.

    A one-file-per-block rewrite makes ``round(bytes / target)`` blocks; with
    ``ceil(nbytes / files)`` as the target that is ``files`` whenever
    ``nbytes >= 2 * files ** 2`` (any real table: a file is more than
    ``2 * files`` bytes). ``ceil(bytes / target)`` is ``files`` too.

    >>> target_size_for(1_000_000, 184)
    5435
    >>> round(1_000_000 / 5435), math.ceil(1_000_000 / 5435)
    (184, 184)
    """
    if files < 1 or nbytes < 1:
        raise InvalidOption(
            f"target_size_for needs bytes >= 1 and files >= 1, got {nbytes}, {files}"
        )
    return max(1, math.ceil(nbytes / files))


def fit_with_blocks(
    fit: Callable[[int], Layout],
    wanted: int,
    *,
    max_fits: int = MAX_FITS,
    start: int | None = None,
    within: float = 0.0,
) -> Layout:
    """The layout of ``fit(target_blocks)`` whose ``n_blocks`` is closest to ``wanted``.

    Workload-aware layouts do not hit ``target_blocks`` exactly: a Qd-tree
    stops at leaves of at least half the target size, Pando merges cells
    into blocks of at least the target size (so fewer blocks). The target is
    rescaled by ``wanted / n_blocks`` after each fit (at most ``max_fits``
    fits, never above ``4 * wanted``); ties go to the earlier (smaller) fit.
    ``start``: the first target (``wanted`` when not given, e.g. the target that came
    closest on a similar fit); ``within``: a layout whose count is within
    ``within * wanted`` blocks of ``wanted`` ends the search.
    """
    if wanted < 1:
        raise InvalidOption(f"wanted blocks must be >= 1, got {wanted}")
    if not 0.0 <= within < 1.0:
        raise InvalidOption(f"within must be in [0, 1), got {within!r}")
    best: Layout | None = None
    tried: set[int] = set()
    target = wanted if start is None else min(4 * wanted, max(1, int(start)))
    for _ in range(max(1, max_fits)):
        tried.add(target)
        layout = fit(target)
        n = layout.n_blocks
        if best is None or abs(n - wanted) < abs(best.n_blocks - wanted):
            best = layout
        if abs(n - wanted) <= within * wanted:
            break
        target = _next_target(target, n, wanted, tried)
        if target in tried:
            break
    assert best is not None
    return best


def _next_target(target: int, got: int, wanted: int, tried: set[int]) -> int:
    """Rescale ``target`` by ``wanted / got``; step by one when that repeats a fit."""
    scaled = min(4 * wanted, max(1, round(target * wanted / max(got, 1))))
    if scaled in tried:
        scaled = min(4 * wanted, max(1, target + (1 if got < wanted else -1)))
    return scaled


def aim_file_count(table: Table, wanted: int) -> int:
    """Set the table's target file size so a whole-table rewrite makes ``wanted`` files."""
    from lakelayout.cluster.config import TARGET_FILE_SIZE
    from lakelayout.table import delta

    target = target_size_for(int(table.snapshot().files.total_bytes), max(wanted, 1))
    delta.set_properties(table.uri, {TARGET_FILE_SIZE: str(target)})
    return target


def most_queried(predicates: Sequence[Predicate], top: int) -> list[str]:
    """The ``top`` columns referenced by the most queries (ties: name order); map, list and
    struct columns (``attrs['k']``) are left out: they cannot be clustered on."""
    nested = {name for p in predicates for name in _nested_columns(p)}
    counts = Counter(col for p in predicates for col in set(p.columns()) if col not in nested)
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


def _nested_columns(node: Expr) -> set[str]:
    """Names of the map/list/struct columns ``node`` reads."""
    import pyarrow

    from lakelayout.expr.nodes import Column

    out: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if (
            isinstance(item, Column)
            and item.dtype is not None
            and pyarrow.types.is_nested(item.dtype)
        ):
            out.add(item.name)
        stack.extend(item.children())
    return out


class LayoutPolicy(Policy):
    """A layout fitted once (on a sample of all data and the whole workload),
    applied to every insert batch: ``optimize.apply(layout, new_files)``.

    ``fit(ctx, target_blocks)`` is called until the layout has (about)
    ``blocks_per_batch`` blocks, and every block is written as one file, so a
    batch keeps as many files as were inserted.
    """

    def __init__(self, name: str, fit: Callable[[Context, int], Layout], description: str) -> None:
        self.name = name
        self.description = description
        self._fit = fit
        self.layout: Layout | None = None
        self.fit_seconds = 0.0

    def prepare(self, ctx: Context) -> None:
        started = time.perf_counter()
        self.layout = fit_with_blocks(lambda t: self._fit(ctx, t), ctx.blocks_per_batch)
        self.fit_seconds = time.perf_counter() - started
        self.description = f"{self.description}; {self.layout.n_blocks} blocks per batch"

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        layout = self.layout
        assert layout is not None, "prepare() fits the layout"
        files = list(new_files)
        ctx.rewrite(
            f"apply {self.name}",
            lambda: ctx.table.optimize.apply(layout, files, one_file_per_block=True),
        )


class SortedPolicy(Policy):
    """Every insert batch sorted by the arrival-time column (linear layout).

    The sort is fitted on a sample of the batch itself (inside the timed
    rewrite), with one block per inserted file: the time column often follows
    arrival, so boundaries fitted on all data would leave most of a batch's
    blocks empty.
    """

    name = "sorted"
    description = "each batch sorted by its time column"

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        files = list(new_files)
        ctx.rewrite("apply sorted", lambda: sort_files(ctx.table, files, ctx.time_column))


def sort_files(table: Table, files: Sequence[str], column: str) -> OptimizeMetrics:
    """Rewrite ``files`` sorted by ``column``, one file per input file (range blocks)."""
    from lakelayout.cluster.rewrite import read_files, sample_rows
    from lakelayout.layouts import LinearLayout

    snap = table.snapshot()
    chosen = set(files)
    rows = sum(
        int(n)
        for p, n in zip(snap.files.paths, snap.files.num_records, strict=True)
        if str(p) in chosen
    )
    df = read_files(table.spark, snap, list(files), with_file=False)
    sample = sample_rows(df.select(column), rows)
    layout = LinearLayout.fit(sample, columns=[column], target_blocks=max(1, len(files)))
    return table.optimize.apply(layout, files, one_file_per_block=True)


class ZOrderHalfway(Policy):
    """One OPTIMIZE ZORDER BY the 3 most queried columns so far, at the stream's midpoint
    (the thesis' "manual Z-order" baseline, ch. 6)."""

    name = "zorder-halfway"
    description = "one OPTIMIZE ZORDER BY (3 most queried columns) halfway"

    def __init__(self) -> None:
        self.done = False
        self.columns: list[str] = []

    def may_reorganize(self, ctx: Context) -> None:
        if self.done or len(ctx.seen) < ctx.queries_total // 2:
            return
        self.done = True
        self.columns = most_queried(ctx.predicates(ctx.seen), 3)
        self.description = f"OPTIMIZE ZORDER BY ({', '.join(self.columns)}) halfway"
        self._reorganize(ctx)

    def _reorganize(self, ctx: Context) -> None:
        columns = self.columns
        aim_file_count(ctx.table, ctx.files_inserted)
        ctx.rewrite("zorder", lambda: ctx.table.optimize.zorder(columns, one_file_per_block=True))


class DeltaRsZOrder(ZOrderHalfway):
    """The peer: delta-rs ``optimize.z_order`` on the same columns at the same point."""

    name = "deltars-zorder"
    description = "delta-rs optimize.z_order (3 most queried columns) halfway"

    def _reorganize(self, ctx: Context) -> None:
        columns = self.columns
        target = deltars_target_size(ctx.table, columns, ctx.files_inserted)
        self.description = (
            f"delta-rs z_order({', '.join(columns)}) halfway, target_size {target:,} B"
        )
        ctx.rewrite("deltars z_order", lambda: deltars_zorder(ctx.table, columns, target))


#: files of the table delta-rs' z-order is calibrated on
CALIBRATION_FILES = 8


def deltars_target_size(table: Table, columns: Sequence[str], wanted: int) -> int:
    """delta-rs ``target_size`` that makes its z-order of the table end with ``wanted`` files.

    delta-rs rolls a file when its (partly uncompressed) estimate reaches the
    target, and compresses differently from lakelayout, so its files come out
    at some fraction ``r`` of the target and its bytes at some ratio ``g`` of
    the input. Both are measured by z-ordering a copy of a few of the
    table's files (not timed as a rewrite); the target is then
    ``ceil(live bytes / wanted) * g / r``.
    """
    files = table.snapshot().files
    naive = target_size_for(int(files.total_bytes), max(wanted, 1))
    paths = [str(p) for p in files.paths]
    picks = sorted({paths[int(i)] for i in np.linspace(0, len(paths) - 1, CALIBRATION_FILES)})
    sizes = dict(zip(paths, (int(s) for s in files.sizes), strict=True))
    grown, ratio = _calibrate_deltars(table.uri, picks, list(columns), naive)
    in_bytes = sum(sizes[p] for p in picks)
    return max(1, round(naive * (grown / in_bytes) / ratio))


def _calibrate_deltars(
    root: str, paths: Sequence[str], columns: list[str], target: int
) -> tuple[int, float]:
    """(bytes delta-rs writes, its full file size / ``target``) z-ordering ``paths``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    data = pa.concat_tables([pq.read_table(os.path.join(root, p)) for p in paths])
    with tempfile.TemporaryDirectory(prefix="ll-deltars-") as tmp:
        write_deltalake(tmp, data)
        DeltaTable(tmp).optimize.z_order(columns, target_size=target)
        out = pa.table(DeltaTable(tmp).get_add_actions(flatten=True)).column("size_bytes")
        sizes = sorted(int(s) for s in out.to_pylist())
    full = sizes[1:] if len(sizes) > 1 else sizes  # the smallest is the remainder
    return sum(sizes), max(float(np.median(full)) / target, 1e-3)


def deltars_zorder(table: Table, columns: Sequence[str], target: int) -> OptimizeMetrics:
    """Run delta-rs' Z-order over the whole table with ``target_size=target``."""
    from deltalake import DeltaTable

    from lakelayout.evaluation.delta_oss import files_changed

    before = table.snapshot().files
    DeltaTable(table.uri).optimize.z_order(list(columns), target_size=target)
    return files_changed(before, table.snapshot().files, "DELTA-RS ZORDER")


class DeltaZOrder(ZOrderHalfway):
    """The peer: Delta Lake's ``OPTIMIZE ... ZORDER BY`` (its own Spark connector) on the
    same columns at the same point as ``zorder-halfway``.

    The table is lakelayout's, built from the same inserts; Delta rewrites it
    whole, with ``maxFileSize`` aimed at the files inserted.
    """

    name = "delta-zorder"
    description = "Delta OPTIMIZE ZORDER BY (3 most queried columns) halfway"
    needs_delta_connector = True

    def create_table(self, ctx: Context, path: str, df: DataFrame) -> Table:
        from lakelayout.evaluation import delta_oss

        delta_oss.require_connector(df.sparkSession)
        table = super().create_table(ctx, path, df)
        # Delta refuses to Z-order on columns it keeps no statistics on (default: first 32)
        delta_oss.collect_stats_on_every_column(df.sparkSession, table.uri)
        return table

    def _reorganize(self, ctx: Context) -> None:
        from lakelayout.evaluation import delta_oss

        columns, table = self.columns, ctx.table
        self.description = f"Delta OPTIMIZE ZORDER BY ({', '.join(columns)}) halfway"
        ctx.rewrite(
            "delta zorder",
            lambda: delta_oss.optimize(
                table.spark, table.uri, zorder_by=columns, files=ctx.files_inserted
            ),
        )


class LiquidPolicy(Policy):
    """CLUSTER BY ``columns`` (default: the 3 most queried of the workload); OPTIMIZE
    (incremental liquid clustering) after each insert batch."""

    name = "liquid"

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        self.columns = list(columns) if columns else None
        self.description = "liquid clustering, OPTIMIZE after every insert"

    def cluster_by(self, ctx: Context) -> list[str] | None:
        if self.columns is None:
            self.columns = most_queried(ctx.predicates(ctx.workload), 3)
        self.description = f"CLUSTER BY ({', '.join(self.columns)}), OPTIMIZE after every insert"
        return self.columns

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        aim_file_count(ctx.table, ctx.files_inserted)
        ctx.rewrite("liquid optimize", lambda: ctx.table.optimize.run(one_file_per_block=True))


class DeltaLiquid(LiquidPolicy):
    """The peer: Delta Lake's liquid clustering (its own Spark connector).

    The table is created by Delta (``CREATE TABLE ... CLUSTER BY``, the 3 most
    queried columns of the workload, as ``liquid``), every batch is appended
    by Delta's writer and followed by Delta's ``OPTIMIZE`` (incremental: new
    files and partial ZCubes; below Delta's 100 GiB minimum cube size every
    cube is partial, so every OPTIMIZE reclusters the whole table).
    """

    name = "delta-liquid"
    needs_delta_connector = True

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        super().__init__(columns)
        self.description = "Delta liquid clustering, Delta OPTIMIZE after every insert"

    def create_table(self, ctx: Context, path: str, df: DataFrame) -> Table:
        from lakelayout.api import Table
        from lakelayout.evaluation import delta_oss

        spark = df.sparkSession
        delta_oss.require_connector(spark)
        columns = self.cluster_by(ctx)
        assert columns is not None
        self.description = (
            f"Delta CLUSTER BY ({', '.join(columns)}), Delta OPTIMIZE after every insert"
        )
        delta_oss.create_clustered(spark, path, df, columns)
        return Table(path, spark=spark)

    def append(self, ctx: Context, df: DataFrame) -> None:
        from lakelayout.evaluation import delta_oss

        delta_oss.append(ctx.table.spark, ctx.table.uri, df)

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        from lakelayout.evaluation import delta_oss

        table = ctx.table
        ctx.rewrite(
            "delta optimize",
            lambda: delta_oss.optimize(table.spark, table.uri, files=ctx.files_inserted),
        )


def _fit_qdtree(ctx: Context, target_blocks: int) -> Layout:
    from lakelayout.layouts.qdtree import QdTreeLayout

    return QdTreeLayout.fit(ctx.sample(), ctx.predicates(ctx.workload), target_blocks=target_blocks)


def _fit_pando(ctx: Context, target_blocks: int) -> Layout:
    from lakelayout.layouts.pando import PandoLayout

    return PandoLayout.fit(
        ctx.sample(),
        ctx.predicates(ctx.workload),
        target_blocks=target_blocks,
        k=2,
        max_leaves=24,
    )


def _fit_sopz(ctx: Context, target_blocks: int) -> Layout:
    from lakelayout.layouts import SOPZLayout

    workload = ctx.predicates(ctx.workload)
    return SOPZLayout.fit(
        ctx.sample(),
        workload,
        columns=most_queried(workload, 2),
        target_blocks=target_blocks,
        max_features=32,
    )


def _fit_hilbert(ctx: Context, target_blocks: int) -> Layout:
    from lakelayout.layouts import HilbertLayout

    return HilbertLayout.fit(
        ctx.sample(),
        columns=most_queried(ctx.predicates(ctx.workload), 3),
        target_blocks=target_blocks,
    )


# --------------------------------------------------------------------------- online (OReO)


@dataclass(frozen=True)
class OnlineSettings:
    """Settings shared by the online policies and the oracles they are compared with.

    ``alpha`` is a number (rewrite cost in full scans) or ``"measured"``
    (:func:`replay_alpha`); the others are :class:`~lakelayout.online.engine.OnlineConfig`'s,
    plus the candidate layout ``families``.
    """

    alpha: float | str = "measured"
    window: int = 200
    interval: int = 50
    epsilon: float = 0.08
    max_states: int = 8
    gamma: float = 0.0
    predictor: str = "phase"
    predictor_window: int = 0
    predictor_weight: str = "skipped"
    mid_phase_join: bool = False
    fit_before_draw: bool = False
    seed: int = 0
    families: tuple[str, ...] = FAMILIES
    history: int = 0
    admission_sample: int = 0
    half_life: int = 2000
    #: a switch keeps the files already in one block of its target (False: rewrites every
    #: file the target did not write, as before; for comparisons)
    keep_files: bool = True
    #: a switch cuts a block over twice the target file size into several files, as a live
    #: switch does (:func:`apply_blocks`; False: one file per block, as switches before
    #: aa587cf; for comparisons)
    split_blocks: bool = True
    #: lay out what was inserted after a switch with the table's layout when it pays
    #: (a live table's catch-up; False: inserts wait for the next switch, as before)
    catch_up: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.alpha, str) and self.alpha != "measured":
            raise InvalidOption(f"alpha must be a number > 0 or 'measured', got {self.alpha!r}")
        self.config("oreo", 1.0 if isinstance(self.alpha, str) else self.alpha)
        check_families(list(self.families))

    def config(self, policy: str, alpha: float) -> OnlineConfig:
        return OnlineConfig(
            alpha=alpha,
            policy=policy,
            window=self.window,
            interval=self.interval,
            epsilon=self.epsilon,
            max_states=self.max_states,
            gamma=self.gamma,
            predictor=self.predictor,
            predictor_window=self.predictor_window,
            predictor_weight=self.predictor_weight,
            mid_phase_join=self.mid_phase_join,
            # the early candidate round serves OReO's draw; greedy and regret do not draw
            fit_before_draw=self.fit_before_draw if policy == "oreo" else False,
            seed=self.seed,
            history=self.history,
            admission_sample=self.admission_sample,
            half_life=self.half_life,
            catch_up=self.catch_up,
        )


#: (sample id, window SQL, blocks, families) -> (the sample, fitted candidates), shared by
#: all online policies and oracles of a replay (they see the same windows of the same
#: stream); the sample is held and checked, so a later sample with a reused id never hits
_FITS: dict[
    tuple[int, tuple[str, ...], int, tuple[str, ...]], tuple[pa.Table, list[Candidate], float]
]
_FITS = {}
#: sample id -> (the sample, the cut work of the last window fitted on it): the windows of
#: a stream overlap, and an online policy fitting its windows in turn keeps one, as a live
#: table does, so the seconds a cached fit took are what the policy would have spent
_CUT_MEMOS: dict[int, tuple[pa.Table, CutMemo]] = {}
#: sample id -> (the sample, α, how it was obtained): one α for every policy of a replay
_ALPHAS: dict[int, tuple[pa.Table, float, str]] = {}
#: fits tried per candidate to reach the wanted block count
ONLINE_MAX_FITS = 3
#: a candidate within this share of the wanted block count is taken (the replay compares
#: policies at file counts within 5 %)
ONLINE_WITHIN = 0.02
#: (sample id, family) -> (the sample, target / wanted of the last window's chosen fit):
#: the next window of the stream starts its search there
_START_RATIOS: dict[tuple[int, str], tuple[pa.Table, float]] = {}


def online_sizer(sample: pa.Table) -> Sizer:
    """How the online policies' candidates reach the wanted block count: up to
    :data:`ONLINE_MAX_FITS` fits, the first at the target/wanted ratio that served the
    family's previous window on ``sample`` (a Pando fit lands at about the same share of
    its target window after window), done within :data:`ONLINE_WITHIN`. A window's
    candidates therefore depend on the windows fitted before it on the sample (a review:
    93 blocks alone, 86 after another window); the replay fits its windows in stream
    order, whatever the policies' order, and caches each, so every policy gets the same."""

    def sizer(fit: Callable[[int], Layout], wanted: int, family: str) -> Layout:
        held = _START_RATIOS.get((id(sample), family))
        start = round(wanted * held[1]) if held is not None and held[0] is sample else None
        targets: dict[int, int] = {}

        def fit_noting(target: int) -> Layout:
            layout = fit(target)
            targets[id(layout)] = target
            return layout

        best = fit_with_blocks(
            fit_noting, wanted, max_fits=ONLINE_MAX_FITS, start=start, within=ONLINE_WITHIN
        )
        _START_RATIOS[(id(sample), family)] = (sample, targets[id(best)] / wanted)
        return best

    return sizer


def window_candidates(
    ctx: Context, predicates: Sequence[Predicate], blocks: int, families: Sequence[str]
) -> list[Candidate]:
    """Candidates fitted on ``predicates`` with about ``blocks`` blocks (cached per replay)."""
    return timed_window_candidates(ctx, predicates, blocks, families)[0]


def timed_window_candidates(
    ctx: Context, predicates: Sequence[Predicate], blocks: int, families: Sequence[str]
) -> tuple[list[Candidate], float]:
    """:func:`window_candidates` and the seconds fitting them took when they were made:
    the cache spares the replay's time, not a policy's bill (each online policy is
    charged the fit as if it had made it)."""
    sample = ctx.sample()
    key = (id(sample), tuple(p.sql() for p in predicates), blocks, tuple(families))
    cached = _FITS.get(key)
    if cached is None or cached[0] is not sample:
        held = _CUT_MEMOS.get(id(sample))
        if held is None or held[0] is not sample:
            held = _CUT_MEMOS[id(sample)] = (sample, CutMemo())
        memo = held[1]
        started = time.perf_counter()
        found = fit_candidates(
            sample,
            predicates,
            blocks=blocks,
            families=families,
            sizer=online_sizer(sample),
            memo=memo,
        )
        cached = _FITS[key] = (sample, found, time.perf_counter() - started)
    return cached[1], cached[2]


def replay_alpha(ctx: Context, settings: OnlineSettings) -> tuple[float, str]:
    """α for the online policies and oracles of this replay, and how it was obtained.

    Given: as is. Measured: a rewrite is timed on a scratch copy of the
    replayed table (:func:`lakelayout.online_table.measure_alpha`: one file
    per block, as a switch writes), scaled to the table's bytes, and divided
    by the part of the replay's full-scan time (workload queries over every
    row) that grows with the bytes read: the full scan less the per-query
    fixed overhead (a scan keeping zero files, measured in spark mode). The
    decisions price a query by the fraction of the table's bytes it reads, so
    a full scan's bytes are their unit; the fixed overhead is paid by every
    state alike and buys nothing a switch can save. Measured once per replay.
    """
    if not isinstance(settings.alpha, str):
        return float(settings.alpha), "given"
    sample = ctx.sample()
    cached = _ALPHAS.get(id(sample))
    if cached is not None and cached[0] is sample:
        return cached[1], cached[2]
    from lakelayout.online_table import alpha_per_scan_bytes, measure_alpha

    m = measure_alpha(ctx.table)
    table_bytes = int(ctx.table.snapshot().files.total_bytes)
    full = float(getattr(ctx, "full_scan_seconds", 0.0) or 0.0)
    assert m.rewrite_seconds is not None and m.scan_seconds is not None
    rewrite = m.rewrite_seconds * table_bytes / max(m.bytes, 1)
    fixed = float(getattr(ctx, "zero_scan_seconds", 0.0) or 0.0)
    if full > 0:
        alpha, unit = alpha_per_scan_bytes(rewrite, full, fixed)
        how = (
            f"measured: rewrite {m.rewrite_seconds:.2f} s of {m.bytes:,} B scaled to "
            f"{table_bytes:,} B = {rewrite:.2f} s / {unit}"
        )
    else:
        alpha, how = (
            m.alpha,
            f"measured: rewrite {m.rewrite_seconds:.2f} s / scan {m.scan_seconds:.3f} s",
        )
    _ALPHAS[id(sample)] = (sample, alpha, how)
    return alpha, how


def latest_snapshot(ctx: Context) -> Snapshot:
    """The table's latest snapshot: the context's (a replay reuses it until the next
    commit) when it offers one, else read from the log."""
    cached = getattr(ctx, "snapshot", None)
    return cached() if callable(cached) else ctx.table.snapshot()


def apply_blocks(
    ctx: Context, layout: Layout, files: Sequence[str], keep: Mapping[str, int] | None = None
) -> OptimizeMetrics:
    """``optimize.apply(layout, files)`` writing files as a live table's switch and the
    advisor's rewrite write them: a block up to twice the table's target file size is one
    file, a larger one (a leaf no query of the fit cuts) is cut into several of consecutive
    key ranges. The online policies' candidates and their oracles' are fitted for about
    one block per inserted file, so only such leaves gain files."""
    from lakelayout.cluster.config import block_roll_size

    roll = block_roll_size(latest_snapshot(ctx).configuration)
    return ctx.table.optimize.apply(layout, list(files), target_file_size=roll, keep=keep)


def _rewrite_to(
    ctx: Context,
    layout: Layout,
    label: str,
    *,
    keep_files: bool = True,
    split_blocks: bool = True,
    run: Callable[[str, Callable[[], OptimizeMetrics]], None] | None = None,
) -> None:
    """Rewrite the files not already laid out by ``layout`` (:func:`apply_blocks`; see
    :func:`~lakelayout.online_table.plan_switch`: a file whose statistics put it in one
    block is kept, and recorded as that block). ``keep_files=False``: every file
    ``layout`` did not write is rewritten (what switches did before they kept files;
    for comparisons); ``split_blocks=False``: one file per block however large (what
    switches wrote before they cut large blocks; for comparisons). ``run``: the rewrite
    to call (default ``ctx.rewrite``)."""
    from lakelayout.online_table import laid_out_by, plan_switch

    snap = latest_snapshot(ctx)
    if keep_files:
        rewrite, keep = plan_switch(ctx.table.uri, snap.files, layout)
    else:
        rewrite, keep = ~laid_out_by(ctx.table.uri, snap.files, layout), {}
    files = [str(p) for p, r in zip(snap.files.paths, rewrite, strict=True) if r]

    def write() -> OptimizeMetrics:
        if split_blocks:
            return apply_blocks(ctx, layout, files, keep)
        return ctx.table.optimize.apply(layout, files, one_file_per_block=True, keep=keep)

    (run or ctx.rewrite)(f"switch to {label}", write)


_ONLINE_DESCRIPTIONS = {
    "oreo": "OReO (D-UMTS counters, random switches, phases)",
    "greedy": "Greedy (switch when another state is cheaper on the window)",
    "regret": "Regret (switch when the saving since adoption exceeds α)",
}


class OnlinePolicy(Policy):
    """``oreo``, ``greedy``, ``regret``: see one query at a time (online).

    They share the layout manager (candidates fitted on the sliding window,
    ε-admission) and differ in the decision rule. The table starts as
    inserted; a switch rewrites every file not laid out by the chosen layout.
    Inserts made after a switch are laid out by a catch-up, as on a live table
    (:meth:`~lakelayout.online.engine.OnlineEngine.wants_catch_up`; off with
    ``catch_up=False``), or else by the next switch.

    Their own time counts in their total, as the advisor's does
    (``ctx.record_overhead``): every hook is timed, less the rewrites (timed by
    ``ctx.rewrite``) and α's measurement (a calibration before the stream, as
    ``lakelayout calibrate`` is the advisor's). Each policy prices queries with a
    cost book of its own, and is charged each window fit the seconds it took when
    it was made, whichever policy made it first: what the replay shares to save
    its own time no policy gets for free.
    """

    knows = "online"

    def __init__(self, kind: str, settings: OnlineSettings, name: str | None = None) -> None:
        self.name = name or kind
        self.kind = kind
        self.settings = settings
        self.engine: OnlineEngine | None = None
        self.alpha_note = ""
        self.description = f"[online] {_ONLINE_DESCRIPTIONS[kind]}"
        self._unlaid: UnlaidFiles | None = None  # made with the first catch-up account
        #: seconds not handed to ``ctx.record_overhead`` (the replay adds them)
        self.overhead_seconds = 0.0
        #: every second charged: (stream position, what, seconds)
        self.overhead_events: list[tuple[int, str, float]] = []
        #: within a hook: seconds not charged (rewrites, α, fits run), fit seconds charged
        self._apart = 0.0
        self._fitted = 0.0

    @contextmanager
    def _deciding(self, ctx: Context, kind: str) -> Iterator[None]:
        """Charge the block's seconds as ``kind`` overhead, less what it set apart, and the
        window fits it used as ``online fit``."""
        started = time.perf_counter()
        self._apart = self._fitted = 0.0
        try:
            yield
        finally:
            self._overhead(ctx, kind, max(0.0, time.perf_counter() - started - self._apart))
            if self._fitted > 0:
                self._overhead(ctx, "online fit", self._fitted)

    def _set_apart(self, started: float) -> None:
        self._apart += time.perf_counter() - started

    def _rewrite(self, ctx: Context, kind: str, action: Callable[[], OptimizeMetrics]) -> None:
        started = time.perf_counter()
        try:
            ctx.rewrite(kind, action)
        finally:
            self._set_apart(started)

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        if self.engine is not None:
            return
        with self._deciding(ctx, "online start"):
            self._start(ctx)

    def _start(self, ctx: Context) -> None:
        from lakelayout.online.costs import CostBook

        started = time.perf_counter()
        alpha, self.alpha_note = replay_alpha(ctx, self.settings)
        self._set_apart(started)
        families = self.settings.families

        def fit(predicates: Sequence[Predicate]) -> list[Candidate]:
            began = time.perf_counter()
            found, seconds = timed_window_candidates(
                ctx, predicates, max(1, ctx.files_inserted), families
            )
            self._set_apart(began)
            self._fitted += seconds
            return found

        self.engine = OnlineEngine(
            self.settings.config(self.kind, alpha), ctx.sample(), fit, book=CostBook(ctx.sample())
        )
        self._describe()

    def on_query(self, ctx: Context, query: Query) -> None:
        with self._deciding(ctx, "online observe"):
            self._observe(ctx, query)

    def _observe(self, ctx: Context, query: Query) -> None:
        from lakelayout.online.costs import table_costs

        engine = self.engine
        assert engine is not None, "the first insert starts the engine"
        snap = latest_snapshot(ctx)
        uri = ctx.table.uri

        def real(predicates: Sequence[Predicate]) -> np.ndarray:
            return table_costs(
                predicates, snap.files, root=uri, schema=snap.schema, fmt=snap.table_format
            )

        predicate = ctx.predicates([query])[0]
        engine.observe(query.sql, predicate, real)
        if engine.config.catch_up:
            from lakelayout.online_table import charge_unlaid

            charge_unlaid(engine, [predicate], snap, self._unlaid_files(ctx).of(snap, engine)[0])

    def _unlaid_files(self, ctx: Context) -> UnlaidFiles:
        from lakelayout.online_table import UnlaidFiles

        if self._unlaid is None:
            self._unlaid = UnlaidFiles(ctx.table.uri)
        return self._unlaid

    def may_reorganize(self, ctx: Context) -> None:
        if self.engine is None:
            return
        with self._deciding(ctx, "online decision"):
            self._may_switch(ctx)

    def _may_switch(self, ctx: Context) -> None:
        engine = self.engine
        assert engine is not None
        if not engine.wants_switch():
            self._may_catch_up(ctx)
            return
        record = engine.begin()
        layout = engine.layout_of(record.target)
        assert layout is not None
        _rewrite_to(
            ctx,
            layout,
            record.target_label,
            keep_files=self.settings.keep_files,
            split_blocks=self.settings.split_blocks,
            run=lambda kind, action: self._rewrite(ctx, kind, action),
        )
        engine.committed(record)
        self._describe()

    def _may_catch_up(self, ctx: Context) -> None:
        """A catch-up as a live table's (``online_table``): when the files the table's
        layout did not write cost the queries what rewriting them would."""
        from lakelayout.online_table import plan_catch_up

        engine = self.engine
        assert engine is not None
        layout = engine.layout_of(engine.applied)
        if layout is None or not engine.config.catch_up:
            return
        snap = latest_snapshot(ctx)
        found = self._unlaid_files(ctx)
        unlaid, keep = found.of(snap, engine)
        planned = plan_catch_up(engine, snap.files, unlaid, found.written(snap, engine))
        if planned is None:
            return
        rewrite, share = planned
        record = engine.begin_catch_up(share)
        files = [str(p) for p, r in zip(snap.files.paths, rewrite, strict=True) if r]
        self._rewrite(
            ctx,
            f"catch-up in {record.target_label}",
            lambda: apply_blocks(ctx, layout, files, keep),
        )
        engine.committed(record)
        self._describe()

    def _describe(self) -> None:
        engine = self.engine
        assert engine is not None
        c = engine.config
        switches = sum(s.status == "done" and s.kind == "switch" for s in engine.history)
        caught = sum(s.status == "done" and s.kind == "catch-up" for s in engine.history)
        extra = ""
        if c.policy == "oreo":
            extra = f", seed {c.seed}, γ={c.gamma:g}"
            if c.predictor == "recent":
                extra += f", predictor: last {c.predictor_window or c.window} queries"
            if c.predictor_weight != "skipped":
                extra += f", {c.predictor_weight} weights"
            if c.mid_phase_join:
                extra += ", mid-phase join"
            if c.fit_before_draw:
                extra += f", fit before a draw ({engine.draw_fits} early rounds)"
        self.description = (
            f"[online] {_ONLINE_DESCRIPTIONS[self.kind]}{extra}; α={c.alpha:.1f} "
            f"({self.alpha_note}); window {c.window}, candidates every {c.interval}, "
            f"ε={c.epsilon:g}, ≤{c.max_states} states; {switches} switches"
            + (f", {caught} catch-ups" if caught else "")
        )


def shared(ctx: Context, key: str, make: Callable[[], _T]) -> _T:
    """``make()`` once per replay for every policy asking with ``key`` (the context's
    ``memo``), or every time when the context shares nothing."""
    memo = getattr(ctx, "memo", None)
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return cast("_T", memo[key])


def cost_book(ctx: Context) -> CostBook:
    """The replay's one :class:`~lakelayout.online.costs.CostBook` on ``ctx.sample()``: online
    policies and oracles price the same candidates on the same queries once."""
    sample = ctx.sample()
    book = shared(ctx, f"cost book {id(sample)}", lambda: CostBook(sample))
    return book if book.sample is sample else CostBook(sample)


class OraclePolicy(Policy):
    """``static`` and ``offline-optimal``: know the whole workload in advance (oracle).

    Candidates: every layout the manager would fit on the sliding window (and on
    its history sample, when on) over the whole stream, plus one per family
    fitted on the whole workload. Each
    is priced on every query of the stream by its virtual files (the same
    metadata costs OReO uses), then

    * ``static`` lays the table out with the cheapest single candidate;
    * ``offline-optimal`` follows the exact dynamic-programming schedule over
      all candidates with switching cost α (free choice of the first layout),
      the lower bound of every policy over these states.
    """

    knows = "oracle"

    def __init__(self, kind: str, settings: OnlineSettings) -> None:
        self.name = kind
        self.kind = kind
        self.settings = settings
        self.candidates: list[Candidate] = []
        self.schedule: list[int] = []
        self.applied: int | None = None
        self.description = f"[oracle] {kind}"
        self.fit_seconds = 0.0

    def prepare(self, ctx: Context) -> None:
        # static and offline-optimal know the same things: in one replay they fit the
        # candidates and price them once (the seconds reported are the fitting's)
        self.candidates, self.fit_seconds = shared(
            ctx, f"oracle candidates {self.settings!r}", lambda: self._fit(ctx)
        )

    def _fit(self, ctx: Context) -> tuple[list[Candidate], float]:
        started = time.perf_counter()
        predicates = ctx.predicates(ctx.workload)
        batches = int(getattr(getattr(ctx, "dataset", None), "batches", 1) or 1)
        blocks = max(1, ctx.blocks_per_batch * batches)
        s = self.settings
        found: list[Candidate] = []
        history = History(s.history, s.seed)  # the manager's sample, query by query
        for end in range(s.interval, len(predicates) + 1, s.interval):
            window = predicates[max(0, end - s.window) : end]
            found += window_candidates(ctx, window, blocks, s.families)
            for i in range(end - s.interval, end):
                history.add(i, "", predicates[i])
            if len(history) and end > s.window:
                sampled = [p for _, _, p in history.items()]
                found += window_candidates(ctx, sampled, blocks, s.families)
        found += window_candidates(ctx, predicates, blocks, s.families)
        unique: dict[str, Candidate] = {}
        for cand in found:
            unique.setdefault(cand.layout.to_json(), cand)
        return list(unique.values()), time.perf_counter() - started

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        if not self.schedule:
            self._plan(ctx)
        at = min(len(ctx.seen), len(self.schedule) - 1)
        self.applied = self.schedule[at]
        cand = self.candidates[self.applied]
        files = list(new_files)
        ctx.rewrite(f"apply {cand.label}", lambda: apply_blocks(ctx, cand.layout, files))

    def _plan(self, ctx: Context) -> None:
        from lakelayout.online.baselines import offline_optimum, static_best

        if not self.candidates:
            raise InvalidOption(f"{self.kind}: no candidate layout could be fitted on the workload")
        alpha, how = replay_alpha(ctx, self.settings)
        predicates = ctx.predicates(ctx.workload)
        book = cost_book(ctx)
        costs = shared(
            ctx,
            f"oracle costs {self.settings!r}",
            lambda: book.matrix([c.layout for c in self.candidates], predicates),
        )
        if self.kind == "static":
            best, total = static_best(costs)
            self.schedule = [best] * len(predicates)
            self.description = (
                f"[oracle] best single layout for the whole workload: "
                f"{self.candidates[best].label} (of {len(self.candidates)} candidates, "
                f"estimated {total:.1f} full scans); "
                f"α={alpha:.1f} ({how})"
            )
        else:
            plan = offline_optimum(costs, alpha)
            self.schedule = [int(i) for i in plan.path]
            self.description = (
                f"[oracle] exact DP over {len(self.candidates)} candidate layouts, "
                f"{plan.switches} planned switches, estimated cost {plan.total:.1f} full scans; "
                f"α={alpha:.1f} ({how})"
            )

    def may_reorganize(self, ctx: Context) -> None:
        if not self.schedule:
            return
        target = self.schedule[min(len(ctx.seen), len(self.schedule) - 1)]
        if target == self.applied:
            return
        cand = self.candidates[target]
        _rewrite_to(ctx, cand.layout, cand.label, keep_files=self.settings.keep_files)
        self.applied = target


ONLINE_POLICIES: dict[str, Callable[[OnlineSettings], Policy]] = {
    "oreo": lambda s: OnlinePolicy("oreo", s),
    # OReO with the uniform draw (γ = 0, the analysed algorithm) whatever the run's γ: beside
    # ``oreo`` it shows what the predictor (§IV-C; the paper's experiments use γ = 1) changes
    "oreo-uniform": lambda s: OnlinePolicy(
        "oreo", dataclasses.replace(s, gamma=0.0), name="oreo-uniform"
    ),
    # OReO whose predictor weighs states by the last ``window`` queries, not the last phase
    # (γ as the run's; with γ = 0 it is oreo-uniform)
    "oreo-recent": lambda s: OnlinePolicy(
        "oreo", dataclasses.replace(s, predictor="recent"), name="oreo-recent"
    ),
    # oreo-recent whose switches rewrite every file they did not write (switches before they
    # kept the files already in one block of the target): beside oreo-recent, what keeping saves
    "oreo-recent-all-files": lambda s: OnlinePolicy(
        "oreo",
        dataclasses.replace(s, predictor="recent", keep_files=False),
        name="oreo-recent-all-files",
    ),
    # oreo-recent whose switches write one file per block however large (switches before
    # they cut a block over twice the target file size): beside oreo-recent, what cutting does
    "oreo-recent-per-block": lambda s: OnlinePolicy(
        "oreo",
        dataclasses.replace(s, predictor="recent", split_blocks=False),
        name="oreo-recent-per-block",
    ),
    # oreo-recent without catch-ups whatever the run's setting: beside oreo-recent in one
    # run (the same stream, order rotated), what laying out the inserted files saves
    "oreo-recent-no-catch-up": lambda s: OnlinePolicy(
        "oreo",
        dataclasses.replace(s, predictor="recent", catch_up=False),
        name="oreo-recent-no-catch-up",
    ),
    "greedy": lambda s: OnlinePolicy("greedy", s),
    "regret": lambda s: OnlinePolicy("regret", s),
    "static": lambda s: OraclePolicy("static", s),
    "offline-optimal": lambda s: OraclePolicy("offline-optimal", s),
}


class AutoPolicy(Policy):
    """The advisor (issue 12, thesis ch. 5): starts knowing nothing and learns only from
    its own table's query log.

    Every query the replay runs is in the table's query log (``Table.scan``
    logs it in spark mode; in logical mode, where the replay prunes without
    scanning, the policy logs it itself with ``advisor.record_query``). After
    every insert, and again when the log has doubled since the last decision
    (at least ``recheck`` queries), the advisor decides with the
    calibrated cost model (``lakelayout calibrate``; documented defaults
    otherwise) whether rewriting the never-clustered files pays, expecting
    as many future queries as it has seen (it does not know the stream's
    length). Rewrites go through ``ctx.rewrite``; the advisor's own time
    (logging in logical mode, analysis, sampling, fitting, recording) goes to
    ``ctx.record_overhead`` when the context has it, else it is summed in
    :attr:`overhead_seconds` for the replay to add to the run's total. Until
    ``min_queries`` queries are logged there is nothing to learn from, and the
    advisor is not asked. A rewrite must save more than its cost × ``margin``
    over the expected queries (default: :class:`~lakelayout.advisor.benefit.
    BenefitConfig`'s 1.5; the replay's ``auto-breakeven`` uses 1).
    """

    name = "auto"
    description = "advisor: learns from its own query log, rewrites when the cost model says so"

    def __init__(
        self,
        *,
        model: CostModel | None = None,
        recheck: int = 10,
        window: int | None = None,
        min_queries: int = 5,
        margin: float | None = None,
        name: str = "auto",
    ) -> None:
        from lakelayout.advisor.benefit import BenefitConfig

        self.name = name
        self.model = model
        self.min_queries = min_queries
        #: rewrite when the saving over the expected queries > cost × margin
        self.margin = BenefitConfig().margin if margin is None else margin
        self.recheck = recheck
        #: queries of the log a decision looks at (None: the advisor's default, what a
        #: table gets outside the replay)
        self.window = window
        #: advisor seconds not handed to ``ctx.record_overhead`` (the replay adds them)
        self.overhead_seconds = 0.0
        #: every advisor second, handed over or not: (stream position, what, seconds)
        self.overhead_events: list[tuple[int, str, float]] = []
        self.decisions: list[str] = []
        self._logged = 0
        self._at_decision = 0
        self._added_before = 0
        self._rewrites: list[str] = []

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        self._decide(ctx, "insert")

    def may_reorganize(self, ctx: Context) -> None:
        from lakelayout.advisor.querylog import records_added

        self._added_before = records_added(ctx.table.uri)
        since = self._logged - self._at_decision
        if since >= max(self.recheck, self._at_decision):
            self._decide(ctx, "queries")

    def on_query(self, ctx: Context, query: Query) -> None:
        from lakelayout.advisor.querylog import records_added

        started = time.perf_counter()
        if records_added(ctx.table.uri) == self._added_before:  # the replay did not scan
            ctx.table.advisor.record_query(query.sql, source="replay")
            self._overhead(ctx, "advisor log", time.perf_counter() - started)
        self._logged += 1

    def _decide(self, ctx: Context, trigger: str) -> None:
        from lakelayout.advisor.advisor import AutoResult
        from lakelayout.advisor.benefit import BenefitConfig
        from lakelayout.advisor.costmodel import CostModel
        from lakelayout.advisor.recommend import Recommendation

        if self._logged < self.min_queries:
            return
        started = time.perf_counter()
        advisor = ctx.table.advisor
        if advisor.model is None:
            advisor.model = self.model or CostModel.load()
        if self.window is not None:
            advisor.window = self.window
        advisor.benefit = BenefitConfig(
            horizon_queries=float(self._logged), min_queries=self.min_queries, margin=self.margin
        )
        version = ctx.table.version
        self._at_decision = self._logged
        try:
            rec = advisor.recommend()
        except Exception as exc:  # a failing decision must not end the replay: no rewrite
            rec = Recommendation(f"no rewrite: the advisor failed: {type(exc).__name__}: {exc}")
        result = AutoResult(rec, applied=False)
        spent = time.perf_counter() - started
        if rec.rewrite and rec.chosen is not None:
            ctx.rewrite(f"auto {rec.chosen.family}", lambda: advisor.try_apply(result))
            if result.applied:
                self._rewrites.append(f"{rec.chosen.family} after {self._logged} queries")
        recorded = time.perf_counter()
        advisor.record(result, trigger=f"replay {trigger}", version=version)
        self._overhead(ctx, "advisor decision", spent + time.perf_counter() - recorded)
        self.decisions.append(f"after {self._logged} queries ({trigger}): {result.reason}")
        done = ", ".join(self._rewrites) or "none"
        self.description = (
            f"advisor ({advisor.cost_model().source} cost model): {len(self.decisions)} "
            f"decisions, rewrites: {done}"
        )


#: policies fitted on the whole workload, future queries included: they know what the
#: stream will ask, which no real table does (labelled as such in tables and reports)
ORACLES = frozenset({"qdtree", "pando", "sop-z", "hilbert"})


def policy_label(name: str) -> str:
    """The policy's name as printed: oracles are marked.

    >>> policy_label("qdtree"), policy_label("auto")
    ('qdtree (oracle)', 'auto')
    """
    return f"{name} (oracle)" if name in ORACLES else name


POLICIES: dict[str, Callable[[], Policy]] = {
    "none": Policy,
    "sorted": SortedPolicy,
    "zorder-halfway": ZOrderHalfway,
    "liquid": LiquidPolicy,
    "deltars-zorder": DeltaRsZOrder,
    "delta-zorder": DeltaZOrder,
    "delta-liquid": DeltaLiquid,
    "qdtree": lambda: LayoutPolicy("qdtree", _fit_qdtree, "Qd-tree fitted on the whole workload"),
    "pando": lambda: LayoutPolicy(
        "pando", _fit_pando, "Pando k=2 (<=24 leaves/tree) fitted on the whole workload"
    ),
    "sop-z": lambda: LayoutPolicy("sop-z", _fit_sopz, "SOP+Z (2 most queried columns)"),
    "hilbert": lambda: LayoutPolicy("hilbert", _fit_hilbert, "Hilbert (3 most queried columns)"),
    "auto": AutoPolicy,
    # the advisor with margin 1: it rewrites as soon as the queries seen so far would have
    # paid for the rewrite (with "as many future queries as seen", the ski-rental
    # break-even rule, 2-competitive; the default margin 1.5 waits for more)
    "auto-breakeven": lambda: AutoPolicy(margin=1.0, name="auto-breakeven"),
}


def make_policies(names: Sequence[str], online: OnlineSettings | None = None) -> list[Policy]:
    """Fresh policy objects for ``names`` (validated before anything runs); the online
    policies and their oracles take ``online`` (default settings when None)."""
    known = [*POLICIES, *ONLINE_POLICIES]
    out: list[Policy] = []
    settings = online or OnlineSettings()
    for name in names:
        if name in POLICIES:
            out.append(POLICIES[name]())
        elif name in ONLINE_POLICIES:
            out.append(ONLINE_POLICIES[name](settings))
        else:
            raise InvalidOption(
                f"unknown policy {name!r}{closest(name, known)}; known: {', '.join(known)}"
            )
    return out
