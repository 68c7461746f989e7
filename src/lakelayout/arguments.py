"""Checking the types of public arguments, with one clear error.

A list passed where a DataFrame belongs would otherwise fail deep inside
PySpark or pyarrow with an ``AttributeError``; every public entry point
checks its arguments first and raises :class:`~lakelayout.errors.InvalidOption`
naming the method, the argument, the type expected and the type given:

>>> require_int("10", "version", "Table.snapshot", optional=True)
Traceback (most recent call last):
...
lakelayout.errors.InvalidOption: Table.snapshot: version must be an int or None, got str

PySpark types are checked without importing PySpark at import time.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from typing import Any, TypeGuard

import pyarrow as pa

from lakelayout.errors import InvalidOption


def _fail(where: str, name: str, expected: str, value: object, optional: bool) -> InvalidOption:
    wanted = f"{expected} or None" if optional else expected
    return InvalidOption(f"{where}: {name} must be {wanted}, got {_type_name(value)}")


def _type_name(value: object) -> str:
    """The type of ``value`` as a user knows it: ``str``, ``pandas.DataFrame``.

    >>> _type_name([]), _type_name(pa.schema([]))
    ('list', 'pyarrow.Schema')
    """
    kind = type(value)
    package = kind.__module__.split(".")[0]
    return kind.__name__ if package == "builtins" else f"{package}.{kind.__name__}"


def require_str(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A string (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _fail(where, name, "a string", value, optional)


def require_path(value: object, name: str, where: str) -> None:
    """A table location: a string or an ``os.PathLike``."""
    if not isinstance(value, str | os.PathLike):
        raise _fail(where, name, "a path or URI string", value, False)


#: the largest count lakelayout passes on (a Java int: Spark's ``limit``, delta-rs's history)
MAX_COUNT = 2**31 - 1


def require_int(
    value: object,
    name: str,
    where: str,
    *,
    optional: bool = False,
    low: int | None = None,
    high: int | None = None,
) -> None:
    """An int, not a bool (or None when ``optional``), at least ``low`` and at most
    ``high`` when given."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, name, "an int", value, optional)
    if low is not None and value < low:
        raise InvalidOption(f"{where}: {name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise InvalidOption(f"{where}: {name} must be <= {high:,}, got {value:,}")


def real_number(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number (not a bool): an int, a float, a numpy number."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def whole_number(value: object) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer (not a bool): an int or a numpy integer."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def require_bool(value: object, name: str, where: str) -> None:
    if not isinstance(value, bool):
        raise _fail(where, name, "True or False", value, False)


def require_instance(
    value: object, kind: type, name: str, where: str, *, optional: bool = False
) -> None:
    """An instance of ``kind`` (or None when ``optional``): hooks, retry policies."""
    if value is None and optional:
        return
    if not isinstance(value, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise _fail(where, name, f"{article} {kind.__name__}", value, optional)


def require_seconds(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A number of seconds >= 0 (int or float, not a bool; None when ``optional``)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, name, "a number of seconds", value, optional)
    if not value >= 0:  # (NaN too)
        raise InvalidOption(f"{where}: {name} must be >= 0 seconds, got {value}")


def require_names(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A list or tuple of strings (a single string is refused: it is not a list of names)."""
    if value is None and optional:
        return
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _fail(where, name, "a list of strings", value, optional)
    for item in value:
        if not isinstance(item, str):
            raise InvalidOption(
                f"{where}: {name} must be a list of strings, got a {type(item).__name__} in it"
            )


def require_str_mapping(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A mapping of strings to strings (table properties)."""
    if value is None and optional:
        return
    if not isinstance(value, Mapping):
        raise _fail(where, name, "a dict of strings", value, optional)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str | None):
            raise InvalidOption(
                f"{where}: {name} must map strings to strings, got {key!r}: {type(item).__name__}"
            )


def require_mapping(value: object, name: str, where: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, Mapping):
        raise _fail(where, name, "a dict", value, optional)


def require_schema(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A ``pyarrow.Schema``."""
    if value is None and optional:
        return
    if not isinstance(value, pa.Schema):
        raise _fail(where, name, "a pyarrow.Schema", value, optional)


def require_dataframe(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A Spark DataFrame (classic or Connect)."""
    if value is None and optional:
        return
    if not _is_instance(value, "DataFrame"):
        raise _fail(where, name, "a Spark DataFrame", value, optional)


def require_data(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """Rows to write: a Spark DataFrame (classic or Connect) or a ``pyarrow.Table``."""
    if value is None and optional:
        return
    if not isinstance(value, pa.Table) and not _is_instance(value, "DataFrame"):
        raise _fail(where, name, "a Spark DataFrame or a pyarrow.Table", value, optional)


def require_spark(value: object, name: str, where: str, *, optional: bool = False) -> None:
    """A SparkSession (classic or Connect)."""
    if value is None and optional:
        return
    if not _is_instance(value, "SparkSession"):
        raise _fail(where, name, "a SparkSession", value, optional)


def _is_instance(value: Any, kind: str) -> bool:
    """Whether ``value`` is a pyspark ``kind`` (``SparkSession``, ``DataFrame``), classic or
    Connect: Connect's classes (``pyspark.sql.connect...``) are not subclasses of the
    classic ones, so the class hierarchy is matched by name within ``pyspark.sql``."""
    return any(
        cls.__name__ == kind and cls.__module__.startswith("pyspark.sql")
        for cls in type(value).__mro__
    )


__all__ = [
    "require_bool",
    "require_dataframe",
    "require_int",
    "require_mapping",
    "require_names",
    "require_path",
    "require_schema",
    "require_spark",
    "require_str",
    "require_str_mapping",
]


def cannot_write_in(folder: str | os.PathLike[str]) -> str:
    """Why this process cannot create a file in ``folder`` ('' when it can), found by
    creating one: ``os.access`` says yes to root everywhere, and on /proc (an audit)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            return ""
    except OSError as exc:
        return exc.strerror or str(exc)
