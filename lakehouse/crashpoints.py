"""Named points where tests kill a job for real (SIGKILL), to prove crash safety.

Set ``LAKEHOUSE_CRASH_AT=<point>`` in a job's environment; when the job reaches that point the
process kills itself (and Spark's JVM, which exits when its Python driver is gone). Unset, this
costs one dictionary look-up.
"""

from __future__ import annotations

import os
import signal
import threading

from lakehouse.settings import env

ENV = "LAKEHOUSE_CRASH_AT"


def armed() -> str | None:
    """The crash point armed in this process's environment (None when none is)."""
    return env(ENV) or None


PAUSE_ENV = "LAKEHOUSE_PAUSE_AT"
"""``<point>:<seconds>:<file>``: at ``point``, create ``file`` and sleep (tests signal a job in
the middle of its work)."""


def reached(point: str, pid: int | None = None) -> None:
    """Kill the process (or ``pid``) if the crash point ``point`` is armed; pause there if a
    pause is armed at it."""
    if env(ENV) == point:
        os.kill(pid or os.getpid(), signal.SIGKILL)
    pause = env(PAUSE_ENV)
    if pause and pause.split(":", 1)[0] == point:
        import time

        _, seconds, marker = pause.split(":", 2)
        with open(marker, "a"):
            pass
        time.sleep(float(seconds))


def kill_later(point: str, seconds: float) -> None:
    """Arm a timer that kills the process ``seconds`` from now, if ``point`` is armed
    (for crashes in the middle of a Spark write)."""
    if env(ENV) == point:
        t = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGKILL))
        t.daemon = True
        t.start()
