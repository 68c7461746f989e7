"""The row comparison every cluster and connector test relies on must itself be right."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import differing_rows, same_rows

SCHEMA = "i int, s string, f double"
ROWS = [(1, "a", 1.5), (1, "a", 1.5), (2, None, float("nan")), (3, "b", -0.0)]


@pytest.mark.spark
def test_same_rows_is_multiset_equality_by_position(spark: Any) -> None:
    def df(rows: list[tuple[Any, ...]], schema: str = SCHEMA) -> Any:
        return spark.createDataFrame(rows, schema)

    left = df(ROWS)
    assert same_rows(left, df(ROWS[::-1]))
    assert same_rows(left, df(ROWS, "x int, y string, z double"))  # names do not matter
    assert same_rows(left, df([*ROWS[:3], (3, "b", 0.0)]))  # -0.0 and 0.0, NaN, NULL equal
    assert same_rows(df([]), df([]))
    assert not same_rows(left, df(ROWS[1:]))  # one duplicate fewer
    assert not same_rows(left, df([*ROWS, (4, "c", 0.0)]))  # one row more
    assert not same_rows(left, df([*ROWS[:3], (3, "c", 0.0)]))  # one value changed
    # the same number of rows, the multiplicities swapped
    assert not same_rows(left, df([ROWS[0], ROWS[2], ROWS[2], ROWS[3]]))
    assert not same_rows(df([]), left) and not same_rows(left, df([]))
    # what differs, and on which side: a duplicate missing on the right, a row only there
    assert sorted(differing_rows(left, df([*ROWS[1:], (5, "e", 2.0)]))) == [
        ((1, "a", 1.5), 1),
        ((5, "e", 2.0), -1),
    ]
