"""Cost against benefit on constructed tables and workloads (pure: no Spark).

The inputs are what the advisor gathers from a real table: a sample of the
never-clustered files with the file each row came from, those files'
statistics, and the recent queries. Sizes are scaled to make a table "tiny"
or "large" without writing it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.advisor.benefit import BenefitConfig as _BenefitConfig
from lakelayout.advisor.benefit import Estimate, decide, expected_queries
from lakelayout.advisor.costmodel import (
    DEFAULT_FIT_SECONDS_PER_ROW,
    DEFAULTS,
    CostModel,
    QueryObservation,
    RewriteObservation,
    StatisticsObservation,
    default_path,
    fit,
)
from lakelayout.advisor.estimate import Candidate, bytes_read, virtual_files
from lakelayout.advisor.recommend import Inputs, Recommendation, recommend
from lakelayout.errors import InvalidOption
from lakelayout.expr.parse import parse_predicate
from lakelayout.stats.blocks import block_stats

#: the decisions below are priced with no index collection and free tree routing, as
#: before they were timed (a timing on the sample would move the thresholds these tests
#: put the horizon on, and differ between the two decisions they compare)
BenefitConfig = functools.partial(
    _BenefitConfig, collect_seconds_per_row=0.0, route_seconds_per_row=0.0
)

ROWS = 12_000
FILES = 24
RNG = np.random.default_rng(11)
DATA = pa.table(
    {
        "id": np.arange(ROWS),
        "ts": RNG.uniform(0, 1000, ROWS),  # not the arrival order: files span all of it
        "amount": RNG.uniform(0, 100, ROWS),
        "tag": [f"t{i % 13}" for i in range(ROWS)],
    }
)
FILE_OF_ROW = np.arange(ROWS) // (ROWS // FILES)  # arrival order = id order
SAMPLE_ROWS = np.sort(RNG.choice(ROWS, 4000, replace=False))
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def _windows(n: int) -> list[str]:
    rng = np.random.default_rng(5)
    return [f"ts BETWEEN {lo:.1f} AND {lo + 25:.1f}" for lo in rng.uniform(0, 970, n)]


def _inputs(queries: list[str], *, scale: float = 1.0, minutes: float = 1.0) -> Inputs:
    files = block_stats(DATA, FILE_OF_ROW)
    files = dataclasses.replace(files, sizes=np.round(files.sizes * scale).astype(np.int64))
    return Inputs(
        predicates=[parse_predicate(q, DATA.schema) for q in queries],
        timestamps=[T0 + dt.timedelta(minutes=minutes * i) for i in range(len(queries))],
        sample=DATA.take(pa.array(SAMPLE_ROWS)),
        sample_files=FILE_OF_ROW[SAMPLE_ROWS],
        candidate_files=files,
        other_bytes=0,
        target_file_size=int(files.total_bytes // FILES),
        schema=DATA.schema,
    )


def _run(inputs: Inputs, **benefit: float) -> Recommendation:
    return recommend(inputs, model=DEFAULTS, benefit=BenefitConfig(**benefit))  # type: ignore[arg-type]


def test_a_workload_that_never_filters_gets_no_rewrite() -> None:
    rec = _run(_inputs(["TRUE"] * 50, scale=1e5), horizon_queries=1e6)
    assert not rec.rewrite and rec.layout is None
    assert rec.reason.startswith("no rewrite")
    assert all(e.saved_bytes_per_query <= 0 for e in rec.estimates)


def test_a_model_that_prices_beyond_the_float_range_is_refused_naming_it() -> None:
    """Coefficients near the float range (a model file saying 1e308 s per byte) made
    the estimates NaN and the reason's words a raw ValueError (an audit)."""
    huge = dataclasses.replace(DEFAULTS, query_seconds_per_byte=1e308)
    with pytest.raises(InvalidOption, match=r"price .* not finite numbers; the model"):
        recommend(_inputs(_windows(30)), model=huge, benefit=BenefitConfig(horizon_queries=1e6))


def test_a_tiny_table_with_few_queries_gets_no_rewrite() -> None:
    def no_sampling() -> tuple[pa.Table, np.ndarray]:
        raise AssertionError("the upper bound alone must decide")

    inputs = dataclasses.replace(
        _inputs(_windows(12), minutes=24 * 60), sample=None, sample_files=None
    )  # 0.35 MiB, a query a day, a week ahead
    rec = recommend(inputs, model=DEFAULTS, sampler=no_sampling)
    assert not rec.rewrite and rec.estimates == []
    assert rec.reason.startswith(
        "no rewrite: even a layout that made the recent queries read nothing of the 0.35 MiB"
    )
    # arrival order: every query reads every file
    files = len(inputs.candidate_files)
    assert (
        f"(7 expected queries × 0.35 MiB of their columns in {files:.1f} files read now each)"
        in rec.reason
    )
    # the cheapest rewrite any candidate can be: one curve dimension, into one file
    nbytes = int(inputs.candidate_files.total_bytes)
    cheapest = DEFAULTS.rewrite_seconds(nbytes, 1, n_curve=1)
    assert 2.0 < cheapest < 2.1
    assert f"not more than the cheapest rewrite ({cheapest:.3g} s) × 1.5" in rec.reason
    assert rec.analysis is not None and rec.analysis.curve == ["ts"]  # still explained
    # with the sample, the candidates confirm it: they read less, but cost more than they save
    full = _run(_inputs(_windows(12), minutes=24 * 60), min_span_seconds=1.0)
    assert not full.rewrite


def test_a_large_frequently_filtered_table_gets_a_rewrite() -> None:
    rec = _run(_inputs(_windows(60), scale=2e4))  # ~20 GiB, one query a minute
    assert rec.rewrite and rec.layout is not None and rec.chosen is not None
    assert rec.chosen.saving_seconds > rec.chosen.cost_seconds * 1.5
    assert rec.chosen.bytes_after_per_query < 0.2 * rec.chosen.bytes_now_per_query
    assert rec.reason.startswith("rewrite: ")
    assert rec.analysis is not None and rec.analysis.curve == ["ts"]
    assert rec.chosen.minmax_saved_bytes_per_query is not None
    # the decision document is JSON (what the decision log stores)
    doc = json.loads(json.dumps(rec.to_dict()))
    assert doc["rewrite"] is True and doc["chosen"]["family"] == rec.chosen.family


def test_the_decision_flips_where_the_model_says() -> None:
    inputs = _inputs(_windows(40), scale=200)
    probe = _run(inputs, horizon_queries=100)
    best = probe.best
    assert best is not None and best.saving_seconds > 0
    per_query = best.saving_seconds / best.expected_queries
    flip = best.cost_seconds * 1.5 / per_query  # queries where saving = cost × margin
    below = _run(inputs, horizon_queries=flip * 0.98)
    above = _run(inputs, horizon_queries=flip * 1.02)
    assert not below.rewrite and above.rewrite
    assert above.chosen is not None and above.chosen.family == best.family
    # the same point through the cost model: a dearer rewrite needs more queries
    dear = dataclasses.replace(DEFAULTS, rewrite_fixed_seconds=DEFAULTS.rewrite_fixed_seconds * 3)
    again = recommend(inputs, model=dear, benefit=BenefitConfig(horizon_queries=flip * 1.02))
    assert not again.rewrite


def test_a_rewrite_through_a_shuffle_is_priced_with_the_shuffle_terms() -> None:
    inputs = _inputs(_windows(40), scale=2000)
    plain = _run(inputs)
    shuffled = _run(dataclasses.replace(inputs, shuffled=True))
    assert plain.inputs["shuffled"] is False and shuffled.inputs["shuffled"] is True
    values = inputs.candidate_files.total_rows * len(DATA.schema)
    extra = DEFAULTS.shuffle_fixed_seconds + DEFAULTS.shuffle_seconds_per_value * values
    assert extra > 0.5 and len(plain.estimates) == len(shuffled.estimates) > 1
    for a, b in zip(plain.estimates, shuffled.estimates, strict=True):
        assert (a.layout, a.saving_seconds) == (b.layout, b.saving_seconds)
        assert b.cost_seconds - a.cost_seconds == pytest.approx(extra)


def test_the_files_a_query_skips_are_priced_per_file_too() -> None:
    """Skipping a file saves its bytes and its per-file cost (a task, a footer): the
    saving is E × (bytes saved × cost per byte + files saved × cost per file), and a
    table of many small files can pay for a rewrite that its bytes alone would not."""
    inputs = _inputs(_windows(40), scale=200)
    bytes_only = dataclasses.replace(DEFAULTS, query_seconds_per_file=0.0)
    per_file = dataclasses.replace(DEFAULTS, query_seconds_per_file=0.05)
    config = BenefitConfig(horizon_queries=1.0)
    plain = recommend(dataclasses.replace(inputs), model=bytes_only, benefit=config, bounds=False)
    files = recommend(dataclasses.replace(inputs), model=per_file, benefit=config, bounds=False)
    assert [e.layout for e in plain.estimates] == [e.layout for e in files.estimates]
    for a, b in zip(plain.estimates, files.estimates, strict=True):
        assert a.cost_seconds == b.cost_seconds and b.n_additional == a.n_additional
        # arrival order: every window reads every file now; after, its share of the blocks
        assert b.files_now_per_query == pytest.approx(FILES)
        assert 0 < b.files_after_per_query < b.files_now_per_query
        assert b.files_after_per_query <= b.files_after
        skipped = b.files_now_per_query - b.files_after_per_query
        assert b.saving_seconds - a.saving_seconds == pytest.approx(0.05 * skipped)
    # where the bytes alone do not pay, the files do
    best = plain.best
    assert best is not None
    horizon = best.cost_seconds * 1.5 / best.saving_seconds * 0.9  # bytes alone: just short
    assert not _decide(inputs, bytes_only, horizon).rewrite
    assert _decide(inputs, per_file, horizon).rewrite


def test_a_block_of_many_targets_is_priced_as_the_files_it_is_written_as() -> None:
    """A Qd-tree cut by one query has a few blocks of many targets each; the rewrite cuts
    each into files of twice the target, and a query on a block reads all of them (an
    audit: priced as one file per block, 32 files read now -> 2.9 after, where the queries
    then read 12.6)."""
    from lakelayout.advisor.estimate import files_per_block, files_written

    assert files_per_block(np.array([0, 1, 10, 11, 40]), 10).tolist() == [1, 1, 1, 2, 4]
    assert files_written(np.array([0, 10, 11, 40]), 10) == 7  # an empty block writes nothing
    inputs = _inputs(["ts < 960"] * 30, scale=200)  # ~96% of the rows: one cut
    rec = _run(inputs, horizon_queries=100)
    target = inputs.target_file_size
    roll = 2 * target
    tree = next(e for e in rec.estimates if e.family == "qdtree")
    assert tree.files_after >= inputs.candidate_files.total_bytes / roll
    # each query reads the big block, all its files: about as many as it reads now
    assert tree.files_after_per_query >= 0.9 * tree.files_after * 0.96 - 1
    assert tree.files_after_per_query > 0.4 * tree.files_now_per_query


def _decide(inputs: Inputs, model: CostModel, horizon: float) -> Recommendation:
    config = BenefitConfig(horizon_queries=horizon)
    return recommend(dataclasses.replace(inputs), model=model, benefit=config)


def test_the_rate_of_the_log_sets_the_expected_queries() -> None:
    stamps = [T0 + dt.timedelta(minutes=10 * i) for i in range(7)]  # 6 per hour
    rate = expected_queries(stamps, BenefitConfig(horizon_seconds=24 * 3600))
    assert rate.expected_queries == pytest.approx(6 * 24)
    assert rate.per_hour == pytest.approx(7)
    given = expected_queries(stamps, BenefitConfig(horizon_queries=10))
    assert given.expected_queries == 10 and given.basis == "given horizon in queries"


def test_the_rate_is_measured_up_to_the_decision() -> None:
    """A burst long ago is not a rate that goes on (an audit: 60 queries 20 days before
    the advisor ran were priced as 59 an hour for the week ahead, and paid a rewrite)."""
    stamps = [T0 + dt.timedelta(seconds=i) for i in range(60)]  # a burst within a minute
    config = BenefitConfig(horizon_seconds=7 * 24 * 3600)
    at_once = expected_queries(stamps, config, now=stamps[-1] + dt.timedelta(seconds=5))
    assert at_once.expected_queries == pytest.approx(59 * 7 * 24)  # an hour at least
    assert expected_queries(stamps, config).expected_queries == at_once.expected_queries
    later = expected_queries(stamps, config, now=stamps[-1] + dt.timedelta(days=20))
    span = 20 * 24 * 3600 + 59
    assert later.span_seconds == pytest.approx(span)
    assert later.expected_queries == pytest.approx(59 / span * 7 * 24 * 3600)  # ~20.6
    assert "the last query was 480 h ago" in later.basis
    # a clock behind the log's (another machine's queries): the window's own span
    behind = expected_queries(stamps, config, now=T0 - dt.timedelta(days=1))
    assert behind.expected_queries == at_once.expected_queries
    # the decision follows: the burst pays a rewrite just after it, not 20 days later
    burst = _inputs(_windows(60), scale=20)  # pays after ~52 queries
    assert _run(burst).rewrite
    last = burst.timestamps[-1]
    assert _run(dataclasses.replace(burst, now=last + dt.timedelta(minutes=1))).rewrite
    stale = _run(dataclasses.replace(burst, now=last + dt.timedelta(days=20)))
    assert not stale.rewrite and stale.rate is not None and "480 h ago" in stale.rate.basis
    assert any("480 h ago" in line for line in stale.lines())


def test_too_few_queries_and_nothing_to_cluster() -> None:
    assert "only 3 queries logged" in _run(_inputs(_windows(3))).reason
    small = dataclasses.replace(_inputs(_windows(20)), target_file_size=10**12)
    assert "fit in one file of the target size" in _run(small).reason


def test_queries_that_no_longer_bind_are_said_not_hidden() -> None:
    said = "40 more logged queries left out: they no longer bind to the table"
    early = _run(dataclasses.replace(_inputs(_windows(3)), unparsed=40))
    assert early.analysis is None and "only 3 queries logged" in early.reason
    assert any(said in line for line in early.lines())
    analyzed = _run(dataclasses.replace(_inputs(_windows(20)), unparsed=40))
    assert analyzed.analysis is not None and analyzed.inputs["unparsed_queries"] == 40
    lines = analyzed.analysis.lines()
    assert lines[0] == "20 queries analyzed" and lines[1].startswith(said)
    assert not any(said in line for line in analyzed.lines())  # said once, with the features
    assert not any("left out" in line for line in _run(_inputs(_windows(20))).lines())


def test_the_errors_of_candidates_that_could_not_be_fitted_are_said() -> None:
    failed = {"zorder": "ValueError: no rows", "qdtree": "MemoryError: too deep"}
    _, _, reason = decide([], failed)
    assert reason == (
        "no candidate layout could be fitted "
        "(zorder: ValueError: no rows; qdtree: MemoryError: too deep)"
    )
    assert decide([])[2] == "no candidate layout could be fitted"
    rec = Recommendation(reason, candidates=[Candidate("zorder", error=failed["zorder"])])
    assert rec.lines() == [reason]  # the reason names them; no line repeats them
    est = Estimate("hilbert", "hilbert", 10, 2, 2, 1, 0, 0, 5.0, 1.0, 10, 10, 1, 1.5)
    rec = Recommendation("ok", candidates=rec.candidates, estimates=[est])
    assert "  zorder: not fitted (ValueError: no rows)" in rec.lines()


def test_the_payback_is_rounded_up_alike_in_the_reason_and_the_candidate_line() -> None:
    # 4.243 s against 10 s over 1,000 queries: it has paid back after 424.3 queries
    est = Estimate("zorder", "zorder (ts)", 10, 2, 2, 1, 0, 0, 5.0, 1.0, 1000, 10, 4.243, 1.5)
    _, _, reason = decide([est])
    assert reason.endswith("(pays back after 425 queries)")
    line = Recommendation(reason, estimates=[est]).lines()[1]
    assert line.endswith("payback 425 queries"), line


def test_decide_prefers_the_largest_net_saving() -> None:
    def est(family: str, saving: float, cost: float) -> Estimate:
        return Estimate(family, family, 10, 2, 2, 1, 0, 0, 5.0, 1.0, 10, saving, cost, 1.5)

    chosen, best, _ = decide([est("a", 10, 1), est("b", 30, 12), est("c", 12, 9)])
    assert chosen is not None and best is not None and chosen.family == "b"
    chosen, best, reason = decide([est("a", 10, 9)])
    assert chosen is None and best is not None and "saving ≤ cost × 1.5" in reason
    # the point the margin asks for and the break-even the candidate lines show, both named
    payback = best.payback_queries
    assert payback is not None
    assert f"chosen after {math.ceil(payback * 1.5):,} expected queries" in reason
    assert f"breaks even after {math.ceil(payback):,}" in reason
    # no byte saved: no layout, and a saving from fewer files is said to be compaction's
    flat = dataclasses.replace(
        est("z", 40, 1), bytes_after_per_query=5.0, files_now_per_query=8, files_after_per_query=2
    )
    chosen, best, reason = decide([flat])
    assert chosen is None and best is flat and reason.startswith("no rewrite")
    assert "comes from reading fewer files (8.0 -> 2.0 per query) only" in reason
    assert "compaction" in reason
    none = dataclasses.replace(flat, saving_seconds=0.0)
    assert "fewer files" not in decide([none])[2]


def test_virtual_files_and_the_one_bytes_function() -> None:
    pred = parse_predicate("ts < 100", DATA.schema)
    by_ts = np.argsort(np.argsort(DATA["ts"].to_numpy())) // 500  # sorted blocks of 500 rows
    sorted_files = virtual_files(DATA, by_ts)
    arrival = virtual_files(DATA, FILE_OF_ROW)
    assert len(sorted_files.stats) == 24 and len(arrival.stats) == 24
    assert sorted_files.fractions([pred])[0] < 0.15 < arrival.fractions([pred])[0]
    assert bytes_read(pred, arrival.stats) == arrival.stats.total_bytes


def test_cost_model_round_trip_defaults_and_fit(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "m.json"  # type: ignore[operator]
    model = dataclasses.replace(DEFAULTS, source="test")
    assert CostModel.load(model.save(path)) == model
    with pytest.raises(InvalidOption, match="no cost model at"):
        CostModel.load(tmp_path / "absent.json")  # type: ignore[operator]
    assert model.rewrite_seconds(0, 0, n_curve=1) == model.rewrite_fixed_seconds
    # exact linear data is recovered by the fit
    truth = dataclasses.replace(DEFAULTS, source="truth")
    rewrites, queries = _exact_observations(truth)
    fitted = fit(rewrites, queries)
    assert fitted.query_seconds_per_byte == pytest.approx(truth.query_seconds_per_byte, rel=1e-6)
    assert fitted.query_seconds_per_file == pytest.approx(truth.query_seconds_per_file, rel=1e-6)
    assert fitted.rewrite_fixed_seconds == pytest.approx(truth.rewrite_fixed_seconds, rel=1e-4)
    assert fitted.curve_seconds_per_byte == pytest.approx(truth.curve_seconds_per_byte, rel=1e-4)
    assert fitted.rewrite_seconds_per_value == pytest.approx(
        truth.rewrite_seconds_per_value, rel=1e-4
    )
    assert fitted.shuffle_fixed_seconds == pytest.approx(truth.shuffle_fixed_seconds, rel=1e-4)
    assert fitted.shuffle_seconds_per_value == pytest.approx(
        truth.shuffle_seconds_per_value, rel=1e-4
    )
    assert fitted.quality["rewrite_r2"] == pytest.approx(1.0)
    with pytest.raises(InvalidOption, match="at least 6 rewrites"):
        fit(rewrites[:2], queries)


def _exact_observations(
    truth: CostModel = DEFAULTS,
) -> tuple[list[RewriteObservation], list[QueryObservation]]:
    """Rewrites and queries priced exactly by ``truth``, varied enough to fit every term."""
    rewrites = [
        RewriteObservation(
            truth.rewrite_seconds(b, f, n_curve=c, n_sop=s, n_additional=a, values=v, shuffled=h),
            b, f, c, s, a, v, h,
        )
        for b, f, c, s, a, v, h in [
            (10**7, 4, 1, 0, 0, 2 * 10**6, False), (4 * 10**7, 9, 2, 0, 0, 9 * 10**6, False),
            (10**8, 30, 1, 4, 0, 6 * 10**6, False), (2 * 10**8, 50, 3, 0, 2, 5 * 10**7, False),
            (5 * 10**7, 12, 4, 8, 1, 3 * 10**7, False), (3 * 10**8, 80, 1, 0, 5, 2 * 10**7, False),
            (8 * 10**7, 20, 2, 2, 0, 10**7, False), (6 * 10**7, 10, 1, 0, 0, 4 * 10**7, False),
            (2 * 10**7, 6, 1, 0, 0, 3 * 10**6, True), (9 * 10**7, 14, 2, 0, 0, 8 * 10**6, True),
            (3 * 10**8, 40, 4, 0, 0, 6 * 10**7, True),
        ]
    ]  # fmt: skip
    queries = [
        QueryObservation(truth.query_seconds(b, f), b, f)
        for b, f in ((0, 0), (10**6, 1), (10**8, 8), (10**8, 96), (5 * 10**8, 40))
    ]
    return rewrites, queries


def _older_model(
    tmp_path: Path, missing: set[str], fmt: int, source: str
) -> tuple[CostModel, Callable[..., CostModel]]:
    """A model file of format ``fmt`` without the ``missing`` terms, loaded; and a function
    that saves the same terms under another format and loads that file."""
    old = {k: v for k, v in DEFAULTS.to_dict().items() if k not in missing}
    path = tmp_path / "m.json"

    def load(fmt: int, **extra: str) -> CostModel:
        path.write_text(json.dumps({**old, "format": fmt, **extra}))
        return CostModel.load(path)

    return load(fmt, source=source), load


def test_a_model_saved_before_the_per_value_term_still_loads(tmp_path: Path) -> None:
    model, load = _older_model(tmp_path, {"rewrite_seconds_per_value"}, 1, "calibrated long ago")
    assert model.rewrite_seconds_per_value == 0.0
    assert model.source.startswith("calibrated long ago; no per-value rewrite term")
    assert model.rewrite_seconds(10**6, 2, values=10**9) == model.rewrite_seconds(10**6, 2)
    with pytest.raises(InvalidOption, match="lacks rewrite_seconds_per_value"):
        load(2)
    with pytest.raises(InvalidOption, match="format 7 is not supported"):
        load(7)


def test_a_model_saved_before_the_shuffle_terms_loads_without_them(tmp_path: Path) -> None:
    shuffle = {"shuffle_fixed_seconds", "shuffle_seconds_per_value"}
    model, load = _older_model(tmp_path, shuffle, 2, "calibrated last month")
    assert model.shuffle_fixed_seconds == model.shuffle_seconds_per_value == 0.0
    assert model.source.startswith("calibrated last month; no shuffle terms (format 2)")
    assert model.rewrite_seconds(10**8, 4, shuffled=True) == model.rewrite_seconds(10**8, 4)
    with pytest.raises(
        InvalidOption, match="lacks shuffle_fixed_seconds, shuffle_seconds_per_value"
    ):
        load(3)


def test_a_model_saved_before_the_per_file_query_term_prices_bytes_only(tmp_path: Path) -> None:
    model, load = _older_model(tmp_path, {"query_seconds_per_file"}, 3, "calibrated yesterday")
    assert model.query_seconds_per_file == 0.0
    assert model.source.startswith("calibrated yesterday; no per-file query term (format 3)")
    assert model.query_seconds(10**8, 50) == model.query_seconds(10**8)
    assert DEFAULTS.query_seconds(10**8, 50) > DEFAULTS.query_seconds(10**8)
    with pytest.raises(InvalidOption, match="lacks query_seconds_per_file"):
        load(4)


def test_a_model_saved_before_the_fitting_cost_gets_the_default_one(tmp_path: Path) -> None:
    model, load = _older_model(tmp_path, {"fit_seconds_per_row"}, 4, "calibrated on Monday")
    assert model.fit_seconds_per_row == DEFAULT_FIT_SECONDS_PER_ROW > 0
    assert model.source.startswith("calibrated on Monday; fitting cost not measured (format 4)")
    with pytest.raises(InvalidOption, match="lacks fit_seconds_per_row"):
        load(5)
    measured = dataclasses.replace(DEFAULTS, fit_seconds_per_row=1e-6, source="now")
    assert CostModel.load(measured.save(tmp_path / "new.json")) == measured
    assert fit(*_exact_observations(), fit_seconds_per_row=3e-6).fit_seconds_per_row == 3e-6
    learned = measured.with_fitting(2e-5, "learned")
    assert learned.fit_seconds_per_row == 2e-5 and learned.source == "now; learned"
    assert learned.rewrite_seconds(10**8, 4) == measured.rewrite_seconds(10**8, 4)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidOption, match="fitting cost per row"):
            measured.with_fitting(bad, "bad")


def test_a_model_saved_before_the_statistics_job_prices_it_at_zero(tmp_path: Path) -> None:
    model, load = _older_model(tmp_path, {"statistics_fixed_seconds"}, 5, "calibrated in May")
    assert model.statistics_fixed_seconds == 0.0 < DEFAULTS.statistics_fixed_seconds
    assert model.source.startswith(
        "calibrated in May; no fixed cost of building statistics (format 5)"
    )
    assert model.statistics_seconds(10**8, 2) == pytest.approx(
        2e8 * model.additional_seconds_per_byte
    )
    with pytest.raises(InvalidOption, match="lacks statistics_fixed_seconds"):
        load(6)


def test_index_builds_give_the_statistics_job_and_its_cost_per_byte() -> None:
    """The fit of the timed index builds recovers an index job's fixed seconds and its
    cost per byte and feature; builds whose time does not grow (a job's fixed cost
    plus noise, as on small tables) give their level as the fixed cost and no slope,
    where the model once had no fixed term and priced new statistics at 0."""
    rewrites, queries = _exact_observations()
    builds = [
        StatisticsObservation(0.25 + 3e-9 * b * n, b, n)
        for b in (10**6, 3 * 10**6, 2 * 10**7)
        for n in (1, 3)
    ]
    model = fit(rewrites, queries, builds)
    assert model.statistics_fixed_seconds == pytest.approx(0.25, rel=1e-6)
    assert model.additional_seconds_per_byte == pytest.approx(3e-9, rel=1e-6)
    assert model.statistics_seconds(10**7, 2) == pytest.approx(0.25 + 6e-2, rel=1e-6)
    flat = [dataclasses.replace(x, seconds=0.2) for x in builds]
    model = fit(rewrites, queries, flat)
    assert model.statistics_fixed_seconds == pytest.approx(0.2, rel=1e-6)
    assert model.additional_seconds_per_byte == pytest.approx(0.0, abs=1e-15)


def test_a_shuffled_rewrite_costs_its_shuffle_terms_more() -> None:
    model = dataclasses.replace(DEFAULTS, shuffle_fixed_seconds=0.7, shuffle_seconds_per_value=3e-8)
    plain = model.rewrite_seconds(10**8, 12, n_curve=2, values=10**7)
    shuffled = model.rewrite_seconds(10**8, 12, n_curve=2, values=10**7, shuffled=True)
    assert shuffled - plain == pytest.approx(0.7 + 3e-8 * 10**7)
    # a learned correction scales what grows with the data, not the fixed start-up terms
    doubled = model.scaled_rewrites(2.0, "test")
    fixed = model.rewrite_fixed(shuffled=True)
    assert fixed == model.rewrite_fixed_seconds + 0.7
    assert doubled.rewrite_seconds(10**8, 12, n_curve=2, values=10**7, shuffled=True) == (
        pytest.approx(fixed + 2 * (shuffled - fixed))
    )


def test_the_default_path_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/somewhere/config")
    assert str(default_path()) == "/somewhere/config/lakelayout/costmodel.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_path().parts[-3:] == (".config", "lakelayout", "costmodel.json")


def test_a_partitioned_table_s_blocks_are_priced_as_their_pieces_per_partition() -> None:
    """A rewrite splits every block by partition (a file holds one partition value): a
    query on a block reads one file per partition the block spans. Priced per block, an
    audit's 12-partition table was estimated at 1.0 file read per query after the rewrite,
    where every query then read 12 (and 17 files written, where 84 were)."""
    from lakelayout.advisor.estimate import split_by_partition

    inputs = _inputs(_windows(40), scale=200)
    plain = _run(inputs, horizon_queries=100)
    parted = _run(dataclasses.replace(inputs, partition_columns=("tag",)), horizon_queries=100)
    tags = len(set(DATA.column("tag").to_pylist()))
    for family in ("qdtree", "zorder"):
        a = next(e for e in plain.estimates if e.family == family)
        b = next(e for e in parted.estimates if e.family == family)
        # each block holds rows of every tag: one file per tag where one file was priced
        assert b.files_after >= tags * a.files_after * 0.9, family
        assert b.files_after_per_query >= tags * 0.9 * a.files_after_per_query, family
    pieces = split_by_partition(
        pa.table({"p": ["x", "y", "x", None, "y"]}), np.array([0, 0, 1, 0, 2]), ["p"]
    )
    assert len(set(pieces.tolist())) == 5 and pieces[0] != pieces[2] and pieces[1] != pieces[4]
