"""Which Delta table features lakelayout can write to, and through which committer.

lakelayout commits through delta-rs by default. delta-rs (1.6.6, checked on
this machine) commits to tables with the writer features in
:data:`DELTA_RS_WRITES`; it refuses others (``clustering`` and
``domainMetadata``: "Unsupported table features required: [ClusteredTable,
DomainMetadata]"), and its ``RemoveAction`` cannot carry a deletion vector,
so it cannot remove a file that has one (the remove would not match the add
and the file would stay live, its rows duplicated by the rewrite). Such
commits go through Delta's own transaction API in the Spark session
(:mod:`lakelayout.table.connector`) when Delta's connector is loaded, and
are refused by name otherwise.

Some features need work at write time that lakelayout's writer does not do
(computing generated or identity columns, checking CHECK constraints,
invariant expressions and CHAR/VARCHAR lengths, writing change data files for
a DELETE, keeping row IDs under row tracking): those operations are refused by
name whatever the committer. Rewrites that keep every row as it is
(OPTIMIZE) are not affected by the first ones; under row tracking they are
refused too, as every rewritten row would get a new row ID.

:func:`plan_commit` decides, before anything is written. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from enum import Enum
from typing import Any

from lakelayout.errors import InvalidOption, UnsupportedTable

#: writer features delta-rs 1.6.6 commits to (lakelayout honours each of them)
DELTA_RS_WRITES = frozenset(
    {
        "appendOnly",
        "invariants",
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "changeDataFeed",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",  # delta-rs puts it on tables it creates; no variant column is read
    }
)

#: reader features lakelayout's readers honour (datafile.read_data_file and delta-rs's snapshot)
READS = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
    }
)

#: reader/writer features that only announce a column type: harmless while no column has it
TYPE_FEATURES = {"variantType": "variant", "variantType-preview": "variant"}

#: features whose values or checks an append would have to compute
APPEND_REFUSED = {
    "generatedColumns": "generated columns (lakelayout does not compute them)",
    "identityColumns": "identity columns (lakelayout does not assign their values)",
    "checkConstraints": "CHECK constraints (lakelayout does not check rows against them)",
    "allowColumnDefaults": "column defaults (lakelayout does not fill them)",
    "invariants": "column invariants (lakelayout does not check rows against their expressions)",
    "charVarchar": "CHAR/VARCHAR columns (lakelayout does not check their length limits)",
}

_CONNECTOR_HINT = (
    "start the Spark session with Delta's connector (delta-spark jars on spark.jars, "
    "as lakelayout's spark_session() does when they are installed) so lakelayout "
    "commits through Delta's own transaction API"
)


def delta_rs_adds_features(
    min_writer_version: int, writer_features: Collection[str] | None
) -> bool:
    """Whether delta-rs would change this protocol when it commits new metadata.

    delta-rs 1.6.6 adds ``variantType`` (reader and writer) to a table-features
    protocol (writer version 7) that lacks it on every metadata commit
    (``alter.set_table_properties``); checked on a table Delta's connector
    wrote with deletion vectors and column mapping. Older protocols are left as
    they are.
    """
    return min_writer_version >= 7 and "variantType" not in set(writer_features or ())


class Kind(Enum):
    """What a commit does to rows."""

    APPEND = "append"
    REWRITE = "rewrite"  # OPTIMIZE: the same rows in new files
    DELETE = "delete"  # rows removed (files rewritten without them)


class Committer(Enum):
    DELTA_RS = "delta-rs"
    CONNECTOR = "delta-spark"


def plan_commit(
    location: str,
    writer_features: Collection[str],
    configuration: Mapping[str, str],
    kind: Kind,
    *,
    removes_deletion_vectors: bool = False,
    removes_foreign_paths: bool = False,
    connector: bool = False,
    connector_missing: str = _CONNECTOR_HINT,
    in_use: Collection[str] | None = None,
    connector_writes: Collection[str] | None = None,
) -> Committer:
    """The committer for this commit, or UnsupportedTable naming what stops it.

    ``removes_foreign_paths``: a file to remove is named in the log in a form
    delta-rs does not produce (another writer left ``ü`` unencoded where
    delta-rs writes ``%C3%BC``); delta-rs matches removes to adds by the
    exact string, so its remove would not match (checked) and the rewritten
    rows would be duplicated. ``connector_missing`` says why Delta's connector
    cannot be used when ``connector`` is False (named in the refusal).
    ``in_use``: the features of :data:`APPEND_REFUSED` the table's columns use
    (:func:`features_in_use`; CHECK constraints are read from the configuration);
    None when not known, and then every one listed in the protocol refuses an append
    (but ``invariants``, which Delta lists for NOT NULL columns too).
    ``connector_writes``: the features Delta's connector supports (lower case; None or
    empty: not known); one it does not support is refused before anything is written,
    where its commit would fail after the files were written.
    """
    features = set(writer_features)
    if kind is Kind.APPEND:
        for feature, why in APPEND_REFUSED.items():
            # known from the columns: what they use refuses, whatever the protocol lists
            # (a legacy protocol lists nothing, and Delta enforces generation expressions
            # from writer version 4 on); Delta lists these in the protocol of tables that
            # use none of them (``invariants`` for NOT NULL columns, which the writer
            # checks); constraints are read from the configuration below
            if in_use is not None:
                used = feature in in_use
            else:  # not known: what the protocol lists (``invariants``: NOT NULL columns too)
                used = feature in features and feature != "invariants"
            if used:
                raise UnsupportedTable(f"cannot append to '{location}': it uses {why}")
        constraints = sorted(k for k in configuration if k.startswith("delta.constraints."))
        if constraints:
            raise UnsupportedTable(
                f"cannot append to '{location}': it has CHECK constraints {constraints} "
                "(lakelayout does not check rows against them)"
            )
    if kind in (Kind.REWRITE, Kind.DELETE) and is_true(
        configuration.get("delta.enableRowTracking")
    ):
        verb = "rewrite files of" if kind is Kind.REWRITE else "DELETE from"
        raise UnsupportedTable(
            f"cannot {verb} '{location}': it has row tracking enabled "
            "(delta.enableRowTracking=true) and lakelayout's rewrites do not keep row IDs "
            "(every rewritten row would get a new one); use Delta's OPTIMIZE / DELETE"
        )
    if kind is Kind.DELETE:
        if is_true(configuration.get("delta.appendOnly")):
            raise UnsupportedTable(
                f"cannot DELETE from '{location}': it is append-only (delta.appendOnly=true)"
            )
        if is_true(configuration.get("delta.enableChangeDataFeed")):
            raise UnsupportedTable(
                f"cannot DELETE from '{location}': it has the change data feed enabled and "
                "lakelayout writes no change data files; use Delta's DELETE"
            )
    others = sorted(features - DELTA_RS_WRITES)
    reasons = []
    if others:
        reasons.append(f"table features {others}, which delta-rs cannot commit to")
    if removes_foreign_paths:
        reasons.append(
            "files whose log paths delta-rs encodes differently (its remove would not match them)"
        )
    if removes_deletion_vectors:
        reasons.append(
            "files with deletion vectors to remove (delta-rs cannot remove a file's "
            "deletion vector with it)"
        )
    if not reasons:
        return Committer.DELTA_RS
    if connector:
        unknown = [f for f in others if connector_writes and f.lower() not in connector_writes]
        if unknown:
            raise UnsupportedTable(
                f"cannot commit this {kind.value} to '{location}': it needs table features "
                f"{unknown}, which neither delta-rs nor the session's Delta connector can "
                "write"
            )
        return Committer.CONNECTOR
    raise UnsupportedTable(
        f"cannot commit this {kind.value} to '{location}': it needs "
        + " and ".join(reasons)
        + f"; {connector_missing}"
    )


def check_readable(
    location: str, reader_features: Collection[str], schema_json: str | None = None
) -> None:
    """UnsupportedTable naming the reader features lakelayout would read wrongly.

    (Widened types read right: files are cast to the table's type.) A type
    feature such as ``variantType`` only matters when a column has the type:
    delta-rs 1.6.6 puts ``variantType`` in the protocol of every table it
    creates with table features (e.g. with deletion vectors enabled), so it is
    refused only when ``schema_json`` (the Delta schema) has a column of that
    type, or is not given.
    """
    used = _types_in(schema_json) if schema_json is not None else None
    unknown = sorted(
        f
        for f in set(reader_features) - READS
        if not (f in TYPE_FEATURES and used is not None and TYPE_FEATURES[f] not in used)
    )
    if unknown:
        raise UnsupportedTable(
            f"'{location}' needs reader features {unknown}, which lakelayout does not "
            f"support (it reads {sorted(READS)})"
        )
    if schema_json is not None:
        odd = string_rules(schema_json)
        if odd:
            raise UnsupportedTable(
                f"'{location}' cannot be read by lakelayout: {'; '.join(odd)}. Spark compares "
                "these strings by rules lakelayout's reader and skipping do not follow "
                "(they compare the stored strings byte by byte); read the table with "
                "Spark's Delta reader (spark.read.format('delta'))"
            )


def string_rules(schema_json: str) -> list[str]:
    """The columns of a Delta schema whose strings Spark reads or compares by rules other
    than their bytes: a collation (``__COLLATIONS``: UTF8_LCASE compares without case)
    and CHAR(n) (``__CHAR_VARCHAR_TYPE_STRING``: padded with spaces on read and in
    comparisons). lakelayout read such columns as plain strings: a scan lost rows and a
    DELETE removed nothing (an audit). VARCHAR(n) compares as a plain string."""
    out: list[str] = []
    for node in _schema_nodes(schema_json):
        metadata = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(metadata, dict):
            continue
        name = node.get("name")
        collations = metadata.get("__COLLATIONS")
        if isinstance(collations, dict):
            out += [
                f"column '{path}' has collation {c}"
                for path, c in collations.items()
                if not str(c).upper().endswith("UTF8_BINARY")  # byte order: as lakelayout
            ]
        declared = str(metadata.get("__CHAR_VARCHAR_TYPE_STRING") or "")
        if declared.lower().startswith("char"):
            out.append(f"column '{name}' is {declared.upper()}")
    return sorted(set(out))


#: column metadata keys that show a column uses a feature of :data:`APPEND_REFUSED`
_COLUMN_FEATURE_KEYS = {
    "delta.generationExpression": "generatedColumns",
    "delta.identity.start": "identityColumns",
    "delta.identity.step": "identityColumns",
    "CURRENT_DEFAULT": "allowColumnDefaults",
    "delta.invariants": "invariants",
    "__CHAR_VARCHAR_TYPE_STRING": "charVarchar",
}


def features_in_use(schema_json: str) -> frozenset[str]:
    """The features of :data:`APPEND_REFUSED` a Delta schema's columns use (nested
    fields too): generation expressions, identity columns, column defaults, invariant
    expressions (legacy ``delta.invariants``), CHAR/VARCHAR length limits."""
    used: set[str] = set()
    for node in _schema_nodes(schema_json):
        metadata = node.get("metadata") if isinstance(node, dict) else None
        if isinstance(metadata, dict):
            used.update(f for key, f in _COLUMN_FEATURE_KEYS.items() if key in metadata)
    return frozenset(used)


def has_not_null(schema_json: str) -> bool:
    """Whether a Delta schema declares a field NOT NULL (nested ones too)."""
    return any(
        isinstance(node, dict) and node.get("nullable") is False
        for node in _schema_nodes(schema_json)
    )


def _types_in(schema_json: str) -> set[str]:
    """Every type name in a Delta schema JSON (nested struct, array and map types too)."""
    return {node for node in _schema_nodes(schema_json) if isinstance(node, str)}


def _schema_nodes(schema_json: str) -> Iterator[Any]:
    """Every node of a Delta schema JSON: fields and types (dicts), type names (strings),
    through struct fields and array / map element, key and value types."""
    stack: list[Any] = [json.loads(schema_json)]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(node.get(k) for k in ("type", "elementType", "keyType", "valueType"))
            stack.extend(node.get("fields") or [])


def float_widened(schema_json: str) -> list[tuple[str, ...]]:
    """Paths of the struct leaves (logical names) that type widening changed from FLOAT to
    DOUBLE (``delta.typeChanges`` in the field's metadata).

    The files written before the change keep FLOAT values, and their statistics are
    the shortest decimal text of a FLOAT (``-2.7`` for the FLOAT nearest -2.7, which
    as a DOUBLE is -2.7000000476837158): read as a DOUBLE the bound is off by up to
    half a FLOAT ulp on the wrong side, and a scan skipped the file's matching rows
    (found by an audit). Delta 4 records no version with the change, so every file's
    bounds of such a column are widened (:func:`lakelayout.stats.delta_stats.widen_float_bounds`).
    """
    out: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), json.loads(schema_json))]
    while stack:
        prefix, struct = stack.pop()
        for field in struct.get("fields") or []:
            path = (*prefix, str(field.get("name")))
            kind = field.get("type")
            if isinstance(kind, dict) and kind.get("type") == "struct":
                stack.append((path, kind))
                continue
            changes = (field.get("metadata") or {}).get("delta.typeChanges") or []
            if any(
                isinstance(c, dict) and c.get("fromType") == "float" and not c.get("fieldPath")
                for c in changes
            ):
                out.append(path)
    return out


def is_true(value: str | None) -> bool:
    """Whether a table property's value means true (``"true"`` in any case, spaces around)."""
    return (value or "").strip().lower() == "true"


def check_flag(config: Mapping[str, str], name: str) -> None:
    """Refuse a table property ``name`` set to anything but ``true`` or ``false`` (in any
    case, spaces around, as Spark reads booleans) with InvalidOption naming it and the value."""
    value = config.get(name)
    if value is not None and value.strip().lower() not in ("true", "false"):
        raise InvalidOption(f"table property {name} must be 'true' or 'false', got {value!r}")
