"""True bounds: the rules every per-file statistic lakelayout keeps must obey.

The contract of the whole statistics model is that *every bound is a true
bound*: ``min <= v <= max`` for every non-null value ``v`` of the file. This
module holds the pieces that make a bound true, shared by the collector that
writes statistics (:mod:`lakelayout.table.collect`), the Delta-stats reader
(:mod:`lakelayout.stats.delta_stats`) and virtual files
(:mod:`lakelayout.stats.blocks`):

* strings: a prefix is a true lower bound; an upper bound of a long string is
  its prefix with the last code point incremented (:func:`next_string`);
* the Arrow type bounds are held in (:func:`stats_type`), which types have
  bounds at all (:func:`has_bounds`), and how statistics leaves are named
  (:func:`stats_key`: ``st.x`` for field ``x`` of struct ``st``, and
  ```st.x``` for a top-level column whose own name is ``st.x``);
* timestamps rounded outward to microseconds, NaN treated as unknown.

Pure: pyarrow and numpy only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption

#: Code points kept of a string bound (Delta Spark's ``dataSkippingStringPrefixLength``).
DEFAULT_STRING_PREFIX_LENGTH = 32

#: name prefix of every data file lakelayout's writer produces. Only for such
#: files is a float column's ``maxValues`` known to respect Spark's order
#: (NaN above everything: the writer omits the max of a column holding NaN).
#: Other writers (parquet-rs in delta-rs, for one) compute float max ignoring
#: NaN, so for their files the float max is dropped as unreliable.
LAKELAYOUT_FILE_PREFIX = "ll-"

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
TOP_CHAR = chr(MAX_CODE_POINT)
#: what delta-rs reads back for an escaped U+10FFFF
DELTA_RS_TOP_CHAR = chr(0xFFFFF)


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
    if len(value) <= prefix_length and TOP_CHAR not in value:
        return value
    cut = value[:prefix_length].split(TOP_CHAR, 1)[0]
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
    suspicious = DELTA_RS_TOP_CHAR in value or TOP_CHAR in value
    if len(value) < prefix_length and not suspicious:
        return value
    cut = value[:prefix_length]
    for mark in (DELTA_RS_TOP_CHAR, TOP_CHAR):
        cut = cut.split(mark, 1)[0]
    return next_string(cut)


# ---------------------------------------------------------------- types


def check_prefix_length(prefix_length: int) -> None:
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
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or is_string_view(dtype):
        return pa.string()
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or is_binary_view(dtype):
        return pa.binary()
    if pa.types.is_date(dtype):
        return pa.date32()
    if pa.types.is_timestamp(dtype):
        return pa.timestamp("us", tz=dtype.tz)
    return dtype


def is_string_view(dtype: pa.DataType) -> bool:
    return bool(getattr(pa.types, "is_string_view", lambda _t: False)(dtype))


def is_binary_view(dtype: pa.DataType) -> bool:
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


def stats_key(parts: Sequence[str]) -> str:
    """The name of a statistics leaf: its path from the top-level column, dot-joined.

    Delta keeps nested statistics as nested JSON objects, so a top-level column
    named ``b.c`` and field ``c`` of a struct ``b`` never collide there; the
    key keeps them apart the way Spark SQL spells them: a part holding a dot
    or a backtick is backtick-quoted.

    >>> stats_key(["b", "c"]), stats_key(["b.c"]), stats_key(["a"])
    ('b.c', '`b.c`', 'a')
    """
    return ".".join(_quote_part(part) for part in parts)


def _quote_part(part: str) -> str:
    if "." in part or "`" in part:
        return "`" + part.replace("`", "``") + "`"
    return part


def leaf_paths(schema: pa.Schema) -> list[tuple[tuple[str, ...], pa.DataType]]:
    """``(path, type)`` of every statistics leaf: struct fields are entered.

    ``("st", "x")`` for field ``x`` of struct column ``st``; the path is how
    Delta's stats JSON nests the leaf.
    """
    out: list[tuple[tuple[str, ...], pa.DataType]] = []
    stack: list[tuple[tuple[str, ...], pa.DataType]] = [((f.name,), f.type) for f in schema]
    stack.reverse()
    while stack:
        path, dtype = stack.pop()
        if pa.types.is_struct(dtype):
            children = [dtype.field(i) for i in range(dtype.num_fields)]
            stack.extend(((*path, c.name), c.type) for c in reversed(children))
        else:
            out.append((path, dtype))
    return out


def leaf_fields(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """``(stats key, type)`` of every statistics leaf (:func:`stats_key` of its path)."""
    return [(stats_key(path), dtype) for path, dtype in leaf_paths(schema)]


# ---------------------------------------------------------------- Arrow arrays


def normalize_array(arr: pa.Array) -> pa.Array:
    """Cast a data array so compute kernels accept it (see :func:`stats_type`).

    Timestamps keep their unit here: converting a max to microseconds must round
    up, which :func:`timestamps_to_us` does once the bounds are known.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type):
        return arr
    target = stats_type(arr.type)
    return arr if arr.type == target else arr.cast(target)


def timestamps_to_us(arr: pa.Array, *, round_up: bool) -> pa.Array:
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


def flatten_struct(name: str, arr: pa.Array) -> Iterator[tuple[str, pa.Array]]:
    """``(stats key, array)`` of every leaf of column ``name``; a null struct makes its fields null."""
    for path, values in flatten_paths((name,), arr):
        yield stats_key(path), values


def flatten_paths(
    path: tuple[str, ...], arr: pa.Array
) -> Iterator[tuple[tuple[str, ...], pa.Array]]:
    """``(path, array)`` of every leaf below ``path``; a null struct makes its fields null."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_struct(arr.type):
        for child, values in zip(arr.type, arr.flatten(), strict=True):
            yield from flatten_paths((*path, child.name), values)
    else:
        yield path, arr


def nan_to_null(arr: pa.Array) -> pa.Array:
    if not pa.types.is_floating(arr.type) or len(arr) == 0:
        return arr
    return pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)
