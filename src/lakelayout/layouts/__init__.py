"""Layout families: pure algorithms that map rows to blocks.

Every family implements :class:`~lakelayout.layouts.base.Layout`: fitted on a
sample and a workload on the driver, applied to every row in Spark tasks with
``assign``, stored as JSON with the table. Importing this package registers
every family with :func:`from_json`.
"""

from lakelayout.layouts.base import Layout, from_json
from lakelayout.layouts.cuts import Cut, Region, candidate_cuts, may_intersect
from lakelayout.layouts.feature_set import FeatureSet
from lakelayout.layouts.hilbert import HilbertLayout
from lakelayout.layouts.linear import LinearLayout
from lakelayout.layouts.pando import PandoLayout
from lakelayout.layouts.qdtree import QdTreeLayout
from lakelayout.layouts.ranks import RangeRanks
from lakelayout.layouts.sop import (
    OrderingZeros,
    SOPLayout,
    mst_order,
    ordering_zeros,
    skipping_cost,
)
from lakelayout.layouts.sopz import SOPZLayout
from lakelayout.layouts.virtual import block_metadata, estimate_by_minmax
from lakelayout.layouts.zorder import CurveLayout, ZOrderLayout

__all__ = [
    "CurveLayout",
    "Cut",
    "FeatureSet",
    "HilbertLayout",
    "Layout",
    "LinearLayout",
    "OrderingZeros",
    "PandoLayout",
    "QdTreeLayout",
    "RangeRanks",
    "Region",
    "SOPLayout",
    "SOPZLayout",
    "ZOrderLayout",
    "block_metadata",
    "candidate_cuts",
    "estimate_by_minmax",
    "from_json",
    "may_intersect",
    "mst_order",
    "ordering_zeros",
    "skipping_cost",
]
