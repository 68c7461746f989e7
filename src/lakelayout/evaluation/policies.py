"""Layout policies: what a table does on insert, on query, and when it may reorganize.

A policy sees the stream through three hooks, called by the replay in order:

* ``on_insert(ctx, new_files)`` after an insert batch was committed;
* ``on_query(ctx, query)`` after a query ran (to learn from the workload);
* ``may_reorganize(ctx)`` before every query: the moment to rewrite.

Every rewrite goes through ``ctx.rewrite(kind, action)``, which times it and
records files and bytes written, so policies never account for themselves.
The advisor and the online reorganizer plug in through the same interface.

Equal file counts (B1 compares layouts "with equal file counts"): every
policy ends the stream with about as many live files as were inserted (the
``none`` policy's count), so no layout is flattered by more, smaller files:

* fitted layouts (``sorted``, ``qdtree``, ``pando``, ``sop-z``, ``hilbert``)
  are fitted with as close to ``blocks_per_batch`` blocks as a few fits reach
  (:func:`fit_with_blocks`) and applied with one file per block;
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

import math
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from lakelayout.cluster.metrics import OptimizeMetrics
from lakelayout.errors import InvalidOption, closest
from lakelayout.evaluation.workloads import Query
from lakelayout.layouts.base import Layout

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from lakelayout.api import Table
    from lakelayout.expr.nodes import Expr, Predicate


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


#: target file size while inserting: large, so a range partition is one file
INSERT_TARGET = 1 << 30


class Policy:
    """The no-op policy (``none``): files stay as inserted, in arrival order."""

    name = "none"
    description = "files as inserted, in arrival order"
    #: whether the policy runs Delta Lake's own Spark connector (checked before the replay)
    needs_delta_connector = False

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
    fit: Callable[[int], Layout], wanted: int, *, max_fits: int = MAX_FITS
) -> Layout:
    """The layout of ``fit(target_blocks)`` whose ``n_blocks`` is closest to ``wanted``.

    Workload-aware layouts do not hit ``target_blocks`` exactly: a Qd-tree
    stops at leaves of at least half the target size, Pando merges cells
    into blocks of at least the target size (so fewer blocks). The target is
    rescaled by ``wanted / n_blocks`` after each fit (at most ``max_fits``
    fits, never above ``4 * wanted``); ties go to the earlier (smaller) fit.
    """
    if wanted < 1:
        raise InvalidOption(f"wanted blocks must be >= 1, got {wanted}")
    best: Layout | None = None
    tried: set[int] = set()
    target = wanted
    for _ in range(max(1, max_fits)):
        tried.add(target)
        layout = fit(target)
        n = layout.n_blocks
        if best is None or abs(n - wanted) < abs(best.n_blocks - wanted):
            best = layout
        if n == wanted:
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
    df = read_files(table.spark, table.uri, list(files), snap.schema, with_file=False)
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
}


def make_policies(names: Sequence[str]) -> list[Policy]:
    """Fresh policy objects for ``names`` (validated before anything runs)."""
    out = []
    for name in names:
        if name not in POLICIES:
            raise InvalidOption(
                f"unknown policy {name!r}{closest(name, POLICIES)}; known: {', '.join(POLICIES)}"
            )
        out.append(POLICIES[name]())
    return out
