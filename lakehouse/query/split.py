"""THE split view of a table, as one spec that each engine renders (query/spark.py, query/duckdb.py).

    view(t) = ARCHIVE@a  UNION ALL  (LIVE@l WHERE event_date >= day(cutoff) AND event_time >= cutoff)

``a`` and ``l`` are pinned Delta versions, and the cutoff is the one committed at archive version
``a`` (no cutoff yet: all of live). The columns are the table definition's visible columns in
their order; a column the definition has but a pinned version does not (added later by
``ctx.add_columns``, as seen by ``--as-of`` an earlier moment) is a typed NULL, just as Delta
shows old files under the newer schema. The day term only lets the engines prune live's days;
the event-time term decides.

Which versions to pin: the current ones (live first, then archive: see lakehouse.query) or those
of a moment (lakehouse.query.asof). Pure: no engine here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from lakehouse.archive.state import Snapshot
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.query import TableSource
from lakehouse.types import ColumnType


@dataclass(frozen=True)
class Split:
    """A table's split view on pinned live and archive snapshots."""

    source: TableSource
    live: Snapshot
    archive: Snapshot
    live_absent: frozenset[str] = frozenset()
    """Visible columns the pinned live version does not have (rendered as typed NULLs)."""
    archive_absent: frozenset[str] = frozenset()
    """Visible columns the pinned archive version does not have (rendered as typed NULLs)."""

    @property
    def name(self) -> str:
        """The table's name (the view's)."""
        return self.source.name

    @property
    def columns(self) -> list[str]:
        """The view's columns: the definition's visible columns, in order."""
        return self.source.definition.visible_columns

    @property
    def event_time(self) -> str:
        """The table's event-time column."""
        return self.source.definition.event_time

    @property
    def cutoff(self) -> int | None:
        """The cutoff committed at the pinned archive version (epoch seconds; None before any)."""
        return self.archive.cutoff

    @property
    def cutoff_time(self) -> dt.datetime | None:
        """The cutoff as a UTC datetime (None before any)."""
        from lakehouse.archive.plan import cutoff_time

        return None if self.cutoff is None else cutoff_time(self.cutoff)

    @property
    def cutoff_day(self) -> dt.date | None:
        """The UTC day of the cutoff: live days before it hold no visible row (None before any)."""
        t = self.cutoff_time
        return None if t is None else t.date()

    def column_type(self, column: str) -> ColumnType:
        """The type of a visible column (or of the partition column) from the definition."""
        if column == PARTITION_COLUMN:
            return ColumnType("date")
        return next(c.type for c in self.source.definition.columns if c.name == column)


def current(t: TableSource) -> Split:
    """The split view on the tables' latest versions, read with delta-rs (live first)."""
    from lakehouse.archive.state import read_snapshot

    live = read_snapshot(t.paths.live)
    archive = read_snapshot(t.paths.archive)
    assert live is not None and archive is not None
    return Split(t, live, archive)
