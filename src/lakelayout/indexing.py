"""``Table.indexes``: declare, build, describe and use skipping indexes on a Delta table.

The pure parts live in :mod:`lakelayout.skipping` (index types, clause merge,
pruning, the metadata store); this module runs them against a real table:

* :meth:`Indexes.add` binds every index to the table schema first, so an
  unknown column, an expression that does not parse or is non-deterministic,
  an unsupported type or a bad parameter fails before anything is written;
  then the declarations are stored (``<table>/_lakelayout/indexes.json``).
* :meth:`Indexes.refresh` is ONE Spark job over a DataFrame of file ids: each
  task opens the snapshot files that lack fresh metadata with pyarrow, reads
  only the columns the missing indexes use and runs their collectors; the
  driver upserts the rows atomically and drops rows of files no longer live.
* Writes (``Table.append``) collect the declared indexes in the writer's own
  pass over each batch (:func:`lakelayout.table.writer.write_files` with
  ``collectors=``). The order is: data files, Delta commit, then the metadata
  store. If the store write fails after the commit, those files merely have no
  metadata -- they are always kept -- until the next :meth:`refresh`.
* :meth:`Indexes.prune` (used by ``Table.scan``) reads only the store columns
  of indexes that label some node of the predicate, merges their clauses with
  min/max (:func:`lakelayout.skipping.engine.prune`) and never does worse than
  min/max alone.

Python UDFs (``udfs={"getagentname": fn}``, ``fn`` taking and returning Arrow
arrays) are held per ``Table`` object -- code cannot be stored in the table --
so they must be supplied again when a table is reopened (``Table(path,
udfs=...)`` or :meth:`Indexes.register_udfs`). They are registered in Spark as
Arrow UDFs, so the same name works in ``where`` text. A declared index whose
UDF is not registered is not used (its files are kept) and the scan report
lists it under ``unused_indexes``.

``st_within_box(lat, lng, lat_min, lat_max, lng_min, lng_max)`` is registered
in every session as a SQL function (``lat >= lat_min AND lat <= lat_max AND
lng >= lng_min AND lng <= lng_max``, all as DOUBLE), so the same text works in
``F.expr`` and in :func:`~lakelayout.expr.parse.parse_predicate`.
"""

from __future__ import annotations

import builtins
import copy
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakelayout.cluster.logical import prune as prune_by_layout  # logical layout indexes
from lakelayout.errors import InvalidOption, LakelayoutError, PredicateError, closest
from lakelayout.expr.nodes import And, Expr, Not, Or, Predicate
from lakelayout.expr.parse import parse_term
from lakelayout.skipping.engine import MINMAX
from lakelayout.skipping.engine import prune as prune_files
from lakelayout.skipping.indexes import WITHIN_BOX, WITHIN_BOX_FUNCTIONS, expand_within_box
from lakelayout.skipping.indexes.base import Index, TermIndex, Udf
from lakelayout.skipping.minmax import might_match
from lakelayout.skipping.store import MetadataStore, metadata_rows
from lakelayout.stats.model import FileStats
from lakelayout.table import delta
from lakelayout.table.datafile import DataFile, TableFormat, read_data_file
from lakelayout.table.files import WrittenFile
from lakelayout.table.location import resolve_location
from lakelayout.table.writer import INDEX_METADATA, collect_file_metadata, decode_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: SQL text registering ``st_within_box`` in a Spark session
WITHIN_BOX_SQL = (
    f"CREATE OR REPLACE TEMPORARY FUNCTION {WITHIN_BOX}("
    "lat DOUBLE, lng DOUBLE, lat_min DOUBLE, lat_max DOUBLE, lng_min DOUBLE, lng_max DOUBLE) "
    "RETURNS BOOLEAN RETURN "
    "lat >= lat_min AND lat <= lat_max AND lng >= lng_min AND lng <= lng_max"
)
_UDF_HINT = "pass udfs= to Table(...) or call table.indexes.register_udfs(...)"


@dataclass(frozen=True)
class IndexDescription:
    """``indexes.describe()``: one declared index and how much of the snapshot it covers."""

    name: str
    kind: str
    declaration: dict[str, Any]
    usable: bool
    files_total: int
    files_covered: int
    stale_files: int
    missing_files: int
    metadata_bytes: int
    reason: str = ""


@dataclass(frozen=True)
class RefreshMetrics:
    """What one :meth:`Indexes.refresh` did."""

    version: int
    files_total: int
    files_indexed: int
    indexes: tuple[str, ...]
    seconds: float
    #: declared indexes that could not be built, with the reason
    not_refreshed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Pruned:
    """Which snapshot files a scan reads, and which method ruled out how many."""

    keep: np.ndarray
    skipped_by: dict[str, int]
    bytes_skipped_by: dict[str, int]
    unused: dict[str, str]
    indexes_used: tuple[str, ...] = ()


class Indexes:
    """The skipping indexes of one table (``table.indexes``)."""

    def __init__(
        self,
        uri: str,
        spark: Callable[[], SparkSession],
        *,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        self.uri = uri
        self._spark = spark
        self.store = MetadataStore(uri)
        self._udfs: dict[str, Udf] = {}
        self._udf_types: dict[str, pa.DataType] = {}
        self._registered: set[tuple[int, str]] = set()
        if udfs:
            self.register_udfs(udfs)

    # ------------------------------------------------------------ UDFs and functions

    def register_udfs(
        self,
        udfs: Mapping[str, Udf],
        *,
        return_types: Mapping[str, pa.DataType | str] | None = None,
    ) -> None:
        """Make Python UDFs available to indexes, predicates and Spark (names case-insensitive).

        A UDF takes one ``pa.Array`` per argument and returns an array-like of
        the same length (wrap a scalar function with
        :func:`lakelayout.skipping.indexes.elementwise`). Its return type comes
        from ``return_types``, else from a declared index's ``functions=``,
        else ``string``.
        """
        for name, fn in udfs.items():
            if not isinstance(name, str) or not name.isidentifier() or not callable(fn):
                raise InvalidOption(
                    f"udfs maps function names to callables; got {name!r}: {type(fn).__name__}"
                )
            self._udfs[name.lower()] = fn
        for name, dtype in (return_types or {}).items():
            if name.lower() not in self._udfs:
                raise InvalidOption(f"return type given for {name!r}, which is not in udfs")
            self._udf_types[name.lower()] = _arrow_type(dtype)
        self._registered = {key for key in self._registered if key[1] not in self._udfs}

    def functions(self) -> dict[str, pa.DataType]:
        """Extra functions predicates may call: ``st_within_box`` and every known UDF."""
        out = dict(WITHIN_BOX_FUNCTIONS)
        for entry in self._declarations():
            declared = (entry.get("params") or {}).get("functions") or {}
            for name, dtype in declared.items():
                out.setdefault(str(name).lower(), _arrow_type(dtype))
        for name in self._udfs:
            out[name] = self._udf_types.get(name, out.get(name, pa.string()))
        return out

    def register_in_spark(self, spark: SparkSession) -> None:
        """Register ``st_within_box`` and the Python UDFs in ``spark`` (once per session)."""
        session = id(spark)
        if (session, WITHIN_BOX) not in self._registered:
            spark.sql(WITHIN_BOX_SQL)
            self._registered.add((session, WITHIN_BOX))
        types = self.functions()
        for name, fn in self._udfs.items():
            if (session, name) in self._registered:
                continue
            spark.udf.register(name, _spark_udf(fn, types.get(name, pa.string())))
            self._registered.add((session, name))

    # ------------------------------------------------------------ declarations

    def add(self, *indexes: Index, udfs: Mapping[str, Udf] | None = None) -> builtins.list[str]:
        """Declare indexes (validated against the schema first); their names.

        Nothing is built here: :meth:`refresh` indexes existing files, and
        writes index new files as they are written.
        """
        if not indexes:
            raise InvalidOption("indexes.add() needs at least one index")
        if udfs:
            self.register_udfs(udfs)
        schema = delta.snapshot(self.uri).schema
        for index in indexes:
            if not isinstance(index, Index):
                raise InvalidOption(
                    f"indexes.add() takes Index objects (MinMax(...), ValueList(...), ...), "
                    f"got {index!r}"
                )
            if isinstance(index, TermIndex):
                for name, fn in index.udfs.items():
                    self._udfs.setdefault(name, fn)
        bound = [self._bind(Index.from_dict(i.to_dict(), udfs=self._udfs), schema) for i in indexes]
        existing = [Index.from_dict(e, udfs=self._udfs) for e in self._declarations()]
        taken = {self._declared_name(e, schema): e for e in existing}
        seen: set[str] = set()
        for index in bound:
            if index.name in taken or index.name in seen:
                raise InvalidOption(
                    f"index {index.name} is already declared on '{self.uri}'; "
                    f"drop it first (table.indexes.drop({index.name!r}))"
                )
            seen.add(index.name)
        self.store.declare([*existing, *bound])
        return [i.name for i in bound]

    def drop(self, name: str) -> None:
        """Remove a declared index and its metadata column."""
        schema = delta.snapshot(self.uri).schema
        entries = self._declarations()
        names = [self._declared_name(Index.from_dict(e, udfs=self._udfs), schema) for e in entries]
        if name not in names:
            lowered = {n.lower(): n for n in names}
            if str(name).lower() not in lowered:
                hint = closest(str(name), names) if names else ""
                raise InvalidOption(f"no index named {name!r} on '{self.uri}'.{hint}".rstrip("."))
            name = lowered[str(name).lower()]
        rest = [
            Index.from_dict(e, udfs=self._udfs)
            for e, n in zip(entries, names, strict=True)
            if n != name
        ]
        self.store.declare(rest)
        self.store.drop_index(name)

    def list(self) -> builtins.list[Index]:
        """The declared indexes (unbound, as stored)."""
        return [Index.from_dict(e, udfs=self._udfs) for e in self._declarations()]

    def usable(self, schema: pa.Schema) -> tuple[builtins.list[Index], dict[str, str]]:
        """Bound declared indexes, and the names of those that cannot be used, with why."""
        loaded = self._load(schema)
        return (
            [index for _, index, _ in loaded if index is not None],
            {name: reason for name, index, reason in loaded if index is None},
        )

    def _load(self, schema: pa.Schema) -> builtins.list[tuple[str, Index | None, str]]:
        """Per declaration: (name, bound index or None, why it cannot be used)."""
        out: builtins.list[tuple[str, Index | None, str]] = []
        for entry in self._declarations():
            try:
                index = Index.from_dict(entry, udfs=self._udfs)
            except LakelayoutError as exc:
                out.append((_entry_name(entry), None, str(exc)))
                continue
            try:
                bound = index.bind(schema)
            except (LakelayoutError, PredicateError) as exc:
                reason = str(exc)
                if "no Python function is registered" in reason:
                    reason = f"{reason}; {_UDF_HINT}"
                out.append((_canonical_name(index, schema), None, reason))
                continue
            out.append((bound.name, bound, ""))
        return out

    # ------------------------------------------------------------ building

    def refresh(self) -> RefreshMetrics:
        """Index every snapshot file lacking fresh metadata, in one Spark job; upsert the store.

        Per file, only the indexes whose entry is missing, stale (the file's
        size or modification time changed) or unknown are computed, and only
        the columns they read are loaded. Rows of files no longer in the
        snapshot are dropped in the same atomic store write.
        """
        started = time.perf_counter()
        snap = delta.snapshot(self.uri)
        files = snap.files
        indexes, unusable = self.usable(snap.schema)
        names = [i.name for i in indexes]
        current = self.store.read(files, names)
        todo: dict[str, builtins.list[str]] = {}
        for position, path in enumerate(files.paths):
            needed = [n for n in names if n not in current or not current[n][position].is_valid]
            if needed:
                todo[str(path)] = needed
        computed = self._collect(todo, indexes, snap) if todo else {}
        carried = [c for c in self.store.columns() if c not in names]
        self._write_rows(files, todo, computed, indexes, current, carried)
        return RefreshMetrics(
            version=snap.version,
            files_total=len(files),
            files_indexed=len(todo),
            indexes=tuple(names),
            seconds=time.perf_counter() - started,
            not_refreshed=unusable,
        )

    def _collect(
        self, todo: Mapping[str, Sequence[str]], indexes: Sequence[Index], snap: delta.Snapshot
    ) -> dict[str, dict[str, Any]]:
        """Run the collectors of ``todo`` (path -> index names) in Spark tasks.

        Files are read like every other reader reads them
        (:func:`~lakelayout.table.datafile.read_data_file`): partition columns
        from the log, physical names mapped, deleted rows dropped.
        """
        spark = self._spark()
        jobs = [(snap.data_file(path), tuple(needed)) for path, needed in todo.items()]
        task = _RefreshTask(
            self.uri,
            snap.table_format,
            tuple(jobs),
            tuple(indexes),
            _column_map(indexes, snap.schema),
        )
        slices = max(1, min(len(jobs), spark.sparkContext.defaultParallelism * 2))
        rows = spark.range(0, len(jobs), 1, slices).mapInArrow(task, _REFRESH_DDL).collect()
        return {row["path"]: decode_metadata(row["meta"]) for row in rows}

    def _write_rows(
        self,
        files: FileStats,
        todo: Mapping[str, Sequence[str]],
        computed: Mapping[str, Mapping[str, Any]],
        indexes: Sequence[Index],
        current: Mapping[str, pa.Array],
        carried: Sequence[str],
    ) -> None:
        positions = [i for i, p in enumerate(files.paths) if str(p) in todo]
        keys = [
            (str(files.paths[i]), int(files.sizes[i]), int(files.modification_times[i]))
            for i in positions
        ]
        values = []
        for i, (path, _, _) in zip(positions, keys, strict=True):
            fresh = computed.get(path, {})
            row = {}
            for index in indexes:
                if index.name in todo[path]:
                    row[index.name] = fresh.get(index.name)
                else:
                    row[index.name] = current[index.name][i].as_py()
            values.append(row)
        rows = metadata_rows(indexes, keys, values)
        if carried and positions:
            old = self.store.read(files, carried)
            take = pa.array(positions, pa.int64())
            for name in carried:
                if name in old:
                    rows = rows.append_column(name, old[name].take(take))
        if rows.num_rows or self.store.current_file() is not None:
            self.store.upsert(rows, live_paths=[str(p) for p in files.paths])

    # ------------------------------------------------------------ writes

    def for_write(self, schema: pa.Schema) -> builtins.list[Index]:
        """The usable declared indexes, bound: what a writer collects per file."""
        return self.usable(schema)[0]

    def record_written(self, written: Sequence[WrittenFile], indexes: Sequence[Index]) -> int:
        """After a commit: store the metadata the writer collected; files recorded.

        Keys (size, modification time) come from the committed snapshot. A
        failure here leaves those files without metadata (always kept) and is
        not raised: the data commit already happened; :meth:`refresh` fills in.
        """
        if not indexes or not written:
            return 0
        try:
            snap = delta.snapshot(self.uri)
            where = {str(p): i for i, p in enumerate(snap.files.paths)}
            keys, values = [], []
            for item in written:
                at = where.get(item.path)
                if at is None:
                    continue
                keys.append(
                    (item.path, int(snap.files.sizes[at]), int(snap.files.modification_times[at]))
                )
                values.append(dict(item.extra.get(INDEX_METADATA, {})))
            self.store.upsert(
                metadata_rows(indexes, keys, values), live_paths=[str(p) for p in snap.files.paths]
            )
        except (OSError, pa.ArrowException, LakelayoutError):
            return 0
        return len(keys)

    # ------------------------------------------------------------ describing

    def describe(self) -> builtins.list[IndexDescription]:
        """Per declared index: files covered, stale files, files without metadata, bytes."""
        snap = delta.snapshot(self.uri)
        loaded = self._load(snap.schema)
        names = [name for name, index, _ in loaded if index is not None]
        coverage = self.store.describe(snap.files, names)
        entries = self._declarations()
        out = []
        for (name, index, reason), entry in zip(loaded, entries, strict=True):
            cov = coverage.get(name)
            out.append(
                IndexDescription(
                    name=name,
                    kind=str(entry.get("kind")),
                    declaration=entry,
                    usable=index is not None,
                    files_total=len(snap.files),
                    files_covered=cov.files_covered if cov else 0,
                    stale_files=cov.stale_files if cov else 0,
                    missing_files=cov.missing_files if cov else len(snap.files),
                    metadata_bytes=cov.metadata_bytes if cov else 0,
                    reason=reason,
                )
            )
        return out

    # ------------------------------------------------------------ pruning

    def prune(self, predicate: Predicate, files: FileStats, schema: pa.Schema) -> Pruned:
        """Files a scan must read: min/max, the indexes, and the layouts' logical indexes.

        A file laid out by :meth:`Optimizer.apply` with a layout that has a
        logical index (Qd-tree, Pando) is also skipped when its block cannot
        match (:func:`lakelayout.cluster.logical.prune`; only ever removes
        files, attributed as ``layout(<family>)``).
        """
        pruned = self._prune_indexes(predicate, files, schema)
        # --- logical layout indexes (lakelayout.cluster.logical) ---
        logical = prune_by_layout(self.uri, expand_within_box(predicate), files, schema)
        if not logical.skipped_by:
            return pruned
        return replace(
            pruned,
            keep=pruned.keep & logical.keep,
            skipped_by={**pruned.skipped_by, **logical.skipped_by},
            bytes_skipped_by={**pruned.bytes_skipped_by, **logical.bytes_skipped_by},
        )
        # --- end logical layout indexes ---

    def _prune_indexes(self, predicate: Predicate, files: FileStats, schema: pa.Schema) -> Pruned:
        """Min/max merged with every index the predicate can use."""
        expanded = expand_within_box(predicate)
        minmax = np.asarray(might_match(expanded, files), dtype=bool)
        sizes = np.asarray(files.sizes, dtype=np.int64)
        indexes, unusable = self.usable(schema) if self._declarations() else ([], {})
        relevant = [i for i in indexes if _labels_some_node(i, expanded)]
        columns = self.store.read(files, [i.name for i in relevant]) if relevant else {}
        with_meta = [i for i in relevant if i.name in columns]
        skipped_by = {MINMAX: int((~minmax).sum())}
        bytes_by = {MINMAX: int(sizes[~minmax].sum())}
        if not with_meta:
            return Pruned(minmax, skipped_by, bytes_by, unusable)
        result = prune_files(expanded, files, columns, with_meta)
        keep = result.keep & minmax
        for name, count in result.skipped_by.items():
            if name != MINMAX:
                skipped_by[name] = count
                bytes_by[name] = result.bytes_skipped_by.get(name, 0)
        if result.skipped_by.get(MINMAX, 0) > skipped_by[MINMAX]:
            skipped_by[MINMAX] = result.skipped_by[MINMAX]
            bytes_by[MINMAX] = result.bytes_skipped_by.get(MINMAX, 0)
        return Pruned(keep, skipped_by, bytes_by, unusable, tuple(i.name for i in with_meta))

    # ------------------------------------------------------------ internals

    def _declarations(self) -> builtins.list[dict[str, Any]]:
        return self.store.declaration_entries()

    def _bind(self, index: Index, schema: pa.Schema) -> Index:
        try:
            return index.bind(schema)
        except InvalidOption as exc:
            if "no Python function is registered" in str(exc):
                raise InvalidOption(f"{exc}; {_UDF_HINT}") from None
            raise
        except PredicateError as exc:
            if "is not modelled" in str(exc):
                raise PredicateError(
                    f"{exc}; if it is a Python UDF, pass udfs={{'name': fn}} to "
                    "indexes.add(...) or Table(...), or call table.indexes.register_udfs(...)"
                ) from None
            raise

    def _declared_name(self, index: Index, schema: pa.Schema) -> str:
        try:
            return index.bind(schema).name
        except (LakelayoutError, PredicateError):
            return index.name


# ---------------------------------------------------------------- helpers


def _canonical_name(index: Index, schema: pa.Schema) -> str:
    """The bound name of a term index that cannot be bound (its UDF is missing)."""
    if not isinstance(index, TermIndex):
        return index.name
    try:
        term = parse_term(index.expression, schema, functions=index.functions)
    except (LakelayoutError, PredicateError):
        return index.name
    probe = copy.copy(index)
    probe._term = term  # only to spell the name as bind() would
    return probe.name


def _entry_name(entry: Mapping[str, Any]) -> str:
    expression = entry.get("expression")
    if isinstance(expression, (list, tuple)):
        expression = ", ".join(str(e) for e in expression)
    return f"{entry.get('kind')}({str(expression).strip()})"


def _arrow_type(value: pa.DataType | str) -> pa.DataType:
    if isinstance(value, pa.DataType):
        return value
    try:
        return pa.type_for_alias(str(value))
    except (ValueError, KeyError):
        raise InvalidOption(f"unknown Arrow type {value!r} for a UDF's return type") from None


def _labels_some_node(index: Index, pred: Predicate) -> bool:
    """Whether ``index`` labels any node of ``pred`` (else its column need not be read)."""
    if index.label(pred) is not None:
        return True
    children: tuple[Predicate, ...] = ()
    if isinstance(pred, And | Or):
        children = pred.children_
    elif isinstance(pred, Not):
        children = (pred.child,)
    return any(_labels_some_node(index, child) for child in children)


def _index_exprs(index: Index) -> builtins.list[Expr] | None:
    """The bound expressions an index reads, or None when its shape is unknown."""
    if isinstance(index, TermIndex):
        return [index.term]
    for attribute in ("terms", "predicates"):
        value = getattr(index, attribute, None)
        if isinstance(value, (list, tuple)) and all(isinstance(v, Expr) for v in value):
            return builtins.list(value)
    return None


def _column_map(indexes: Sequence[Index], schema: pa.Schema) -> dict[str, tuple[str, ...] | None]:
    """Index name -> top-level table columns it reads (None: read every column)."""
    by_lower = {n.lower(): n for n in schema.names}
    out: dict[str, tuple[str, ...] | None] = {}
    for index in indexes:
        exprs = _index_exprs(index)
        names: set[str] | None = set() if exprs is not None else None
        for expr in exprs or []:
            for column in expr.columns():
                top = by_lower.get(column.lower()) or by_lower.get(column.split(".")[0].lower())
                if top is None or names is None:
                    names = None
                    break
                names.add(top)
        out[index.name] = tuple(sorted(names)) if names is not None else None
    return out


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
        dtype = _arrow_type(types.get(name.lower(), pa.string()))
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


_REFRESH_DDL = "path string, meta binary"
_REFRESH_SCHEMA = pa.schema([("path", pa.string()), ("meta", pa.binary())])


@dataclass(frozen=True)
class _RefreshTask:
    """``mapInArrow`` over file ids: open each file with pyarrow, run its missing collectors."""

    uri: str
    format: TableFormat
    jobs: tuple[tuple[DataFile, tuple[str, ...]], ...]
    indexes: tuple[Index, ...]
    columns: Mapping[str, tuple[str, ...] | None]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem, root = resolve_location(self.uri)
        by_name = {i.name: i for i in self.indexes}
        for batch in batches:
            for file_id in batch.column(0).to_pylist():
                file, needed = self.jobs[int(file_id)]
                specs = [by_name[n] for n in needed]
                data = read_data_file(
                    filesystem, root, self.format, file, columns=self._columns(needed)
                )
                meta = collect_file_metadata(specs, data)
                yield pa.RecordBatch.from_pylist(
                    [{"path": file.path, "meta": meta}], schema=_REFRESH_SCHEMA
                )

    def _columns(self, needed: Sequence[str]) -> builtins.list[str] | None:
        out: set[str] = set()
        for name in needed:
            columns = self.columns.get(name)
            if columns is None:
                return None
            out.update(columns)
        return sorted(out) or None
