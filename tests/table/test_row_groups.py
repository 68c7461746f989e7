"""Files with several row groups and page indexes: every reader sees the same rows.

lakelayout writes row groups of ``lakelayout.rowGroupSize`` Arrow bytes and
Parquet page indexes so that Spark's reader can skip inside a file. These
tests check what could go wrong with that: a reader that mishandles several
row groups or the page index (rows lost or doubled), Delta statistics that
stop covering every row, and Spark's own row-group / page skipping dropping a
matching row (float columns carry no statistics, so NaN rows survive).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakelayout.api import Table
from lakelayout.errors import InvalidOption
from lakelayout.table.writer import PARQUET_CODEC, ROW_GROUP_SIZE

pytestmark = pytest.mark.spark

#: small row groups so a small table has several per file
ROW_GROUP_BYTES = 64 * 1024


def _data(spark: Any, n: int) -> Any:
    from pyspark.sql import functions as F

    return (
        spark.range(n)
        .select(
            F.col("id"),
            (F.rand(3) * 1000).cast("int").alias("a"),
            F.when(F.rand(4) < 0.05, F.lit(float("nan")))
            .when(F.rand(5) < 0.05, None)
            .otherwise(F.rand(6) * 10)
            .alias("f"),
            F.concat(F.lit("s"), (F.col("id") % 997).cast("string")).alias("s"),
        )
        .repartition(2)
    )


def _by_id(table: pa.Table) -> pa.Table:
    table = table.select(["id", "a", "f", "s"])
    return table.take(pc.sort_indices(table, [("id", "ascending")]))


def _check_files(t: Table, expected: pa.Table) -> None:
    """Several row groups per file, page indexes but none on floats, stats cover every row."""
    import deltalake

    actions = pa.table(deltalake.DeltaTable(t.uri).get_add_actions(flatten=True)).to_pydict()
    several = 0
    for i, path in enumerate(actions["path"]):
        parquet = pq.ParquetFile(os.path.join(t.uri, path))
        meta = parquet.metadata
        several += meta.num_row_groups > 1
        for g in range(meta.num_row_groups):
            columns = {
                meta.row_group(g).column(j).path_in_schema: meta.row_group(g).column(j)
                for j in range(meta.num_columns)
            }
            assert columns["a"].has_column_index and columns["a"].has_offset_index
            assert not columns["f"].has_column_index and not columns["f"].is_stats_set
        data = parquet.read()
        assert actions["num_records"][i] == data.num_rows
        for c in ("id", "a"):  # Delta stats bound every row of the file
            assert actions[f"min.{c}"][i] <= pc.min(data.column(c)).as_py()
            assert actions[f"max.{c}"][i] >= pc.max(data.column(c)).as_py()
    assert several >= 1
    assert sum(actions["num_records"]) == expected.num_rows


def _same_everywhere(spark: Any, t: Table, expected: pa.Table) -> None:
    """deltalake, polars and Spark read the rows of ``expected``, no more, no fewer."""
    import deltalake
    import polars as pl

    by_delta = _by_id(deltalake.DeltaTable(t.uri).to_pyarrow_table())
    files = [os.path.join(t.uri, p) for p in deltalake.DeltaTable(t.uri).file_uris()]
    by_polars = _by_id(pl.read_parquet(files).to_arrow())
    by_spark = _by_id(t.to_df().toArrow())
    for got in (by_delta, by_polars, by_spark):
        assert got.num_rows == expected.num_rows
        for name in expected.column_names:  # NaN == NaN here: compare the raw values
            left = got.column(name).combine_chunks().cast(expected.schema.field(name).type)
            right = expected.column(name).combine_chunks()
            assert left.is_null().equals(right.is_null()), name
            valid = pc.invert(right.is_null())
            lv, rv = pc.filter(left, valid).to_pylist(), pc.filter(right, valid).to_pylist()
            assert [repr(v) for v in lv] == [repr(v) for v in rv], name


def _spark_filters_keep_every_match(t: Table, expected: pa.Table) -> None:
    """Spark's own row-group and page skipping never drops a matching row."""
    a = expected.column("a").to_numpy(zero_copy_only=False)
    f = expected.column("f").to_numpy(zero_copy_only=False)  # NULL -> NaN here
    f_nulls = expected.column("f").is_null().to_numpy(zero_copy_only=False)
    df = t.to_df()
    assert df.where("a < 50").count() == int((a < 50).sum())
    assert df.where("a BETWEEN 500 AND 520").count() == int(((a >= 500) & (a <= 520)).sum())
    # Spark orders NaN above every number: f >= 5 holds for NaN rows
    expected_f = int((~f_nulls & ((f >= 5) | np.isnan(f))).sum())
    assert df.where("f >= 5").count() == expected_f


def test_files_with_row_groups_and_page_indexes_read_alike(spark: Any, tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        _data(spark, 40_000),
        target_file_size=4 * 1024 * 1024,
        properties={ROW_GROUP_SIZE: str(ROW_GROUP_BYTES)},
    )
    expected = _by_id(t.to_df().toArrow())
    assert expected.num_rows == 40_000 and expected.column("id").to_pylist() == list(range(40_000))
    _check_files(t, expected)
    _same_everywhere(spark, t, expected)
    _spark_filters_keep_every_match(t, expected)

    # a rewrite orders rows by the curve key inside each file: still the same rows
    t.optimize.zorder(["a", "s"])
    _check_files(t, expected)
    _same_everywhere(spark, t, expected)
    _spark_filters_keep_every_match(t, expected)


def test_row_group_size_property_is_checked_before_writing(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match=r"lakelayout\.rowGroupSize must be a positive"):
        Table.create(str(tmp_path / "t"), _data(spark, 10), properties={ROW_GROUP_SIZE: "0"})
    assert not (tmp_path / "t" / "_delta_log").exists()


def _codecs(t: Table) -> set[str]:
    """The Parquet codecs of every column chunk of the table's live files."""
    import deltalake

    found = set()
    for path in deltalake.DeltaTable(t.uri).file_uris():
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            for j in range(meta.num_columns):
                found.add(meta.row_group(g).column(j).compression)
    return found


def test_parquet_codec_property_reaches_every_file_written(spark: Any, tmp_path: Path) -> None:
    """Create, append, a layout rewrite and DELETE's rewritten files all use the table's codec."""
    from pyspark.sql import functions as F

    t = Table.create(
        str(tmp_path / "t"),
        _data(spark, 6_000),
        target_file_size=64 * 1024,
        properties={PARQUET_CODEC: "Snappy"},
    )
    assert _codecs(t) == {"SNAPPY"}
    t.append(_data(spark, 2_000).withColumn("id", F.col("id") + 6_000))
    assert _codecs(t) == {"SNAPPY"}
    expected = _by_id(t.to_df().toArrow())
    assert expected.column("id").to_pylist() == list(range(8_000))
    t.optimize.zorder(["a", "s"])
    assert _codecs(t) == {"SNAPPY"}
    _same_everywhere(spark, t, expected)

    metrics = t.delete("id % 7 = 0")
    assert metrics.files_added > 0  # files with survivors were rewritten
    assert metrics.rows_removed - metrics.rows_added == len(range(0, 8_000, 7))
    assert _codecs(t) == {"SNAPPY"}
    ids = expected.column("id").to_numpy()
    survivors = expected.filter(pa.array(ids % 7 != 0))
    _same_everywhere(spark, t, survivors)

    # the default stays zstd
    plain = Table.create(str(tmp_path / "z"), _data(spark, 500))
    assert _codecs(plain) == {"ZSTD"}


@pytest.mark.parametrize("with_rows", [True, False])
def test_parquet_codec_property_is_checked_before_writing(
    spark: Any, tmp_path: Path, with_rows: bool
) -> None:
    data = _data(spark, 10)
    source = {"df": data} if with_rows else {"schema": pa.schema([("id", pa.int64())])}
    with pytest.raises(InvalidOption, match=r"lakelayout\.parquetCodec must be one of .*'lzo'"):
        Table.create(str(tmp_path / "t"), properties={PARQUET_CODEC: "lzo"}, **source)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_bad_codec_set_after_creation_refuses_the_append(spark: Any, tmp_path: Path) -> None:
    """A property set by another writer (Delta's SET TBLPROPERTIES) is checked before writing."""
    from lakelayout.table import delta

    t = Table.create(str(tmp_path / "t"), _data(spark, 100))
    delta.set_properties(t.uri, {PARQUET_CODEC: "brotli"})
    before = sorted(p.name for p in (tmp_path / "t").iterdir())
    with pytest.raises(InvalidOption, match=r"lakelayout\.parquetCodec.*'brotli'"):
        t.append(_data(spark, 10))
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == before
    assert t.to_df().count() == 100
