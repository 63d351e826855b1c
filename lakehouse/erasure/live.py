"""Erasing from a table's live part (step 3 of a delete): every row the delete selects, on every
day (rows below the cutoff waiting for the next archiving run too), with Spark's ``DELETE`` (a
``MERGE`` for many keys: ``erasure.selection``). It commits with the erasure's SetTransaction
(``lakehouse.erasure``, its number), so a delete finished again after a crash is skipped by a
live table that holds it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.erasure.selection import Selection
from lakehouse.spark.commit import idempotent, with_retries
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def erase(spark: SparkSession, paths: TablePaths, selection: Selection, number: int) -> int:
    """Delete from live the rows ``selection`` holds, with the SetTransaction (``lakehouse.
    erasure``, ``number``); rows deleted (0: none matched; when live held the erasure already,
    the rows its commit deleted, as Delta's metrics say). (Delta records no SetTransaction for a
    DELETE that matched nothing: the caller's plan, not live, says which erasures ran.)"""
    from lakehouse import delta_log

    if (delta_log.txn_version(paths.live, ERASURE_APP_ID) or 0) >= number:
        info = delta_log.txn_commit_info(paths.live, ERASURE_APP_ID, number) or {}
        return deleted_rows(info.get("operationMetrics") or {})

    def delete() -> int:
        with idempotent(spark, (ERASURE_APP_ID, int(number))):
            return selection.delete(spark, paths.live)

    deleted, _ = with_retries(f"delete from {paths.name}/live", delete)
    if deleted < 0:  # a metadata-only delete of whole files: counted from the commit Delta made
        metrics = (delta_log.history(paths.live, 1) or [{}])[0].get("operationMetrics") or {}
        deleted = deleted_rows(metrics)
    return deleted


def deleted_rows(metrics: dict[str, str]) -> int:
    """The rows a live commit's Delta metrics say it deleted (a ``DELETE``'s or a ``MERGE``'s)."""
    return int(metrics.get("numDeletedRows") or metrics.get("numTargetRowsDeleted") or 0)
