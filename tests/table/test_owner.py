"""Who owns unfinished work: a process gone, running, or given a dead owner's id."""

from __future__ import annotations

import os
import subprocess
import sys

from lakelayout.table.owner import gone, start_time, this_process


def test_a_process_is_gone_when_its_id_runs_another_process_or_none() -> None:
    me = this_process()
    assert me["pid"] == os.getpid() and me["started"] == start_time(os.getpid()) > 0
    assert not gone(me) and gone(me, this_one=True)  # this process: only when asked
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert gone({**me, "pid": dead.pid})
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = {**me, "pid": alive.pid, "started": start_time(alive.pid)}
        assert not gone(running)
        # the id of a dead owner given to a new process (an audit: a pending rewrite
        # stayed pending for ever): another start time, not the owner
        assert gone({**running, "started": running["started"] - 1})
        assert not gone({"pid": alive.pid, "host": me["host"]})  # an old record: not told
        assert not gone({**running, "host": "elsewhere", "started": 1})  # another host's
    finally:
        alive.kill()
        alive.wait()
    assert not gone({"pid": "12", "host": me["host"]}) and not gone({})
    assert start_time(dead.pid) == 0
