"""Delta Lake's own Spark connector, driven over py4j: what delta-rs cannot do.

lakelayout commits through delta-rs (:mod:`lakelayout.table.delta`); two
kinds of commit it cannot make there (see :mod:`lakelayout.table.features`):

* removing a file that carries a deletion vector: Delta identifies a file by
  its path *and* its vector, and delta-rs's ``RemoveAction`` has no vector,
  so the remove would not match (checked: the file stays live for both
  delta-rs and Delta's reader);
* any commit to a table with writer features delta-rs refuses (liquid
  clustering: ``clustering`` and ``domainMetadata``).

Those commits go through Delta's transaction API in the session's JVM:
``DeltaLog.forTable(spark, path)``, a transaction started from the snapshot
at the version lakelayout planned against (so Delta's own conflict checker
sees every commit since, and a concurrent removal of a file this commit
removes fails it), and ``commit(actions, ManualUpdate)``. Actions are built
as Delta log JSON and parsed by Delta (``Action.fromJson``); removes copy the
live add action Delta holds (deletion vector, tags, partition values), so
they match exactly. Delta records them as "Manual Update" commits.

The same connector reads what delta-rs does not expose: per-file ``tags``
(liquid clustering's ``ZCUBE_ID``) and domain metadata (``delta.clustering``).

Only a classic SparkSession (py4j) with Delta's jars loaded has the
connector; :func:`available` says whether this one does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakelayout.errors import CommitConflict, InvalidOption, LakelayoutError
from lakelayout.table.files import WrittenFile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DELTA = "org.apache.spark.sql.delta"
#: fields of a live ``add`` a ``remove`` of the same file carries over
_REMOVE_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "stats",
)


#: what to do when the connector is missing from a classic session
CONNECTOR_HINT = (
    "start the Spark session with Delta's connector (delta-spark jars on spark.jars, "
    "as lakelayout's spark_session() does when they are installed) so lakelayout "
    "commits through Delta's own transaction API"
)


def missing_reason(spark: SparkSession | None) -> str | None:
    """Why Delta's connector cannot be driven from ``spark`` (None: it can).

    Spark Connect sessions have no py4j gateway to the JVM, so Delta's
    transaction API cannot be called from the client, whatever the server
    has loaded.
    """
    from lakelayout.table.session import is_connect

    if spark is None:
        return f"no Spark session was given; {CONNECTOR_HINT}"
    if is_connect(spark):
        return (
            "the session is a Spark Connect session, which has no py4j gateway to call "
            "Delta's transaction API from; use a classic SparkSession (local or a cluster "
            "master) with Delta's jars for this operation"
        )
    if not available(spark):
        return f"Delta's connector is not loaded in the session; {CONNECTOR_HINT}"
    return None


def available(spark: SparkSession | None) -> bool:
    """Whether ``spark`` is a classic session with Delta's connector classes loaded."""
    if spark is None:
        return False
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        from py4j.java_gateway import JavaClass

        return isinstance(_package(jvm).DeltaLog, JavaClass)
    except Exception:
        return False


def writes_features(spark: SparkSession) -> frozenset[str]:
    """The table features the session's Delta connector supports (lower case), or an
    empty set when it cannot say."""
    try:
        supported = _package(_jvm(spark)).TableFeature.allSupportedFeaturesMap()
        # one call: iterating the set over py4j took a call per name and ended in an
        # exception PySpark converts (60 ms and more per commit, twice per append)
        names = str(supported.keySet().mkString("\n"))
    except Exception:
        return frozenset()
    return frozenset(name.lower() for name in names.split("\n") if name)


def _package(jvm: Any) -> Any:
    node = jvm
    for part in _DELTA.split("."):
        node = getattr(node, part)
    return node


def _object(package: Any, name: str) -> Any:
    """A Scala ``object`` (its ``MODULE$`` singleton) from a py4j package."""
    return getattr(getattr(package, name), "MODULE$")


def _jvm(spark: SparkSession) -> Any:
    return getattr(spark, "_jvm")  # noqa: B009 (py4j view of a classic session)


def _log(spark: SparkSession, location: str) -> Any:
    jspark = getattr(spark, "_jsparkSession")  # noqa: B009
    return _package(_jvm(spark)).DeltaLog.forTable(jspark, location)


def _snapshot(spark: SparkSession, log: Any, version: int | None) -> Any:
    none = _jvm(spark).scala.Option.empty()
    if version is None:
        return log.update(False, none, none)
    return log.getSnapshotAt(version, none, none, False)


def live_actions(
    spark: SparkSession,
    location: str,
    *,
    version: int | None = None,
    paths: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Log path -> the live ``add`` action (as Delta's JSON) at ``version`` (default: latest).

    Only ``paths`` when given. Carries what delta-rs does not expose
    (``tags``, ``deletionVector``, ``clusteringProvider``).
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    snapshot = _snapshot(spark, _log(spark, location), version)
    files = DataFrame(snapshot.allFiles().toDF(), spark)
    if paths is not None:
        if not paths:
            return {}
        files = files.where(F.col("path").isin(list(paths)))
    out: dict[str, dict[str, Any]] = {}
    for row in files.select(F.to_json(F.struct(*files.columns)).alias("action")).collect():
        action = json.loads(str(row["action"]))
        out[str(action["path"])] = action
    return out


def domain_metadata(
    spark: SparkSession, location: str, version: int | None = None
) -> dict[str, str]:
    """Domain name -> its configuration (JSON text), for the live domains of the table."""
    snapshot = _snapshot(spark, _log(spark, location), version)
    out: dict[str, str] = {}
    domains = snapshot.domainMetadata()
    for i in range(domains.size()):
        domain = domains.apply(i)
        if not domain.removed():
            out[str(domain.domain())] = str(domain.configuration())
    return out


def commit(
    spark: SparkSession,
    location: str,
    *,
    adds: Sequence[WrittenFile],
    removes: Sequence[str],
    data_change: bool,
    read_version: int,
    add_tags: Mapping[str, Mapping[str, str]] | None = None,
    clustered: bool = False,
) -> int:
    """Add and remove files in one commit through Delta's transaction API; the version.

    Removes are the live adds of ``removes`` at ``read_version`` turned into
    removes (with their deletion vectors). ``add_tags`` (log path -> tags)
    and ``clustered`` (mark the adds ``clusteringProvider: liquid``) carry
    clustering information Delta's OPTIMIZE reads. A concurrent commit that
    conflicts (Delta's checker) raises :class:`CommitConflict`.
    """
    jvm = _jvm(spark)
    package = _package(jvm)
    log = _log(spark, location)
    base = _snapshot(spark, log, read_version)
    live = live_actions(spark, location, version=read_version, paths=removes)
    missing = [p for p in removes if p not in live]
    if missing:
        raise CommitConflict(
            f"cannot remove {missing[:3]} from '{location}': not live at version {read_version}"
        )
    now = int(time.time() * 1000)
    actions = [
        _add_json(w, now, data_change, (add_tags or {}).get(w.path), clustered) for w in adds
    ]
    actions += [_remove_json(live[p], now, data_change) for p in removes]
    action_object = _object(package.actions, "Action$")
    java_actions = jvm.java.util.ArrayList()
    for action in actions:
        java_actions.add(action_object.fromJson(json.dumps(action)))
    seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(java_actions).toSeq()
    operation = _object(package, "DeltaOperations$ManualUpdate$")
    txn = log.startTransaction(jvm.scala.Option.empty(), jvm.scala.Option.apply(base))
    try:
        return int(txn.commit(seq, operation))
    except Exception as exc:  # py4j / pyspark wrap the JVM's exception
        raise _refused(exc, f"the commit to '{location}'", LakelayoutError) from exc


def set_properties(spark: SparkSession, location: str, props: Mapping[str, str]) -> int:
    """Set table properties in one commit through Delta's transaction API; the version.

    The table's metadata action is copied with ``props`` merged into its
    configuration and committed as Delta's own ``SET TBLPROPERTIES`` would: the
    protocol is left as it is (delta-rs adds the ``variantType`` feature to a
    table-features protocol when it commits new metadata). Delta checks
    ``delta.*`` names and values itself; a refusal is an ``InvalidOption``.
    """
    jvm = _jvm(spark)
    package = _package(jvm)
    converters = jvm.scala.jdk.javaapi.CollectionConverters
    try:
        given = jvm.java.util.HashMap()
        for key, value in props.items():
            given.put(key, value)
        checked = package.DeltaConfigs.validateConfigurations(
            getattr(jvm.scala.collection.immutable.Map, "from")(converters.asScala(given))
        )
        log = _log(spark, location)
        base = _snapshot(spark, log, None)
        metadata = json.loads(str(base.metadata().json()))
        configuration = dict(metadata["metaData"].get("configuration") or {})
        configuration.update(dict(converters.asJava(checked)))
        metadata["metaData"]["configuration"] = configuration
        action = _object(package.actions, "Action$").fromJson(json.dumps(metadata))
        txn = log.startTransaction(jvm.scala.Option.empty(), jvm.scala.Option.apply(base))
        txn.updateMetadata(action, False)
        operation = getattr(package, "DeltaOperations$SetTableProperties")(checked)
        return int(txn.commit(converters.asScala(jvm.java.util.ArrayList()).toSeq(), operation))
    except Exception as exc:  # py4j / pyspark wrap the JVM's exception
        what = f"table properties {sorted(props)} on '{location}'"
        raise _refused(exc, what, InvalidOption) from exc


def _refused(exc: BaseException, what: str, kind: type[LakelayoutError]) -> LakelayoutError:
    """The error for a commit Delta's connector did not make: CommitConflict when a
    concurrent commit won, else ``kind`` with Delta's reason."""
    text = str(exc)
    # MetadataChangedException (DELTA_METADATA_CHANGED): a concurrent commit changed
    # the metadata; the caller's retry checks whether its files still fit
    if any(word in text for word in ("Concurrent", "ConflictingCommit", "METADATA_CHANGED")):
        return CommitConflict(
            f"{what} through Delta's connector conflicts with a concurrent commit: "
            f"{java_reason(exc)}; nothing was committed"
        )
    return kind(f"Delta's connector refused {what}: {java_reason(exc)}; nothing was committed")


def java_reason(exc: BaseException) -> str:
    """The JVM's own message of an error raised through py4j, in one line.

    ``str()`` of a ``Py4JJavaError`` starts "An error occurred while calling
    o122.commit." and names the reason (Delta's error class and text) only on the
    lines after it.
    """
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return " ".join(str(java.toString()).split())
        except Exception:  # the gateway may be gone
            pass
    lines = [line.strip(" :") for line in str(exc).splitlines() if line.strip(" :")]
    useful = [line for line in lines if not line.startswith("An error occurred while calling")]
    return (useful or lines or [type(exc).__name__])[0]


def _add_json(
    written: WrittenFile,
    now: int,
    data_change: bool,
    tags: Mapping[str, str] | None,
    clustered: bool,
) -> dict[str, Any]:
    add: dict[str, Any] = {
        "path": written.path,
        "partitionValues": dict(written.partition_values),
        "size": written.size,
        "modificationTime": now,
        "dataChange": data_change,
        "stats": written.stats_json,
    }
    if tags:
        add["tags"] = dict(tags)
    if clustered:
        add["clusteringProvider"] = "liquid"
    return {"add": add}


def _remove_json(live: Mapping[str, Any], now: int, data_change: bool) -> dict[str, Any]:
    remove = {k: live[k] for k in _REMOVE_FIELDS if live.get(k) is not None}
    remove.update(deletionTimestamp=now, dataChange=data_change, extendedFileMetadata=True)
    return {"remove": remove}
