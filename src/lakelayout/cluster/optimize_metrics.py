"""What one OPTIMIZE (or DELETE) did: files, bytes and rows removed and added, and where
the time went (:class:`StepClock`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from lakelayout.units import format_bytes

#: the steps of a rewrite, in the order they run (``OptimizeMetrics.steps`` keys)
STEPS = ("plan", "sample", "fit", "rewrite", "provenance", "commit", "indexes")
#: work inside the rewrite's Spark job, summed over its tasks (``OptimizeMetrics.task_steps``)
TASK_STEPS = ("read", "route", "shuffle", "sort", "write")


class StepClock:
    """Wall-clock seconds per named step of one operation (a step may run several times).

    >>> clock = StepClock()
    >>> with clock.step("plan"):
    ...     pass
    >>> list(clock.seconds)
    ['plan']
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        #: seconds summed over the tasks of the operation's Spark jobs, per task step
        self.task_seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block and add it to ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def add_task(self, name: str, seconds: float) -> None:
        self.task_seconds[name] = self.task_seconds.get(name, 0.0) + seconds


def _sum(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    out = dict(a)
    for name, seconds in b.items():
        out[name] = out.get(name, 0.0) + seconds
    return out


@dataclass(frozen=True)
class OptimizeMetrics:
    """Counts of one operation; ``versions`` lists every commit it made (one per cube).

    ``operation`` is ``compaction``, ``zorder``, ``hilbert``, ``liquid``,
    ``apply`` or ``delete``; ``cubes_touched`` counts the ZCubes written
    (liquid) or the blocks written (apply); ``files_considered`` the live
    files the planner looked at.

    Concurrency (:mod:`lakelayout.table.conflicts`): ``retries`` counts the
    times a user operation (DELETE) re-planned after losing a race to a
    rewrite; ``yielded`` says a maintenance operation gave up (part of) its
    work rather than make a user operation fail, and ``yield_reason`` why
    (the winning commit, or the user operation it waited for). Commits made
    before yielding (earlier cubes) stay in ``versions``.

    Where the time went: ``steps`` holds wall-clock seconds per step on the
    driver (:data:`STEPS`: ``plan`` the snapshot and the file plan,
    ``sample`` reading the rows a curve is fitted on, ``fit`` the layout
    fit, ``rewrite`` the one Spark job that reads, routes, sorts and writes,
    ``provenance`` the clustering sidecar, ``commit`` the Delta commit,
    ``indexes`` storing the skipping-index metadata the rewrite collected);
    ``task_steps`` breaks the rewrite job down into seconds summed over its
    tasks (:data:`TASK_STEPS`: ``read`` Parquet decoding, ``route`` block and
    curve key of every row, ``shuffle`` packing routed rows into Arrow
    messages, handing them to Spark and waiting for the shuffled ones), ``sort`` ordering
    rows inside a block, ``write`` Parquet encoding and statistics). Task
    seconds overlap across cores: compare them with each other, not with
    ``seconds``.
    """

    operation: str
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    rows_removed: int = 0
    rows_added: int = 0
    cubes_touched: int = 0
    files_considered: int = 0
    versions: tuple[int, ...] = ()
    seconds: float = 0.0
    clustering_columns: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    retries: int = 0
    yielded: bool = False
    yield_reason: str = ""
    steps: dict[str, float] = field(default_factory=dict)
    task_steps: dict[str, float] = field(default_factory=dict)

    @property
    def commits(self) -> int:
        return len(self.versions)

    def plus(self, other: OptimizeMetrics) -> OptimizeMetrics:
        """The sum of two partial results of the same operation (one per cube)."""
        return replace(
            self,
            files_removed=self.files_removed + other.files_removed,
            files_added=self.files_added + other.files_added,
            bytes_removed=self.bytes_removed + other.bytes_removed,
            bytes_added=self.bytes_added + other.bytes_added,
            rows_removed=self.rows_removed + other.rows_removed,
            rows_added=self.rows_added + other.rows_added,
            cubes_touched=self.cubes_touched + other.cubes_touched,
            versions=self.versions + other.versions,
            notes=self.notes + other.notes,
            steps=_sum(self.steps, other.steps),
            task_steps=_sum(self.task_steps, other.task_steps),
        )

    def as_rows(self) -> list[tuple[str, str]]:
        """(name, value) pairs for printing."""
        return [
            ("operation", self.operation),
            ("clustering columns", ", ".join(self.clustering_columns) or "-"),
            ("files considered", f"{self.files_considered:,}"),
            ("files removed", f"{self.files_removed:,}"),
            ("files added", f"{self.files_added:,}"),
            ("rows removed", f"{self.rows_removed:,}"),
            ("rows added", f"{self.rows_added:,}"),
            ("bytes removed", format_bytes(self.bytes_removed)),
            ("bytes added", format_bytes(self.bytes_added)),
            ("cubes touched", f"{self.cubes_touched:,}"),
            ("commits", str(self.commits)),
            ("retries", str(self.retries)),
            ("yielded", self.yield_reason if self.yielded else "no"),
            ("seconds", f"{self.seconds:.2f}"),
            ("steps", _fmt_steps(self.steps, STEPS)),
            ("task steps", _fmt_steps(self.task_steps, TASK_STEPS)),
        ]


def _fmt_steps(steps: Mapping[str, float], order: tuple[str, ...]) -> str:
    """``sample 0.31 s, rewrite 2.40 s, ...`` in run order (``-`` when none were timed)."""
    names = [n for n in order if n in steps] + sorted(set(steps) - set(order))
    return ", ".join(f"{n} {steps[n]:.2f} s" for n in names) or "-"
