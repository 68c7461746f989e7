"""The metadata store: freshness, atomic swaps, declarations, column-pruned reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelayout.errors import InvalidOption, LakelayoutError
from lakelayout.skipping.indexes import BloomFilter, MinMax, Prefix, ValueList
from lakelayout.skipping.store import KEY_COLUMNS, Coverage, MetadataStore, metadata_rows
from lakelayout.stats.model import FileStats

SCHEMA = pa.schema([("s", pa.string()), ("i", pa.int64())])
INDEXES = [ValueList("s").bind(SCHEMA), MinMax("i * 2").bind(SCHEMA)]


def snapshot(paths: list[str], sizes: list[int], mtimes: list[int]) -> FileStats:
    return FileStats(
        paths=np.array(paths, dtype=object),
        sizes=np.array(sizes, dtype=np.int64),
        num_records=np.ones(len(paths), dtype=np.int64),
        modification_times=np.array(mtimes, dtype=np.int64),
        columns={},
        schema=SCHEMA,
    )


def rows(files: list[tuple[str, int, int]], data: list[pa.Table]) -> pa.Table:
    values = [{i.name: i.collect(t) for i in INDEXES} for t in data]
    return metadata_rows(INDEXES, files, values)


DATA = [
    pa.table({"s": ["a"], "i": [1]}, schema=SCHEMA),
    pa.table({"s": ["b", "c"], "i": [5, 6]}, schema=SCHEMA),
]


def test_read_aligns_with_the_snapshot_and_nulls_stale_or_missing(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    files = snapshot(["f2", "new", "f1"], [20, 5, 11], [2, 1, 1])  # f1 was replaced (size)
    got = store.read(files, ["valuelist(s)", INDEXES[1].name, "absent"])
    assert set(got) == {"valuelist(s)", INDEXES[1].name}
    assert got["valuelist(s)"].to_pylist() == [["b", "c"], None, None]
    assert got[INDEXES[1].name].to_pylist()[0] == {"min": 10, "max": 12, "nulls": 0, "rows": 2}


def test_modification_time_is_part_of_freshness(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    assert store.read(snapshot(["f1"], [10], [2]), ["valuelist(s)"])["valuelist(s)"].null_count == 1


def test_empty_store_reads_nothing(tmp_path: Path) -> None:
    assert MetadataStore(tmp_path).read(snapshot(["f"], [1], [1]), ["valuelist(s)"]) == {}


def test_upsert_replaces_and_drops_files_no_longer_live(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path, max_segments=1)  # every upsert compacts
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    store.upsert(rows([("f2", 21, 3)], DATA[:1]), live_paths=["f2", "f3"])
    table = store.read_all()
    assert table.column("path").to_pylist() == ["f2"]
    assert table.column("valuelist(s)").to_pylist() == [["a"]]


def test_upsert_replacing_every_row_keeps_the_other_index_columns_unknown(tmp_path: Path) -> None:
    # every old row is replaced: their metadata is not read, but a column the
    # new rows lack must stay in the store, null (unknown) for the new files
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    prefix = Prefix("s", length=1).bind(SCHEMA)
    store.upsert(
        metadata_rows([prefix], [("f3", 30, 3)], [{prefix.name: ["c"]}]), live_paths=["f3"]
    )
    table = store.read_all()
    assert table.column("path").to_pylist() == ["f3"]
    before = set(rows([("f1", 10, 1)], DATA[:1]).column_names) - set(KEY_COLUMNS)
    assert set(store.columns()) == before | {"prefix(s)"}
    got = store.read(snapshot(["f3"], [30], [3]), [*before, "prefix(s)"])
    assert got["prefix(s)"].to_pylist() == [["c"]]
    assert all(got[name].to_pylist() == [None] for name in before)


def test_upsert_adds_a_new_index_column(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    prefix = Prefix("s", length=1).bind(SCHEMA)
    new = metadata_rows([prefix], [("f2", 20, 2)], [{prefix.name: ["b"]}])
    store.upsert(new)
    got = store.read(snapshot(["f1", "f2"], [10, 20], [1, 2]), ["prefix(s)", "valuelist(s)"])
    assert got["prefix(s)"].to_pylist() == [None, ["b"]]
    assert got["valuelist(s)"].to_pylist() == [["a"], None]


def test_crash_before_the_pointer_swap_leaves_the_old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    before = store.current_file()

    def crash(*_args: Any) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    monkeypatch.undo()
    assert store.current_file() == before
    assert store.read_all().column("path").to_pylist() == ["f1"]
    assert not list(store.directory.glob(".CURRENT*.tmp"))
    store.write(rows([("f2", 20, 2)], DATA[1:]))  # the next write cleans up orphans
    assert len(list(store.directory.glob("store-*.parquet"))) == 2  # new + previous


def test_rows_must_have_unique_paths(tmp_path: Path) -> None:
    bad = rows([("f1", 10, 1), ("f1", 10, 1)], DATA)
    with pytest.raises(InvalidOption, match="one row per distinct"):
        MetadataStore(tmp_path).write(bad)


def test_declarations_round_trip_atomically(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    assert store.declared() == []
    store.declare([ValueList("s"), BloomFilter("i", fpp=0.05)])
    names = [i.name for i in store.declared(schema=SCHEMA)]
    assert names == ["valuelist(s)", "bloomfilter(i)"]
    with pytest.raises(InvalidOption, match="duplicate index name"):
        store.declare([ValueList("s"), ValueList("s")])
    assert len(store.declared()) == 2


def test_describe_counts_covered_stale_missing_and_bytes(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    files = snapshot(["f1", "f2", "f3"], [10, 99, 1], [1, 2, 1])
    info = store.describe(files)
    assert info["valuelist(s)"].files_covered == 1
    assert info["valuelist(s)"].stale_files == 1
    assert info["valuelist(s)"].missing_files == 1
    assert info["valuelist(s)"].metadata_bytes > 0


def test_reading_100k_files_reads_only_the_asked_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 100_000
    paths = [f"part-{i:06d}.parquet" for i in range(n)]
    table = pa.table(
        {
            "path": paths,
            "size": pa.array(np.arange(n), pa.int64()),
            "modification_time": pa.array(np.zeros(n, dtype=np.int64)),
            "valuelist(s)": pa.array([[f"v{i % 7}"] for i in range(n)], pa.list_(pa.string())),
            "bloomfilter(i)": pa.array([bytes(64)] * n, pa.binary()),
        }
    )
    store = MetadataStore(tmp_path)
    store.write(table)
    seen: list[Any] = []
    real = pq.read_table

    def spy(source: Any, *args: Any, **kwargs: Any) -> pa.Table:
        seen.append(kwargs.get("columns"))
        out = real(source, *args, **kwargs)
        seen.append(out.column_names)
        return out

    monkeypatch.setattr(pq, "read_table", spy)
    files = snapshot(paths[::-1], list(range(n))[::-1], [0] * n)
    got = store.read(files, ["valuelist(s)"])
    assert seen[0] == ["path", "size", "modification_time", "valuelist(s)"]
    assert "bloomfilter(i)" not in seen[1]
    assert got["valuelist(s)"].to_pylist()[:2] == [[f"v{(n - 1) % 7}"], [f"v{(n - 2) % 7}"]]
    assert got["valuelist(s)"].null_count == 0


# ---------------------------------------------------------------- segments


PREFIX = Prefix("s", length=1).bind(SCHEMA)


def prefix_rows(files: list[tuple[str, int, int]], values: list[list[str]]) -> pa.Table:
    return metadata_rows([PREFIX], files, [{PREFIX.name: v} for v in values])


def on_disk(store: MetadataStore) -> dict[str, int]:
    """Store files and manifests in the store's directory, by name: their mtime (ns)."""
    found = [*store.directory.glob("store-*.parquet"), *store.directory.glob("manifest-*.json")]
    return {p.name: p.stat().st_mtime_ns for p in found}


def test_upsert_appends_a_segment_and_leaves_the_old_ones_untouched(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))

    def state() -> list[tuple[str, int, bytes]]:
        return [(p.name, p.stat().st_mtime_ns, p.read_bytes()) for p in store.segments()]

    first = state()
    store.upsert(rows([("f3", 30, 3)], DATA[:1]), live_paths=["f1", "f2", "f3"])
    second = state()
    store.upsert(rows([("f4", 40, 4)], DATA[1:]), live_paths=["f1", "f2", "f3", "f4"])
    third = state()
    assert third[:2] == second and second[:1] == first  # same names, times and bytes
    manifest = store.manifest()
    assert manifest is not None and store.current_file() == store.directory / manifest.file
    assert [s.rows for s in manifest.segments] == [2, 1, 1]
    assert manifest.live_rows == 4
    segments = store.segments()
    assert {p.name for p in store.directory.glob("store-*.parquet")} == {p.name for p in segments}
    document = json.loads(store.current_file().read_text())  # type: ignore[union-attr]
    assert [s["file"] for s in document["segments"]] == [p.name for p in segments]
    got = store.read(snapshot(["f4", "f1", "f3"], [40, 10, 30], [4, 1, 3]), ["valuelist(s)"])
    assert got["valuelist(s)"].to_pylist() == [["b", "c"], ["a"], ["a"]]


def test_the_newest_segment_wins_even_where_an_older_row_matches(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    store.upsert(rows([("f1", 11, 5)], DATA[1:]))  # f1 was replaced: new size and time
    old_key = store.read(snapshot(["f1", "f2"], [10, 20], [1, 2]), ["valuelist(s)"])
    assert old_key["valuelist(s)"].to_pylist() == [None, ["b", "c"]]  # stale, not the old row
    new_key = store.read(snapshot(["f1"], [11], [5]), ["valuelist(s)"])
    assert new_key["valuelist(s)"].to_pylist() == [["b", "c"]]
    info = store.describe(snapshot(["f1", "f2", "f3"], [10, 20, 1], [1, 2, 1]))
    assert info["valuelist(s)"] == Coverage(1, 1, 1, info["valuelist(s)"].metadata_bytes)


def test_a_newer_segment_without_a_column_supersedes_an_older_value(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    store.upsert(prefix_rows([("f1", 10, 1)], [["a"]]))  # same key, only the prefix index
    got = store.read(snapshot(["f1", "f2"], [10, 20], [1, 2]), ["valuelist(s)", "prefix(s)"])
    assert got["valuelist(s)"].to_pylist() == [None, ["b", "c"]]  # unknown: keep the file
    assert got["prefix(s)"].to_pylist() == [["a"], None]
    assert store.columns() == ["valuelist(s)", INDEXES[1].name, "prefix(s)"]


def test_files_that_left_the_snapshot_are_dead_until_a_compaction(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path, max_segments=3)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    store.upsert(rows([("f3", 30, 3)], DATA[:1]), live_paths=["f2", "f3"])
    assert len(store.segments()) == 2
    assert store.read_all().column("path").to_pylist() == ["f1", "f2", "f3"]  # f1: dead, kept
    got = store.read(snapshot(["f2", "f3"], [20, 30], [2, 3]), ["valuelist(s)"])
    assert got["valuelist(s)"].to_pylist() == [["b", "c"], ["a"]]
    store.upsert(rows([("f4", 40, 4)], DATA[:1]), live_paths=["f2", "f3", "f4"])
    store.upsert(rows([("f5", 50, 5)], DATA[:1]), live_paths=["f2", "f3", "f4", "f5"])
    assert len(store.segments()) == 1  # a fourth segment is one too many: compacted
    assert store.read_all().column("path").to_pylist() == ["f2", "f3", "f4", "f5"]
    assert store.manifest().live_rows == 4  # type: ignore[union-attr]


def test_compaction_at_max_segments_reads_as_before(tmp_path: Path) -> None:
    """A store that compacts and one that never does read the same after every upsert."""
    compacting = MetadataStore(tmp_path / "k", max_segments=3)
    appending = MetadataStore(tmp_path / "a", max_segments=100)
    steps: list[tuple[pa.Table, list[str] | None]] = [
        (rows([("f1", 10, 1), ("f2", 20, 2)], DATA), None),
        (prefix_rows([("f3", 30, 3), ("f1", 10, 1)], [["x"], ["a"]]), None),
        (rows([("f2", 21, 2)], DATA[:1]), ["f1", "f2", "f3", "f4"]),
        (prefix_rows([("f4", 40, 4)], [["y"]]), ["f1", "f2", "f3", "f4"]),  # 4 > 3: compacts
        (rows([("f3", 30, 3)], DATA[1:]), ["f1", "f2", "f3", "f4"]),
    ]
    files = snapshot(["f4", "f3", "f2", "f1", "f0"], [40, 30, 21, 10, 1], [4, 3, 2, 1, 1])
    names = ["valuelist(s)", "prefix(s)", INDEXES[1].name]
    counts = []
    for step, live in steps:
        for store in (compacting, appending):
            store.upsert(step, live_paths=live)
        counts.append(len(compacting.segments()))
        want = {n: a.to_pylist() for n, a in appending.read(files, names).items()}
        assert {n: a.to_pylist() for n, a in compacting.read(files, names).items()} == want
    assert counts == [1, 2, 3, 1, 2]
    assert len(appending.segments()) == 5
    assert want["prefix(s)"] == [["y"], None, None, ["a"], None]
    assert want["valuelist(s)"] == [None, ["b", "c"], ["a"], None, None]  # f1: superseded


def test_compaction_when_more_rows_are_dead_than_live(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    live = ["f1", "f2", "f3"]
    store.upsert(rows([("f3", 30, 3)], DATA[:1]), live_paths=live)  # 3 rows, 0 dead
    store.upsert(rows([("f1", 11, 1)], DATA[:1]), live_paths=live)  # 4 rows, 1 dead
    assert len(store.segments()) == 3
    store.upsert(rows([("f2", 21, 1), ("f3", 31, 1)], DATA), live_paths=live)  # 6 rows, 3 dead
    assert len(store.segments()) == 4
    store.upsert(rows([("f3", 32, 1)], DATA[:1]), live_paths=live)  # 7 rows, 4 dead
    assert len(store.segments()) == 1
    table = store.read_all()
    assert table.column("path").to_pylist() == ["f1", "f2", "f3"]
    assert table.column("size").to_pylist() == [11, 21, 32]


def test_an_empty_upsert_writes_nothing_unless_it_compacts(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
    empty = rows([], [])
    before = store.current_file()
    assert store.upsert(empty, live_paths=["f1", "f2"]) == before
    assert store.current_file() == before
    store.upsert(empty, live_paths=["f2"])  # one of two rows is dead: not more than half
    assert store.current_file() == before
    store.upsert(rows([("f3", 30, 3)], DATA[:1]), live_paths=["f3"])  # 2 of 3 dead
    assert store.read_all().column("path").to_pylist() == ["f3"]


def test_a_store_written_before_segments_is_read_and_upserted(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.directory.mkdir(parents=True)
    legacy = store.directory / "store-0123456789abcdef.parquet"
    pq.write_table(rows([("f1", 10, 1), ("f2", 20, 2)], DATA), legacy)
    store.pointer.write_text(legacy.name)
    files = snapshot(["f1", "f2", "f3"], [10, 20, 30], [1, 2, 3])
    assert store.read(files, ["valuelist(s)"])["valuelist(s)"].to_pylist() == [
        ["a"],
        ["b", "c"],
        None,
    ]
    assert store.columns() == ["valuelist(s)", INDEXES[1].name]
    assert store.garbage() == []
    store.upsert(prefix_rows([("f3", 30, 3)], [["b"]]), live_paths=["f1", "f2", "f3"])
    assert store.segments()[0].name == legacy.name
    got = store.read(files, ["valuelist(s)", "prefix(s)"])
    assert got["valuelist(s)"].to_pylist() == [["a"], ["b", "c"], None]
    assert got["prefix(s)"].to_pylist() == [None, None, ["b"]]
    assert [g.path.name for g in store.garbage()] == []  # the old file is a live segment
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    assert legacy.name in {g.path.name for g in store.garbage()}


def test_garbage_lists_only_what_the_live_manifest_does_not_reference(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path, max_segments=3)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    first = store.current_file()
    store.upsert(rows([("f2", 20, 2)], DATA[1:]))
    second = store.current_file()
    store.upsert(rows([("f3", 30, 3)], DATA[:1]))
    assert first is not None and not first.exists()  # neither the live nor the previous one
    orphan = store.directory / "store-ffff.parquet"  # a write that crashed before its swap
    orphan.write_bytes(b"PAR1")
    live = {p.name for p in store.segments()} | {store.current_file().name}  # type: ignore[union-attr]
    dead = store.garbage()
    assert {g.path.name for g in dead} == {second.name, orphan.name}  # type: ignore[union-attr]
    assert all(g.kind == "index-store" for g in dead)
    assert all(g.dead_since >= store.pointer.stat().st_mtime for g in dead)
    store.upsert(rows([("f4", 40, 4)], DATA[1:]))  # compacts: every old segment is dead
    assert len(store.segments()) == 1
    dead_names = {g.path.name for g in store.garbage()}
    assert live <= dead_names and not dead_names & {p.name for p in store.segments()}
    assert store.current_file().name not in dead_names  # type: ignore[union-attr]
    assert set(on_disk(store)) == dead_names | {p.name for p in store.segments()} | {
        store.current_file().name  # type: ignore[union-attr]
    }


def test_a_crash_before_the_swap_of_an_upsert_leaves_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    before, files = store.current_file(), on_disk(store)

    def crash(*_args: Any) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        store.upsert(rows([("f1", 11, 2)], DATA[1:]))
    monkeypatch.undo()
    assert store.current_file() == before
    assert {n: t for n, t in on_disk(store).items() if n in files} == files
    got = store.read(snapshot(["f1"], [10], [1]), ["valuelist(s)"])
    assert got["valuelist(s)"].to_pylist() == [["a"]]
    assert len(store.garbage()) == 2  # the crashed write's segment and manifest


def test_a_corrupt_manifest_is_an_error_and_lists_no_garbage(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.write(rows([("f1", 10, 1)], DATA[:1]))
    store.current_file().write_text('{"version": 99}')  # type: ignore[union-attr]
    with pytest.raises(LakelayoutError, match=r"corrupt index store manifest .*version 99"):
        store.read(snapshot(["f1"], [10], [1]), ["valuelist(s)"])
    assert store.garbage() == []
    with pytest.raises(InvalidOption, match="max_segments must be at least 1; got 0"):
        MetadataStore(tmp_path, max_segments=0)


def test_an_unreadable_store_keeps_every_file_and_says_why(tmp_path: Path) -> None:
    """A missing or truncated segment, or CURRENT naming a missing manifest, failed every
    scan with a raw FileNotFoundError / ArrowInvalid (found by an audit): the planner now
    leaves the indexes out (every file kept by them) and names the reason."""
    from lakelayout.errors import StateUnreadable
    from lakelayout.expr.parse import parse_predicate
    from lakelayout.skipping.planner import plan

    files = snapshot(["f1", "f2"], [10, 20], [1, 2])
    predicate = parse_predicate("s = 'zzz'", SCHEMA)
    damage = {
        "segment removed": lambda segment: segment.unlink(),
        "segment truncated": lambda segment: segment.write_bytes(segment.read_bytes()[:40]),
        "manifest missing": lambda segment: (tmp_path / "_lakelayout/index/CURRENT").write_text(
            "manifest-gone.json"
        ),
    }
    for name, spoil in damage.items():
        store = MetadataStore(tmp_path)
        store.write(rows([("f1", 10, 1), ("f2", 20, 2)], DATA))
        assert plan(predicate, files, indexes=INDEXES, metadata=store).keep.tolist() == [
            False,
            False,
        ]
        (segment,) = store.segments()
        spoil(segment)
        with pytest.raises(StateUnreadable, match="index store"):
            store.read(files, ["valuelist(s)"])
        result = plan(predicate, files, indexes=INDEXES, metadata=store)
        assert result.keep.tolist() == [True, True], name
        assert "index store unreadable" in result.unused["valuelist(s)"]
        for leftover in (tmp_path / "_lakelayout").rglob("*"):
            if leftover.is_file():
                leftover.unlink()
