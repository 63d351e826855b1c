"""The jobs history: every attempt of every job, a Delta table in the warehouse
(``<warehouse>/_lakehouse/jobs``), written with delta-rs (appends; no Spark) so that any machine
sharing the warehouse sees it, and readable by Spark, delta-rs and DuckDB alike.

A job's state and next due time are derived from these rows (see ``schedule``), never kept in
memory: a restarted scheduler, a second host or a cron call all see the same history.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from lakehouse import delta_log
from lakehouse.jobs.attempt import UTC, Run
from lakehouse.storage import join


def history_path(warehouse: str) -> str:
    """``<warehouse>/_lakehouse/jobs``: every attempt of every job (Delta)."""
    return join(warehouse, "_lakehouse", "jobs")


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
    """The jobs history: every attempt of every job, a Delta table under ``_lakehouse/jobs``."""

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
