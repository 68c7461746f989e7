"""The advisor learns the rewrite cost of the table at hand: the correction from the
decision log, and the cost model scaled by it; and what fitting candidates costs its
own decisions (pure: no Spark)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.advisor.decisions import (
    CORRECTION_BOUNDS,
    CORRECTION_KEY,
    CORRECTION_REWRITES,
    PERSISTENCE_BOUNDS,
    fitting_per_row,
    persistence,
    rewrite_correction,
)
from lakelayout.errors import InvalidOption


def _row(
    actual: float | None, estimated: float | None, applied_with: float | None = None, **kw: Any
) -> dict[str, Any]:
    inputs = {} if applied_with is None else {CORRECTION_KEY: applied_with}
    return {
        "kind": "decision",
        "outcome": "applied",
        "actual_seconds": actual,
        "estimated_cost_seconds": estimated,
        "version_after": 7,
        "detail": {"inputs": inputs},
        **kw,
    }


def test_nothing_to_learn_before_the_first_applied_rewrite() -> None:
    assert rewrite_correction([]) is None
    rows = [
        _row(None, 1.0, outcome="skipped"),
        _row(3.0, 1.0, outcome="failed: boom"),
        _row(3.0, 1.0, outcome="recommended (not applied)"),
        _row(3.0, 1.0, outcome="yielded: lost to version 2 (DELETE, changed data)"),
        _row(3.0, 1.0, version_after=None),  # 'applied' but nothing committed
        _row(3.0, 1.0, kind="measurement"),
        _row(None, 1.0),  # applied but the time was not recorded
        _row(3.0, None),
        _row(3.0, 0.0),  # an estimate of nothing cannot be scaled
    ]
    assert rewrite_correction(rows) is None


def test_the_ratio_is_against_the_models_own_estimate() -> None:
    # the second rewrite was priced with the first one's correction (x3): its recorded
    # estimate is 3x the model's, so its ratio is actual x 3 / estimated
    rows = [_row(3.0, 1.0), _row(4.5, 3.0, applied_with=3.0)]
    c = rewrite_correction(rows)
    assert c is not None
    assert c.ratios == (3.0, 4.5)
    assert c.factor == pytest.approx(3.75)
    assert "last 2 automatic rewrites: 3.00, 4.50" in c.describe()


def test_only_the_latest_rewrites_count_and_the_factor_is_bounded() -> None:
    old = [_row(100.0, 1.0)] * 10  # long ago, far off: forgotten
    recent = [_row(r, 1.0) for r in (0.5, 0.8, 0.6, 0.7, 0.9)]
    c = rewrite_correction(old + recent)
    assert c is not None and len(c.ratios) == CORRECTION_REWRITES
    assert c.factor == pytest.approx(0.7)
    huge = rewrite_correction([_row(1000.0, 1.0)])
    assert huge is not None and huge.factor == CORRECTION_BOUNDS[1]
    assert "bounded to" in huge.describe()
    tiny = rewrite_correction([_row(0.001, 10.0)])
    assert tiny is not None and tiny.factor == CORRECTION_BOUNDS[0]


@given(
    ratios=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=12),
    earlier=st.floats(0.25, 8.0),
)
def test_the_factor_is_the_bounded_median_of_the_last_ratios(
    ratios: list[float], earlier: float
) -> None:
    # every rewrite priced with some earlier correction: the recorded estimates are
    # scaled by it, and the learned ratios must not depend on it
    rows = [_row(r * 2.0, 2.0 * earlier, applied_with=earlier) for r in ratios]
    c = rewrite_correction(rows)
    assert c is not None
    recent = sorted(ratios[-CORRECTION_REWRITES:])
    n = len(recent)
    median = recent[n // 2] if n % 2 else (recent[n // 2 - 1] + recent[n // 2]) / 2
    low, high = CORRECTION_BOUNDS
    assert c.factor == pytest.approx(min(high, max(low, median)), rel=1e-9)
    assert low <= c.factor <= high


def test_a_scaled_model_scales_every_rewrite_term_but_the_fixed_ones_and_no_query_term() -> None:
    base = dataclasses.replace(DEFAULTS, shuffle_fixed_seconds=0.4, shuffle_seconds_per_value=1e-8)
    scaled = base.scaled_rewrites(2.5, "why")
    cases = ((1, 0, 0, 0, 0), (7, 10**9, 2, 3, 10**7), (100, 12345, 0, 1, 99))
    for shuffled in (False, True):
        fixed = base.rewrite_fixed(shuffled=shuffled)
        assert fixed == base.rewrite_fixed_seconds + 0.4 * shuffled
        assert scaled.rewrite_fixed(shuffled=shuffled) == fixed  # job start-up, commit
        for files, nbytes, n_sop, n_add, values in cases:
            kw = {"n_curve": 2, "n_sop": n_sop, "n_additional": n_add, "values": values,
                  "shuffled": shuffled}  # fmt: skip
            grown = base.rewrite_seconds(nbytes, files, **kw) - fixed
            assert grown > 0
            assert scaled.rewrite_seconds(nbytes, files, **kw) - fixed == pytest.approx(2.5 * grown)
    assert scaled.additional_seconds_per_byte == 2.5 * DEFAULTS.additional_seconds_per_byte
    assert scaled.query_seconds(10**9) == DEFAULTS.query_seconds(10**9)
    assert scaled.source == "defaults; rewrites x 2.5 (why)"
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidOption, match="rewrite cost factor must be finite and > 0"):
            DEFAULTS.scaled_rewrites(bad, "why")


def test_the_fixed_part_of_each_estimate_is_left_out_of_the_ratio() -> None:
    def row(actual: float, estimated: float, fixed: float, applied: float = 1.0) -> dict[str, Any]:
        out = _row(actual, estimated, applied_with=applied)
        out["detail"]["chosen"] = {"fixed_cost_seconds": fixed}
        return out

    # a small first rewrite: 0.9 s estimated, 0.74 s of it fixed; it took 3.13 s, so the part
    # that grows with the data took (3.13 - 0.74) / 0.16 times the model's
    c = rewrite_correction([row(3.13, 0.9, 0.74)])
    assert c is not None and c.ratios == (pytest.approx(2.39 / 0.16),)
    # priced with that correction, the next estimate's variable part is c times the model's
    # and the ratio divides it out; a rewrite within its fixed part has ratio 0
    c = rewrite_correction([row(6.0, 0.5 + 4.0 * 2.0, 0.5, applied=4.0), row(0.3, 1.0, 0.5)])
    assert c is not None and c.ratios == (pytest.approx(5.5 * 4.0 / 8.0), 0.0)
    assert c.factor == pytest.approx(max(CORRECTION_BOUNDS[0], (2.75 + 0.0) / 2))
    # an estimate that is all fixed part teaches nothing
    assert rewrite_correction([row(3.0, 0.5, 0.5)]) is None


def test_the_index_collection_timed_on_the_sample_is_left_out_of_the_ratio() -> None:
    # 0.5 s fixed, 2.0 s of collecting the declared indexes (timed on the sample), 1.0 s
    # of the model's variable part; it took 6.5 s: the model's part took 4 s, 4x its price
    row = _row(6.5, 3.5, applied_with=1.0)
    row["detail"]["chosen"] = {"fixed_cost_seconds": 0.5, "collect_seconds": 2.0}
    c = rewrite_correction([row])
    assert c is not None and c.ratios == (pytest.approx(4.0),)
    # a tree's routing timed on the sample is left out too: 0.5 s fixed, 1.5 s collecting,
    # 0.5 s routing, 1.0 s of the model's part; it took 5.5 s: the model's part took 3 s
    row = _row(5.5, 3.5, applied_with=1.0)
    row["detail"]["chosen"] = {
        "fixed_cost_seconds": 0.5,
        "collect_seconds": 1.5,
        "route_seconds": 0.5,
    }
    c = rewrite_correction([row])
    assert c is not None and c.ratios == (pytest.approx(3.0),)
    # a rewrite that took no more than its fixed part and its collection learns ratio 0
    row = _row(2.0, 3.5, applied_with=1.0)
    row["detail"]["chosen"] = {"fixed_cost_seconds": 0.5, "collect_seconds": 2.0}
    c = rewrite_correction([row])
    assert c is not None and c.ratios == (0.0,)


def _fitted(seconds: float | None, sample_rows: int | None, **kw: Any) -> dict[str, Any]:
    detail = {"fit_seconds": seconds, "inputs": {"sample_rows": sample_rows}}
    return {"kind": "decision", "outcome": "skipped", "detail": detail, **kw}


def test_the_fitting_cost_is_learned_from_the_decisions_that_fitted() -> None:
    assert fitting_per_row([]) is None
    unfitted = [
        _fitted(0.0, 20_000),  # a bound ended it: nothing was fitted
        _fitted(None, 20_000),  # recorded before decisions kept their fitting time
        _fitted(1.0, 0),
        _fitted(1.0, 20_000, kind="measurement"),
        {"kind": "decision", "detail": None},
    ]
    assert fitting_per_row(unfitted) is None
    # every decision that fitted counts, applied or not; the median of the last five
    times = [4.0, 1.0, 2.0, 3.0, 2.5, 0.5, 1.5]
    outcomes = ("applied", "skipped", "recommended (not applied)") * 3
    rows = [
        *unfitted,
        *(_fitted(t, 10_000, outcome=o) for t, o in zip(times, outcomes[:7], strict=True)),
    ]
    cost = fitting_per_row(rows)
    assert cost is not None
    assert cost.measured == tuple(t / 10_000 for t in times[-CORRECTION_REWRITES:])
    assert cost.per_row == pytest.approx(2.0 / 10_000)
    assert "last 5 decisions that fitted" in cost.describe()
    last = fitting_per_row(rows, last=1)
    assert last is not None and last.measured == (1.5 / 10_000,) == (last.per_row,)


def test_persistence_is_the_bounded_median_of_the_last_kept_shares() -> None:
    assert persistence([]) is None
    assert persistence([(5.0, 0.0), (float("nan"), 2.0)]) is None  # nothing measurable
    one = persistence([(1.0, 4.0)])
    assert one is not None and one.factor == 0.25 and one.ratios == (0.25,)
    # a rewrite that made its queries read more counts as keeping nothing
    worse = persistence([(-3.0, 4.0), (1.0, 4.0), (2.0, 4.0)])
    assert worse is not None and worse.ratios == (0.0, 0.25, 0.5) and worse.factor == 0.25
    # the last five only
    many = persistence([(4.0, 4.0)] * 3 + [(0.4, 4.0)] * 5)
    assert many is not None and many.ratios == (0.1,) * 5
    # bounded: nothing kept still leaves a tenth; more than estimated counts as all
    low, high = PERSISTENCE_BOUNDS
    assert persistence([(0.0, 4.0)]).factor == low  # type: ignore[union-attr]
    assert persistence([(9.0, 4.0), (8.0, 4.0)]).factor == high  # type: ignore[union-attr]
    assert "bounded to 0.1..1" in persistence([(0.0, 4.0)]).describe()  # type: ignore[union-attr]


def test_a_rewrite_is_left_behind_below_what_its_decision_expected() -> None:
    """A decision priced with persistence p expected p of the window's saving: its files
    are candidates again only below that share ÷ the margin, not below the whole."""
    from lakelayout.advisor.advisor import EarlierRewrite

    def earlier(saved: float, priced: float) -> EarlierRewrite:
        return EarlierRewrite({}, 20, saved, 30.0, [0], priced)

    assert earlier(19.0, 1.0).left_behind(1.5) and not earlier(21.0, 1.0).left_behind(1.5)
    # expected a third: 30 × 0.33 ÷ 1.5 = 6.6 bytes per query
    assert not earlier(17.7, 0.33).left_behind(1.5) and not earlier(6.7, 0.33).left_behind(1.5)
    assert earlier(6.5, 0.33).left_behind(1.5) and earlier(-1.0, 0.33).left_behind(1.5)
