"""Reading Delta statistics (``stats`` JSON, ``get_add_actions``) into :class:`FileStats`.

Statistics written by any Delta writer are made true bounds again here: a
string max that may be a truncated prefix is widened, a millisecond timestamp
max of another writer is widened to the end of its millisecond (lakelayout's
own are already rounded up, so they are not widened twice), NaN bounds are
dropped, and the float max of files not written by lakelayout is dropped
(parquet-rs, delta-rs's writer, computes float max ignoring NaN, which Spark
orders above every number).

Two delta-rs 1.6 behaviours shape the reading (checked on this machine):

* U+10FFFF written as the escaped surrogate pair ``\\udbff\\udfff`` is read
  back as U+FFFFF, a *smaller* code point: a max read back holding U+FFFFF is
  widened.
* A decimal written as number text with an exponent (``1e3``) is read back as
  null, and more fraction digits than the scale are rounded.

Pure: pyarrow and numpy only.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption
from lakelayout.expr.types import WIDE
from lakelayout.stats.bounds import (
    DEFAULT_STRING_PREFIX_LENGTH,
    DELTA_RS_TOP_CHAR,
    LAKELAYOUT_FILE_PREFIX,
    TOP_CHAR,
    check_prefix_length,
    has_bounds,
    leaf_paths,
    nan_to_null,
    stats_key,
    stats_type,
    widen_string_max,
)
from lakelayout.stats.model import ColumnStats, FileStats


def from_add_actions(
    actions: Any,
    schema: Any,
    *,
    string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
    nan_safe: bool | None = None,
    partition_columns: Sequence[str] = (),
) -> FileStats:
    """From ``DeltaTable.get_add_actions()`` (arro3 or pyarrow), nested or flattened.

    Expected columns: ``path``, ``size_bytes``, ``modification_time``,
    ``num_records``, and per statistics leaf either struct columns ``null_count``,
    ``min``, ``max`` nesting the leaves as the stats JSON does (``flatten=False``,
    unambiguous) or flattened ``null_count.<c>``, ``min.<c>``, ``max.<c>``
    columns (``flatten=True``, where a top-level column ``b.c`` and field ``c``
    of a struct ``b`` collide: such a leaf is read as unknown). Any of the
    per-column ones may be missing: that bound is unknown. Bounds are made true
    again as described in the module docstring. ``nan_safe`` says whether float
    maxima respect NaN; by default only files named with
    :data:`LAKELAYOUT_FILE_PREFIX` are trusted, and only their timestamp maxima
    are taken as written (lakelayout rounds them up itself).

    ``partition_columns`` (top-level columns) are read from the typed
    ``partition`` struct (or flattened ``partition.<c>`` columns): a file's
    partition value is an *exact* bound (min = max = the value, no nulls), and
    a NULL partition means every row is null, so every pruning rule prunes
    partitions without knowing they are partitions.
    """
    check_prefix_length(string_prefix_length)
    table = _as_table(actions)
    arrow_schema = pa.schema(schema)
    n = table.num_rows
    paths = _object_column(table, "path", n)
    ours = _written_by_lakelayout(paths)
    num_records = _int_column(table, "num_records", n, unknown=-1)
    parts = set(partition_columns)
    columns = {
        stats_key(path): (
            _partition_column(table, path, dtype, num_records)
            if len(path) == 1 and path[0] in parts
            else _column_from_actions(table, path, dtype, string_prefix_length, ours)
        )
        for path, dtype in leaf_paths(arrow_schema)
    }
    safe = ours if nan_safe is None else np.full(n, nan_safe, dtype=bool)
    exact = {stats_key((p,)) for p in parts}
    measured = {k: c for k, c in columns.items() if k not in exact}
    _drop_unsafe_float_max(measured, safe)  # partition values are exact: never dropped
    columns.update(measured)
    return FileStats(
        paths=paths,
        sizes=_int_column(table, "size_bytes", n, unknown=0),
        num_records=num_records,
        modification_times=_int_column(table, "modification_time", n, unknown=0),
        columns=columns,
        schema=arrow_schema,
    )


def from_delta_stats(
    stats: Sequence[Mapping[str, Any] | str | None],
    schema: pa.Schema,
    *,
    paths: Sequence[str] | None = None,
    sizes: Sequence[int] | None = None,
    modification_times: Sequence[int] | None = None,
    string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
) -> FileStats:
    """From Delta stats objects (or their JSON text), one per file.

    Values are parsed the way delta-rs parses the log (ISO timestamps,
    ``"NaN"`` strings, decimals as numbers or text, exactly: JSON numbers are
    read as decimals, never through a double, so pass stats objects parsed
    the same way, ``json.loads(text, parse_float=Decimal)``); a value that does not
    parse is an unknown bound. Then the same widening as
    :meth:`from_add_actions` applies.
    """
    parsed = [_parse_stats(s) for s in stats]
    n = len(parsed)
    data: dict[str, pa.Array] = {
        "path": pa.array(list(paths) if paths is not None else [f"file-{i}" for i in range(n)]),
        "size_bytes": pa.array(list(sizes) if sizes is not None else [0] * n, pa.int64()),
        "modification_time": pa.array(
            list(modification_times) if modification_times is not None else [0] * n,
            pa.int64(),
        ),
        "num_records": pa.array([p.get("numRecords") for p in parsed], pa.int64()),
    }
    for path, dtype in leaf_paths(schema):
        name = stats_key(path)
        counts = [_dig(p.get("nullCount"), path) for p in parsed]
        data[f"null_count.{name}"] = pa.array(
            [c if isinstance(c, int) and not isinstance(c, bool) else None for c in counts],
            pa.int64(),
        )
        if not has_bounds(dtype):
            continue
        target = stats_type(dtype)
        for kind, key in (("min", "minValues"), ("max", "maxValues")):
            values = [_parse_value(_dig(p.get(key), path), target) for p in parsed]
            data[f"{kind}.{name}"] = pa.array(values, target)
    return from_add_actions(
        pa.table(data), schema, string_prefix_length=string_prefix_length, nan_safe=True
    )


def widen_float_bounds(files: FileStats, keys: Sequence[str]) -> FileStats:
    """``files`` with the DOUBLE bounds of ``keys`` (statistics keys) made true for files
    written while the column was FLOAT (see :func:`lakelayout.table.features.float_widened`).

    Such a file's bound is the shortest decimal text of a FLOAT value ``v``; read as a
    DOUBLE ``d``, ``v`` is ``float32(d)`` exactly. Each min becomes ``min(d, v)`` and each
    max ``max(d, v)``, which holds whichever type the file was written in (a FLOAT
    outside its range is infinite: that bound only loosens).
    """
    columns = dict(files.columns)
    for key in keys:
        stats = columns.get(key)
        if stats is None or not pa.types.is_float64(stats.min.type):
            continue
        columns[key] = ColumnStats(
            _widened(stats.min, np.minimum), _widened(stats.max, np.maximum), stats.null_count
        )
    return replace(files, columns=columns)


def _widened(bounds: pa.Array, pick: Any) -> pa.Array:
    valid = np.asarray(bounds.is_valid(), dtype=bool)
    values = np.asarray(bounds.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        as_float = values.astype(np.float32).astype(np.float64)
    out = np.where(np.isnan(values), values, pick(values, as_float))
    return pa.array(out, pa.float64(), mask=~valid)


# ---------------------------------------------------------------- from_add_actions helpers


def _as_table(actions: Any) -> pa.Table:
    if isinstance(actions, pa.Table):
        return actions
    if isinstance(actions, pa.RecordBatch):
        return pa.Table.from_batches([actions])
    if hasattr(actions, "__arrow_c_stream__"):
        return pa.table(actions)
    if hasattr(actions, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(actions)])
    raise InvalidOption(
        f"expected the Arrow table of DeltaTable.get_add_actions(flatten=True), "
        f"got {type(actions).__name__}"
    )


def _object_column(table: pa.Table, name: str, n: int) -> np.ndarray:
    if name not in table.column_names:
        return np.array([""] * n, dtype=object)
    return np.array(table.column(name).to_pylist(), dtype=object)


def _int_column(table: pa.Table, name: str, n: int, *, unknown: int) -> np.ndarray:
    if name not in table.column_names:
        return np.full(n, unknown, dtype=np.int64)
    column = table.column(name).cast(pa.int64())
    return np.asarray(pc.fill_null(column, unknown).to_numpy(), dtype=np.int64)


def _written_by_lakelayout(paths: np.ndarray) -> np.ndarray:
    """Files named with :data:`LAKELAYOUT_FILE_PREFIX`: their statistics follow lakelayout's rules."""
    if not len(paths):
        return np.zeros(0, dtype=bool)
    names = pa.array([str(p).rsplit("/", 1)[-1] for p in paths], pa.string())
    return np.asarray(pc.starts_with(names, LAKELAYOUT_FILE_PREFIX), dtype=bool)


def _drop_unsafe_float_max(columns: dict[str, ColumnStats], safe: np.ndarray) -> None:
    """Null the float max of files whose writer may have ignored NaN (see LAKELAYOUT_FILE_PREFIX)."""
    unsafe = ~safe
    if not unsafe.any():
        return
    for name, stats in columns.items():
        if pa.types.is_floating(stats.max.type):
            nulls = pa.nulls(len(safe), stats.max.type)
            columns[name] = replace(stats, max=pc.if_else(pa.array(unsafe), nulls, stats.max))


def _column_from_actions(
    table: pa.Table,
    path: tuple[str, ...],
    dtype: pa.DataType,
    prefix_length: int,
    ours: np.ndarray,
) -> ColumnStats:
    n = table.num_rows
    target = stats_type(dtype)
    counts = _leaf_array(table, "null_count", path)
    null_count = np.full(n, -1, dtype=np.int64)
    if counts is not None:
        try:
            filled = pc.fill_null(counts.cast(pa.int64()), -1)
            null_count = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if not has_bounds(dtype):
        return ColumnStats(pa.nulls(n, target), pa.nulls(n, target), null_count)
    low = _typed(_leaf_array(table, "min", path), target, n)
    high = _typed(_leaf_array(table, "max", path), target, n)
    return ColumnStats(_true_min(low), _true_max(high, prefix_length, ours), null_count)


def _partition_column(
    table: pa.Table, path: tuple[str, ...], dtype: pa.DataType, num_records: np.ndarray
) -> ColumnStats:
    """Exact bounds of a partition column: each file's value, or all-null for NULL."""
    n = table.num_rows
    target = stats_type(dtype)
    found = _leaf_array(table, "partition", path)
    if found is None or not has_bounds(dtype):
        return ColumnStats(pa.nulls(n, target), pa.nulls(n, target), np.full(n, -1, np.int64))
    value = _typed(found, target, n)
    is_null = np.asarray(value.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    null_count = np.where(is_null, num_records, 0).astype(np.int64)
    exact = nan_to_null(value)
    return ColumnStats(exact, exact, null_count)


def _leaf_array(table: pa.Table, kind: str, path: tuple[str, ...]) -> pa.Array | None:
    """The ``kind`` (``min``, ``max``, ``null_count``, ``partition``) values of one leaf, or None.

    Nested form: struct column ``kind`` entered field by field (a null struct
    makes its fields null). Flattened form: the column ``kind.<stats key>``,
    else ``kind.<dotted path>`` when exactly one column has that name.
    """
    if kind in table.column_names and pa.types.is_struct(table.schema.field(kind).type):
        arr: pa.Array = table.column(kind).combine_chunks()
        for part in path:
            if not pa.types.is_struct(arr.type):
                return None
            index = arr.type.get_field_index(part)
            if index < 0:
                return None
            arr = arr.flatten()[index]
        return arr
    for name in (f"{kind}.{stats_key(path)}", f"{kind}.{'.'.join(path)}"):
        matches = [i for i, column in enumerate(table.column_names) if column == name]
        if len(matches) == 1:
            return table.column(matches[0]).combine_chunks()
        if matches:
            return None
    return None


def _typed(values: pa.Array | None, target: pa.DataType, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, target)
    if values.type == target:
        return values
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(n, target)


def _true_min(low: pa.Array) -> pa.Array:
    """A stored min is a true lower bound as is (truncated strings are prefixes); NaN is not."""
    return nan_to_null(low)


def _true_max(high: pa.Array, prefix_length: int, ours: np.ndarray) -> pa.Array:
    """Widen a stored max into a true upper bound (see the module docstring).

    Timestamp maxima of lakelayout's own files (``ours``) were rounded up to
    the millisecond when written, so they are true bounds as they are; those
    of other writers may be truncated and are widened to the end of their
    millisecond.
    """
    high = nan_to_null(high)
    if pa.types.is_string(high.type):
        return _widen_strings(high, prefix_length)
    if pa.types.is_timestamp(high.type):
        if ours.all():
            return high
        return pc.if_else(pa.array(ours), high, _widen_millis(high))
    return high


def _widen_strings(high: pa.Array, prefix_length: int) -> pa.Array:
    """Only values that may be truncated go through Python; the rest stay columnar."""
    if len(high) == 0:
        return high
    suspect = pc.or_(
        pc.greater_equal(pc.utf8_length(high), prefix_length),
        pc.or_(
            pc.match_substring(high, DELTA_RS_TOP_CHAR),
            pc.match_substring(high, TOP_CHAR),
        ),
    )
    positions = np.flatnonzero(pc.fill_null(suspect, False).to_numpy(zero_copy_only=False))
    if len(positions) == 0:
        return high
    values = high.to_pylist()
    for i in positions:
        values[i] = widen_string_max(values[i], prefix_length)
    return pa.array(values, pa.string())


def _widen_millis(high: pa.Array) -> pa.Array:
    """A max on a whole millisecond may be a truncated value: extend it to 999 us later."""
    micros = high.cast(pa.int64())
    remainder = pc.subtract(micros, pc.multiply(pc.divide(micros, 1000), 1000))
    on_ms = pc.equal(remainder, 0)
    widened = pc.if_else(on_ms, pc.add(micros, 999), micros)
    return widened.cast(high.type)


# ---------------------------------------------------------------- from_delta_stats helpers


def _parse_stats(stats: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if stats is None:
        return {}
    if isinstance(stats, str):
        try:
            # numbers as exact decimals: a float would round a DECIMAL(38, s) bound
            loaded = json.loads(stats, parse_float=_decimal.Decimal)
        except json.JSONDecodeError:
            return {}
        return loaded if isinstance(loaded, dict) else {}
    return stats


def _dig(obj: Any, path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _parse_value(value: Any, target: pa.DataType) -> Any:
    """One JSON stats value as a Python value of ``target``, or ``None`` when it does not parse."""
    if value is None or isinstance(value, (dict, list)):
        return None
    try:
        return _PARSERS[_kind(target)](value, target)
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        return None


def _kind(t: pa.DataType) -> str:
    for kind, test in (
        ("bool", pa.types.is_boolean),
        ("int", pa.types.is_integer),
        ("float", pa.types.is_floating),
        ("decimal", pa.types.is_decimal),
        ("string", pa.types.is_string),
        ("date", pa.types.is_date),
        ("timestamp", pa.types.is_timestamp),
    ):
        if test(t):
            return kind
    return "none"


def _parse_bool(value: Any, _t: pa.DataType) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _parse_int(value: Any, t: pa.DataType) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
        raise TypeError(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    if isinstance(value, _decimal.Decimal) and value != value.to_integral_value():
        raise ValueError(value)
    number = int(value)
    pa.scalar(number, t)  # range check
    return number


def _parse_float(value: Any, _t: pa.DataType) -> float:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
        raise TypeError(value)
    return float(value)  # correctly rounded, as a JSON reader parsing a double does


def _parse_decimal(value: Any, t: pa.DataType) -> _decimal.Decimal:
    """An exact decimal bound, in a context wide enough for DECIMAL(38, s).

    JSON text is parsed with numbers as decimals (:func:`_parse_stats`); a
    Python float (a stats object parsed by the caller, or
    :meth:`StatsCollector.result`, which writes a float only when its repr is
    the exact bound) is read as its shortest repr.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str, _decimal.Decimal)):
        raise TypeError(value)
    number = value if isinstance(value, _decimal.Decimal) else _decimal.Decimal(str(value))
    if not number.is_finite():
        raise ValueError(value)
    quantum = _decimal.Decimal(1).scaleb(-t.scale, context=WIDE)
    if number.quantize(quantum, context=WIDE) != number:
        raise ValueError(value)
    if len(number.quantize(quantum, context=WIDE).as_tuple().digits) > t.precision:
        raise ValueError(value)
    return number


def _parse_string(value: Any, _t: pa.DataType) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _parse_date(value: Any, _t: pa.DataType) -> _dt.date:
    if not isinstance(value, str):
        raise TypeError(value)
    return _dt.date.fromisoformat(value[:10])


def _parse_timestamp(value: Any, t: pa.DataType) -> _dt.datetime:
    if not isinstance(value, str):
        raise TypeError(value)
    moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if t.tz is None:
        return moment.replace(tzinfo=None)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.astimezone(_dt.timezone.utc)


_PARSERS: dict[str, Any] = {
    "bool": _parse_bool,
    "int": _parse_int,
    "float": _parse_float,
    "decimal": _parse_decimal,
    "string": _parse_string,
    "date": _parse_date,
    "timestamp": _parse_timestamp,
}
