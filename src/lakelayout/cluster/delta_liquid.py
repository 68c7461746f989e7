"""Tables clustered by Delta's own liquid clustering (``CLUSTER BY`` through delta-spark).

Delta keeps a clustered table's columns in the ``delta.clustering`` domain
metadata (``{"clusteringColumns": [["k"], ["id"]]}``, one list of name parts
per column) and marks every file its OPTIMIZE wrote with the tags
``ZCUBE_ID`` (the cube) and ``ZCUBE_ZORDER_BY`` (the columns, a JSON list),
plus ``clusteringProvider: liquid``. delta-rs exposes neither domain
metadata nor tags, and refuses to commit to such tables (writer features
``clustering`` and ``domainMetadata``), so lakelayout reads and commits them
through Delta's connector in the session (:mod:`lakelayout.table.connector`).

What lakelayout makes of it:

* the clustering columns are Delta's (``Table.clustering_columns``,
  ``detail()``);
* Delta's cubes are cubes: a file with a ``ZCUBE_ID`` tag gets the
  provenance of a cube clustered by ``ZCUBE_ZORDER_BY``, so lakelayout's
  incremental OPTIMIZE leaves stable cubes alone and merges partial ones with
  new data, exactly as for its own cubes;
* the cubes lakelayout writes carry the same tags (and the liquid
  clustering provider), so Delta's OPTIMIZE treats them as cubes too.

Without Delta's connector such a table is readable (scans) but lakelayout
refuses to cluster it, by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakelayout.cluster.provenance import FileProvenance
from lakelayout.errors import UnsupportedTable
from lakelayout.table import connector

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.table.delta import Snapshot

#: the writer feature of a table clustered by Delta
CLUSTERING_FEATURE = "clustering"
#: the domain holding Delta's clustering columns
CLUSTERING_DOMAIN = "delta.clustering"
#: tags Delta's liquid clustering writes on each file of a cube
CUBE_TAG = "ZCUBE_ID"
COLUMNS_TAG = "ZCUBE_ZORDER_BY"


def is_delta_clustered(snap: Snapshot) -> bool:
    """Whether Delta's liquid clustering feature is on the table."""
    return CLUSTERING_FEATURE in snap.writer_features


def _require_connector(snap: Snapshot, spark: SparkSession | None, what: str) -> SparkSession:
    missing = connector.missing_reason(spark)
    if spark is None or missing is not None:
        raise UnsupportedTable(
            f"'{snap.uri}' is clustered by Delta's liquid clustering; {what} needs Delta's "
            f"connector: {missing}"
        )
    return spark


def clustering_columns(snap: Snapshot, spark: SparkSession | None) -> list[str] | None:
    """Delta's clustering columns (dotted names), None when not clustered by Delta (or NONE)."""
    if not is_delta_clustered(snap):
        return None
    session = _require_connector(snap, spark, "reading its clustering columns")
    domains = connector.domain_metadata(session, snap.uri, snap.version)
    raw = domains.get(CLUSTERING_DOMAIN)
    if not raw:
        return None
    columns = json.loads(raw).get("clusteringColumns") or []
    return [_logical(snap, [str(part) for part in column]) for column in columns] or None


def _logical(snap: Snapshot, parts: Sequence[str]) -> str:
    """A column Delta's clustering names by its physical names (column mapping), as the
    dotted logical name lakelayout uses; as it is when no column has those names. The
    physical names were reported as the clustering columns and OPTIMIZE failed on them,
    or after a RENAME clustered by the column that took the old name (an audit)."""
    logical = snap.table_format.logical_path(parts)
    return ".".join(logical if logical is not None else parts)


def cube_provenance(snap: Snapshot, spark: SparkSession | None) -> dict[str, FileProvenance]:
    """Log path -> provenance of every live file Delta's clustering put in a cube."""
    if not is_delta_clustered(snap):
        return {}
    session = _require_connector(snap, spark, "reading its cubes")
    out: dict[str, FileProvenance] = {}
    for path, action in connector.live_actions(session, snap.uri, version=snap.version).items():
        tags = action.get("tags") or {}
        cube = tags.get(CUBE_TAG)
        if not cube:
            continue
        try:  # logical names (Delta writes them so; its domain metadata holds physical ones)
            columns = tuple(str(c) for c in json.loads(tags.get(COLUMNS_TAG) or "[]"))
        except json.JSONDecodeError:
            columns = ()
        out[path] = FileProvenance(
            path, cube_id=str(cube), clustered_by=columns or None, operation="delta-liquid"
        )
    return out


def cube_tags(cube_id: str, columns: Sequence[str]) -> dict[str, str]:
    """The tags of a file of cube ``cube_id`` clustered by ``columns``, as Delta writes them."""
    return {CUBE_TAG: cube_id, COLUMNS_TAG: json.dumps(list(columns))}
