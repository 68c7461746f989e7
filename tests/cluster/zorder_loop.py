"""Child process of the conflict test: OPTIMIZE ZORDER BY in a loop until told to stop.

``python zorder_loop.py TABLE STOP_FILE LOG_FILE``: one JSON line per run in
``LOG_FILE`` (commit versions, whether it yielded and why).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(table: str, stop: str, log: str) -> None:
    from lakelayout.api import Table
    from lakelayout.table.session import spark_session

    spark = spark_session("local[1]", delta=False, **{"spark.ui.enabled": "false"})
    t = Table(table, spark=spark)
    with open(log, "a", encoding="utf-8") as out:
        while not Path(stop).exists():
            m = t.optimize.zorder(["a", "b"])
            row = {"versions": list(m.versions), "yielded": m.yielded, "reason": m.yield_reason}
            out.write(json.dumps(row) + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
