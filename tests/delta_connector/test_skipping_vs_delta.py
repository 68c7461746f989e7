"""Delta's own data skipping on lakelayout's statistics, against lakelayout's pruning.

On the property-test tables (tests/test_no_lost_rows.py: nulls, NaN, unicode,
long shared prefixes, dates, timestamps, decimals, booleans, random layouts)
and its predicate grammar:

* Delta's reader, skipping on the statistics lakelayout wrote, returns
  exactly the rows a full scan returns (lakelayout's bounds are safe for it);
* Delta reads every file lakelayout's min/max pruning keeps: where Delta
  skips a file lakelayout keeps, lakelayout's skipping is the weaker one.

One kind of predicate is left out of the second check, because there
lakelayout *is* weaker (reported in issue 15, for the planner of issue 11):
comparisons and IN lists with a NaN literal. lakelayout never skips on them
(``coerce_literal`` turns NaN into "unknown"), while Delta knows Spark orders
NaN above every number: ``f >= NaN`` / ``f = NaN`` / ``f IN (NaN)`` cannot
match a file whose max is present (lakelayout omits the max of a file that
holds NaN), and ``f > NaN`` matches nothing. Both checks still run on every
other predicate, and the row check on all of them.
"""

from __future__ import annotations

import os
from functools import reduce
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.api import Table

from ..test_no_lost_rows import LAYOUTS, predicates, tables

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "3"))
PREDICATES_PER_TABLE = 15
#: how the predicate grammar spells a NaN literal (the known weaker kind, see above)
NAN_LITERAL = "CAST('NaN' AS DOUBLE)"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=tables(),
    layout=LAYOUTS,
    parts=st.integers(1, 6),
    preds=st.lists(predicates(), min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE),
)
def test_property_delta_reads_every_file_lakelayout_keeps(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    data: pa.Table,
    layout: str,
    parts: int,
    preds: list[str],
) -> None:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    df = spark.createDataFrame(data)
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, layout)
    t = Table.create(str(tmp_path_factory.mktemp("vsdelta") / "t"), df, spark=spark)
    truth = (
        t.to_df()
        .select(
            *[F.sum(F.coalesce(F.expr(p), F.lit(False)).cast("int")).alias(f"p{k}")
              for k, p in enumerate(preds)]
        )
        .collect()[0]
    )  # fmt: skip
    delta = spark.read.format("delta").load(t.uri)
    counts = []
    for k, text in enumerate(preds):
        ours = {os.path.basename(f) for f in t.scan(text).df.inputFiles()}
        filtered = delta.where(text)
        theirs = {os.path.basename(f) for f in filtered.inputFiles()}
        if NAN_LITERAL not in text:
            assert ours <= theirs, (
                f"Delta skips {sorted(ours - theirs)} that lakelayout keeps for {text!r}"
            )
        counts.append(filtered.agg(F.count(F.lit(1)).alias("n")).withColumn("k", F.lit(k)))
    # every filtered read (each with Delta's skipping) counted in one Spark job
    got = {r["k"]: r["n"] for r in reduce(DataFrame.unionByName, counts).collect()}
    for k, text in enumerate(preds):
        assert got[k] == (truth[f"p{k}"] or 0), f"Delta lost rows for {text!r}"
