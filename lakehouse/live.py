"""The live store: committing parsed rows into a table's live Delta table.

With a primary key one MERGE on key and event_date where the latest row wins (a later file beats
an earlier one, a later line beats an earlier one), without a key one append. Rows arrive parsed
and staged by ``lakehouse.ingest`` (the one write path of ``load`` and ``ingest``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import DriftError, TableNotFound
from lakehouse.physical import column_drift, describe
from lakehouse.spark.commit import idempotent, merge_into
from lakehouse.staging import FILE_COLUMN, LINE_COLUMN
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
SEQ_COLUMN = "_lh_seq"
"""Order column of released rows: the stream's insert sequence (a later insert wins a key)."""


def check_loadable(definition: TableDefinition, paths: TablePaths) -> None:
    """The live table exists and matches the definition's columns."""
    live = describe(paths.live)
    if live is None:
        raise TableNotFound(f"table {definition.name!r} is not created in the warehouse yet; run `lakehouse migrate`")
    problems = [p for p in column_drift(definition, live, "live") if "setting" not in p]
    if problems:
        raise DriftError(f"{problems[0]}; run `lakehouse migrate` (or add a migration) first")


def _source_frame(definition: TableDefinition, df: "DataFrame", load_id: str) -> "DataFrame":
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.withColumn(PARTITION_COLUMN, F.to_date(F.col(definition.event_time)))
    order = [F.desc(FILE_COLUMN), F.desc(LINE_COLUMN)]
    if SEQ_COLUMN in df.columns:
        order.insert(0, F.desc(SEQ_COLUMN))
    if definition.has_key:
        w = Window.partitionBy(*definition.primary_key).orderBy(*order)
        df = df.withColumn("_lh_rank", F.row_number().over(w)).where("_lh_rank = 1")
    load = F.col(LOAD_COLUMN) if LOAD_COLUMN in df.columns else F.lit(load_id)
    return df.select(*definition.column_names, load.alias(LOAD_COLUMN), PARTITION_COLUMN)


def commit_live(spark: "SparkSession", definition: TableDefinition, paths: TablePaths, good: "DataFrame",
                load_id: str, days: set[dt.date], rows: int, txn: tuple[str, int] | None = None) -> tuple[int, int]:
    """Upsert (key) or append (no key) parsed rows into live in one commit; (inserted, updated).

    ``good`` holds the table's columns plus the file and line order columns (later wins)."""
    with idempotent(spark, txn):
        return _commit_live(spark, definition, paths, good, load_id, days, rows)


def _commit_live(spark: "SparkSession", definition: TableDefinition, paths: TablePaths,
                 good: "DataFrame", load_id: str, days: set[dt.date], rows: int) -> tuple[int, int]:
    src = _source_frame(definition, good, load_id)
    if not definition.has_key:
        src.write.format("delta").mode("append").save(paths.live)
        return rows, 0
    # The literal day list (known from staging) lets Delta see which partitions the MERGE reads,
    # so concurrent loads and archive purges of other days do not conflict with it.
    cond = " AND ".join(f"t.`{k}` = s.`{k}`" for k in (*definition.primary_key, PARTITION_COLUMN))
    cond += f" AND t.`{PARTITION_COLUMN}` IN ({', '.join(repr(d.isoformat()) for d in sorted(days))})"
    m = merge_into(spark, paths.live, src, cond, "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    return m.get("num_inserted_rows", 0), m.get("num_updated_rows", 0)
