"""Writing Arrow data in this process (``Table.create`` / ``append`` with a pyarrow.Table):
the same writer Spark tasks run, no Spark job; every reader agrees with the rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelayout.api import Table
from lakelayout.errors import CommitConflict, InvalidOption, LakelayoutError, SchemaMismatch
from lakelayout.skipping.indexes import MinMax
from lakelayout.table.writer import arrow_data_schema

from .test_writer import SCHEMA, TARGET, _input_table, _rows

pytestmark = pytest.mark.spark


def _jobs(spark: Any) -> int:
    """Spark jobs this session has run so far (jobs outside a job group)."""
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_create_and_append_from_arrow_run_no_spark_job_and_every_reader_agrees(
    spark: Any, tmp_path: Path
) -> None:
    data = _input_table(6_000)
    jobs = _jobs(spark)
    t = Table.create(str(tmp_path / "t"), data, target_file_size=TARGET)
    created = t.version
    more = _input_table(1_500, seed=3)
    more = more.set_column(0, "id", pc.add(more["id"], 100_000))  # ids of their own
    # another column order and spelling, the strings as large_string (polars' kind)
    shuffled = more.select(list(reversed(SCHEMA.names)))
    shuffled = shuffled.rename_columns([n.upper() for n in shuffled.column_names])
    shuffled = shuffled.set_column(
        shuffled.column_names.index("PATH"), "PATH", shuffled["PATH"].cast(pa.large_string())
    )
    m = t.append(shuffled)
    assert _jobs(spark) == jobs  # neither write started a Spark job
    assert m.rows_added == 1_500 and m.version == created + 1

    snap = t.snapshot()
    assert snap.schema.field("path").type == pa.string()
    assert len(snap.files) >= 8  # rolled at the target size, as Spark tasks roll them
    expected = _rows(pa.concat_tables([data, more]))
    assert _rows(DeltaTable(t.uri).to_pyarrow_table()) == expected
    assert _rows(pl.read_delta(t.uri).to_arrow()) == expected
    assert _rows(t.scan().df.toArrow().cast(SCHEMA)) == expected
    # Delta statistics describe each file
    actions = pa.table(DeltaTable(t.uri).get_add_actions(flatten=True))
    for i, path in enumerate(actions.column("path").to_pylist()):
        content = pq.read_table(Path(t.uri) / path)
        assert actions.column("num_records")[i].as_py() == content.num_rows
        ids = pc.min_max(content.column("id"))
        assert actions.column("min.id")[i].as_py() == ids["min"].as_py()
        assert actions.column("max.id")[i].as_py() == ids["max"].as_py()
    assert t.scan("id >= 5990 AND id < 100005").df.count() == 10 + 5  # both writes' rows


def test_arrow_appends_to_a_partitioned_table_with_an_index(spark: Any, tmp_path: Path) -> None:
    rows = pa.table({"p": ["a", "b", None, "a"] * 50, "x": list(range(200))})
    t = Table.create(str(tmp_path / "p"), rows, partition_by=["p"])
    t.indexes.add(MinMax("x * 2"))
    t.append(pa.table({"x": [1000, 1001, 1002], "p": ["c", "a", None]}))
    by_dir = {f.partition_values.get("p") for f in t.snapshot().data_files.values()}
    assert by_dir == {"a", "b", "c", None}
    got = DeltaTable(t.uri).to_pyarrow_table().sort_by("x")
    assert got.column("x").to_pylist() == [*range(200), 1000, 1001, 1002]
    assert got.column("p").to_pylist()[-3:] == ["c", "a", None]
    # the index metadata of the appended files was collected by the same writer
    snap = t.snapshot()
    (name,) = [d.name for d in t.indexes.describe()]
    values = t.indexes.store.read(snap.files, [name])[name]
    appended = [i for i, n in enumerate(snap.files.num_records) if n < 50]
    assert len(appended) == 3 and all(values[i].is_valid for i in appended)
    assert t.scan("x * 2 > 2001").df.count() == 2


def test_arrow_data_types_and_refusals(spark: Any, tmp_path: Path) -> None:
    schema = arrow_data_schema(
        pa.schema(
            [
                ("s", pa.large_string()),
                ("t", pa.timestamp("ns", tz="Europe/Paris")),
                ("n", pa.timestamp("ms")),
                ("l", pa.large_list(pa.int32())),
            ]
        )
    )
    assert schema.types == [
        pa.string(),
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("us"),
        pa.list_(pa.field("element", pa.int32())),
    ]
    instant = dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.timezone.utc)
    stamps = pa.array([instant], pa.timestamp("ns", tz="UTC")).cast(
        pa.timestamp("ns", tz="Europe/Paris")
    )
    t = Table.create(str(tmp_path / "ts"), pa.table({"t": stamps}))
    assert DeltaTable(t.uri).to_pyarrow_table().column("t").to_pylist() == [instant]

    with pytest.raises(SchemaMismatch, match="column 'u' is uint32: Delta has no unsigned"):
        Table.create(str(tmp_path / "u"), pa.table({"u": pa.array([1], pa.uint32())}))
    assert not (tmp_path / "u").exists()
    sub_micro = pa.array([1_000_000_001], pa.timestamp("ns"))
    with pytest.raises(SchemaMismatch, match="column 't': cannot store timestamp"):
        Table.create(str(tmp_path / "ns"), pa.table({"t": sub_micro}))
    with pytest.raises(InvalidOption, match=r"df must be a Spark DataFrame or a pyarrow\.Table"):
        Table.create(str(tmp_path / "x"), [{"a": 1}])  # type: ignore[arg-type]
    with pytest.raises(SchemaMismatch, match="column 't' is timestamp in the table but long"):
        t.append(pa.table({"t": [1]}))
    assert t.version == 0


def test_struct_fields_named_in_another_case_are_refused(tmp_path: Path) -> None:
    """The writer's cast matches struct fields by name, exactly: an append of
    ``STRUCT<A, B>`` into ``STRUCT<a, b>`` was accepted (names compared in lower case)
    and stored NULLs for every field (found by an audit). Top-level names still match
    in any case."""
    kind = pa.struct([("a", pa.int32()), ("b", pa.int32())])
    t = Table.create(
        str(tmp_path / "t"), pa.table({"id": [1], "st": pa.array([{"a": 1, "b": 2}], kind)})
    )
    shouting = pa.struct([("A", pa.int32()), ("B", pa.int32())])
    with pytest.raises(SchemaMismatch, match="struct field names differ in case"):
        t.append(pa.table({"id": [2], "st": pa.array([{"A": 30, "B": 40}], shouting)}))
    assert t.version == 0
    t.append(pa.table({"ID": [3], "ST": pa.array([{"a": 5, "b": 6}], kind)}))
    rows = DeltaTable(t.uri).to_pyarrow_table().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "st": {"a": 1, "b": 2}}, {"id": 3, "st": {"a": 5, "b": 6}}]


@pytest.mark.parametrize("change", ["schema", "partitioning"])
def test_an_append_never_commits_files_written_for_a_replaced_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """delta-rs overwrites the table with another schema (or partitioning) while an
    append's files are written: the append committed them anyway, and the table could
    not be read (INT32 files in a STRING column) or the rows lost their partition values
    (found by an audit). Now a CommitConflict naming the change; the files are removed."""
    from deltalake import write_deltalake

    from lakelayout.table import delta

    t = Table.create(
        str(tmp_path / "t"), pa.table({"a": pa.array([1, 2], pa.int32()), "k": [5, 5]})
    )
    real_commit = delta.commit
    replaced = pa.table({"a": ["x"], "k": [1]})

    def overwritten_first(*args: object, **kwargs: object) -> int:
        extra = {"partition_by": ["k"]} if change == "partitioning" else {}
        frame = (
            replaced if change == "schema" else pa.table({"a": pa.array([9], pa.int32()), "k": [1]})
        )
        write_deltalake(t.uri, frame, mode="overwrite", schema_mode="overwrite", **extra)
        monkeypatch.setattr(delta, "commit", real_commit)
        return real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(delta, "commit", overwritten_first)
    on_disk = {p.name for p in Path(t.uri).rglob("*.parquet")}
    with pytest.raises(CommitConflict, match="changed the table's schema or partitioning"):
        t.append(pa.table({"a": pa.array([3], pa.int32()), "k": [5]}))
    assert t.version == 1  # the overwrite's
    written = {p.name for p in Path(t.uri).rglob("*.parquet")} - on_disk
    assert len(written) == 1  # the overwrite's file; the append's was removed
    assert DeltaTable(t.uri).to_pyarrow_table().num_rows == 1


def test_nulls_in_not_null_elements_are_refused_and_no_file_is_left(tmp_path: Path) -> None:
    """A NULL element of an ARRAY<INT NOT NULL> (or a NULL map value) reached the Parquet
    writer, which raised a raw ArrowInvalid and left a partial file in the table's folder
    (found by an audit). Now a SchemaMismatch naming where, and every file the failed
    write made is deleted, those it finished before the bad rows too."""
    elements = pa.list_(pa.field("element", pa.int32(), nullable=False))
    values = pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("xs", elements), ("m", values)])
    t = Table.create(str(tmp_path / "t"), schema=schema)
    good = [{"id": i, "xs": [i], "m": [("k", i)]} for i in range(300)]
    cases = [
        ({"id": -1, "xs": [1, None], "m": [("k", 1)]}, r"xs\[\] of column 'xs' is NOT NULL"),
        ({"id": -1, "xs": [1], "m": [("k", None)]}, r"m\[value\] of column 'm' is NOT NULL"),
    ]
    loose = pa.schema([("id", pa.int64()), ("xs", pa.list_(pa.int32())),
                       ("m", pa.map_(pa.string(), pa.int32()))])  # fmt: skip
    for bad, why in cases:
        data = pa.Table.from_pylist([*good, bad], schema=loose)
        with pytest.raises(SchemaMismatch, match=why):
            t.append(
                pa.Table.from_batches(data.to_batches(max_chunksize=100)), target_file_size=1024
            )
        assert list(Path(t.uri).glob("*.parquet")) == []
        assert t.version == 0


def test_the_not_null_check_reads_only_the_rows_of_a_slice() -> None:
    """The map branch read ``MapArray.items``, which ignores a slice's offset: a NULL
    value in a row before the slice refused the rows after it (review)."""
    from lakelayout.table.writer import conform_batch

    values = pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))
    schema = pa.schema([("m", values)])
    loose = pa.array([[("k", None)], [("k", 1)]], pa.map_(pa.string(), pa.int32()))
    for typed in (loose, pa.MapArray.from_arrays(loose.offsets, loose.keys, loose.items, values)):
        batch = pa.record_batch([typed], names=["m"])  # cast to the table's type, or not
        with pytest.raises(SchemaMismatch, match=r"m\[value\]"):
            conform_batch(batch, schema)
        assert conform_batch(batch.slice(1), schema).column(0).to_pylist() == [[("k", 1)]]


def test_minus_zero_and_zero_are_two_partitions(tmp_path: Path) -> None:
    """-0.0 equals 0.0, and a run of partition values was cut where values differ: a
    0.0 row was written into the ``x=-0.0`` file and read back as -0.0 (found by an
    audit). Delta writes them as two partitions; so does lakelayout now, and a
    compaction keeps them apart."""
    import math

    x = [-0.0, 0.0, -0.0, 0.0, 1.5, float("nan")]
    t = Table.create(
        str(tmp_path / "t"), pa.table({"id": list(range(6)), "x": x}), partition_by=["x"]
    )
    t.append(pa.table({"id": [6, 7], "x": [0.0, -0.0]}))

    def signs() -> dict[int, float]:
        rows = DeltaTable(t.uri).to_pyarrow_table().to_pylist()
        return {r["id"]: math.copysign(1.0, r["x"]) for r in rows if r["x"] == 0}

    want = {0: -1.0, 1: 1.0, 2: -1.0, 3: 1.0, 6: 1.0, 7: -1.0}
    assert signs() == want
    values = {f["partition_values"]["x"] for f in _adds(t.uri)}
    assert {"-0.0", "0.0"} <= values
    t.optimize.compact()
    assert signs() == want


def _adds(uri: str) -> list[dict[str, Any]]:
    actions = DeltaTable(uri).get_add_actions(flatten=False)
    return [
        {"partition_values": {"x": _text(p["x"])}}
        for p in pa.table(actions).column("partition").to_pylist()
    ]


def _text(value: float | None) -> str | None:
    if value is None:
        return None
    return "NaN" if value != value else repr(value)


def test_a_dictionary_encoded_partition_column_is_written(tmp_path: Path) -> None:
    """Arrow data with a categorical (dictionary-encoded) partition column, as polars
    and pandas give: the writer sorted it as it came and Arrow raised a raw
    ArrowNotImplementedError, leaving an empty folder (found by an audit)."""
    data = pa.table({"id": [1, 2, 3], "p": pa.array(["a", "b", "a"]).dictionary_encode()})
    t = Table.create(str(tmp_path / "t"), data, partition_by=["p"])
    t.append(data)
    rows = sorted((r["id"], r["p"]) for r in DeltaTable(t.uri).to_pyarrow_table().to_pylist())
    assert rows == [(1, "a"), (1, "a"), (2, "b"), (2, "b"), (3, "a"), (3, "a")]
    assert t.snapshot().table_format.partition_columns == ("p",)


def test_string_views_are_written_to_a_partitioned_table(tmp_path: Path) -> None:
    """String and binary views (polars' strings) in a partition column or a data column of
    a partitioned table: Arrow neither sorts nor takes them, and the write raised a raw
    ArrowTypeError where an unpartitioned table took the same data (an audit)."""
    views = pa.table(
        {
            "id": [1, 2, 3],
            "p": pa.array(["b", "a", "b"], pa.string_view()),
            "v": pa.array(["x", None, "z"], pa.string_view()),
            "raw": pa.array([b"\x00", b"", None], pa.binary_view()),
        }
    )
    t = Table.create(str(tmp_path / "t"), views, partition_by=["p"])
    t.append(views.set_column(1, "p", pa.array(["c", "c", "a"])))
    # a dictionary of string views as the partition column (a review: Arrow can neither
    # cast nor take one)
    keys = pa.array(["d", "d", "e"], pa.string_view()).dictionary_encode()
    t.append(views.set_column(1, "p", keys))
    got = sorted(
        tuple(r.values())
        for r in DeltaTable(t.uri).to_pyarrow_table().select(["id", "p", "v", "raw"]).to_pylist()
    )
    first = [(1, "b", "x", b"\x00"), (2, "a", None, b""), (3, "b", "z", None)]
    second = [(1, "c", "x", b"\x00"), (2, "c", None, b""), (3, "a", "z", None)]
    third = [(1, "d", "x", b"\x00"), (2, "d", None, b""), (3, "e", "z", None)]
    assert got == sorted(first + second + third)


@pytest.mark.parametrize("partition_by", [None, ["p"]])
def test_list_views_are_written(tmp_path: Path, partition_by: list[str] | None) -> None:
    """A list view column (a sliced one too): Arrow 26 casts a list view to a list into an
    invalid array, and the write raised a raw ArrowInvalid (a review)."""
    views = pa.array([[1, 2], [3], None, [4, 5, 6]], pa.list_view(pa.int64()))
    data = pa.table({"id": [1, 2, 3, 4], "l": views, "p": ["a", "b", "a", "b"]})
    t = Table.create(str(tmp_path / "t"), data.slice(0, 3), partition_by=partition_by)
    t.append(data.slice(3))
    got = sorted(
        (r["id"], r["l"], r["p"]) for r in DeltaTable(t.uri).to_pyarrow_table().to_pylist()
    )
    assert got == [(1, [1, 2], "a"), (2, [3], "b"), (3, None, "a"), (4, [4, 5, 6], "b")]


def test_an_append_whose_commit_landed_returns_though_delta_rs_failed_after_it(
    tmp_path: Path,
) -> None:
    """delta-rs writes the commit file, then a checkpoint; when the checkpoint fails (a
    full disk in an audit; here a folder in the checkpoint's place) it raised though the
    append had committed, and a user's retry added the rows twice. The append names its
    commit in commitInfo, finds it landed, and returns; an I/O error before the commit is
    a LakelayoutError that says nothing was committed, and removes the written files."""
    t = Table.create(
        str(tmp_path / "t"), pa.table({"id": [1, 2]}), properties={"delta.checkpointInterval": "1"}
    )
    log = tmp_path / "t" / "_delta_log"
    (log / f"{t.version + 1:020d}.checkpoint.parquet").mkdir()
    t.append(pa.table({"id": [3]}))
    assert sorted(DeltaTable(t.uri).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    assert t.history(1)[0]["lakelayout"]["operation"] == "WRITE"
    # the next version's commit file cannot be written: a folder in its place
    (log / f"{t.version + 1:020d}.json").mkdir()
    data = sorted(p.name for p in (tmp_path / "t").glob("*.parquet"))
    with pytest.raises(LakelayoutError, match=r"failed: .*; nothing was committed"):
        t.append(pa.table({"id": [4]}))
    assert sorted(p.name for p in (tmp_path / "t").glob("*.parquet")) == data
    assert sorted(DeltaTable(t.uri).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
