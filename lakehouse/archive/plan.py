"""Planning an archiving run: the new cutoff and what it covers. Pure."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from lakehouse.durations import Duration

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


MIN_CUTOFF = (dt.datetime(1, 1, 1, tzinfo=UTC) - EPOCH) // dt.timedelta(seconds=1)
"""0001-01-01T00:00:00Z in epoch seconds (negative): the earliest cutoff there is."""
MAX_CUTOFF = (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - EPOCH) // dt.timedelta(seconds=1)


def new_cutoff(now: dt.datetime, delay: Duration) -> int:
    """C' = now - delay, in whole epoch seconds (rounded down; negative before 1970)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    since_epoch = now - EPOCH - dt.timedelta(milliseconds=delay.millis)
    cutoff = since_epoch // dt.timedelta(seconds=1)
    if cutoff < MIN_CUTOFF:
        from lakehouse.errors import LakehouseError

        raise LakehouseError(
            f"archive: now {now.isoformat()} minus the delay {delay} is before 0001-01-01; "
            "no cutoff can be that early (pass a later --now)"
        )
    return cutoff


def cutoff_time(cutoff: int) -> dt.datetime:
    """A cutoff as an aware UTC datetime (any cutoff of years 0001..9999, negative ones too)."""
    return EPOCH + dt.timedelta(seconds=int(cutoff))


def day_of(t: dt.datetime) -> dt.date:
    """The UTC day of an instant."""
    return (t.astimezone(UTC) if t.tzinfo else t).date()


@dataclass(frozen=True)
class ArchivePlan:
    """What one archiving run will do (``--dry-run`` prints it)."""

    table: str
    now: dt.datetime
    previous_cutoff: int | None
    cutoff: int
    """The new cutoff C' (epoch seconds)."""
    live_version: int | None
    """The live snapshot V the rows are taken from."""
    archive_version: int | None
    """The archive snapshot the day batches are merged with."""
    days: tuple[dt.date, ...] = ()
    """UTC days that get a new batch."""
    rows: int = 0
    """Live rows of snapshot V with event time < C'."""
    late_rows: int = 0
    """Of those, rows below the previous cutoff (arrived late)."""
    archive_rows_in_days: int = 0
    """Archive rows already in those days (merged with the new ones)."""
    notes: list[str] = field(default_factory=list)

    @property
    def advances(self) -> bool:
        """Whether the cutoff moves forward (otherwise the run does nothing)."""
        return self.previous_cutoff is None or self.cutoff > self.previous_cutoff

    def as_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "now": self.now,
            "previous_cutoff": self.previous_cutoff,
            "cutoff": self.cutoff,
            "advances": self.advances,
            "live_version": self.live_version,
            "archive_version": self.archive_version,
            "days": [d.isoformat() for d in self.days],
            "rows": self.rows,
            "late_rows": self.late_rows,
            "archive_rows_in_days": self.archive_rows_in_days,
            "notes": self.notes,
        }
