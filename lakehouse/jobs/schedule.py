"""When a job is due, derived from the jobs history alone (pure: no IO, no clock of its own).

Each job of a table runs once per slot of its interval; slots are aligned to the epoch (every 2h
means 00:00, 02:00, ... UTC), so cron calls every minute, a scheduler and a restarted scheduler
all agree on what is due:

- never ran: due;
- last success started in the current slot: not due until the next slot;
- after a terminal failure (a bad definition, a failing check) with the same fingerprint
  (definition and table versions): not due; it is retried once something changes;
- after transient failures (conflicts, a lease held by another) that used up their attempts: due
  again after a backoff that doubles with each failed run (capped at the interval);
- after an aborted attempt (the scheduler was interrupted): due at once, with no backoff; the
  job's own recovery finishes or rolls back what the aborted attempt left;
- otherwise (the last success is from an earlier slot): due.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lakehouse.durations import Duration
from lakehouse.jobs.attempt import Run

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
JOBS = ("archive", "compact_live", "compact_archive", "vacuum")
"""In the order a round runs them on a table."""
BACKOFF = dt.timedelta(minutes=1)
"""The wait after the first failed run (then 2, 4, 8 ... minutes, at most the interval)."""


@dataclass(frozen=True)
class Decision:
    """Whether one job of one table is due now, why, and when it is due next."""

    job: str
    table: str
    due: bool
    why: str
    next_due: dt.datetime | None
    """When it is (or was) due next; None when off or waiting for a change."""
    last: Run | None = None

    def as_dict(self) -> dict[str, Any]:
        """The decision's fields of a ``lakehouse jobs run --json`` row (with the last run's outcome)."""
        return {"job": self.job, "table": self.table, "due": self.due, "why": self.why, "next_due": self.next_due,
                "last_outcome": self.last.outcome if self.last else None,
                "last_started": self.last.started if self.last else None}


def slot_start(now: dt.datetime, interval: Duration) -> dt.datetime:
    """The start of the interval slot ``now`` is in (slots aligned to the epoch)."""
    ms = int((now - EPOCH) / dt.timedelta(milliseconds=1))
    return EPOCH + dt.timedelta(milliseconds=ms - ms % interval.millis)


def _at(t: dt.datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(job: str, table: str, interval: Duration | None, runs: list[Run], now: dt.datetime,
           fingerprint: str, backoff: dt.timedelta = BACKOFF) -> Decision:
    """Is ``job`` of ``table`` due at ``now``, given its recorded attempts (oldest first)?"""
    if interval is None:
        return Decision(job, table, False, "off", None)
    runs = [r for r in runs if r.job == job and r.table_name == table]
    slot = slot_start(now, interval)
    nxt = slot + dt.timedelta(milliseconds=interval.millis)
    last = runs[-1] if runs else None
    successes = [r for r in runs if r.outcome == "succeeded"]
    ok = successes[-1] if successes else None
    if last is None:
        return Decision(job, table, True, "never ran", now, None)
    if ok is not None and ok.started >= slot:
        return Decision(job, table, False, f"ran at {_at(ok.started)}; next slot {_at(nxt)} (every {interval})",
                        nxt, last)
    if last.outcome == "aborted":
        return Decision(job, table, True, f"aborted at {_at(last.ended)}; run again to recover", now, last)
    failed = [r for r in runs if r.outcome == "failed" and (ok is None or r.started > ok.started)]
    if last.outcome == "failed" and last.terminal:
        if last.fingerprint == fingerprint:
            return Decision(job, table, False, f"failed at {_at(last.ended)} and is not retried until the definition "
                            f"or the data changes: {last.error}", None, last)
        return Decision(job, table, True, "failed before, but the definition or the data changed since", now, last)
    if failed and last.outcome in ("failed", "retrying"):
        wait = min(backoff * (2 ** (len(failed) - 1)), dt.timedelta(milliseconds=interval.millis))
        at = last.ended + wait
        if now < at:
            return Decision(job, table, False, f"{len(failed)} failed run(s), last at {_at(last.ended)} "
                            f"({last.error}); retried from {_at(at)}", at, last)
        return Decision(job, table, True, f"retrying after {len(failed)} failed run(s) (backoff {wait})", now, last)
    since = f"last success {_at(ok.started)}" if ok else "no success yet"
    return Decision(job, table, True, f"{since}; due in the slot from {_at(slot)} (every {interval})", now, last)
