"""The latest snapshot of a local table is read once per commit, never served stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakelayout.table import delta


@pytest.fixture(autouse=True)
def _fresh() -> None:
    delta.forget_snapshots()


def _rows(snap: delta.Snapshot) -> int:
    return int(snap.files.total_rows)


def test_kept_until_any_writer_commits(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    first = delta.snapshot(uri)
    assert delta.snapshot(uri) is first  # no commit: the same snapshot, the log not re-read
    assert delta.snapshot("file://" + uri) is first  # the same table by another name
    write_deltalake(uri, pa.table({"a": [4]}), mode="append")  # another writer commits
    second = delta.snapshot(uri)
    assert second is not first and (second.version, _rows(second)) == (1, 4)
    fresh = delta.read_snapshot(uri)
    assert (fresh.version, list(fresh.files.paths)) == (1, list(second.files.paths))
    # an explicit version is kept beside the latest, and does not replace it
    at_zero = delta.snapshot(uri, 0)
    assert (at_zero.version, _rows(at_zero)) == (0, 3)
    assert delta.snapshot("file://" + uri, 0) is at_zero
    assert delta.snapshot(uri) is second
    assert delta.snapshot(uri, 1) is second  # the latest, asked for by its version: not read again
    write_deltalake(uri, pa.table({"a": [5]}), mode="append")
    assert delta.snapshot(uri, 0) is at_zero  # a later commit leaves version 0 as it was
    assert _rows(delta.snapshot(uri, 1)) == 4 and _rows(delta.snapshot(uri)) == 5


def test_a_table_recreated_at_the_same_path_is_read_again(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    assert _rows(delta.snapshot(uri)) == 3
    shutil.rmtree(uri)
    write_deltalake(uri, pa.table({"a": list(range(10)), "b": ["x"] * 10}))  # version 0 again
    again = delta.snapshot(uri)
    assert again.version == 0 and _rows(again) == 10 and again.schema.names == ["a", "b"]


def test_an_explicit_version_is_read_again_when_its_commit_file_changes(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    write_deltalake(uri, pa.table({"a": [4]}), mode="append")
    kept = delta.snapshot(uri, 1)
    assert delta.snapshot(uri, 1) is kept and _rows(kept) == 4
    shutil.rmtree(uri)  # recreated: versions 0 and 1 are other commits now
    write_deltalake(uri, pa.table({"a": list(range(10))}))
    write_deltalake(uri, pa.table({"a": list(range(20))}), mode="append")
    again = delta.snapshot(uri, 1)
    assert again is not kept and _rows(again) == 30
    assert delta.commit_identity(uri, 1) is not None
    assert delta.commit_identity(uri, 2) is None  # no such commit: nothing to key on
    assert delta.commit_identity("s3://bucket/t", 1) is None


def test_only_the_latest_tables_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_TABLES", 2)
    uris = [str(tmp_path / f"t{i}") for i in range(3)]
    for uri in uris:
        write_deltalake(uri, pa.table({"a": [1]}))
    kept = [delta.snapshot(uri) for uri in uris]
    assert delta.snapshot(uris[2]) is kept[2] and delta.snapshot(uris[1]) is kept[1]
    assert delta.snapshot(uris[0]) is not kept[0]  # the least recently used was dropped
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_TABLES", 0)  # off: every call reads the log
    assert delta.snapshot(uris[0]) is not delta.snapshot(uris[0])


def test_the_latest_tables_kept_hold_a_bounded_number_of_files_but_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 tables are kept (16 made a driver going round 17 read every log again; an
    audit), so their files are bounded too; one table past the bound is still kept."""
    assert delta.SNAPSHOT_CACHE_TABLES >= 64
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_FILES", 3)
    uris = [str(tmp_path / f"t{i}") for i in range(3)]
    for files, uri in zip((2, 1, 4), uris, strict=True):
        for k in range(files):
            write_deltalake(uri, pa.table({"a": [k]}), mode="append")
    kept = [delta.snapshot(uri) for uri in uris[:2]]  # 3 files in all: both kept
    assert delta.snapshot(uris[0]) is kept[0] and delta.snapshot(uris[1]) is kept[1]
    big = delta.snapshot(uris[2])  # 4 files: the others go, it stays
    assert delta.snapshot(uris[2]) is big
    assert delta.snapshot(uris[0]) is not kept[0] and delta.snapshot(uris[1]) is not kept[1]


def test_only_the_latest_versions_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_VERSIONS", 2)
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [0]}))
    for i in range(1, 3):
        write_deltalake(uri, pa.table({"a": [i]}), mode="append")
    kept = [delta.snapshot(uri, v) for v in range(3)]
    assert [_rows(s) for s in kept] == [1, 2, 3]
    assert delta.snapshot(uri, 2) is kept[2] and delta.snapshot(uri, 1) is kept[1]
    assert delta.snapshot(uri, 0) is not kept[0]  # the least recently used was dropped
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_VERSIONS", 0)
    assert delta.snapshot(uri, 1) is not delta.snapshot(uri, 1)


def test_kept_versions_hold_a_bounded_number_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta, "SNAPSHOT_CACHE_VERSION_FILES", 3)
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [0]}))
    for i in range(1, 4):
        write_deltalake(uri, pa.table({"a": [i]}), mode="append")  # version v has v + 1 files
    one, two = delta.snapshot(uri, 0), delta.snapshot(uri, 1)  # 1 + 2 files: both kept
    assert delta.snapshot(uri, 0) is one and delta.snapshot(uri, 1) is two
    three = delta.snapshot(uri, 2)  # 3 more files: the older two go to stay within 3
    assert delta.snapshot(uri, 2) is three
    assert delta.snapshot(uri, 1) is not two
    four = delta.snapshot(uri, 3)  # more files than the whole budget: never kept
    assert len(four.files) == 4 and delta.snapshot(uri, 3) is not four


def test_the_key_moves_with_every_commit(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    assert delta.latest_commit(uri) is None  # no table yet: nothing to key on
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    first = delta.latest_commit(uri)
    assert first is not None and first[0] == 0
    assert delta.latest_commit(uri) == first  # no commit, same key
    write_deltalake(uri, pa.table({"a": [4]}), mode="append")
    second = delta.latest_commit(uri)
    assert second is not None and second[0] == 1
    assert delta.latest_commit("file://" + uri) is not None
    assert delta.latest_commit("s3://bucket/t") is None  # not local: the log is read every time


def test_a_kept_table_is_brought_up_to_date_and_handed_to_one_caller(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    first = delta.head(uri)
    assert (first.version, first.schema.names) == (0, ["a"])
    delta.release(first)
    write_deltalake(uri, pa.table({"a": [4]}), mode="append")  # another writer commits
    second = delta.head(uri)
    assert second.table is first.table  # kept, and loaded up to the latest version
    assert second.version == 1 and second.table.version() == 1
    other = delta.head(uri)  # while the first caller holds it: another one, loaded anew
    assert other.table is not second.table and other.version == 1
    delta.release(second)
    shutil.rmtree(uri)  # created again at the path: the kept table is of another table
    write_deltalake(uri, pa.table({"b": ["x"]}))
    third = delta.head(uri)
    assert third.table is not second.table
    assert (third.version, third.schema.names) == (0, ["b"])


def test_appends_see_what_other_writers_committed_between_them(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from lakelayout import Table
    from lakelayout.errors import SchemaMismatch, UnsupportedTable

    uri = str(tmp_path / "t")
    table = Table.create(uri, pa.table({"a": pa.array([1, 2], pa.int64())}))
    assert table.append(pa.table({"a": pa.array([3], pa.int64())})).version == 1
    write_deltalake(uri, pa.table({"a": pa.array([4], pa.int64())}), mode="append")
    DeltaTable(uri).create_checkpoint()  # the next append loads past a checkpoint
    assert table.append(pa.table({"a": pa.array([5], pa.int64())})).version == 3
    DeltaTable(uri).alter.add_constraint({"pos": "a > 0"})  # version 4
    files = set(DeltaTable(uri).file_uris())
    # delta-rs cannot check a CHECK constraint on a commit: refused before writing, as
    # the table is now (an append that reused its loaded table as it was would not know)
    with pytest.raises(UnsupportedTable, match="CHECK"):
        table.append(pa.table({"a": pa.array([-1], pa.int64())}))
    assert set(DeltaTable(uri).file_uris()) == files
    assert len(list(Path(uri).glob("*.parquet"))) == len(files)
    DeltaTable(uri).alter.drop_constraint("pos")  # version 5
    assert table.append(pa.table({"a": pa.array([6], pa.int64())})).version == 6
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("a").to_pylist()) == [1, 2, 3, 4, 5, 6]
    shutil.rmtree(uri)  # another table at the path: its schema, not the one appended to before
    write_deltalake(uri, pa.table({"a": pa.array(["x"])}))
    for _ in range(6):  # ... even once it has as many versions as the old one had
        write_deltalake(uri, pa.table({"a": pa.array(["x"])}), mode="append")
    with pytest.raises(SchemaMismatch, match="'a'"):
        table.append(pa.table({"a": pa.array([7], pa.int64())}))
    assert table.append(pa.table({"a": pa.array(["y"])})).version == 7
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("a").to_pylist()) == ["x"] * 7 + ["y"]
