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
  column of attributes and lat/lng points.
* ``taxi``: correlated trips (fare ≈ 3 + 2.5 × distance, duration grows with
  distance and rush hour, pickup time with a daily cycle).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakelayout.errors import EnvironmentProblem, InvalidOption

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the column holding the insert batch of a row while a dataset is staged
BATCH_COLUMN = "_ll_batch"


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

    def frame(self, spark: SparkSession) -> DataFrame:
        """Every row (batch column included)."""
        return spark.read.parquet(self.path)

    def batch(self, spark: SparkSession, k: int, rows_per_file: int) -> DataFrame:
        """Insert batch ``k`` without the batch column, as ``ceil(rows / rows_per_file)``
        range partitions of the arrival order (one file each when the target size is large)."""
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
    """Batch ``k`` of ``ds`` range-partitioned on the arrival order into files of ~``rows_per_file``."""
    from pyspark.sql import functions as F

    if not 0 <= k < ds.batches:
        raise InvalidOption(f"batch {k} out of range: dataset {ds.name!r} has {ds.batches}")
    if rows_per_file < 1:
        raise InvalidOption(f"rows_per_file must be >= 1, got {rows_per_file}")
    df = ds.frame(spark).where(F.col(BATCH_COLUMN) == k).drop(BATCH_COLUMN)
    parts = max(1, math.ceil(ds.rows / ds.batches / rows_per_file))
    return df.repartitionByRange(parts, *ds.order).sortWithinPartitions(*ds.order)


def _stage(
    df: DataFrame, name: str, path: Path, order: tuple[str, ...], batches: int, time_column: str
) -> Dataset:
    """Write ``df`` (which already has the batch column) as Parquet, or reuse a staged copy."""
    if batches < 1:
        raise InvalidOption(f"batches must be >= 1, got {batches}")
    if not (path / "_SUCCESS").exists():
        if path.exists():
            shutil.rmtree(path)
        df.write.parquet(str(path))
    import pyarrow.dataset as pads

    rows = pads.dataset(str(path), format="parquet").count_rows()
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
        for field in df.schema.fields:
            if field.dataType.typeName() == "decimal":
                df = df.withColumn(field.name, F.col(field.name).cast("double"))
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
    source = tpchgen(scale, work_dir / f"tpch-{scale:g}")
    df = tpch_denormalized(spark, source)
    # arrival = generation order = l_orderkey: batches are its equal-count ranges
    cuts = df.approxQuantile("l_orderkey", [i / batches for i in range(1, batches)], 0.0005)
    batch = sum((F.col("l_orderkey") >= F.lit(c)).cast("int") for c in cuts) if cuts else F.lit(0)
    return _stage(
        df.withColumn(BATCH_COLUMN, F.lit(0) + batch),
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
LOG_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Safari/17.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "python-requests/2.31.0",
    "curl/8.4.0",
    "Apache-HttpClient/4.5.14 (Java/17.0.9)",
    "Go-http-client/2.0",
)
LOG_PATHS = ("api/v2/query", "api/v2/jobs", "api/v1/users", "static/js", "ui/dashboards")
LOG_REGIONS = ("us-east", "us-west", "eu-central", "ap-south")
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
#: city centres (lat, lng) the points cluster around
LOG_CITIES = ((40.7, -74.0), (51.5, -0.1), (48.9, 2.35), (35.7, 139.7), (37.8, -122.4))
LOG_START = datetime(2025, 1, 1)
LOG_DAYS = 180


def logs_arrow(rows: int, seed: int) -> pa.Table:
    """``rows`` telemetry rows in timestamp order (pure numpy; seeded)."""
    rng = np.random.default_rng(seed)
    day = np.sort(rng.integers(0, LOG_DAYS, rows))
    hour = np.clip(rng.normal(14, 4, rows), 0, 23.999)  # daily cycle peaking at 14:00
    seconds = (day * 86400 + hour * 3600).astype(np.int64)
    seconds.sort()
    ts = (np.datetime64(LOG_START, "us") + seconds.astype("timedelta64[s]")).astype(
        "datetime64[us]"
    )
    collector = np.minimum(rng.zipf(1.6, rows), 500).astype(np.int32)
    agent = rng.choice(len(LOG_AGENTS), rows, p=[0.35, 0.15, 0.1, 0.2, 0.1, 0.05, 0.05])
    path = rng.integers(0, len(LOG_PATHS), rows)
    item = rng.integers(0, 5000, rows)
    urls = [
        f"https://telemetry.internal.example.com/{LOG_PATHS[p]}/{i}"
        for p, i in zip(path, item, strict=True)
    ]
    db = rng.choice(len(LOG_DBS), rows, p=_zipf_probs(len(LOG_DBS), 1.1))
    city = rng.integers(0, len(LOG_CITIES), rows)
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
            "user_agent": pa.array([LOG_AGENTS[a] for a in agent]),
            "url": pa.array(urls),
            "db_name": pa.array([LOG_DBS[d] for d in db]),
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
    """The logs table (``rows`` rows, seeded), staged in timestamp order."""
    data = _with_batches(logs_arrow(rows, seed), batches)
    df = spark.createDataFrame(data).repartition(max(1, rows // 200_000))
    return _stage(df, "logs", work_dir / f"logs-{rows}-s{seed}-b{batches}", ("ts",), batches, "ts")


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
    data = _with_batches(taxi_arrow(rows, seed), batches)
    df = spark.createDataFrame(data).repartition(max(1, rows // 200_000))
    return _stage(
        df,
        "taxi",
        work_dir / f"taxi-{rows}-s{seed}-b{batches}",
        ("pickup_ts",),
        batches,
        "pickup_ts",
    )
