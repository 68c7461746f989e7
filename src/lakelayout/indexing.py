"""``Table.indexes``: the Spark half of the skipping indexes of a table.

Declarations, UDFs, per-file metadata and the refresh bookkeeping live in the
pure :class:`lakelayout.skipping.catalog.IndexCatalog`; :class:`Indexes`
adds what needs a SparkSession:

* :meth:`Indexes.refresh` computes missing metadata with one Spark job
  (:func:`lakelayout.table.index_job.collect_metadata`);
* :meth:`Indexes.register_in_spark` registers ``st_within_box`` and the
  Python UDFs in the session, so the same names work in ``where`` text.

``st_within_box(lat, lng, lat_min, lat_max, lng_min, lng_max)`` is registered
in every session as a SQL function (``lat >= lat_min AND lat <= lat_max AND
lng >= lng_min AND lng <= lng_max``, all as DOUBLE), so the same text works in
``F.expr`` and in :func:`~lakelayout.expr.parse.parse_predicate`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakelayout.skipping.catalog import IndexCatalog, RefreshMetrics, arrow_type
from lakelayout.skipping.indexes import WITHIN_BOX
from lakelayout.skipping.indexes.base import Index, Udf
from lakelayout.table.index_job import collect_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.table.delta import Snapshot

#: SQL text registering ``st_within_box`` in a Spark session
WITHIN_BOX_SQL = (
    f"CREATE OR REPLACE TEMPORARY FUNCTION {WITHIN_BOX}("
    "lat DOUBLE, lng DOUBLE, lat_min DOUBLE, lat_max DOUBLE, lng_min DOUBLE, lng_max DOUBLE) "
    "RETURNS BOOLEAN RETURN "
    "lat >= lat_min AND lat <= lat_max AND lng >= lng_min AND lng <= lng_max"
)


class Indexes(IndexCatalog):
    """The skipping indexes of one table (``table.indexes``), with a SparkSession for jobs."""

    def __init__(
        self,
        uri: str,
        spark: Callable[[], SparkSession],
        *,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        self._spark = spark
        self._registered: set[tuple[int, str]] = set()
        super().__init__(uri, udfs=udfs)

    def register_udfs(
        self,
        udfs: Mapping[str, Udf],
        *,
        return_types: Mapping[str, pa.DataType | str] | None = None,
    ) -> None:
        super().register_udfs(udfs, return_types=return_types)
        self._registered = {key for key in self._registered if key[1] not in self.udf_names()}

    def refresh(self) -> RefreshMetrics:  # type: ignore[override]
        """Index every snapshot file lacking fresh metadata, in one Spark job; upsert the store."""
        return super().refresh(self._collect)

    def _collect(
        self,
        snap: Snapshot,
        todo: Mapping[str, Sequence[str]],
        indexes: Sequence[Index],
        columns: Mapping[str, tuple[str, ...] | None],
    ) -> Mapping[str, Mapping[str, Any]]:
        files = {path: snap.data_file(path) for path in todo}
        return collect_metadata(
            self._spark(), self.uri, snap.table_format, files, todo, indexes, columns
        )

    def register_in_spark(self, spark: SparkSession) -> None:
        """Register ``st_within_box`` and the Python UDFs in ``spark`` (once per session)."""
        session = id(spark)
        if (session, WITHIN_BOX) not in self._registered:
            spark.sql(WITHIN_BOX_SQL)
            self._registered.add((session, WITHIN_BOX))
        types = self.functions()
        for name, fn in self.udfs.items():
            if (session, name) in self._registered:
                continue
            spark.udf.register(name, _spark_udf(fn, types.get(name, pa.string())))
            self._registered.add((session, name))


def register_udfs_in_spark(
    spark: SparkSession,
    udfs: Mapping[str, Udf],
    return_types: Mapping[str, pa.DataType | str] | None = None,
) -> None:
    """Register Python UDFs in ``spark`` as :meth:`Indexes.register_in_spark` does, for
    Spark work outside a table (e.g. a benchmark's full scans over staged Parquet).

    Names are lower-cased; a missing return type means ``string``.
    """
    types = {k.lower(): v for k, v in (return_types or {}).items()}
    for name, fn in udfs.items():
        dtype = arrow_type(types.get(name.lower(), pa.string()))
        spark.udf.register(name.lower(), _spark_udf(fn, dtype))


def _spark_udf(fn: Udf, dtype: pa.DataType) -> Any:
    """``fn`` (Arrow arrays in, array-like out) as a Spark Arrow UDF returning ``dtype``."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    def call(*arrays: pa.Array) -> pa.Array:
        out = fn(*arrays)
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        if not isinstance(out, pa.Array):
            out = pa.array(builtins.list(out), type=dtype)
        return out if out.type == dtype else out.cast(dtype)

    factory: Any = F.arrow_udf  # its overloads do not cover variadic functions
    return factory(call, from_arrow_type(dtype))
