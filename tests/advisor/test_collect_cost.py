"""A rewrite is priced with what collecting the table's declared indexes costs on its
rows, timed on the sample (pure: no Spark).

The calibration's rewrites collect no index, so before this term a table whose
indexes call a Python UDF or hash long strings was priced many times too low
(the logs replay: 15-19x on its first rewrite).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.advisor.benefit import BenefitConfig
from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.advisor.recommend import Inputs, Recommendation, recommend, spread_over_tasks
from lakelayout.errors import InvalidOption
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes import ValueList, elementwise
from lakelayout.stats.blocks import block_stats

ROWS = 48_000
#: the sample: every tenth row (the collection is priced over all rows of the files)
SAMPLED = ROWS // 10
FILES = 16
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
MODEL = dataclasses.replace(
    DEFAULTS, rewrite_fixed_seconds=0.01, rewrite_per_file_seconds=0.0, query_seconds_per_byte=1e-6
)
#: the slow function sleeps this long per call: once per distinct bucket (4) of a call
SLEEP = 0.005
#: the least the slow index's collection costs, priced over every row on one core
LEAST = 4 * SLEEP * ROWS / SAMPLED


def _slow(bucket: int) -> int:
    time.sleep(SLEEP)
    return bucket * 2


def _data() -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table(
        {
            "ts": rng.uniform(0, 1000, ROWS),
            "bucket": rng.integers(0, 4, ROWS),
            "amount": rng.uniform(0, 100, ROWS),
        }
    )


def _inputs(data: pa.Table, *, slow_index: bool, parallelism: int = 1) -> Inputs:
    file_of_row = np.arange(ROWS) // (ROWS // FILES)
    files = block_stats(data, file_of_row)
    rng = np.random.default_rng(3)
    texts = [f"ts BETWEEN {lo:.1f} AND {lo + 40:.1f}" for lo in rng.uniform(0, 960, 40)]
    indexes = []
    if slow_index:
        declared = ValueList(
            "slow(bucket)", functions={"slow": "int64"}, udfs={"slow": elementwise(_slow)}
        )
        indexes = [declared.bind(data.schema)]
    sampled = np.arange(0, ROWS, ROWS // SAMPLED)
    return Inputs(
        predicates=[parse_predicate(t, data.schema) for t in texts],
        timestamps=[T0 + dt.timedelta(minutes=i) for i in range(len(texts))],
        sample=data.take(pa.array(sampled)),
        sample_files=file_of_row[sampled],
        candidate_files=files,
        other_bytes=0,
        target_file_size=int(files.total_bytes // FILES),
        schema=data.schema,
        indexes=indexes,
        parallelism=parallelism,
    )


def _recommend(inputs: Inputs, horizon: float, *, bounds: bool = True) -> Recommendation:
    return recommend(
        inputs,
        model=MODEL,
        benefit=BenefitConfig(horizon_queries=horizon, margin=1.0, fit_seconds_per_row=0.0),
        families=("zorder",),
        bounds=bounds,
    )


def test_the_collection_is_timed_on_the_sample_and_added_to_each_rewrite() -> None:
    data = _data()
    plain = _recommend(_inputs(data, slow_index=False), 1000.0)
    (without,) = plain.estimates
    for parallelism in (1, 2):
        rec = _recommend(_inputs(data, slow_index=True, parallelism=parallelism), 1000.0)
        # one call per distinct bucket, each at least SLEEP long, over the sample's rows
        assert rec.collect_seconds_per_row >= 4 * SLEEP / SAMPLED
        assert rec.collect_seconds_per_row > plain.collect_seconds_per_row
        assert rec.inputs["collect_seconds_per_row"] == rec.collect_seconds_per_row
        (with_index,) = rec.estimates
        tasks = min(parallelism, with_index.files_after)
        expected = rec.collect_seconds_per_row * ROWS / tasks
        assert with_index.collect_seconds == pytest.approx(expected)
        assert with_index.collect_seconds >= LEAST / tasks
        # the rest of the price is the index-free one: the index labels no query here
        assert with_index.cost_seconds - with_index.collect_seconds == pytest.approx(
            without.cost_seconds - without.collect_seconds
        )
        assert with_index.saving_seconds == pytest.approx(without.saving_seconds)


def test_a_rewrite_that_pays_without_its_indexes_does_not_pay_with_a_slow_one() -> None:
    data = _data()
    # the horizon at which the index-free rewrite nets 0.05 s: less than collecting the
    # slow index costs (LEAST: 0.2 s on one core)
    (probe,) = _recommend(_inputs(data, slow_index=False), 1000.0).estimates
    per_query = probe.saving_seconds / 1000.0
    horizon = (probe.cost_seconds + 0.05) / per_query
    plain = _recommend(_inputs(data, slow_index=False), horizon)
    assert plain.rewrite, plain.reason
    for bounds in (True, False):
        slow = _recommend(_inputs(data, slow_index=True), horizon, bounds=bounds)
        assert not slow.rewrite, slow.reason
        assert slow.collect_seconds_per_row * ROWS >= LEAST


def test_timed_work_is_spread_over_the_tasks_that_write_at_once() -> None:
    assert spread_over_tasks(1e-5, 100_000, 1, 8) == pytest.approx(1.0)
    assert spread_over_tasks(1e-5, 100_000, 4, 2) == pytest.approx(0.5)
    assert spread_over_tasks(1e-5, 100_000, 3, 8) == pytest.approx(1.0 / 3)
    assert spread_over_tasks(0.0, 100_000, 3, 8) == 0.0


def test_the_sample_holds_the_columns_the_declared_indexes_read() -> None:
    from lakelayout.advisor.advisor import sample_columns
    from lakelayout.skipping.indexes import BloomFilter, Features, GeoBox

    schema = pa.schema(
        [("ts", pa.float64()), ("url", pa.string()), ("lat", pa.float64()), ("lng", pa.float64()),
         ("bucket", pa.int64()), ("note", pa.string())]
    )  # fmt: skip
    preds = [parse_predicate("ts < 5", schema)]
    assert sample_columns(preds, [], schema) == ["ts"]
    indexes = [
        BloomFilter("url").bind(schema),
        GeoBox("lat", "lng").bind(schema),
        Features(["bucket % 3 = 1"]).bind(schema),
    ]
    assert sample_columns(preds, indexes, schema) == ["ts", "url", "lat", "lng", "bucket"]
    slow = ValueList("slow(bucket)", functions={"slow": "int64"}, udfs={"slow": elementwise(_slow)})
    assert sample_columns(preds, [slow.bind(schema)], schema) == ["ts", "bucket"]
    # an index that cannot say what it reads (not bound): every column
    assert sample_columns(preds, [BloomFilter("url")], schema) is None
    # partition columns: a rewrite splits blocks by them (the advisor prices the pieces)
    assert sample_columns(preds, [], schema, partition_columns=["note"]) == ["ts", "note"]


def test_a_collection_cost_given_in_the_config_is_used_instead_of_timing() -> None:
    data = _data()
    given = BenefitConfig(horizon_queries=1000.0, margin=1.0, collect_seconds_per_row=1e-4)
    rec = recommend(
        _inputs(data, slow_index=True), model=MODEL, benefit=given, families=("zorder",)
    )
    assert rec.collect_seconds_per_row == 1e-4
    (chosen,) = rec.estimates
    assert chosen.collect_seconds == pytest.approx(1e-4 * ROWS)
    with pytest.raises(InvalidOption, match="collect_seconds_per_row must be a finite number >= 0"):
        BenefitConfig(collect_seconds_per_row=-1.0)


def test_a_trees_routing_is_timed_on_the_sample_and_a_curves_is_calibrated() -> None:
    inputs = _inputs(_data(), slow_index=False, parallelism=2)
    timed = recommend(
        dataclasses.replace(inputs),
        model=MODEL,
        benefit=BenefitConfig(horizon_queries=1000.0, collect_seconds_per_row=0.0),
        families=("zorder", "qdtree"),
        bounds=False,
    )
    by_family = {e.family: e for e in timed.estimates}
    assert by_family["qdtree"].route_seconds > 0
    assert by_family["zorder"].route_seconds == 0.0
    given = BenefitConfig(
        horizon_queries=1000.0, collect_seconds_per_row=0.0, route_seconds_per_row=3e-6
    )
    rec = recommend(
        dataclasses.replace(inputs), model=MODEL, benefit=given, families=("qdtree",), bounds=False
    )
    (tree,) = rec.estimates
    assert tree.route_seconds == pytest.approx(3e-6 * ROWS / min(2, tree.files_after))
    # the rest is the calibrated price with no curve dimension
    files = inputs.candidate_files
    calibrated = MODEL.rewrite_seconds(
        int(files.total_bytes),
        tree.files_after,
        n_curve=0,
        values=files.total_rows * len(inputs.schema),
    )
    assert tree.cost_seconds - tree.route_seconds == pytest.approx(calibrated)


def test_a_trees_timed_routing_includes_the_sort_key_the_tasks_compute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writing tasks call ``layout.route`` (leaf and in-file sort key): a tree whose
    sort key is slow is priced with it (the logs Qd-tree's inner Z-order was missed)."""
    from lakelayout.layouts import QdTreeLayout

    plain = QdTreeLayout.sort_key
    delay = 0.2

    def slow_key(self: QdTreeLayout, batch: pa.Table) -> np.ndarray | None:
        time.sleep(delay)
        return plain(self, batch)

    monkeypatch.setattr(QdTreeLayout, "sort_key", slow_key)
    rec = recommend(
        _inputs(_data(), slow_index=False, parallelism=1),
        model=MODEL,
        benefit=BenefitConfig(horizon_queries=1000.0, collect_seconds_per_row=0.0),
        families=("qdtree",),
        bounds=False,
    )
    (tree,) = rec.estimates
    (cand,) = [c for c in rec.candidates if c.layout is not None]
    assert cand.route_sample_seconds >= delay
    assert tree.route_seconds >= delay * ROWS / SAMPLED
