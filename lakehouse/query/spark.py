"""Running SQL on Spark with every table registered as a temporary split view."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.archive.plan import cutoff_time
from lakehouse.archive.state import Snapshot, spark_snapshot
from lakehouse.errors import QueryError
from lakehouse.query import TableSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def split_frame(spark: "SparkSession", t: TableSource, live: Snapshot | None = None,
                archive: Snapshot | None = None) -> tuple["DataFrame", Snapshot, Snapshot]:
    """archive UNION ALL live-at-or-after-cutoff, from pinned snapshots (live read first)."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    live = live or spark_snapshot(spark, t.paths.live)
    archive = archive or spark_snapshot(spark, t.paths.archive)
    cols = t.definition.visible_columns
    live_df = spark.read.format("delta").option("versionAsOf", live.version).load(t.paths.live)
    arch_df = spark.read.format("delta").option("versionAsOf", archive.version).load(t.paths.archive)
    if archive.cutoff is not None:
        at = cutoff_time(archive.cutoff)
        live_df = live_df.where(F.col(PARTITION_COLUMN) >= F.lit(at.date())).where(
            F.col(t.definition.event_time) >= F.lit(at).cast("timestamp"))
    return arch_df.select(*cols).unionByName(live_df.select(*cols)), live, archive


def register_views(spark: "SparkSession", tables: list[TableSource]) -> None:
    """(Re)create one temporary split view per table, on the tables' current snapshots."""
    for t in tables:
        split_frame(spark, t)[0].createOrReplaceTempView(t.name)


def run(spark: "SparkSession", tables: list[TableSource], sql: str) -> pa.Table:
    """Run one Spark SQL statement; the result as Arrow."""
    register_views(spark, tables)
    try:
        df = spark.sql(sql)
        return df.toArrow()
    except Exception as e:
        raise QueryError(f"spark: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
