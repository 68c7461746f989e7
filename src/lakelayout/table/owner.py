"""Who runs a piece of work another process may find unfinished: a process on a host.

A create's claim, a pending online rewrite and the statistics an advisor rewrite
declared name the process doing the work; a process that finds the work
unfinished settles it once that process is gone. A process id alone is not
enough: the system gives a dead process's id to a new one (after a container
restart the rewriter's id may be 1, or any short-lived command's), and the work
then looked owned for ever (an audit). So the record also holds the host and
the process's start time (Linux's ``/proc/<pid>/stat``; 0 where unknown): a
process with that id and another start time is not the owner.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any


def this_process() -> dict[str, Any]:
    """``pid``, ``host`` and ``started`` of the calling process, for a record."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "started": start_time(pid)}


def gone(record: Mapping[str, Any], *, this_one: bool = False) -> bool:
    """Whether the process a record (:func:`this_process`) names is known to be gone:
    on this host, and no process with its id runs, or one started at another time.
    Another host's process, a record without a usable id, and (unless ``this_one``)
    the calling process itself are not gone: they may still run."""
    pid = record.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if (record.get("host") or socket.gethostname()) != socket.gethostname():
        return False  # (no host: a record written before hosts were)
    if pid == os.getpid():
        return this_one
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # running, another user's
        pass
    started = record.get("started")
    if isinstance(started, int) and not isinstance(started, bool) and started > 0:
        now = start_time(pid)
        return now > 0 and now != started  # the id of another process now
    return False


def start_time(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (Linux); 0 when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return 0
    # the command name is in parentheses and may hold spaces: fields follow its last ')'
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the line; the 3rd after the name is fields[0]
    except (IndexError, ValueError):
        return 0
