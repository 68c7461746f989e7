"""The algorithm plane never imports pyspark (CONTRIBUTING.md's layering rule)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
