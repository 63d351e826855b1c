"""How an archive day batch looks on Spark: its columns, its row order (invariant 4), and the
predicates that pick its days and the rows below a cutoff."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.archive.plan import days_sql
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    from pyspark.sql import Column


def archive_columns(definition: TableDefinition) -> list[str]:
    """The columns of an archive (and live) row, in the table's order: data, load id, day."""
    return [*definition.column_names, LOAD_COLUMN, PARTITION_COLUMN]


def row_order(definition: TableDefinition) -> list[Column]:
    """The order of a day batch's rows: day, then the table's sort order, ascending, nulls first."""
    from pyspark.sql import functions as F

    return [F.col(PARTITION_COLUMN).asc()] + [
        F.col(c).asc_nulls_first() for c in definition.sort_order
    ]


def row_order_sql(definition: TableDefinition) -> str:
    """``row_order`` as a Spark SQL ORDER BY/SORT BY list."""
    return ", ".join(f"{spark_ident(c)} ASC NULLS FIRST" for c in (PARTITION_COLUMN, *definition.sort_order))


def day_batches_sql(query: str, partitions: int, definition: TableDefinition) -> str:
    """The rows of ``query`` (Spark SQL) as day batches: spread over ``partitions`` Spark
    partitions by day (a day in one partition), each partition sorted in the row order; what
    ``repartition(partitions, day).sortWithinPartitions(*row_order)`` plans, in one statement."""
    return (f"SELECT /*+ REPARTITION({int(partitions)}, {spark_ident(PARTITION_COLUMN)}) */ * FROM ({query})"
            f" SORT BY {row_order_sql(definition)}")


def days_predicate(days: list[dt.date] | tuple[dt.date, ...]) -> str:
    """A SQL predicate on the day column selecting exactly ``days``."""
    return days_sql(PARTITION_COLUMN, days)
