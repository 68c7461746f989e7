"""The cheaper decision path decides what the full one decides (pure: no Spark).

Each shortcut is compared with the work it replaces: planning each distinct
query once against planning every query, one shared Qd-tree/Pando
workspace against a build per fit, block slices against a take per block,
memoized parsing against parsing, and the two "cannot pay" exits against
pricing every candidate, swept across the point where the decision flips.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.advisor import advisor as advisor_module
from lakelayout.advisor.analyzer import analyze
from lakelayout.advisor.benefit import BenefitConfig as _BenefitConfig
from lakelayout.advisor.calibrate import calibrate, fitting_workload, measure_fitting
from lakelayout.advisor.costmodel import DEFAULTS, CostModel
from lakelayout.advisor.decisions import Persistence
from lakelayout.advisor.estimate import bytes_read, candidates, virtual_files
from lakelayout.advisor.recommend import Inputs, Recommendation, recommend, thinned
from lakelayout.errors import InvalidOption, LayoutError
from lakelayout.expr.nodes import Opaque
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts import PandoLayout, QdTreeLayout
from lakelayout.layouts.qdtree import Workspace, best_split, bind_queries, grow_forest
from lakelayout.skipping.indexes import Features, MinMax
from lakelayout.stats.blocks import block_stats

#: the decisions below are priced with no index collection and free tree routing, as
#: before they were timed (a timing on the sample would move the thresholds these tests
#: put the horizon on, and differ between the two decisions they compare)
BenefitConfig = functools.partial(
    _BenefitConfig, collect_seconds_per_row=0.0, route_seconds_per_row=0.0
)

ROWS = 4_800
FILES = 16
RNG = np.random.default_rng(23)
DATA = pa.table(
    {
        "id": np.arange(ROWS),
        "ts": RNG.uniform(0, 1000, ROWS),
        "amount": RNG.uniform(0, 100, ROWS),
        "tag": [f"t{i % 7}" for i in range(ROWS)],
    }
)
FILE_OF_ROW = np.arange(ROWS) // (ROWS // FILES)
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def _window(n: int, seed: int = 4) -> list[str]:
    """Range queries on ts, a third of them repeated verbatim, some with an SOP filter."""
    rng = np.random.default_rng(seed)
    texts = []
    for i in range(n):
        if i % 3 == 2:
            texts.append(texts[i - 2])  # the window repeats queries
            continue
        lo = rng.uniform(0, 960)
        extra = " AND tag LIKE '%3%'" if i % 4 == 0 else ""
        texts.append(f"ts BETWEEN {lo:.1f} AND {lo + 30:.1f}{extra}")
    return texts


def _parsed(texts: list[str]) -> list[Any]:
    return _parsed_on(texts, DATA.schema)


def _parsed_on(texts: list[str], schema: pa.Schema) -> list[Any]:
    parsed = {t: parse_predicate(t, schema) for t in dict.fromkeys(texts)}
    return [parsed[t] for t in texts]


def _inputs(texts: list[str], *, sample_all: bool, scale: float = 1.0) -> Inputs:
    files = block_stats(DATA, FILE_OF_ROW)
    files = dataclasses.replace(files, sizes=np.round(files.sizes * scale).astype(np.int64))
    rows = np.arange(ROWS) if sample_all else np.sort(RNG.choice(ROWS, 1600, replace=False))
    return Inputs(
        predicates=_parsed(texts),
        timestamps=[T0 + dt.timedelta(minutes=i) for i in range(len(texts))],
        sample=DATA.take(pa.array(rows)),
        sample_files=FILE_OF_ROW[rows],
        candidate_files=files,
        other_bytes=0,
        target_file_size=int(files.total_bytes // FILES),
        schema=DATA.schema,
    )


def _decision(rec: Recommendation) -> tuple[Any, ...]:
    """What is decided: rewrite or not, the layout family and features, the layout."""
    chosen = rec.chosen
    layout = None if rec.layout is None else rec.layout.to_dict()
    features = None if rec.analysis is None else [
        (f.key, f.kind, f.status) for f in rec.analysis.features
    ]  # fmt: skip
    return (rec.rewrite, None if chosen is None else chosen.layout, features, layout)


def test_each_distinct_query_is_planned_once_with_the_same_fractions() -> None:
    preds = _parsed(_window(30))
    assert len({p.sql() for p in preds}) < len(preds)  # the window repeats queries
    indexes = [
        MinMax("amount * 2").bind(DATA.schema),
        Features(["tag LIKE '%3%'"]).bind(DATA.schema),
    ]
    by_ts = np.argsort(np.argsort(DATA["ts"].to_numpy())) // 600
    vf = virtual_files(DATA, by_ts, indexes)
    assert [i.name for i in vf.indexes] == [i.name for i in indexes]
    total = float(vf.stats.total_bytes)
    one_by_one = [
        bytes_read(p, vf.stats, indexes=vf.indexes, metadata=vf.metadata) / total for p in preds
    ]
    assert vf.fractions(preds).tolist() == one_by_one
    assert min(one_by_one) > 0 and max(one_by_one) < 1  # the blocks do skip


def test_block_slices_give_each_index_what_a_take_per_block_gives() -> None:
    ids = RNG.integers(0, 40, ROWS)  # blocks interleaved in the sample, one id unused
    ids[ids == 17] = 18
    indexes = [
        MinMax("amount * 2").bind(DATA.schema),
        Features(["tag LIKE '%3%'"]).bind(DATA.schema),
    ]
    vf = virtual_files(DATA, ids, indexes)
    for index in indexes:
        expected = [
            index.collect(DATA.take(pa.array(np.flatnonzero(ids == b)))) for b in np.unique(ids)
        ]
        assert (
            vf.metadata[index.name].to_pylist()
            == pa.array(expected, type=index.arrow_type).to_pylist()
        )
    assert len(vf.stats) == 39


@pytest.mark.parametrize("blocks", [6, 15])
def test_a_shared_workspace_fits_the_same_trees(blocks: int) -> None:
    preds = _parsed(_window(24))
    ws = Workspace.build(DATA, bind_queries(preds, DATA, "qdtree"))
    alone = QdTreeLayout.fit(DATA, preds, target_blocks=blocks)
    shared = QdTreeLayout.fit(DATA, preds, target_blocks=blocks, workspace=ws)
    assert shared.to_dict() == alone.to_dict() and alone.n_blocks > 1
    pando = PandoLayout.fit(DATA, preds, target_blocks=blocks, k=2, max_leaves=24)
    pando_shared = PandoLayout.fit(
        DATA, preds, target_blocks=blocks, k=2, max_leaves=24, workspace=ws
    )
    assert pando_shared.to_dict() == pando.to_dict()
    assert np.array_equal(pando_shared.assign(DATA), pando.assign(DATA))


def test_pando_refits_with_fixed_leaf_bounds_grow_their_forest_once() -> None:
    preds = _parsed(_window(24))
    ws = Workspace.build(DATA, bind_queries(preds, DATA, "pando"))
    opts: dict[str, Any] = {"k": 2, "max_leaves": 24, "min_leaf_rows": ROWS // 8}
    grown = ws._forests
    layouts = [
        PandoLayout.fit(DATA, preds, target_blocks=t, workspace=ws, **opts) for t in (8, 20, 32)
    ]
    assert len(grown) == 1  # three block counts, one forest
    for target, layout in zip((8, 20, 32), layouts, strict=True):
        fresh = PandoLayout.fit(DATA, preds, target_blocks=target, **opts)
        assert layout.to_dict() == fresh.to_dict()
        assert np.array_equal(layout.assign(DATA), fresh.assign(DATA))
    assert layouts[0].n_blocks < layouts[2].n_blocks  # the merge, not the trees, differs
    # other leaf bounds grow another forest, and a Qd-tree's (k = 1) is its own
    PandoLayout.fit(DATA, preds, target_blocks=16, workspace=ws, k=2, max_leaves=24)
    QdTreeLayout.fit(DATA, preds, target_blocks=8, workspace=ws)
    assert len(grown) == 3
    # two scorer functions are two forests, whatever else they share
    bounds: dict[str, Any] = {"k": 1, "min_leaf_rows": ROWS // 8, "max_leaves": None}
    first = grow_forest(ws, ROWS, best_cut=best_split, **bounds)
    other = grow_forest(ws, ROWS, best_cut=lambda *a: best_split(*a), **bounds)
    assert len(grown) == 5 and first is not other
    assert grow_forest(ws, ROWS, best_cut=best_split, **bounds) is first


@given(n=st.integers(0, 5_000), at_most=st.one_of(st.none(), st.integers(1, 600)))
def test_thinning_keeps_both_ends_and_spreads_evenly(n: int, at_most: int | None) -> None:
    kept = thinned(n, at_most)
    if at_most is None or n <= at_most:
        assert kept.tolist() == list(range(n))
        return
    assert len(kept) == at_most and len(set(kept.tolist())) == at_most
    assert kept[0] == 0 and (at_most == 1 or kept[-1] == n - 1)
    gaps = np.diff(kept)
    if len(gaps):  # every stretch of the window keeps its share: gaps differ by at most 1
        assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1


def test_a_long_window_is_fitted_and_priced_on_its_thinning() -> None:
    """30 distinct queries, each run 10 times in a row: thinning 300 to 30 keeps one of
    each, the same mix, so the decision and its estimates are those of the whole window."""
    distinct = list(dict.fromkeys(_window(45)))[:30]
    inputs = _inputs([t for t in distinct for _ in range(10)], sample_all=True, scale=40.0)
    model = dataclasses.replace(DEFAULTS, fit_seconds_per_row=0.0)
    horizon = {"horizon_queries": 1e5, "fit_seconds_per_row": 0.0}
    whole = recommend(
        inputs, model=model, benefit=BenefitConfig(**horizon, max_priced_queries=None)
    )
    thin = recommend(inputs, model=model, benefit=BenefitConfig(**horizon, max_priced_queries=30))
    assert whole.inputs["priced_queries"] == 300 and thin.inputs["priced_queries"] == 30
    assert whole.inputs["queries"] == thin.inputs["queries"] == 300
    # every candidate was priced on 30 queries, not 300
    assert {len(c.fractions) for c in thin.candidates if c.fractions is not None} == {30}
    assert {len(c.fractions) for c in whole.candidates if c.fractions is not None} == {300}
    assert whole.rewrite and _decision(thin) == _decision(whole)
    assert len(thin.estimates) == len(whole.estimates) >= 3
    for a, b in zip(thin.estimates, whole.estimates, strict=True):
        assert a.family == b.family
        assert a.saved_bytes_per_query == pytest.approx(b.saved_bytes_per_query, rel=1e-9)
    # a decision a bound ends before any candidate is priced says it priced none
    short = BenefitConfig(horizon_queries=0.001, fit_seconds_per_row=0.0)
    assert recommend(inputs, model=model, benefit=short).inputs["priced_queries"] == 0
    with pytest.raises(InvalidOption, match="max_priced_queries must be >= 1"):
        BenefitConfig(max_priced_queries=0)


def test_a_workspace_of_another_sample_or_workload_is_refused() -> None:
    preds = _parsed(_window(12))
    ws = Workspace.build(DATA, bind_queries(preds, DATA, "qdtree"))
    with pytest.raises(LayoutError, match="workspace given was built for another sample"):
        QdTreeLayout.fit(DATA.slice(0, ROWS // 2), preds, target_blocks=4, workspace=ws)
    shuffled = DATA.take(pa.array(RNG.permutation(ROWS)))  # as many rows, not the same sample
    with pytest.raises(LayoutError, match="workspace given was built for another sample"):
        QdTreeLayout.fit(shuffled, preds, target_blocks=4, workspace=ws)
    assert QdTreeLayout.fit(DATA.slice(0), preds, target_blocks=4, workspace=ws).n_blocks > 1
    other = _parsed(_window(12, seed=99))
    with pytest.raises(LayoutError, match="pando: the workspace given was built for another"):
        PandoLayout.fit(DATA, other, target_blocks=4, workspace=ws)


def test_parsing_is_memoized_per_schema_functions_and_time_zone() -> None:
    narrow = pa.schema([("a", pa.int64())])
    wide = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    text = "b > 3 AND a < 2"
    first = advisor_module._parse(text, (narrow, (), "UTC"))
    assert first is None  # b is unknown in the narrow schema
    evolved = advisor_module._parse(text, (wide, (), "UTC"))  # a new schema parses again
    assert evolved is not None and evolved.sql() == parse_predicate(text, wide).sql()
    assert advisor_module._parse(text, (wide, (), "UTC")) is evolved
    udf = "f(a) = 'x'"
    unknown = advisor_module._parse(udf, (wide, (), "UTC"))
    assert isinstance(unknown, Opaque)  # an unknown function: opaque to lakelayout
    known = advisor_module._parse(udf, (wide, (("f", pa.string()),), "UTC"))
    assert known is not None and not isinstance(known, Opaque)  # a declared UDF parses again


def _sweep(inputs: Inputs, model: CostModel, horizons: list[float]) -> list[tuple[Any, ...]]:
    """(horizon, decision with the exits, decision pricing every candidate, reason)."""
    out = []
    for h in horizons:
        cfg = BenefitConfig(horizon_queries=h, fit_seconds_per_row=0.0)  # exits that are exact
        fast = recommend(dataclasses.replace(inputs), model=model, benefit=cfg)
        full = recommend(dataclasses.replace(inputs), model=model, benefit=cfg, bounds=False)
        out.append((h, _decision(fast), _decision(full), fast.reason))
    return out


def _flip(inputs: Inputs, model: CostModel) -> float:
    """Expected queries at which the full pricing's best candidate starts to pay."""
    probe = recommend(
        dataclasses.replace(inputs), model=model,
        benefit=BenefitConfig(horizon_queries=100.0), bounds=False,
    )  # fmt: skip
    best = probe.best
    assert best is not None and best.saving_seconds > 0
    return best.cost_seconds * best.margin / (best.saving_seconds / best.expected_queries)


#: rewriting costs the same whatever the layout (one curve dimension's worth, no
#: per-file, SOP or statistics terms): the cheapest rewrite the exits assume is
#: exactly what the candidates cost, so the exits sit as close to the flip as they can
TIGHT = dataclasses.replace(
    DEFAULTS, rewrite_per_file_seconds=0.0, curve_seconds_per_byte=0.0,
    sop_seconds_per_byte=0.0, additional_seconds_per_byte=0.0,
)  # fmt: skip


@pytest.mark.parametrize(
    ("model", "sample_all", "columns", "kept", "other"),
    [
        (DEFAULTS, False, False, None, 0),
        (TIGHT, True, False, None, 0),
        (TIGHT, True, True, None, 0),
        (TIGHT, True, False, 0.3, 0),
        (DEFAULTS, True, False, None, 10**7),
    ],
    ids=["defaults", "tight", "tight-columns", "tight-persistence", "defaults-other-files"],
)
def test_the_cannot_pay_exits_never_fire_where_full_pricing_rewrites(
    model: CostModel, sample_all: bool, columns: bool, kept: float | None, other: int
) -> None:
    inputs = _inputs(_window(36), sample_all=sample_all, scale=40.0)
    # ``other``: bytes of files the rewrite leaves in place (new statistics are built there)
    inputs = dataclasses.replace(inputs, other_bytes=other)
    if columns:  # the queries read a fifth to all of a file's bytes (their columns)
        shares = np.linspace(0.2, 1.0, len(inputs.predicates))
        inputs = dataclasses.replace(inputs, read_shares=shares)
    if kept is not None:  # earlier rewrites kept this share of their saving
        inputs = dataclasses.replace(inputs, persistence=Persistence(kept, (kept,)))
    flip = _flip(inputs, model)
    near = [flip * f for f in (0.99, 0.999, 1.001, 1.01)]
    far = [flip * f for f in (0.1, 0.6, 3.0)]
    rows = _sweep(inputs, model, sorted(near + far))
    for h, fast, full, reason in rows:
        assert fast == full or (not fast[0] and not full[0] and fast[2] == full[2]), (h, reason)
        assert fast[0] == full[0] == (h > flip), (h, reason)
    # an exit was taken below the flip (the sweep exercises them), none above it
    assert any("even a layout that made" in r for h, _, _, r in rows if h < flip)
    assert all(r.startswith("rewrite: ") for h, _, _, r in rows if h > flip)


def test_new_statistics_over_files_left_in_place_cost_their_index_job() -> None:
    """A layout that adds statistics (a ``Features`` index for the LIKE filter) builds
    them with one index job over the files the rewrite leaves in place: each candidate
    costs that job's fixed seconds more, and its bytes × features; with no such files,
    nothing more. Calibrated models once priced the job at 0 (its slope was noise)."""
    inputs = _inputs(_window(36), sample_all=True, scale=40.0)
    cfg = BenefitConfig(horizon_queries=100.0, fit_seconds_per_row=0.0)
    free = dataclasses.replace(DEFAULTS, statistics_fixed_seconds=0.0)
    job = dataclasses.replace(DEFAULTS, statistics_fixed_seconds=0.4)

    def costs(model: CostModel, other: int) -> list[tuple[Any, int, float]]:
        given = dataclasses.replace(inputs, other_bytes=other)
        rec = recommend(given, model=model, benefit=cfg, bounds=False)
        return [(e.layout, e.n_additional, e.cost_seconds) for e in rec.estimates]

    other = 10**7
    priced, unpriced = costs(job, other), costs(free, other)
    assert len(priced) > 1 and any(n >= 1 for _, n, _ in priced)
    for (layout, n, cost), (layout0, n0, cost0) in zip(priced, unpriced, strict=True):
        assert (layout, n) == (layout0, n0)
        assert cost - cost0 == pytest.approx(0.4 if n else 0.0)
    # the job's start-up is a fixed cost: a learned correction does not scale it
    rec = recommend(
        dataclasses.replace(inputs, other_bytes=other), model=job, benefit=cfg, bounds=False
    )
    assert len(rec.estimates) == len(priced)
    for e in rec.estimates:
        extra = 0.4 if e.n_additional else 0.0
        assert e.fixed_cost_seconds == pytest.approx(DEFAULTS.rewrite_fixed_seconds + extra)
    per_byte = DEFAULTS.additional_seconds_per_byte
    for (_, n, cost), (_, _, alone) in zip(priced, costs(job, 0), strict=True):
        assert cost - alone == pytest.approx((0.4 + per_byte * n * other) if n else 0.0)
    assert job.statistics_seconds(other, 0) == 0.0 == job.statistics_seconds(0, 3)


def test_a_persistence_moves_the_flip_by_its_inverse_and_scales_only_the_saving() -> None:
    """The same window with earlier rewrites that kept a quarter of their saving: every
    candidate's saving is a quarter, its cost and bytes are the same, so the rewrite
    needs four times the expected queries; the reason and the lines say why."""
    model = TIGHT
    inputs = _inputs(_window(36), sample_all=True, scale=40.0)
    flip = _flip(inputs, model)
    kept = Persistence(0.25, (0.1, 0.25, 0.5))
    scaled = dataclasses.replace(inputs, persistence=kept)
    assert _flip(scaled, model) == pytest.approx(flip * 4, rel=1e-9)
    cfg = BenefitConfig(horizon_queries=flip * 2, fit_seconds_per_row=0.0)
    plain = recommend(dataclasses.replace(inputs), model=model, benefit=cfg, bounds=False)
    held = recommend(dataclasses.replace(scaled), model=model, benefit=cfg, bounds=False)
    assert plain.rewrite and not held.rewrite
    assert plain.best is not None and held.best is not None
    assert held.best.layout == plain.best.layout
    assert held.best.saving_seconds == pytest.approx(plain.best.saving_seconds / 4, rel=1e-9)
    assert held.best.cost_seconds == pytest.approx(plain.best.cost_seconds, rel=1e-9)
    assert held.best.saved_bytes_per_query == pytest.approx(plain.best.saved_bytes_per_query)
    assert held.best.payback_queries == pytest.approx(plain.best.payback_queries * 4)
    assert f"{flip * 2:,.0f} expected queries × 0.25 kept" in held.reason
    assert held.rate is not None and held.rate.expected_queries == pytest.approx(flip * 2)
    (line,) = [x for x in held.lines() if x.startswith("  expected queries: ")]
    assert line.endswith("last 3 automatic rewrites: 0.10, 0.25, 0.50")
    assert not any(x.startswith("  expected queries: ") for x in plain.lines())
    # the exits price the same kept share (here the first one answers, saying so)
    fast = recommend(dataclasses.replace(scaled), model=model, benefit=cfg)
    assert not fast.rewrite and f"({flip * 2:,.0f} expected queries × 0.25 kept × " in fast.reason
    # past four times the flip the same rewrite is taken
    go = BenefitConfig(horizon_queries=flip * 4.01, fit_seconds_per_row=0.0)
    assert recommend(dataclasses.replace(scaled), model=model, benefit=go).rewrite


def test_the_sample_exit_sits_between_the_first_exit_and_the_flip() -> None:
    """Near the threshold of the after-sampling exit itself: just below it, it fires
    and nothing is fitted; just above it, the candidates are fitted and say no.

    The new statistics (a ``Features`` index for the LIKE filter) cost what the
    first exit cannot know of before the analysis: their collection over every
    row rewritten (here fixed at ``collect`` seconds per row instead of timed on
    the sample, so that the threshold is exact). Between the two thresholds only
    the second one answers.
    """
    model = TIGHT
    collect = 2e-5
    inputs = _inputs(_window(36), sample_all=True, scale=40.0)
    probe = recommend(
        dataclasses.replace(inputs), model=model,
        benefit=BenefitConfig(horizon_queries=1.0, collect_seconds_per_row=collect), bounds=False,
    )  # fmt: skip
    best = probe.best
    assert best is not None
    bytes_now = best.bytes_now_per_query
    assert best.n_additional >= 1
    rows = inputs.candidate_files.total_rows
    floor = model.rewrite_seconds(best.candidate_bytes, 1, n_curve=1) + collect * rows
    assert best.collect_seconds == pytest.approx(collect * rows)
    per_query = model.read_seconds(bytes_now, best.files_now_per_query)
    edge = floor * 1.5 / per_query  # the exit's threshold
    # the first exit knows nothing of the statistics: it lets the horizons around this
    # threshold through
    assert edge > model.rewrite_seconds(best.candidate_bytes, 1, n_curve=1) * 1.5 / per_query
    below = recommend(
        dataclasses.replace(inputs),
        model=model,
        benefit=BenefitConfig(
            horizon_queries=edge * 0.999, fit_seconds_per_row=0, collect_seconds_per_row=collect
        ),
    )
    above = recommend(
        dataclasses.replace(inputs),
        model=model,
        benefit=BenefitConfig(
            horizon_queries=edge * 1.001, fit_seconds_per_row=0, collect_seconds_per_row=collect
        ),
    )
    assert "estimated on the sample" in below.reason and below.candidates == []
    assert not below.rewrite and not above.rewrite and above.candidates
    assert above.best is not None and above.best.saving_seconds < above.best.cost_seconds * 1.5
    assert edge < _flip(inputs, model)


def test_candidates_are_fitted_only_when_a_rewrite_could_net_more_than_the_fitting() -> None:
    """The fitting exit sits exactly where the most a rewrite could net (the sample's
    "read now" ceiling minus the cheapest rewrite) equals the fitting's estimate:
    just below, nothing is fitted; just above, the candidates are fitted and, this far
    past the flip, one is chosen. Without the exits the decision is the rewrite."""
    model = TIGHT
    inputs = _inputs(_window(36), sample_all=True, scale=40.0)
    horizon = _flip(inputs, model) * 3.0
    probe = recommend(
        dataclasses.replace(inputs), model=model,
        benefit=BenefitConfig(horizon_queries=horizon), bounds=False,
    )  # fmt: skip
    best = probe.best
    assert probe.rewrite and best is not None
    ceiling = horizon * model.read_seconds(best.bytes_now_per_query, best.files_now_per_query)
    floor = model.rewrite_seconds(
        best.candidate_bytes, 1, n_curve=1, n_additional=best.n_additional
    )
    per_row = (ceiling - floor) / ROWS  # the whole table is the sample
    assert per_row > 0

    def decide(per_row: float, *, told: float | None = None) -> Recommendation:
        """The fitting cost per row measured in the model; ``told``: given in the config."""
        config = BenefitConfig(horizon_queries=horizon, fit_seconds_per_row=told)
        measured = dataclasses.replace(model, fit_seconds_per_row=per_row)
        return recommend(dataclasses.replace(inputs), model=measured, benefit=config)

    for stopped, fitted in (
        (decide(per_row * 1.001), decide(per_row * 0.999)),
        (decide(0.0, told=per_row * 1.001), decide(per_row * 1.001, told=per_row * 0.999)),
    ):
        assert not stopped.rewrite and stopped.candidates == [] and not stopped.estimates
        assert "not more than fitting the candidate layouts" in stopped.reason
        assert f"{ROWS:,} sample rows" in stopped.reason
        assert fitted.candidates and fitted.rewrite
        assert _decision(fitted) == _decision(probe)
        # what the fitting took is kept for the next decisions (0: nothing was fitted)
        assert stopped.fit_seconds == 0.0 == stopped.to_dict()["fit_seconds"]
        assert 0 < fitted.fit_seconds == fitted.to_dict()["fit_seconds"] < fitted.seconds
    with pytest.raises(InvalidOption, match="fit_seconds_per_row"):
        BenefitConfig(fit_seconds_per_row=-1.0)


def test_calibration_times_every_family_on_its_fitting_workload() -> None:
    sample, texts = fitting_workload(600)
    predicates = _parsed_on(texts, sample.schema)
    analysis = analyze(predicates, sample)
    fitted = candidates(analysis, predicates, sample, 8)
    assert sorted(c.family for c in fitted) == ["hilbert", "pando", "qdtree", "sop-z", "zorder"]
    assert all(c.error is None and c.layout is not None for c in fitted)
    per_row = measure_fitting((300, 600), repeats=1)
    assert 0 < per_row < 1  # seconds per row: the work ran, once per size
    with pytest.raises(InvalidOption, match="samples of >= 100 rows"):
        measure_fitting((50,))
    with pytest.raises(InvalidOption, match="at least once"):
        measure_fitting((300,), repeats=0)
    # and calibrate() refuses them before it starts any Spark work (no session needed)
    with pytest.raises(InvalidOption, match="samples of >= 100 rows"):
        calibrate(None, fit_rows=(50, 20_000))  # type: ignore[arg-type]
