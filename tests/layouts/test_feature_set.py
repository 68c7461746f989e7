"""Workload features and their per-row bit vectors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelayout.errors import LayoutError
from lakelayout.expr.evaluate import evaluate
from lakelayout.expr.nodes import BoolConst, Opaque
from lakelayout.expr.parse import parse_predicate
from lakelayout.layouts.feature_set import (
    FeatureSet,
    bit_matrix,
    conjuncts_of,
    popcount,
    zero_weight,
)

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("s", pa.string())])


def table() -> pa.Table:
    return pa.table(
        {
            "a": pa.array([1, 5, 20, None, 50, 7], pa.int64()),
            "b": pa.array([3, 3, 1, 3, None, 0], pa.int64()),
            "s": pa.array(["red", "blue", None, "Red", "green", "red"]),
        }
    )


def test_features_are_distinct_conjuncts_weighted_by_frequency() -> None:
    fs = FeatureSet.from_workload(["a < 10", "10 > a", "a < 10 AND b = 3", "b = 3"], SCHEMA)
    by_key = {f.key: f.weight for f in fs.features}
    a_key = parse_predicate("a < 10", SCHEMA).sql()
    b_key = parse_predicate("b = 3", SCHEMA).sql()
    assert by_key[a_key] == 3.0  # "10 > a" normalizes to the same key
    assert by_key[b_key] == 2.0
    both = " AND ".join(sorted([a_key, b_key]))
    assert by_key[both] == 1.0
    assert fs.keys[0] == a_key  # heaviest first


def test_subsumed_feature_is_dropped() -> None:
    # a conjunction always queried whole: its parts add nothing
    fs = FeatureSet.from_workload(["a < 10 AND b = 3"] * 3, SCHEMA)
    assert len(fs) == 1
    assert len(fs.features[0].conjuncts) == 2
    assert fs.features[0].weight == 3.0
    # "b = 3" only ever appears with "a < 10": dominated by the conjunction
    fs = FeatureSet.from_workload(["a < 10 AND b = 3", "a < 10"], SCHEMA)
    assert sorted(len(f.conjuncts) for f in fs.features) == [1, 2]
    assert parse_predicate("b = 3", SCHEMA).sql() not in fs.keys


def test_no_conjunctions_option_and_caps() -> None:
    fs = FeatureSet.from_workload(["a < 10 AND b = 3"], SCHEMA, conjunctions=False)
    assert sorted(len(f.conjuncts) for f in fs.features) == [1, 1]
    fs = FeatureSet.from_workload(["a < 1", "a < 2", "a < 2", "a < 3"], SCHEMA, max_features=1)
    assert fs.keys == (parse_predicate("a < 2", SCHEMA).sql(),)
    fs = FeatureSet.from_workload(["a < 1", "a < 2", "a < 2"], SCHEMA, min_frequency=2)
    assert len(fs) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_features": 65}, "max_features=65"),
        ({"max_features": 0}, "max_features=0"),
        ({"min_frequency": 0}, "min_frequency=0"),
        ({"min_frequency": 5}, "no usable feature"),
    ],
)
def test_bad_options(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        FeatureSet.from_workload(["a < 10"], SCHEMA, **kwargs)  # type: ignore[arg-type]


def test_unusable_workloads() -> None:
    with pytest.raises(LayoutError, match="empty"):
        FeatureSet.from_workload([], SCHEMA)
    with pytest.raises(LayoutError, match="no usable feature"):
        FeatureSet.from_workload([BoolConst(True), Opaque("my_udf(a)", frozenset({"a"}))], SCHEMA)
    with pytest.raises(LayoutError, match="neither SQL"):
        FeatureSet.from_workload([42], SCHEMA)  # type: ignore[list-item]


def test_vectors_match_evaluation_and_nulls_give_zero() -> None:
    data = table()
    fs = FeatureSet.from_workload(["a < 10", "b = 3", "s = 'red'", "a < 10 AND b = 3"], SCHEMA)
    vecs = fs.vectors(data)
    assert vecs.dtype == np.uint64
    bits = bit_matrix(vecs, len(fs))
    for i, f in enumerate(fs.features):
        assert bits[:, i].astype(bool).tolist() == evaluate(f.predicate, data).tolist()
    a_bit = fs.keys.index(parse_predicate("a < 10", SCHEMA).sql())
    assert bits[3, a_bit] == 0  # a IS NULL: "a < 10" is NULL, so the bit is 0


def test_might_match_uses_implied_features_and_or() -> None:
    fs = FeatureSet.from_workload(["a < 10", "b = 3"], SCHEMA)
    ia = fs.keys.index(parse_predicate("a < 10", SCHEMA).sql())
    ib = fs.keys.index(parse_predicate("b = 3", SCHEMA).sql())
    blocks = np.array([0, 1 << ia, 1 << ib, (1 << ia) | (1 << ib)], dtype=np.uint64)
    assert fs.might_match("a < 10", blocks).tolist() == [False, True, False, True]
    assert fs.might_match("a < 10 AND s = 'x'", blocks).tolist() == [False, True, False, True]
    assert fs.might_match("a < 10 AND b = 3", blocks).tolist() == [False, False, False, True]
    assert fs.might_match("a < 10 OR b = 3", blocks).tolist() == [False, True, True, True]
    # a query implying no feature keeps everything
    assert fs.might_match("a < 11", blocks).all()
    assert fs.might_match("a < 10 OR s = 'x'", blocks).all()
    assert fs.implied_mask("b = 3 AND a < 10") == (1 << ia) | (1 << ib)


def test_complex_expression_features() -> None:
    schema = pa.schema([("ts", pa.timestamp("us")), ("url", pa.string())])
    data = pa.table(
        {
            "ts": pa.array(np.array(["2020-12-05", "2021-03-01", "2020-12-31"], "datetime64[us]")),
            "url": pa.array(["http://X.org", "http://y.org", None]),
        }
    )
    fs = FeatureSet.from_workload(["month(ts) = 12", "lower(url) LIKE '%x%'"], schema)
    bits = bit_matrix(fs.vectors(data), len(fs))
    month = fs.keys.index(parse_predicate("month(ts) = 12", schema).sql())
    assert bits[:, month].tolist() == [1, 0, 1]
    assert bits[:, 1 - month].tolist() == [1, 0, 0]


def test_json_round_trip_keeps_keys_and_vectors() -> None:
    fs = FeatureSet.from_workload(["a < 10 AND b = 3", "s = 'red'", "a < 10"], SCHEMA)
    back = FeatureSet.from_dict(fs.to_dict())
    assert back.keys == fs.keys
    assert back.weights.tolist() == fs.weights.tolist()
    assert back.vectors(table()).tolist() == fs.vectors(table()).tolist()
    with pytest.raises(LayoutError, match="feature-set"):
        FeatureSet.from_dict({"features": []})


def test_bit_helpers() -> None:
    v = np.array([0, 0b101, 2**63], dtype=np.uint64)
    assert popcount(v).tolist() == [0, 2, 1]
    assert zero_weight(np.array([0b01, 0b11], np.uint64), np.array([2.0, 5.0])).tolist() == [
        5.0,
        0.0,
    ]
    assert bit_matrix(np.array([0b10], np.uint64), 3).tolist() == [[0, 1, 0]]


def test_conjuncts_flatten_and_sort() -> None:
    p = parse_predicate("(b = 3 AND a < 10) AND a < 10", SCHEMA)
    keys = [c.sql() for c in conjuncts_of(p)]
    assert keys == sorted(keys) and len(keys) == 2
