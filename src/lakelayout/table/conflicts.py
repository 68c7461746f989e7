"""Concurrent writers: who won a race, whether it changed data, retrying, and yielding.

lakelayout commits optimistically (:func:`lakelayout.table.delta.commit`): an
operation plans on one version and its commit fails with
:class:`~lakelayout.errors.CommitConflict` when a commit in between removed a
file it removes. What happens next depends on the winners, the commits that
made it lose (:func:`winners`, read from the commit files in ``_delta_log``):

* **User operations retry** (DELETE, append; :func:`run_with_retries`): when
  no winner that removed one of the operation's files changed data
  (``dataChange=false`` rewrites: OPTIMIZE, compaction, clustering), the rows
  the operation must change are the same, only in other files, so it re-plans
  on the latest version and commits again, with exponential backoff and a
  bounded number of attempts. A winner that changed data (a concurrent DELETE
  of the same rows) is not retried: the operation fails at once with a
  ``CommitConflict`` naming the winner, as it does when the attempts run out.
* **Maintenance yields** (OPTIMIZE and every automatic rewrite): it never
  makes a user operation fail twice. After its first lost race a user
  operation leaves a *waiting marker* in ``<table>/_lakelayout/waiting/``
  (:class:`Waiting`); a rewrite that finds a live marker before it starts or
  before it commits gives up quietly (its metrics say it yielded, and why), as
  it does when it loses a race itself. Markers are removed when the operation
  ends and expire (:data:`WAITING_TTL_SECONDS`) if its process dies; VACUUM
  deletes expired ones. Markers are kept on local tables only, like every
  lakelayout sidecar.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lakelayout.errors import CommitConflict
from lakelayout.table import owner
from lakelayout.table.location import resolve_location

T = TypeVar("T")

#: folder of the waiting markers, relative to the table root
WAITING_DIRECTORY = os.path.join("_lakelayout", "waiting")
#: a marker older than this (seconds) is ignored and may be vacuumed
WAITING_TTL_SECONDS = 300.0


# --------------------------------------------------------------------------- who won


@dataclass(frozen=True)
class CommitSummary:
    """One commit of the log, as far as a conflict is concerned."""

    version: int
    #: lakelayout's operation name when lakelayout committed it, else Delta's ``operation``
    operation: str
    #: whether any add or remove in it has ``dataChange=true``
    data_change: bool
    removed: frozenset[str]
    added: frozenset[str]

    def describe(self) -> str:
        """``version 7 (OPTIMIZE, no data change)``."""
        change = "changed data" if self.data_change else "no data change"
        return f"version {self.version} ({self.operation}, {change})"


def read_commit(location: str, version: int) -> CommitSummary:
    """The commit ``version`` of the table at ``location`` (its JSON commit file)."""
    return summarize(version, commit_actions(location, version))


def commit_actions(location: str, version: int) -> list[dict[str, Any]]:
    """The actions of commit ``version`` of the table at ``location``, from its JSON
    commit file (OSError when the file is gone, ValueError when it is not JSON)."""
    filesystem, root = resolve_location(location)
    with filesystem.open_input_stream(f"{root}/_delta_log/{version:020d}.json") as stream:
        text = stream.read().decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def summarize(version: int, actions: Iterable[dict[str, Any]]) -> CommitSummary:
    """A :class:`CommitSummary` from the actions of one commit file.

    >>> s = summarize(3, [{"commitInfo": {"operation": "WRITE", "lakelayout":
    ...     {"operation": "OPTIMIZE"}}}, {"remove": {"path": "a", "dataChange": False}},
    ...     {"add": {"path": "b", "dataChange": False}}])
    >>> s.describe(), sorted(s.removed), sorted(s.added)
    ('version 3 (OPTIMIZE, no data change)', ['a'], ['b'])
    """
    operation = ""
    data_change = False
    removed: set[str] = set()
    added: set[str] = set()
    for action in actions:
        info = action.get("commitInfo")
        if isinstance(info, dict):
            mine = info.get("lakelayout")
            if isinstance(mine, dict) and mine.get("operation"):
                operation = str(mine["operation"])
            elif not operation:
                operation = str(info.get("operation") or "")
        for kind, paths in (("add", added), ("remove", removed)):
            body = action.get(kind)
            if isinstance(body, dict):
                paths.add(str(body.get("path")))
                data_change = data_change or bool(body.get("dataChange", True))
    return CommitSummary(
        version, operation or "unknown", data_change, frozenset(removed), frozenset(added)
    )


def winners(
    location: str, read_version: int, current: int, planned: Iterable[str] = ()
) -> tuple[tuple[CommitSummary, ...], bool]:
    """The commits after ``read_version`` (up to ``current``) an operation lost to.

    Those that removed a ``planned`` file, or every commit in between when
    none did. The flag says whether the operation's rows are unchanged: no
    winner removed a planned file with ``dataChange=true``. A commit file
    that cannot be read (cleaned up by log retention) makes the winners
    unknown, and unknown winners are never called harmless.
    """
    mine = set(planned)
    commits = []
    for version in range(read_version + 1, current + 1):
        try:
            commits.append(read_commit(location, version))
        except (OSError, ValueError):  # cleaned up or unreadable: the winners are unknown
            return tuple(c for c in commits if c.removed & mine), False
    hit = tuple(c for c in commits if c.removed & mine)
    if not hit:
        return tuple(commits), True
    return hit, not any(c.data_change for c in hit)


def describe(winners_: Sequence[object]) -> str:
    """``version 7 (OPTIMIZE, no data change)`` for the newest winner, plus how many more."""
    found = [w for w in winners_ if isinstance(w, CommitSummary)]
    if not found:
        return "an unknown commit"
    newest = found[-1]
    more = f" and {len(found) - 1} earlier commit(s)" if len(found) > 1 else ""
    return newest.describe() + more


def rows_unchanged(exc: CommitConflict) -> bool:
    """Whether the commits that beat an operation changed no data it planned on."""
    return bool(exc.winners) and exc.rows_unchanged


# --------------------------------------------------------------------------- retrying


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a user operation retries a lost race.

    Attempt ``n`` (0-based) that loses waits ``min(max_delay, base_delay * 2**n)``
    seconds times a random factor in [0.5, 1) before the next one.
    """

    attempts: int = 10
    base_delay: float = 0.1
    max_delay: float = 2.0

    def delay(self, attempt: int) -> float:
        return min(self.max_delay, self.base_delay * 2**attempt) * random.uniform(0.5, 1.0)


DEFAULT_RETRY = RetryPolicy()


def run_with_retries(
    location: str,
    operation: str,
    attempt: Callable[[int], T],
    *,
    policy: RetryPolicy = DEFAULT_RETRY,
    retryable: Callable[[CommitConflict], bool] = rows_unchanged,
) -> tuple[T, int]:
    """``attempt(n)`` until it commits; its result and the number of retries.

    ``attempt`` plans on the latest version and commits; a
    :class:`CommitConflict` it raises is retried while ``retryable`` says the
    winners left the operation's rows as they were and attempts remain. From
    the first lost race on, a waiting marker asks maintenance to yield. The
    final ``CommitConflict`` names the operation, the attempts and the winner.
    """
    if policy.attempts < 1:
        raise ValueError("RetryPolicy.attempts must be >= 1")
    waiting: Waiting | None = None
    try:
        for n in range(policy.attempts):
            try:
                return attempt(n), n
            except CommitConflict as exc:
                if not retryable(exc):
                    raise CommitConflict(
                        f"{operation} on '{location}' lost to a concurrent commit that changed "
                        f"data it planned on: {exc}",
                        winners=exc.winners,
                    ) from exc
                if n + 1 == policy.attempts:
                    raise CommitConflict(
                        f"{operation} on '{location}' gave up after {policy.attempts} "
                        f"attempt(s); the last was beaten by: {exc}",
                        winners=exc.winners,
                    ) from exc
                if waiting is None:
                    waiting = Waiting.announce(location, operation)
                else:
                    waiting.refresh()
                time.sleep(policy.delay(n))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
    finally:
        if waiting is not None:
            waiting.release()


# --------------------------------------------------------------------------- yielding


def _is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file://")


@dataclass
class Waiting:
    """A user operation's marker asking maintenance to yield (see the module doc)."""

    path: Path | None
    operation: str

    @classmethod
    def announce(cls, location: str, operation: str) -> Waiting:
        """Write a marker for ``operation`` (no marker on remote tables)."""
        if not _is_local(location):
            return cls(None, operation)
        folder = Path(location) / WAITING_DIRECTORY
        waiting = cls(folder / f"{uuid.uuid4().hex}.json", operation)
        with contextlib.suppress(OSError):  # a marker is advice: never fail the operation
            folder.mkdir(parents=True, exist_ok=True)
            waiting.refresh()
        return waiting

    def refresh(self) -> None:
        """Rewrite the marker, so it does not expire while the operation retries."""
        if self.path is None:
            return
        body = {"operation": self.operation, **owner.this_process(), "since": time.time()}
        temp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        with contextlib.suppress(OSError):
            temp.write_text(json.dumps(body), encoding="utf-8")
            os.replace(temp, self.path)

    def release(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()


def waiting_operations(location: str, *, now: float | None = None) -> list[str]:
    """Live markers' descriptions (``DELETE (pid 123 on host)``), oldest first."""
    if not _is_local(location):
        return []
    folder = Path(location) / WAITING_DIRECTORY
    moment = time.time() if now is None else now
    found: list[tuple[float, str]] = []
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            written = path.stat().st_mtime
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if moment - written > WAITING_TTL_SECONDS or not isinstance(body, dict):
            continue
        if owner.gone(body):  # killed: every rewrite yielded to it for 300 s (an audit)
            continue
        found.append(
            (written, f"{body.get('operation')} (pid {body.get('pid')} on {body.get('host')})")
        )
    return [text for _, text in sorted(found)]


def expired_markers(location: str, *, now: float | None = None) -> list[tuple[Path, float]]:
    """Markers past their time to live, with the moment they expired (for VACUUM)."""
    if not _is_local(location):
        return []
    folder = Path(location) / WAITING_DIRECTORY
    moment = time.time() if now is None else now
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        with contextlib.suppress(OSError):
            expired = path.stat().st_mtime + WAITING_TTL_SECONDS
            if expired < moment:
                out.append((path, expired))
    return out
