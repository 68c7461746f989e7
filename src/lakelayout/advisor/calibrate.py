"""``lakelayout calibrate``: measure this cluster's cost coefficients (thesis §5.1).

The thesis fits its cost function by clustering tables of a few sizes with
one parameter varied at a time and fitting lines. Here, for each of a few
generated table sizes (Spark writes them, like any lakelayout table):

* rewrites: Z-order on 1, 2 and 4 columns and SOP+Z with 4 SOP features,
  each into a different number of files (so the per-file term separates from
  the fixed one), timed end to end (``OptimizeMetrics.seconds``); the same
  on a wide table (30 columns, mostly small strings, dates and integers that
  compress well, like a denormalized fact table) at all but the smallest
  size, so that the cost per value (row × column) separates from the cost
  per byte; and the Z-orders again at all but the smallest size with
  ``lakelayout.smallRewriteSize`` at one byte, so that they take the shuffle
  path that real tables above 128 MiB take (the shuffle terms; one of them
  on the wide table too, since a shuffle costs per value), and one Z-order
  each way on the query table below;
* statistics: one and three expression ``MinMax`` indexes built over the
  table (``indexes.refresh``), timed, on every size and on the larger query
  table below: the fixed cost of the index job and the cost per additional
  feature and byte;
* queries: ``Table.scan(where).df.count()`` at several selectivities (the
  rows arrive in ``id`` order, so ``id < x`` reads a known share of the
  files), timed, on a table of each size and on a larger one three times, in
  8 files and sorted into each of :data:`MANY_FILES` (so that what a query
  pays per file separates from what it pays per byte); all of them at the
  end, in :data:`QUERY_ROUNDS` rounds over every table, the fastest round per
  point (:func:`_queries`);
* the advisor's own work (no Spark): fitting and pricing every candidate
  family on generated samples of :data:`FIT_ROWS` rows for a workload of range,
  equality and LIKE filters (:func:`measure_fitting`), best of two, a line
  through the origin: the seconds per sample row a decision pays to fit.

:func:`lakelayout.advisor.costmodel.fit` then fits the coefficients
(non-negative least squares) and the model is saved as JSON. Every table
is written under a temporary directory and deleted afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakelayout.advisor.costmodel import (
    CostModel,
    QueryObservation,
    RewriteObservation,
    StatisticsObservation,
    fit,
)
from lakelayout.errors import InvalidOption

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakelayout.api import Table
    from lakelayout.expr.nodes import Predicate

#: rows of the generated tables (a few MB to a few tens of MB)
DEFAULT_SIZES = (60_000, 180_000, 540_000)
QUICK_SIZES = (20_000, 60_000, 180_000)
#: queries are also timed on a table this many times the largest size
QUERY_TABLE_FACTOR = 4
#: files of the query table's later layouts (the first has 8)
MANY_FILES = (96, 384)
#: selectivities every query table is scanned at (None: no filter on ``id``)
QUERY_SHARES = (None, 0.1, 0.4, 0.75)
#: rounds of the queries (each point's fastest counts)
QUERY_ROUNDS = 3

SOP_FEATURES = ("s LIKE '%7%'", "b < 0.3", "c > 0.8", "d < 0.1")
#: sample sizes the advisor's fitting is timed on (its default sample has 20,000 rows)
FIT_ROWS = (5_000, 20_000)
#: queries of the workload the fitting is timed for, and the files the sample stands for
FIT_QUERIES = 100
FIT_BLOCKS = 32


def calibrate(
    spark: SparkSession,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
    many_files: Sequence[int] = MANY_FILES,
    fit_rows: Sequence[int] = FIT_ROWS,
) -> CostModel:
    """Measure rewrites, index builds and queries on tables of ``sizes`` rows, and
    queries on one of ``QUERY_TABLE_FACTOR`` x the largest size, in 8 files and again
    sorted into each of ``many_files`` files; time the advisor's fitting on samples of
    ``fit_rows`` rows; fit."""
    if len(sizes) < 2 or any(int(n) < 1000 for n in sizes):
        raise InvalidOption(f"calibration needs at least two sizes of >= 1000 rows, got {sizes}")
    _check_fitting(fit_rows, 1)  # before minutes of Spark work, not after
    rewrites: list[RewriteObservation] = []
    queries: list[QueryObservation] = []
    statistics: list[StatisticsObservation] = []
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="ll-calibrate-", dir=work_dir))
    try:
        # the queries run at the end, in rounds over every query table (below); each
        # size's is a table of its own, left in its first layout while ``t`` is rewritten
        query_tables: list[Table] = []
        for size in sizes:
            table = _table(spark, root / f"t{size}", int(size))
            query_tables.append(_table(spark, root / f"q{size}", int(size)))
            rewrites += _rewrites(table)
            statistics += _statistics(table)
            if size != min(sizes):
                rewrites += _zorders(table, shuffled=True)
                wide_table = _table(spark, root / f"w{size}", int(size), wide=True)
                rewrites += _rewrites(wide_table) + _zorders(
                    wide_table, ZORDERS[1:2], shuffled=True
                )
            progress(
                f"{size:,} rows: {len(rewrites)} rewrites and {len(statistics)} index builds "
                f"measured ({time.perf_counter() - started:.0f} s)"
            )
        # queries also on a larger table: below a few tens of MB a scan's time is its
        # fixed overhead plus noise, and the fitted cost per byte comes out as 0
        large = QUERY_TABLE_FACTOR * max(int(n) for n in sizes)
        table = _table(spark, root / f"t{large}", large)
        query_tables.append(table)
        # and the index builds: at the small sizes a build is its job's fixed cost plus
        # noise, and the cost per byte and feature came out as 0
        statistics += _statistics(table)
        # the same rows in more, smaller files, still in ``id`` order (a one-column
        # Z-order is a sort): the same bytes in more files separate the per-file cost of
        # a query from its per-byte cost. Spark packs small files into a task, so a file
        # costs less the more there are (8 -> 96 files: 3.4 ms a file; 96 -> 384: 0.8 ms
        # here); two steps let the one linear term fit both regimes (and each rewrite is
        # one more measured rewrite)
        for files in many_files:
            sorted_table = _table(spark, root / f"t{large}-{files}", large)
            rewrites += _zorders(sorted_table, ((("id",), files),))
            query_tables.append(sorted_table)
        queries = _queries(query_tables)
        # and one Z-order each way: the model is used far above the sizes before, and
        # this is the largest input calibration rewrites
        rewrites += _zorders(table, ZORDERS[1:2]) + _zorders(table, ZORDERS[1:2], shuffled=True)
        progress(f"{large:,} rows: {len(queries)} queries in {QUERY_ROUNDS} rounds over "
                 f"{len(query_tables)} tables, {2 + len(many_files)} more rewrites measured "
                 f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_row = measure_fitting(fit_rows)
    progress(
        f"fitting candidate layouts: {per_row * 1e6:.3g} µs per sample row "
        f"({per_row * max(fit_rows):.2f} s for {max(fit_rows):,} rows)"
    )
    rows = ", ".join(f"{n:,}" for n in sizes)
    wide = ", ".join(f"{n:,}" for n in sizes if n != min(sizes))
    return fit(
        rewrites,
        queries,
        statistics,
        fit_seconds_per_row=per_row,
        source=(
            f"calibrated on tables of {rows} rows (rewrites also on {WIDE_COLUMNS}-column "
            f"tables of {wide} and shuffled at {wide}; queries and a Z-order each way also "
            f"on {large:,}, queried again in {' and '.join(map(str, many_files))} files; "
            f"fitting on samples of {', '.join(f'{n:,}' for n in fit_rows)} rows)"
        ),
    )


def measure_fitting(rows: Sequence[int] = FIT_ROWS, *, repeats: int = 2) -> float:
    """Seconds per sample row that fitting and pricing every candidate family takes
    (:func:`lakelayout.advisor.estimate.candidates`, what a decision runs after its
    bounds), on generated samples of ``rows`` rows: the best of ``repeats`` runs at each
    size, a least-squares line through the origin. Pure: no Spark."""
    from lakelayout.advisor.analyzer import analyze
    from lakelayout.advisor.estimate import candidates
    from lakelayout.expr.parse import parse_predicate

    _check_fitting(rows, repeats)
    seconds = []
    for n in rows:
        sample, texts = fitting_workload(int(n))
        # each distinct text parsed once (a third of the workload repeats)
        parsed: dict[str, Predicate] = {
            t: parse_predicate(t, sample.schema) for t in dict.fromkeys(texts)
        }
        predicates = [parsed[t] for t in texts]
        analysis = analyze(predicates, sample)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            candidates(analysis, predicates, sample, FIT_BLOCKS)
            best = min(best, time.perf_counter() - started)
        seconds.append(best)
    x = np.asarray(rows, dtype=np.float64)
    return float(np.dot(x, seconds) / np.dot(x, x))


def _check_fitting(rows: Sequence[int], repeats: int) -> None:
    if not rows or any(int(n) < 100 for n in rows) or repeats < 1:
        raise InvalidOption(
            f"fitting is timed on samples of >= 100 rows, at least once; got {rows}, {repeats}"
        )


def fitting_workload(rows: int, seed: int = 11) -> tuple[pa.Table, list[str]]:
    """The sample and the queries :func:`measure_fitting` times: numbers, a
    low-cardinality integer and short strings in no useful order; :data:`FIT_QUERIES`
    filters, a third of them repeated (a log repeats queries): ranges on ``a``, a range
    with an equality, a range on two columns, LIKE filters (curve and SOP features,
    so that every family is fitted)."""
    rng = np.random.default_rng(seed)
    sample = pa.table(
        {
            "a": rng.integers(0, 1000, rows),
            "b": rng.random(rows),
            "c": rng.random(rows),
            "k": rng.integers(0, 20, rows).astype(np.int32),
            "s": pa.array([f"s{v}" for v in rng.integers(0, 97, rows)]),
        }
    )
    texts: list[str] = []
    for i in range(FIT_QUERIES):
        if i % 3 == 2:
            texts.append(texts[i - 2])
            continue
        lo, x = int(rng.integers(0, 950)), round(float(rng.random()), 3)
        texts.append(
            (
                f"a BETWEEN {lo} AND {lo + 50}",
                f"b < {x} AND k = {int(rng.integers(0, 20))}",
                f"a >= {lo} AND c > {x}",
                f"s LIKE '%{int(rng.integers(0, 9))}%'",
            )[i % 4]
        )
    return sample, texts


#: columns of the wide calibration table
WIDE_COLUMNS = 30
#: words of the wide table's comment column (a small vocabulary, like TPC-H's text)
WORDS = (
    "quick", "slow", "final", "pending", "special", "regular", "express", "ironic", "bold",
    "silent", "careful", "even", "furious", "idle", "busy", "sly", "ruthless", "blithe",
    "fluffy", "permanent", "deposits", "requests", "packages", "accounts", "theodolites",
    "instructions", "foxes", "pinto", "beans", "courts", "dolphins", "platelets",
)  # fmt: skip


def _frame(spark: SparkSession, rows: int, *, wide: bool = False) -> DataFrame:
    """``rows`` rows in ``id`` order: id, four random doubles a–d and a short string s;
    ``wide`` adds columns up to :data:`WIDE_COLUMNS`: low-cardinality strings, a
    comment of a few words, dates, integers and two-decimal doubles."""
    from pyspark.sql import functions as F

    df = (
        spark.range(rows)
        .withColumn("a", F.rand(1))
        .withColumn("b", F.rand(2))
        .withColumn("c", F.rand(3))
        .withColumn("d", F.rand(4))
        .withColumn("s", F.concat(F.lit("item-"), (F.col("id") * 7919 % 1000).cast("string")))
    )
    if wide:
        mix = [7, 13, 31, 61, 101, 211, 401, 809]
        for k, card in enumerate((2, 3, 5, 7, 25, 40, 150, 1000)):
            code = (F.col("id") * mix[k] % card).cast("string")
            df = df.withColumn(f"w_str{k}", F.concat(F.lit(f"kind{k}#"), code))
        words = F.array(*[F.lit(w) for w in WORDS])

        def word(m: int) -> Column:
            return F.element_at(words, (F.col("id") * m % len(WORDS) + 1).cast("int"))

        df = df.withColumn("w_comment", F.concat_ws(" ", word(17), word(23), word(29), word(37)))
        for k in range(4):
            days = (F.col("id") * mix[k + 4] % 2500).cast("int")
            df = df.withColumn(f"w_date{k}", F.date_add(F.lit("1992-01-01").cast("date"), days))
        for k in range(6):
            df = df.withColumn(f"w_int{k}", F.col("id") * mix[k] % (10 ** (k + 1)))
        for k in range(5):
            df = df.withColumn(f"w_num{k}", F.round(F.rand(10 + k) * 10 ** (k + 2), 2))
        assert len(df.columns) == WIDE_COLUMNS
    return df.repartitionByRange(8, "id").sortWithinPartitions("id")


def _table(spark: SparkSession, path: Path, rows: int, *, wide: bool = False) -> Table:
    from lakelayout.advisor.querylog import ENABLED_PROPERTY
    from lakelayout.api import Table

    table = Table.create(
        str(path),
        _frame(spark, rows, wide=wide),
        spark=spark,
        properties={ENABLED_PROPERTY: "false"},
    )
    return table


def _aim(table: Table, files: int) -> None:
    """Set the target file size so a whole-table rewrite writes about ``files`` files."""
    from lakelayout.cluster.config import TARGET_FILE_SIZE
    from lakelayout.table import delta

    target = max(1024, int(table.snapshot().files.total_bytes) // max(1, files))
    delta.set_properties(table.uri, {TARGET_FILE_SIZE: str(target)})


#: the Z-order rewrites measured: clustering columns, files written
ZORDERS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("a",), 4), (("a", "b"), 12), (("a", "b", "c", "d"), 6)
)  # fmt: skip


def _zorders(
    table: Table, shapes: Sequence[tuple[tuple[str, ...], int]] = ZORDERS, *, shuffled: bool = False
) -> list[RewriteObservation]:
    """One timed Z-order rewrite of the whole table per shape; with ``shuffled``, forced
    through the shuffle path (``lakelayout.smallRewriteSize`` at one byte meanwhile)."""
    from lakelayout.cluster.config import SMALL_REWRITE_SIZE
    from lakelayout.table import delta

    out = []
    width = len(table.snapshot().schema)
    if shuffled:
        delta.set_properties(table.uri, {SMALL_REWRITE_SIZE: "1"})
    for columns, files in shapes:
        _aim(table, files)
        m = table.optimize.zorder(list(columns), one_file_per_block=True)
        out.append(
            RewriteObservation(
                m.seconds,
                m.bytes_removed,
                m.files_added,
                len(columns),
                values=m.rows_removed * width,
                shuffled=shuffled,
            )
        )
    if shuffled:
        delta.set_properties(table.uri, {SMALL_REWRITE_SIZE: ""})  # unset again
    return out


def _rewrites(table: Table) -> list[RewriteObservation]:
    """The Z-orders of :data:`ZORDERS` and an SOP+Z with :data:`SOP_FEATURES`, timed."""
    from lakelayout.cluster.rewrite import read_files, sample_rows
    from lakelayout.layouts import SOPZLayout

    out = _zorders(table)
    width = len(table.snapshot().schema)
    _aim(table, 10)
    started = time.perf_counter()
    snap = table.snapshot()
    paths = [str(p) for p in snap.files.paths]
    df = read_files(table.spark, snap, paths, with_file=False)
    sample = sample_rows(df, int(snap.files.total_rows), rows=20_000)
    layout = SOPZLayout.fit(sample, list(SOP_FEATURES), columns=["a"], target_blocks=10,
                            conjunctions=False)  # fmt: skip
    m = table.optimize.apply(layout, paths, one_file_per_block=True)
    seconds = time.perf_counter() - started  # fitting on the sample is part of it
    out.append(
        RewriteObservation(
            seconds,
            m.bytes_removed,
            m.files_added,
            2,
            len(SOP_FEATURES),
            values=m.rows_removed * width,
        )
    )
    return out


def _statistics(table: Table) -> list[StatisticsObservation]:
    from lakelayout.skipping.indexes import MinMax

    out = []
    nbytes = int(table.snapshot().files.total_bytes)
    for exprs in (["a + b"], ["a * 2", "b - c", "c + d"]):
        table.indexes.add(*[MinMax(e) for e in exprs])
        m = table.indexes.refresh()
        out.append(StatisticsObservation(m.seconds, nbytes, len(exprs)))
        for declared in table.indexes.describe():
            table.indexes.drop(declared.name)
    return out


#: a condition no statistic decides and that reads every column of the kept files: a
#: count with ``id < n`` alone is answered from one column (and row-group statistics),
#: which prices a byte of a real query's files at almost nothing
READ_EVERY_COLUMN = "a + b + c + d + length(s) >= 0"


def _queries(tables: Sequence[Table], rounds: int = QUERY_ROUNDS) -> list[QueryObservation]:
    """Every table scanned at each of :data:`QUERY_SHARES` once per round, the rounds
    one after another; per table and share, the fastest round.

    Rounds over all the tables, not repeats of one query back to back: a slow
    minute of a shared machine (a burst of garbage collection, another process)
    then slows one repeat of many points, which the minimum discards, instead of
    every repeat of the few points measured in it, which tilted the fitted cost
    of a byte read 2.3x in one calibration (docs/benchmarks.md).
    """
    best: dict[tuple[int, float | None], QueryObservation] = {}
    for _ in range(rounds):
        for k, table in enumerate(tables):
            rows = int(table.snapshot().files.total_rows)
            for share in QUERY_SHARES:
                where = READ_EVERY_COLUMN
                if share is not None:
                    where = f"id < {int(rows * share)} AND {READ_EVERY_COLUMN}"
                started = time.perf_counter()
                result = table.scan(where)
                result.df.count()
                seconds = time.perf_counter() - started
                point = (k, share)
                if point not in best or seconds < best[point].seconds:
                    report = result.report
                    best[point] = QueryObservation(seconds, report.bytes_kept, report.files_kept)
    return list(best.values())
