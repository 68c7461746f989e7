"""OPTIMIZE and liquid clustering: compaction, ZORDER BY, ZCubes, any layout, DELETE.

The execution plane of reorganization: plans are pure (:mod:`.plan`), rewrites
run in Spark (:mod:`.rewrite`), clustering state lives in table properties
(:mod:`.config`) and a provenance sidecar (:mod:`.provenance`).
"""

from lakelayout.cluster.config import (
    CLUSTERING_COLUMNS,
    MIN_CUBE_SIZE,
    MIN_FILE_SIZE,
    TARGET_CUBE_SIZE,
    validate_clustering,
)
from lakelayout.cluster.optimize import OptimizeHooks, Optimizer
from lakelayout.cluster.optimize_metrics import OptimizeMetrics

__all__ = [
    "CLUSTERING_COLUMNS",
    "MIN_CUBE_SIZE",
    "MIN_FILE_SIZE",
    "TARGET_CUBE_SIZE",
    "OptimizeHooks",
    "OptimizeMetrics",
    "Optimizer",
    "validate_clustering",
]
