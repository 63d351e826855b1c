"""Durations as written in definitions: an integer with a unit (500ms, 90s, 10m, 24h, 2d)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True, order=True)
class Duration:
    """A non-negative span of time, kept in milliseconds, printed as written."""

    millis: int
    text: str = ""

    @classmethod
    def parse(cls, value: object) -> "Duration":
        """Parse ``<int><unit>``; raise ValueError naming what is wrong."""
        if isinstance(value, Duration):
            return value
        if not isinstance(value, str):
            raise ValueError(
                f"duration must be an integer with a unit (ms, s, m, h, d) such as '24h', got {value!r}"
            )
        m = _DURATION.fullmatch(value)
        if not m:
            raise ValueError(
                f"bad duration {value!r}: expected an integer with a unit (ms, s, m, h, d) such as '24h'"
            )
        return cls(int(m.group(1)) * _UNIT_MS[m.group(2)], value)

    @property
    def seconds(self) -> float:
        """The duration in seconds."""
        return self.millis / 1000

    def __str__(self) -> str:
        """The duration as written (``24h``), or in milliseconds when it was not written."""
        return self.text or f"{self.millis}ms"
