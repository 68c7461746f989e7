"""VACUUM on real Delta tables: retention, dry runs, orphans of a killed write, live sidecars."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakelayout.api import Table
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.cluster.vacuum import RETENTION_PROPERTY, parse_interval, table_retention
from lakelayout.errors import InvalidOption
from lakelayout.layouts import QdTreeLayout
from lakelayout.skipping.indexes import ValueList
from lakelayout.skipping.store import MetadataStore
from lakelayout.table import delta
from lakelayout.table.writer import write_files

from .. import processes
from .helpers import TARGET, gen, live_paths

EIGHT_DAYS = 8 * 24 * 3600


def _files(root: str) -> set[str]:
    """Every file of a table folder, table-relative."""
    out = set()
    for folder, _, names in os.walk(root):
        for name in names:
            out.add(os.path.relpath(os.path.join(folder, name), root))
    return out


def _backdate(root: str, paths: set[str], seconds: float) -> None:
    """Make files look written ``seconds`` ago (as a crash that long ago leaves them)."""
    then = time.time() - seconds
    for path in paths:
        os.utime(os.path.join(root, path), (then, then))


def _ids(t: Table, version: int | None = None) -> list[int]:
    return sorted(r["id"] for r in t.to_df(version=version).select("id").collect())


# --------------------------------------------------------------------------- no Spark


def test_intervals_and_table_retention() -> None:
    assert parse_interval("interval 2 weeks") == timedelta(days=14)
    assert parse_interval("INTERVAL 90 minutes") == timedelta(minutes=90)
    assert parse_interval("interval 1 hour 30 seconds") == timedelta(hours=1, seconds=30)
    assert table_retention({}) == timedelta(days=7)
    assert table_retention({RETENTION_PROPERTY: "interval 36 hours"}) == timedelta(hours=36)
    for bad in ("7", "interval 2 months", "interval days", "interval 1 day banana"):
        with pytest.raises(InvalidOption, match="cannot read the interval"):
            parse_interval(bad)
    with pytest.raises(InvalidOption, match=RETENTION_PROPERTY):
        table_retention({RETENTION_PROPERTY: "soon"})


def test_retention_shorter_than_the_tables_is_refused_unless_forced(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    config = {RETENTION_PROPERTY: "interval 2 hours"}
    delta.create_table(root, pa.schema([("a", pa.int64())]), [], configuration=config)
    t = Table(root)
    with pytest.raises(InvalidOption, match=r"retain_hours=1 is shorter .*2 hours.*force=True"):
        t.vacuum(retain_hours=1)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(InvalidOption, match="whole number of hours"):
            t.vacuum(retain_hours=bad)  # type: ignore[arg-type]
    assert t.vacuum(retain_hours=2).files == ()
    assert t.vacuum(retain_hours=1, force=True, dry_run=True).retention_hours == 1
    assert t.vacuum().retention_hours == 2  # the table's own


def test_orphans_in_partition_folders_go_live_files_stay(tmp_path: Path) -> None:
    """A table partitioned by another Delta writer: orphans are found in ``part=value/``."""
    root = str(tmp_path / "p")
    data = pa.table({"id": [1, 2, 3, 4], "part": ["a", "a", "b", "b"]})
    write_deltalake(root, data, partition_by=["part"])
    live = {str(p) for p in DeltaTable(root).file_uris()}
    assert all("part=" in p for p in live)
    old = {"part=a/ll-part-00000-crashed.parquet", "part=b/ll-part-00001-crashed.parquet"}
    fresh = {"part=a/ll-part-00002-inflight.parquet"}
    for path in old | fresh:
        pq.write_table(data, os.path.join(root, path))
    _backdate(root, old, EIGHT_DAYS)

    dry = Table(root).vacuum(dry_run=True)
    assert set(dry.paths) == old and {f.kind for f in dry.files} == {"orphan"}
    assert old <= _files(root)  # a dry run deletes nothing
    sizes = sum(os.path.getsize(os.path.join(root, p)) for p in old)
    done = Table(root).vacuum()
    assert done.paths == dry.paths and done.bytes_deleted == sizes
    assert done.by_kind() == {"orphan": (2, sizes)}
    remaining = _files(root)
    assert not (old & remaining) and fresh <= remaining
    assert DeltaTable(root).to_pyarrow_table().num_rows == 4


#: two vectors Delta's connector wrote (a DELETE on Spark 3.5): the descriptor's text
#: and the file it put on disk
DELTAS_VECTORS = {
    "ZTKA=eh*nvUvq/vk7WKq": "deletion_vector_bfd4218c-2c36-4ec3-af62-7a3d3e826a99.bin",
    "k2lX(U3B.CZEA+WV^yQ2": "deletion_vector_3e4f803d-ae5d-4c78-bf46-8108b3d13448.bin",
}


def test_a_vector_descriptor_names_the_file_delta_wrote() -> None:
    from lakelayout.table.datafile import deletion_vector_file

    for text, name in DELTAS_VECTORS.items():
        assert deletion_vector_file("/t", {"storageType": "u", "pathOrInlineDv": text}) == (
            f"/t/{name}"
        )
        prefixed = {"storageType": "u", "pathOrInlineDv": "ab" + text}
        assert deletion_vector_file("/t", prefixed) == f"/t/ab/{name}"
    absolute = {"storageType": "p", "pathOrInlineDv": "file:/data/x%20y/v.bin"}
    assert deletion_vector_file("/t", absolute) == "/data/x y/v.bin"
    assert deletion_vector_file("/t", {"storageType": "i", "pathOrInlineDv": "wi5b=0"}) is None
    for bad in ({"storageType": "u", "pathOrInlineDv": "ZTKA=eh*nvUvq/vk7WK~"},
                {"storageType": "u", "pathOrInlineDv": "short"},
                {"storageType": "x", "pathOrInlineDv": "ZTKA=eh*nvUvq/vk7WKq"}):  # fmt: skip
        with pytest.raises(ValueError):
            deletion_vector_file("/t", bad)


def _table_with_vectors(root: str) -> dict[str, str]:
    """A delta-rs table whose one file got a deletion vector (commit 1, under the folder
    ``ab``) that commit 2 replaced by another (at the root), as two DELETEs of Delta's
    connector log them. The vectors' files hold bytes, not bitmaps: VACUUM never reads
    them. Returns the table-relative file of each: ``live`` and ``replaced``."""
    write_deltalake(
        root, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableDeletionVectors": "true"}
    )
    add = pa.table(DeltaTable(root).get_add_actions(flatten=True)).to_pylist()[0]
    (old_text, old_name), (new_text, new_name) = DELTAS_VECTORS.items()
    old = {"storageType": "u", "pathOrInlineDv": "ab" + old_text, "sizeInBytes": 34,
           "cardinality": 1, "offset": 1}  # fmt: skip
    new = {"storageType": "u", "pathOrInlineDv": new_text, "sizeInBytes": 36,
           "cardinality": 2, "offset": 1}  # fmt: skip

    def actions(before: dict[str, Any] | None, after: dict[str, Any], version: int) -> None:
        removed = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}
        lines = [
            {"remove": {**removed, **({"deletionVector": before} if before else {})}},
            {"add": {"path": add["path"], "partitionValues": {}, "size": add["size_bytes"],
                     "modificationTime": 2, "dataChange": True, "deletionVector": after}},
            {"commitInfo": {"timestamp": 2, "operation": "DELETE"}},
        ]  # fmt: skip
        log = Path(root) / "_delta_log" / f"{version:020d}.json"
        log.write_text("".join(json.dumps(line) + "\n" for line in lines))

    actions(None, old, 1)
    actions(old, new, 2)
    files = {"live": new_name, "replaced": f"ab/{old_name}"}
    for path in files.values():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        Path(root, path).write_bytes(b"\x01" * 64)
    return files


def test_vectors_the_log_names_stay_and_orphans_past_the_retention_go(tmp_path: Path) -> None:
    """delta-rs's full listing took the files of the deletion vectors live rows depend on
    for unreferenced: a week after Delta's DELETE, lakelayout's VACUUM deleted them and
    neither Delta nor lakelayout could read the table (an audit); then every vector stayed
    for ever. A vector an action in the log names stays (live, or replaced by a later
    DELETE); one no action names goes once it is older than the retention."""
    from lakelayout.cluster.vacuum import vacuum

    root = str(tmp_path / "v")
    named = _table_with_vectors(root)
    orphans = {"deletion_vector_0b6f4a5e-3c1d-4a8e-9f2b-7d1e5c3a9b40.bin",
               "cd/deletion_vector_1c7e5b6f-4d2e-4b9f-8a3c-6e2f4d1b8a51.bin"}  # fmt: skip
    fresh = "deletion_vector_2d8f6c70-5e3f-4c0a-9b4d-7f3a5e2c9b62.bin"  # a DELETE writing now
    for path in orphans | {fresh}:
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        Path(root, path).write_bytes(b"\x02" * 40)
    _backdate(root, orphans | set(named.values()), EIGHT_DAYS)
    # Delta's VACUUM leaves a note of its last run in the log (no actions): every vector
    # stayed on a table Delta had vacuumed once (an audit)
    Path(root, "_delta_log", "_last_vacuum_info").write_text('{"latestCommitVersion": 2}')

    dry = vacuum(root, dry_run=True)
    assert set(dry.paths) == orphans and dry.by_kind() == {"deletion-vector": (2, 80)}
    assert orphans <= _files(root)
    done = vacuum(root)
    assert done.paths == dry.paths
    left = _files(root)
    assert not orphans & left and {fresh, *named.values()} <= left


def test_vectors_of_a_table_at_the_filesystem_root_are_matched_by_one_spelling() -> None:
    """At the root the listing's files were '//name' and the log's '/name': no vector was
    named, live ones were deleted (an audit, from the code)."""
    from lakelayout.cluster.vacuum import unnamed_vectors
    from lakelayout.table.datafile import deletion_vector_file

    (text, name), (_, other) = DELTAS_VECTORS.items()
    for root in ("/", "/t", "/t/"):
        named = {deletion_vector_file(root, {"storageType": "u", "pathOrInlineDv": text})}
        assert unnamed_vectors({name, other}, named, root) == {other}
        assert unnamed_vectors({name, other}, None, root) == set()


def test_every_vector_stays_when_the_log_cannot_be_read_for_them(tmp_path: Path) -> None:
    """A live file's vector missing (a misreading of its descriptor looks the same), or a
    log holding what VACUUM does not read (V2 checkpoint sidecars; Delta 4 also makes an
    empty ``_staged_commits/``, which is fine): no vector is deleted."""
    from lakelayout.cluster.vacuum import vacuum

    orphan = "deletion_vector_0b6f4a5e-3c1d-4a8e-9f2b-7d1e5c3a9b40.bin"
    for case in ("missing", "sidecars"):
        root = str(tmp_path / case)
        named = _table_with_vectors(root)
        Path(root, orphan).write_bytes(b"\x02" * 40)
        _backdate(root, {orphan, *named.values()}, EIGHT_DAYS)
        assert vacuum(root, dry_run=True).paths == [orphan]  # readable: the orphan goes
        if case == "missing":
            os.remove(os.path.join(root, named["live"]))
        else:
            os.makedirs(os.path.join(root, "_delta_log", "_sidecars"))
            Path(root, "_delta_log", "_sidecars", "7d2e.parquet").write_bytes(b"PAR1")
        assert vacuum(root).paths == []
        assert orphan in _files(root)


# --------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_retention_dry_run_and_time_travel(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), gen(spark, 3000, 1, parts=4), target_file_size=TARGET)
    t.append(gen(spark, 1000, 2, parts=2, start=3000))
    v1 = t.version
    old_files = live_paths(t)
    t.optimize.zorder(["a", "b"])  # removes every file of version v1 (dataChange=false)
    # a crashed append 8 days ago, and an append still writing now: files, no commit
    crashed = {f.path for f in write_files(gen(spark, 200, 3, parts=2), t.uri, schema=t.schema,
                                           target_file_size=TARGET)}  # fmt: skip
    _backdate(t.uri, crashed, EIGHT_DAYS)
    inflight = {f.path for f in write_files(gen(spark, 200, 4, parts=1), t.uri, schema=t.schema,
                                            target_file_size=TARGET)}  # fmt: skip
    before = _files(t.uri)

    dry = t.vacuum(dry_run=True)  # Delta's default retention: 7 days
    assert set(dry.paths) == crashed and dry.by_kind()["orphan"][0] == len(crashed)
    assert _files(t.uri) == before
    done = t.vacuum()
    assert done.paths == dry.paths and done.bytes_deleted == dry.bytes_deleted > 0
    after = _files(t.uri)
    assert not (crashed & after)
    assert old_files | inflight <= after  # removed 0 s ago / written 0 s ago: inside retention
    assert _ids(t, v1) == list(range(4000))  # time travel inside the retention still reads
    assert _ids(t) == list(range(4000))

    with pytest.raises(InvalidOption, match="shorter than the retention"):
        t.vacuum(retain_hours=0)
    forced = t.vacuum(retain_hours=0, force=True, dry_run=True)
    assert {f.path for f in forced.files if not f.path.startswith("_")} == old_files | inflight
    assert set(forced.by_kind()) == {"removed", "orphan", "provenance"}  # the superseded one
    assert {f.path for f in forced.files if f.kind == "removed"} == old_files
    assert {f.path for f in forced.files if f.kind == "orphan"} == inflight
    t.vacuum(retain_hours=0, force=True)
    assert not ((old_files | inflight) & _files(t.uri))
    assert _ids(t) == list(range(4000))
    assert t.vacuum(retain_hours=0, force=True).files == ()  # deleted files are not listed again


@pytest.mark.spark
def test_sidecars_live_after_vacuum_still_work(spark: Any, tmp_path: Path) -> None:
    """Indexes and a logical layout prune exactly as before; only dead sidecars go."""
    from pyspark.sql import functions as F

    df = gen(spark, 6000, 7, parts=6).withColumn("k", (F.col("id") % 10).cast("int"))
    t = Table.create(str(tmp_path / "s"), df, target_file_size=TARGET)
    t.indexes.add(ValueList("k"))
    t.indexes.refresh()
    workload = ["k IN (1, 5)", "a < 250", "b >= 500"]
    sample = t.to_df().select("a", "b", "k").toArrow()
    t.optimize.apply(QdTreeLayout.fit(sample, workload, target_blocks=4))  # superseded below
    t.optimize.apply(QdTreeLayout.fit(sample, workload, target_blocks=8))
    t.indexes.refresh()  # the store is written again: the old manifest is dead
    store, prov = MetadataStore(t.uri), ProvenanceStore(t.uri)
    # an atomic write interrupted between its temporary file and the rename
    (store.directory / ".CURRENT.0123abcd.tmp").write_text("store-x.parquet")
    dead_layouts = {p for p in prov.layouts.glob("*.json")} - {
        prov.layouts / f"{p.layout_id}.json" for p in prov.read(live_paths(t)).values()
    }
    assert len(dead_layouts) == 1
    queries = ["k = 3", "k IN (1, 5) AND a < 250", "b >= 500", "a < 100 OR k = 7"]
    reports = {q: t.scan(q).report for q in queries}
    counts = {q: t.scan(q).df.count() for q in queries}
    assert any(r.skipped_by.get("layout(qdtree)", 0) for r in reports.values())
    assert any(r.skipped_by.get("valuelist(k)", 0) for r in reports.values())

    done = t.vacuum(retain_hours=0, force=True)
    kinds = done.by_kind()
    assert {"index-store", "layout", "temp"} <= set(kinds)
    assert kinds["layout"][0] == 1 and not any(p.exists() for p in dead_layouts)
    for q in queries:
        again = t.scan(q)
        assert again.report.files_kept == reports[q].files_kept
        assert again.report.skipped_by == reports[q].skipped_by
        assert again.df.count() == counts[q]
    assert store.current_file() is not None and store.current_file().exists()  # type: ignore[union-attr]
    assert {p.name for p in store.directory.glob("store-*.parquet")} == {
        p.name for p in store.segments()
    }
    assert list(store.directory.glob("manifest-*.json")) == [store.current_file()]
    assert len(list(prov.directory.glob("provenance-*.parquet"))) == 1
    assert store.declarations.exists()
    assert t.vacuum(retain_hours=0, force=True).files == ()  # nothing left to collect


@pytest.mark.spark
def test_orphans_of_a_killed_write_go_after_the_retention(spark: Any, tmp_path: Path) -> None:
    """A real process is killed between writing its files and committing them."""
    t = Table.create(
        str(tmp_path / "k"),
        gen(spark, 3000, 9, parts=4),
        target_file_size=TARGET,
        properties={RETENTION_PROPERTY: "interval 1 seconds"},
    )
    live = live_paths(t)
    before = _files(t.uri)
    ready = tmp_path / "ready"
    child = processes.python(
        Path(__file__).with_name("crash_zorder.py"), t.uri, str(ready), log=tmp_path / "child.log"
    )
    try:
        processes.wait_for(
            ready.exists, what="z-order child", proc=child, log=tmp_path / "child.log"
        )
    finally:
        processes.kill(child)
    left = _files(t.uri) - before
    orphans = {p for p in left if p.startswith("ll-zorder")}
    layouts = {
        p for p in left if p.startswith(os.path.join("_lakelayout", "clustering", "layouts"))
    }
    assert orphans and len(layouts) == 1 and live_paths(t) == live

    kept = t.vacuum(retain_hours=1)  # longer than the table's 1 s: allowed; all inside it
    assert kept.files == () and orphans <= _files(t.uri)
    newest = max(os.path.getmtime(os.path.join(t.uri, p)) for p in orphans | layouts)
    time.sleep(max(0.0, newest + 1.2 - time.time()))  # let the table's 1 s retention pass
    dry = t.vacuum(dry_run=True)
    assert {f.path for f in dry.files if f.kind == "orphan"} == orphans
    assert {f.path for f in dry.files if f.kind == "layout"} == layouts
    assert orphans <= _files(t.uri)
    done = t.vacuum()
    assert done.paths == dry.paths
    assert done.bytes_deleted == dry.bytes_deleted
    assert not ((orphans | layouts) & _files(t.uri))
    assert live_paths(t) == live and _ids(t) == list(range(3000))


def test_a_write_whose_files_a_vacuum_took_before_its_commit_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """A VACUUM with a retention shorter than a rewrite took its new files for a crashed
    write's orphans; the rewrite then committed them: the table listed missing files,
    the rows were gone and every later scan and DELETE failed (an audit). The commit now
    checks its files first: nothing is committed and the table is as it was."""
    from lakelayout.cluster import OptimizeHooks
    from lakelayout.errors import LakelayoutError

    t = Table.create(str(tmp_path / "v"), gen(spark, 600, 9, parts=6), target_file_size=TARGET)
    live, version = live_paths(t), t.version
    taken: list[str] = []

    def vacuum(_: int) -> None:  # another process's VACUUM, while this rewrite commits
        time.sleep(0.01)
        taken.extend(f.path for f in Table(t.uri).vacuum(retain_hours=0, force=True).files)

    with pytest.raises(LakelayoutError, match=r"deleted before its commit.*nothing was committed"):
        t.optimize.compact(hooks=OptimizeHooks(before_commit=vacuum))
    assert any(p.startswith("ll-compact") for p in taken)
    assert t.version == version and live_paths(t) == live and _ids(t) == list(range(600))


def test_cli_vacuum_dry_run_refusal_and_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lakelayout.cli import app

    root = str(tmp_path / "c")
    delta.create_table(root, pa.schema([("a", pa.int64())]), [])
    pq.write_table(pa.table({"a": [1]}), os.path.join(root, "ll-part-crashed.parquet"))
    _backdate(root, {"ll-part-crashed.parquet"}, EIGHT_DAYS)
    runner = CliRunner()

    dry = runner.invoke(app, ["vacuum", root, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would delete" in dry.output and "orphan       ll-part-crashed.parquet" in dry.output
    assert os.path.exists(os.path.join(root, "ll-part-crashed.parquet"))

    refused = runner.invoke(app, ["vacuum", root, "--retain-hours", "1"])
    assert refused.exit_code == 2
    assert "shorter than the retention" in refused.output and "Traceback" not in refused.output

    done = runner.invoke(app, ["vacuum", root])
    assert done.exit_code == 0, done.output
    assert "deleted" in done.output and not os.path.exists(
        os.path.join(root, "ll-part-crashed.parquet")
    )


def test_a_retention_spelled_without_interval_is_the_one_applied(tmp_path: Path) -> None:
    """``36 hours`` (no ``interval``) is 36 hours to lakelayout and to Delta's connector;
    delta-rs reads it as its default 168 hours. VACUUM reported 36 hours, listed files by
    168 and refused ``retain_hours=40`` citing 168 (an audit)."""
    uri = str(tmp_path / "r")
    write_deltalake(uri, pa.table({"x": [1, 2, 3]}), configuration={RETENTION_PROPERTY: "0 hours"})
    old = {os.path.basename(p) for p in DeltaTable(uri).file_uris()}
    write_deltalake(uri, pa.table({"x": [4]}), mode="overwrite")
    t = Table(uri)
    dry = t.vacuum(dry_run=True)  # removed 0 s ago, past a retention of 0 hours
    assert dry.retention_hours == 0
    assert {f.path for f in dry.files if f.kind == "removed"} == old

    delta.set_properties(uri, {RETENTION_PROPERTY: "36 hours"})
    assert Table(uri).vacuum(dry_run=True).files == ()  # inside 36 hours
    forty = Table(uri).vacuum(retain_hours=40, dry_run=True)  # longer than 36: allowed
    assert forty.retention_hours == 40 and forty.files == ()
    with pytest.raises(InvalidOption, match=r"shorter than the retention .*36 hours"):
        Table(uri).vacuum(retain_hours=30)
    Table(uri).vacuum()
    assert {os.path.basename(p) for p in DeltaTable(uri).file_uris()} <= _files(uri)


def test_a_retention_of_several_units_is_applied_whole(tmp_path: Path) -> None:
    """delta-rs reads the first unit of 'interval 1 day 30 minutes' (24 hours): VACUUM
    deleted a file removed 24.2 hours ago, inside the table's 24.5, and version 0 no
    longer loaded (a review). Its tombstone is backdated in the log to place it there."""
    uri = str(tmp_path / "r")
    write_deltalake(
        uri,
        pa.table({"x": [1, 2, 3]}),
        configuration={RETENTION_PROPERTY: "interval 1 day 30 minutes"},
    )
    old = {os.path.basename(p) for p in DeltaTable(uri).file_uris()}
    write_deltalake(uri, pa.table({"x": [4]}), mode="overwrite")
    _remove_backdated(uri, 1, hours=24.2)
    t = Table(uri)
    dry = t.vacuum(dry_run=True)
    assert dry.retention_hours == 24.5 and dry.files == ()
    t.vacuum()
    assert old <= _files(uri)
    assert DeltaTable(uri, version=0).to_pyarrow_table().num_rows == 3  # time travel reads
    assert {f.path for f in t.vacuum(retain_hours=24, force=True, dry_run=True).files} == old


@pytest.mark.parametrize(
    ("spelled", "hours_ago", "listed"),
    [  # removed 2.5 hours ago: past 1.5 hours whether read as 1.5 or rounded up to 2
        ("INTERVAL 90 MINUTES", 2.5, True),  # capitals: delta-rs read its 168 (a review)
        ("interval 90 minutes", 2.5, True),
        ("interval 1 hour 30 minutes", 2.5, True),
        ("interval 1 hour 30 minutes", 1.2, False),
    ],
)
def test_a_fraction_of_an_hour_is_applied_as_spelled_or_rounded_up(
    tmp_path: Path, spelled: str, hours_ago: float, listed: bool
) -> None:
    uri = str(tmp_path / "r")
    write_deltalake(uri, pa.table({"x": [1, 2, 3]}), configuration={RETENTION_PROPERTY: spelled})
    old = {os.path.basename(p) for p in DeltaTable(uri).file_uris()}
    write_deltalake(uri, pa.table({"x": [4]}), mode="overwrite")
    _remove_backdated(uri, 1, hours=hours_ago)
    dry = Table(uri).vacuum(dry_run=True)
    assert dry.retention_hours == 1.5
    assert {f.path for f in dry.files if f.kind == "removed"} == (old if listed else set())


def _remove_backdated(uri: str, version: int, *, hours: float) -> None:
    """The removes of commit ``version`` dated ``hours`` ago (in the log itself)."""
    import json

    commit = Path(uri) / "_delta_log" / f"{version:020d}.json"
    lines = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in lines:
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = int((time.time() - hours * 3600) * 1000)
    commit.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
