"""Steps 2 and 3 of an archiving run: stage the days' merged rows, sorted, in the run's own
folder, then stream each staged day into its vector files (executors)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse import crashpoints, storage
from lakehouse.archive import vectors
from lakehouse.archive.encode import DayTask, encode_days
from lakehouse.archive.order import archive_columns, cutoff_column, days_predicate, row_order
from lakehouse.archive.plan import ArchivePlan, group_days, partition_count
from lakehouse.archive.reader import current_encoding
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.spark.session import parallelism
from lakehouse.spark.tasks import per_item
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_at(spark: SparkSession, path: str, version: int) -> DataFrame:
    """A Delta table as of ``version``."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def day_partitions(spark: SparkSession, plan: ArchivePlan) -> int:
    """How many Spark partitions the plan's days are spread over (a few, not one per day)."""
    return partition_count(plan.rows + plan.archive_rows_in_days, len(plan.days), parallelism(spark))


def taken(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan
) -> tuple[DataFrame, DataFrame]:
    """The live rows the run takes, and the days' archive rows at the plan's version."""
    from pyspark.sql import functions as F

    cols = archive_columns(definition)
    assert plan.live_version is not None and plan.archive_version is not None
    new = (
        read_at(spark, paths.live, plan.live_version)
        .where(days_predicate(sorted(plan.new_rows)))
        .where(F.col(definition.event_time) < cutoff_column(plan.cutoff))
        .select(*cols)
    )
    old = (
        read_at(spark, paths.archive, plan.archive_version)
        .where(days_predicate(plan.days))
        .select(*cols)
    )
    return new, old


def _merged(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan
) -> DataFrame:
    """The days' new batches: their archive rows and the live rows taken; with a key, the live
    version of a key replaces the archived one."""
    new, old = taken(spark, definition, paths, plan)
    if definition.has_key:
        keys = [*definition.primary_key, PARTITION_COLUMN]
        old = old.join(new.select(*keys), on=keys, how="left_anti").select(*archive_columns(definition))
    return old.unionByName(new)


def stage_days(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan, staging: str
) -> None:
    """Write the plan's days, merged and sorted, as Parquet partitioned by day to ``staging``."""
    from pyspark.sql import functions as F

    (
        _merged(spark, definition, paths, plan)
        .repartition(day_partitions(spark, plan), F.col(PARTITION_COLUMN))
        .sortWithinPartitions(*row_order(definition))
        .write.mode("error")
        .partitionBy(PARTITION_COLUMN)
        .parquet(staging)
    )


def staged_files(staging: str) -> dict[dt.date, list[str]]:
    """The staged Parquet files of each day, in name order."""
    import pyarrow.fs as pafs

    fs, root = storage.filesystem(staging)
    out: dict[dt.date, list[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        part = info.path.rsplit("/", 2)[-2]
        if not part.startswith(f"{PARTITION_COLUMN}="):
            continue
        day = dt.date.fromisoformat(part.split("=", 1)[1])
        out.setdefault(day, []).append(vectors.to_uri(staging, root, info.path))
    return {k: sorted(v) for k, v in out.items()}


def read_staged(spark: SparkSession, definition: TableDefinition, staging: str) -> DataFrame:
    """The staged batch as the commit writes it."""
    return (
        spark.read.schema(definition.spark_ddl())
        .option("basePath", staging)
        .parquet(staging)
        .select(*archive_columns(definition))
    )


def write_vectors(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan, staging: str
) -> tuple[int, dict[dt.date, int]]:
    """Encode the staged days into vector files; (files written, staged rows per day)."""
    d = definition
    sort_cols = tuple((c, d.column(c).type.arrow()) for c in d.archive.sort_columns)
    plain: tuple[tuple[str, pa.DataType], ...] = ()
    if d.archive.vectors == "all":
        plain = tuple(
            (c.name, c.type.arrow()) for c in d.columns if c.name not in d.archive.sort_columns
        )
    files = staged_files(staging)
    if not sort_cols and not plain:
        import pyarrow.parquet as pq

        counts: dict[dt.date, int] = {}
        for day, day_files in files.items():
            for path in day_files:
                fs, p = storage.filesystem(path)
                with fs.open_input_file(p) as f:
                    counts[day] = counts.get(day, 0) + pq.ParquetFile(f).metadata.num_rows
        return 0, counts
    missing = [day for day in plan.days if day not in files]
    if missing:
        raise LakehouseError(
            f"archive {d.name}: staged batch missing for {missing[0]} in {staging}; "
            "nothing was committed; run again"
        )
    pid = os.getpid() if crashpoints.armed() else None
    enc = current_encoding(d).key()
    tasks = {
        day: DayTask(day, tuple(files[day]), paths.vectors, plan.cutoff, sort_cols, plain, pid, enc)
        for day in files
    }
    weights = {day: plan.new_rows.get(day, 0) + plan.archive_rows.get(day, 0) for day in files}
    groups = [[tasks[day] for day in g] for g in group_days(weights, parallelism(spark))]
    done = per_item(spark, groups, _encoded, "day STRING, rows LONG, files LONG").collect()
    return (sum(int(r["files"]) for r in done),
            {dt.date.fromisoformat(r["day"]): int(r["rows"]) for r in done})


def _encoded(group: list[DayTask]) -> Iterator[pa.RecordBatch]:
    """A Spark task's work: encode its days; (day, rows, files) of each."""
    done = encode_days(group)
    yield pa.RecordBatch.from_pydict({"day": [d for d, _, _ in done], "rows": [r for _, r, _ in done],
                                      "files": [n for _, _, n in done]},
                                     schema=pa.schema([("day", pa.string()), ("rows", pa.int64()), ("files", pa.int64())]))
