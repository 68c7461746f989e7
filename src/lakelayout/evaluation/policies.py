"""Layout policies: what a table does on insert, on query, and when it may reorganize.

A policy sees the stream through three hooks, called by the replay in order:

* ``on_insert(ctx, new_files)`` after an insert batch was committed;
* ``on_query(ctx, query)`` after a query ran (to learn from the workload);
* ``may_reorganize(ctx)`` before every query: the moment to rewrite.

Every rewrite goes through ``ctx.rewrite(kind, action)``, which times it and
records files and bytes written, so policies never account for themselves.
The advisor and the online reorganizer plug in through the same interface.
"""

from __future__ import annotations

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

    from lakelayout.api import Table
    from lakelayout.expr.nodes import Predicate


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

    def sample(self) -> pa.Table: ...

    def predicates(self, queries: Sequence[Query]) -> list[Predicate]: ...

    def rewrite(self, kind: str, action: Callable[[], OptimizeMetrics]) -> None: ...


class Policy:
    """The no-op policy (``none``): files stay as inserted, in arrival order."""

    name = "none"
    description = "files as inserted, in arrival order"

    def cluster_by(self, ctx: Context) -> list[str] | None:
        """Liquid clustering columns to create the table with (None: not clustered)."""
        return None

    def prepare(self, ctx: Context) -> None:
        """Called once before the stream (fit static layouts here)."""

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        """Called after every insert batch with the files it added."""

    def on_query(self, ctx: Context, query: Query) -> None:
        """Called after every query."""

    def may_reorganize(self, ctx: Context) -> None:
        """Called before every query; rewrite through ``ctx.rewrite`` if wanted."""


def most_queried(predicates: Sequence[Predicate], top: int) -> list[str]:
    """The ``top`` columns referenced by the most queries (ties: name order)."""
    counts = Counter(col for p in predicates for col in set(p.columns()))
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


class LayoutPolicy(Policy):
    """A layout fitted once (on a sample of all data and the whole workload),
    applied to every insert batch: ``optimize.apply(layout, new_files)``."""

    def __init__(self, name: str, fit: Callable[[Context], Layout], description: str) -> None:
        self.name = name
        self.description = description
        self._fit = fit
        self.layout: Layout | None = None
        self.fit_seconds = 0.0

    def prepare(self, ctx: Context) -> None:
        started = time.perf_counter()
        self.layout = self._fit(ctx)
        self.fit_seconds = time.perf_counter() - started
        self.description = f"{self.description}; {self.layout.n_blocks} blocks per batch"

    def on_insert(self, ctx: Context, new_files: Sequence[str]) -> None:
        layout = self.layout
        assert layout is not None, "prepare() fits the layout"
        files = list(new_files)
        ctx.rewrite(f"apply {self.name}", lambda: ctx.table.optimize.apply(layout, files))


class SortedPolicy(LayoutPolicy):
    """Every insert batch sorted by the arrival-time column (linear layout)."""

    def __init__(self) -> None:
        super().__init__("sorted", _fit_sorted, "each batch sorted by its time column")


def _fit_sorted(ctx: Context) -> Layout:
    from lakelayout.layouts import LinearLayout

    return LinearLayout.fit(
        ctx.sample(), columns=[ctx.time_column], target_blocks=ctx.blocks_per_batch
    )


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
        ctx.rewrite("zorder", lambda: ctx.table.optimize.zorder(columns))


class DeltaRsZOrder(ZOrderHalfway):
    """The peer: delta-rs ``optimize.z_order`` on the same columns at the same point."""

    name = "deltars-zorder"
    description = "delta-rs optimize.z_order (3 most queried columns) halfway"

    def _reorganize(self, ctx: Context) -> None:
        columns = self.columns
        self.description = f"delta-rs z_order({', '.join(columns)}) halfway"
        ctx.rewrite("deltars z_order", lambda: deltars_zorder(ctx.table, columns))


def deltars_zorder(table: Table, columns: Sequence[str]) -> OptimizeMetrics:
    """Run delta-rs' Z-order over the whole table at the table's target file size."""
    from deltalake import DeltaTable

    from lakelayout.cluster.config import DEFAULT_TARGET_FILE_SIZE, TARGET_FILE_SIZE

    target = int(table.properties.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))
    before = table.snapshot().files
    DeltaTable(table.uri).optimize.z_order(list(columns), target_size=target)
    after = table.snapshot().files
    old = {str(p) for p in before.paths}
    new = {str(p) for p in after.paths}
    added = np.array([str(p) not in old for p in after.paths], dtype=bool)
    removed = np.array([str(p) not in new for p in before.paths], dtype=bool)
    return OptimizeMetrics(
        operation="DELTA-RS ZORDER",
        files_removed=int(removed.sum()),
        files_added=int(added.sum()),
        bytes_removed=int(np.asarray(before.sizes)[removed].sum()),
        bytes_added=int(np.asarray(after.sizes)[added].sum()),
        rows_removed=int(np.asarray(before.num_records)[removed].sum()),
        rows_added=int(np.asarray(after.num_records)[added].sum()),
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
        ctx.rewrite("liquid optimize", lambda: ctx.table.optimize.run())


def _fit_qdtree(ctx: Context) -> Layout:
    from lakelayout.layouts.qdtree import QdTreeLayout

    return QdTreeLayout.fit(
        ctx.sample(), ctx.predicates(ctx.workload), target_blocks=ctx.blocks_per_batch
    )


def _fit_pando(ctx: Context) -> Layout:
    from lakelayout.layouts.pando import PandoLayout

    return PandoLayout.fit(
        ctx.sample(),
        ctx.predicates(ctx.workload),
        target_blocks=max(1, ctx.blocks_per_batch * 3 // 2),
        k=2,
        max_leaves=24,
    )


def _fit_sopz(ctx: Context) -> Layout:
    from lakelayout.layouts import SOPZLayout

    workload = ctx.predicates(ctx.workload)
    return SOPZLayout.fit(
        ctx.sample(),
        workload,
        columns=most_queried(workload, 2),
        target_blocks=ctx.blocks_per_batch,
        max_features=32,
    )


def _fit_hilbert(ctx: Context) -> Layout:
    from lakelayout.layouts import HilbertLayout

    return HilbertLayout.fit(
        ctx.sample(),
        columns=most_queried(ctx.predicates(ctx.workload), 3),
        target_blocks=ctx.blocks_per_batch,
    )


POLICIES: dict[str, Callable[[], Policy]] = {
    "none": Policy,
    "sorted": SortedPolicy,
    "zorder-halfway": ZOrderHalfway,
    "liquid": LiquidPolicy,
    "deltars-zorder": DeltaRsZOrder,
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
