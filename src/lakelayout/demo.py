"""The main job: a TPC-H replay of inserts and queries under eight layout policies
(lakelayout's, its advisor, and two peers: delta-rs' Z-order and Delta Lake's own liquid
clustering).

Data comes from the ``tpchgen-cli`` package (generated locally, nothing is
downloaded); lineitem is denormalized with orders, customer, part, supplier,
nation and region (:mod:`lakelayout.evaluation.datasets`). Rows arrive in
generation order (by ``l_orderkey``), so date predicates skip little until a
policy reorganizes: that gap is what the layout work of lakelayout is for.
``DEMO_PREDICATES`` and :func:`generate_lineitem` (the v0 demo's scans) stay
for the B5 benchmark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakelayout.errors import EnvironmentProblem

#: representative lineitem predicates (TPC-H q1, q6, q12, q14, q19 filters and friends)
DEMO_PREDICATES: tuple[tuple[str, str], ...] = (
    ("orderkey range", "l_orderkey BETWEEN 100000 AND 110000"),
    ("orderkey point", "l_orderkey = 4242"),
    ("NOT orderkey", "NOT (l_orderkey > 50000)"),
    (
        "issue example",
        "l_shipdate >= DATE'1995-03-01' AND l_quantity < 10 AND l_shipmode IN ('AIR','MAIL')",
    ),
    ("q1", "l_shipdate <= DATE'1998-09-02'"),
    (
        "q6",
        "l_shipdate >= DATE'1994-01-01' AND l_shipdate < DATE'1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    ),
    ("q14", "l_shipdate >= DATE'1995-09-01' AND l_shipdate < DATE'1995-10-01'"),
    (
        "q12",
        "l_shipmode IN ('MAIL','SHIP') AND l_commitdate < l_receiptdate "
        "AND l_receiptdate >= DATE'1994-01-01' AND l_receiptdate < DATE'1995-01-01'",
    ),
    (
        "q19",
        "l_shipinstruct = 'DELIVER IN PERSON' AND l_shipmode IN ('AIR', 'AIR REG') "
        "AND l_quantity BETWEEN 1 AND 11",
    ),
    ("flags", "l_returnflag = 'R' AND l_linestatus = 'F'"),
    ("partkey OR orderkey", "l_partkey < 200 OR l_orderkey < 3000"),
    ("comment prefix", "l_comment LIKE 'special%'"),
)


def generate_lineitem(scale: float, out_dir: Path) -> Path:
    """Write TPC-H lineitem at ``scale`` as Parquet with tpchgen-cli; return the file."""
    target = out_dir / "lineitem.parquet"
    if target.exists():
        return target
    exe = shutil.which("tpchgen-cli") or os.path.join(
        os.path.dirname(sys.executable), "tpchgen-cli"
    )
    if not os.path.exists(exe):
        raise EnvironmentProblem("tpchgen-cli not found: pip install tpchgen-cli")
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [exe, "parquet", "-s", str(scale), "--tables=lineitem", f"--output-dir={out_dir}"],
        check=True,
        capture_output=True,
    )
    return target


def run_demo(
    *,
    scale: float = 0.1,
    work_dir: Path = Path("demo-data"),
    queries: int = 39,
    progress: Callable[[str], None] = print,
) -> tuple[dict[str, Any], Path]:
    """The main job: a TPC-H replay (4 insert batches, ``queries`` drifting queries over
    the 13 lineitem templates) in spark mode under eight policies, ``auto`` (the advisor)
    and ``delta-liquid`` (Delta Lake's own) among them; results and report path.

    The report (``results.json``, ``report.html``) goes to ``work_dir/report``.
    """
    from lakelayout.evaluation.runner import DEMO_POLICIES, run_bench

    started = time.perf_counter()
    results, html_path = run_bench(
        "tpch",
        work_dir=work_dir,
        out_dir=work_dir / "report",
        policies=DEMO_POLICIES,
        queries=queries,
        mode="spark",
        scale=scale,
        batches=4,
        rows_per_file=20_000,
        segment_length=max(1, queries // 13),
        sample_rows=30_000,
        progress=progress,
    )
    progress(f"demo finished in {time.perf_counter() - started:.0f} s")
    return results, html_path
