"""Candidate layouts fitted on the manager's window (OReO §V-A, ``generate_layout``).

One candidate per family, each fitted on a sample of the table and the
window's predicates, with about ``blocks`` blocks (the table's file count,
so a switch keeps as many files as the table has):

* ``qdtree``: a greedy Qd-tree on the window's predicates;
* ``pando``: Pando with two trees (at most 24 leaves each);
* ``hilbert``: a Hilbert curve over the three most queried columns of the
  window (Z-order when only one column is queried), the paper's workload-aware
  Z-ordering (§VI-A1);
* ``sop-z``: SOP+Z over the window's features and its two most queried columns.

A family that cannot fit the window (no usable predicate, no orderable
column) is left out for this round. Fitting is pure (the layouts package).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakelayout.errors import InvalidOption, LakelayoutError, LayoutError, closest
from lakelayout.expr.nodes import Column, Expr, Predicate
from lakelayout.layouts.base import Layout
from lakelayout.online.manager import Candidate

if TYPE_CHECKING:
    from lakelayout.layouts.qdtree import CutMemo, Workspace

FAMILIES = ("qdtree", "pando", "hilbert", "sop-z")

#: ``sizer(fit, wanted, family)``: a layout of about ``wanted`` blocks from
#: ``fit(target_blocks)``, a fit of ``family``
Sizer = Callable[[Callable[[int], Layout], int, str], Layout]


def fit_once(fit: Callable[[int], Layout], wanted: int, family: str = "") -> Layout:
    """One fit with ``target_blocks=wanted`` (Pando and SOP land below it)."""
    return fit(wanted)


def check_families(families: Sequence[str] | str) -> list[str]:
    """``families`` validated against :data:`FAMILIES` (clear error naming the bad one);
    a string is a comma-separated list (``"qdtree"``, ``"qdtree,pando"``)."""
    if isinstance(families, str):
        families = [name.strip() for name in families.split(",") if name.strip()]
    if not isinstance(families, Sequence):
        raise InvalidOption(
            "families must be a list of layout families or a comma-separated string, "
            f"got {families!r}; known: {', '.join(FAMILIES)}"
        )
    out: list[str] = []
    for name in families:
        if not isinstance(name, str):
            raise InvalidOption(
                f"a layout family is a name, got {name!r}; known: {', '.join(FAMILIES)}"
            )
        if name in out:  # "qdtree,qdtree": one family, fitted once
            continue
        if name not in FAMILIES:
            raise InvalidOption(
                f"unknown layout family {name!r} (known: {', '.join(FAMILIES)})."
                f"{closest(name, FAMILIES)}"
            )
        out.append(name)
    if not out:
        raise InvalidOption(f"at least one layout family is needed; known: {', '.join(FAMILIES)}")
    return out


def most_queried(predicates: Sequence[Predicate], schema: pa.Schema, top: int) -> list[str]:
    """The ``top`` plain columns of ``schema`` read by the most predicates (ties: name order).

    Map, list and struct columns are left out: a curve cannot order them.
    """
    plain = {
        f.name for f in schema if not pa.types.is_nested(f.type) and not pa.types.is_null(f.type)
    }
    counts = Counter(c for p in predicates for c in set(_plain_columns(p)) if c in plain)
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


def _plain_columns(node: Expr) -> list[str]:
    """Columns read by ``node`` outside nested access (``attrs['k']`` reads no plain column)."""
    out = []
    stack: list[Expr] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Column):
            out.append(item.name)
        stack.extend(item.children())
    return out


class _SharedWorkspace:
    """The Qd-tree workspace of one sample and window (cut masks over the sample, which
    queries each cut rules out), built at the first Qd-tree or Pando fit and handed to
    the others: it depends on neither the family nor the block count, and growing never
    modifies it (:meth:`~lakelayout.layouts.qdtree.Workspace.reuse`), so every fit is
    the one it would be alone. A window's fits (two families, up to three block counts
    each) used to build it up to six times. ``memo``: the last window's cut work on
    this sample (:class:`~lakelayout.layouts.qdtree.CutMemo`)."""

    def __init__(
        self, sample: pa.Table, predicates: Sequence[Predicate], memo: CutMemo | None = None
    ) -> None:
        self.sample = sample
        self.predicates = predicates
        self.memo = memo
        self._built: Workspace | None = None
        self._failed = False

    def get(self) -> Workspace | None:
        """The workspace, or None when it cannot be built (the fit then fails by itself)."""
        from lakelayout.layouts.qdtree import Workspace, bind_queries, check_sample

        if self._built is None and not self._failed:
            try:
                sample = check_sample(self.sample, "qdtree")
                self._built = Workspace.build(
                    sample, bind_queries(self.predicates, sample, "qdtree"), memo=self.memo
                )
            except LakelayoutError:
                self._failed = True
        return self._built


def _fit_family(
    family: str,
    sample: pa.Table,
    predicates: Sequence[Predicate],
    target: int,
    workspace: _SharedWorkspace | None = None,
) -> tuple[str, Layout] | None:
    """``(label, layout)`` of one family with ``target_blocks=target``; None if it has no
    columns to work on. ``workspace``: shared by the Qd-tree and Pando fits of a window."""
    from lakelayout.layouts import HilbertLayout, PandoLayout, QdTreeLayout, SOPZLayout
    from lakelayout.layouts.zorder import ZOrderLayout

    ws = workspace.get() if workspace is not None and family in ("qdtree", "pando") else None
    if family == "qdtree":
        return "qdtree", QdTreeLayout.fit(sample, predicates, target_blocks=target, workspace=ws)
    if family == "pando":
        pando: Layout = PandoLayout.fit(
            sample, predicates, target_blocks=target, k=2, max_leaves=24, workspace=ws
        )
        return "pando(k=2)", pando
    if family == "hilbert":
        columns = most_queried(predicates, sample.schema, 3)
        if not columns:
            return None
        if len(columns) == 1:
            return f"zorder({columns[0]})", ZOrderLayout.fit(
                sample, columns=columns, target_blocks=target
            )
        curve: Layout = HilbertLayout.fit(sample, columns=columns, target_blocks=target)
        return f"hilbert({', '.join(columns)})", curve
    columns = most_queried(predicates, sample.schema, 2)
    if not columns:
        return None
    sopz: Layout = SOPZLayout.fit(
        sample, predicates, columns=columns, target_blocks=target, max_features=32
    )
    return f"sop-z({', '.join(columns)})", sopz


def fit_candidates(
    sample: pa.Table,
    predicates: Sequence[Predicate],
    *,
    blocks: int,
    families: Sequence[str] = FAMILIES,
    sizer: Sizer = fit_once,
    memo: CutMemo | None = None,
) -> list[Candidate]:
    """One candidate per family in ``families`` fitted on ``sample`` and ``predicates``.

    ``memo``: kept by the caller from one window's fit to the next on the same sample
    (the Qd-tree and Pando fits then redo only the new queries' and cuts' work); the
    candidates are the ones fitted without it."""
    wanted = max(1, int(blocks))
    out: list[Candidate] = []
    shared = _SharedWorkspace(sample, predicates, memo)
    for family in check_families(families):
        labels: list[str] = []

        def fit(target: int, family: str = family, labels: list[str] = labels) -> Layout:
            got = _fit_family(family, sample, predicates, target, shared)
            if got is None:
                raise LayoutError(f"{family}: no queried column to cluster on")
            labels.append(got[0])
            return got[1]

        try:
            layout = sizer(fit, wanted, family)
        except LakelayoutError:
            continue  # this family cannot fit this window: no candidate from it this round
        out.append(Candidate(labels[-1], layout))
    return out
