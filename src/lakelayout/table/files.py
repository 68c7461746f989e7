"""The descriptor of one written data file: what a Delta ``add`` action is made from.

Writers (Spark tasks, rewrites) produce :class:`WrittenFile` values; the Delta
layer (:mod:`lakelayout.table.delta`) commits them. Neither imports the other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: key of :attr:`WrittenFile.extra` holding the per-index metadata values of a file
INDEX_METADATA = "indexes"


@dataclass(frozen=True)
class WrittenFile:
    """One data file written by a task, ready to become a Delta ``add`` action.

    ``path`` is relative to the table root, in the URI-encoded form the log
    (and so every snapshot) lists it (``part=a%20b/...`` for the directory
    ``part=a b``; see :func:`lakelayout.table.datafile.log_path`);
    ``stats_json`` is the Delta stats object (``numRecords``, ``minValues``,
    ``maxValues``, ``nullCount``) as JSON text; ``partition_values`` is the
    ``partitionValues`` map exactly as the log stores it (physical column
    names, serialized values; empty for unpartitioned tables);
    ``extra`` holds lakelayout's extended metadata (e.g. skipping-index values).
    """

    path: str
    size: int
    num_records: int
    stats_json: str
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> dict[str, Any]:
        """The Delta stats object (parsed ``stats_json``)."""
        parsed: dict[str, Any] = json.loads(self.stats_json)
        return parsed
