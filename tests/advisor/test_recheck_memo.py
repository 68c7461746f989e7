"""Re-checking earlier rewrites over the window plans each query once per rewrite across
decisions (pure: no Spark). Consecutive windows share most of their queries; the
decision after 300 TPC-H queries spent ~1 s planning the same ones again."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.advisor import advisor as advisor_module
from lakelayout.advisor.advisor import _saved_bytes
from lakelayout.advisor.estimate import bytes_read, read_plan
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.stats_rules import FileStack
from lakelayout.stats.blocks import block_stats

ROWS = 4_000
DATA = pa.table(
    {
        "ts": np.arange(ROWS, dtype=np.float64),
        "k": np.arange(ROWS) % 7,
        # INT_MAX in one row: ``i + 1`` overflows on its file's bounds
        "i": pa.array([*range(ROWS - 1), 2**31 - 1], pa.int32()),
    }
)
#: before the rewrite: rows in arrival order over ``k``; after: sorted by ``k``
OLD = block_stats(DATA, np.arange(ROWS) % 8)
NEW = block_stats(DATA.take(np.argsort(DATA.column("k"))), np.arange(ROWS) // (ROWS // 8))


def _preds(texts: list[str]) -> list[Any]:
    return [parse_predicate(t, DATA.schema) for t in texts]


def test_each_query_is_planned_once_per_rewrite_across_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One planner call per distinct text over both sides stacked; a text whose rule
    gives up on the stack (``i + 1`` at INT_MAX) is planned again on each side."""
    planned: list[str] = []
    alone: list[str] = []

    def stacked(pred: Any, files: Any) -> Any:
        planned.append(pred.sql())
        return read_plan(pred, files)

    def each(pred: Any, files: Any) -> int:
        alone.append(pred.sql())
        return bytes_read(pred, files)

    monkeypatch.setattr(advisor_module, "read_plan", stacked)
    monkeypatch.setattr(advisor_module, "bytes_read", each)
    monkeypatch.setattr(advisor_module, "_SAVED", {})
    key = ("file:///t", 7, DATA.schema.to_string())
    first = _preds(["k = 1", "k = 2", "k = 1", "ts < 100", "i + 1 = 5"])
    second = _preds(["k = 2", "ts < 100", "k = 3", "i + 1 = 5"])
    want = [float(bytes_read(p, OLD) - bytes_read(p, NEW)) for p in first + second]
    assert want[0] > 0  # the rewrite did something for k = 1

    got = _saved_bytes(first, OLD, NEW, key) + _saved_bytes(second, OLD, NEW, key)
    assert got == want
    # one stacked plan per distinct text, each text once over both calls
    texts = {p.sql() for p in first + second}
    overflow = parse_predicate("i + 1 = 5", DATA.schema).sql()
    assert len(texts) == 5 and sorted(planned) == sorted(texts)
    assert alone == [overflow, overflow]  # gave up on the stack: each side alone
    # only the latest call's answers are kept (a window's worth)
    assert set(advisor_module._SAVED[key]) == {p.sql() for p in second}
    # another rewrite (or schema) is planned afresh; without a key nothing is kept
    planned.clear()
    _saved_bytes(second, OLD, NEW, ("file:///t", 8, key[2]))
    _saved_bytes(second, OLD, NEW)
    assert len(planned) == 2 * 4


def test_files_of_two_versions_that_do_not_stack_are_planned_side_by_side() -> None:
    """Real files of two versions may keep statistics on other columns (a changed
    ``delta.dataSkippingNumIndexedCols``) or have another schema (a column added): the
    re-check plans each side alone and gives the same answers."""
    no_i = dataclasses.replace(NEW, columns={k: c for k, c in NEW.columns.items() if k != "i"})
    wider = DATA.append_column("extra", pa.array(np.zeros(ROWS)))
    other_schema = block_stats(wider, np.arange(ROWS) // (ROWS // 8))
    preds = _preds(["k = 1", "i < 10", "ts < 100 OR k = 3"])
    for new in (no_i, other_schema):
        assert FileStack.of_any([OLD, new]) is None
        want = [float(bytes_read(p, OLD) - bytes_read(p, new)) for p in preds]
        assert _saved_bytes(preds, OLD, new) == want
    assert FileStack.of_any([OLD, NEW]) is not None
