"""The extensible skipping-index API: index types, collectors and clauses.

An *index type* (Ta-Shma et al., "Extensible Data Skipping", §II and Table I)
has three parts, and nothing else in lakelayout needs to change to add one:

* **what it collects** -- :meth:`Index.collector` returns an object with
  ``add(batch)`` (called on every Arrow batch of one data file, so a Spark task
  can feed it the batches it writes) and ``result()`` (the file's metadata as a
  Python value of :attr:`Index.arrow_type`, or ``None`` for "unknown");
* **what it can represent** -- :meth:`Index.label` looks at one node of the
  normalized predicate tree and returns a :class:`Clause` that *represents*
  it (Definition 2: whenever a file holds a row satisfying the node, the
  clause is true on that file), or ``None``;
* **how the clause is evaluated** -- :meth:`Clause.evaluate` takes the
  metadata of *every* file at once (one Arrow array, one entry per file, null =
  no metadata) and returns one boolean per file. A null entry always gives
  ``True`` (keep). :meth:`Clause.negate` may return a clause representing the
  node's negation (Definition 14), which the merge uses under ``NOT``.

Most index types are over one *term* (a column or a deterministic SQL
expression such as ``month(ts)`` or a registered Python UDF call);
:class:`TermIndex` does the binding, validation, term computation and
matching for them, so a new type only writes its collector and its clauses.
Predicates match an index by the canonical SQL of the term
(:meth:`lakelayout.expr.nodes.Expr.sql`), so spelling, case and argument order
of commutative operators do not matter.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any, ClassVar, Protocol, TypeAlias, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr.coerce import coerce_literal
from lakelayout.expr.evaluate import evaluate, evaluate_term
from lakelayout.expr.nodes import (
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
    Predicate,
    StartsWith,
    Term,
)
from lakelayout.expr.parse import parse_term
from lakelayout.expr.types import function_types, spark_type_name

Batch: TypeAlias = pa.RecordBatch | pa.Table
Udf = Callable[..., Any]
"""A registered Python function: called with one ``pa.Array`` per argument, returns
an array-like of the same length (see :func:`elementwise` for scalar functions)."""

VALUE_COLUMN = "__value"
"""Name under which per-file values are exposed when a clause re-evaluates a node."""

TERM_NODES = (Compare, In, IsNull, Like, StartsWith, EndsWith, BoolTerm)
"""Leaf predicate node types that test one term (they all have a ``term`` field)."""


# ---------------------------------------------------------------- clauses


class Clause(abc.ABC):
    """A per-file boolean test over one index's metadata (Definition 1).

    ``evaluate`` is vectorized over all files; ``True`` means "the file may hold
    a row satisfying the node this clause labels". Files whose metadata is null
    must evaluate to ``True``.
    """

    @abc.abstractmethod
    def evaluate(self, meta: pa.Array) -> np.ndarray:
        """One boolean per entry of ``meta`` (null entries -> ``True``)."""

    def negate(self) -> Clause | None:
        """A clause representing ``NOT node`` (Definition 14), or ``None`` if unknown."""
        return None


class Collector(Protocol):
    """Collects one data file's metadata from its Arrow batches."""

    def add(self, batch: Batch) -> None:
        """Fold one batch of the file into the running metadata."""

    def result(self) -> Any:
        """The file's metadata as a Python value of the index's ``arrow_type`` (or None)."""


# ---------------------------------------------------------------- index base

_REGISTRY: dict[str, type[Index]] = {}
IndexT = TypeVar("IndexT", bound="type[Index]")


def register(cls: IndexT) -> IndexT:
    """Class decorator: make an index kind loadable by :meth:`Index.from_dict`.

    A module executed a second time under its own name (pytest's doctests with
    ``--import-mode=importlib``) defines the same class again: the first one,
    the one the package exports, stays registered, so a declaration read back
    is of the class callers imported.
    """
    known = _REGISTRY.get(cls.kind)
    same = known is not None and (known.__module__, known.__qualname__) == (
        cls.__module__,
        cls.__qualname__,
    )
    if not same:
        _REGISTRY[cls.kind] = cls
    return cls


def index_kinds() -> dict[str, type[Index]]:
    """Every registered index kind, by name."""
    return dict(_REGISTRY)


class Index(abc.ABC):
    """A skipping-index declaration; :meth:`bind` it to a schema before use."""

    kind: ClassVar[str]
    """Lower-case kind name, e.g. ``"valuelist"``; part of :attr:`name`."""

    @property
    @abc.abstractmethod
    def key(self) -> str:
        """Canonical text of what is indexed (``l_shipmode``, ``month(ts)``)."""

    @property
    def name(self) -> str:
        """Unique name: ``kind(key)``; also the metadata store column name."""
        return f"{self.kind}({self.key})"

    @abc.abstractmethod
    def bind(self, schema: pa.Schema) -> Index:
        """Validate against a table schema; returns the bound index (errors at add time)."""

    @property
    @abc.abstractmethod
    def arrow_type(self) -> pa.DataType:
        """Arrow type of the per-file metadata value."""

    @abc.abstractmethod
    def collector(self) -> Collector:
        """A fresh collector for one data file."""

    @abc.abstractmethod
    def label(self, node: Predicate) -> Clause | None:
        """A clause representing ``node``, or ``None`` when this index cannot help."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-able declaration: ``{"kind", "expression", "params"}``."""

    @staticmethod
    def from_dict(data: Mapping[str, Any], *, udfs: Mapping[str, Udf] | None = None) -> Index:
        """Rebuild a declaration written by :meth:`to_dict` (unbound)."""
        kind = str(data.get("kind", ""))
        cls = _REGISTRY.get(kind)
        if cls is None:
            raise InvalidOption(
                f"unknown index kind {kind!r}; registered kinds: {', '.join(sorted(_REGISTRY))}"
            )
        return cls.from_params(data.get("expression"), dict(data.get("params") or {}), udfs)

    @classmethod
    @abc.abstractmethod
    def from_params(
        cls, expression: Any, params: dict[str, Any], udfs: Mapping[str, Udf] | None
    ) -> Index:
        """Constructor used by :meth:`from_dict`."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def columns(self) -> frozenset[str] | None:
        """The table columns the bound index reads (None: not known, e.g. not bound)."""
        return None

    def collect(self, batches: Sequence[Batch] | Batch) -> Any:
        """Convenience: metadata of one file given all its batches."""
        collector = self.collector()
        for batch in [batches] if isinstance(batches, Batch) else batches:
            collector.add(batch)
        return collector.result()

    def collect_blocks(self, rows: pa.Table, starts: Sequence[int]) -> list[Any]:
        """Metadata of every block of ``rows``: block ``i`` is the rows from ``starts[i]``
        to the next start (ascending, the first 0, every block non-empty).

        The same values as :meth:`collect` on each block's slice; an index may
        override it to compute all blocks in one pass (virtual files of a sample
        have hundreds of blocks).
        """
        bounds = [*starts, rows.num_rows]
        return [self.collect(rows.slice(a, b - a)) for a, b in pairwise(bounds)]


class TermIndex(Index):
    """An index over one term: a column, a SQL expression, or a registered UDF call.

    Subclasses set ``kind``, implement :meth:`supports`, :meth:`value_arrow_type`
    -based :attr:`arrow_type`, :meth:`collector` and :meth:`label`, and use
    :meth:`values` (the term's values in one batch) and :meth:`matches`.
    """

    def __init__(
        self,
        expression: str,
        *,
        functions: Mapping[str, pa.DataType | str] | None = None,
        udfs: Mapping[str, Udf] | None = None,
    ) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidOption(f"{type(self).__name__} needs an expression, got {expression!r}")
        self.expression = expression
        self.functions = function_types(functions)
        self.udfs = {k.lower(): v for k, v in (udfs or {}).items()}
        for name in self.udfs:
            self.functions.setdefault(name, pa.string())
        self._term: Term | None = None

    #: ``(batch, values)``: the values :meth:`values` answers for that very batch object
    #: (set by :meth:`collect_blocks` on a private copy, never on a declared index)
    _given: tuple[Batch, pa.Array] | None = None

    # ------------------------------------------------------------ declaration

    @property
    def key(self) -> str:
        return self._term.sql() if self._term is not None else self.expression.strip()

    def params(self) -> dict[str, Any]:
        """Parameters besides the expression (JSON-able); subclasses extend."""
        if not self.functions:
            return {}
        return {"functions": {k: str(v) for k, v in sorted(self.functions.items())}}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expression": self.expression, "params": self.params()}

    @classmethod
    def from_params(
        cls, expression: Any, params: dict[str, Any], udfs: Mapping[str, Udf] | None
    ) -> Index:
        return cls(str(expression), **params, udfs=udfs)

    # ------------------------------------------------------------ binding

    @property
    def term(self) -> Term:
        """The bound term; raises when :meth:`bind` has not run."""
        if self._term is None:
            raise InvalidOption(f"index {self.name} is not bound: call bind(schema) first")
        return self._term

    @property
    def dtype(self) -> pa.DataType:
        """Arrow type of the term's values as stored (see :func:`value_type`)."""
        return value_type(self.term.dtype if self.term.dtype is not None else pa.null())

    def bind(self, schema: pa.Schema) -> TermIndex:
        term = parse_term(self.expression, schema, functions=self.functions)
        self._check_udfs(term)
        dtype = term.dtype if term.dtype is not None else pa.null()
        if not self.supports(value_type(dtype)):
            raise InvalidOption(
                f"{type(self).__name__} cannot index {type_family(dtype)} "
                f"{'column' if isinstance(term, Column) else 'expression'} '{term.sql()}'"
            )
        return self.with_term(term)

    def with_term(self, term: Term) -> TermIndex:
        """A copy of this declaration bound to ``term`` (as :meth:`bind` binds it)."""
        bound = copy.copy(self)
        bound._term = term
        return bound

    def collect_blocks(self, rows: pa.Table, starts: Sequence[int]) -> list[Any]:
        """Every block's metadata, the term computed once over all of ``rows``.

        A term is row-wise (a column, a deterministic expression or UDF call), so
        its values over ``rows`` are its values over each block one after the
        other. Each block's collector is fed the block's rows as :meth:`collect`
        would be, and :meth:`values` answers that batch with its slice of the
        values computed once (a collector reading other columns of the batch
        still can). Where the term fails over all rows (an ANSI error in some
        row), the blocks are collected one by one: only the blocks where it
        fails become unknown.
        """
        values = self.values(rows) if len(starts) > 1 else None
        if values is None:
            return super().collect_blocks(rows, starts)
        return self.collect_values(rows, starts, values)

    def collect_values(self, rows: pa.Table, starts: Sequence[int], values: pa.Array) -> list[Any]:
        """:meth:`collect_blocks` given the term's ``values`` over all of ``rows``; an index
        may override it to reduce the values per block in one pass."""
        fed = copy.copy(self)
        out = []
        for a, b in pairwise([*starts, rows.num_rows]):
            part = rows.slice(a, b - a)
            fed._given = (part, values.slice(a, b - a))
            out.append(fed.collect(part))
        return out

    def _check_udfs(self, term: Expr) -> None:
        for node in term.walk():
            if (
                isinstance(node, Func)
                and node.name in self.functions
                and node.name not in self.udfs
            ):
                raise InvalidOption(
                    f"index expression '{term.sql()}' calls {node.name}() but no Python "
                    f"function is registered for it (pass udfs={{'{node.name}': fn}})"
                )

    @abc.abstractmethod
    def supports(self, dtype: pa.DataType) -> bool:
        """Whether values of this (normalized) type can be indexed."""

    # ------------------------------------------------------------ helpers

    def values(self, batch: Batch) -> pa.Array | None:
        """The term's values in ``batch`` (normalized, see :func:`value_type`).

        ``None`` when the term cannot be computed on this batch (e.g. an ANSI
        error such as division by zero): the file's metadata becomes unknown.
        """
        given = self._given
        if given is not None and batch is given[0]:
            return given[1]
        try:
            arr = compute_term(self.term, batch, self.udfs)
        except (PredicateError, pa.ArrowException, TypeError, ValueError):
            return None
        return normalize_values(arr, self.dtype)

    def columns(self) -> frozenset[str] | None:
        return None if self._term is None else self._term.columns()

    def matches(self, node: Predicate) -> bool:
        """Whether ``node`` is a single-term test on this index's term."""
        term = getattr(node, "term", None)
        return isinstance(node, TERM_NODES) and term is not None and term.sql() == self.key

    def on_values(self, node: Predicate) -> Predicate:
        """``node`` with its term replaced by the :data:`VALUE_COLUMN` of stored values."""
        return dataclasses.replace(node, term=Column(VALUE_COLUMN, self.dtype))  # type: ignore[type-var]


# ---------------------------------------------------------------- values


def value_type(dtype: pa.DataType) -> pa.DataType:
    """The type values are stored in: dictionaries decoded, string/binary flavours unified.

    >>> value_type(pa.large_string()), value_type(pa.dictionary(pa.int8(), pa.string()))
    (DataType(string), DataType(string))
    """
    if pa.types.is_dictionary(dtype):
        return value_type(dtype.value_type)
    if pa.types.is_large_string(dtype) or _is_view(dtype, "string"):
        return pa.string()
    if pa.types.is_large_binary(dtype) or _is_view(dtype, "binary"):
        return pa.binary()
    if pa.types.is_date64(dtype):
        return pa.date32()
    return dtype


def type_family(dtype: pa.DataType) -> str:
    """Short lower-case Spark type name for messages: ``map``, ``string``, ``array``.

    >>> type_family(pa.map_(pa.string(), pa.int32())), type_family(pa.list_(pa.int8()))
    ('map', 'array')
    """
    name = spark_type_name(dtype).split("<")[0].strip().lower()
    return "array" if name == "list" else name


def _is_view(dtype: pa.DataType, what: str) -> bool:
    test = getattr(pa.types, f"is_{what}_view", None)
    return bool(test(dtype)) if test is not None else False


def normalize_values(arr: pa.Array | pa.ChunkedArray, dtype: pa.DataType) -> pa.Array:
    """Cast to ``dtype`` and make equal values equal bitwise: ``-0.0`` -> ``0.0``, one NaN."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != dtype:
        arr = arr.cast(dtype)
    if pa.types.is_floating(dtype) and len(arr):
        zero = pa.scalar(0.0, dtype)
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(float("nan"), dtype), pc.add(arr, zero))
    return arr


def literal_scalar(value: object, dtype: pa.DataType) -> pa.Scalar | None:
    """A literal as a normalized scalar of ``dtype``; ``None`` if not exactly representable."""
    if pa.types.is_floating(dtype) and isinstance(value, float) and value != value:
        return pa.scalar(float("nan"), dtype)
    scalar = coerce_literal(value, dtype)
    if scalar is not None and pa.types.is_floating(dtype):
        return pa.scalar(scalar.as_py() + 0.0, dtype)
    return scalar


def literal_values(values: Sequence[Literal], dtype: pa.DataType) -> pa.Array | None:
    """Non-null literals as one normalized array; ``None`` if any is not representable."""
    out = []
    for lit in values:
        if lit.value is None:
            continue
        scalar = literal_scalar(lit.value, dtype)
        if scalar is None:
            return None
        out.append(scalar)
    try:
        return pa.array(out, type=dtype)
    except (pa.ArrowException, OverflowError, ValueError):  # e.g. beyond Python's years
        return None


def any_per_file(lists: pa.Array, hit: np.ndarray) -> np.ndarray:
    """Per list entry: whether some flattened element has ``hit`` (null lists -> True)."""
    parents = np.asarray(pc.list_parent_indices(lists).to_numpy(zero_copy_only=False))
    out = np.zeros(len(lists), dtype=bool)
    out[parents[np.asarray(hit, dtype=bool)]] = True
    return out | null_mask(lists)


def null_mask(meta: pa.Array) -> np.ndarray:
    """True where a file has no metadata."""
    return np.asarray(meta.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def values_satisfying(node: Predicate, values: pa.Array) -> np.ndarray:
    """Spark's WHERE truth of ``node`` (over :data:`VALUE_COLUMN`) on each value."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    return evaluate(node, pa.table({VALUE_COLUMN: values}))


# ---------------------------------------------------------------- terms and UDFs


def compute_term(term: Expr, data: Batch, udfs: Mapping[str, Udf]) -> pa.Array:
    """Values of ``term`` per row, calling registered Python UDFs where the term uses them.

    Built-in functions go through :func:`lakelayout.expr.evaluate.evaluate_term`;
    a UDF is called with one ``pa.Array`` per argument.
    """
    if not any(isinstance(n, Func) and n.name in udfs for n in term.walk()):
        return evaluate_term(term, data)
    if not isinstance(term, Func):
        return evaluate_term(term, data)
    args = [compute_term(a, data, udfs) for a in term.args]
    if term.name in udfs:
        return _udf_result(udfs[term.name](*args), term, data.num_rows)
    table = pa.table({f"__arg{i}": a for i, a in enumerate(args)})
    placeholders = tuple(Column(f"__arg{i}", a.type) for i, a in enumerate(args))
    return evaluate_term(Func(term.name, placeholders, term.dtype), table)


def _udf_result(out: Any, term: Func, rows: int) -> pa.Array:
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    if not isinstance(out, pa.Array):
        out = pa.array(list(out) if isinstance(out, np.ndarray) else out, type=term.dtype)
    if len(out) != rows:
        raise PredicateError(f"UDF {term.name}() returned {len(out)} values for {rows} rows")
    return out


def elementwise(fn: Callable[..., Any]) -> Udf:
    """Wrap a scalar Python function as a UDF over arrays (NULL in -> NULL out).

    When every argument is a string, binary, integer, boolean, date, time or
    timestamp array, ``fn`` is called once per distinct argument tuple of a
    call and its result reused for the other rows (a user agent or a URL
    repeats over thousands of rows; the index collectors of a rewrite call the
    UDF on every row it writes). The function must therefore be deterministic
    — as every function an index or a predicate uses must be, since Spark
    evaluates the same function on the same values. Floats, decimals and
    nested values are passed row by row: Python's equality merges ``-0.0``
    with ``0.0``, values that a function may tell apart.

    >>> elementwise(str.upper)(pa.array(["a", None, "a"]))
    ['A', None, 'A']
    """

    def udf(*arrays: pa.Array) -> list[Any]:
        columns = [a.to_pylist() for a in arrays]
        rows = zip(*columns, strict=True)
        if not all(_exact_in_python(a.type) for a in arrays):
            return [None if None in row else fn(*row) for row in rows]
        seen: dict[tuple[Any, ...], Any] = {}
        out: list[Any] = []
        for row in rows:
            if None in row:
                out.append(None)
                continue
            try:
                value = seen[row]
            except KeyError:
                value = seen[row] = fn(*row)
            out.append(value)
        return out

    return udf


def _exact_in_python(dtype: pa.DataType) -> bool:
    """Whether two values of ``dtype`` that Python finds equal are the same value (so a
    deterministic function cannot tell them apart)."""
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_integer(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_date(dtype)
        or pa.types.is_time(dtype)
        or pa.types.is_timestamp(dtype)
    )


def check_positive(owner: str, name: str, value: Any, *, upper: float | None = None) -> None:
    """Raise InvalidOption unless ``0 < value`` (and ``value < upper``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if ok and upper is not None:
        ok = value < upper
    if not ok:
        bound = f" and below {upper}" if upper is not None else ""
        raise InvalidOption(f"{owner} {name} must be a positive number{bound}, got {value!r}")


def check_int(owner: str, name: str, value: Any) -> None:
    """Raise InvalidOption unless ``value`` is a positive integer."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidOption(f"{owner} {name} must be a positive integer, got {value!r}")
