"""DELETE: remove the rows matching a predicate, rewriting only the files that hold them.

1. Min/max pruning (:func:`~lakelayout.skipping.minmax.might_match`) leaves
   the files that may hold a matching row; the others are never read.
2. Of those, files where *every* row matches
   (:func:`~lakelayout.skipping.minmax.all_rows_match`) are removed without
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
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from lakelayout.cluster.metrics import OptimizeMetrics
from lakelayout.cluster.optimize import (
    _NO_HOOKS,
    OptimizeHooks,
    _metrics_for,
    check_rewrite,
    commit_rewrite,
    load_context,
)
from lakelayout.cluster.provenance import FileProvenance
from lakelayout.cluster.rewrite import FILE_COLUMN, Router, read_files, write_routed
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.minmax import all_rows_match, might_match
from lakelayout.table.features import Kind

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def delete(
    uri: str, spark: SparkSession, where: str, *, hooks: OptimizeHooks | None = None
) -> OptimizeMetrics:
    """Delete the rows of the table at ``uri`` where ``where`` (Spark SQL) is TRUE."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    hooks = hooks or _NO_HOOKS
    ctx = load_context(uri, spark)
    timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    predicate = parse_predicate(where, ctx.schema, timezone=timezone)  # errors before any job
    files = ctx.snap.files
    maybe = might_match(predicate, files)
    whole = maybe & all_rows_match(predicate, files)
    dropped = [str(p) for p in files.paths[whole]]
    partial = [str(p) for p in files.paths[maybe & ~whole]]
    touched: list[str] = []
    if partial:
        df = read_files(spark, ctx.snap, partial, with_file=True)
        counts = df.where(F.expr(where)).groupBy(FILE_COLUMN).count().collect()
        touched = sorted({str(r[FILE_COLUMN]) for r in counts if r["count"] > 0})
    base = OptimizeMetrics("delete", files_considered=len(files))
    if not dropped and not touched:
        return _finish(base, started)
    check_rewrite(ctx, dropped + touched, Kind.DELETE)  # before anything is written
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
            fmt=ctx.snap.table_format,
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
    metrics = base.plus(_metrics_for("delete", ctx, removed, written))
    return _finish(metrics.plus(OptimizeMetrics("delete", versions=(version,))), started)


def _finish(m: OptimizeMetrics, started: float) -> OptimizeMetrics:
    from dataclasses import replace

    return replace(m, seconds=time.perf_counter() - started)
