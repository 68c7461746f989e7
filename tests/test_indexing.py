"""Skipping indexes on real Delta tables and a real SparkSession (``Table.indexes``).

Each index type skips the files it should (counts from the scan report) and
the rows equal a full Spark scan; stale or missing metadata never skips;
write-time metadata equals ``refresh()``'s; bad declarations fail before
anything is written; and a differential property test compares skipping
scans with full scans over random data, predicates and index combinations.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout import InvalidOption, PredicateError
from lakelayout.api import Table
from lakelayout.cluster.config import SMALL_REWRITE_SIZE
from lakelayout.layouts import LinearLayout, QdTreeLayout, ZOrderLayout
from lakelayout.skipping import store as store_module
from lakelayout.skipping.indexes import (
    BloomFilter,
    Features,
    GapList,
    GeoBox,
    Hybrid,
    Index,
    MinMax,
    Prefix,
    Suffix,
    ValueList,
    elementwise,
)
from lakelayout.skipping.indexes.examples import agent_name
from lakelayout.skipping.store import MetadataStore
from lakelayout.table import delta
from lakelayout.table.collect import StatsCollector, stats_json
from lakelayout.table.files import WrittenFile
from lakelayout.table.writer import write_files

UDFS = {"getagentname": elementwise(agent_name)}
FILES = 6
ROWS = 30
URL = "https://example.com/app/v1/api/"  # 31 shared characters: min/max cannot tell files apart
DB = "prod_cluster_eu_west_"

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("mode", pa.string()),
        ("okey", pa.int64()),
        ("ua", pa.string()),
        ("url", pa.string()),
        ("db", pa.string()),
        ("price", pa.float64()),
        ("lat", pa.float64()),
        ("lng", pa.float64()),
        ("status", pa.string()),
        ("m", pa.map_(pa.string(), pa.string())),
    ]
)
AGENTS = ["AAA/1.0", "zzz/9.9", "Mozilla/5.0 (X11) Firefox/118.0", "curl/8.1"]
PATHS = ["a", "zz", "users", "orders", "items", "carts"]
TABLES = ["customers", "payments", "orders", "refunds", "invoices", "returns"]


def _data(k: int) -> pa.Table:
    """File ``k``: min/max of every column spans the same range in every file, but
    each file holds one value of its own that an index can tell apart."""
    rows: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for r in range(ROWS):
        i = k * ROWS + r
        rows["id"].append(i)
        rows["ts"].append(dt.datetime(2019 + r % 5, k + 1, 1 + r % 28, tzinfo=dt.timezone.utc))
        rows["mode"].append(["A", "Z", f"M{k}"][r % 3])
        rows["okey"].append((i * 7919) % 100_003 if r else 1_000_000 + k)
        agent = "Hacker/6.6" if k == 3 and r == 5 else AGENTS[r % len(AGENTS)]
        rows["ua"].append(agent)
        rows["url"].append(URL + (["a", "zz", PATHS[k]][r % 3]) + f"/{r}")
        rows["db"].append(DB + ["aaa_x", "zzz_y", TABLES[k]][r % 3])
        rows["price"].append(float([r % 10, 1000 + r % 10, 500 if k == 5 else 3][r % 3]))
        if k == 2 and r % 2:
            rows["lat"].append(25.0)
            rows["lng"].append(25.0)
        else:
            rows["lat"].append(0.0 + r % 2 * 50)
            rows["lng"].append(0.0 + r % 2 * 50)
        rows["status"].append("error" if k == 0 and r == 7 else ["a_ok", "z_ok"][r % 2])
        rows["m"].append([("courier", "ups" if k == 4 and r == 3 else "dhl")])
    return pa.table({f.name: pa.array(rows[f.name], f.type) for f in SCHEMA}, schema=SCHEMA)


def _frame(spark: Any, ks: range) -> Any:
    data = pa.concat_tables([_data(k) for k in ks])
    df = spark.createDataFrame(data)
    return df.repartitionByRange(len(ks), "id").sortWithinPartitions("id")


ALL_INDEXES: list[Index] = [
    MinMax("month(ts)"),
    ValueList("mode"),
    BloomFilter("okey", fpp=0.01, expected_values=100),
    Hybrid("ua", max_values=10),
    Prefix("url", length=len(URL) + 6),
    Suffix("db", length=8),
    GapList("price", gaps=4),
    GeoBox("lat", "lng", boxes=2),
    Features(["status = 'error'", "m['courier'] = 'ups'"]),
    ValueList("getAgentName(ua)"),
]

#: predicate, index expected to skip, files it alone rules out (of 6)
CASES = [
    ("month(ts) = 4", "minmax(month(ts))", 5),
    ("mode = 'M2'", "valuelist(mode)", 5),
    ("mode NOT IN ('A', 'Z', 'M1')", "valuelist(mode)", 1),
    ("okey = 1000004", "bloomfilter(okey)", 5),
    ("ua = 'Hacker/6.6'", "hybrid(ua)", 5),
    (f"url LIKE '{URL}orders%'", "prefix(url)", 5),
    ("startswith(url, 'https://example.com/app/v1/api/users')", "prefix(url)", 5),
    ("db LIKE '%invoices'", "suffix(db)", 5),
    ("endswith(db, '_refunds')", "suffix(db)", 5),
    ("price BETWEEN 400 AND 600", "gaplist(price)", 5),
    ("st_within_box(lat, lng, 20, 30, 20, 30)", "geobox(lat, lng)", 5),
    ("status = 'error' OR m['courier'] = 'ups'", "features", 4),
    ("getAgentName(ua) = 'Hacker'", "valuelist(getagentname(ua))", 5),
    ("NOT (getAgentName(ua) != 'Hacker')", "valuelist(getagentname(ua))", 5),
]


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


@pytest.fixture(scope="module")
def indexed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Table:
    """Six files, every index type declared, half indexed at write time, half by refresh."""
    path = tmp_path_factory.mktemp("indexed") / "t"
    Table.create(str(path), _frame(spark, range(3)))
    t = Table(str(path), spark=spark, udfs=UDFS)
    t.indexes.add(*ALL_INDEXES)
    t.append(_frame(spark, range(3, FILES)))
    metrics = t.indexes.refresh()
    assert metrics.files_indexed == 3 and not metrics.not_refreshed
    return t


def _skipped(report: Any, name: str) -> int:
    hits = [v for k, v in report.skipped_by.items() if k == name or k.startswith(name + "(")]
    assert hits, (name, report.skipped_by)
    return int(max(hits))


@pytest.mark.spark
@pytest.mark.parametrize(("where", "index", "skipped"), CASES)
def test_each_index_type_skips_what_it_should(
    indexed: Table, where: str, index: str, skipped: int
) -> None:
    from pyspark.sql import functions as F

    res = indexed.scan(where)
    assert res.report.files_total == FILES
    assert _skipped(res.report, index) == skipped
    assert res.report.files_skipped >= skipped
    assert res.report.skipped_by["minmax"] < skipped  # min/max alone cannot do it
    assert _ids(res.df) == _ids(indexed.to_df().where(F.expr(where)))
    assert _ids(res.df)  # every case matches some row


@pytest.mark.spark
def test_scan_reads_only_the_metadata_it_needs(indexed: Table) -> None:
    res = indexed.scan("mode = 'M1' AND id >= 0")
    assert set(res.report.skipped_by) == {"minmax", "valuelist(mode)"}
    assert res.report.bytes_skipped_by["valuelist(mode)"] > 0
    assert indexed.scan("id < 10").report.skipped_by == {"minmax": 5}


@pytest.mark.spark
def test_describe_list_and_drop(spark: Any, indexed: Table, tmp_path: Path) -> None:
    described = {d.name: d for d in indexed.indexes.describe()}
    assert len(described) == len(ALL_INDEXES)
    for d in described.values():
        assert (d.usable, d.files_covered, d.stale_files, d.missing_files) == (True, FILES, 0, 0)
        assert d.metadata_bytes > 0
    assert [i.kind for i in indexed.indexes.list()][:2] == ["minmax", "valuelist"]

    path = tmp_path / "d"
    t = Table.create(str(path), _frame(spark, range(2)))
    t.indexes.add(ValueList("mode"), Prefix("url", length=8))
    t.indexes.refresh()
    t.indexes.drop("VALUELIST(mode)")
    assert [d.name for d in t.indexes.describe()] == ["prefix(url)"]
    assert MetadataStore(str(path)).columns() == ["prefix(url)"]
    assert t.scan("mode = 'M1'").report.skipped_by == {"minmax": 0}
    with pytest.raises(InvalidOption, match="Did you mean 'prefix"):
        t.indexes.drop("prefixx(url, 8)")


def _words(lo: int, hi: int, word: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(lo, hi), pa.int64()),
            "s": pa.array([f"{word}{i:04d}" for i in range(lo, hi)], pa.string()),
        }
    )


@pytest.mark.spark
def test_an_interrupted_drop_never_leaves_metadata_to_an_index_declared_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drop rewrote the declarations, then the store: cut off between them, it left
    prefix(s)'s column with no declaration, and Prefix('s', length=4) declared again
    took those 2-character prefixes as its own; a scan for 'abcd%' kept no file (an
    audit). The drop now removes the column first, and an add drops a column no
    declaration owns."""
    t = Table.create(str(tmp_path / "t"), _words(0, 50, "abcd"), spark=spark)
    t.append(_words(50, 100, "abzz"))
    t.indexes.add(Prefix("s", length=2))
    t.indexes.refresh()
    store = MetadataStore(t.uri)

    def full(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:  # the second write fails: the name stays declared
        patch.setattr(MetadataStore, "declare", full)
        with pytest.raises(OSError):
            t.indexes.drop("prefix(s)")
    assert [i.name for i in t.indexes.list()] == ["prefix(s)"] and store.columns() == []
    assert t.scan("s LIKE 'abcd%'").count() == 50  # no metadata: every file kept
    t.indexes.drop("prefix(s)")  # and the drop can be done again
    assert t.indexes.list() == [] and store.columns() == []

    # the column an earlier version's interrupted drop left behind
    t.indexes.add(Prefix("s", length=2))
    t.indexes.refresh()
    store.declare([], [])
    assert store.columns() == ["prefix(s)"]
    t.indexes.add(Prefix("s", length=4))
    t.indexes.refresh()
    assert t.scan("s LIKE 'abcd%'").count() == 50
    assert t.scan("s LIKE 'abzz%'").report.files_kept == 1  # built again, and used


@pytest.mark.spark
@pytest.mark.parametrize("step", ["record_written", "_write_rows"])
def test_metadata_computed_for_an_index_declared_again_otherwise_meanwhile_is_not_stored(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """Another process drops prefix(s) (length 2) and declares it again with length 4
    between an append's commit and its metadata upkeep, or while a refresh computes: the
    2-character prefixes were stored as the new index's, and a scan for 'abcd%' kept
    no file (a review). An index is stored only as still declared, parameters and all."""
    from lakelayout.skipping.catalog import IndexCatalog

    t = Table.create(str(tmp_path / "t"), _words(0, 50, "abzz"), spark=spark)
    t.indexes.add(Prefix("s", length=2))
    t.indexes.refresh()
    original = getattr(IndexCatalog, step)

    def meanwhile(self: IndexCatalog, *args: Any, **kwargs: Any) -> Any:
        other = Table(t.uri, spark=spark)
        other.indexes.drop("prefix(s)")
        other.indexes.add(Prefix("s", length=4))
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(IndexCatalog, step, meanwhile)
        if step == "record_written":
            t.append(_words(50, 100, "abcd"))
        else:
            t.append(_words(50, 100, "abcd"))
            t.indexes.drop("prefix(s)")
            t.indexes.add(Prefix("s", length=2))
            t.indexes.refresh()
    assert [i.to_dict()["params"] for i in t.indexes.list()] == [{"length": 4}]
    assert t.scan("s LIKE 'abcd%'").count() == 50


@pytest.mark.spark
def test_a_failure_storing_a_committed_writes_metadata_does_not_fail_the_write(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Index upkeep after an append's or a rewrite's commit let any error but an OSError,
    an Arrow or a lakelayout error escape: an append that had committed raised, and
    retried it would add its rows twice (an audit). The write returns; its new files
    have no metadata (kept by every scan) until a refresh."""
    t = Table.create(str(tmp_path / "t"), _words(0, 50, "abcd"), spark=spark)
    t.indexes.add(ValueList("s"))
    t.indexes.refresh()

    def broken(*_: Any, **__: Any) -> None:
        raise ValueError("not what the store expected")

    with monkeypatch.context() as patch:
        patch.setattr(MetadataStore, "upsert", broken)
        assert t.append(_words(50, 100, "abzz")).version == 1
        assert t.optimize.compact().files_removed == 2
    assert t.to_df().count() == 100 and t.version == 2
    assert t.scan("s = 'abzz0077'").count() == 1  # no metadata: kept
    assert t.indexes.refresh().files_indexed == 1
    assert t.scan("s = 'nothing'").report.files_kept == 0


@pytest.mark.spark
def test_udfs_must_be_registered_again_when_reopened(spark: Any, indexed: Table) -> None:
    plain = Table(indexed.uri, spark=spark)
    report = plain.scan("mode = 'M2'").report
    assert "valuelist(getagentname(ua))" in report.unused_indexes
    assert "register_udfs" in report.unused_indexes["valuelist(getagentname(ua))"]
    assert report.skipped_by["valuelist(mode)"] == 5
    unusable = [d for d in plain.indexes.describe() if not d.usable]
    assert [d.kind for d in unusable] == ["valuelist"]

    plain.indexes.register_udfs(UDFS)
    res = plain.scan("getagentname(ua) IN ('Hacker', 'nobody')")
    assert res.report.skipped_by["valuelist(getagentname(ua))"] == 5
    assert len(_ids(res.df)) == 1 and not res.report.unused_indexes


@pytest.mark.spark
def test_write_time_metadata_equals_refresh(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "w"
    Table.create(str(path), _frame(spark, range(1)))
    t = Table(str(path), spark=spark, udfs=UDFS)
    t.indexes.add(*ALL_INDEXES)
    t.append(_frame(spark, range(1, 3)))
    snap = t.snapshot()
    store = MetadataStore(str(path))
    names = store.columns()
    at_write = store.read(snap.files, names)
    covered = [d.files_covered for d in t.indexes.describe()]
    assert covered == [2] * len(ALL_INDEXES)  # the appended files only

    store.pointer.unlink()  # forget everything: refresh rebuilds from the data files
    assert t.indexes.refresh().files_indexed == 3
    rebuilt = store.read(snap.files, names)
    for name in names:
        written = at_write[name].to_pylist()
        assert sum(v is not None for v in written) == 2, name
        pairs = [(a, b) for a, b in zip(written, rebuilt[name].to_pylist(), strict=True) if a]
        assert repr([b for _, b in pairs]) == repr([a for a, _ in pairs]), name
    assert t.indexes.refresh().files_indexed == 0


def _metadata(t: Table) -> dict[str, list[Any]]:
    """Every live file's stored metadata, per index, in snapshot order."""
    store = MetadataStore(t.uri)
    values = store.read(t.snapshot().files, store.columns())
    return {name: values[name].to_pylist() for name in sorted(values)}


#: every rewrite path, in turn, on one table: compaction (files routed by file, no
#: shuffle), a curve layout (no shuffle), a tree layout through the packed shuffle, a
#: linear layout through Spark's row shuffle and sort, and DELETE (surviving rows)
REWRITES: list[tuple[str, Any]] = [
    ("compact", lambda t: t.optimize.compact()),
    (
        "zorder, no shuffle",
        lambda t: t.optimize.apply(
            ZOrderLayout.fit(t.to_df().toArrow(), columns=["okey", "price"], target_blocks=4),
            one_file_per_block=True,
        ),
    ),
    (
        "qd-tree, packed shuffle",
        lambda t: t.optimize.apply(
            QdTreeLayout.fit(t.to_df().toArrow(), ["id < 60", "id < 120"], rows_per_block=40),
            one_file_per_block=True,
        ),
    ),
    (
        "linear, row shuffle",
        lambda t: t.optimize.apply(
            LinearLayout.fit(t.to_df().toArrow(), columns=["ts"], target_blocks=3),
            one_file_per_block=True,
        ),
    ),
    ("delete", lambda t: t.delete("id % 7 = 0")),
]


@pytest.mark.spark
def test_rewrites_index_the_files_they_write(spark: Any, tmp_path: Path) -> None:
    """A rewrite collects every declared index on the rows it writes (no second read):
    nothing is left for refresh(), and the values are what refresh() computes."""
    from pyspark.sql import functions as F

    path = tmp_path / "r"
    Table.create(str(path), _frame(spark, range(FILES)))
    t = Table(str(path), spark=spark, udfs=UDFS)
    t.indexes.add(*ALL_INDEXES)
    t.indexes.refresh()
    for name, rewrite in REWRITES:
        if name == "qd-tree, packed shuffle":
            delta.set_properties(t.uri, {SMALL_REWRITE_SIZE: "1"})
        before = set(map(str, t.snapshot().files.paths))
        m = rewrite(t)
        assert m.files_added > 0 and set(map(str, t.snapshot().files.paths)) != before, name
        assert name == "delete" or "indexes" in m.steps, name  # DELETE reports no steps
        collected = _metadata(t)
        assert all(v is not None for vs in collected.values() for v in vs), name
        assert t.indexes.refresh().files_indexed == 0, name

        MetadataStore(t.uri).pointer.unlink()  # forget: refresh rebuilds from the data files
        assert t.indexes.refresh().files_indexed == len(t.snapshot().files), name
        assert repr(_metadata(t)) == repr(collected), name
    expected = [i for i in range(FILES * ROWS) if i % 7]
    assert _ids(t.to_df()) == expected
    for where in ("mode = 'M2'", "getAgentName(ua) = 'Hacker'", "status = 'error'"):
        assert _ids(t.scan(where).df) == _ids(t.to_df().where(F.expr(where))), where


@pytest.mark.spark
def test_stale_or_missing_metadata_never_skips(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "s"
    t = Table.create(str(path), _frame(spark, range(3)))
    t.indexes.add(ValueList("mode"))
    t.indexes.refresh()
    assert t.scan("mode = 'NEW'").report.skipped_by["valuelist(mode)"] == 3

    # a file replaced in place: removed, rewritten with other rows, added again
    victim = str(t.snapshot().files.paths[0])
    delta.commit(t.uri, adds=[], removes=[victim])
    fresh = _data(1).set_column(2, "mode", pa.array(["NEW"] * ROWS))
    pq.write_table(fresh, os.path.join(t.uri, victim))
    delta.commit(t.uri, adds=[_written(t.uri, victim, fresh)])
    res = t.scan("mode = 'NEW'")
    assert res.report.skipped_by["valuelist(mode)"] == 2
    assert len(_ids(res.df)) == ROWS

    # files appended by a writer that collected nothing
    added = write_files(
        _frame(spark, range(4, 5)).withColumn("mode", _lit("NEW")),
        t.uri,
        schema=t.schema,
        target_file_size=1 << 20,
    )
    delta.commit(t.uri, adds=added)
    assert len(_ids(t.scan("mode = 'NEW'").df)) == 2 * ROWS

    # an interrupted refresh (the store swap fails) leaves the previous store readable
    store = MetadataStore(t.uri)
    before = store.current_file()

    def boom(*_: Any) -> None:
        raise OSError("disk full")

    original = store_module.atomic_write_text  # the pointer swap, appending or compacting
    store_module.atomic_write_text = boom  # type: ignore[assignment]
    try:
        with pytest.raises(OSError, match="disk full"):
            t.indexes.refresh()
    finally:
        store_module.atomic_write_text = original
    assert store.current_file() == before
    res = t.scan("mode = 'NEW'")
    assert len(_ids(res.df)) == 2 * ROWS and res.report.files_kept == 2
    assert t.indexes.refresh().files_indexed == 2
    assert t.scan("mode = 'NEW'").report.skipped_by["valuelist(mode)"] == 2


def _lit(value: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(value)


def _written(root: str, path: str, data: pa.Table) -> WrittenFile:
    collector = StatsCollector(data.schema)
    collector.add(data)
    size = os.path.getsize(os.path.join(root, path))
    return WrittenFile(path, size, data.num_rows, stats_json(collector.result()))


# --------------------------------------------------------------------------- bad input


@pytest.fixture
def empty(tmp_path: Path) -> Table:
    return Table.create(str(tmp_path / "e"), schema=SCHEMA)


def _declarations(t: Table) -> Any:
    path = Path(t.uri) / "_lakelayout" / "indexes.json"
    return json.loads(path.read_text()) if path.exists() else None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ValueList("modee"), "Did you mean 'mode'"),
        (lambda: MinMax("price + rand()"), "rand"),
        (lambda: BloomFilter("m"), "BloomFilter cannot index map column 'm'"),
        (lambda: Prefix("price", length=3), "Prefix cannot index"),
        (lambda: ValueList("getAgentName(ua)"), "register_udfs"),
        (lambda: GeoBox("lat", "url"), "must be numbers"),
        (lambda: Features(["status = "]), "status"),
    ],
)
def test_bad_declarations_fail_before_anything_is_written(
    empty: Table, make: Any, message: str
) -> None:
    empty.indexes.add(ValueList("mode"))
    before = _declarations(empty)
    with pytest.raises((InvalidOption, PredicateError), match=message):
        empty.indexes.add(MinMax("okey"), make())
    assert _declarations(empty) == before


def test_invalid_parameters_and_duplicates(empty: Table) -> None:
    with pytest.raises(InvalidOption, match="fpp"):
        BloomFilter("okey", fpp=1.5)
    with pytest.raises(InvalidOption, match="positive integer"):
        Prefix("url", length=0)
    with pytest.raises(InvalidOption, match="positive integer"):
        GapList("price", gaps=0)
    empty.indexes.add(ValueList("mode"))
    with pytest.raises(InvalidOption, match=r"valuelist\(mode\) is already declared"):
        empty.indexes.add(ValueList("MODE"))
    with pytest.raises(InvalidOption, match="already declared"):
        empty.indexes.add(MinMax("okey"), MinMax(" okey "))
    with pytest.raises(InvalidOption, match="Index objects"):
        empty.indexes.add("mode")  # type: ignore[arg-type]
    assert [e["kind"] for e in _declarations(empty)] == ["valuelist"]


# --------------------------------------------------------------------------- property

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "12"))
PREDICATES_PER_TABLE = 20
LONG = "https://example.com/a/very/long/shared/prefix/"
P_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("g", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
    ]
)
P_STRINGS = st.one_of(
    st.sampled_from(
        ["", "a", "Ab", "abc", "zzz", "Ärger", "日本", "naïve", "\U0001f600x", "ax", "XX"]
    ),
    st.sampled_from(["curl/8.1", "Mozilla/5.0 (X11) Firefox/118.0", "Hacker/6.6 x"]),
    st.builds(lambda s: LONG + s, st.text(alphabet="abxyzX", max_size=3)),
    st.text(max_size=3),
)
P_FLOATS = st.one_of(
    st.sampled_from([float("nan"), -0.0, 0.0, 1.5, -2.25, float("inf"), float("-inf")]),
    st.integers(-40, 40).map(lambda v: v / 4),
)
P_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-5, 20),
    "f": P_FLOATS,
    "g": P_FLOATS,
    "s": P_STRINGS,
    "d": st.dates(dt.date(1999, 11, 20), dt.date(2000, 3, 10)),
}
#: the pool a random subset of indexes is drawn from (every type, several expressions)
POOL = [
    MinMax("month(d)"),
    MinMax("lower(s)"),
    MinMax("i"),
    ValueList("s"),
    ValueList("lower(s)"),
    ValueList("i"),
    ValueList("getAgentName(s)"),
    BloomFilter("s", expected_values=20),
    BloomFilter("i", fpp=0.1, expected_values=20),
    Hybrid("s", max_values=3),
    Hybrid("f", max_values=2),
    Prefix("s", length=3),
    Prefix("lower(s)", length=2),
    Suffix("s", length=2),
    GapList("f", gaps=2),
    GapList("i", gaps=3),
    GeoBox("f", "g", boxes=2),
    Features(["i = 3", "s LIKE 'a%'", "lower(s) LIKE '%x%'"]),
]


@st.composite
def p_tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 40))
    cols: dict[str, list[Any]] = {"id": list(range(n))}
    for name, values in P_VALUES.items():
        cols[name] = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in P_SCHEMA}, schema=P_SCHEMA)


def _sql(column: str, value: Any) -> str:
    if value is None:
        return "NULL"
    if column == "s":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if column == "d":
        return f"DATE'{value.isoformat()}'"
    if column in ("f", "g"):
        if value != value:
            return "CAST('NaN' AS DOUBLE)"
        if value in (float("inf"), float("-inf")):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
        return f"{value!r}D"
    return str(value)


@st.composite
def p_atoms(draw: st.DrawFn) -> str:
    kind = draw(
        st.sampled_from(["cmp", "in", "null", "like", "lower", "month", "udf", "box", "feature"])
    )
    if kind in ("cmp", "in", "null"):
        col = draw(st.sampled_from(sorted(P_VALUES)))
        if kind == "null":
            return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
        if kind == "in":
            vals = draw(st.lists(P_VALUES[col], min_size=1, max_size=3))
            neg = "NOT " if draw(st.booleans()) else ""
            return f"{col} {neg}IN ({', '.join(_sql(col, v) for v in vals)})"
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{col} {op} {_sql(col, draw(P_VALUES[col]))}"
    if kind in ("like", "lower"):
        term = "s" if kind == "like" else "lower(s)"
        text = draw(st.sampled_from(["", "a", "ab", "x", "Ä", "日", LONG, LONG + "x", "Hacker"]))
        form = draw(st.sampled_from(["p%", "%s", "%m%", "=", "startswith", "endswith"]))
        neg = "NOT " if draw(st.booleans()) else ""
        if form == "startswith" or form == "endswith":
            return f"{neg}{form}({term}, {_sql('s', text)})"
        if form == "=":
            return f"{term} {'!=' if neg else '='} {_sql('s', text)}"
        pattern = {"p%": text + "%", "%s": "%" + text, "%m%": "%" + text + "%"}[form]
        return f"{term} {neg}LIKE {_sql('s', pattern)}"
    if kind == "month":
        op = draw(st.sampled_from(["=", "!=", "<", ">="]))
        return f"month(d) {op} {draw(st.sampled_from([1, 2, 3, 11, 12]))}"
    if kind == "udf":
        names = draw(
            st.lists(
                st.sampled_from(["curl", "Firefox", "Hacker", "Unknown"]), min_size=1, max_size=2
            )
        )
        neg = "NOT " if draw(st.booleans()) else ""
        return f"getAgentName(s) {neg}IN ({', '.join(_sql('s', n) for n in names)})"
    if kind == "box":
        a, b, c, e = (draw(st.integers(-12, 12)) for _ in range(4))
        return f"st_within_box(f, g, {min(a, b)}, {max(a, b)}, {min(c, e)}, {max(c, e)})"
    return draw(st.sampled_from(["i = 3", "s LIKE 'a%'", "lower(s) LIKE '%x%'"]))


def p_predicates() -> st.SearchStrategy[str]:
    return st.recursive(
        p_atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=4,
    )


@pytest.mark.spark
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=p_tables(),
    split=st.floats(0, 1),
    parts=st.tuples(st.integers(1, 4), st.integers(1, 3)),
    chosen=st.sets(st.integers(0, len(POOL) - 1), min_size=1, max_size=8),
    preds=st.lists(p_predicates(), min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE),
)
def test_property_indexed_scans_equal_full_scans(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    data: pa.Table,
    split: float,
    parts: tuple[int, int],
    chosen: set[int],
    preds: list[str],
) -> None:
    """Files skipped with min/max + a random set of indexes never hold a matching row.

    Part of the data is written before the indexes are declared (indexed by
    ``refresh()``), the rest after (indexed by the writer); one Spark job
    computes, per file and predicate, whether a row matches.
    """
    from pyspark.sql import functions as F

    path = str(tmp_path_factory.mktemp("iprop") / "t")
    first = max(1, int(split * data.num_rows))
    Table.create(path, spark.createDataFrame(data.slice(0, first)).repartition(parts[0]))
    t = Table(path, spark=spark, udfs=UDFS)
    t.indexes.add(*[POOL[k] for k in sorted(chosen)])
    if first < data.num_rows:
        t.append(spark.createDataFrame(data.slice(first)).repartition(parts[1]))
    t.indexes.refresh()
    t.indexes.register_in_spark(spark)
    snap = t.snapshot()

    # one Spark job: every row's truth for every predicate (the tables are tiny)
    rows = (
        t.to_df()
        .select(
            F.col("_metadata.file_name").alias("file"),
            "id",
            *[F.coalesce(F.expr(p), F.lit(False)).alias(f"p{k}") for k, p in enumerate(preds)],
        )
        .collect()
    )
    names = [os.path.basename(str(p)) for p in snap.files.paths]
    for k, text in enumerate(preds):
        matching = {r["file"] for r in rows if r[f"p{k}"]}
        pruned = t.plan(text, snapshot=snap)
        dropped = matching.intersection(
            n for n, kept in zip(names, pruned.keep, strict=True) if not kept
        )
        assert not dropped, f"{pruned.skipped_by}: dropped {dropped} matching {text!r}"

    # end to end for one predicate: the skipping scan returns the full scan's rows
    got = sorted(r["id"] for r in t.scan(preds[0], columns=["id"]).df.collect())
    assert got == sorted(r["id"] for r in rows if r["p0"]), preds[0]
