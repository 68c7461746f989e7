"""DELETE: remove the rows matching a predicate, rewriting only the files that hold them.

1. Min/max pruning (:func:`~lakelayout.skipping.stats_rules.might_match`) leaves
   the files that may hold a matching row; the others are never read.
2. Of those, files where *every* row matches
   (:func:`~lakelayout.skipping.stats_rules.all_rows_match`) are removed without
   being read.
3. One Spark job counts the matching rows of each remaining file; files with
   none are left alone.
4. The files with matches are rewritten without the matching rows (a row is
   kept where the predicate is FALSE or NULL, exactly Spark's ``WHERE NOT``
   complement), each source file into its own file(s), so the survivors keep
   the source file's clustering provenance (cube id, block) and partition: a
   subset of a clustered file is still clustered, and the cube's live size
   shrinks, which is what turns a stable cube partial again after heavy
   deletes. Rows a deletion vector already removed are not read, so they
   stay deleted.

Everything is one commit (``data_change=True``) with the snapshot's version
as ``read_version``.

Concurrency: when the commit loses a race to commits that changed no data
(an OPTIMIZE or clustering rewrite removed a file this DELETE rewrites), the
rows to delete are the same, only in other files: the DELETE re-plans on the
latest version and commits again (:func:`lakelayout.table.conflicts.run_with_retries`,
bounded, with backoff; the metrics count the ``retries``). From its first lost
race on it leaves a waiting marker, so maintenance yields to it. A winner
that changed data (another DELETE of the same files) is not retried; the
:class:`~lakelayout.errors.CommitConflict` names the winning version and
operation, as it does when the attempts run out.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from lakelayout.cluster.optimize import (
    NO_HOOKS,
    OptimizeHooks,
    check_rewrite,
    commit_rewrite,
    load_context,
    metrics_for,
)
from lakelayout.cluster.optimize_metrics import OptimizeMetrics
from lakelayout.cluster.provenance import FileProvenance
from lakelayout.cluster.rewrite import FILE_COLUMN, Router, read_files, write_routed
from lakelayout.errors import PredicateError
from lakelayout.expr.evaluate import may_fail_in_spark
from lakelayout.expr.parse import SessionRules, parse_predicate
from lakelayout.skipping.stats_rules import all_rows_match, might_match
from lakelayout.table import delta
from lakelayout.table.conflicts import DEFAULT_RETRY, RetryPolicy, run_with_retries
from lakelayout.table.features import Kind
from lakelayout.table.reader import read_table_files, spark_where
from lakelayout.table.session import session_rules

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelayout.skipping.catalog import IndexCatalog


def delete(
    uri: str,
    spark: SparkSession,
    where: str,
    *,
    hooks: OptimizeHooks | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    indexes: IndexCatalog | None = None,
) -> OptimizeMetrics:
    """Delete the rows of the table at ``uri`` where ``where`` (Spark SQL) is TRUE.

    Retries (re-planning each time) while the races it loses are to rewrites
    that changed no data; see the module doc. The files rewritten without
    the deleted rows carry the metadata of the table's skipping ``indexes``.
    """
    started = time.perf_counter()
    timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    rules = session_rules(spark)
    snap = delta.snapshot(uri)
    # errors before any job
    predicate = parse_predicate(where, snap.schema, timezone=timezone, session=rules)
    # Spark's analyser checks the text too, even what lakelayout models: a predicate it
    # answers from statistics alone never reaches Spark, and text Spark refuses must
    # not delete (or silently not delete) anything
    empty = read_table_files(spark, uri, snap.table_format, [])
    spark_where(empty, where, analysed=True)
    if predicate.has_opaque():  # what lakelayout models is deterministic
        _check_deterministic(empty, where)
    pinned = pin_now(spark, where, rules, snap.schema.names)
    metrics, retries = run_with_retries(
        uri,
        "DELETE",
        lambda _: _delete_once(
            uri, spark, pinned, hooks or NO_HOOKS, timezone, rules, indexes, said=where
        ),
        policy=retry,
    )
    return _finish(replace(metrics, retries=retries), started)


def pin_now(spark: SparkSession, where: str, rules: SessionRules, columns: list[str]) -> str:
    """``where`` with its calls of the query's start time (``current_timestamp()``,
    ``now()``, ``current_date()``, ``localtimestamp()``, ``unix_timestamp()``...) replaced
    by their values, read together in one Spark query.

    Spark evaluates them once per query, and a DELETE runs two (the files holding
    matching rows, then the rows that survive): of two rows with the same timestamp in
    two files, one was deleted and one kept when the clock passed it in between (an
    audit). Delta's DELETE sees one time; so does this one now.
    """
    from lakelayout.expr.parse import now_calls

    calls = now_calls(where, rules, columns)
    if not calls:
        return where
    row = spark.sql(
        "SELECT unix_micros(current_timestamp()) AS micros, "
        "CAST(current_date() AS STRING) AS today, "
        "CAST(localtimestamp() AS STRING) AS local, unix_timestamp() AS seconds"
    ).collect()[0]
    instant = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=row["micros"])
    values = {
        "timestamp": f"TIMESTAMP_LTZ'{instant.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'",
        "date": f"DATE'{row['today']}'",
        "local": f"TIMESTAMP_NTZ'{row['local']}'",
        "unix": f"{int(row['seconds'])}L",
    }
    out = where
    for start, end, kind in reversed(calls):  # from the end: earlier offsets stay valid
        out = f"{out[:start]}({values[kind]}){out[end + 1 :]}"
    return out


def _matching(matched: DataFrame, where: str) -> list[Any]:
    """Rows ``where`` matches per file; an error Spark raises evaluating ``where`` on the
    rows (a division by zero or a cast that fails under ANSI) is a PredicateError
    naming the predicate (nothing is written yet)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    from lakelayout.table.writer import task_errors

    try:
        with task_errors():  # a damaged data file: TableCorrupt naming it
            return matched.groupBy(FILE_COLUMN).count().collect()
    except PySparkException as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    except Py4JJavaError as exc:
        # a Java error of the predicate's own functions (a bad pattern in RLIKE, a bad
        # format_string) is no PySparkException: it escaped raw (an audit); other job
        # failures (an executor lost) stay what they are
        found = _JAVA_EVALUATION.search(str(exc))
        if found is None:
            raise
        reason = f"{found.group(1)}: {found.group(2).strip()}"
    raise PredicateError(
        f"Spark could not evaluate the DELETE predicate {where!r} on the table's rows: "
        f"{reason}; nothing was deleted"
    )


#: the Java errors Spark's functions raise on a bad argument of the predicate's text
_JAVA_EVALUATION = re.compile(
    r"(java\.util\.regex\.PatternSyntaxException|java\.util\.\w*Format\w*Exception): ([^\n]*)"
)


def _check_deterministic(empty: DataFrame, where: str) -> None:
    """PredicateError when ``where`` is not deterministic (``rand()``, ``uuid()``,
    ``monotonically_increasing_id()``, ``input_file_name()``...), as Delta's DELETE.

    A DELETE evaluates its predicate twice (which files hold matching rows, then
    which rows survive), so such a predicate would delete rows neither evaluation
    chose together. Spark's analyser refuses a nondeterministic expression in a
    join condition (it accepts one in a filter): an empty join asks it, on a
    classic and on a Spark Connect session alike.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    probe = empty.sparkSession.range(0).toDF("__ll_deterministic_probe")
    try:
        empty.join(probe, F.expr(where), "left_semi").schema  # noqa: B018 (the analysis is the point)
    except AnalysisException as exc:
        if "NON_DETERMINISTIC" in str(exc):
            raise PredicateError(
                f"DELETE needs a deterministic predicate; {where!r} is not (it would give "
                "another answer each time it is evaluated); Delta refuses it too"
            ) from None
        # anything else the join's analysis says, the filter's already accepted


def _delete_once(
    uri: str,
    spark: SparkSession,
    where: str,
    hooks: OptimizeHooks,
    timezone: str,
    rules: SessionRules,
    indexes: IndexCatalog | None,
    *,
    said: str,
) -> OptimizeMetrics:
    """One attempt: plan on the latest version, rewrite, commit (CommitConflict on a race).
    ``where`` is the predicate with the query's start time pinned, ``said`` as the user
    wrote it (errors quote that)."""
    from pyspark.sql import functions as F

    ctx = load_context(uri, spark, indexes)
    predicate = parse_predicate(where, ctx.schema, timezone=timezone, session=rules)
    files = ctx.snap.files
    maybe = might_match(predicate, files, timezone=timezone)
    if may_fail_in_spark(predicate):  # Spark evaluates every file: it may fail on a row
        whole = np.zeros_like(maybe)
    else:
        whole = maybe & all_rows_match(predicate, files, timezone=timezone)
    dropped = [str(p) for p in files.paths[whole]]
    partial = [str(p) for p in files.paths[maybe & ~whole]]
    touched: list[str] = []
    if partial:
        df = read_files(spark, ctx.snap, partial, with_file=True)
        counts = _matching(spark_where(df, where), said)
        touched = sorted({str(r[FILE_COLUMN]) for r in counts if r["count"] > 0})
    base = OptimizeMetrics("delete", files_considered=len(files))
    if not dropped and not touched:
        return base
    # before anything is written; the dropped files' rows are not written again
    check_rewrite(ctx, dropped + touched, Kind.DELETE, rewritten=touched)
    written = []
    prov: list[FileProvenance] = []
    if touched:
        blocks = {p: i for i, p in enumerate(touched)}
        df = read_files(spark, ctx.snap, touched, with_file=True)
        survivors = df.where(~F.coalesce(F.expr(where), F.lit(False)))
        router = Router(tuple(ctx.schema.names), uri, file_blocks=blocks)
        written = write_routed(
            survivors,
            uri,
            ctx.schema,
            router=router,
            n_blocks=len(touched),
            target_file_size=max(int(np.max(files.sizes)) * 2, ctx.target_file_size),
            prefix="del",
            fmt=ctx.snap.rewrite_format,
            row_group_bytes=ctx.row_group_bytes,
            codec=ctx.codec,
            indexes=ctx.indexes,
        )
        by_path = ctx.by_path()
        for w in written:
            source = by_path[touched[w.block]].provenance
            if source is not None:
                prov.append(source.moved_to(w.file.path, w.file.size))
    removed = dropped + touched
    version = commit_rewrite(
        ctx,
        removed=removed,
        written=written,
        provenance=prov,
        operation="DELETE",
        hooks=hooks,
        index=0,
        data_change=True,
    )
    metrics = base.plus(metrics_for("delete", ctx, removed, written))
    return metrics.plus(OptimizeMetrics("delete", versions=(version,)))


def _finish(m: OptimizeMetrics, started: float) -> OptimizeMetrics:
    return replace(m, seconds=time.perf_counter() - started)
