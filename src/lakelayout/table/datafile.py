"""How the rows of one Delta data file are read and written: the one place that knows.

A Delta table's rows are not simply "the Parquet files": the log adds to each
file what the file itself does not hold, and every reader must apply it.

* **Partition values** (``add.partitionValues``): partition columns are not
  stored in the data files; each file's value comes from the log, typed by
  the table schema (delta-rs parses the strings with Delta's serialization
  rules). A NULL partition value is a NULL for every row of the file.
* **Deletion vectors** (``add.deletionVector``): rows of the file that a
  DELETE/UPDATE/MERGE marked as deleted without rewriting it. They are
  skipped by row index (position in the file, 0-based, over all row groups).
* **Column mapping** (``delta.columnMapping.mode = name``): columns (nested
  fields too) are stored under *physical* names (``col-<uuid>``) that never
  change when a column is renamed; statistics and ``partitionValues`` use them
  as well. Readers look columns up by physical name and present the logical
  names.
* **Paths** in the log are URI-encoded and relative to the table root (or
  absolute URIs); the file on disk is the decoded path.

:class:`TableFormat` is what a table says about all its files (schema,
physical names, partition columns); :class:`DataFile` is what the log says
about one file. :func:`read_data_file` turns both into Arrow batches in the
table's logical schema; scans (Spark, :mod:`lakelayout.table.reader`), the
rewrite tasks of OPTIMIZE/DELETE and index refresh all read through it, so
they cannot disagree on which rows a file holds.

The write side is here too: :func:`partition_runs` splits a batch into runs of
one partition, :func:`partition_directory` names the directory Delta would
write those rows to (Hive-style ``col=value`` with Spark's escaping, NULL as
``__HIVE_DEFAULT_PARTITION__``), :func:`serialize_partition_value` gives the
``partitionValues`` string (Delta's partition value serialization), and
:meth:`TableFormat.to_physical` the batch a data file stores.

Pure: pyarrow and numpy only.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal as _decimal
import functools
import itertools
import json
import math
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakelayout.errors import InvalidOption, TableCorrupt, UnsupportedTable

#: Parquet field metadata key pyarrow writes as the field id
PARQUET_FIELD_ID = b"PARQUET:field_id"
#: column metadata keys of Delta's column mapping
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
#: the directory name of a NULL partition value (Hive's convention, kept by Delta)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: rows per Arrow batch when a data file is read with pyarrow
READ_BATCH_ROWS = 65_536

#: characters Spark escapes in a partition directory name (ExternalCatalogUtils), and NUL
_PATH_ESCAPES = frozenset([chr(c) for c in range(0x00, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class TableFormat:
    """What every data file of a table shares: logical schema, physical names, partitions.

    ``physical`` has exactly the structure of ``schema`` with every field
    (nested ones included) under its physical name; without column mapping
    the two are equal. ``partition_columns`` are logical names in the table's
    spelling, in the order of the table's ``partitionColumns``.

    ``spellings`` (a rewrite's format only, :func:`timestamp_spellings`): per
    TIMESTAMP partition column, how the log spells values it holds without a
    zone, so that a rewrite writes its files' values back as they were read
    (``(column, value as lakelayout spells it, the log's spelling or None when
    the log spells that moment both ways)``).
    """

    schema: pa.Schema
    physical: pa.Schema
    partition_columns: tuple[str, ...] = ()
    spellings: tuple[tuple[str, str, str | None], ...] = ()

    @classmethod
    def plain(cls, schema: pa.Schema, partition_columns: Sequence[str] = ()) -> TableFormat:
        """A table without column mapping."""
        return cls(schema, schema, tuple(partition_columns))

    @property
    def column_mapping(self) -> bool:
        """Whether any column is stored under another name."""
        return not _same_names(self.schema, self.physical)

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_columns)

    def is_partition(self, name: str) -> bool:
        return name in self.partition_columns

    def physical_name(self, name: str) -> str:
        """The physical name of top-level column ``name`` (logical, table spelling)."""
        return str(self.physical.field(self.schema.get_field_index(name)).name)

    def logical_path(self, physical: Sequence[str]) -> tuple[str, ...] | None:
        """The logical names of the struct path whose physical names are ``physical``
        (Delta keeps clustering columns so under column mapping); None when no column
        has them. Without column mapping the names are the same.

        >>> TableFormat.plain(pa.schema([("a", pa.int32())])).logical_path(["a"])
        ('a',)
        """
        logical, stored = pa.struct(list(self.schema)), pa.struct(list(self.physical))
        out: list[str] = []
        for part in physical:
            if not (pa.types.is_struct(logical) and pa.types.is_struct(stored)):
                return None
            at = next((i for i in range(stored.num_fields) if stored.field(i).name == part), -1)
            if at < 0:
                return None
            out.append(logical.field(at).name)
            logical, stored = logical.field(at).type, stored.field(at).type
        return tuple(out)

    def binding(self, columns: Iterable[str] | None = None) -> dict[str, str]:
        """What each of ``columns`` (top-level, logical; None: all) is stored as: its
        physical name and type, nested physical names included.

        Metadata computed from a file's values of column ``a`` (index entries, the
        blocks of a layout) holds for another snapshot only where ``a`` is bound the
        same: with column mapping ``RENAME COLUMN a TO b`` then ``ADD COLUMNS (a ...)``
        (or a swap of two names) binds ``a`` to another column, and a version before
        the rename binds it to the old one. A widened type binds it anew too (the
        values are of another type).

        >>> TableFormat.plain(pa.schema([("a", pa.int32())])).binding()
        {'a': 'a: int32'}
        """
        names = self.schema.names if columns is None else sorted(set(columns))
        out = {}
        for name in names:
            at = self.schema.get_field_index(name)
            if at >= 0:
                field_ = self.physical.field(at)
                out[name] = f"{field_.name}: {field_.type}"
        return out

    @property
    def data_schema(self) -> pa.Schema:
        """The logical columns a data file holds (partition columns are in the log)."""
        return pa.schema([f for f in self.schema if f.name not in self.partition_columns])

    @property
    def file_schema(self) -> pa.Schema:
        """The Parquet schema of a data file: physical names, no partition columns."""
        keep = [i for i, f in enumerate(self.schema) if f.name not in self.partition_columns]
        return pa.schema([self.physical.field(i) for i in keep])

    def partition_fields(self) -> list[pa.Field]:
        return [self.schema.field(name) for name in self.partition_columns]

    def partition_value(self, name: str, value: Any) -> str | None:
        """Partition column ``name``'s typed ``value`` as this format writes it in
        ``partitionValues`` (:func:`serialize_partition_value`, then ``spellings``)."""
        text = serialize_partition_value(value, self.schema.field(name).type)
        if not self.spellings or text is None:
            return text
        key = (name, text)
        if key not in self._spelled:
            return text
        theirs = self._spelled[key]
        if theirs is None:
            raise UnsupportedTable(
                f"partition column '{name}' holds the moment {text} spelled both "
                "with and without a time zone; Delta's connector reads the two in "
                "different zones, so a rewrite cannot keep both (rewrite these "
                "files with the engine that wrote them)"
            )
        return theirs

    @functools.cached_property
    def _spelled(self) -> dict[tuple[str, str], str | None]:
        """``spellings`` by (column, lakelayout's spelling): one lookup per value."""
        return {(column, ours): theirs for column, ours, theirs in self.spellings}

    def to_physical(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The part of a logical batch (table schema) a data file stores, under physical names."""
        target = self.file_schema
        columns = []
        for logical, physical in zip(self.schema, self.physical, strict=True):
            if logical.name in self.partition_columns:
                continue
            column = batch.column(batch.schema.get_field_index(logical.name))
            columns.append(relabel(column, physical.type) if self.column_mapping else column)
        return pa.RecordBatch.from_arrays(columns, schema=target)


def _same_names(a: pa.Schema | pa.DataType, b: pa.Schema | pa.DataType) -> bool:
    return _names_of(a) == _names_of(b)


def _names_of(t: pa.Schema | pa.DataType) -> Any:
    if isinstance(t, pa.Schema):
        return tuple((f.name, _names_of(f.type)) for f in t)
    if pa.types.is_struct(t):
        return tuple((t.field(i).name, _names_of(t.field(i).type)) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", _names_of(t.value_type))
    if pa.types.is_map(t):
        return ("map", _names_of(t.key_type), _names_of(t.item_type))
    return None


#: the table property naming a table's column mapping mode
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    """A table's column mapping mode, as Delta reads it: ``none``, ``name`` or ``id``.

    >>> column_mapping_mode({"delta.columnMapping.mode": " Name"}), column_mapping_mode({})
    ('name', 'none')
    """
    return (configuration.get(COLUMN_MAPPING_MODE) or "none").strip().lower()


def table_format(
    schema: pa.Schema,
    schema_json: str | None,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
) -> TableFormat:
    """The format of a table from its Arrow schema, Delta schema JSON and configuration.

    Column mapping in ``name`` mode is read from the schema's field metadata;
    ``id`` mode (columns matched by Parquet field id) is refused by name.
    """
    mode = column_mapping_mode(configuration)
    if mode == "id":
        raise UnsupportedTable(
            "column mapping mode 'id' (columns matched by Parquet field id) is not supported; "
            "lakelayout reads column mapping mode 'name'"
        )
    by_lower = {name.lower(): name for name in schema.names}
    parts = []
    for name in partition_columns:
        if name.lower() not in by_lower:
            raise UnsupportedTable(f"partition column '{name}' is not in the table schema")
        parts.append(by_lower[name.lower()])
    if mode != "name" or not schema_json:
        return TableFormat.plain(schema, parts)
    fields = json.loads(schema_json).get("fields", [])
    physical = pa.schema(
        [_physical_field(f, node) for f, node in zip(schema, fields, strict=True)],
        metadata=schema.metadata,
    )
    return TableFormat(schema, physical, tuple(parts))


def _physical_field(logical: pa.Field, node: Mapping[str, Any]) -> pa.Field:
    meta = node.get("metadata") or {}
    name = str(meta.get(PHYSICAL_NAME_KEY) or logical.name)
    field_meta = (
        {PARQUET_FIELD_ID: str(meta[FIELD_ID_KEY]).encode()} if FIELD_ID_KEY in meta else {}
    )
    return pa.field(
        name,
        _physical_type(logical.type, node.get("type")),
        nullable=logical.nullable,
        metadata=field_meta or None,
    )


def _physical_type(logical: pa.DataType, node: Any) -> pa.DataType:
    if not isinstance(node, Mapping):
        return logical
    if pa.types.is_struct(logical) and node.get("type") == "struct":
        children = node.get("fields", [])
        return pa.struct(
            [_physical_field(logical.field(i), children[i]) for i in range(logical.num_fields)]
        )
    if (pa.types.is_list(logical) or pa.types.is_large_list(logical)) and "elementType" in node:
        item = _physical_type(logical.value_type, node["elementType"])
        factory = pa.large_list if pa.types.is_large_list(logical) else pa.list_
        return factory(pa.field(logical.value_field.name, item, logical.value_field.nullable))
    if pa.types.is_map(logical) and "keyType" in node:
        return pa.map_(
            _physical_type(logical.key_type, node["keyType"]),
            pa.field(
                logical.item_field.name,
                _physical_type(logical.item_type, node["valueType"]),
                logical.item_field.nullable,
            ),
        )
    return logical


# --------------------------------------------------------------------------- one file


@dataclass(frozen=True)
class DataFile:
    """One live data file as the log describes it.

    ``path`` is the log's path (URI-encoded, table-relative, or an absolute
    URI); ``partition_values`` maps each partition column (logical name) to
    its typed value (``None``: NULL); ``deleted_rows`` holds the sorted row
    indexes a deletion vector removed (empty: none).
    """

    path: str
    size: int
    num_records: int = -1
    partition_values: Mapping[str, Any] = field(default_factory=dict)
    deleted_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def has_deletions(self) -> bool:
        """Whether a deletion vector removes rows of this file."""
        return len(self.deleted_rows) > 0

    @property
    def live_rows(self) -> int:
        """Rows a reader sees (-1 when the file's row count is unknown)."""
        if self.num_records < 0:
            return -1
        return self.num_records - len(self.deleted_rows)


def file_location(root: str, path: str) -> str:
    """Where the file of log path ``path`` is, for a pyarrow filesystem rooted like ``root``.

    Log paths are URI-encoded: ``a%20b`` names the file ``a b``.

    An absolute path is a URI with a scheme: ``file:///src/f.parquet``, or
    ``file:/src/f.parquet`` as Delta's connector writes a SHALLOW CLONE's paths
    into the source table (taken for relative ones, every file of a clone was
    "missing": an audit). A relative path never has one: Delta escapes ``:``.

    >>> file_location("/data/t", "p=a%20b%253A/f.parquet")
    '/data/t/p=a b%3A/f.parquet'
    >>> file_location("/data/t", "file:/data/src/a%20b.parquet")
    '/data/src/a b.parquet'
    """
    if _SCHEME.match(path):
        return urllib.parse.unquote(urllib.parse.urlparse(path).path)
    return f"{root.rstrip('/')}/{urllib.parse.unquote(path)}"


#: a URI scheme (RFC 3986), two characters at least (``C:`` is a drive, not a scheme)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:")


def is_plain_path(path: str) -> bool:
    """A log path that is a bare file name whose URI form is itself (Spark reads it as is).

    >>> is_plain_path("ll-part-00000-ab.zstd.parquet"), is_plain_path("p=1/x.parquet")
    (True, False)
    """
    return bool(path) and all(c.isalnum() or c in "._-+" for c in path)


#: ZeroMQ's Z85 alphabet, in which Delta spells a deletion vector file's UUID
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_DIGIT = {c: k for k, c in enumerate(_Z85)}


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 ``text`` (5 characters for 4 bytes, big-endian); ValueError if it
    is not Z85. (``base64.z85decode`` arrives with Python 3.13.)

    >>> z85_decode("HelloWorld").hex()
    '864fd26fb559f75b'
    """
    if len(text) % 5:
        raise ValueError(f"Z85 text is 5 characters per 4 bytes, got {len(text)}")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            if char not in _Z85_DIGIT:
                raise ValueError(f"{char!r} is not a Z85 character")
            value = value * 85 + _Z85_DIGIT[char]
        if value >= 2**32:
            raise ValueError(f"{text[start : start + 5]!r} is past 4 bytes")
        out += value.to_bytes(4, "big")
    return bytes(out)


def deletion_vector_file(root: str, descriptor: Mapping[str, Any]) -> str | None:
    """Where the file of a deletion vector descriptor (``add.deletionVector``) is, for a
    pyarrow filesystem rooted like ``root``; None for a vector stored inline.

    Storage type ``u``: ``pathOrInlineDv`` is an optional folder prefix and then the file's
    UUID in Z85 (20 characters), the file ``<prefix>/deletion_vector_<uuid>.bin`` under
    the table; ``p``: an absolute path; ``i``: the vector itself. ValueError for another
    storage type or a path this cannot read.

    >>> deletion_vector_file("/t", {"storageType": "u", "pathOrInlineDv": "ab" + "0" * 20})
    '/t/ab/deletion_vector_00000000-0000-0000-0000-000000000000.bin'
    """
    kind, text = descriptor.get("storageType"), descriptor.get("pathOrInlineDv")
    if kind == "i":
        return None
    if not isinstance(text, str):
        raise ValueError(f"a deletion vector without a path: {dict(descriptor)}")
    if kind == "p":
        return file_location(root, text)
    if kind != "u" or len(text) < 20:
        raise ValueError(f"a deletion vector this cannot place: {dict(descriptor)}")
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(text[-20:]))}.bin"
    prefix = text[:-20]
    folder = f"{root.rstrip('/')}/{prefix}" if prefix else root.rstrip("/")
    return f"{folder}/{name}"


def read_data_file(
    filesystem: pafs.FileSystem,
    root: str,
    fmt: TableFormat,
    file: DataFile,
    *,
    columns: Sequence[str] | None = None,
    batch_rows: int = READ_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The live rows of ``file`` as batches of the table's logical schema (or ``columns``).

    Partition columns are filled from the log, columns found under their
    physical names (:func:`match_names`: as Spark finds them) and relabelled, a
    column the file lacks reads as NULL (as Spark's reader does), other types are
    cast to the table's (e.g. INT96 timestamps), and rows in the deletion vector
    are dropped.
    """
    wanted = [fmt.schema.field(name) for name in (columns or fmt.schema.names)]
    out_schema = pa.schema(wanted)
    physical = {f.name: fmt.physical.field(fmt.schema.get_field_index(f.name)) for f in wanted}
    deleted = np.asarray(file.deleted_rows, dtype=np.int64)
    with _unreadable(root, file.path):
        handle = filesystem.open_input_file(file_location(root, file.path))
    with handle:
        parquet, read, logical, legacy_int96 = _open_checked(handle, root, fmt, file, wanted)
        # physical name -> the name the file holds it under
        in_file = {physical[logical[name]].name: name for name in read}
        offset = 0
        batches = parquet.iter_batches(batch_rows, columns=read)
        while True:
            with _unreadable(root, file.path):
                raw = next(batches, None)
            if raw is None:
                break
            for name in legacy_int96:
                _check_int96_values(raw.column(name), logical[name], root, file.path)
            n = raw.num_rows
            arrays = []
            for f in wanted:
                source = physical[f.name]
                if fmt.is_partition(f.name):
                    arrays.append(_constant(file.partition_values.get(f.name), f.type, n))
                elif source.name in in_file:
                    arrays.append(align(raw.column(in_file[source.name]), source.type, f.type))
                else:
                    arrays.append(pa.nulls(n, f.type))
            batch = pa.RecordBatch.from_arrays(arrays, schema=out_schema)
            if len(deleted):
                rows = np.arange(offset, offset + n, dtype=np.int64)
                batch = batch.filter(pa.array(~np.isin(rows, deleted)))
            offset += n
            if batch.num_rows:
                yield batch


def _open_checked(
    handle: Any, root: str, fmt: TableFormat, file: DataFile, wanted: Sequence[pa.Field]
) -> tuple[pq.ParquetFile, list[str], dict[str, str], set[str]]:
    """The Parquet file of ``handle``; the names in the file of the ``wanted`` columns it
    holds (:func:`match_names`); the map from those names to the logical ones; and the
    legacy INT96 columns whose values are still to check (:func:`check_calendar`, which
    refuses the file here when its footer shows a date or timestamp before 1900 in
    Spark's legacy calendar)."""
    with _unreadable(root, file.path):
        # INT96 (Delta's connector writes timestamps so) read as microseconds: the
        # nanosecond default overflows outside 1677-2262
        parquet = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
    physical = {f.name: fmt.physical.field(fmt.schema.get_field_index(f.name)) for f in wanted}
    stored = [physical[f.name].name for f in wanted if not fmt.is_partition(f.name)]
    found = match_names(parquet.schema_arrow.names, stored, f"data file {file.path} of '{root}'")
    read = [found[name] for name in stored if name in found]
    # (errors name the columns as the table does: a physical name is col-<uuid>)
    logical = {
        found[physical[f.name].name]: f.name for f in wanted if physical[f.name].name in found
    }
    return parquet, read, logical, check_calendar(parquet, read, root, file.path, logical)


def match_names(present: Sequence[str], wanted: Iterable[str], where: str) -> dict[str, str]:
    """For each of the ``wanted`` names that a file (``where``) holds, the name it holds it
    under among ``present``: the same name, or else the one that differs from it only
    by case, as Spark's Parquet reader (and so Delta's) matches a file's columns and
    struct fields (``spark.sql.caseSensitive=false``). Files written by other tools
    (``CONVERT TO DELTA`` over files of ``UserId`` and ``userid``) were read as NULL
    there: OPTIMIZE wrote the NULLs for good (an audit). UnsupportedTable when several
    names differ from one only by case (Spark refuses those files too)."""
    exact = set(present)
    folded: dict[str, list[str]] = {}
    for name in present:
        folded.setdefault(name.lower(), []).append(name)
    out: dict[str, str] = {}
    for name in wanted:
        if name in exact:
            out[name] = name
            continue
        found = folded.get(name.lower(), [])
        if len(found) > 1:
            raise UnsupportedTable(
                f"{where} holds columns {found} that differ only by case: which is "
                f"'{name}' cannot be told (Spark's reader refuses such a file too)"
            )
        if found:
            out[name] = found[0]
    return out


def check_file_calendar(
    filesystem: pafs.FileSystem, root: str, fmt: TableFormat, file: DataFile
) -> None:
    """UnsupportedTable when :func:`read_data_file` would refuse ``file`` (every column)
    for its legacy calendar, found before any row is read: from the footer, and for
    INT96 columns of such a file (no footer statistics) from their values.

    A cache of the files whose footer names no legacy calendar (most files; data files
    never change) spares them the footer read the next time."""
    location = file_location(root, file.path)
    if (location, file.size) in _PLAIN_CALENDAR:
        return
    with _unreadable(root, file.path):
        handle = filesystem.open_input_file(location)
    with handle:
        wanted = list(fmt.schema)
        parquet, _, logical, legacy_int96 = _open_checked(handle, root, fmt, file, wanted)
        if not any(legacy_calendar(parquet.metadata.metadata or {})):
            if len(_PLAIN_CALENDAR) >= _PLAIN_CALENDAR_SIZE:
                _PLAIN_CALENDAR.clear()
            _PLAIN_CALENDAR[(location, file.size)] = None
            return
        if legacy_int96:
            with _unreadable(root, file.path):
                values = parquet.read(columns=sorted(legacy_int96))
            for name in legacy_int96:
                _check_int96_values(values.column(name), logical[name], root, file.path)


#: (location, size) of data files whose footer names no legacy calendar (a dict: insertion
#: order, cleared when full)
_PLAIN_CALENDAR: dict[tuple[str, int], None] = {}
_PLAIN_CALENDAR_SIZE = 100_000


def calendar_unsettled(fmt: TableFormat, bounds: Mapping[str, Any], count: int) -> np.ndarray:
    """Per file of ``count`` (in the order of ``bounds``: column statistics by leaf name,
    each with a ``min`` array), whether its statistics leave open that it holds a date
    or timestamp before :data:`TRUSTED_FROM` in a column read from the file: a lower
    bound unknown or earlier, or such a value in a list or map (no bounds). Only such
    files can be refused for their legacy calendar (:func:`check_calendar`); all False
    when the table has no date or timestamp outside its partition columns."""
    unsettled = np.zeros(count, dtype=bool)
    for leaf, dtype in _temporal_leaves(fmt):
        column = bounds.get(leaf) if dtype is not None else None
        if column is None:
            return np.ones(count, dtype=bool)
        low = column.min
        if pa.types.is_date32(low.type):
            early = pc.less(low.cast(pa.int32()), TRUSTED_DAYS_FROM)
        elif pa.types.is_timestamp(low.type):
            per_micro = {"s": 1e-6, "ms": 1e-3, "us": 1, "ns": 1000}[low.type.unit]
            early = pc.less(low.cast(pa.int64()), int(TRUSTED_MICROS_FROM * per_micro))
        else:  # bounds of another type than the column's: nothing is known
            return np.ones(count, dtype=bool)
        unsettled |= np.asarray(early.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
    return unsettled


def _temporal_leaves(fmt: TableFormat) -> list[tuple[str, pa.DataType | None]]:
    """The DATE and TIMESTAMP leaves of the columns read from data files, by dotted
    statistics name; a list or map holding one is a leaf of type None (no bounds)."""
    out: list[tuple[str, pa.DataType | None]] = []

    def walk(name: str, dtype: pa.DataType) -> None:
        if pa.types.is_date(dtype) or pa.types.is_timestamp(dtype):
            out.append((name, dtype))
        elif pa.types.is_struct(dtype):
            for child in dtype:
                walk(f"{name}.{child.name}", child.type)
        elif _holds_temporal(dtype):
            out.append((name, None))

    for f in fmt.schema:
        if not fmt.is_partition(f.name):
            walk(f.name, f.type)
    return out


def _holds_temporal(dtype: pa.DataType) -> bool:
    if pa.types.is_date(dtype) or pa.types.is_timestamp(dtype):
        return True
    return any(_holds_temporal(dtype.field(i).type) for i in range(dtype.num_fields))


#: footer keys Spark writes into a file whose dates or timestamps it rebased into the
#: hybrid Julian calendar (``spark.sql.parquet.*RebaseModeInWrite=LEGACY``)
LEGACY_CALENDAR_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")
#: the footer key naming the Spark version that wrote a file
SPARK_VERSION_KEY = b"org.apache.spark.version"


def legacy_calendar(keys: Mapping[bytes, bytes]) -> tuple[bool, bool]:
    """Whether Spark reads the dates and INT64 timestamps, and the INT96 timestamps, of a
    Parquet file with footer metadata ``keys`` as rebased from the hybrid Julian calendar.

    Spark's rule (``DataSourceUtils.datetimeRebaseSpec`` / ``int96RebaseSpec``): a file
    of Spark before 3.0 (dates, timestamps) or before 3.1 (INT96) is in the legacy
    calendar without saying so, a later one when its legacy key says so (an audit: Spark
    2.4 and 3.0 files were read by pyarrow as stored, 1499-12-23 as 1500-01-01, and a
    rewrite kept the move). The versions are compared as text, as Spark compares them.
    A file without any of the keys is read as stored.
    """
    raw = keys.get(SPARK_VERSION_KEY)
    version = raw.decode("utf-8", "replace") if raw is not None else None
    dates = LEGACY_CALENDAR_KEYS[0] in keys or (version is not None and version < "3.0.0")
    int96 = LEGACY_CALENDAR_KEYS[1] in keys or (version is not None and version < "3.1.0")
    return dates, int96


#: from this day on the hybrid calendar and the proleptic Gregorian one agree (the
#: calendars meet in 1582; Spark rebases timestamps by the zone rules of the JVM up to
#: 1900, so the earlier years are all taken as moved)
SAME_CALENDAR_FROM = _dt.date(1900, 1, 1)
#: a day past :data:`SAME_CALENDAR_FROM`, for the zones east of UTC: a lower bound from
#: this instant on shows a file holds no value the two calendars place apart; as days and
#: as microseconds since the epoch
TRUSTED_FROM = _dt.datetime.combine(
    SAME_CALENDAR_FROM + _dt.timedelta(days=1), _dt.time(), _dt.timezone.utc
)
TRUSTED_DAYS_FROM = (TRUSTED_FROM.date() - _dt.date(1970, 1, 1)).days
TRUSTED_MICROS_FROM = (TRUSTED_FROM - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // (
    _dt.timedelta(microseconds=1)
)


def check_calendar(
    parquet: pq.ParquetFile,
    columns: Sequence[str],
    root: str,
    path: str,
    names: Mapping[str, str],
) -> set[str]:
    """UnsupportedTable when ``parquet`` was written with Spark's legacy calendar and
    its ``columns`` (physical top-level names) may hold a date or timestamp before 1900
    (the error names them by ``names``: physical -> logical);
    the top-level INT96 timestamp columns of such a file, whose values the reader checks
    as it reads them (:func:`_check_int96_values`: INT96 has no footer statistics).

    Spark reads such a file back by rebasing those values; pyarrow reads the stored
    days, so a rewrite moved 1000-01-01 to 1000-01-06 for good, and an index built
    from it skipped the row (an audit). A column chunk of values without footer
    statistics counts as early; one of NULLs only holds no value at all.
    """
    dates, int96 = legacy_calendar(parquet.metadata.metadata or {})
    if not (dates or int96):
        return set()
    wanted = set(columns)
    schema = parquet.schema
    early: set[str] = set()
    by_value: set[str] = set()
    for j in range(parquet.metadata.num_columns):
        leaf = schema.column(j)
        top = leaf.path.split(".", 1)[0]
        if leaf.physical_type == "INT96":
            rebased = int96  # INT96 timestamps: int96RebaseModeInWrite
        else:  # DATE and INT64 timestamps: datetimeRebaseModeInWrite
            rebased = dates and str(leaf.logical_type).upper().startswith(("DATE", "TIMESTAMP"))
        if top not in wanted or not rebased or top in early:
            continue
        if leaf.physical_type == "INT96" and leaf.path == top:
            by_value.add(top)
            continue
        for g in range(parquet.metadata.num_row_groups):
            if _before_1900(parquet.metadata.row_group(g).column(j)):
                early.add(top)
                break
    if early:
        raise _legacy_calendar(root, path, sorted(names.get(c, c) for c in early))
    return by_value


def _legacy_calendar(root: str, path: str, columns: Sequence[str]) -> UnsupportedTable:
    return UnsupportedTable(
        f"data file {path} of '{root}' was written by Spark in the legacy hybrid Julian "
        f"calendar (datetimeRebaseModeInWrite / int96RebaseModeInWrite LEGACY), and its "
        f"column(s) {list(columns)} may hold values before 1900: lakelayout reads files "
        "with pyarrow, which does not rebase them, and they would move by days. Rewrite "
        "the table with Spark first (its reader rebases them), e.g. an OPTIMIZE by Delta"
    )


#: :data:`SAME_CALENDAR_FROM` at midnight UTC in microseconds since the epoch
_MICROS_1900 = -2_208_988_800_000_000


def _check_int96_values(
    column: pa.Array | pa.ChunkedArray, name: str, root: str, path: str
) -> None:
    """UnsupportedTable naming column ``name`` when a legacy INT96 column read holds a
    value before 1900."""
    micros = pc.min(column.cast(pa.timestamp("us")).cast(pa.int64()))
    if micros.is_valid and micros.as_py() < _MICROS_1900:
        raise _legacy_calendar(root, path, [name])


def _before_1900(chunk: Any) -> bool:
    """Whether a column chunk may hold a value before 1900: by its footer statistics
    (none on a chunk that holds values: yes; NULLs only: no)."""
    stats = chunk.statistics
    if stats is not None and stats.has_null_count and stats.null_count == chunk.num_values:
        return False
    if stats is None or not stats.has_min_max:
        return True
    try:
        low = stats.min
        if isinstance(low, _dt.datetime):
            return low.replace(tzinfo=None) < _dt.datetime.combine(SAME_CALENDAR_FROM, _dt.time())
        if isinstance(low, _dt.date):
            return low < SAME_CALENDAR_FROM
    except (ValueError, OverflowError, TypeError):
        return True
    return True


@contextlib.contextmanager
def _unreadable(root: str, path: str) -> Iterator[None]:
    """TableCorrupt naming the data file when pyarrow cannot open or decode it (a
    truncated or overwritten file raised pyarrow's ArrowInvalid from OPTIMIZE; found
    by an audit). Nothing has been written when a read fails."""
    try:
        yield
    except (OSError, pa.ArrowException) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        what = "is missing" if isinstance(exc, FileNotFoundError) else "cannot be read"
        raise TableCorrupt(
            f"data file {path} of '{root}' {what} ({reason}); the Delta log lists it"
        ) from None


def _constant(value: Any, dtype: pa.DataType, n: int) -> pa.Array:
    try:
        return pa.repeat(pa.scalar(value, dtype), n)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise UnsupportedTable(f"partition value {value!r} cannot be read as {dtype}") from exc


def align(array: pa.Array, physical: pa.DataType, logical: pa.DataType) -> pa.Array:
    """``array`` (read under physical names) as type ``logical``.

    Struct children are matched by their physical name, as Spark matches them
    (:func:`match_names`; a child the file lacks is NULL), lists and maps recurse,
    and leaves are cast when the file's type differs (``large_string``, INT96
    nanoseconds, a naive UTC timestamp).
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_struct(logical) and pa.types.is_struct(array.type):
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        found = match_names(
            names,
            [physical.field(i).name for i in range(physical.num_fields)],
            "a struct of a data file",
        )
        children = []
        for i in range(logical.num_fields):
            target, source = logical.field(i), physical.field(i)
            at = names.index(found[source.name]) if source.name in found else None
            if at is None:
                children.append(pa.nulls(len(array), target.type))
            else:
                children.append(align(array.field(at), source.type, target.type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(logical), mask=mask)
    if _is_list(logical) and _is_list(array.type):
        values = align(array.values, physical.value_type, logical.value_type)
        rebuilt = type(array).from_arrays(
            array.offsets, values, mask=array.is_null() if array.null_count else None
        )
        return rebuilt if rebuilt.type == logical else rebuilt.cast(logical)
    if pa.types.is_map(logical) and pa.types.is_map(array.type):
        keys = align(array.keys, physical.key_type, logical.key_type)
        items = align(array.items, physical.item_type, logical.item_type)
        rebuilt = pa.MapArray.from_arrays(
            array.offsets, keys, items, mask=array.is_null() if array.null_count else None
        )
        return rebuilt if rebuilt.type == logical else rebuilt.cast(logical)
    if array.type == logical:
        return array
    return array.cast(logical)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def relabel(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``array`` with the field names of ``target`` (same structure): logical -> physical."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == target:
        return array
    return array.view(target) if _same_layout(array.type, target) else array.cast(target)


def _same_layout(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            _same_layout(a.field(i).type, b.field(i).type) for i in range(a.num_fields)
        )
    if _is_list(a) and _is_list(b):
        return type(a) is type(b) and _same_layout(a.value_type, b.value_type)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return _same_layout(a.key_type, b.key_type) and _same_layout(a.item_type, b.item_type)
    return a == b


# --------------------------------------------------------------------------- partitions (write)


def partitionable(dtype: pa.DataType) -> bool:
    """Whether lakelayout can partition by a column of this type (Delta's atomic types)."""
    t = dtype
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
    )


def serialize_partition_value(value: Any, dtype: pa.DataType) -> str | None:
    """A partition value as Delta's ``partitionValues`` stores it (None: NULL).

    Delta's rules: numbers as their text, dates ``YYYY-MM-DD``, booleans
    ``true``/``false``, timestamps in ISO 8601 adjusted to UTC
    (``2020-01-01T10:00:00.123456Z``, what Delta's connector writes),
    timestamps without zone as ``YYYY-MM-DD HH:MM:SS.ffffff``; an empty string
    is NULL for every reader, so it is written as NULL.

    >>> serialize_partition_value(_dt.date(2020, 1, 2), pa.date32())
    '2020-01-02'
    >>> serialize_partition_value(_decimal.Decimal("1.50"), pa.decimal128(5, 2))
    '1.50'
    >>> serialize_partition_value(float("nan"), pa.float64()), serialize_partition_value("", pa.string())
    ('NaN', None)
    >>> serialize_partition_value(_dt.datetime(1, 2, 3, 4, 5, 6, 7), pa.timestamp("us"))
    '0001-02-03 04:05:06.000007'
    """
    if value is None:
        return None
    t = dtype
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str(value) or None
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_integer(t):
        return str(int(value))
    if pa.types.is_floating(t):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return repr(number)
    if pa.types.is_decimal(t):
        return format(_decimal.Decimal(value), "f")
    if pa.types.is_date32(t):
        return value.isoformat()  # type: ignore[no-any-return]
    if pa.types.is_timestamp(t):
        moment: _dt.datetime = value
        # four-digit years: strftime's %Y does not pad years below 1000 on Linux
        # ('1-01-01 ...'), which Delta's reader takes for NULL and polars refuses
        if t.tz is None:
            return f"{moment.year:04d}-{moment.strftime('%m-%d %H:%M:%S.%f')}"
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.timezone.utc)
        moment = moment.astimezone(_dt.timezone.utc)
        return f"{moment.year:04d}-{moment.strftime('%m-%dT%H:%M:%S.%fZ')}"
    raise InvalidOption(f"cannot partition by a column of type {dtype}")


def timestamp_spellings(
    fmt: TableFormat, partitions: Iterable[Mapping[str, str | None]]
) -> tuple[tuple[str, str, str | None], ...]:
    """How the log spells TIMESTAMP partition values without a zone (``fmt.spellings``).

    ``partitions``: the distinct ``partitionValues`` of the live files as the
    log stores them, by logical column name (``DeltaTable.partitions()``). Delta's rules allow a TIMESTAMP partition
    value without a zone (``2021-01-01 05:30:00``), what Delta's connector wrote
    before version 3 in the session's time zone and what delta-rs writes in UTC;
    readers disagree on it (delta-rs and lakelayout read UTC, Delta's connector
    the session's zone). A rewrite that spelled such a value in UTC
    (``2021-01-01T05:30:00.000000Z``, what lakelayout writes) would move its rows
    by the zone's offset for the readers of the other kind, so a rewrite keeps
    the log's spelling. A moment spelled both ways (two writers) is None: no one
    spelling keeps both.

    >>> fmt = TableFormat.plain(pa.schema([("ts", pa.timestamp("us", "UTC"))]), ["ts"])
    >>> timestamp_spellings(fmt, [{"ts": "2021-01-01 05:30:00"}, {"ts": "2021-01-02T00:00:00Z"}])
    (('ts', '2021-01-01T05:30:00.000000Z', '2021-01-01 05:30:00'),)
    """
    zoned = [
        f for f in fmt.partition_fields() if pa.types.is_timestamp(f.type) and f.type.tz is not None
    ]
    if not zoned:
        return ()
    out: dict[tuple[str, str], str | None] = {}
    spelled_with_zone: set[tuple[str, str]] = set()
    for values in partitions:
        for f in zoned:
            # delta-rs gives them under the logical names (with column mapping too)
            text = values.get(f.name, values.get(fmt.physical_name(f.name)))
            if not text:
                continue
            try:
                moment = _dt.datetime.fromisoformat(text)
            except ValueError:
                continue  # delta-rs read it; lakelayout writes its own spelling
            key = (f.name, str(serialize_partition_value(moment, f.type)))
            if moment.tzinfo is not None:
                spelled_with_zone.add(key)
            else:
                out.setdefault(key, text)
    return tuple(
        (name, ours, None if (name, ours) in spelled_with_zone else theirs)
        for (name, ours), theirs in sorted(out.items())
    )


def escape_path_name(text: str) -> str:
    """``text`` as Spark writes it in a partition directory name (``%XX`` escapes).

    >>> escape_path_name("a b:c/d%")
    'a b%3Ac%2Fd%25'
    """
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPES else c for c in text)


def partition_directory(fmt: TableFormat, values: Sequence[str | None]) -> str:
    """``col=value/...`` for serialized partition ``values`` (in partition column order).

    >>> partition_directory(TableFormat.plain(pa.schema([("p", pa.string())]), ["p"]), [None])
    'p=__HIVE_DEFAULT_PARTITION__'
    """
    parts = []
    for f, value in zip(fmt.partition_fields(), values, strict=True):
        shown = _directory_value(value, f.type)
        text = NULL_PARTITION if shown is None else escape_path_name(shown)
        parts.append(f"{escape_path_name(fmt.physical_name(f.name))}={text}")
    return "/".join(parts)


def _directory_value(value: str | None, dtype: pa.DataType) -> str | None:
    """A serialized partition value as Spark renders it in a directory name.

    Only timestamps differ: the log holds ISO 8601 in UTC
    (``2021-03-01T10:00:00.500000Z``), the directory Spark's rendering in UTC
    (``2021-03-01 10:00:00.5``), as Delta's connector writes both. Readers
    that parse directory names (polars does) then see one format per column.

    >>> _directory_value("2021-03-01T10:00:00.500000Z", pa.timestamp("us", tz="UTC"))
    '2021-03-01 10:00:00.5'
    >>> _directory_value("2021-03-01T10:00:00.000000Z", pa.timestamp("us", tz="UTC"))
    '2021-03-01 10:00:00'
    """
    if value is None or not pa.types.is_timestamp(dtype):
        return value
    text = value.replace("T", " ").removesuffix("Z")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


#: characters delta-rs leaves unencoded in a log path (checked on delta-rs 1.6.6)
LOG_PATH_SAFE = "/!$&'()+,:;=@"


def log_path(relative: str) -> str:
    """The URI-encoded form of a table-relative file path, exactly as delta-rs stores it.

    delta-rs encodes the paths of the actions it commits (``AddAction`` and
    ``RemoveAction`` take the *decoded* path, see :func:`raw_path`); the
    snapshot then lists this form, so lakelayout names its files by it.

    >>> log_path("p=a b%3A/f.parquet")
    'p=a%20b%253A/f.parquet'
    """
    return urllib.parse.quote(relative, safe=LOG_PATH_SAFE)


def raw_path(path: str) -> str:
    """The decoded form of a log path: what delta-rs's ``AddAction``/``RemoveAction`` take.

    Passing a log path as is would encode it twice (``%20`` -> ``%2520``) and
    name another file: a remove would silently not match its add.

    >>> raw_path("p=a%20b%253A/f.parquet")
    'p=a b%3A/f.parquet'
    """
    return urllib.parse.unquote(path)


def partition_runs(
    batch: pa.RecordBatch, fmt: TableFormat
) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """Split a logical batch into runs of rows with equal partition values.

    Yields ``(serialized values, rows)``; rows sorted by the partition
    columns give one run per partition. An unpartitioned table gives the
    whole batch with ``()``.
    """
    n = batch.num_rows
    if not fmt.partitioned or n == 0:
        if n:
            yield (), batch
        return
    fields = fmt.partition_fields()
    columns = [batch.column(batch.schema.get_field_index(f.name)) for f in fields]
    change = np.zeros(max(n - 1, 0), dtype=bool)
    for column in columns:
        change |= _changes(column)
    starts = [0, *(np.flatnonzero(change) + 1).tolist(), n]
    for lo, hi in itertools.pairwise(starts):
        key = tuple(
            fmt.partition_value(f.name, column[lo].as_py())
            for column, f in zip(columns, fields, strict=True)
        )
        yield key, batch.slice(lo, hi - lo)


def _changes(column: pa.Array) -> np.ndarray:
    """``out[i]``: whether row ``i + 1`` differs from row ``i`` (NULL equals NULL)."""
    after, before = column.slice(1), column.slice(0, len(column) - 1)
    same = pc.fill_null(pc.equal(after, before), False)
    both_null = pc.and_(pc.is_null(after), pc.is_null(before))
    changes = ~np.asarray(pc.or_(same, both_null).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_floating(column.type):
        # -0.0 equals 0.0, but they are two partitions ("-0.0" and "0.0"), as Delta
        # writes them: a row of one must not be written to the other
        values = column.to_numpy(zero_copy_only=False)
        changes |= np.signbit(values[1:]) != np.signbit(values[:-1])
    return changes


def partition_values_map(fmt: TableFormat, values: Sequence[str | None]) -> dict[str, str | None]:
    """``partitionValues`` of a file: physical column name -> serialized value."""
    return {
        fmt.physical_name(name): value
        for name, value in zip(fmt.partition_columns, values, strict=True)
    }


def column_bytes(metadata: pq.FileMetaData) -> dict[str, int]:
    """Compressed bytes per top-level column, summed over row groups and leaves.

    Leaves are attributed by position (Parquet stores them depth-first), not by
    splitting ``path_in_schema`` on dots, since column (and index) names may
    contain dots.
    """
    schema = metadata.schema.to_arrow_schema()
    owners = [f.name for f in schema for _ in range(_leaf_count(f.type))]
    out: dict[str, int] = {name: 0 for name in schema.names}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            out[owners[c]] += int(group.column(c).total_compressed_size)
    return out


def _leaf_count(dtype: pa.DataType) -> int:
    """Parquet leaf columns of a column of ``dtype``: a nested type's (struct, map, every
    list kind) are its children's, anything else is one."""
    if dtype.num_fields == 0:
        return 1
    return sum(_leaf_count(dtype.field(i).type) for i in range(dtype.num_fields))
