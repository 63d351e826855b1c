"""A downstream job over a table's change feed, for tests that kill it (tests/test_changes_kills.py).

``python -m tests.feed_worker PROJECT CHECKPOINT DOWNSTREAM``: reaches a Spark of its own, prints
``ready``, waits for a line, then starts a streaming query over ``orders``'s change feed that keeps
the latest version of each key in the Delta table DOWNSTREAM (a MERGE per micro-batch that takes a
row only from a later release than the one it holds: a batch run again changes nothing), prints
``started``; a line ``stop`` makes it take every release there is, stop, and print ``stopped``.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def main() -> int:
    root, checkpoint, downstream = sys.argv[1:4]
    import lakehouse
    from lakehouse.spark.session import get_spark

    spark = get_spark(os.environ["LAKEHOUSE_MASTER"])
    spark.range(10).count()
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 0
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    lh = lakehouse.open(root, spark=spark)
    feed = lh.table("orders").read_stream()
    if not DeltaTable.isDeltaTable(spark, downstream):
        feed.schema  # noqa: B018 - (the feed's columns)
        spark.createDataFrame([], feed.schema).write.format("delta").mode("ignore").save(downstream)

    def merge(batch: Any, batch_id: int) -> None:
        latest = (batch.withColumn("_n", F.row_number().over(Window.partitionBy("id").orderBy(F.desc("_lh_release"))))
                  .where("_n = 1").drop("_n"))
        (DeltaTable.forPath(spark, downstream).alias("t").merge(latest.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll(condition="s._lh_release > t._lh_release").whenNotMatchedInsertAll().execute())

    query = (feed.writeStream.foreachBatch(merge).option("checkpointLocation", checkpoint)
             .trigger(processingTime="300 milliseconds").start())
    print("started", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            query.processAllAvailable()
            query.stop()
            print("stopped", flush=True)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
