"""The one-pass archive on Spark: one read of the days' rows (live rows taken, the days' archive
rows), one shuffle by day, one sort, and in the same tasks (``mapInArrow``) the archive's final
data files, their statistics, the vector files and the figures of the books (``archive.write``);
the driver collects one record per file and per day and side.

Each row carries its side of the books (``live``, ``kept``, ``replaced``: an archived row a live
row of the same key and day replaces, counted and not written) and its row hash over the recorded
columns (``ledger.row_hash_sql``, the one the books and ``verify`` use), computed in the same stage
as the read."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse import crashpoints
from lakehouse.archive import ledger_table
from lakehouse.archive.ledger import stored_columns
from lakehouse.archive.order import archive_columns, row_order
from lakehouse.archive.plan import ArchivePlan
from lakehouse.archive.reader import current_encoding
from lakehouse.archive.stage import day_partitions, taken
from lakehouse.archive.write import HASH_COLUMN, OUT_DDL, SIDE_COLUMN, WriteTask, write_days
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.physical import stats_columns
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
               task: WriteTask) -> list[dict[str, Any]]:
    """Write the plan's days in one pass; the records of every file and day (``write.OUT_SCHEMA``)."""
    from pyspark.sql import functions as F

    def work(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task_id = f"{ctx.partitionId():05d}-{ctx.attemptNumber()}" if ctx is not None else uuid.uuid4().hex[:8]
        yield from write_days(task, batches, task_id)

    df = (sided(spark, definition, paths, plan)
          .repartition(day_partitions(spark, plan), F.col(PARTITION_COLUMN))
          .sortWithinPartitions(*row_order(definition)))
    return [r.asDict() for r in df.mapInArrow(work, OUT_DDL).collect()]
