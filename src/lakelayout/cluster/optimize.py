"""OPTIMIZE: compaction, ZORDER BY / Hilbert, liquid clustering with ZCubes, any layout.

:class:`Optimizer` is the ``table.optimize`` namespace. Every operation plans
on one snapshot (pure, :mod:`lakelayout.cluster.plan`), rewrites in Spark
(:mod:`lakelayout.cluster.rewrite`), records provenance *before* committing
(:mod:`lakelayout.cluster.provenance`), and commits adds + removes with
``data_change=False`` and the snapshot's version as ``read_version``:

* a concurrent *append* between read and commit does not conflict; its files
  are simply not touched (the rewrite only removes files it read);
* a concurrent commit that removed a file being rewritten makes this
  rewrite lose: it *yields* (gives up quietly, the files it wrote are deleted,
  the table is unchanged by it) and its metrics say ``yielded`` and why
  (the winning commit). Maintenance never fails a user's operation, and never
  fails because of one;
* a user operation that already lost a race to a rewrite leaves a waiting
  marker (:mod:`lakelayout.table.conflicts`); a rewrite that finds one before
  it starts or before it commits yields too, so the user operation's retry
  wins.

Liquid clustering commits once per cube, so yielding (or a crash) after
``k`` cubes keeps those ``k`` (the remaining candidates stay as they were).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import numbers
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout import arguments as args
from lakelayout.cluster import config as cfg
from lakelayout.cluster import delta_liquid
from lakelayout.cluster.optimize_metrics import OptimizeMetrics, StepClock
from lakelayout.cluster.plan import (
    PlannedFile,
    by_partition,
    compaction_bins,
    plan_cubes,
    planned_files,
)
from lakelayout.cluster.provenance import FileProvenance, ProvenanceStore, layout_columns
from lakelayout.cluster.rewrite import (
    DRIVER_SAMPLE_MAX_ROWS,
    FileSource,
    RoutedFile,
    Router,
    read_files,
    sample_files,
    sample_rows,
    write_routed,
)
from lakelayout.errors import (
    AfterCommitError,
    CommitConflict,
    InvalidOption,
    LakelayoutError,
    LayoutError,
)
from lakelayout.layouts.base import Layout, file_blocks
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.ranks import Dimension
from lakelayout.layouts.zorder import CurveLayout, ZOrderLayout
from lakelayout.table import delta
from lakelayout.table.conflicts import describe as describe_winners
from lakelayout.table.conflicts import waiting_operations
from lakelayout.table.datafile import file_location
from lakelayout.table.features import Kind
from lakelayout.table.location import STATE_FOLDER
from lakelayout.table.reader import check_files_exist
from lakelayout.table.schema import check_reserved
from lakelayout.table.writer import DATA_PAGE_BYTES, parquet_codec, row_group_size

#: the file size a rewrite rolls at with ``one_file_per_block``: never reached
UNBOUNDED_FILE_SIZE = 1 << 62

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.skipping.catalog import IndexCatalog
    from lakelayout.skipping.indexes.base import Index
    from lakelayout.table.delta import Snapshot

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OptimizeHooks:
    """Callbacks around each commit of an operation (progress bars, tests).

    ``before_commit(i)`` runs after commit ``i``'s files are written and its
    provenance recorded, just before the Delta commit (a test can make a
    concurrent write here); ``after_commit(i, version)`` right after it (a
    test can raise here to simulate a crash between two cube commits);
    ``progress(done, total)`` after every commit.
    """

    before_commit: Callable[[int], None] | None = None
    after_commit: Callable[[int, int], None] | None = None
    progress: Callable[[int, int], None] | None = None


NO_HOOKS = OptimizeHooks()


class Yielded(Exception):
    """A maintenance rewrite gave up so as not to fail a user operation (internal)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def waiting_reason(uri: str) -> str | None:
    """Why maintenance must yield now (a user operation is waiting), or None."""
    waiting = waiting_operations(uri)
    if not waiting:
        return None
    return f"a user operation is waiting to commit: {waiting[0]}"


def _yielded(m: OptimizeMetrics, reason: str) -> OptimizeMetrics:
    from dataclasses import replace

    return replace(m, yielded=True, yield_reason=reason)


@dataclass
class _Context:
    """One operation's view of the table: snapshot, settings, files, provenance."""

    uri: str
    spark: SparkSession
    snap: Snapshot
    store: ProvenanceStore
    files: list[PlannedFile]
    target_file_size: int
    #: where the operation's time goes (``OptimizeMetrics.steps``)
    clock: StepClock = dataclasses.field(default_factory=StepClock)
    #: the table's skipping indexes: the files a rewrite writes get their metadata
    #: from the writing tasks (no second read) and it is stored after the commit
    catalog: IndexCatalog | None = None
    #: ``catalog``'s usable declared indexes, bound to the snapshot's schema
    indexes: tuple[Index, ...] = ()

    @property
    def schema(self) -> pa.Schema:
        return self.snap.schema

    @property
    def config(self) -> dict[str, str]:
        return dict(self.snap.configuration)

    @property
    def row_group_bytes(self) -> int:
        """``lakelayout.rowGroupSize``: Arrow bytes per row group of the files written."""
        return row_group_size(self.snap.configuration)

    @property
    def codec(self) -> str:
        """``lakelayout.parquetCodec``: the Parquet codec of the files written."""
        return parquet_codec(self.snap.configuration)

    def by_path(self) -> dict[str, PlannedFile]:
        return {f.path: f for f in self.files}

    @property
    def delta_clustered(self) -> bool:
        """Clustered by Delta's liquid clustering (commits carry its tags)."""
        return delta_liquid.is_delta_clustered(self.snap)

    def clustering(self) -> list[str] | None:
        """The clustering columns: lakelayout's property, or Delta's domain metadata."""
        if self.delta_clustered:
            return delta_liquid.clustering_columns(self.snap, self.spark)
        return cfg.table_clustering(self.snap.configuration, self.snap.table_format)


def _check_clustering(columns: list[str], ctx: _Context) -> None:
    """InvalidOption when a clustering entry no longer fits the table's schema (another
    writer dropped, or renamed without column mapping's record, a column it names)."""
    gone = cfg.dropped_clustering_columns(ctx.snap.configuration, ctx.snap.table_format)
    problem = f"they name {', '.join(map(repr, gone))}, no longer in the table" if gone else ""
    for entry in columns if not gone else ():
        try:
            Dimension(entry).check(ctx.schema)
        except LakelayoutError as exc:
            problem = str(exc)
            break
    if problem:
        raise InvalidOption(
            f"the table's clustering columns ({', '.join(columns)}, table property "
            f"{cfg.CLUSTERING_COLUMNS}) no longer fit its schema: {problem}. Another writer "
            "may have dropped or renamed a column (a rename is followed only where its "
            "physical name was recorded); set the clustering columns again with "
            "Table.cluster_by([...])"
        )


def load_context(uri: str, spark: SparkSession, catalog: IndexCatalog | None = None) -> _Context:
    """Snapshot + provenance of the table at ``uri`` (timed as the ``plan`` step).

    Planned files carry their live rows (rows a deletion vector removed are
    not counted: a rewrite drops them) and their partition values. With the
    table's index ``catalog``, the files the operation writes carry its
    declared indexes' metadata.
    """
    clock = StepClock()
    with clock.step("plan"):
        ctx = _load_context(uri, spark, clock)
        if catalog is not None:
            ctx.catalog, ctx.indexes = catalog, tuple(catalog.for_write(ctx.snap.schema))
        return ctx


def _load_context(uri: str, spark: SparkSession, clock: StepClock) -> _Context:
    snap = delta.snapshot(uri)
    check_reserved(snap.schema.names, "a rewrite")
    store = ProvenanceStore(uri)
    paths = [str(p) for p in snap.files.paths]
    # Delta's own cubes (ZCUBE_ID tags) count as cubes; lakelayout's sidecar wins
    prov = {**delta_liquid.cube_provenance(snap, spark), **store.read(paths)}
    data = snap.data_files_for(paths)
    parts = snap.table_format.partition_columns
    files = planned_files(
        paths,
        snap.files.sizes,
        [f.live_rows for f in data],
        snap.files.modification_times,
        prov,
        [tuple(f.partition_values.get(c) for c in parts) for f in data],
    )
    target = cfg.target_file_size(snap.configuration)
    return _Context(uri, spark, snap, store, files, target, clock)


class Optimizer:
    """``table.optimize``: reorganize files without changing any row."""

    def __init__(
        self,
        uri: str,
        spark: Callable[[], SparkSession],
        indexes: Callable[[], IndexCatalog] | None = None,
    ) -> None:
        self._uri = uri
        self._spark = spark
        #: the table's skipping indexes, which rewritten files are indexed for as written
        self._indexes = indexes

    def _ctx(self) -> _Context:
        catalog = self._indexes() if self._indexes is not None else None
        return load_context(self._uri, self._spark(), catalog)

    # ------------------------------------------------------------ public verbs

    def run(
        self,
        *,
        full: bool = False,
        hooks: OptimizeHooks | None = None,
        one_file_per_block: bool = False,
    ) -> OptimizeMetrics:
        """OPTIMIZE: incremental clustering on a clustered table, else compaction.

        ``full=True`` re-clusters every file (stable cubes and files clustered
        by older columns included), as Delta's ``OPTIMIZE FULL``.
        ``one_file_per_block`` (clustering only): each cube's curve has
        ``round(cube bytes / target file size)`` blocks and every block becomes
        exactly one file (no rolling at the target size, so no small remainder
        files); the file count is then predictable from the target size.
        """
        args.require_bool(full, "full", "optimize.run")
        args.require_bool(one_file_per_block, "one_file_per_block", "optimize.run")
        _check_hooks(hooks, "optimize.run")
        ctx = self._ctx()
        columns = ctx.clustering()
        if columns is None and full:
            raise InvalidOption(
                f"full=True (CLI: --full) re-clusters a clustered table, and '{ctx.uri}' has "
                "no clustering columns (as Delta's OPTIMIZE FULL): Table.cluster_by([...]) "
                "first, or run() without full (CLI: without --full) to compact its small files"
            )
        if columns is None:
            return _compact(ctx, hooks or NO_HOOKS)
        _check_clustering(columns, ctx)
        roll = _roll_size(ctx, one_file_per_block)
        return _liquid(ctx, columns, full=full, hooks=hooks or NO_HOOKS, roll_size=roll)

    def compact(self, *, hooks: OptimizeHooks | None = None) -> OptimizeMetrics:
        """Bin-pack files smaller than ``lakelayout.minFileSize`` into target-size files."""
        _check_hooks(hooks, "optimize.compact")
        return _compact(self._ctx(), hooks or NO_HOOKS)

    def zorder(
        self,
        columns: Sequence[str],
        *,
        hooks: OptimizeHooks | None = None,
        one_file_per_block: bool = False,
    ) -> OptimizeMetrics:
        """OPTIMIZE ZORDER BY: rewrite the whole table on a Z-order curve (one commit).

        The curve has ``ceil(table bytes / target file size)`` blocks, rolled
        into files at the target size; with ``one_file_per_block`` it has
        ``round(table bytes / target file size)`` blocks, each written as
        exactly one file.
        """
        args.require_names(columns, "columns", "optimize.zorder")
        args.require_bool(one_file_per_block, "one_file_per_block", "optimize.zorder")
        _check_hooks(hooks, "optimize.zorder")
        return self._curve(columns, "zorder", hooks, one_file_per_block)

    def hilbert(
        self,
        columns: Sequence[str],
        *,
        hooks: OptimizeHooks | None = None,
        one_file_per_block: bool = False,
    ) -> OptimizeMetrics:
        """Like :meth:`zorder` with the Hilbert curve (Z-order for a single column)."""
        args.require_names(columns, "columns", "optimize.hilbert")
        args.require_bool(one_file_per_block, "one_file_per_block", "optimize.hilbert")
        _check_hooks(hooks, "optimize.hilbert")
        return self._curve(columns, "hilbert", hooks, one_file_per_block)

    def apply(
        self,
        layout: Layout,
        files: Sequence[str] | None = None,
        *,
        hooks: OptimizeHooks | None = None,
        one_file_per_block: bool = False,
        target_file_size: int | None = None,
        keep: Mapping[str, int] | None = None,
    ) -> OptimizeMetrics:
        """Rewrite ``files`` (default: all) with a fitted layout, one or more files per block.

        Rows are routed by ``layout.assign`` inside Spark tasks and ordered by
        ``layout.sort_key`` (a linear layout by its dimensions). Block ids and
        the layout JSON are recorded in the provenance store, so a layout with
        a logical index can answer ``blocks_for`` at query time. A block larger
        than the target file size is rolled into several files, unless
        ``one_file_per_block``: then every non-empty block is exactly one file
        (the file count equals the number of blocks the rows fall into).
        ``target_file_size`` (bytes) rolls at that size instead of the table's
        ``lakelayout.targetFileSize`` for this rewrite only.

        ``keep`` (path -> block id): files already wholly inside one block of
        ``layout`` (e.g. placed by :meth:`Layout.blocks_of_files`), left as they are
        and recorded as that block of ``layout``, so query-time block pruning and a
        later switch see them as laid out. Every row of such a file must be in that
        block as ``layout.assign`` routes it (the planner prunes by the record): an
        entry the file's statistics do not confirm
        (:func:`~lakelayout.layouts.base.file_blocks`) is refused, nothing written. The
        record is written with the rewrite's (before its commit; alone when nothing
        is rewritten); it is a fact about the file, true whether or not the commit
        happens. A kept file no longer live (removed by another commit since it was
        placed) is left out.
        """
        if not isinstance(layout, Layout):
            raise InvalidOption(f"apply() needs a fitted Layout, got {type(layout).__name__}")
        args.require_bool(one_file_per_block, "one_file_per_block", "optimize.apply")
        _check_hooks(hooks, "optimize.apply")
        args.require_int(target_file_size, "target_file_size", "optimize.apply", optional=True)
        if target_file_size is not None and target_file_size <= 0:
            raise InvalidOption(
                f"optimize.apply: target_file_size must be a positive number of bytes, "
                f"got {target_file_size}"
            )
        if target_file_size is not None and one_file_per_block:
            raise InvalidOption(
                "optimize.apply: give target_file_size or one_file_per_block, not both "
                "(one file per block never rolls)"
            )
        ctx = self._ctx()
        paths = _chosen_files(ctx, files)
        kept = _kept_files(ctx, layout, paths, keep)
        roll = target_file_size or _roll_size(ctx, one_file_per_block)
        return _apply(ctx, layout, paths, hooks or NO_HOOKS, roll, kept)

    def _curve(
        self,
        columns: Sequence[str],
        family: str,
        hooks: OptimizeHooks | None,
        one_file_per_block: bool,
    ) -> OptimizeMetrics:
        if not columns:  # (was refused with a message about cluster_by: an audit)
            raise InvalidOption(f"optimize.{family} needs at least one column to order by")
        ctx = self._ctx()
        clustered = ctx.clustering()
        if clustered is not None:
            verb = "OPTIMIZE ZORDER BY" if family == "zorder" else f"optimize.{family}"
            raise InvalidOption(
                f"{verb} is not allowed on a clustered table (clustered by "
                f"{', '.join(clustered)}): optimize.run() (OPTIMIZE) clusters it by its "
                "clustering columns; or ALTER TABLE ... CLUSTER BY NONE first"
            )
        dims = cfg.validate_clustering(list(columns), ctx.schema, max_columns=8)
        assert dims is not None
        partitions = {c.lower() for c in ctx.snap.table_format.partition_columns}
        on_partitions = [d for d in dims if d.lower() in partitions]
        if on_partitions:
            # one value per partition: the curve would order nothing (Delta refuses it too)
            raise InvalidOption(
                f"OPTIMIZE ZORDER BY {', '.join(on_partitions)}: a partition column holds one "
                "value in each partition; Z-order by data columns (each partition gets its "
                "own curve)"
            )
        roll = _roll_size(ctx, one_file_per_block)
        return _curve_all(ctx, dims, family, hooks or NO_HOOKS, roll)


# --------------------------------------------------------------------------- helpers


def _check_hooks(hooks: object, where: str) -> None:
    """hooks must be OptimizeHooks: another value failed with an AttributeError at the
    first callback, after the rewrite's files were written (found by an audit)."""
    args.require_instance(hooks, OptimizeHooks, "hooks", where, optional=True)


def _roll_size(ctx: _Context, one_file_per_block: bool) -> int:
    """The size a rewrite rolls files at: the table's target, or never (one file per block)."""
    return UNBOUNDED_FILE_SIZE if one_file_per_block else ctx.target_file_size


def _kept_files(
    ctx: _Context, layout: Layout, paths: Sequence[str], keep: Mapping[str, int] | None
) -> dict[str, int]:
    """``apply``'s ``keep`` checked: none of them rewritten, blocks of ``layout``; files no
    longer live are left out (another commit removed them since they were placed)."""
    if keep is None:
        return {}
    if not isinstance(keep, Mapping):
        raise InvalidOption(
            f"optimize.apply: keep must map file paths to block ids, got {type(keep).__name__}"
        )
    live = ctx.by_path()
    kept = {str(path): block for path, block in keep.items() if str(path) in live}
    both = sorted(set(kept) & set(paths))
    if both:
        raise InvalidOption(
            f"optimize.apply: {len(both)} file(s) are both rewritten and kept, e.g. {both[0]!r}"
        )
    for path, block in kept.items():
        if (
            isinstance(block, bool)
            or not isinstance(block, numbers.Integral)
            or not 0 <= block < layout.n_blocks
        ):
            raise InvalidOption(
                f"optimize.apply: keep gives {path!r} block {block!r}; the layout has blocks "
                f"0..{layout.n_blocks - 1}"
            )
    kept = {path: int(block) for path, block in kept.items()}
    _check_placed(ctx, layout, kept)
    return kept


def _check_placed(ctx: _Context, layout: Layout, kept: Mapping[str, int]) -> None:
    """Refuse a kept file whose statistics do not put every row in its block: the
    planner prunes by the record, and a wrong one would skip rows a query needs."""
    if not kept:
        return
    files = ctx.snap.files
    where = np.flatnonzero([str(p) in kept for p in files.paths])
    part = files.take(where)
    placed = file_blocks(layout, part)
    for path, block in zip(part.paths.tolist(), placed.tolist(), strict=True):
        if block != kept[str(path)]:
            said = "no one block" if block < 0 else f"block {block}"
            raise InvalidOption(
                f"optimize.apply: keep gives {path!r} block {kept[str(path)]}, but its "
                f"statistics place its rows in {said} of the layout: a kept file must be "
                "wholly inside its block (Layout.blocks_of_files); rewrite it instead"
            )


def _kept_provenance(
    ctx: _Context, kept: Mapping[str, int], layout_id: str
) -> list[FileProvenance]:
    """Records naming block ``kept[path]`` of layout ``layout_id`` for files left in place
    (what else was recorded about them, e.g. a liquid cube, stays)."""
    files = ctx.by_path()
    out = []
    for path, block in kept.items():
        old = files[path].provenance or FileProvenance(path)
        out.append(
            dataclasses.replace(
                old,
                layout_id=layout_id,
                block_id=block,
                operation="apply (kept)",
                size=files[path].size,
            )
        )
    return out


def _chosen_files(ctx: _Context, files: Sequence[str] | None) -> list[str]:
    live = [f.path for f in ctx.files]
    if files is None:
        return live
    known = set(live)
    missing = [f for f in files if f not in known]
    if missing:
        raise InvalidOption(
            f"{len(missing)} file(s) are not live in '{ctx.uri}' at version "
            f"{ctx.snap.version}, e.g. {missing[0]!r}"
        )
    return list(dict.fromkeys(files))


def curve_class(family: str, n_dims: int) -> type[CurveLayout]:
    """Hilbert for >= 2 dimensions; Z-order (= linear order of one rank) otherwise."""
    if family == "hilbert" and n_dims >= 2:
        return HilbertLayout
    if family in ("hilbert", "zorder"):
        return ZOrderLayout
    raise LayoutError(f"unknown curve {family!r}; use 'hilbert' or 'zorder'")


def _blocks_for(nbytes: int, target_file_size: int, *, nearest: bool = False) -> int:
    """Blocks of at most the target size (ceil), or closest to it (``nearest``: used when
    each block becomes one file, so rounding up in every cube does not add files)."""
    exact = nbytes / target_file_size
    return max(1, round(exact) if nearest else math.ceil(exact))


def fit_curve(
    ctx: _Context,
    paths: Sequence[str],
    dims: Sequence[str],
    family: str,
    *,
    nearest: bool = False,
) -> tuple[CurveLayout, Any]:
    """A curve layout fitted on a sample of ``paths``, and the rows to route (a FileSource).

    It has ``bytes / target file size`` blocks, rounded up (``nearest``: rounded).
    Times the ``sample`` and ``fit`` steps.
    """
    by_path = ctx.by_path()
    nbytes = sum(by_path[p].size for p in paths)
    with ctx.clock.step("sample"):
        sample = _curve_sample(ctx, paths, dims)
    with ctx.clock.step("fit"):
        cls = curve_class(family, len(dims))
        layout = cls.fit(
            sample,
            columns=list(dims),
            target_blocks=_blocks_for(nbytes, ctx.target_file_size, nearest=nearest),
        )
    return layout, file_source(ctx, paths)


def _curve_sample(ctx: _Context, paths: Sequence[str], dims: Sequence[str]) -> pa.Table:
    """The rows a curve is fitted on: a Bernoulli sample of ``paths``.

    Drawn on the driver with pyarrow when that is cheap (plain clustering
    columns up to :data:`DRIVER_SAMPLE_MAX_ROWS` rows, or a small input:
    :attr:`FileSource.small`): only those columns are decoded and no Spark job
    starts. Larger inputs, or clustering expressions over a large input, are
    sampled by a Spark job (``DataFrame.sample``). Both are the same kind of
    sample: every row kept with probability ``SAMPLE_ROWS / rows``.
    """
    by_path = ctx.by_path()
    rows = sum(max(by_path[p].rows, 0) for p in paths)
    names = {n.lower(): n for n in ctx.schema.names}
    plain = [names.get(d.lower()) for d in dims]
    columns = [c for c in plain if c] if all(plain) else list(ctx.schema.names)
    if (all(plain) and rows <= DRIVER_SAMPLE_MAX_ROWS) or file_source(ctx, paths).small:
        files = ctx.snap.data_files_for(paths)
        wanted = list(dict.fromkeys(columns))
        return sample_files(ctx.uri, files, ctx.snap.table_format, wanted, rows)
    df = read_files(ctx.spark, ctx.snap, paths, with_file=False)
    # plain columns: sample only them (the sample job reads far less)
    source = df.select(*plain) if all(plain) else df  # type: ignore[arg-type]
    return sample_rows(source, rows)


def file_source(ctx: _Context, paths: Sequence[str]) -> FileSource:
    """``paths`` for a rewrite whose routing tasks read the files themselves."""
    small = cfg.small_rewrite_size(ctx.snap.configuration)
    return FileSource(
        ctx.spark, tuple(ctx.snap.data_files_for(paths)), ctx.snap.rewrite_format, small
    )


def metrics_for(
    operation: str, ctx: _Context, removed: Sequence[str], written: Sequence[RoutedFile]
) -> OptimizeMetrics:
    by_path = ctx.by_path()
    return OptimizeMetrics(
        operation=operation,
        files_removed=len(removed),
        files_added=len(written),
        bytes_removed=sum(by_path[p].size for p in removed),
        bytes_added=sum(w.file.size for w in written),
        rows_removed=sum(max(by_path[p].rows, 0) for p in removed),
        rows_added=sum(w.file.num_records for w in written),
    )


def commit_rewrite(
    ctx: _Context,
    *,
    removed: Sequence[str],
    written: Sequence[RoutedFile],
    provenance: Sequence[FileProvenance],
    operation: str,
    hooks: OptimizeHooks,
    index: int,
    data_change: bool = False,
    add_tags: Mapping[str, Mapping[str, str]] | None = None,
) -> int:
    """Record provenance, then commit adds + removes in ONE transaction; the version.

    On :class:`CommitConflict` the files just written are deleted (nothing
    references them); a data-changing operation (DELETE) gets the error, a
    rewrite (``data_change=False``) raises :class:`Yielded` naming the winner
    instead, as it does when a user operation is waiting to commit.
    ``add_tags`` (log path -> tags) go on the adds of a table clustered by
    Delta, which is committed through Delta's connector.
    """
    paths = [w.file.path for w in written]
    try:
        with ctx.clock.step("provenance"):
            ctx.store.record(provenance, removed=())
        if hooks.before_commit is not None:
            hooks.before_commit(index)
    except OSError as exc:  # nothing committed: the written files are nobody's
        _delete_files(ctx.uri, paths)
        raise LakelayoutError(
            f"cannot record the rewrite's provenance under {STATE_FOLDER}/ of '{ctx.uri}': "
            f"{exc}; nothing was committed"
        ) from exc
    except BaseException:
        _delete_files(ctx.uri, paths)
        raise
    reason = None if data_change else waiting_reason(ctx.uri)
    if reason is not None:
        _delete_files(ctx.uri, paths)
        raise Yielded(reason)
    try:
        with ctx.clock.step("commit"):
            version = delta.commit(
                ctx.uri,
                adds=[w.file for w in written],
                removes=list(removed),
                data_change=data_change,
                read_version=ctx.snap.version,
                operation=operation,
                spark=ctx.spark,
                add_tags=add_tags,
                clustered=add_tags is not None,
            )
    except CommitConflict as exc:
        _delete_files(ctx.uri, paths)
        if data_change:
            raise
        raise Yielded(f"lost to {describe_winners(exc.winners)}") from exc
    except Exception:
        # another refusal (a feature Delta's connector cannot write, an I/O error): the
        # files are removed only when the log does not name them; the outcome of a
        # commit that failed half-way is whatever the log says
        if not _any_live(ctx.uri, paths):
            _delete_files(ctx.uri, paths)
        raise
    # committed: what follows must not read as "nothing was committed" (an audit: online
    # switches and the advisor recorded a committed rewrite as failed)
    try:
        with ctx.clock.step("provenance"):
            ctx.store.record((), removed=removed)
    except Exception as exc:  # the removed files' entries stay: they name no live file
        logger.warning("rewrite of %s committed as version %d; %s", ctx.uri, version, exc)
    if ctx.catalog is not None and ctx.indexes:
        with ctx.clock.step("indexes"):  # a failure leaves the files unindexed: always kept
            ctx.catalog.record_written(
                [w.file for w in written], ctx.indexes, ctx.snap.table_format
            )
    if hooks.after_commit is not None:
        try:
            hooks.after_commit(index, version)
        except Exception as exc:
            done = metrics_for(operation, ctx, removed, written)
            raise AfterCommitError(
                f"'{ctx.uri}' committed as version {version}, then the after_commit hook "
                f"failed: {type(exc).__name__}: {exc}",
                version=version,
                metrics=_with_versions(done, (version,)),
            ) from exc
    return version


def check_rewrite(
    ctx: _Context,
    paths: Sequence[str],
    kind: Kind = Kind.REWRITE,
    *,
    rewritten: Sequence[str] | None = None,
) -> None:
    """UnsupportedTable before anything is written if removing ``paths`` cannot be committed,
    or if the rows of ``rewritten`` (default: all of ``paths``; a DELETE drops some files
    whole) cannot be written back with their partition values as the log spells them.

    (Files with deletion vectors, or table features delta-rs cannot commit
    to, need Delta's connector in the session: :mod:`lakelayout.table.features`.)
    """
    delta.check_commit(ctx.snap, kind, removes=paths, spark=ctx.spark)
    check_files_exist(ctx.uri, paths)  # the tasks would fail half-way with a raw error
    fmt = ctx.snap.rewrite_format
    if fmt.spellings:  # a moment the log spells two ways: the tasks would refuse it late
        for file in ctx.snap.data_files_for(paths if rewritten is None else rewritten):
            for name, value in file.partition_values.items():
                fmt.partition_value(name, value)


def _any_live(root: str, paths: Sequence[str]) -> bool:
    """Whether the table's latest snapshot lists one of ``paths`` (True when it cannot
    be read: then nothing is deleted)."""
    try:
        live = delta.snapshot(root).data_files
    except Exception:
        return True
    return any(path in live for path in paths)


def _delete_files(root: str, paths: Sequence[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.remove(file_location(root, path))


# --------------------------------------------------------------------------- compaction


def _compact(ctx: _Context, hooks: OptimizeHooks) -> OptimizeMetrics:
    """Bin-pack small unclustered files; one commit."""
    started = time.perf_counter()
    eligible = [f for f in ctx.files if f.provenance is None or _unclustered(f.provenance)]
    min_size = cfg.min_file_size(ctx.snap.configuration, ctx.target_file_size)
    bins = compaction_bins(eligible, min_file_size=min_size, target_file_size=ctx.target_file_size)
    base = OptimizeMetrics("compaction", files_considered=len(ctx.files))
    if not bins:
        return _done(base, started, hooks, ctx)
    reason = waiting_reason(ctx.uri)
    if reason is not None:
        return _done(_yielded(base, reason), started, hooks, ctx)
    bin_of = {p: i for i, b in enumerate(bins) for p in b}
    paths = list(bin_of)
    check_rewrite(ctx, paths)
    df = file_source(ctx, paths)
    router = Router(tuple(ctx.schema.names), ctx.uri, file_blocks=bin_of)
    written = write_routed(
        df,
        ctx.uri,
        ctx.schema,
        router=router,
        n_blocks=len(bins),
        target_file_size=ctx.target_file_size,
        prefix="compact",
        clock=ctx.clock,
        row_group_bytes=ctx.row_group_bytes,
        codec=ctx.codec,
        indexes=ctx.indexes,
    )
    try:
        version = commit_rewrite(
            ctx,
            removed=paths,
            written=written,
            provenance=(),
            operation="OPTIMIZE",
            hooks=hooks,
            index=0,
        )
    except Yielded as y:
        return _done(_yielded(base, y.reason), started, hooks, ctx)
    metrics = base.plus(metrics_for("compaction", ctx, paths, written))
    return _done(_with_versions(metrics, (version,)), started, hooks, ctx)


def _unclustered(p: FileProvenance) -> bool:
    return p.cube_id is None and p.layout_id is None


def _with_versions(m: OptimizeMetrics, versions: tuple[int, ...]) -> OptimizeMetrics:
    return m.plus(OptimizeMetrics(m.operation, versions=versions))


def _done(
    m: OptimizeMetrics,
    started: float,
    hooks: OptimizeHooks,
    ctx: _Context | None = None,
    *,
    progressed: bool = False,
) -> OptimizeMetrics:
    """``m`` with the operation's seconds (and ``ctx``'s steps: where they went).

    ``hooks.progress`` hears of an operation that committed nothing, ``(0, 0)``, and of
    one whose commits did not report themselves (``progressed``: liquid clustering's
    cubes do), ``(n, n)`` after its ``n`` commits (compaction, ZORDER and Hilbert, apply
    never called it; an audit)."""
    if hooks.progress is not None and not m.versions:
        hooks.progress(0, 0)
    elif hooks.progress is not None and not progressed:
        hooks.progress(len(m.versions), len(m.versions))
    steps = dict(ctx.clock.seconds) if ctx is not None else {}
    tasks = dict(ctx.clock.task_seconds) if ctx is not None else {}
    seconds = time.perf_counter() - started + steps.get("plan", 0.0)
    return dataclasses.replace(m, seconds=seconds, steps=steps, task_steps=tasks)


# --------------------------------------------------------------------------- ZORDER BY


def _curve_all(
    ctx: _Context, dims: Sequence[str], family: str, hooks: OptimizeHooks, roll_size: int
) -> OptimizeMetrics:
    """OPTIMIZE ZORDER BY / Hilbert on every file: one rewrite, one commit.

    On a partitioned table each partition gets its own curve (fitted on its
    own rows, as Delta's ZORDER BY works within partitions); all partitions
    are still committed together.
    """
    started = time.perf_counter()
    paths = [f.path for f in ctx.files]
    base = OptimizeMetrics(family, files_considered=len(paths), clustering_columns=tuple(dims))
    if not paths:
        return _done(base, started, hooks, ctx)
    reason = waiting_reason(ctx.uri)
    if reason is not None:
        return _done(_yielded(base, reason), started, hooks, ctx)
    check_rewrite(ctx, paths)
    nearest = roll_size == UNBOUNDED_FILE_SIZE
    groups = [[f.path for f in g] for g in by_partition(ctx.files)]
    if len(groups) == 1:
        layout, df = fit_curve(ctx, paths, dims, family, nearest=nearest)
        one = _write_layout(ctx, layout, df, paths, base, hooks, family, roll_size)
        return _done(one, started, hooks, ctx)
    rewritten = [
        _route_layout(ctx, *fit_curve(ctx, group, dims, family, nearest=nearest), family, roll_size)
        for group in groups
    ]
    written = [w for _, files in rewritten for w in files]
    prov = [p for layout_prov, _ in rewritten for p in layout_prov]
    try:
        version = commit_rewrite(
            ctx,
            removed=paths,
            written=written,
            provenance=prov,
            operation="OPTIMIZE",
            hooks=hooks,
            index=0,
        )
    except Yielded as y:
        return _done(_yielded(base, y.reason), started, hooks, ctx)
    metrics = base.plus(metrics_for(family, ctx, paths, written))
    blocks = sum(len({w.block for w in files}) for _, files in rewritten)
    metrics = metrics.plus(OptimizeMetrics(family, cubes_touched=blocks))
    return _done(_with_versions(metrics, (version,)), started, hooks, ctx)


def _route_layout(
    ctx: _Context, layout: Layout, df: Any, operation: str, roll_size: int, *, ordered: bool = True
) -> tuple[list[FileProvenance], list[RoutedFile]]:
    """Write ``df`` routed by ``layout``; the files and their provenance (nothing committed).

    ``ordered``: rows inside a block are sorted by ``layout.sort_key`` (else they keep
    the order they are read in; see :func:`~lakelayout.cluster.config.orders_inside_blocks`).
    """
    # a linear layout's key ranks the rows of one batch: its order is computed over each
    # block's rows when they are together (Layout.key_is_batch_rank), not routed
    order_by = layout if ordered and layout.key_is_batch_rank else None
    use_key = ordered and not layout.key_is_batch_rank
    router = Router(tuple(ctx.schema.names), ctx.uri, layout=layout, use_sort_key=use_key)
    written = write_routed(
        df,
        ctx.uri,
        ctx.schema,
        router=router,
        n_blocks=layout.n_blocks,
        target_file_size=roll_size,
        order_by=order_by,
        prefix=operation,
        fmt=ctx.snap.rewrite_format,
        clock=ctx.clock,
        row_group_bytes=ctx.row_group_bytes,
        codec=ctx.codec,
        indexes=ctx.indexes,
    )
    try:
        with ctx.clock.step("provenance"):
            layout_id = ctx.store.save_layout(layout, _binding(ctx, layout))
    except OSError as exc:  # nothing committed: the written files are nobody's (an audit)
        _delete_files(ctx.uri, [w.file.path for w in written])
        raise LakelayoutError(
            f"cannot record the rewrite's layout under {STATE_FOLDER}/ of '{ctx.uri}': "
            f"{exc}; nothing was committed"
        ) from exc
    prov = [
        FileProvenance(
            w.file.path,
            layout_id=layout_id,
            block_id=w.block,
            operation=operation,
            size=w.file.size,  # lets query-time block pruning check freshness
        )
        for w in written
    ]
    return prov, written


def _write_layout(
    ctx: _Context,
    layout: Layout,
    df: Any,
    paths: Sequence[str],
    base: OptimizeMetrics,
    hooks: OptimizeHooks,
    operation: str,
    roll_size: int,
    kept: Mapping[str, int] | None = None,
) -> OptimizeMetrics:
    """Route ``df`` through ``layout``, commit replacing ``paths``, record block ids
    (of the files written, and of the ``kept`` files left in place: path -> block).

    Files are rolled at ``roll_size`` inside a block (and split by partition
    on a partitioned table).
    """
    sizes = ctx.by_path()
    nbytes = sum(sizes[p].size for p in paths if p in sizes)
    ordered = not layout.sort_key_optional or cfg.orders_inside_blocks(
        nbytes, layout.n_blocks, roll_size, len(ctx.schema), DATA_PAGE_BYTES
    )
    prov, written = _route_layout(ctx, layout, df, operation, roll_size, ordered=ordered)
    if kept:
        layout_id = (
            prov[0].layout_id if prov else ctx.store.save_layout(layout, _binding(ctx, layout))
        )
        assert layout_id is not None
        prov = [*prov, *_kept_provenance(ctx, kept, layout_id)]
    try:
        version = commit_rewrite(
            ctx,
            removed=paths,
            written=written,
            provenance=prov,
            operation="OPTIMIZE",
            hooks=hooks,
            index=0,
        )
    except Yielded as y:
        return _yielded(base, y.reason)
    metrics = base.plus(metrics_for(operation, ctx, paths, written))
    blocks = len({w.block for w in written})
    return _with_versions(
        metrics.plus(OptimizeMetrics(operation, cubes_touched=blocks)), (version,)
    )


def _binding(ctx: _Context, layout: Layout) -> dict[str, str]:
    """What the columns ``layout`` reads are stored as in the snapshot it lays out."""
    return ctx.snap.table_format.binding(layout_columns(layout))


def _apply(
    ctx: _Context,
    layout: Layout,
    paths: Sequence[str],
    hooks: OptimizeHooks,
    roll_size: int,
    kept: Mapping[str, int],
) -> OptimizeMetrics:
    started = time.perf_counter()
    base = OptimizeMetrics("apply", files_considered=len(ctx.files))
    if not paths:
        if kept:  # nothing to rewrite: only the record of the files left in place
            with ctx.clock.step("provenance"):
                ctx.store.record(
                    _kept_provenance(
                        ctx, kept, ctx.store.save_layout(layout, _binding(ctx, layout))
                    )
                )
        return _done(base, started, hooks, ctx)
    reason = waiting_reason(ctx.uri)
    if reason is not None:
        return _done(_yielded(base, reason), started, hooks, ctx)
    check_rewrite(ctx, paths)
    df = file_source(ctx, paths)
    written = _write_layout(ctx, layout, df, paths, base, hooks, "apply", roll_size, kept)
    return _done(written, started, hooks, ctx)


# --------------------------------------------------------------------------- liquid


def _liquid(
    ctx: _Context,
    columns: Sequence[str],
    *,
    full: bool,
    hooks: OptimizeHooks,
    roll_size: int,
) -> OptimizeMetrics:
    """Incremental clustering: one new cube and one commit per bin of candidates."""
    started = time.perf_counter()
    sizes = cfg.cube_sizes(
        ctx.snap.configuration,
        table_bytes=int(ctx.snap.files.total_bytes),
        target_file=ctx.target_file_size,
    )
    plan = plan_cubes(
        ctx.files,
        columns,
        min_cube_size=sizes.min_cube_size,
        target_cube_size=sizes.target_cube_size,
        full=full,
    )
    total = OptimizeMetrics(
        "liquid", files_considered=len(ctx.files), clustering_columns=tuple(columns)
    )
    family = "hilbert"
    check_rewrite(ctx, plan.candidate_paths)
    for index, paths in enumerate(plan.bins):
        reason = waiting_reason(ctx.uri)
        if reason is not None:
            return _done(_yielded(total, reason), started, hooks, ctx)
        layout, df = fit_curve(
            ctx, paths, columns, family, nearest=roll_size == UNBOUNDED_FILE_SIZE
        )
        cube_id = uuid.uuid4().hex
        router = Router(tuple(ctx.schema.names), ctx.uri, layout=layout)
        written = write_routed(
            df,
            ctx.uri,
            ctx.schema,
            router=router,
            n_blocks=layout.n_blocks,
            target_file_size=roll_size,
            prefix="cube",
            fmt=ctx.snap.rewrite_format,
            clock=ctx.clock,
            row_group_bytes=ctx.row_group_bytes,
            codec=ctx.codec,
            indexes=ctx.indexes,
        )
        prov = [
            FileProvenance(
                w.file.path,
                cube_id=cube_id,
                clustered_by=tuple(columns),
                min_cube_size=sizes.min_cube_size,
                block_id=w.block,
                operation="liquid",
            )
            for w in written
        ]
        tags = (
            {w.file.path: delta_liquid.cube_tags(cube_id, columns) for w in written}
            if ctx.delta_clustered
            else None
        )
        try:
            version = commit_rewrite(
                ctx,
                removed=paths,
                written=written,
                provenance=prov,
                operation="OPTIMIZE",
                hooks=hooks,
                index=index,
                add_tags=tags,
            )
        except Yielded as y:
            return _done(_yielded(total, y.reason), started, hooks, ctx, progressed=True)
        cube = metrics_for("liquid", ctx, paths, written)
        total = total.plus(cube.plus(OptimizeMetrics("liquid", cubes_touched=1)))
        total = _with_versions(total, (version,))
        if hooks.progress is not None:
            hooks.progress(index + 1, len(plan.bins))
    return _done(total, started, hooks, ctx, progressed=True)
