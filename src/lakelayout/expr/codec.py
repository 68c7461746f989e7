"""Predicate trees and Arrow schemas as JSON, exactly and with typed literals.

A fitted layout (Qd-tree cuts, Pando, SOP features) and anything else that
stores a bound tree reloads it without the parser: :func:`expr_to_json` writes
every node as ``{"node": <type>, <field>: ...}`` with typed literal values
(dates as ISO text, decimals as strings, timestamps as microseconds, Arrow
types as IPC bytes) and :func:`expr_from_json` reads it back. A document that
does not decode raises :class:`~lakelayout.errors.LayoutError` (what fails to
load is a stored layout).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal as _decimal
from typing import Any

import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    StartsWith,
    TermCompare,
)
from lakelayout.expr.temporal import FarTimestamp

_NODE_TYPES: dict[str, type[Expr]] = {
    cls.__name__: cls
    for cls in (
        Column,
        Literal,
        Func,
        Compare,
        TermCompare,
        In,
        IsNull,
        Like,
        StartsWith,
        EndsWith,
        And,
        Or,
        Not,
        BoolConst,
        BoolTerm,
        Opaque,
    )
}


def expr_to_json(node: Expr) -> dict[str, Any]:
    """A JSON-ready dict for a predicate or term tree (exact, typed).

    >>> d = expr_to_json(Compare("<", Column("d", pa.date32()), Literal(_dt.date(2020, 1, 2))))
    >>> d["value"]["value"]
    {'date': '2020-01-02'}
    >>> expr_from_json(d) == Compare("<", Column("d"), Literal(_dt.date(2020, 1, 2)))
    True
    """
    name = type(node).__name__
    if _NODE_TYPES.get(name) is not type(node) or not dataclasses.is_dataclass(node):
        raise LayoutError(f"cannot serialize expression node of type {name}")
    out: dict[str, Any] = {"node": name}
    for f in dataclasses.fields(node):
        raw = getattr(node, f.name)
        if f.name == "dtype":
            out[f.name] = _dtype_to_json(raw)
        elif f.name == "value" and isinstance(node, Literal):
            out[f.name] = _value_to_json(raw)
        else:
            out[f.name] = _field_to_json(raw)
    return out


def expr_from_json(data: dict[str, Any]) -> Any:
    """Inverse of :func:`expr_to_json`."""
    try:
        cls = _NODE_TYPES[data["node"]]
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            raw = data[f.name]
            if f.name == "dtype":
                kwargs[f.name] = _dtype_from_json(raw)
            elif f.name == "value" and cls is Literal:
                kwargs[f.name] = _value_from_json(raw)
            elif f.name == "reads":
                kwargs[f.name] = frozenset(raw)
            else:
                kwargs[f.name] = _field_from_json(raw)
        return cls(**kwargs)
    except (KeyError, TypeError, ValueError) as exc:
        raise LayoutError(f"bad serialized expression {data!r}: {exc}") from exc


def _field_to_json(raw: Any) -> Any:
    if isinstance(raw, Expr):
        return expr_to_json(raw)
    if isinstance(raw, frozenset):
        return sorted(raw)
    if isinstance(raw, tuple):
        return [_field_to_json(x) for x in raw]
    return raw


def _field_from_json(raw: Any) -> Any:
    if isinstance(raw, dict):
        return expr_from_json(raw)
    if isinstance(raw, list):
        return tuple(_field_from_json(x) for x in raw)
    return raw


def _dtype_to_json(dtype: pa.DataType | None) -> str | None:
    if dtype is None:
        return None
    return base64.b64encode(pa.schema([pa.field("t", dtype)]).serialize().to_pybytes()).decode()


def _dtype_from_json(text: str | None) -> pa.DataType | None:
    if text is None:
        return None
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text))).field("t").type


def schema_to_json(schema: pa.Schema) -> str:
    """An Arrow schema as base64 IPC text."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_json(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def _value_to_json(value: Any) -> Any:
    """A literal value as JSON: plain for bool/int/str/None, tagged otherwise."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, _decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, _dt.datetime):
        return {"timestamp": value.isoformat()}
    if isinstance(value, FarTimestamp):
        return {"timestamp_us": value.micros, "utc": value.utc}
    if isinstance(value, _dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, _dt.time):
        return {"time": value.isoformat()}
    if isinstance(value, _dt.timedelta):
        return {"timedelta_us": value // _dt.timedelta(microseconds=1)}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, (list, tuple)):
        return {"list": [_value_to_json(v) for v in value]}
    if isinstance(value, dict):
        return {"map": [[_value_to_json(k), _value_to_json(v)] for k, v in value.items()]}
    raise LayoutError(f"cannot serialize literal {value!r} of type {type(value).__name__}")


def _value_from_json(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    if "timestamp_us" in data:
        return FarTimestamp(int(data["timestamp_us"]), bool(data.get("utc", True)))
    ((tag, raw),) = data.items()
    if tag == "float":
        return float(raw)
    if tag == "decimal":
        return _decimal.Decimal(raw)
    if tag == "timestamp":
        return _dt.datetime.fromisoformat(raw)
    if tag == "date":
        return _dt.date.fromisoformat(raw)
    if tag == "time":
        return _dt.time.fromisoformat(raw)
    if tag == "timedelta_us":
        return _dt.timedelta(microseconds=raw)
    if tag == "bytes":
        return base64.b64decode(raw)
    if tag == "list":
        return [_value_from_json(v) for v in raw]
    if tag == "map":
        return {_value_from_json(k): _value_from_json(v) for k, v in raw}
    raise ValueError(f"unknown literal tag {tag!r}")


__all__ = ["expr_from_json", "expr_to_json", "schema_from_json", "schema_to_json"]
