"""Query-time block pruning with a layout's logical index (Qd-tree, Pando) on real tables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.api import Table
from lakelayout.cluster import logical
from lakelayout.cluster.provenance import FileProvenance, ProvenanceStore, layout_columns
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.nodes import BoolConst, Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts import PandoLayout, QdTreeLayout
from lakelayout.skipping.planner import plan, relax
from lakelayout.table.delta import Snapshot

from .helpers import TARGET, live_paths, same_rows

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "40"))
#: a workload whose cuts min/max cannot reproduce: the FALSE side of k IN (1, 5)
#: still spans k = 0 .. 9, and so does the FALSE side of c IS NULL's complement
WORKLOAD = ["k IN (1, 5)", "a < 250", "a >= 750 AND b < 500", "c IS NULL"]
QD = "layout(qdtree)"


def _gen(spark: Any, n: int, seed: int, parts: int = 6, start: int = 0) -> Any:
    """id, a, b in [0, 1000), c (double, 5% nulls), k in [0, 10)."""
    from pyspark.sql import functions as F

    return (
        spark.range(start, start + n)
        .select(
            F.col("id"),
            (F.rand(seed) * 1000).cast("int").alias("a"),
            (F.rand(seed + 1) * 1000).cast("int").alias("b"),
            F.when(F.rand(seed + 2) < 0.05, None)
            .otherwise((F.rand(seed + 3) * 100).cast("double"))
            .alias("c"),
            (F.rand(seed + 4) * 10).cast("int").alias("k"),
        )
        .repartition(parts)
    )


def _laid_out(spark: Any, root: Path, family: str, seed: int, n: int = 12_000) -> Table:
    t = Table.create(str(root), _gen(spark, n, seed), target_file_size=TARGET)
    sample = t.to_df().select("a", "b", "c", "k").limit(6000).toArrow()
    if family == "qdtree":
        layout: Any = QdTreeLayout.fit(sample, WORKLOAD, target_blocks=10)
    else:
        layout = PandoLayout.fit(sample, WORKLOAD, target_blocks=10, k=2)
    t.optimize.apply(layout)
    return t


def _full(t: Table, where: str) -> Any:
    return t.to_df().where(where)


def _snapshot_rows(t: Table) -> tuple[pa.Table, np.ndarray]:
    """Every row with the position of its file in the snapshot (read with pyarrow)."""
    files = t.snapshot().files
    parts, owner = [], []
    for i, path in enumerate(files.paths):
        data = pq.read_table(os.path.join(t.uri, str(path)))
        parts.append(data)
        owner.append(np.full(data.num_rows, i))
    return pa.concat_tables(parts), np.concatenate(owner)


@pytest.fixture(scope="module")
def qd(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Table:
    return _laid_out(spark, tmp_path_factory.mktemp("logical") / "qd", "qdtree", 11, n=8000)


def test_qdtree_skips_beyond_minmax_and_rows_match(qd: Table) -> None:
    for where, beyond in [
        ("k IN (1, 5)", True),
        ("c IS NULL AND k = 1", True),
        ("k IN (1, 5) AND a < 250", False),  # here min/max on a already does as well
    ]:
        res = qd.scan(where)
        r = res.report
        assert r.skipped_by.get(QD, 0) > 0, (where, r.skipped_by)
        assert r.files_skipped >= max(r.skipped_by.values())
        assert (r.files_skipped > r.skipped_by["minmax"]) == beyond, (where, r.skipped_by)
        assert r.bytes_skipped_by[QD] > 0
        assert same_rows(res.df, _full(qd, where))
    # the FALSE side of the IN cut: every file holds k in 0..9 by min/max, yet half are ruled out
    r = qd.scan("k IN (1, 5)").report
    assert r.skipped_by["minmax"] == 0
    assert r.files_kept <= r.files_total // 2


def test_unknown_columns_are_relaxed_never_wrong(qd: Table) -> None:
    only_id = qd.scan("id < 50").report  # the layout was fitted without id
    assert QD not in only_id.skipped_by
    mixed = qd.scan("id < 6000 AND k IN (1, 5)")
    assert mixed.report.skipped_by.get(QD, 0) > 0
    assert same_rows(mixed.df, _full(qd, "id < 6000 AND k IN (1, 5)"))
    either = qd.scan("id < 50 OR k = 1").report  # OR with an unknown side: TRUE
    assert QD not in either.skipped_by


def test_failing_layouts_keep_every_file(qd: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = qd.scan("k = 5").report
    assert baseline.skipped_by.get(QD, 0) > 0

    def boom(self: Any, predicate: Any) -> Any:
        raise RuntimeError("index is broken")

    monkeypatch.setattr(QdTreeLayout, "blocks_for", boom)
    broken = qd.scan("k = 5").report
    assert QD not in broken.skipped_by
    assert broken.files_kept == broken.files_total - broken.skipped_by["minmax"]
    monkeypatch.setattr(QdTreeLayout, "blocks_for", lambda self, p: None)
    assert QD not in qd.scan("k = 5").report.skipped_by


# ------------------------------------------------------------------ property: never lose a row

_ATOMS = st.one_of(
    st.builds(
        lambda v: f"k IN ({v[0]}, {v[1]})", st.tuples(st.integers(-1, 10), st.integers(0, 9))
    ),
    st.builds(lambda v: f"k = {v}", st.integers(-1, 11)),
    st.builds(lambda v: f"a < {v}", st.integers(-5, 1005)),
    st.builds(lambda v: f"a >= {v}", st.integers(-5, 1005)),
    st.builds(lambda v: f"b < {v}", st.integers(-5, 1005)),
    st.builds(
        lambda lo, w: f"b BETWEEN {lo} AND {lo + w}", st.integers(-5, 1000), st.integers(0, 300)
    ),
    st.sampled_from(["c IS NULL", "c IS NOT NULL", "c > 50.5", "c <= 3"]),
)
_PREDICATES = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.builds(lambda x, y: f"({x}) AND ({y})", inner, inner),
        st.builds(lambda x, y: f"({x}) OR ({y})", inner, inner),
        st.builds(lambda x: f"NOT ({x})", inner),
    ),
    max_leaves=5,
)


@pytest.fixture(scope="module")
def qd_rows(qd: Table) -> tuple[pa.Table, np.ndarray]:
    return _snapshot_rows(qd)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(where=_PREDICATES)
def test_property_pruning_never_drops_a_matching_row(
    qd: Table, qd_rows: tuple[pa.Table, np.ndarray], where: str
) -> None:
    """Every file holding a row the predicate selects (Spark semantics) is kept.

    So ``scan(where).df`` (Spark's WHERE over the kept files) returns exactly
    the full scan's rows; a few of these are also checked through Spark below.
    """
    data, owner = qd_rows
    snap = qd.snapshot()
    pred = parse_predicate(where, snap.schema)
    needed = np.unique(owner[evaluate(pred, data)])
    pruned = qd.plan(pred, snapshot=snap)
    assert pruned.keep[needed].all(), (where, pruned.skipped_by)
    alone = _logical_keep(qd, pred, snap)
    assert alone[needed].all(), where


@pytest.mark.parametrize(
    "where",
    ["NOT (k IN (1, 5)) AND c IS NULL", "(k = 5 OR a >= 990) AND NOT (b < 500)", "k IN (3, 7)"],
)
def test_property_examples_through_spark(qd: Table, where: str) -> None:
    assert same_rows(qd.scan(where).df, _full(qd, where))


# ------------------------------------------------------------------ Pando, appends, rewrites


def test_pando_skips_and_appended_or_rewritten_files_are_safe(spark: Any, tmp_path: Path) -> None:
    t = _laid_out(spark, tmp_path / "pando", "pando", 21, n=8000)
    laid = live_paths(t)
    r = t.scan("k IN (1, 5)").report
    assert r.skipped_by.get("layout(pando)", 0) > 0 and r.skipped_by["minmax"] == 0
    assert same_rows(t.scan("k IN (1, 5)").df, _full(t, "k IN (1, 5)"))

    # appended after apply: no provenance, always kept (min/max cannot skip them either)
    t.append(_gen(spark, 1000, 99, parts=2, start=10_000))
    new = live_paths(t) - laid
    res = t.scan("k IN (1, 5)")
    kept = {str(p) for p in t.snapshot().files.paths[_keep(t, "k IN (1, 5)")]}
    assert new and new <= kept
    assert same_rows(res.df, _full(t, "k IN (1, 5)"))
    _check_freshness(t, laid, sorted(new)[0])

    # DELETE rewrites laid-out files: survivors carry their block, with the new size
    t.delete("id % 3 = 0")
    rewritten = live_paths(t) - laid - new
    prov = ProvenanceStore(t.uri).read(rewritten)
    sizes = dict(zip(map(str, t.snapshot().files.paths), t.snapshot().files.sizes, strict=True))
    assert prov and all(p.size == sizes[path] for path, p in prov.items())  # appended: none
    for where in ["k IN (1, 5)", "k = 2 AND a < 250", "NOT (k IN (1, 5))"]:
        assert same_rows(t.scan(where).df, _full(t, where))
    assert t.scan("k IN (1, 5)").report.skipped_by.get("layout(pando)", 0) > 0


def _keep(t: Table, where: str) -> np.ndarray:
    return t.plan(where).keep


def _logical_keep(t: Table, pred: Predicate, snap: Snapshot) -> np.ndarray:
    """The files the layouts' logical indexes alone keep."""
    planned = plan(pred, snap.files, layouts=logical.layout_blocks(t.uri, snap.files, snap.schema))
    out = np.zeros(len(snap.files), dtype=bool)
    for source, ruled_out in planned.ruled_out.items():
        if source.startswith("layout("):
            out |= ruled_out
    return ~out


def _check_freshness(t: Table, laid: set[str], stranger: str) -> None:
    """A provenance row for a path is used only when it recorded that file's current size."""
    store = ProvenanceStore(t.uri)
    some = next(iter(store.read(laid).values()))
    snap = t.snapshot()
    pred = parse_predicate("k = 5", snap.schema)
    at = [str(p) for p in snap.files.paths].index(stranger)
    loaded = logical._layout(t.uri, str(some.layout_id))
    assert loaded is not None
    layout, binding = loaded
    # recorded at apply: the columns its cuts read
    assert binding == snap.table_format.binding(layout_columns(layout)) and binding
    blocks = set(np.asarray(layout.blocks_for(pred)).tolist())
    excluded = next(b for b in range(layout.n_blocks) if b not in blocks)
    size = int(snap.files.sizes[at])
    for recorded, skipped in [(None, False), (size + 1, False), (size, True)]:
        row = FileProvenance(stranger, layout_id=some.layout_id, block_id=excluded, size=recorded)
        store.record([row])
        keep = _logical_keep(t, pred, snap)
        assert keep[at] != skipped, recorded
    # a missing layout document: its files are kept
    store.record([FileProvenance(stranger, layout_id="0" * 32, block_id=0, size=size)])
    assert _logical_keep(t, pred, snap)[at]
    store.record([], removed=[stranger])


def test_relax_replaces_only_positive_unknown_parts() -> None:
    schema = pa.schema([("a", pa.int32()), ("id", pa.int64())])
    known = frozenset({"a"})
    p = parse_predicate("a < 5 AND id > 3", schema)
    assert relax(p, known) == parse_predicate("a < 5", schema)
    assert relax(parse_predicate("a < 5 OR id > 3", schema), known) == BoolConst(True)
    assert relax(parse_predicate("a < 5", schema), frozenset()) == BoolConst(True)


def test_apply_keeps_files_already_in_one_block_and_records_them(
    spark: Any, tmp_path: Path
) -> None:
    from lakelayout.errors import InvalidOption
    from lakelayout.online_table import laid_out_by

    t = Table.create(str(tmp_path / "t"), _gen(spark, 6000, 31), target_file_size=TARGET)
    sample = t.to_df().toArrow()

    def tree(cuts: list[str]) -> QdTreeLayout:
        return QdTreeLayout.fit(sample, cuts, rows_per_block=500)

    t.optimize.apply(tree(["a < 300", "a < 600"]), one_file_per_block=True)
    assert len(live_paths(t)) == 3
    second = tree(["a < 600", "a < 450"])
    snap = t.snapshot()
    placed = second.blocks_of_files(snap.files)
    assert placed is not None
    paths = [str(p) for p in snap.files.paths]
    keep = {p: b for p, b in zip(paths, placed, strict=True) if b >= 0}  # numpy ints
    moved = [p for p in paths if p not in keep]
    assert keep and moved  # [0,300) and [600,1000) lie in one block; [300,600) straddles 450

    version, before = t.version, ProvenanceStore(t.uri).read()
    some = next(iter(keep))
    for bad, names in [
        ({some: second.n_blocks}, "block"),
        ({some: -1}, "block"),
        ({moved[0]: 0}, "both rewritten and kept"),
        ([some], "must map"),
        # a block the file's statistics do not confirm: scans would prune its rows away
        ({some: (int(keep[some]) + 1) % second.n_blocks}, "statistics place its rows in block"),
    ]:
        with pytest.raises(InvalidOption, match=names):
            t.optimize.apply(second, moved, keep=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="no one block"):  # a file straddling a cut
        t.optimize.apply(second, moved[1:], keep={moved[0]: 0})
    assert t.version == version and ProvenanceStore(t.uri).read() == before

    # a file no longer live (removed since it was placed) is left out
    t.optimize.apply(second, moved, one_file_per_block=True, keep={**keep, "gone.parquet": 0})
    live = live_paths(t)
    assert set(keep) <= live and not set(moved) & live
    assert "gone.parquet" not in ProvenanceStore(t.uri).read()
    assert laid_out_by(t.uri, t.snapshot().files, second).all()
    snap = t.snapshot()
    recorded = {
        str(p): int(b)
        for entry in logical.layout_blocks(t.uri, snap.files, snap.schema)
        for p, b in zip(snap.files.paths, entry.blocks, strict=True)
        if b >= 0
    }
    assert {p: recorded[p] for p in keep} == {p: int(b) for p, b in keep.items()}
    for where in ["a >= 450 AND a < 600", "a < 100", "a >= 590 AND a < 610"]:
        assert same_rows(t.scan(where).df, _full(t, where))
    assert t.scan("a >= 450 AND a < 600").report.skipped_by.get(QD, 0) > 0

    # nothing to rewrite: the kept files are recorded, nothing is committed
    third = tree(["a < 450"])
    snap = t.snapshot()
    placed = third.blocks_of_files(snap.files)
    assert placed is not None and (placed >= 0).all()
    version = t.version
    metrics = t.optimize.apply(
        third, [], keep={str(p): int(b) for p, b in zip(snap.files.paths, placed, strict=True)}
    )
    assert t.version == version and metrics.files_added == 0
    assert laid_out_by(t.uri, t.snapshot().files, third).all()
    assert same_rows(t.to_df(), _gen(spark, 6000, 31))


def test_files_of_a_partitioned_table_are_placed_by_their_partition_values(
    spark: Any, tmp_path: Path
) -> None:
    """A cut on the partition column places a file by the partition value the log gives it
    (exact bounds, not statistics of the file); every row of a placed file is in the block
    it is placed in, and ``apply`` records it there."""
    from lakelayout.online_table import laid_out_by
    from lakelayout.table.datafile import read_data_file
    from lakelayout.table.location import resolve_location

    t = Table.create(
        str(tmp_path / "p"), _gen(spark, 6000, 41, parts=2), partition_by=["k"],
        target_file_size=TARGET,
    )  # fmt: skip
    sample = t.to_df().toArrow()
    layout = QdTreeLayout.fit(sample, ["k IN (1, 5)", "k = 7", "k < 3"], rows_per_block=300)
    snap = t.snapshot()
    placed = layout.blocks_of_files(snap.files)
    assert placed is not None and (placed >= 0).all()  # every file holds one value of k
    keep = {str(p): int(b) for p, b in zip(snap.files.paths, placed, strict=True)}
    filesystem, root = resolve_location(t.uri)
    for path, block in keep.items():
        # the file's rows as a scan reads them: the partition value from the log
        file = snap.data_file(path)
        rows = pa.Table.from_batches(
            list(read_data_file(filesystem, root, snap.table_format, file)), snap.schema
        )
        assert rows.num_rows > 0
        assert set(layout.assign(rows).tolist()) == {block}
    t.optimize.apply(layout, [], keep=keep)
    assert laid_out_by(t.uri, t.snapshot().files, layout).all()
    for where in ["k IN (1, 5)", "k = 7 AND a < 500", "k >= 3"]:
        assert same_rows(t.scan(where).df, _full(t, where))
    assert same_rows(t.to_df(), _gen(spark, 6000, 41, parts=2))
