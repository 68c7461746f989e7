"""Pruning a snapshot's files with min/max statistics and skipping indexes.

:func:`prune` runs Algorithm 2 (:func:`lakelayout.skipping.clauses.generate`)
with one labeller per index whose metadata is available plus min/max
statistics (:func:`lakelayout.skipping.minmax.might_match` on each leaf, its
negation being ``might_match`` on the negated leaf), so the merged decision is
never weaker than min/max alone. Every clause reads only its own index's
column; a null entry (no or stale metadata) keeps the file.

Attribution (``skipped_by``): for each labeller, the number of files that *its
clauses alone* rule out, i.e. the merged clause evaluated with every other
labeller's clauses taken as ``True``. Files can be ruled out by several
indexes, so the counts overlap and may sum to more than the files skipped;
zero-row files are attributed to ``"minmax"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lakelayout.errors import InvalidOption
from lakelayout.expr.nodes import And, Not, Or, Predicate
from lakelayout.skipping.clauses import Labeller, Merged, evaluate, generate
from lakelayout.skipping.indexes.base import Clause, Index
from lakelayout.skipping.minmax import might_match
from lakelayout.stats.model import FileStats

MINMAX = "minmax"
"""Labeller name of the Delta min/max statistics."""


class StatsClause(Clause):
    """``might_match(node)`` on the snapshot's statistics (ignores ``meta``)."""

    def __init__(self, node: Predicate, stats: FileStats) -> None:
        self.node = node
        self.stats = stats

    def evaluate(self, meta: pa.Array | None) -> np.ndarray:  # type: ignore[override]
        return np.asarray(might_match(self.node, self.stats), dtype=bool)

    def negate(self) -> Clause:
        return StatsClause(self.node.negate(), self.stats)


@dataclass(frozen=True)
class StatsLabeller:
    """Min/max statistics as one more labeller: it labels every leaf node."""

    stats: FileStats
    name: str = MINMAX

    def label(self, node: Predicate) -> Clause | None:
        if isinstance(node, And | Or | Not):
            return None
        return StatsClause(node, self.stats)


@dataclass(frozen=True)
class PruneResult:
    """Which files to read, and which labeller ruled out how many files and bytes."""

    keep: np.ndarray
    skipped_by: dict[str, int]
    bytes_skipped_by: dict[str, int] = field(default_factory=dict)
    clause: Merged | None = None

    @property
    def files_skipped(self) -> int:
        return int((~self.keep).sum())


def prune(
    pred: Predicate,
    files: FileStats,
    store_columns: Mapping[str, pa.Array | pa.ChunkedArray],
    indexes: Sequence[Index],
) -> PruneResult:
    """Per file: keep unless the merged clause of min/max and the indexes rules it out.

    ``store_columns`` maps index names to metadata aligned with ``files`` (as
    :meth:`lakelayout.skipping.store.MetadataStore.read` returns it); indexes
    without a column are not used.
    """
    n = len(files)
    columns: dict[str, pa.Array | None] = {MINMAX: None}
    labellers: list[Labeller] = [StatsLabeller(files)]
    for index in indexes:
        if index.name not in store_columns:
            continue
        column = store_columns[index.name]
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if len(column) != n:
            raise InvalidOption(f"metadata of {index.name} has {len(column)} entries for {n} files")
        columns[index.name] = column
        labellers.append(index)
    merged = generate(pred, labellers)
    nonempty = np.asarray(files.num_records != 0, dtype=bool)
    cache: dict[int, np.ndarray] = {}
    keep = evaluate(merged, columns, n, cache=cache) & nonempty
    skipped_by: dict[str, int] = {}
    bytes_by: dict[str, int] = {}
    sizes = np.asarray(files.sizes, dtype=np.int64)
    for labeller in labellers:
        alone = evaluate(merged, columns, n, only={labeller.name}, cache=cache)
        if labeller.name == MINMAX:
            alone &= nonempty
        skipped_by[labeller.name] = int((~alone).sum())
        bytes_by[labeller.name] = int(sizes[~alone].sum())
    return PruneResult(keep, skipped_by, bytes_by, merged)
