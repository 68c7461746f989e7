"""Date and time statistics a checkpoint of Delta's connector stores in a way delta-rs
misreads: TIMESTAMP as INT96, and dates and timestamps in Spark's legacy calendar.

Delta's Spark connector writes a checkpoint's typed statistics
(``add.stats_parsed``) with Spark's Parquet writer, which stores TIMESTAMP as
INT96 by default. delta-rs reads INT96 through 64-bit nanoseconds, so a bound
outside 1677-09-21..2262-04-11 comes back wrapped by multiples of about 584
years: year 0001 as 1754-08-30, a file's max of 1582 as 2167 (found by an
audit: a scan for ``ts < TIMESTAMP'1700-01-01'`` skipped every file holding
such rows, and a DELETE of them deleted nothing). A wrapped bound lies inside
the nanosecond range like a true one, so it cannot be told by its value.

A session whose ``spark.sql.parquet.datetimeRebaseModeInWrite`` or
``int96RebaseModeInWrite`` is LEGACY writes the checkpoint's typed DATE and
TIMESTAMP bounds in the hybrid Julian calendar (its footer says so:
``org.apache.spark.legacyDateTime`` / ``legacyINT96``). delta-rs reads the
stored days, so a bound of 1500-01-01 came back as 1500-01-10, and a scan for
that day skipped its file (an audit). The calendars agree from 1900 on (Spark
rebases timestamps by the zone rules of the JVM up to then).

For the files such a checkpoint lists, the bounds of every DATE and TIMESTAMP
column are read again from the statistics' JSON text the same checkpoint holds
(``add.stats``, which Delta writes there by default; the text is calendar
neutral). A file without that text (``delta.checkpoint.writeStatsAsJson=false``)
gets them from the typed statistics, read with INT96 taken as microseconds (no
wrap between years 0001 and 9999; a bound beyond them is unknown); from a
checkpoint in the legacy calendar a bound before 1900 is unknown. A timestamp
maximum on a whole millisecond is widened to the end of it as for the text.
Files added after the checkpoint come from JSON commits, which delta-rs reads
right, and a checkpoint with neither (delta-rs, lakelayout, Delta's connector
with its defaults and INT64 timestamps) is left alone: only its Parquet footers
are read, once per checkpoint.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakelayout.stats.bounds import leaf_paths, stats_key
from lakelayout.stats.delta_stats import from_delta_stats
from lakelayout.stats.model import ColumnStats, FileStats
from lakelayout.table.datafile import TRUSTED_DAYS_FROM, TRUSTED_MICROS_FROM, legacy_calendar
from lakelayout.table.location import resolve_location

#: a Parquet checkpoint of a version: classic, multi-part or v2 (uuid)
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10}|\.[0-9a-fA-F-]{36})?\.parquet$")
_TYPED = ("add.stats_parsed.minValues.", "add.stats_parsed.maxValues.")


def with_checkpoint_time_bounds(
    location: str,
    version: int,
    files: FileStats,
    schema: pa.Schema,
    physical: pa.Schema | None = None,
    partition_columns: Sequence[str] = (),
) -> FileStats:
    """``files`` (of ``version``) with the DATE and TIMESTAMP bounds of the files the
    checkpoint delta-rs read lists read again (see the module doc) when that checkpoint
    stores INT96 bounds or was written in the legacy calendar.

    ``physical``: the schema under the names the log uses (column mapping), field for
    field like ``schema``. ``partition_columns`` keep their bounds: they are the files'
    partition values, which no statistics hold (read again, they were unknown and a
    scan of one partition kept every file the checkpoint lists)."""
    partitions = set(partition_columns)
    zoned = [
        (path, dtype)
        for path, dtype in leaf_paths(schema)
        if path[0] not in partitions
        and ((pa.types.is_timestamp(dtype) and dtype.tz is not None) or pa.types.is_date32(dtype))
    ]
    if not zoned or not len(files):
        return files
    filesystem, root = resolve_location(location)
    parts, legacy = _checkpoint_to_read(filesystem, f"{root}/_delta_log", version)
    if not parts:
        return files
    named = physical if physical is not None else schema
    logical_zoned = {stats_key(p) for p, _ in zoned}
    leaves = [
        q
        for (p, _), (q, _) in zip(leaf_paths(schema), leaf_paths(named), strict=False)
        if stats_key(p) in logical_zoned
    ]
    texts = _stats_texts(filesystem, parts, legacy, leaves)
    paths = [str(p) for p in files.paths]
    where = [i for i, p in enumerate(paths) if urllib.parse.unquote(p) in texts]
    if not where:
        return files
    read = from_delta_stats(
        [texts[urllib.parse.unquote(paths[i])] for i in where],
        named,
        paths=[paths[i] for i in where],
    )
    logical_of = {
        stats_key(p): stats_key(q)
        for (p, _), (q, _) in zip(leaf_paths(named), leaf_paths(schema), strict=False)
    }
    columns = dict(files.columns)
    rows = np.asarray(where, dtype=np.int64)
    for path, _ in zoned:
        key = stats_key(path)
        held = columns.get(key)
        if held is None:
            continue
        again = next((c for k, c in read.columns.items() if logical_of.get(k) == key), None)
        columns[key] = ColumnStats(
            _put(held.min, rows, None if again is None else again.min),
            _put(held.max, rows, None if again is None else again.max),
            held.null_count,
        )
    return dataclasses.replace(files, columns=columns)


def _put(bounds: pa.Array, rows: np.ndarray, values: pa.Array | None) -> pa.Array:
    """``bounds`` with the entries at ``rows`` set to ``values`` (unknown when None)."""
    # (Arrow casts a date to and from a 32-bit integer only)
    whole = pa.int32() if pa.types.is_date32(bounds.type) else pa.int64()
    as_int = bounds.cast(whole)
    numbers = np.array(as_int.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = np.array(as_int.is_valid(), dtype=bool)
    if values is None:
        valid[rows] = False
    else:
        new = values.cast(whole)
        numbers[rows] = np.asarray(new.fill_null(0).to_numpy(zero_copy_only=False))
        valid[rows] = np.asarray(new.is_valid(), dtype=bool)
    return pa.array(numbers, pa.int64(), mask=~valid).cast(whole).cast(bounds.type)


#: (filesystem kind, the checkpoint's files with their sizes and times) -> what
#: :func:`_checkpoint_to_read` found: its files are read once, not at every snapshot
_CHECKPOINTS: dict[tuple[object, ...], tuple[list[str], frozenset[str]]] = {}


def _checkpoint_to_read(
    filesystem: pafs.FileSystem, log: str, version: int
) -> tuple[list[str], frozenset[str]]:
    """The Parquet files of the newest checkpoint at or before ``version`` (and the
    sidecars a v2 checkpoint names) when one of them stores a typed bound as INT96 or was
    written in the legacy calendar, with the files of the latter; nothing otherwise (no
    checkpoint, or none of its footers says either)."""
    try:
        listing = filesystem.get_file_info(pafs.FileSelector(log, allow_not_found=True))
    except OSError:
        return [], frozenset()
    found: dict[int, list[pafs.FileInfo]] = {}
    for info in listing:
        match = _CHECKPOINT.match(info.base_name)
        if match is not None and int(match.group(1)) <= version:
            found.setdefault(int(match.group(1)), []).append(info)
    if not found:
        return [], frozenset()
    newest = sorted(found[max(found)], key=lambda i: i.path)
    key = (filesystem.type_name, *((i.path, i.size, i.mtime_ns) for i in newest))
    known = _CHECKPOINTS.get(key)
    if known is None:
        parts = [i.path for i in newest]
        for part in list(parts):
            with filesystem.open_input_file(part) as handle:
                checkpoint = pq.ParquetFile(handle)
                if "sidecar" not in checkpoint.schema_arrow.names:
                    continue
                table = checkpoint.read(columns=["sidecar.path"])
            for entry in table.column("sidecar").to_pylist():
                if entry and entry.get("path"):
                    parts.append(f"{log}/_sidecars/{entry['path']}")
        footers = {part: _footer(filesystem, part) for part in parts}
        legacy = frozenset(part for part, (_, old) in footers.items() if old)
        wanted = legacy or any(int96 for int96, _ in footers.values())
        known = (parts, legacy) if wanted else ([], frozenset())
        if len(_CHECKPOINTS) > 256:
            _CHECKPOINTS.clear()
        _CHECKPOINTS[key] = known
    return known


def _footer(filesystem: pafs.FileSystem, part: str) -> tuple[bool, bool]:
    """Whether the checkpoint file ``part`` stores a typed bound as INT96, and whether
    Spark wrote it in the legacy calendar (its footer)."""
    with filesystem.open_input_file(part) as handle:
        metadata = pq.ParquetFile(handle).metadata
    schema = metadata.schema
    int96 = any(
        schema.column(i).physical_type == "INT96" and schema.column(i).path.startswith(_TYPED)
        for i in range(len(schema))
    )
    return int96, any(legacy_calendar(metadata.metadata or {}))


def _stats_texts(
    filesystem: pafs.FileSystem,
    parts: list[str],
    legacy: frozenset[str],
    leaves: list[tuple[str, ...]],
) -> dict[str, str | dict[str, Any] | None]:
    """Per file path (decoded) the checkpoint lists: its statistics' JSON text, or where
    the checkpoint holds none the bounds of ``leaves`` (physical paths of DATE and
    TIMESTAMP columns) from its typed statistics, INT96 read as microseconds, none before
    1900 from the ``legacy`` parts (None: neither)."""
    out: dict[str, str | dict[str, Any] | None] = {}
    for part in parts:
        with filesystem.open_input_file(part) as handle:
            checkpoint = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
            arrow = checkpoint.schema_arrow
            if "add" not in arrow.names:
                continue
            add = arrow.field("add").type
            wanted = ["add.path"] + [
                f"add.{name}"
                for name in ("stats", "stats_parsed")
                if add.get_field_index(name) >= 0
            ]
            table = checkpoint.read(columns=wanted)
        column = table.column("add").combine_chunks()
        entries = pc.struct_field(column, "path").to_pylist()
        texts = (
            pc.struct_field(column, "stats").to_pylist()
            if column.type.get_field_index("stats") >= 0
            else [None] * len(column)
        )
        # the typed statistics are read only when some entry has no text
        typed = _typed_bounds(column, leaves, part in legacy) if None in texts else texts
        for i, path in enumerate(entries):
            if path:
                out[urllib.parse.unquote(path)] = texts[i] if texts[i] is not None else typed[i]
    return out


def _typed_bounds(
    add: pa.StructArray, leaves: list[tuple[str, ...]], legacy: bool
) -> list[dict[str, Any] | None]:
    """Per entry of a checkpoint's ``add`` column, the bounds its typed statistics give
    ``leaves``, as a statistics object (ISO text; timestamps in microseconds)
    :func:`from_delta_stats` reads; None where there are none. From a checkpoint in the
    ``legacy`` calendar a bound before 1900 is left out (unknown)."""
    out: list[dict[str, Any] | None] = [None] * len(add)
    if add.type.get_field_index("stats_parsed") < 0:
        return out
    parsed = pc.struct_field(add, "stats_parsed")
    for kind in ("minValues", "maxValues"):
        for leaf in leaves:
            try:
                values = pc.struct_field(parsed, [kind, *leaf])
            except pa.ArrowInvalid:
                continue  # a column the checkpoint has no statistics for
            texts = _bound_texts(values, legacy)
            for i, text in enumerate(texts):
                if text is None:
                    continue
                stats: dict[str, Any] = out[i] or {}
                out[i] = stats
                level = stats.setdefault(kind, {})
                for name in leaf[:-1]:
                    level = level.setdefault(name, {})
                level[leaf[-1]] = text
    return out


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _bound_texts(values: pa.Array, legacy: bool) -> list[str | None]:
    """Typed DATE or TIMESTAMP bounds as Delta's statistics text spells them (None:
    unknown: another type, a unit finer than microseconds, outside Python's years 1-9999,
    or before 1900 in the ``legacy`` calendar)."""
    if pa.types.is_date32(values.type):
        days = values.cast(pa.int32()).to_pylist()
        low = TRUSTED_DAYS_FROM if legacy else None
        return [_iso_day(n) if n is not None and (low is None or n >= low) else None for n in days]
    if not pa.types.is_timestamp(values.type):
        return [None] * len(values)
    try:  # (a unit finer than microseconds that would be cut: left unknown)
        micros = values.cast(pa.timestamp("us", values.type.tz)).cast(pa.int64()).to_pylist()
    except pa.ArrowInvalid:
        return [None] * len(values)
    low = TRUSTED_MICROS_FROM if legacy else None
    return [_iso_micros(n) if n is not None and (low is None or n >= low) else None for n in micros]


def _iso_day(number: int) -> str | None:
    """Days since the epoch as an ISO date; None outside Python's years 1-9999."""
    try:
        return (_EPOCH.date() + datetime.timedelta(days=number)).isoformat()
    except OverflowError:
        return None


def _iso_micros(number: int) -> str | None:
    """Microseconds since the epoch as Delta's statistics text spells an instant; None
    outside Python's years 1-9999."""
    try:
        moment = _EPOCH + datetime.timedelta(microseconds=number)
    except OverflowError:
        return None
    return moment.isoformat(timespec="microseconds")
