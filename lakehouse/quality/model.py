"""What a quality check reports (GE expectations and built-in invariants alike)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckResult:
    """The outcome of one check: a GE expectation or a built-in invariant."""

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
        """The result as the contract's JSON shows it."""
        return {"name": self.name, "kind": self.kind, "ok": self.ok, "observed": self.observed,
                "unexpected_count": self.unexpected_count, "sample": self.sample, "detail": self.detail}


@dataclass
class Report:
    """One run of a table's checks (``lakehouse check``, or an archive run's gate): what ran on
    which rows and versions, each check's result, and where the Data Docs are."""

    table: str
    scope: str
    day: dt.date | None
    run_id: str
    at: dt.datetime
    checks: list[CheckResult] = field(default_factory=list)
    docs: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that failed."""
        return [c for c in self.checks if not c.ok]

    def as_dict(self) -> dict[str, Any]:
        """The report as the contract's JSON shows it."""
        return {"ok": self.ok, "table": self.table, "scope": self.scope, "day": self.day, "run_id": self.run_id,
                "docs": self.docs, **self.versions, "checks": [c.as_dict() for c in self.checks]}
