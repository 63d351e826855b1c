"""A test's worker process that is killed with SIGKILL (tests/test_sink_kills.py,
tests/test_changes_kills.py): started ahead of time, its Spark up before it is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import FAST_JVM, REPO


class Worker:
    """A worker process with a Spark of its own (``python -m MODULE ARGS``), in a process group of
    its own (killed whole: Python and Spark's JVM), its output lines collected as they come."""

    def __init__(self, module: str, args: list[str], log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env.update(LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_JAVA_OPTS=FAST_JVM, PYTHONPATH=str(REPO))
        self.err = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_for(self, word: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if word in self.lines:
                return True
            if self.proc.poll() is not None:
                self.reader.join(5)
                return word in self.lines
            time.sleep(0.05)
        return False

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(60)
        self.err.close()
