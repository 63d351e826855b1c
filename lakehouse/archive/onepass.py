"""The one-pass archive on Spark: one read of the days' rows (live rows taken, the days' archive
rows), one shuffle by day, one sort, and in the same tasks (``mapInArrow``) the archive's final
data files, their statistics, the vector files and the figures of the books (``archive.write``);
the driver collects one record per file and per day and side.

Each row carries its side of the books (``live``, ``kept``, ``replaced``: an archived row a live
row of the same key and day replaces, counted and not written) and its row hash over the recorded
columns (``ledger.row_hash_sql``, the one the books and ``verify`` use), computed in the same stage
as the read."""

from __future__ import annotations

import datetime as dt
import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse import crashpoints
from lakehouse.archive import ledger_table
from lakehouse.archive.ledger import Figures, stored_columns
from lakehouse.archive.order import archive_columns, row_order
from lakehouse.archive.plan import ArchivePlan
from lakehouse.archive.reader import current_encoding
from lakehouse.archive.stage import day_partitions, taken
from lakehouse.archive.write import (
    HASH_COLUMN,
    OUT_DDL,
    SIDE_COLUMN,
    WriteTask,
    file_of_run,
    write_days,
)
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.delta_log import NewFile
from lakehouse.physical import stats_columns
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def sided(spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan) -> DataFrame:
    """The days' rows, each with its side of the books and its row hash."""
    from pyspark.sql import functions as F

    d = definition
    cols = archive_columns(d)
    new, old = taken(spark, d, paths, plan)
    new = new.withColumn(SIDE_COLUMN, F.lit("live"))
    if d.has_key:
        keys = [*d.primary_key, PARTITION_COLUMN]
        marks = new.select(*keys).distinct().withColumn("_lh_replaced", F.lit(True))
        side = F.when(F.col("_lh_replaced"), F.lit("replaced")).otherwise(F.lit("kept"))
        old = old.join(marks, on=keys, how="left").select(*cols, side.alias(SIDE_COLUMN))
    else:
        old = old.withColumn(SIDE_COLUMN, F.lit("kept"))
    return old.unionByName(new).withColumn(HASH_COLUMN, ledger_table.hash_column(stored_columns(d)))


def write_task(definition: TableDefinition, paths: TablePaths, plan: ArchivePlan, run_id: str,
               fault: str | None = None, table_root: str | None = None, vectors_root: str | None = None) -> WriteTask:
    """What the run's tasks write, and where (the archive table's folder and the vector files' by
    default; elsewhere for comparisons)."""
    d = definition
    columns = tuple((c.name, c.type.arrow()) for c in d.columns) + ((LOAD_COLUMN, pa.string()),)
    sort = tuple((c, d.column(c).type.arrow()) for c in d.archive.sort_columns)
    plain: tuple[tuple[str, pa.DataType], ...] = ()
    if d.archive.vectors == "all":
        plain = tuple((c.name, c.type.arrow()) for c in d.columns if c.name not in d.archive.sort_columns)
    return WriteTask(table_root or paths.archive, vectors_root or paths.vectors, plan.cutoff, run_id, columns,
                     tuple(stats_columns(d)), sort, plain, encoding=current_encoding(d).key(),
                     driver_pid=os.getpid() if crashpoints.armed() else None,
                     fault_day=min(plan.days) if fault and plan.days else None, fault=fault)


def write_pass(spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan,
               task: WriteTask, rows: DataFrame | None = None) -> list[dict[str, Any]]:
    """Write the plan's days in one pass (their rows with sides and hashes: ``sided``'s by
    default); the records of every file and day (``write.OUT_SCHEMA``)."""
    from pyspark.sql import functions as F

    def work(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:  # the attempt's id: unique in the application (attemptNumber is per stage attempt)
            yield from write_days(task, batches, ctx.partitionId(), ctx.taskAttemptId())
        else:
            yield from write_days(task, batches, 0, uuid.uuid4().int % 1_000_000)

    df = ((sided(spark, definition, paths, plan) if rows is None else rows)
          .repartition(day_partitions(spark, plan), F.col(PARTITION_COLUMN))
          .sortWithinPartitions(*row_order(definition)))
    return [r.asDict() for r in df.mapInArrow(work, OUT_DDL).collect()]


@dataclass
class Written:
    """What a pass wrote: its data files, rows per day, vector files, and per day and side the
    figures of the books (``live``, ``kept``, ``replaced`` in; ``out``)."""

    files: list[NewFile] = field(default_factory=list)
    rows: dict[dt.date, int] = field(default_factory=dict)
    """Rows in the data files of each day (their footers' count, as the statistics say)."""
    vector_rows: dict[dt.date, int] = field(default_factory=dict)
    """Rows the vector files of each day hold (none without vector files)."""
    vector_files: int = 0
    figures: dict[dt.date, dict[str, Figures]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: list[dict[str, Any]]) -> Written:
        """The pass's records, gathered."""
        from lakehouse.archive.ledger import fold

        w = cls()
        for r in records:
            day = dt.date.fromisoformat(r["day"])
            if r["kind"] == "file":
                w.files.append(NewFile(r["path"], int(r["size"]), {PARTITION_COLUMN: r["day"]}, r["stats"],
                                       int(r["modified_ms"])))
                w.rows[day] = w.rows.get(day, 0) + int(r["rows"])
            elif r["kind"] == "vectors":
                w.vector_files += int(r["size"] or 0)
                if r["rows"] is not None:
                    w.vector_rows[day] = w.vector_rows.get(day, 0) + int(r["rows"])
            elif r["kind"] == "figures":
                sides = w.figures.setdefault(day, {})
                sides[r["side"]] = sides.get(r["side"], Figures()) + Figures(int(r["rows"]), fold(int(r["sum"])))
        w.files.sort(key=lambda f: f.path)
        return w


def read_written(spark: SparkSession, definition: TableDefinition, paths: TablePaths,
                 files: list[NewFile]) -> DataFrame:
    """The rows a pass wrote (not committed yet), with their day, as the quality gate reads them."""
    from lakehouse import storage

    return (spark.read.schema(definition.spark_ddl()).option("basePath", paths.archive)
            .parquet(*[storage.join(paths.archive, f.path) for f in files])
            .select(*archive_columns(definition)))


MARKER = "run.json"
"""In a one-pass run's staging folder (``_staging/archive-<cutoff>-<run id>``): the run's cutoff,
id and days, written before its first file. The folder goes at the run's end (``recover.clean``);
found later, it tells the next run's recovery which files a run that never committed left."""


def mark(staging: str, plan: ArchivePlan, run_id: str, erasure: int = 0) -> None:
    """Record the run (or the erasure ``erasure``'s rewrite) in its staging folder before it
    writes anything."""
    from lakehouse import storage

    doc = {"cutoff": plan.cutoff, "run_id": run_id, "days": [day.isoformat() for day in plan.days]}
    if erasure:
        doc["erasure"] = erasure
    storage.write_json(storage.join(staging, MARKER), doc)


def left_by(staging: str, paths: TablePaths, committed: int | None, erasures: int = 0) -> int:
    """A staging folder found by recovery: the data files of its one-pass run when that run
    certainly did not commit (its cutoff is above the archive's: cutoffs only grow; an erasure's
    number above the last the archive committed: numbers only grow), removed; files removed."""
    from lakehouse import storage

    try:
        doc = storage.read_json(storage.join(staging, MARKER))
    except FileNotFoundError:
        return 0
    if doc.get("erasure"):
        if int(doc["erasure"]) <= erasures and _committed_by(paths, int(doc["erasure"]), doc["run_id"]):
            return 0  # committed: its files are the day's (or history, for VACUUM)
    elif committed is not None and int(doc["cutoff"]) <= committed:
        # committed, or maybe committed and superseded since (a run that committed without its
        # clean-up, then a later run): its files are history; unreferenced ones go with VACUUM
        return 0
    return remove_written(paths, [dt.date.fromisoformat(x) for x in doc["days"]], int(doc["cutoff"]), doc["run_id"])


def _committed_by(paths: TablePaths, erasure: int, run_id: str) -> bool:
    """Whether the archive's commit of erasure ``erasure`` is the rewrite ``run_id``'s (not an
    earlier attempt's, killed before its commit, whose files nothing references); True when the
    commit cannot be read (its files are left to VACUUM)."""
    from lakehouse import delta_log
    from lakehouse.archive.ledger import parse_commit_info
    from lakehouse.archive.state import ERASURE_APP_ID

    info = delta_log.txn_commit_info(paths.archive, ERASURE_APP_ID, erasure)
    figures = parse_commit_info((info or {}).get("userMetadata"))
    return figures is None or figures.run_id == run_id


def remove_written(paths: TablePaths, days: list[dt.date], cutoff: int, run_id: str) -> int:
    """Remove the data files the run ``run_id`` of ``cutoff`` wrote into the archive's folders of
    ``days`` (its commit did not happen: nothing references them); files removed."""
    from lakehouse import storage

    removed = 0
    for day in days:
        folder = storage.join(paths.archive, f"{PARTITION_COLUMN}={day.isoformat()}")
        for name in storage.list_names(folder):
            if file_of_run(name, cutoff, run_id):
                removed += bool(storage.delete(storage.join(folder, name)))
    return removed
