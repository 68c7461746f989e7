"""DESCRIBE DETAIL: clustering columns, files, sizes and the state of every cube."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelayout.cluster import config as cfg
from lakelayout.cluster.plan import CubeInfo, describe_cubes, planned_files
from lakelayout.cluster.provenance import ProvenanceStore
from lakelayout.table import delta


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

    @property
    def stable_cubes(self) -> int:
        return sum(c.state == "stable" for c in self.cubes)

    @property
    def partial_cubes(self) -> int:
        return sum(c.state == "partial" for c in self.cubes)


def detail(uri: str) -> TableDetail:
    """The detail of the table at ``uri`` (metadata only: no Spark)."""
    snap = delta.snapshot(uri)
    paths = [str(p) for p in snap.files.paths]
    prov = ProvenanceStore(uri).read(paths)
    files = planned_files(
        paths, snap.files.sizes, snap.files.num_records, snap.files.modification_times, prov
    )
    columns = cfg.parse_clustering(snap.configuration)
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
        rows=int(snap.files.total_rows),
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
    )
