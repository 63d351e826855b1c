"""``lakehouse bench archive``: archiving against a plain sorted Delta write of the same rows,
measured in one run on this machine (a ratio, not an absolute target)."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_TABLE = """
name: bench
columns:
  - {name: trip_id, type: string, nullable: false}
  - {name: city_id, type: int}
  - {name: status, type: int}
  - {name: fx_rate, type: double}
  - {name: fare_total, type: double}
  - {name: distance_km, type: double}
  - {name: vehicle_type, type: string}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [trip_id]
event_time: event_time
archive: {delay: 1d, sort_columns: [city_id, status, fx_rate], vectors: all}
"""


def bench_archive(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """Generate ``rows`` trips over ``days`` UTC days straight into live, archive them all, and
    write the same rows with a plain sorted, partitioned Delta write; both timed."""
    from pyspark.sql import functions as F

    from lakehouse.archive.job import _order
    from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-"))
    try:
        (root / "tables").mkdir(parents=True, exist_ok=True)
        (root / "migrations").mkdir(exist_ok=True)
        (root / "tables" / "bench.yaml").write_text(BENCH_TABLE)
        (root / "migrations" / "0001_bench.py").write_text("def upgrade(ctx):\n    ctx.create_table('bench')\n")
        lh = Lakehouse(Settings.resolve(root, str(root / "warehouse"), master, env={}))
        lh.migrate()
        spark = lh.spark()
        d = lh.definition("bench")
        start = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
        span = days * 86_400
        i = F.col("id")
        t0 = time.monotonic()
        gen = spark.range(rows).select(
            F.concat(F.lit("T"), i.cast("string")).alias("trip_id"),
            (F.abs(F.hash(i)) % 40).cast("int").alias("city_id"),
            (F.abs(F.hash(i, F.lit(1))) % 4).cast("int").alias("status"),
            ((F.abs(F.hash(i, F.lit(2))) % 50) / 100.0 + 0.5).alias("fx_rate"),
            (F.abs(F.hash(i, F.lit(3))) % 10_000 / 100.0).alias("fare_total"),
            (F.abs(F.hash(i, F.lit(4))) % 3_000 / 100.0).alias("distance_km"),
            F.element_at(F.array(*[F.lit(v) for v in ("economy", "comfort", "xl", "moto")]),
                         (F.abs(F.hash(i, F.lit(5))) % 4 + 1).cast("int")).alias("vehicle_type"),
            F.timestamp_seconds(F.lit(int(start.timestamp())) + (F.abs(F.hash(i, F.lit(6))) % span)).alias("event_time"),
            F.lit("bench").alias(LOAD_COLUMN),
        ).withColumn(PARTITION_COLUMN, F.to_date("event_time"))
        gen.write.format("delta").mode("append").save(lh.paths("bench").live)
        generate_s = time.monotonic() - t0

        # the baseline: the same rows, sorted the same way, one plain partitioned Delta write
        live = spark.read.format("delta").load(lh.paths("bench").live)
        t0 = time.monotonic()
        (live.repartition(days, F.col(PARTITION_COLUMN)).sortWithinPartitions(*_order(d))
         .write.format("delta").partitionBy(PARTITION_COLUMN).save(str(root / "baseline")))
        baseline_s = time.monotonic() - t0

        now = start + dt.timedelta(days=days + 2)
        t0 = time.monotonic()
        result = lh.archive("bench", now=now)
        archive_s = time.monotonic() - t0
        assert result.rows_archived == rows, (result.rows_archived, rows)
        return {
            "rows": rows,
            "days": days,
            "master": master,
            "generate_seconds": round(generate_s, 2),
            "baseline_sorted_delta_write_seconds": round(baseline_s, 2),
            "archive_seconds": round(archive_s, 2),
            "ratio_archive_to_baseline": round(archive_s / baseline_s, 2) if baseline_s else None,
            "archive_steps_seconds": {k: round(v, 2) for k, v in result.timings.items()},
            "vector_files": result.vector_files,
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
