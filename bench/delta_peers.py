"""What the benches against Delta OSS share: the four ways of clustering a table copy.

Each method has an untimed ``prepare`` (declaring clustering, aiming the
file count) and a timed ``run`` (the OPTIMIZE itself):

* ``ll-liquid``: lakelayout ``cluster_by`` + ``optimize.run()`` (Hilbert ZCubes);
* ``ll-hilbert``: lakelayout ``optimize.hilbert(columns)`` over the whole table;
* ``delta-liquid``: Delta's ``ALTER TABLE ... CLUSTER BY`` + Delta's ``OPTIMIZE``;
* ``delta-zorder``: Delta's ``OPTIMIZE ... ZORDER BY (columns)``.

Every method aims at the same file count (lakelayout: one file per block at
``live bytes / files``; Delta: ``maxFileSize = live bytes // files``), so
reads compare layouts at equal file counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lakelayout.api import Table
from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.evaluation import delta_oss
from lakelayout.evaluation.policies import aim_file_count

METHODS = ("ll-liquid", "ll-hilbert", "delta-liquid", "delta-zorder")
#: (ours, Delta's) pairs whose ratios the benches print
PAIRS = (("ll-liquid", "delta-liquid"), ("ll-hilbert", "delta-zorder"))


@dataclass(frozen=True)
class Method:
    name: str
    prepare: Callable[[Any, str, Sequence[str], int], None]
    run: Callable[[Any, str, Sequence[str], int], OptimizeMetrics]


def _ll_liquid_prepare(spark: Any, path: str, columns: Sequence[str], files: int) -> None:
    t = Table(path, spark=spark)
    t.cluster_by(list(columns))
    aim_file_count(t, files)


def _ll_liquid_run(spark: Any, path: str, columns: Sequence[str], files: int) -> OptimizeMetrics:
    return _timed(lambda: Table(path, spark=spark).optimize.run(one_file_per_block=True))


def _ll_hilbert_prepare(spark: Any, path: str, columns: Sequence[str], files: int) -> None:
    aim_file_count(Table(path, spark=spark), files)


def _ll_hilbert_run(spark: Any, path: str, columns: Sequence[str], files: int) -> OptimizeMetrics:
    t = Table(path, spark=spark)
    return _timed(lambda: t.optimize.hilbert(list(columns), one_file_per_block=True))


def _delta_liquid_prepare(spark: Any, path: str, columns: Sequence[str], files: int) -> None:
    delta_oss.collect_stats_on_every_column(spark, path)
    cols = ", ".join(delta_oss.quote(c) for c in columns)
    spark.sql(f"ALTER TABLE {delta_oss.table_ref(path)} CLUSTER BY ({cols})")


def _delta_liquid_run(spark: Any, path: str, columns: Sequence[str], files: int) -> OptimizeMetrics:
    return delta_oss.optimize(spark, path, files=files)


def _delta_zorder_prepare(spark: Any, path: str, columns: Sequence[str], files: int) -> None:
    delta_oss.collect_stats_on_every_column(spark, path)


def _delta_zorder_run(spark: Any, path: str, columns: Sequence[str], files: int) -> OptimizeMetrics:
    return delta_oss.optimize(spark, path, zorder_by=list(columns), files=files)


def _timed(action: Callable[[], OptimizeMetrics]) -> OptimizeMetrics:
    from dataclasses import replace

    started = time.perf_counter()
    m = action()
    return replace(m, seconds=time.perf_counter() - started)


BY_NAME = {
    "ll-liquid": Method("ll-liquid", _ll_liquid_prepare, _ll_liquid_run),
    "ll-hilbert": Method("ll-hilbert", _ll_hilbert_prepare, _ll_hilbert_run),
    "delta-liquid": Method("delta-liquid", _delta_liquid_prepare, _delta_liquid_run),
    "delta-zorder": Method("delta-zorder", _delta_zorder_prepare, _delta_zorder_run),
}


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "n/a"
