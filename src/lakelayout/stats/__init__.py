"""The per-file statistics model, apart from any I/O (the algorithm plane).

* :mod:`~lakelayout.stats.bounds`: what makes a bound true (string prefixes,
  bound types, nested leaf names);
* :mod:`~lakelayout.stats.model`: :class:`FileStats` / :class:`ColumnStats`,
  many files' bounds as columns for vectorized pruning;
* :mod:`~lakelayout.stats.delta_stats`: Delta statistics (log JSON,
  ``get_add_actions``) read into the model as true bounds;
* :mod:`~lakelayout.stats.blocks`: virtual files, exact bounds of a sample's
  blocks under a layout.

Collecting statistics while writing lives beside the writer
(:mod:`lakelayout.table.collect`). Nothing here imports pyspark.
"""

from lakelayout.stats.blocks import block_stats
from lakelayout.stats.delta_stats import from_add_actions, from_delta_stats
from lakelayout.stats.model import ColumnStats, FileStats

__all__ = ["ColumnStats", "FileStats", "block_stats", "from_add_actions", "from_delta_stats"]
