"""The archive cutoff as committed in the archive table's Delta log.

Each archiving run commits its cutoff C' as a Delta SetTransaction (app id ``lakehouse.cutoff``,
version C') in the same commit as its day batches, so the cutoff is visible exactly when the
data it describes is. It is kept in checkpoints, readable by Spark (the Delta log's snapshot)
and without Spark (delta-rs ``transaction_version``), and Delta refuses a write whose version
is not above the recorded one, so replaying a run cannot move the cutoff back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.warehouse import delta_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CUTOFF_APP_ID = "lakehouse.cutoff"


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

    dt = DeltaTable(path, version=version, without_files=True)
    v = dt.transaction_version(CUTOFF_APP_ID)
    return Snapshot(int(dt.version()), None if v is None else int(v))


def spark_snapshot(spark: "SparkSession", path: str) -> Snapshot:
    """The latest version of a Delta table and its cutoff, from Spark's Delta log."""
    jvm: Any = spark.sparkContext._jvm  # type: ignore[attr-defined]
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)  # type: ignore[attr-defined]
    snap = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    txn = snap.transactions().get(CUTOFF_APP_ID)
    cutoff = int(txn.get()) if txn.isDefined() else None
    return Snapshot(int(snap.version()), cutoff)


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
    from lakehouse.query.asof import commits
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


# -- the outcome of the last runs, for ``lakehouse tables`` ------------------------------------------

STATUS_FILE = "archive-status.json"


def status_path(root: str) -> str:
    """``<warehouse>/<table>/_state/archive-status.json``."""
    from lakehouse.warehouse import join

    return join(root, "_state", STATUS_FILE)


def read_status(root: str) -> dict | None:
    """The recorded outcome of the table's archiving runs (None when never recorded)."""
    import json

    from lakehouse.archive.vectors import filesystem

    fs, p = filesystem(status_path(root))
    try:
        with fs.open_input_stream(p) as f:
            return json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return None
    except OSError as e:  # some filesystems raise OSError for a missing file
        if "not found" in str(e).lower() or "no such file" in str(e).lower():
            return None
        raise


def write_status(root: str, doc: dict) -> None:
    """Record the outcome atomically (a temporary file, then a rename)."""
    import json
    import uuid

    from lakehouse.archive.vectors import filesystem

    fs, p = filesystem(status_path(root))
    fs.create_dir(p.rsplit("/", 1)[0], recursive=True)
    tmp = f"{p}.{uuid.uuid4().hex[:8]}.tmp"
    with fs.open_output_stream(tmp) as f:
        f.write(json.dumps(doc, default=str, sort_keys=True).encode())
    fs.move(tmp, p)
