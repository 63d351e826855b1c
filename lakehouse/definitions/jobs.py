"""The ``jobs:`` section of a table definition: the table's scheduled maintenance."""

from __future__ import annotations

from typing import Any, cast

from pydantic import field_validator

from lakehouse.definitions.fields import Strict, parse_size, positive_int
from lakehouse.durations import Duration


class JobsSettings(Strict):
    """The table's scheduled maintenance (the ``jobs:`` section); archiving runs every
    ``archive.interval``. An interval of ``off`` turns a job off."""

    compact_live: Duration | None = Duration.parse("1h")
    """How often live's small files are bin-packed (Delta OPTIMIZE on partitions with more than
    ``compact_min_files`` small files)."""
    compact_archive: Duration | None = Duration.parse("1d")
    """How often archive days are rewritten into files of ``target_file_size`` in their sorted
    order (vector files stay valid)."""
    vacuum: Duration | None = Duration.parse("1d")
    """How often files no snapshot within ``retention`` reads are deleted."""
    retention: Duration = Duration.parse("7d")
    """How long removed files stay readable (time travel, long queries): recorded as the Delta
    tables' ``delta.deletedFileRetentionDuration``; VACUUM keeps at least this much."""
    target_file_size: int = 128 << 20
    """Compaction writes files of about this size (bytes, or '128MB')."""
    compact_min_files: int = 8
    """A live partition is compacted when it has more than this many small files (smaller than
    half the target size)."""

    @field_validator("compact_live", "compact_archive", "vacuum", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> Duration | None:
        if v is None or v is False or v == "off":
            return None
        d = Duration.parse(v)
        if d.millis < 1000:
            raise ValueError(f"must be at least 1s, or 'off', got {v!r}")
        return d

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, v: Any) -> Duration:
        d = Duration.parse(v)
        if d.millis < 1000:
            raise ValueError(f"must be at least 1s, got {v!r}")
        return d

    @field_validator("target_file_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        n = parse_size(v)
        if n < 1024:
            raise ValueError(f"must be at least 1KB, got {v!r}")
        return n

    @field_validator("compact_min_files", mode="before")
    @classmethod
    def _min_files(cls, v: Any) -> int:
        return positive_int(v)

    def interval(self, job: str) -> Duration | None:
        """The interval of a maintenance job by its name (None: off)."""
        return cast(Duration | None, getattr(self, job))
