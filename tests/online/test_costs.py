"""c(s, q) on virtual files: same answers as the layouts' own estimates, never a lost row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts import HilbertLayout, QdTreeLayout
from lakelayout.layouts.virtual import estimate_by_minmax
from lakelayout.online.costs import VirtualState, files_kept, fraction_read
from lakelayout.stats.model import FileStats


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    rng = np.random.default_rng(4)
    n = 6_000
    return pa.table({"x": rng.uniform(0, 100, n), "y": rng.integers(0, 50, n)})


def workload(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lo = float(rng.uniform(0, 90))
        out.append(
            f"x BETWEEN {lo:.2f} AND {lo + 5:.2f}"
            if rng.random() < 0.5
            else f"y = {int(rng.integers(0, 50))} OR x < {lo / 10:.2f}"
        )
    return out


def test_virtual_costs_of_a_curve_equal_its_min_max_estimate(sample: pa.Table) -> None:
    layout = HilbertLayout.fit(sample, columns=["x", "y"], target_blocks=24)
    sqls = workload(40, 1)
    state = VirtualState(layout, sample)
    preds = [parse_predicate(s, sample.schema) for s in sqls]
    assert state.costs(preds) == pytest.approx(estimate_by_minmax(layout, sqls, sample), abs=1e-3)


def test_the_logical_index_only_removes_files_and_never_a_matching_row(sample: pa.Table) -> None:
    sqls = workload(30, 2)
    layout = QdTreeLayout.fit(sample, sqls, target_blocks=16)
    state = VirtualState(layout, sample)
    blocks = np.asarray(layout.assign(sample))
    for sql in workload(30, 3):  # new constants: the index must stay safe
        p = parse_predicate(sql, sample.schema)
        with_index = files_kept(p, state.files, schema=sample.schema, index=state.index)
        minmax = files_kept(p, state.files, schema=sample.schema)
        assert not (with_index & ~minmax).any()
        matching = np.asarray(evaluate(p, sample), dtype=bool)
        kept_blocks = set(state.index.blocks[with_index].tolist())
        assert set(np.unique(blocks[matching]).tolist()) <= kept_blocks
        assert 0.0 <= state.cost(p) <= fraction_read(p, state.files, schema=sample.schema)


def test_an_empty_table_costs_nothing(sample: pa.Table) -> None:
    p = parse_predicate("x > 1", sample.schema)
    assert fraction_read(p, FileStats.empty(sample.schema), schema=sample.schema) == 0.0
