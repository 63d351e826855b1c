"""Delta's log as Spark sees it: Spark's own DeltaLog, read through the JVM (py4j). Code that
must see a table as Spark's next commit will (the archive cutoff of a run, a query's pinned
versions) reads it here, in the engine layer; ``lakehouse.delta_log`` reads the same log without
Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def table_version(spark: "SparkSession", path: str, app_id: str) -> tuple[int, int | None]:
    """The latest version of the Delta table at ``path`` (the log updated first) and the
    SetTransaction version recorded for ``app_id`` at that version, or None."""
    jvm: Any = spark.sparkContext._jvm  # type: ignore[attr-defined]
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)  # type: ignore[attr-defined]
    snap = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    txn = snap.transactions().get(app_id)
    recorded = int(txn.get()) if txn.isDefined() else None
    return int(snap.version()), recorded
