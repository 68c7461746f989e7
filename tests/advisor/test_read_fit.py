"""The query terms fitted on a table's own timed queries (pure: no Spark)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.advisor.costmodel import (
    DEFAULTS,
    READ_FIT_MIN_QUERIES,
    QueryObservation,
    fit_reads,
)

FIXED, PER_BYTE, PER_FILE = 0.15, 2e-9, 1e-3
FILE_BYTES = 400_000


def _queries(
    n: int, seed: int = 0, *, noise: float = 0.01, slow: int = 0
) -> list[QueryObservation]:
    """``n`` queries reading 0 to 100 files of FILE_BYTES, each priced by the known
    model plus noise; ``slow`` of them 10× slower (a GC pause, a cold worker)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        files = int(rng.integers(0, 101))
        nbytes = files * FILE_BYTES + int(rng.integers(0, FILE_BYTES // 4)) * (files > 0)
        seconds = FIXED + PER_BYTE * nbytes + PER_FILE * files + rng.normal(0, noise)
        out.append(QueryObservation(seconds * (10 if k < slow else 1), nbytes, files))
    return out


def _read_cost(fit: object, nbytes: float, files: float) -> float:
    return fit.seconds_per_byte * nbytes + fit.seconds_per_file * files  # type: ignore[attr-defined]


def test_the_fit_recovers_what_skipping_a_file_saves() -> None:
    fit = fit_reads(_queries(60))
    assert fit is not None and fit.queries == 60 and fit.r2 > 0.9
    truth = PER_BYTE * FILE_BYTES + PER_FILE
    assert _read_cost(fit, FILE_BYTES, 1) == pytest.approx(truth, rel=0.05)
    assert fit.fixed_seconds == pytest.approx(FIXED, abs=0.02)


def test_a_few_slow_queries_do_not_tilt_the_line() -> None:
    # 3 of 60 queries 10x slower: plain least squares moves the slope by far more
    queries = _queries(60, seed=3, slow=3)
    fit = fit_reads(queries, min_r2=0.0)
    assert fit is not None
    truth = PER_BYTE * FILE_BYTES + PER_FILE
    assert _read_cost(fit, FILE_BYTES, 1) == pytest.approx(truth, rel=0.1)
    a = np.array([q.row() for q in queries])
    plain, *_ = np.linalg.lstsq(a, np.array([q.seconds for q in queries]), rcond=None)
    plain_cost = plain[1] * FILE_BYTES + plain[2]
    assert abs(plain_cost - truth) > 3 * abs(_read_cost(fit, FILE_BYTES, 1) - truth)


def test_too_few_queries_reads_that_do_not_spread_or_noise_keep_the_calibration() -> None:
    assert fit_reads(_queries(READ_FIT_MIN_QUERIES - 1)) is None
    assert fit_reads(_queries(READ_FIT_MIN_QUERIES)) is not None
    same = [QueryObservation(0.2 + 0.01 * (k % 3), 10 * FILE_BYTES, 10) for k in range(40)]
    assert fit_reads(same) is None  # every query read the same: no slope to see
    rng = np.random.default_rng(1)
    noise = [
        QueryObservation(float(rng.uniform(0.1, 1.0)), int(rng.integers(0, 10**8)), 5)
        for _ in range(40)
    ]
    assert fit_reads(noise) is None  # the seconds do not follow the bytes


def test_a_model_with_the_tables_reads_keeps_its_rewrite_terms() -> None:
    fit = fit_reads(_queries(40))
    assert fit is not None
    assert fit.file_bytes == pytest.approx(FILE_BYTES, rel=0.15)
    # DEFAULTS price a file of 400 kB at 5e-9 s a byte + 2 ms: 4 ms, against 1.8 ms
    truth = PER_BYTE * FILE_BYTES + PER_FILE
    assert fit.file_seconds() == pytest.approx(truth, rel=0.05)
    expected = DEFAULTS.read_seconds(fit.file_bytes, 1) / fit.file_seconds()
    assert fit.disagreement(DEFAULTS) == pytest.approx(expected) and expected > 2
    model = DEFAULTS.with_reads(fit)
    assert model.query_seconds_per_byte == fit.seconds_per_byte
    assert model.query_seconds_per_file == fit.seconds_per_file
    assert model.query_fixed_seconds == fit.fixed_seconds
    assert model.rewrite_seconds(10**8, 10, values=10**7) == DEFAULTS.rewrite_seconds(
        10**8, 10, values=10**7
    )
    assert "fitted on this table's last 40 timed queries" in model.source


def _scipy_robust_nnls(rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The same fit through scipy (what the advisor ran before it was written in numpy)."""
    from scipy.optimize import least_squares, nnls

    scale = np.linalg.norm(rows, axis=0)
    scale[scale == 0] = 1.0
    scaled = rows / scale
    start, _ = nnls(scaled, y)
    f_scale = max(1.4826 * float(np.median(np.abs(y - scaled @ start))), 1e-4)
    result = least_squares(
        lambda x: scaled @ x - y, start, bounds=(0.0, np.inf), loss="soft_l1", f_scale=f_scale
    )
    return np.maximum(result.x, 0.0) / scale


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(5, 80),
    st.sampled_from([0.001, 0.01, 0.1]),
    st.integers(0, 8),
    st.floats(-0.2, 0.3),
)
def test_the_numpy_fit_finds_scipys_minimum(
    seed: int, n: int, noise: float, slow: int, fixed: float
) -> None:
    """The reweighted fit reaches the soft-L1 minimum scipy's least_squares finds (the
    loss is convex, so one minimum): equal loss, and equal read prices where the
    minimum is well determined. A negative fixed term puts that coefficient on its bound."""
    from lakelayout.advisor.costmodel import _robust_nnls, _small_nnls

    rng = np.random.default_rng(seed)
    files = rng.integers(0, 101, n).astype(np.float64)
    nbytes = files * FILE_BYTES + rng.integers(0, FILE_BYTES // 4, n) * (files > 0)
    y = fixed + PER_BYTE * nbytes + PER_FILE * files + rng.normal(0, noise, n)
    y[:slow] *= 10
    rows = np.column_stack([np.ones(n), nbytes, files])
    mine, _ = _robust_nnls(rows.tolist(), y.tolist())
    theirs = _scipy_robust_nnls(rows, y)
    assert (mine >= 0).all()

    def loss(coef: np.ndarray) -> float:
        scale = np.linalg.norm(rows, axis=0)
        start = _small_nnls(rows / scale, y)
        f = max(1.4826 * float(np.median(np.abs(y - (rows / scale) @ start))), 1e-4)
        z = ((rows @ coef - y) / f) ** 2
        return float((2 * (np.sqrt(1 + z) - 1)).sum())

    assert loss(mine) <= loss(theirs) * (1 + 1e-6) + 1e-9
    if n < 20 or noise >= 0.1:
        # a handful of runs, or noise as large as what a file costs to read: the soft-L1
        # loss is flat around its minimum, and equally good fits price a read differently
        # (n=5, noise 0.1: 0.0010 s against 7e-11 s, at no larger a loss)
        return
    price = np.array([1.0, FILE_BYTES, 1.0])
    assert mine @ price == pytest.approx(theirs @ price, rel=0.02, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(1, 4))
def test_small_nnls_is_scipys_nnls(seed: int, n: int, k: int) -> None:
    from scipy.optimize import nnls

    from lakelayout.advisor.costmodel import _small_nnls

    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k))
    y = rng.normal(size=n)
    mine = _small_nnls(a, y)
    theirs, _ = nnls(a, y)
    assert (mine >= 0).all()
    assert np.linalg.norm(a @ mine - y) == pytest.approx(np.linalg.norm(a @ theirs - y), rel=1e-7)


def test_queries_the_line_fits_exactly_are_all_described_by_it() -> None:
    # residuals of rounding size only: every query is within the fit, none an outlier
    exact = [QueryObservation(0.1 + 0.72e-3 * 3 * k, 3 * k * 2**20, 3 * k) for k in range(30)]
    fit = fit_reads(exact)
    assert fit is not None and fit.r2 == pytest.approx(1.0)
    assert fit.file_seconds() == pytest.approx(0.72e-3, rel=1e-6)  # a 1 MiB file
