"""Erasing from a table's live part (step 3 of a delete): every row the predicate matches, on
every day (rows below the cutoff waiting for the next archiving run too), with Spark's
``DELETE``. The delete commits with the erasure's SetTransaction (``lakehouse.erasure``, its
number), so a delete finished again after a crash is skipped by a live table that holds it."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.spark.commit import idempotent, with_retries
from lakehouse.sql import spark_ident
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def matched(spark: SparkSession, table: str, condition: str, version: int | None = None) -> dict[dt.date, int]:
    """Rows of a part's Delta table (``paths.live`` or ``paths.archive``; at ``version``, the
    latest by default) the Spark SQL ``condition`` matches, per day."""
    at = "" if version is None else f" VERSION AS OF {int(version)}"
    rows = spark.sql(f"SELECT {spark_ident(PARTITION_COLUMN)} AS d, count(*) AS n FROM delta.{spark_ident(table)}"
                     f"{at} WHERE {condition} GROUP BY 1").collect()
    return {r["d"]: int(r["n"]) for r in rows}


def erase(spark: SparkSession, paths: TablePaths, condition: str, number: int) -> int:
    """Delete from live the rows ``condition`` matches, with the SetTransaction (``lakehouse.
    erasure``, ``number``); rows deleted (0: none matched; when live held the erasure already,
    the rows its commit deleted, as Delta's metrics say). (Delta records no SetTransaction for a
    DELETE that matched nothing: the caller's plan, not live, says which erasures ran.)"""
    from lakehouse import delta_log

    if (delta_log.txn_version(paths.live, ERASURE_APP_ID) or 0) >= number:
        info = delta_log.txn_commit_info(paths.live, ERASURE_APP_ID, number) or {}
        return int((info.get("operationMetrics") or {}).get("numDeletedRows") or 0)

    def delete() -> int:
        with idempotent(spark, (ERASURE_APP_ID, int(number))):
            rows = spark.sql(f"DELETE FROM delta.{spark_ident(paths.live)} WHERE {condition}").collect()
        n = int(rows[0][0]) if rows and rows[0][0] is not None else 0
        if n < 0:  # a metadata-only delete of whole files whose statistics lack their counts
            n = -1
        return n

    deleted, _ = with_retries(f"delete from {paths.name}/live", delete)
    if deleted < 0:  # counted from the commit Delta made
        metrics = (delta_log.history(paths.live, 1) or [{}])[0].get("operationMetrics") or {}
        deleted = int(metrics.get("numDeletedRows") or 0)
    return deleted
