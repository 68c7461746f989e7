from __future__ import annotations

from lakelayout.cluster.plan import PlannedFile, compaction_bins, describe_cubes, plan_cubes
from lakelayout.cluster.provenance import FileProvenance


def _file(
    path: str,
    size: int,
    t: int,
    cube: str | None = None,
    by: tuple[str, ...] = ("a", "b"),
    min_size: int | None = None,
) -> PlannedFile:
    prov = (
        FileProvenance(path, cube_id=cube, clustered_by=by, min_cube_size=min_size)
        if cube
        else None
    )
    return PlannedFile(path, size, size, t, prov)


def test_compaction_leaves_large_and_lone_small_files_alone() -> None:
    files = [_file("big", 100, 0), _file("s1", 10, 1), _file("s2", 10, 2), _file("s3", 30, 3)]
    assert compaction_bins(files, min_file_size=75, target_file_size=100) == [["s1", "s2", "s3"]]
    assert compaction_bins(files, min_file_size=75, target_file_size=20) == [["s1", "s2"]]
    assert compaction_bins(files[:2], min_file_size=75, target_file_size=100) == []


def test_stable_cubes_are_never_candidates() -> None:
    files = [
        _file("c1a", 60, 0, "c1"),
        _file("c1b", 60, 0, "c1"),  # stable (120 >= 100)
        _file("c2a", 30, 1, "c2"),  # partial
        _file("f1", 20, 2),
        _file("f2", 20, 3),  # fresh
    ]
    plan = plan_cubes(files, ["a", "b"], min_cube_size=100, target_cube_size=150)
    assert plan.bins == [["c2a", "f1", "f2"]]
    assert sorted(plan.skipped) == ["c1a", "c1b"]
    states = {c.cube_id: c.state for c in plan.cubes}
    assert states == {"c1": "stable", "c2": "partial"}


def test_other_columns_untouched_unless_full() -> None:
    files = [_file("old", 30, 0, "c0", by=("x",)), _file("f", 30, 1)]
    assert plan_cubes(files, ["a"], min_cube_size=100, target_cube_size=150).bins == [["f"]]
    full = plan_cubes(files, ["a"], min_cube_size=100, target_cube_size=150, full=True)
    assert full.bins == [["old", "f"]]


def test_a_lone_partial_cube_is_not_rewritten_but_two_are_merged() -> None:
    one = [_file("p", 30, 0, "c1")]
    assert plan_cubes(one, ["a", "b"], min_cube_size=100, target_cube_size=150).bins == []
    two = [*one, _file("q", 30, 1, "c2")]
    assert plan_cubes(two, ["a", "b"], min_cube_size=100, target_cube_size=150).bins == [["p", "q"]]


def test_bins_close_once_they_reach_the_target_cube_size() -> None:
    fresh = [_file(f"f{i}", 40, i) for i in range(7)]
    plan = plan_cubes(fresh, ["a"], min_cube_size=100, target_cube_size=100)
    assert [len(b) for b in plan.bins] == [3, 3, 1]


def test_a_cube_keeps_the_min_size_it_was_written_with() -> None:
    files = [_file("c", 50, 0, "c1", min_size=40)]
    (cube,) = describe_cubes(files, ["a", "b"], min_cube_size=500)
    assert cube.state == "stable"  # the table grew, the cube stays stable
    shrunk = [_file("c", 30, 0, "c1", min_size=40)]
    (cube,) = describe_cubes(shrunk, ["a", "b"], min_cube_size=500)
    assert cube.state == "partial"  # deletes shrank it below its own threshold
