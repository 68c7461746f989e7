"""The SparkSession factory every execution-plane job starts from.

One function, :func:`spark_session`, returns a ``getOrCreate``'d session with
the settings lakelayout relies on:

* Python workers run the driver's interpreter (``sys.executable``), so they see
  the same pyarrow/numpy/lakelayout; without it tasks fail with
  ``No module named 'pyarrow'``.
* Timestamps are interpreted in UTC (``spark.sql.session.timeZone``), matching
  Delta's ``timestamp`` type, which is an instant stored in UTC.
* Arrow transfer is on (``mapInArrow`` and ``toPandas`` stay columnar).
* Local mode starts Spark's Python workers from :mod:`lakelayout.table.daemon`,
  which has pyarrow and lakelayout's task modules imported before it forks them:
  Spark kills a worker after a minute without work, and a write after a pause
  would otherwise pay ~0.8 s of imports (0.3 s with it). On a cluster, set
  ``spark.python.daemon.module=lakelayout.table.daemon`` where every executor's
  Python has lakelayout installed.
* Local mode gets few shuffle partitions (2 x cores instead of 200): on a laptop
  200 tiny tasks cost more than the work. The same goes for Delta's connector's
  cluster-sized defaults (its state is rebuilt in 50 partitions, VACUUM lists
  files with up to 10,000 tasks): local mode sets both to 2 x cores.
* Delta Lake's own Spark connector (``delta-spark``) is added when its jars are
  installed (``make jars`` fetches them with Maven into the virtualenv, see
  ``jvm/pom.xml``): the jars go to ``spark.jars`` and Delta's SQL extension and
  catalog are set, so ``spark.read.format("delta")``, ``OPTIMIZE`` and
  ``DESCRIBE HISTORY`` work in the same session. lakelayout itself never needs
  the connector: it reads data files with Spark's Parquet reader and commits
  through delta-rs.

Java is checked *before* the JVM is launched, so a missing or old Java gives an
:class:`~lakelayout.errors.EnvironmentProblem` that says how to fix it instead
of a py4j stack trace.

Where users run Spark: a ``master`` of ``spark://host:port`` (a standalone
cluster; Delta's jars, when installed, go to the executors through
``spark.jars``) or any other cluster manager works unchanged. A master of
``sc://host:port`` (or ``$SPARK_REMOTE`` set and no master given) returns a
Spark Connect session: only runtime SQL settings are sent (the server owns
its JVM, jars and Python), and no lakelayout code path touches
``sparkContext`` or the JVM gateway (:func:`is_connect`,
:func:`default_parallelism`). The server's Python workers must be able to
import lakelayout (start it with ``PYSPARK_PYTHON`` pointing at an
environment that has it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakelayout.errors import EnvironmentProblem, InvalidOption

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelayout.expr.parse import SessionRules

#: lowest Java major version Spark 4 runs on
MIN_JAVA_MAJOR = 17
#: environment variable overriding the default master URL
MASTER_ENV = "LAKELAYOUT_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
#: environment variable naming the folder of Delta's connector jars
JARS_ENV = "LAKELAYOUT_JARS"
#: Delta's Spark SQL extension and catalog (what ``configure_spark_with_delta_pip`` sets)
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Spark's setting naming the module its Python daemon runs, and lakelayout's daemon
DAEMON_SETTING = "spark.python.daemon.module"
DAEMON_MODULE = "lakelayout.table.daemon"
#: Spark's setting that connects the JVM and its Python processes by Unix domain sockets
UNIX_SOCKETS_SETTING = "spark.python.unix.domain.socket.enabled"

#: the JVM options Spark gives the driver before ``spark.driver.extraJavaOptions``
DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"

#: JVM options of a local session. G1 on Java 17-21 fails an allocation with an
#: OutOfMemoryError once it has retried a garbage collection twice while a thread sits
#: in a JNI critical section (compression, Arrow): "Retried waiting for GCLocker too often".
#: Local mode runs scans and rewrites in the same JVM, so a large Arrow buffer of a
#: rewrite can meet it with free heap to spare; retrying longer waits for the section to
#: end instead. (Java >= 22 pins regions instead and ignores the option, hence the first.)
LOCAL_JAVA_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions -XX:+UnlockDiagnosticVMOptions "
    "-XX:GCLockerRetryAllocationCount=100"
)
#: delta-spark release line -> the Spark release line it is built for
DELTA_FOR_SPARK = {"4.4": "4.2", "4.3": "4.1", "4.2": "4.0", "4.1": "4.0", "4.0": "4.0"}

_INSTALL_HINT = (
    "Install a JDK >= 17 (Debian/Ubuntu: 'sudo apt-get install -y openjdk-17-jre-headless', "
    "macOS: 'brew install openjdk@17', or 'make java' in the lakelayout checkout) "
    "and put its 'java' on PATH or point JAVA_HOME at it."
)


def java_executable() -> str | None:
    """The ``java`` Spark will launch: ``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def parse_java_major(version_output: str) -> int | None:
    """Major version from ``java -version`` output (``1.8.0`` -> 8, ``17.0.15`` -> 17).

    >>> parse_java_major('openjdk version "17.0.15" 2025-04-15')
    17
    >>> parse_java_major('java version "1.8.0_292"')
    8
    >>> parse_java_major('openjdk version "21" 2023-09-19')
    21
    >>> parse_java_major('no version here') is None
    True
    """
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def check_java() -> int:
    """Major version of the Java Spark will use; EnvironmentProblem if absent or < 17."""
    java = java_executable()
    if java is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']!r} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no 'java' on PATH"
        )
        raise EnvironmentProblem(
            f"Spark needs Java >= {MIN_JAVA_MAJOR}, but {where}. {_INSTALL_HINT}"
        )
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot run '{java} -version': {exc}. {_INSTALL_HINT}") from exc
    major = parse_java_major(proc.stderr + proc.stdout)
    if major is None:
        raise EnvironmentProblem(
            f"cannot read the Java version from '{java} -version' "
            f"(output: {(proc.stderr + proc.stdout).strip()[:200]!r}). {_INSTALL_HINT}"
        )
    if major < MIN_JAVA_MAJOR:
        raise EnvironmentProblem(
            f"Spark needs Java >= {MIN_JAVA_MAJOR}, but '{java}' is Java {major}. {_INSTALL_HINT}"
        )
    return major


#: URL prefix of Spark Connect endpoints
CONNECT_SCHEME = "sc://"
#: settings sent to a Spark Connect server (runtime SQL settings only)
_CONNECT_SETTINGS = ("spark.sql.session.timeZone", "spark.sql.execution.arrow.pyspark.enabled")


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``sparkContext``, no JVM gateway)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


_PARALLELISM: dict[int, tuple[Any, int]] = {}


#: the Spark setting under which a DATE or TIMESTAMP compares with a string as strings
DATES_AS_STRINGS = "spark.sql.legacy.typeCoercion.datetimeToString.enabled"
#: the Spark setting that makes ``TIMESTAMP`` name TIMESTAMP_NTZ
TIMESTAMP_TYPE = "spark.sql.timestampType"
#: Spark's ANSI mode (on by default in Spark 4)
ANSI = "spark.sql.ansi.enabled"
#: with ANSI on, ``"..."`` names a column, not a string
DOUBLE_QUOTED_IDENTIFIERS = "spark.sql.ansi.doubleQuotedIdentifiers"
#: string literals taken as written (no backslash escapes)
ESCAPED_STRING_LITERALS = "spark.sql.parser.escapedStringLiterals"
#: names are bound as spelt (:attr:`~lakelayout.expr.parse.SessionRules.case_sensitive`)
CASE_SENSITIVE = "spark.sql.caseSensitive"


def session_rules(spark: Any) -> SessionRules:
    """The settings of ``spark`` that change what a predicate means
    (:class:`~lakelayout.expr.parse.SessionRules`); Spark's defaults without a session.

    With ``spark.sql.legacy.typeCoercion.datetimeToString.enabled`` (and ANSI off,
    where Spark 4 honours it), ``dt < '2024-1-5'`` compares the text of ``dt`` with
    ``'2024-1-5'``; lakelayout's skipping compared dates, and lost rows (an audit: a
    scan returned 5 of 10, a DELETE removed rows Spark keeps). It is taken as set
    whatever ANSI says: leaving such comparisons to Spark is never wrong. A setting
    the session cannot say is taken as the rule that leaves more to Spark (ANSI:
    Spark 4's default).
    """
    from lakelayout.expr.parse import SessionRules

    if spark is None:
        return SessionRules()
    ansi = _setting(spark, ANSI, "true", unknown="true") != "false"
    return SessionRules(
        string_dates=_setting(spark, DATES_AS_STRINGS, "false", unknown="true") == "true",
        ntz_timestamps=_setting(spark, TIMESTAMP_TYPE, "timestamp_ltz", unknown="timestamp_ntz")
        == "timestamp_ntz",
        ansi=ansi,
        double_quoted_identifiers=ansi
        and _setting(spark, DOUBLE_QUOTED_IDENTIFIERS, "false", unknown="false") == "true",
        escaped_string_literals=_setting(spark, ESCAPED_STRING_LITERALS, "false", unknown="false")
        == "true",
        case_sensitive=_setting(spark, CASE_SENSITIVE, "false", unknown="false") == "true",
    )


def _setting(spark: Any, key: str, default: str, *, unknown: str) -> str:
    """``key``'s value in ``spark`` in lower case (``default`` when not set, ``unknown``
    when the session cannot be asked)."""
    try:
        return str(spark.conf.get(key, default) or default).strip().lower()
    except Exception:
        return unknown


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks a job should have by default, on classic and Connect sessions alike.

    Classic: ``sparkContext.defaultParallelism``. Connect has no
    ``sparkContext``: ``spark.default.parallelism`` when the server sets it,
    else the partitions Spark gives a plain ``range`` (which is sized by the
    same default), measured once per session with one small job.
    """
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    cached = _PARALLELISM.get(id(spark))
    if cached is not None and cached[0] is spark:
        return cached[1]
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        value = max(1, int(configured))
    else:
        from pyspark.sql import functions as F

        ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        row = ids.agg(F.max("p").alias("p")).first()
        value = max(1, int(row["p"]) + 1) if row is not None and row["p"] is not None else 1
    _PARALLELISM[id(spark)] = (spark, value)
    return value


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster")


def _local_cores(master: str) -> int:
    """Cores of a ``local[n]`` / ``local[*]`` master (``local`` is 1)."""
    match = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master)
    if match is None:
        return 1
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))


def local_heap_mib() -> int:
    """The heap of a local session's JVM: a quarter of the machine's memory (the JVM's
    own default, which Spark's 1 GiB replaces), at least 1 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf: Spark's default
        return 1024
    return max(1024, total // 4 // (1 << 20))


def _ui_off_by_default() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("PYTEST_CURRENT_TEST"))


def _conf_value(value: Any) -> str:
    """Spark's spelling of a setting (``True`` -> ``'true'``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


#: the log4j configuration of the JVMs lakelayout starts locally (see the file)
QUIET_LOG4J = Path(__file__).with_name("log4j2.properties")
#: the files log4j 2 looks for in Spark's configuration folder
_LOG4J_FILES = ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.yml", "log4j2.json")


def quiet_start_options() -> list[str]:
    """Java options that start a local JVM quiet (:data:`QUIET_LOG4J`: WARN from the
    first line, where Spark's default profile printed three lines about itself on stderr
    before lakelayout set the level); none when Spark's configuration folder
    (``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``) holds the user's own log4j file.
    """
    folders = [os.environ.get("SPARK_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        folders.append(os.path.join(os.environ["SPARK_HOME"], "conf"))
    for folder in filter(None, folders):
        if any(os.path.isfile(os.path.join(folder, name)) for name in _LOG4J_FILES):
            return []
    return [f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"]


def default_conf(master: str) -> dict[str, str]:
    """The settings :func:`spark_session` applies unless the caller overrides them."""
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # lakelayout reports progress itself; Spark's bar garbles terminal tables
        "spark.ui.showConsoleProgress": "false",
    }
    if _is_local(master):
        tasks = str(2 * _local_cores(master))
        conf["spark.sql.shuffle.partitions"] = tasks
        # Delta's connector is tuned for clusters: it rebuilds a table's state in 50
        # partitions and VACUUM lists files with up to 10,000 tasks; on one machine
        # that overhead is most of a small statement's time (VACUUM 33 s -> 3 s,
        # OPTIMIZE 5 s -> 1.6 s on a 5,000-row table)
        conf["spark.databricks.delta.snapshotPartitions"] = tasks
        conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] = tasks
        # forked workers start with pyarrow and lakelayout imported (lakelayout.table.daemon):
        # Spark kills a worker idle for a minute, and a fresh one imports them again
        conf[DAEMON_SETTING] = DAEMON_MODULE
        # local mode's executors live in the driver's JVM, which Spark starts with a 1 GiB
        # heap; the JVM's own default (a quarter of the memory) is what a rewrite of a few
        # million rows needs next to the scans (a 6M-row replay ran out of 1 GiB)
        conf["spark.driver.memory"] = f"{local_heap_mib()}m"
        # Spark puts these before spark.driver.extraJavaOptions (the user's own, which
        # replaced lakelayout's when they were given there, and win over them now)
        conf[DEFAULT_JAVA_OPTIONS] = " ".join([LOCAL_JAVA_OPTIONS, *quiet_start_options()])
        if hasattr(socket, "AF_UNIX"):
            # over loopback TCP every Python task waited ~40 ms for its input: the JVM's
            # small writes meet Nagle's algorithm and the worker's delayed ACK. A Unix
            # socket has neither (with the daemon's frozen heap, 150 one-row mapInArrow
            # tasks: 4.4 s -> 2.4 s; either change alone gained nothing measurable)
            conf[UNIX_SOCKETS_SETTING] = "true"
    if _ui_off_by_default():
        conf["spark.ui.enabled"] = "false"
    return conf


def jars_folder() -> str:
    """Where Delta's connector jars are looked for (``$LAKELAYOUT_JARS`` or the virtualenv)."""
    return os.environ.get(JARS_ENV) or os.path.join(sys.prefix, "share", "lakelayout", "jars")


def delta_jars(folder: str | None = None) -> list[str]:
    """The jars of Delta's Spark connector in ``folder`` (sorted), or [] when not installed."""
    where = folder or jars_folder()
    if not os.path.isdir(where):
        return []
    return sorted(
        os.path.join(where, name)
        for name in os.listdir(where)
        if name.endswith(".jar") and name.startswith("delta-")
    )


def delta_version(jars: list[str]) -> str | None:
    """The delta-spark version of a jar list (``delta-spark_2.13-4.4.0.jar`` -> ``4.4.0``).

    >>> delta_version(["/x/delta-storage-4.4.0.jar", "/x/delta-spark_2.13-4.4.0.jar"])
    '4.4.0'
    >>> delta_version(["/x/delta-storage-4.4.0.jar"]) is None
    True
    """
    for jar in jars:
        match = re.fullmatch(r"delta-spark_[\d.]+-(\d+\.\d+\.\d+)\.jar", os.path.basename(jar))
        if match:
            return match.group(1)
    return None


def delta_conf(folder: str | None = None, *, required: bool = False) -> dict[str, str]:
    """Spark settings that add Delta's connector, or {} when its jars are not installed.

    With ``required=True`` a missing, incomplete or mismatched installation is an
    :class:`~lakelayout.errors.EnvironmentProblem` that says how to fix it.
    """
    jars = delta_jars(folder)
    version = delta_version(jars)
    fix = "run 'make jars' in the lakelayout checkout (Maven fetches them into the virtualenv)"
    if version is None:
        if required:
            raise EnvironmentProblem(
                f"Delta Lake's Spark connector is not installed: no delta-spark jar in "
                f"'{folder or jars_folder()}' (set ${JARS_ENV} to another folder or {fix})"
            )
        return {}
    import pyspark

    spark_line = ".".join(pyspark.__version__.split(".")[:2])
    wanted = DELTA_FOR_SPARK.get(".".join(version.split(".")[:2]))
    if wanted != spark_line:
        if required:
            raise EnvironmentProblem(
                f"delta-spark {version} (jars in '{folder or jars_folder()}') is built for "
                f"Spark {wanted or 'an unknown version'}, but pyspark is {pyspark.__version__}; "
                f"install matching versions ({fix})"
            )
        return {}
    return {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


#: the log level of the JVM of a session lakelayout starts (default ERROR); the CLI
#: sets OFF: a failing task logs its whole stack trace at ERROR, and the CLI says one line
LOG_LEVEL_ENV = "LAKELAYOUT_SPARK_LOG_LEVEL"


def spark_session(
    master: str | None = None,
    *,
    app_name: str | None = None,
    delta: bool | None = None,
    **conf: Any,
) -> SparkSession:
    """A SparkSession with lakelayout's settings (created, or the active one reused).

    ``master`` defaults to ``$LAKELAYOUT_SPARK_MASTER`` or ``local[*]``; with
    ``$SPARK_REMOTE`` set and no master given, or a master ``sc://host:port``,
    the session is a Spark Connect client (see the module doc). Extra Spark
    settings are keyword arguments; keys with dots go through ``**{...}``::

        spark_session("local[2]", **{"spark.ui.enabled": "false"})

    ``delta``: add Delta Lake's own Spark connector (``True``: required, an
    :class:`~lakelayout.errors.EnvironmentProblem` when its jars are missing;
    ``None``: when installed; ``False``: never). lakelayout's own behaviour does
    not depend on it. ``app_name`` defaults to ``lakelayout``.

    A Spark Connect server owns its jars and names its application: there
    ``delta=True`` checks that the server has Delta's connector (an
    EnvironmentProblem otherwise) and ``app_name`` is refused (InvalidOption).

    Settings given here win over lakelayout's defaults. When a session is already
    running, ``getOrCreate`` returns it: lakelayout's defaults (the UTC session time
    zone among them) are not applied to it, only the settings given here, and static
    settings (master, UI, jars) keep the values it was started with.
    """
    remote = os.environ.get("SPARK_REMOTE") if master is None else None
    chosen = master or os.environ.get(MASTER_ENV) or remote or DEFAULT_MASTER
    if chosen.startswith(CONNECT_SCHEME):
        return _connect_session(chosen, app_name, delta, conf)
    from pyspark import SparkContext

    running = SparkContext._active_spark_context is not None
    if not running:
        # a running JVM needs no check; `java -version` costs ~50 ms, and every Table
        # made without a session asks this function for the running one
        check_java()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if _is_local(chosen):
        # local mode talks to itself: bind to loopback instead of guessing an interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pyspark.sql import SparkSession

    # a running session is the user's (or an earlier call's): its settings stand, the
    # session time zone above all (getOrCreate applies a builder's SQL settings to it,
    # so lakelayout's UTC default moved a user's zone under their own queries)
    settings = {} if running else default_conf(chosen)
    if delta is not False and not running:
        settings.update(delta_conf(required=delta is True))
    given = {key: _conf_value(value) for key, value in conf.items()}
    if DEFAULT_JAVA_OPTIONS in settings and given.get(DEFAULT_JAVA_OPTIONS):
        # an administrator's default options join lakelayout's (theirs last: they win)
        ours, theirs = settings[DEFAULT_JAVA_OPTIONS], given[DEFAULT_JAVA_OPTIONS]
        given[DEFAULT_JAVA_OPTIONS] = f"{ours} {theirs}"
    settings.update(given)
    builder = SparkSession.builder.master(chosen).appName(app_name or "lakelayout")
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except BaseException:
        if not running:
            stop_unconnected_gateway()
        raise
    if not running and not is_connect(session):  # (getOrCreate may give a Connect session)
        session.sparkContext.setLogLevel(os.environ.get(LOG_LEVEL_ENV) or "ERROR")
    return session


def stop_unconnected_gateway() -> None:
    """Stop the Java gateway this process launched if PySpark never connected to it.

    An interruption (Ctrl-C) while PySpark waits for a new JVM to start
    (``launch_gateway``) leaves that JVM running after Python exits: PySpark loses its
    handle, and the JVM watches its stdin only once connected (seen: an orphan JVM
    alive minutes after the process ended). Its pid is found among this process's
    children (Linux ``/proc``; elsewhere nothing is done). Best effort: errors are
    ignored.
    """
    from pyspark import SparkContext

    if getattr(SparkContext, "_gateway", None) is not None:
        return  # connected: PySpark stops it with the process
    import signal

    for pid in _child_gateways():
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue
        for _ in range(50):  # reap it (up to 5 s): no zombie left behind
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            time.sleep(0.1)


def _child_gateways() -> list[int]:
    """Pids of this process's children that run Spark's launcher for PySpark."""
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if b"pyspark-shell" in args and any(b"SparkSubmit" in a for a in args):
            found.append(int(entry))
    return found


def session_stopped(spark: Any) -> bool:
    """Whether ``spark`` has been stopped (``spark.stop()``): a classic session's
    context is gone, a Connect session says so."""
    stopped = getattr(spark, "is_stopped", None)
    if isinstance(stopped, bool):
        return stopped
    context = getattr(spark, "_sc", None)
    return context is not None and getattr(context, "_jsc", None) is None


def running_session() -> SparkSession | None:
    """The Spark session already running in this process (this thread's active one,
    else the process's default), or None. Never starts one, and imports nothing when
    pyspark was never imported: Arrow appends use it when their commit needs Delta's
    connector, without starting Spark for the others."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    found: SparkSession | None = getattr(SparkSession, "_instantiatedSession", None)
    return found


def _connect_session(
    url: str, app_name: str | None, delta: bool | None, conf: dict[str, Any]
) -> SparkSession:
    """A Spark Connect session to ``url`` with lakelayout's runtime SQL settings.

    As for a classic session, a running one (the user's, or an earlier call's)
    keeps its settings: lakelayout's defaults (the UTC time zone) are applied to
    a new session only (``getOrCreate`` applies a builder's settings to a running
    Connect session, which moved a user's zone under their own queries)."""
    from pyspark.sql import SparkSession

    if app_name is not None:
        raise InvalidOption(
            f"app_name={app_name!r}: a Spark Connect server ({url}) names its application; "
            "a client cannot (leave app_name out)"
        )
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:
        raise EnvironmentProblem(
            f"Spark Connect ({url}) needs the Spark Connect client: "
            f"pip install 'lakelayout[connect]' (pyspark[connect]): {exc}"
        ) from exc
    running = ConnectSession.getActiveSession() is not None or (
        ConnectSession._get_default_session() is not None
    )
    settings = (
        {} if running else {k: v for k, v in default_conf(url).items() if k in _CONNECT_SETTINGS}
    )
    settings.update({key: _conf_value(value) for key, value in conf.items()})
    # pyspark's own builder (not the connect module's) also switches pyspark.sql.functions
    # to Connect for this process, which lakelayout's F.expr / F.col calls rely on
    builder = SparkSession.builder.remote(url)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session: Any = builder.getOrCreate()
    if delta is True:
        extensions = str(session.conf.get("spark.sql.extensions", "") or "")
        if DELTA_EXTENSION not in extensions:
            raise EnvironmentProblem(
                f"delta=True: the Spark Connect server at {url} has no Delta Lake connector "
                f"(its spark.sql.extensions is {extensions!r}); start the server with "
                "Delta's jars and spark.sql.extensions=" + DELTA_EXTENSION
            )
    return session  # type: ignore[no-any-return]
