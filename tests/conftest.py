"""Shared fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .processes import INTERPRETED, LATE_C2

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession shared by every Spark test (started once per xdist worker).

    One task thread: ``make test`` runs two workers on two cores, so a second
    thread per session adds no throughput, only tasks (the shuffle and Delta
    snapshot partitions follow the cores: 2 instead of 4) and contention. Six
    Spark-heavy files, -n 2, interleaved: 307 / 326 s with ``local[2]``, 280 / 299 s
    with ``local[1]``. Tasks running side by side are still exercised by the
    child processes of the deployment tests (a 2-core worker, ``local[2]`` Connect).
    Queries run interpreted (:data:`tests.processes.INTERPRETED`).
    """
    from lakelayout.table.session import spark_session

    session = spark_session(
        "local[1]",
        **{
            "spark.ui.enabled": "false",
            **INTERPRETED,
            # the user's own options: lakelayout's are kept beside them
            "spark.driver.extraJavaOptions": LATE_C2,
        },
    )
    yield session
    session.stop()


#: the files that took longest in a full run (seconds of test time, setup included; one
#: run on 2026-12-02: 1,435 s in all, 737 s on the clock with two workers).
#: ``--dist loadfile`` hands whole files to the two workers in order; by default xdist
#: orders them by their number of tests, which put the slowest last (test_deployments:
#: 2 tests) and one worker finished ~20 s after the other. ``make test`` passes
#: ``--no-loadscope-reorder`` and the files come in this order: slowest first, the short
#: ones even out the end.
SLOWEST_FIRST = (
    "tests/table/test_delta_connector_tables.py",  # 266 s
    "tests/test_deployments.py",  # 154 s
    "tests/test_online_table.py",  # 144 s
    "tests/test_no_lost_rows.py",  # 84 s
    "tests/evaluation/test_file_counts.py",  # 65 s
    "tests/delta_connector/test_concurrent_writers.py",  # 60 s
    "tests/table/test_partitions.py",  # 49 s
    "tests/test_indexing.py",  # 38 s
    "tests/test_partitioned_property.py",  # 36 s (alone)
    "tests/delta_connector/test_lakelayout_tables.py",  # 34 s
    "tests/cluster/test_conflicts.py",  # 31 s
    "tests/evaluation/test_replay_order.py",  # 29 s
    "tests/advisor/test_cli_advisor.py",  # 26 s
    "tests/expr/test_spark_differential.py",  # 26 s
    "tests/table/test_session.py",  # 25 s
    "tests/evaluation/test_replay_spark.py",  # 24 s
    "tests/evaluation/test_bench_datasets.py",  # 22 s
    "tests/cluster/test_vacuum.py",  # 21 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first (a stable sort: the rest keep their order, and so do the
    tests inside every file)."""
    rank = {path: k for k, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
