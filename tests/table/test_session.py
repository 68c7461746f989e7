"""The SparkSession factory: settings, and the Java check before the JVM starts."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakelayout.errors import EnvironmentProblem
from lakelayout.table.session import (
    check_java,
    default_conf,
    local_heap_mib,
    parse_java_major,
    quiet_start_options,
)

from ..processes import LATE_C2


def _fake_java(directory: Path, version_line: str) -> None:
    script = directory / "java"
    script.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    script.chmod(0o755)


def test_local_jvms_start_quiet_unless_spark_s_conf_folder_has_a_log4j_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packaged log4j file is given to local JVMs (the CLI test checks what it
    silences) and ships with the package; a log4j file of the user's in SPARK_CONF_DIR
    or $SPARK_HOME/conf wins, so nothing is added then."""
    from lakelayout.table.session import QUIET_LOG4J, quiet_start_options

    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert QUIET_LOG4J.is_file() and "rootLogger.level = warn" in QUIET_LOG4J.read_text()
    option = f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
    assert quiet_start_options() == [option]
    assert option in default_conf("local[2]")["spark.driver.defaultJavaOptions"]
    home = tmp_path / "spark"
    (home / "conf").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert quiet_start_options() == [option]  # a conf folder without a log4j file
    (home / "conf" / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert quiet_start_options() == []
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setenv("SPARK_CONF_DIR", str(home / "conf"))
    assert quiet_start_options() == []
    assert "log4j2" not in default_conf("local[2]")["spark.driver.defaultJavaOptions"]


def test_parse_java_major_old_and_new_schemes() -> None:
    assert parse_java_major('openjdk version "11.0.2" 2019-01-15') == 11
    assert parse_java_major('java version "1.8.0_292"') == 8
    assert parse_java_major('openjdk version "17-ea"') == 17


def test_old_java_is_refused_with_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_java(tmp_path, 'java version "1.8.0_292"')
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match=r"Java >= 17, but '.*java' is Java 8\. Install"):
        check_java()


def test_java_home_without_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match=r"JAVA_HOME=.* has no bin/java"):
        check_java()


def test_java_17_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert check_java() == 17


def test_no_java_on_path_fails_before_the_jvm(tmp_path: Path) -> None:
    """A real process with no java on PATH: spark_session raises, no JVM is launched."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)
    code = (
        "from lakelayout.table.session import spark_session\n"
        "from lakelayout.errors import EnvironmentProblem\n"
        "try:\n    spark_session('local[1]')\n"
        "except EnvironmentProblem as e:\n    print('EnvironmentProblem:', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "EnvironmentProblem: Spark needs Java >= 17, but no 'java' on PATH" in proc.stdout
    assert "openjdk-17" in proc.stdout


def test_default_conf_for_local_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    conf = default_conf("local[3]")
    assert conf["spark.sql.shuffle.partitions"] == "6"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "6"
    assert conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] == "6"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.python.daemon.module"] == "lakelayout.table.daemon"
    assert conf["spark.python.unix.domain.socket.enabled"] == "true"
    # the heap of the JVM that runs every task, not Spark's 1 GiB
    assert conf["spark.driver.memory"] == f"{local_heap_mib()}m" and local_heap_mib() >= 1024
    # lakelayout's JVM options go where Spark puts them before the user's own
    assert "GCLockerRetryAllocationCount" in conf["spark.driver.defaultJavaOptions"]
    assert "spark.driver.extraJavaOptions" not in conf
    cluster = default_conf("spark://host:7077")
    # a cluster's driver and executors are sized by who runs it
    assert "spark.driver.memory" not in cluster and "spark.driver.defaultJavaOptions" not in cluster
    assert "spark.sql.shuffle.partitions" not in cluster
    # executors of a cluster may lack lakelayout's Python: their daemon stays Spark's own
    assert "spark.python.daemon.module" not in cluster
    assert "spark.python.unix.domain.socket.enabled" not in cluster
    assert "spark.databricks.delta.snapshotPartitions" not in cluster


def test_ui_stays_on_outside_tests_and_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    assert "spark.ui.enabled" not in default_conf("local[*]")


@pytest.mark.spark
def test_session_has_lakelayout_settings(spark: object) -> None:
    conf = spark.conf  # type: ignore[attr-defined]
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.pyspark.python") == sys.executable
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    # the JVM really started with them: its heap, the GC option and the quiet start,
    # next to the Java options the caller gave (tests.conftest: the late C2 compiler),
    # which had replaced lakelayout's
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    assert jvm.java.lang.Runtime.getRuntime().maxMemory() >= 0.9 * local_heap_mib() * 2**20
    options = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert "-XX:GCLockerRetryAllocationCount=100" in options
    assert set(quiet_start_options()) <= set(options)
    assert set(LATE_C2.split()) <= set(options)


@pytest.mark.spark
def test_the_running_session_is_returned_without_checking_java_again(
    spark: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakelayout.table import session

    def fail() -> int:
        raise AssertionError("java -version run while a JVM is up")

    monkeypatch.setattr(session, "check_java", fail)
    assert session.spark_session("local[2]") is spark


@pytest.mark.spark
def test_the_running_session_keeps_the_user_s_settings(spark: object) -> None:
    """A Table opened without spark= asks spark_session() for the running session; it used
    to apply lakelayout's defaults to it, setting the user's session time zone back to
    UTC under their own queries (hour(ts) changed). Only settings given here apply."""
    from lakelayout.table import session

    conf = spark.conf  # type: ignore[attr-defined]
    conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        assert session.spark_session() is spark
        assert conf.get("spark.sql.session.timeZone") == "America/New_York"
        session.spark_session(**{"spark.sql.session.timeZone": "+05:30"})
        assert conf.get("spark.sql.session.timeZone") == "+05:30"
    finally:
        conf.set("spark.sql.session.timeZone", "UTC")


def test_daemon_preloads_every_task_module_and_skips_what_fails() -> None:
    from lakelayout.table.daemon import PRELOADED, preload

    code = (
        "import sys; from lakelayout.table.daemon import preload; "
        "failed = preload(); print(failed); "
        "print(sorted(m for m in sys.modules if m.startswith(('pyarrow', 'lakelayout.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    failed, loaded = out.stdout.splitlines()
    assert failed == "[]"
    for name in PRELOADED:
        if name.startswith(("pyarrow", "lakelayout.")):
            assert f"'{name}'" in loaded, name
    assert preload(("lakelayout.no_such_module", "json")) == ["lakelayout.no_such_module"]


@pytest.mark.spark
def test_python_workers_are_forked_from_lakelayout_s_daemon(spark: object) -> None:
    """A task's parent process is ``python -m lakelayout.table.daemon``, which froze
    what it imported (so a worker's gc.collect() after each task skips it), and the
    JVM talks to the workers over Unix sockets."""
    import pyarrow as pa

    def parent(batches):  # type: ignore[no-untyped-def]
        import gc

        for _ in batches:
            pass
        cmdline = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ")
        yield pa.RecordBatch.from_pydict(
            {"parent": [cmdline.decode()], "frozen": [gc.get_freeze_count()]}
        )

    df = spark.range(2, numPartitions=2).mapInArrow(parent, "parent string, frozen long")  # type: ignore[attr-defined]
    rows = df.collect()
    parents = {r.parent for r in rows}
    assert parents and all("-m lakelayout.table.daemon" in p for p in parents), parents
    # pyarrow, numpy, pyspark's worker and lakelayout's writer: tens of thousands of objects
    assert all(r.frozen > 10_000 for r in rows), [r.frozen for r in rows]
    conf = spark.sparkContext.getConf()  # type: ignore[attr-defined]
    assert conf.get("spark.python.unix.domain.socket.enabled") == "true"


def _run_to_done(tmp_path: Path, name: str, script: str, *args: str) -> str:
    """Run ``script`` in a child process; its output, once it printed "done" and exited 0."""
    from .. import processes

    path = tmp_path / f"{name}.py"
    path.write_text(script)
    log = tmp_path / f"{name}.log"
    child = processes.python(path, *args, log=log)
    try:
        code = child.wait(timeout=processes.STARTUP_SECONDS)
    finally:
        processes.kill(child)
    out = log.read_text(errors="replace")
    assert code == 0 and "done" in out, out
    return out


_LIMIT_SCRIPT = """
import time
from lakelayout.table.session import spark_session

spark = spark_session("local[2]", **{"spark.ui.enabled": "false"})


def same(batches):
    yield from batches


df = spark.range(400_000, numPartitions=2).mapInArrow(same, "id long")
for _ in range(3):
    assert len(df.limit(1).collect()) == 1
time.sleep(2)  # workers write to the driver's output after their task
spark.stop()
print("done")
"""


@pytest.mark.spark
def test_a_limit_that_stops_reading_python_tasks_prints_no_traceback(tmp_path: Path) -> None:
    """A LIMIT closes the socket of Python tasks it no longer reads; over the Unix
    sockets local sessions use, the worker's last flush then fails at once, and
    Spark's daemon printed a BrokenPipeError traceback into the driver's output
    for each (3 of 3 here before lakelayout's daemon ended such workers quietly)."""
    out = _run_to_done(tmp_path, "limit", _LIMIT_SCRIPT)
    assert "Traceback" not in out and "BrokenPipeError" not in out, out


_RESTART_SCRIPT = """
import sys
import pyarrow as pa
from lakelayout import Table
from lakelayout.errors import EnvironmentProblem
from lakelayout.table.session import spark_session

conf = {"spark.ui.enabled": "false"}
first = spark_session("local[1]", **conf)
path = sys.argv[1]
picked = Table.create(path, pa.table({"id": pa.array(range(10), pa.int64())}))  # no spark=
given = Table(path, spark=first)
assert picked.scan("id < 5").count() == 5  # picked up the running session
first.stop()  # a notebook restarts Spark
second = spark_session("local[1]", **conf)
assert picked.scan("id < 5").count() == 5
picked.delete("id = 1")
assert picked.scan().count() == 9
assert picked.spark is second
try:
    given.scan("id < 5")
except EnvironmentProblem as err:
    assert "has been stopped" in str(err), err
else:
    raise AssertionError("a stopped session given to Table() was used")
second.stop()
print("done")
"""


@pytest.mark.spark
def test_a_table_follows_a_restarted_session_unless_it_was_given_one(tmp_path: Path) -> None:
    """A Table that picked up the running session kept it after ``spark.stop()``: once
    the session was started again, scans failed with Spark's raw NullPointerException
    and DELETE with an AttributeError (an audit). It now follows the running session;
    one given ``spark=`` that stopped is refused by name."""
    _run_to_done(tmp_path, "restart", _RESTART_SCRIPT, str(tmp_path / "t"))


# ---------------------------------------------------------------- Delta's connector


def test_delta_conf_is_empty_without_jars_and_required_names_the_folder(tmp_path: Path) -> None:
    from lakelayout.table.session import delta_conf

    assert delta_conf(str(tmp_path)) == {}
    with pytest.raises(EnvironmentProblem, match=r"no delta-spark jar in '.*'.*make jars"):
        delta_conf(str(tmp_path), required=True)


def test_delta_conf_refuses_jars_built_for_another_spark(tmp_path: Path) -> None:
    from lakelayout.table.session import delta_conf

    (tmp_path / "delta-spark_2.13-4.0.0.jar").write_bytes(b"")
    (tmp_path / "delta-storage-4.0.0.jar").write_bytes(b"")
    assert delta_conf(str(tmp_path)) == {}  # automatic: quietly without the connector
    with pytest.raises(EnvironmentProblem, match=r"delta-spark 4\.0\.0 .* built for Spark 4\.0"):
        delta_conf(str(tmp_path), required=True)


def test_installed_jars_give_the_extension_catalog_and_every_jar() -> None:
    from lakelayout.table.session import DELTA_CATALOG, DELTA_EXTENSION, delta_conf, delta_jars

    jars = delta_jars()
    assert any("delta-spark_2.13-" in j for j in jars), "make jars installs the connector"
    conf = delta_conf(required=True)
    assert conf["spark.sql.extensions"] == DELTA_EXTENSION
    assert conf["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    assert conf["spark.jars"].split(",") == jars


@pytest.mark.spark
def test_the_shared_session_reads_a_lakelayout_table_through_delta(
    spark: object, tmp_path: Path
) -> None:
    from lakelayout import Table

    df = spark.range(10).selectExpr("id", "id % 3 AS k")  # type: ignore[attr-defined]
    Table.create(str(tmp_path / "t"), df)
    back = spark.read.format("delta").load(str(tmp_path / "t"))  # type: ignore[attr-defined]
    assert sorted(r["id"] for r in back.collect()) == list(range(10))


@pytest.mark.spark
def test_the_features_delta_s_connector_writes_are_read_in_one_call(spark: object) -> None:
    """The names of the table features the session's Delta connector supports, lower
    case, as the commit checks compare them (read with one py4j call: iterating the set
    took a call per name and an exception at its end, twice per append)."""
    from lakelayout.table.connector import writes_features

    features = writes_features(spark)  # type: ignore[arg-type]
    assert {"deletionvectors", "columnmapping", "domainmetadata", "clustering"} <= features
    assert all(name == name.lower() and name.strip() and "," not in name for name in features)


def test_no_code_path_needs_the_jvm_gateway() -> None:
    """A Spark Connect session has no ``sparkContext``, ``_jvm`` or RDDs: outside the
    session factory (where every use is behind ``is_connect``) and Delta's connector over
    py4j (used only once ``connector.missing_reason`` found a classic session with the
    connector; on Connect the operation is refused by name) no module may touch them."""
    import re

    import lakelayout

    root = Path(lakelayout.__file__).parent
    pattern = re.compile(r"sparkContext|_jvm\b|_jsc\b|_jsparkSession|\.rdd\b|SparkContext")
    offenders = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path.name not in ("session.py", "connector.py") or path.parent.name != "table"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_connect_sessions_are_recognized_without_a_server() -> None:
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from lakelayout.table.session import is_connect

    assert is_connect(RemoteSession.__new__(RemoteSession))
    assert not is_connect(object())


def test_commits_needing_delta_s_connector_are_refused_on_spark_connect() -> None:
    """No py4j on Connect: a commit only Delta's transaction API can make is refused,
    naming the feature and Spark Connect, before anything is written."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from lakelayout.errors import UnsupportedTable
    from lakelayout.table.connector import missing_reason
    from lakelayout.table.features import Kind, plan_commit

    remote = RemoteSession.__new__(RemoteSession)
    reason = missing_reason(remote)
    assert reason is not None and "Spark Connect" in reason and "py4j" in reason
    assert "no Spark session" in (missing_reason(None) or "")
    with pytest.raises(UnsupportedTable, match=r"deletion vectors.*Spark Connect"):
        plan_commit(
            "/t",
            ["deletionVectors"],
            {},
            Kind.DELETE,
            removes_deletion_vectors=True,
            connector=False,
            connector_missing=reason,
        )


_INTERRUPT_SCRIPT = """
import os, signal, subprocess, sys, threading
import pyspark.sql  # imported first: the interruption lands while the JVM starts
from lakelayout.table.session import check_java, spark_session

check_java()
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    spark_session()
    print("started")
except KeyboardInterrupt:
    from pyspark import SparkContext

    print("interrupted, connected:", SparkContext._gateway is not None)
ps = ["ps", "--ppid", str(os.getpid()), "-o", "pid=,args="]
out = subprocess.run(ps, capture_output=True, text=True).stdout
print("gateways:", [int(line.split()[0]) for line in out.splitlines() if "SparkSubmit" in line])
"""


@pytest.mark.spark
def test_a_ctrl_c_while_the_jvm_starts_leaves_no_jvm_running(tmp_path: Path) -> None:
    """Ctrl-C while PySpark waits for a new JVM (``launch_gateway``) left that JVM running
    after Python exited: PySpark loses its handle, and the JVM watches its stdin only once
    connected (an orphan was alive minutes later). ``spark_session`` stops it."""
    import signal

    script = tmp_path / "interrupt.py"
    script.write_text(_INTERRUPT_SCRIPT)
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    with out.open("w") as sink:  # a file, not a pipe: a JVM left behind would hold a pipe open
        subprocess.run([sys.executable, str(script)], stdout=sink, stderr=subprocess.STDOUT,
                       env=env, timeout=120, check=False)  # fmt: skip
    text = out.read_text()
    left = [line for line in text.splitlines() if line.startswith("gateways:")]
    try:
        assert "interrupted, connected: False" in text, text
        assert left == ["gateways: []"], text
    finally:
        for pid in (int(p) for p in "".join(left).split("[")[-1].strip("]").split(",") if p):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
