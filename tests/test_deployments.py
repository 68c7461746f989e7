"""lakelayout where users run Spark: a standalone cluster, and Spark Connect.

Each test starts the servers from the pyspark wheel on localhost (free ports,
their own process group, always stopped in the fixture's teardown), runs
create / append / scan / optimize / delete / index refresh, then the advisor's
``optimize.auto()`` and online reorganization (background switches, an append
between them) in a child driver (:mod:`tests.deploy_flow`), and checks the
results against values computed here and against the tables as another Delta
reader (delta-rs) and a new process see them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from . import processes

pytestmark = pytest.mark.spark

FLOW = Path(__file__).with_name("deploy_flow.py")
IDS = range(3000)


def _a(i: int) -> int:
    return i % 97


def _b(i: int) -> int:
    return i * 7 % 1000


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _server_env(tmp: Path) -> dict[str, str]:
    return {
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp),
        "SPARK_WORKER_DIR": str(tmp / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }


def _log_has(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A standalone master and one worker on localhost; yields the master URL, the work dir."""
    tmp = tmp_path_factory.mktemp("standalone")
    env = {**_server_env(tmp), "SPARK_DAEMON_MEMORY": "256m"}  # master and worker daemons
    spark_class = str(_spark_home() / "bin" / "spark-class")
    port = processes.free_port()
    started: list[Any] = []
    try:
        master_log = tmp / "master.log"
        master = processes.start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(processes.free_port())],
            log=master_log, env=env,
        )  # fmt: skip
        started.append(master)
        processes.wait_for(
            lambda: processes.listening(port), what="master", proc=master, log=master_log
        )
        url = f"spark://127.0.0.1:{port}"
        worker_log = tmp / "worker.log"
        worker = processes.start(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", "2", "--memory", "1g", "--webui-port", str(processes.free_port()),
             "--work-dir", str(tmp / "work")],
            log=worker_log, env=env,
        )  # fmt: skip
        started.append(worker)
        processes.wait_for(
            lambda: _log_has(worker_log, "Successfully registered with master"),
            what="worker",
            proc=worker,
            log=worker_log,
        )
        yield url, tmp / "work"
    finally:
        for proc in reversed(started):
            processes.stop(proc)


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on localhost (the SparkConnectServer class the wheel ships)."""
    tmp = tmp_path_factory.mktemp("connect")
    port = processes.free_port()
    log = tmp / "server.log"
    server = processes.start(
        [str(_spark_home() / "bin" / "spark-submit"),
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--name", "lakelayout-connect-test", "--master", "local[2]",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=4",
         "--conf", f"spark.pyspark.python={sys.executable}",
         "--driver-memory", "768m"],
        log=log, env=_server_env(tmp),
    )  # fmt: skip
    try:
        processes.wait_for(lambda: processes.listening(port), what="connect", proc=server, log=log)
        yield f"sc://127.0.0.1:{port}"
    finally:
        processes.stop(server)


def _run_flow(master: str, tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    table, out, log = tmp_path / "t", tmp_path / "out.json", tmp_path / "driver.log"
    driver = processes.python(
        FLOW, master, str(table), str(out), *extra, log=log, env={"SPARK_LOCAL_IP": "127.0.0.1"}
    )
    try:
        # a deadline against hangs, not a timing assertion: the flow runs ~30 s on a quiet
        # machine, far longer on one shared by many JVMs
        processes.wait_for(lambda: driver.poll() is not None, what="driver", log=log, timeout=1200)
    finally:
        processes.stop(driver)
    assert driver.returncode == 0, processes.tail(log, 60)
    return json.loads(out.read_text()), str(table)


def _check(result: dict[str, Any], table: str) -> None:
    kept = [i for i in IDS if _a(i) != 3]
    assert result["create_version"] == 1  # version 0 + lakelayout.targetFileSize (version 1)
    assert result["append_rows"] == 1000
    assert result["scan_count"] == result["scan_matching"] == sum(1 for i in IDS if _a(i) < 10)
    assert result["optimize"] == {"rows_added": len(IDS), "commits": 1, "yielded": False}
    assert result["deleted"] == len(IDS) - len(kept)
    assert result["indexed_files"] == result["files"] > 1
    assert result["indexed_count"] == sum(1 for i in kept if _b(i) == 7)
    data = DeltaTable(table).to_pyarrow_table()
    assert sorted(data.column("id").to_pylist()) == kept
    assert all(
        a == _a(i) and b == _b(i)
        for i, a, b in zip(*(data.column(c).to_pylist() for c in ("id", "a", "b")), strict=True)
    )
    assert DeltaTable(table).version() == result["version"]
    assert result["rejected"] is not None and "[UNRESOLVED_ROUTINE]" in result["rejected"]
    _check_self_organizing(result["self_organizing"], table + "-so")


def _check_self_organizing(result: dict[str, Any], path: str) -> None:
    """The advisor rewrote for the logged range scans and online reorganization switched
    in the background, with every row kept, as this process and delta-rs see the tables."""
    from lakelayout.api import Table

    # arrival order: every file holds every value of `a`, so a range on it keeps them all
    assert result["kept_before"] == result["files_before"] > 1
    assert result["auto"]["applied"] and result["auto"]["error"] is None, result["auto"]
    assert result["auto_ids"] == list(range(20_000))
    assert result["auto_kept"] < result["files_before"]
    ids = DeltaTable(path).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(20_000))

    history = result["online_history"]
    assert any(h["kind"] == "switch" and h["status"] == "done" for h in history), history
    assert all(h["status"] == "done" and not h["error"] for h in history), history
    assert result["online_ids"] == list(range(22_000))  # the append during it included
    assert result["online_kept"] < result["online_files"]
    online_path = path + "-online"
    ids = DeltaTable(online_path).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(22_000))
    # the state the child process left is read back here, with no Spark
    table = Table(online_path)
    assert len(table.online.history()) == len(history)
    assert table.online.status()["applied_label"] == history[-1]["target_label"]


def test_standalone_cluster(standalone: tuple[str, Path], tmp_path: Path) -> None:
    url, work = standalone
    result, table = _run_flow(url, tmp_path)
    assert not result["connect"] and result["parallelism"] == 2  # the worker's cores
    _check(result, table)
    apps = [name for name in os.listdir(work) if re.fullmatch(r"app-\d+-\d+", name)]
    assert len(apps) == 1  # the jobs ran in an executor the worker launched
    # Delta's connector jars (spark.jars) reached the executor: it reads the table too
    assert result["delta_connector_rows"] == sum(1 for i in IDS if _a(i) != 3)


def test_spark_connect(connect_server: str, spark: Any, tmp_path: Path) -> None:
    vectors = _table_with_deletion_vectors(spark, str(tmp_path / "dv"))
    version = DeltaTable(vectors).version()
    result, table = _run_flow(connect_server, tmp_path, vectors)
    assert result["connect"] and result["parallelism"] == 2  # the server's local[2]
    session = result["session"]
    # lakelayout's defaults go to the session it starts; a running one keeps the user's zone
    assert session["started_zone"] == "UTC" and session["same_session"]
    assert session["zone_after"] == "Asia/Kolkata"
    assert "has no Delta Lake connector" in session["delta_error"]
    assert "names its application" in session["app_name_error"]
    _check(result, table)
    # a partitioned table with deletion vectors: read right over Connect (deleted rows
    # never come back), but a DELETE that must remove a vector needs Delta's transaction
    # API over py4j, which a Connect client does not have: refused by name, nothing written
    live = [i for i in range(40) if i % 5 != 0]
    assert result["vectors"]["ids"] == live
    assert result["vectors"]["scan_ids"] == [i for i in live if i % 3 == 1]
    error = result["vectors"]["delete_error"]
    assert error is not None and "Spark Connect" in error and "deletion vectors" in error
    assert result["vectors"]["version_unchanged"]
    assert DeltaTable(vectors).version() == version


def _table_with_deletion_vectors(spark: Any, path: str) -> str:
    """Written by Delta's connector: partitioned by ``part``, one DELETE as deletion vectors."""
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, part STRING)
            USING delta PARTITIONED BY (part)
            TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"""
    )
    spark.sql("SELECT id, CAST(id % 3 AS STRING) AS part FROM range(40)").coalesce(1).write.format(
        "delta"
    ).mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    assert pa.table(DeltaTable(path).deletion_vectors()).num_rows > 0
    return path
