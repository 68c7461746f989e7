"""Pruning with per-file statistics (min, max, null count), vectorized over all files at once.

Two evaluators over the normalized predicate tree (:mod:`lakelayout.expr.nodes`)
and a :class:`~lakelayout.stats.model.FileStats`, each a
:class:`~lakelayout.expr.visitor.PredicateVisitor` with one rule per node type:

* :func:`might_match` (:class:`MightMatch`) -- ``False`` only for a file that
  surely holds no row the predicate keeps (``ROWS_CANNOT_MATCH``); everything
  unknown, unsupported or unreliable falls through to ``ROWS_MIGHT_MATCH``.
  Used to skip files.
* :func:`all_rows_match` (:class:`AllRowsMatch`) -- ``True`` only for a file
  whose every row surely satisfies the predicate. Used for metadata-only
  deletes and "already clustered" checks; everything unknown falls through to
  ``False``.

Both rely on the :mod:`~lakelayout.stats.bounds` contract that every stored
bound is a true bound (``min <= v <= max`` for every non-null ``v``, NaN
excluded from ``min`` and voiding ``max``), so truncated string bounds need no
special case. A :class:`Not` left by normalization (over an opaque node) means
"might match" for its subtree.

What a leaf knows about its term comes from :class:`TermBounds`, a
:class:`~lakelayout.expr.visitor.TermVisitor`:

* a column, or a field inside a struct column (``a.b.c``): its statistics leaf;
* a function of one column that is monotonic (``year(d)``, ``substring(s, 1,
  3)``, ``date_format(d, 'yyyy-MM')``, ``CAST(d AS STRING)``, ``x + 1``,
  ``-x``, ...): the function of the column's bounds, swapped when it
  decreases (Delta Lake's own skipping has no such rule);
* a *strict* function (NULL exactly when an argument is NULL): its files
  without / with only NULLs, from its arguments' null counts -- so
  ``(a + 1) IS NOT NULL`` and ``year(d) = 2024`` skip files whose ``a`` or
  ``d`` is all NULL.

On top of the bounds, every leaf is decided *exactly* on the files where
each column it reads takes at most one value besides NULL (``min = max``, or
all NULL): the leaf is evaluated on those few values with Spark's semantics
(:func:`lakelayout.expr.evaluate.evaluate`), whatever function it applies
(``cast(e AS STRING) = '1'``, ``month(d) = 7``, ``lower(s) LIKE '%x%'``).
Floating-point columns are left out (``min = max = 0.0`` may hide ``-0.0``,
which some functions tell apart), and so are functions lakelayout cannot
evaluate (UDFs).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import re
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import LakelayoutError, PredicateError
from lakelayout.expr.coerce import coerce_literal, zone
from lakelayout.expr.evaluate import LEFT_TO_SPARK, evaluable, evaluate, evaluate_term
from lakelayout.expr.like import escape_like, like_prefix
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
    Predicate,
    StartsWith,
    TermCompare,
)
from lakelayout.expr.visitor import PredicateVisitor, TermVisitor
from lakelayout.stats.bounds import has_bounds, nan_to_null, next_string, stats_key
from lakelayout.stats.model import FileStats

ROWS_MIGHT_MATCH = True
ROWS_CANNOT_MATCH = False
ALL_ROWS_MATCH = True
NOT_ALL_ROWS_MATCH = False

IN_LIST_CAP = 200
"""IN lists longer than this are pruned as the range ``[min(list), max(list)]``."""

MAX_EXACT_COLUMNS = 3
"""Leaves reading more columns than this are not evaluated on single-valued files."""

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


# ---------------------------------------------------------------- public API


def might_match(pred: Predicate, stats: FileStats, *, timezone: str = "UTC") -> np.ndarray:
    """Per file: ``False`` only where no row can satisfy ``pred`` (skip), else ``True``.

    A zero-row file never holds a matching row, whatever the predicate.
    ``timezone`` is the session time zone functions of timestamps use.
    """
    keep = MightMatch(stats, timezone).visit(pred)
    return np.asarray(keep & (stats.num_records != 0), dtype=bool)


def all_rows_match(pred: Predicate, stats: FileStats, *, timezone: str = "UTC") -> np.ndarray:
    """Per file: ``True`` only where every row surely satisfies ``pred`` (vacuous for 0 rows)."""
    every = AllRowsMatch(stats, timezone).visit(pred)
    return np.asarray(every | (stats.num_records == 0), dtype=bool)


class GaveUp(Exception):
    """A rule gave up on every file of its call (raised only inside :func:`each_file_alone`)."""


_EACH_FILE_ALONE: ContextVar[bool] = ContextVar("lakelayout_each_file_alone", default=False)


@contextlib.contextmanager
def each_file_alone() -> Iterator[None]:
    """Within it, pruning either decides every file from that file's own statistics or
    raises :class:`GaveUp`.

    The rules are vectorized over the files of one call and decide each file
    from its own statistics, with one exception: a function of a column has
    its bounds (``f(min)``, ``f(max)``) and its exact value on single-valued
    files computed for all files at once, and one file's value that makes it
    fail (``i + 1`` overflowing) makes the rule give up for every file of the
    call. Inside this context that give-up raises instead. So a call that
    returns here gave each file the answer it gets in any call holding it:
    the files of several layouts (virtual files of several candidates) can be
    planned in one call and the answer cut back into each layout's; on
    :class:`GaveUp` they are planned one set at a time. Context-local (a
    :class:`~contextvars.ContextVar`): other threads' planning is unaffected.
    """
    token = _EACH_FILE_ALONE.set(True)
    try:
        yield
    finally:
        _EACH_FILE_ALONE.reset(token)


def _give_up() -> None:
    """A rule is about to give up on every file of its call."""
    if _EACH_FILE_ALONE.get():
        raise GaveUp


@dataclass(frozen=True)
class FileStack:
    """Several sets of files one after the other (:meth:`of`), planned in one call.

    :meth:`keep_each` runs a pruning call over all of them inside
    :func:`each_file_alone` and cuts its answer back into one per set; it
    answers None where a rule gave up, and the caller plans set by set.
    """

    files: FileStats
    #: set ``k`` is ``files[offsets[k]:offsets[k + 1]]``
    offsets: np.ndarray

    @classmethod
    def of(cls, parts: Sequence[FileStats]) -> FileStack:
        """``parts`` stacked; they must share the schema and keep statistics on the same
        columns in the same types (virtual files of one sample always do)."""
        offsets = np.cumsum([0, *(len(part) for part in parts)]).astype(np.int64)
        return cls(FileStats.concat(list(parts)), offsets)

    @classmethod
    def of_any(cls, parts: Sequence[FileStats]) -> FileStack | None:
        """:meth:`of`, or None where the parts cannot be stacked: real files of two
        versions may differ in schema, in the columns with statistics or in their types
        (``FileStats.concat`` refuses the last two)."""
        if any(not part.schema.equals(parts[0].schema) for part in parts[1:]):
            return None
        try:
            return cls.of(parts)
        except (LakelayoutError, pa.ArrowException):
            return None

    def keep_each(self, decide: Callable[[FileStats], np.ndarray]) -> list[np.ndarray] | None:
        """``decide(files)`` (a keep mask) over the stack, split per set; None on give-up."""
        try:
            with each_file_alone():
                keep = np.asarray(decide(self.files), dtype=bool)
        except GaveUp:
            return None
        return [keep[self.offsets[k] : self.offsets[k + 1]] for k in range(len(self.offsets) - 1)]


# ---------------------------------------------------------------- bounds of a term


@dataclass(frozen=True)
class Bounds:
    """One term's bounds over all files, in the type literals are compared in.

    ``low`` / ``high`` are true bounds of the term's non-null values (null =
    unknown); ``no_nulls`` / ``all_nulls`` mark the files known to hold no
    NULL / only NULLs of the term.
    """

    low: pa.Array
    high: pa.Array
    no_nulls: np.ndarray
    all_nulls: np.ndarray

    @property
    def dtype(self) -> pa.DataType:
        return self.low.type

    def scalar(self, value: object) -> pa.Scalar | None:
        """``value`` as a scalar of the term's type, or ``None`` if not exactly representable."""
        return coerce_literal(value, self.dtype)

    def low_vs(self, op: str, scalar: pa.Scalar, unknown: bool) -> np.ndarray:
        """``min op scalar`` per file, ``unknown`` where the min is unknown."""
        return _vector(_COMPARE[op](self.low, scalar), unknown)

    def high_vs(self, op: str, scalar: pa.Scalar, unknown: bool) -> np.ndarray:
        """``max op scalar`` per file, ``unknown`` where the max is unknown."""
        return _vector(_COMPARE[op](self.high, scalar), unknown)


class TermBounds(TermVisitor["Bounds | None"]):
    """Bounds of a term over a snapshot's files; ``None`` when nothing is known.

    Results are cached by the term's SQL, so a term shared by several leaves
    is computed once per evaluation.
    """

    def __init__(self, stats: FileStats, timezone: str) -> None:
        self.stats = stats
        self.timezone = timezone
        self.n = len(stats)
        self._cache: dict[str, Bounds | None] = {}

    def bounds(self, term: Expr) -> Bounds | None:
        key = term.sql()
        if key not in self._cache:
            self._cache[key] = self.visit(term)
        return self._cache[key]

    def visit_column(self, node: Column) -> Bounds | None:
        """The statistics leaf of the column (or struct field)."""
        column = self.stats.column(stats_key(node.parts))
        if column is None:
            return None
        low, high = column.min, column.max
        if pa.types.is_floating(low.type) and low.type != pa.float64():
            low, high = low.cast(pa.float64()), high.cast(pa.float64())
        counts, rows = column.null_count, self.stats.num_records
        return Bounds(
            low,
            high,
            np.asarray(counts == 0),
            np.asarray((counts >= 0) & (counts == rows)),
        )

    def visit_literal(self, node: Literal) -> Bounds | None:
        """A constant: its own bounds in every file (NULL: every file all NULL)."""
        dtype = node.dtype if node.dtype is not None else pa.null()
        scalar = coerce_literal(node.value, dtype) if node.value is not None else None
        if node.value is None or scalar is None:
            nulls = pa.nulls(self.n, dtype)
            known = node.value is None
            return Bounds(nulls, nulls, np.full(self.n, not known), np.full(self.n, known))
        values = pa.repeat(scalar, self.n)
        return Bounds(values, values, np.ones(self.n, dtype=bool), np.zeros(self.n, dtype=bool))

    def visit_func(self, node: Func) -> Bounds | None:
        """Monotonic functions map bounds; strict functions carry null counts."""
        args = [self.bounds(a) for a in node.args]
        no_nulls = np.zeros(self.n, dtype=bool)
        all_nulls = np.zeros(self.n, dtype=bool)
        if is_strict(node):
            no_nulls = np.ones(self.n, dtype=bool)
            for b in args:
                no_nulls &= b.no_nulls if b is not None else False
                all_nulls |= b.all_nulls if b is not None else False
        low_high = self._mapped(node, args)
        if low_high is None and not (no_nulls.any() or all_nulls.any()):
            return None
        if low_high is None:
            dtype = node.dtype if node.dtype is not None else pa.null()
            unknown = pa.nulls(self.n, _bounds_type(dtype))
            low_high = (unknown, unknown)
        return Bounds(low_high[0], low_high[1], no_nulls, all_nulls)

    def _mapped(
        self, node: Func, args: Sequence[Bounds | None]
    ) -> tuple[pa.Array, pa.Array] | None:
        """``(f(min), f(max))`` for a function monotonic in its one non-literal argument."""
        varying = [i for i, a in enumerate(node.args) if not isinstance(a, Literal)]
        if node.name in ("+", "-") and len(varying) == 2:
            return self._sum(node, args)
        if len(varying) != 1:
            return None
        i = varying[0]
        arg = args[i]
        direction = monotonic_direction(node, i, self.timezone)
        if arg is None or direction == 0:
            return None
        lows = self._apply(node, i, arg.low)
        highs = self._apply(node, i, arg.high)
        if lows is None or highs is None:
            return None
        if direction > 0:
            return lows, highs
        # decreasing: f(min) bounds the values above, but not f(NaN) = NaN, which Spark
        # orders above every number: unknown where the argument may hold NaN
        return highs, _unknown_where(lows, _may_hold_nan(arg))

    def _sum(self, node: Func, args: Sequence[Bounds | None]) -> tuple[pa.Array, pa.Array] | None:
        """``a + b`` within ``[min a + min b, max a + max b]``; ``a - b`` alike. A NaN in
        either gives NaN, above every bound: the max is unknown where one may hold NaN."""
        a, b = args
        if a is None or b is None:
            return None
        first, second = (b.low, b.high) if node.name == "+" else (b.high, b.low)
        lows = self._apply_two(node, a.low, first)
        highs = self._apply_two(node, a.high, second)
        if lows is None or highs is None:
            return None
        return lows, _unknown_where(highs, _may_hold_nan(a) | _may_hold_nan(b))

    def _apply(self, node: Func, i: int, values: pa.Array) -> pa.Array | None:
        args = list(node.args)
        args[i] = Column("__bound", values.type)
        return self._evaluate(Func(node.name, tuple(args), node.dtype), {"__bound": values})

    def _apply_two(self, node: Func, left: pa.Array, right: pa.Array) -> pa.Array | None:
        term = Func(node.name, (Column("__a", left.type), Column("__b", right.type)), node.dtype)
        return self._evaluate(term, {"__a": left, "__b": right})

    def _evaluate(self, term: Func, columns: dict[str, pa.Array]) -> pa.Array | None:
        try:
            out = evaluate_term(term, pa.table(columns), timezone=self.timezone)
            target = _bounds_type(out.type)
            return nan_to_null(out if out.type == target else out.cast(target))
        except (PredicateError, pa.ArrowException, TypeError, ValueError, OverflowError):
            _give_up()
            return None


def _may_hold_nan(bounds: Bounds) -> np.ndarray:
    """Per file, whether a floating-point term may be NaN there: its max is unknown (the
    statistics leave it out when a file holds NaN) or NaN itself."""
    high = bounds.high
    if not pa.types.is_floating(high.type):
        return np.zeros(len(high), dtype=bool)
    return _vector(pc.is_nan(high), True)


def _unknown_where(values: pa.Array, mask: np.ndarray) -> pa.Array:
    """``values`` with the bounds of the files in ``mask`` made unknown (null)."""
    if not mask.any():
        return values
    return pc.if_else(pa.array(mask), pa.scalar(None, values.type), values)


def _bounds_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_floating(dtype):
        return pa.float64()
    if pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return pa.string()
    return dtype


#: functions that are NULL exactly when one of their arguments is (under Spark's
#: ANSI mode an error is raised instead of a NULL; ``/`` and ``%`` are left out,
#: as they give NULL on a zero divisor when ANSI mode is off)
STRICT_FUNCTIONS = frozenset(
    {
        "+",
        "-",
        "*",
        "negative",
        "abs",
        "year",
        "quarter",
        "month",
        "dayofmonth",
        "dayofweek",
        "dayofyear",
        "hour",
        "minute",
        "second",
        "lower",
        "upper",
        "length",
        "substring",
        "date_format",
        "cast",
        "to_date",
    }
)
_TRUNC_UNITS = frozenset(
    {
        "YEAR",
        "YYYY",
        "YY",
        "QUARTER",
        "MONTH",
        "MM",
        "MON",
        "WEEK",
        "DAY",
        "DD",
        "HOUR",
        "MINUTE",
        "SECOND",
        "MILLISECOND",
        "MICROSECOND",
    }
)
_BIG_ENDIAN_FIELDS = ("yyyy", "MM", "dd", "HH", "mm", "ss")
_FIELD_RE = re.compile(r"yyyy|MM|dd|HH|mm|ss")


def is_strict(node: Func) -> bool:
    """Whether ``node`` is NULL exactly when one of its arguments is NULL."""
    if node.name == "date_trunc":
        unit = node.args[0]
        return isinstance(unit, Literal) and str(unit.value).upper() in _TRUNC_UNITS
    return node.name in STRICT_FUNCTIONS


def monotonic_direction(node: Func, i: int, timezone: str) -> int:
    """+1 / -1 when ``node`` never decreases / never increases in argument ``i``, else 0.

    Functions of TIMESTAMP (with local time zone) values read the wall clock
    of the session zone, which jumps back at daylight-saving changes: they
    count as monotonic only in a zone with a fixed offset.
    """
    arg_type = getattr(node.args[i], "dtype", None)
    if arg_type is None:
        return 0
    name = node.name
    if name == "+":
        return 1
    if name == "-":
        return 1 if i == 0 else -1
    if name == "negative":
        return -1
    if name == "*":
        other = node.args[1 - i]
        value = other.value if isinstance(other, Literal) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            return 0
        return (value > 0) - (value < 0)
    temporal_ok = not _wall_clock_jumps(arg_type, timezone)
    if name in ("year", "to_date") or (name == "date_trunc" and i == 1):
        return 1 if temporal_ok else 0
    if name == "substring" and i == 0:
        pos = node.args[1]
        lengths = node.args[2:]
        plain = all(isinstance(a, Literal) and isinstance(a.value, int) for a in lengths)
        return 1 if isinstance(pos, Literal) and pos.value in (0, 1) and plain else 0
    if name == "date_format" and i == 0:
        pattern = node.args[1]
        return 1 if temporal_ok and _big_endian(pattern) else 0
    if name == "cast":
        source, target = arg_type, node.dtype
        if target is not None and pa.types.is_string(target):
            ordered = pa.types.is_date(source) or pa.types.is_boolean(source)
            return 1 if ordered or pa.types.is_string(source) else 0
        return 1 if target is not None and pa.types.is_integer(target) else 0
    return 0


def _wall_clock_jumps(dtype: pa.DataType, timezone: str) -> bool:
    if not pa.types.is_timestamp(dtype) or dtype.tz is None:
        return False
    try:
        return not isinstance(zone(timezone), _dt.timezone)
    except PredicateError:
        return True


def _big_endian(pattern: Expr) -> bool:
    """A date_format pattern whose text sorts like the time: fields from years down."""
    if not isinstance(pattern, Literal) or not isinstance(pattern.value, str):
        return False
    fields = _FIELD_RE.findall(pattern.value)
    return bool(fields) and tuple(fields) == _BIG_ENDIAN_FIELDS[: len(fields)]


# ---------------------------------------------------------------- exact on small files


@dataclass(frozen=True)
class Decided:
    """A leaf evaluated exactly on the files where its columns hold one value (or NULLs)."""

    files: np.ndarray  #: files decided
    any_row: np.ndarray  #: some row of the file satisfies the leaf
    every_row: np.ndarray  #: every row does


def decide_on_single_values(leaf: Predicate, stats: FileStats, timezone: str) -> Decided | None:
    """Evaluate ``leaf`` on the values of files whose columns are single-valued.

    A file qualifies when every column the leaf reads has ``min = max`` (one
    value, possibly besides NULLs) or only NULLs. Its rows then take their
    values in a set of at most ``2 ** columns`` combinations, which are all
    evaluated; a null count that is unknown counts as "may be NULL", so the
    set can only be larger than the real one (sound both ways).
    """
    if not evaluable(leaf):
        return None
    columns: dict[str, Column] = {}
    for node in leaf.walk():
        if isinstance(node, Column):
            columns.setdefault(node.sql(), node)
    if not columns or len(columns) > MAX_EXACT_COLUMNS:
        return None
    n = len(stats)
    value_sets = []
    decided = np.ones(n, dtype=bool)
    for node in columns.values():
        stat = stats.column(stats_key(node.parts))
        if stat is None or pa.types.is_floating(stat.min.type):
            return None
        single = np.zeros(n, dtype=bool)
        if has_bounds(stat.min.type):
            single = _vector(pc.equal(stat.min, stat.max), False)
        all_null = (stat.null_count >= 0) & (stat.null_count == stats.num_records)
        may_null = (stat.null_count != 0) | all_null
        has_value = single & ~all_null
        decided &= has_value | all_null
        value_sets.append((stat.min, has_value, may_null))
    decided &= stats.num_records != 0
    if not decided.any():
        return None
    files = np.flatnonzero(decided)
    owners, table = _combinations(files, value_sets)
    renamed = _on_placeholders(leaf, list(columns))
    try:
        hits, known = _evaluate_known(renamed, table, timezone)
    except (PredicateError, pa.ArrowException, TypeError, ValueError, OverflowError):
        _give_up()
        return None
    unknown = np.bincount(owners, weights=~known, minlength=n) > 0
    decided &= ~unknown
    any_row = np.bincount(owners, weights=hits & known, minlength=n) > 0
    misses = np.bincount(owners, weights=~hits & known, minlength=n)
    return Decided(decided, any_row & decided, (misses == 0) & decided)


def _evaluate_known(
    pred: Predicate, table: pa.Table, timezone: str
) -> tuple[np.ndarray, np.ndarray]:
    """``pred`` on every row of ``table``, and which rows it was evaluated on: rows whose
    values only Spark can decide (:data:`LEFT_TO_SPARK`: a time before 1970 in a region
    zone, a letter whose case a newer Unicode may map) are found by halving and left
    unknown; one such value no longer undecided every file (a review). Other errors
    propagate (the caller gives up)."""
    try:
        return evaluate(pred, table, timezone=timezone), np.ones(table.num_rows, dtype=bool)
    except PredicateError as err:
        if LEFT_TO_SPARK not in str(err):
            raise
        if table.num_rows <= 1:
            return np.zeros(table.num_rows, dtype=bool), np.zeros(table.num_rows, dtype=bool)
    half = table.num_rows // 2
    first = _evaluate_known(pred, table.slice(0, half), timezone)
    second = _evaluate_known(pred, table.slice(half), timezone)
    return np.concatenate([first[0], second[0]]), np.concatenate([first[1], second[1]])


def _combinations(
    files: np.ndarray, value_sets: Sequence[tuple[pa.Array, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, pa.Table]:
    """Every (value or NULL) combination the decided files' rows can take, one row each."""
    owners: list[np.ndarray] = []
    parts: list[list[pa.Array]] = [[] for _ in value_sets]
    for combo in range(2 ** len(value_sets)):
        ok = np.ones(len(files), dtype=bool)
        for j, (_, has_value, may_null) in enumerate(value_sets):
            ok &= may_null[files] if combo >> j & 1 else has_value[files]
        chosen = files[ok]
        if not len(chosen):
            continue
        owners.append(chosen)
        take = pa.array(chosen, pa.int64())
        for j, (values, _, _) in enumerate(value_sets):
            picked = values.take(take)
            parts[j].append(pa.nulls(len(chosen), values.type) if combo >> j & 1 else picked)
    columns = {f"__c{j}": pa.concat_arrays(chunks) for j, chunks in enumerate(parts)}
    return np.concatenate(owners), pa.table(columns)


def _on_placeholders(leaf: Predicate, keys: list[str]) -> Predicate:
    def rename(node: Expr) -> Expr:
        if isinstance(node, Column):
            return Column(f"__c{keys.index(node.sql())}", node.dtype)
        return node

    out = leaf.transform(rename)
    assert isinstance(out, Predicate)
    return out


# ---------------------------------------------------------------- might match


class MightMatch(PredicateVisitor[np.ndarray]):
    """``False`` per file only where no row can satisfy the node (one rule per node type)."""

    def __init__(self, stats: FileStats, timezone: str = "UTC") -> None:
        self.stats = stats
        self.timezone = timezone
        self.n = len(stats)
        self.terms = TermBounds(stats, timezone)

    def _fill(self, answer: bool) -> np.ndarray:
        return np.full(self.n, answer, dtype=bool)

    def _leaf(
        self, node: Predicate, keep: np.ndarray, *terms: Expr, exact: bool = True
    ) -> np.ndarray:
        """A value test: NULL terms reject it, and single-valued files decide it exactly.

        ``exact`` False: the bounds rule already decides single-valued files
        exactly (a plain column against a literal of its type), so the leaf
        is not evaluated on their values again.
        """
        for term in terms:
            bounds = self.terms.bounds(term)
            if bounds is not None:
                keep = keep & ~bounds.all_nulls
        decided = decide_on_single_values(node, self.stats, self.timezone) if exact else None
        if decided is not None:
            keep = keep & (decided.any_row | ~decided.files)
        return keep

    def visit_and(self, node: And) -> np.ndarray:
        """AND: a file is skipped when any conjunct skips it."""
        keep = self._fill(ROWS_MIGHT_MATCH)
        for child in node.children_:
            keep &= self.visit(child)
        return keep

    def visit_or(self, node: Or) -> np.ndarray:
        """OR: a file is skipped only when every disjunct skips it."""
        if not node.children_:
            return self._fill(ROWS_MIGHT_MATCH)
        keep = self._fill(ROWS_CANNOT_MATCH)
        for child in node.children_:
            keep |= self.visit(child)
        return keep

    def visit_not(self, node: Not) -> np.ndarray:
        """An unpushed NOT (over something opaque): nothing is known, keep every file."""
        return self._fill(ROWS_MIGHT_MATCH)

    def visit_opaque(self, node: Opaque) -> np.ndarray:
        """Text lakelayout does not understand never skips a file."""
        return self._fill(ROWS_MIGHT_MATCH)

    def visit_bool_const(self, node: BoolConst) -> np.ndarray:
        """TRUE keeps every file; FALSE and NULL (no row is kept) none."""
        return self._fill(ROWS_MIGHT_MATCH if node.value else ROWS_CANNOT_MATCH)

    def visit_compare(self, node: Compare) -> np.ndarray:
        """``t op v`` can match where ``[min, max]`` holds a value that satisfies it.

        ``=`` needs ``min <= v <= max``; ``<`` needs ``min < v``; ``>`` needs
        ``max > v``; ``!=`` fails only where ``min = max = v`` (nulls never match).
        """
        if node.value.value is None:
            return self._fill(ROWS_CANNOT_MATCH)
        keep = self._fill(ROWS_MIGHT_MATCH)
        bounds = self.terms.bounds(node.term)
        scalar = None if bounds is None else bounds.scalar(node.value.value)
        if bounds is not None and scalar is not None:
            keep = _might_compare_scalar(node.op, bounds, scalar)
        decided = isinstance(node.term, Column) and scalar is not None
        return self._leaf(node, keep, node.term, exact=not decided)

    def visit_term_compare(self, node: TermCompare) -> np.ndarray:
        """``l op r`` between two terms: their ranges must allow it (same type only)."""
        keep = self._fill(ROWS_MIGHT_MATCH)
        left, right = self.terms.bounds(node.left), self.terms.bounds(node.right)
        if left is not None and right is not None and left.dtype.equals(right.dtype):
            keep = _might_compare_ranges(node.op, left, right)
        return self._leaf(node, keep, node.left, node.right)

    def visit_in(self, node: In) -> np.ndarray:
        """IN can match where some listed value lies in ``[min, max]``.

        NOT IN fails only where ``min = max`` and that one value is listed, or when
        the list holds NULL (``x NOT IN (.., NULL)`` is never TRUE).
        """
        raw = [lit.value for lit in node.values]
        if node.negated and any(v is None for v in raw):
            return self._fill(ROWS_CANNOT_MATCH)
        raw = [v for v in raw if v is not None]
        if not raw:
            return self._fill(ROWS_CANNOT_MATCH)
        keep = self._fill(ROWS_MIGHT_MATCH)
        bounds = self.terms.bounds(node.term)
        exact = True
        if bounds is not None:
            scalars = [bounds.scalar(v) for v in raw]
            listed = [s for s in scalars if s is not None]
            if node.negated:
                keep = ~_single_listed_value(bounds, listed)
            elif len(listed) == len(scalars):
                keep = _range_holds_any(bounds, listed)
                if len(listed) > IN_LIST_CAP:  # pruned as its range: decide one-value files
                    keep &= ~_single_value_not_listed(bounds, listed)
            exact = not isinstance(node.term, Column) or len(listed) < len(scalars)
        return self._leaf(node, keep, node.term, exact=exact)

    def visit_is_null(self, node: IsNull) -> np.ndarray:
        """IS NULL fails where the term has no NULL; IS NOT NULL where it is all NULL."""
        keep = self._fill(ROWS_MIGHT_MATCH)
        bounds = self.terms.bounds(node.term)
        if bounds is not None:
            keep = ~(bounds.all_nulls if node.negated else bounds.no_nulls)
        return self._leaf(node, keep, exact=not isinstance(node.term, Column))

    def visit_starts_with(self, node: StartsWith) -> np.ndarray:
        """Values starting with ``p`` fill the range ``[p, next(p))``.

        ``startswith(c, p)`` can match where ``[min, max]`` meets that range; its
        negation fails where ``[min, max]`` lies inside it (true bounds suffice:
        truncation only widens them).
        """
        keep = self._fill(ROWS_MIGHT_MATCH)
        bounds = self._string_bounds(node.term)
        if bounds is not None:
            if node.negated:
                keep = ~_prefix_range(bounds, node.prefix, unknown=False)
            else:
                keep = _meets_prefix_range(bounds, node.prefix)
        plain = isinstance(node.term, Column) and bounds is not None
        return self._leaf(node, keep, node.term, exact=not plain)

    def visit_ends_with(self, node: EndsWith) -> np.ndarray:
        """Suffixes say nothing about the order of values: keep (nulls aside)."""
        return self._leaf(node, self._fill(ROWS_MIGHT_MATCH), node.term)

    def visit_like(self, node: Like) -> np.ndarray:
        """LIKE: a pattern without wildcards is ``=``; else its literal prefix is a range."""
        keep = self._fill(ROWS_MIGHT_MATCH)
        parsed = None if node.negated else like_prefix(node.pattern)
        bounds = self._string_bounds(node.term)
        if parsed is not None and bounds is not None:
            prefix, exact = parsed
            if exact:
                keep = _might_compare_scalar("=", bounds, pa.scalar(prefix, bounds.dtype))
            else:
                keep = _meets_prefix_range(bounds, prefix)
        return self._leaf(node, keep, node.term)

    def visit_bool_term(self, node: BoolTerm) -> np.ndarray:
        """A BOOLEAN column used as a predicate is ``c = TRUE`` (``c = FALSE`` when negated)."""
        keep = self._fill(ROWS_MIGHT_MATCH)
        bounds = self.terms.bounds(node.term)
        plain = bounds is not None and pa.types.is_boolean(bounds.dtype)
        if bounds is not None and plain:
            keep = _might_compare_scalar("=", bounds, pa.scalar(not node.negated))
        return self._leaf(
            node, keep, node.term, exact=not (plain and isinstance(node.term, Column))
        )

    def _string_bounds(self, term: Expr) -> Bounds | None:
        bounds = self.terms.bounds(term)
        if bounds is None or not pa.types.is_string(bounds.dtype):
            return None
        return bounds


def _might_compare_scalar(op: str, b: Bounds, v: pa.Scalar) -> np.ndarray:
    keep = ROWS_MIGHT_MATCH
    if op == "=":
        return b.low_vs("<=", v, keep) & b.high_vs(">=", v, keep)
    if op in ("<", "<="):
        return b.low_vs(op, v, keep)
    if op in (">", ">="):
        return b.high_vs(op, v, keep)
    if op == "!=":
        return ~(b.low_vs("=", v, not keep) & b.high_vs("=", v, not keep))
    return np.full(len(b.no_nulls), keep, dtype=bool)


def _might_compare_ranges(op: str, a: Bounds, b: Bounds) -> np.ndarray:
    """``a op b`` for some pair of values in ``[a.low, a.high] x [b.low, b.high]``."""
    keep = ROWS_MIGHT_MATCH
    if op in ("<", "<="):
        return _vector(_COMPARE[op](a.low, b.high), keep)
    if op in (">", ">="):
        return _vector(_COMPARE[op](a.high, b.low), keep)
    if op == "=":
        return _vector(pc.less_equal(a.low, b.high), keep) & _vector(
            pc.less_equal(b.low, a.high), keep
        )
    if op == "!=":
        points = _vector(pc.equal(a.low, a.high), False) & _vector(pc.equal(b.low, b.high), False)
        return ~(points & _vector(pc.equal(a.low, b.low), False))
    return np.full(len(a.no_nulls), keep, dtype=bool)


def _single_listed_value(b: Bounds, listed: Sequence[pa.Scalar]) -> np.ndarray:
    """Files whose every non-null value is one value of ``listed`` (``min = max``, listed)."""
    if not listed:
        return np.zeros(len(b.no_nulls), dtype=bool)
    same = _vector(pc.equal(b.low, b.high), False)
    return same & _vector(_listed(b.low, pa.array(list(listed), type=b.dtype)), False)


def _single_value_not_listed(b: Bounds, listed: Sequence[pa.Scalar]) -> np.ndarray:
    """Files whose every non-null value is one value (``min = max``) that is not in ``listed``."""
    same = _vector(pc.equal(b.low, b.high), False)
    return same & ~_vector(_listed(b.low, pa.array(list(listed), type=b.dtype)), True)


def _listed(values: pa.Array, listed: pa.Array) -> pa.Array:
    """Which ``values`` equal one of ``listed``, as SQL's ``=`` says: ``pc.is_in`` hashes a
    float's bits, so -0.0 was not 0.0 (Spark: equal) and a file of -0.0 was skipped by
    ``IN (0.0, ...)`` and dropped unread by a DELETE ``NOT IN``: an audit)."""
    if pa.types.is_floating(values.type):
        values, listed = _canonical_floats(values), _canonical_floats(listed)
    return pc.is_in(values, value_set=listed)


def _canonical_floats(array: pa.Array) -> pa.Array:
    """``array`` with -0.0 as 0.0 and every NaN as one NaN (nulls stay)."""
    zeroed = pc.add(array, pa.scalar(0.0, array.type))  # -0.0 + 0.0 is 0.0
    return pc.if_else(pc.is_nan(zeroed), pa.scalar(float("nan"), array.type), zeroed)


def _range_holds_any(b: Bounds, values: Sequence[pa.Scalar]) -> np.ndarray:
    """Files whose ``[min, max]`` contains at least one of ``values`` (unknown -> True).

    Sorted values and a binary search per file: the first value ``>= min`` is
    the only candidate that needs ``<= max``. Lists beyond :data:`IN_LIST_CAP`
    collapse to their range.
    """
    array = pc.unique(pa.array(list(values), type=b.dtype))
    array = array.take(pc.sort_indices(array))
    if len(array) > IN_LIST_CAP:
        low, high = array[0], array[len(array) - 1]
        return b.low_vs("<=", high, True) & b.high_vs(">=", low, True)
    low_known = _vector(pc.is_valid(b.low), False)
    high_known = _vector(pc.is_valid(b.high), False)
    sorted_values, lows, highs = _sortable_together(
        array, pc.fill_null(b.low, array[0]), pc.fill_null(b.high, array[0])
    )
    first = np.searchsorted(sorted_values, lows, side="left")
    first = np.where(low_known, first, 0)
    exists = first < len(sorted_values)
    candidate = sorted_values[np.minimum(first, len(sorted_values) - 1)]
    fits = np.asarray(candidate <= highs, dtype=bool)
    return np.asarray(exists & (~high_known | fits), dtype=bool)


def _sortable_together(*arrays: pa.Array | pa.ChunkedArray) -> list[np.ndarray]:
    """:func:`_sortable` of each of ``arrays`` (one type), comparable across them.

    Decimals of up to 38 digits without nulls become their exact ranks in the
    values of all the arrays together: each 16-byte value is a signed high word
    and an unsigned low word (two's complement, one scale for one type), sorted
    by the pair. A rank compares as the decimal does, and numpy searches int64
    about 30× faster than ``Decimal`` objects (B5: an IN list of 50 decimals
    over 100,000 files took 0.15 s).
    """
    flat = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    if not pa.types.is_decimal128(flat[0].type) or any(a.null_count for a in flat):
        return [_sortable(a) for a in flat]
    words = np.concatenate(
        [
            np.frombuffer(a.buffers()[1], dtype="<u8").reshape(-1, 2)[a.offset : a.offset + len(a)]
            for a in flat
        ]
    )
    low, high = words[:, 0], words[:, 1].view("<i8")
    order = np.lexsort((low, high))
    ordered_low, ordered_high = low[order], high[order]
    step = (ordered_low[1:] != ordered_low[:-1]) | (ordered_high[1:] != ordered_high[:-1])
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.concatenate(([0], np.cumsum(step)))
    bounds = np.cumsum([0, *(len(a) for a in flat)])
    return [ranks[bounds[i] : bounds[i + 1]] for i in range(len(flat))]


def _sortable(arr: pa.Array) -> np.ndarray:
    """A numpy array ordered like the Arrow values (physical ints for dates and times).

    Decimals become Python ``Decimal`` objects (exact; numpy compares them as
    objects): Arrow's cast to float64 is not correctly rounded, and 38-digit
    values one unit apart share a double, which would blur the search
    (:func:`_sortable_together` ranks DECIMAL(p ≤ 38) exactly and faster).
    """
    t = arr.type
    if pa.types.is_decimal(t):
        return np.array(arr.to_pylist(), dtype=object)
    if pa.types.is_timestamp(t) or pa.types.is_date64(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    elif pa.types.is_boolean(t):
        arr = arr.cast(pa.int8())
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _meets_prefix_range(b: Bounds, prefix: str) -> np.ndarray:
    keep = b.high_vs(">=", pa.scalar(prefix, b.dtype), ROWS_MIGHT_MATCH)
    upper = next_string(prefix)
    if upper is not None:
        keep &= b.low_vs("<", pa.scalar(upper, b.dtype), ROWS_MIGHT_MATCH)
    return keep


def _prefix_range(b: Bounds, prefix: str, *, unknown: bool) -> np.ndarray:
    """Files whose ``[min, max]`` lies within ``[prefix, next(prefix))``."""
    inside = b.low_vs(">=", pa.scalar(prefix, b.dtype), unknown)
    upper = next_string(prefix)
    if upper is not None:
        inside &= b.high_vs("<", pa.scalar(upper, b.dtype), unknown)
    return inside


def _vector(mask: pa.Array | pa.ChunkedArray, unknown: bool) -> np.ndarray:
    """A nullable Arrow boolean result as numpy, nulls (unknown bounds) set to ``unknown``."""
    filled = pc.fill_null(mask, unknown)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)


# ---------------------------------------------------------------- all rows match


class AllRowsMatch(PredicateVisitor[np.ndarray]):
    """``True`` per file only where every row surely satisfies the node (one rule per type)."""

    def __init__(self, stats: FileStats, timezone: str = "UTC") -> None:
        self.stats = stats
        self.timezone = timezone
        self.n = len(stats)
        self.terms = TermBounds(stats, timezone)

    def _fill(self, answer: bool) -> np.ndarray:
        return np.full(self.n, answer, dtype=bool)

    def _leaf(self, node: Predicate, every: np.ndarray, *, exact: bool = True) -> np.ndarray:
        """Single-valued files decide a value test exactly (unless the bounds rule already did)."""
        decided = decide_on_single_values(node, self.stats, self.timezone) if exact else None
        if decided is None:
            return every
        return every | decided.every_row

    def _present(self, term: Expr) -> tuple[Bounds | None, np.ndarray]:
        """The term's bounds, and the files where it is surely never NULL."""
        bounds = self.terms.bounds(term)
        return bounds, (bounds.no_nulls if bounds is not None else self._fill(False))

    def visit_and(self, node: And) -> np.ndarray:
        every = self._fill(ALL_ROWS_MATCH)
        for child in node.children_:
            every &= self.visit(child)
        return every

    def visit_or(self, node: Or) -> np.ndarray:
        """OR: every row matches when one disjunct matches every row (sufficient, not necessary)."""
        every = self._fill(NOT_ALL_ROWS_MATCH)
        for child in node.children_:
            every |= self.visit(child)
        return every

    def visit_not(self, node: Not) -> np.ndarray:
        return self._fill(NOT_ALL_ROWS_MATCH)

    def visit_opaque(self, node: Opaque) -> np.ndarray:
        return self._fill(NOT_ALL_ROWS_MATCH)

    def visit_bool_const(self, node: BoolConst) -> np.ndarray:
        return self._fill(ALL_ROWS_MATCH if node.value else NOT_ALL_ROWS_MATCH)

    def visit_compare(self, node: Compare) -> np.ndarray:
        """``t op v`` holds for every row when no row is NULL and ``[min, max]`` satisfies it."""
        every = self._fill(NOT_ALL_ROWS_MATCH)
        bounds, present = self._present(node.term)
        scalar = None if bounds is None else bounds.scalar(node.value.value)
        if bounds is not None and scalar is not None:
            every = present & _strict_compare_scalar(node.op, bounds, scalar)
        plain = isinstance(node.term, Column) and scalar is not None
        return self._leaf(node, every, exact=not plain)

    def visit_term_compare(self, node: TermCompare) -> np.ndarray:
        """``l op r`` for every row when both are never NULL and the ranges force it."""
        every = self._fill(NOT_ALL_ROWS_MATCH)
        left, right = self.terms.bounds(node.left), self.terms.bounds(node.right)
        if left is not None and right is not None and left.dtype.equals(right.dtype):
            present = left.no_nulls & right.no_nulls
            every = present & _strict_compare_ranges(node.op, left, right)
        return self._leaf(node, every)

    def visit_in(self, node: In) -> np.ndarray:
        """IN: one listed value and no NULL; NOT IN: no listed value in ``[min, max]``, no NULL."""
        raw = [lit.value for lit in node.values]
        every = self._fill(NOT_ALL_ROWS_MATCH)
        bounds, present = self._present(node.term)
        if bounds is None or (node.negated and any(v is None for v in raw)):
            return self._leaf(node, every)
        scalars = [bounds.scalar(v) for v in raw if v is not None]
        listed = [s for s in scalars if s is not None]
        if not node.negated:
            every = present & _single_listed_value(bounds, listed)
        elif len(listed) == len(scalars):
            known = _vector(pc.and_(pc.is_valid(bounds.low), pc.is_valid(bounds.high)), False)
            every = present & known
            if listed:
                every &= ~_range_holds_any(bounds, listed)
            if len(listed) > IN_LIST_CAP:  # pruned as its range: decide one-value files
                every |= present & _single_value_not_listed(bounds, listed)
        plain = isinstance(node.term, Column) and len(listed) == len(scalars)
        return self._leaf(node, every, exact=not plain)

    def visit_is_null(self, node: IsNull) -> np.ndarray:
        every = self._fill(NOT_ALL_ROWS_MATCH)
        bounds = self.terms.bounds(node.term)
        if bounds is not None:
            every = bounds.no_nulls if node.negated else bounds.all_nulls
        return self._leaf(node, every, exact=not isinstance(node.term, Column))

    def visit_starts_with(self, node: StartsWith) -> np.ndarray:
        """Every row starts with ``p`` when ``[min, max]`` lies in ``[p, next(p))``; negated: outside."""
        every = self._fill(NOT_ALL_ROWS_MATCH)
        bounds, present = self._present(node.term)
        if bounds is not None and pa.types.is_string(bounds.dtype):
            if not node.negated:
                every = present & _prefix_range(bounds, node.prefix, unknown=False)
            else:
                scalar = pa.scalar(node.prefix, bounds.dtype)
                outside = bounds.high_vs("<", scalar, NOT_ALL_ROWS_MATCH)
                upper = next_string(node.prefix)
                if upper is not None:
                    upper_scalar = pa.scalar(upper, bounds.dtype)
                    outside |= bounds.low_vs(">=", upper_scalar, NOT_ALL_ROWS_MATCH)
                every = present & outside
        plain = isinstance(node.term, Column) and bounds is not None
        return self._leaf(node, every, exact=not plain)

    def visit_ends_with(self, node: EndsWith) -> np.ndarray:
        """Bounds say nothing about suffixes: only single-valued files decide."""
        return self._leaf(node, self._fill(NOT_ALL_ROWS_MATCH))

    def visit_like(self, node: Like) -> np.ndarray:
        """LIKE 'text' is ``=``; LIKE 'prefix%' is a prefix test; other patterns: unknown."""
        every = self._fill(NOT_ALL_ROWS_MATCH)
        parsed = None if node.negated else like_prefix(node.pattern)
        bounds, present = self._present(node.term)
        if parsed is not None and bounds is not None and pa.types.is_string(bounds.dtype):
            prefix, exact = parsed
            if exact:
                scalar = pa.scalar(prefix, bounds.dtype)
                every = present & _strict_compare_scalar("=", bounds, scalar)
            elif node.pattern == escape_like(prefix) + "%":
                every = present & _prefix_range(bounds, prefix, unknown=False)
        return self._leaf(node, every)

    def visit_bool_term(self, node: BoolTerm) -> np.ndarray:
        every = self._fill(NOT_ALL_ROWS_MATCH)
        bounds, present = self._present(node.term)
        plain = bounds is not None and pa.types.is_boolean(bounds.dtype)
        if bounds is not None and plain:
            scalar = pa.scalar(not node.negated)
            every = present & _strict_compare_scalar("=", bounds, scalar)
        return self._leaf(node, every, exact=not (plain and isinstance(node.term, Column)))


def _strict_compare_scalar(op: str, b: Bounds, v: pa.Scalar) -> np.ndarray:
    no = NOT_ALL_ROWS_MATCH
    if op == "=":
        return b.low_vs("=", v, no) & b.high_vs("=", v, no)
    if op in ("<", "<="):
        return b.high_vs(op, v, no)
    if op in (">", ">="):
        return b.low_vs(op, v, no)
    if op == "!=":
        return b.high_vs("<", v, no) | b.low_vs(">", v, no)
    return np.zeros(len(b.no_nulls), dtype=bool)


def _strict_compare_ranges(op: str, a: Bounds, b: Bounds) -> np.ndarray:
    """``a op b`` for every pair of values in ``[a.low, a.high] x [b.low, b.high]``."""
    no = NOT_ALL_ROWS_MATCH
    if op in ("<", "<="):
        return _vector(_COMPARE[op](a.high, b.low), no)
    if op in (">", ">="):
        return _vector(_COMPARE[op](a.low, b.high), no)
    if op == "!=":
        return _vector(pc.less(a.high, b.low), no) | _vector(pc.greater(a.low, b.high), no)
    return np.zeros(len(a.no_nulls), dtype=bool)


__all__ = [
    "ALL_ROWS_MATCH",
    "IN_LIST_CAP",
    "NOT_ALL_ROWS_MATCH",
    "ROWS_CANNOT_MATCH",
    "ROWS_MIGHT_MATCH",
    "AllRowsMatch",
    "Bounds",
    "MightMatch",
    "TermBounds",
    "all_rows_match",
    "decide_on_single_values",
    "is_strict",
    "might_match",
    "monotonic_direction",
]
