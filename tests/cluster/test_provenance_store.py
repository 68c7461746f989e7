"""The clustering sidecar read while another process replaces it (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelayout.cluster.provenance import READ_ATTEMPTS, FileProvenance, ProvenanceStore
from lakelayout.errors import LakelayoutError, StateUnreadable


def test_a_read_starts_over_when_the_named_file_was_deleted(tmp_path: Path) -> None:
    """``record`` in another process deletes all but its file and the one before: a reader
    holding an older name must follow ``CURRENT`` to the newer file, not fail."""
    store = ProvenanceStore(tmp_path)
    store.record([FileProvenance("a.parquet", cube_id="c1")])
    live = store._current()
    gone = [store.directory / "provenance-deleted-meanwhile.parquet"]
    names = iter([*gone, live, live])  # a name, the pointer again after the failure, ...
    store._current = lambda: next(names)  # type: ignore[method-assign]
    assert set(store.read()) == {"a.parquet"}


def test_a_sidecar_that_never_settles_is_a_clear_error(tmp_path: Path) -> None:
    store = ProvenanceStore(tmp_path)
    store.record([FileProvenance("a.parquet", cube_id="c1")])
    names = (store.directory / f"provenance-{i}.parquet" for i in range(100))
    store._current = lambda: next(names)  # type: ignore[method-assign]
    with pytest.raises(LakelayoutError, match=f"{READ_ATTEMPTS} attempts"):
        store.read()


def test_a_missing_or_damaged_sidecar_names_itself(tmp_path: Path) -> None:
    """CURRENT naming a missing file read as "kept changing while being read", and a
    truncated file raised a raw ArrowInvalid (found by an audit)."""
    store = ProvenanceStore(tmp_path)
    store.record([FileProvenance("a.parquet", cube_id="c1")])
    live = store._current()
    assert live is not None
    live.write_bytes(live.read_bytes()[:30])
    with pytest.raises(StateUnreadable, match=r"cannot be read.*removing"):
        store.read()
    store.pointer.write_text("provenance-missing.parquet", encoding="utf-8")
    with pytest.raises(StateUnreadable, match=r"provenance-missing\.parquet.*cannot be read"):
        store.read()
