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


def test_counts_over_many_files_equal_each_files_own_count(tmp_path: Path) -> None:
    """The counter evaluates all the files at once and splits the mask at their bounds:
    the counts are each file's own, with empty files and files of another type among them."""
    from lakelayout.expr.evaluate import evaluate

    rng = np.random.default_rng(7)
    schema = pa.schema([("x", pa.int64()), ("s", pa.string())])
    tables = []
    for k, rows in enumerate([500, 0, 1, 320, 0, 777]):
        x = rng.integers(-50, 50, rows)
        s = [None if v % 7 == 0 else f"v{v % 5}" for v in x]
        tables.append((f"f{k}.parquet", pa.table({"x": x, "s": s}, schema=schema)))
    narrow = pa.schema([("x", pa.int32()), ("s", pa.string())])
    tables.append(("n.parquet", pa.table({"x": [1, 2, 3], "s": ["v1", "v2", None]}, schema=narrow)))
    for name, table in tables:
        pq.write_table(table, tmp_path / name)
    predicate = parse_predicate("(x > 10 AND s IN ('v1', 'v3')) OR s IS NULL", schema)
    expected = [
        int(np.count_nonzero(evaluate(predicate, t))) if t.num_rows else 0 for _, t in tables
    ]
    assert sum(expected) > 0 and len(set(expected)) > 2
    counter = MatchCounter(str(tmp_path), ["x", "s"])
    same_type = [name for name, _ in tables[:-1]]
    assert counter.counts(same_type, predicate).tolist() == expected[:-1]
    assert counter.counts([name for name, _ in tables], predicate).tolist() == expected
    assert counter.counts([], predicate).tolist() == []
    assert counter.counts(["f1.parquet", "f4.parquet"], predicate).tolist() == [0, 0]


def test_counters_sharing_counts_count_each_file_content_once(tmp_path: Path) -> None:
    """Policies' tables hold byte-identical files: counters sharing a SharedCounts count
    a query once per content, and every counter still gets its own files' counts."""
    import shutil

    from lakelayout.evaluation.replay import SharedCounts

    schema = pa.schema([("x", pa.int64())])
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    pq.write_table(pa.table({"x": np.arange(0, 100)}), a / "f0.parquet")
    pq.write_table(pa.table({"x": np.arange(100, 300)}), a / "f1.parquet")
    shutil.copy(a / "f0.parquet", b / "g0.parquet")  # same bytes, another name
    pq.write_table(pa.table({"x": np.arange(0, 300, 2)}), b / "g1.parquet")  # other content
    shared = SharedCounts()
    first = MatchCounter(str(a), ["x"], shared=shared)
    second = MatchCounter(str(b), ["x"], shared=shared)
    alone = MatchCounter(str(b), ["x"])
    even = parse_predicate("x % 2 = 0 AND x >= 50", schema)
    assert first.counts(["f0.parquet", "f1.parquet"], even).tolist() == [25, 100]
    assert len(shared.for_predicate(even)) == 2
    got = second.counts(["g1.parquet", "g0.parquet"], even).tolist()
    assert got == alone.counts(["g1.parquet", "g0.parquet"], even).tolist() == [125, 25]
    assert len(shared.for_predicate(even)) == 3  # g0 was f0's count: one new content
    # another query (another bound predicate) starts afresh: no count of `even` is served
    odd = parse_predicate("x % 2 = 1", schema)
    assert second.counts(["g0.parquet", "g1.parquet"], odd).tolist() == [50, 0]
    assert first.counts(["f0.parquet"], odd).tolist() == [50]
    assert len(shared.for_predicate(odd)) == 2
