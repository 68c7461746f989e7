"""Errors that stay ours (issue 10, part 5), on real Spark and Delta tables.

Each is a LakelayoutError subclass with a message naming the problem, raised
before anything is committed; the tests compare the messages and check that
the table (or folder) is as it was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lakelayout import LocationNotEmpty, SchemaMismatch, TableExists
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


def test_create_in_an_empty_folder_works(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    assert _ids(Table.create(str(folder), spark.range(2))) == [0, 1]
