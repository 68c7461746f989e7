"""RangeRanks: quantile boundaries, Spark order (numbers < NaN < NULL), JSON, types."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelayout.errors import LayoutError
from lakelayout.layouts.ranks import (
    Dimension,
    RangeRanks,
    count_preceding,
    resolve_dimensions,
    target_block_count,
)

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))


def roundtrip(ranks: RangeRanks) -> RangeRanks:
    return RangeRanks.from_dict(json.loads(json.dumps(ranks.to_dict(), allow_nan=False)))


def spark_key(value: object) -> tuple[int, object]:
    """Sort key of Spark's ascending order: values, then NaN, then NULL."""
    if value is None:
        return (2, 0)
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)


def test_nulls_get_their_own_last_rank() -> None:
    ranks = RangeRanks.fit(pa.array([1, 2, 3, None, None]), bits=4)
    out = ranks.transform(pa.array([None, 1, 3, 1000]))
    assert out[0] == 15
    assert out[1:].max() < 15


def test_nan_above_every_number_and_below_null() -> None:
    sample = pa.array([-np.inf, -1.0, 0.0, 2.5, np.inf, np.nan, None])
    ranks = RangeRanks.fit(sample, bits=4)
    out = ranks.transform(pa.array([np.inf, np.nan, None, 1e308]))
    assert out[0] < out[1] < out[2] == 15
    assert out[3] <= out[0]


def test_equal_count_ranks_on_distinct_values() -> None:
    ranks = RangeRanks.fit(pa.array(np.arange(7000)), bits=3)
    raw = ranks.raw_ranks(pa.array(np.arange(7000)))
    assert np.bincount(raw).tolist() == [1000] * 7


def test_heavy_duplicate_owns_one_rank() -> None:
    values = np.concatenate([np.zeros(9000, dtype=np.int64), np.arange(1, 1001)])
    ranks = RangeRanks.fit(pa.array(values), bits=4)
    out = ranks.transform(pa.array(values))
    assert len(set(out[:9000].tolist())) == 1
    assert out[9000:].min() > out[0]
    assert len(ranks.boundaries) == len(np.unique(ranks.boundaries.to_numpy()))


def test_few_distinct_values_spread_over_the_bit_range() -> None:
    ranks = RangeRanks.fit(pa.array([1, 2, 3] * 10), bits=10)
    out = ranks.transform(pa.array([1, 2, 3]))
    assert out.tolist() == [0, 341, 682]  # spread to thirds of 0..1022, null rank 1023


def test_all_null_sample() -> None:
    ranks = RangeRanks.fit(pa.array([None, None], type=pa.int64()), bits=3)
    assert ranks.transform(pa.array([5, None])).tolist() == [0, 7]


def test_bits_out_of_range() -> None:
    with pytest.raises(LayoutError, match=r"bits must be in 1\.\.31, got 40"):
        RangeRanks.fit(pa.array([1]), bits=40)


def test_unsupported_type_names_it() -> None:
    with pytest.raises(LayoutError, match="cannot rank values of type list<item: int64>"):
        RangeRanks.fit(pa.array([[1]]), bits=3)


@pytest.mark.parametrize(
    "values",
    [
        pa.array([3, 1, None, 2, 2, 9], pa.int32()),
        pa.array([True, False, None, True]),
        pa.array([0.5, np.nan, None, -0.0, 1e9]),
        pa.array(["b", "", None, "é", "a", "ab"]),
        pa.array(["b", "a", None], pa.large_string()),
        pa.array(["b", "a", None], pa.string_view()),
        pa.array([b"\x00", b"\xff", None, b""]),
        pa.array([dt.date(2020, 1, 2), dt.date(1970, 1, 1), None, dt.date(1900, 5, 5)]),
        pa.array([dt.datetime(2020, 1, 1, 1, 2, 3, 456789), None, dt.datetime(1999, 1, 1)]),
        pa.array([dt.datetime(2020, 1, 1), dt.datetime(2021, 1, 1)], pa.timestamp("ns", tz="UTC")),
        pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None], pa.decimal128(5, 2)),
        pa.array([decimal.Decimal("10.5"), decimal.Decimal("2.25")], pa.decimal128(38, 3)),
        pa.array([dt.time(1, 2), dt.time(0, 0), None]),
    ],
    ids=lambda v: str(v.type),
)
def test_types_rank_in_order_and_survive_json(values: pa.Array) -> None:
    ranks = RangeRanks.fit(values, bits=3)
    out = ranks.transform(values)
    pylist = values.to_pylist()
    order = sorted(range(len(pylist)), key=lambda i: spark_key(pylist[i]))
    assert np.all(np.diff(out[order].astype(np.int64)) >= 0)
    # distinct values keep distinct ranks when bits allow it
    distinct = {repr(spark_key(v)) for v in pylist}
    assert len(set(out.tolist())) == len(distinct)
    assert roundtrip(ranks).transform(values).tolist() == out.tolist()
    assert pickle.loads(pickle.dumps(ranks)).transform(values).tolist() == out.tolist()


def test_json_has_readable_typed_boundaries() -> None:
    ranks = RangeRanks.fit(pa.array([dt.date(2020, 1, 2), dt.date(2021, 1, 1)]), bits=2)
    assert ranks.to_dict()["boundaries"] == ["2020-01-02"]
    dec = RangeRanks.fit(pa.array([decimal.Decimal("1.50"), decimal.Decimal("3.00")]), bits=2)
    assert dec.to_dict()["boundaries"] == ["1.50"]


def test_bad_json_is_a_layout_error() -> None:
    with pytest.raises(LayoutError, match="unknown value type"):
        RangeRanks.from_dict({"bits": 3, "type": {"kind": "nope"}, "boundaries": []})


def test_count_preceding_lexicographic_strict_and_inclusive() -> None:
    bounds = [pa.array([1, 1, 2]), pa.array(["b", "d", "a"])]
    values = [pa.array([1, 1, 1, 2, None]), pa.array(["a", "b", "c", "a", "z"])]
    assert count_preceding(bounds, values, inclusive=False).tolist() == [0, 0, 1, 2, 3]
    assert count_preceding(bounds, values, inclusive=True).tolist() == [0, 1, 1, 3, 3]


def test_target_block_count_requires_exactly_one() -> None:
    with pytest.raises(LayoutError, match="exactly one of target_blocks"):
        target_block_count(10, None, None)
    with pytest.raises(LayoutError, match="exactly one of target_blocks"):
        target_block_count(10, 2, 5)
    with pytest.raises(LayoutError, match="rows_per_block must be >= 1, got 0"):
        target_block_count(10, None, 0)
    assert target_block_count(10, None, 3) == 4


def test_resolve_dimensions_errors() -> None:
    schema = pa.schema([("l_shipdate", pa.date32()), ("x", pa.int64())])
    with pytest.raises(LayoutError, match="Did you mean 'l_shipdate'"):
        resolve_dimensions(["l_shipdat"], schema, max_dims=8)
    with pytest.raises(LayoutError, match="at least one column"):
        resolve_dimensions([], schema, max_dims=8)
    with pytest.raises(LayoutError, match="too many dimensions: 2 given"):
        resolve_dimensions(["x", "l_shipdate"], schema, max_dims=1)
    with pytest.raises(LayoutError, match="given twice"):
        resolve_dimensions(["x", "X"], schema, max_dims=8)
    assert Dimension("X").column_name(schema) == "x"
    assert Dimension("`x`").column_name(schema) == "x"


def test_a_dimension_that_fails_on_a_row_is_a_layout_error_naming_it_and_the_way_out() -> None:
    """``abs(k)`` at k = -2**63 overflows (Spark's ANSI error): every OPTIMIZE of a table
    clustered by it failed with "evaluating 'abs(k)' failed: overflow", naming neither
    the layout nor how to leave it (an audit)."""
    batch = pa.table({"k": pa.array([5, -(2**63)], pa.int64())})
    assert Dimension("abs(k)").values(batch.slice(0, 1)).to_pylist() == [5]
    with pytest.raises(LayoutError, match=r"dimension 'abs\(k\)'.*overflow.*cluster_by"):
        Dimension("abs(k)").values(batch)


def test_a_dotted_name_is_a_struct_field_where_the_schema_has_the_struct() -> None:
    """``a.b`` beside a struct ``a`` and a top-level column named ``a.b``: predicates bind
    it to the struct field (as Spark does) but a dimension ordered by the top-level
    column, so the advisor's layouts sorted the wrong values; both as dimensions were
    "given twice" (found by an audit)."""
    from lakelayout.layouts import ZOrderLayout

    n = 1000
    sample = pa.table({
        "a": pa.array([{"b": i % 50} for i in range(n)]),
        "a.b": pa.array([(i * 7) % 1000 for i in range(n)], pa.int32()),
    })  # fmt: skip
    assert Dimension("a.b").column_name(sample.schema) is None
    assert Dimension("`a.b`").column_name(sample.schema) == "a.b"
    assert Dimension("a.b").values(sample).to_pylist()[:3] == [0, 1, 2]
    blocks = np.asarray(ZOrderLayout.fit(sample, columns=["a.b"], target_blocks=4).assign(sample))
    field = np.arange(n) % 50
    spans = sorted((int(field[blocks == k].min()), int(field[blocks == k].max())) for k in range(4))
    assert all(hi - lo < 25 for lo, hi in spans), spans  # cut by the field, not by `a.b`
    assert len(resolve_dimensions(["`a.b`", "a.b"], sample.schema, max_dims=4)) == 2
    plain = pa.schema([("a.b", pa.int64())])  # no struct a: the name is the column
    assert Dimension("a.b").column_name(plain) == "a.b"


# ---------------------------------------------------------------- properties

ints_with_nulls = st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=1)
floats_with_nan = st.lists(
    st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), min_size=1
)
texts = st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=1)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    data=st.one_of(
        ints_with_nulls.map(lambda v: pa.array(v, pa.int64())),
        floats_with_nan.map(lambda v: pa.array(v, pa.float64())),
        texts.map(lambda v: pa.array(v, pa.string())),
    ),
    bits=st.integers(1, 6),
    split=st.floats(0.1, 0.9),
)
def test_ranks_are_monotone_in_spark_order(data: pa.Array, bits: int, split: float) -> None:
    cut = max(1, int(len(data) * split))
    ranks = RangeRanks.fit(data.slice(0, cut), bits=bits)
    out = ranks.transform(data)
    assert out.dtype == np.uint64
    assert out.max() <= (1 << bits) - 1
    pylist = data.to_pylist()
    null = np.array([v is None for v in pylist])
    assert np.all(out[null] == (1 << bits) - 1)
    assert np.all(out[~null] < (1 << bits) - 1)
    order = sorted(range(len(pylist)), key=lambda i: spark_key(pylist[i]))
    assert np.all(np.diff(out[order].astype(np.int64)) >= 0)
    assert roundtrip(ranks).transform(data).tolist() == out.tolist()
