"""The advisor's caches on real tables: the same decision warm or cold, and never a
stale sample after an append or a DELETE (real Spark, real Delta tables)."""

from __future__ import annotations

import dataclasses
import math
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.advisor import advisor as advisor_module
from lakelayout.advisor.advisor import _unclustered
from lakelayout.advisor.benefit import BenefitConfig
from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.advisor.decisions import DecisionLog
from lakelayout.advisor.recommend import Recommendation
from lakelayout.api import Table
from lakelayout.expr import parse as parse_module
from lakelayout.table.datafile import DataFile

from .test_auto import CHEAP, _batch, _filtered_scans

#: the decisions compared here must not differ by what the timed parts of a rewrite's
#: price (index collection, tree routing) measured on each run
FIXED_TIMINGS = {"collect_seconds_per_row": 0.0, "route_seconds_per_row": 1e-6}

pytestmark = pytest.mark.spark


def _scans(t: Table, n: int) -> None:
    rng = np.random.default_rng(3)
    for i in range(n):
        lo = rng.uniform(0, 950)
        extra = " AND tag LIKE '%1%'" if i % 2 else ""
        t.scan(f"ts BETWEEN {lo:.1f} AND {lo + 30:.1f}{extra}", columns=["id"])


def _decided(rec: Recommendation) -> dict[str, Any]:
    """The decision and every number behind it, without the timings."""
    doc = rec.to_dict()
    doc.pop("seconds")
    doc.pop("fit_seconds")
    for e in doc["estimates"]:
        e.pop("fit_seconds", None)
    return doc


def _assert_close(a: Any, b: Any, path: str = "") -> None:
    """``a == b``, floats within a relative 1e-3."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for key in a:
            _assert_close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-3), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _cold() -> None:
    advisor_module._SAMPLES.clear()
    parse_module._MEMO.clear()


def test_the_decision_is_the_same_with_cold_caches_warm_caches_and_no_bounds(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Table.create(str(tmp_path / "t"), _batch(spark, 0, 6000, 6), target_file_size=15_000)
    _scans(t, 12)
    t.advisor.model = CHEAP
    t.advisor.benefit = BenefitConfig(horizon_queries=1000, min_queries=5, **FIXED_TIMINGS)
    t.advisor.families = ("zorder", "sop-z", "qdtree", "pando")  # pando shares qdtree's cuts
    _cold()
    cold = t.advisor.recommend()
    assert cold.rewrite and cold.chosen is not None and cold.analysis is not None
    assert cold.analysis.curve == ["ts"] and cold.analysis.sop == ["tag LIKE '%1%'"]
    assert len(cold.estimates) == 4  # every family was fitted and priced
    warm = t.advisor.recommend()  # sample and parsed window from the caches
    assert _decided(warm) == _decided(cold)
    reads: list[str] = []
    rows = DecisionLog.rows
    monkeypatch.setattr(DecisionLog, "rows", lambda log: reads.append(log.path) or rows(log))
    assert _decided(t.advisor.recommend()) == _decided(cold)
    assert len(reads) == 1  # one read of the decision log for the candidates and the model
    monkeypatch.undo()
    t.advisor.bounds = False
    assert _decided(t.advisor.recommend()) == _decided(cold)

    # a decision the bound answers: the default model on this tiny table, a few queries
    t.advisor.model = DEFAULTS
    t.advisor.benefit = BenefitConfig(horizon_queries=20, min_queries=5, **FIXED_TIMINGS)
    full = t.advisor.recommend()
    t.advisor.bounds = True
    quick = t.advisor.recommend()
    assert not full.rewrite and not quick.rewrite and full.estimates and not quick.estimates
    assert quick.reason.startswith("no rewrite: even a layout that made the recent queries")
    assert quick.analysis is not None and full.analysis is not None
    # the same features (without a sample the analysis cannot check correlations, and
    # says so in its notes; no feature here is correlated with another)
    assert [(f.key, f.kind, f.status) for f in quick.analysis.features] == [
        (f.key, f.kind, f.status) for f in full.analysis.features
    ]


def test_an_append_samples_the_new_files_and_reuses_the_old_ones(
    spark: Any, tmp_path: Path
) -> None:
    t = Table.create(str(tmp_path / "t"), _batch(spark, 0, 4000, 4), target_file_size=20_000)
    _cold()
    snap = t.snapshot()
    files = _unclustered(t.uri, snap.files)
    sample, ids = t.advisor._sample(files, snap)
    assert sample.num_rows == 4000 and set(ids.tolist()) == {0, 1, 2, 3}  # the whole table
    old = {key[1]: cached.rows for key, cached in advisor_module._SAMPLES.items()}

    t.append(_batch(spark, 4000, 2000, 2))
    snap = t.snapshot()
    files = _unclustered(t.uri, snap.files)
    sample, ids = t.advisor._sample(files, snap)
    assert len(files) == 6 and set(ids.tolist()) == set(range(6))
    assert sorted(sample.column("id").to_pylist()) == list(range(6000))  # the new rows too
    paths = [str(p) for p in files.paths]
    for position, path in enumerate(paths):  # each row is attributed to its own file
        got = sample.filter(pa.array(ids == position)).column("id").to_numpy()
        assert len(got) and ((got < 4000).all() if path in old else (got >= 4000).all())
    for key, cached in advisor_module._SAMPLES.items():  # the old files were not read again
        if key[1] in old:
            assert cached.rows is old[key[1]]


def test_files_sampled_by_several_threads_give_the_sample_of_one(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Table.create(str(tmp_path / "t"), _batch(spark, 0, 40_000, 8), target_file_size=20_000)
    t.advisor.sample_rows = 5_000  # a fraction of each file: the draws matter
    snap = t.snapshot()
    files = _unclustered(t.uri, snap.files)
    threads = []
    real = advisor_module._driver_sample

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(advisor_module, "_driver_sample", spy)
    samples = {}
    for n in (1, 4):
        monkeypatch.setattr(advisor_module, "_SAMPLE_THREADS", n)
        monkeypatch.setattr(advisor_module.os, "cpu_count", lambda: 4)
        _cold()
        threads.clear()
        ts_only, _ = t.advisor._sample(files, snap, ["ts"])
        both, ids = t.advisor._sample(files, snap, ["ts", "tag"])  # extends the cached ones
        samples[n] = (ts_only, both, ids)
        # every file read twice (all columns, then the missing one), by the pool's threads
        assert len(threads) == 2 * len(files)
        on_main = {i == threading.main_thread().ident for i in threads}
        assert on_main == {n == 1}
    (ts1, both1, ids1), (ts4, both4, ids4) = samples[1], samples[4]
    assert 3_000 < ts1.num_rows < 7_000
    assert ts4.equals(ts1) and both4.equals(both1) and (ids4 == ids1).all()
    assert both1.column("ts").equals(ts1.column("ts"))


def test_a_files_draws_come_from_what_it_holds_not_its_random_name() -> None:
    f = DataFile("part-00000-1b2c.parquet", 4096, 100, {"p": "1"})
    seed = advisor_module._sample_seed
    # the same data written again under another random name is sampled alike
    assert seed(dataclasses.replace(f, path="part-00000-9f8e.parquet")) == seed(f)
    others = [
        dataclasses.replace(f, size=4097),
        dataclasses.replace(f, num_records=99),
        dataclasses.replace(f, partition_values={"p": "2"}),
        dataclasses.replace(f, deleted_rows=np.array([3], dtype=np.int64)),
        dataclasses.replace(f, deleted_rows=np.array([4], dtype=np.int64)),
    ]
    assert len({seed(f), *(seed(o) for o in others)}) == 1 + len(others)


def test_a_delete_as_deletion_vectors_is_never_served_from_the_cache(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "dv")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, ts DOUBLE)
            USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"""
    )
    spark.sql("SELECT id, CAST(id AS DOUBLE) AS ts FROM range(600)").repartition(2).write.format(
        "delta"
    ).mode("append").save(path)
    t = Table(path, spark=spark)
    _cold()
    snap = t.snapshot()
    before, _ = t.advisor._sample(_unclustered(t.uri, snap.files), snap)
    assert sorted(before.column("id").to_pylist()) == list(range(600))

    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 0")
    snap = t.snapshot()
    assert snap.has_deletion_vectors  # the same files, some rows hidden
    assert {str(p) for p in snap.files.paths} == {k[1] for k in advisor_module._SAMPLES}
    after, _ = t.advisor._sample(_unclustered(t.uri, snap.files), snap)
    assert sorted(after.column("id").to_pylist()) == [i for i in range(600) if i % 4]

    # a small input is sampled on the driver (no Spark job); it reads the same live rows
    # as the Spark job that samples large inputs: deletion vectors applied in both
    paths = [str(p) for p in snap.files.paths]
    names = snap.schema.names
    by_spark = t.advisor._spark_sample(paths, snap, 1.0, names)
    for p, f in zip(paths, snap.data_files_for(paths), strict=True):
        on_driver = advisor_module._driver_sample(t.uri, snap, f, 1.0, names)
        assert on_driver.schema == by_spark[p].schema
        assert sorted(on_driver.to_pylist(), key=str) == sorted(by_spark[p].to_pylist(), key=str)
        some = advisor_module._driver_sample(t.uri, snap, f, 0.5, names)
        assert some.equals(advisor_module._driver_sample(t.uri, snap, f, 0.5, names))
        live = set(on_driver.column("id").to_pylist())
        assert set(some.column("id").to_pylist()) < live and some.num_rows > 0
        # the rows drawn do not depend on the columns read
        ids = advisor_module._driver_sample(t.uri, snap, f, 0.5, ["id"])
        assert ids.column_names == ["id"] and ids.column("id").equals(some.column("id"))
    only_ts = t.advisor._spark_sample(paths, snap, 1.0, ["ts"])
    assert all(only_ts[p].column_names == ["ts"] for p in paths)


def test_the_sample_reads_only_the_columns_the_window_reads_and_decides_the_same(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Columns no logged predicate reads are not sampled (NULL in the sample); the
    decision is the one a sample of every column gives; a later window that reads
    another column samples the files again with both."""
    t = Table.create(str(tmp_path / "t"), _batch(spark, 0, 6000, 6), target_file_size=15_000)
    _filtered_scans(t, 12)  # ts only
    t.advisor.model = CHEAP
    t.advisor.benefit = BenefitConfig(horizon_queries=1000, min_queries=5, **FIXED_TIMINGS)
    t.advisor.families = ("zorder", "qdtree")
    _cold()
    projected = t.advisor.recommend()
    assert projected.rewrite and projected.estimates
    assert {tuple(c.rows.column_names) for c in advisor_module._SAMPLES.values()} == {("ts",)}
    snap = t.snapshot()
    files = _unclustered(t.uri, snap.files)
    sample, _ = t.advisor._sample(files, snap, ["ts"])
    assert sample.schema == snap.schema  # the table's columns, unread ones NULL
    assert sample.column("id").null_count == sample.num_rows
    assert sample.column("ts").null_count == 0

    _cold()
    monkeypatch.setattr(advisor_module, "read_columns", lambda predicates, schema: None)
    every = t.advisor.recommend()
    assert {len(c.rows.column_names) for c in advisor_module._SAMPLES.values()} == {3}
    # the same decision; the numbers agree but for the rounding of virtual file sizes
    # to whole bytes (rows × the average row size, which the unread columns change)
    _assert_close(_decided(every), _decided(projected))
    monkeypatch.undo()

    _cold()
    t.advisor.recommend()
    before = {k[1]: c.rows for k, c in advisor_module._SAMPLES.items()}
    reads: list[list[str]] = []
    sample = advisor_module._driver_sample
    monkeypatch.setattr(
        advisor_module,
        "_driver_sample",
        lambda uri, snap, f, fraction, columns: (
            reads.append(list(columns)) or sample(uri, snap, f, fraction, columns)
        ),
    )
    _scans(t, 12)  # ts and tag
    extended = t.advisor.recommend()
    monkeypatch.undo()
    assert {tuple(c.rows.column_names) for c in advisor_module._SAMPLES.values()} == {("ts", "tag")}
    # each cached file read only the new column, for the same rows in the same order
    assert reads == [["tag"]] * len(before)
    for key, cached in advisor_module._SAMPLES.items():
        assert cached.rows.column("ts").equals(before[key[1]].column("ts"))
    # and the sample is the one a cold read of both columns draws: the same decision
    extended_samples = {k: c.rows for k, c in advisor_module._SAMPLES.items()}
    _cold()
    assert _decided(t.advisor.recommend()) == _decided(extended)
    for key, cached in advisor_module._SAMPLES.items():
        assert cached.rows.equals(extended_samples[key])


def test_a_rewrite_is_never_answered_from_another_table_at_its_path_and_the_cache_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files a rewrite replaced and wrote were kept per (path, version) for good: a
    table deleted and created again at the same path got the old table's files for its
    own version (its advisor measured the wrong rewrite), and a long-lived process kept
    every rewrite of every table it decided for (an audit). No Spark: delta-rs compacts."""
    from deltalake import DeltaTable

    def rows(k: int) -> pa.Table:
        return pa.table({"id": pa.array(range(k * 100, k * 100 + 100), pa.int64())})

    def rewritten(first: int) -> tuple[Table, set[str]]:
        t = Table.create(str(tmp_path / "t"), rows(first))
        t.append(rows(first + 1))
        DeltaTable(t.uri).optimize.compact()  # version 2: two files into one
        written = {str(p) for p in t.snapshot().files.paths}
        return t, written

    monkeypatch.setattr(advisor_module, "_REWRITES", {})
    t, written = rewritten(0)
    found = advisor_module._rewrite_files(t.uri, 2)
    assert found is not None and {str(p) for p in found[1].paths} == written
    assert len(found[0]) == 2
    shutil.rmtree(tmp_path / "t")
    t, again = rewritten(5)
    assert again.isdisjoint(written)
    found = advisor_module._rewrite_files(t.uri, 2)
    assert found is not None and {str(p) for p in found[1].paths} == again

    monkeypatch.setattr(advisor_module, "_MAX_REWRITES", 3)
    for k in range(3, 9):  # more rewrites than the cache holds
        t.append(rows(10 + k))
        DeltaTable(t.uri).optimize.compact()
        assert advisor_module._rewrite_files(t.uri, t.version) is not None
        assert len(advisor_module._REWRITES) <= 3
