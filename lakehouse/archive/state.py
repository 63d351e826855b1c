"""The archive cutoff as committed in the archive table's Delta log, and what else archiving
reads from a Delta log: its versions with their commit times, and the rows per day of a version.

Each archiving run commits its cutoff C' as a Delta SetTransaction (app id ``lakehouse.cutoff``,
version C') in the same commit as its day batches, so the cutoff is visible exactly when the
data it describes is. It is kept in checkpoints, readable by Spark (the Delta log's snapshot)
and without Spark (delta-rs ``transaction_version``), and Delta refuses a write whose version
is not above the recorded one, so replaying a run cannot move the cutoff back.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.warehouse import delta_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CUTOFF_APP_ID = "lakehouse.cutoff"
"""The SetTransaction app id whose version is the archive's committed cutoff."""
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]*)?\.(parquet|json)$")  # classic, multi-part, v2


@dataclass(frozen=True)
class Snapshot:
    """A Delta table version and the archive cutoff committed at that version."""

    version: int
    cutoff: int | None


def read_snapshot(path: str, version: int | None = None) -> Snapshot | None:
    """The latest (or a given) version of a Delta table and its cutoff, with delta-rs."""
    if not delta_exists(path):
        return None
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version, without_files=True)
    v = table.transaction_version(CUTOFF_APP_ID)
    return Snapshot(int(table.version()), None if v is None else int(v))


def spark_snapshot(spark: "SparkSession", path: str) -> Snapshot:
    """The latest version of a Delta table and its cutoff, from Spark's Delta log."""
    jvm: Any = spark.sparkContext._jvm  # type: ignore[attr-defined]
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)  # type: ignore[attr-defined]
    snap = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    txn = snap.transactions().get(CUTOFF_APP_ID)
    cutoff = int(txn.get()) if txn.isDefined() else None
    return Snapshot(int(snap.version()), cutoff)


def day_rows(path: str, version: int | None) -> dict[dt.date, int]:
    """Rows per day of a Delta table at a version, from its log (no data read)."""
    if version is None:
        return {}
    import pyarrow as pa
    from deltalake import DeltaTable

    from lakehouse.definitions import PARTITION_COLUMN

    actions = pa.table(DeltaTable(path, version=version).get_add_actions(flatten=True))
    out: dict[dt.date, int] = {}
    if actions.num_rows == 0:
        return out
    for day, n in zip(
        actions.column(f"partition.{PARTITION_COLUMN}").to_pylist(),
        actions.column("num_records").to_pylist(),
    ):
        out[day] = out.get(day, 0) + int(n or 0)
    return out


@dataclass(frozen=True)
class Commit:
    """A readable version of a Delta table and its commit timestamp (milliseconds)."""

    version: int
    ms: int

    @property
    def at(self) -> dt.datetime:
        """The commit timestamp as a UTC datetime."""
        return dt.datetime.fromtimestamp(self.ms / 1000, dt.timezone.utc).replace(
            microsecond=(self.ms % 1000) * 1000
        )


def commits(path: str) -> list[Commit]:
    """The versions of a Delta table its log can still rebuild, oldest first, with Delta's commit
    timestamps (commit file modification times, made strictly increasing)."""
    import pyarrow.fs as pafs

    from lakehouse.archive.vectors import filesystem
    from lakehouse.warehouse import join

    fs, root = filesystem(join(path, "_delta_log"))
    found: dict[int, int] = {}
    checkpoints = []
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        m = _COMMIT.match(info.base_name)
        if m and info.mtime_ns is not None:
            found[int(m.group(1))] = info.mtime_ns // 1_000_000
        m = _CHECKPOINT.match(info.base_name)
        if m:
            checkpoints.append(int(m.group(1)))
    out, prev = [], None
    for v in sorted(found):
        ms = found[v] if prev is None or found[v] > prev else prev + 1
        out.append(Commit(v, ms))
        prev = ms
    # Without commit 0 the log starts at its oldest checkpoint (older commits were cleaned up).
    start = 0 if 0 in found else min(checkpoints, default=None)
    if start is None:
        return []
    return [c for c in out if c.version >= start]


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
    import json

    from lakehouse.archive.vectors import filesystem
    from lakehouse.warehouse import join

    found = commits(path)
    if not found:
        return []
    fs, root = filesystem(join(path, "_delta_log"))
    out: list[CutoffCommit] = []
    for c in found:
        try:
            with fs.open_input_stream(f"{root}/{c.version:020d}.json") as f:
                text = f.read().decode("utf-8")
        except (FileNotFoundError, OSError):
            continue  # only in a checkpoint now (the commit file was cleaned up)
        for line in text.splitlines():
            if '"txn"' not in line:
                continue
            txn = json.loads(line).get("txn") or {}
            if txn.get("appId") == CUTOFF_APP_ID and (not out or int(txn["version"]) > out[-1].cutoff):
                out.append(CutoffCommit(c.version, c.ms, int(txn["version"])))
    first = found[0]
    if first.version > 0:  # older commits were cleaned up: the cutoff as of the oldest readable version
        start = read_snapshot(path, first.version)
        if start is not None and start.cutoff is not None and (not out or out[0].cutoff > start.cutoff):
            out.insert(0, CutoffCommit(first.version, first.ms, start.cutoff))
    return out
