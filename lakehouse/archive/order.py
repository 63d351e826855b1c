"""How an archive day batch looks on Spark: its columns, its row order (invariant 4), and the
predicates that pick its days and the rows below a cutoff."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.archive.plan import cutoff_time, days_sql
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition

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


def cutoff_column(cutoff: int) -> Column:
    """The cutoff as a Spark timestamp literal (compare event times with it)."""
    from pyspark.sql import functions as F

    return F.lit(cutoff_time(cutoff)).cast("timestamp")


def days_predicate(days: list[dt.date] | tuple[dt.date, ...]) -> str:
    """A SQL predicate on the day column selecting exactly ``days``."""
    return days_sql(PARTITION_COLUMN, days)
