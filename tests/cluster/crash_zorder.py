"""Child process of the VACUUM test: a Z-order that stops just before its commit.

``python crash_zorder.py TABLE READY_FILE``: rewrites the table (data files
and provenance written, layout saved), then writes ``READY_FILE`` and waits
to be killed, so the test kills a real write between its files and its
commit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(table: str, ready: str) -> None:
    from lakelayout.api import Table
    from lakelayout.cluster import OptimizeHooks
    from lakelayout.table.session import spark_session

    spark = spark_session("local[1]", delta=False, **{"spark.ui.enabled": "false"})

    def block(_: int) -> None:
        Path(ready).write_text("written, not committed", encoding="utf-8")
        time.sleep(3600)  # killed here

    Table(table, spark=spark).optimize.zorder(["a", "b"], hooks=OptimizeHooks(before_commit=block))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
