"""Differential property: lakelayout's DELETE keeps exactly the rows Spark keeps.

For a random small table (real Spark, a real Delta table in random files)
and a random predicate from the grammars of ``tests/expr/predicates.py`` --
every type they cover: integers, doubles with NaN / -0.0 / infinities,
strings, dates, timestamps, booleans, DECIMAL(10, 2) and DECIMAL(38, s) at
both ends of the type with one-ulp literals, bigints past 2**53, floats --
``Table.delete(pred)`` must leave the rows Spark keeps with
``NOT (pred) OR (pred) IS NULL``. Each predicate runs on a fresh copy of the
table, so one table serves several predicates.

DELETE decides some files from metadata alone (every row matches: removed
unread; no row can match: left alone), so this is where a wrongly bound
literal or an untrue bound turns into lost rows. CI runs a couple of
examples; ``LAKELAYOUT_FUZZ_EXAMPLES`` scales it (``make fuzz``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.api import Table

from .expr.predicates import (
    DECIMAL_SCALES,
    comparison_near_values,
    edge_predicates,
    edge_table,
    extreme_predicates,
    extreme_table,
    predicates,
)

pytestmark = pytest.mark.spark

EXAMPLES = max(2, int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "0")) // 100)
PREDICATES_PER_TABLE = 3

GRAMMARS = {
    "edge": (edge_table(), predicates(max_leaves=3)),
    "extreme": (extreme_table(), extreme_predicates(max_leaves=2)),
    # <=> / IS DISTINCT FROM with NULL, IN with NULL and NaN, date arithmetic, casts,
    # chains of string functions: leaves a whole-file DELETE may decide from bounds
    "edge kinds": (edge_table(), edge_predicates(max_leaves=3)),
}
LAYOUTS = {
    "edge": ["random", "i", "x", "s", "d", "ts", "dec"],
    "edge kinds": ["random", "x", "s", "d", "ts"],
    "extreme": ["random", "d38_18", "d38_0", "big", "f64", "dt", "ts"],
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.Table, str, int, list[str]]:
    kind = draw(st.sampled_from(sorted(GRAMMARS)))
    base, grammar = GRAMMARS[kind]
    # few distinct rows, many copies: files then often hold one value of a column, the
    # case where DELETE decides a whole file from its bounds alone
    distinct = draw(
        st.lists(st.integers(0, base.num_rows - 1), min_size=1, max_size=4, unique=True)
    )
    picks = draw(st.lists(st.sampled_from(distinct), min_size=1, max_size=30))
    table = base.take(pa.array(picks))
    table = table.set_column(0, "id", pa.array(range(len(picks)), pa.int32()))
    layout = draw(st.sampled_from(LAYOUTS[kind]))
    parts = draw(st.integers(1, 5))
    if kind == "extreme" and draw(st.booleans()):
        # aimed at the drawn values of the layout column: files holding one value, literals
        # on or one ulp beside it (DECIMAL(38, s) first: the widest literals)
        layout = draw(st.sampled_from([*DECIMAL_SCALES, *DECIMAL_SCALES, "big", "f64", "dt", "ts"]))
        grammar = comparison_near_values(table, layout)
    preds = draw(st.lists(grammar, min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE))
    return table, layout, parts, preds


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_property_delete_keeps_exactly_what_spark_keeps(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, case: tuple[pa.Table, str, int, list[str]]
) -> None:
    from pyspark.sql import functions as F

    table, layout, parts, preds = case
    df = spark.createDataFrame(table)
    expected: dict[str, list[int]] = {}
    for text in preds:
        try:  # Spark rejects some predicates (ANSI): nothing to compare
            expected[text] = _ids(df.where(F.expr(f"NOT ({text}) OR ({text}) IS NULL")))
        except Exception:
            continue
    if not expected:
        return
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, layout)
    root = tmp_path_factory.mktemp("delete")
    Table.create(str(root / "base"), df)
    for k, (text, keep) in enumerate(expected.items()):
        copy = Path(root / f"t{k}")
        shutil.copytree(root / "base", copy)
        t = Table(str(copy), spark=spark)
        t.delete(text)
        assert _ids(t.to_df()) == keep, f"DELETE WHERE {text}"
