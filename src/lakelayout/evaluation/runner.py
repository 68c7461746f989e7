"""One call per benchmark: build the dataset, draw the workload, replay, write the report."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lakelayout.arguments import cannot_write_in
from lakelayout.errors import InvalidOption, closest
from lakelayout.evaluation import workloads
from lakelayout.evaluation.datasets import Dataset, logs_dataset, taxi_dataset, tpch_dataset
from lakelayout.evaluation.policies import OnlineSettings, make_policies
from lakelayout.evaluation.replay import ReplayConfig, replay
from lakelayout.evaluation.report import write_report

DEMO_POLICIES = (
    "none", "sorted", "zorder-halfway", "liquid", "delta-liquid", "qdtree", "deltars-zorder",
    "auto",
)  # fmt: skip
#: the datasets ``run_bench`` knows, each with its template set (``workloads.TEMPLATE_SETS``)
DATASETS = ("tpch", "logs", "taxi")


def run_bench(
    dataset_name: str,
    *,
    work_dir: Path,
    out_dir: Path,
    policies: Sequence[str] = DEMO_POLICIES,
    queries: int = 200,
    mode: str = "logical",
    scale: float = 0.1,
    rows: int = 1_000_000,
    batches: int = 4,
    rows_per_file: int = 10_000,
    shape: str = "drift",
    segment_length: int = 20,
    seed: int = 0,
    sample_rows: int = 50_000,
    indexes: bool = True,
    online: OnlineSettings | None = None,
    retime: bool = True,
    time_every: int = 1,
    rewrite_alpha: float | None = None,
    count_every: int = 1,
    progress: Callable[[str], None] = print,
) -> tuple[dict[str, Any], Path]:
    """Replay ``dataset_name`` (one of :data:`DATASETS`); the results and the HTML report path.

    ``indexes=False`` replays without the dataset's skipping indexes (min/max only);
    ``online`` sets α, window, interval, ε, states and γ of the online policies and oracles.
    ``retime=False`` skips timing every query a second time after the stream (spark mode).
    ``time_every=k`` (spark mode) times every k-th query only and prices the others by it
    (:class:`~lakelayout.evaluation.tables.ReplayConfig`). ``rewrite_alpha`` (logical mode)
    charges a rewrite that many full scans per table rewritten instead of its seconds.
    ``count_every=k`` counts the rows every k-th query matches only (σ, λ, µ over those).
    """
    from lakelayout.table.session import spark_session

    if dataset_name not in DATASETS:
        raise InvalidOption(
            f"unknown dataset {dataset_name!r}{closest(dataset_name, DATASETS)}; "
            f"known: {', '.join(DATASETS)}"
        )
    chosen = make_policies(policies, online)  # validate names before any work
    for name, count in (("rows", rows), ("batches", batches)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidOption(f"{name} must be an integer >= 1, got {count!r}")
    if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
        raise InvalidOption(f"scale must be a number > 0, got {scale!r}")
    config = ReplayConfig(
        mode=mode,
        rows_per_file=rows_per_file,
        sample_rows=sample_rows,
        seed=seed,
        indexes=indexes,
        retime=retime,
        time_every=time_every,
        rewrite_alpha=rewrite_alpha,
        count_every=count_every,
    )
    # the workload (its options checked) before the dataset is staged: a minute of
    # work and its files came before a bad option's error (an audit)
    wl = workloads.generate(
        workloads.TEMPLATE_SETS[dataset_name], queries, seed=seed, shape=shape,
        segment_length=segment_length,
    )  # fmt: skip
    if not wl:
        raise InvalidOption("the workload has no queries (queries=0)")
    _check_writable(out_dir)  # the report goes there once the replay ran
    spark = spark_session()
    started = time.perf_counter()
    ds = _dataset(dataset_name, spark, work_dir, scale=scale, rows=rows, batches=batches, seed=seed)
    progress(f"dataset {ds.name}: {ds.rows:,} rows staged in {time.perf_counter() - started:.1f} s")
    out_dir.mkdir(parents=True, exist_ok=True)
    workloads.save(wl, out_dir / "workload.jsonl")
    results = replay(chosen, ds, wl, work_dir / f"replay-{ds.name}", config, spark=spark,
                     progress=progress)  # fmt: skip
    results["dataset"]["scale"] = scale if dataset_name == "tpch" else None
    results["config"].update(shape=shape, segment_length=segment_length, workload_seed=seed)
    if online is not None:
        results["config"]["online"] = dataclasses.asdict(online)
    _, html_path = write_report(results, out_dir)
    return results, html_path


def _check_writable(out_dir: Path) -> None:
    """InvalidOption when the report cannot be written to ``out_dir`` (made here)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidOption(f"cannot write the report to {out_dir}: {exc.strerror}") from None
    why = cannot_write_in(out_dir)
    if why:
        raise InvalidOption(f"cannot write the report to {out_dir}: {why}")


def _dataset(
    name: str, spark: Any, work_dir: Path, *, scale: float, rows: int, batches: int, seed: int
) -> Dataset:
    """Stage dataset ``name`` (data seeds are offset from the workload seed, as before)."""
    if name == "tpch":
        return tpch_dataset(spark, scale, work_dir, batches=batches)
    if name == "taxi":
        return taxi_dataset(spark, rows, work_dir, batches=batches, seed=seed + 11)
    return logs_dataset(spark, rows, work_dir, batches=batches, seed=seed + 7)
