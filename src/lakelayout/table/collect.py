"""Collecting Delta statistics while a data file's batches are in memory.

:class:`StatsCollector` computes the Delta ``stats`` JSON of one data file
(``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) from the Arrow
batches the writer (:mod:`lakelayout.table.writer`) is writing. A value that
cannot be written as a true bound is omitted, never approximated inward: NaN
makes a float's max unknown (Spark orders NaN above every number), long strings
keep a prefix as min and an *incremented* prefix as max, timestamps are rounded
outward to the millisecond Delta stores.

Two delta-rs 1.6 behaviours shape the JSON written here (checked on this machine):

* U+10FFFF written as the escaped surrogate pair ``\\udbff\\udfff`` (what
  :func:`json.dumps` emits by default) is read back as U+FFFFF, a *smaller*
  code point; :func:`stats_json` writes UTF-8 as is.
* A decimal written as number text with an exponent (``1e3``) is read back as
  null, and more fraction digits than the scale are rounded. Decimals are
  written as plain number text when a float round-trips it exactly, else as a
  JSON string (``"12345678901234567890.12"``), which delta-rs and Spark both
  parse exactly.
* One bare ``NaN`` token makes delta-rs drop the statistics of a whole log
  batch, so non-finite float bounds are omitted.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import SchemaMismatch
from lakelayout.stats.bounds import (
    DEFAULT_STRING_PREFIX_LENGTH,
    check_prefix_length,
    flatten_paths,
    has_bounds,
    is_string_view,
    leaf_paths,
    stats_type,
    string_lower_bound,
    string_upper_bound,
)

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


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
    """Running statistics of one leaf column of one file (``path``: how the JSON nests it)."""

    path: tuple[str, ...]
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
    if is_string_view(t):
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
        check_prefix_length(string_prefix_length)
        self.schema = schema
        self.string_prefix_length = string_prefix_length
        self.num_records = 0
        self._leaves = {path: _Leaf(path, dtype) for path, dtype in leaf_paths(schema)}
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
            for path, values in flatten_paths((f.name,), column):
                self._leaves[path].add(values)

    def result(self) -> dict[str, Any]:
        """The Delta ``stats`` object: ready for :func:`json.dumps` (or :func:`stats_json`)."""
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for path, leaf in self._leaves.items():
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
