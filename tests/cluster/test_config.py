from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakelayout.api import Table
from lakelayout.cluster import config as cfg
from lakelayout.errors import InvalidOption
from lakelayout.table.datafile import TableFormat

SCHEMA = pa.schema(
    [
        ("a", pa.int32()),
        ("b", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("s", pa.struct([("x", pa.int32())])),
        ("d", pa.float64()),
        ("e", pa.int64()),
    ]
)


def test_valid_columns_and_expressions_keep_schema_spelling() -> None:
    assert cfg.validate_clustering(["A", "month(ts)"], SCHEMA) == ["a", "month(ts)"]
    assert cfg.validate_clustering(None, SCHEMA) is None


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["nope"], "unknown column 'nope'"),
        (["a", "b", "d", "e", "ts"], "too many clustering columns: 5 given"),
        (["s"], "type struct<x: int32> is not supported"),
        (["a", "A"], "given twice"),
        (["rand()"], "cannot cluster by 'rand()'"),
        ([], "at least one column"),
    ],
)
def test_invalid_clustering_is_refused_with_the_offending_entry(
    columns: list[str], message: str
) -> None:
    with pytest.raises(InvalidOption, match=message.replace("(", r"\(").replace(")", r"\)")):
        cfg.validate_clustering(columns, SCHEMA)


def test_a_string_is_not_a_list() -> None:
    with pytest.raises(InvalidOption, match=r"cluster_by=\['a'\]"):
        cfg.validate_clustering("a", SCHEMA)  # type: ignore[arg-type]


def test_unknown_column_hint() -> None:
    with pytest.raises(InvalidOption, match="Did you mean 'ts'"):
        cfg.validate_clustering(["tss"], SCHEMA)


def test_create_refuses_bad_clustering_before_writing(tmp_path: pytest.TempPathFactory) -> None:
    where = str(tmp_path / "t")  # type: ignore[operator]
    with pytest.raises(InvalidOption, match="unknown column"):
        Table.create(where, schema=SCHEMA, cluster_by=["zzz"])
    import os

    assert not os.path.exists(where)


def test_create_with_schema_stores_and_alters_clustering(tmp_path: pytest.TempPathFactory) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, cluster_by=["a", "month(ts)"])  # type: ignore[operator]
    assert t.clustering_columns == ["a", "month(ts)"]
    assert t.detail().clustering_columns == ["a", "month(ts)"]
    t.cluster_by(None)
    assert t.clustering_columns is None
    t.cluster_by(["b"])
    assert t.properties[cfg.CLUSTERING_COLUMNS] == '["b"]'


def test_cube_size_defaults_scale_with_the_table() -> None:
    small = cfg.cube_sizes({}, table_bytes=1000, target_file=100)
    assert (small.min_cube_size, small.target_cube_size) == (200, 300)
    big = cfg.cube_sizes({}, table_bytes=8_000_000, target_file=100)
    assert big.min_cube_size == 1_000_000
    huge = cfg.cube_sizes({}, table_bytes=10**15, target_file=100)
    assert huge.min_cube_size == cfg.MIN_CUBE_SIZE_CAP
    explicit = cfg.cube_sizes(
        {cfg.MIN_CUBE_SIZE: "50", cfg.TARGET_CUBE_SIZE: "70"}, table_bytes=10**9, target_file=10
    )
    assert (explicit.min_cube_size, explicit.target_cube_size, explicit.explicit) == (50, 70, True)
    with pytest.raises(InvalidOption, match="must be >="):
        cfg.cube_sizes(
            {cfg.MIN_CUBE_SIZE: "50", cfg.TARGET_CUBE_SIZE: "10"}, table_bytes=1, target_file=1
        )
    with pytest.raises(InvalidOption, match="number of bytes"):
        cfg.cube_sizes({cfg.MIN_CUBE_SIZE: "x"}, table_bytes=1, target_file=1)


def test_a_rewrite_shuffles_above_the_small_size_and_on_partitioned_tables() -> None:
    assert not cfg.rewrite_shuffles(100, 100, partitioned=False)
    assert cfg.rewrite_shuffles(101, 100, partitioned=False)
    assert cfg.rewrite_shuffles(1, 100, partitioned=True)


def test_a_target_cube_size_alone_holds_as_the_table_grows() -> None:
    """targetCubeSize set without minCubeSize passed Table.create and failed every
    OPTIMIZE once the default minimum (an eighth of the table) passed it (a review)."""
    from lakelayout.cluster.config import cube_sizes

    config = {"lakelayout.targetCubeSize": "9000"}
    for table_bytes in (0, 10**6, 10**12):
        sizes = cube_sizes(config, table_bytes=table_bytes, target_file=1024)
        assert sizes.target_cube_size == 9000 and sizes.min_cube_size <= 9000
    with pytest.raises(InvalidOption, match="must be >="):
        cube_sizes({**config, "lakelayout.minCubeSize": "10000"}, table_bytes=0, target_file=1024)


def _mapped(logical: list[str], physical: list[str]) -> TableFormat:
    fields = [pa.field(n, pa.int64()) for n in logical]
    return TableFormat(pa.schema(fields), pa.schema([pa.field(p, pa.int64()) for p in physical]))


MAPPED = {"delta.columnMapping.mode": "name"}


def test_clustering_follows_a_renamed_column_by_its_recorded_physical_name() -> None:
    """Delta's RENAME COLUMN keeps a column's physical name; the clustering entries
    named the old name and OPTIMIZE failed on an unknown column until cluster_by was
    called again. Entries set under column mapping record the physical names."""
    before = _mapped(["k", "ts", "s"], ["col-1", "col-2", "col-3"])
    props = cfg.clustering_properties(["k", "month(ts)", "s"], before, MAPPED)
    config = {**MAPPED, **props}
    assert cfg.table_clustering(config, before) == ["k", "month(ts)", "s"]
    # k renamed to 'k k', ts to when, and a new column takes the name k
    after = _mapped(["k k", "when", "s", "k"], ["col-1", "col-2", "col-3", "col-4"])
    assert cfg.table_clustering(config, after) == ["`k k`", "MONTH(`when`)", "s"]
    # a record made for other entries (set by a writer that did not record) is not used
    stale = {**config, cfg.CLUSTERING_COLUMNS: '["k"]'}
    assert cfg.table_clustering(stale, after) == ["k"]
    # a dropped column is left as named, for the operation to report
    dropped = _mapped(["ts", "s"], ["col-2", "col-3"])
    assert cfg.table_clustering(config, dropped) == ["k", "month(ts)", "s"]
    assert cfg.dropped_clustering_columns(config, dropped) == ["k"]
    # ... also when a new column takes its name
    retaken = _mapped(["ts", "s", "k"], ["col-2", "col-3", "col-4"])
    assert cfg.dropped_clustering_columns(config, retaken) == ["k"]
    assert cfg.dropped_clustering_columns(config, after) == []


def test_a_table_created_with_column_mapping_records_its_clustering_physical_names(
    tmp_path: Path,
) -> None:
    """Table.create with column mapping and cluster_by recorded no physical names (delta-rs
    names the columns as it creates the table), so a RENAME COLUMN by Delta made every
    OPTIMIZE fail until cluster_by again (carried from an audit). They are recorded in one
    more commit; a table whose property commits need Delta's connector (a table-features
    protocol, here for a TIMESTAMP_NTZ column) is still created without one, unrecorded."""
    import datetime as dt

    from lakelayout.table import delta

    path = str(tmp_path / "t")
    rows = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [1.0, 2.0, 3.0]})
    Table.create(path, rows, properties=MAPPED, cluster_by=["a", "upper(b)"])
    snap = delta.snapshot(path)
    physical = [snap.table_format.physical_name(n) for n in ("a", "b", "c")]
    assert all(p.startswith("col-") for p in physical)  # delta-rs's names, not the logical
    assert cfg.CLUSTERING_PHYSICAL_NAMES in snap.configuration
    # Delta's RENAME COLUMN a TO a2, b TO `b b` (physical names stay), then ADD COLUMN a
    renamed = _mapped(["a2", "b b", "c", "a"], [*physical, "col-new"])
    assert cfg.table_clustering(snap.configuration, renamed) == ["a2", "UPPER(`b b`)"]
    assert cfg.dropped_clustering_columns(snap.configuration, renamed) == []
    assert delta.snapshot(path).files.num_records.sum() == 3
    empty = str(tmp_path / "empty")
    Table.create(empty, schema=rows.schema, properties=MAPPED, cluster_by=["c"])
    assert cfg.CLUSTERING_PHYSICAL_NAMES in delta.snapshot(empty).configuration

    ntz = str(tmp_path / "ntz")
    stamps = pa.table({"a": [1, 2], "ts": [dt.datetime(2020, 1, 1)] * 2})
    Table.create(ntz, stamps, properties=MAPPED, cluster_by=["a"])
    snap = delta.snapshot(ntz)
    assert cfg.CLUSTERING_PHYSICAL_NAMES not in snap.configuration
    assert cfg.parse_clustering(snap.configuration) == ["a"] and snap.files.num_records.sum() == 2


def test_clustering_set_before_column_mapping_follows_the_name_as_physical() -> None:
    """Enabling column mapping gives existing columns their names as physical names."""
    config = {**MAPPED, cfg.CLUSTERING_COLUMNS: '["k", "id"]'}
    renamed = _mapped(["id", "kk", "k"], ["id", "k", "col-9"])
    assert cfg.table_clustering(config, renamed) == ["kk", "id"]
    assert cfg.table_clustering({cfg.CLUSTERING_COLUMNS: '["k"]'}, renamed) == ["k"]


def test_clustering_without_column_mapping_records_no_physical_names() -> None:
    plain = TableFormat.plain(pa.schema([("k", pa.int64())]))
    assert cfg.clustering_properties(["k"], plain, {}) == {cfg.CLUSTERING_COLUMNS: '["k"]'}
    cleared = {cfg.CLUSTERING_PHYSICAL_NAMES: '{"columns": ["k"], "physical": {"k": "k"}}'}
    assert cfg.clustering_properties(None, plain, cleared) == {
        cfg.CLUSTERING_COLUMNS: "",
        cfg.CLUSTERING_PHYSICAL_NAMES: "",
    }


def test_a_dotted_column_beside_a_struct_of_its_head_is_stored_quoted() -> None:
    """A top-level ``s.d`` beside a struct ``s`` (Delta allows it under column mapping)
    was stored unquoted, which reads as the struct's field: every later OPTIMIZE failed
    on the struct (an audit)."""
    from lakelayout.layouts.ranks import Dimension

    schema = pa.schema(
        [("s.d", pa.int64()), ("s", pa.struct([("e", pa.int64())])), ("a.b", pa.int32())]
    )
    stored = cfg.validate_clustering(["`s.d`", "a.b"], schema)
    assert stored == ["`s.d`", "a.b"]
    assert [Dimension(entry).column_name(schema) for entry in stored] == ["s.d", "a.b"]
