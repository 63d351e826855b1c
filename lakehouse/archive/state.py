"""The archive cutoff as committed in the archive table's Delta log.

Each archiving run commits its cutoff C' as a Delta SetTransaction (app id ``lakehouse.cutoff``,
version C') in the same commit as its day batches, so the cutoff is visible exactly when the
data it describes is. It is kept in checkpoints, readable by Spark (the Delta log's snapshot)
and without Spark (delta-rs ``transaction_version``), and Delta refuses a write whose version
is not above the recorded one, so replaying a run cannot move the cutoff back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from lakehouse import delta_log
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.errors import TableNotFound

CUTOFF_APP_ID = "lakehouse.cutoff"
ERASURE_APP_ID = "lakehouse.erasure"
"""The SetTransaction app id of an erasure's commits (version: the erasure's number): in the
archive, the generation of the vector files of the days it rewrote."""
PURGE_APP_ID = "lakehouse.purge"
"""The SetTransaction of a purge's marker commit, where a table's history now starts (version:
the number of the erasure purged)."""


@dataclass(frozen=True)
class Snapshot:
    """A Delta table version, the archive cutoff committed at that version and the number of the
    last erasure committed there (0: none)."""

    version: int
    cutoff: int | None
    erasures: int = 0

    @property
    def run(self) -> tuple[int, int] | None:
        """The committed run the vector files are read by: (cutoff, erasures); None before any."""
        from lakehouse.archive.vectors import run_of

        return run_of(self.cutoff, self.erasures)


def read_snapshot(path: str, version: int | None = None) -> Snapshot | None:
    """The latest (or a given) version of a Delta table, its cutoff and its erasures, with delta-rs."""
    snap = delta_log.snapshot(path, CUTOFF_APP_ID, version, more=(ERASURE_APP_ID,))  # one read of the log
    if snap is None:
        return None
    return Snapshot(snap.version, snap.txn, snap.more.get(ERASURE_APP_ID) or 0)


def day_rows(path: str, version: int | None) -> dict[dt.date, int]:
    """Rows per day of a Delta table at a version, from its log (no data read)."""
    if version is None:
        return {}
    actions = delta_log.add_actions(path, version)
    out: dict[dt.date, int] = {}
    if actions.num_rows == 0:
        return out
    for day, n in zip(
        actions.column(f"partition.{PARTITION_COLUMN}").to_pylist(),
        actions.column("num_records").to_pylist(),
        strict=True,
    ):
        out[day] = out.get(day, 0) + int(n or 0)
    return out


def current_snapshot(path: str) -> Snapshot:
    """The latest version of a Delta table and its cutoff, read from its log as the next commit
    will see it (delta-rs: any kind of Spark session, or none)."""
    snap = read_snapshot(path)
    if snap is None:
        raise TableNotFound(f"no Delta table at {path}; run `lakehouse migrate`")
    return snap


@dataclass(frozen=True)
class CutoffCommit:
    """An archive commit that moved the cutoff: when (Delta's commit timestamp) and to what."""

    version: int
    at_ms: int
    cutoff: int


def cutoff_history(path: str) -> list[CutoffCommit]:
    """The archive commits that moved the cutoff, oldest first, as far back as the Delta log
    goes (no Spark): each run's SetTransaction read from its commit file, timestamps as
    ``--as-of`` sees them. When older commit files were cleaned up, the first entry is the
    oldest readable version with the cutoff its checkpoint holds."""
    found = delta_log.commits(path)
    if not found:
        return []
    out = [CutoffCommit(c.version, c.ms, c.txn) for c in delta_log.txn_commits(path, CUTOFF_APP_ID, found)]
    first = found[0]
    if first.version > 0:  # older commits were cleaned up: the cutoff as of the oldest readable version
        start = read_snapshot(path, first.version)
        if start is not None and start.cutoff is not None and (not out or out[0].cutoff > start.cutoff):
            out.insert(0, CutoffCommit(first.version, first.ms, start.cutoff))
    return out
