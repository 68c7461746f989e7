"""What a process waits for at exit: its online rewrite, as long as LAKELAYOUT_ONLINE_EXIT_WAIT says.

Real threads on a controller of a table directory that is never opened; no Spark (the
child-process tests in tests/test_online_table.py run the handler at a real exit).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from lakelayout import online_table


def rewrite_until(done: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=done.wait, args=(30,), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", None), ("0", 0.0), (" 2.5 ", 2.5), ("soon", None), ("-1", None), ("nan", None)],
)
def test_the_exit_wait_is_seconds_or_no_limit_and_a_bad_value_is_named(
    raw: str,
    expected: float | None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(online_table.EXIT_WAIT_ENV, raw)
    with caplog.at_level(logging.WARNING, logger=online_table.__name__):
        assert online_table.exit_wait() == expected
    named = online_table.EXIT_WAIT_ENV in caplog.text
    assert named == (raw.strip() not in ("", "0", "2.5"))


def test_at_exit_a_rewrite_is_waited_for_until_it_ends_or_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = online_table._Controller(str(tmp_path / "t"))
    done = threading.Event()
    # no limit: finish() returns once the rewrite has ended
    ctl.worker = rewrite_until(done)
    threading.Timer(0.3, done.set).start()
    monkeypatch.delenv(online_table.EXIT_WAIT_ENV, raising=False)
    ctl.finish()
    assert not ctl.worker.is_alive()
    # a limit: finish() gives up after it, the rewrite still running
    done.clear()
    ctl.worker = rewrite_until(done)
    monkeypatch.setenv(online_table.EXIT_WAIT_ENV, "0.2")
    started = time.monotonic()
    ctl.finish()
    assert ctl.worker.is_alive() and time.monotonic() - started < 10
    # 0: not at all
    monkeypatch.setenv(online_table.EXIT_WAIT_ENV, "0")
    started = time.monotonic()
    ctl.finish()
    assert ctl.worker.is_alive() and time.monotonic() - started < 0.2
    done.set()
