"""The ``stream:`` section of a table definition: producers, rowtime bounds and their lease."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from lakehouse.definitions.fields import Strict
from lakehouse.durations import Duration


class StreamSettings(Strict):
    """How producers write the table through rowtime bounds (the ``stream:`` section)."""

    allowed_lateness: Duration | None = None
    """How far below max(stream bound, producer bound) a row may be and still be taken; None
    (``unbounded``, the default) rejects nothing for time; ``0`` gives strict bounds."""
    lease: Duration = Duration.parse("5m")
    """A producer that neither inserts, asserts a bound nor heartbeats for this long stops
    holding the watermark back (its lease expires)."""

    @field_validator("allowed_lateness", mode="before")
    @classmethod
    def _lateness(cls, v: Any) -> Duration | None:
        if v is None or v == "unbounded":
            return None
        if not isinstance(v, bool) and (v == 0 or v == "0") and not isinstance(v, float):
            return Duration(0, "0")
        try:
            return Duration.parse(v)
        except ValueError:
            raise ValueError(f"expected 'unbounded', 0 or a duration such as '5m', got {v!r}") from None

    @field_validator("lease", mode="before")
    @classmethod
    def _lease(cls, v: Any) -> Duration:
        d = Duration.parse(v)
        if d.millis < 1:
            raise ValueError(f"must be longer than 0, got {v!r}")
        return d
