"""lakelayout: self-organizing data layouts for Delta Lake tables on Spark.

The public names are imported lazily, so ``import lakelayout`` is cheap and
never starts a JVM.

>>> from lakelayout import Table, spark_session
>>> Table.__name__, spark_session.__name__
('Table', 'spark_session')
"""

from __future__ import annotations

import importlib
from typing import Any

from lakelayout.errors import (
    AfterCommitError,
    CommitConflict,
    EnvironmentProblem,
    InvalidOption,
    LakelayoutError,
    LayoutError,
    LocationNotEmpty,
    PredicateError,
    SchemaMismatch,
    StateLocked,
    StateUnreadable,
    TableCorrupt,
    TableExists,
    TableNotFound,
    UnsupportedTable,
)

_LAZY = {
    "Table": "lakelayout.api",
    "ScanResult": "lakelayout.api",
    "WriteMetrics": "lakelayout.api",
    "ScanReport": "lakelayout.skipping.scan_report",
    "ScanPlan": "lakelayout.skipping.planner",
    "plan": "lakelayout.skipping.planner",
    "spark_session": "lakelayout.table.session",
    "sql": "lakelayout.sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lakelayout' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AfterCommitError",
    "CommitConflict",
    "EnvironmentProblem",
    "InvalidOption",
    "LakelayoutError",
    "LayoutError",
    "LocationNotEmpty",
    "PredicateError",
    "ScanPlan",
    "ScanReport",
    "ScanResult",
    "SchemaMismatch",
    "StateLocked",
    "StateUnreadable",
    "Table",
    "TableCorrupt",
    "TableExists",
    "TableNotFound",
    "UnsupportedTable",
    "WriteMetrics",
    "plan",
    "spark_session",
    "sql",
]
__version__ = "0.1.0"
