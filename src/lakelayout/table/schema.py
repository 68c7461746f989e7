"""Comparing Arrow schemas the way Delta stores them (what an append must match)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from lakelayout.errors import SchemaMismatch, UnsupportedTable, closest

#: table property: how many leading leaf columns Delta readers take statistics from
STATS_COLUMNS = "delta.dataSkippingNumIndexedCols"
#: its default (Delta's connector, delta-rs): statistics of later columns are ignored
DEFAULT_STATS_COLUMNS = 32


def leaf_columns(schema: pa.Schema) -> int:
    """Leaf columns as Delta counts them for statistics (struct fields one by one).

    >>> leaf_columns(pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int8()),
    ...     ("y", pa.string())])), ("m", pa.map_(pa.string(), pa.int64()))]))
    4
    """
    count = 0
    stack = list(schema)
    while stack:
        f = stack.pop()
        if pa.types.is_struct(f.type):
            stack.extend(f.type)
        else:
            count += 1
    return count


def stats_columns_property(schema: pa.Schema) -> dict[str, str]:
    """``{delta.dataSkippingNumIndexedCols: -1}`` for a table wider than Delta's default.

    lakelayout's writer collects statistics on every column, but Delta
    readers (delta-rs, so lakelayout's own snapshots, and Delta's Spark
    connector) read them for the first 32 leaf columns only unless the table
    says otherwise; declaring "all" makes them used. Other writers (Delta's
    OPTIMIZE, delta-rs) then collect them on every column too.
    """
    return {STATS_COLUMNS: "-1"} if leaf_columns(schema) > DEFAULT_STATS_COLUMNS else {}


def delta_type_name(data_type: pa.DataType) -> str:
    """The Delta type an Arrow type is stored as (how schemas are compared).

    Physical variants collapse (``large_string`` = ``string``), timestamps
    keep only whether they have a zone (``timestamp`` vs ``timestamp_ntz``),
    nested types compare element-wise, struct fields by name (exactly: the
    writer's cast matches them by name, and a field named ``A`` for ``a`` was
    written as NULL) and order; the names of list and map children are ignored.

    >>> delta_type_name(pa.large_string())
    'string'
    >>> delta_type_name(pa.timestamp("us", tz="Europe/Paris"))
    'timestamp'
    >>> delta_type_name(pa.list_(pa.int32()))
    'array<integer>'
    """
    t = data_type
    if pa.types.is_dictionary(t):
        return delta_type_name(t.value_type)
    simple = _SIMPLE_TYPES.get(str(t))
    if simple is not None:
        return simple
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_map(t):
        return f"map<{delta_type_name(t.key_type)},{delta_type_name(t.item_type)}>"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return f"array<{delta_type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        inner = ",".join(f"{f.name}:{delta_type_name(f.type)}" for f in t)
        return f"struct<{inner}>"
    return str(t)


_SIMPLE_TYPES = {
    "bool": "boolean",
    "int8": "byte",
    "int16": "short",
    "int32": "integer",
    "int64": "long",
    "float": "float",
    "double": "double",
}


def check_append_schema(table_schema: pa.Schema, df_schema: pa.Schema) -> None:
    """SchemaMismatch unless the data has exactly the table's columns and types.

    Names match case-insensitively and in any order. Types must be equal as
    Delta types (:func:`delta_type_name`); lakelayout never widens on append
    (an ``int`` column into a ``long`` table column is refused: cast it first),
    so a file never disagrees with the table schema. Nullability is not
    compared here: a null in a non-nullable column fails when written.
    """
    table_cols = {f.name.lower(): f for f in table_schema}
    data_cols = {f.name.lower(): f for f in df_schema}
    duplicates = duplicate_names(f.name for f in df_schema)
    problems: list[str] = []
    if duplicates:
        problems.append(f"duplicate columns (case-insensitive) {duplicates}")
    for key, field_ in data_cols.items():
        if key not in table_cols:
            hint = closest(field_.name, table_schema.names)
            problems.append(f"column '{field_.name}' is not in the table.{hint}")
    for key, field_ in table_cols.items():
        if key not in data_cols:
            problems.append(f"column '{field_.name}' of the table is missing from the data")
            continue
        want, got = delta_type_name(field_.type), delta_type_name(data_cols[key].type)
        if want != got:
            why = (
                "struct field names differ in case; rename them as the table names them"
                if want.lower() == got.lower()
                else "lakelayout does not widen or narrow types on append; cast the column"
            )
            problems.append(
                f"column '{field_.name}' is {want} in the table but {got} in the data ({why})"
            )
    if problems:
        raise SchemaMismatch("data does not fit the table schema: " + "; ".join(problems))


#: the prefix of the columns lakelayout adds to rows while it reads or rewrites them
#: (``__ll_file``, ``__ll_block``, ...): a table column so named would be overwritten
RESERVED_PREFIX = "__ll_"


def reserved_names(names: Iterable[str]) -> list[str]:
    """The names starting with :data:`RESERVED_PREFIX`, case-insensitively (as Spark
    resolves names)."""
    return [n for n in names if n.lower().startswith(RESERVED_PREFIX)]


def check_reserved(names: Iterable[str], action: str) -> None:
    """UnsupportedTable naming a column whose name starts with :data:`RESERVED_PREFIX`
    (case-insensitively, as Spark resolves names) before ``action`` reads any row.

    A user column ``__ll_file`` was dropped from ``scan(measure=True)``, decided
    DELETE's files instead of its own values, and had every row's value replaced
    by the data file's name in a rewrite (found by an audit).
    """
    found = reserved_names(names)
    if found:
        raise UnsupportedTable(
            f"column {found[0]!r} starts with {RESERVED_PREFIX!r}, the prefix of the columns "
            f"lakelayout adds to rows while it reads or rewrites them: {action} would "
            "overwrite it; rename the column"
        )


def duplicate_names(names: Iterable[str]) -> list[str]:
    """The names that repeat an earlier one, compared as Delta compares column names
    (case-insensitively)."""
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name.lower() in seen:
            dups.append(name)
        seen.add(name.lower())
    return dups
