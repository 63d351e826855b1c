"""The live store: committing parsed rows into a table's live Delta table.

With a primary key one MERGE on key and event_date where the latest row wins (a later file beats
an earlier one, a later line beats an earlier one), without a key one append. Rows arrive parsed
and staged by ``lakehouse.ingest`` (the one write path of ``load`` and ``ingest``).

A small commit (``small``: up to ``SMALL_ROWS`` rows into days holding up to ``SMALL_BYTES`` of
live) is made without Spark: the same latest-row-wins choice in Arrow (``latest_per_key``), then
delta-rs's MERGE (``lakehouse.delta_log.upsert``), which commits on the version it read or reads
again. A few rows into live then cost milliseconds, not a Spark job's second.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from lakehouse import delta_log
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import DriftError, TableNotFound
from lakehouse.physical import column_drift, describe
from lakehouse.spark.commit import idempotent, merge_into
from lakehouse.staging import FILE_COLUMN, LINE_COLUMN
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
SEQ_COLUMN = "_lh_seq"
"""Order column of released rows: the stream's insert sequence (a later insert wins a key)."""
SMALL_ROWS = 100_000
"""Rows up to which a commit into live is made without Spark."""
SMALL_BYTES = 256 << 20
"""Live bytes (in the days a commit touches) up to which it is made without Spark: delta-rs's
MERGE reads those days in this process."""


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


def small(paths: TablePaths, rows: int, days: set[dt.date]) -> bool:
    """Whether a commit of ``rows`` rows into ``days`` of live is made without Spark."""
    if rows > SMALL_ROWS:
        return False
    if not days:
        return True
    import pyarrow.compute as pc

    files = delta_log.add_actions(paths.live)
    column = f"partition.{PARTITION_COLUMN}"
    if not files.num_rows or column not in files.column_names:
        return True
    wanted = pc.is_in(pc.cast(files[column], "string"), value_set=_day_strings(days))
    return int(pc.sum(files.filter(wanted)["size_bytes"]).as_py() or 0) <= SMALL_BYTES


def _day_strings(days: set[dt.date]) -> "pa.Array":
    import pyarrow as pa

    return pa.array(sorted(d.isoformat() for d in days), pa.string())


def latest_per_key(definition: TableDefinition, rows: "pa.Table", load_id: str) -> "pa.Table":
    """What ``_source_frame`` makes of parsed rows, in Arrow: per primary key the latest row
    (highest ``SEQ_COLUMN``, then file, then line), the load column (the rows' own, else
    ``load_id``) and the partition column (the UTC day of the event time)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if definition.has_key and rows.num_rows:
        order = [(k, "ascending") for k in definition.primary_key]
        order += [(c, "descending") for c in (SEQ_COLUMN, FILE_COLUMN, LINE_COLUMN) if c in rows.column_names]
        rows = rows.sort_by(order)
        index = pa.array(np.arange(rows.num_rows, dtype=np.int64))
        keyed = pa.table({**{k: rows[k] for k in definition.primary_key}, "_lh_i": index})
        first = keyed.group_by(list(definition.primary_key), use_threads=False).aggregate([("_lh_i", "min")])
        rows = rows.take(np.sort(first["_lh_i_min"].to_numpy()))
    et = rows[definition.event_time]
    if not pa.types.is_timestamp(et.type) or et.type.tz not in (None, "UTC", "+00:00"):
        et = pc.cast(et, pa.timestamp("us", tz="UTC"))
    day = pc.cast(pc.cast(et, pa.timestamp("us")), pa.date32())  # the UTC day, whatever the zone
    load = rows[LOAD_COLUMN] if LOAD_COLUMN in rows.column_names else pa.array([load_id] * rows.num_rows, pa.string())
    return pa.table({**{c: rows[c] for c in definition.column_names}, LOAD_COLUMN: load, PARTITION_COLUMN: day})


def commit_live_rows(definition: TableDefinition, paths: TablePaths, rows: "pa.Table", load_id: str,
                     days: set[dt.date], txn: tuple[str, int] | None = None,
                     user_metadata: str | None = None) -> tuple[int, int]:
    """``commit_live`` of a small Arrow table of parsed rows, without Spark; (inserted, updated),
    (0, 0) when live already holds ``txn``."""
    source = latest_per_key(definition, rows, load_id)
    done = delta_log.upsert(paths.live, source, tuple(definition.primary_key) if definition.has_key else (),
                            PARTITION_COLUMN, sorted(d.isoformat() for d in days), txn=txn,
                            user_metadata=user_metadata)
    return done or (0, 0)
