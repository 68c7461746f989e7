"""The metadata store: freshness, atomic swaps, declarations, column-pruned reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelayout.errors import InvalidOption
from lakelayout.skipping.indexes import BloomFilter, MinMax, Prefix, ValueList
from lakelayout.skipping.store import KEY_COLUMNS, MetadataStore, metadata_rows
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
    store = MetadataStore(tmp_path)
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
