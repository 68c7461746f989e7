"""B5: vectorized min/max pruning over a large snapshot.

Builds a synthetic :class:`~lakelayout.stats.model.FileStats` of 100,000 files
by 20 columns of mixed types (ints, floats, decimals, strings, dates,
timestamps, booleans) with clustered, overlapping ranges and a few unknown
bounds, then times the scan planner, ``plan(predicate, files)`` (best of 3),
for representative predicates and reports the worst; ``might_match`` and
``all_rows_match`` (the statistics rules it runs) are timed beside it. Goal:
under 0.2 s for a predicate over all files.

Optionally (``--log``) also times ``stats.delta_stats.from_add_actions`` on a real
Delta log of 20,000 files written by ``create_table_with_add_actions``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import (
    And,
    BoolTerm,
    Column,
    Compare,
    In,
    IsNull,
    Literal,
    Or,
    Predicate,
    StartsWith,
)
from lakelayout.skipping.planner import plan
from lakelayout.skipping.stats_rules import all_rows_match, might_match
from lakelayout.stats.delta_stats import from_add_actions
from lakelayout.stats.model import ColumnStats, FileStats

FILES = 100_000
GOAL_SECONDS = 0.2
UTC = dt.timezone.utc
KINDS = ["int", "float", "decimal", "string", "date", "timestamp", "bool"]
TYPES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "decimal": pa.decimal128(22, 2),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "bool": pa.bool_(),
}


def column_bounds(kind: str, rng: np.random.Generator) -> tuple[pa.Array, pa.Array]:
    """Overlapping ranges that drift with the file number (a loosely clustered table)."""
    base = np.sort(rng.integers(0, 1_000_000, FILES))
    width = rng.integers(0, 20_000, FILES)
    low, high = base, base + width
    unknown = rng.random(FILES) < 0.01
    t = TYPES[kind]
    if kind == "int":
        return _masked(low, t, unknown), _masked(high, t, unknown)
    if kind == "float":
        return _masked(low / 7.0, t, unknown), _masked(high / 7.0, t, unknown)
    if kind == "decimal":
        lows = pa.array(low, pa.int64()).cast(t)
        highs = pa.array(high, pa.int64()).cast(t)
        return _null_where(lows, unknown), _null_where(highs, unknown)
    if kind == "string":
        lows = pa.array([f"k{v:07d}" for v in low])
        highs = pa.array([f"k{v:07d}" for v in high])
        return _null_where(lows, unknown), _null_where(highs, unknown)
    if kind == "date":
        return (
            _masked(low // 100, pa.int32(), unknown).cast(t),
            _masked(high // 100, pa.int32(), unknown).cast(t),
        )
    if kind == "timestamp":
        start = 1_577_836_800_000_000  # 2020-01-01
        return (
            _masked(start + low * 1_000_000, pa.int64(), unknown).cast(t),
            _masked(start + high * 1_000_000, pa.int64(), unknown).cast(t),
        )
    flags = rng.random(FILES) < 0.5
    return _masked(flags & (rng.random(FILES) < 0.5), t, unknown), _masked(flags, t, unknown)


def _masked(values: np.ndarray, t: pa.DataType, unknown: np.ndarray) -> pa.Array:
    return pa.array(values, type=t, mask=unknown)


def _null_where(arr: pa.Array, unknown: np.ndarray) -> pa.Array:
    return pc.if_else(pa.array(unknown), pa.scalar(None, arr.type), arr)


def synthetic_stats(seed: int = 5) -> FileStats:
    rng = np.random.default_rng(seed)
    columns = {}
    fields = []
    for i in range(20):
        kind = KINDS[i % len(KINDS)]
        name = f"{kind}_{i}"
        low, high = column_bounds(kind, rng)
        nulls = rng.integers(0, 3, FILES).astype(np.int64)
        columns[name] = ColumnStats(low, high, nulls)
        fields.append(pa.field(name, TYPES[kind]))
    return FileStats(
        paths=np.array([f"part-{i:06d}.parquet" for i in range(FILES)], dtype=object),
        sizes=rng.integers(1 << 20, 1 << 27, FILES).astype(np.int64),
        num_records=rng.integers(1_000, 1_000_000, FILES).astype(np.int64),
        modification_times=np.zeros(FILES, dtype=np.int64),
        columns=columns,
        schema=pa.schema(fields),
    )


def predicates() -> dict[str, Predicate]:
    def c(name: str) -> Column:
        return Column(name, TYPES[name.split("_")[0]])

    def lit(name: str, value: object) -> Literal:
        return Literal(value, TYPES[name.split("_")[0]])

    ts = dt.datetime(2020, 1, 3, tzinfo=UTC)
    return {
        "int range": And(
            (
                Compare(">=", c("int_0"), lit("int_0", 400_000)),
                Compare("<", c("int_0"), lit("int_0", 401_000)),
            )
        ),
        "string =": Compare("=", c("string_3"), lit("string_3", "k0500000")),
        "date/ts OR": Or(
            (
                Compare(">", c("date_4"), lit("date_4", dt.date(1970, 3, 1))),
                Compare("<", c("timestamp_5"), lit("timestamp_5", ts)),
            )
        ),
        "decimal IN 50": In(
            c("decimal_2"), tuple(lit("decimal_2", Decimal(v * 997)) for v in range(50))
        ),
        "prefix + null + bool": And(
            (
                StartsWith(c("string_10"), "k09"),
                IsNull(c("float_8"), negated=True),
                BoolTerm(c("bool_6")),
            )
        ),
        "string IN 50": In(
            c("string_10"), tuple(lit("string_10", f"k{v:07d}") for v in range(0, 500_000, 10_000))
        ),
        "string IN 500 (range)": In(
            c("string_17"), tuple(lit("string_17", f"k{v:07d}") for v in range(0, 500_000, 1000))
        ),
    }


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_pruning() -> float:
    stats = synthetic_stats()
    worst = 0.0
    for label, pred in predicates().items():
        seconds = best_of(functools.partial(plan, pred, stats))
        rules = best_of(functools.partial(might_match, pred, stats))
        strict = best_of(functools.partial(all_rows_match, pred, stats))
        kept = int(plan(pred, stats).keep.sum())
        print(
            f"  {label:<24} plan {seconds:.4f} s  might_match {rules:.4f} s  "
            f"all_rows_match {strict:.4f} s  kept {kept:>6} / {FILES}"
        )
        worst = max(worst, seconds)
    print(f"B5 pruning (plan) 100k files x 20 cols: {worst:.3f} s (goal < {GOAL_SECONDS} s)")
    return worst


def bench_from_add_actions(files: int = 20_000) -> None:
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    schema = pa.schema(
        [("a", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))]
    )
    actions = []
    for i in range(files):
        stats = {
            "numRecords": 1000,
            "minValues": {"a": i, "s": f"k{i:07d}", "ts": "2020-01-01T00:00:00.000Z"},
            "maxValues": {
                "a": i + 10,
                "s": f"k{i:07d}" + "z" * 30,
                "ts": "2020-01-02T00:00:00.123Z",
            },
            "nullCount": {"a": 0, "s": 0, "ts": 0},
        }
        actions.append(AddAction(f"part-{i}.parquet", 1 << 20, {}, 0, True, json.dumps(stats)))
    with tempfile.TemporaryDirectory() as root:
        create_table_with_add_actions(root, DeltaSchema.from_arrow(schema), actions)
        table = DeltaTable(root)
        start = time.perf_counter()
        raw = table.get_add_actions(flatten=True)
        read = time.perf_counter() - start
        seconds = best_of(lambda: from_add_actions(raw, schema))
    print(f"B5 from_add_actions {files} files: {seconds:.3f} s (+ get_add_actions {read:.3f} s)")


if __name__ == "__main__":
    bench_pruning()
    if "--log" in sys.argv:
        bench_from_add_actions()
