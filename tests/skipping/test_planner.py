"""plan(): min/max and indexes together, attribution, and stale metadata through the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import InvalidOption
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes import Prefix, ValueList
from lakelayout.skipping.planner import MINMAX, plan
from lakelayout.skipping.store import MetadataStore, metadata_rows

from .index_helpers import file_stats, metadata

SCHEMA = pa.schema([("s", pa.string()), ("i", pa.int64())])
FILES = [
    pa.table({"s": ["apple", "avocado"], "i": [1, 2]}, schema=SCHEMA),
    pa.table({"s": ["apple", "zebra"], "i": [3, 4]}, schema=SCHEMA),
    pa.table({"s": ["mango", "melon"], "i": [5, 6]}, schema=SCHEMA),
    pa.table({"s": pa.array([], pa.string()), "i": pa.array([], pa.int64())}, schema=SCHEMA),
]
INDEXES = [ValueList("s").bind(SCHEMA), Prefix("s", length=2).bind(SCHEMA)]


def test_attribution_counts_what_each_index_alone_rules_out() -> None:
    stats = file_stats(FILES, SCHEMA)
    pred = parse_predicate("s = 'banana' AND i <= 4", SCHEMA)
    result = plan(pred, stats, metadata=metadata(INDEXES, FILES), indexes=INDEXES)
    assert result.keep.tolist() == [False, False, False, False]
    # min/max: file 0 (s range), file 2 (i > 4) and the empty file; the lists: every file
    assert result.skipped_by == {MINMAX: 3, "valuelist(s)": 4, "prefix(s)": 4}
    assert result.bytes_skipped_by[MINMAX] == 1000 + 1002 + 1003
    assert result.files_skipped == 4


def test_never_weaker_than_min_max_alone() -> None:
    stats = file_stats(FILES, SCHEMA)
    pred = parse_predicate("i > 4 OR s LIKE '%ebra'", SCHEMA)
    with_indexes = plan(pred, stats, metadata=metadata(INDEXES, FILES), indexes=INDEXES)
    without = plan(pred, stats, metadata={}, indexes=[])
    assert (with_indexes.keep <= without.keep).all()
    assert with_indexes.keep.tolist() == [False, True, True, False]
    assert without.keep.tolist() == [True, True, True, False]


def test_indexes_without_a_column_are_not_used() -> None:
    stats = file_stats(FILES, SCHEMA)
    result = plan(parse_predicate("s = 'x'", SCHEMA), stats, metadata={}, indexes=INDEXES)
    assert set(result.skipped_by) == {MINMAX}


def test_misaligned_metadata_is_an_error() -> None:
    stats = file_stats(FILES, SCHEMA)
    short = {INDEXES[0].name: pa.nulls(2, INDEXES[0].arrow_type)}
    with pytest.raises(InvalidOption, match="has 2 entries for 4 files"):
        plan(parse_predicate("s = 'x'", SCHEMA), stats, metadata=short, indexes=INDEXES)


def test_stale_and_missing_metadata_never_skip(tmp_path: Path) -> None:
    """A file replaced after indexing, and one appended without metadata, are kept."""
    store = MetadataStore(tmp_path)
    old = [
        pa.table({"s": ["kiwi"], "i": [1]}, schema=SCHEMA),
        pa.table({"s": ["fig"], "i": [2]}, schema=SCHEMA),
    ]
    stats = file_stats(old, SCHEMA)
    values = [{i.name: i.collect(t) for i in INDEXES} for t in old]
    keys = [
        (str(p), int(s), int(m))
        for p, s, m in zip(stats.paths, stats.sizes, stats.modification_times, strict=True)
    ]
    store.write(metadata_rows(INDEXES, keys, values))
    # file 0 is rewritten in place with 'banana' (new size), file 2 is appended
    new = [
        pa.table({"s": ["banana"], "i": [1]}, schema=SCHEMA),
        old[1],
        pa.table({"s": ["banana"], "i": [9]}, schema=SCHEMA),
    ]
    snapshot = file_stats(new, SCHEMA)
    object.__setattr__(snapshot, "sizes", np.array([5000, stats.sizes[1], 77]))
    columns = store.read(snapshot, [i.name for i in INDEXES])
    assert columns["valuelist(s)"].to_pylist() == [None, ["fig"], None]
    result = plan(
        parse_predicate("s = 'banana'", SCHEMA), snapshot, metadata=columns, indexes=INDEXES
    )
    assert result.keep.tolist() == [True, False, True]
    assert result.skipped_by["valuelist(s)"] == 1


# ---------------------------------------------------------------- virtual files and layouts


def _virtual() -> tuple[pa.Table, Any, Any]:
    from lakelayout.layouts import QdTreeLayout
    from lakelayout.stats.blocks import block_stats

    rng = np.random.default_rng(3)
    sample = pa.table(
        {"k": rng.integers(0, 10, 2000), "a": rng.integers(0, 1000, 2000), "id": np.arange(2000)}
    )
    layout = QdTreeLayout.fit(sample, ["k IN (1, 5)", "a < 250", "k = 7"], target_blocks=6)
    blocks = np.asarray(layout.assign(sample), dtype=np.int64)
    return sample, layout, block_stats(sample, blocks)


def test_virtual_files_with_a_layout_skip_blocks_and_say_which_source_did() -> None:
    from lakelayout.expr.evaluate import evaluate
    from lakelayout.skipping.planner import LayoutBlocks

    sample, layout, files = _virtual()
    block_ids = np.array([int(str(p).split("-")[1]) for p in files.paths])
    entry = LayoutBlocks(layout, block_ids)
    pred = parse_predicate("k IN (1, 5)", sample.schema)
    alone = plan(pred, files)
    both = plan(pred, files, layouts=[entry])
    assert both.keep.sum() < alone.keep.sum()  # the logical index skips blocks min/max keeps
    assert (both.keep <= alone.keep).all()
    assert both.skipped_by["layout(qdtree)"] == int(both.ruled_out["layout(qdtree)"].sum()) > 0
    assert both.bytes_skipped_by["layout(qdtree)"] == int(
        files.sizes[both.ruled_out["layout(qdtree)"]].sum()
    )
    owners = np.asarray(layout.assign(sample))
    needed = np.unique(owners[evaluate(pred, sample)])
    assert both.keep[np.searchsorted(block_ids, needed)].all()  # no block with a match dropped
    # a layout told it knows no column relaxes the predicate to TRUE: it rules nothing out
    blind = plan(pred, files, layouts=[LayoutBlocks(layout, block_ids, frozenset())])
    assert "layout(qdtree)" not in blind.skipped_by
    assert blind.keep.tolist() == alone.keep.tolist()


def test_misaligned_layout_blocks_are_an_error() -> None:
    from lakelayout.skipping.planner import LayoutBlocks

    sample, layout, files = _virtual()
    with pytest.raises(InvalidOption, match="layout block ids have 2 entries"):
        plan(
            parse_predicate("k = 1", sample.schema),
            files,
            layouts=[LayoutBlocks(layout, np.zeros(2))],
        )


def test_the_plan_reports_totals_and_the_kept_files() -> None:
    stats = file_stats(FILES, SCHEMA)
    planned = plan(parse_predicate("i <= 2", SCHEMA), stats)
    assert planned.keep.tolist() == [True, False, False, False]
    assert planned.kept.paths.tolist() == ["part-0.parquet"]
    assert (planned.files_total, planned.files_kept, planned.files_skipped) == (4, 1, 3)
    assert planned.bytes_kept == 1000 and planned.bytes_total == 1000 + 1001 + 1002 + 1003
    assert planned.rows_kept == 2 and planned.rows_total == 6


def test_partition_values_prune_first_and_are_reported_apart(tmp_path: Path) -> None:
    """A table another writer partitioned: the planner rules files out by partition value
    (``skipped_by["partition"]``), exactly, NULL partitions included, floats too."""
    from deltalake import write_deltalake

    from lakelayout.skipping.planner import PARTITION
    from lakelayout.table import delta

    data = pa.table(
        {
            "x": pa.array(range(12), pa.int64()),
            "p": ["a", "b", None, "a", "b", None, "a", "b", None, "a", "b", None],
            "f": [1.5, 2.5] * 6,
        }
    )
    write_deltalake(str(tmp_path), data, partition_by=["p", "f"])
    snap = delta.snapshot(str(tmp_path))
    files, parts = snap.files, snap.table_format.partition_columns
    assert parts == ("p", "f") and len(files) == 6  # delta-rs wrote the files, not lakelayout

    def run(where: str) -> Any:
        return plan(parse_predicate(where, snap.schema), files, partition_columns=parts)

    values = [snap.data_file(str(p)).partition_values for p in files.paths]
    result = run("p = 'a' AND x > 100")
    assert result.keep.tolist() == [False] * 6
    assert result.skipped_by[PARTITION] == sum(v["p"] != "a" for v in values)
    assert result.skipped_by[MINMAX] == 6  # min/max includes the partition values
    nulls = run("p IS NULL")
    assert nulls.keep.tolist() == [v["p"] is None for v in values]
    # a float partition value is exact for every writer (a float max from delta-rs's
    # statistics is not trusted, a partition value is)
    high = run("f >= 2.0")
    assert high.keep.tolist() == [v["f"] == 2.5 for v in values]
    assert high.skipped_by[PARTITION] == 3
    data_only = run("x > 100")
    assert data_only.skipped_by[PARTITION] == 0 and data_only.skipped_by[MINMAX] == 6
    assert PARTITION not in plan(parse_predicate("p = 'a'", snap.schema), files).skipped_by


def test_values_only_spark_decides_leave_their_own_files_undecided() -> None:
    """One single-valued file from 1960 (whose offset in a region zone only the JVM's
    zone rules decide) or holding 'ƛ' (whose upper case Python's Unicode 14 lacks) made
    the exact decision give up for every file (a review): only those files are kept now."""
    import datetime as dt

    from lakelayout.expr.parse import parse_predicate
    from lakelayout.skipping.planner import plan
    from lakelayout.stats.blocks import block_stats

    utc = dt.timezone.utc
    stamps = [dt.datetime(1960, 6, 1, 12, tzinfo=utc)] + [
        dt.datetime(2000 + i, 6, 1, 12, tzinfo=utc) for i in range(5)
    ]
    sample = pa.table(
        {
            "ts": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            "s": ["ƛ", "a", "b", "c", "d", "e"],
        }
    )
    files = block_stats(sample, np.arange(6))
    for sql in ("hour(ts) = 15", "upper(s) = 'X'"):
        kept = plan(
            parse_predicate(sql, sample.schema, timezone="Europe/Oslo"),
            files,
            timezone="Europe/Oslo",
        ).keep
        assert kept.tolist() == [True, False, False, False, False, False], sql
