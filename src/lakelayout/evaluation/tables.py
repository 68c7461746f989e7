"""What the replay and its warm-up share: the configuration, and how a replayed table
is prepared, filled and scanned.

Kept apart from :mod:`lakelayout.evaluation.replay` so that the warm-up
(:mod:`lakelayout.evaluation.warmup`), which the replay calls, needs nothing
from the replay itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelayout.errors import InvalidOption
from lakelayout.evaluation.datasets import Dataset

if TYPE_CHECKING:
    from lakelayout.api import Table
    from lakelayout.evaluation.workloads import Query

#: target file size while inserting: large, so a range partition is one file
INSERT_TARGET = 1 << 30


#: how a replay costs queries: on file statistics alone, or timed in Spark
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
    #: run the untimed warm-up (a write, a rewrite, the workload's queries) first
    warmup: bool = True
    #: spark mode: time every query a second time after the stream, in the reverse order
    retime: bool = True
    #: spark mode: scans keeping zero files timed for the per-query fixed overhead (median)
    zero_file_scans: int = 5
    #: spark mode: time the stream's queries ``i`` with ``i % time_every == 0`` only (the
    #: same queries under every policy); a query in between costs what the last timed one
    #: of its policy took, so each block of ``time_every`` queries costs ``time_every``
    #: times its timed query: a systematic sample of the stream's query time, for streams
    #: too long to time every query (OReO's evaluation times 10 % of its queries)
    time_every: int = 1
    #: logical mode: charge a rewrite ``rewrite_alpha`` full scans per table it rewrites
    #: (its bytes removed over the table's), as OReO's simulation charges α per switch,
    #: instead of its measured seconds; costs then depend on no timing but the full scan
    #: (None: the measured seconds)
    rewrite_alpha: float | None = None
    #: count the rows matching queries ``i`` with ``i % count_every == 0`` only (the same
    #: queries under every policy); the others record no matching rows, and the precision
    #: indicators (σ, λ, µ) are over the counted queries. Costs and decisions never use
    #: the counts; counting reads every kept file's columns on the driver and is most of
    #: a long logical replay's time
    count_every: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidOption(f"unknown replay mode {self.mode!r}; use one of {MODES}")
        for name in ("time_every", "count_every", "rows_per_file", "sample_rows"):
            every = getattr(self, name)
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise InvalidOption(f"{name} must be an integer >= 1, got {every!r}")
        alpha = self.rewrite_alpha
        if alpha is not None:
            if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha > 0:
                raise InvalidOption(f"rewrite_alpha must be a number > 0, got {alpha!r}")
            if self.mode != "logical":
                raise InvalidOption(
                    "rewrite_alpha charges rewrites in logical mode only; spark mode times them"
                )

    #: reuse a table's snapshot until its next commit (False: read the log at every ask,
    #: the reference path the cached one is tested against; results are the same)
    reuse_snapshots: bool = True


def timed(q: Query, config: ReplayConfig) -> bool:
    """Whether spark mode times query ``q`` (every ``config.time_every``-th of the stream).

    >>> from lakelayout.evaluation.workloads import Query
    >>> [timed(Query(i, "q6", "x > 1"), ReplayConfig(time_every=3)) for i in range(5)]
    [True, False, False, True, False]
    """
    return q.i % config.time_every == 0


def counted(q: Query, config: ReplayConfig) -> bool:
    """Whether the replay counts the rows query ``q`` matches (every ``count_every``-th).

    >>> from lakelayout.evaluation.workloads import Query
    >>> [counted(Query(i, "q6", "x > 1"), ReplayConfig(count_every=2)) for i in range(4)]
    [True, False, True, False]
    """
    return q.i % config.count_every == 0


def prepare_table(table: Table, dataset: Dataset, *, indexes: bool) -> None:
    """Register the dataset's UDFs on a new table; declare and build its indexes
    (when ``indexes`` and the dataset declares some)."""
    if dataset.udfs:
        table.indexes.register_udfs(dataset.udfs, return_types=dataset.udf_types)
    if indexes and dataset.indexes:
        table.indexes.add(*dataset.indexes)
        table.indexes.refresh()


def timed_scan(table: Table, sql: str, *, version: int | None = None) -> tuple[float, int, int]:
    """``Table.scan(sql).count()``: (seconds, rows returned, files kept) — what a
    query costs in spark mode, from the snapshot read to the last row counted."""
    started = time.perf_counter()
    result = table.scan(sql, version=version)
    rows = result.count()
    return time.perf_counter() - started, rows, result.report.files_kept
