"""The append trigger reads the table again only when auto-optimize is on (no Spark:
the table is written from Arrow, its log then removed so any read of it fails loudly)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from lakelayout.advisor.advisor import AUTO_OPTIMIZE, after_append
from lakelayout.api import Table


def _unreadable_table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), pa.table({"id": pa.array(range(10), pa.int64())}))
    shutil.rmtree(tmp_path / "t" / "_delta_log")
    return t


def test_off_in_the_appends_configuration_reads_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = _unreadable_table(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lakelayout"):
        assert after_append(t, 3, {}) is None
        assert after_append(t, 3, {AUTO_OPTIMIZE: "false"}) is None
        assert after_append(t, 0, {AUTO_OPTIMIZE: "true"}) is None  # nothing appended
    assert not caplog.records


@pytest.mark.parametrize("configuration", [None, {AUTO_OPTIMIZE: " TRUE "}])
def test_on_or_unknown_reads_the_committed_table_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, configuration: dict[str, str] | None
) -> None:
    t = _unreadable_table(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lakelayout"):
        assert after_append(t, 3, configuration) is None
    assert any("after an append" in r.getMessage() for r in caplog.records)


def test_a_bad_min_bytes_another_tool_set_is_named_by_the_trigger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its warning said only "invalid literal for int() with base 10: 'abc'" (an audit)."""
    from lakelayout.advisor.advisor import AUTO_MIN_BYTES
    from lakelayout.table import delta

    t = Table.create(str(tmp_path / "t"), pa.table({"id": pa.array(range(10), pa.int64())}))
    delta.set_properties(t.uri, {AUTO_OPTIMIZE: "true", AUTO_MIN_BYTES: "abc"})
    with caplog.at_level(logging.WARNING, logger="lakelayout"):
        assert after_append(t, 1, None) is None
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.endswith(
        f"after an append: table property {AUTO_MIN_BYTES} must be a whole number of bytes "
        ">= 0, got 'abc'"
    )
