"""The data files of a Delta table at a version, per UTC day, from the Delta log (delta-rs; no
Spark, no data read): what compaction plans with and what it reports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.warehouse import delta_exists


@dataclass(frozen=True)
class DataFile:
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
    if not delta_exists(path):
        return Layout(None)
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)
    actions = pa.table(table.get_add_actions(flatten=True))
    v = int(table.version())
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


def disk_usage(root: str) -> tuple[int, int]:
    """(files, bytes) under a local folder (0, 0 when absent)."""
    import contextlib
    import os

    files = size = 0
    for folder, _, names in os.walk(root):
        for n in names:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(folder, n))
                files += 1
    return files, size
