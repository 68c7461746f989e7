"""Spark's Python daemon, with the modules lakelayout's tasks run already imported.

Spark forks every Python worker from one daemon process per executor and kills a
pooled worker after one minute without work (a constant in Spark's
``PythonWorkerFactory``). A write or rewrite that follows a minute of JVM-only
queries therefore starts fresh workers, and each one imports pyspark's worker,
pyarrow and lakelayout again before it can run a task: 0.8 s more per append
after 70 s idle on a 2-core machine (0.3 s with this daemon;
``bench/bench_cold_workers.py``), paid by every write after a pause.

Started as ``python -m lakelayout.table.daemon`` (Spark's
``spark.python.daemon.module``, set by :func:`~lakelayout.table.session.spark_session`
in local mode), this module imports those modules once, then runs pyspark's own
daemon loop; forked workers inherit them. Spark imports the worker module only
after the fork because importing pyarrow or pandas may start threads; the modules
here start only jemalloc's background threads, which jemalloc restarts in a forked
child. A module that fails to import here is skipped: the worker imports it again
after the fork and reports the error with the task.

Two more things differ from Spark's daemon. The imported modules are frozen for
the garbage collector (``gc.freeze``): pyspark's worker loop runs a full
collection after every task, which otherwise traversed all of them each time.
And a worker whose socket the JVM has already closed when it flushes its last
bytes (a ``LIMIT`` that stopped reading early: over a Unix socket, which local
sessions use, that flush fails at once) exits quietly instead of printing a
``BrokenPipeError`` traceback into the driver's output; Spark forks a new worker
for the next task either way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: what a lakelayout task imports, in import order
PRELOADED = (
    "pyspark.worker",
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "lakelayout.table.writer",
    "lakelayout.table.reader",
    "lakelayout.table.index_job",
    "lakelayout.cluster.rewrite",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules``; returns the ones that failed (left to the workers)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the task that needs it imports it again and reports the error
            failed.append(name)
    return failed


def quiet_on_closed_socket(worker: Callable[..., int]) -> Callable[..., int]:
    """``worker`` (pyspark's ``daemon.worker``), returning 1 instead of raising when the
    JVM closed the socket first: pyspark's loop then ends this worker without a
    traceback, as it does for any worker that returns an error code."""

    def run(*args: Any) -> int:
        try:
            return worker(*args)
        except BrokenPipeError:
            return 1

    return run


if __name__ == "__main__":
    preload()
    import gc

    # a worker runs a full gc.collect() after every task (pyspark's daemon loop); frozen,
    # the modules imported above are not traversed again in every task (40 -> 19 ms of
    # CPU per task), and the forked workers keep sharing their pages with this process
    gc.freeze()
    from pyspark import daemon

    daemon.worker = quiet_on_closed_socket(daemon.worker)  # type: ignore[assignment]
    daemon.manager()
