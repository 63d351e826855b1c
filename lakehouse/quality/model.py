"""What a quality check reports (GE expectations and built-in invariants alike)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckResult:
    name: str
    """``expect_column_values_to_be_between(fare_total)`` or the invariant's name."""
    kind: str
    """``expectation`` (from the quality: section) or ``invariant`` (built in)."""
    ok: bool
    observed: Any = None
    unexpected_count: int | None = None
    sample: list[Any] = field(default_factory=list)
    """A few offending values or rows (keys where the table has a primary key)."""
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ok": self.ok, "observed": self.observed,
                "unexpected_count": self.unexpected_count, "sample": self.sample, "detail": self.detail}
