"""The main job, v0: TPC-H lineitem as a lakelayout table, a dozen scans, their reports.

Data comes from the ``tpchgen-cli`` package (generated locally, nothing is
downloaded). Rows are written in arrival order (generation order, i.e. by
``l_orderkey``) into a few dozen files, so predicates on the order key skip
most files while predicates on ship dates skip little: that gap is what the
layout work of lakelayout is for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class DemoRow:
    label: str
    predicate: str
    files_kept: int
    files_total: int
    bytes_kept: int
    bytes_total: int
    rows_matching: int
    sigma: float | None
    psi: float | None
    lam: float | None
    mu: float | None
    pruning_ms: float
    scan_seconds: float


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
    files: int = 32,
    progress: Callable[[str], None] = print,
) -> list[DemoRow]:
    """Generate lineitem, write it as a table of ~``files`` files, scan every demo predicate."""
    from lakelayout.api import Table
    from lakelayout.table.session import spark_session

    spark = spark_session()
    started = time.perf_counter()
    source = generate_lineitem(scale, work_dir / f"tpch-{scale}")
    progress(f"generated lineitem (scale {scale}) in {time.perf_counter() - started:.1f} s")

    table_dir = work_dir / f"lineitem-{scale}"
    if table_dir.exists():
        shutil.rmtree(table_dir)
    df = spark.read.parquet(str(source))
    target = max(1024, source.stat().st_size // files)
    started = time.perf_counter()
    table = Table.create(str(table_dir), df, target_file_size=target)
    detail = table.describe(history=0)
    progress(
        f"wrote {detail.rows:,} rows in {detail.files} files "
        f"({detail.bytes / 2**20:.1f} MiB) in {time.perf_counter() - started:.1f} s"
    )

    rows = []
    for label, predicate in DEMO_PREDICATES:
        started = time.perf_counter()
        result = table.scan(predicate, measure=True)
        elapsed = time.perf_counter() - started
        r = result.report
        rows.append(
            DemoRow(
                label=label,
                predicate=predicate,
                files_kept=r.files_kept,
                files_total=r.files_total,
                bytes_kept=r.bytes_kept,
                bytes_total=r.bytes_total,
                rows_matching=r.measured.rows_matching if r.measured else 0,
                sigma=r.sigma,
                psi=r.psi,
                lam=r.lam,
                mu=r.mu,
                pruning_ms=r.pruning_seconds * 1000,
                scan_seconds=elapsed,
            )
        )
    return rows
