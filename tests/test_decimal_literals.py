"""Regressions, end to end on real Spark and Delta: literals beyond 28 significant digits.

Issue 10, part 1: ``dec >= -12345678901.123456789012345678`` deleted every row
of a DECIMAL(38, 18) table where Spark matches none, and the equality scan
skipped the file holding the matching row. The negated literal had been
rounded by Python's default decimal context (28 digits) before binding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakelayout.api import Table

pytestmark = pytest.mark.spark

NEAR = "-12345678901.123456789012345678"
STORED = "-12345678901.123456789012345679"


def _table(spark: Any, path: Path, value: str) -> Table:
    df = spark.sql(f"select id, cast({value} as decimal(38,18)) dec from range(3)")
    return Table.create(str(path), df.coalesce(1))


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def test_delete_with_a_29_digit_literal_keeps_rows_spark_keeps(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    t = _table(spark, tmp_path / "t", STORED)
    where = f"dec >= {NEAR}"
    spark_keeps = t.to_df().where(~F.coalesce(F.expr(where), F.lit(False)))
    assert _ids(spark_keeps) == [0, 1, 2]  # -...679 < -...678: no row matches
    t.delete(where)
    assert _ids(t.to_df()) == [0, 1, 2]


def test_delete_with_a_29_digit_literal_removes_rows_spark_removes(
    spark: Any, tmp_path: Path
) -> None:
    t = _table(spark, tmp_path / "t", STORED)
    t.delete(f"dec <= {STORED}")
    assert _ids(t.to_df()) == []


def test_scan_equal_to_a_29_digit_literal_reads_the_matching_file(
    spark: Any, tmp_path: Path
) -> None:
    t = _table(spark, tmp_path / "t", NEAR)
    result = t.scan(f"dec = {NEAR}")
    assert _ids(result.df) == [0, 1, 2]
    assert result.report.files_kept == 1
    assert _ids(t.scan(f"dec = {STORED}").df) == []
