"""``read_table_files``: the rows of a set of live files as a Spark DataFrame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakelayout.api import Table
from lakelayout.table.reader import FILE_COLUMN, read_table_files

from .test_writer import _input_table

pytestmark = pytest.mark.spark


def test_no_files_give_an_empty_frame_of_the_table_s_schema_as_a_local_relation(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = Table.create(str(tmp_path / "t"), _input_table(500))
    snap = t.snapshot()
    every = read_table_files(
        spark,
        t.uri,
        snap.table_format,
        snap.data_files_for([str(p) for p in snap.files.paths]),
        with_file=True,
    )
    for with_file in (False, True):
        empty = read_table_files(spark, t.uri, snap.table_format, [], with_file=with_file)
        expected = every.schema if with_file else every.drop(FILE_COLUMN).schema
        assert [(f.name, f.dataType) for f in empty.schema.fields] == [
            (f.name, f.dataType) for f in expected.fields
        ]
        assert empty.count() == 0
        empty.explain()  # a local relation, not an RDD of Python rows
        assert "LocalTableScan" in capsys.readouterr().out
    # through a scan whose predicate keeps no file
    result = t.scan("id IS NULL")
    assert result.report.files_kept == 0
    assert result.df.collect() == []
