"""A table's rejects: THE schema of rejected rows and files, and how they are written and read.

Every bad row (with its file, line, raw record and reason) and every file rejected whole (line
and record null) becomes one row of ``<warehouse>/<table>/rejects``, a Delta table. Loads and
ingest batches append their rejects in one commit carrying the same SetTransaction as their live
commit, so a replayed batch never writes its rejects twice.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse import delta_log
from lakehouse.errors import TableNotFound
from lakehouse.spark.commit import idempotent
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

UTC = dt.timezone.utc

SCHEMA = pa.schema(
    [
        pa.field("source", pa.string()),  # the input file, or "producer P insert N" (rows given as data)
        pa.field("line", pa.int64()),  # 1-based line (text) or record number (Parquet); null: whole file
        pa.field("record", pa.string()),  # the raw record as read (cut at 10,000 characters)
        pa.field("reason", pa.string()),  # why: names the column and the problem
        pa.field("at", pa.timestamp("us", tz="UTC")),  # when it was rejected
        pa.field("load_id", pa.string()),  # the load or ingest batch that rejected it
        pa.field("producer", pa.string()),  # the producer whose insert it was (streams)
        pa.field("bound", pa.timestamp("us", tz="UTC")),  # late_row: the limit it broke (bound - allowed_lateness)
    ]
)
COLUMNS = tuple(SCHEMA.names)
DDL = ("source STRING, line BIGINT, record STRING, reason STRING, at TIMESTAMP, load_id STRING, "
       "producer STRING, bound TIMESTAMP")
LATE_ROW = "late_row"
"""The reason of a row earlier than its producer's bound (minus the allowed lateness)."""


def file_frame(spark: "SparkSession", files: list[tuple[str, str]], load_id: str,
               at: dt.datetime | None = None, producer: str | None = None) -> "DataFrame":
    """Rejects of whole files: (source, reason) each, with no line or record."""
    at = at or dt.datetime.now(UTC)
    n = len(files)
    t = pa.table(
        [
            pa.array([f for f, _ in files], pa.string()),
            pa.array([None] * n, pa.int64()),
            pa.array([None] * n, pa.string()),
            pa.array([r for _, r in files], pa.string()),
            pa.array([at] * n, pa.timestamp("us", tz="UTC")),
            pa.array([load_id] * n, pa.string()),
            pa.array([producer] * n, pa.string()),
            pa.array([None] * n, pa.timestamp("us", tz="UTC")),
        ],
        schema=SCHEMA,
    )
    return spark.createDataFrame(t)


def rows_frame(df: "DataFrame", source: "Column", line: "Column", record: "Column", reason: "Column",
               load_id: str, at: dt.datetime | None = None, producer: str | None = None,
               bound: dt.datetime | None = None) -> "DataFrame":
    """Rejects rows from a frame of rejected records, given the columns that hold each field."""
    from pyspark.sql import functions as F

    at = at or dt.datetime.now(UTC)
    return df.select(
        source.cast("string").alias("source"), line.cast("bigint").alias("line"),
        record.cast("string").alias("record"), reason.cast("string").alias("reason"),
        F.lit(at).cast("timestamp").alias("at"), F.lit(load_id).alias("load_id"),
        F.lit(producer).cast("string").alias("producer"), F.lit(bound).cast("timestamp").alias("bound"),
    )


def append(spark: "SparkSession", paths: TablePaths, frames: list["DataFrame"],
           txn: tuple[str, int] | None = None) -> None:
    """Append frames of rejects rows to the table's rejects in one commit (with ``txn``)."""
    from pyspark.sql import functions as F

    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    with idempotent(spark, txn):  # mergeSchema: a rejects table older than producer/bound gains them
        df.select(*COLUMNS[:4], F.col("at").cast("timestamp"), "load_id", "producer",
                  F.col("bound").cast("timestamp")) \
            .write.format("delta").mode("append").option("mergeSchema", "true").save(paths.rejects)


def read(warehouse: str, table: str) -> list[dict[str, Any]]:
    """Rejected rows and files of a table, oldest first (read with delta-rs, no Spark)."""
    paths = TablePaths(warehouse, table)
    if not delta_log.exists(paths.rejects):
        raise TableNotFound(f"table {table!r} has no rejects table; run `lakehouse migrate`")
    rows = [{c: r.get(c) for c in COLUMNS} for r in delta_log.scan(paths.rejects).to_pylist()]
    rows.sort(key=lambda r: (r["at"] or dt.datetime.min.replace(tzinfo=UTC), r["source"] or "", r["line"] or 0))
    return rows
