"""Re-checking earlier rewrites over the window plans each query once per rewrite across
decisions (pure: no Spark). Consecutive windows share most of their queries; the
decision after 300 TPC-H queries spent ~1 s planning the same ones again."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.advisor import advisor as advisor_module
from lakelayout.advisor.advisor import _saved_bytes
from lakelayout.advisor.estimate import bytes_read
from lakelayout.expr.parse import parse_predicate
from lakelayout.stats.blocks import block_stats

ROWS = 4_000
DATA = pa.table({"ts": np.arange(ROWS, dtype=np.float64), "k": np.arange(ROWS) % 7})
#: before the rewrite: rows in arrival order over ``k``; after: sorted by ``k``
OLD = block_stats(DATA, np.arange(ROWS) % 8)
NEW = block_stats(DATA.take(np.argsort(DATA.column("k"))), np.arange(ROWS) // (ROWS // 8))


def _preds(texts: list[str]) -> list[Any]:
    return [parse_predicate(t, DATA.schema) for t in texts]


def test_each_query_is_planned_once_per_rewrite_across_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planned: list[str] = []

    def counting(pred: Any, files: Any) -> int:
        planned.append(pred.sql())
        return bytes_read(pred, files)

    monkeypatch.setattr(advisor_module, "bytes_read", counting)
    monkeypatch.setattr(advisor_module, "_SAVED", {})
    key = ("file:///t", 7, DATA.schema.to_string())
    first = _preds(["k = 1", "k = 2", "k = 1", "ts < 100"])
    second = _preds(["k = 2", "ts < 100", "k = 3"])
    want = [float(bytes_read(p, OLD) - bytes_read(p, NEW)) for p in first + second]
    assert want[0] > 0  # the rewrite did something for k = 1

    got = _saved_bytes(first, OLD, NEW, key) + _saved_bytes(second, OLD, NEW, key)
    assert got == want
    # two plans (old, new) per distinct text, each text once over both calls
    texts = {p.sql() for p in first + second}
    assert len(texts) == 4 and sorted(planned) == sorted(2 * list(texts))
    # only the latest call's answers are kept (a window's worth)
    assert set(advisor_module._SAVED[key]) == {p.sql() for p in second}
    # another rewrite (or schema) is planned afresh; without a key nothing is kept
    planned.clear()
    _saved_bytes(second, OLD, NEW, ("file:///t", 8, key[2]))
    _saved_bytes(second, OLD, NEW)
    assert len(planned) == 2 * 3 * 2
