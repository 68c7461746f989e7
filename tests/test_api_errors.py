"""Errors that stay ours (issue 10, part 5), on real Spark and Delta tables.

Each is a LakelayoutError subclass with a message naming the problem, raised
before anything is committed; the tests compare the messages and check that
the table (or folder) is as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakelayout import InvalidOption, LocationNotEmpty, SchemaMismatch, TableExists
from lakelayout.api import Table

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Table:
    path = tmp_path_factory.mktemp("errors") / "t"
    return Table.create(str(path), spark.range(10).selectExpr("id", "cast(id as string) s"))


def _ids(t: Table) -> list[int]:
    return sorted(r["id"] for r in t.to_df().select("id").collect())


def test_nulls_into_a_not_null_column_are_refused_and_nothing_is_committed(
    spark: Any, table: Table
) -> None:
    assert not table.schema.field("id").nullable  # spark.range's id is NOT NULL
    before = table.version
    df = spark.sql("select cast(null as bigint) id, 'x' s union all select 77, 'y'")
    with pytest.raises(SchemaMismatch) as err:
        table.append(df.repartition(2))
    assert str(err.value) == (
        "column 'id' is NOT NULL in the table but the data holds NULL values in it; "
        "nothing was committed (filter or fill the NULLs first)"
    )
    assert table.version == before
    assert _ids(table) == list(range(10))


def test_a_nullable_dataframe_without_nulls_appends(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark.range(3))
    t.append(spark.sql("select cast(id + 3 as bigint) id from range(2)").selectExpr("id"))
    assert _ids(t) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("nosuchfn(id) < 5", "[UNRESOLVED_ROUTINE]"),
        ("sum(id) > 5", "[INVALID_WHERE_CONDITION]"),
        (
            "id > 1 AND row_number() OVER (ORDER BY id) = 1",
            "[WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE]",
        ),
        # Spark's parser refuses a literal it cannot hold with an ArithmeticException,
        # which escaped raw (an audit); in text lakelayout binds, lakelayout refuses it
        # first (tests/expr/test_exact_literals.py), here it is left to Spark
        ("hash(id) = 99999999999999999999999999999999999998.5", "DECIMAL_PRECISION_EXCEEDS"),
    ],
    ids=["unknown-function", "aggregate", "window", "39-digit-decimal"],
)
def test_a_predicate_spark_rejects_fails_the_scan_and_the_delete_before_any_write(
    table: Table, where: str, reason: str
) -> None:
    """Text lakelayout does not model is passed to Spark: what Spark's analyser refuses is
    a PredicateError with Spark's reason, raised by scan() itself (not by a later action)
    and by delete() before a job runs or a file is written."""
    from lakelayout.errors import PredicateError

    before, files = table.version, sorted(os.listdir(table.uri))
    with pytest.raises(PredicateError, match="Spark rejects the predicate") as err:
        table.scan(where)
    assert repr(where) in str(err.value) and reason in str(err.value), str(err.value)
    with pytest.raises(PredicateError, match="Spark rejects the predicate"):
        table.delete(where)
    assert table.version == before and sorted(os.listdir(table.uri)) == files
    assert _ids(table) == list(range(10))


@pytest.mark.parametrize(
    "where",
    ["rand() < 0.5", "id > 2 AND uuid() > 'a'", "monotonically_increasing_id() < 5"],
)
def test_a_delete_with_a_nondeterministic_predicate_is_refused_before_any_write(
    table: Table, where: str
) -> None:
    """A DELETE evaluates its predicate twice (files to rewrite, rows to keep): with
    rand() it deleted rows neither evaluation chose. Refused by name, as Delta does;
    the same text is a scan's filter (Spark accepts it there)."""
    from lakelayout.errors import PredicateError

    before, files = table.version, sorted(os.listdir(table.uri))
    with pytest.raises(PredicateError, match="DELETE needs a deterministic predicate") as err:
        table.delete(where)
    assert repr(where) in str(err.value)
    assert table.version == before and sorted(os.listdir(table.uri)) == files
    assert table.scan(where).df.count() <= 10
    # current_timestamp() is one value per query: deterministic, as Delta takes it
    table.delete("id > 100 AND id < unix_timestamp(current_timestamp())")
    assert _ids(table) == list(range(10))


def test_a_delete_predicate_spark_cannot_evaluate_is_named_and_deletes_nothing(
    table: Table,
) -> None:
    """A division by zero (ANSI) in the DELETE's matching job was a raw pyspark error
    (found by an audit); it is a PredicateError naming the predicate, before any write."""
    from lakelayout.errors import PredicateError

    before, files = table.version, sorted(os.listdir(table.uri))
    with pytest.raises(
        PredicateError, match="Spark could not evaluate the DELETE predicate"
    ) as err:
        table.delete("id / (id - id) > 1")
    assert "'id / (id - id) > 1'" in str(err.value) and "DIVIDE_BY_ZERO" in str(err.value)
    assert table.version == before and sorted(os.listdir(table.uri)) == files
    # the query's time is pinned to a literal for the DELETE's two jobs; the error quotes
    # the predicate as written (it quoted the pinned literal)
    said = "id / (id - id) > 1 OR current_date() < DATE'1990-01-01'"
    with pytest.raises(PredicateError, match="could not evaluate") as err:
        table.delete(said)
    assert repr(said) in str(err.value)
    assert table.version == before and sorted(os.listdir(table.uri)) == files
    # Java errors of Spark's functions (a bad pattern, a bad format) escaped raw as a
    # Py4JJavaError (an audit)
    for bad in ("s RLIKE '['", "format_string('%d', s) = '1'"):
        with pytest.raises(PredicateError, match=r"could not evaluate .*; nothing was deleted"):
            table.delete(bad)
    assert table.version == before and sorted(os.listdir(table.uri)) == files


def test_an_append_failing_in_its_tasks_leaves_no_file_behind(spark: Any, tmp_path: Path) -> None:
    """A task failing after its files rolled (a UDF raising on a late row) left the files
    other tasks and its earlier ones finished, until VACUUM past the retention (an
    audit). The append deletes what its own file names hold; the table is as it was."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = Table.create(str(tmp_path / "p"), spark.range(10).selectExpr("id", "id % 3 AS k"),
                     partition_by=["k"])  # fmt: skip
    before = {str(p) for p in tmp_path.rglob("*.parquet")}

    @F.udf(T.LongType())
    def late(x):  # type: ignore[no-untyped-def]  # (hints: pyspark reads an Arrow UDF)
        if x == 2_900:
            raise ValueError("injected failure on a late row")
        return x

    rows = spark.range(0, 3_000, 1, numPartitions=2).select(late("id").alias("id"))
    with pytest.raises(Exception, match="injected failure"):
        t.append(rows.selectExpr("id", "id % 3 AS k"), target_file_size=4_096)
    assert {str(p) for p in tmp_path.rglob("*.parquet")} == before
    assert t.version == 0 and t.to_df().count() == 10


def test_create_in_a_folder_holding_data_is_refused(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "old"
    spark.range(5).write.parquet(str(folder))
    before = sorted(os.listdir(folder))
    with pytest.raises(LocationNotEmpty) as err:
        Table.create(str(folder), spark.range(3))
    shown = ", ".join(before[:5]) + (f", ... ({len(before)} in all)" if len(before) > 5 else "")
    assert str(err.value) == (
        f"cannot create a table at '{folder}': the folder already holds {shown} and no "
        "Delta table; create tables in an empty or new folder"
    )
    assert isinstance(err.value, TableExists)
    assert sorted(os.listdir(folder)) == before  # nothing written, no _delta_log


def test_create_from_a_schema_in_a_folder_holding_data_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa

    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "notes.csv").write_text("a,b\n")
    (folder / "sub").mkdir()
    with pytest.raises(LocationNotEmpty) as err:
        Table.create(str(folder), schema=pa.schema([("a", pa.int64())]))
    assert str(err.value) == (
        f"cannot create a table at '{folder}': the folder already holds notes.csv, sub/ and no "
        "Delta table; create tables in an empty or new folder"
    )


def test_create_arguments_and_properties_that_disagree_are_refused(tmp_path: Path) -> None:
    """``auto_optimize=True`` with ``lakelayout.autoOptimize=false`` was taken, the
    property silently overridden (an audit); agreeing ones are taken."""
    import pyarrow as pa

    schema = pa.schema([("a", pa.int64())])
    path = str(tmp_path / "t")
    with pytest.raises(InvalidOption, match=r"auto_optimize=True and properties=.*'false'"):
        Table.create(path, schema=schema, auto_optimize=True,
                     properties={"lakelayout.autoOptimize": "false"})  # fmt: skip
    with pytest.raises(InvalidOption, match=r"target_file_size and properties=.*'2048'"):
        Table.create(path, schema=schema, target_file_size=1024,
                     properties={"lakelayout.targetFileSize": "2048"})  # fmt: skip
    assert not os.path.exists(path)
    t = Table.create(path, schema=schema, auto_optimize=True, target_file_size=1024,
                     properties={"lakelayout.autoOptimize": "TRUE",
                                 "lakelayout.targetFileSize": "1024"})  # fmt: skip
    assert t.properties["lakelayout.autoOptimize"] == "true"


def test_create_in_an_empty_folder_works(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    assert _ids(Table.create(str(folder), spark.range(2))) == [0, 1]


CALLS: list[tuple[str, Callable[[Table, Path], Any], str]] = [
    ("Table()", lambda t, p: Table(123), "Table(): uri must be a path or URI string, got int"),
    (
        "Table(spark=)",
        lambda t, p: Table(t.uri, spark="local"),
        "Table(): spark must be a SparkSession or None, got str",
    ),
    (
        "create(df=list)",
        lambda t, p: Table.create(str(p / "n"), [1, 2]),
        "Table.create: df must be a Spark DataFrame or a pyarrow.Table or None, got list",
    ),
    (
        "create(schema=dict)",
        lambda t, p: Table.create(str(p / "n"), schema={"a": "int"}),
        "Table.create: schema must be a pyarrow.Schema or None, got dict",
    ),
    (
        "create(cluster_by=str)",
        lambda t, p: Table.create(str(p / "n"), t.to_df(), cluster_by="id"),
        "Table.create: cluster_by must be a list of strings or None, got str",
    ),
    (
        "create(properties=)",
        lambda t, p: Table.create(str(p / "n"), t.to_df(), properties={"a": 1}),
        "Table.create: properties must map strings to strings, got 'a': int",
    ),
    (
        "create(target_file_size=)",
        lambda t, p: Table.create(str(p / "n"), t.to_df(), target_file_size="1MB"),
        "Table.create: target_file_size must be an int or None, got str",
    ),
    (  # 'false' is truthy: it switched auto-optimize on (an audit)
        "create(auto_optimize=)",
        lambda t, p: Table.create(str(p / "n"), t.to_df(), auto_optimize="false"),
        "Table.create: auto_optimize must be True or False, got str",
    ),
    (
        "append(list)",
        lambda t, p: t.append([{"id": 1}]),
        "Table.append: df must be a Spark DataFrame or a pyarrow.Table, got list",
    ),
    (
        "append(pandas-like)",
        lambda t, p: t.append(t.to_df().toPandas()),
        "Table.append: df must be a Spark DataFrame or a pyarrow.Table, got pandas.DataFrame",
    ),
    ("scan(int)", lambda t, p: t.scan(5), "Table.scan: where must be a string or None, got int"),
    (
        "scan(columns=str)",
        lambda t, p: t.scan("id > 1", columns="id"),
        "Table.scan: columns must be a list of strings or None, got str",
    ),
    (
        "scan(measure=)",
        lambda t, p: t.scan("id > 1", measure="yes"),
        "Table.scan: measure must be True or False, got str",
    ),
    (
        "delete(None)",
        lambda t, p: t.delete(None),
        "Table.delete: where must be a string, got NoneType",
    ),
    (
        "snapshot(str)",
        lambda t, p: t.snapshot("1"),
        "Table.snapshot: version must be an int or None, got str",
    ),
    (
        "to_df(float)",
        lambda t, p: t.to_df(version=1.5),
        "Table.to_df: version must be an int or None, got float",
    ),
    (
        "history(str)",
        lambda t, p: t.history("x"),
        "Table.history: limit must be an int or None, got str",
    ),
    (
        "describe(None)",
        lambda t, p: t.describe(history=None),
        "Table.describe: history must be an int, got NoneType",
    ),
    (
        "cluster_by(str)",
        lambda t, p: t.cluster_by("id"),
        "Table.cluster_by: columns must be a list of strings or None, got str",
    ),
    (
        "optimize.zorder(str)",
        lambda t, p: t.optimize.zorder("id"),
        "optimize.zorder: columns must be a list of strings, got str",
    ),
    (
        "optimize.hilbert([])",
        lambda t, p: t.optimize.hilbert([]),
        "optimize.hilbert needs at least one column to order by",
    ),
    # an audit: these failed with an AttributeError after the rewrite wrote its files,
    # or took the string "no" as True
    (
        "delete(hooks=)",
        lambda t, p: t.delete("id = 1", hooks="x"),
        "Table.delete: hooks must be an OptimizeHooks or None, got str",
    ),
    (
        "delete(retry=)",
        lambda t, p: t.delete("id = 1", retry=5),
        "Table.delete: retry must be a RetryPolicy or None, got int",
    ),
    (
        "optimize.compact(hooks=)",
        lambda t, p: t.optimize.compact(hooks=1),
        "optimize.compact: hooks must be an OptimizeHooks or None, got int",
    ),
    (
        "optimize.zorder(hooks=)",
        lambda t, p: t.optimize.zorder(["id"], hooks=1),
        "optimize.zorder: hooks must be an OptimizeHooks or None, got int",
    ),
    (
        "optimize.auto(apply=)",
        lambda t, p: t.optimize.auto(apply="no"),
        "optimize.auto: apply must be True or False, got str",
    ),
    (
        "advisor.auto(apply=)",
        lambda t, p: t.advisor.auto(apply="no"),
        "advisor.auto: apply must be True or False, got str",
    ),
    (
        "online.wait(str)",
        lambda t, p: t.online.wait("x"),
        "online.wait: timeout must be a number of seconds or None, got str",
    ),
    (
        "online.wait(-1)",
        lambda t, p: t.online.wait(-1),
        "online.wait: timeout must be >= 0 seconds, got -1",
    ),
]


@pytest.mark.parametrize(("label", "call", "message"), CALLS, ids=[c[0] for c in CALLS])
def test_wrong_argument_types_name_the_argument(
    table: Table, tmp_path: Path, label: str, call: Callable[[Table, Path], Any], message: str
) -> None:
    before = table.version
    files = set(os.listdir(table.uri))
    with pytest.raises(InvalidOption) as err:
        call(table, tmp_path)
    assert str(err.value) == message
    assert table.version == before
    assert set(os.listdir(table.uri)) == files  # no data file written
    assert not (tmp_path / "n").exists()


def test_counts_below_their_floor_are_refused_by_name(table: Table) -> None:
    """Not read as "nothing" (describe); more clustering columns than Delta allows."""
    before = table.version
    with pytest.raises(InvalidOption, match=r"at most 4 are allowed"):
        table.cluster_by(["id", "id + 1", "id + 2", "id + 3", "id + 4"])
    with pytest.raises(InvalidOption, match=r"Table\.describe: history must be >= 0, got -1"):
        table.describe(history=-1)
    assert table.version == before


def test_scan_columns_must_name_each_column_once(table: Table) -> None:
    """An empty list read as "no column" and a repeated name gave a DataFrame with no
    columns or two of the same name; both are refused by name."""
    with pytest.raises(InvalidOption, match="columns= is empty"):
        table.scan("id < 3", columns=[])
    with pytest.raises(InvalidOption, match="column 'id' is named twice in columns="):
        table.scan("id < 3", columns=["id", "s", "ID"])
    assert table.scan("id < 3", columns=["S", "id"]).df.columns == ["s", "id"]


def test_optimize_full_needs_a_clustered_table(table: Table) -> None:
    """Delta refuses OPTIMIZE FULL on a table without clustering columns; it was a plain
    compaction here, silently."""
    from typer.testing import CliRunner

    from lakelayout.cli import app

    before = table.version
    with pytest.raises(InvalidOption, match="has no clustering columns"):
        table.optimize.run(full=True)
    result = CliRunner().invoke(app, ["optimize", table.uri, "--full", "--zorder", "id"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: --full re-clusters a clustered table; it does not go with --zorder"
    ]
    assert table.version == before


def test_paths_and_names_spark_would_misread(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Found by an audit: a table in a folder named with glob characters could not be
    scanned (Spark's reader took `[1]` for a pattern: "a data file is missing"); a `%41`
    in a path made delta-rs write the log elsewhere, then "a table already exists"; a
    column named `a.b` could not be selected. delta-rs cannot open a path with `[`: each
    query log flush printed Rust's panic on stderr, and `log` / the advisor showed an
    empty log without saying why (an audit): the scans are not logged, and that is said."""
    import pyarrow as pa

    from lakelayout.advisor import querylog
    from lakelayout.errors import InvalidOption

    for name in ("t[1]", "t{a,b}", "t*?"):
        t = Table.create(str(tmp_path / name), spark.sql("SELECT id FROM range(20)"))
        assert t.scan("id < 5").df.count() == 5, name
        querylog.flush_all()
        assert "panicked" not in capfd.readouterr().err
        off = t.advisor.logging_off()
        assert ("cannot open a path holding '['" in off) == (name == "t[1]"), (name, off)
    with pytest.raises(InvalidOption, match="'%' escape"):
        Table.create(str(tmp_path / "pct%41dir"), pa.table({"id": [1]}))
    assert not (tmp_path / "pct%41dir").exists() and not (tmp_path / "pctAdir").exists()
    dotted = Table.create(
        str(tmp_path / "dots"), spark.sql("SELECT id AS `a.b`, id AS `we``ird` FROM range(3)")
    )
    got = dotted.scan("`a.b` > 0", columns=["a.b", "we`ird"]).df.collect()
    assert sorted(tuple(r) for r in got) == [(1, 1), (2, 2)]


def test_vacuum_bounds_and_a_vacuumed_version(spark: Any, tmp_path: Path) -> None:
    """retain_hours beyond what a date can go back overflowed (a raw OverflowError); a
    version whose files VACUUM removed was reported as a corrupt table."""
    from lakelayout.errors import InvalidOption, TableCorrupt

    t = Table.create(str(tmp_path / "t"), spark.sql("SELECT id FROM range(10)"))
    with pytest.raises(InvalidOption, match="retain_hours must be a whole number"):
        t.vacuum(retain_hours=99_999_999_999_999)
    t.delete("id < 5")
    t.vacuum(retain_hours=0, force=True)
    with pytest.raises(TableCorrupt, match=r"version 0 of .* can no longer be read.*VACUUM"):
        t.scan(version=0)
    assert t.scan().df.count() == 5


def test_a_damaged_data_file_is_named_and_nothing_is_written(spark: Any, tmp_path: Path) -> None:
    """A truncated data file made DELETE raise Spark's Py4JJavaError and OPTIMIZE
    pyarrow's ArrowInvalid (an audit of stop 63 left it open). Now each names the file
    as TableCorrupt, and the table stays at its version."""
    from lakelayout.errors import TableCorrupt

    df = spark.range(300).selectExpr("id", "cast(id % 7 as int) k").repartitionByRange(3, "id")
    t = Table.create(str(tmp_path / "t"), df)
    damaged = sorted(t.snapshot().files.paths)[0]
    with open(tmp_path / "t" / damaged, "r+b") as handle:
        handle.truncate(os.path.getsize(tmp_path / "t" / damaged) // 2)
    for verb in (
        lambda: t.scan("id < 5", measure=True),  # the measuring job (a review)
        lambda: t.delete("id < 5"),  # Spark's reader (plain files)
        lambda: t.optimize.zorder(["k"]),  # pyarrow on the driver (the sample)
        lambda: t.optimize.run(),  # pyarrow in the Spark tasks (compaction)
    ):
        with pytest.raises(TableCorrupt, match=os.path.basename(damaged).split("-c000")[0]):
            verb()
        assert t.history(1)[0]["version"] == 0


def test_a_column_named_like_an_internal_one_is_refused_before_it_is_overwritten(
    spark: Any, tmp_path: Path
) -> None:
    """A user column ``__ll_file`` was dropped by scan(measure=True), decided which files
    DELETE rewrote, and had its values replaced by file names in rewrites (an audit).
    Such names are refused at create; a table another writer made with one is read, and
    every verb that adds lakelayout's columns to its rows refuses it first."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakelayout.errors import UnsupportedTable

    data = pa.table({"id": list(range(20)), "__LL_file": [f"v{i}" for i in range(20)]})
    with pytest.raises(SchemaMismatch, match="column '__LL_file': names starting with '__ll_'"):
        Table.create(str(tmp_path / "ours"), data)
    assert not (tmp_path / "ours").exists()
    path = str(tmp_path / "theirs")
    write_deltalake(path, data)
    t = Table(path, spark=spark)
    assert t.scan("`__LL_file` = 'v3'").df.count() == 1  # a plain read keeps the column
    for verb in (
        lambda: t.scan("`__LL_file` = 'v3'", measure=True),
        lambda: t.delete("`__LL_file` = 'v3'"),
        lambda: t.optimize.zorder(["id"]),
    ):
        with pytest.raises(UnsupportedTable, match="column '__LL_file' starts with '__ll_'"):
            verb()
    rows = spark.read.format("delta").load(path).collect()
    assert t.version == 0 and sorted(r["__LL_file"] for r in rows) == sorted(
        data["__LL_file"].to_pylist()
    )


def test_odd_column_names_and_a_bad_size_property(spark: Any, tmp_path: Path) -> None:
    """From an audit of table shapes: a column named _metadata hid Spark's file metadata
    (measured scans and DELETE raised AnalysisException); cluster_by([' lead']) stripped
    the name and refused it as unknown; lakelayout.targetFileSize='abc' raised int()'s
    ValueError."""
    import pyarrow as pa

    data = pa.table({"id": list(range(100)), "_metadata": [f"m{i}" for i in range(100)]})
    t = Table.create(str(tmp_path / "meta"), data)
    assert t.scan("id < 10", measure=True).df.count() == 10
    m = t.delete("id % 5 = 0")
    assert m.rows_removed - m.rows_added == 20
    left = spark.read.format("delta").load(t.uri)
    assert left.count() == 80 and left.where("_metadata = concat('m', id)").count() == 80

    spaced = Table.create(
        str(tmp_path / "spaced"), pa.table({" lead": [3, 1, 2], "lead2": [1, 2, 3]})
    )
    spaced.cluster_by([" lead"])
    assert spaced.clustering_columns == [" lead"]
    assert spaced.optimize.run(full=True).rows_added == 3

    with pytest.raises(
        InvalidOption, match=r"lakelayout\.targetFileSize must be a number of bytes"
    ):
        Table.create(str(tmp_path / "size"), data, properties={"lakelayout.targetFileSize": "abc"})
    assert not (tmp_path / "size").exists()


def test_table_properties_are_known_names_with_good_values_at_create(tmp_path: Path) -> None:
    """An unknown lakelayout.* name was stored and ignored (tragetFileSize left the default
    in force) and bad sizes were refused only by the first OPTIMIZE (an audit)."""
    import re

    import pyarrow as pa

    from lakelayout.cluster.config import KNOWN_PROPERTIES
    from lakelayout.errors import LakelayoutError

    data = pa.table({"id": [1, 2]})
    for properties, message in (
        ({"lakelayout.tragetFileSize": "1024"}, "unknown table property 'lakelayout.tragetFileSize'. Did you mean 'lakelayout.targetFileSize'?"),
        ({"lakelayout.minCubeSize": "-1"}, "lakelayout.minCubeSize must be positive, got -1"),
        ({"lakelayout.minFileSize": "zz"}, "lakelayout.minFileSize must be a number of bytes, got 'zz'"),
        ({"lakelayout.smallRewriteSize": "0"}, "lakelayout.smallRewriteSize must be positive, got 0"),
        ({"lakelayout.clusteringColumns": '["g"]'}, "cannot cluster by 'g'"),
        ({"lakelayout.clusteringColumns": "g"}, "lakelayout.clusteringColumns is not JSON"),
    ):  # fmt: skip
        with pytest.raises(LakelayoutError) as err:
            Table.create(str(tmp_path / "t"), data, properties=properties)
        assert message in str(err.value)
        assert not (tmp_path / "t").exists()
    # the list holds every property name the package spells
    source = Path(__file__).parents[1] / "src" / "lakelayout"
    pattern = r'"(lakelayout\.(?:[a-z]+[A-Z][A-Za-z]*|online)(?:\.[a-z][A-Za-z]*)?)"'
    spelled = {n for f in source.rglob("*.py") for n in re.findall(pattern, f.read_text())}
    assert len(spelled) >= 12 and spelled <= KNOWN_PROPERTIES, spelled - KNOWN_PROPERTIES
    ok = Table.create(str(tmp_path / "ok"), data, properties={"lakelayout.minFileSize": "100"})
    assert ok.version == 1 and ok.properties["lakelayout.minFileSize"] == "100"


def test_the_history_of_a_table_whose_path_holds_a_hash(tmp_path: Path) -> None:
    """delta-rs reads a '#' in a path as a URL fragment and returned an empty history:
    describe() showed none and a bad version's error named no oldest version (an audit)."""
    import pyarrow as pa

    t = Table.create(str(tmp_path / "h#x"), pa.table({"a": [1, 2]}))
    t.append(pa.table({"a": [3]}))
    assert [h["version"] for h in t.history()] == [t.version, t.version - 1]
