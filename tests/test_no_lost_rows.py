"""No lost rows, property-based, on real Spark and real Delta tables.

Hypothesis draws a table (nulls, NaN, unicode, long shared prefixes, dates,
timestamps, decimals, booleans), optionally partitioned by one or two of its
columns (partition values are then exact per-file bounds from the log, and
``''`` becomes NULL), splits it into files by a random layout, and
draws predicates from the grammar lakelayout prunes with. For every predicate
a single Spark job computes, per file, whether any row matches (the truth);
pruning must keep every such file. A sample of predicates is also checked end
to end: the rows ``Table.scan`` returns equal a full Spark scan's.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelayout.api import Table
from lakelayout.skipping.minmax import might_match

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "15"))
PREDICATES_PER_TABLE = 15

PREFIX = "https://example.com/very/long/shared/prefix/"
STRINGS = st.one_of(
    st.sampled_from(["", "a", "ab", "abc", "b", "zzz", "Ärger", "日本", "naïve", "\U0001f600x"]),
    st.builds(lambda s: PREFIX + s, st.text(alphabet="abcxyz", max_size=3)),
    st.text(max_size=4),
)
INT_VALUES = st.integers(-5, 30)
FLOAT_VALUES = st.one_of(
    st.sampled_from([float("nan"), -0.0, 0.0, 1.5, -2.25, float("inf")]),
    st.integers(-100, 100).map(lambda v: v / 4),
)
DATE_VALUES = st.dates(dt.date(1999, 12, 25), dt.date(2000, 1, 10))
TIME_VALUES = st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 2)).map(
    lambda t: t.replace(tzinfo=dt.timezone.utc)
)
DECIMAL_VALUES = st.integers(-5000, 5000).map(lambda v: decimal.Decimal(v).scaleb(-2))
VALUES = {
    "i": INT_VALUES,
    "f": FLOAT_VALUES,
    "s": STRINGS,
    "d": DATE_VALUES,
    "ts": TIME_VALUES,
    "dec": DECIMAL_VALUES,
    "b": st.booleans(),
}

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
    ]
)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 40))
    cols: dict[str, list[Any]] = {"id": list(range(n))}
    for name, values in VALUES.items():
        cols[name] = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in SCHEMA}, schema=SCHEMA)


def _lit(column: str, value: Any) -> str:
    if value is None:
        return "NULL"
    if column == "s":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if column == "d":
        return f"DATE'{value.isoformat()}'"
    if column == "ts":
        return f"TIMESTAMP'{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if column == "f":
        if value != value:
            return "CAST('NaN' AS DOUBLE)"
        if value in (float("inf"), float("-inf")):
            return f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)"
        return f"{value!r}D"
    if column == "b":
        return "true" if value else "false"
    return str(value)


@st.composite
def atoms(draw: st.DrawFn) -> str:
    col = draw(st.sampled_from(sorted(VALUES)))
    v = draw(VALUES[col])
    kind = draw(st.sampled_from(["cmp", "flip", "between", "in", "notin", "null", "like"]))
    if kind == "cmp":
        return (
            f"{col} {draw(st.sampled_from(['=', '!=', '<>', '<', '<=', '>', '>=']))} {_lit(col, v)}"
        )
    if kind == "flip":
        return f"{_lit(col, v)} {draw(st.sampled_from(['<', '>=', '=']))} {col}"
    if kind == "between":
        w = draw(VALUES[col])
        lo, hi = (v, w) if draw(st.booleans()) else (w, v)
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{col} {neg}BETWEEN {_lit(col, lo)} AND {_lit(col, hi)}"
    if kind in ("in", "notin"):
        vals = draw(st.lists(VALUES[col], min_size=1, max_size=4))
        if draw(st.integers(0, 9)) == 0:
            vals.append(None)
        neg = "NOT " if kind == "notin" else ""
        return f"{col} {neg}IN ({', '.join(_lit(col, x) for x in vals)})"
    if kind == "null":
        return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    prefix = draw(st.sampled_from(["", "a", "ab", PREFIX, PREFIX + "x", "日", "%"]))
    form = draw(st.sampled_from(["like", "notlike", "startswith"]))
    lit = _lit("s", prefix)
    if form == "startswith":
        return f"startswith(s, {lit})"
    pattern = _lit("s", prefix + draw(st.sampled_from(["%", "", "_%", "%c"])))
    return f"s {'NOT ' if form == 'notlike' else ''}LIKE {pattern}"


def predicates(depth: int = 2) -> st.SearchStrategy[str]:
    return st.recursive(
        atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=4,
    )


LAYOUTS = st.sampled_from(["random", "id", "i", "f", "s", "d", "ts", "dec"])
#: partition columns a table may be created with (values from the log: exact bounds)
PARTITIONS = st.sampled_from([None, None, ["b"], ["d"], ["s"], ["dec", "b"]])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=tables(),
    layout=LAYOUTS,
    parts=st.integers(1, 6),
    partition_by=PARTITIONS,
    preds=st.lists(predicates(), min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE),
)
def test_property_pruning_never_drops_a_matching_file(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    data: pa.Table,
    layout: str,
    parts: int,
    partition_by: list[str] | None,
    preds: list[str],
) -> None:
    from pyspark.sql import functions as F

    from lakelayout.table.reader import FILE_COLUMN, read_table_files

    df = spark.createDataFrame(data)
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, layout)
    path = tmp_path_factory.mktemp("prop")
    t = Table.create(str(path / "t"), df, partition_by=partition_by)
    snap = t.snapshot()
    files = snap.data_files_for([str(p) for p in snap.files.paths])

    # truth: per file, does any row satisfy predicate k? One Spark job for all.
    full = read_table_files(spark, t.uri, snap.table_format, files, with_file=True).select(
        F.col(FILE_COLUMN).alias("file"),
        *[
            F.coalesce(F.expr(p), F.lit(False)).cast("int").alias(f"p{k}")
            for k, p in enumerate(preds)
        ],
    )
    sums = full.groupBy("file").agg(*[F.sum(f"p{k}").alias(f"p{k}") for k in range(len(preds))])
    truth = {r["file"]: r for r in sums.collect()}
    names = [str(p) for p in snap.files.paths]

    for k, text in enumerate(preds):
        keep = might_match(t._bind(text, snap.schema), snap.files)
        for name, kept in zip(names, keep, strict=True):
            row = truth.get(name)
            if row is not None and row[f"p{k}"] and not kept:
                raise AssertionError(f"pruning dropped {name} holding rows matching {text!r}")

    # end to end for a few predicates: skipping scan == full Spark scan
    for text in preds[:3]:
        got = sorted(r["id"] for r in t.scan(text, columns=["id"]).df.collect())
        want = sorted(r["id"] for r in t.to_df().where(F.expr(text)).select("id").collect())
        assert got == want, text


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(preds=st.lists(predicates(), min_size=30, max_size=30))
def test_property_strategy_generates_valid_spark_sql(spark: Any, preds: list[str]) -> None:
    """Every generated predicate is a boolean Spark accepts (else the property tests nothing)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    df = spark.createDataFrame(
        pa.table({f.name: pa.nulls(1, f.type) for f in SCHEMA}, schema=SCHEMA)
    )
    checked = df.select(*[F.expr(p).alias(f"p{k}") for k, p in enumerate(preds)])
    assert all(isinstance(f.dataType, BooleanType) for f in checked.schema.fields)
    assert len(checked.collect()) == 1
