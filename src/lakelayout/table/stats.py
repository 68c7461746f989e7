"""Per-file statistics: collecting Delta stats and holding them columnar for pruning.

Two halves, one contract -- *every bound is a true bound*:

* :class:`StatsCollector` computes the Delta ``stats`` JSON of one data file
  (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) while the
  file's Arrow batches are in memory. A value that cannot be written as a true
  bound is omitted, never approximated inward: NaN makes a float's max unknown
  (Spark orders NaN above every number), long strings keep a prefix as min and
  an *incremented* prefix as max, timestamps are rounded outward to the
  millisecond Delta stores.
* :class:`FileStats` is a snapshot's per-file metadata as columns (paths,
  sizes, row counts and, per table column, typed ``min``/``max`` arrays and a
  ``null_count`` vector) so that pruning evaluates one predicate over all files
  at once. Its constructors re-establish true bounds for statistics written by
  any Delta writer: a string max that may be a truncated prefix is widened, a
  millisecond timestamp max is widened to the end of its millisecond, NaN
  bounds are dropped.

Unknown is always representable: a null ``min``/``max`` entry, a null count of
``-1``, a row count of ``-1``. Pruning keeps a file whenever what it needs is
unknown.

Two delta-rs 1.6 behaviours shape the JSON written here (checked on this machine):

* U+10FFFF written as the escaped surrogate pair ``\\udbff\\udfff`` (what
  :func:`json.dumps` emits by default) is read back as U+FFFFF, a *smaller*
  code point. A max holding U+10FFFF is therefore replaced by a bound without
  it, and a max read back holding U+FFFFF is widened.
* A decimal written as number text with an exponent (``1e3``) is read back as
  null, and more fraction digits than the scale are rounded. Decimals are
  written as plain number text when a float round-trips it exactly, else as a
  JSON string (``"12345678901234567890.12"``), which delta-rs and Spark both
  parse exactly.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption, SchemaMismatch

DEFAULT_STRING_PREFIX_LENGTH = 32

#: name prefix of every data file lakelayout's writer produces. Only for such
#: files is a float column's ``maxValues`` known to respect Spark's order
#: (NaN above everything: the writer omits the max of a column holding NaN).
#: Other writers (parquet-rs in delta-rs, for one) compute float max ignoring
#: NaN, so for their files the float max is dropped as unreliable.
LAKELAYOUT_FILE_PREFIX = "ll-"
"""Code points kept of a string bound (Delta Spark's ``dataSkippingStringPrefixLength``)."""

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_TOP_CHAR = chr(MAX_CODE_POINT)
_DELTA_RS_TOP_CHAR = chr(0xFFFFF)
"""What delta-rs reads back for an escaped U+10FFFF."""

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


# ---------------------------------------------------------------- string bounds


def next_string(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``.

    Increment the last code point, carrying over U+10FFFF (drop it and
    increment the one before) and stepping over the surrogate block, which
    cannot occur in UTF-8 data. ``None`` when no such string exists (the
    prefix is empty or made only of U+10FFFF).

    >>> next_string("abc"), next_string("a\\U0010ffff"), next_string("\\ud7ff"[:0] + "x\\ud7ff")
    ('abd', 'b', 'x\\ue000')
    >>> next_string(""), next_string("\\U0010ffff") is None
    (None, True)
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop())
        if code == MAX_CODE_POINT:
            continue
        code += 1
        if _SURROGATES[0] <= code <= _SURROGATES[1]:
            code = _SURROGATES[1] + 1
        return "".join(chars) + chr(code)
    return None


def string_lower_bound(value: str, prefix_length: int) -> str:
    """A prefix of ``value`` is a true lower bound of it: ``value[:prefix_length]``."""
    return value[:prefix_length]


def string_upper_bound(value: str, prefix_length: int) -> str | None:
    """A short true upper bound of ``value`` for a max statistic, or ``None``.

    Kept as is when at most ``prefix_length`` code points long and free of
    U+10FFFF; otherwise cut to the prefix (and before its first U+10FFFF) and
    incremented with :func:`next_string`, which exceeds every string starting
    with the cut.

    >>> string_upper_bound("abc", 2), string_upper_bound("ab", 2), string_upper_bound("a\\U0010ffffz", 9)
    ('ac', 'ab', 'b')
    """
    if len(value) <= prefix_length and _TOP_CHAR not in value:
        return value
    cut = value[:prefix_length].split(_TOP_CHAR, 1)[0]
    return next_string(cut)


def widen_string_max(value: str, prefix_length: int) -> str | None:
    """Turn a string max read from any Delta writer into a true upper bound.

    A max of ``prefix_length`` code points or more may be a truncated prefix
    (Delta Spark appends U+10FFFF as a tie-breaker, which delta-rs reads back as
    U+FFFFF); both marks and long values are cut and incremented. ``None`` when
    no finite bound exists.

    >>> widen_string_max("abc", 4), widen_string_max("abcd", 4), widen_string_max("ab\\U000fffff", 32)
    ('abc', 'abce', 'ac')
    """
    suspicious = _DELTA_RS_TOP_CHAR in value or _TOP_CHAR in value
    if len(value) < prefix_length and not suspicious:
        return value
    cut = value[:prefix_length]
    for mark in (_DELTA_RS_TOP_CHAR, _TOP_CHAR):
        cut = cut.split(mark, 1)[0]
    return next_string(cut)


# ---------------------------------------------------------------- type helpers


def _check_prefix_length(prefix_length: int) -> None:
    if prefix_length < 1:
        raise InvalidOption(
            f"string_prefix_length must be a positive number of characters, got {prefix_length}"
        )


def stats_type(dtype: pa.DataType) -> pa.DataType:
    """The Arrow type a column's bounds are held in.

    Bounds are typed like the column, normalized so that compute kernels accept
    them: dictionary -> value type, string / large / view -> ``string``,
    binary variants -> ``binary``, ``date64`` -> ``date32``, timestamps -> ``us``
    (Delta's unit) with the column's time zone.
    """
    if pa.types.is_dictionary(dtype):
        return stats_type(dtype.value_type)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or _is_string_view(dtype):
        return pa.string()
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or _is_binary_view(dtype):
        return pa.binary()
    if pa.types.is_date(dtype):
        return pa.date32()
    if pa.types.is_timestamp(dtype):
        return pa.timestamp("us", tz=dtype.tz)
    return dtype


def _is_string_view(dtype: pa.DataType) -> bool:
    return bool(getattr(pa.types, "is_string_view", lambda _t: False)(dtype))


def _is_binary_view(dtype: pa.DataType) -> bool:
    return bool(getattr(pa.types, "is_binary_view", lambda _t: False)(dtype))


def has_bounds(dtype: pa.DataType) -> bool:
    """Whether lakelayout keeps min/max for a column of this (normalized) type."""
    t = stats_type(dtype)
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_boolean(t)
    )


def leaf_fields(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """``(dotted name, type)`` of every statistics leaf: struct fields are entered.

    This is how Delta (and ``get_add_actions(flatten=True)``) names nested
    statistics: ``st.x`` for field ``x`` of struct column ``st``.
    """
    out: list[tuple[str, pa.DataType]] = []

    def visit(prefix: str, dtype: pa.DataType) -> None:
        if pa.types.is_struct(dtype):
            for i in range(dtype.num_fields):
                child = dtype.field(i)
                visit(f"{prefix}.{child.name}", child.type)
        else:
            out.append((prefix, dtype))

    for f in schema:
        visit(f.name, f.type)
    return out


def _normalize_array(arr: pa.Array) -> pa.Array:
    """Cast a data array so compute kernels accept it (see :func:`stats_type`).

    Timestamps keep their unit here: converting a max to microseconds must round
    up, which :func:`_timestamps_to_us` does once the bounds are known.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type):
        return arr
    target = stats_type(arr.type)
    return arr if arr.type == target else arr.cast(target)


def _timestamps_to_us(arr: pa.Array, *, round_up: bool) -> pa.Array:
    """Timestamp bounds in microseconds, rounded outward (min down, max up)."""
    target = stats_type(arr.type)
    if arr.type == target:
        return arr
    if arr.type.unit != "ns":
        return arr.cast(target)
    ints = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    mask = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    micros = -((-ints) // 1000) if round_up else ints // 1000
    return pa.array(micros, type=pa.int64(), mask=mask).cast(target)


def _flatten_struct(name: str, arr: pa.Array) -> Iterator[tuple[str, pa.Array]]:
    """``(dotted name, array)`` of every leaf; a null struct makes its fields null."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_struct(arr.type):
        for child, values in zip(arr.type, arr.flatten(), strict=True):
            yield from _flatten_struct(f"{name}.{child.name}", values)
    else:
        yield name, arr


# ---------------------------------------------------------------- JSON values


def _float_json(value: float) -> float | None:
    """A finite float bound as JSON (``-0.0`` as ``0.0``); non-finite bounds are omitted.

    ``json.dumps`` would write ``Infinity`` / ``NaN`` bare, which delta-rs
    rejects for the whole log batch; an omitted bound merely reads as unknown,
    which for an infinite min or max loses no pruning at all.
    """
    if not math.isfinite(value):
        return None
    return float(value) + 0.0


def _decimal_json(value: _decimal.Decimal) -> float | str:
    """A decimal bound written exactly: plain number when a float round-trips, else text."""
    text = format(value, "f")
    as_float = float(text)
    shown = repr(as_float)
    if "e" not in shown and "inf" not in shown and _decimal.Decimal(shown) == value:
        return as_float
    return text


def _date_json(days: int) -> str | None:
    try:
        return (_EPOCH_DATE + _dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def _timestamp_json(millis: int, utc: bool) -> str | None:
    """ISO text at millisecond precision, ``Z`` suffixed for time-zone-aware columns."""
    try:
        moment = _EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    if moment.year < 1:
        return None
    text = moment.isoformat(timespec="milliseconds")
    return text + "Z" if utc else text


# ---------------------------------------------------------------- collector


@dataclass
class _Leaf:
    """Running statistics of one leaf column of one file."""

    name: str
    dtype: pa.DataType
    nulls: int = 0
    low: Any = None
    high: Any = None
    nan: bool = False

    def add(self, arr: pa.Array) -> None:
        self.nulls += arr.null_count
        if not has_bounds(self.dtype) or arr.null_count == len(arr):
            return
        low, high = _leaf_bounds(arr)
        if pa.types.is_floating(arr.type):
            self.nan = self.nan or bool(pc.any(pc.is_nan(arr)).as_py())
            low, high = (None if v is None or math.isnan(v) else v for v in (low, high))
        if low is not None and (self.low is None or low < self.low):
            self.low = low
        if high is not None and (self.high is None or high > self.high):
            self.high = high


def _leaf_bounds(arr: pa.Array) -> tuple[Any, Any]:
    """Min and max of non-null values as comparable Python values.

    Dates are days since the epoch; timestamps are ``(floor_ms, ceil_ms)`` of
    their true min/max so the written millisecond bounds stay true.
    """
    t = arr.type
    if pa.types.is_dictionary(t):
        return _leaf_bounds(arr.cast(t.value_type))
    if _is_string_view(t):
        return _leaf_bounds(arr.cast(pa.string()))
    if pa.types.is_timestamp(t):
        bounds = pc.min_max(arr.cast(pa.int64()))
        per_ms = _UNIT_PER_SECOND[t.unit] // 1000 if t.unit != "s" else 0
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if per_ms == 0:
            return low * 1000, high * 1000
        return low // per_ms, -((-high) // per_ms)
    if pa.types.is_date(t):
        bounds = pc.min_max(arr.cast(pa.date32()).cast(pa.int32()))
        return bounds["min"].as_py(), bounds["max"].as_py()
    bounds = pc.min_max(arr)
    return bounds["min"].as_py(), bounds["max"].as_py()


class StatsCollector:
    """Delta statistics of one data file, fed its Arrow batches one at a time.

    >>> c = StatsCollector(pa.schema([("a", pa.int64()), ("s", pa.string())]))
    >>> c.add(pa.record_batch({"a": [3, None, 1], "s": ["x", "y", None]}))
    >>> c.result()
    {'numRecords': 3, 'minValues': {'a': 1, 's': 'x'}, 'maxValues': {'a': 3, 's': 'y'}, 'nullCount': {'a': 1, 's': 1}}
    """

    def __init__(
        self, schema: pa.Schema, *, string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH
    ) -> None:
        _check_prefix_length(string_prefix_length)
        self.schema = schema
        self.string_prefix_length = string_prefix_length
        self.num_records = 0
        self._leaves = {name: _Leaf(name, dtype) for name, dtype in leaf_fields(schema)}
        self._whole_counts = {f.name: 0 for f in schema}

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Fold one batch of the file into the running statistics."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for one in batches:
            self._add_batch(one)

    def _add_batch(self, batch: pa.RecordBatch) -> None:
        missing = [f.name for f in self.schema if f.name not in batch.schema.names]
        if missing:
            raise SchemaMismatch(
                f"batch lacks column(s) {missing} of the file schema; it has {batch.schema.names}"
            )
        self.num_records += batch.num_rows
        for f in self.schema:
            column = batch.column(f.name)
            self._whole_counts[f.name] += column.null_count
            for name, values in _flatten_struct(f.name, column):
                self._leaves[name].add(values)

    def result(self) -> dict[str, Any]:
        """The Delta ``stats`` object: ready for :func:`json.dumps` (or :func:`stats_json`)."""
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for name, leaf in self._leaves.items():
            path = name.split(".")
            _put(nulls, path, leaf.nulls)
            low, high = self._json_bounds(leaf)
            if low is not None:
                _put(mins, path, low)
            if high is not None:
                _put(maxs, path, high)
        return {
            "numRecords": self.num_records,
            "minValues": mins,
            "maxValues": maxs,
            "nullCount": nulls,
        }

    def _json_bounds(self, leaf: _Leaf) -> tuple[Any, Any]:
        """JSON min and max of one leaf; ``None`` for a bound that must be omitted."""
        if leaf.low is None and leaf.high is None:
            return None, None
        t = stats_type(leaf.dtype)
        low, high = leaf.low, leaf.high
        if pa.types.is_floating(t):
            return _float_json(low), None if leaf.nan else _float_json(high)
        if pa.types.is_decimal(t):
            return _decimal_json(low), _decimal_json(high)
        if pa.types.is_string(t):
            n = self.string_prefix_length
            return string_lower_bound(low, n), string_upper_bound(high, n)
        if pa.types.is_date(t):
            return _date_json(low), _date_json(high)
        if pa.types.is_timestamp(t):
            utc = t.tz is not None
            return _timestamp_json(low, utc), _timestamp_json(high, utc)
        return low, high


def _put(target: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def stats_json(stats: Mapping[str, Any]) -> str:
    """Serialize a stats object for an ``AddAction``: UTF-8 as is, no NaN/Infinity.

    ``ensure_ascii=False`` sidesteps delta-rs reading escaped surrogate pairs
    of U+10FFFF wrongly; :class:`StatsCollector` output is safe either way.
    """
    return json.dumps(stats, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# ---------------------------------------------------------------- FileStats


@dataclass(frozen=True)
class ColumnStats:
    """Bounds of one column over all files: ``min[i] <= every value of file i <= max[i]``.

    A null ``min``/``max`` entry is an unknown bound; ``null_count`` is -1 when unknown.
    """

    min: pa.Array
    max: pa.Array
    null_count: np.ndarray

    def take(self, indices: pa.Array) -> ColumnStats:
        return ColumnStats(
            self.min.take(indices),
            self.max.take(indices),
            self.null_count[indices.to_numpy(zero_copy_only=False)],
        )


@dataclass(frozen=True)
class FileStats:
    """A snapshot's per-file metadata as columns, for vectorized pruning.

    ``num_records`` is -1 where unknown; ``columns`` maps each statistics leaf
    (top-level column name, or dotted path inside a struct) to its bounds.
    """

    paths: np.ndarray
    sizes: np.ndarray
    num_records: np.ndarray
    modification_times: np.ndarray
    columns: Mapping[str, ColumnStats]
    schema: pa.Schema = field(default_factory=lambda: pa.schema([]))

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def total_rows(self) -> int:
        """Rows over files whose count is known."""
        known = self.num_records[self.num_records >= 0]
        return int(known.sum())

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    def column(self, name: str) -> ColumnStats | None:
        """Bounds of a column, or ``None`` when the snapshot keeps none for it."""
        return self.columns.get(name)

    def take(self, mask_or_indices: np.ndarray | Sequence[int]) -> FileStats:
        """The files selected by a boolean mask or by integer positions, in that order."""
        selector = np.asarray(mask_or_indices)
        if selector.dtype == bool:
            if len(selector) != len(self):
                raise InvalidOption(f"mask has {len(selector)} entries for {len(self)} files")
            selector = np.flatnonzero(selector)
        indices = selector.astype(np.int64, copy=False)
        arrow_indices = pa.array(indices, type=pa.int64())
        return FileStats(
            paths=self.paths[indices],
            sizes=self.sizes[indices],
            num_records=self.num_records[indices],
            modification_times=self.modification_times[indices],
            columns={k: c.take(arrow_indices) for k, c in self.columns.items()},
            schema=self.schema,
        )

    # ------------------------------------------------------------ constructors

    @classmethod
    def empty(cls, schema: pa.Schema) -> FileStats:
        """No files at all."""
        return cls.from_add_actions(pa.table({"path": pa.array([], pa.string())}), schema)

    @classmethod
    def from_add_actions(
        cls,
        actions: Any,
        schema: Any,
        *,
        string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
        nan_safe: bool | None = None,
    ) -> FileStats:
        """From ``DeltaTable.get_add_actions(flatten=True)`` (arro3 or pyarrow).

        Expected columns: ``path``, ``size_bytes``, ``modification_time``,
        ``num_records``, ``null_count.<c>``, ``min.<c>``, ``max.<c>`` (any of the
        per-column ones may be missing: that bound is unknown). Bounds are made
        true again as described in the module docstring. ``nan_safe`` says
        whether float maxima respect NaN; by default only files named with
        :data:`LAKELAYOUT_FILE_PREFIX` are trusted.
        """
        _check_prefix_length(string_prefix_length)
        table = _as_table(actions)
        arrow_schema = pa.schema(schema)
        n = table.num_rows
        paths = _object_column(table, "path", n)
        columns = {
            name: _column_from_actions(table, name, dtype, string_prefix_length)
            for name, dtype in leaf_fields(arrow_schema)
        }
        _drop_unsafe_float_max(columns, paths, nan_safe)
        return cls(
            paths=paths,
            sizes=_int_column(table, "size_bytes", n, unknown=0),
            num_records=_int_column(table, "num_records", n, unknown=-1),
            modification_times=_int_column(table, "modification_time", n, unknown=0),
            columns=columns,
            schema=arrow_schema,
        )

    @classmethod
    def from_delta_stats(
        cls,
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
        ``"NaN"`` strings, decimals as numbers or text); a value that does not
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
        for name, dtype in leaf_fields(schema):
            path = name.split(".")
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
        return cls.from_add_actions(
            pa.table(data), schema, string_prefix_length=string_prefix_length, nan_safe=True
        )

    @classmethod
    def from_blocks(cls, data: pa.Table, block_ids: np.ndarray) -> FileStats:
        """One "virtual file" per distinct block id, with exact bounds of its rows.

        Used by layouts to estimate skipping before any file is written. Files
        come in ascending block id order, named ``block-<id>``; sizes are row
        count times the sample's average row size.
        """
        ids = np.asarray(block_ids)
        if len(ids) != data.num_rows:
            raise InvalidOption(
                f"block_ids has {len(ids)} entries for a table of {data.num_rows} rows"
            )
        leaves = [
            (name, _normalize_array(arr))
            for f in data.schema
            for name, arr in _flatten_struct(f.name, data.column(f.name))
        ]
        grouped = _group_bounds(ids, leaves)
        keys = grouped.column("__block").to_numpy(zero_copy_only=False)
        counts = grouped.column("__block_count").to_numpy(zero_copy_only=False).astype(np.int64)
        row_bytes = data.nbytes / data.num_rows if data.num_rows else 0.0
        columns = {name: _column_from_groups(grouped, name, arr.type) for name, arr in leaves}
        return cls(
            paths=np.array([f"block-{k}" for k in keys], dtype=object),
            sizes=np.round(counts * row_bytes).astype(np.int64),
            num_records=counts,
            modification_times=np.zeros(len(keys), dtype=np.int64),
            columns=columns,
            schema=data.schema,
        )


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


def _drop_unsafe_float_max(
    columns: dict[str, ColumnStats], paths: np.ndarray, nan_safe: bool | None
) -> None:
    """Null the float max of files whose writer may have ignored NaN (see LAKELAYOUT_FILE_PREFIX)."""
    if nan_safe is True or not len(paths):
        return
    if nan_safe is False:
        unsafe = np.ones(len(paths), dtype=bool)
    else:
        names = pa.array([str(p).rsplit("/", 1)[-1] for p in paths], pa.string())
        unsafe = ~np.asarray(pc.starts_with(names, LAKELAYOUT_FILE_PREFIX), dtype=bool)
    if not unsafe.any():
        return
    for name, stats in columns.items():
        if pa.types.is_floating(stats.max.type):
            nulls = pa.nulls(len(paths), stats.max.type)
            columns[name] = replace(stats, max=pc.if_else(pa.array(unsafe), nulls, stats.max))


def _column_from_actions(
    table: pa.Table, name: str, dtype: pa.DataType, prefix_length: int
) -> ColumnStats:
    n = table.num_rows
    target = stats_type(dtype)
    null_count = _int_column(table, f"null_count.{name}", n, unknown=-1)
    if not has_bounds(dtype):
        return ColumnStats(pa.nulls(n, target), pa.nulls(n, target), null_count)
    low = _bound_column(table, f"min.{name}", target)
    high = _bound_column(table, f"max.{name}", target)
    return ColumnStats(_true_min(low), _true_max(high, prefix_length), null_count)


def _bound_column(table: pa.Table, column: str, target: pa.DataType) -> pa.Array:
    if column not in table.column_names:
        return pa.nulls(table.num_rows, target)
    values = table.column(column).combine_chunks()
    if values.type == target:
        return values
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(table.num_rows, target)


def _true_min(low: pa.Array) -> pa.Array:
    """A stored min is a true lower bound as is (truncated strings are prefixes); NaN is not."""
    return _nan_to_null(low)


def _true_max(high: pa.Array, prefix_length: int) -> pa.Array:
    """Widen a stored max into a true upper bound (see the module docstring)."""
    high = _nan_to_null(high)
    if pa.types.is_string(high.type):
        return _widen_strings(high, prefix_length)
    if pa.types.is_timestamp(high.type):
        return _widen_millis(high)
    return high


def _nan_to_null(arr: pa.Array) -> pa.Array:
    if not pa.types.is_floating(arr.type) or len(arr) == 0:
        return arr
    return pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)


def _widen_strings(high: pa.Array, prefix_length: int) -> pa.Array:
    """Only values that may be truncated go through Python; the rest stay columnar."""
    if len(high) == 0:
        return high
    suspect = pc.or_(
        pc.greater_equal(pc.utf8_length(high), prefix_length),
        pc.or_(
            pc.match_substring(high, _DELTA_RS_TOP_CHAR),
            pc.match_substring(high, _TOP_CHAR),
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
            loaded = json.loads(stats)
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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    number = int(value)
    pa.scalar(number, t)  # range check
    return number


def _parse_float(value: Any, _t: pa.DataType) -> float:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    return float(value)


def _parse_decimal(value: Any, t: pa.DataType) -> _decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    number = _decimal.Decimal(str(value))
    if not number.is_finite():
        raise ValueError(value)
    quantum = _decimal.Decimal(1).scaleb(-t.scale)
    if number.quantize(quantum) != number:
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


# ---------------------------------------------------------------- from_blocks helpers


def _group_bounds(ids: np.ndarray, leaves: Iterable[tuple[str, pa.Array]]) -> pa.Table:
    """Per block: row count, and per leaf min/max/null count/NaN presence."""
    data: dict[str, pa.Array] = {"__block": pa.array(ids)}
    aggregations: list[tuple[Any, ...]] = [("__block", "count", pc.CountOptions("all"))]
    for name, arr in leaves:
        data[f"{name}\x00v"] = arr
        aggregations.append((f"{name}\x00v", "count", pc.CountOptions("only_null")))
        if has_bounds(arr.type):
            aggregations.append((f"{name}\x00v", "min_max"))
        if pa.types.is_floating(arr.type):
            data[f"{name}\x00nan"] = pc.fill_null(pc.is_nan(arr), False)
            aggregations.append((f"{name}\x00nan", "any"))
    table = pa.table(data)
    grouped = table.group_by("__block", use_threads=False).aggregate(aggregations)
    return grouped.sort_by("__block")


def _column_from_groups(grouped: pa.Table, name: str, dtype: pa.DataType) -> ColumnStats:
    n = grouped.num_rows
    null_count = np.asarray(
        grouped.column(f"{name}\x00v_count").to_numpy(zero_copy_only=False), dtype=np.int64
    )
    if not has_bounds(dtype):
        target = stats_type(dtype)
        return ColumnStats(pa.nulls(n, target), pa.nulls(n, target), null_count)
    bounds = grouped.column(f"{name}\x00v_min_max").combine_chunks()
    low, high = bounds.field("min"), bounds.field("max")
    if pa.types.is_timestamp(dtype):
        low = _timestamps_to_us(low, round_up=False)
        high = _timestamps_to_us(high, round_up=True)
    if pa.types.is_floating(dtype):
        nan = grouped.column(f"{name}\x00nan_any").combine_chunks()
        high = pc.if_else(nan, pa.scalar(None, dtype), high)
    return ColumnStats(_nan_to_null(low), _nan_to_null(high), null_count)
