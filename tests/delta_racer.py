"""One of several processes committing to one Delta table on the S3 server at once, with Spark:
``python -m tests.delta_racer TABLE WRITER COMMITS [spark.K=V ...]`` prints ``ready`` once its
Spark runs, waits for the file $RACE_GO to appear (so that the racers start together), appends
COMMITS one-row commits (writer, i) as fast as it can, and prints how many it made. The Spark settings given replace lakehouse's (the
s3 tests pass Delta's S3SingleDriverLogStore to show what it loses)."""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    table, writer, commits, *conf = sys.argv[1:]
    from lakehouse import objectstore
    from lakehouse.objectstore import S3
    from lakehouse.settings import parse_spark_conf
    from lakehouse.spark.session import get_spark

    s3 = S3.resolve({}, dict(os.environ))
    objectstore.use(s3)
    spark = get_spark("local[1]", extra_conf={**s3.spark_conf(), **parse_spark_conf(conf, "racer")})
    spark.range(1).count()  # Spark warmed up: ready
    print("ready", flush=True)
    go = os.environ["RACE_GO"]
    while not os.path.exists(go):
        time.sleep(0.01)
    made = 0
    for i in range(int(commits)):
        spark.range(1).selectExpr(f"'{writer}' AS w", f"{i} AS i").write.format("delta").mode("append").save(table)
        made += 1
    print(made, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
