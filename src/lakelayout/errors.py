"""The lakelayout error family.

Every error raised on purpose by lakelayout is a :class:`LakelayoutError`, so
callers can catch one type. Messages name the offending value (column,
expression, option, path) and what is supported instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakelayout.cluster.optimize_metrics import OptimizeMetrics


class LakelayoutError(Exception):
    """Base class of every error lakelayout raises on purpose."""


class TableNotFound(LakelayoutError):
    """No Delta table at the given location."""


class TableExists(LakelayoutError):
    """A table already exists where a new one was to be created."""


class LocationNotEmpty(TableExists):
    """A new table was to be created in a folder that already holds other files."""


class PredicateError(LakelayoutError):
    """A predicate or expression cannot be parsed, bound or typed."""


class SchemaMismatch(LakelayoutError):
    """Data does not fit the table's schema."""


class CommitConflict(LakelayoutError):
    """Another writer changed the table between read and commit; nothing was committed.

    ``winners`` are the commits the operation lost to (``CommitSummary`` of
    :mod:`lakelayout.table.conflicts`: version, operation, whether it changed
    data), oldest first. ``rows_unchanged`` is True when none of them changed
    data the operation planned on (they only rewrote files, ``dataChange=false``,
    or only appended), so re-planning on the latest version and retrying is safe.
    """

    def __init__(
        self, message: str, *, winners: Sequence[object] = (), rows_unchanged: bool = False
    ) -> None:
        super().__init__(message)
        self.winners = tuple(winners)
        self.rows_unchanged = rows_unchanged


class AfterCommitError(LakelayoutError):
    """The operation committed (``version``), then a step after its commit failed (an
    ``after_commit`` hook). The table holds the commit: retrying as if nothing had been
    committed would repeat it. ``metrics`` describe that commit."""

    def __init__(self, message: str, *, version: int, metrics: OptimizeMetrics) -> None:
        super().__init__(message)
        self.version = version
        self.metrics = metrics


class LayoutError(LakelayoutError):
    """A layout cannot be fitted, applied or loaded as asked."""


class InvalidOption(LakelayoutError):
    """An option or parameter has a value lakelayout does not accept."""


class EnvironmentProblem(LakelayoutError):
    """The machine lacks something lakelayout needs (Java, a package)."""


class StateLocked(LakelayoutError):
    """Another process has held the lock on a table's lakelayout state (e.g. the online
    reorganizer's) for longer than lakelayout waits; nothing was changed."""


class StateUnreadable(LakelayoutError):
    """lakelayout's own state beside a table (under ``_lakelayout/``: the online
    reorganizer's state, index store, clustering provenance) is missing, damaged or
    cannot be locked or written; the table's data is not affected."""


class TableCorrupt(LakelayoutError):
    """The table's files are not what its Delta log says (a data file it lists is
    missing), or its Delta log cannot be read (a commit file that is not JSON);
    nothing was written."""


class UnsupportedTable(LakelayoutError):
    """A Delta table uses a feature lakelayout cannot honour (e.g. deletion vectors)."""


def closest(name: str, candidates: Iterable[str]) -> str:
    """A " Did you mean 'x'?" suffix naming the closest candidate, or ''.

    >>> closest("l_shipdat", ["l_shipdate", "l_orderkey"])
    " Did you mean 'l_shipdate'?"
    >>> closest("zzz", ["l_shipdate"])
    ''
    """
    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" Did you mean '{lowered[match[0]]}'?" if match else ""
