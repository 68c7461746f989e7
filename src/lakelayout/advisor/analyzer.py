"""The workload analyzer: which features to cluster on, and why (thesis §4.2-4.3).

Algorithm 1 (feature selection) over the queries of a window of the query log:

* **P1** every *range filter* ``expr op const`` (:mod:`.filters`) makes
  ``expr`` a curve candidate: its *frequency* is the number of queries using
  it, its *comparison points* the distinct constants it is compared with;
* **P2** a candidate with fewer than ``theta`` comparison points gains little
  from range skipping: its filters are handed to SOP whole (a fixed
  predicate is as good a feature as a range here, and SOP takes many);
  candidates used by too few queries are dropped;
* **P3-P4** the correlation graph of the candidates on a sample (sorting
  index, both directions) is traversed by frequency (Algorithm 3): the first
  ``max_curve`` (4) features visited are *chosen*; features correlated with
  a chosen one, and frequent ones left over, are *additional* (worth keeping
  statistics on, not a curve dimension);
* **P5-P8** every other filter (LIKE, ``!=``, IS NULL, UDF predicates,
  comparisons of two columns, and the range filters handed over in P2) is an
  SOP candidate keyed by the whole filter; infrequent ones are dropped; the
  graph (mean-square contingency) is traversed the same way, choosing at
  most ``max_sop`` features.

Every feature carries the reasons for its fate, for people
(:meth:`Analysis.lines`). Opaque filters (not understood by lakelayout) can
be neither evaluated nor skipped on and are reported as dropped. This
module is pure; the sample is an Arrow table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lakelayout.advisor.correlation import (
    Graph,
    contingency_graph,
    dense_ranks,
    sorting_graph,
    traverse,
)
from lakelayout.advisor.filters import OPAQUE, RANGE, Filter, leaf_filters
from lakelayout.arguments import real_number, whole_number
from lakelayout.errors import InvalidOption
from lakelayout.expr.nodes import Column, Expr, Func, Predicate

CURVE = "curve"
SOP = "sop"
CHOSEN = "chosen"
ADDITIONAL = "additional"
DROPPED = "dropped"


@dataclass(frozen=True)
class AnalyzerConfig:
    """Thresholds of Algorithm 1 (defaults documented in docs/advisor.md)."""

    #: θ: fewest distinct comparison points for a curve feature
    theta: int = 5
    #: frequency threshold (γ for SOP, and for curves): share of the window's queries ...
    min_share: float = 0.05
    #: ... and at least this many queries
    min_queries: int = 2
    #: curve dimensions chosen at most (Delta's and the thesis's limit)
    max_curve: int = 4
    #: SOP features chosen at most
    max_sop: int = 16
    #: ε: a sorting index above 1 - ε or below ε is a correlation
    sort_eps: float = 0.1
    #: φ: mean-square contingency at or above it is a correlation
    contingency: float = 0.7
    #: sample rows used for correlations (the thesis: a few thousand suffice)
    correlation_rows: int = 2000

    def __post_init__(self) -> None:
        # a whole number where one is counted, a real number elsewhere (10.5 sample rows
        # and '5' were taken, then a raw TypeError; an audit)
        wrong = [
            f"{name}={getattr(self, name)!r}"
            for name in ("theta", "min_queries", "max_curve", "max_sop", "correlation_rows")
            if not whole_number(getattr(self, name))
        ] + [
            f"{name}={getattr(self, name)!r}"
            for name in ("min_share", "sort_eps", "contingency")
            if not real_number(getattr(self, name))
        ]
        if wrong:
            raise InvalidOption(
                f"analyzer option(s) of the wrong type: {', '.join(wrong)} (theta, "
                "min_queries, max_curve, max_sop and correlation_rows are whole numbers; "
                "min_share, sort_eps and contingency numbers)"
            )
        checks = {
            "theta": self.theta >= 1,
            "min_share": 0.0 <= self.min_share <= 1.0,
            "min_queries": self.min_queries >= 1,
            "max_curve": 1 <= self.max_curve <= 4,
            "max_sop": 1 <= self.max_sop <= 64,
            "sort_eps": 0.0 < self.sort_eps < 0.5,
            "contingency": 0.0 < self.contingency <= 1.0,
            "correlation_rows": self.correlation_rows >= 10,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise InvalidOption(
                "analyzer option(s) out of range: "
                + ", ".join(f"{n}={getattr(self, n)!r}" for n in bad)
                + " (theta >= 1, 0 <= min_share <= 1, min_queries >= 1, 1 <= max_curve <= 4, "
                "1 <= max_sop <= 64, 0 < sort_eps < 0.5, 0 < contingency <= 1, "
                "correlation_rows >= 10)"
            )

    def frequent(self, queries: int, total: int) -> bool:
        return queries >= self.min_queries and queries >= self.min_share * total


@dataclass
class FeatureChoice:
    """One feature's fate: kind (curve / sop), status (chosen / additional / dropped),
    how often it was used, and the reasons."""

    key: str
    kind: str
    status: str
    queries: int
    share: float
    form: str
    points: int | None = None
    reasons: list[str] = field(default_factory=list)
    correlated_with: str | None = None
    #: the bound term (curve) or filter (sop); not shown
    node: Expr | None = field(default=None, repr=False, compare=False)
    #: the feature calls a Python UDF (a layout cannot compute it)
    calls_udf: bool = False
    #: a chosen feature's place in Algorithm 3's walk (1 first); None for the others
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("node")
        return out


@dataclass
class Analysis:
    """What :func:`analyze` found over a window of queries."""

    queries: int
    features: list[FeatureChoice]
    config: AnalyzerConfig
    curve_graph: Graph | None = None
    sop_graph: Graph | None = None
    notes: list[str] = field(default_factory=list)
    #: logged queries of the window left out: they no longer bind to the table
    unparsed: int = 0

    def of(self, kind: str, status: str) -> list[FeatureChoice]:
        return [f for f in self.features if f.kind == kind and f.status == status]

    @property
    def curve(self) -> list[str]:
        """Chosen curve features, most frequent first."""
        return [f.key for f in self.of(CURVE, CHOSEN)]

    @property
    def curve_additional(self) -> list[str]:
        return [f.key for f in self.of(CURVE, ADDITIONAL)]

    @property
    def sop(self) -> list[str]:
        """Chosen SOP features (whole filters), most frequent first."""
        return [f.key for f in self.of(SOP, CHOSEN)]

    @property
    def sop_additional(self) -> list[str]:
        return [f.key for f in self.of(SOP, ADDITIONAL)]

    def feature(self, key: str, kind: str | None = None) -> FeatureChoice:
        for f in self.features:
            if f.key == key and (kind is None or f.kind == kind):
                return f
        raise KeyError(key)

    def lines(self) -> list[str]:
        """One line per feature (chosen first), with its reasons."""
        order = {CHOSEN: 0, ADDITIONAL: 1, DROPPED: 2}
        out = [f"{self.queries} queries analyzed", *self.notes]
        if self.unparsed:
            out.insert(1, unparsed_words(self.unparsed))

        def place(f: FeatureChoice) -> tuple[int, str, int, int]:  # chosen: by their rank
            return (order[f.status], f.kind, f.rank or 0, -f.queries)

        for f in sorted(self.features, key=place):
            out.append(f"{f.status:<10} {f.kind:<5} {f.key}: " + "; ".join(f.reasons))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "features": [f.to_dict() for f in self.features],
            "config": dataclasses.asdict(self.config),
            "notes": list(self.notes),
            "unparsed": self.unparsed,
        }


def unparsed_words(unparsed: int) -> str:
    """What the advisor says of the logged queries it left out."""
    return (
        f"{unparsed:,} more logged queries left out: they no longer bind to the table "
        "(a column they filter on was renamed, dropped or changed type)"
    )


# --------------------------------------------------------------------------- Algorithm 1


@dataclass
class _Counts:
    queries: int = 0
    points: set[str] = field(default_factory=set)
    node: Expr | None = None
    form: str = ""
    filters: dict[str, Filter] = field(default_factory=dict)


def analyze(
    predicates: Sequence[Predicate],
    sample: pa.Table | None = None,
    *,
    config: AnalyzerConfig | None = None,
    udfs: Mapping[str, Any] | None = None,
    timezone: str = "UTC",
    partition_columns: Collection[str] = (),
) -> Analysis:
    """Algorithm 1 over ``predicates`` (one per query), correlations on ``sample``.

    A feature over ``partition_columns`` only (the column itself, or an expression
    over partition columns alone) is dropped: each file holds one value of them, so
    a curve dimension or SOP feature on it cannot separate rows inside a file.
    """
    cfg = config or AnalyzerConfig()
    partitions = frozenset(partition_columns)

    def on_partitions(node: Expr | None) -> bool:
        used = node.columns() if node is not None else frozenset()
        return bool(used) and used <= partitions

    total = len(predicates)
    queries = [leaf_filters(p) for p in predicates]
    probe = _Probe(sample, cfg.correlation_rows, udfs or {}, timezone)
    result = Analysis(total, [], cfg)
    if probe.rows == 0:
        result.notes.append("no sample rows: correlations were not checked")

    # P1: range filters -> curve candidates with frequency and comparison points
    terms: dict[str, _Counts] = {}
    for filters in queries:
        used: set[str] = set()
        for f in filters:
            if f.kind != RANGE or f.term is None:
                continue
            c = terms.setdefault(f.term, _Counts(node=f.term_node, form=f.form))
            c.points.update(f.points)
            c.filters[f.key] = f
            if f.term not in used:
                used.add(f.term)
                c.queries += 1

    # P2: few comparison points -> SOP; infrequent -> dropped; cannot be ordered -> dropped
    curve: dict[str, FeatureChoice] = {}
    handed_to_sop: dict[str, str] = {}  # term -> reason
    for term, c in terms.items():
        choice = FeatureChoice(
            term,
            CURVE,
            DROPPED,
            c.queries,
            c.queries / total if total else 0.0,
            f"range filters ({c.form})",
            points=len(c.points),
            node=c.node,
            calls_udf=_calls(c.node, udfs),
        )
        choice.reasons.append(
            f"in {c.queries} of {total} queries ({choice.share:.0%}), "
            f"{len(c.points)} distinct comparison points"
        )
        if on_partitions(c.node):
            choice.reasons.append(f"dropped: {PARTITION_REASON}")
        elif len(c.points) < cfg.theta:
            why = f"only {len(c.points)} distinct comparison points (< θ={cfg.theta})"
            choice.reasons.append(f"moved to SOP: {why}; its filters are SOP candidates")
            handed_to_sop[term] = why
        elif not cfg.frequent(c.queries, total):
            choice.reasons.append(_infrequent(cfg, total))
        else:
            problem = probe.orderable(c.node)
            if problem is not None:
                choice.reasons.append(f"dropped: {problem}")
            else:
                choice.status = "candidate"
        curve[term] = choice
        result.features.append(choice)

    # P3-P4: correlation graph of the candidates, traversal by frequency
    candidates = [f for f in curve.values() if f.status == "candidate"]
    ranks = probe.ranks(candidates)
    result.curve_graph = sorting_graph(ranks, cfg.sort_eps) if ranks else None
    _choose(candidates, result.curve_graph, cfg.max_curve, "curve", "sorting index")

    # P5: everything else (and handed-over range filters) -> SOP candidates
    clustered = {f.key for f in curve.values() if f.status in (CHOSEN, ADDITIONAL)}
    sop: dict[str, FeatureChoice] = {}
    kinds: dict[str, str] = {}
    for filters in queries:
        used = set()
        for f in filters:
            if f.kind == RANGE and f.term in clustered:
                continue
            found = sop.get(f.key)
            if found is None:
                choice = FeatureChoice(
                    f.key, SOP, DROPPED, 0, 0.0, f.form, node=f.node, calls_udf=_calls(f.node, udfs)
                )
                if f.kind == RANGE and f.term in handed_to_sop:
                    choice.reasons.append(f"range filter on {f.term}: {handed_to_sop[f.term]}")
                elif f.kind == RANGE:
                    choice.reasons.append(f"range filter on {f.term}, which the curve does not use")
                else:
                    choice.reasons.append(f"{f.form}: not a range, evaluated per row by SOP")
                sop[f.key] = choice
                kinds[f.key] = f.kind
            else:
                choice = found
            if f.key not in used:
                used.add(f.key)
                choice.queries += 1
    # P6: frequency threshold; opaque filters cannot be features at all
    for choice in sop.values():
        choice.share = choice.queries / total if total else 0.0
        choice.reasons.insert(0, f"in {choice.queries} of {total} queries ({choice.share:.0%})")
        if kinds[choice.key] == OPAQUE:
            choice.reasons.append("dropped: not understood by lakelayout, cannot be evaluated")
        elif on_partitions(choice.node):
            choice.reasons.append(f"dropped: {PARTITION_REASON}")
        elif not cfg.frequent(choice.queries, total):
            choice.reasons.append(_infrequent(cfg, total))
        else:
            choice.status = "candidate"
        result.features.append(choice)

    # P7-P8: contingency graph and traversal
    sop_candidates = [f for f in sop.values() if f.status == "candidate"]
    truth = probe.truth(sop_candidates)
    result.sop_graph = contingency_graph(truth, cfg.contingency) if truth else None
    _choose(sop_candidates, result.sop_graph, cfg.max_sop, "SOP", "mean-square contingency")
    return result


#: why a feature over partition columns only is dropped
PARTITION_REASON = "partition column: files are already split by it"


def _infrequent(cfg: AnalyzerConfig, total: int) -> str:
    need = max(cfg.min_queries, int(np.ceil(cfg.min_share * total)))
    return f"dropped: used by too few queries (needs {need}: min_share={cfg.min_share:.0%})"


def _choose(
    candidates: list[FeatureChoice], graph: Graph | None, limit: int, what: str, measure: str
) -> None:
    """Algorithm 3 over ``candidates`` (most frequent first); sets status and reasons."""
    order = sorted(candidates, key=lambda f: (-f.queries, -(f.points or 0), f.key))
    by_key = {f.key: f for f in order}
    g = graph if graph is not None else Graph([f.key for f in order])
    for f in order:  # features the sample could not evaluate have no vertex
        if f.key not in g.vertices:
            g.vertices.append(f.key)
    walk = traverse(g, [f.key for f in order], limit)
    for rank, key in enumerate(walk.primary, 1):
        f = by_key[key]
        f.status = CHOSEN
        f.rank = rank
        f.reasons.append(f"chosen for the {what} (#{rank} by frequency)")
    for key, via in walk.correlated.items():
        f = by_key[key]
        f.status = ADDITIONAL
        f.correlated_with = via
        edge = g.edge(key, via)
        index = f" ({measure} {edge.a_to_b:.2f} / {edge.b_to_a:.2f})" if edge else ""
        f.reasons.append(
            f"additional: correlated with {via}{index}, so clustering on {via} clusters it; "
            "kept in file statistics only"
        )
    for key in walk.unvisited:
        f = by_key[key]
        f.status = ADDITIONAL
        f.reasons.append(
            f"additional: the {what} already has {limit} features; kept in file statistics only"
        )
    for a, b, one_way in g.one_way:
        if a in by_key and b in by_key:
            by_key[b].reasons.append(
                f"one-way {measure} {one_way:.2f} from {a} only (not kept: needs both directions)"
            )


def _calls(node: Expr | None, udfs: Mapping[str, Any] | None) -> bool:
    if node is None or not udfs:
        return False
    names = {k.lower() for k in udfs}
    return any(isinstance(n, Func) and n.name in names for n in node.walk())


# --------------------------------------------------------------------------- the sample


class _Probe:
    """Feature values on the first ``rows`` sample rows (UDF calls computed when given)."""

    def __init__(
        self, sample: pa.Table | None, rows: int, udfs: Mapping[str, Any], timezone: str
    ) -> None:
        self.data = sample.slice(0, rows) if sample is not None else None
        self.rows = 0 if self.data is None else self.data.num_rows
        self.udfs = {k.lower(): v for k, v in udfs.items()}
        self.timezone = timezone

    def values(self, term: Expr) -> pa.Array:
        from lakelayout.skipping.indexes.base import compute_term

        assert self.data is not None
        out = compute_term(term, self.data, self.udfs)
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

    def orderable(self, term: Expr | None) -> str | None:
        """Why ``term`` cannot be a curve dimension, or None."""
        if term is None:
            return "no expression"
        dtype = getattr(term, "dtype", None)
        if dtype is not None and pa.types.is_nested(dtype):
            return f"values of type {dtype} cannot be ordered"
        return None

    def ranks(self, features: Sequence[FeatureChoice]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.rows == 0:
            return out
        for f in features:
            assert f.node is not None
            try:
                out[f.key] = dense_ranks(self.values(f.node))
            except Exception as exc:
                f.reasons.append(f"not evaluated on the sample ({exc}); no correlation checked")
        return out

    def truth(self, features: Sequence[FeatureChoice]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.rows == 0:
            return out
        for f in features:
            assert isinstance(f.node, Predicate)
            try:
                out[f.key] = self._evaluate(f.node)
            except Exception as exc:
                f.reasons.append(f"not evaluated on the sample ({exc}); no correlation checked")
        return out

    def _evaluate(self, pred: Predicate) -> np.ndarray:
        from lakelayout.expr.evaluate import evaluate

        assert self.data is not None
        term = getattr(pred, "term", None)
        if term is not None and _calls(term, self.udfs):
            values = self.values(term)
            stand_in = Column("__udf_value", values.type)
            table = pa.table({"__udf_value": values})
            return np.asarray(
                evaluate(dataclasses.replace(pred, term=stand_in), table, timezone=self.timezone),  # type: ignore[type-var]
                dtype=bool,
            )
        return np.asarray(evaluate(pred, self.data, timezone=self.timezone), dtype=bool)
