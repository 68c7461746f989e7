"""Pricing several candidates' virtual files together gives exactly what pricing each alone gives.

The advisor plans every query once over the virtual files of all candidate
layouts stacked together (:func:`lakelayout.advisor.estimate.stacked_fractions`)
when the predicate's rules decide each file alone, and once per candidate
otherwise. Property: on random tables (nulls, NaN, -0.0, infinities,
unicode), random block assignments, any subset of index types and random
predicates over every form the indexes label, the shares are equal, to the
last bit, to one planner call per candidate and query (:func:`bytes_read`).
No Spark.
"""

from __future__ import annotations

import os

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

from ..skipping.test_indexes_property import INDEXES, SCHEMA, predicates, row

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
