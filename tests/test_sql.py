"""The SQL surface: CREATE ... CLUSTER BY, CREATE LIKE, ALTER, OPTIMIZE, DESCRIBE DETAIL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakelayout
from lakelayout.api import Table
from lakelayout.errors import InvalidOption, TableNotFound


@pytest.mark.spark
def test_sql_surface(spark: Any, tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    events = str(tmp_path / "events")
    t = lakelayout.sql(
        spark,
        "CREATE TABLE events (a INT, region STRING, ts TIMESTAMP) USING delta "
        f"CLUSTER BY (ts, month(ts), region) LOCATION '{events}'",
        warehouse=wh,
    )
    assert isinstance(t, Table) and t.uri == events
    assert t.clustering_columns == ["ts", "MONTH(ts)", "region"]

    like = lakelayout.sql(spark, "CREATE TABLE events2 LIKE events;", warehouse=wh)
    assert like.uri == str(Path(wh).absolute() / "events2")
    assert like.schema.names == ["a", "region", "ts"]
    detail = lakelayout.sql(spark, "DESCRIBE DETAIL events2", warehouse=wh)
    assert detail.clustering_columns == ["ts", "MONTH(ts)", "region"]

    lakelayout.sql(spark, "ALTER TABLE events CLUSTER BY (region)", warehouse=wh)
    assert Table(events).clustering_columns == ["region"]
    lakelayout.sql(spark, "alter table events cluster by none", warehouse=wh)
    assert Table(events).clustering_columns is None

    with pytest.raises(InvalidOption, match="too many clustering columns"):
        lakelayout.sql(
            spark, "ALTER TABLE events CLUSTER BY (a, region, ts, month(ts), day(ts))", warehouse=wh
        )
    with pytest.raises(InvalidOption, match="not allowed on a clustered table"):
        lakelayout.sql(spark, "OPTIMIZE events2 ZORDER BY (a)", warehouse=wh)
    with pytest.raises(InvalidOption, match="unsupported statement 'DROP TABLE events'"):
        lakelayout.sql(spark, "DROP TABLE events", warehouse=wh)
    with pytest.raises(TableNotFound, match="Did you mean 'events'"):
        lakelayout.sql(spark, "OPTIMIZE event", warehouse=wh)

    plain = lakelayout.sql(spark, "CREATE TABLE plain (a INT, b INT) USING delta", warehouse=wh)
    plain.append(spark.range(2000).selectExpr("cast(id % 97 as int) a", "cast(id % 13 as int) b"))
    m = lakelayout.sql(spark, f"OPTIMIZE delta.`{plain.uri}` ZORDER BY (a, b)", warehouse=wh)
    assert m.operation == "zorder" and m.rows_added == 2000
    m = lakelayout.sql(spark, "OPTIMIZE events", warehouse=wh)
    assert m.operation == "compaction" and m.commits == 0
    # Delta's grammar: ZORDER BY without parentheses, and comments between clauses (both
    # were refused as unsupported statements)
    m = lakelayout.sql(
        spark,
        "-- nightly\nOPTIMIZE plain /* all of it */ ZORDER BY b, a -- two columns\n;",
        warehouse=wh,
    )
    assert m.operation == "zorder" and m.rows_added == 2000
    rows = lakelayout.sql(
        spark, "SELECT a FROM plain WHERE b = 3 /* or 4 */ -- and a comment", warehouse=wh
    )
    assert rows.count() == 154  # ids 3, 16, ..., 1992


def test_create_never_moves_a_name_the_catalog_holds(spark: Any, tmp_path: Path) -> None:
    """CREATE TABLE IF NOT EXISTS of a name the catalog holds (at a LOCATION other than the
    default) made a new empty table and pointed the name at it; CREATE without IF NOT
    EXISTS moved the name too (found by an audit). Now: nothing, and TableExists."""
    import pyarrow as pa

    from lakelayout.errors import TableExists

    wh = str(tmp_path / "wh")
    custom = str(tmp_path / "custom")
    t = lakelayout.sql(
        spark, f"CREATE TABLE events (a INT, b STRING) USING delta LOCATION '{custom}'",
        warehouse=wh,
    )  # fmt: skip
    t.append(pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}))
    again = lakelayout.sql(
        spark, "CREATE TABLE IF NOT EXISTS events (a INT, b STRING) USING delta", warehouse=wh
    )
    assert again.uri == t.uri and again.snapshot().files.total_rows == 2
    with pytest.raises(TableExists, match="'events' already exists"):
        lakelayout.sql(
            spark, f"CREATE TABLE events (z DOUBLE) USING delta LOCATION '{tmp_path / 'o'}'",
            warehouse=wh,
        )  # fmt: skip
    with pytest.raises(TableExists, match="'events' already exists"):
        lakelayout.sql(spark, "CREATE TABLE events LIKE events", warehouse=wh)
    assert not (tmp_path / "o").exists() and not (tmp_path / "wh" / "events").exists()
    rows = lakelayout.sql(spark, "SELECT * FROM events", warehouse=wh)
    assert sorted(r["a"] for r in rows.collect()) == [1, 2]


def test_partitions_clause_order_and_quoted_names(spark: Any, tmp_path: Path) -> None:
    """PARTITIONED BY is taken and carried by CREATE LIKE (LIKE made an unpartitioned
    copy), clauses come in any order, and SELECT takes backtick-quoted names (it refused
    them)."""
    import pyarrow as pa

    wh = str(tmp_path / "wh")
    where = str(tmp_path / "p")
    t = lakelayout.sql(
        spark,
        f"CREATE TABLE p (`my id` INT, day STRING, k INT) USING delta LOCATION '{where}' "
        "PARTITIONED BY (`day`)",
        warehouse=wh,
    )
    assert t.snapshot().table_format.partition_columns == ("day",)
    t.append(pa.table({"my id": pa.array([1, 2, 3], pa.int32()), "day": ["a", "b", "a"],
                       "k": pa.array([7, 8, 9], pa.int32())}))  # fmt: skip
    like = lakelayout.sql(spark, "CREATE TABLE q LIKE p", warehouse=wh)
    assert like.snapshot().table_format.partition_columns == ("day",)
    rows = lakelayout.sql(spark, "SELECT `my id`, k FROM p WHERE day = 'a'", warehouse=wh)
    assert rows.columns == ["my id", "k"]
    assert sorted((r["my id"], r["k"]) for r in rows.collect()) == [(1, 7), (3, 9)]
    # time travel: the version before the rows came (VERSION AS OF, or Delta's @n)
    appended = t.version
    t.append(pa.table({"my id": pa.array([4], pa.int32()), "day": ["a"],
                       "k": pa.array([10], pa.int32())}))  # fmt: skip
    for text in (f"SELECT k FROM p VERSION AS OF {appended} WHERE day = 'a'",
                 f"SELECT k FROM p@v{appended} WHERE day = 'a'"):  # fmt: skip
        assert sorted(r.k for r in lakelayout.sql(spark, text, warehouse=wh).collect()) == [7, 9]
    now = lakelayout.sql(spark, "SELECT k FROM p WHERE day = 'a'", warehouse=wh)
    assert sorted(r.k for r in now.collect()) == [7, 9, 10]
    for stamped in ("p TIMESTAMP AS OF '2026-01-01'", "p@20260101000000000"):  # Delta's forms
        with pytest.raises(InvalidOption, match=r"TIMESTAMP AS OF .* is not supported"):
            lakelayout.sql(spark, f"SELECT * FROM {stamped}", warehouse=wh)

    c = lakelayout.sql(
        spark,
        f"CREATE TABLE c (a INT, s STRING) USING delta LOCATION '{tmp_path / 'c'}' "
        "CLUSTER BY (a, lower(substring(s, 1, 2)))",
        warehouse=wh,
    )
    assert c.clustering_columns is not None and len(c.clustering_columns) == 2
    with pytest.raises(InvalidOption, match="repeats its LOCATION"):
        lakelayout.sql(
            spark, "CREATE TABLE d (a INT) USING delta LOCATION '/x' LOCATION '/y'", warehouse=wh
        )
    with pytest.raises(InvalidOption, match="unsupported CREATE TABLE clause"):
        lakelayout.sql(spark, "CREATE TABLE d (a INT) USING delta COMMENT 'x'", warehouse=wh)
    with pytest.raises(InvalidOption, match=r"SELECT .*a \+ 1"):
        lakelayout.sql(spark, "SELECT a + 1 FROM c", warehouse=wh)
    with pytest.raises(InvalidOption, match="partitioned"):
        lakelayout.sql(
            spark, "CREATE TABLE e (a INT, b INT) USING delta PARTITIONED BY (b) CLUSTER BY (a)",
            warehouse=wh,
        )  # fmt: skip
    assert not (Path(wh) / "d").exists() and not (Path(wh) / "e").exists()


@pytest.mark.spark
def test_select_distinct_and_create_refusals(spark: Any, tmp_path: Path) -> None:
    """Found by an audit: SELECT DISTINCT returned every row (the quantifier was dropped);
    CREATE TABLE turned a VARIANT column into a struct and dropped a column comment
    silently, and refused CHAR/VARCHAR with a Py4J message; duplicate columns and
    INTERVAL raised delta-rs's bare Exception."""
    from lakelayout.errors import SchemaMismatch

    wh = str(tmp_path / "wh")
    path = str(tmp_path / "t")
    Table.create(path, spark.sql("SELECT id, CAST(id % 3 AS INT) AS k FROM range(30)"))
    distinct = lakelayout.sql(spark, f"SELECT DISTINCT k FROM delta.`{path}`", warehouse=wh)
    assert sorted(r.k for r in distinct.collect()) == [0, 1, 2]
    every = lakelayout.sql(spark, f"SELECT ALL k FROM delta.`{path}` WHERE id < 5", warehouse=wh)
    assert sorted(r.k for r in every.collect()) == [0, 0, 1, 1, 2]
    refused = {
        "v VARIANT": (SchemaMismatch, "lakelayout cannot write VARIANT"),
        "a INT COMMENT 'the key'": (InvalidOption, "column comments"),
        "s VARCHAR(5)": (InvalidOption, "CHAR/VARCHAR columns"),
        "a INT, A BIGINT": (SchemaMismatch, "'a' and 'A'"),
        "i INTERVAL DAY": (SchemaMismatch, "column 'i'"),
    }
    for n, (columns, (error, message)) in enumerate(refused.items()):
        where = tmp_path / f"c{n}"
        with pytest.raises(error, match=message):
            lakelayout.sql(
                spark, f"CREATE TABLE c{n} ({columns}) USING delta LOCATION '{where}'", warehouse=wh
            )
        assert not where.exists()
    # a column named `comment` is a column
    named = tmp_path / "named"
    lakelayout.sql(
        spark, f"CREATE TABLE named (`comment` STRING) USING delta LOCATION '{named}'", warehouse=wh
    )
    assert Table(str(named)).schema.names == ["comment"]


def test_if_not_exists_on_a_folder_holding_files_fails_at_once(spark: Any, tmp_path: Path) -> None:
    """CREATE TABLE IF NOT EXISTS at a LOCATION holding files but no table waited 60 s for
    a create race and then blamed another writer (a review): LocationNotEmpty at once."""
    import time

    from lakelayout.errors import LocationNotEmpty

    data = tmp_path / "data"
    data.mkdir()
    (data / "part-0.parquet").write_bytes(b"x")
    started = time.monotonic()
    with pytest.raises(LocationNotEmpty, match=r"part-0\.parquet"):
        lakelayout.sql(
            spark,
            f"CREATE TABLE IF NOT EXISTS t (a INT) USING delta LOCATION '{data}'",
            warehouse=str(tmp_path / "wh"),
        )
    assert time.monotonic() - started < 30


def test_select_lexes_comments_and_strings_as_spark_does(spark: Any, tmp_path: Path) -> None:
    """Comments were cut by a pattern: a raw string ``r'a\\'`` made it remove a ``/*...*/``
    inside a real string, and nested comments ended at the first ``*/`` (wrong rows both;
    an audit). ``WHERE(`` without a space was an unsupported statement. Each statement
    returns Spark SQL's rows for the same text."""
    import pyarrow as pa

    path = str(tmp_path / "t")
    Table.create(path, pa.table({"n": list(range(20)), "s": ["a\\", "/*y*/", " ", "x"] * 5}))
    wh = tmp_path / "wh"
    statements = [
        f"SELECT * FROM delta.`{path}` WHERE s = r'a\\' OR s = '/*y*/'",
        f"SELECT * FROM delta.`{path}` WHERE n < 3 /* old: /* v1 */ OR n > 15 "
        "OR CAST(n AS STRING) = '*/ -- '",
        f"SELECT * FROM delta.`{path}` WHERE n < 3 /* disabled /* v1 */ OR n > 15 */",
        f"SELECT * FROM delta.`{path}` WHERE(n < 5) -- a line \\\n comment goes on",
        f"SELECT * FROM delta.`{path}` WHERE s = 'it\\'s /* not */' OR n = 7",
    ]
    for statement in statements:
        want = sorted(tuple(r) for r in spark.sql(statement).collect())
        got = sorted(tuple(r) for r in lakelayout.sql(spark, statement, warehouse=wh).collect())
        assert got == want and want, statement
    with pytest.raises(InvalidOption, match="unclosed comment"):
        lakelayout.sql(spark, f"SELECT * FROM delta.`{path}` WHERE n < 3 /* /* */", warehouse=wh)
    with pytest.raises(InvalidOption, match=r"unsupported SELECT .*no table alias"):
        lakelayout.sql(spark, f"SELECT * FROM delta.`{path}` AS x WHERE n < 3", warehouse=wh)
