"""What one OPTIMIZE (or DELETE) did: files, bytes and rows removed and added."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


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
        )

    def as_rows(self) -> list[tuple[str, str]]:
        """(name, value) pairs for printing."""
        return [
            ("operation", self.operation),
            ("clustering columns", ", ".join(self.clustering_columns) or "-"),
            ("files considered", str(self.files_considered)),
            ("files removed", str(self.files_removed)),
            ("files added", str(self.files_added)),
            ("rows removed", str(self.rows_removed)),
            ("rows added", str(self.rows_added)),
            ("bytes removed", str(self.bytes_removed)),
            ("bytes added", str(self.bytes_added)),
            ("cubes touched", str(self.cubes_touched)),
            ("commits", str(self.commits)),
            ("retries", str(self.retries)),
            ("yielded", self.yield_reason if self.yielded else "no"),
            ("seconds", f"{self.seconds:.2f}"),
        ]
