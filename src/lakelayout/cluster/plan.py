"""Which files an OPTIMIZE rewrites, and how they are grouped: pure planning, no Spark.

Two planners over the live files of a snapshot:

* :func:`compaction_bins` -- files smaller than ``min_file_size`` are packed,
  in arrival order, into bins of about ``target_file_size``; a bin of one file
  is dropped (rewriting it alone changes nothing), so files already near the
  target and lone small files are left alone.
* :func:`plan_cubes` -- liquid clustering's ZCube selection (design doc,
  "Incremental clustering using ZCube"). A *cube* is the set of live files
  sharing a cube id. With the current clustering columns ``C``:

  - a file without a cube id is *fresh* (never clustered): a candidate;
  - a cube clustered by columns other than ``C`` is left alone (ALTER CLUSTER
    BY only affects new data), unless ``full``;
  - a cube whose live bytes reach its min cube size is *stable* and never
    rewritten, unless ``full``. Its min size is ``min(current, the size in
    force when it was written)``, so a cube that was stable stays stable as
    the table grows, and becomes partial again only when deletes shrink it;
  - any other cube with columns ``C`` is *partial*: a candidate.

  Candidates are packed into bins, partial cubes first (a cube's files stay
  together), then fresh files in arrival order; a bin closes once its bytes
  reach ``target_cube_size`` (not a hard max, as in Delta). Each bin becomes
  one new cube and one commit. A bin holding a single partial cube and no
  fresh file is dropped: re-clustering it alone would produce the same cube.

On a partitioned table both planners work *within each partition* (as
Delta's OPTIMIZE does): a bin, and so a cube or a compacted file, never mixes
files of two partitions (:attr:`PlannedFile.partition`), so a rewrite can
keep every row in its partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lakelayout.cluster.provenance import FileProvenance


@dataclass(frozen=True)
class PlannedFile:
    """A live file as the planners see it."""

    path: str
    size: int
    rows: int
    modification_time: int
    provenance: FileProvenance | None = None
    #: the file's partition values (in partition column order; () when unpartitioned)
    partition: tuple[object, ...] = ()

    @property
    def cube_id(self) -> str | None:
        return self.provenance.cube_id if self.provenance is not None else None


@dataclass(frozen=True)
class CubeInfo:
    """One existing cube: its files and whether OPTIMIZE may rewrite it."""

    cube_id: str
    clustered_by: tuple[str, ...] | None
    paths: tuple[str, ...]
    bytes: int
    rows: int
    min_cube_size: int
    state: str  # "stable", "partial" or "other-columns"


@dataclass(frozen=True)
class CubePlan:
    """The bins to cluster (each a list of paths) and what was left alone."""

    bins: list[list[str]]
    cubes: list[CubeInfo]
    fresh: list[str]
    skipped: list[str] = field(default_factory=list)

    @property
    def candidate_paths(self) -> list[str]:
        return [p for b in self.bins for p in b]


def planned_files(
    paths: Sequence[str],
    sizes: Sequence[int] | np.ndarray,
    rows: Sequence[int] | np.ndarray,
    mtimes: Sequence[int] | np.ndarray,
    provenance: Mapping[str, FileProvenance],
    partitions: Sequence[tuple[object, ...]] | None = None,
) -> list[PlannedFile]:
    """Zip snapshot columns and provenance into :class:`PlannedFile` records."""
    keys = partitions if partitions is not None else [()] * len(paths)
    return [
        PlannedFile(str(p), int(s), int(r), int(m), provenance.get(str(p)), tuple(k))
        for p, s, r, m, k in zip(paths, sizes, rows, mtimes, keys, strict=True)
    ]


def by_partition(files: Sequence[PlannedFile]) -> list[list[PlannedFile]]:
    """``files`` grouped by partition, groups in order of their first file.

    >>> fs = [PlannedFile("a", 1, 1, 0, partition=("x",)), PlannedFile("b", 1, 1, 0, partition=("y",)),
    ...       PlannedFile("c", 1, 1, 0, partition=("x",))]
    >>> [[f.path for f in g] for g in by_partition(fs)]
    [['a', 'c'], ['b']]
    """
    groups: dict[tuple[object, ...], list[PlannedFile]] = {}
    for f in files:
        groups.setdefault(_key(f.partition), []).append(f)
    return list(groups.values())


def _key(partition: tuple[object, ...]) -> tuple[object, ...]:
    """A hashable key of partition values (NaN equal to NaN, -0.0 apart from 0.0: two
    partitions, as Delta writes them)."""
    return tuple(_value_key(v) for v in partition)


def _value_key(value: object) -> object:
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value == 0 and math.copysign(1.0, value) < 0:
            return "-0.0"
    return value


def _arrival_order(files: Sequence[PlannedFile]) -> list[PlannedFile]:
    return sorted(files, key=lambda f: (f.modification_time, f.path))


def compaction_bins(
    files: Sequence[PlannedFile], *, min_file_size: int, target_file_size: int
) -> list[list[str]]:
    """Bins (lists of paths) of small files, each about ``target_file_size`` bytes.

    >>> fs = [PlannedFile(f"f{i}", s, 1, i) for i, s in enumerate([10, 10, 100, 10, 10, 10])]
    >>> compaction_bins(fs, min_file_size=50, target_file_size=25)
    [['f0', 'f1'], ['f3', 'f4']]

    Bins never mix partitions.
    """
    bins: list[list[str]] = []
    for group in by_partition(_arrival_order(files)):
        bins.extend(_pack_small(group, min_file_size, target_file_size))
    return bins


def _pack_small(
    files: Sequence[PlannedFile], min_file_size: int, target_file_size: int
) -> list[list[str]]:
    small = [f for f in _arrival_order(files) if f.size < min_file_size]
    bins: list[list[str]] = []
    current: list[str] = []
    size = 0
    for f in small:
        if current and size + f.size > target_file_size:
            bins.append(current)
            current, size = [], 0
        current.append(f.path)
        size += f.size
    if current:
        bins.append(current)
    return [b for b in bins if len(b) > 1]


def describe_cubes(
    files: Sequence[PlannedFile], columns: Sequence[str] | None, min_cube_size: int
) -> list[CubeInfo]:
    """Every cube among ``files`` with its state for the current ``columns``."""
    grouped: dict[str, list[PlannedFile]] = {}
    for f in files:
        if f.cube_id is not None:
            grouped.setdefault(f.cube_id, []).append(f)
    current = tuple(columns) if columns else None
    out = []
    for cube_id, members in grouped.items():
        prov = members[0].provenance
        assert prov is not None
        size = sum(f.size for f in members)
        recorded = prov.min_cube_size or min_cube_size
        threshold = min(min_cube_size, recorded)
        if current is None or _norm(prov.clustered_by) != _norm(current):
            state = "other-columns"
        elif size >= threshold:
            state = "stable"
        else:
            state = "partial"
        out.append(
            CubeInfo(
                cube_id=cube_id,
                clustered_by=prov.clustered_by,
                paths=tuple(f.path for f in _arrival_order(members)),
                bytes=size,
                rows=sum(max(f.rows, 0) for f in members),
                min_cube_size=threshold,
                state=state,
            )
        )
    out.sort(key=lambda c: (min(_mtime(files, c.paths)), c.cube_id))
    return out


def _mtime(files: Sequence[PlannedFile], paths: Sequence[str]) -> list[int]:
    wanted = set(paths)
    return [f.modification_time for f in files if f.path in wanted] or [0]


def _norm(dims: Sequence[str] | None) -> tuple[str, ...] | None:
    return tuple(d.lower() for d in dims) if dims is not None else None


def plan_cubes(
    files: Sequence[PlannedFile],
    columns: Sequence[str],
    *,
    min_cube_size: int,
    target_cube_size: int,
    full: bool = False,
) -> CubePlan:
    """ZCube bins for one incremental OPTIMIZE (see the module docstring), per partition."""
    plans = [
        _plan_partition(
            group,
            columns,
            min_cube_size=min_cube_size,
            target_cube_size=target_cube_size,
            full=full,
        )
        for group in by_partition(files)
    ]
    if len(plans) == 1:
        return plans[0]
    return CubePlan(
        bins=[b for p in plans for b in p.bins],
        cubes=[c for p in plans for c in p.cubes],
        fresh=[f for p in plans for f in p.fresh],
        skipped=[s for p in plans for s in p.skipped],
    )


def _plan_partition(
    files: Sequence[PlannedFile],
    columns: Sequence[str],
    *,
    min_cube_size: int,
    target_cube_size: int,
    full: bool,
) -> CubePlan:
    cubes = describe_cubes(files, columns, min_cube_size)
    fresh = [f for f in _arrival_order(files) if f.cube_id is None]
    by_path = {f.path: f for f in files}
    units: list[tuple[list[str], bool]] = []  # (paths, is_existing_cube)
    skipped: list[str] = []
    for cube in cubes:
        if cube.state == "partial" or full:
            units.append((list(cube.paths), True))
        else:
            skipped.extend(cube.paths)
    units.extend(([f.path], False) for f in fresh)
    bins: list[list[str]] = []
    kinds: list[list[bool]] = []
    current: list[str] = []
    current_kinds: list[bool] = []
    size = 0
    for paths, is_cube in units:
        current.extend(paths)
        current_kinds.append(is_cube)
        size += sum(by_path[p].size for p in paths)
        if size >= target_cube_size:
            bins.append(current)
            kinds.append(current_kinds)
            current, current_kinds, size = [], [], 0
    if current:
        bins.append(current)
        kinds.append(current_kinds)
    kept = [b for b, k in zip(bins, kinds, strict=True) if full or k != [True]]
    return CubePlan(bins=kept, cubes=cubes, fresh=[f.path for f in fresh], skipped=skipped)


def rows_of(files: Sequence[PlannedFile], paths: Sequence[str]) -> int:
    """Total known rows of ``paths``."""
    wanted = set(paths)
    return int(np.sum([max(f.rows, 0) for f in files if f.path in wanted], dtype=np.int64))
