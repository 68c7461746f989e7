"""What a query would read, now and under a candidate layout, estimated on a sample.

The thesis's benefit estimation (§5.2) with virtual files: the sample of the
files a rewrite would replace is laid out as the candidate layout would lay
out the table; every block becomes a virtual file with exact statistics of
its rows (:func:`~lakelayout.stats.blocks.block_stats`), plus the metadata of every skipping
index the table would carry; each query of the recent workload then "reads"
the virtual files it cannot rule out. The same sample grouped by the file
each row came from gives the *current* layout's virtual files, so both sides
of the comparison are estimated the same way (a sample's block bounds are
narrower than a real file's; that bias cancels out in the difference).

"Bytes query q reads on files F" is computed in exactly one place,
:func:`bytes_read` (:func:`read_plan` for which files), through the shared scan planner
(:func:`lakelayout.skipping.planner.plan`), the same rules real scans use.

Candidate families (§5.2; at most 4 curve dimensions):

* ``zorder`` / ``hilbert`` on the chosen curve features,
* ``sop-z`` (SOP partitions as one more curve dimension, thesis §4.1.2) on the
  chosen SOP features and the first 3 curve features, or ``sop`` alone when
  there is no curve feature,
* ``qdtree`` and ``pando`` fitted on the recent workload's predicates.

Features that call a Python UDF cannot be computed by a layout inside Spark
tasks; they are left out of the layouts (a declared index can still skip on
them). Pure: no pyspark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pyarrow as pa

from lakelayout.advisor.analyzer import Analysis
from lakelayout.errors import LakelayoutError
from lakelayout.expr.nodes import Predicate
from lakelayout.layouts.base import Layout
from lakelayout.layouts.qdtree import Workspace
from lakelayout.skipping.indexes.base import Index
from lakelayout.skipping.planner import ScanPlan, plan
from lakelayout.skipping.stats_rules import FileStack
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.model import FileStats

FAMILIES = ("zorder", "hilbert", "sop-z", "sop", "qdtree", "pando")
#: curve dimensions a layout may have (the SOP index counts as one in sop-z)
MAX_CURVE_DIMS = 4


def bytes_read(
    predicate: Predicate,
    files: FileStats,
    *,
    indexes: Sequence[Index] = (),
    metadata: Mapping[str, pa.Array] | None = None,
) -> int:
    """Bytes of ``files`` a query with ``predicate`` reads (the files pruning keeps)."""
    return read_plan(predicate, files, indexes=indexes, metadata=metadata).bytes_kept


_T = TypeVar("_T")


def per_distinct(
    predicates: Sequence[Predicate],
    fn: Callable[[Predicate], _T],
    *,
    known: Mapping[str, _T] | None = None,
    seen: dict[str, _T] | None = None,
) -> list[_T]:
    """``[fn(p) for p in predicates]`` with ``fn`` called once per distinct predicate (by its
    canonical SQL): a window repeats queries, and planning is the cost. Answers in
    ``known`` (by SQL) are taken instead of calling ``fn``; ``seen``, when given, is
    filled with this call's answers."""
    seen = {} if seen is None else seen
    out = []
    for pred in predicates:
        key = pred.sql()
        if key not in seen:
            seen[key] = known[key] if known is not None and key in known else fn(pred)
        out.append(seen[key])
    return out


def read_plan(
    predicate: Predicate,
    files: FileStats,
    *,
    indexes: Sequence[Index] = (),
    metadata: Mapping[str, pa.Array] | None = None,
) -> ScanPlan:
    """Which of ``files`` a query with ``predicate`` reads (``.keep``, ``.bytes_kept``).

    The one call into the planner for the whole advisor: min/max statistics
    plus the given indexes (``metadata`` maps index names to per-file values
    aligned with ``files``).
    """
    return plan(predicate, files, indexes=list(indexes), metadata=dict(metadata or {}))


@dataclass(frozen=True)
class VirtualFiles:
    """A sample laid out in blocks: per-block statistics and index metadata."""

    stats: FileStats
    metadata: dict[str, pa.Array]
    indexes: tuple[Index, ...]

    def fractions(self, predicates: Sequence[Predicate]) -> np.ndarray:
        """Per query, the share of the virtual bytes it reads.

        A window repeats queries (the same text, hence the same bound
        predicate): each distinct one (by its canonical SQL) is planned once.
        """
        (out,) = stacked_fractions([self], predicates)
        return out

    def fraction(self, predicate: Predicate) -> float:
        """The share of the virtual bytes a query with ``predicate`` reads."""
        total = float(self.stats.total_bytes)
        if total <= 0:
            return 0.0
        return (
            bytes_read(predicate, self.stats, indexes=self.indexes, metadata=self.metadata) / total
        )


def stacked_fractions(
    sets: Sequence[VirtualFiles], predicates: Sequence[Predicate]
) -> list[np.ndarray]:
    """``[s.fractions(predicates) for s in sets]``, planned together where that is exact.

    Virtual files of several candidates over one sample, carrying the same
    indexes, are stacked into one set of files, and each distinct predicate
    (by its canonical SQL) is planned once over the stack; where a rule could
    not decide each file from that file alone (a function of a column failing
    on one file's bounds: :func:`~lakelayout.skipping.stats_rules.each_file_alone`)
    the predicate is planned once per set instead.
    The numbers are those of planning each set alone (tested for equality);
    the work per decision drops from one planner call per candidate and query
    to about one per query.
    """
    out = [np.zeros(len(predicates), dtype=np.float64) for _ in sets]
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, files in enumerate(sets):
        if float(files.stats.total_bytes) > 0:  # an empty set reads nothing
            groups.setdefault(tuple(ix.name for ix in files.indexes), []).append(i)
    for members in groups.values():
        shares = _shares([sets[i] for i in members], predicates)
        for row, i in enumerate(members):
            out[i] = shares[row]
    return out


def _shares(sets: Sequence[VirtualFiles], predicates: Sequence[Predicate]) -> np.ndarray:
    """``out[k, j]``: the share of ``sets[k]``'s bytes the ``j``-th predicate reads (sets
    with the same indexes and some bytes)."""
    out = np.zeros((len(sets), len(predicates)), dtype=np.float64)
    stack = _Stack.of(sets) if len(sets) > 1 else None

    def shares(pred: Predicate) -> np.ndarray:
        stacked = stack.shares(pred) if stack is not None else None
        if stacked is not None:
            return stacked
        return np.array([files.fraction(pred) for files in sets], dtype=np.float64)

    for j, column in enumerate(per_distinct(predicates, shares)):
        out[:, j] = column
    return out


@dataclass(frozen=True)
class _Stack:
    """Several sets of virtual files (same indexes) one after the other, with their
    index metadata joined alike."""

    stack: FileStack
    metadata: dict[str, pa.Array]
    indexes: tuple[Index, ...]
    #: each set's file sizes
    sizes: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, sets: Sequence[VirtualFiles]) -> _Stack:
        metadata = {
            name: pa.concat_arrays([files.metadata[name] for files in sets])
            for name in sets[0].metadata
        }
        sizes = tuple(np.asarray(files.stats.sizes, dtype=np.int64) for files in sets)
        return cls(FileStack.of([s.stats for s in sets]), metadata, sets[0].indexes, sizes)

    def shares(self, predicate: Predicate) -> np.ndarray | None:
        """Per set, the share of its bytes ``predicate`` reads (one planner call); None
        where a rule could not decide each file alone."""
        parts = self.stack.keep_each(
            lambda files: (
                read_plan(predicate, files, indexes=self.indexes, metadata=self.metadata).keep
            )
        )
        if parts is None:
            return None
        out = np.zeros(len(parts), dtype=np.float64)
        for k, (sizes, keep) in enumerate(zip(self.sizes, parts, strict=True)):
            out[k] = int(sizes[keep].sum()) / float(int(sizes.sum()))
        return out


def virtual_files(
    sample: pa.Table, block_ids: np.ndarray, indexes: Sequence[Index] = ()
) -> VirtualFiles:
    """Virtual files of ``sample`` cut into blocks; each index's metadata per block.

    An index whose collector fails on the sample (e.g. a UDF it cannot call)
    is left out, so it never makes an estimate skip.
    """
    ids = np.asarray(block_ids, dtype=np.int64)
    stats = block_stats(sample, ids)
    kept: list[Index] = []
    metadata: dict[str, pa.Array] = {}
    if not indexes:
        return VirtualFiles(stats, metadata, tuple(kept))
    order = np.argsort(ids, kind="stable")
    _, starts = np.unique(ids[order], return_index=True)  # blocks in ascending id, as from_blocks
    # one gather in block order; each block is then a contiguous run (its rows in their
    # sample order, as a take of the block's rows would give them)
    ordered = sample.take(pa.array(order))
    for index in indexes:
        try:
            values = index.collect_blocks(ordered, starts.tolist())
            metadata[index.name] = pa.array(values, type=index.arrow_type)
        except Exception:
            continue
        kept.append(index)
    return VirtualFiles(stats, metadata, tuple(kept))


def collect_seconds_per_row(sample: pa.Table, indexes: Sequence[Index]) -> float:
    """Seconds per row to collect every one of ``indexes`` over the rows of ``sample``,
    timed here on one core: each index collected once over the whole sample, as a
    writing task collects it over one file (the per-file part of a collector, an
    empty filter or list, is small next to a file's rows and left out). An index
    whose collector fails on the sample is not counted. 0 for an empty sample.
    """
    if sample.num_rows == 0 or not indexes:
        return 0.0
    seconds = 0.0
    for index in indexes:
        started = time.perf_counter()
        try:
            index.collect(sample)
        except Exception:
            continue
        seconds += time.perf_counter() - started
    return seconds / sample.num_rows


@dataclass
class Candidate:
    """One candidate layout fitted on the sample, with its per-query read fractions."""

    family: str
    columns: list[str] = field(default_factory=list)
    sop_features: list[str] = field(default_factory=list)
    layout: Layout | None = None
    fractions: np.ndarray | None = None
    error: str | None = None
    #: fitting, assigning the sample and building its virtual files (pricing is shared)
    fit_seconds: float = 0.0
    #: of ``fit_seconds``, routing the sample's rows (``layout.route``: each row's block
    #: and its sort key inside the block): what a rewrite's tasks do to every row
    route_sample_seconds: float = 0.0
    #: the sample's rows in each block (:func:`files_written` prices the files from them)
    block_rows: np.ndarray | None = None
    #: per query, the share of the files the rewrite writes that it reads (blocks cut
    #: into files, :func:`by_files`); None: not asked for (``fractions`` stands in)
    file_fractions: np.ndarray | None = None

    def describe(self) -> str:
        parts = []
        if self.columns:
            parts.append(", ".join(self.columns))
        if self.sop_features:
            parts.append(f"{len(self.sop_features)} SOP features")
        if self.family in ("qdtree", "pando"):
            parts.append("cuts from the recent workload")
        return f"{self.family} ({'; '.join(parts)})" if parts else self.family


def candidates(
    analysis: Analysis,
    predicates: Sequence[Predicate],
    sample: pa.Table,
    target_blocks: int,
    *,
    indexes: Sequence[Index] = (),
    families: Sequence[str] = FAMILIES,
    rows_per_file: float | None = None,
    partition_columns: Sequence[str] = (),
) -> list[Candidate]:
    """Every family that fits the chosen features, fitted on ``sample`` and estimated.

    ``rows_per_file``: the sample's rows a written file holds at most (the roll
    size's share of the sample); given, each candidate also gets the share of
    its written files every query reads (``file_fractions``).

    ``partition_columns``: a rewrite splits every block by partition (a file holds
    one partition), so the virtual files, ``block_rows`` and the files written are
    the blocks' pieces per partition (each block priced as one file counted 1 file
    read per query where every query read 12, and 17 files written where 84 were;
    an audit).
    """
    curve = [f.key for f in analysis.of("curve", "chosen") if not f.calls_udf]
    sop = [f for f in analysis.of("sop", "chosen") if not f.calls_udf]
    sop_workload: list[Predicate] = []
    for f in sop:
        assert isinstance(f.node, Predicate)
        sop_workload += [f.node] * max(1, f.queries)
    sop_keys = [f.key for f in sop]
    plain = [p for p in predicates if not _calls_any(p, analysis)]
    trees = _SharedWorkspace(plain)
    fits: list[tuple[str, list[str], list[str], _Fit]] = []
    if curve and "zorder" in families:
        fits.append(("zorder", curve, [], _curve_fit("zorder", curve, target_blocks)))
    if len(curve) >= 2 and "hilbert" in families:
        fits.append(("hilbert", curve, [], _curve_fit("hilbert", curve, target_blocks)))
    if sop and curve and "sop-z" in families:
        dims = curve[: MAX_CURVE_DIMS - 1]
        fits.append(("sop-z", dims, sop_keys, _sopz_fit(dims, sop_workload, target_blocks)))
    if sop and not curve and "sop" in families:
        fits.append(("sop", [], sop_keys, _sop_fit(sop_workload, target_blocks)))
    if plain and "qdtree" in families:
        fits.append(("qdtree", [], [], _qdtree_fit(plain, target_blocks, trees)))
    if plain and "pando" in families:
        fits.append(("pando", [], [], _pando_fit(plain, target_blocks, trees)))
    out = []
    fitted: list[tuple[Candidate, VirtualFiles]] = []
    for family, columns, keys, fit in fits:
        cand = Candidate(family, list(columns), list(keys))
        started = time.perf_counter()
        try:
            cand.layout = fit(sample)
            routing = time.perf_counter()
            blocks = np.asarray(cand.layout.route(sample)[0], dtype=np.int64)
            cand.route_sample_seconds = time.perf_counter() - routing
            if partition_columns:
                blocks = split_by_partition(sample, blocks, partition_columns)
            cand.block_rows = np.bincount(blocks) if len(blocks) else np.zeros(0, np.int64)
            fitted.append((cand, virtual_files(sample, blocks, indexes)))
        except Exception as exc:  # one family that cannot be fitted must not sink the others
            cand.layout, cand.error = None, f"{type(exc).__name__}: {exc}"
        cand.fit_seconds = time.perf_counter() - started
        out.append(cand)
    # every candidate's virtual files priced together (one planner call per query); if
    # that fails, one by one, so that a candidate that cannot be priced sinks only itself
    sets = [f for _, f in fitted]
    if rows_per_file is not None:  # the same blocks weighed by their files, planned alike
        sets += [by_files(f, rows_per_file) for f in sets]
    try:
        shares: list[np.ndarray] | None = stacked_fractions(sets, predicates)
    except Exception:
        shares = None
    for k, (cand, files) in enumerate(fitted):
        try:
            cand.fractions = shares[k] if shares is not None else files.fractions(predicates)
            if rows_per_file is not None:
                cand.file_fractions = (
                    shares[len(fitted) + k]
                    if shares is not None
                    else by_files(files, rows_per_file).fractions(predicates)
                )
        except Exception as exc:
            cand.layout, cand.error = None, f"{type(exc).__name__}: {exc}"
    return out


def split_by_partition(
    sample: pa.Table, blocks: np.ndarray, partition_columns: Sequence[str]
) -> np.ndarray:
    """Each sample row's piece of its block: one id per (block, partition values), as a
    rewrite writes them (numbered by block, then partition, a NULL partition first).

    >>> t = pa.table({"p": ["x", "y", "x", None]})
    >>> split_by_partition(t, np.array([0, 0, 1, 0]), ["p"]).tolist()
    [1, 2, 3, 0]
    """
    keys = [np.asarray(blocks, dtype=np.int64)]
    for name in partition_columns:
        codes = sample.column(name).combine_chunks().dictionary_encode().indices
        keys.append(np.asarray(codes.fill_null(-1).to_numpy(zero_copy_only=False), np.int64))
    _, pieces = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return np.asarray(pieces, dtype=np.int64).reshape(-1)


def by_files(files: VirtualFiles, rows_per_file: float) -> VirtualFiles:
    """``files`` weighed by the files each block is written as (:func:`files_per_block`):
    its :meth:`~VirtualFiles.fractions` are then, per query, the share of the written
    files the query reads."""
    counts = files_per_block(files.stats.num_records, rows_per_file)
    return dataclasses.replace(files, stats=dataclasses.replace(files.stats, sizes=counts))


def files_written(block_rows: np.ndarray, rows_per_file: float) -> int:
    """The files a rewrite into blocks holding ``block_rows`` of the sample writes."""
    rows = np.asarray(block_rows)
    return max(1, int(files_per_block(rows[rows > 0], rows_per_file).sum()))


def files_per_block(block_rows: np.ndarray, rows_per_file: float) -> np.ndarray:
    """How many files each block of ``block_rows`` sample rows is written as: one, or
    one per ``rows_per_file`` rows (the roll size's share of the sample: the advisor's
    rewrites roll at twice the target size).

    A tree or SOP layout can have far fewer blocks than the target asks for;
    pricing each block as one file counted 2.9 files read per query after a
    rewrite whose queries read 12.6 (an audit).
    """
    rows = np.maximum(np.asarray(block_rows, dtype=np.float64), 0.0)
    return np.maximum(1.0, np.ceil(rows / max(float(rows_per_file), 1e-9))).astype(np.int64)


_Fit = Callable[[pa.Table], Layout]


def _curve_fit(family: str, columns: list[str], blocks: int) -> _Fit:
    from lakelayout.layouts import HilbertLayout, ZOrderLayout

    cls = HilbertLayout if family == "hilbert" else ZOrderLayout
    return lambda s: cls.fit(s, columns=columns, target_blocks=blocks)


def _sopz_fit(columns: list[str], workload: list[Predicate], blocks: int) -> _Fit:
    from lakelayout.layouts import SOPZLayout

    return lambda s: SOPZLayout.fit(
        s, workload, columns=columns, target_blocks=blocks, max_features=64, conjunctions=False
    )


def _sop_fit(workload: list[Predicate], blocks: int) -> _Fit:
    from lakelayout.layouts import SOPLayout

    return lambda s: SOPLayout.fit(
        s, workload, target_blocks=blocks, max_features=64, conjunctions=False
    )


class _SharedWorkspace:
    """The tree layouts' :class:`~lakelayout.layouts.qdtree.Workspace`, built once.

    Qd-tree and Pando, at every block count :func:`_near` tries, fit the same
    sample and workload, and their workspace (candidate cuts evaluated on the
    sample, which queries each cut side rules out) depends on nothing else:
    building it once instead of up to ``2 × TREE_FITS`` times changes no fit.
    It lives for one :func:`candidates` call and is rebuilt for another
    sample object.
    """

    def __init__(self, workload: list[Predicate]) -> None:
        self.workload = workload
        self._built: tuple[pa.Table, Workspace] | None = None

    def get(self, sample: pa.Table, family: str) -> Workspace:
        from lakelayout.layouts.qdtree import bind_queries

        if self._built is None or self._built[0] is not sample:
            queries = bind_queries(self.workload, sample, family)
            self._built = (sample, Workspace.build(sample, queries))
        return self._built[1]


def _qdtree_fit(workload: list[Predicate], blocks: int, shared: _SharedWorkspace) -> _Fit:
    from lakelayout.layouts import QdTreeLayout

    return _near(
        lambda s, t: QdTreeLayout.fit(
            s, workload, target_blocks=t, workspace=shared.get(s, "qdtree")
        ),
        blocks,
    )


def _pando_fit(workload: list[Predicate], blocks: int, shared: _SharedWorkspace) -> _Fit:
    """Pando's trees grown once with leaves no smaller than a wanted block; the refits
    of :func:`_near` only merge their cells into more or fewer blocks (a leaf smaller
    than the blocks the rewrite wants buys no skipping a block could keep)."""
    from lakelayout.layouts import PandoLayout

    return _near(
        lambda s, t: PandoLayout.fit(
            s, workload, target_blocks=t, k=2, max_leaves=24,
            min_leaf_rows=max(1, s.num_rows // max(1, blocks)),
            workspace=shared.get(s, "pando"),
        ),
        blocks,
    )  # fmt: skip


#: fits tried to bring a tree layout's block count near the wanted one
TREE_FITS = 3


def _near(fit: Callable[[pa.Table, int], Layout], wanted: int) -> _Fit:
    """Tree layouts stop short of ``target_blocks`` (leaves have a minimum size): refit
    with a scaled target, up to :data:`TREE_FITS` times, so a rewrite keeps about as
    many files as it replaces; the fit closest to ``wanted`` wins."""

    def run(sample: pa.Table) -> Layout:
        best: Layout | None = None
        target = wanted
        for _ in range(TREE_FITS):
            layout = fit(sample, target)
            if best is None or abs(layout.n_blocks - wanted) < abs(best.n_blocks - wanted):
                best = layout
            if abs(layout.n_blocks - wanted) <= 0.05 * wanted:
                break
            scaled = round(target * wanted / max(1, layout.n_blocks))
            target = min(4 * wanted, max(1, scaled if scaled != target else target + 1))
        assert best is not None
        return best

    return run


def _calls_any(pred: Predicate, analysis: Analysis) -> bool:
    """Whether ``pred`` holds a feature the analysis found to call a Python UDF."""
    udf_keys = {f.key for f in analysis.features if f.calls_udf}
    if not udf_keys:
        return False
    return any(node.sql() in udf_keys for node in pred.walk())


def additional_indexes(
    analysis: Analysis, declared: Sequence[Index], schema: pa.Schema
) -> list[Index]:
    """Indexes that keep the chosen and additional features in file statistics (thesis
    §4.1.2, "additional statistics"), beyond what the table already declares.

    A curve feature that is an expression (not a plain column, whose min/max
    Delta keeps anyway) gets a :class:`MinMax` index; SOP features not yet in a
    declared :class:`Features` index get one new ``Features`` index (bits per
    file). Features calling a Python UDF are left out.
    """
    from lakelayout.expr.nodes import Column
    from lakelayout.skipping.indexes import Features, MinMax

    names = {i.name for i in declared}
    known = {key.strip() for i in declared if isinstance(i, Features) for key in i.key.split(";")}
    out: list[Index] = []
    keep = ("chosen", "additional")
    for f in analysis.features:
        if f.kind != "curve" or f.status not in keep or f.calls_udf or isinstance(f.node, Column):
            continue
        try:
            index = MinMax(f.key).bind(schema)
        except LakelayoutError:
            continue
        if index.name not in names:
            names.add(index.name)
            out.append(index)
    predicates = [
        f.key
        for f in analysis.features
        if f.kind == "sop" and f.status in keep and not f.calls_udf and f.key not in known
    ][:64]
    if predicates:
        with contextlib.suppress(LakelayoutError):
            out.append(Features(predicates).bind(schema))
    return out
