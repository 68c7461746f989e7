"""Child process of the deployment tests: lakelayout's verbs on one Spark session, results as JSON.

``python deploy_flow.py MASTER TABLE OUT [DV_TABLE]``, where MASTER is a cluster URL
(``spark://127.0.0.1:7077``) or a Spark Connect URL (``sc://127.0.0.1:15002``).
Runs create / append / scan / optimize / delete / index refresh / indexed
scan, then the self-organizing verbs on a second table (``TABLE-so``: the
advisor's ``optimize.auto()`` after logged scans, online reorganization
switching layouts in the background and catching up an append), and writes
what each returned to OUT; the test checks it against values it computes
itself and against the tables read by another Delta reader.
DV_TABLE, a partitioned table with deletion vectors Delta's connector wrote,
is scanned (rows read through pyarrow tasks) and deleted from: that commit
needs Delta's transaction API, so on Spark Connect it must be refused.

A separate process because a Python process holds one classic SparkContext
(the test suite's local one), and a Spark Connect client changes how
pyspark's functions dispatch for the whole process.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def flow(master: str, path: str, with_vectors: str | None = None) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from lakelayout.api import Table
    from lakelayout.skipping.indexes import ValueList
    from lakelayout.table.session import default_parallelism, is_connect, spark_session

    remote = master.startswith("sc://")
    # a cluster session carries Delta's connector (make jars); executors get it via spark.jars
    spark = spark_session(master, **({} if remote else {"delta": True, **_small()}))
    if not remote:  # keep Spark's warnings (e.g. "Initial job has not accepted any resources")
        spark.sparkContext.setLogLevel("WARN")

    def rows(start: int, n: int) -> Any:
        return spark.range(start, start + n, 1, 4).select(
            "id",
            (F.col("id") % 97).cast("int").alias("a"),
            (F.col("id") * 7 % 1000).cast("int").alias("b"),
        )

    out: dict[str, Any] = {"connect": is_connect(spark), "parallelism": default_parallelism(spark)}
    if remote:
        out["session"] = _connect_session_rules(spark, master)
    t = Table.create(path, rows(0, 2000), spark=spark, target_file_size=8 * 1024)
    out["create_version"] = t.version
    out["append_rows"] = t.append(rows(2000, 1000)).rows_added
    scan = t.scan("a < 10", measure=True)
    out["scan_count"] = scan.df.count()
    out["scan_matching"] = scan.report.measured.rows_matching if scan.report.measured else None
    m = t.optimize.zorder(["a", "b"])
    out["optimize"] = {"rows_added": m.rows_added, "commits": m.commits, "yielded": m.yielded}
    d = t.delete("a = 3")
    out["deleted"] = d.rows_removed - d.rows_added
    t.indexes.add(ValueList("b"))
    refreshed = t.indexes.refresh()
    out["indexed_files"] = refreshed.files_indexed
    out["files"] = len(t.snapshot().files)
    indexed = t.scan("b = 7")
    out["indexed_count"] = indexed.df.count()
    out["indexed_skipped"] = indexed.report.skipped_by.get("valuelist(b)", 0)
    out["version"] = t.version
    out["rejected"] = _rejected(t)
    if not remote:  # Delta's own connector, shipped to the executors, reads the table
        out["delta_connector_rows"] = spark.read.format("delta").load(path).count()
    out["self_organizing"] = _self_organizing(spark, rows, path + "-so")
    if with_vectors is not None:
        out["vectors"] = _with_vectors(Table(with_vectors, spark=spark))
    spark.stop()
    return out


def _connect_session_rules(spark: Any, master: str) -> dict[str, Any]:
    """A running Connect session keeps the user's time zone when lakelayout asks for the
    session again (every Table made without one does); ``delta=True`` checks the server
    (this one has no Delta jars) and ``app_name`` is refused: neither is silently dropped."""
    from lakelayout.errors import EnvironmentProblem, InvalidOption
    from lakelayout.table.session import spark_session

    out: dict[str, Any] = {"started_zone": spark.conf.get("spark.sql.session.timeZone")}
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    again = spark_session(master)
    out["same_session"] = again is spark
    out["zone_after"] = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    for key, kwargs, error in (
        ("delta_error", {"delta": True}, EnvironmentProblem),
        ("app_name_error", {"app_name": "mine"}, InvalidOption),
    ):
        try:
            spark_session(master, **kwargs)
            out[key] = None
        except error as exc:
            out[key] = str(exc)
    return out


def _rejected(t: Any) -> str | None:
    """A predicate only Spark's analyser refuses: raised by scan() itself, also over
    Spark Connect, where a DataFrame is analysed only at its first action."""
    from lakelayout.errors import PredicateError

    try:
        t.scan("nosuchfn(a) < 5")
    except PredicateError as exc:
        return str(exc)
    return None


def _self_organizing(spark: Any, rows: Any, path: str) -> dict[str, Any]:
    """The advisor and online reorganization where the session runs its jobs remotely.

    Range scans on ``a`` (arrival order spreads every value of ``a`` over every file);
    ``optimize.auto()`` decides from the query log, then ``online`` (α 1, a short window)
    switches layouts in background threads, and an append is caught up."""
    from lakelayout.api import Table

    def ranges(t: Any, n: int, step: int) -> None:
        for i in range(n):
            low = i * step % 90
            t.scan(f"a >= {low} AND a < {low + 3}").df.count()

    out: dict[str, Any] = {}
    t = Table.create(path, rows(0, 20_000), spark=spark, target_file_size=16 * 1024)
    out["files_before"] = len(t.snapshot().files)
    out["kept_before"] = t.scan("a >= 10 AND a < 13").report.files_kept
    ranges(t, 30, 7)
    auto = t.optimize.auto()
    out["auto"] = {"applied": auto.applied, "error": auto.error, "reason": auto.reason}
    out["auto_ids"] = sorted(r["id"] for r in t.to_df().select("id").collect())
    out["auto_kept"] = t.scan("a >= 10 AND a < 13").report.files_kept

    online = Table.create(
        path + "-online", rows(0, 20_000), spark=spark, target_file_size=16 * 1024
    )
    online.online.enable(alpha=1, window=20, interval=5, seed=0)
    ranges(online, 40, 11)
    online.online.wait()
    online.append(rows(20_000, 2_000))
    ranges(online, 30, 13)
    online.online.wait()
    out["online_history"] = [
        {k: h.get(k) for k in ("kind", "status", "error", "target_label")}
        for h in online.online.history()
    ]
    out["online_ids"] = sorted(r["id"] for r in online.to_df().select("id").collect())
    out["online_kept"] = online.scan("a >= 10 AND a < 13").report.files_kept
    out["online_files"] = len(online.snapshot().files)
    return out


def _with_vectors(t: Any) -> dict[str, Any]:
    """Scan a table with deletion vectors, then try a DELETE that must remove a vector."""
    from lakelayout.errors import UnsupportedTable

    out: dict[str, Any] = {"ids": sorted(r["id"] for r in t.to_df().select("id").collect())}
    out["scan_ids"] = sorted(r["id"] for r in t.scan("part = '1'").df.select("id").collect())
    version = t.version
    try:
        t.delete("id = 1 OR id = 4")
        out["delete_error"] = None
    except UnsupportedTable as exc:
        out["delete_error"] = str(exc)
    out["version_unchanged"] = t.version == version
    return out


def _small() -> dict[str, str]:
    """Fit two executors' worth of work into the test's one small worker (2 cores)."""
    return {
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.ui.enabled": "false",
        # the executor lives for the flow alone (~30 s): C1 only, as for the test's other
        # short-lived JVMs (tests/processes.py)
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        # what default_conf gives local mode, for a cluster this small
        "spark.sql.shuffle.partitions": "4",
        "spark.databricks.delta.snapshotPartitions": "4",
    }


if __name__ == "__main__":
    result = flow(sys.argv[1], sys.argv[2], sys.argv[4] if len(sys.argv) > 4 else None)
    with open(sys.argv[3], "w", encoding="utf-8") as handle:
        json.dump(result, handle)
