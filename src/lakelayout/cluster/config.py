"""Clustering settings kept in the Delta table's configuration.

delta-rs cannot write Delta's ``clustering`` table feature (the
``delta.clustering`` domain metadata) nor ``tags`` on ``add`` actions, so
lakelayout keeps liquid clustering's state where any Delta writer preserves
it:

* ``lakelayout.clusteringColumns`` -- the clustering columns or deterministic
  SQL expressions, as a JSON list (``["l_shipdate", "month(ts)"]``). An empty
  value means "not clustered" (delta-rs has no way to unset a property).
* ``lakelayout.clusteringPhysicalNames`` -- under column mapping, the physical name
  of every column the clustering entries name, as they were when ``cluster_by`` set
  them (JSON ``{"columns": [...], "physical": {"name": "col-..."}}``): Delta's
  ``RENAME COLUMN`` keeps a column's physical name, so the entries follow a rename
  (:func:`table_clustering`) as Delta's own clustering columns do.
* ``lakelayout.minCubeSize`` / ``lakelayout.targetCubeSize`` -- ZCube sizes in
  bytes (see :func:`cube_sizes` for the defaults when unset).
* ``lakelayout.minFileSize`` -- compaction rewrites files smaller than this.
* ``lakelayout.smallRewriteSize`` -- rewrites of at most this many file bytes
  skip Spark's shuffle (see :mod:`lakelayout.cluster.rewrite`); default
  128 MiB.

Validation happens here, before anything is written: unknown columns,
too many dimensions, unsupported types and non-deterministic expressions are
refused with a message naming the offending entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from lakelayout.errors import InvalidOption, LakelayoutError, closest
from lakelayout.expr.nodes import quote_identifier
from lakelayout.layouts.ranks import Dimension, domain_type
from lakelayout.table.datafile import column_mapping_mode

if TYPE_CHECKING:
    from lakelayout.table.datafile import TableFormat

CLUSTERING_COLUMNS = "lakelayout.clusteringColumns"
CLUSTERING_PHYSICAL_NAMES = "lakelayout.clusteringPhysicalNames"
MIN_CUBE_SIZE = "lakelayout.minCubeSize"
TARGET_CUBE_SIZE = "lakelayout.targetCubeSize"
MIN_FILE_SIZE = "lakelayout.minFileSize"
TARGET_FILE_SIZE = "lakelayout.targetFileSize"
SMALL_REWRITE_SIZE = "lakelayout.smallRewriteSize"

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
#: inputs up to this many file bytes are rewritten without a shuffle: a task then
#: holds its blocks' rows in Arrow memory (about one default target file's worth)
DEFAULT_SMALL_REWRITE_SIZE = 128 * 1024 * 1024
#: at most this many clustering columns unless the caller raises the limit (as Delta)
DEFAULT_MAX_CLUSTERING_COLUMNS = 4
#: Delta's MIN_CUBE_SIZE default (100 GB): the cap of the table-relative default
MIN_CUBE_SIZE_CAP = 100 * 1024**3
#: default min cube size = table bytes / this (but never below 2 target files)
MIN_CUBE_TABLE_FRACTION = 8
#: default min cube size floor, in target files
MIN_CUBE_FLOOR_FILES = 2
#: TARGET_CUBE_SIZE / MIN_CUBE_SIZE when the target is not set (Delta: 150 / 100)
TARGET_CUBE_RATIO = 1.5
#: default compaction threshold as a fraction of the target file size
MIN_FILE_FRACTION = 0.75


@dataclass(frozen=True)
class CubeSizes:
    """The ZCube thresholds in force for one OPTIMIZE run, in bytes."""

    min_cube_size: int
    target_cube_size: int
    explicit: bool


def parse_clustering(config: Mapping[str, str]) -> list[str] | None:
    """The clustering columns stored in a table configuration, or None."""
    raw = config.get(CLUSTERING_COLUMNS, "")
    if not raw or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LakelayoutError(f"table property {CLUSTERING_COLUMNS} is not JSON: {raw!r}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LakelayoutError(f"table property {CLUSTERING_COLUMNS} must be a JSON list: {raw!r}")
    return list(value) or None


def clustering_property(columns: Sequence[str] | None) -> str:
    """The property value for ``columns`` ('' = CLUSTER BY NONE)."""
    return json.dumps(list(columns)) if columns else ""


def clustering_properties(
    columns: Sequence[str] | None, fmt: TableFormat, config: Mapping[str, str]
) -> dict[str, str]:
    """The table properties that set the (checked) clustering ``columns`` of a table of
    format ``fmt`` and configuration ``config``: the columns, and under column mapping
    the physical name of every column they name (so that a later ``RENAME COLUMN`` by
    any writer is followed)."""
    props = {CLUSTERING_COLUMNS: clustering_property(columns)}
    physical = {
        name.lower(): fmt.physical_name(name)
        for name in _named_columns(columns or ())
        if name in fmt.schema.names
    }
    if physical and column_mapping_mode(config) != "none":
        props[CLUSTERING_PHYSICAL_NAMES] = json.dumps(
            {"columns": list(columns or ()), "physical": physical}
        )
    elif config.get(CLUSTERING_PHYSICAL_NAMES):
        props[CLUSTERING_PHYSICAL_NAMES] = ""  # (delta-rs cannot unset a property)
    return props


def table_clustering(config: Mapping[str, str], fmt: TableFormat) -> list[str] | None:
    """The clustering entries of a table in its current column names, or None.

    Another writer may have renamed a column the entries name (Delta's ``RENAME
    COLUMN``, under column mapping). A column is followed by its physical name: the
    one recorded when the entries were set, or for entries set before column mapping
    was enabled, the entry's own name (Delta gives existing columns their names as
    physical names when it enables column mapping). An entry whose column is gone is
    left as it is (:func:`dropped_clustering_columns` names them).
    """
    return _resolved(config, fmt)[0]


def dropped_clustering_columns(config: Mapping[str, str], fmt: TableFormat) -> list[str]:
    """The columns the clustering entries name that another writer dropped (their
    recorded physical name is gone, even where a new column took the name)."""
    return _resolved(config, fmt)[1]


def _resolved(config: Mapping[str, str], fmt: TableFormat) -> tuple[list[str] | None, list[str]]:
    entries = parse_clustering(config)
    if entries is None or column_mapping_mode(config) == "none":
        return entries, []
    recorded = _recorded_physical(config, entries)
    logical_of = {str(p.name): str(f.name) for f, p in zip(fmt.schema, fmt.physical, strict=True)}
    current = {str(f.name).lower() for f in fmt.schema}
    renames: dict[str, str] = {}
    gone: list[str] = []
    for name in _named_columns(entries):
        key = name.lower()
        if key in recorded:
            now = logical_of.get(recorded[key])
        elif name in logical_of:  # set before column mapping: physical name = old name
            now = logical_of[name]
        else:
            now = name if key in current else None
        if now is None:
            gone.append(name)
        elif now.lower() != key:
            renames[key] = now
    return ([_renamed(entry, renames) for entry in entries] if renames else entries), gone


def _recorded_physical(config: Mapping[str, str], entries: list[str]) -> dict[str, str]:
    """The physical names recorded for ``entries``: none when the record is for other
    entries (the clustering columns were then set by a writer that did not record them)."""
    raw = config.get(CLUSTERING_PHYSICAL_NAMES, "")
    try:
        value = json.loads(raw) if raw.strip() else None
    except json.JSONDecodeError:
        return {}
    if not isinstance(value, dict) or value.get("columns") != entries:
        return {}
    physical = value.get("physical")
    if not isinstance(physical, dict):
        return {}
    return {str(k).lower(): str(v) for k, v in physical.items() if isinstance(v, str)}


def _named_columns(entries: Sequence[str]) -> list[str]:
    """The top-level columns ``entries`` (names or SQL expressions) name, as spelled."""
    names: list[str] = []
    for entry in entries:
        for column in _columns_in(entry):
            if column not in names:
                names.append(column)
    return names


def _columns_in(entry: str) -> list[str]:
    tree = _parse_entry(entry)
    if tree is None:
        return []
    bound = {str(v.name) for lam in tree.find_all(exp.Lambda) for v in lam.expressions}
    out = []
    for column in tree.find_all(exp.Column):
        head = column.parts[0].name if column.parts else ""
        if head and head not in bound:
            out.append(head)
    return out


def _parse_entry(entry: str) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(entry, read="spark")
    except (ParseError, TokenError):
        return None


def _renamed(entry: str, renames: Mapping[str, str]) -> str:
    """``entry`` with the top-level columns in ``renames`` (lowercased old → new) renamed."""
    tree = _parse_entry(entry)
    if tree is None:
        return entry
    if isinstance(tree, exp.Column) and len(tree.parts) == 1:
        new = renames.get(tree.parts[0].name.lower())
        if new is None:
            return entry
        return quote_identifier(new)
    for column in list(tree.find_all(exp.Column)):
        head = column.parts[0] if column.parts else None
        if head is not None and head.name.lower() in renames:
            head.replace(exp.to_identifier(renames[head.name.lower()], quoted=True))
    return tree.sql(dialect="spark")


def validate_clustering(
    columns: Sequence[str] | str | None,
    schema: pa.Schema,
    *,
    max_columns: int = DEFAULT_MAX_CLUSTERING_COLUMNS,
) -> list[str] | None:
    """Checked clustering columns (schema spelling for plain columns), or None for NONE.

    Raises :class:`InvalidOption` for an empty list, more than ``max_columns``
    entries, a duplicate, an unknown column, an expression that does not
    parse or is non-deterministic, or a type that cannot be ranked (structs,
    maps, arrays).
    """
    if columns is None:
        return None
    if isinstance(columns, str):
        raise InvalidOption(
            f"cluster_by takes a list of columns, not the string {columns!r}; "
            f"write cluster_by=[{columns!r}]"
        )
    names = {f.name for f in schema}
    # a column whose name has spaces around it is that column (' lead' was stripped to
    # 'lead', refused as unknown with ' lead' suggested: an audit)
    entries = [
        f"`{c.replace('`', '``')}`" if c in names and c != c.strip() else c.strip()
        for c in map(str, columns)
    ]
    if not entries:
        raise InvalidOption("cluster_by needs at least one column; use None for CLUSTER BY NONE")
    if len(entries) > max_columns:
        raise InvalidOption(
            f"too many clustering columns: {len(entries)} given ({', '.join(entries)}); "
            f"at most {max_columns} are allowed"
        )
    out: list[str] = []
    for entry in entries:
        resolved = _check_dimension(entry, schema)
        if resolved.lower() in {o.lower() for o in out}:
            raise InvalidOption(f"clustering column {entry!r} is given twice")
        out.append(resolved)
    return out


def _check_dimension(entry: str, schema: pa.Schema) -> str:
    if not entry:
        raise InvalidOption("a clustering column name is empty")
    dim = Dimension(entry)
    try:
        dim.check(schema)
        values = dim.values(schema.empty_table())
    except LakelayoutError as exc:
        raise InvalidOption(f"cannot cluster by {entry!r}: {exc}") from exc
    try:
        domain_type(values.type)
    except LakelayoutError as exc:
        raise InvalidOption(
            f"cannot cluster by {entry!r}: its type {values.type} is not supported "
            "(supported: numbers, booleans, dates, timestamps, decimals, strings, binaries)"
        ) from exc
    name = dim.column_name(schema)
    if name is None:
        return entry
    if Dimension(name).column_name(schema) != name:
        # a top-level `s.d` beside a struct `s`: unquoted, it reads as the struct's field
        # (stored so, every later OPTIMIZE failed on the struct: an audit)
        return quote_identifier(name)
    return name


def _positive_int(config: Mapping[str, str], key: str) -> int | None:
    raw = config.get(key, "")
    if not raw or not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidOption(f"table property {key} must be a number of bytes, got {raw!r}") from exc
    if value <= 0:
        raise InvalidOption(f"table property {key} must be positive, got {value}")
    return value


def target_file_size(config: Mapping[str, str]) -> int:
    """``lakelayout.targetFileSize`` or the 128 MiB default."""
    return _positive_int(config, TARGET_FILE_SIZE) or DEFAULT_TARGET_FILE_SIZE


#: a rewrite whose layout has blocks of about the target file size rolls its files at this
#: many times the target: a block up to it stays one file (rolling at the target itself would
#: leave a small remainder file beside almost every block), a larger one — a tree leaf no
#: query cuts, say — is cut into several files instead of one a single task would read
BLOCK_ROLL_FACTOR = 2


def block_roll_size(config: Mapping[str, str]) -> int:
    """The size a rewrite with target-sized blocks rolls its files at (:data:`BLOCK_ROLL_FACTOR`
    × ``lakelayout.targetFileSize``)."""
    return BLOCK_ROLL_FACTOR * target_file_size(config)


def small_rewrite_size(config: Mapping[str, str]) -> int:
    """``lakelayout.smallRewriteSize``: the largest input rewritten without a shuffle."""
    return _positive_int(config, SMALL_REWRITE_SIZE) or DEFAULT_SMALL_REWRITE_SIZE


#: every table property lakelayout reads (tests/test_api_errors.py checks the list against
#: the names the package spells): another ``lakelayout.*`` name is a misspelling
KNOWN_PROPERTIES = frozenset(
    {
        CLUSTERING_COLUMNS,
        CLUSTERING_PHYSICAL_NAMES,
        MIN_CUBE_SIZE,
        TARGET_CUBE_SIZE,
        MIN_FILE_SIZE,
        TARGET_FILE_SIZE,
        SMALL_REWRITE_SIZE,
        "lakelayout.rowGroupSize",
        "lakelayout.parquetCodec",
        "lakelayout.autoOptimize",
        "lakelayout.autoOptimize.minBytes",
        "lakelayout.queryLog.enabled",
        "lakelayout.queryLog.retentionDays",
        "lakelayout.queryLog.maxRecords",
        "lakelayout.online",
        "lakelayout.online.alpha",
    }
)


def check_properties(config: Mapping[str, str]) -> None:
    """InvalidOption for a ``lakelayout.*`` name lakelayout does not read (it was stored
    and ignored: ``tragetFileSize`` left the 128 MiB default in force) and for a bad
    file or cube size, before anything is written (an audit: they were refused only at
    the first OPTIMIZE)."""
    for key in config:
        if key.lower().startswith("lakelayout.") and key not in KNOWN_PROPERTIES:
            raise InvalidOption(
                f"unknown table property {key!r}." + closest(key, sorted(KNOWN_PROPERTIES))
            )
    target = target_file_size(config)
    min_file_size(config, target)
    small_rewrite_size(config)
    cube_sizes(config, table_bytes=0, target_file=target)


def rewrite_shuffles(nbytes: int, small_bytes: int, *, partitioned: bool) -> bool:
    """Whether a rewrite of ``nbytes`` of files goes through a Spark shuffle: inputs of
    more than ``small_bytes`` (``lakelayout.smallRewriteSize``) do, and so do partitioned
    tables (a block's rows are ordered by partition first). The rule the rewriter follows
    and the advisor prices (:mod:`lakelayout.advisor.costmodel`)."""
    return partitioned or nbytes > small_bytes


#: pages per column a file must reach before ordering rows inside a block pays: below,
#: a reader has next to nothing to skip inside the file, and the order still costs bytes
IN_BLOCK_ORDER_MIN_PAGES = 4


def orders_inside_blocks(
    nbytes: int, n_blocks: int, roll_size: int, n_columns: int, page_bytes: int
) -> bool:
    """Whether a rewrite of ``nbytes`` into ``n_blocks`` blocks sorts the rows inside each
    block by the layout's in-block key (tree layouts; curves are always in key order).

    Sorting helps when a block fills several files (each file then holds a narrow
    range, so whole files are skipped) or when a file holds at least
    :data:`IN_BLOCK_ORDER_MIN_PAGES` pages per column (so its pages can be skipped).
    It costs bytes: rows lose the order they arrived in, which often compresses
    better (TPC-H: about a fifth larger files). Small blocks keep arrival order.

    >>> MiB = 1 << 20
    >>> orders_inside_blocks(600 * MiB, 4, 128 * MiB, 36, 128 * 1024)  # 150 MiB blocks
    True
    >>> orders_inside_blocks(60 * MiB, 150, 128 * MiB, 36, 128 * 1024)  # 0.4 MiB blocks
    False
    """
    per_block = nbytes / max(1, n_blocks)
    if per_block >= 2 * roll_size:
        return True
    per_file = min(per_block, roll_size)
    return per_file >= IN_BLOCK_ORDER_MIN_PAGES * page_bytes * max(1, n_columns)


def min_file_size(config: Mapping[str, str], target: int) -> int:
    """Files below this size are compacted (default: 3/4 of the target file size)."""
    return _positive_int(config, MIN_FILE_SIZE) or max(1, int(target * MIN_FILE_FRACTION))


def cube_sizes(config: Mapping[str, str], *, table_bytes: int, target_file: int) -> CubeSizes:
    """MIN_CUBE_SIZE and TARGET_CUBE_SIZE for a table of ``table_bytes`` bytes.

    Delta's defaults (100 GB / 150 GB) make every cube of a smaller table
    partial forever, so each OPTIMIZE rewrites all clustered data again. When
    the properties are unset lakelayout uses

        min_cube_size    = min(100 GiB, max(2 x target file size, table bytes / 8))
        target_cube_size = 1.5 x min_cube_size

    so a cube is stable once it holds an eighth of the table: the number of
    stable cubes stays around 8 to 16 while each row is rewritten a bounded
    number of times. A cube remembers the min size in force when it was
    written (see :mod:`lakelayout.cluster.provenance`) and stays stable as the
    table grows, unless deletes shrink it.
    """
    explicit_min = _positive_int(config, MIN_CUBE_SIZE)
    explicit_target = _positive_int(config, TARGET_CUBE_SIZE)
    if explicit_min is None:
        relative = max(MIN_CUBE_FLOOR_FILES * target_file, table_bytes // MIN_CUBE_TABLE_FRACTION)
        min_size = min(MIN_CUBE_SIZE_CAP, relative)
    else:
        min_size = explicit_min
    if explicit_min is None and explicit_target is not None:
        # only the target set: the default minimum grows with the table and passed it
        # (OPTIMIZE of a grown table refused what Table.create accepted: a review)
        min_size = min(min_size, explicit_target)
    target = explicit_target or int(min_size * TARGET_CUBE_RATIO)
    if target < min_size:
        raise InvalidOption(
            f"{TARGET_CUBE_SIZE} ({target}) must be >= {MIN_CUBE_SIZE} ({min_size})"
        )
    return CubeSizes(min_size, target, explicit_min is not None)
