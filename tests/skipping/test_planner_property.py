"""Property: the planner never drops a file holding a matching row, on the kinds issue 11 added.

The edge-case table (with a struct column and a column named ``st.x``) is split
into random files; their statistics go through the real path (collector ->
Delta stats JSON -> FileStats), named as lakelayout's files or as another
writer's (which changes how timestamp maxima are read), and as virtual files
(``block_stats``). Predicates mix the general grammar with the new kinds
(:func:`tests.expr.predicates.planner_predicates`). The row-level truth is
:func:`lakelayout.expr.evaluate.evaluate`, itself checked against Spark by the
differential test.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.errors import PredicateError
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.planner import plan
from lakelayout.skipping.stats_rules import all_rows_match
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.delta_stats import from_delta_stats
from lakelayout.table.collect import StatsCollector, stats_json

from ..expr.predicates import edge_predicates, planner_predicates, planner_table

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "150"))
TABLE = planner_table()


PLAN_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _plans(predicates: st.SearchStrategy[str]) -> Any:
    """``@given`` of a property over files of :data:`TABLE` and 8 of ``predicates``."""
    return given(
        owners=st.lists(st.integers(0, 3), min_size=TABLE.num_rows, max_size=TABLE.num_rows),
        own=st.booleans(),
        preds=st.lists(predicates, min_size=8, max_size=8),
        # Europe/Oslo: a region zone whose pre-1970 offsets only Spark decides
        timezone=st.sampled_from(["UTC", "America/New_York", "+05:30", "Europe/Oslo"]),
    )


@PLAN_SETTINGS
@_plans(planner_predicates())
def test_property_plan_keeps_every_file_with_a_match(
    owners: list[int], own: bool, preds: list[str], timezone: str
) -> None:
    check_plan(owners, own, preds, timezone)


@PLAN_SETTINGS
@_plans(edge_predicates(max_leaves=3))
def test_property_plan_keeps_every_file_with_a_match_on_the_edge_kinds(
    owners: list[int], own: bool, preds: list[str], timezone: str
) -> None:
    """``<=>`` / IS DISTINCT FROM with NULL, IN lists mixing NULL and NaN, date arithmetic,
    casts and chains of string functions (:func:`tests.expr.predicates.edge_predicates`)."""
    check_plan(owners, own, preds, timezone)


def check_plan(owners: list[int], own: bool, preds: list[str], timezone: str) -> None:
    """The planner and ``all_rows_match`` over files of :data:`TABLE` split by ``owners``,
    against :func:`evaluate` of each file's rows."""
    blocks = np.asarray(owners)
    ids = sorted(set(owners))
    parts = [TABLE.filter(pa.array(blocks == k)) for k in ids]
    stats = []
    for part in parts:
        collector = StatsCollector(TABLE.schema, string_prefix_length=3)
        collector.add(part)
        stats.append(stats_json(collector.result()))
    prefix = "ll-" if own else "part-"
    real = from_delta_stats(
        stats, TABLE.schema, paths=[f"{prefix}{k}" for k in ids], string_prefix_length=3
    )
    virtual = block_stats(TABLE, blocks)
    for text in preds:
        pred = parse_predicate(text, TABLE.schema, timezone=timezone)
        try:
            truth = np.array([evaluate(pred, part, timezone=timezone).any() for part in parts])
            every = np.array([evaluate(pred, part, timezone=timezone).all() for part in parts])
        except PredicateError:
            continue  # an ANSI error (overflow): Spark fails the query, nothing to lose
        for files in (real, virtual):
            keep = plan(pred, files, timezone=timezone).keep
            assert not (truth & ~keep).any(), (text, own, timezone, keep.tolist(), truth.tolist())
            strict = all_rows_match(pred, files, timezone=timezone)
            assert not (strict & ~every).any(), (text, "all_rows_match", strict.tolist())
