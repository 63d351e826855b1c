"""``lakehouse bench ingest``: ``ingest`` of many small files and of one big file against
Spark's own file streaming source writing the same files to Delta, in one process."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from lakehouse.bench.workload import INGEST_TABLE, make_project, write_trips_csv


def bench_ingest(master: str, small_files: int = 1000, small_rows: int = 1000, big_mb: int = 1024,
                 blocks_per_batch: int = 256, workdir: str | None = None) -> dict[str, Any]:
    """``ingest`` of many small files and of one big file, each against Spark's own file
    streaming source (CSV, trigger availableNow) writing the same files to a Delta table
    partitioned the same way, in one process; after a small warm-up of both."""
    from lakehouse import delta_log

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-ingest-"))
    try:
        lh = make_project(root, master, INGEST_TABLE.replace("BLOCKS", str(blocks_per_batch)))
        spark = lh.spark()
        live = lh.paths("bench").live
        cases: dict[str, Any] = {}

        def case(name: str, folder: Path, files: int, rows: int) -> dict[str, Any]:
            """``ingest`` of ``folder``, then Spark's file stream over it: both timed."""
            before = delta_log.row_count(live)
            t0 = time.monotonic()
            r = lh.ingest("bench", str(folder), drain=True)
            ours = time.monotonic() - t0
            assert delta_log.row_count(live) - before == rows == r.rows, (delta_log.row_count(live) - before, rows, r.rows)
            t0 = time.monotonic()
            streamed = _spark_stream(spark, lh.definition("bench"), folder, root / f"stream-{name}")
            base = time.monotonic() - t0
            assert streamed == rows, (streamed, rows)
            size = sum(f.stat().st_size for f in folder.iterdir())
            return {
                "files": files, "rows": rows, "megabytes": round(size / 1e6, 1), "batches": len(r.batches),
                "ingest_seconds": round(ours, 2), "ingest_rows_per_s": round(rows / ours),
                "ingest_files_per_s": round(files / ours, 2),
                "spark_stream_seconds": round(base, 2), "spark_stream_rows_per_s": round(rows / base),
                "spark_stream_files_per_s": round(files / base, 2),
                "ratio_ingest_to_spark_stream": round(ours / base, 2),
            }

        warm = root / "in-warmup"
        warm.mkdir()
        for k in range(3):
            write_trips_csv(warm / f"w{k}.csv", 2000, seed=900 + k)
        case("warmup", warm, 3, 6000)

        t0 = time.monotonic()
        small = root / "in-small"
        small.mkdir()
        for k in range(small_files):
            write_trips_csv(small / f"s{k:05d}.csv", small_rows, seed=k)
        big = root / "in-big"
        big.mkdir()
        big_rows = max(1, big_mb * 1_000_000 // 76)  # ~76 bytes a row
        write_trips_csv(big / "big.csv", big_rows, seed=10_000)
        generate_s = time.monotonic() - t0
        cases["small_files"] = case("small", small, small_files, small_files * small_rows)
        cases["big_file"] = case("big", big, 1, big_rows)
        return {"master": master, "blocks_per_batch": blocks_per_batch, "generate_seconds": round(generate_s, 1),
                **cases}
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _spark_stream(spark: Any, definition: Any, folder: Path, out: Path) -> int:
    """Spark's file streaming source over ``folder`` into a Delta table partitioned by the UTC day."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    ddl = ", ".join(f"`{c.name}` {c.type.spark_ddl()}" for c in definition.columns)
    q = (
        spark.readStream.schema(ddl).option("header", "true").csv(str(folder))
        .withColumn(PARTITION_COLUMN, F.to_date(F.col(definition.event_time)))
        .writeStream.format("delta").partitionBy(PARTITION_COLUMN)
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "table"))
    )
    q.awaitTermination()
    return int(spark.read.format("delta").load(str(out / "table")).count())
