"""The ``archive:`` section of a table definition: when and how live rows move to the archive."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from lakehouse.definitions.fields import Strict
from lakehouse.durations import Duration


class ArchiveSettings(Strict):
    """When and how live rows move to the archive."""

    delay: Duration = Duration.parse("24h")
    """Rows older than now - delay are archived."""
    interval: Duration = Duration.parse("2h")
    """How often the scheduled archive job runs."""
    sort_columns: tuple[str, ...] = ()
    """Archive sort order (low cardinality first); then event time, then primary key."""
    vectors: Literal["all", "sort_columns"] = "all"
    """Which columns get vector files."""
    clock: Literal["now", "bound"] = "now"
    """What the cutoff follows: ``now`` (cutoff = now - delay) or ``bound`` (cutoff =
    min(now, the table's watermark) - delay, so a day is never sealed while an attached producer
    may still write into it)."""
    checks: Literal["off", "before_commit"] = "off"
    """``before_commit``: run the table's quality checks on the staged day batches before the
    archive commit; a failing check refuses the commit (the live rows stay where they are)."""

    @field_validator("delay", "interval", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Duration:
        return Duration.parse(v)

    @field_validator("sort_columns", mode="before")
    @classmethod
    def _list(cls, v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"must be a list of column names, got {v!r}")
        return v

    def as_properties(self) -> dict[str, str]:
        """The settings as Delta table properties (recorded by migrations, checked for drift)."""
        return {
            "lakehouse.archive.delay": str(self.delay),
            "lakehouse.archive.interval": str(self.interval),
            "lakehouse.archive.sort_columns": ",".join(self.sort_columns),
            "lakehouse.archive.vectors": self.vectors,
        }
