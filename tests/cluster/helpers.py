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
    """Multiset equality of two DataFrames, computed by Spark (duplicates count)."""
    return left.count() == right.count() and left.exceptAll(right).count() == 0


def live_paths(table: Any) -> set[str]:
    return {str(p) for p in table.snapshot().files.paths}
