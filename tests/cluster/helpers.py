"""Shared data generators and row comparisons for the cluster tests."""

from __future__ import annotations

from typing import Any

#: small files so tiny tables still have many of them
TARGET = 32 * 1024


def gen(spark: Any, n: int, seed: int, parts: int = 4, start: int = 0) -> Any:
    """``n`` rows: two uniform ints a, b in [0, 1000), a double with 5% nulls, a unique id."""
    from pyspark.sql import functions as F

    return (
        spark.range(start, start + n)
        .select(
            F.col("id"),
            (F.rand(seed) * 1000).cast("int").alias("a"),
            (F.rand(seed + 1) * 1000).cast("int").alias("b"),
            F.when(F.rand(seed + 2) < 0.05, None)
            .otherwise((F.rand(seed + 3) * 100).cast("double"))
            .alias("c"),
        )
        .repartition(parts)
    )


def same_rows(left: Any, right: Any) -> bool:
    """Multiset equality of two DataFrames (columns by position, duplicates count), in one
    Spark job: no distinct row may be more often on one side than on the other.

    What ``exceptAll`` both ways and two counts compute in three jobs: rows are grouped
    the same way (NULLs equal, NaN equal, -0.0 equal to 0.0).
    """
    return not differing_rows(left, right, limit=1)


def differing_rows(left: Any, right: Any, limit: int = 10) -> list[tuple[Any, int]]:
    """Up to ``limit`` distinct rows more often on one side than on the other, each with
    how many more times it is on the left (negative: on the right); one Spark job."""
    from pyspark.sql import functions as F

    side = "_ll_same_rows_side"
    both = left.withColumn(side, F.lit(1)).union(right.withColumn(side, F.lit(-1)))
    keys = [F.col(f"`{c}`") for c in both.columns[:-1]]
    differing = both.groupBy(*keys).agg(F.sum(side).alias(side)).where(F.col(side) != 0)
    return [(tuple(r[:-1]), r[-1]) for r in differing.limit(limit).collect()]


def live_paths(table: Any) -> set[str]:
    return {str(p) for p in table.snapshot().files.paths}
