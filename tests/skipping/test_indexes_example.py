"""The worked example of docs/indexes.md: it is the shipped module, and it works."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.indexes import Index, examples
from lakelayout.skipping.indexes.examples import AgentNames, agent_name
from lakelayout.skipping.planner import plan

from .index_helpers import file_stats

DOC = Path(__file__).resolve().parents[2] / "docs" / "indexes.md"
SCHEMA = pa.schema([("user_agent", pa.string()), ("status", pa.int32())])


def test_the_doc_shows_the_example_module_verbatim() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(
        r"<!-- example:begin -->\n```python\n(.*?)```\n<!-- example:end -->", text, re.S
    )
    assert block is not None
    source = inspect.getsource(examples)
    # the whole module after its docstring: imports included, so the block runs as shown
    assert block.group(1) == source[source.index("from __future__ import annotations") :]
    scope: dict[str, object] = {"__name__": examples.__name__}  # registered once (register)
    exec(compile(block.group(1), f"{DOC}:example", "exec"), scope)
    assert scope["agent_name"]("curl/8.1") == "curl"  # type: ignore[operator]


def test_the_docs_using_it_snippet_runs_as_written() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- using:begin -->\n```python\n(.*?)```\n<!-- using:end -->", text, re.S)
    assert block is not None
    scope: dict[str, object] = {}
    exec(compile(block.group(1), f"{DOC}:using", "exec"), scope)  # no import added here
    keep = scope["keep"]
    assert isinstance(keep, np.ndarray) and keep.tolist() == [False, True]
    assert "# -> [False, True]" in block.group(1)


def test_agent_name_parser() -> None:
    assert agent_name("Mozilla/5.0 (X11; Linux) Gecko/20100101 Firefox/118.0") == "Firefox"
    assert agent_name("Hacker/1.0") == "Hacker"
    assert agent_name("no products here") == "Unknown"


def test_agent_name_index_skips_files_without_the_agent() -> None:
    files = [
        pa.table(
            {"user_agent": ["curl/8.1", "Mozilla/5.0 Firefox/118.0"], "status": [200, 200]},
            schema=SCHEMA,
        ),
        pa.table({"user_agent": ["Hacker/1.0", None], "status": [500, 404]}, schema=SCHEMA),
        pa.table({"user_agent": ["Wget/1.21"], "status": [200]}, schema=SCHEMA),
    ]
    index = AgentNames().bind(SCHEMA)
    assert index.name == "agentnames(getagentname(user_agent))"
    values = [index.collect(f.to_batches(max_chunksize=1)) for f in files]
    assert values == [["Firefox", "curl"], ["Hacker"], ["Wget"]]
    meta = {index.name: pa.array([*values, None], index.arrow_type)}
    stats = file_stats([*files, files[1]], SCHEMA)
    functions = {"getagentname": pa.string()}
    pred = parse_predicate(
        "GetAgentName(user_agent) = 'Hacker' AND status >= 400", SCHEMA, functions=functions
    )
    result = plan(pred, stats, metadata=meta, indexes=[index])
    assert result.keep.tolist() == [False, True, False, True]  # the last file has no metadata
    in_list = parse_predicate(
        "getagentname(user_agent) IN ('curl', 'Wget')", SCHEMA, functions=functions
    )
    assert np.array_equal(
        plan(in_list, stats, metadata=meta, indexes=[index]).keep, [True, False, True, True]
    )


def test_the_example_round_trips_through_declarations() -> None:
    again = Index.from_dict(AgentNames().to_dict())
    assert isinstance(again, AgentNames)
    assert again.bind(SCHEMA).collect(pa.table({"user_agent": ["curl/1"], "status": [1]})) == [
        "curl"
    ]
