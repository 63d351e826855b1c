"""Time: the epoch, instants as integers (micro- and milliseconds since it), and their spelling.

Every instant lakehouse stores or compares is UTC. A naive datetime is taken as UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import overload

# the contract's one spelling of an instant lives in output (the bottom layer); importable from here too
from lakehouse.output import format_timestamp as format_timestamp

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
"""1970-01-01T00:00:00Z: instants before it are negative numbers."""


def aware(t: dt.datetime) -> dt.datetime:
    """``t`` as an aware UTC datetime (a naive one is taken as UTC)."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def micros(t: dt.datetime) -> int:
    """Microseconds since the epoch (negative before 1970)."""
    return (aware(t) - EPOCH) // dt.timedelta(microseconds=1)


def millis(t: dt.datetime) -> int:
    """Milliseconds since the epoch, rounded down (negative before 1970)."""
    return (aware(t) - EPOCH) // dt.timedelta(milliseconds=1)


def seconds(t: dt.datetime) -> int:
    """Whole seconds since the epoch, rounded down (negative before 1970)."""
    return (aware(t) - EPOCH) // dt.timedelta(seconds=1)


@overload
def from_micros(us: int) -> dt.datetime: ...
@overload
def from_micros(us: None) -> None: ...
def from_micros(us: int | None) -> dt.datetime | None:
    """The instant ``us`` microseconds after the epoch (None stays None)."""
    return None if us is None else EPOCH + dt.timedelta(microseconds=int(us))


def from_millis(ms: int) -> dt.datetime:
    """The instant ``ms`` milliseconds after the epoch."""
    return EPOCH + dt.timedelta(milliseconds=int(ms))


def from_seconds(s: int | float) -> dt.datetime:
    """The instant ``s`` seconds after the epoch (any year 0001..9999, negative ones too)."""
    return EPOCH + dt.timedelta(seconds=s)


def iso_z(t: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``: an instant to the second, as logs and messages show it."""
    t = aware(t)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def iso_seconds(epoch_seconds: float) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of an epoch time in seconds (a lease's expiry)."""
    return iso_z(from_seconds(epoch_seconds))
