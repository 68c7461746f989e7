"""Typed values to integer ranks: the range partitioning under every curve layout.

A *dimension* is a column name or a deterministic SQL expression over the
columns (``month(ts)``). :class:`RangeRanks` is fitted on a sample of one
dimension the way Delta's ``range_partition_id`` is: the sorted sample is cut
at equal-count quantiles, the cut values become *boundaries*, and a value's
rank is the number of boundaries strictly below it (Spark's range
partitioner puts a value equal to a boundary in the lower range). Ranks keep
Spark's sort order everywhere:

* numbers < NaN < NULL (NaN is greater than every number, +inf included);
* NULL gets a rank of its own at the very end, ``2**bits - 1``, so rows with
  a null never share a rank with the smallest values;
* duplicate cut values collapse (``np.unique``), so a value that fills half
  the sample owns one rank instead of splitting across many.

The raw ranks ``0 .. m`` are spread evenly over ``0 .. 2**bits - 2``, so a
dimension with few distinct values still drives the high bits of a curve key.

Values are compared in a small set of *domains* (int64, float64, date32,
timestamp, decimal, large_string, large_binary): numeric and temporal domains
rank with ``np.searchsorted``; decimals, strings and binaries rank through
:func:`count_preceding`, a merge of boundaries and values done by Arrow's sort
kernel. Both are vectorized; nothing loops over rows in Python.
"""

from __future__ import annotations

import base64
import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import LakelayoutError, LayoutError, PredicateError, closest

MAX_RANK_BITS = 31
"""Largest ``bits`` a :class:`RangeRanks` accepts (ranks stay exact in uint64 arithmetic)."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---------------------------------------------------------------- domains


def domain_type(dtype: pa.DataType) -> pa.DataType:
    """The comparison domain of an Arrow type (what its values are ranked as).

    >>> domain_type(pa.int32()), domain_type(pa.string()), domain_type(pa.bool_())
    (DataType(int64), DataType(large_string), DataType(int64))
    """
    t = pa.types
    if t.is_boolean(dtype) or t.is_integer(dtype) or t.is_time(dtype) or t.is_duration(dtype):
        return pa.int64()
    if t.is_floating(dtype):
        return pa.float64()
    if t.is_date(dtype):
        return pa.date32()
    if t.is_timestamp(dtype):
        return dtype
    if t.is_decimal(dtype):
        return dtype
    if t.is_string(dtype) or t.is_large_string(dtype) or t.is_string_view(dtype):
        return pa.large_string()
    if t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_fixed_size_binary(dtype):
        return pa.large_binary()
    if t.is_binary_view(dtype):
        return pa.large_binary()
    if t.is_dictionary(dtype):
        return domain_type(dtype.value_type)
    raise LayoutError(
        f"cannot rank values of type {dtype}; supported: numbers, booleans, "
        "dates, timestamps, times, decimals, strings, binaries"
    )


def to_domain(values: pa.Array | pa.ChunkedArray, domain: pa.DataType) -> pa.Array:
    """``values`` cast to ``domain`` as one contiguous array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if values.type == domain:
        return values
    source = values.type
    try:
        if pa.types.is_time(source) or pa.types.is_duration(source):
            width = pa.int32() if source.bit_width == 32 else pa.int64()
            values = values.view(width)
        elif pa.types.is_binary_view(source):
            values = values.cast(pa.binary())
        elif pa.types.is_string_view(source):
            values = values.cast(pa.string())
        return values.cast(domain)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise LayoutError(f"cannot compare values of type {source} as {domain}: {exc}") from exc


def _is_numpy_domain(domain: pa.DataType) -> bool:
    t = pa.types
    return bool(
        t.is_int64(domain) or t.is_float64(domain) or t.is_date32(domain) or t.is_timestamp(domain)
    )


def numpy_values(values: pa.Array) -> np.ndarray:
    """Non-null numeric-domain values as int64 / float64 numpy (nulls filled, mask them)."""
    if pa.types.is_float64(values.type):
        return np.asarray(values.fill_null(np.nan).to_numpy(zero_copy_only=False), np.float64)
    width = pa.int32() if pa.types.is_date32(values.type) else pa.int64()
    ints = values.view(width).fill_null(0)
    return np.asarray(ints.to_numpy(zero_copy_only=False), dtype=np.int64)


def null_mask(values: pa.Array) -> np.ndarray:
    """True where ``values`` is NULL (NaN is a value, not a null)."""
    if values.null_count == 0:
        return np.zeros(len(values), dtype=bool)
    return np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def type_to_json(domain: pa.DataType) -> dict[str, Any]:
    """JSON description of a domain type (inverse: :func:`type_from_json`)."""
    if pa.types.is_timestamp(domain):
        return {"kind": "timestamp", "unit": domain.unit, "tz": domain.tz}
    if pa.types.is_decimal(domain):
        return {
            "kind": "decimal",
            "precision": domain.precision,
            "scale": domain.scale,
            "width": domain.bit_width,
        }
    simple = {
        pa.int64(): "int64",
        pa.float64(): "float64",
        pa.date32(): "date32",
        pa.large_string(): "string",
        pa.large_binary(): "binary",
    }
    return {"kind": simple[domain]}


def type_from_json(state: dict[str, Any]) -> pa.DataType:
    """Inverse of :func:`type_to_json`."""
    kind = state.get("kind")
    if kind == "timestamp":
        return pa.timestamp(state["unit"], tz=state.get("tz"))
    if kind == "decimal":
        make = pa.decimal256 if state.get("width") == 256 else pa.decimal128
        return make(int(state["precision"]), int(state["scale"]))
    simple = {
        "int64": pa.int64(),
        "float64": pa.float64(),
        "date32": pa.date32(),
        "string": pa.large_string(),
        "binary": pa.large_binary(),
    }
    if kind not in simple:
        raise LayoutError(f"unknown value type {state!r} in layout JSON")
    return simple[kind]


def _float_to_json(x: float) -> float | str:
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def values_to_json(values: pa.Array) -> list[Any]:
    """Domain values as JSON scalars: dates/timestamps as ISO text, decimals as text.

    >>> values_to_json(pa.array([_dt.date(2020, 1, 2), None]))
    ['2020-01-02', None]
    """
    domain = values.type
    mask = null_mask(values)
    out: list[Any]
    if pa.types.is_timestamp(domain):
        raw = numpy_values(values).astype(f"datetime64[{domain.unit}]")
        out = list(np.datetime_as_string(raw))
    elif pa.types.is_float64(domain):
        out = [_float_to_json(float(x)) for x in numpy_values(values)]
    elif pa.types.is_date32(domain):
        out = [d.isoformat() if d is not None else None for d in values.to_pylist()]
    elif pa.types.is_decimal(domain):
        out = [str(d) if d is not None else None for d in values.to_pylist()]
    elif pa.types.is_large_binary(domain):
        out = [base64.b64encode(b).decode() if b is not None else None for b in values.to_pylist()]
    else:
        out = values.to_pylist()
    return [None if m else v for v, m in zip(out, mask, strict=True)]


def values_from_json(items: Sequence[Any], domain: pa.DataType) -> pa.Array:
    """Inverse of :func:`values_to_json`."""
    if pa.types.is_timestamp(domain):
        present = [x if x is not None else "NaT" for x in items]
        raw = np.array(present, dtype=f"datetime64[{domain.unit}]").astype(np.int64)
        mask = np.array([x is None for x in items], dtype=bool)
        return pa.array(raw, type=pa.int64(), mask=mask).cast(domain)
    if pa.types.is_float64(domain):
        return pa.array([float(x) if x is not None else None for x in items], type=domain)
    if pa.types.is_date32(domain):
        parsed = [_dt.date.fromisoformat(x) if x is not None else None for x in items]
        return pa.array(parsed, type=domain)
    if pa.types.is_decimal(domain):
        return pa.array(items, type=pa.string()).cast(domain)
    if pa.types.is_large_binary(domain):
        return pa.array([base64.b64decode(x) if x is not None else None for x in items], domain)
    return pa.array(list(items), type=domain)


# ---------------------------------------------------------------- merge counting


def count_preceding(
    bounds: Sequence[pa.Array], values: Sequence[pa.Array], *, inclusive: bool
) -> np.ndarray:
    """For every row of ``values``, how many rows of ``bounds`` sort before it.

    Rows are tuples compared lexicographically in Spark's ascending order
    (numbers < NaN < NULL); ``bounds`` must be sorted that way. With
    ``inclusive`` a bound equal to the row counts (``<=``), else only strictly
    smaller bounds count (``<``). The two sides are concatenated, sorted once
    by Arrow with a side flag as the last key, and the running count of bounds
    read off at every value's position: O((n + m) log(n + m)), no Python loop.
    """
    n_values = len(values[0]) if values else 0
    n_bounds = len(bounds[0]) if bounds else 0
    if n_values == 0:
        return np.zeros(0, dtype=np.int64)
    if n_bounds == 0:
        return np.zeros(n_values, dtype=np.int64)
    # flag decides ties: the side with the smaller flag sorts first
    bound_flag, value_flag = (0, 1) if inclusive else (1, 0)
    columns: dict[str, pa.Array] = {}
    for i, (b, v) in enumerate(zip(bounds, values, strict=True)):
        columns[f"k{i}"] = pa.concat_arrays([b, v.cast(b.type)])
    flags = np.concatenate(
        [np.full(n_bounds, bound_flag, np.int8), np.full(n_values, value_flag, np.int8)]
    )
    columns["flag"] = pa.array(flags)
    merged = pa.table(columns)
    keys = [(name, "ascending") for name in merged.column_names]
    order = pc.sort_indices(merged, sort_keys=keys).to_numpy()
    is_bound = order < n_bounds
    preceding = np.cumsum(is_bound) - is_bound
    out = np.empty(n_values, dtype=np.int64)
    out[order[~is_bound] - n_bounds] = preceding[~is_bound]
    return out


def sorted_domain(values: pa.Array) -> pa.Array:
    """Non-null values sorted in Spark order (numbers, then NaN)."""
    present = values.drop_null() if values.null_count else values
    if _is_numpy_domain(present.type):
        return _from_numpy(np.sort(numpy_values(present)), present.type)
    return present.take(pc.sort_indices(present))


def _from_numpy(raw: np.ndarray, domain: pa.DataType) -> pa.Array:
    if pa.types.is_float64(domain):
        return pa.array(raw, type=pa.float64())
    if pa.types.is_date32(domain):
        return pa.array(raw.astype(np.int32), type=pa.int32()).cast(domain)
    return pa.array(raw.astype(np.int64), type=pa.int64()).cast(domain)


def unique_sorted(values: pa.Array) -> pa.Array:
    """Distinct values of an already sorted, null-free domain array (order kept)."""
    if _is_numpy_domain(values.type):
        raw = numpy_values(values)
        return _from_numpy(np.unique(raw), values.type)
    return pc.unique(values)


def _same_value(values: pa.Array, index: int, other: pa.Scalar) -> bool:
    """Whether ``values[index]`` equals ``other`` (NaN equals NaN)."""
    a, b = values[index].as_py(), other.as_py()
    return bool(a == b or (a != a and b != b))


def cut_positions(n: int, parts: int) -> np.ndarray:
    """Start positions of parts ``1 .. parts-1`` when ``n`` sorted rows are cut evenly.

    >>> cut_positions(10, 4).tolist()
    [2, 5, 7]
    """
    if parts <= 1 or n == 0:
        return np.zeros(0, dtype=np.int64)
    i = np.arange(1, parts, dtype=np.int64)
    return (i * n) // parts


# ---------------------------------------------------------------- dimensions


@dataclass
class Dimension:
    """One clustering dimension: a column name or a deterministic SQL expression.

    Plain names are resolved against the schema (case-insensitively, as Spark
    does); anything else is parsed with :func:`lakelayout.expr.parse.parse_term`
    the first time a batch is seen and evaluated with ``evaluate_term``.
    """

    sql: str
    _term: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"sql": self.sql, "_term": None}

    def column_name(self, schema: pa.Schema) -> str | None:
        """The schema's spelling of the column this dimension names, or None.

        ``a.b`` is the field ``b`` of a struct column ``a`` when the schema has one, as in
        Spark SQL, even beside a top-level column named ``a.b`` (write `` `a.b` `` for that).
        """
        if "." in self.sql and not self.sql.startswith("`"):
            head = self.sql.split(".", 1)[0].lower()
            if any(f.name.lower() == head and pa.types.is_struct(f.type) for f in schema):
                return None
        if self.sql in schema.names:
            return self.sql
        unquoted = self.sql[1:-1].replace("``", "`") if self.sql.startswith("`") else None
        if unquoted is not None and unquoted in schema.names:
            return unquoted
        lowered = {n.lower(): n for n in schema.names}
        return lowered.get((unquoted or self.sql).lower())

    def check(self, schema: pa.Schema) -> None:
        """Raise :class:`LayoutError` if this dimension cannot be computed on ``schema``."""
        if self.column_name(schema) is not None:
            return
        if _IDENTIFIER.match(self.sql):
            raise LayoutError(
                f"unknown column {self.sql!r}; columns are {', '.join(schema.names)}."
                + closest(self.sql, schema.names)
            )
        self._parsed(schema)

    def _parsed(self, schema: pa.Schema) -> Any:
        if self._term is None:
            from lakelayout.expr.parse import parse_term

            try:
                self._term = parse_term(self.sql, schema)
            except LakelayoutError as exc:
                raise LayoutError(f"cannot use {self.sql!r} as a dimension: {exc}") from exc
        return self._term

    def values(self, batch: pa.Table | pa.RecordBatch) -> pa.Array:
        """This dimension's value for every row of ``batch``."""
        name = self.column_name(batch.schema)
        if name is not None:
            column = batch.column(name)
            return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        self.check(batch.schema)
        from lakelayout.expr.evaluate import evaluate_term

        try:
            result = evaluate_term(self._parsed(batch.schema), batch)
        except PredicateError as exc:  # (overflow, a bad cast: Spark's error on that row)
            # it named neither the layout nor a way out (an audit)
            raise LayoutError(
                f"the layout dimension {self.sql!r} cannot be computed on a row of the table "
                f"({exc}); lay the table out by other columns or expressions (for a "
                "clustered table: Table.cluster_by([...]))"
            ) from exc
        return result.combine_chunks() if isinstance(result, pa.ChunkedArray) else result


def resolve_dimensions(
    columns: Sequence[str] | str | None, schema: pa.Schema, *, max_dims: int
) -> list[Dimension]:
    """Validated dimensions for ``columns`` (names or SQL expressions)."""
    if isinstance(columns, str):
        columns = [columns]
    if not columns:
        raise LayoutError("a layout needs at least one column or expression in columns=[...]")
    if len(columns) > max_dims:
        raise LayoutError(
            f"too many dimensions: {len(columns)} given ({', '.join(columns)}), at most {max_dims}"
        )
    dims = [Dimension(str(c)) for c in columns]
    seen: set[tuple[str, str]] = set()
    for dim in dims:
        dim.check(schema)
        name = dim.column_name(schema)
        key = ("column", name) if name is not None else ("expression", dim.sql)
        if key in seen:
            raise LayoutError(f"dimension {dim.sql!r} is given twice")
        seen.add(key)
    return dims


def target_block_count(n_rows: int, target_blocks: int | None, rows_per_block: int | None) -> int:
    """Number of blocks asked for, from exactly one of the two targets.

    >>> target_block_count(1000, None, 300)
    4
    """
    if (target_blocks is None) == (rows_per_block is None):
        raise LayoutError(
            "give exactly one of target_blocks=... or rows_per_block=... "
            f"(got target_blocks={target_blocks}, rows_per_block={rows_per_block})"
        )
    if target_blocks is not None:
        if int(target_blocks) < 1:
            raise LayoutError(f"target_blocks must be >= 1, got {target_blocks}")
        return int(target_blocks)
    assert rows_per_block is not None
    if int(rows_per_block) < 1:
        raise LayoutError(f"rows_per_block must be >= 1, got {rows_per_block}")
    return max(1, -(-n_rows // int(rows_per_block)))


# ---------------------------------------------------------------- ranks


@dataclass
class RangeRanks:
    """Quantile boundaries of one dimension; values map to ranks in ``0 .. 2**bits - 1``.

    ``boundaries`` are sorted, distinct, non-null domain values. Raw rank
    ``r`` = number of boundaries strictly below the value (``0 .. m``,
    ``m = len(boundaries)``), spread to ``r * (2**bits - 1) // (m + 1)``;
    NULL maps to ``2**bits - 1``.

    >>> ranks = RangeRanks.fit(pa.array([5, 1, 3, None, 9]), bits=2)
    >>> ranks.transform(pa.array([0, 1, 2, 4, 100, None])).tolist()
    [0, 0, 1, 2, 2, 3]
    """

    boundaries: pa.Array
    bits: int

    @property
    def domain(self) -> pa.DataType:
        return self.boundaries.type

    @property
    def null_rank(self) -> int:
        return (1 << self.bits) - 1

    @property
    def n_ranks(self) -> int:
        """Number of distinct non-null ranks (``len(boundaries) + 1``)."""
        return len(self.boundaries) + 1

    @classmethod
    def fit(cls, values: pa.Array | pa.ChunkedArray, bits: int) -> RangeRanks:
        """Boundaries cutting the non-null sample into ``2**bits - 1`` equal-count ranks."""
        if not 1 <= bits <= MAX_RANK_BITS:
            raise LayoutError(f"bits must be in 1..{MAX_RANK_BITS}, got {bits}")
        domain = domain_type(values.type)
        ordered = sorted_domain(to_domain(values, domain))
        parts = (1 << bits) - 1
        # a boundary is the largest value of its rank (inclusive upper bound)
        if parts - 1 >= len(ordered):
            cuts = ordered  # room for every distinct value to get its own rank
        else:
            cuts = ordered.take(pa.array(cut_positions(len(ordered), parts) - 1))
        boundaries = unique_sorted(cuts)
        if len(boundaries) and _same_value(boundaries, len(boundaries) - 1, ordered[-1]):
            boundaries = boundaries.slice(0, len(boundaries) - 1)  # the top rank needs no bound
        return cls(boundaries=boundaries, bits=bits)

    def raw_ranks(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Number of boundaries strictly below each value (nulls: ``len(boundaries) + 1``)."""
        data = to_domain(values, self.domain)
        if _is_numpy_domain(self.domain):
            raw = np.searchsorted(numpy_values(self.boundaries), numpy_values(data), side="left")
            raw = raw.astype(np.int64)
        else:
            raw = count_preceding([self.boundaries], [data], inclusive=False)
        raw[null_mask(data)] = self.n_ranks
        return raw

    def transform(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Rank (uint64) of every value: monotone in Spark order, NULL last."""
        raw = self.raw_ranks(values).astype(np.uint64)
        top = np.uint64(self.null_rank)
        spread = (raw * top) // np.uint64(self.n_ranks)
        return np.where(raw == np.uint64(self.n_ranks), top, spread)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "type": type_to_json(self.domain),
            "boundaries": values_to_json(self.boundaries),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> RangeRanks:
        try:
            domain = type_from_json(state["type"])
            return cls(values_from_json(state["boundaries"], domain), int(state["bits"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"bad range ranks in layout JSON: {exc}") from exc
