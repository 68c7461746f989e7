"""The algorithm plane never imports pyspark (CONTRIBUTING.md's layering rule)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

#: packages and modules of the algorithm plane: pure Python, numpy, pyarrow, scipy
PURE = (
    "lakelayout.expr",
    "lakelayout.stats",
    "lakelayout.skipping",
    "lakelayout.layouts",
    "lakelayout.online",
    "lakelayout.cluster.plan",
    "lakelayout.table.collect",
    "lakelayout.table.datafile",
    "lakelayout.table.features",
    "lakelayout.table.files",
    "lakelayout.table.location",
    "lakelayout.table.schema",
)

_SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    imported = []
    for name in sys.argv[1:]:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a package not built yet
                continue
            raise
        imported.append(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
            importlib.import_module(info.name)
            imported.append(info.name)
    leaked = sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark."))
    print(len(imported), leaked[:5])
    sys.exit(1 if leaked else 0)
    """
)


def test_the_pure_plane_imports_no_pyspark() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *PURE], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count = int(proc.stdout.split()[0])
    assert count >= 40, f"only {count} modules imported: the walk found too little"


# ---------------------------------------------------------------- imports between modules

SRC = Path(__file__).resolve().parents[1] / "src" / "lakelayout"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(("lakelayout", *path.relative_to(SRC).with_suffix("").parts))
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path) -> list[ast.ImportFrom | ast.Import]:
    """Every import in a module, lazy ones included, except ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.ImportFrom | ast.Import] = []
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    offenders = []
    for name, path in _modules().items():
        for node in _imports(path):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "lakelayout"
            ):
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    offenders.append(f"{name} imports {node.module}.{alias.name}")
    assert not offenders, offenders


def test_modules_import_each_other_without_cycles() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in _imports(path):
            targets = (
                [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.module
                else [a.name for a in getattr(node, "names", [])]
            )
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # a package's __init__ runs first
                    step = ".".join(parts[:i])
                    if step in modules and step != name and not name.startswith(step + "."):
                        graph[name].add(step)
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (iterative depth-first search), or None."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        iters = [iter(sorted(graph[start]))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None
