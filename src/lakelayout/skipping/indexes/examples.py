"""A user-written index type: distinct user-agent names per file (paper, Appendix C).

This module is included verbatim in ``docs/indexes.md`` and exercised by
``tests/skipping/test_indexes_example.py``; it uses only the public extension API.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelayout.expr.nodes import Compare, In, Predicate
from lakelayout.skipping.indexes import Clause, TermIndex, elementwise, register


def agent_name(user_agent: str) -> str:
    """'Mozilla/5.0 (X11) Firefox/118.0' -> 'Firefox'; 'curl/8.1' -> 'curl'."""
    products = [token.split("/")[0] for token in user_agent.split() if "/" in token]
    return products[-1] if products else "Unknown"


@register
class AgentNames(TermIndex):
    """Distinct ``getagentname(user_agent)`` values per file; labels ``=`` and IN."""

    kind = "agentnames"

    def __init__(self, expression: str = "getagentname(user_agent)", **options: Any) -> None:
        if not options.get("udfs"):
            options["udfs"] = {"getagentname": elementwise(agent_name)}
        super().__init__(expression, **options)

    def supports(self, dtype: pa.DataType) -> bool:
        return pa.types.is_string(dtype)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.list_(pa.string())

    def collector(self) -> AgentNameCollector:
        return AgentNameCollector(self)

    def label(self, node: Predicate) -> Clause | None:
        if self.matches(node) and isinstance(node, Compare) and node.op == "=":
            return AgentNameClause([node.value.value])
        if self.matches(node) and isinstance(node, In) and not node.negated:
            return AgentNameClause([v.value for v in node.values])
        return None


class AgentNameCollector:
    def __init__(self, index: AgentNames) -> None:
        self.index, self.names, self.failed = index, set[str](), False

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        values = self.index.values(batch)  # runs the registered UDF on the batch
        self.failed = self.failed or values is None
        if values is not None:
            self.names.update(v for v in values.to_pylist() if v is not None)

    def result(self) -> list[str] | None:
        return None if self.failed else sorted(self.names)


class AgentNameClause(Clause):
    def __init__(self, wanted: list[Any]) -> None:
        self.wanted = pa.array([w for w in wanted if w is not None], pa.string())

    def evaluate(self, meta: pa.Array) -> np.ndarray:
        hit = pc.is_in(pc.list_flatten(meta), value_set=self.wanted)
        parents = pc.list_parent_indices(meta).to_numpy()
        out = np.zeros(len(meta), dtype=bool)
        out[parents[hit.to_numpy(zero_copy_only=False)]] = True
        return out | meta.is_null().to_numpy(zero_copy_only=False)
