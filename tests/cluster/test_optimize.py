"""OPTIMIZE kinds on real Delta tables: rows preserved, skipping improved, refusals."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakelayout.api import Table
from lakelayout.cluster.config import SMALL_REWRITE_SIZE
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.errors import InvalidOption
from lakelayout.layouts import LinearLayout
from lakelayout.layouts.qdtree import QdTreeLayout

from .helpers import TARGET, gen, live_paths, same_rows

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("properties", [None, {SMALL_REWRITE_SIZE: "1"}], ids=["small", "shuffled"])
def test_compaction_then_curves_then_apply_preserve_rows_and_cluster(
    spark: Any, tmp_path: Path, properties: dict[str, str] | None
) -> None:
    """Every rewrite verb, on the no-shuffle path (small input) and the shuffle path."""
    t = Table.create(
        str(tmp_path / "t"),
        gen(spark, 12_000, 1, parts=24),
        target_file_size=TARGET,
        properties=properties,
    )
    v0 = t.version
    before = t.scan("a < 60 AND b < 60").report
    assert before.files_kept >= 0.9 * before.files_total

    m = t.optimize.compact()
    assert m.operation == "compaction" and m.commits == 1
    assert m.files_removed > m.files_added >= 1 and m.rows_removed == m.rows_added == 12_000
    again = t.optimize.compact()  # files are now near the target: nothing to do
    assert again.files_removed == 0 and again.commits == 0

    m = t.optimize.hilbert(["a", "b"])
    assert m.rows_added == 12_000 and m.files_added >= 4
    after = t.scan("a < 60 AND b < 60").report
    assert after.files_kept <= max(2, after.files_total // 3)

    m = t.optimize.zorder(["a", "b"])
    assert m.operation == "zorder" and m.rows_added == 12_000

    layout = LinearLayout.fit(t.to_df().limit(3000).toArrow(), columns=["a"], target_blocks=4)
    m = t.optimize.apply(layout)
    assert m.cubes_touched == 4
    prov = ProvenanceStore(t.uri).read(live_paths(t))
    assert {p.block_id for p in prov.values()} == {0, 1, 2, 3}
    layout_id = next(iter(prov.values())).layout_id
    assert layout_id is not None
    assert ProvenanceStore(t.uri).load_layout(layout_id).to_json() == layout.to_json()
    assert t.scan("a < 100").report.files_kept <= 2

    # a tree layout orders the rows inside each block by its in-block key
    sample = t.to_df().limit(4000).toArrow()
    tree = QdTreeLayout.fit(sample, ["a < 300", "b >= 700", "a < 600 AND b < 200"], target_blocks=2)
    assert tree.inner is not None
    t.optimize.apply(tree)
    for path in live_paths(t):
        rows = pq.read_table(os.path.join(t.uri, path))
        key = tree.sort_key(rows)
        assert key is not None and rows.num_rows > 100
        assert (np.diff(key) >= 0).all(), path

    assert same_rows(t.to_df(version=v0), t.to_df())
    history = t.history(limit=4)
    for h in history:  # lakelayout's name; delta-rs records every commit it makes as WRITE
        assert h["operation"] == h["lakelayout"]["operation"] == "OPTIMIZE"
        assert h["recordedOperation"] == "WRITE"


def test_zorder_is_refused_on_a_clustered_table(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "c"), gen(spark, 500, 2, parts=1), cluster_by=["a"])
    with pytest.raises(InvalidOption, match="not allowed on a clustered table"):
        t.optimize.zorder(["a", "b"])


def test_conflicting_commit_leaves_table_unchanged(spark: Any, tmp_path: Path) -> None:
    """Two writers: a DELETE removes a file the compaction is rewriting; OPTIMIZE yields."""
    t = Table.create(str(tmp_path / "x"), gen(spark, 4000, 3, parts=6), target_file_size=TARGET)
    other = Table(t.uri, spark=spark)
    seen: dict[str, Any] = {}

    def concurrent_delete(_: int) -> None:
        other.delete("id < 10")
        seen["version"] = other.version
        seen["files"] = live_paths(other)

    from lakelayout.cluster import OptimizeHooks

    m = t.optimize.compact(hooks=OptimizeHooks(before_commit=concurrent_delete))
    assert m.yielded and m.commits == 0 and m.files_added == 0
    assert m.yield_reason == f"lost to version {seen['version']} (DELETE, changed data)"
    assert t.version == seen["version"] and live_paths(t) == seen["files"]
    assert t.to_df().count() == 3990
    written = {p.name for p in Path(t.uri).glob("ll-compact*.parquet")}
    assert written == set()  # the losing writer's files were cleaned up


def test_hooks_hear_every_commit_and_a_failure_after_it_says_it_committed(
    spark: Any, tmp_path: Path
) -> None:
    """``progress`` runs after every commit (compaction, ZORDER, Hilbert and apply never
    called it); a hook failing after the commit raises AfterCommitError naming the version
    the table holds, not an error that reads as "nothing committed" (an audit); a
    before_commit failure leaves no written file behind."""
    from lakelayout.cluster import OptimizeHooks
    from lakelayout.errors import AfterCommitError

    t = Table.create(str(tmp_path / "h"), gen(spark, 4000, 3, parts=6), target_file_size=TARGET)
    heard: list[tuple[int, int]] = []
    t.optimize.zorder(["a", "b"], hooks=OptimizeHooks(progress=lambda d, n: heard.append((d, n))))
    t.optimize.hilbert(["a", "b"], hooks=OptimizeHooks(progress=lambda d, n: heard.append((d, n))))
    assert heard == [(1, 1), (1, 1)]

    def boom(*_: int) -> None:
        raise RuntimeError("boom")

    files = live_paths(t)
    on_disk = sorted(p.name for p in Path(t.uri).glob("*.parquet"))
    with pytest.raises(RuntimeError, match="boom"):
        t.optimize.zorder(["b", "a"], hooks=OptimizeHooks(before_commit=boom))
    assert live_paths(t) == files
    assert sorted(p.name for p in Path(t.uri).glob("*.parquet")) == on_disk
    with pytest.raises(AfterCommitError) as err:
        t.optimize.zorder(["b", "a"], hooks=OptimizeHooks(after_commit=boom))
    assert err.value.version == t.version and live_paths(t) != files
    assert str(err.value).endswith(
        f"committed as version {t.version}, then the after_commit hook failed: RuntimeError: boom"
    )
    assert err.value.metrics.versions == (t.version,)
    assert err.value.metrics.files_removed == len(files) and err.value.metrics.rows_added == 4000
    assert t.to_df().count() == 4000


def test_apply_rolls_each_block_at_a_given_target_file_size(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), gen(spark, 12_000, 4, parts=4), target_file_size=TARGET)
    v0 = t.version
    layout = LinearLayout.fit(t.to_df().limit(3000).toArrow(), columns=["a"], target_blocks=2)
    whole = t.optimize.apply(layout, one_file_per_block=True)
    assert whole.files_added == 2
    block_bytes = max(int(n) for n in t.snapshot().files.sizes)

    version = t.version
    with pytest.raises(InvalidOption, match="not both"):
        t.optimize.apply(layout, one_file_per_block=True, target_file_size=block_bytes)
    with pytest.raises(InvalidOption, match="target_file_size must be a positive"):
        t.optimize.apply(layout, target_file_size=0)
    with pytest.raises(InvalidOption, match="target_file_size"):
        t.optimize.apply(layout, target_file_size="1MB")  # type: ignore[arg-type]
    assert t.version == version

    m = t.optimize.apply(layout, target_file_size=block_bytes // 4)
    assert m.files_added >= 6 and m.rows_added == 12_000
    assert max(int(n) for n in t.snapshot().files.sizes) < block_bytes // 2
    # a block's files are consecutive ranges of its key: skipping is no coarser than
    # with one file per block
    prov = ProvenanceStore(t.uri).read(live_paths(t))
    for block in {p.block_id for p in prov.values()}:
        ranges = []
        for path in (p for p, f in prov.items() if f.block_id == block):
            a = pq.read_table(os.path.join(t.uri, path), columns=["a"]).column("a")
            ranges.append((pc.min(a).as_py(), pc.max(a).as_py()))
        ranges.sort()
        assert len(ranges) >= 3
        assert all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(ranges))
    assert same_rows(t.to_df(version=v0), t.to_df())


def test_a_data_file_missing_under_the_log_is_table_corrupt_before_anything_runs(
    spark: Any, tmp_path: Path
) -> None:
    """A data file deleted underneath made scans fail with Spark's PATH_NOT_FOUND and
    rewrites fail half-way in their tasks (found by an audit); both now name the table
    and the file, and nothing is written."""
    import pyarrow as pa

    from lakelayout.errors import TableCorrupt

    path = str(tmp_path / "t")
    t = Table.create(path, pa.table({"a": list(range(100)), "b": [i % 7 for i in range(100)]}))
    t.append(pa.table({"a": list(range(100, 200)), "b": [i % 7 for i in range(100)]}))
    first = sorted(live_paths(t))[0]
    os.remove(os.path.join(path, first))
    version, on_disk = t.version, sorted(os.listdir(path))
    t = Table(path, spark=spark)
    with pytest.raises(TableCorrupt, match="missing"):
        t.scan("a >= 0")
    with pytest.raises(TableCorrupt, match=r"1 data file\(s\).*missing"):
        t.optimize.zorder(["a", "b"])
    assert t.version == version and sorted(os.listdir(path)) == on_disk
    # a partitioned table's files are read by lakelayout's own tasks (partition values
    # from the log): there the scan failed only when Spark ran them, with a raw error
    parted = str(tmp_path / "p")
    p = Table.create(parted, pa.table({"a": list(range(40)), "b": [i % 2 for i in range(40)]}),
                     partition_by=["b"])  # fmt: skip
    os.remove(os.path.join(parted, sorted(live_paths(p))[0]))
    with pytest.raises(TableCorrupt, match=r"1 data file\(s\).*missing"):
        Table(parted, spark=spark).scan("a >= 0")
