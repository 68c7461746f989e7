"""A recommended rewrite leaves the files already in one block of its layout in place
(pure: no Spark).

Half of the candidate files hold ``ts`` ranges in arrival order below every
range the workload asks for; the other half hold the rows the queries read,
in random order. A Qd-tree fitted on the workload puts each ordered file in
one block, so the rewrite keeps them and is priced on the rest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pyarrow as pa

from lakelayout.advisor.benefit import BenefitConfig
from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.advisor.recommend import Inputs, Recommendation, recommend
from lakelayout.expr.parse import parse_predicate
from lakelayout.stats.blocks import block_stats

ROWS = 4_800
FILES = 16
PER_FILE = ROWS // FILES
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
#: rewrites cheap next to reads: a rewrite of these small files pays
MODEL = dataclasses.replace(
    DEFAULTS, rewrite_fixed_seconds=0.01, rewrite_per_file_seconds=0.0, query_seconds_per_byte=1e-6
)


def _data(ordered_half: bool) -> pa.Table:
    rng = np.random.default_rng(7)
    half = ROWS // 2
    if ordered_half:
        # rows 0 .. half-1: ts in [0, 500) ascending (8 files of consecutive ranges); then
        # the part every query reads, in random order
        ts = np.concatenate([np.sort(rng.uniform(0, 500, half)), rng.uniform(500, 1000, half)])
    else:
        ts = rng.uniform(0, 1000, ROWS)  # every file spans every block
    return pa.table({"id": np.arange(ROWS), "ts": ts, "amount": rng.uniform(0, 100, ROWS)})


def _inputs(data: pa.Table) -> Inputs:
    file_of_row = np.arange(ROWS) // PER_FILE
    files = block_stats(data, file_of_row)
    rng = np.random.default_rng(3)
    texts = [f"ts BETWEEN {lo:.1f} AND {lo + 40:.1f}" for lo in rng.uniform(500, 960, 40)]
    parsed = {t: parse_predicate(t, data.schema) for t in texts}
    return Inputs(
        predicates=[parsed[t] for t in texts],
        timestamps=[T0 + dt.timedelta(minutes=i) for i in range(len(texts))],
        sample=data,
        sample_files=file_of_row,
        candidate_files=files,
        other_bytes=0,
        target_file_size=int(files.total_bytes // FILES),
        schema=data.schema,
    )


def _recommend(inputs: Inputs, *, bounds: bool = True) -> Recommendation:
    return recommend(
        dataclasses.replace(inputs),
        model=MODEL,
        # routing priced at a fixed cost per row: the two decisions compared are alike
        benefit=BenefitConfig(
            horizon_queries=1000.0, fit_seconds_per_row=0.0, route_seconds_per_row=1e-6
        ),
        families=("qdtree",),
        bounds=bounds,
    )


def test_a_rewrite_keeps_the_files_already_in_one_block_and_is_priced_on_the_rest() -> None:
    data = _data(ordered_half=True)
    inputs = _inputs(data)
    rec = _recommend(inputs)
    assert rec.rewrite and rec.chosen is not None and rec.layout is not None
    paths = [str(p) for p in inputs.candidate_files.paths]
    ordered = paths[: FILES // 2]
    assert sorted(rec.keep) == sorted(ordered)
    assert rec.chosen.kept_files == len(ordered)
    sizes = np.asarray(inputs.candidate_files.sizes)
    assert rec.chosen.kept_bytes == int(sizes[: FILES // 2].sum())
    # each kept file is recorded as the block every one of its rows is routed to
    blocks = np.asarray(rec.layout.assign(data))
    for k, path in enumerate(paths[: FILES // 2]):
        assert set(blocks[k * PER_FILE : (k + 1) * PER_FILE].tolist()) == {rec.keep[path]}
    # the same layout priced as a rewrite of every file: the decision's basis
    (full,) = [e for e in rec.estimates if e.layout == rec.chosen.layout]
    assert full.kept_files == 0 and full.pays
    assert rec.chosen.cost_seconds < full.cost_seconds
    # no query reads the kept files: keeping them saves the same bytes per query
    assert abs(rec.chosen.saved_bytes_per_query - full.saved_bytes_per_query) <= 1e-9 * sizes.sum()
    assert rec.chosen.net_seconds > full.net_seconds
    assert f"keeps the {len(ordered)} file(s)" in rec.reason
    # the early exits do not change what is decided, kept files included
    exact = _recommend(inputs, bounds=False)
    assert exact.keep == rec.keep and exact.chosen == rec.chosen


def test_files_that_span_blocks_are_all_rewritten() -> None:
    rec = _recommend(_inputs(_data(ordered_half=False)))
    assert rec.rewrite and rec.chosen is not None
    assert rec.keep == {} and rec.chosen.kept_files == 0
    assert "keeps" not in rec.reason
