"""DESCRIBE DETAIL: clustering columns, files, sizes and the state of every cube."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakelayout.cluster import config as cfg
from lakelayout.cluster import delta_liquid
from lakelayout.cluster.plan import CubeInfo, describe_cubes, planned_files
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.table import delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class TableDetail:
    """What ``DESCRIBE DETAIL`` shows, plus lakelayout's cube and layout state."""

    uri: str
    version: int
    name: str | None
    clustering_columns: list[str] | None
    files: int
    bytes: int
    rows: int
    target_file_size: int
    min_cube_size: int
    target_cube_size: int
    cube_sizes_explicit: bool
    cubes: list[CubeInfo]
    unclustered_files: int
    layout_files: int
    properties: dict[str, str] = field(default_factory=dict)
    partition_columns: list[str] = field(default_factory=list)

    @property
    def stable_cubes(self) -> int:
        return sum(c.state == "stable" for c in self.cubes)

    @property
    def partial_cubes(self) -> int:
        return sum(c.state == "partial" for c in self.cubes)


def detail(uri: str, spark: SparkSession | None = None) -> TableDetail:
    """The detail of the table at ``uri``.

    Metadata only (no Spark job), except for a table clustered by Delta's
    liquid clustering: its columns and cubes are read through Delta's
    connector in ``spark`` (:mod:`lakelayout.cluster.delta_liquid`).
    """
    snap = delta.snapshot(uri)
    paths = [str(p) for p in snap.files.paths]
    prov = {**delta_liquid.cube_provenance(snap, spark), **ProvenanceStore(uri).read(paths)}
    data = snap.data_files_for(paths)
    files = planned_files(
        paths,
        snap.files.sizes,
        [f.live_rows for f in data],
        snap.files.modification_times,
        prov,
    )
    if delta_liquid.is_delta_clustered(snap):
        columns = delta_liquid.clustering_columns(snap, spark)
    else:
        columns = cfg.table_clustering(snap.configuration, snap.table_format)
    target = cfg.target_file_size(snap.configuration)
    sizes = cfg.cube_sizes(
        snap.configuration, table_bytes=int(snap.files.total_bytes), target_file=target
    )
    cubes = describe_cubes(files, columns, sizes.min_cube_size)
    return TableDetail(
        uri=snap.uri,
        version=snap.version,
        name=snap.metadata.name if snap.metadata is not None else None,
        clustering_columns=columns,
        files=len(paths),
        bytes=int(snap.files.total_bytes),
        rows=sum(max(f.live_rows, 0) for f in data),
        target_file_size=target,
        min_cube_size=sizes.min_cube_size,
        target_cube_size=sizes.target_cube_size,
        cube_sizes_explicit=sizes.explicit,
        cubes=cubes,
        unclustered_files=sum(f.cube_id is None for f in files),
        layout_files=sum(
            f.provenance is not None and f.provenance.layout_id is not None for f in files
        ),
        properties=dict(snap.configuration),
        partition_columns=list(snap.table_format.partition_columns),
    )
