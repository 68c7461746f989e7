"""Regressions, real Spark and Delta: NaN rows are neither lost by scans nor missed by DELETE.

Spark orders NaN above every number, but its Parquet reader prunes row
groups with min/max statistics that parquet-cpp computes leaving NaN out: a
row group holding 0.5 and NaN was dropped for ``f >= 1``. Found by the
differential DELETE property (``f32 >= CAST('Infinity' AS DOUBLE)`` left the
NaN rows Spark deletes). lakelayout's files carry no Parquet statistics for
floating-point columns (its own Delta statistics do the pruning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelayout.api import Table

pytestmark = pytest.mark.spark

NAN = float("nan")


@pytest.fixture(params=[pa.float32(), pa.float64()], ids=["float", "double"])
def table(request: Any, spark: Any, tmp_path: Path) -> Table:
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "f": pa.array([0.5, NAN, 0.25], request.param),
            "n": pa.array([1.0, 2.0, 3.0], request.param),
        }
    )
    return Table.create(str(tmp_path / "t"), spark.createDataFrame(data).coalesce(1))


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def test_files_have_no_float_parquet_statistics(table: Table) -> None:
    (path,) = table.snapshot().files.paths
    meta = pq.ParquetFile(f"{table.uri}/{path}").metadata.row_group(0)
    stats = {meta.column(i).path_in_schema: meta.column(i).is_stats_set for i in range(3)}
    assert stats == {"id": True, "f": False, "n": False}


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("f >= 1", [2]),
        ("f > CAST('Infinity' AS DOUBLE)", [2]),
        ("f = CAST('NaN' AS DOUBLE)", [2]),
        ("f < 1", [1, 3]),
    ],
)
def test_scan_keeps_nan_rows(table: Table, where: str, ids: list[int]) -> None:
    assert _ids(table.scan(where).df) == ids


def test_delete_removes_the_nan_rows_spark_matches(table: Table) -> None:
    table.delete("f >= CAST('Infinity' AS DOUBLE)")
    assert _ids(table.to_df()) == [1, 3]


def test_delete_keeps_the_nan_rows_spark_does_not_match(table: Table) -> None:
    table.delete("f < 1")
    assert _ids(table.to_df()) == [2]


# Negative zero: Spark's Parquet dictionary filter compares floats bit by bit, so
# ``z = 0.0`` dropped a dictionary-encoded row group whose only small value was
# -0.0, which SQL's ``=`` matches (found by the DELETE property: ``f32 = 0.0D``
# deleted nothing). Floating-point columns are written without dictionaries.


@pytest.fixture(params=[pa.float32(), pa.float64()], ids=["float", "double"])
def zeros(request: Any, spark: Any, tmp_path: Path) -> Table:
    data = pa.table(
        {"id": pa.array([1, 2], pa.int32()), "z": pa.array([3.4e38, -0.0], request.param)}
    )
    return Table.create(str(tmp_path / "z"), spark.createDataFrame(data).coalesce(1))


def test_float_columns_are_not_dictionary_encoded(zeros: Table) -> None:
    (path,) = zeros.snapshot().files.paths
    meta = pq.ParquetFile(f"{zeros.uri}/{path}").metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(2)}
    assert not any("DICTIONARY" in e for e in encodings["z"]), encodings


@pytest.mark.parametrize("where", ["z = 0.0D", "z = 0.0", "z IN (0.0D, 5.0D)"])
def test_scan_and_delete_match_negative_zero(zeros: Table, where: str) -> None:
    assert _ids(zeros.scan(where).df) == [2]
    zeros.delete(where)
    assert _ids(zeros.to_df()) == [1]
