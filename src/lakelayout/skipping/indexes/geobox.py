"""GeoBox: a few bounding boxes covering a file's (lat, lng) points (Table I, Fig. 5).

Per file, up to ``boxes`` axis-aligned boxes whose union covers every point
with both coordinates non-null. Within a batch the points are sorted along the
longer axis and cut into equal-count runs (no k-means); across batches the
pair of boxes whose union grows the covered area least is merged until at
most ``boxes`` remain. NaN (above every number in Spark) is stored as +inf;
bounds are widened outward by one ulp after the cast to double.

It labels the bounding-box function lakelayout defines,
``st_within_box(lat, lng, lat_min, lat_max, lng_min, lng_max)`` -- TRUE iff
``lat BETWEEN lat_min AND lat_max AND lng BETWEEN lng_min AND lng_max`` -- and,
like the paper's GeoBox filter, AND nodes whose children bound both
coordinates. A file can match only if one of its boxes meets the query box.
Queries on one coordinate are left to min/max (rows with the other coordinate
NULL are not in any box).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.errors import InvalidOption, PredicateError
from lakelayout.expr.evaluate import evaluate_term
from lakelayout.expr.nodes import (
    And,
    BoolTerm,
    Column,
    Compare,
    Expr,
    Func,
    Literal,
    Predicate,
)
from lakelayout.expr.parse import parse_term
from lakelayout.skipping.indexes.base import (
    Batch,
    Clause,
    Index,
    Udf,
    check_int,
    null_mask,
    register,
    type_family,
    value_type,
)

WITHIN_BOX = "st_within_box"
"""Name of lakelayout's bounding-box predicate function."""
WITHIN_BOX_FUNCTIONS: dict[str, pa.DataType] = {WITHIN_BOX: pa.bool_()}
"""Pass as ``functions=`` to :func:`~lakelayout.expr.parse.parse_predicate`."""

Box = tuple[float, float, float, float]  # lat_min, lat_max, lng_min, lng_max
_INF = math.inf


def within_box_predicate(lat: Expr, lng: Expr, box: Box) -> Predicate:
    """``st_within_box`` spelled as comparisons (what it means; used to evaluate rows).

    >>> within_box_predicate(Column("a"), Column("b"), (1.0, 2.0, 3.0, 4.0)).sql()
    '(a >= 1.0D AND a <= 2.0D AND b >= 3.0D AND b <= 4.0D)'
    """
    lat_min, lat_max, lng_min, lng_max = box
    f64 = pa.float64()
    return And(
        (
            Compare(">=", lat, Literal(float(lat_min), f64)),
            Compare("<=", lat, Literal(float(lat_max), f64)),
            Compare(">=", lng, Literal(float(lng_min), f64)),
            Compare("<=", lng, Literal(float(lng_max), f64)),
        )
    )


def expand_within_box(pred: Predicate) -> Predicate:
    """Replace every ``st_within_box(...)`` leaf by its comparisons (others unchanged)."""
    out = pred.transform(_expand_one)
    assert isinstance(out, Predicate)
    return out


def _expand_one(node: Expr) -> Expr:
    if not isinstance(node, Predicate):
        return node
    box = _within_box_args(node)
    if box is None:
        return node
    lat, lng, bounds = box
    expanded = within_box_predicate(lat, lng, bounds)
    return expanded.negate() if isinstance(node, BoolTerm) and node.negated else expanded


def _within_box_args(pred: Predicate) -> tuple[Expr, Expr, Box] | None:
    if not isinstance(pred, BoolTerm) or not isinstance(pred.term, Func):
        return None
    func = pred.term
    if func.name != WITHIN_BOX or len(func.args) != 6:
        return None
    numbers = []
    for arg in func.args[2:]:
        if not isinstance(arg, Literal) or arg.value is None or isinstance(arg.value, bool):
            return None
        try:
            numbers.append(float(arg.value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    return func.args[0], func.args[1], (numbers[0], numbers[1], numbers[2], numbers[3])


@register
class GeoBox(Index):
    """Bounding boxes of the (lat, lng) points of each file.

    >>> idx = GeoBox("lat", "lng", boxes=2).bind(pa.schema([("lat", pa.float64()), ("lng", pa.float64())]))
    >>> len(idx.collect(pa.table({"lat": [0.0, 1.0, 50.0, 51.0], "lng": [0.0, 1.0, 9.0, 8.0]})))
    2
    """

    kind = "geobox"

    def __init__(self, lat: str, lng: str, *, boxes: int = 4) -> None:
        for what, text in (("lat", lat), ("lng", lng)):
            if not isinstance(text, str) or not text.strip():
                raise InvalidOption(f"GeoBox needs a {what} expression, got {text!r}")
        check_int("GeoBox", "boxes", boxes)
        self.lat_text, self.lng_text, self.boxes = lat, lng, boxes
        self._terms: tuple[Expr, Expr] | None = None

    @property
    def key(self) -> str:
        if self._terms is not None:
            return f"{self._terms[0].sql()}, {self._terms[1].sql()}"
        return f"{self.lat_text.strip()}, {self.lng_text.strip()}"

    @property
    def terms(self) -> tuple[Expr, Expr]:
        if self._terms is None:
            raise InvalidOption(f"index {self.name} is not bound: call bind(schema) first")
        return self._terms

    def columns(self) -> frozenset[str] | None:
        if self._terms is None:
            return None
        return self._terms[0].columns() | self._terms[1].columns()

    def bind(self, schema: pa.Schema) -> GeoBox:
        terms = tuple(parse_term(t, schema) for t in (self.lat_text, self.lng_text))
        for term in terms:
            dtype = value_type(term.dtype if term.dtype is not None else pa.null())
            if not (
                pa.types.is_integer(dtype)
                or pa.types.is_floating(dtype)
                or pa.types.is_decimal(dtype)
            ):
                what = "column" if isinstance(term, Column) else "expression"
                raise InvalidOption(
                    f"GeoBox cannot index {type_family(dtype)} {what} '{term.sql()}': "
                    "latitude and longitude must be numbers"
                )
        bound = copy.copy(self)
        bound._terms = (terms[0], terms[1])
        return bound

    @property
    def arrow_type(self) -> pa.DataType:
        f64 = pa.float64()
        return pa.list_(
            pa.struct([("lat_min", f64), ("lat_max", f64), ("lng_min", f64), ("lng_max", f64)])
        )

    def collector(self) -> _BoxCollector:
        return _BoxCollector(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expression": [self.lat_text, self.lng_text],
            "params": {"boxes": self.boxes},
        }

    @classmethod
    def from_params(
        cls, expression: Any, params: dict[str, Any], udfs: Mapping[str, Udf] | None
    ) -> Index:
        if not isinstance(expression, (list, tuple)) or len(expression) != 2:
            raise InvalidOption(f"GeoBox expects [lat, lng] as its expression, got {expression!r}")
        return cls(str(expression[0]), str(expression[1]), **params)

    # ------------------------------------------------------------ labelling

    def label(self, node: Predicate) -> Clause | None:
        box = self.query_box(node)
        return None if box is None else BoxClause(box)

    def query_box(self, node: Predicate) -> Box | None:
        """The box a node confines (lat, lng) to, when it constrains both; else None."""
        parts = node.children_ if isinstance(node, And) else (node,)
        bounds = [-_INF, _INF, -_INF, _INF]
        constrained = [False, False]
        lat_key, lng_key = (t.sql() for t in self.terms)
        for part in parts:
            args = _within_box_args(part)
            if args is not None and not part.negated:  # type: ignore[attr-defined]
                if (args[0].sql(), args[1].sql()) == (lat_key, lng_key):
                    _intersect(bounds, args[2])
                    constrained = [True, True]
                continue
            if isinstance(part, Compare) and part.op != "!=":
                axis = {lat_key: 0, lng_key: 1}.get(part.term.sql())
                number = _number(part.value)
                if axis is not None and number is not None:
                    _constrain(bounds, axis, part.op, number)
                    constrained[axis] = True
        if not all(constrained):
            return None
        return (bounds[0], bounds[1], bounds[2], bounds[3])


def _number(lit: Literal) -> float | None:
    value = lit.value
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _intersect(bounds: list[float], box: Box) -> None:
    if any(math.isnan(v) for v in box):
        return
    bounds[0] = max(bounds[0], math.nextafter(box[0], -_INF))
    bounds[1] = min(bounds[1], math.nextafter(box[1], _INF))
    bounds[2] = max(bounds[2], math.nextafter(box[2], -_INF))
    bounds[3] = min(bounds[3], math.nextafter(box[3], _INF))


def _constrain(bounds: list[float], axis: int, op: str, number: float) -> None:
    low, high = 2 * axis, 2 * axis + 1
    if op in ("=", ">", ">="):
        bounds[low] = max(bounds[low], math.nextafter(number, -_INF))
    if op in ("=", "<", "<="):
        bounds[high] = min(bounds[high], math.nextafter(number, _INF))


class _BoxCollector:
    def __init__(self, index: GeoBox) -> None:
        self.index = index
        self.boxes: list[Box] = []
        self.failed = False

    def add(self, batch: Batch) -> None:
        try:
            lat, lng = (evaluate_term(t, batch) for t in self.index.terms)
        except (PredicateError, pa.ArrowException, ValueError, TypeError):
            self.failed = True
            return
        points = _points(lat, lng)
        if len(points):
            self.boxes = _reduce(self.boxes + _split(points, self.index.boxes), self.index.boxes)

    def result(self) -> list[dict[str, float]] | None:
        if self.failed:
            return None
        return [
            {
                "lat_min": math.nextafter(b[0], -_INF),
                "lat_max": math.nextafter(b[1], _INF),
                "lng_min": math.nextafter(b[2], -_INF),
                "lng_max": math.nextafter(b[3], _INF),
            }
            for b in self.boxes
        ]


def _points(lat: pa.Array, lng: pa.Array) -> np.ndarray:
    """``(n, 2)`` float64 points with both coordinates non-null; NaN -> +inf."""
    both = pc.and_(pc.is_valid(lat), pc.is_valid(lng))
    cols = []
    for arr in (lat, lng):
        values = arr.filter(both).cast(pa.float64())
        data = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
        cols.append(np.where(np.isnan(data), np.inf, data))
    return np.column_stack(cols) if cols[0].size else np.zeros((0, 2))


def _split(points: np.ndarray, boxes: int) -> list[Box]:
    """Equal-count runs along the longer axis, one bounding box each."""
    with np.errstate(invalid="ignore", over="ignore"):
        extent = np.nan_to_num(points.max(axis=0) - points.min(axis=0), nan=np.inf)
    axis = int(np.argmax(extent))
    ordered = points[np.argsort(points[:, axis], kind="stable")]
    out: list[Box] = []
    for run in np.array_split(ordered, min(boxes, len(ordered))):
        low, high = run.min(axis=0), run.max(axis=0)
        out.append((float(low[0]), float(high[0]), float(low[1]), float(high[1])))
    return out


def _area(b: Box) -> float:
    with np.errstate(invalid="ignore", over="ignore"):
        area = (b[1] - b[0]) * (b[3] - b[2])
    return math.inf if math.isnan(area) else area


def _union(a: Box, b: Box) -> Box:
    return (min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3]))


def _reduce(boxes: list[Box], limit: int) -> list[Box]:
    """Merge the pair with the least added area until at most ``limit`` boxes remain."""
    boxes = list(boxes)
    while len(boxes) > limit:
        best: tuple[float, int, int] | None = None
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                cost = _area(_union(boxes[i], boxes[j])) - _area(boxes[i]) - _area(boxes[j])
                cost = math.inf if math.isnan(cost) else cost
                if best is None or cost < best[0]:
                    best = (cost, i, j)
        assert best is not None
        _, i, j = best
        merged = _union(boxes[i], boxes[j])
        boxes = [b for k, b in enumerate(boxes) if k not in (i, j)] + [merged]
    return boxes


class BoxClause(Clause):
    """Some stored box meets the query box (closed intervals)."""

    def __init__(self, box: Box) -> None:
        self.box = box

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        flat = pc.list_flatten(meta)
        if len(flat) == 0:
            return null_mask(meta)
        lat_min, lat_max, lng_min, lng_max = (
            np.asarray(f.to_numpy(zero_copy_only=False), dtype=np.float64) for f in flat.flatten()
        )
        q = self.box
        hit = (lat_min <= q[1]) & (lat_max >= q[0]) & (lng_min <= q[3]) & (lng_max >= q[2])
        parents = np.asarray(pc.list_parent_indices(meta).to_numpy(zero_copy_only=False))
        out = np.zeros(len(meta), dtype=bool)
        out[parents[hit]] = True
        return out | null_mask(meta)
