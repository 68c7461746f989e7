"""Pricing several candidates' virtual files together gives exactly what pricing each alone gives.

The advisor plans every query once over the virtual files of all candidate
layouts stacked together (:func:`lakelayout.advisor.estimate.stacked_fractions`)
when the predicate's rules decide each file alone, and once per candidate
otherwise. Property: on random tables (nulls, NaN, -0.0, infinities,
unicode), random block assignments, any subset of index types and random
predicates over every form the indexes label, the shares are equal, to the
last bit, to one planner call per candidate and query (:func:`bytes_read`);
and the same on rows drawn from the edge tables (DECIMAL(38, s) at both ends,
subnormal and extreme floats, the first and last dates and timestamps,
struct fields, a column named ``st.x``, IN lists with NULL, expressions),
whose bounds the stack concatenates. No Spark.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.advisor.estimate import VirtualFiles, bytes_read, stacked_fractions, virtual_files
from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr.nodes import Predicate
from lakelayout.expr.parse import parse_predicate
from lakelayout.stats.model import FileStats

from ..expr.predicates import extreme_predicates, extreme_table, planner_predicates, planner_table
from ..skipping.test_indexes_property import (
    EXTREME,
    EXTREME_INDEXES,
    INDEXES,
    SCHEMA,
    predicates,
    row,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "150"))


def alone(files: VirtualFiles, predicate: Predicate) -> float:
    """The reference: one planner call on this set of virtual files only."""
    total = float(files.stats.total_bytes)
    kept = bytes_read(predicate, files.stats, indexes=files.indexes, metadata=files.metadata)
    return kept / total if total > 0 else 0.0


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(row, min_size=1, max_size=30),
    layouts=st.lists(st.lists(st.integers(0, 5), min_size=30, max_size=30), min_size=2, max_size=4),
    chosen=st.lists(st.sampled_from(range(len(INDEXES))), max_size=5, unique=True),
    texts=st.lists(predicates, min_size=1, max_size=6),
)
def test_stacked_shares_equal_each_candidate_priced_alone(
    rows: list[tuple[object, ...]], layouts: list[list[int]], chosen: list[int], texts: list[str]
) -> None:
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA
    )
    indexes = [INDEXES[k] for k in chosen]
    sets = [virtual_files(table, np.asarray(ids[: len(rows)]), indexes) for ids in layouts]
    bound = []
    for text in texts:
        try:
            bound.append(parse_predicate(text, SCHEMA))
        except PredicateError:
            continue
    bound += bound[:1]  # a repeated query: priced once, reported twice
    got = stacked_fractions(sets, bound)
    assert len(got) == len(sets)
    for files, shares in zip(sets, got, strict=True):
        assert shares.tolist() == [alone(files, p) for p in bound]
        assert shares.tolist() == files.fractions(bound).tolist()


#: edge tables, their predicate grammars and the indexes they carry
EDGES = {
    "planner": (planner_table(), planner_predicates(max_leaves=3), []),
    "extreme": (extreme_table(), extreme_predicates(max_leaves=2), []),
    "extreme-indexed": (EXTREME, extreme_predicates(max_leaves=2), EXTREME_INDEXES),
}


@st.composite
def edge_cases(draw: st.DrawFn) -> tuple[pa.Table, list[np.ndarray], list[object], list[str]]:
    base, grammar, indexes = EDGES[draw(st.sampled_from(sorted(EDGES)))]
    rows = draw(st.lists(st.integers(0, base.num_rows - 1), min_size=1, max_size=24))
    n = len(rows)
    layouts = draw(
        st.lists(st.lists(st.integers(0, 4), min_size=n, max_size=n), min_size=2, max_size=4)
    )
    texts = draw(st.lists(grammar, min_size=1, max_size=5))
    table = base.take(pa.array(rows))
    return table, [np.asarray(ids) for ids in layouts], list(indexes), texts


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=edge_cases())
def test_stacked_shares_equal_each_candidate_priced_alone_at_the_edges_of_every_type(
    case: tuple[pa.Table, list[np.ndarray], list[Any], list[str]],
) -> None:
    table, layouts, indexes, texts = case
    sets = [virtual_files(table, ids, indexes) for ids in layouts]
    bound = []
    for text in texts:
        try:
            bound.append(parse_predicate(text, table.schema))
        except PredicateError:
            continue
    got = stacked_fractions(sets, bound)
    for files, shares in zip(sets, got, strict=True):
        assert shares.tolist() == [alone(files, p) for p in bound]


def test_file_stats_concat_keeps_each_part_in_order() -> None:
    table = pa.table({"x": pa.array([3, 1, 2, 5], pa.int64()), "s": ["b", "a", None, "c"]})
    first = virtual_files(table, np.array([0, 0, 1, 1])).stats
    second = virtual_files(table, np.array([0, 1, 2, 3])).stats
    both = FileStats.concat([first, second])
    assert len(both) == len(first) + len(second) == 6
    assert both.sizes.tolist() == first.sizes.tolist() + second.sizes.tolist()
    x = both.columns["x"]
    assert x.min.to_pylist() == [1, 2, 3, 1, 2, 5]
    assert x.max.to_pylist() == [3, 5, 3, 1, 2, 5]
    assert both.columns["s"].null_count.tolist() == [0, 1, 0, 0, 1, 0]
    with pytest.raises(InvalidOption, match="at least one"):
        FileStats.concat([])
    with pytest.raises(InvalidOption, match="same columns"):
        FileStats.concat([first, virtual_files(table.select(["x"]), np.zeros(4)).stats])
