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
from lakelayout.errors import PredicateError
from lakelayout.skipping.stats_rules import might_match

from .cluster.helpers import differing_rows
from .expr.predicates import (
    double_literal,
    extreme_predicates,
    extreme_table,
    session_conf,
    session_zone,
)

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "15"))
#: the planner kinds end to end: fewer tables than the general grammar, because the same
#: kinds meet the planner 150 times per run without Spark
#: (tests/skipping/test_planner_property.py: the writer's statistics, as Delta stats and
#: as virtual files); here each table is written by Spark and read back by it
PLANNER_EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "8"))
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
        return double_literal(value)
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

    from lakelayout.table.reader import FILE_COLUMN, read_table_files

    df = spark.createDataFrame(data)
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, layout)
    path = tmp_path_factory.mktemp("prop")
    t = Table.create(str(path / "t"), df, partition_by=partition_by)
    snap = t.snapshot()
    files = snap.data_files_for([str(p) for p in snap.files.paths])

    # truth: per file, does any row satisfy predicate k? One Spark job for all.
    rows = read_table_files(spark, t.uri, snap.table_format, files, with_file=True)
    truth = matches_per_file(rows.withColumnRenamed(FILE_COLUMN, "file"), preds)
    names = [str(p) for p in snap.files.paths]
    for k, text in enumerate(preds):
        keep = might_match(t._bind(text, snap.schema), snap.files)
        assert_kept_every_match(names, keep, truth, k, text)

    # end to end for a few predicates: skipping scan == full Spark scan
    for text in preds[:3]:
        assert_scan_is_the_filter(t, text)
        assert_plan_is_what_scan_reads(t, text)


def matches_per_file(rows: Any, preds: list[str]) -> dict[str, Any]:
    """Per file (column ``file``): how many rows satisfy predicate k (``p{k}``). One job."""
    from pyspark.sql import functions as F

    full = rows.select(
        "file",
        *[
            F.coalesce(F.expr(p), F.lit(False)).cast("int").alias(f"p{k}")
            for k, p in enumerate(preds)
        ],
    )
    sums = full.groupBy("file").agg(*[F.sum(f"p{k}").alias(f"p{k}") for k in range(len(preds))])
    return {r["file"]: r for r in sums.collect()}


def assert_kept_every_match(
    names: list[str], keep: Any, truth: dict[str, Any], k: int, text: str
) -> None:
    """No file holding a row that matches predicate ``k`` (``text``) was dropped."""
    for name, kept in zip(names, keep, strict=True):
        row = truth.get(name)
        if row is not None and row[f"p{k}"] and not kept:
            raise AssertionError(f"pruning dropped {name} holding rows matching {text!r}")


def assert_scan_is_the_filter(t: Table, text: str) -> None:
    """A skipping scan returns exactly the ids a full Spark filter returns (one job)."""
    from pyspark.sql import functions as F

    got = t.scan(text, columns=["id"]).df
    differing = differing_rows(got, t.to_df().where(F.expr(text)).select("id"))
    assert not differing, (text, "(id,), scanned - filtered:", differing)


def _file_names(t: Table) -> Any:
    """Every row of ``t`` with its file's name in column ``file``."""
    from pyspark.sql import functions as F

    return t.to_df().withColumn("file", F.col("_metadata.file_name"))


def assert_plan_is_what_scan_reads(t: Table, text: str) -> None:
    """``Table.plan`` (no Spark job) keeps exactly the files ``Table.scan`` reads.

    Spark's Parquet reader (plain tables) lists the files it reads, unless its
    optimizer proved the filter false and dropped the scan (``b > false AND
    b = false``); a table read through the log (partitions) is read by
    pyarrow tasks over exactly the kept files and lists none.
    """
    planned = {os.path.basename(str(p)) for p in t.plan(text).kept.paths}
    result = t.scan(text)
    assert result.report.files_kept == len(planned), text
    scanned = {os.path.basename(u) for u in result.df.inputFiles()}
    if t.snapshot().table_format.partitioned and not scanned:
        return  # read by pyarrow tasks over the kept files (the count above)
    if planned and not scanned:
        assert _proved_false(result.df), (text, sorted(planned))
        return
    assert planned == scanned, (text, sorted(planned ^ scanned))


def _proved_false(df: Any) -> bool:
    """Whether Spark's optimizer replaced the scan by an empty relation."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="simple")
    return "LocalTableScan <empty>" in out.getvalue()


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


# ---------------------------------------------------------------- the kinds issue 11 added
# A table with a struct column ``st`` and a top-level column named ``st.x``, and
# predicates on struct fields, timestamps a microsecond or millisecond off the
# data (and with zones), functions of columns without an index, IS NULL over
# expressions, and IN / NOT IN lists holding NULL.

STRUCT = pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.int64())]))])
PLANNER_SCHEMA = pa.schema([*SCHEMA, ("st", STRUCT), ("st.x", pa.int32())])
STRUCT_VALUES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "x": st.one_of(st.none(), st.integers(-3, 8)),
            "y": st.one_of(
                st.none(), st.fixed_dictionaries({"z": st.one_of(st.none(), INT_VALUES)})
            ),
        }
    ),
)
#: timestamps on whole milliseconds and a few microseconds off them, so bounds rounded
#: to the millisecond meet literals just inside and just outside them
NEAR_MS = st.builds(
    lambda ms, us: (
        dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
        + dt.timedelta(milliseconds=ms, microseconds=us)
    ),
    st.integers(0, 5),
    st.sampled_from([0, 1, 499, 500, 999]),
)


@st.composite
def planner_tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 30))
    cols: dict[str, list[Any]] = {"id": list(range(n))}
    for name, values in VALUES.items():
        domain = NEAR_MS if name == "ts" else values
        cols[name] = draw(st.lists(st.one_of(st.none(), domain), min_size=n, max_size=n))
    cols["st"] = draw(st.lists(STRUCT_VALUES, min_size=n, max_size=n))
    cols["st.x"] = draw(st.lists(st.one_of(st.none(), st.integers(-3, 8)), min_size=n, max_size=n))
    return pa.table(
        {f.name: pa.array(cols[f.name], f.type) for f in PLANNER_SCHEMA}, schema=PLANNER_SCHEMA
    )


def _near(value: dt.datetime, draw: st.DrawFn) -> str:
    shift = dt.timedelta(microseconds=draw(st.sampled_from([0, 1, -1, 1000, -1000, 999])))
    moment = value + shift
    form = draw(st.sampled_from(["plain", "utc", "offset", "pst"]))
    if form == "offset":
        local = moment.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30)))
        return f"TIMESTAMP'{local.strftime('%Y-%m-%d %H:%M:%S.%f')}+05:30'"
    if form == "pst":
        local = moment - dt.timedelta(hours=8)  # PST in January: UTC-8
        return f"TIMESTAMP'{local.strftime('%Y-%m-%d %H:%M:%S.%f')} PST'"
    suffix = " UTC" if form == "utc" else ""
    return f"TIMESTAMP'{moment.strftime('%Y-%m-%d %H:%M:%S.%f')}{suffix}'"


@st.composite
def planner_atoms(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["struct", "dotted", "ts", "expr", "isnull", "innull"]))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    if kind == "struct":
        term = draw(st.sampled_from(["st.x", "st.y.z", "st.x + 1"]))
        if draw(st.integers(0, 3)) == 0:
            return f"{term} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
        return f"{term} {op} {draw(st.integers(-3, 8))}"
    if kind == "dotted":
        return f"`st.x` {op} {draw(st.integers(-3, 8))}"
    if kind == "ts":
        return f"ts {op} {_near(draw(NEAR_MS), draw)}"
    if kind == "expr":
        term, literal = draw(
            st.sampled_from(
                [
                    ("date_format(d, 'yyyy-MM-dd')", f"'{draw(DATE_VALUES).isoformat()}'"),
                    (
                        "date_format(d, 'yyyy-MM')",
                        draw(st.sampled_from(["'1999-12'", "'2000-01'"])),
                    ),
                    ("year(d)", draw(st.sampled_from(["1999", "2000"]))),
                    ("CAST(i AS STRING)", f"'{draw(INT_VALUES)}'"),
                    ("CAST(dec AS STRING)", f"'{draw(DECIMAL_VALUES)}'"),
                    ("CAST(d AS STRING)", f"'{draw(DATE_VALUES).isoformat()}'"),
                    ("substring(s, 1, 2)", draw(st.sampled_from(["'ab'", "'ht'", "''", "'a'"]))),
                    ("month(d)", draw(st.sampled_from(["1", "12"]))),
                    ("abs(i)", str(draw(INT_VALUES))),
                ]
            )
        )
        return f"{term} {op} {literal}"
    if kind == "isnull":
        inner = draw(
            st.sampled_from(
                ["(i > 0)", "(i + 1)", "(f < 1.5)", "(s LIKE 'a%')", "year(d)", "(i > st.x)"]
            )
        )
        return f"{inner} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    col = draw(st.sampled_from(["i", "s", "d", "st.x"]))
    domain = VALUES.get(col, st.integers(-3, 8))
    values = [_lit(col if col in VALUES else "i", v) for v in draw(st.lists(domain, max_size=3))]
    values.insert(draw(st.integers(0, len(values))), "NULL")
    return f"{col} {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(values)})"


def planner_predicates() -> st.SearchStrategy[str]:
    return st.recursive(
        st.one_of(atoms(), planner_atoms(), planner_atoms()),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=4,
    )


@settings(
    max_examples=PLANNER_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=planner_tables(),
    layout=st.sampled_from(["random", "id", "ts", "d", "st.x", "i"]),
    parts=st.integers(1, 6),
    preds=st.lists(
        planner_predicates(), min_size=PREDICATES_PER_TABLE, max_size=PREDICATES_PER_TABLE
    ),
)
def test_property_planner_kinds_never_drop_a_matching_file(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    data: pa.Table,
    layout: str,
    parts: int,
    preds: list[str],
) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(data)
    key = F.col(f"`{layout}`") if layout == "st.x" else F.col(layout)
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, key)
    t = Table.create(str(tmp_path_factory.mktemp("planner") / "t"), df)
    snap = t.snapshot()
    names = [os.path.basename(str(p)) for p in snap.files.paths]
    truth = matches_per_file(_file_names(t), preds)  # the domains are small: no ANSI overflow
    for k, text in enumerate(preds):
        assert_kept_every_match(names, t.plan(text, snapshot=snap).keep, truth, k, text)
    for text in preds[:2]:
        assert_scan_is_the_filter(t, text)
        assert_plan_is_what_scan_reads(t, text)


# ---------------------------------------------------------------- extreme values (issue 10)

EXTREME_EXAMPLES = max(1, EXAMPLES // 8)  # each example creates a table: keep CI short


@st.composite
def extreme_data(draw: st.DrawFn) -> pa.Table:
    """Rows of the extreme table (DECIMAL(38, s) ends, subnormals, first/last days), reshuffled."""
    base = extreme_table()
    picks = draw(st.lists(st.integers(0, base.num_rows - 1), min_size=1, max_size=24))
    table = base.take(pa.array(picks))
    return table.set_column(0, "id", pa.array(range(len(picks)), pa.int32()))


@settings(
    max_examples=EXTREME_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=extreme_data(),
    layout=st.sampled_from(["random", "d38_18", "d38_0", "big", "f64", "ts"]),
    parts=st.integers(1, 4),
    preds=st.lists(extreme_predicates(), min_size=8, max_size=8),
)
def test_property_extreme_values_never_drop_a_matching_file(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    data: pa.Table,
    layout: str,
    parts: int,
    preds: list[str],
) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(data)
    checked = []
    for text in preds:
        try:  # a predicate Spark rejects (ANSI) has no rows to lose
            df.where(F.expr(text)).limit(1).collect()
        except Exception:
            continue
        checked.append(text)
    if not checked:
        return
    df = df.repartition(parts) if layout == "random" else df.repartitionByRange(parts, layout)
    t = Table.create(str(tmp_path_factory.mktemp("extreme") / "t"), df)
    snap = t.snapshot()
    truth = matches_per_file(_file_names(t), checked)
    names = [os.path.basename(str(p)) for p in snap.files.paths]
    for k, text in enumerate(checked):
        keep = might_match(t._bind(text, snap.schema), snap.files)
        assert_kept_every_match(names, keep, truth, k, text)
    assert_scan_is_the_filter(t, checked[0])


@pytest.mark.spark
def test_spark_own_zone_rules_and_case_mappings_decide_what_lakelayout_cannot(
    spark: Any, tmp_path: Any
) -> None:
    """Two tables of one-row files where lakelayout's answer came from data Spark does not
    share (an audit): Python's zone database (Europe/Oslo was UTC+2 in 1960 for it, UTC+1
    for the JVM) and Python's Unicode 14 case tables ('ƛ' has an upper case since Unicode
    16). Scans skipped the matching file; DELETE dropped whole files Spark says do not
    match. Both are left to Spark now."""
    stamps = [
        dt.datetime(1960, 6, 1, 12, tzinfo=dt.timezone.utc),
        dt.datetime(2000, 6, 1, 12, tzinfo=dt.timezone.utc),
    ]
    names = ["ƛ", "\ua7cc", "plain"]
    path = str(tmp_path / "t")
    data = pa.table(
        {"ts": pa.array([*stamps, stamps[1]], pa.timestamp("us", tz="UTC")), "name": names}
    )
    t = Table.create(path, data.slice(0, 1))
    t.append(data.slice(1, 1))
    t.append(data.slice(2, 1))
    assert len(Table(path).snapshot().files) == 3
    with session_zone(spark, "Europe/Oslo"):
        reference = spark.read.format("delta").load(path)
        local = reference.where("name = 'ƛ'").selectExpr("cast(ts as string)").first()[0]
        for where in (
            f"ts = TIMESTAMP'{local}'", "hour(ts) = 13", "upper(name) = '\uA7DC'",
            "lower(name) = '\uA7CD'", "name ILIKE '\uA7CD'",
        ):  # fmt: skip
            expected = reference.where(where).count()
            assert expected == 1, where
            assert Table(path, spark=spark).scan(where).df.count() == expected, where
        t = Table(path, spark=spark)
        where = "hour(ts) = 14 OR lower(name) = '\ua7cc'"  # the two rows of 2000 only
        assert reference.where(where).count() == 2
        t.delete(where)
        assert [r["name"] for r in spark.read.format("delta").load(path).collect()] == ["ƛ"]


def _two_files(spark: Any, path: Any, rows: list[Any], schema: str, first: int) -> Table:
    """A table of ``rows`` in two files: the first ``first`` rows, then the rest."""
    t = Table.create(str(path), spark.createDataFrame(rows[:first], schema))
    t.append(spark.createDataFrame(rows[first:], schema))
    return t


def _as_spark(spark: Any, t: Table, predicates: list[str], delete: str) -> list[int]:
    """Every scan of ``predicates`` returns Spark's rows (column ``k``), then ``delete``
    leaves the rows Spark does not match; those rows."""
    reference = spark.read.format("delta").load(t.uri)
    for pred in predicates:
        want = sorted(r.k for r in reference.where(pred).collect())
        assert sorted(r.k for r in t.scan(pred).df.collect()) == want, pred
    keep = sorted(r.k for r in reference.where(f"NOT ({delete}) OR ({delete}) IS NULL").collect())
    t.delete(delete)
    assert sorted(r.k for r in spark.read.format("delta").load(t.uri).collect()) == keep
    return keep


def test_dates_compared_with_strings_as_strings_lose_no_row(spark: Any, tmp_path: Any) -> None:
    """Under ``spark.sql.legacy.typeCoercion.datetimeToString.enabled`` (ANSI off) Spark
    compares a DATE or TIMESTAMP with a string as strings: ``dt < '2024-1-5'`` holds for
    2024-01-10 ('2024-01-10' < '2024-1-5'). lakelayout skipped files comparing dates: a
    scan lost rows and a DELETE removed whole files Spark keeps (an audit)."""
    day = dt.datetime(2024, 1, 10, 12, tzinfo=dt.timezone.utc)
    rows = [(k, (day if k < 5 else day - dt.timedelta(days=7))) for k in range(10)]
    data = [(k, moment.date(), moment) for k, moment in rows]
    t = _two_files(spark, tmp_path / "t", data, "k INT, dt DATE, ts TIMESTAMP", 5)
    predicates = [
        "dt < '2024-1-5'",
        "dt > '2024-1-5'",
        "ts < '2024-1-5'",
        "dt IN ('2024-1-10', '2024-01-03')",
        "dt BETWEEN '2024-1-1' AND '2024-1-5'",
        "k > 2 AND dt <= '2024-1-9'",
    ]
    legacy = {
        "spark.sql.ansi.enabled": "false",
        "spark.sql.legacy.typeCoercion.datetimeToString.enabled": "true",
    }
    with session_conf(spark, legacy):
        reference = spark.read.format("delta").load(t.uri)
        assert sorted(r.k for r in reference.where("dt < '2024-1-5'").collect()) == list(range(10))
        # no row in Spark's reading: every row stays
        assert _as_spark(spark, t, predicates, "dt > '2024-1-5'") == list(range(10))


def test_timestamp_literals_of_a_timestamp_ntz_session_lose_no_row(
    spark: Any, tmp_path: Any
) -> None:
    """With ``spark.sql.timestampType=TIMESTAMP_NTZ``, ``TIMESTAMP '...'`` is a TIMESTAMP_NTZ;
    lakelayout bound it as an instant in the session zone, and a TIMESTAMP_NTZ value in a
    daylight-saving gap (02:30 on 2024-03-10 in Los Angeles) skipped its file (an audit)."""
    wall = [dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 3, 9, 12, 0)]
    t = _two_files(spark, tmp_path / "t", list(enumerate(wall)), "k INT, n TIMESTAMP_NTZ", 1)
    predicates = [
        "n = TIMESTAMP '2024-03-10 02:30:00'",
        "n = CAST('2024-03-10 02:30:00' AS TIMESTAMP)",
        "n >= TIMESTAMP '2024-03-10 02:00:00' AND n < TIMESTAMP '2024-03-10 03:00:00'",
        # (a review) to_timestamp gives the session's TIMESTAMP too; date_trunc of a
        # TIMESTAMP_NTZ reads it as an instant in the session zone first
        "n >= to_timestamp('2024-03-10 02:00:00')",
    ]
    others = [
        "date_trunc('HOUR', n) = TIMESTAMP '2024-03-10 02:00:00'",
        "n >= timestamp('2024-03-10 02:00:00')",
    ]
    ntz = {
        "spark.sql.session.timeZone": "America/Los_Angeles",
        "spark.sql.timestampType": "TIMESTAMP_NTZ",
    }
    with session_conf(spark, ntz):
        reference = spark.read.format("delta").load(t.uri)
        for pred in predicates:  # the row in the gap matches each of them
            assert [r.k for r in reference.where(pred).collect()] == [0], pred
        assert _as_spark(spark, t, predicates + others, predicates[0]) == [1]


def test_without_ansi_predicates_spark_answers_by_legacy_casts_match_spark(
    spark: Any, tmp_path: Any
) -> None:
    """With ``spark.sql.ansi.enabled=false`` Spark answers ``i = '1.5'`` or ``s = 7`` by its
    legacy casts; lakelayout refused 16 such predicates with an ANSI message (an audit).
    They are left to Spark: the same rows, and a DELETE removes what Spark matches."""
    data = [(k, str(k % 9), dt.date(2024, 1, 1 + k % 28)) for k in range(60)]
    t = _two_files(spark, tmp_path / "t", data, "k INT, s STRING, d DATE", 30)
    predicates = [
        "k = '1.5'",
        "k IN ('50', 'x')",
        "s = 7",
        "s > 1",
        "d = '2024-13-01'",
        "CAST('x' AS INT) IS NULL AND k < 3",
        "k > 40 AND s = 5",
    ]
    with session_conf(spark, {"spark.sql.ansi.enabled": "false"}):
        assert len(_as_spark(spark, t, predicates, "k > 40 AND s = 5")) < 60


def test_without_ansi_a_float_compared_with_an_integer_loses_no_row(
    spark: Any, tmp_path: Any
) -> None:
    """Without ANSI Spark compares a FLOAT with an integer as FLOAT (with ANSI as
    DOUBLE): x = 16777216.0 equals 16777217 then. lakelayout compared them as DOUBLE: the
    file was skipped and a DELETE kept the row (an audit)."""
    big = 16_777_216  # 2^24: FLOAT holds it, not the next integer
    data = [(0, float(big), big + 1, big + 1)] + [(k, 1.0, 1, 1) for k in range(1, 4)]
    t = _two_files(spark, tmp_path / "t", data, "k INT, x FLOAT, i INT, l BIGINT", 1)
    predicates = [
        f"x = {big + 1}",
        f"x = {big + 1}L",
        f"i = CAST({big} AS FLOAT)",
        f"l = CAST({big} AS FLOAT)",
        f"x IN ({big + 1}, 5)",
        f"x >= {big + 1}",
        f"x BETWEEN {big + 1} AND {big + 80}",
        f"x <=> {big + 1}",
        "x = i",
        f"x + 0 = {big + 1}",  # arithmetic and COALESCE are typed alike (a review)
        f"coalesce(x, 0) = {big + 1}",
    ]
    with session_conf(spark, {"spark.sql.ansi.enabled": "false"}):
        assert _as_spark(spark, t, predicates, f"x = {big + 1}") == [1, 2, 3]


def test_double_quoted_identifiers_and_escaped_literals_read_as_spark_reads_them(
    spark: Any, tmp_path: Any
) -> None:
    """With ``spark.sql.ansi.doubleQuotedIdentifiers`` Spark reads ``"s"`` as column s;
    lakelayout read the string 's': a scan returned no row and ``DELETE WHERE "s" <> 'zzz'``
    dropped every file, NULLs too. With ``spark.sql.parser.escapedStringLiterals``
    ``'C:\\dir'`` keeps its backslash; lakelayout unescaped it and skipped every file
    (an audit). Spark's ``!<`` and ``!>`` (>= and <=) were refused as malformed."""
    values = ["abc", None, "C:\\dir", "a\\b", "plain"]
    data = sorted(((k, values[k % 5]) for k in range(30)), key=lambda r: values.index(r[1]))

    def three_files(name: str) -> Table:  # abc and NULL, then C:\dir alone, then the rest
        t = _two_files(spark, tmp_path / name, data[:18], "k INT, s STRING", 12)
        t.append(spark.createDataFrame(data[18:], "k INT, s STRING"))
        return t

    t = three_files("t")
    with session_conf(spark, {"spark.sql.ansi.doubleQuotedIdentifiers": "true"}):
        predicates = ["\"s\" = 'abc'", '"s" IS NULL', "\"s\" LIKE 'a%'", '"k" !< 20']
        assert len(_as_spark(spark, t, predicates, "\"s\" <> 'zzz'")) == 6  # the NULLs
    t = three_files("u")
    with session_conf(spark, {"spark.sql.parser.escapedStringLiterals": "true"}):
        predicates = ["s = 'C:\\dir'", "s = 'a\\b'", "s LIKE 'a\\\\%'", "k !> 3"]
        reference = spark.read.format("delta").load(t.uri)
        assert reference.where(predicates[0]).count() == 6  # Spark's reading, checked
        assert len(_as_spark(spark, t, predicates, "s = 'C:\\dir'")) == 24


def test_names_are_bound_as_spelt_where_the_session_is_case_sensitive(
    spark: Any, tmp_path: Any
) -> None:
    """Under ``spark.sql.caseSensitive`` Spark refuses ``userid`` for a column ``UserId``:
    scans and DELETE did too (Spark's analyser), but ``plan()`` answered, and the
    refusal offered lakelayout's own row-file column as a suggestion (an audit)."""
    from lakelayout.errors import PredicateError

    data = [(k, {"x": k}) for k in range(20)]
    t = _two_files(spark, tmp_path / "t", data, "UserId INT, s STRUCT<x: INT>", 10)
    version = t.version
    with session_conf(spark, {"spark.sql.caseSensitive": "true"}):
        for text in ("userid < 3", "s.X = 4"):
            for call in (t.plan, t.scan, t.delete):
                with pytest.raises(PredicateError) as err:
                    call(text)
                assert "__ll_file" not in str(err.value)
        assert sorted(r[0] for r in t.scan("UserId < 3 OR s.x = 4").df.collect()) == [0, 1, 2, 4]
        with pytest.raises(PredicateError, match=r"caseSensitive is true.*'UserId'"):
            t.scan("UserId < 3", columns=["userid"])  # Spark's select refuses it too
        assert t.scan("UserId < 3", columns=["UserId"]).df.columns == ["UserId"]
    assert t.version == version
    assert t.plan("userid < 3").files_kept == 1  # without the setting, as Spark binds it
    assert t.scan("UserId < 3", columns=["userid"]).df.columns == ["UserId"]


def test_under_ansi_a_string_column_spark_casts_per_value_is_left_to_spark(
    spark: Any, tmp_path: Any
) -> None:
    """Under ANSI (Spark's default) ``zip = 12345`` on a STRING column casts each value:
    Spark answers where every value casts. lakelayout refused it ("cannot compare STRING
    with 5"), and ``bin = 'a'`` too. They are left to Spark: the same rows, and a DELETE
    removes what Spark matches; where a value does not cast, Spark's query fails and the
    DELETE removes nothing."""
    data = [(k, str(k % 9), bytes([97 + k % 3])) for k in range(60)]
    t = _two_files(spark, tmp_path / "t", data, "k INT, s STRING, bin BINARY", 30)
    predicates = [
        "s = 7",
        "s > 2.5",
        "3 > s",
        "s IN (1, 2)",
        "s < 1e1",
        "bin = 'a'",
        "k > 40 AND s = 5",
    ]
    with session_conf(spark, {"spark.sql.ansi.enabled": "true"}):
        assert len(_as_spark(spark, t, predicates, "k > 40 AND s = 5")) == 57  # 41, 50, 59
        t.append(spark.createDataFrame([(60, "x", b"z")], "k INT, s STRING, bin BINARY"))
        with pytest.raises(PredicateError, match=r"could not evaluate.*CAST_INVALID_INPUT"):
            t.delete("s = 1")
        # every row of every file satisfies k >= 0: the files were dropped whole, unread,
        # where Spark's filter and Delta's DELETE fail on 'x' (a review)
        with pytest.raises(PredicateError, match=r"could not evaluate.*CAST_INVALID_INPUT"):
            t.delete("s = 1 OR k >= 0")
        assert spark.read.format("delta").load(t.uri).count() == 58


#: strings at the edges of Spark's ANSI casts: signs, zeros, padding, 19 and 38 digits,
#: a fraction (casts to DECIMAL and DOUBLE, not to BIGINT)
_CAST_STRINGS = [
    "0", "-0", "007", " 42 ", "1.5", "-9223372036854775808", "9223372036854775807",
    "99999999999999999999999999999999999999", None,
]  # fmt: skip
_CAST_LITERALS = st.sampled_from(
    [
        "0", "42", "-1", "9223372036854775807", "-9223372036854775808", "1.5", "42.0BD",
        "99999999999999999999999999999999999999BD", "-1e300D", "double('NaN')", "NULL",
    ]
)  # fmt: skip


@st.composite
def _string_against_numbers(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["=", "<", ">=", "<=>", "!="]))
    shape = draw(st.sampled_from(["compare", "in", "or"]))
    if shape == "in":
        values = draw(st.lists(_CAST_LITERALS, min_size=1, max_size=3))
        return f"s {'NOT ' if draw(st.booleans()) else ''}IN ({', '.join(values)})"
    leaf = f"s {op} {draw(_CAST_LITERALS)}"
    return f"{leaf} OR k >= {draw(st.integers(0, 9))}" if shape == "or" else leaf


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sql=_string_against_numbers())
def test_random_string_columns_against_numbers_under_ansi_answer_as_spark(
    spark: Any, tmp_path_factory: Any, sql: str
) -> None:
    """Under ANSI a STRING column compared with a number casts each value (left to Spark,
    which answers or fails the query): over strings at the cast's edges and 19- and
    38-digit, NaN and NULL literals, a scan returns Spark's rows or fails as Spark does,
    and a DELETE removes what Spark's filter matches or, where it fails, nothing."""
    import shutil

    base = tmp_path_factory.getbasetemp() / "ansi-strings"
    if not base.exists():
        rows = [(k, s) for k, s in enumerate(_CAST_STRINGS)]
        _two_files(spark, base, rows, "k INT, s STRING", 4)
    with session_conf(spark, {"spark.sql.ansi.enabled": "true"}):
        reference = spark.read.format("delta").load(str(base))
        try:
            want: list[int] | None = sorted(r.k for r in reference.where(sql).collect())
        except Exception:
            want = None
        t = Table(str(base))
        try:
            got: list[int] | None = sorted(r.k for r in t.scan(sql).df.collect())
        except Exception:
            got = None
        assert got == want, sql
        copy = tmp_path_factory.mktemp("ansi-delete") / "t"
        shutil.copytree(base, copy)
        target = Table(str(copy))
        if want is None:
            with pytest.raises(PredicateError):
                target.delete(sql)
            assert spark.read.format("delta").load(str(copy)).count() == len(_CAST_STRINGS)
        else:
            target.delete(sql)
            left = sorted(r.k for r in spark.read.format("delta").load(str(copy)).collect())
            assert left == sorted(set(range(len(_CAST_STRINGS))) - set(want)), sql


def test_a_predicate_on_the_input_file_is_answered_as_spark_or_refused(
    spark: Any, tmp_path: Any
) -> None:
    """Rows lakelayout's Arrow tasks read (a partitioned table here) have no input file in
    Spark: ``input_file_name()`` was '' and a scan returned other rows than Delta's (an
    audit). Such a predicate is refused by name before any job; where Spark's Parquet
    reader reads the files it answers as Delta does."""
    data = pa.table(
        {
            "p": [k % 4 for k in range(40)],
            "i": list(range(40)),
            "m": [{"_metadata": k % 3} for k in range(40)],
        }
    )
    parted = Table.create(str(tmp_path / "parted"), data, partition_by=["p"])
    for text in [
        "input_file_name() LIKE '%p=1%'",
        "INPUT_FILE_BLOCK_LENGTH () > 0 AND i < 10",
        "_metadata.file_name LIKE '%.parquet'",
    ]:
        with pytest.raises(PredicateError, match="Arrow tasks"):
            parted.scan(text)
    quoted = {"spark.sql.ansi.doubleQuotedIdentifiers": "true"}
    # a review: it got past the check
    with session_conf(spark, quoted), pytest.raises(PredicateError, match="Arrow tasks"):
        parted.scan("\"input_file_name\"() = ''")
    # a struct field named _metadata is a field (a review: it was refused)
    want = spark.read.format("delta").load(parted.uri).where("m._metadata = 1").count()
    assert parted.scan("m._metadata = 1").df.count() == want == 13
    plain = Table.create(str(tmp_path / "plain"), data)
    reference = spark.read.format("delta").load(plain.uri)
    for text in ["input_file_name() LIKE '%.parquet'", "input_file_block_length() > 0"]:
        want = sorted(r.i for r in reference.where(text).collect())
        assert want and sorted(r.i for r in plain.scan(text).df.collect()) == want, text
    # a column of the table named like a file function is the column
    assert parted.scan("i < 3 AND 'input_file_name' <> 'x'").df.count() == 3


def test_a_delete_reads_the_time_of_its_start_once(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark reads current_timestamp() once per query and a DELETE runs two: rows 2 and
    3 hold the same instant T, in two files; when the clock passed T between the query
    choosing the files and the one writing the survivors, row 2 was deleted and row 3
    kept (an audit). The delay between the two is held open here by slowing the check
    that runs between them; the time is now read once, at the start."""
    import time

    from lakelayout.cluster import delete as deleting

    when = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=4)
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    past = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    t = Table.create(str(tmp_path / "t"), pa.table({"id": [1, 2], "ts": [past, when]}, schema))
    t.append(pa.table({"id": [3], "ts": [when]}, schema))
    check = deleting.check_rewrite

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(max(0.0, when.timestamp() - time.time() + 1.5))  # the clock passes T
        return check(*args, **kwargs)

    monkeypatch.setattr(deleting, "check_rewrite", slow)
    assert time.time() < when.timestamp(), "the table took too long to write: T is past"
    t.delete("ts < current_timestamp() AND now() = CURRENT_TIMESTAMP")
    assert sorted(r.id for r in t.to_df().collect()) == [2, 3]  # T was after the start


def test_calls_of_the_query_time_are_found_as_spark_reads_them() -> None:
    from lakelayout.expr.parse import now_calls

    text = (
        "now() > ts AND localtimestamp() > x AND curdate() = d AND unix_timestamp() > 5 "
        "AND unix_timestamp(ts) > 1 AND `now`() = 1 AND t.now() = 2 AND s = 'now()' "
        "AND CURRENT_DATE = d AND current_timestamp ( ) > ts"
    )
    found = [(text[a : b + 1], kind) for a, b, kind in now_calls(text)]
    assert found == [
        ("now()", "timestamp"),
        ("localtimestamp()", "local"),
        ("curdate()", "date"),
        ("unix_timestamp()", "unix"),
        ("CURRENT_DATE", "date"),
        ("current_timestamp ( )", "timestamp"),
    ]
    assert now_calls("current_date = d", columns=["Current_Date"]) == []  # the column
    # a lambda's variable may have the name (a review: the DELETE kept every row)
    assert now_calls("exists(a, `current_date` -> current_date IS NULL)") == []
    assert now_calls("exists(a, current_timestamp -> current_timestamp > 1)") == []
    assert now_calls("exists(a, (x, Current_Date) -> x < 1) AND d = current_date") == []
    # a lambda that names its variable otherwise leaves the bare names calls
    lam = "exists(a, x -> x < now()) AND CURRENT_DATE = d"
    assert [lam[s : e + 1] for s, e, _ in now_calls(lam)] == ["now()", "CURRENT_DATE"]


def test_a_legacy_rebase_mode_of_the_reading_session_moves_no_kept_row(
    spark: Any, tmp_path: Any
) -> None:
    """Under ``spark.sql.parquet.datetimeRebaseModeInRead=LEGACY`` Spark rebases the dates
    and timestamps of Parquet files whose footer does not say how they were written.
    lakelayout's files said nothing, and a DELETE read the rows it keeps through Spark and
    wrote them back moved by days, for good (1000-01-01 became 0999-12-27; an audit).
    Now lakelayout's files say they are proleptic Gregorian (Spark reads them as stored in
    any mode), and its reads take a file that says nothing (delta-rs's) as stored."""
    from deltalake import DeltaTable, write_deltalake

    days = [dt.date(1000, 1, 1) + dt.timedelta(days=i) for i in range(3)]
    times = [dt.datetime(1200, 3, 1, 12, i, tzinfo=dt.timezone.utc) for i in range(3)]
    data = pa.table({"i": [0, 1, 2], "d": days, "ts": pa.array(times, pa.timestamp("us", "UTC"))})
    ours = Table.create(str(tmp_path / "ours"), data)
    write_deltalake(str(tmp_path / "theirs"), data)  # one file, as delta-rs writes it
    legacy = {"spark.sql.parquet.datetimeRebaseModeInRead": "LEGACY"}
    with session_conf(spark, legacy):
        # Spark itself reads lakelayout's files as written, whatever the mode
        assert sorted(r.d for r in spark.read.format("delta").load(ours.uri).collect()) == days
        for path in (ours.uri, str(tmp_path / "theirs")):
            t = Table(path, spark=spark)
            assert sorted(r.i for r in t.scan("d < DATE'1000-01-02'").df.collect()) == [0]
            t.delete("i = 1")  # the file is rewritten with the two rows it keeps
    for path in (ours.uri, str(tmp_path / "theirs")):
        kept = DeltaTable(path).to_pyarrow_table().sort_by("i").to_pylist()
        assert kept == [row for row in data.to_pylist() if row["i"] != 1], path
