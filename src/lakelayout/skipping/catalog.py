"""The skipping indexes declared on a table: declarations, UDFs, per-file metadata, refresh.

:class:`IndexCatalog` is the pure half of ``Table.indexes``
(:class:`lakelayout.indexing.Indexes` adds the Spark half):

* :meth:`IndexCatalog.add` binds every index to the table schema first, so an
  unknown column, an expression that does not parse or is non-deterministic,
  an unsupported type or a bad parameter fails before anything is written;
  then the declarations are stored (``<table>/_lakelayout/indexes.json``).
* :meth:`IndexCatalog.refresh` finds the snapshot files that lack fresh
  metadata and which indexes each needs, has them computed by the function it
  is given (a Spark job in :mod:`lakelayout.table.index_job`: tasks open the
  files with pyarrow, read only the columns the missing indexes use and run
  their collectors) and upserts the rows atomically (one new store segment);
  rows of files no longer live are dead, dropped at the store's next
  compaction (:mod:`lakelayout.skipping.store`).
* Writes (``Table.append``) collect the declared indexes in the writer's own
  pass over each batch; :meth:`IndexCatalog.record_written` stores them after
  the commit. If that fails, those files merely have no metadata -- they are
  always kept -- until the next refresh.
* Scans use the bound indexes (:meth:`IndexCatalog.usable`) and the store
  (:attr:`IndexCatalog.store`, a metadata source read only for the indexes
  that label the predicate) through the planner,
  :func:`lakelayout.skipping.planner.plan`.

Python UDFs (``udfs={"getagentname": fn}``, ``fn`` taking and returning Arrow
arrays) are held per catalog -- code cannot be stored in the table -- so they
must be supplied again when a table is reopened. A declared index whose UDF
is not registered is not used (its files are kept) and the plan lists it
under ``unused``.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakelayout.errors import InvalidOption, LakelayoutError, PredicateError, closest
from lakelayout.expr.nodes import Expr
from lakelayout.expr.parse import parse_term
from lakelayout.skipping.indexes import WITHIN_BOX_FUNCTIONS
from lakelayout.skipping.indexes.base import Index, TermIndex, Udf
from lakelayout.skipping.store import BINDING, MetadataStore, metadata_rows
from lakelayout.stats.model import FileStats
from lakelayout.table import delta
from lakelayout.table.datafile import TableFormat
from lakelayout.table.files import INDEX_METADATA, WrittenFile

logger = logging.getLogger(__name__)

_UDF_HINT = "pass udfs= to Table(...) or call table.indexes.register_udfs(...)"

Collect = Callable[
    [
        delta.Snapshot,
        Mapping[str, Sequence[str]],
        Sequence[Index],
        Mapping[str, "tuple[str, ...] | None"],
    ],
    Mapping[str, Mapping[str, Any]],
]
"""Computes metadata: (the snapshot, path -> index names, bound indexes, index ->
columns it reads) to path -> index name -> value. The snapshot says how each
file's rows are read (partition values, deletion vectors, column mapping)."""


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


class IndexCatalog:
    """The skipping indexes declared on one table: declarations, UDFs, metadata, refresh."""

    def __init__(self, uri: str, *, udfs: Mapping[str, Udf] | None = None) -> None:
        self.uri = uri
        self.store = MetadataStore(uri)
        self._udfs: dict[str, Udf] = {}
        self._udf_types: dict[str, pa.DataType] = {}
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
            self._udf_types[name.lower()] = arrow_type(dtype)

    @property
    def udfs(self) -> dict[str, Udf]:
        """The registered Python UDFs, by lower-case name."""
        return dict(self._udfs)

    def udf_names(self) -> frozenset[str]:
        return frozenset(self._udfs)

    def functions(self) -> dict[str, pa.DataType]:
        """Extra functions predicates may call: ``st_within_box`` and every known UDF."""
        out = dict(WITHIN_BOX_FUNCTIONS)
        for entry in self._declarations():
            declared = (entry.get("params") or {}).get("functions") or {}
            for name, dtype in declared.items():
                out.setdefault(str(name).lower(), arrow_type(dtype))
        for name in self._udfs:
            out[name] = self._udf_types.get(name, out.get(name, pa.string()))
        return out

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
        snap = delta.snapshot(self.uri)
        schema = snap.schema
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
        with self.store.locked():  # read, add, write: another add at once is not lost
            entries = self._declarations()
            existing = [Index.from_dict(e, udfs=self._udfs) for e in entries]
            taken = {self._declared_name(e, schema): e for e in existing}
            seen: set[str] = set()
            for index in bound:
                if index.name in taken or index.name in seen:
                    raise InvalidOption(
                        f"index {index.name} is already declared on '{self.uri}'; "
                        f"drop it first (table.indexes.drop({index.name!r}))"
                    )
                seen.add(index.name)
            bindings = [e.get(BINDING) for e in entries]
            bindings += [snap.table_format.binding(i.columns()) for i in bound]
            # metadata no declaration owns (left by an earlier version's interrupted drop)
            # was built with other parameters, perhaps: the new index starts without it
            for stray in set(seen) & set(self.store.columns()):
                self.store.drop_index(stray)
            self.store.declare([*existing, *bound], bindings)
        return [i.name for i in bound]

    def drop(self, name: str) -> None:
        """Remove a declared index and its metadata column."""
        schema = delta.snapshot(self.uri).schema
        with self.store.locked():
            entries = self._declarations()
            names = [
                self._declared_name(Index.from_dict(e, udfs=self._udfs), schema) for e in entries
            ]
            if name not in names:
                lowered = {n.lower(): n for n in names}
                if str(name).lower() not in lowered:
                    hint = closest(str(name), names) if names else ""
                    raise InvalidOption(
                        f"no index named {name!r} on '{self.uri}'.{hint}".rstrip(".")
                    )
                name = lowered[str(name).lower()]
            kept = [(e, n) for e, n in zip(entries, names, strict=True) if n != name]
            rest = [Index.from_dict(e, udfs=self._udfs) for e, _ in kept]
            # the column first: a drop that fails between the two writes leaves a
            # declaration without metadata (scans keep the files it would skip; the drop
            # can be retried), never metadata without its declaration (an audit: an index
            # declared again with other parameters took that column as its own)
            self.store.drop_index(name)
            self.store.declare(rest, [e.get(BINDING) for e, _ in kept])

    def list(self) -> builtins.list[Index]:
        """The declared indexes (unbound, as stored)."""
        return [Index.from_dict(e, udfs=self._udfs) for e in self._declarations()]

    def usable(
        self, schema: pa.Schema, fmt: TableFormat | None = None
    ) -> tuple[builtins.list[Index], dict[str, str]]:
        """Bound declared indexes, and the names of those that cannot be used, with why.

        With ``fmt`` (the snapshot a scan reads), an index whose metadata was built on
        other columns than the ones ``fmt`` binds its names to is not usable
        (:meth:`TableFormat.binding`: a column renamed, dropped and added again, or
        widened since, or a version before that).
        """
        loaded = self._load(schema, fmt)
        return (
            [index for _, index, _ in loaded if index is not None],
            {name: reason for name, index, reason in loaded if index is None},
        )

    def _load(
        self, schema: pa.Schema, fmt: TableFormat | None = None
    ) -> builtins.list[tuple[str, Index | None, str]]:
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
            moved = _moved(entry.get(BINDING), fmt, bound) if fmt is not None else ""
            out.append((bound.name, None if moved else bound, moved))
        return out

    # ------------------------------------------------------------ building

    def refresh(self, collect: Collect) -> RefreshMetrics:
        """Index every snapshot file lacking fresh metadata; upsert the store.

        Per file, only the indexes whose entry is missing, stale (the file's
        size or modification time changed) or unknown are computed, by
        ``collect`` (path -> index names to compute; it returns path ->
        metadata, e.g. one Spark job: :func:`lakelayout.table.index_job.collect_metadata`),
        reading only the columns they need (:func:`column_map`). Rows of files
        no longer in the snapshot are dead from the same atomic store write on
        (never read: those files are not in the snapshot) and gone at the
        store's next compaction.
        """
        started = time.perf_counter()
        snap = delta.snapshot(self.uri)
        files = snap.files
        indexes, unusable = self.usable(snap.schema)
        self._rebind(snap.table_format)
        names = [i.name for i in indexes]
        current = self.store.read(files, names)
        todo: dict[str, builtins.list[str]] = {}
        for position, path in enumerate(files.paths):
            needed = [n for n in names if n not in current or not current[n][position].is_valid]
            if needed:
                todo[str(path)] = needed
        computed = collect(snap, todo, indexes, column_map(indexes, snap.schema)) if todo else {}
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
            with self.store.locked():
                # the live files when the rows are stored: files appended while the
                # refresh computed are live too (their writers stored their rows)
                snap = delta.snapshot(self.uri)
                # an index dropped and declared again otherwise meanwhile (another
                # process): what was computed for the old one is not stored as the new
                # one's (a review: Prefix length 2 values served length 4)
                kept = {i.name for i in self._declared_as(indexes, snap.schema)}
                stale = [i.name for i in indexes if i.name not in kept]
                rows = rows.drop_columns([n for n in stale if n in rows.column_names])
                self.store.upsert(rows, live_paths=[str(p) for p in snap.files.paths])

    def _declared_as(
        self, indexes: Sequence[Index], schema: pa.Schema, fmt: TableFormat | None = None
    ) -> builtins.list[Index]:
        """Those of ``indexes`` declared as they are now (kind, expression and parameters:
        a name does not say them all) and usable on ``fmt``'s columns."""
        now = {i.name: i.to_dict() for i in self.usable(schema, fmt)[0]}
        return [i for i in indexes if now.get(i.name) == i.to_dict()]

    # ------------------------------------------------------------ writes

    def for_write(self, schema: pa.Schema) -> builtins.list[Index]:
        """The usable declared indexes, bound: what a writer collects per file."""
        return self.usable(schema)[0]

    def record_written(
        self,
        written: Sequence[WrittenFile],
        indexes: Sequence[Index],
        fmt: TableFormat | None = None,
    ) -> int:
        """After a commit: store the metadata the writer collected; files recorded.

        Keys (size, modification time) come from the committed snapshot. A
        failure here leaves those files without metadata (always kept) and is
        not raised: the data commit already happened; :meth:`refresh` fills in.
        """
        if not indexes or not written:
            return 0
        try:
            # the snapshot, the check and the write under the index lock: a refresh
            # rebinding an index (after a rename) holds it too, so it cannot come between
            # them, and the live files are the latest (an older list than another
            # writer's, stored after it, made that writer's rows dead)
            with self.store.locked():
                snap = delta.snapshot(self.uri)
                where = {str(p): i for i, p in enumerate(snap.files.paths)}
                keys, values = [], []
                for item in written:
                    at = where.get(item.path)
                    if at is None:
                        continue
                    sizes, times = snap.files.sizes, snap.files.modification_times
                    keys.append((item.path, int(sizes[at]), int(times[at])))
                    values.append(dict(item.extra.get(INDEX_METADATA, {})))
                # ``fmt``: how the writer read the columns (its snapshot's binding); an
                # index declared on other columns since (a rename and a refresh between
                # the commit and now) is left out: its entries would describe another column
                # (and one dropped and declared again otherwise since the write: a review)
                indexes = self._declared_as(indexes, snap.schema, fmt or snap.table_format)
                if not indexes:
                    return 0
                self.store.upsert(
                    metadata_rows(indexes, keys, values),
                    live_paths=[str(p) for p in snap.files.paths],
                )
        except Exception as exc:  # any: the commit stands (an audit: a delta-rs error
            # reading the snapshot escaped, and an append that had committed read as failed)
            logger.warning(
                "the skipping-index metadata of %d new file(s) of '%s' was not stored (%s: "
                "%s); they are read until indexes.refresh() indexes them",
                len(written),
                self.uri,
                type(exc).__name__,
                exc,
            )
            return 0
        return len(keys)

    # ------------------------------------------------------------ describing

    def describe(self) -> builtins.list[IndexDescription]:
        """Per declared index: files covered, stale files, files without metadata, bytes."""
        snap = delta.snapshot(self.uri)
        loaded = self._load(snap.schema, snap.table_format)
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

    # ------------------------------------------------------------ internals

    def _declarations(self) -> builtins.list[dict[str, Any]]:
        return self.store.declaration_entries()

    def _rebind(self, fmt: TableFormat) -> None:
        """Before a refresh: an index whose metadata was built on other columns than
        ``fmt`` binds its names to (or before bindings were recorded) loses that
        metadata and is declared bound as ``fmt`` binds them; the refresh rebuilds it."""
        with self.store.locked():
            self._rebind_locked(fmt)

    def _rebind_locked(self, fmt: TableFormat) -> None:
        entries = self._declarations()
        bindings: builtins.list[dict[str, str] | None] = []
        stale: builtins.list[str] = []
        for entry in entries:
            binding = entry.get(BINDING)
            try:
                bound = Index.from_dict(entry, udfs=self._udfs).bind(fmt.schema)
            except (LakelayoutError, PredicateError):
                bindings.append(binding)  # not usable now: left as it is
                continue
            if _moved(binding, fmt, bound):
                stale.append(bound.name)
                binding = fmt.binding(bound.columns())
            bindings.append(binding)
        if not stale:
            return
        for name in stale:
            self.store.drop_index(name)
        indexes = [Index.from_dict(e, udfs=self._udfs) for e in entries]
        self.store.declare(indexes, bindings)

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
    return index.with_term(term).name


def _moved(binding: Any, fmt: TableFormat, index: Index) -> str:
    """Why ``index``'s metadata does not hold for the snapshot of ``fmt`` ("" when it does)."""
    if not isinstance(binding, dict):
        return (
            "its metadata was built before lakelayout recorded which columns an index "
            "reads; indexes.refresh() rebuilds it"
        )
    now = fmt.binding(index.columns())
    moved = sorted(c for c in set(binding) | set(now) if binding.get(c) != now.get(c))
    if not moved:
        return ""
    return (
        f"its metadata was built on other columns than this snapshot's {moved} (renamed, "
        "dropped and added again, or widened since, or a version before that); "
        "indexes.refresh() rebuilds it for the latest version"
    )


def _entry_name(entry: Mapping[str, Any]) -> str:
    expression = entry.get("expression")
    if isinstance(expression, (list, tuple)):
        expression = ", ".join(str(e) for e in expression)
    return f"{entry.get('kind')}({str(expression).strip()})"


def arrow_type(value: pa.DataType | str) -> pa.DataType:
    """An Arrow type given as a type or by its alias (``"string"``, ``"int64"``)."""
    if isinstance(value, pa.DataType):
        return value
    try:
        return pa.type_for_alias(str(value))
    except (ValueError, KeyError):
        raise InvalidOption(f"unknown Arrow type {value!r} for a UDF's return type") from None


def _index_exprs(index: Index) -> builtins.list[Expr] | None:
    """The bound expressions an index reads, or None when its shape is unknown."""
    if isinstance(index, TermIndex):
        return [index.term]
    for attribute in ("terms", "predicates"):
        value = getattr(index, attribute, None)
        if isinstance(value, (list, tuple)) and all(isinstance(v, Expr) for v in value):
            return builtins.list(value)
    return None


def column_map(indexes: Sequence[Index], schema: pa.Schema) -> dict[str, tuple[str, ...] | None]:
    """Index name -> top-level table columns it reads (None: read every column)."""
    by_lower = {n.lower(): n for n in schema.names}
    out: dict[str, tuple[str, ...] | None] = {}
    for index in indexes:
        exprs = _index_exprs(index)
        names: set[str] | None = set() if exprs is not None else None
        for expr in exprs or []:
            for column in expr.columns():
                top = by_lower.get(column.lower())
                if top is None or names is None:
                    names = None
                    break
                names.add(top)
        out[index.name] = tuple(sorted(names)) if names is not None else None
    return out
