"""A file's block from its statistics (what a switch keeps instead of rewriting).

``blocks_of_files`` may only name a block when every row of the file is in it:
a file kept by a switch is then laid out by the new layout, and a wrong block
would put rows where the layout's logical index does not look for them. The
property tests draw tables of corner values (NaN, infinities, nulls, unicode,
extreme dates and timestamps, decimals), workloads from the planner's grammar,
and files cut from the rows in several ways, with some statistics dropped.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import LakelayoutError
from lakelayout.layouts import PandoLayout, QdTreeLayout
from lakelayout.layouts.base import Layout
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.ranks import domain_type
from lakelayout.layouts.zorder import ZOrderLayout
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.model import FileStats
from tests.expr.predicates import (
    extreme_predicates,
    extreme_table,
    planner_predicates,
    planner_table,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "25"))


#: how the property tests draw a table's copies and cut it into files (see :func:`_files`)
CUTS = {
    "copies": st.integers(2, 8),
    "how": st.sampled_from(["blocks", "halves", "column", "random"]),
    "drop": st.booleans(),
    "seed": st.integers(0, 2**16),
}


def _rows(copies: int, seed: int, base: pa.Table | None = None) -> pa.Table:
    """``copies`` shuffled copies of a corner-case table (enough rows to cut)."""
    base = planner_table() if base is None else base
    data = pa.concat_tables([base] * copies)
    order = np.random.default_rng(seed).permutation(data.num_rows)
    return data.take(pa.array(order))


def _files(data: pa.Table, layout: Layout, how: str, seed: int) -> np.ndarray:
    """File id of every row: the layout's own blocks, blocks cut in two, a column's
    runs, or random groups."""
    rng = np.random.default_rng(seed)
    blocks = layout.assign(data)
    if how == "blocks":
        return blocks
    if how == "halves":
        return blocks * 2 + rng.integers(0, 2, data.num_rows)
    if how == "column":
        ids = data.column("id").to_numpy(zero_copy_only=False)
        return np.asarray(ids % int(rng.integers(2, 6)), dtype=np.int64)
    return rng.integers(0, int(rng.integers(1, 8)), data.num_rows)


def _drop_some_statistics(files: FileStats, seed: int) -> FileStats:
    """Forget the bounds of about a third of the columns (unknown bounds: "may")."""
    rng = np.random.default_rng(seed)
    kept = {k: v for k, v in files.columns.items() if rng.random() > 1 / 3}
    return dataclasses.replace(files, columns=kept)


def _check(layout: Layout, data: pa.Table, file_ids: np.ndarray, drop: bool, seed: int) -> int:
    """Every file given a block has all its rows in that block; the number of files given one."""
    files = block_stats(data, file_ids)
    if drop:
        files = _drop_some_statistics(files, seed)
    found = layout.blocks_of_files(files)
    assert found is not None
    assert found.shape == (len(files),)
    blocks = layout.assign(data)
    ids = np.unique(file_ids)  # block_stats orders files by ascending id
    for i, fid in enumerate(ids):
        if found[i] >= 0:
            rows = blocks[file_ids == fid]
            assert (rows == found[i]).all(), (fid, found[i], np.unique(rows), layout.describe())
    return int((found >= 0).sum())


@settings(max_examples=2 * EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from([QdTreeLayout, PandoLayout]),
    # the planner's corner cases (NULL in IN lists, unicode, NaN, structs) or the extreme
    # values (38-digit decimals, timestamps at the ends of their range)
    case=st.one_of(
        st.tuples(
            st.just(False), st.lists(planner_predicates(max_leaves=3), min_size=1, max_size=6)
        ),
        st.tuples(st.just(True), st.lists(extreme_predicates(), min_size=1, max_size=6)),
    ),
    rows_per_block=st.integers(2, 12),
    **CUTS,
)
def test_property_a_tree_layout_names_a_block_only_when_every_row_of_the_file_is_in_it(
    family: type[QdTreeLayout] | type[PandoLayout],
    case: tuple[bool, list[str]],
    copies: int,
    rows_per_block: int,
    how: str,
    drop: bool,
    seed: int,
) -> None:
    extreme, workload = case
    data = _rows(copies, seed, extreme_table() if extreme else None)
    try:
        layout = family.fit(data, workload, rows_per_block=rows_per_block)
    except LakelayoutError:
        return  # a workload that cannot be bound to the table: nothing to fit
    _check(layout, data, _files(data, layout, how, seed), drop, seed)


def _ranges() -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "a": pa.array(rng.integers(0, 1000, 4000), pa.int64()),
            "b": pa.array(rng.normal(size=4000), pa.float64()),
        }
    )


RANGE_WORKLOAD = ["a < 250", "a >= 500 AND a < 600", "a >= 800", "b < 0", "b > 1.5"]


def test_qdtree_files_written_block_by_block_are_recognised() -> None:
    """Range cuts on plain columns: the files of the tree's own blocks (and their
    halves) are placed in their block, and files that mix blocks are not."""
    data = _ranges()
    layout = QdTreeLayout.fit(data, RANGE_WORKLOAD, rows_per_block=300)
    assert layout.n_blocks > 3
    blocks = layout.assign(data)
    assert _check(layout, data, blocks, False, 0) == len(np.unique(blocks))
    halves = blocks * 2 + (np.arange(data.num_rows) % 2)
    assert _check(layout, data, halves, False, 0) == len(np.unique(halves))
    mixed = np.arange(data.num_rows) % 3  # every file holds rows of every block
    assert _check(layout, data, mixed, False, 0) == 0


def test_pando_places_the_files_of_its_one_cell_blocks() -> None:
    """A Pando block is one cell (a leaf of every tree) or several; statistics place
    a file by its leaf in each tree, so exactly the blocks made of one cell are
    recognised, and a file of rows from every block is not."""
    data = _ranges()
    layout = PandoLayout.fit(data, RANGE_WORKLOAD, rows_per_block=300)
    blocks = layout.assign(data)
    cells = np.stack([tree.route(data) for tree in layout.trees], axis=1)
    one_cell = [b for b in np.unique(blocks) if len(np.unique(cells[blocks == b], axis=0)) == 1]
    assert 0 < len(one_cell) < len(np.unique(blocks))  # the case has both kinds
    assert _check(layout, data, blocks, False, 0) == len(one_cell)
    assert _check(layout, data, np.arange(data.num_rows) % 3, False, 0) == 0


def test_a_file_without_statistics_on_a_cut_column_has_no_block() -> None:
    data = _ranges()
    layout = QdTreeLayout.fit(data, RANGE_WORKLOAD, rows_per_block=300)
    files = block_stats(data, layout.assign(data))
    no_a = dataclasses.replace(files, columns={k: v for k, v in files.columns.items() if k != "a"})
    found = layout.blocks_of_files(no_a)
    cuts_on_a = {c.sql() for c in layout.tree.cuts if "a" in c.atom.columns()}
    assert cuts_on_a  # the tree cuts on a, so without a's bounds no file can be placed
    assert (found == -1).all()


def _rankable(data: pa.Table) -> list[str]:
    """Top-level columns a curve can rank (no struct, no dotted name)."""
    out = []
    for field in data.schema:
        try:
            domain_type(field.type)
        except LakelayoutError:
            continue
        if "." not in field.name:
            out.append(field.name)
    return out


@settings(max_examples=2 * EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from([ZOrderLayout, HilbertLayout]),
    extreme=st.booleans(),
    picks=st.lists(st.integers(0, 40), min_size=1, max_size=3, unique=True),
    bits=st.one_of(st.none(), st.integers(1, 4)),
    target_blocks=st.integers(1, 12),
    **CUTS,
)
def test_property_a_curve_layout_names_a_block_only_when_every_row_of_the_file_is_in_it(
    family: type[ZOrderLayout] | type[HilbertLayout],
    extreme: bool,
    picks: list[int],
    bits: int | None,
    copies: int,
    target_blocks: int,
    how: str,
    drop: bool,
    seed: int,
) -> None:
    data = _rows(copies, seed, extreme_table() if extreme else None)
    names = _rankable(data)
    columns = list(dict.fromkeys(names[k % len(names)] for k in picks))
    options = {} if bits is None else {"bits_per_dim": bits}
    layout = family.fit(data, columns=columns, target_blocks=target_blocks, **options)
    _check(layout, data, _files(data, layout, how, seed), drop, seed)


def test_a_one_column_curve_places_files_of_ordered_arrivals() -> None:
    """One dimension: blocks are ranges of the column, so its own blocks, and files of
    rows that arrive in the column's order, are placed except where a file straddles a
    block boundary; a file of rows from every block is not."""
    data = _ranges()
    layout = ZOrderLayout.fit(data, columns=["a"], target_blocks=8)
    blocks = layout.assign(data)
    assert _check(layout, data, blocks, False, 0) == len(np.unique(blocks))
    order = np.argsort(data.column("a").to_numpy(), kind="stable")
    arrivals = np.empty(data.num_rows, dtype=np.int64)
    arrivals[order] = np.arange(data.num_rows) // 200  # 20 files in arrival order
    assert _check(layout, data, arrivals, False, 0) >= 20 - (layout.n_blocks - 1)
    assert _check(layout, data, np.arange(data.num_rows) % 3, False, 0) == 0


@pytest.mark.parametrize("family", [ZOrderLayout, HilbertLayout])
def test_a_curve_places_files_inside_one_aligned_cell_of_a_block(
    family: type[ZOrderLayout] | type[HilbertLayout],
) -> None:
    """Two dimensions: a file of the rows of one aligned cell of the rank grid (top two
    bits of each rank) covers one run of keys on either curve, so it is placed unless a
    block boundary cuts that run; a whole block's file is not a box and a file of every
    block's rows is not placed."""
    data = _ranges()
    layout = family.fit(data, columns=["a", "b"], target_blocks=8)
    ranks = layout.rank_matrix(data)
    top = np.uint64(layout.bits - 2)
    cells = ((ranks[0] >> top) * np.uint64(4) + (ranks[1] >> top)).astype(np.int64)
    n_cells = len(np.unique(cells))
    assert n_cells == 16
    assert _check(layout, data, cells, False, 0) >= n_cells - (layout.n_blocks - 1)
    assert _check(layout, data, np.arange(data.num_rows) % 3, False, 0) == 0
    # an expression dimension has no statistics of its own: nothing is placed
    expr = family.fit(data, columns=["a + 1", "b"], target_blocks=8)
    assert _check(expr, data, cells, False, 0) == 0
    # nor is a file whose bounds of a clustering column are unknown
    files = block_stats(data, cells)
    no_a = dataclasses.replace(files, columns={k: v for k, v in files.columns.items() if k != "a"})
    assert (layout.blocks_of_files(no_a) == -1).all()


def test_plan_switch_keeps_placed_files_over_the_floor_and_rewrites_all_when_placing_fails(
    tmp_path: Path,
) -> None:
    from lakelayout.online_table import plan_switch

    data = _ranges()
    layout = QdTreeLayout.fit(data, RANGE_WORKLOAD, rows_per_block=300)
    blocks = layout.assign(data)
    # one file per block, plus one file of rows from every block
    file_ids = np.where(np.arange(data.num_rows) % 10 == 0, layout.n_blocks, blocks)
    files = block_stats(data, file_ids)
    small = np.asarray(files.sizes) < 0.5 * float(files.sizes.sum()) / layout.n_blocks
    # no provenance there: none written by the layout
    rewrite, keep = plan_switch(str(tmp_path), files, layout)
    assert rewrite[-1]  # the mixed file
    assert (rewrite[:-1] == small[:-1]).all()  # a placed file is kept unless it is small
    assert not rewrite[:-1].all()
    # every kept file is named with the block it holds (file k holds block k)
    expected = {str(files.paths[k]): k for k in np.flatnonzero(~rewrite)}
    assert keep == expected

    class Failing(QdTreeLayout):
        def blocks_of_files(self, files: FileStats) -> np.ndarray:
            raise RuntimeError("statistics unreadable")

    failing = Failing(layout.tree, layout.schema, layout.sample_rows, layout.inner)
    rewrite, keep = plan_switch(str(tmp_path), files, failing)
    assert rewrite.all() and keep == {}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.lists(st.booleans(), min_size=12, max_size=12), min_size=1, max_size=5),
       grow=st.integers(0, 11))  # fmt: skip
def test_unlaid_files_worked_out_file_by_file_equal_a_fresh_plan_at_every_version(
    tmp_path: Path, steps: list[list[bool]], grow: int
) -> None:
    """``UnlaidFiles.plan`` reuses each file's provenance across table versions (by path
    and size); the plan must equal :func:`plan_switch` worked out afresh on every
    version, whose floor moves with the live files, also where a path comes back with
    other statistics at the same size (a review: a block remembered from the old ones
    was refused by ``optimize.apply``)."""
    from lakelayout.online.manager import ManagedState
    from lakelayout.online_table import UnlaidFiles, plan_switch

    data = _ranges()
    layout = QdTreeLayout.fit(data, RANGE_WORKLOAD, rows_per_block=300)
    state = ManagedState(id="s1", label="qdtree", layout=layout, added_at=0)
    blocks = layout.assign(data)
    # one file per block and one mixing every block
    file_ids = np.where(np.arange(data.num_rows) % 10 == 0, layout.n_blocks, blocks)
    every = block_stats(data, file_ids)
    unlaid = UnlaidFiles(str(tmp_path))

    def same_as_afresh(files: FileStats) -> None:
        got = unlaid.plan(files, state)
        want = plan_switch(str(tmp_path), files, layout)
        assert np.array_equal(got[0], want[0]) and got[1] == want[1]

    for live in steps:
        files = every.take(np.resize(np.array(live, dtype=bool), len(every)))
        if grow < len(files):  # the same path at another size: worked out again
            sizes = np.asarray(files.sizes).copy()
            sizes[grow] += 1
            files = dataclasses.replace(files, sizes=sizes)
        same_as_afresh(files)
        same_as_afresh(files)  # again, from what it remembered
        # every path at one size, then each path given its neighbour's statistics
        level = dataclasses.replace(files, sizes=np.full(len(files), 4096, dtype=np.int64))
        same_as_afresh(level)
        same_as_afresh(dataclasses.replace(level, paths=np.roll(np.asarray(level.paths), 1)))
