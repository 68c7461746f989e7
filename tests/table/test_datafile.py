"""How a data file's rows are read and written (pure: pyarrow only, no JVM).

The reader applies what the log adds to a file: partition values, deleted
rows, physical column names; the writer side serializes partition values
and names directories as Delta does. The commit planner refuses by name
what lakelayout cannot write.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from lakelayout.errors import UnsupportedTable
from lakelayout.table.datafile import (
    DataFile,
    TableFormat,
    align,
    calendar_unsettled,
    check_file_calendar,
    escape_path_name,
    file_location,
    log_path,
    partition_directory,
    partition_runs,
    raw_path,
    read_data_file,
    serialize_partition_value,
    table_format,
    timestamp_spellings,
)
from lakelayout.table.features import Committer, Kind, plan_commit

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("part", pa.string()),
    ]
)
#: Delta's schema JSON of SCHEMA with column mapping (name mode), as Delta writes it
MAPPED_JSON = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True,
             "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-a"}},
            {"name": "st", "nullable": True,
             "type": {"type": "struct", "fields": [
                 {"name": "x", "type": "long", "nullable": True,
                  "metadata": {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-x"}},
                 {"name": "y", "type": "string", "nullable": True,
                  "metadata": {"delta.columnMapping.id": 4, "delta.columnMapping.physicalName": "col-y"}},
             ]},
             "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-st"}},
            {"name": "part", "type": "string", "nullable": True,
             "metadata": {"delta.columnMapping.id": 5, "delta.columnMapping.physicalName": "col-p"}},
        ],
    }
)  # fmt: skip
MAPPED = {"delta.columnMapping.mode": "name"}


def test_partition_values_serialize_as_delta_does() -> None:
    moment = dt.datetime(2020, 1, 1, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    cases = [
        (moment, pa.timestamp("us", tz="UTC"), "2020-01-01T10:00:00.123456Z"),
        (moment.replace(tzinfo=None), pa.timestamp("us"), "2020-01-01 10:00:00.123456"),
        (dt.date(2021, 3, 9), pa.date32(), "2021-03-09"),
        (True, pa.bool_(), "true"),
        (-7, pa.int16(), "-7"),
        (decimal.Decimal("-0.50"), pa.decimal128(4, 2), "-0.50"),
        (decimal.Decimal("1E+3"), pa.decimal128(6, 0), "1000"),
        (1.5, pa.float32(), "1.5"),
        (float("-inf"), pa.float64(), "-Infinity"),
        ("", pa.string(), None),
        (None, pa.int32(), None),
        ("a b", pa.string(), "a b"),
    ]
    for value, dtype, want in cases:
        assert serialize_partition_value(value, dtype) == want, (value, dtype)


def test_paths_escape_like_spark_and_encode_like_delta_rs() -> None:
    assert escape_path_name("a b:c/d%=?\x01") == "a b%3Ac%2Fd%25%3D%3F%01"
    fmt = TableFormat.plain(SCHEMA, ["part"])
    directory = partition_directory(fmt, ["x:y"])
    assert directory == "part=x%3Ay"
    assert log_path(f"{directory}/f.parquet") == "part=x%253Ay/f.parquet"
    assert raw_path(log_path("p=ü é/f")) == "p=ü é/f"
    assert file_location("/t", "p=%2525x/f") == "/t/p=%25x/f"


def test_partition_runs_follow_changes_of_any_partition_column() -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.int32()), ("v", pa.int64())])
    fmt = TableFormat.plain(schema, ["a", "b"])
    batch = pa.record_batch(
        {"a": ["x", "x", None, None, "x", ""], "b": [1, 1, 2, 2, 2, 2], "v": range(6)},
        schema=schema,
    )
    runs = [(key, run.column("v").to_pylist()) for key, run in partition_runs(batch, fmt)]
    assert runs == [
        (("x", "1"), [0, 1]),
        ((None, "2"), [2, 3]),
        (("x", "2"), [4]),
        ((None, "2"), [5]),  # '' is NULL: same partition as rows 2-3, another run
    ]
    plain = TableFormat.plain(schema)
    assert [k for k, _ in partition_runs(batch, plain)] == [()]


def _write(path: Path, table: pa.Table) -> int:
    pq.write_table(table, path, row_group_size=3)
    return path.stat().st_size


def test_read_applies_partition_values_deleted_rows_and_physical_names(tmp_path: Path) -> None:
    fmt = table_format(SCHEMA, MAPPED_JSON, ["part"], MAPPED)
    assert fmt.column_mapping and fmt.physical_name("st") == "col-st"
    assert fmt.file_schema.names == ["col-a", "col-st"]
    assert fmt.file_schema.field("col-st").type.field(0).name == "col-x"
    stored = pa.table(
        {
            "col-st": pa.array(
                [{"col-x": i, "col-y": f"s{i}"} if i != 4 else None for i in range(8)],
                pa.struct([("col-x", pa.int64()), ("col-y", pa.large_string())]),
            ),
            "col-a": pa.array(range(8), pa.int32()),  # another int width, another order
        }
    )
    size = _write(tmp_path / "f.parquet", stored)
    file = DataFile(
        "f.parquet",
        size,
        8,
        partition_values={"part": "ü"},
        deleted_rows=np.array([0, 3, 7], dtype=np.int64),  # across row groups of 3 rows
    )
    out = pa.Table.from_batches(
        list(read_data_file(pafs.LocalFileSystem(), str(tmp_path), fmt, file, batch_rows=2))
    )
    assert out.schema == SCHEMA
    assert out.column("id").to_pylist() == [1, 2, 4, 5, 6]
    assert out.column("st").to_pylist()[:2] == [{"x": 1, "y": "s1"}, {"x": 2, "y": "s2"}]
    assert out.column("st").to_pylist()[2] is None
    assert out.column("part").to_pylist() == ["ü"] * 5
    only = list(read_data_file(pafs.LocalFileSystem(), str(tmp_path), fmt, file, columns=["part"]))
    assert sum(b.num_rows for b in only) == 5


def test_the_statistics_settle_which_files_need_no_calendar_check() -> None:
    """Only a file whose DATE or TIMESTAMP lower bounds are unknown or before 1900-01-02
    (a day of margin for the zones east of UTC) may be refused for its legacy calendar;
    a list of dates has no bounds, and partition values do not come from the file."""
    from lakelayout.stats.model import ColumnStats

    utc = dt.timezone.utc
    schema = pa.schema(
        [
            ("d", pa.date32()),
            ("s", pa.struct([("ts", pa.timestamp("ms", "UTC"))])),
            ("p", pa.date32()),
        ]
    )
    fmt = TableFormat.plain(schema, ["p"])

    def bounds(values: list[object], dtype: pa.DataType) -> ColumnStats:
        low = pa.array(values, dtype)
        return ColumnStats(low, low, np.zeros(len(values), dtype=np.int64))

    days = [dt.date(1900, 1, 2), dt.date(1900, 1, 1), None, dt.date(2020, 1, 1)]
    late = dt.datetime(2020, 1, 1, tzinfo=utc)
    stamps = [late, late, late, dt.datetime(1900, 1, 1, 23, 59, tzinfo=utc)]
    columns = {"d": bounds(days, pa.date32()), "s.ts": bounds(stamps, pa.timestamp("ms", "UTC"))}
    assert calendar_unsettled(fmt, columns, 4).tolist() == [False, True, True, True]
    # a column without statistics leaves every file open; the partition column needs none
    assert calendar_unsettled(fmt, {"d": columns["d"]}, 4).tolist() == [True] * 4
    assert calendar_unsettled(
        TableFormat.plain(pa.schema([("p", pa.date32())]), ["p"]), {}, 2
    ).tolist() == [False, False]
    listed = TableFormat.plain(pa.schema([("ds", pa.list_(pa.date32())), ("i", pa.int64())]))
    assert calendar_unsettled(listed, {"ds": columns["d"]}, 4).tolist() == [True] * 4


def test_a_file_in_the_legacy_calendar_is_refused_from_its_footer_or_int96_values(
    tmp_path: Path,
) -> None:
    """What the read tasks would refuse, found before reading a row (a scan's up-front
    check): early dates by the footer of a file with Spark's legacy key, early INT96
    timestamps by their values; a file without the key is remembered as plain."""
    from lakelayout.table import datafile

    utc = dt.timezone.utc
    fs = pafs.LocalFileSystem()
    fmt = TableFormat.plain(pa.schema([("d", pa.date32()), ("ts", pa.timestamp("us", "UTC"))]))
    legacy = {b"org.apache.spark.version": b"3.5.0", b"org.apache.spark.legacyDateTime": b"",
              b"org.apache.spark.legacyINT96": b""}  # fmt: skip

    def file(name: str, day: dt.date, when: dt.datetime, keys: dict[bytes, bytes]) -> DataFile:
        data = pa.table(
            {"d": pa.array([day], pa.date32()), "ts": pa.array([when], pa.timestamp("us", "UTC"))}
        )
        pq.write_table(
            data.replace_schema_metadata(keys),
            tmp_path / name,
            use_deprecated_int96_timestamps=True,
        )
        return DataFile(name, (tmp_path / name).stat().st_size, 1)

    late, early = dt.datetime(2020, 1, 1, tzinfo=utc), dt.datetime(1000, 1, 1, tzinfo=utc)
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['d'\]"):
        check_file_calendar(fs, str(tmp_path), fmt, file("a", dt.date(1000, 1, 1), late, legacy))
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['ts'\]"):
        check_file_calendar(fs, str(tmp_path), fmt, file("b", dt.date(2020, 1, 1), early, legacy))
    check_file_calendar(fs, str(tmp_path), fmt, file("c", dt.date(2020, 1, 1), late, legacy))
    plain = file("d", dt.date(1000, 1, 1), early, {})
    check_file_calendar(fs, str(tmp_path), fmt, plain)  # no key: read as stored
    assert (str(tmp_path / "d"), plain.size) in datafile._PLAIN_CALENDAR


def test_columns_and_fields_are_found_in_another_case_as_spark_finds_them(
    tmp_path: Path,
) -> None:
    """Spark's Parquet reader (and Delta's) matches a file's columns and struct fields
    without case; files another tool wrote as ``userid`` under a table column
    ``UserId`` were read as NULL, and OPTIMIZE wrote the NULLs for good (an audit). The
    same name is taken first; two names differing only by case are refused."""
    fmt = TableFormat.plain(
        pa.schema([("UserId", pa.int64()), ("s", pa.struct([("Y", pa.int64())]))])
    )
    stored = pa.table({"userid": [1, 2], "S": pa.array([{"y": 3}, {"y": 4}]), "other": [0, 0]})
    size = _write(tmp_path / "f.parquet", stored)
    out = pa.Table.from_batches(
        list(
            read_data_file(
                pafs.LocalFileSystem(), str(tmp_path), fmt, DataFile("f.parquet", size, 2)
            )
        )
    )
    assert out.to_pylist() == [{"UserId": 1, "s": {"Y": 3}}, {"UserId": 2, "s": {"Y": 4}}]
    exact = pa.table({"userid": [1], "UserId": [5], "s": pa.array([{"Y": 6}])})
    size = _write(tmp_path / "g.parquet", exact)
    out = pa.Table.from_batches(
        list(
            read_data_file(
                pafs.LocalFileSystem(), str(tmp_path), fmt, DataFile("g.parquet", size, 1)
            )
        )
    )
    assert out.to_pylist() == [{"UserId": 5, "s": {"Y": 6}}]
    twice = pa.table({"userid": [1], "USERID": [2]})
    size = _write(tmp_path / "h.parquet", twice)
    with pytest.raises(
        UnsupportedTable,
        match=r"h.parquet .* holds columns \['userid', 'USERID'\] that differ only by case",
    ):
        list(
            read_data_file(
                pafs.LocalFileSystem(), str(tmp_path), fmt, DataFile("h.parquet", size, 1)
            )
        )


def test_writing_maps_logical_batches_to_physical_files() -> None:
    fmt = table_format(SCHEMA, MAPPED_JSON, ["part"], MAPPED)
    batch = pa.record_batch({"id": [1], "st": [{"x": 2, "y": "z"}], "part": ["p"]}, schema=SCHEMA)
    stored = fmt.to_physical(batch)
    assert stored.schema.names == ["col-a", "col-st"]
    assert stored.column(1).to_pylist() == [{"col-x": 2, "col-y": "z"}]
    assert stored.schema.field("col-a").metadata == {b"PARQUET:field_id": b"1"}
    # and back: the reader's alignment restores the logical names
    back = align(stored.column(1), fmt.physical.field("col-st").type, SCHEMA.field("st").type)
    assert back.to_pylist() == [{"x": 2, "y": "z"}]


def test_column_mapping_by_id_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedTable, match="column mapping mode 'id'"):
        table_format(SCHEMA, MAPPED_JSON, [], {"delta.columnMapping.mode": "id"})


@pytest.mark.parametrize(
    ("features", "config", "kind", "vectors", "connector", "outcome"),
    [
        (["appendOnly", "invariants"], {}, Kind.APPEND, False, False, Committer.DELTA_RS),
        (["deletionVectors"], {}, Kind.REWRITE, False, False, Committer.DELTA_RS),
        (["deletionVectors"], {}, Kind.REWRITE, True, True, Committer.CONNECTOR),
        (["deletionVectors"], {}, Kind.REWRITE, True, False, "deletion vectors"),
        (["clustering", "domainMetadata"], {}, Kind.APPEND, False, True, Committer.CONNECTOR),
        (["clustering", "domainMetadata"], {}, Kind.REWRITE, False, False, "'clustering'"),
        (["generatedColumns"], {}, Kind.APPEND, False, True, "generated columns"),
        (["generatedColumns"], {}, Kind.REWRITE, False, True, Committer.CONNECTOR),
        ([], {"delta.constraints.pos": "id > 0"}, Kind.APPEND, False, False, "CHECK"),
        ([], {"delta.appendOnly": "true"}, Kind.DELETE, False, False, "append-only"),
        ([], {"delta.appendOnly": "true"}, Kind.REWRITE, False, False, Committer.DELTA_RS),
        ([], {"delta.enableChangeDataFeed": "true"}, Kind.DELETE, False, True, "change data"),
    ],
)
def test_commits_lakelayout_cannot_make_are_refused_by_name(
    features: list[str],
    config: dict[str, str],
    kind: Kind,
    vectors: bool,
    connector: bool,
    outcome: Committer | str,
) -> None:
    def plan() -> Committer:
        return plan_commit(
            "/t", features, config, kind, removes_deletion_vectors=vectors, connector=connector
        )

    if isinstance(outcome, Committer):
        assert plan() is outcome
    else:
        with pytest.raises(UnsupportedTable, match=outcome):
            plan()


def test_a_feature_the_connector_cannot_write_is_refused_before_writing() -> None:
    """With Delta's connector in the session, a writer feature neither committer knows
    was found only at the commit, after the files were written, and the error read "An
    error occurred while calling o122.commit." (found by an audit)."""
    from lakelayout.table.connector import java_reason

    known = frozenset({"clustering", "domainmetadata", "deletionvectors"})
    for kind in (Kind.APPEND, Kind.REWRITE):
        with pytest.raises(UnsupportedTable, match=r"\['fancyNew'\], which neither"):
            plan_commit("/t", ["clustering", "fancyNew"], {}, kind, connector=True,
                        connector_writes=known)  # fmt: skip
        assert plan_commit("/t", ["clustering"], {}, kind, connector=True,
                           connector_writes=known) is Committer.CONNECTOR  # fmt: skip
    # not known (an older connector that cannot list them): left to the commit
    assert plan_commit("/t", ["fancyNew"], {}, Kind.APPEND, connector=True) is Committer.CONNECTOR
    raised = RuntimeError(
        "An error occurred while calling o122.commit.\n: org.x.DeltaUnsupportedTableFeatureException"
        ": [DELTA_UNSUPPORTED_FEATURES_FOR_WRITE] fancyNew\n\tat org.x.Y(Z.scala:1)"
    )
    assert java_reason(raised).startswith("org.x.DeltaUnsupportedTableFeatureException: [DELTA_")


def test_append_features_refuse_only_where_a_column_uses_them() -> None:
    """Delta writes a version 7 protocol listing generatedColumns, checkConstraints and
    others on tables that use none of them; an append was refused there ("it uses
    generated columns") though Delta's own INSERT works (found by an audit)."""
    from lakelayout.table.features import features_in_use

    listed = ["generatedColumns", "checkConstraints", "identityColumns", "changeDataFeed"]
    plain = json.dumps(
        {"type": "struct", "fields": [{"name": "id", "type": "long", "metadata": {}}]}
    )
    generated = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "metadata": {}},
                {
                    "name": "s",
                    "type": {
                        "type": "struct",
                        "fields": [
                            {
                                "name": "d",
                                "type": "date",
                                "metadata": {"delta.generationExpression": "CAST(ts AS DATE)"},
                            }
                        ],
                    },
                    "metadata": {},
                },
            ],
        }
    )
    assert features_in_use(plain) == frozenset()
    assert features_in_use(generated) == {"generatedColumns"}

    def append(in_use: frozenset[str] | None, config: dict[str, str]) -> Committer:
        return plan_commit("/t", listed, config, Kind.APPEND, connector=True, in_use=in_use)

    assert append(features_in_use(plain), {}) is Committer.CONNECTOR  # changeDataFeed
    with pytest.raises(UnsupportedTable, match="generated columns"):
        append(features_in_use(generated), {})
    with pytest.raises(UnsupportedTable, match="CHECK constraints"):
        append(features_in_use(plain), {"delta.constraints.pos": "id > 0"})
    with pytest.raises(UnsupportedTable, match="generated columns"):
        append(None, {})  # not known: every listed feature refuses


def _schema_with(metadata: dict[str, str]) -> str:
    field = {"name": "x", "type": "string", "nullable": True, "metadata": metadata}
    return json.dumps({"type": "struct", "fields": [field]})


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ({"delta.generationExpression": "id * 2"}, "generated columns"),
        ({"delta.identity.start": "1", "delta.identity.step": "1"}, "identity columns"),
        ({"delta.invariants": '{"expression": {"expression": "x > 0"}}'}, "column invariants"),
        ({"__CHAR_VARCHAR_TYPE_STRING": "varchar(3)"}, "CHAR/VARCHAR columns"),
    ],
)
def test_an_append_is_refused_by_what_the_columns_use_on_a_legacy_protocol_too(
    metadata: dict[str, str], why: str
) -> None:
    """A legacy protocol (writer version 2 to 6) lists no features: an append to a
    table whose column had a generation expression (writer version 4) committed a row
    that broke it, as did rows breaking a legacy invariant expression or a VARCHAR(3)
    limit; Delta and delta-rs refuse those rows (found by an audit)."""
    from lakelayout.table.features import features_in_use

    used = features_in_use(_schema_with(metadata))
    for listed in ([], ["invariants", "generatedColumns", "identityColumns"]):
        with pytest.raises(UnsupportedTable, match=why):
            plan_commit("/t", listed, {}, Kind.APPEND, connector=True, in_use=used)
    # a NOT NULL column lists ``invariants`` with no expression: the writer checks it
    plain = features_in_use(_schema_with({}))
    assert plan_commit("/t", ["invariants"], {}, Kind.APPEND, in_use=plain) is Committer.DELTA_RS
    # rewrites keep every row as it is: not affected
    assert plan_commit("/t", [], {}, Kind.REWRITE, in_use=used) is Committer.DELTA_RS


def test_rewrites_and_deletes_are_refused_under_row_tracking() -> None:
    """A rewrite committed its files without their base row IDs, so Delta gave every
    rewritten row a new one; Delta's own OPTIMIZE and DELETE keep them (found by an
    audit). Appends get fresh IDs, as Delta's INSERT does."""
    config = {"delta.enableRowTracking": "true"}
    listed = ["rowTracking", "domainMetadata"]
    for kind, verb in ((Kind.REWRITE, "rewrite files of"), (Kind.DELETE, "DELETE from")):
        with pytest.raises(UnsupportedTable, match=f"cannot {verb} '/t': it has row tracking"):
            plan_commit("/t", listed, config, kind, connector=True)
        off = {"delta.enableRowTracking": "false"}
        assert plan_commit("/t", listed, off, kind, connector=True) is Committer.CONNECTOR
    assert plan_commit("/t", listed, config, Kind.APPEND, connector=True) is Committer.CONNECTOR


def test_paths_delta_rs_would_encode_differently_need_the_connector() -> None:
    from lakelayout.table.delta import delta_rs_can_remove

    assert delta_rs_can_remove("s=%C3%BC/f.parquet")
    assert delta_rs_can_remove("ts=2021-03-01%2010%253A00/f.parquet")
    assert not delta_rs_can_remove("s=ü/f.parquet")  # Delta's connector leaves it unencoded
    with pytest.raises(UnsupportedTable, match="encodes differently"):
        plan_commit("/t", [], {}, Kind.REWRITE, removes_foreign_paths=True)
    assert (
        plan_commit("/t", [], {}, Kind.REWRITE, removes_foreign_paths=True, connector=True)
        is Committer.CONNECTOR
    )


def test_unknown_reader_features_are_refused_by_name() -> None:
    from lakelayout.table.features import check_readable

    check_readable("/t", ["deletionVectors", "columnMapping", "v2Checkpoint"])
    with pytest.raises(UnsupportedTable, match=r"reader features \['variantType'\]"):
        check_readable("/t", ["deletionVectors", "variantType"])
    # a type feature without a column of that type (delta-rs adds variantType to the
    # tables it creates with features) is readable; with one, or unknown, it is not
    plain = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'
    nested = (
        '{"type":"struct","fields":[{"name":"s","type":{"type":"array","elementType":'
        '{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,'
        '"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}}]}'
    )
    check_readable("/t", ["deletionVectors", "variantType"], plain)
    with pytest.raises(UnsupportedTable, match=r"reader features \['variantType'\]"):
        check_readable("/t", ["variantType"], nested)
    with pytest.raises(UnsupportedTable, match=r"reader features \['newFeature'\]"):
        check_readable("/t", ["variantType", "newFeature"], plain)


def test_timestamp_spellings_keep_zone_less_values_and_name_moments_spelled_both_ways() -> None:
    schema = pa.schema([
        ("ts", pa.timestamp("us", "UTC")), ("ntz", pa.timestamp("us")), ("v", pa.int64()),
    ])  # fmt: skip
    physical = pa.schema([
        ("col-1", pa.timestamp("us", "UTC")), ("col-2", pa.timestamp("us")), ("col-3", pa.int64()),
    ])  # fmt: skip
    fmt = TableFormat(schema, physical, ("ts", "ntz"))
    # delta-rs's DeltaTable.partitions() gives logical names, with column mapping too (a
    # review: looked up by physical name, a mapped table had no spellings at all)
    logged = [
        {"ts": "2021-01-01 05:30:00", "ntz": "2021-01-01 05:30:00"},
        {"ts": "2021-01-02 00:00:00.5", "ntz": None},
        {"ts": "2021-01-02T00:00:00.500000Z", "ntz": None},  # the same moment, zoned
        {"ts": "not a time", "ntz": None},
        {"ts": None, "ntz": None},
    ]
    spellings = timestamp_spellings(fmt, logged)
    # TIMESTAMP_NTZ has one spelling and is left out
    assert spellings == (
        ("ts", "2021-01-01T05:30:00.000000Z", "2021-01-01 05:30:00"),
        ("ts", "2021-01-02T00:00:00.500000Z", None),
    )
    spelled = dataclasses.replace(fmt, spellings=spellings)
    at = dt.datetime(2021, 1, 1, 5, 30, tzinfo=dt.timezone.utc)
    assert spelled.partition_value("ts", at) == "2021-01-01 05:30:00"
    assert fmt.partition_value("ts", at) == "2021-01-01T05:30:00.000000Z"  # appends: UTC
    assert spelled.partition_value("ntz", at.replace(tzinfo=None)) == "2021-01-01 05:30:00.000000"
    other = dt.datetime(2021, 1, 3, tzinfo=dt.timezone.utc)
    assert spelled.partition_value("ts", other) == "2021-01-03T00:00:00.000000Z"
    with pytest.raises(
        UnsupportedTable, match=r"'ts' holds the moment 2021-01-02T00:00:00\.500000Z"
    ):
        spelled.partition_value("ts", dt.datetime(2021, 1, 2, 0, 0, 0, 500000, dt.timezone.utc))
    # partition_runs (every writer) spells through the format
    batch = pa.record_batch(
        [pa.array([at, at], schema.field("ts").type), pa.array([None, None], pa.timestamp("us")),
         pa.array([1, 2], pa.int64())],
        schema=schema,
    )  # fmt: skip
    assert [key for key, _ in partition_runs(batch, spelled)] == [("2021-01-01 05:30:00", None)]
    assert (
        timestamp_spellings(TableFormat.plain(pa.schema([("d", pa.date32())]), ["d"]), logged) == ()
    )
    # the ends of TIMESTAMP: spelled back as the log spelled them
    ends = [{"ts": "0001-01-01 00:00:00"}, {"ts": "9999-12-31 23:59:59.999999"}]
    spelled = dataclasses.replace(fmt, spellings=timestamp_spellings(fmt, ends))
    for text, moment in zip(
        ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"),
        (dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
        strict=True,
    ):
        assert spelled.partition_value("ts", moment.replace(tzinfo=dt.timezone.utc)) == text
