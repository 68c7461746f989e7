"""The replay's driver-side match counter: correct counts within its cache budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelayout.evaluation.replay import MatchCounter
from lakelayout.expr.parse import parse_predicate


def test_match_counter_cache_stays_within_its_budget(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64())])
    paths = []
    for k in range(4):
        name = f"f{k}.parquet"
        pq.write_table(pa.table({"x": np.arange(k * 1000, (k + 1) * 1000)}), tmp_path / name)
        paths.append(name)
    sizes = [pq.read_table(tmp_path / name, columns=["x"]).nbytes for name in paths]
    budget = 2 * max(sizes)
    predicate = parse_predicate("x % 10 = 0 AND x >= 1500", schema)
    unbounded = MatchCounter(str(tmp_path), ["x"])
    bounded = MatchCounter(str(tmp_path), ["x"], max_bytes=budget)
    expected = [0, 50, 100, 100]
    for _ in range(2):
        assert unbounded.counts(paths, predicate).tolist() == expected
        assert bounded.counts(paths, predicate).tolist() == expected
        assert bounded.cached_bytes <= budget < sum(sizes)
    assert unbounded.cached_bytes == sum(sizes)
    unbounded.forget_except({paths[0]})
    assert unbounded.cached_bytes == sizes[0]
