"""VACUUM: delete the files no version inside the retention needs, and lakelayout's own garbage.

Data files (everything outside ``_delta_log/`` and ``_lakelayout/``, partition
folders ``part=value/`` included) are found by delta-rs's own vacuum
(:meth:`deltalake.DeltaTable.vacuum`) in its ``full`` mode, which lists the
table's storage: a file is deleted when the latest version does not reference
it and either

* a commit removed it (a *removed* file) and that removal is older than the
  retention, so no version committed inside the retention window still
  references it (a version newer than the removal cannot, an older one is
  outside the window); or
* no commit references it (an *orphan*: a write that crashed or lost a race
  before its commit, e.g. ``ll-…parquet`` files of a killed process, or a
  file whose removal is older than the last checkpoint) and it was last
  modified before the retention began, so a write still in flight keeps its
  files unless it takes longer than the retention (its commit then finds them
  gone and commits nothing: :func:`lakelayout.table.delta.commit`).

delta-rs's default (non-``full``) vacuum only considers files the log says
were removed, so it never finds the orphans a crashed write leaves; lakelayout
runs the ``full`` listing and also runs the default one to tell the two kinds
apart in the report. Both are delta-rs dry runs: lakelayout deletes the files
that exist itself (delta-rs lists a removed file again after it was deleted,
and its real run would write two commits counting those files again), so
VACUUM writes no commit and never races a writer for a version.

Deletion vector files (``deletion_vector_<uuid>.bin``, Delta's connector writes
them) are not add actions, so delta-rs's listing takes every one for
unreferenced, the ones live rows depend on too. lakelayout deletes one only
when it is older than the retention and no add or remove action left in
``_delta_log/`` names it (commits, compacted logs and checkpoints, the UUID
decoded from the descriptor): a vector a failed DELETE left, or one whose
commits the log's own cleanup (``delta.logRetentionDuration``) has removed.
That keeps more than Delta's VACUUM (the vectors of live files and of removals
inside the retention) and never less. When the log holds what this does not
read (V2 checkpoints, sidecars, coordinated commits) or a live file's vector
is not where its descriptor says, every vector stays.

Sidecar garbage under ``<table>/_lakelayout/`` (local tables) is collected
by rules its owners state: index store manifests and segments the live
manifest does not reference (:meth:`MetadataStore.garbage`), provenance store
files the ``CURRENT`` pointer no longer names (:meth:`ProvenanceStore.garbage`),
layout documents no live file's provenance refers to, temporary files an
interrupted atomic write left, and expired "waiting" markers of user
operations (:mod:`lakelayout.table.conflicts`). Each is deleted only once it
has been dead for longer than the retention. Live sidecars (the pointers,
the files they name, the segments the live index manifest lists,
``indexes.json``, layouts that live files use) and any file lakelayout does
not recognize are never touched.

The retention is ``retain_hours`` or, when not given, the table's
``delta.deletedFileRetentionDuration`` (Delta's default: 7 days). As Delta
does, a retention shorter than the table's is refused unless ``force=True``:
readers of an older version and writers that have not committed yet may still
need those files.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.errors import InvalidOption
from lakelayout.skipping.store import MetadataStore, SidecarFile, temp_files
from lakelayout.table import datafile, delta
from lakelayout.table.conflicts import expired_markers
from lakelayout.table.location import resolve_location

#: the Delta table property holding how long removed files are kept
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
#: Delta's default for :data:`RETENTION_PROPERTY`
DEFAULT_RETENTION = timedelta(days=7)
#: kinds of files VACUUM deletes, in report order
KINDS = (
    "removed",
    "orphan",
    "deletion-vector",
    "index-store",
    "provenance",
    "layout",
    "temp",
    "waiting",
)

_UNITS = {
    "nanosecond": timedelta(microseconds=0.001),
    "microsecond": timedelta(microseconds=1),
    "millisecond": timedelta(milliseconds=1),
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}
_PART = re.compile(r"(\d+)\s*([a-z]+?)s?\b")
#: a retention in one unit, spelled as delta-rs reads it (``interval 90 minutes``; in
#: capitals delta-rs falls back to its 168 hours: a review)
_ONE_UNIT = re.compile(r"interval\s+\d+\s+[a-z]+")


@dataclass(frozen=True)
class VacuumedFile:
    """One file VACUUM deleted (or, in a dry run, would delete)."""

    #: path relative to the table root
    path: str
    #: one of :data:`KINDS`
    kind: str
    #: bytes (0 when the file could not be examined before deletion)
    size: int


@dataclass(frozen=True)
class VacuumMetrics:
    """What one VACUUM deleted (``dry_run``: would delete), by kind."""

    uri: str
    version: int
    dry_run: bool
    retention_hours: float
    files: tuple[VacuumedFile, ...]
    seconds: float = 0.0

    @property
    def files_deleted(self) -> int:
        return len(self.files)

    @property
    def bytes_deleted(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def paths(self) -> list[str]:
        """Table-relative paths, sorted."""
        return sorted(f.path for f in self.files)

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (files, bytes), for the kinds present, in :data:`KINDS` order."""
        out: dict[str, tuple[int, int]] = {}
        for kind in KINDS:
            mine = [f.size for f in self.files if f.kind == kind]
            if mine:
                out[kind] = (len(mine), sum(mine))
        return out

    def as_rows(self) -> list[tuple[str, str, str]]:
        """(kind, files, bytes) rows for printing, ending with the total."""
        rows = [(kind, str(n), str(b)) for kind, (n, b) in self.by_kind().items()]
        rows.append(("total", str(self.files_deleted), str(self.bytes_deleted)))
        return rows


# --------------------------------------------------------------------------- retention


def parse_interval(text: str) -> timedelta:
    """A Delta interval property value (``interval 7 days``, ``168 hours``) as a timedelta.

    >>> parse_interval("interval 7 days")
    datetime.timedelta(days=7)
    >>> parse_interval("interval 1 day 12 hours")
    datetime.timedelta(days=1, seconds=43200)
    >>> parse_interval("30 seconds")
    datetime.timedelta(seconds=30)
    """
    body = str(text).strip().lower()
    body = body[len("interval") :].strip() if body.startswith("interval") else body
    total = timedelta(0)
    consumed = 0
    for match in _PART.finditer(body):
        if body[consumed : match.start()].strip():
            break
        unit = _UNITS.get(match.group(2))
        if unit is None:
            break
        total += unit * int(match.group(1))
        consumed = match.end()
    if consumed == 0 or body[consumed:].strip():
        raise InvalidOption(
            f"cannot read the interval {text!r} (expected e.g. 'interval 7 days'; units "
            f"{', '.join(_UNITS)}; months and years are not allowed for a retention)"
        )
    return total


def table_retention(configuration: Mapping[str, str]) -> timedelta:
    """The table's retention: :data:`RETENTION_PROPERTY`, else :data:`DEFAULT_RETENTION`."""
    raw = configuration.get(RETENTION_PROPERTY)
    if raw is None or not str(raw).strip():
        return DEFAULT_RETENTION
    try:
        return parse_interval(raw)
    except InvalidOption as exc:
        raise InvalidOption(f"table property {RETENTION_PROPERTY}: {exc}") from None


def _span(value: timedelta) -> str:
    """``168 hours`` / ``30 seconds``."""
    seconds = value.total_seconds()
    return f"{seconds / 3600:g} hours" if seconds >= 3600 else f"{seconds:g} seconds"


#: the longest retention: every file older than the year 1 (longer overflowed a timedelta)
MAX_RETAIN_HOURS = 24 * 700_000


def _check_retention(
    retain_hours: int | None,
    configuration: Mapping[str, str],
    force: bool,
    location: str,
) -> timedelta:
    """The retention to apply; InvalidOption if shorter than the table's without ``force``."""
    configured = table_retention(configuration)
    if retain_hours is None:
        return configured
    if (
        isinstance(retain_hours, bool)
        or not isinstance(retain_hours, int)
        or not 0 <= retain_hours <= MAX_RETAIN_HOURS
    ):
        raise InvalidOption(
            f"retain_hours must be a whole number of hours >= 0 and <= {MAX_RETAIN_HOURS:,} "
            f"(what a date can go back), got {retain_hours!r}"
        )
    asked = timedelta(hours=retain_hours)
    if asked < configured and not force:
        raw = configuration.get(RETENTION_PROPERTY, "").strip()
        source = f"{RETENTION_PROPERTY} = '{raw}'" if raw else "Delta's default"
        raise InvalidOption(
            f"retain_hours={retain_hours} is shorter than the retention of '{location}' "
            f"({_span(configured)}, {source}): files that readers of older versions or "
            "writes not yet committed still need could be deleted. Pass force=True "
            "(CLI: --force) to vacuum anyway"
        )
    return asked


# --------------------------------------------------------------------------- VACUUM


def vacuum(
    uri: str,
    *,
    retain_hours: int | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> VacuumMetrics:
    """VACUUM the table at ``uri``; what was (``dry_run``: would be) deleted.

    A dry run lists exactly the files a real run at the same moment deletes
    and deletes nothing.
    """
    started = time.time()
    location = delta.normalize_uri(uri)
    table = delta.open_table(location)
    configuration = dict(table.metadata().configuration)
    retention = _check_retention(retain_hours, configuration, force, location)
    version = table.version()
    spelled = None if retain_hours is not None else configuration.get(RETENTION_PROPERTY)
    data = _data_files(table, location, retention, spelled, dry_run=dry_run)
    sidecars = _sidecar_garbage(table, location, started - retention.total_seconds())
    if not dry_run:
        sidecars = [f for f in sidecars if _unlink(os.path.join(location, f.path))]
    return VacuumMetrics(
        uri=location,
        version=version,
        dry_run=dry_run,
        retention_hours=retention.total_seconds() / 3600,
        files=tuple(data + sidecars),
        seconds=time.time() - started,
    )


def _data_files(
    table: DeltaTable,
    location: str,
    retention: timedelta,
    spelled: str | None,
    *,
    dry_run: bool,
) -> list[VacuumedFile]:
    """Unreferenced data files past ``retention`` (listed by delta-rs), deleted unless ``dry_run``.

    delta-rs lists a removed file as long as its tombstone is in the log, even
    after an earlier VACUUM deleted it, so only files that exist are kept (and
    deleted here, not by delta-rs's non-dry run, which would also write two
    commits counting those files again).

    The retention is lakelayout's, checked already (:func:`_check_retention`), and is
    given to delta-rs in whole hours: delta-rs reads the table's retention by other
    rules (``36 hours`` without ``interval`` is its default 168 hours; of ``interval 1
    day 30 minutes`` it reads the first unit, 24 hours, and deleted files still inside
    the retention: a review). A fraction of an hour is rounded up (files are kept a
    little longer), except where the table spells its retention ``interval N unit``
    (``spelled``, the property's text), which delta-rs reads as lakelayout does, to the
    second.
    """
    hours = retention.total_seconds() / 3600
    # ours: delta-rs is given the retention; else it reads the table's, as lakelayout does
    ours = hours.is_integer() or spelled is None or not _ONE_UNIT.fullmatch(spelled.strip())

    def listing(full: bool) -> set[str]:
        found = table.vacuum(
            retention_hours=math.ceil(hours) if ours else None,
            dry_run=True,
            enforce_retention_duration=not ours,
            full=full,
        )
        return {_relative(location, p) for p in found}

    try:
        full = listing(full=True)
        removed = listing(full=False)
    except DeltaError as exc:
        raise InvalidOption(f"delta-rs refused to vacuum '{location}': {exc}") from exc
    filesystem, root = resolve_location(location)
    # deletion vectors: delta-rs's full listing takes the files of the vectors live rows
    # depend on for unreferenced (deleting them, rows deleted by Delta came back
    # unreadable with the table: an audit); of the ones it lists (older than the
    # retention) only those no action left in the log names go
    vectors = {p for p in full if _DELETION_VECTOR.search(p)}
    listed = (full - vectors) | unnamed_vectors(vectors, _vectors_in_log(filesystem, root), root)
    sizes = _sizes(filesystem, root, sorted(listed))
    out = []
    for path, size in sorted(sizes.items()):
        if not dry_run:
            try:
                filesystem.delete_file(f"{root}/{path}")
            except FileNotFoundError:  # another VACUUM got there first
                continue
        kind = "deletion-vector" if path in vectors else "removed" if path in removed else "orphan"
        out.append(VacuumedFile(path, kind, size))
    return out


def unnamed_vectors(vectors: set[str], named: set[str] | None, root: str) -> set[str]:
    """Of the table-relative vector files ``vectors``, those ``named`` (filesystem paths,
    as :func:`lakelayout.table.datafile.deletion_vector_file` spells them under ``root``)
    does not hold; none when ``named`` is None (the log could not be read for them).

    >>> unnamed_vectors({"a.bin", "b.bin"}, {"/a.bin"}, "/")  # a table at the root
    {'b.bin'}
    """
    if named is None:
        return set()
    base = root.rstrip("/")
    return {p for p in vectors if f"{base}/{p}" not in named}


#: the files of ``_delta_log/`` whose actions are read for the deletion vectors they name
_COMMIT = re.compile(r"(\d{20})\.json|\d{20}\.\d{20}\.compacted\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(\.\d{10}\.\d{10})?\.parquet")
#: files of ``_delta_log/`` that hold no actions: checksums, the checkpoint pointer, what
#: Delta's VACUUM notes of its last run, hidden files (Hadoop's ``.crc``) and temporary
#: ones (a commit not yet renamed)
_NO_ACTIONS = re.compile(r"\d{20}\.crc|_last_checkpoint|_last_vacuum_info|\..*|.*\.tmp")


def _vectors_in_log(filesystem: pafs.FileSystem, root: str) -> set[str] | None:
    """Every deletion vector file an add or remove action in ``_delta_log/`` names (JSON
    commits, compacted logs, classic checkpoints), as filesystem paths; None, keeping every
    vector, when the log holds what this does not read (V2 checkpoints, sidecars,
    coordinated commits), a vector it cannot place, or a live vector whose file is not
    there (a misreading must never delete the vectors live rows depend on).

    Deliberately more than Delta's VACUUM keeps (the vectors of live files and of removals
    inside the retention): a vector goes once the log no longer names it at all, i.e.
    after the log's own cleanup (``delta.logRetentionDuration``), or at once when no commit
    ever named it (a write that failed before its commit).
    """
    selector = pafs.FileSelector(f"{root}/_delta_log", allow_not_found=True)
    commits: list[tuple[int, list[dict[str, Any]]]] = []
    checkpoints: dict[int, list[dict[str, Any]]] = {}
    named: list[Mapping[str, Any]] = []
    try:
        for info in filesystem.get_file_info(selector):
            name = info.base_name
            if _NO_ACTIONS.fullmatch(name):
                continue
            if info.type != pafs.FileType.File:
                # _sidecars/, _commits/, _staged_commits/ (Delta 4 makes the last one, empty)
                if filesystem.get_file_info(pafs.FileSelector(info.path, recursive=True)):
                    return None  # actions this does not read
                continue
            if (match := _COMMIT.fullmatch(name)) is not None:
                with filesystem.open_input_stream(info.path) as stream:
                    lines = stream.read().decode("utf-8").splitlines()
                actions = [json.loads(line) for line in lines if line.strip()]
                named += _descriptors(actions)
                if match.group(1) is not None:  # a commit, not a compacted range
                    commits.append((int(match.group(1)), actions))
            elif (match := _CHECKPOINT.fullmatch(name)) is not None:
                actions = _checkpoint_actions(filesystem, info.path)
                named += _descriptors(actions)
                checkpoints.setdefault(int(match.group(1)), []).extend(actions)
            else:
                return None  # a V2 checkpoint, or a file of a later protocol
        files = _vector_files(root, named)
        live = _vector_files(root, _live_vectors(checkpoints, commits))
        found = filesystem.get_file_info(sorted(live))
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
        return None
    if any(info.type != pafs.FileType.File for info in found):
        return None
    return files


def _vector_files(root: str, descriptors: list[Mapping[str, Any]]) -> set[str]:
    """The files of ``descriptors`` (inline vectors have none)."""
    return {f for d in descriptors if (f := datafile.deletion_vector_file(root, d)) is not None}


def _descriptors(actions: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """The deletion vector descriptors of the add and remove actions among ``actions``."""
    out = []
    for action in actions:
        for key in ("add", "remove"):
            vector = (action.get(key) or {}).get("deletionVector")
            if vector:
                out.append(vector)
    return out


def _checkpoint_actions(filesystem: pafs.FileSystem, path: str) -> list[dict[str, Any]]:
    """The add and remove actions of one checkpoint file: path and deletion vector only."""
    parquet = pq.ParquetFile(path, filesystem=filesystem)
    wanted = [name for name in ("add", "remove") if name in parquet.schema_arrow.names]
    table = parquet.read(columns=wanted)
    out: list[dict[str, Any]] = []
    for key in wanted:
        column = table.column(key)
        fields = {f.name for f in column.type}
        if "deletionVector" not in fields:
            continue
        paths = pc.struct_field(column, "path").to_pylist()
        vectors = pc.struct_field(column, "deletionVector").to_pylist()
        out += [
            {key: {"path": p, "deletionVector": v}}
            for p, v in zip(paths, vectors, strict=True)
            if p is not None
        ]
    return out


def _live_vectors(
    checkpoints: dict[int, list[dict[str, Any]]], commits: list[tuple[int, list[dict[str, Any]]]]
) -> list[Mapping[str, Any]]:
    """The deletion vectors of the latest version's files: the newest checkpoint's adds,
    then the later commits in order, an action keyed by its path and vector (Delta's
    reconciliation)."""
    start = max(checkpoints, default=-1)
    steps = [[a for a in checkpoints.get(start, []) if "add" in a]]  # removes: tombstones
    steps += [
        actions for version, actions in sorted(commits, key=lambda c: c[0]) if version > start
    ]
    live: dict[tuple[str, str], Mapping[str, Any]] = {}
    for actions in steps:
        for action in actions:
            for key in ("add", "remove"):
                body = action.get(key)
                if not body:
                    continue
                vector = body.get("deletionVector") or {}
                unique = json.dumps([vector.get("pathOrInlineDv"), vector.get("offset")])
                if key == "add":
                    live[(body["path"], unique)] = vector
                else:
                    live.pop((body["path"], unique), None)
    return [vector for vector in live.values() if vector]


#: the files of Delta's deletion vectors (with or without a random prefix folder)
_DELETION_VECTOR = re.compile(r"(^|/)deletion_vector_[0-9a-fA-F-]+\.bin$")


def _relative(location: str, path: str) -> str:
    """A path delta-rs listed, relative to the table root (it may give absolute ones)."""
    text = urllib.parse.unquote(path[len("file://") :]) if path.startswith("file://") else path
    root = location.rstrip("/") + "/"
    return text[len(root) :] if text.startswith(root) else text


def _sizes(filesystem: pafs.FileSystem, root: str, paths: list[str]) -> dict[str, int]:
    """Bytes of each table-relative path that exists as a file."""
    if not paths:
        return {}
    infos = filesystem.get_file_info([f"{root}/{p}" for p in paths])
    return {
        p: int(info.size or 0)
        for p, info in zip(paths, infos, strict=True)
        if info.type == pafs.FileType.File
    }


def _sidecar_garbage(table: DeltaTable, location: str, threshold: float) -> list[VacuumedFile]:
    """lakelayout's dead sidecar files under ``_lakelayout/`` dead since before ``threshold``."""
    if not os.path.isdir(os.path.join(location, "_lakelayout")):
        return []
    actions = pa.table(table.get_add_actions(flatten=False))
    live = [str(p) for p in actions.column("path").to_pylist()]
    candidates: list[SidecarFile] = [
        *MetadataStore(location).garbage(),
        *ProvenanceStore(location).garbage(live),
        *temp_files(location),
        *(SidecarFile(path, "waiting", since) for path, since in expired_markers(location)),
    ]
    out = []
    seen: set[str] = set()
    for item in candidates:
        relative = os.path.relpath(item.path, location)
        if item.dead_since >= threshold or relative in seen:
            continue
        seen.add(relative)
        with contextlib.suppress(OSError):
            out.append(VacuumedFile(relative, item.kind, item.path.stat().st_size))
    return sorted(out, key=lambda f: (KINDS.index(f.kind), f.path))


def _unlink(path: str) -> bool:
    """Delete ``path``; False when it was already gone (another VACUUM got there first)."""
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True
