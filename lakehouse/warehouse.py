"""Paths and light-weight (Spark-free) handles of a warehouse's tables.

Layout (fixed by the contract so that any engine can read it)::

    <warehouse>/<table>/live/        Delta, partitioned by event_date
    <warehouse>/<table>/archive/     Delta, partitioned by event_date
    <warehouse>/<table>/vectors/     vector files (archiving)
    <warehouse>/<table>/rejects/     Delta: rejected rows and files with reasons
    <warehouse>/<table>/_staging/    parsed input waiting for its commit (transient)
    <warehouse>/<table>/_ledger/     Delta: the archive's books, one row per archiving run and day
    <warehouse>/_lakehouse/migrations/   Delta: applied migrations with checksums
    <warehouse>/_lakehouse/jobs/         Delta: the jobs history (every attempt of every job)
    <warehouse>/_quality/results/        Delta: every quality check result (lakehouse check)
    <warehouse>/_quality/docs/           Great Expectations' Data Docs (index.html)
    <warehouse>/_quality/gx/             Great Expectations' project: suites, validation results
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.settings import is_local

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class TablePaths:
    """Where one table's parts live in the warehouse."""

    warehouse: str
    name: str

    @property
    def root(self) -> str:
        return join(self.warehouse, self.name)

    @property
    def live(self) -> str:
        return join(self.root, "live")

    @property
    def archive(self) -> str:
        return join(self.root, "archive")

    @property
    def vectors(self) -> str:
        return join(self.root, "vectors")

    @property
    def rejects(self) -> str:
        return join(self.root, "rejects")

    @property
    def staging(self) -> str:
        return join(self.root, "_staging")

    @property
    def ledger(self) -> str:
        return join(self.root, "_ledger")


def join(base: str, *parts: str) -> str:
    """Join path segments for local paths and URIs alike."""
    return "/".join([base.rstrip("/"), *parts])


def history_path(warehouse: str) -> str:
    """The Delta table that records applied migrations."""
    return join(warehouse, "_lakehouse", "migrations")


def delta_exists(path: str) -> bool:
    """True when ``path`` holds a Delta table (checked without Spark)."""
    if is_local(path):
        log = Path(path) / "_delta_log"
        if (log / "_last_checkpoint").is_file():  # a checkpoint: no need to list a long log
            return True
        try:
            with os.scandir(log) as entries:  # stops at the first commit file
                return any(e.name.endswith(".json") for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            return False
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(path)


def open_delta(path: str) -> Any:
    """A delta-rs handle on a Delta table (reads metadata and data without Spark)."""
    from deltalake import DeltaTable

    return DeltaTable(path)


def txn_version(path: str, app_id: str) -> int | None:
    """The latest SetTransaction version of ``app_id`` in a Delta table (delta-rs, no Spark)."""
    if not delta_exists(path):
        return None
    from deltalake import DeltaTable

    v = DeltaTable(path, without_files=True).transaction_version(app_id)
    return None if v is None else int(v)


def scan(path: str, sql: str = "SELECT * FROM t", version: int | None = None) -> "pa.Table":
    """Run SQL over one Delta table, registered as ``t``, with delta-rs's own engine (no Spark).

    Data is never read through ``DeltaTable.to_pyarrow_dataset()``: a pyarrow dataset scan over
    delta-rs's filesystem leaves threads behind that abort the interpreter at exit ("terminate
    called without an active exception", delta-io/delta-rs#2184) in about half of all runs.
    """
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all())


def append_records(path: str, table: "pa.Table", attempts: int = 10) -> None:
    """Append a few records to a small Delta table of the warehouse (the jobs history, quality
    results), creating it on first use; delta-rs retries a commit that races another writer's."""
    import time

    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        try:
            write_deltalake(path, table, mode="append", schema_mode="merge")
            return
        except CommitFailedError:  # raced another process's append: try again
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def remove_tree(path: str) -> None:
    """Delete a folder of the warehouse (local only; object stores go through Spark's FS)."""
    if is_local(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    from lakehouse.session import get_spark

    spark = get_spark()
    jvm: Any = spark.sparkContext._jvm  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    fs.delete(hpath, True)


def row_count(path: str) -> int:
    """Rows in a Delta table from its log statistics (no data files are read)."""
    if not delta_exists(path):
        return 0
    dt = open_delta(path)
    actions = dt.get_add_actions(flatten=True)
    col = actions.column("num_records") if "num_records" in actions.column_names else None
    counts = col.to_pylist() if col is not None else [None]
    if any(v is None for v in counts):  # a writer that kept no statistics: count the data
        return int(scan(path, "SELECT count(*) AS n FROM t").column("n")[0].as_py())
    return int(sum(counts))


def write_json(path: str, doc: Any) -> None:
    """Replace a local JSON file atomically and durably: a temporary file, fsync, rename, and
    fsync of the folder (a crash leaves the old document or the new one, never a mix)."""
    import contextlib
    import json
    import os

    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
