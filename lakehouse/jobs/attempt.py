"""One attempt of a job on a table, as the jobs history records it (pure: no IO)."""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass, field
from typing import Any

UTC = dt.timezone.utc
OUTCOMES = ("succeeded", "retrying", "failed", "aborted")
"""succeeded; retrying: a transient failure, tried again at once (with backoff); failed: a
terminal failure, or a transient one after the last attempt; aborted: interrupted (a second
Ctrl-C or SIGTERM) - not the job's fault, so the next round runs it again at once."""



@dataclass
class Run:
    """One attempt of a job on a table."""

    run_id: str
    job: str
    table_name: str
    started: dt.datetime
    ended: dt.datetime
    outcome: str
    attempt: int = 1
    terminal: bool = False
    rows: int = 0
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    error: str | None = None
    fingerprint: str = ""
    """What the job ran against (definition and table versions): a terminal failure is not
    retried until it changes."""
    trigger: str = "run"
    """run (``jobs run``), serve (``jobs serve``) or the command that ran it by hand."""
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    detail: dict[str, Any] = field(default_factory=dict)
    recorded: dt.datetime | None = None
    """When the row was written (the wall clock; orders the history when ``--now`` was injected)."""

    @property
    def seconds(self) -> float:
        """How long the attempt took."""
        return (self.ended - self.started).total_seconds()

    def result(self) -> dict[str, Any]:
        """What the attempt did as ``jobs run`` shows it: its detail, then (when it succeeded) the
        very rows, files and bytes before/after ``jobs history`` shows for it."""
        if self.outcome != "succeeded":
            return dict(self.detail)
        return {**self.detail, "rows": self.rows, "files_before": self.files_before, "files_after": self.files_after,
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after}

    def as_dict(self) -> dict[str, Any]:
        """The attempt as ``jobs history --format json`` shows it."""
        return {
            "run_id": self.run_id, "job": self.job, "table": self.table_name, "started": self.started,
            "ended": self.ended, "seconds": round(self.seconds, 3), "outcome": self.outcome, "attempt": self.attempt,
            "terminal": self.terminal, "rows": self.rows, "files_before": self.files_before,
            "files_after": self.files_after, "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
            "error": self.error, "trigger": self.trigger, "host": self.host, "pid": self.pid, "detail": self.detail,
        }
