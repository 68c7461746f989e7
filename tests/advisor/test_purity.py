"""The advisor's pure parts never import pyspark (CONTRIBUTING.md, the layering rule)."""

from __future__ import annotations

import subprocess
import sys

PURE = (
    "filters", "querylog", "correlation", "analyzer", "costmodel", "estimate", "benefit",
    "recommend", "decisions",
)  # fmt: skip


def test_pure_advisor_modules_do_not_import_pyspark() -> None:
    imports = "; ".join(f"import lakelayout.advisor.{name}" for name in PURE)
    code = f"import sys; {imports}; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
