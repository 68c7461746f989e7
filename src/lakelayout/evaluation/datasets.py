"""Generated datasets for the evaluation (nothing is downloaded).

Every dataset is a Spark DataFrame in *arrival order* plus the columns that
define that order. :func:`insert_batches` cuts it into ``n`` consecutive
insert batches and :func:`batch_frame` gives batch ``k`` partitioned so that
the writer produces files of about ``rows_per_file`` rows each, still in
arrival order: a table built from them is the no-layout baseline.

* ``tpch``: TPC-H lineitem (``tpchgen-cli``) joined with orders, customer,
  part, supplier, nation and region, as in OReO (§VI) and Pando (§8).
  Arrival order is generation order (``l_orderkey, l_linenumber``); decimals
  become doubles, comments and addresses are dropped to keep files small.
* ``logs``: telemetry rows with a daily cycle, Zipf-skewed collector ids,
  user agents, URLs and database names with long common prefixes, a map
  column of attributes and lat/lng points; events that come and go in time
  (a scanner's bursts, an API version rolled out, a database restored during
  incidents, a new city) so that rich per-file metadata has something to
  skip. It carries a Python UDF (``getagentname``) and the skipping indexes
  the replay declares (:data:`LOGS_INDEXES`).
* ``taxi``: correlated trips (fare ≈ 3 + 2.5 × distance, duration grows with
  distance and rush hour, pickup time with a daily cycle).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakelayout.errors import EnvironmentProblem, InvalidOption
from lakelayout.skipping.indexes import (
    BloomFilter,
    GeoBox,
    Index,
    MinMax,
    Prefix,
    Suffix,
    ValueList,
    elementwise,
)
from lakelayout.skipping.indexes.base import Udf
from lakelayout.skipping.indexes.examples import agent_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the column holding the insert batch of a row while a dataset is staged
BATCH_COLUMN = "_ll_batch"
#: bump when the staged layout changes, so staged copies in an older layout are not reused
STAGE_VERSION = 2


@dataclass(frozen=True)
class Dataset:
    """A staged dataset: Parquet in arrival order with a batch column, and how to order it."""

    name: str
    path: str
    rows: int
    batches: int
    order: tuple[str, ...]
    #: the column a "sorted by arrival time" policy sorts on
    time_column: str
    #: Python UDFs the workload calls (name -> function over Arrow arrays); registered in
    #: Spark by :meth:`register_functions` and on every replayed table
    udfs: Mapping[str, Udf] = field(default_factory=dict)
    #: return types of :attr:`udfs` (name -> Arrow type alias); ``string`` when absent
    udf_types: Mapping[str, str] = field(default_factory=dict)
    #: skipping indexes the replay declares on every policy's table (unbound declarations)
    indexes: tuple[Index, ...] = ()

    def register_functions(self, spark: SparkSession) -> None:
        """Register :attr:`udfs` in ``spark``, so workload SQL calling them runs on any frame."""
        if self.udfs:
            from lakelayout.indexing import register_udfs_in_spark

            register_udfs_in_spark(spark, self.udfs, self.udf_types)

    def frame(self, spark: SparkSession) -> DataFrame:
        """Every row (batch column included)."""
        return spark.read.parquet(self.path)

    def batch(self, spark: SparkSession, k: int, rows_per_file: int) -> DataFrame:
        """Insert batch ``k`` without the batch column, as ``ceil(rows / rows_per_file)``
        ranges of the arrival order (one file each when the target size is large)."""
        return batch_frame(self, spark, k, rows_per_file)

    def sample(self, spark: SparkSession, rows: int, *, seed: int = 0) -> pa.Table:
        """About ``rows`` rows drawn uniformly from all batches, as Arrow (for fitting layouts)."""
        fraction = min(1.0, rows / max(self.rows, 1))
        df = self.frame(spark).drop(BATCH_COLUMN)
        return to_arrow(df.sample(fraction=fraction, seed=seed))


def to_arrow(df: DataFrame) -> pa.Table:
    """Collect a DataFrame as Arrow with plain (not view) strings."""
    table = df.toArrow()
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def batch_frame(ds: Dataset, spark: SparkSession, k: int, rows_per_file: int) -> DataFrame:
    """Batch ``k`` of ``ds`` cut into ``ceil(rows / rows_per_file)`` ranges of the arrival
    order, one Spark partition (so one file) each, sorted within.

    The ranges are exact quantiles of the first order column and each range is
    sent to its own partition, so the same batch always gives the same files
    (``repartitionByRange`` samples with a seed that changes from job to job,
    and replays in two modes must see the same files).
    """
    from pyspark.sql import functions as F

    if not 0 <= k < ds.batches:
        raise InvalidOption(f"batch {k} out of range: dataset {ds.name!r} has {ds.batches}")
    if rows_per_file < 1:
        raise InvalidOption(f"rows_per_file must be >= 1, got {rows_per_file}")
    df = ds.frame(spark).where(F.col(BATCH_COLUMN) == k).drop(BATCH_COLUMN)
    parts = max(1, math.ceil(ds.rows / ds.batches / rows_per_file))
    if parts == 1:
        return df.repartition(1).sortWithinPartitions(*ds.order)
    from pyspark.ml.feature import Bucketizer

    keyed = df.withColumn(_ORDER_KEY, F.col(ds.order[0]).cast("double"))
    # exact quantiles of a staged batch never change: one job per batch, not per policy
    # (a copy staged again at the same path has a new _SUCCESS marker)
    success = Path(ds.path) / "_SUCCESS"
    memo = (ds.path, success.stat().st_mtime_ns if success.exists() else 0, k, parts)
    if memo not in _CUTS:
        _CUTS[memo] = keyed.approxQuantile(_ORDER_KEY, [i / parts for i in range(1, parts)], 0.0)
    # range i = the rows between the i-th and (i+1)-th distinct cut, found by binary search
    # (a sum of one comparison per cut costs ~15 s per 1.5M rows at 150 ranges)
    splits = [-math.inf, *sorted(set(_CUTS[memo])), math.inf]
    ranged = Bucketizer(splits=splits, inputCol=_ORDER_KEY, outputCol=_RANGE).transform(keyed)
    keys = F.array(*[F.lit(v).cast("bigint") for v in _hash_keys(spark, parts)])
    return (
        ranged.withColumn(_ORDER_KEY, F.element_at(keys, F.col(_RANGE).cast("int") + 1))
        .drop(_RANGE)
        .repartition(parts, _ORDER_KEY)
        .sortWithinPartitions(*ds.order)
        .drop(_ORDER_KEY)
    )


_ORDER_KEY = "_ll_order_key"
_RANGE = "_ll_range"
_HASH_KEYS: dict[int, list[int]] = {}
#: (staged path, when it was staged, batch, ranges) -> the batch's cuts
_CUTS: dict[tuple[str, int, int, int], list[float]] = {}


def _hash_keys(spark: SparkSession, parts: int) -> list[int]:
    """``parts`` bigints whose hash partition (``pmod(hash(v), parts)``) is 0, 1, ..., parts-1:
    hash-repartitioning on them sends range ``i`` to partition ``i`` and nowhere else."""
    if parts not in _HASH_KEYS:
        from pyspark.sql import functions as F

        found: dict[int, int] = {}
        limit = parts * 64
        while len(found) < parts:
            rows = (
                spark.range(0, limit)
                .select("id", F.expr(f"pmod(hash(id), {parts})").alias("p"))
                .collect()
            )
            for row in rows:
                found.setdefault(int(row["p"]), int(row["id"]))
            limit *= 4
        _HASH_KEYS[parts] = [found[i] for i in range(parts)]
    return _HASH_KEYS[parts]


def _stage(
    make: Callable[[], DataFrame],
    name: str,
    path: Path,
    order: tuple[str, ...],
    batches: int,
    time_column: str,
) -> Dataset:
    """Write the rows ``make()`` gives (with the batch column) as Parquet, or reuse a
    staged copy (then ``make`` is not called: no generation, join or quantile job).

    The copy is partitioned by the batch column (``_ll_batch=k/``) and sorted in arrival
    order within each batch, so reading one insert batch reads only that batch's files
    (reading all of them and filtering cost ~20 s per insert at TPC-H scale 1).
    """
    if batches < 1:
        raise InvalidOption(f"batches must be >= 1, got {batches}")
    path = path.with_name(f"{path.name}-s{STAGE_VERSION}")
    if not (path / "_SUCCESS").exists():
        if path.exists():
            shutil.rmtree(path)
        (
            make()
            .repartition(BATCH_COLUMN)  # a batch's rows in one task: one sorted file
            .sortWithinPartitions(BATCH_COLUMN, *order)
            .write.partitionBy(BATCH_COLUMN)
            .parquet(str(path))
        )
    import pyarrow.parquet as pq

    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in path.rglob("*.parquet"))
    return Dataset(name, str(path), rows, batches, order, time_column)


def _with_batches(data: pa.Table, batches: int) -> pa.Table:
    """Append the batch column: ``batches`` equal consecutive slices of the rows."""
    n = data.num_rows
    batch = np.minimum(np.arange(n) * batches // max(n, 1), batches - 1).astype(np.int32)
    return data.append_column(BATCH_COLUMN, pa.array(batch))


# --------------------------------------------------------------------------- TPC-H


def tpchgen(scale: float, out_dir: Path) -> Path:
    """Generate every TPC-H table at ``scale`` as Parquet with tpchgen-cli (cached)."""
    if scale <= 0:
        raise InvalidOption(f"TPC-H scale must be > 0, got {scale}")
    if (out_dir / "lineitem.parquet").exists() and (out_dir / "region.parquet").exists():
        return out_dir
    exe = shutil.which("tpchgen-cli") or os.path.join(
        os.path.dirname(sys.executable), "tpchgen-cli"
    )
    if not os.path.exists(exe):
        raise EnvironmentProblem("tpchgen-cli not found: pip install tpchgen-cli")
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [exe, "parquet", "-s", str(scale), f"--output-dir={out_dir}"],
        check=True,
        capture_output=True,
    )
    return out_dir


def tpch_denormalized(spark: SparkSession, source: Path) -> DataFrame:
    """lineitem ⋈ orders ⋈ customer ⋈ part ⋈ supplier, with nation and region names
    of both customer (``c_nation``, ``c_region``) and supplier (``s_nation``, ``s_region``)."""
    from pyspark.sql import functions as F

    def read(name: str) -> DataFrame:
        df = spark.read.parquet(str(source / f"{name}.parquet"))
        for column in df.schema.fields:
            if column.dataType.typeName() == "decimal":
                df = df.withColumn(column.name, F.col(column.name).cast("double"))
        return df

    nation = read("nation").join(read("region"), F.col("n_regionkey") == F.col("r_regionkey"))
    c_nat = nation.select(
        F.col("n_nationkey").alias("c_nk"),
        F.col("n_name").alias("c_nation"),
        F.col("r_name").alias("c_region"),
    )
    s_nat = nation.select(
        F.col("n_nationkey").alias("s_nk"),
        F.col("n_name").alias("s_nation"),
        F.col("r_name").alias("s_region"),
    )
    customer = (
        read("customer")
        .select("c_custkey", "c_nationkey", "c_acctbal", "c_mktsegment")
        .join(F.broadcast(c_nat), F.col("c_nationkey") == F.col("c_nk"))
        .drop("c_nk")
    )
    supplier = (
        read("supplier")
        .select("s_suppkey", "s_nationkey", "s_acctbal")
        .join(F.broadcast(s_nat), F.col("s_nationkey") == F.col("s_nk"))
        .drop("s_nk")
    )
    part = read("part").drop("p_comment", "p_name")
    orders = read("orders").drop("o_comment", "o_clerk")
    lineitem = read("lineitem").drop("l_comment")
    return (
        lineitem.join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(customer, F.col("o_custkey") == F.col("c_custkey"))
        .join(part, F.col("l_partkey") == F.col("p_partkey"))
        .join(F.broadcast(supplier), F.col("l_suppkey") == F.col("s_suppkey"))
        .drop("o_orderkey", "c_custkey", "p_partkey", "s_suppkey")
    )


def tpch_dataset(spark: SparkSession, scale: float, work_dir: Path, *, batches: int = 4) -> Dataset:
    """The denormalized TPC-H table at ``scale``, staged in arrival (generation) order."""
    from pyspark.sql import functions as F

    if batches < 1:
        raise InvalidOption(f"batches must be >= 1, got {batches}")

    def make() -> DataFrame:
        df = tpch_denormalized(spark, tpchgen(scale, work_dir / f"tpch-{scale:g}"))
        # arrival = generation order = l_orderkey: batches are its equal-count ranges
        # (no quantiles for one batch: Spark 4.2's approxQuantile fails on an empty list)
        probabilities = [i / batches for i in range(1, batches)]
        cuts = df.approxQuantile("l_orderkey", probabilities, 0.0005) if probabilities else []
        batch = (
            sum((F.col("l_orderkey") >= F.lit(c)).cast("int") for c in cuts) if cuts else F.lit(0)
        )
        return df.withColumn(BATCH_COLUMN, F.lit(0) + batch)

    return _stage(
        make,
        "tpch",
        work_dir / f"tpch-denorm-{scale:g}-b{batches}",
        ("l_orderkey", "l_linenumber"),
        batches,
        "l_shipdate",
    )


# --------------------------------------------------------------------------- logs

LOG_DBS = tuple(
    f"prod_analytics_warehouse_{team}_{env}"
    for team in ("billing", "search", "ads", "growth", "infra", "ml")
    for env in ("main", "staging", "archive")
)
#: the database restored during incidents (only on :data:`LOG_INCIDENT_DAYS`)
LOG_RESTORE_DB = "prod_analytics_warehouse_billing_restore"
LOG_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Safari/17.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "python-requests/2.31.0",
    "curl/8.4.0",
    "Apache-HttpClient/4.5.14 Java/17.0.9",
    "Go-http-client/2.0",
)
#: a port scanner that shows up only on :data:`LOG_SCAN_DAYS`
LOG_SCANNER = "Mozilla/5.0 zgrab/0.x"
LOG_URL_ROOT = "https://telemetry.internal.example.com/"
LOG_PATHS = ("api/v2/query", "api/v2/jobs", "api/v1/users", "static/js", "ui/dashboards")
#: from :data:`LOG_V3_DAY` on, most ``api/v2/query`` calls go to this path instead
LOG_V3_PATH = "api/v3/query"
LOG_ITEMS = 5000
LOG_REGIONS = ("us-east", "us-west", "eu-central", "ap-south")
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
#: city centres (lat, lng) the points cluster around; the last one opens on LOG_NEW_CITY_DAY
LOG_CITIES = (
    (40.7, -74.0),
    (51.5, -0.1),
    (48.9, 2.35),
    (35.7, 139.7),
    (37.8, -122.4),
    (41.9, -87.6),
)
LOG_START = datetime(2025, 1, 1)
LOG_DAYS = 180
LOG_SCAN_DAYS = (30, 95, 160)
LOG_INCIDENT_DAYS = (50, 51, 140)
LOG_V3_DAY = 120
LOG_NEW_CITY_DAY = 90
#: bump when :func:`logs_arrow` changes, so staged copies of older data are not reused
LOGS_VERSION = 2


def agent_names() -> tuple[str, ...]:
    """Every ``getagentname(user_agent)`` value the logs table holds."""
    return tuple(dict.fromkeys(agent_name(a) for a in (*LOG_AGENTS, LOG_SCANNER)))


#: the logs workload's UDF: the product name of a user agent (``curl/8.4.0`` -> ``curl``)
LOGS_UDFS: Mapping[str, Udf] = {"getagentname": elementwise(agent_name)}
LOGS_UDF_TYPES: Mapping[str, str] = {"getagentname": "string"}
#: what the replay declares on every logs table (``--no-indexes`` leaves them out)
LOGS_INDEXES: tuple[Index, ...] = (
    Prefix("url", length=len(LOG_URL_ROOT) + len("api/v2/")),
    BloomFilter("url", fpp=0.01, expected_values=20_000),
    Suffix("db_name", length=8),
    ValueList("getagentname(user_agent)", udfs=LOGS_UDFS, functions=LOGS_UDF_TYPES),
    GeoBox("lat", "lng", boxes=8),
    MinMax("month(ts)"),
)


def logs_arrow(rows: int, seed: int) -> pa.Table:
    """``rows`` telemetry rows in timestamp order (pure numpy; seeded)."""
    rng = np.random.default_rng(seed)
    day = np.sort(rng.integers(0, LOG_DAYS, rows))
    hour = np.clip(rng.normal(14, 4, rows), 0, 23.999)  # daily cycle peaking at 14:00
    seconds = (day * 86400 + hour * 3600).astype(np.int64)
    seconds.sort()
    day = seconds // 86400
    ts = (np.datetime64(LOG_START, "us") + seconds.astype("timedelta64[s]")).astype(
        "datetime64[us]"
    )
    collector = np.minimum(rng.zipf(1.6, rows), 500).astype(np.int32)
    agents = np.array([*LOG_AGENTS, LOG_SCANNER], dtype=object)
    agent = rng.choice(len(LOG_AGENTS), rows, p=[0.35, 0.15, 0.1, 0.2, 0.1, 0.05, 0.05])
    agent[np.isin(day, LOG_SCAN_DAYS) & (rng.random(rows) < 0.4)] = len(LOG_AGENTS)
    paths = np.array([*LOG_PATHS, LOG_V3_PATH], dtype=object)
    path = rng.integers(0, len(LOG_PATHS), rows)
    path[(path == 0) & (day >= LOG_V3_DAY) & (rng.random(rows) < 0.7)] = len(LOG_PATHS)
    item = rng.integers(0, LOG_ITEMS, rows)
    urls = [f"{LOG_URL_ROOT}{p}/{i}" for p, i in zip(paths[path], item, strict=True)]
    dbs = np.array([*LOG_DBS, LOG_RESTORE_DB], dtype=object)
    db = rng.choice(len(LOG_DBS), rows, p=_zipf_probs(len(LOG_DBS), 1.1))
    db[np.isin(day, LOG_INCIDENT_DAYS) & (rng.random(rows) < 0.15)] = len(LOG_DBS)
    city = rng.integers(0, len(LOG_CITIES) - 1, rows)
    city[(day >= LOG_NEW_CITY_DAY) & (rng.random(rows) < 0.2)] = len(LOG_CITIES) - 1
    centre = np.array(LOG_CITIES)[city]
    lat = centre[:, 0] + rng.normal(0, 0.5, rows)
    lng = centre[:, 1] + rng.normal(0, 0.5, rows)
    region = rng.integers(0, len(LOG_REGIONS), rows)
    level = rng.choice(len(LOG_LEVELS), rows, p=[0.2, 0.6, 0.15, 0.05])
    attrs = [
        [("region", LOG_REGIONS[r]), ("level", LOG_LEVELS[v])]
        for r, v in zip(region, level, strict=True)
    ]
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "collector_id": pa.array(collector),
            "user_agent": pa.array(agents[agent].tolist(), pa.string()),
            "url": pa.array(urls, pa.string()),
            "db_name": pa.array(dbs[db].tolist(), pa.string()),
            "latency_ms": pa.array(np.round(rng.lognormal(3.0, 1.0, rows), 2)),
            "attrs": pa.array(attrs, pa.map_(pa.string(), pa.string())),
            "lat": pa.array(np.round(lat, 5)),
            "lng": pa.array(np.round(lng, 5)),
        }
    )


def _zipf_probs(n: int, a: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** a
    return np.asarray(w / w.sum())


def logs_dataset(
    spark: SparkSession, rows: int, work_dir: Path, *, batches: int = 4, seed: int = 7
) -> Dataset:
    """The logs table (``rows`` rows, seeded), staged in timestamp order, with its UDF
    (registered in ``spark`` here) and its index declarations."""

    def make() -> DataFrame:
        data = _with_batches(logs_arrow(rows, seed), batches)
        return spark.createDataFrame(data).repartition(max(1, rows // 200_000))

    path = work_dir / f"logs-v{LOGS_VERSION}-{rows}-s{seed}-b{batches}"
    staged = _stage(make, "logs", path, ("ts",), batches, "ts")
    ds = replace(staged, udfs=LOGS_UDFS, udf_types=LOGS_UDF_TYPES, indexes=LOGS_INDEXES)
    ds.register_functions(spark)
    return ds


# --------------------------------------------------------------------------- taxi


def taxi_arrow(rows: int, seed: int) -> pa.Table:
    """Correlated trips in pickup order: fare vs distance vs duration, rush hours."""
    rng = np.random.default_rng(seed)
    start = datetime(2025, 3, 3)
    minutes = np.sort(rng.integers(0, 28 * 24 * 60, rows))
    hour = (minutes // 60) % 24
    rush = ((hour >= 7) & (hour <= 9)) | ((hour >= 16) & (hour <= 19))
    zone = np.minimum(rng.zipf(1.4, rows), 260).astype(np.int32)
    airport = np.isin(zone, (132, 138, 1))
    distance = np.round(rng.gamma(1.6, 1.8, rows) + airport * rng.uniform(10, 20, rows), 2)
    fare = 3.0 + 2.5 * distance + rng.normal(0, 1.5, rows)
    flat = rng.random(rows) < 0.04
    fares = np.round(np.where(flat, 52.0, np.maximum(fare, 3.0)).astype(np.float64), 2)
    duration = np.round(distance * rng.uniform(2.0, 4.0, rows) * np.where(rush, 1.6, 1.0) + 2, 1)
    pickup = np.datetime64(start, "us") + minutes.astype("timedelta64[m]")
    payments = np.array(["card", "cash", "no_charge", "dispute"])
    return pa.table(
        {
            "pickup_ts": pa.array(pickup.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
            "zone_id": pa.array(zone),
            "trip_distance": pa.array(distance),
            "fare_amount": pa.array(fares),
            "duration_min": pa.array(duration),
            "passengers": pa.array(rng.integers(1, 7, rows).astype(np.int32)),
            "payment_type": pa.array(payments[rng.choice(4, rows, p=[0.7, 0.25, 0.03, 0.02])]),
        }
    )


def taxi_dataset(
    spark: SparkSession, rows: int, work_dir: Path, *, batches: int = 4, seed: int = 11
) -> Dataset:
    """The correlated taxi table (``rows`` rows, seeded), staged in pickup order."""

    def make() -> DataFrame:
        data = _with_batches(taxi_arrow(rows, seed), batches)
        return spark.createDataFrame(data).repartition(max(1, rows // 200_000))

    return _stage(
        make,
        "taxi",
        work_dir / f"taxi-{rows}-s{seed}-b{batches}",
        ("pickup_ts",),
        batches,
        "pickup_ts",
    )
