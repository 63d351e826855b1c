"""``lakehouse bench archive``: archiving against a plain sorted Delta write of the same rows,
measured in one run on this machine (a ratio, not an absolute target)."""

from __future__ import annotations

import datetime as dt
import os
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


def generate_live(spark: Any, live_path: str, rows: int, start: dt.datetime, days: int, load: str = "bench",
                  first_id: int = 0) -> None:
    """``rows`` generated trips (``BENCH_TABLE``'s columns) spread over ``days`` UTC days from
    ``start``, appended straight into a live Delta table (one load id)."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN

    span = days * 86_400
    i = F.col("id")
    gen = spark.range(first_id, first_id + rows).select(
        F.concat(F.lit("T"), i.cast("string")).alias("trip_id"),
        (F.abs(F.hash(i)) % 40).cast("int").alias("city_id"),
        (F.abs(F.hash(i, F.lit(1))) % 4).cast("int").alias("status"),
        ((F.abs(F.hash(i, F.lit(2))) % 50) / 100.0 + 0.5).alias("fx_rate"),
        (F.abs(F.hash(i, F.lit(3))) % 10_000 / 100.0).alias("fare_total"),
        (F.abs(F.hash(i, F.lit(4))) % 3_000 / 100.0).alias("distance_km"),
        F.element_at(F.array(*[F.lit(v) for v in ("economy", "comfort", "xl", "moto")]),
                     (F.abs(F.hash(i, F.lit(5))) % 4 + 1).cast("int")).alias("vehicle_type"),
        # every day gets rows: the first ``days`` ids one per day, the rest spread by a hash
        F.timestamp_seconds(F.lit(int(start.timestamp())) + F.when(
            i - first_id < days, (i - first_id) * 86_400 + F.abs(F.hash(i, F.lit(7))) % 86_400
        ).otherwise(F.abs(F.hash(i, F.lit(6))) % span)).alias("event_time"),
        F.lit(load).alias(LOAD_COLUMN),
    ).withColumn(PARTITION_COLUMN, F.to_date("event_time"))
    (gen.repartitionByRange(max(1, spark.sparkContext.defaultParallelism), PARTITION_COLUMN)
     .write.format("delta").mode("append").save(live_path))


def bench_backfill(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """A backfill of years: ``rows`` trips over ``days`` UTC days (ending two days ago) straight
    into live, archived by one run, against a plain sorted, partitioned Delta write of the same
    rows in the same process; then a second run archives late rows into a few of those days."""
    from lakehouse.archive.job import _order
    from lakehouse.definitions import PARTITION_COLUMN
    from lakehouse.warehouse import row_count

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-backfill-"))
    try:
        lh = _bench_project(root, master)
        spark = lh.spark()
        d = lh.definition("bench")
        today = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today - dt.timedelta(days=days + 2)
        t0 = time.monotonic()
        generate_live(spark, lh.paths("bench").live, rows, start, days)
        generate_s = time.monotonic() - t0

        live = spark.read.format("delta").load(lh.paths("bench").live)
        t0 = time.monotonic()
        (live.orderBy(*_order(d)).write.format("delta").partitionBy(PARTITION_COLUMN).save(str(root / "baseline")))
        baseline_s = time.monotonic() - t0

        now = today
        t0 = time.monotonic()
        result = lh.archive("bench", now=now)
        archive_s = time.monotonic() - t0
        assert result.rows_archived == rows and len(result.plan.days) == days, (result.rows_archived, rows)
        assert row_count(lh.paths("bench").live) == 0
        # late rows into three old days, archived by a second run (the table archives again)
        late = 30
        generate_live(spark, lh.paths("bench").live, late, start, 3, load="late", first_id=rows)
        t0 = time.monotonic()
        again = lh.archive("bench", now=now + dt.timedelta(minutes=1))
        again_s = time.monotonic() - t0
        assert again.rows_archived == late and row_count(lh.paths("bench").archive) == rows + late
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
            "second_run_late_rows": late,
            "second_run_seconds": round(again_s, 2),
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def bench_archive(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """Generate ``rows`` trips over ``days`` UTC days straight into live, archive them all, and
    write the same rows with a plain sorted, partitioned Delta write; both timed."""
    from pyspark.sql import functions as F

    from lakehouse.archive.job import _order
    from lakehouse.definitions import PARTITION_COLUMN

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-"))
    try:
        lh = _bench_project(root, master)
        spark = lh.spark()
        d = lh.definition("bench")
        start = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
        t0 = time.monotonic()
        generate_live(spark, lh.paths("bench").live, rows, start, days)
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


# the same columns, without a key (both sides of the ingest benchmark append)
INGEST_TABLE = BENCH_TABLE.replace("primary_key: [trip_id]\n", "").split("archive:")[0] + """ingest:
  format: csv
  sort_field: MODIFIED_FILE_TIME
  ingress_delay_interval: 0
  ingress_file_scan_wait: 0s
  block_size: 64MB
  blocks_per_batch: BLOCKS
"""


def write_trips_csv(path: Path, rows: int, seed: int, chunk: int = 1_000_000, start_us: int | None = None,
                    span_us: int = 5 * 86_400_000_000) -> None:
    """Generated trips as CSV (vectorized; ~76 bytes a row), event times spread over ``span_us``
    from ``start_us`` (default: 2026-11-01, five days)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(seed)
    start = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000 if start_us is None \
        else start_us
    kinds = np.array(["economy", "comfort", "xl", "moto"])
    writer = None
    try:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            ids = np.char.add(f"T{seed}-", np.arange(lo, lo + n).astype(str))
            t = pa.table({
                "trip_id": pa.array(ids),
                "city_id": pa.array(rng.integers(1, 40, n).astype(np.int32)),
                "status": pa.array(rng.integers(0, 4, n).astype(np.int32)),
                "fx_rate": pa.array(np.round(rng.random(n) + 0.5, 6)),
                "fare_total": pa.array(np.round(rng.random(n) * 80, 2)),
                "distance_km": pa.array(np.round(rng.random(n) * 30, 2)),
                "vehicle_type": pa.array(kinds[rng.integers(0, 4, n)]),
                "event_time": pa.array(start + rng.integers(0, span_us, n), pa.int64())
                .cast(pa.timestamp("us", tz="UTC")),
            })
            if writer is None:
                writer = pcsv.CSVWriter(str(path), t.schema)
            writer.write_table(t)
    finally:
        if writer is not None:
            writer.close()


def bench_ingest(master: str, small_files: int = 1000, small_rows: int = 1000, big_mb: int = 1024,
                 blocks_per_batch: int = 256, workdir: str | None = None) -> dict[str, Any]:
    """``ingest`` of many small files and of one big file, each against Spark's own file
    streaming source (CSV, trigger availableNow) writing the same files to a Delta table
    partitioned the same way, in one process; after a small warm-up of both."""
    from lakehouse.warehouse import row_count

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-ingest-"))
    try:
        lh = _bench_project(root, master, INGEST_TABLE.replace("BLOCKS", str(blocks_per_batch)))
        spark = lh.spark()
        live = lh.paths("bench").live
        cases: dict[str, Any] = {}

        def case(name: str, folder: Path, files: int, rows: int) -> dict[str, Any]:
            before = row_count(live)
            t0 = time.monotonic()
            r = lh.ingest("bench", str(folder), drain=True)
            ours = time.monotonic() - t0
            assert row_count(live) - before == rows == r.rows, (row_count(live) - before, rows, r.rows)
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


def bench_stream(master: str, batches: int = 16, rows: int = 50_000, workdir: str | None = None) -> dict[str, Any]:
    """Rows through producers (insert + release into live) for 1 and 4 producers, against a
    plain ``load`` of the same files, in one process, after a warm-up. Batch k of every
    producer covers the k-th hour of event time, so releases follow the slowest producer."""
    from lakehouse.warehouse import row_count

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-stream-"))
    hour = 3_600_000_000
    start = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
    try:
        def files(case: str, producers: int, batches: int, rows: int) -> list[list[Path]]:
            """[batch][producer] -> a CSV file: ``rows`` rows in total per batch."""
            folder = root / f"in-{case}"
            folder.mkdir(parents=True)
            out = []
            for k in range(batches):
                row = []
                for p in range(producers):
                    f = folder / f"b{k:04d}-p{p}.csv"
                    write_trips_csv(f, rows // producers, seed=k * 10 + p, start_us=start + k * hour, span_us=hour)
                    row.append(f)
                out.append(row)
            return out

        table = INGEST_TABLE.replace("BLOCKS", "16")
        results: dict[str, Any] = {}

        def run(case: str, producers: int | None, batches: int = batches, rows: int = rows) -> dict[str, Any]:
            lh = _bench_project(root / case, master, table)
            live = lh.paths("bench").live
            fs = files(case, producers or 1, batches, rows)
            t0 = time.monotonic()
            if producers is None:  # the baseline: one plain load per batch file
                for batch in fs:
                    lh.load("bench", [str(f) for f in batch])
            else:
                ps = [lh.table("bench").producer(f"p{i}") for i in range(producers)]
                for p in ps:
                    p.attach()
                for batch in fs:
                    for p, f in zip(ps, batch):
                        p.insert_files([str(f)])
                for p in ps:
                    p.detach()
            secs = time.monotonic() - t0
            n = row_count(live)
            assert n == batches * (rows // (producers or 1)) * (producers or 1), n
            return {"rows": n, "inserts": batches * (producers or 1), "seconds": round(secs, 2),
                    "rows_per_s": round(n / secs)}

        run("warmup", 2, 2, 2000)
        results["load"] = run("load", None)
        results["producers_1"] = run("p1", 1)
        results["producers_4"] = run("p4", 4)
        for k in ("producers_1", "producers_4"):
            results[k]["ratio_to_load"] = round(results[k]["seconds"] / results["load"]["seconds"], 2)
        return {"master": master, "batches": batches, "rows_per_batch": rows, **results}
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


def _bench_project(root: Path, master: str, table: str = BENCH_TABLE) -> Any:
    """A project in ``root`` with the bench table (``table``, YAML) created."""
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    (root / "tables").mkdir(parents=True, exist_ok=True)
    (root / "migrations").mkdir(exist_ok=True)
    (root / "tables" / "bench.yaml").write_text(table)
    (root / "migrations" / "0001_bench.py").write_text("def upgrade(ctx):\n    ctx.create_table('bench')\n")
    lh = Lakehouse(Settings.resolve(root, str(root / "warehouse"), master, env={}))
    lh.migrate()
    return lh


def bench_compact(master: str, batches: int = 1000, rows: int = 200, workdir: str | None = None) -> dict[str, Any]:
    """A table of ``batches`` ingest batches (one small file each, event times over two days):
    live's files and bytes before and after ``optimize``, and the same queries on Spark and
    DuckDB before and after (the baseline: the uncompacted table, same run)."""
    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-compact-"))
    try:
        from lakehouse.jobs.files import layout

        table = INGEST_TABLE.replace("BLOCKS", "1") + "jobs: {compact_min_files: 8}\n"
        lh = _bench_project(root, master, table)
        folder = root / "landing"
        folder.mkdir()
        start = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
        for k in range(batches):
            write_trips_csv(folder / f"b{k:05d}.csv", rows, seed=k, start_us=start, span_us=2 * 86_400_000_000)
            os.utime(folder / f"b{k:05d}.csv", (1_700_000_000 + k, 1_700_000_000 + k))
        t0 = time.monotonic()
        r = lh.ingest("bench", str(folder), drain=True)
        ingest_s = time.monotonic() - t0
        live = lh.paths("bench").live
        sql = "SELECT event_date, city_id, count(*) AS n, sum(fare_total) AS s FROM bench GROUP BY 1, 2 ORDER BY 1, 2"

        def timed(engine: str) -> float:
            best = float("inf")
            for _ in range(3):
                t = time.monotonic()
                lh.query(sql, engine)
                best = min(best, time.monotonic() - t)
            return best

        before = layout(live)
        q0 = {e: timed(e) for e in ("spark", "duckdb")}
        t0 = time.monotonic()
        p = lh.optimize("bench")
        optimize_s = time.monotonic() - t0
        after = layout(live)
        q1 = {e: timed(e) for e in ("spark", "duckdb")}
        f0, b0, n0 = before.totals()
        f1, b1, n1 = after.totals()
        assert n0 == n1 == batches * rows, (n0, n1)
        return {
            "bench": "compact", "batches": len(r.batches), "rows": n1, "ingest_seconds": round(ingest_s, 1),
            "live_files_before": f0, "live_bytes_before": b0, "live_files_after": f1, "live_bytes_after": b1,
            "days_compacted": len(p.live.days), "optimize_seconds": round(optimize_s, 2),
            "query_seconds_before": {k: round(v, 3) for k, v in q0.items()},
            "query_seconds_after": {k: round(v, 3) for k, v in q1.items()},
            "query_ratio_after_to_before": {k: round(q1[k] / q0[k], 2) for k in q0},
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
