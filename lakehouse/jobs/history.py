"""The jobs history: every attempt of every job, a Delta table in the warehouse
(``<warehouse>/_lakehouse/jobs``), written with delta-rs (appends; no Spark) so that any machine
sharing the warehouse sees it, and readable by Spark, delta-rs and DuckDB alike.

A job's state and next due time are derived from these rows (see ``schedule``), never kept in
memory: a restarted scheduler, a second host or a cron call all see the same history.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from lakehouse import delta_log
from lakehouse.storage import join

UTC = dt.timezone.utc
OUTCOMES = ("succeeded", "retrying", "failed", "aborted")
"""succeeded; retrying: a transient failure, tried again at once (with backoff); failed: a
terminal failure, or a transient one after the last attempt; aborted: interrupted (a second
Ctrl-C or SIGTERM) - not the job's fault, so the next round runs it again at once."""


def history_path(warehouse: str) -> str:
    return join(warehouse, "_lakehouse", "jobs")


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
        return (self.ended - self.started).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "job": self.job, "table": self.table_name, "started": self.started,
            "ended": self.ended, "seconds": round(self.seconds, 3), "outcome": self.outcome, "attempt": self.attempt,
            "terminal": self.terminal, "rows": self.rows, "files_before": self.files_before,
            "files_after": self.files_after, "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
            "error": self.error, "trigger": self.trigger, "host": self.host, "pid": self.pid, "detail": self.detail,
        }


def _schema() -> Any:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("run_id", pa.string()), ("job", pa.string()), ("table_name", pa.string()),
        ("started", ts), ("ended", ts), ("outcome", pa.string()), ("attempt", pa.int32()),
        ("terminal", pa.bool_()), ("rows", pa.int64()), ("files_before", pa.int64()),
        ("files_after", pa.int64()), ("bytes_before", pa.int64()), ("bytes_after", pa.int64()),
        ("error", pa.string()), ("fingerprint", pa.string()), ("trigger", pa.string()),
        ("host", pa.string()), ("pid", pa.int32()), ("detail", pa.string()), ("recorded", ts),
    ])


_FIELDS = set(Run.__dataclass_fields__)


class History:
    def __init__(self, warehouse: str) -> None:
        self.warehouse = warehouse
        self.path = history_path(warehouse)

    def record(self, run: Run) -> None:
        """Append one attempt (delta-rs retries a commit that races another writer's)."""
        import pyarrow as pa
        row = {**{k: getattr(run, k) for k in ("run_id", "job", "table_name", "started", "ended", "outcome",
                                               "attempt", "terminal", "rows", "files_before", "files_after",
                                               "bytes_before", "bytes_after", "error", "fingerprint", "trigger",
                                               "host", "pid")},
               "detail": json.dumps(run.detail, default=str, sort_keys=True),
               "recorded": dt.datetime.now(UTC)}
        delta_log.append_records(self.path, pa.Table.from_pylist([row], schema=_schema()))

    def runs(self, table: str | None = None, job: str | None = None) -> list[Run]:
        """Every recorded attempt (of a table, a job), oldest first."""
        if not delta_log.exists(self.path):
            return []
        rows = delta_log.scan(self.path).to_pylist()
        out = []
        for r in rows:
            if table is not None and r["table_name"] != table:
                continue
            if job is not None and r["job"] != job:
                continue
            detail = json.loads(r.pop("detail") or "{}")
            out.append(Run(**{k: v for k, v in r.items() if k in _FIELDS}, detail=detail))
        return sorted(out, key=lambda r: (r.recorded or r.ended, r.started, r.attempt))

    def longest(self, table: str) -> float:
        """The longest attempt of any job of ``table`` on record, in seconds."""
        return max((r.seconds for r in self.runs(table)), default=0.0)
