"""Running SQL on Spark with every table registered as a temporary view."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import QueryError
from lakehouse.query import TableSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register_views(spark: "SparkSession", tables: list[TableSource]) -> None:
    """(Re)create one temporary view per table, reading its current Delta snapshot."""
    for t in tables:
        spark.read.format("delta").load(t.live).createOrReplaceTempView(t.name)


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
