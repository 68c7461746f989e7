"""Differential property: the segmented store reads as a dict of the latest row per path.

Random sequences of upserts (paths from a small pool, random keys, a random
subset of two index columns, random ``live_paths`` or none) go to a store with
a small, random ``max_segments``, so appends and compactions (by segment count
and by dead rows) interleave. After each upsert, reading a snapshot of the
model's files (keys equal to the model's or not) and a file never stored must
give what a reference model gives: path -> its latest row, rows of files that
left ``live_paths`` dropped; a file's value is that row's, only when its key
matches (null otherwise, and null for an index that row lacks).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.skipping.store import MetadataStore
from lakelayout.stats.model import FileStats

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "100"))
POOL = ("a", "b", "c", "d", "e")
COLUMNS = {"x": pa.int64(), "y": pa.list_(pa.string())}
VALUES = {
    "x": st.none() | st.integers(-3, 3),
    "y": st.none() | st.lists(st.sampled_from(["p", "q"]), max_size=2),
}
KEYS = st.tuples(st.integers(1, 2), st.integers(1, 2))

Row = tuple[int, int, dict[str, Any]]


@st.composite
def upserts(draw: st.DrawFn) -> tuple[pa.Table, list[str] | None]:
    paths = draw(st.lists(st.sampled_from(POOL), unique=True, max_size=3))
    columns = draw(st.lists(st.sampled_from(sorted(COLUMNS)), unique=True))
    keys = [draw(KEYS) for _ in paths]
    data: dict[str, pa.Array] = {
        "path": pa.array(paths, pa.string()),
        "size": pa.array([k[0] for k in keys], pa.int64()),
        "modification_time": pa.array([k[1] for k in keys], pa.int64()),
    }
    for name in columns:
        data[name] = pa.array([draw(VALUES[name]) for _ in paths], COLUMNS[name])
    live = draw(st.none() | st.lists(st.sampled_from(POOL), unique=True))
    return pa.table(data), live


def apply(model: dict[str, Row], rows: pa.Table, live: list[str] | None) -> dict[str, Row]:
    """The reference: the latest row per path; with ``live``, other files' rows are gone."""
    out = dict(model)
    names = [c for c in rows.column_names if c in COLUMNS]
    for row in rows.to_pylist():
        out[row["path"]] = (row["size"], row["modification_time"], {c: row[c] for c in names})
    if live is not None:
        new = set(rows.column("path").to_pylist())
        out = {p: r for p, r in out.items() if p in live or p in new}
    return out


@settings(
    max_examples=max(EXAMPLES // 2, 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    steps=st.lists(upserts(), min_size=1, max_size=8),
    max_segments=st.integers(1, 4),
    data=st.data(),
)
def test_reads_equal_the_latest_row_per_path(
    steps: list[tuple[pa.Table, list[str] | None]], max_segments: int, data: st.DataObject
) -> None:
    model: dict[str, Row] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = MetadataStore(tmp, max_segments=max_segments)
        for rows, live in steps:
            before = {p.name for p in store.segments()}
            store.upsert(rows, live_paths=live)
            model = apply(model, rows, live)
            segments = {p.name for p in store.segments()}
            assert 1 <= len(segments) <= max_segments
            check_read(store, model, data)
            kept = None
            if not before:  # the first write
                kept = set(model)
            elif live is not None and not before & segments:  # a compaction with live paths
                kept = set(model) | set(live)
            check_read_all(store, model, kept)


def check_read(store: MetadataStore, model: dict[str, Row], data: st.DataObject) -> None:
    paths = [*sorted(model), "never-stored"]
    keys = [
        model[p][:2] if p in model and data.draw(st.booleans()) else data.draw(KEYS) for p in paths
    ]
    files = FileStats(
        paths=np.array(paths, dtype=object),
        sizes=np.array([k[0] for k in keys], dtype=np.int64),
        num_records=np.ones(len(paths), dtype=np.int64),
        modification_times=np.array([k[1] for k in keys], dtype=np.int64),
        columns={},
    )
    got = store.read(files, sorted(COLUMNS))
    assert set(got) <= set(COLUMNS)
    fresh = [p in model and model[p][:2] == k for p, k in zip(paths, keys, strict=True)]
    for name in COLUMNS:
        want = [model[p][2].get(name) if f else None for p, f in zip(paths, fresh, strict=True)]
        values = got[name].to_pylist() if name in got else [None] * len(paths)
        assert values == want, (name, paths, keys)
    info = store.describe(files, sorted(COLUMNS))
    for name in COLUMNS:
        assert info[name].stale_files == sum(p in model for p in paths) - sum(fresh)


def check_read_all(store: MetadataStore, model: dict[str, Row], kept: set[str] | None) -> None:
    """Every model row is in the resolved view, and after a compaction only paths of ``kept``.

    A compaction drops the rows of files outside its ``live_paths``; a row an
    earlier upsert made dead stays while its path is live again (the same file
    back in the snapshot), or when a compaction is given no live paths.
    """
    table = store.read_all()
    rows = {r["path"]: (r["size"], r["modification_time"]) for r in table.to_pylist()}
    assert {p: rows.get(p) for p in model} == {p: r[:2] for p, r in model.items()}
    if kept is not None:
        assert set(rows) <= kept, (sorted(rows), sorted(kept))
