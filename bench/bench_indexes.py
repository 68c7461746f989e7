"""Skipping indexes on a generated log-like table (issue 3): sizes, build time, bytes scanned.

A ~500k-row web log (timestamps with a daily cycle over 40 days, user agents,
URLs and database names sharing long prefixes, a skewed collector id, lat/lng)
is written in time order as ~40 files. Every index type is declared and built
with ``refresh()``. Printed, as ratios from this one run:

* metadata bytes per index relative to the data bytes;
* ``refresh()`` time relative to one plain Spark scan of the same columns;
* bytes scanned for LIKE-prefix, LIKE-suffix and UDF (``getAgentName``)
  queries with the indexes vs min/max statistics alone, on the same files.

Run: ``.venv/bin/python bench/bench_indexes.py [rows]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakelayout.api import Table
from lakelayout.skipping.indexes import (
    BloomFilter,
    Features,
    GapList,
    GeoBox,
    Hybrid,
    MinMax,
    Prefix,
    Suffix,
    ValueList,
    elementwise,
)
from lakelayout.skipping.indexes.examples import agent_name
from lakelayout.table.session import spark_session

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
FILES = 40
DAYS = 40
URL = "https://shop.example.com/api/v2/catalog/"
DB = "prod-warehouse-eu-west-1.cluster-7.analytics."
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 Chrome/120.0",
    "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/118.0",
    "Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 Safari/605.1",
    "curl/8.1.2",
    "python-requests/2.31",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
]
CATEGORIES = ["books", "shoes", "garden", "toys", "kitchen", "sports", "music", "tools"]
TABLES = ["orders", "customers", "payments", "sessions", "inventory", "events"]
UDFS = {"getagentname": elementwise(agent_name)}


def log_table(rows: int, seed: int = 7) -> pa.Table:
    """Time-ordered log rows; rare values (a campaign, an attack, an audit table) come in bursts."""
    rng = np.random.default_rng(seed)
    day = np.sort(rng.integers(0, DAYS, rows))
    hour = np.clip(rng.normal(14, 4, rows), 0, 23.99)  # daily cycle peaking mid-afternoon
    seconds = day * 86_400 + (hour * 3600).astype(np.int64)
    ts = pa.array((1_700_000_000 + seconds) * 1_000_000, pa.timestamp("us", tz="UTC"))
    agents = np.array(AGENTS, dtype=object)[
        rng.choice(len(AGENTS), rows, p=[0.4, 0.2, 0.2, 0.1, 0.07, 0.03])
    ]
    attack = (day >= 17) & (day <= 18) & (rng.random(rows) < 0.05)
    agents[attack] = "Hacker/6.6 (scanner)"
    category = np.array(CATEGORIES, dtype=object)[rng.integers(0, len(CATEGORIES), rows)]
    campaign = (day >= 30) & (day <= 31) & (rng.random(rows) < 0.3)
    category[campaign] = "blackfriday"
    item = rng.integers(0, 100_000, rows)
    urls = [f"{URL}{c}/item/{i}" for c, i in zip(category, item, strict=True)]
    tables = np.array(TABLES, dtype=object)[rng.integers(0, len(TABLES), rows)]
    audit = (day >= 8) & (day <= 9) & (rng.random(rows) < 0.2)
    tables[audit] = "audit_log"
    dbs = [f"{DB}shard_{s:02d}.{t}" for s, t in zip(rng.integers(0, 16, rows), tables, strict=True)]
    collector = np.minimum(rng.zipf(1.6, rows), 5_000).astype(np.int64)
    lat = rng.normal(48.8, 2.0, rows)
    lng = rng.normal(2.3, 3.0, rows)
    latency = np.where(
        rng.random(rows) < 0.9, rng.integers(1, 200, rows), rng.integers(5_000, 6_000, rows)
    )
    status = np.where(rng.random(rows) < 0.01, "error", "ok")
    return pa.table(
        {
            "ts": ts,
            "user_agent": pa.array(agents.tolist(), pa.string()),
            "url": pa.array(urls, pa.string()),
            "db_name": pa.array(dbs, pa.string()),
            "collector_id": pa.array(collector, pa.int64()),
            "latency_ms": pa.array(latency.astype(np.float64), pa.float64()),
            "lat": pa.array(lat, pa.float64()),
            "lng": pa.array(lng, pa.float64()),
            "status": pa.array(status.tolist(), pa.string()),
        }
    )


INDEXES = [
    MinMax("hour(ts)"),
    ValueList("collector_id"),
    BloomFilter("url", fpp=0.01, expected_values=20_000),
    Hybrid("user_agent", max_values=10_000),
    Prefix("url", length=len(URL) + 12),
    Suffix("db_name", length=12),
    GapList("latency_ms", gaps=8),
    GeoBox("lat", "lng", boxes=4),
    Features(["status = 'error'", "latency_ms > 1000"]),
    ValueList("getAgentName(user_agent)"),
]
QUERIES = {
    "LIKE prefix": f"url LIKE '{URL}blackfriday%'",
    "LIKE suffix": "db_name LIKE '%.audit_log'",
    "UDF": "getAgentName(user_agent) = 'Hacker'",
}


def plain_scan_seconds(t: Table, columns: list[str]) -> float:
    """One Spark job reading ``columns`` of every file (the noop sink forces the read)."""
    started = time.perf_counter()
    t.to_df().select(*columns).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def main() -> None:
    spark = spark_session("local[2]", **{"spark.ui.enabled": "false"})
    root = Path(tempfile.mkdtemp(prefix="bench-indexes-")) / "logs"
    data = log_table(ROWS)
    started = time.perf_counter()
    df = spark.createDataFrame(data).repartitionByRange(FILES, "ts").sortWithinPartitions("ts")
    Table.create(str(root), df)
    t = Table(str(root), spark=spark, udfs=UDFS)
    write_seconds = time.perf_counter() - started
    snap = t.snapshot()
    data_bytes = int(snap.files.total_bytes)
    print(
        f"table: {ROWS:,} rows, {len(snap.files)} files, {data_bytes / 1e6:.1f} MB "
        f"(written in {write_seconds:.1f} s)"
    )

    t.indexes.add(*INDEXES)
    columns = sorted({c for c in data.column_names if c != "ts"} | {"ts"})
    plain_scan_seconds(t, columns)  # warm-up: JIT, Python workers
    scan = plain_scan_seconds(t, columns)
    metrics = t.indexes.refresh()
    print(
        f"refresh: {metrics.seconds:.2f} s for {metrics.files_indexed} files and "
        f"{len(metrics.indexes)} indexes; one plain scan of the same {len(columns)} columns "
        f"{scan:.2f} s -> ratio {metrics.seconds / scan:.2f}"
    )

    print("\nmetadata size per index (relative to data bytes):")
    total = 0
    for d in t.indexes.describe():
        total += d.metadata_bytes
        print(
            f"  {d.name:34s} {d.metadata_bytes:>9,d} B  {d.metadata_bytes / data_bytes:8.4%}"
            f"  covered {d.files_covered}/{d.files_total}"
        )
    print(f"  {'all indexes':34s} {total:>9,d} B  {total / data_bytes:8.4%}")

    print("\nbytes scanned, indexes vs min/max only (same files):")
    for label, where in QUERIES.items():
        report = t.scan(where).report
        minmax_bytes = report.bytes_total - report.bytes_skipped_by.get("minmax", 0)
        used = {k: v for k, v in report.skipped_by.items() if k != "minmax" and v}
        print(f"  {label:12s} {where}")
        print(
            f"    min/max only: {minmax_bytes / 1e6:7.2f} MB ({minmax_bytes / report.bytes_total:6.1%})"
            f"   with indexes: {report.bytes_kept / 1e6:7.2f} MB "
            f"({report.bytes_kept / report.bytes_total:6.1%})"
            f"   -> {minmax_bytes / max(report.bytes_kept, 1):.1f}x fewer bytes; files skipped by {used}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
