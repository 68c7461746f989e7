"""One scan planner: which files a query reads, and what each source of metadata ruled out.

:func:`plan` is the only place that decides it, for real snapshots and for
virtual files alike (``block_stats`` of a sample split into a layout's
blocks). In one pass it combines

* ``partition`` -- the partition values of a partitioned table, which the
  snapshot holds as exact per-file bounds of the partition columns: the
  statistics rules on those columns alone (partition pruning, before
  min/max; min/max on all columns includes it);
* ``minmax`` -- the files' statistics (:mod:`lakelayout.skipping.stats_rules`),
  on the whole predicate and as one more labeller in the clause merge;
* every declared index (:mod:`lakelayout.skipping.indexes`) that labels some
  node of the predicate and has metadata for the files: its clauses are
  merged with min/max by Algorithm 1-2 (:mod:`lakelayout.skipping.clauses`),
  so an index never makes the plan weaker than min/max alone;
* the logical indexes of layouts (Qd-tree, Pando): a file laid out as block
  ``b`` of layout ``L`` is skipped when ``b`` is not in ``L.blocks_for(p)``,
  ``p`` relaxed to the columns ``L`` knows (:func:`relax`);

and returns one :class:`ScanPlan`: the files kept, and per source
(``partition``, ``minmax``, index names, ``layout(<family>)``) the files and
bytes that source *alone* rules out. Sources overlap, so the counts may sum to more than
the files skipped; zero-row files are attributed to ``minmax``.

Everything unknown keeps a file: missing statistics or metadata, stale or
missing provenance, a layout that cannot answer. Pure: no Spark, no I/O
beyond what a ``metadata`` source does when asked for its columns.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption, LakelayoutError, StateUnreadable
from lakelayout.expr.nodes import And, BoolConst, Expr, Func, Not, Or, Predicate
from lakelayout.expr.temporal import zone
from lakelayout.expr.visitor import PredicateVisitor
from lakelayout.skipping.clauses import Labeller, Merged, evaluate, generate
from lakelayout.skipping.indexes.base import Clause, Index
from lakelayout.skipping.indexes.geobox import expand_within_box
from lakelayout.skipping.stats_rules import might_match
from lakelayout.stats.bounds import stats_key
from lakelayout.stats.model import FileStats

logger = logging.getLogger(__name__)

MINMAX = "minmax"
"""Source name of the files' min/max statistics."""
PARTITION = "partition"
"""Source name of the files' partition values (partitioned tables only)."""


# ---------------------------------------------------------------- inputs


@runtime_checkable
class MetadataSource(Protocol):
    """Per-file index metadata, read on demand (:class:`~lakelayout.skipping.store.MetadataStore`)."""

    def read(self, files: FileStats, names: Sequence[str]) -> Mapping[str, pa.Array]: ...


class LogicalLayout(Protocol):
    """What the planner needs of a layout with a logical index (:class:`lakelayout.layouts.base.Layout`)."""

    @property
    def family(self) -> str: ...

    @property
    def n_blocks(self) -> int: ...

    def blocks_for(self, predicate: Predicate) -> np.ndarray | None: ...


@dataclass(frozen=True)
class LayoutBlocks:
    """A layout and, per file of the plan, the block the file holds (-1: not laid out by it)."""

    layout: LogicalLayout
    blocks: np.ndarray
    #: table columns the layout knows with the types the plan's predicate was bound to
    #: (the predicate is relaxed to them); None: every column it reads
    columns: frozenset[str] | None = None

    @property
    def source(self) -> str:
        """The attribution key: ``layout(<family>)``."""
        return f"layout({self.layout.family})"


# ---------------------------------------------------------------- result


@dataclass(frozen=True)
class ScanPlan:
    """The files a query reads, and which source ruled out how many files and bytes."""

    predicate: Predicate
    files: FileStats
    keep: np.ndarray
    #: files each source rules out on its own (``minmax``, index names, ``layout(<family>)``)
    skipped_by: dict[str, int] = field(default_factory=dict)
    #: bytes of the files each source rules out on its own (overlapping)
    bytes_skipped_by: dict[str, int] = field(default_factory=dict)
    #: declared indexes that could not be used, with the reason
    unused: dict[str, str] = field(default_factory=dict)
    #: indexes whose clauses took part
    indexes_used: tuple[str, ...] = ()
    seconds: float = 0.0
    #: the merged clause of min/max and the indexes (None when no index took part)
    clause: Merged | None = None
    #: per source, the files it rules out on its own (what ``skipped_by`` counts)
    ruled_out: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def kept(self) -> FileStats:
        """The files to read."""
        return self.files.take(self.keep)

    @property
    def files_total(self) -> int:
        return len(self.files)

    @property
    def files_kept(self) -> int:
        return int(self.keep.sum())

    @property
    def files_skipped(self) -> int:
        return self.files_total - self.files_kept

    @property
    def bytes_total(self) -> int:
        return int(self.files.total_bytes)

    @property
    def bytes_kept(self) -> int:
        return int(np.asarray(self.files.sizes, dtype=np.int64)[self.keep].sum())

    @property
    def rows_total(self) -> int:
        return int(self.files.total_rows)

    @property
    def rows_kept(self) -> int:
        rows = np.asarray(self.files.num_records, dtype=np.int64)[self.keep]
        return int(rows[rows >= 0].sum())


# ---------------------------------------------------------------- the planner


def plan(
    predicate: Predicate,
    files: FileStats,
    *,
    indexes: Sequence[Index] = (),
    metadata: MetadataSource | Mapping[str, pa.Array | pa.ChunkedArray] | None = None,
    layouts: Sequence[LayoutBlocks] = (),
    unused: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    partition_columns: Sequence[str] = (),
) -> ScanPlan:
    """Which of ``files`` may hold rows matching ``predicate`` (a bound, normalized tree).

    ``indexes`` are bound declared indexes, ``metadata`` their per-file values
    (a mapping from index name to an array aligned with ``files``, or a source
    read only for the indexes the predicate can use); ``layouts`` the logical
    indexes of the layouts some files were written by; ``unused`` the
    declared indexes that could not be bound (reported as is); ``timezone``
    the session time zone functions of timestamps use; ``partition_columns``
    the table's partition columns, whose statistics are the files' partition
    values (exact bounds): what they alone rule out is ``skipped_by["partition"]``.

    >>> import pyarrow as pa
    >>> from lakelayout.expr.parse import parse_predicate
    >>> from lakelayout.stats.blocks import block_stats
    >>> sample = pa.table({"a": list(range(100))})
    >>> files = block_stats(sample, np.arange(100) // 25)
    >>> p = plan(parse_predicate("a >= 60", sample.schema), files)
    >>> p.keep.tolist(), p.skipped_by
    ([False, False, True, True], {'minmax': 2})
    """
    started = time.perf_counter()
    expanded = expand_within_box(predicate)
    if reads_session_zone(expanded) and not is_utc(timezone):
        # indexes are collected, and layouts route rows, with functions of timestamps in
        # UTC; a query reading them in another zone means other values: min/max and
        # partitions (evaluated in the session's zone) prune alone
        unused = {
            **(unused or {}),
            **{
                i.name: f"built in UTC; this session's time zone is {timezone}"
                for i in indexes
                if labels_some_node(i, expanded)
            },
        }
        indexes, layouts = (), ()
    n = len(files)
    sizes = np.asarray(files.sizes, dtype=np.int64)
    ruled_out: dict[str, np.ndarray] = {}
    by_partition = _partition_keep(expanded, files, partition_columns, timezone)
    if by_partition is not None:
        ruled_out[PARTITION] = ~by_partition
    keep = np.asarray(might_match(expanded, files, timezone=timezone), dtype=bool)
    ruled_out[MINMAX] = ~keep
    if by_partition is not None:
        keep &= by_partition
    used: list[str] = []
    merged: Merged | None = None

    try:
        with_meta, columns = _index_metadata(expanded, files, indexes, metadata)
    except StateUnreadable as exc:  # no metadata to trust: every file is kept by the indexes
        logger.warning("indexes not used: %s", exc)
        with_meta, columns = [], {}
        unused = {
            **(unused or {}),
            **{i.name: f"index store unreadable: {exc}" for i in indexes},
        }
    if with_meta:
        labellers: list[Labeller] = [StatsLabeller(files, timezone), *with_meta]
        merged = generate(expanded, labellers)
        present: dict[str, pa.Array | None] = {MINMAX: None, **columns}
        nonempty = np.asarray(files.num_records != 0, dtype=bool)
        cache: dict[int, np.ndarray] = {}
        keep &= evaluate(merged, present, n, cache=cache) & nonempty
        for labeller in labellers:
            alone = evaluate(merged, present, n, only={labeller.name}, cache=cache)
            if labeller.name == MINMAX:
                alone &= nonempty
                if (~alone).sum() <= ruled_out[MINMAX].sum():
                    continue
            ruled_out[labeller.name] = ~alone
        used = [index.name for index in with_meta]

    for entry in layouts:
        out = ruled_out_by_layout(expanded, entry, n)
        if out is None:
            continue
        keep &= ~out
        ruled_out[entry.source] = ruled_out.get(entry.source, np.zeros(n, dtype=bool)) | out

    return ScanPlan(
        predicate=predicate,
        files=files,
        keep=keep,
        skipped_by={source: int(out.sum()) for source, out in ruled_out.items()},
        bytes_skipped_by={source: int(sizes[out].sum()) for source, out in ruled_out.items()},
        unused=dict(unused or {}),
        indexes_used=tuple(used),
        seconds=time.perf_counter() - started,
        clause=merged,
        ruled_out=ruled_out,
    )


# ---------------------------------------------------------------- partitions


def _partition_keep(
    predicate: Predicate, files: FileStats, partition_columns: Sequence[str], timezone: str
) -> np.ndarray | None:
    """Files the partition values alone may match (None: no partition column is known).

    The statistics rules on the partition columns only: every other column's
    bounds are dropped, so they read as unknown and keep the file. Files
    without rows are left to ``minmax``, as everywhere in the plan.
    """
    keys = [stats_key((c,)) for c in partition_columns]
    present = [k for k in keys if k in files.columns]
    if not present:
        return None
    only = dataclasses.replace(files, columns={c: files.columns[c] for c in present})
    keep = np.asarray(might_match(predicate, only, timezone=timezone), dtype=bool)
    return keep | np.asarray(files.num_records == 0, dtype=bool)


# ---------------------------------------------------------------- min/max as a labeller


class StatsClause(Clause):
    """``might_match(node)`` on the plan's statistics (ignores ``meta``)."""

    def __init__(self, node: Predicate, stats: FileStats, timezone: str) -> None:
        self.node = node
        self.stats = stats
        self.timezone = timezone

    def evaluate(self, meta: pa.Array | None) -> np.ndarray:  # type: ignore[override]
        return np.asarray(might_match(self.node, self.stats, timezone=self.timezone), dtype=bool)

    def negate(self) -> Clause:
        return StatsClause(self.node.negate(), self.stats, self.timezone)


@dataclass(frozen=True)
class StatsLabeller:
    """Min/max statistics as one more labeller: it labels every leaf node."""

    stats: FileStats
    timezone: str = "UTC"
    name: str = MINMAX

    def label(self, node: Predicate) -> Clause | None:
        if isinstance(node, And | Or | Not):
            return None
        return StatsClause(node, self.stats, self.timezone)


# ---------------------------------------------------------------- indexes


def _index_metadata(
    predicate: Predicate,
    files: FileStats,
    indexes: Sequence[Index],
    metadata: MetadataSource | Mapping[str, pa.Array | pa.ChunkedArray] | None,
) -> tuple[list[Index], dict[str, pa.Array]]:
    """The indexes that label some node and have metadata, and their columns (aligned)."""
    relevant = [i for i in indexes if labels_some_node(i, predicate)]
    if not relevant or metadata is None:
        return [], {}
    names = [i.name for i in relevant]
    if isinstance(metadata, MetadataSource):
        found: Mapping[str, pa.Array | pa.ChunkedArray] = metadata.read(files, names)
    else:
        found = {name: metadata[name] for name in names if name in metadata}
    columns: dict[str, pa.Array] = {}
    for name, column in found.items():
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if len(column) != len(files):
            raise InvalidOption(
                f"metadata of {name} has {len(column)} entries for {len(files)} files"
            )
        columns[name] = column
    return [i for i in relevant if i.name in columns], columns


#: functions whose value of a TIMESTAMP (with local time zone) depends on the session zone
ZONED_FUNCTIONS = frozenset(
    {
        "year", "quarter", "month", "dayofmonth", "dayofweek", "dayofyear",
        "hour", "minute", "second", "date_trunc", "date_format", "to_date",
    }
)  # fmt: skip


def reads_session_zone(node: Expr) -> bool:
    """Whether ``node`` applies a function of :data:`ZONED_FUNCTIONS` to a TIMESTAMP."""
    return any(
        isinstance(part, Func)
        and part.name in ZONED_FUNCTIONS
        and any(_zoned_timestamp(getattr(arg, "dtype", None)) for arg in part.args)
        for part in node.walk()
    )


def _zoned_timestamp(dtype: pa.DataType | None) -> bool:
    return dtype is not None and pa.types.is_timestamp(dtype) and dtype.tz is not None


def is_utc(timezone: str) -> bool:
    """Whether the Spark zone name ``timezone`` is UTC (``UTC``, ``Z``, ``+00:00``, ...)."""
    try:
        tz = zone(timezone)
    except LakelayoutError:
        return False
    return isinstance(tz, dt.timezone) and tz.utcoffset(None) == dt.timedelta(0)


def labels_some_node(index: Index, predicate: Predicate) -> bool:
    """Whether ``index`` labels any predicate node of ``predicate`` (else its metadata is not read)."""
    return any(
        index.label(node) is not None for node in predicate.walk() if isinstance(node, Predicate)
    )


# ---------------------------------------------------------------- layouts


def ruled_out_by_layout(predicate: Predicate, entry: LayoutBlocks, n: int) -> np.ndarray | None:
    """Files of ``entry``'s layout whose block cannot match; None when it gives no answer.

    ``predicate`` is what :func:`plan` prunes with (``st_within_box`` expanded); public so
    that pricing many layouts at once (:class:`lakelayout.online.costs.CostBook`) applies
    exactly this rule.
    """
    blocks = np.asarray(entry.blocks, dtype=np.int64)
    if len(blocks) != n:
        raise InvalidOption(f"layout block ids have {len(blocks)} entries for {n} files")
    relaxed = predicate if entry.columns is None else relax(predicate, entry.columns)
    if isinstance(relaxed, BoolConst) and relaxed.value:
        return None
    allowed = _allowed_blocks(entry.layout, relaxed)
    if allowed is None:
        return None
    mine = (blocks >= 0) & (blocks < entry.layout.n_blocks)
    return mine & ~np.isin(blocks, allowed)


def _allowed_blocks(layout: LogicalLayout, predicate: Predicate) -> np.ndarray | None:
    """``layout.blocks_for(predicate)`` as int64 ids; None when it gives no usable answer."""
    try:
        answer = layout.blocks_for(predicate)
    except Exception:  # a layout that cannot answer must never fail a scan: keep its files
        return None
    if answer is None:
        return None
    try:
        blocks = np.asarray(answer)
    except (TypeError, ValueError):
        return None
    if blocks.ndim != 1 or (blocks.size and not np.issubdtype(blocks.dtype, np.integer)):
        return None
    return blocks.astype(np.int64, copy=False)


def relax(pred: Predicate, known: frozenset[str]) -> Predicate:
    """``pred`` with every positive sub-predicate reading an unknown column replaced by TRUE.

    Only positions outside any ``Not`` are replaced (there TRUE is weaker than
    the sub-predicate, so the blocks of the relaxed predicate cover those of
    the original); a ``Not`` reading an unknown column becomes TRUE as a whole.
    """
    return _Relax(known).visit(pred)


class _Relax(PredicateVisitor[Predicate]):
    """:func:`relax` as a visitor: AND drops TRUE parts, OR becomes TRUE with one."""

    def __init__(self, known: frozenset[str]) -> None:
        self.known = known

    def _leaf(self, node: Predicate) -> Predicate:
        return node if node.columns() <= self.known else BoolConst(True)

    def visit_and(self, node: And) -> Predicate:
        parts = [self.visit(c) for c in node.children_]
        parts = [p for p in parts if not (isinstance(p, BoolConst) and p.value)]
        if not parts:
            return BoolConst(True)
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def visit_or(self, node: Or) -> Predicate:
        parts = [self.visit(c) for c in node.children_]
        if any(isinstance(p, BoolConst) and p.value for p in parts):
            return BoolConst(True)
        return Or(tuple(parts))

    def visit_not(self, node: Not) -> Predicate:
        return self._leaf(node)

    visit_compare = visit_term_compare = visit_in = visit_is_null = _leaf
    visit_like = visit_starts_with = visit_ends_with = _leaf
    visit_bool_const = visit_bool_term = visit_opaque = _leaf


__all__ = [
    "MINMAX",
    "PARTITION",
    "LayoutBlocks",
    "LogicalLayout",
    "MetadataSource",
    "ScanPlan",
    "StatsClause",
    "StatsLabeller",
    "labels_some_node",
    "plan",
    "relax",
    "ruled_out_by_layout",
]


# ---------------------------------------------------------------- column mapping


def on_current_columns(
    files: FileStats,
    indexes: Sequence[Index],
    metadata: MetadataSource,
    layouts: Sequence[LayoutBlocks],
) -> tuple[MetadataSource, list[LayoutBlocks]]:
    """Index metadata and layout blocks kept only for the files that hold the columns they
    read as the table names them now (a column-mapping table).

    With column mapping a name can move to another column: ``RENAME COLUMN a TO b`` then
    ``ADD COLUMNS (a INT)``. Index metadata and layouts say what they say of the column
    named ``a`` when they were built, which in the files written before is the old one,
    now ``b``. A file holds a column as the table names it now when its statistics (kept
    under the physical name) know that column; where a file does not, the index's entry
    is left out and the file is not in the layout's blocks (kept, never skipped).
    """
    present = _present_columns(files)

    def holds(columns: frozenset[str] | None, names: Sequence[str]) -> np.ndarray:
        mask = np.ones(len(files), dtype=bool)
        for column in columns if columns is not None else names:
            mask &= present(column)
        return mask

    masks = {i.name: holds(i.columns(), files.schema.names) for i in indexes}
    kept = [
        dataclasses.replace(
            entry,
            blocks=np.where(
                holds(entry.columns, [f.name for f in getattr(entry.layout, "schema", [])]),
                np.asarray(entry.blocks, dtype=np.int64),
                -1,
            ),
        )
        for entry in layouts
    ]
    return _Masked(metadata, masks), kept


def _present_columns(files: FileStats) -> Callable[[str], np.ndarray]:
    """Per top-level column, per file: whether the file's statistics know it (any leaf).
    Worked out once per column, whatever the number of indexes and layouts reading it."""
    masks: dict[str, np.ndarray] = {}

    def present(column: str) -> np.ndarray:
        if column not in masks:
            key = stats_key([column])  # quoted as the leaves are ('`b.c`' is not b's c)
            mask = np.zeros(len(files), dtype=bool)
            for leaf, stats in files.columns.items():
                if leaf == key or leaf.startswith(f"{key}."):
                    mask |= np.asarray(stats.null_count) >= 0
            masks[column] = mask
        return masks[column]

    return present


@dataclass(frozen=True)
class _Masked:
    """A metadata source whose entries are null (unknown) where ``masks`` say False."""

    source: MetadataSource
    masks: Mapping[str, np.ndarray]

    def read(self, files: FileStats, names: Sequence[str]) -> Mapping[str, pa.Array]:
        found = self.source.read(files, names)
        out: dict[str, pa.Array] = {}
        for name, column in found.items():
            array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            mask = self.masks.get(name)
            if mask is not None and not mask.all():
                array = pc.if_else(pa.array(mask), array, pa.nulls(len(array), array.type))
            out[name] = array
        return out
