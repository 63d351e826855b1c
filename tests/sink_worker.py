"""A process running a table's streaming sink, for tests that kill it (tests/test_sink_kills.py).

``python -m tests.sink_worker PROJECT LANDING CHECKPOINT POINT SECONDS``: reaches a Spark of its
own (classic: a Spark Connect server would keep the query running after its client dies), prints
``ready``, waits for a line, then starts ``write_stream`` from the JSON files of LANDING (a
watermark of 2 minutes) as producer ``pipe`` and prints ``started``. POINT (a crash point, or
``-``) and SECONDS: when the sink passes POINT, or SECONDS after the start when POINT is ``-``,
the whole process group (this process and Spark's JVM) is killed with SIGKILL. A line ``stop``
makes it take every file there is, stop the query, wait for the producer to detach and print
``stopped``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

SCHEMA = "user_id long, url string, at timestamp"


def kill() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def main() -> int:
    root, landing, checkpoint, point, seconds = sys.argv[1:6]
    import lakehouse
    from lakehouse import crashpoints
    from lakehouse.spark.session import get_spark

    spark = get_spark(os.environ["LAKEHOUSE_MASTER"])
    spark.range(10).count()
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 0

    def passed(name: str, pid: int | None = None) -> None:
        print(f"point {name}", flush=True)
        if name == point:
            kill()

    crashpoints.reached = passed
    lh = lakehouse.open(root, spark=spark)
    events = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 2).json(landing)
              .withWatermark("at", "2 minutes"))
    query = lh.table("clicks").write_stream(events, producer="pipe", checkpoint=checkpoint,
                                            trigger={"processingTime": "200 milliseconds"})
    if point == "-":
        timer = threading.Timer(float(seconds), kill)
        timer.daemon = True
        timer.start()
    print("started", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            query.processAllAvailable()
            query.stop()
            query._lakehouse_liveness.thread.join(120)
            print("stopped", flush=True)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
