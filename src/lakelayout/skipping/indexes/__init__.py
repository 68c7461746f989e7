"""Skipping index types: what each collects per file and which predicates it represents.

See :mod:`lakelayout.skipping.indexes.base` for the extension API and
``docs/indexes.md`` for a worked example.
"""

from lakelayout.skipping.indexes.affix import Prefix, Suffix
from lakelayout.skipping.indexes.base import (
    Clause,
    Collector,
    Index,
    TermIndex,
    elementwise,
    index_kinds,
    register,
)
from lakelayout.skipping.indexes.features import Features
from lakelayout.skipping.indexes.gaplist import GapList
from lakelayout.skipping.indexes.geobox import (
    WITHIN_BOX,
    WITHIN_BOX_FUNCTIONS,
    GeoBox,
    expand_within_box,
    within_box_predicate,
)
from lakelayout.skipping.indexes.minmax import MinMax
from lakelayout.skipping.indexes.values import BloomFilter, Hybrid, ValueList

__all__ = [
    "WITHIN_BOX",
    "WITHIN_BOX_FUNCTIONS",
    "BloomFilter",
    "Clause",
    "Collector",
    "Features",
    "GapList",
    "GeoBox",
    "Hybrid",
    "Index",
    "MinMax",
    "Prefix",
    "Suffix",
    "TermIndex",
    "ValueList",
    "elementwise",
    "expand_within_box",
    "index_kinds",
    "register",
    "within_box_predicate",
]
