"""The data files of a Delta table at a version, per UTC day, from the Delta log (delta-rs; no
Spark, no data read): what compaction plans with and what it reports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lakehouse import delta_log
from lakehouse.definitions import PARTITION_COLUMN


@dataclass(frozen=True)
class DataFile:
    """One data file of a Delta table: its path (as the log names it), bytes, rows and day."""

    path: str
    size: int
    rows: int
    day: dt.date | None


@dataclass(frozen=True)
class Layout:
    """A table's data files at one version."""

    version: int | None
    files: tuple[DataFile, ...] = ()

    def by_day(self) -> dict[dt.date, list[DataFile]]:
        """The files of each day, days and files in order."""
        out: dict[dt.date, list[DataFile]] = {}
        for f in self.files:
            if f.day is not None:
                out.setdefault(f.day, []).append(f)
        return {d: sorted(fs, key=lambda f: f.path) for d, fs in sorted(out.items())}

    def totals(self, days: set[dt.date] | None = None) -> tuple[int, int, int]:
        """(files, bytes, rows), of some days or of the whole table."""
        fs = [f for f in self.files if days is None or f.day in days]
        return len(fs), sum(f.size for f in fs), sum(f.rows for f in fs)


def layout(path: str, version: int | None = None) -> Layout:
    """The data files of the Delta table at ``path`` (latest or a given version)."""
    if not delta_log.exists(path):
        return Layout(None)
    v = delta_log.version(path) if version is None else version
    assert v is not None
    actions = delta_log.add_actions(path, v)
    if actions.num_rows == 0:
        return Layout(v)
    part = f"partition.{PARTITION_COLUMN}"
    cols: dict[str, Any] = {c: actions.column(c).to_pylist() for c in ("path", "size_bytes", "num_records")}
    days = actions.column(part).to_pylist() if part in actions.column_names else [None] * actions.num_rows
    files = tuple(
        DataFile(p, int(s or 0), int(n or 0), d)
        for p, s, n, d in zip(cols["path"], cols["size_bytes"], cols["num_records"], days)
    )
    return Layout(v, files)
