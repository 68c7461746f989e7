"""Tables written by Delta's own Spark connector, with its features, under lakelayout.

Delta's connector writes deletion vectors (DELETE on a table that enables
them), column mapping by name (physical names in files, statistics and
partition values), checkpoints (classic and v2 with sidecars) and liquid
clustering (``delta.clustering`` domain metadata, ``ZCUBE_ID`` tags). For each,
lakelayout reads the rows Delta's reader returns, and its writes (append,
OPTIMIZE, DELETE) leave a table whose rows, read by Delta's reader, are the
expected multiset. Round trips go both ways: Delta deletes rows of a table
lakelayout wrote, lakelayout optimizes the result.

Tables are built once per module (Delta's writes are the slow part) and
copied for each test that changes them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelayout.api import Table
from lakelayout.errors import InvalidOption, UnsupportedTable
from lakelayout.table import delta
from lakelayout.table.features import Kind

pytestmark = pytest.mark.spark


def rows_of(values: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.timezone.utc)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        if hasattr(v, "asDict"):
            return norm(v.asDict())
        return v

    return sorted((tuple(norm(v) for v in row.values()) for row in values), key=repr)


def collected(df: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return rows_of([r.asDict() for r in df.select(*columns).collect()])


def delta_rows(spark: Any, path: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows Delta's own reader returns: the reference."""
    return collected(spark.read.format("delta").load(path), columns)


def assert_same_as_delta(
    spark: Any, path: str, expected: Any = None, *, delta_rs: bool = False
) -> list[tuple[Any, ...]]:
    """lakelayout reads what Delta's reader reads (and ``expected`` when given).

    delta-rs 1.6.6 is compared only where it can read the table: its reader
    refuses the ``deletionVectors`` and ``v2Checkpoint`` reader features, and
    returns NULLs for the columns of a column-mapped table once a column was
    renamed (its snapshot and add actions are right: lakelayout uses only those).
    """
    columns = [f.name for f in Table(path, spark=spark).schema]
    want = delta_rows(spark, path, columns)
    assert collected(Table(path, spark=spark).to_df(), columns) == want
    if delta_rs:
        assert rows_of(DeltaTable(path).to_pyarrow_table().select(columns).to_pylist()) == want
    if expected is not None:
        assert collected(expected, columns) == want
    return want


def copy_of(path: str, tmp_path: Path) -> str:
    target = str(tmp_path / "copy")
    shutil.copytree(path, target)
    return target


def source(spark: Any, start: int, n: int) -> Any:
    return spark.sql(
        f"""SELECT id, CAST(id % 3 AS STRING) AS part, CAST(id % 7 AS INT) AS k,
                   named_struct('x', id * 2, 'y', CAST(id AS STRING)) AS st
            FROM range({start}, {start + n})"""
    )


# --------------------------------------------------------------------------- deletion vectors


@pytest.fixture(scope="module")
def with_vectors(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Partitioned by ``part``, a struct column, deletion vectors from two DELETEs."""
    path = str(tmp_path_factory.mktemp("dv") / "t")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, part STRING, k INT,
                st STRUCT<x: BIGINT, y: STRING>)
            USING delta PARTITIONED BY (part)
            TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"""
    )
    source(spark, 0, 60).repartition(2).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k = 3")
    return path


def _vectors(path: str) -> int:
    return pa.table(DeltaTable(path).deletion_vectors()).num_rows


def test_deleted_rows_are_never_returned(spark: Any, with_vectors: str) -> None:
    assert _vectors(with_vectors) > 0  # Delta wrote deletion vectors, not new files
    t = Table(with_vectors, spark=spark)
    want = assert_same_as_delta(
        spark, with_vectors, source(spark, 0, 60).where("NOT (id % 5 = 0 OR k = 3)")
    )
    assert len(want) == 60 - 12 - 9 + 2  # id % 5 = 0, k = 3, both
    res = t.scan("k = 4 AND part = '1'")
    assert sorted(r["id"] for r in res.df.collect()) == [
        i for i in range(60) if i % 7 == 4 and i % 3 == 1 and i % 5 != 0
    ]
    assert t.scan("k = 3").df.count() == 0


def test_a_shallow_clone_with_deletion_vectors_reads_as_delta_reads_it(
    spark: Any, with_vectors: str, tmp_path: Path
) -> None:
    """A shallow clone names its files by absolute paths (file:/...), delta-rs names their
    vectors' files file:///...: every live file was "not live" and the clone refused
    (an audit). It reads as Delta reads it, and a DELETE on it deletes what Delta's would."""
    clone = str(tmp_path / "clone")
    spark.sql(f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{with_vectors}`")
    want = assert_same_as_delta(spark, clone)
    assert len(want) == 60 - 12 - 9 + 2
    t = Table(clone, spark=spark)
    assert t.scan("k = 4").df.count() == sum(1 for i in range(60) if i % 7 == 4 and i % 5)
    t.delete("k = 4")
    assert spark.read.format("delta").load(clone).where("k = 4").count() == 0
    assert_same_as_delta(spark, clone)


def test_describe_counts_the_rows_a_reader_sees(spark: Any, with_vectors: str) -> None:
    """describe() and `lakelayout describe` said 1,000 rows of a table Delta's DELETE had
    halved through deletion vectors (an audit): rows less the deleted ones, as Spark."""
    from typer.testing import CliRunner

    from lakelayout.cli import app

    t = Table(with_vectors, spark=spark)
    seen = spark.read.format("delta").load(with_vectors).count()
    assert seen == 60 - 12 - 9 + 2
    assert t.describe(history=0).rows == seen == t.detail().rows
    out = CliRunner().invoke(app, ["describe", with_vectors])
    assert out.exit_code == 0, out.output
    assert f"{seen} rows" in " ".join(out.output.split())


def test_vacuum_deletes_the_vectors_no_action_names_and_keeps_the_rest(
    spark: Any, with_vectors: str, tmp_path: Path
) -> None:
    """lakelayout's VACUUM kept every deletion vector file for ever (delta-rs's listing
    takes them all for unreferenced; deleting them lost the table: an audit). A vector
    no add or remove action in the log names, past the retention, goes; the ones live
    rows and older versions depend on stay, also when only a checkpoint names them (the
    log's cleanup removed the commits that wrote them), and the table reads as before."""
    import time

    path = copy_of(with_vectors, tmp_path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '5')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")  # version 5, checkpointed
    log = Path(path, "_delta_log")
    assert (log / f"{5:020d}.checkpoint.parquet").exists()
    for version in range(5):  # the log's cleanup: the commits before the checkpoint go
        (log / f"{version:020d}.json").unlink()
    before = assert_same_as_delta(spark, path)
    vectors = {str(p.relative_to(path)) for p in Path(path).rglob("deletion_vector_*.bin")}
    assert len(vectors) >= 3  # two DELETEs and a third, each with its own file
    orphan = "deletion_vector_5e0c2b7a-1f3d-4e8a-9c6b-2a7d4f1e8b30.bin"  # a failed DELETE's
    shutil.copy(Path(path, sorted(vectors)[0]), Path(path, orphan))
    then = time.time() - 8 * 24 * 3600
    for file in Path(path).rglob("*"):
        if file.is_file() and "_delta_log" not in file.parts:
            os.utime(file, (then, then))

    dry = Table(path, spark=spark).vacuum(dry_run=True)
    assert [f.path for f in dry.files if f.kind == "deletion-vector"] == [orphan]
    # besides it, only the checksum files Hadoop writes beside each data file (.x.crc)
    assert all(os.path.basename(p).startswith(".") for p in dry.paths if p != orphan)
    done = Table(path, spark=spark).vacuum()
    assert done.paths == dry.paths
    left = {str(p.relative_to(path)) for p in Path(path).rglob("deletion_vector_*.bin")}
    assert left == vectors
    assert assert_same_as_delta(spark, path) == before
    assert Table(path, spark=spark).scan("k = 4").df.count() == len(
        [r for r in before if r[2] == 4]
    )


def test_index_entries_hold_under_an_older_deletion_vector(
    spark: Any, with_vectors: str, tmp_path: Path
) -> None:
    """Index values were computed over a file's live rows and kept by path, size and
    modification time, which a deletion vector leaves as they are: at a version before
    the DELETE (time travel, or after Delta's RESTORE) the deleted rows are live again
    and a Bloom filter without them skipped their file (found by an audit)."""
    from lakelayout.skipping.indexes import BloomFilter

    path = copy_of(with_vectors, tmp_path)
    t = Table(path, spark=spark)
    t.indexes.add(BloomFilter("id"))
    t.indexes.refresh()
    first = 1  # the rows as appended, before both DELETEs
    for query in ("id = 5", "id = 10 OR id = 3", "id IN (0, 45)"):
        theirs = spark.read.format("delta").option("versionAsOf", first).load(path)
        want = sorted(r.id for r in theirs.where(query).collect())
        assert want, query
        assert sorted(r.id for r in t.scan(query, version=first).df.collect()) == want, query
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {first}")
    restored = Table(path, spark=spark)
    assert sorted(r.id for r in restored.scan("id = 5").df.collect()) == [5]
    assert restored.indexes.describe()[0].stale_files == 0  # the entries still hold


def test_optimize_purges_the_vectors_it_rewrites(
    spark: Any, with_vectors: str, tmp_path: Path
) -> None:
    path = copy_of(with_vectors, tmp_path)
    t = Table(path, spark=spark)
    before = assert_same_as_delta(spark, path)
    t.optimize.zorder(["k", "id"])
    assert _vectors(path) == 0
    assert assert_same_as_delta(spark, path) == before
    live = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    assert sum(live.column("num_records").to_pylist()) == len(before)  # no dead rows kept


def test_delete_on_a_table_with_vectors(spark: Any, with_vectors: str, tmp_path: Path) -> None:
    path = copy_of(with_vectors, tmp_path)
    t = Table(path, spark=spark)
    t.delete("k = 4 OR id < 10")
    expected = source(spark, 0, 60).where("NOT (id % 5 = 0 OR k = 3 OR k = 4 OR id < 10)")
    assert_same_as_delta(spark, path, expected)
    t.optimize.compact()
    assert_same_as_delta(spark, path, expected)


def test_without_the_connector_removing_a_vector_is_refused_up_front(with_vectors: str) -> None:
    snap = delta.snapshot(with_vectors)
    marked = [p for p, f in snap.data_files.items() if f.has_deletions]
    plain = [p for p, f in snap.data_files.items() if not f.has_deletions]
    assert marked
    with pytest.raises(UnsupportedTable, match="deletion vectors"):
        delta.check_commit(snap, Kind.REWRITE, removes=marked[:1], spark=None)
    assert delta.check_commit(snap, Kind.REWRITE, removes=plain[:1], spark=None).value == "delta-rs"


def test_delta_deletes_rows_of_a_lakelayout_table_then_lakelayout_optimizes(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    t = Table.create(path, source(spark, 0, 30).repartition(3))
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k IN (1, 2)")
    assert _vectors(path) > 0
    expected = source(spark, 0, 30).where("k NOT IN (1, 2)")
    assert_same_as_delta(spark, path, expected)
    assert t.scan("k = 1").df.count() == 0
    t.optimize.hilbert(["k", "id"])
    assert _vectors(path) == 0
    assert_same_as_delta(spark, path, expected)


@pytest.mark.parametrize("operation", ["compact", "delete"])
def test_a_restore_that_takes_a_deletion_vector_away_mid_rewrite_stops_the_commit(
    spark: Any, tmp_path: Path, operation: str
) -> None:
    """Delta's RESTORE removes a file with its deletion vector and adds the same path back
    without it: the rows the vector hid are live again. A rewrite that read the file before
    committed over it by path, and those rows were gone (an audit: a compaction left 1000
    of 2000 rows, a DELETE of 10 rows removed 255)."""
    from lakelayout.cluster.optimize import OptimizeHooks
    from lakelayout.errors import CommitConflict

    path = str(tmp_path / "t")
    t = Table.create(path, source(spark, 0, 40).repartition(4))
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    before = t.version
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 2 = 0")
    assert _vectors(path) > 0

    def restore(_: int) -> None:
        spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {before}")

    hooks = OptimizeHooks(before_commit=restore)
    version = t.version
    expected = source(spark, 0, 40)
    if operation == "compact":
        metrics = t.optimize.compact(hooks=hooks)  # yields to the RESTORE: nothing committed
        assert metrics.yielded and "RESTORE" in (metrics.yield_reason or "")
    else:
        with pytest.raises(CommitConflict, match="added again under the same path"):
            t.delete("id < 10", hooks=hooks)
    assert t.version == version + 1  # the RESTORE's commit, and nothing after it
    assert_same_as_delta(spark, path, expected)
    assert t.to_df().count() == expected.count()


def test_a_shallow_clone_is_read_and_rewritten_and_its_source_never_touched(
    spark: Any, tmp_path: Path
) -> None:
    """Delta's SHALLOW CLONE names the source's files by absolute URIs (``file:/...``, one
    slash): lakelayout took them for relative paths and called every file missing, and
    delta-rs could not read the clone's history (``readVersion: -1``) (an audit)."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    Table.create(src, source(spark, 0, 40).repartition(4))
    before = {p: p.read_bytes() for p in Path(src).rglob("*") if p.is_file()}
    spark.sql(f"CREATE TABLE delta.`{dst}` SHALLOW CLONE delta.`{src}`")
    clone = Table(dst)
    assert all(p.startswith("file:") for p in clone.snapshot().files.paths)
    assert_same_as_delta(spark, dst, source(spark, 0, 40))
    assert clone.scan("id < 10").df.count() == 10
    clone.delete("id < 10")
    clone.optimize.compact()
    assert_same_as_delta(spark, dst, source(spark, 10, 30))
    assert [h["operation"] for h in clone.history()] == ["OPTIMIZE", "DELETE", "CLONE"]
    assert clone.history(1)[0]["version"] == clone.version
    assert clone.describe().rows == 30
    clone.vacuum(retain_hours=0, force=True)
    assert_same_as_delta(spark, dst, source(spark, 10, 30))
    after = {p: p.read_bytes() for p in Path(src).rglob("*") if p.is_file()}
    assert after == before  # not a byte of the source changed, not a file removed
    assert_same_as_delta(spark, src, source(spark, 0, 40))


def test_the_history_of_a_converted_table(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    source(spark, 0, 20).write.parquet(path)
    spark.sql(f"CONVERT TO DELTA parquet.`{path}`")
    t = Table(path)
    t.append(source(spark, 20, 5))
    assert [h["operation"] for h in t.history()] == ["WRITE", "CONVERT"]
    assert [h["version"] for h in t.history(1)] == [1]
    assert t.describe(history=5).history[-1]["operation"] == "CONVERT"
    assert_same_as_delta(spark, path, source(spark, 0, 25))


# --------------------------------------------------------------------------- column mapping


def test_int96_timestamps_outside_the_nanosecond_range(spark: Any, tmp_path: Path) -> None:
    """Delta's connector writes timestamps as INT96; read as nanoseconds (pyarrow's
    default) years outside 1677-2262 overflowed, and every rewrite and every scan of a
    table with deletion vectors failed with ArrowInvalid (found by an audit)."""
    path = str(tmp_path / "t")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, ts TIMESTAMP) USING delta
            TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"""
    )
    spark.sql(
        """SELECT id, CASE id % 3 WHEN 0 THEN TIMESTAMP'0001-01-01 00:00:00.000001+00:00'
                              WHEN 1 THEN TIMESTAMP'9999-12-31 23:59:59.999999+00:00'
                              ELSE TIMESTAMP'2020-01-01 00:00:00+00:00' END AS ts
           FROM range(30)"""
    ).repartition(2).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 4")
    text = "SELECT id, date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS s FROM {}"

    def rows(df: Any) -> list[tuple[int, str]]:
        df.createOrReplaceTempView("int96_rows")
        return sorted((r.id, r.s) for r in spark.sql(text.format("int96_rows")).collect())

    want = sorted((r.id, r.s) for r in spark.sql(text.format(f"delta.`{path}`")).collect())
    assert len(want) == 29 and want[0] == (0, "0001-01-01 00:00:00.000001")
    t = Table(path, spark=spark)
    assert rows(t.scan("id >= 0").df) == want
    t.optimize.zorder(["ts", "id"])
    assert sorted((r.id, r.s) for r in spark.sql(text.format(f"delta.`{path}`")).collect()) == want
    assert rows(t.scan("ts < TIMESTAMP'1000-01-01 00:00:00+00:00'").df) == [
        w for w in want if w[1] < "1000"
    ]


#: Spark settings of the writes of a checkpoint test: its typed bounds in the legacy
#: hybrid Julian calendar, as INT96 or as INT64 microseconds
_LEGACY_INT96 = {"spark.sql.parquet.int96RebaseModeInWrite": "LEGACY",
                 "spark.sql.parquet.datetimeRebaseModeInWrite": "LEGACY"}  # fmt: skip
_LEGACY_MICROS = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
                  "spark.sql.parquet.datetimeRebaseModeInWrite": "LEGACY"}  # fmt: skip


@pytest.mark.parametrize(
    ("mapping", "json", "writes"),
    [("none", "true", {}), ("name", "true", {}), ("name", "false", {}),
     ("none", "false", _LEGACY_INT96), ("none", "true", _LEGACY_MICROS)],
    ids=["text", "text-mapped", "typed-mapped", "typed-legacy-int96", "text-legacy-micros"],
)  # fmt: skip
def test_checkpoint_time_bounds_delta_rs_misreads(
    spark: Any, tmp_path: Path, mapping: str, json: str, writes: dict[str, str]
) -> None:
    """Delta's checkpoint stores typed TIMESTAMP bounds as INT96, which delta-rs reads
    wrapped outside 1677-2262 (0001-01-01 as 1754-08-30): a scan for the old rows
    skipped their files and a DELETE of them deleted nothing (a time audit). Bounds of
    the files a checkpoint lists are read from its JSON statistics text instead, or
    without it (writeStatsAsJson=false) from the typed ones with INT96 as microseconds:
    every file was kept then. Written in the legacy calendar (a LEGACY rebase mode), the
    typed DATE and TIMESTAMP bounds before 1900 are in Julian days, which delta-rs took
    as they are (1500-01-01 read as 1500-01-10: the scan for it kept no file; an audit):
    from the text then, and unknown before 1900 without it."""
    path = str(tmp_path / "c")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, ts TIMESTAMP, d DATE) USING delta
            TBLPROPERTIES ('delta.checkpointInterval' = '3',
                           'delta.checkpoint.writeStatsAsJson' = '{json}',
                           'delta.columnMapping.mode' = '{mapping}')"""
    )
    values = ["0001-01-01 00:00:00", "1500-01-01 00:00:00", "9999-12-31 23:59:59.999999",
              "2020-01-01 00:00:00"]  # fmt: skip
    for key, value in writes.items():
        spark.conf.set(key, value)
    try:
        for i, value in enumerate(values, start=1):  # one commit and one file each
            spark.sql(
                f"INSERT INTO delta.`{path}` VALUES "
                f"({i}, TIMESTAMP'{value}+00:00', DATE'{value[:10]}')"
            )
    finally:
        for key in writes:
            spark.conf.unset(key)
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(f"{path}/_delta_log"))
    theirs = spark.read.format("delta").load(path)
    t = Table(path, spark=spark)
    for where in ["ts < TIMESTAMP'1000-01-01 00:00:00+00:00'", "year(ts) = 1500",
                  "ts = TIMESTAMP'1500-01-01 00:00:00+00:00'", "d = DATE'1500-01-01'",
                  "d <= DATE'1500-01-01'", "d = DATE'0001-01-01'",
                  "ts > TIMESTAMP'2300-01-01 00:00:00+00:00'", "ts >= TIMESTAMP'2020-01-01 00:00:00+00:00'"]:  # fmt: skip
        want = sorted(r.id for r in theirs.where(where).select("id").collect())
        assert want, where
        scan = t.scan(where)
        assert sorted(r.id for r in scan.df.select("id").collect()) == want, where
        # one row per file: the bounds keep the matching files only (without the text, a
        # legacy bound before 1900 is unknown: the files of 0001 and 1500 are kept)
        unknown = 2 if writes and json == "false" else 0
        assert scan.report.files_kept == len(set(want) | ({1, 2} if unknown else set())), where
    t.delete("ts < TIMESTAMP'1600-01-01 00:00:00+00:00'")
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [3, 4]


def test_partition_values_keep_pruning_past_a_checkpoint_read_again(
    spark: Any, tmp_path: Path
) -> None:
    """The bounds a checkpoint with INT96 statistics has read again include no partition
    column: a DATE or TIMESTAMP partition's values were replaced by the statistics' (which
    hold none), and a scan of one partition kept every file the checkpoint lists."""
    for kind in ("DATE", "TIMESTAMP"):
        path = str(tmp_path / kind)
        spark.sql(
            f"""CREATE TABLE delta.`{path}` (id BIGINT, ts TIMESTAMP, p {kind}) USING delta
                PARTITIONED BY (p) TBLPROPERTIES ('delta.checkpointInterval' = '2')"""
        )
        for i in range(4):
            spark.sql(
                f"INSERT INTO delta.`{path}` VALUES "
                f"({i}, TIMESTAMP'2020-01-0{i + 1} 00:00:00', {kind}'2021-01-0{i + 1}')"
            )
        scan = Table(path, spark=spark).scan(f"p = {kind}'2021-01-02'")
        assert sorted(r.id for r in scan.df.collect()) == [1]
        assert (scan.report.files_kept, scan.report.files_total) == (1, 4), kind


def _protocol(path: str) -> tuple[int, int, list[str], list[str]]:
    p = DeltaTable(path).protocol()
    return (
        p.min_reader_version,
        p.min_writer_version,
        sorted(p.reader_features or []),
        sorted(p.writer_features or []),
    )


def test_properties_leave_a_delta_written_protocol_alone(
    spark: Any, with_vectors: str, tmp_path: Path
) -> None:
    """delta-rs adds the variantType reader feature to this protocol when it commits a
    property (readers without variant support then refuse the table); lakelayout's
    properties go through Delta's connector instead, and without it nothing is committed."""
    path = copy_of(with_vectors, tmp_path)
    before = _protocol(path)
    assert before[1] == 7 and "variantType" not in before[3]
    version = DeltaTable(path).version()
    with pytest.raises(UnsupportedTable, match="variantType"):
        delta.set_properties(path, {"lakelayout.test": "1"})
    with pytest.raises(InvalidOption, match=r"delta\.bogus"):
        delta.set_properties(path, {"delta.bogus": "1"}, spark=spark)
    assert DeltaTable(path).version() == version

    t = Table(path, spark=spark)
    t.online.enable(alpha=2.0, sample_rows=100)
    t.online.wait()
    assert _protocol(path) == before
    assert t.online.enabled
    props = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    assert {r.key: r.value for r in props}["lakelayout.online"] == "true"
    t.online.disable()
    assert not t.online.enabled and _protocol(path) == before
    assert_same_as_delta(spark, path, source(spark, 0, 60).where("NOT (id % 5 = 0 OR k = 3)"))


@pytest.fixture(scope="module")
def mapped(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Column mapping by name, a renamed column, a struct, a partition, checkpoints every 2."""
    path = str(tmp_path_factory.mktemp("cm") / "t")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, part STRING, k INT,
                st STRUCT<x: BIGINT, y: STRING>)
            USING delta PARTITIONED BY (part)
            TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.checkpointInterval' = '2')"""
    )
    for start in (0, 20, 40):
        source(spark, start, 20).write.format("delta").mode("append").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN k TO kind")
    return path


def test_column_mapping_reads_physical_names_and_skips_on_their_stats(
    spark: Any, mapped: str
) -> None:
    t = Table(mapped, spark=spark)
    assert [f.name for f in t.schema] == ["id", "part", "kind", "st"]
    assert t.snapshot().table_format.column_mapping
    want = assert_same_as_delta(spark, mapped)
    assert len(want) == 60
    res = t.scan("kind = 6 AND st.x >= 80")
    assert sorted(r["id"] for r in res.df.collect()) == [41, 48, 55]
    assert res.report.skipped_by["minmax"] > 0  # statistics read under physical names
    assert res.report.files_kept < res.report.files_total


def test_column_mapping_round_trip_through_lakelayout_writes(
    spark: Any, mapped: str, tmp_path: Path
) -> None:
    path = copy_of(mapped, tmp_path)
    t = Table(path, spark=spark)
    more = source(spark, 60, 15).withColumnRenamed("k", "kind")
    t.append(more)
    expected = source(spark, 0, 75).withColumnRenamed("k", "kind")
    assert_same_as_delta(spark, path, expected)
    t.optimize.zorder(["kind", "id"])
    assert_same_as_delta(spark, path, expected)
    t.delete("st.x < 20")
    expected = expected.where("st.x >= 20")
    assert_same_as_delta(spark, path, expected)
    # Delta keeps writing to it after lakelayout did
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN kind TO kind2")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE kind2 = 0")
    assert_same_as_delta(
        spark, path, expected.where("kind <> 0").withColumnRenamed("kind", "kind2")
    )


def test_a_name_that_moves_to_a_new_column_is_not_pruned_on_the_old_one(
    spark: Any, tmp_path: Path
) -> None:
    """Column mapping lets Delta rename `a` and add a new column named `a`. An index and a
    layout built on the old `a` describe the files written before (they hold the old
    column); used for the new `a` they skipped every file: `a IS NULL` returned 0 of 3,000
    rows (found by an audit). Those files are kept now. Before the rename the same guard
    (on every column-mapping table) let both prune."""
    from lakelayout.layouts import QdTreeLayout
    from lakelayout.skipping.indexes import MinMax, ValueList

    path = str(tmp_path / "t")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, a INT, b DOUBLE) USING delta
            TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"""
    )
    spark.range(0, 3000).selectExpr(
        "id", "CAST(id * 7919 % 1000 AS INT) AS a", "CAST(id / 10.0 AS DOUBLE) AS b"
    ).repartition(3).write.format("delta").mode("append").save(path)
    t = Table(path, spark=spark)
    workload = ["a < 100", "a >= 100 AND a < 300", "a >= 700", "a BETWEEN 400 AND 450"]
    t.optimize.apply(QdTreeLayout.fit(t.to_df().toArrow(), workload, target_blocks=8))
    t.indexes.add(MinMax("a"), ValueList("a"))
    t.indexes.refresh()
    assert t.scan("a = 5").report.files_kept < len(t.snapshot().files)  # both prune on `a`
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN a TO a_old")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a INT)")
    spark.sql(
        f"INSERT INTO delta.`{path}` (id, b, a) VALUES (100000, 1.0, 5000), (100001, 2.0, 50)"
    )
    t = Table(path, spark=spark)
    for where in ("a IS NULL", "a < 100", "a = 5000", "a IS NULL AND b < 5", "a_old < 100"):
        ours = sorted(r["id"] for r in t.scan(where).df.select("id").collect())
        delta = spark.read.format("delta").load(path).where(where).select("id").collect()
        assert ours == sorted(r["id"] for r in delta), where
    # online reorganization prices the current layout as a scan reads it: no file of the
    # old `a`'s Qd-tree is ruled out for the new `a`
    from lakelayout.expr.parse import parse_predicate
    from lakelayout.online.costs import table_costs

    snap = t.snapshot()
    bound = [parse_predicate(w, snap.schema) for w in ("a < 100", "a_old < 100")]
    costs = table_costs(bound, snap.files, root=path, schema=snap.schema, fmt=snap.table_format)
    assert costs[0] == 1.0 and costs[1] < 1.0, costs


def test_checkpoints_are_read(spark: Any, mapped: str) -> None:
    log = sorted(p.name for p in Path(mapped, "_delta_log").iterdir())
    assert any(".checkpoint." in name for name in log)
    snap = Table(mapped, spark=spark).snapshot()
    reference = spark.sql(f"DESCRIBE DETAIL delta.`{mapped}`").collect()[0]
    assert len(snap.files) == reference["numFiles"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{mapped}`").collect()
    assert snap.version == max(r["version"] for r in history)


# --------------------------------------------------------------------------- liquid clustering


@pytest.fixture(scope="module")
def clustered(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """CLUSTER BY (k, id), v2 checkpoints every 2 commits, one OPTIMIZE: Delta's cube."""
    path = str(tmp_path_factory.mktemp("cl") / "t")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, k INT, s STRING) USING delta
            CLUSTER BY (k, id)
            TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2',
                           'lakelayout.minCubeSize' = '1',
                           'lakelayout.targetCubeSize' = '1000000000')"""
    )
    for start in (0, 20):
        spark.sql(
            f"INSERT INTO delta.`{path}` SELECT id, CAST(id % 7 AS INT), CAST(id AS STRING) "
            f"FROM range({start}, {start + 20})"
        )
    spark.sql(f"OPTIMIZE delta.`{path}`")
    return path


def _tags(spark: Any, path: str) -> dict[str, dict[str, str]]:
    from lakelayout.table.connector import live_actions

    return {p: dict(a.get("tags") or {}) for p, a in live_actions(spark, path).items()}


def test_delta_clustering_is_read_from_domain_metadata_and_tags(spark: Any, clustered: str) -> None:
    assert any("checkpoint" in p.name for p in Path(clustered, "_delta_log").iterdir())
    t = Table(clustered, spark=spark)
    assert t.clustering_columns == ["k", "id"]
    detail = t.detail()
    assert detail.clustering_columns == ["k", "id"]
    cube_ids = {tags["ZCUBE_ID"] for tags in _tags(spark, clustered).values()}
    assert [c.cube_id for c in detail.cubes] == sorted(cube_ids)
    assert detail.unclustered_files == 0
    assert_same_as_delta(spark, clustered)


def test_incremental_optimize_keeps_delta_cubes_and_tags_its_own(
    spark: Any, clustered: str, tmp_path: Path
) -> None:
    path = copy_of(clustered, tmp_path)
    before = _tags(spark, path)
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT id, CAST(id % 7 AS INT), CAST(id AS STRING) "
        "FROM range(40, 60)"
    )
    fresh = set(_tags(spark, path)) - set(before)
    t = Table(path, spark=spark)
    metrics = t.optimize.run()
    assert metrics.files_removed == len(fresh)  # only the new files: Delta's cube is stable
    after = _tags(spark, path)
    assert set(before) <= set(after)  # Delta's cube untouched
    new = [tags for p, tags in after.items() if p not in before]
    assert new and all(json.loads(tags["ZCUBE_ZORDER_BY"]) == ["k", "id"] for tags in new)
    assert len({tags["ZCUBE_ID"] for tags in new}) == 1
    expected = spark.sql(
        "SELECT id, CAST(id % 7 AS INT) AS k, CAST(id AS STRING) AS s FROM range(60)"
    )
    assert_same_as_delta(spark, path, expected)
    spark.sql(f"OPTIMIZE delta.`{path}`")  # Delta's OPTIMIZE accepts what lakelayout wrote
    assert_same_as_delta(spark, path, expected)


def test_appends_that_would_break_a_column_rule_are_refused_on_legacy_protocols(
    spark: Any, tmp_path: Path
) -> None:
    """A generated column on a writer-version-4 protocol and VARCHAR / CHAR limits, both
    written by Delta: an append whose rows break them committed (Delta counted a row with
    ``g != x * 2`` and one over ``VARCHAR(3)``; found by an audit). Now refused by name
    before anything is written; the table is as it was."""
    generated, limited = str(tmp_path / "g"), str(tmp_path / "v")
    spark.sql(
        f"""CREATE TABLE delta.`{generated}` (id INT, x INT, g INT GENERATED ALWAYS AS (x * 2))
            USING delta TBLPROPERTIES ('delta.minReaderVersion' = '1',
                                       'delta.minWriterVersion' = '4')"""
    )
    spark.sql(f"INSERT INTO delta.`{generated}` (id, x) VALUES (1, 1)")
    spark.sql(f"CREATE TABLE delta.`{limited}` (id INT, v VARCHAR(3)) USING delta")
    spark.sql(f"INSERT INTO delta.`{limited}` VALUES (1, 'abc')")
    assert _protocol(generated)[:2] == (1, 4)
    i32 = pa.int32()
    cases = [
        (generated, pa.table({"id": pa.array([3], i32), "x": pa.array([3], i32),
                              "g": pa.array([999], i32)}), "generated columns"),
        (limited, pa.table({"id": pa.array([2], i32), "v": ["toolong"]}), "CHAR/VARCHAR"),
    ]  # fmt: skip
    for path, rows, why in cases:
        table = Table(path, spark=spark)
        before = table.snapshot().version
        files = sorted(p.name for p in Path(path).rglob("*.parquet"))
        for data in (rows, spark.createDataFrame(rows)):
            with pytest.raises(UnsupportedTable, match=why):
                table.append(data)
        assert table.snapshot().version == before
        assert sorted(p.name for p in Path(path).rglob("*.parquet")) == files
        assert spark.read.format("delta").load(path).count() == 1


def test_strings_spark_compares_by_other_rules_than_their_bytes_are_refused(
    spark: Any, tmp_path: Path
) -> None:
    """CHAR(n) (Spark pads it with spaces on read and in comparisons) and collated strings
    (UTF8_LCASE compares without case): lakelayout read and compared the stored bytes, so
    ``c = 'abc'`` found no row stored as 'abc' in a CHAR(5), and a DELETE on a UTF8_LCASE
    column removed one of two matching rows (an audit). Refused by name, nothing written."""
    from lakelayout.errors import SchemaMismatch

    padded, collated = str(tmp_path / "char"), str(tmp_path / "lcase")
    spark.sql(f"CREATE TABLE delta.`{padded}` (id INT, c CHAR(5), v VARCHAR(5)) USING delta")
    spark.sql(f"INSERT INTO delta.`{padded}` VALUES (1, 'abc', 'abc')")
    check = "spark.databricks.delta.schema.typeCheck.enabled"
    spark.conf.set(check, "false")  # Delta 4.4 writes a collated column only so
    try:
        spark.sql(
            f"CREATE TABLE delta.`{collated}` (id INT, s STRING COLLATE UTF8_LCASE) USING delta"
        )
        spark.sql(f"INSERT INTO delta.`{collated}` VALUES (1, 'abc'), (2, 'ABC')")
    finally:
        spark.conf.unset(check)
    for path, why in (
        (padded, r"column 'c' is CHAR\(5\)"),
        (collated, "collation spark.UTF8_LCASE"),
    ):
        t = Table(path, spark=spark)
        files = sorted(p.name for p in Path(path).rglob("*.parquet"))
        for attempt in (t.scan, t.delete):
            with pytest.raises(UnsupportedTable, match=why):
                attempt("id = 1")
        with pytest.raises(UnsupportedTable, match=why):
            t.optimize.compact()
        assert sorted(p.name for p in Path(path).rglob("*.parquet")) == files
    assert spark.read.format("delta").load(collated).where("s = 'abc'").count() == 2
    # and a DataFrame with a collated column is not written as plain strings
    df = spark.sql("SELECT 1 AS id, 'abc' COLLATE UTF8_LCASE AS s")
    with pytest.raises(SchemaMismatch, match=r"column 's' .*UTF8_LCASE"):
        Table.create(str(tmp_path / "new"), df)
    assert not (tmp_path / "new").exists()


def test_files_in_the_legacy_calendar_are_not_rewritten_with_moved_dates(
    spark: Any, tmp_path: Path
) -> None:
    """Spark writes dates before 1582 in the hybrid Julian calendar under
    ``datetimeRebaseModeInWrite=LEGACY`` and rebases them when it reads; pyarrow does not,
    and lakelayout's OPTIMIZE turned 1000-01-01 into 1000-01-06 for good (an audit). Such
    a file is refused by name when it may hold an early value (the column as the table
    names it: under column mapping the error gave its physical col-<uuid>; an audit); one
    whose values all come after 1900 is rewritten as any other."""
    early, late = str(tmp_path / "early"), str(tmp_path / "late")
    mapped = str(tmp_path / "mapped")
    mode = "spark.sql.parquet.datetimeRebaseModeInWrite"
    spark.conf.set(mode, "LEGACY")
    try:
        for path, years in ((early, (1000, 2020)), (late, (1950, 2020)), (mapped, (1000, 2020))):
            options = (
                "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')" if path == mapped else ""
            )
            spark.sql(f"CREATE TABLE delta.`{path}` (id INT, d DATE) USING delta {options}")
            for i, year in enumerate(years):
                spark.sql(f"INSERT INTO delta.`{path}` VALUES ({i}, DATE'{year}-01-01')")
    finally:
        spark.conf.unset(mode)

    def rows(path: str) -> list[tuple[Any, ...]]:
        df = spark.read.format("delta").load(path).selectExpr("id", "CAST(d AS STRING)")
        return sorted(tuple(r) for r in df.collect())

    before = rows(early)
    assert before == [(0, "1000-01-01"), (1, "2020-01-01")]
    files = sorted(p.name for p in Path(early).rglob("*.parquet"))
    t = Table(early, spark=spark)
    version = t.version
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['d'\]"):
        t.optimize.compact()
    assert t.version == version and rows(early) == before
    assert sorted(p.name for p in Path(early).rglob("*.parquet")) == files
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['d'\]"):
        Table(mapped, spark=spark).optimize.compact()
    # a scan the pyarrow tasks read (column mapping) refuses such a file as it is made,
    # not at the user's first action with a PythonException (an earlier "not done");
    # a scan that keeps only files whose bounds come after 1900 reads them
    m = Table(mapped, spark=spark)
    for read in (lambda: m.scan("id >= 0"), m.to_df):
        with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['d'\]"):
            read()
    assert [tuple(r) for r in m.scan("d > DATE'2000-01-01'").df.collect()] == [
        (1, dt.date(2020, 1, 1))
    ]
    late_rows = rows(late)
    Table(late, spark=spark).optimize.compact()  # dates after 1900: the calendars agree
    assert rows(late) == late_rows == [(0, "1950-01-01"), (1, "2020-01-01")]
    assert len(Table(late, spark=spark).snapshot().files) == 1

    # INT96 timestamps carry no footer statistics: their values are checked as they are
    # read (a review found every legacy INT96 file refused, and a file of NULL dates)
    legacy96 = {
        "spark.sql.parquet.outputTimestampType": "INT96",
        "spark.sql.parquet.int96RebaseModeInWrite": "LEGACY",
        "spark.sql.parquet.datetimeRebaseModeInWrite": "LEGACY",
    }
    tables = {"old96": "1000-01-01", "new96": "2024-01-01", "nulls": None}
    for name, day in tables.items():
        path = str(tmp_path / name)
        for key, value in legacy96.items():
            spark.conf.set(key, value)
        try:
            value = "NULL" if day is None else f"'{day} 10:00:00'"
            for i in range(2):
                other = "'2020-01-01 00:00:00'" if i else value
                date = "NULL" if day is None and not i else "'2020-01-01'"  # a file of NULLs
                spark.sql(
                    f"SELECT {i} AS id, CAST({other} AS TIMESTAMP) AS ts, CAST({date} AS DATE) AS d"
                ).write.format("delta").mode("append").save(path)
        finally:
            for key in legacy96:
                spark.conf.unset(key)

    def typed(path: str) -> list[tuple[Any, ...]]:
        df = spark.read.format("delta").load(path)
        return sorted(tuple(map(str, r)) for r in df.selectExpr("id", "ts", "d").collect())

    # INT96 without statistics (none collected) under column mapping: a scan reads the
    # values of such a file to decide, and reads the file whose values come after 1900
    for name, day in (("mapped96", "1000-01-01"), ("late96", "1950-01-01")):
        path = str(tmp_path / name)
        spark.sql(
            f"CREATE TABLE delta.`{path}` (id INT, ts TIMESTAMP) USING delta TBLPROPERTIES "
            "('delta.columnMapping.mode' = 'name', 'delta.dataSkippingNumIndexedCols' = '0')"
        )
        for key, value in legacy96.items():
            spark.conf.set(key, value)
        try:
            for i, when in enumerate((day, "2020-01-01")):
                spark.sql(f"INSERT INTO delta.`{path}` VALUES ({i}, TIMESTAMP'{when} 10:00:00')")
        finally:
            for key in legacy96:
                spark.conf.unset(key)
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['ts'\]"):
        Table(str(tmp_path / "mapped96"), spark=spark).scan("id >= 0")
    late = Table(str(tmp_path / "late96"), spark=spark).scan("id >= 0").df
    delta_late = spark.read.format("delta").load(str(tmp_path / "late96"))
    assert sorted(map(tuple, late.collect())) == sorted(map(tuple, delta_late.collect()))
    assert late.count() == 2

    old96 = typed(str(tmp_path / "old96"))
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar.*\['ts'\]"):
        Table(str(tmp_path / "old96"), spark=spark).optimize.compact()
    assert typed(str(tmp_path / "old96")) == old96
    for name in ("new96", "nulls"):
        path = str(tmp_path / name)
        before = typed(path)
        Table(path, spark=spark).optimize.compact()
        assert typed(path) == before and len(Table(path, spark=spark).snapshot().files) == 1


@pytest.mark.parametrize("written_by", ["3.0.3", "2.4.8"])
def test_files_of_spark_before_3_1_are_in_the_legacy_calendar_without_saying_so(
    spark: Any, tmp_path: Path, written_by: str
) -> None:
    """Spark before 3.0 wrote dates and timestamps, and before 3.1 INT96 timestamps, in the
    hybrid Julian calendar with no legacy key in the footer: Spark rebases them by the
    version key alone, pyarrow did not, and a Z-order kept 1499-12-23 as 1500-01-01 for
    good (an audit). Such files are refused by name as the files with a legacy key are."""
    import pyarrow.parquet as pq

    from lakelayout.table.datafile import legacy_calendar

    assert legacy_calendar({b"org.apache.spark.version": b"3.0.3"}) == (False, True)
    assert legacy_calendar({b"org.apache.spark.version": b"2.4.8"}) == (True, True)
    assert legacy_calendar({b"org.apache.spark.version": b"3.1.0"}) == (False, False)
    assert legacy_calendar({}) == (False, False)  # no key: read as stored
    path = tmp_path / "t"
    path.mkdir()
    utc = dt.timezone.utc
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "ts": pa.array(
                [dt.datetime(y, 1, 1, tzinfo=utc) for y in (1500, 1700, 2020)],
                pa.timestamp("us", "UTC"),
            ),
            "d": pa.array([dt.date(y, 3, 1) for y in (1000, 1700, 2020)], pa.date32()),
        }
    )
    # a file as that Spark wrote it: INT96 timestamps, its version key, no legacy key
    pq.write_table(
        data.replace_schema_metadata({b"org.apache.spark.version": written_by.encode()}),
        path / "part-0.parquet",
        use_deprecated_int96_timestamps=True,
    )
    spark.sql(f"CONVERT TO DELTA parquet.`{path}`")

    def rows() -> list[tuple[str, ...]]:
        df = spark.read.format("delta").load(str(path)).selectExpr("id", "ts", "d")
        return sorted(tuple(map(str, r)) for r in df.collect())

    before = rows()
    t = Table(str(path), spark=spark)
    version = t.version
    with pytest.raises(UnsupportedTable, match=r"legacy hybrid Julian calendar"):
        t.optimize.zorder(["id", "ts"])
    assert t.version == version and rows() == before


def test_rewrites_and_deletes_are_refused_under_row_tracking(spark: Any, tmp_path: Path) -> None:
    """lakelayout's rewrites gave every rewritten row a new row ID (302 of 302 after a
    compaction), where Delta's OPTIMIZE and DELETE keep them (found by an audit)."""
    path = str(tmp_path / "rt")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, x INT) USING delta
            TBLPROPERTIES ('delta.enableRowTracking' = 'true')"""
    )
    for start in (0, 10):
        spark.range(start, start + 10).selectExpr("id", "CAST(id % 3 AS INT) AS x").write.format(
            "delta"
        ).mode("append").save(path)
    ids = {
        r.id: r.row_id
        for r in spark.read.format("delta").load(path).select("id", "_metadata.row_id").collect()
    }
    table = Table(path, spark=spark)
    version = table.snapshot().version
    for run in (
        table.optimize.compact,
        lambda: table.optimize.zorder(["x"]),
        lambda: table.delete("id < 5"),
    ):
        with pytest.raises(UnsupportedTable, match="row tracking"):
            run()
    table.append(pa.table({"id": [100], "x": pa.array([1], pa.int32())}))  # new IDs, as Delta
    after = spark.read.format("delta").load(path).select("id", "_metadata.row_id").collect()
    assert {r.id: r.row_id for r in after if r.id != 100} == ids
    assert table.snapshot().version == version + 1


def test_create_with_column_mapping_writes_the_physical_names(spark: Any, tmp_path: Path) -> None:
    """``Table.create(..., properties={"delta.columnMapping.mode": "name"})`` wrote the
    files with the logical names before delta-rs gave the columns physical ones: Delta's
    reader and lakelayout read every value as NULL (found by an audit). Mode ``id`` is
    refused before anything is written, as are properties delta-rs does not take."""
    mapped = {"delta.columnMapping.mode": "name"}
    # with deletion vectors the protocol has table features, where delta-rs left out
    # ``columnMapping`` and Delta's connector refused to read the table (review)
    vectors = {**mapped, "delta.enableDeletionVectors": "true"}
    data = pa.table({"id": [1, 2, 3], "x": [-1, 5, 7]})
    frame = spark.createDataFrame(data.to_pylist())
    for k, (rows, properties) in enumerate([(data, mapped), (frame, mapped), (data, vectors)]):
        path = str(tmp_path / f"m{k}")
        t = Table.create(path, rows, properties=properties)
        want = [(1, -1), (2, 5), (3, 7)]
        got = spark.read.format("delta").load(path).orderBy("id").collect()
        assert [tuple(r) for r in got] == want
        assert sorted(tuple(r) for r in t.to_df().collect()) == want
        assert [r.id for r in t.scan("x > 0").df.collect()] == [2, 3]
        fields = json.loads(DeltaTable(path).schema().to_json())["fields"]
        assert all(f["metadata"]["delta.columnMapping.physicalName"] != f["name"] for f in fields)
    refused = [
        ({"delta.columnMapping.mode": "id"}, UnsupportedTable, "mode 'id'"),
        ({"delta.enableRowTracking": "true"}, InvalidOption, "delta-rs, which creates"),
    ]
    for properties, error, why in refused:
        path = tmp_path / "refused"
        with pytest.raises(error, match=why):
            Table.create(str(path), data, properties=properties)
        assert not path.exists()  # nothing written: the same create without it works
    Table.create(str(tmp_path / "refused"), data)


def test_indexes_and_layouts_follow_renamed_columns_and_old_versions(
    spark: Any, tmp_path: Path
) -> None:
    """With column mapping a name can move to another column. Swapping ``a`` and ``b``
    left the index on ``a`` and a Qd-tree cut on ``a`` describing what is now ``b``
    (the files' statistics know both names), and an index refreshed after ``a`` was
    renamed away and added again described the new ``a`` at a version before: scans lost
    every matching row (found by an audit). Metadata now records the columns it was built
    on; where a snapshot binds a name otherwise it is left out (files kept) until a
    refresh rebuilds it."""
    from lakelayout.layouts import QdTreeLayout
    from lakelayout.skipping.indexes import BloomFilter, ValueList

    path = str(tmp_path / "t")
    rows = spark.range(0, 2000).selectExpr(
        "CAST(id AS INT) AS id", "CAST(id % 50 AS INT) AS a", "CAST(id * 13 % 50 + 100 AS INT) AS b"
    )
    t = Table.create(path, rows.repartition(3), spark=spark)
    cuts = ["a < 10", "a >= 40", "a BETWEEN 20 AND 25", "b < 110", "b >= 140"]
    t.optimize.apply(QdTreeLayout.fit(t.to_df().toArrow(), cuts, target_blocks=6))
    t.indexes.add(ValueList("a"), BloomFilter("b"))
    t.indexes.refresh()
    laid_out = t.version
    mapped = "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({mapped}'delta.minWriterVersion' = '5')"
    )
    for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b")):
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN {old} TO {new}")

    def same(table: Table, where: str, version: int | None = None) -> int:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        want = reader.load(path).where(where).count()
        assert table.scan(where, version=version).df.count() == want, (where, version)
        return want

    swapped = Table(path, spark=spark)
    for where in ("a = 120", "a >= 145", "b = 5", "b < 10", "a < 105"):
        assert same(swapped, where) > 0
    unused = swapped.plan("a = 120").unused
    assert any("other columns" in reason for reason in unused.values()), unused
    swapped.indexes.refresh()  # rebuilt on the columns as they are now named
    report = swapped.scan("a = 120").report
    assert same(swapped, "a = 120") == 40 and report.files_kept < report.files_total
    # a version before the swap: the rebuilt metadata is of other columns there
    for where in ("a = 5", "b = 120", "a IN (5, 7)"):
        assert same(swapped, where, version=laid_out) > 0


def test_clustering_columns_follow_a_rename_by_delta(spark: Any, tmp_path: Path) -> None:
    """Delta's RENAME COLUMN of a column lakelayout clusters on left the old name in
    ``lakelayout.clusteringColumns``: every OPTIMIZE failed with "unknown column" until
    cluster_by was called again. The clustering follows the column's physical name, also
    when another column then takes the old name; a dropped column is named in the error."""
    path = str(tmp_path / "t")
    rows = spark.range(0, 3000).selectExpr("id", "id % 97 AS k", "CAST(id % 13 AS STRING) AS s")
    t = Table.create(path, rows.repartition(2), spark=spark)
    mapped = "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({mapped}'delta.minWriterVersion' = '5')"
    )
    t.cluster_by(["k", "s"])  # set under column mapping: the physical names are recorded
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN k TO kk")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (k BIGINT)")
    t = Table(path, spark=spark)
    assert t.clustering_columns == ["kk", "s"]
    t.append(
        spark.range(3000, 4000).selectExpr(
            "id", "id % 97 AS kk", "CAST(id % 13 AS STRING) AS s", "id AS k"
        )
    )
    metrics = t.optimize.run()
    assert metrics.clustering_columns == ("kk", "s") and metrics.files_added > 0
    want = spark.read.format("delta").load(path).where("kk = 3").count()
    assert want > 0 and t.scan("kk = 3").df.count() == want
    assert t.detail().clustering_columns == ["kk", "s"]
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN kk")
    with pytest.raises(InvalidOption, match="name 'k', no longer in the table"):
        Table(path, spark=spark).optimize.run()
    assert Table(path, spark=spark).to_df().count() == 4000


def test_a_created_table_with_not_null_columns_and_table_features_is_readable_by_delta(
    spark: Any, tmp_path: Path
) -> None:
    """A TIMESTAMP_NTZ column gives a table-features protocol; delta-rs left out the
    ``invariants`` writer feature a NOT NULL column needs, and Delta's connector refused
    to read the table (found by an audit)."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us"))]
    )
    stamp = dt.datetime(2021, 1, 1, 10)
    for k, data in enumerate((pa.table({"id": [1, 2], "ts": [stamp, None]}, schema=schema), None)):
        path = str(tmp_path / f"t{k}")
        if data is None:
            t = Table.create(path, schema=schema, spark=spark)
        else:
            t = Table.create(path, data, spark=spark)
        _, writer, _, writer_features = _protocol(path)
        assert writer == 7 and {"invariants", "timestampNtz"} <= set(writer_features)
        t.append(pa.table({"id": [3], "ts": [stamp]}, schema=schema))
        got = spark.read.format("delta").load(path).orderBy("id").collect()
        assert [r.id for r in got] == ([1, 2, 3] if data is not None else [3])
        assert spark.read.format("delta").load(path).schema["id"].nullable is False


def test_an_index_is_rebuilt_after_its_column_changed_type(spark: Any, tmp_path: Path) -> None:
    """Delta overwrote the table with ``a`` a STRING: every later refresh failed with a
    raw ArrowTypeError (INT and STRING values in one store column), and appends stored no
    metadata (found by an audit). The index is left out until a refresh rebuilds it."""
    from lakelayout.skipping.indexes import ValueList

    path = str(tmp_path / "t")
    t = Table.create(path, spark.range(100).selectExpr("id", "CAST(id % 5 AS INT) AS a"))
    t.indexes.add(ValueList("a"))
    t.indexes.refresh()
    spark.range(50).selectExpr("id", "CAST(id % 7 AS STRING) AS a").write.format("delta").mode(
        "overwrite"
    ).option("overwriteSchema", "true").save(path)
    t = Table(path, spark=spark)
    assert "built on other columns" in t.plan("a = '3'").unused["valuelist(a)"]
    assert t.indexes.refresh().files_indexed == 1
    t.append(spark.range(5).selectExpr("id", "CAST(id + 10 AS STRING) AS a"))
    (described,) = t.indexes.describe()
    assert described.usable and described.files_covered == 2
    report = t.scan("a = '3'").report
    assert report.files_kept == 1 and t.scan("a = '3'").df.count() == 7


def test_metadata_a_rename_overtook_is_not_stored_and_unrelated_changes_keep_layouts(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of the bindings: (1) names swapped and the index refreshed between an
    append's commit and the storing of its metadata stored entries of the old ``a`` under
    the new one (a scan lost the appended rows); they are now checked against how the
    writer read the columns. (2) A layout was bound to every column of its sample, so
    dropping a column its cuts never read dropped its pruning; it is now bound to the
    columns its cuts read."""
    from lakelayout.layouts import QdTreeLayout
    from lakelayout.skipping.catalog import IndexCatalog
    from lakelayout.skipping.indexes import MinMax

    path = str(tmp_path / "t")
    rows = spark.range(0, 600).selectExpr(
        "CAST(id AS INT) AS id", "CAST(id % 50 AS INT) AS a", "CAST(id % 7 AS INT) AS b",
        "CAST(id AS INT) AS c",
    )  # fmt: skip
    t = Table.create(path, rows, spark=spark, properties={"delta.columnMapping.mode": "name"})
    t.optimize.apply(QdTreeLayout.fit(t.to_df().toArrow(), ["a < 10", "a >= 40"], target_blocks=4))
    assert t.scan("a < 5").report.skipped_by.get("layout(qdtree)", 0) > 0
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN c")
    t = Table(path, spark=spark)
    assert t.scan("a < 5").report.skipped_by.get("layout(qdtree)", 0) > 0  # c: not its column

    t.indexes.add(MinMax("a"))
    t.indexes.refresh()
    real = IndexCatalog.record_written

    def swapped_first(self: IndexCatalog, *args: Any) -> int:
        for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b")):
            spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN {old} TO {new}")
        Table(path, spark=spark).indexes.refresh()
        monkeypatch.setattr(IndexCatalog, "record_written", real)
        return real(self, *args)

    monkeypatch.setattr(IndexCatalog, "record_written", swapped_first)
    i32 = pa.int32()
    t.append(pa.table({"id": pa.array([1000], i32), "a": pa.array([1000], i32),
                       "b": pa.array([5000], i32)}))  # fmt: skip
    now = Table(path, spark=spark)
    for where in ("a >= 5000", "b = 1000"):
        want = spark.read.format("delta").load(path).where(where).count()
        assert want == 1 and now.scan(where).df.count() == want, where


def test_an_append_through_the_connector_commits_over_a_property_change(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a table whose commits go through Delta's connector (liquid clustering), an
    append started its transaction at the version it wrote for, and Delta's checker
    refused it when any property changed meanwhile (DELTA_METADATA_CHANGED), though
    its files did not depend on it (review). The append's own check covers the schema."""
    from lakelayout import api

    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta CLUSTER BY (k)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 1), (2, 2)")
    real = api._write

    def property_set_meanwhile(*args: Any, **kwargs: Any) -> Any:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('foo.bar' = 'x')")
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "_write", property_set_meanwhile)
    t = Table(path, spark=spark)
    t.append(pa.table({"id": [3], "k": pa.array([3], pa.int32())}))
    assert spark.read.format("delta").load(path).count() == 3
    assert t.properties.get("foo.bar") == "x"


def test_an_arrow_append_uses_the_session_already_running(spark: Any, tmp_path: Path) -> None:
    """``Table(path).append(arrow)`` to a table whose commits need Delta's connector was
    refused ("no Spark session was given") although the process ran a session with the
    connector (an audit); it commits through that session, and a thread without an
    active session finds the process's."""
    import threading

    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta CLUSTER BY (k)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 1)")
    Table(path).append(pa.table({"id": [2], "k": pa.array([2], pa.int32())}))
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            Table(path).append(pa.table({"id": [3], "k": pa.array([3], pa.int32())}))
        except BaseException as exc:  # reported below
            errors.append(exc)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert errors == []
    got = sorted(r["id"] for r in spark.read.format("delta").load(path).collect())
    assert got == [1, 2, 3]


@pytest.mark.parametrize("enabled_before", [False, True])
def test_a_commit_retry_stops_at_a_winner_that_deleted_with_a_vector(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled_before: bool
) -> None:
    """Delta's DELETE commits in the window of a compaction's first delta-rs attempt,
    with a deletion vector (it removes the file and adds the same path back). The retry
    found every input still live and committed: the deleted row came back (a review).
    The real DELETE is made in the window by wrapping delta-rs's commit call."""
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "t")
    t = Table.create(path, pa.table({"v": pa.array([1, 2, 3], pa.int64())}), spark=spark)
    t.append(pa.table({"v": pa.array([4, 5, 6], pa.int64())}))
    enable = f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors'='true')"
    if enabled_before:
        spark.sql(enable)
    real = deltalake.DeltaTable.create_write_transaction
    raced: list[bool] = []

    def racing(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(True)
            if not enabled_before:
                spark.sql(enable)
            spark.sql(f"DELETE FROM delta.`{path}` WHERE v = 1")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", racing)
    m = t.optimize.compact()
    monkeypatch.undo()
    assert raced and m.yielded, m
    got = sorted(r.v for r in spark.read.format("delta").load(path).collect())
    assert got == [2, 3, 4, 5, 6]


def test_float_statistics_of_a_column_widened_to_double_keep_every_row(
    spark: Any, tmp_path: Path
) -> None:
    """Type widening FLOAT -> DOUBLE: the old file's statistics are FLOAT text (-2.7 for
    the FLOAT nearest -2.7, which is -2.7000000476837158): read as a DOUBLE bound, the
    scan skipped the file and DELETE left its row (found by an audit; Delta's own
    skipping drops the row too). Every bound of such a column is widened now."""
    path = str(tmp_path / "t")
    spark.sql(
        "SELECT CAST(v AS FLOAT) f, named_struct('g', CAST(v AS FLOAT)) s, k FROM VALUES "
        "(-2.7, 1), (0.1, 2), (3.4028235E38, 3), (1.0E-45, 4) AS t(v, k)"
    ).repartition(1).write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableTypeWidening'='true')")
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN f TYPE DOUBLE")
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN s.g TYPE DOUBLE")
    t = Table(path, spark=spark)
    t.append(spark.sql("SELECT 5.5D f, named_struct('g', 5.5D) s, 5 k"))  # a DOUBLE file
    spark.conf.set("spark.databricks.delta.stats.skipping", "false")
    try:
        reference = spark.read.format("delta").load(path)
        assert reference.count() == 5
        for where in (
            "f < -2.7", "f > 0.1", "s.g < -2.7", "s.g > 0.1", "f > 3.4028234E38",
            "f > 1.4E-45 AND f < 1.0E-44", "f > 5.4",
        ):  # fmt: skip
            expected = reference.where(where).count()
            assert expected > 0, where
            assert t.scan(where).df.count() == expected, where
    finally:
        spark.conf.unset("spark.databricks.delta.stats.skipping")
    t.delete("f < -2.7 OR s.g > 0.1")
    assert sorted(r["k"] for r in spark.read.format("delta").load(path).collect()) == [4]


def test_a_widened_partition_column_delta_rs_cannot_read_is_named(
    spark: Any, tmp_path: Path
) -> None:
    """A DECIMAL(4,2) partition column widened to DECIMAL(10,4) keeps '0.50' in the log,
    which delta-rs cannot parse as the new type: Table() raised its raw DeltaError."""
    path = str(tmp_path / "t")
    spark.sql("SELECT 1 k, CAST(0.5 AS DECIMAL(4,2)) d").write.format("delta").partitionBy(
        "d"
    ).save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableTypeWidening'='true')")
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN d TYPE DECIMAL(10,4)")
    with pytest.raises(UnsupportedTable, match=r"fails on a value in the log \(.*'0\.50'"):
        Table(path, spark=spark)


def test_deletion_vectors_with_type_widening_are_refused_with_advice_that_works(
    spark: Any, tmp_path: Path
) -> None:
    """delta-rs decodes no deletion vector of a table that also uses type widening,
    though it has none yet: lakelayout said the vectors "cannot be read" and advised a
    purge, which changes nothing (an audit). It names the pair and the features to drop."""
    path = str(tmp_path / "t")
    spark.range(20).write.format("delta").save(path)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
        "('delta.enableDeletionVectors'='true', 'delta.enableTypeWidening'='true')"
    )
    with pytest.raises(UnsupportedTable) as err:
        Table(path, spark=spark).scan("id = 3")
    message = str(err.value)
    assert "deletion vectors together with TypeWidening" in message, message
    assert "DROP FEATURE deletionVectors" in message and "DROP FEATURE typeWidening" in message
    assert "REORG" not in message


def test_delta_clustering_columns_are_logical_names_under_column_mapping(
    spark: Any, tmp_path: Path
) -> None:
    """Delta keeps its clustering columns under their physical names: lakelayout named
    `col-<uuid>` as the clustering column (OPTIMIZE failed on it), and after RENAME a TO
    a2 plus a new column a it clustered by the new a (an audit)."""
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (a INT, c INT) USING delta CLUSTER BY (a) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT CAST(id AS INT), CAST(id % 7 AS INT) FROM range(50)"
    )
    assert Table(path, spark=spark).clustering_columns == ["a"]
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN a TO a2")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a STRING)")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT CAST(id AS INT), 1, 'x' FROM range(50, 60)")
    t = Table(path, spark=spark)
    assert t.clustering_columns == ["a2"] == t.detail().clustering_columns
    m = t.optimize.run(full=True)
    assert m.clustering_columns == ("a2",)
    assert spark.read.format("delta").load(path).count() == 60


def test_files_naming_a_column_in_another_case_keep_its_values(spark: Any, tmp_path: Path) -> None:
    """``CONVERT TO DELTA`` over files of ``UserId``, ``userid`` and ``USERID``: Delta's
    reader finds the column in each file without case; lakelayout's readers took two of
    them for missing, so OPTIMIZE wrote NULLs for good, a partitioned scan returned
    NULLs, and an index built over them skipped matching rows (an audit)."""
    import pyarrow.parquet as pq

    from lakelayout.skipping.indexes import ValueList

    def make(name: str, partitioned: bool) -> str:
        path = tmp_path / name
        for k, column in enumerate(["UserId", "userid", "USERID"]):
            folder = path / f"g={k}" if partitioned else path
            folder.mkdir(parents=True, exist_ok=True)
            ids = pa.array(range(k * 10, k * 10 + 10), pa.int32())
            pq.write_table(pa.table({column: ids, "v": ids}), folder / f"part-{k}.parquet")
        by = " PARTITIONED BY (g INT)" if partitioned else ""
        spark.sql(f"CONVERT TO DELTA parquet.`{path}`{by}")
        return str(path)

    def rows(path: str, where: str = "TRUE") -> list[tuple[Any, ...]]:
        return sorted(map(tuple, spark.read.format("delta").load(path).where(where).collect()))

    plain = make("plain", partitioned=False)
    t = Table(plain, spark=spark)
    t.indexes.add(ValueList("UserId"))
    t.indexes.refresh()
    res = t.scan("UserId IN (5, 25)")
    assert sorted(map(tuple, res.df.collect())) == [(5, 5), (25, 25)]
    assert res.report.files_kept == 2
    before = rows(plain)
    t.optimize.compact()
    assert rows(plain) == before and rows(plain, "UserId IS NULL") == []

    parted = make("parted", partitioned=True)
    p = Table(parted, spark=spark)
    for where in ("userid = 15", "UserId IS NULL", "v >= 15 AND v < 17"):
        assert sorted(map(tuple, p.scan(where).df.collect())) == rows(parted, where)
