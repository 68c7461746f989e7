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
