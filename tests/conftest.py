"""Shared fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession shared by every Spark test (started once)."""
    from lakelayout.table.session import spark_session

    session = spark_session("local[2]", **{"spark.ui.enabled": "false"})
    yield session
    session.stop()
