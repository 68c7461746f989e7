"""The clustering sidecar read while another process replaces it (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelayout.cluster.provenance import READ_ATTEMPTS, FileProvenance, ProvenanceStore
from lakelayout.errors import LakelayoutError


def test_a_read_starts_over_when_the_named_file_was_deleted(tmp_path: Path) -> None:
    """``record`` in another process deletes all but its file and the one before: a reader
    holding an older name must follow ``CURRENT`` to the newer file, not fail."""
    store = ProvenanceStore(tmp_path)
    store.record([FileProvenance("a.parquet", cube_id="c1")])
    live = store._current()
    gone = [store.directory / "provenance-deleted-meanwhile.parquet"]
    names = iter([*gone, live])
    store._current = lambda: next(names)  # type: ignore[method-assign]
    assert set(store.read()) == {"a.parquet"}


def test_a_sidecar_that_never_settles_is_a_clear_error(tmp_path: Path) -> None:
    store = ProvenanceStore(tmp_path)
    store.record([FileProvenance("a.parquet", cube_id="c1")])
    store.pointer.write_text("provenance-missing.parquet", encoding="utf-8")
    with pytest.raises(LakelayoutError, match=f"{READ_ATTEMPTS} attempts"):
        store.read()
