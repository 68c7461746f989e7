"""The key a kept snapshot is reused on: the newest commit of the table's log."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from lakelayout.table.delta import latest_commit


def test_latest_commit_moves_with_every_commit(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    assert latest_commit(uri) is None  # no table yet: nothing to key on
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}))
    first = latest_commit(uri)
    assert first is not None and first[0] == 0
    assert latest_commit(uri) == first  # no commit, same key
    write_deltalake(uri, pa.table({"a": [4]}), mode="append")
    second = latest_commit(uri)
    assert second is not None and second[0] == 1
    assert latest_commit("file://" + uri) is not None
    assert latest_commit("s3://bucket/t") is None  # not local: the log is read every time
