"""The ``ingest:`` section of a table definition: how ``lakehouse ingest`` takes files from a
landing directory."""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import field_validator

from lakehouse.definitions.fields import Strict, parse_size, positive_int
from lakehouse.durations import Duration

SortField = Literal["TIME_IN_FILENAME", "MODIFIED_FILE_TIME"]
"""Where a file's implied time comes from: a time in its name, or its last change."""
SORT_FIELDS: tuple[str, ...] = get_args(SortField)
"""The values ``ingest.sort_field`` may take."""


class FilenameTime(Strict):
    """How to read a file's implied time from its name."""

    regex: str
    """A regular expression searched in the file name; its first group holds the time."""
    format: str
    """The ``strptime`` format of that group (UTC), e.g. ``%Y%m%dT%H%M``."""

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            compiled = re.compile(v)
        except re.error as e:
            raise ValueError(f"bad regular expression {v!r}: {e}") from None
        if compiled.groups < 1:
            raise ValueError(f"regular expression {v!r} needs a group around the time, e.g. 'trips_(\\d{{8}})'")
        return v

    @field_validator("format")
    @classmethod
    def _format(cls, v: str) -> str:
        if "%" not in v:
            raise ValueError(f"bad time format {v!r}: expected strptime directives such as '%Y%m%dT%H%M'")
        return v


class IngestSettings(Strict):
    """How ``lakehouse ingest`` takes files from a landing directory (the ``ingest:`` section)."""

    format: Literal["csv", "json", "parquet"] | None = None
    """Input format; by default from each file's extension (.gz accepted for csv and json)."""
    pattern: str | None = None
    """Regular expression matched against file names; other files are ignored (default: all)."""
    sort_field: SortField = "MODIFIED_FILE_TIME"
    """Where a file's implied time comes from."""
    filename_time: FilenameTime | None = None
    """Required with TIME_IN_FILENAME."""
    ingress_delay_interval: Duration = Duration(0, "0")
    """Hold-back window of the file T-sort; 0 = strict order; -1 = no ordering (files in the
    order found, nothing is late)."""
    ingress_file_scan_wait: Duration = Duration.parse("2s")
    """Pause between scans in --watch mode; also how long a new file must stay unchanged."""
    min_file_age: Duration | None = None
    """A file whose last change is at least this old counts as complete at once (without it, a
    file is complete once its size and mtime did not change between two scans)."""
    block_size: int = 64 << 20
    """Files larger than this are parsed by several Spark tasks, one per block (bytes)."""
    blocks_per_batch: int = 16
    """At most this many blocks per commit (a bigger file is a batch of its own)."""
    late_folder: str | None = None
    """A folder (inside the source directory) late files are moved to; by default they stay."""
    max_record_bytes: int = 16 << 20
    """The longest record (bytes) read; a longer one is a reject, skipped without being held."""
    follow_symlinks: bool = False
    """Whether a symlink in a landing directory may point outside it (by default such a file is
    ``failed``, so a landing directory cannot be used to read other files)."""

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"bad regular expression {v!r}: {e}") from None
        return v

    @field_validator("ingress_delay_interval", mode="before")
    @classmethod
    def _delay(cls, v: Any) -> Duration:
        if isinstance(v, Duration):
            return v
        if isinstance(v, (bool, float)):
            raise ValueError(f"expected a duration such as '10m', 0 (strict order) or -1 (no ordering), got {v!r}")
        if v == -1 or v == "-1":
            return Duration(-1, "-1")
        if v == 0 or v == "0":
            return Duration(0, "0")
        try:
            return Duration.parse(v)
        except ValueError:
            raise ValueError(f"expected a duration such as '10m', 0 (strict order) or -1 (no ordering), got {v!r}") from None

    @field_validator("ingress_file_scan_wait", "min_file_age", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Duration | None:
        if v is None:
            return None
        if not isinstance(v, bool) and (v == 0 or v == "0") and not isinstance(v, float):
            return Duration(0, "0")
        return Duration.parse(v)

    @field_validator("block_size", "max_record_bytes", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        return parse_size(v)

    @field_validator("follow_symlinks", mode="before")
    @classmethod
    def _bool(cls, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, got {v!r}")
        return v

    @field_validator("blocks_per_batch", mode="before")
    @classmethod
    def _blocks(cls, v: Any) -> int:
        return positive_int(v)

    @field_validator("late_folder")
    @classmethod
    def _late_folder(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v or "\\" in v or v in (".", "..")):
            raise ValueError(f"must be a plain folder name inside the source directory, got {v!r}")
        return v

    @property
    def ordered(self) -> bool:
        """False with ingress_delay_interval -1 (files are taken as found)."""
        return self.ingress_delay_interval.millis >= 0
