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


def _timed_archive(lh: Any, now: dt.datetime, ledger: bool) -> tuple[float, Any]:
    """One archive run of the bench table, with or without the books: (seconds, result)."""
    from lakehouse.archive.run import run_archive

    t0 = time.monotonic()
    r = run_archive(lh.spark, lh.settings.warehouse, lh.definition("bench"), now=now, ledger=ledger)
    return time.monotonic() - t0, r


def _ledger_figures(runs: list[tuple[tuple[float, Any], bool]]) -> dict[str, Any]:
    """What the books cost: the mean of the runs with them against the mean without, and the
    mean of each step on either side (the books' own steps: conservation and ledger)."""

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    def side(books: bool) -> tuple[float, dict[str, float]]:
        picked = [(s, r) for (s, r), b in runs if b == books]
        steps = sorted({k for _, r in picked for k in r.timings})
        return mean([s for s, _ in picked]), {k: round(mean([r.timings.get(k, 0.0) for _, r in picked]), 2)
                                              for k in steps}

    with_s, with_steps = side(True)
    without_s, without_steps = side(False)
    own = with_steps.get("conservation", 0.0) + with_steps.get("ledger", 0.0)
    return {
        "runs_per_side": len(runs) // 2,
        "archive_seconds_with_ledger": round(with_s, 2),
        "archive_seconds_without_ledger": round(without_s, 2),
        "ratio_with_to_without": round(with_s / without_s, 3) if without_s else None,
        "conservation_check_seconds": with_steps.get("conservation", 0.0),
        "ledger_write_seconds": with_steps.get("ledger", 0.0),
        "share_of_the_run": round(own / with_s, 3) if with_s else None,
        "steps_with_ledger_seconds": with_steps,
        "steps_without_ledger_seconds": without_steps,
    }


def bench_backfill(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """A backfill of years: ``rows`` trips over ``days`` UTC days (ending two days ago) straight
    into live, archived by one run, against a plain sorted, partitioned Delta write of the same
    rows in the same process; then a second run archives late rows into a few of those days."""
    from lakehouse.archive.order import row_order
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
        (live.orderBy(*row_order(d)).write.format("delta").partitionBy(PARTITION_COLUMN).save(str(root / "baseline")))
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

    from lakehouse.archive.order import row_order
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
        (live.repartition(days, F.col(PARTITION_COLUMN)).sortWithinPartitions(*row_order(d))
         .write.format("delta").partitionBy(PARTITION_COLUMN).save(str(root / "baseline")))
        baseline_s = time.monotonic() - t0

        # with and without the books (the conservation check and the ledger), on copies of the
        # same table, in the order with, without, without, with (and the reverse for the merge
        # run), after a small table archived both ways: order and warm-up effects cancel out
        warm = _bench_project(root / "warm", master)
        generate_live(spark, warm.paths("bench").live, 10_000, start, days)
        _timed_archive(warm, start + dt.timedelta(days=days), ledger=False)
        _timed_archive(warm, start + dt.timedelta(days=days + 2), ledger=True)
        copies = {}
        for name in ("bare1", "bare2", "books2"):
            copies[name] = _bench_project(root / name, master)
            shutil.rmtree(copies[name].paths("bench").root)
            shutil.copytree(lh.paths("bench").root, copies[name].paths("bench").root)
        order = [(lh, True), (copies["bare1"], False), (copies["bare2"], False), (copies["books2"], True)]

        now = start + dt.timedelta(days=days + 2)
        first = [(_timed_archive(project, now, books), books) for project, books in order]
        (archive_s, result), _ = first[0]
        assert all(r.rows_archived == rows for (_, r), _ in first), [r.rows_archived for (_, r), _ in first]
        # a merge run: a tenth of the keys upserted into every day (kept, replaced and live rows)
        upserts = max(1, rows // 10)
        for project, _ in order:
            generate_live(spark, project.paths("bench").live, upserts, start, days, load="upsert")
        later = now + dt.timedelta(minutes=1)
        merge = [(_timed_archive(project, later, books), books) for project, books in reversed(order)]
        for (_, r), books in merge:
            replaced = sum(i.replaced.rows for _, i, _ in r.figures.days) if r.figures else 0
            assert r.rows_archived == upserts and (replaced == upserts or not books), (r.rows_archived, replaced)
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
            "ledger": _ledger_figures(first) | {
                "merge_run_upserted_rows": upserts,
                "merge_run": _ledger_figures(merge),
            },
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


# -- bench open: a table with a long Delta log ---------------------------------------------------

def _hour_rows(schema: Any, hour: int, rows: int, start_us: int, load: str) -> Any:
    """``rows`` generated trips of one hour (``BENCH_TABLE``'s columns, the load, the day) as an
    Arrow table of ``schema`` (the Delta table's)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(hour)
    ts = pa.array(start_us + hour * 3_600_000_000 + rng.integers(0, 3_600_000_000, rows), pa.int64()) \
        .cast(pa.timestamp("us", tz="UTC"))
    return pa.table({
        "trip_id": pa.array([f"H{hour}-{k}" for k in range(rows)]),
        "city_id": pa.array(rng.integers(1, 40, rows).astype(np.int32)),
        "status": pa.array(rng.integers(0, 4, rows).astype(np.int32)),
        "fx_rate": pa.array(np.round(rng.random(rows) + 0.5, 6)),
        "fare_total": pa.array(np.round(rng.random(rows) * 80, 2)),
        "distance_km": pa.array(np.round(rng.random(rows) * 30, 2)),
        "vehicle_type": pa.array(np.array(["economy", "comfort", "xl", "moto"])[rng.integers(0, 4, rows)]),
        "event_time": ts,
        "_lh_load": pa.array([load] * rows),
        "event_date": ts.cast(pa.date32()),
    }).cast(schema)


def build_long_table(spark: Any, path: str, definition: Any, commits: int, rows: int = 40, spark_tail: int = 12,
                     start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)) -> dict[str, Any]:
    """A live-like table of ``definition`` with ``commits`` commits (versions 0 .. commits - 1),
    the way a year of hourly jobs leaves it: created by Spark with lakehouse's properties, then
    one commit an hour of event time, written by delta-rs (about 100 times faster a commit than
    Spark, and checkpointing by the same ``delta.checkpointInterval``): mostly appends of ``rows``
    rows, every 24th a day rewritten sorted into one file (an overwrite of the day two days back,
    as compaction and archiving do: removes and an add), every 97th a delete of some of a day's
    rows. The last ``spark_tail`` commits are Spark appends, so the table's latest checkpoint is
    written by Spark from the history delta-rs wrote, as our Spark writers leave it.

    Returns what was written (``rows``: the table's row count)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    from deltalake.transaction import PostCommitHookProperties

    from lakehouse.definitions import PARTITION_COLUMN
    from lakehouse.physical import create_delta, delta_properties, table_schema

    if commits < spark_tail + 2:
        raise ValueError(f"commits must be at least {spark_tail + 2}, got {commits}")
    create_delta(spark, path, table_schema(definition), True,
                 {**definition.properties(), **delta_properties(definition, "live")})
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    # checkpoints by delta.checkpointInterval; expired log files are looked for at checkpoints
    # only, as Spark does (delta-rs would list the whole log after every commit)
    hook = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
    start_us = int(start.timestamp()) * 1_000_000
    total = replaces = deletes = 0
    t0 = time.monotonic()
    last_rs = commits - spark_tail  # delta-rs writes versions 1 .. last_rs - 1
    for v in range(1, last_rs):
        day = start + dt.timedelta(hours=v - 1)
        old = (day - dt.timedelta(days=2)).date().isoformat()
        # each commit opens the table afresh (from its last checkpoint), as a job does: a long-
        # lived DeltaTable handle gets slower with every commit it makes (delta-rs 1.6)
        if v % 24 == 0 and v > 72:
            part = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(
                f"SELECT * FROM t WHERE {PARTITION_COLUMN} = DATE '{old}' ORDER BY city_id, status, fx_rate, "
                "event_time, trip_id").read_all())
            write_deltalake(path, part.cast(schema), mode="overwrite", predicate=f"{PARTITION_COLUMN} = '{old}'",
                            post_commithook_properties=hook)
            replaces += 1
        elif v % 97 == 0 and v > 72:
            metrics = DeltaTable(path).delete(f"{PARTITION_COLUMN} = '{old}' AND city_id < 4",
                                              post_commithook_properties=hook)
            total -= int(metrics.get("num_deleted_rows", 0))
            deletes += 1
        else:
            write_deltalake(path, _hour_rows(schema, v - 1, rows, start_us, f"load-{v}"), mode="append",
                            post_commithook_properties=hook)
            total += rows
    delta_rs_s = time.monotonic() - t0
    t0 = time.monotonic()
    for v in range(last_rs, commits):
        batch = _hour_rows(schema, v - 1, rows, start_us, f"load-{v}")
        spark.createDataFrame(batch).write.format("delta").mode("append").save(path)
        total += rows
    spark_s = time.monotonic() - t0
    return {"commits": commits, "rows": total, "delta_rs_commits": last_rs - 1,
            "delta_rs_seconds": round(delta_rs_s, 1), "spark_commits": spark_tail + 1,
            "spark_seconds": round(spark_s, 1), "replaces": replaces, "deletes": deletes}


def log_tail(path: str) -> dict[str, Any]:
    """The state of a local table's ``_delta_log``: latest version, the checkpoint
    ``_last_checkpoint`` names, how many JSON commits a reader replays after it, files in the
    folder, and the checkpoint's size and actions (files and the tombstones of removed files
    kept for ``delta.deletedFileRetentionDuration``)."""
    import json

    folder = Path(path) / "_delta_log"
    names = [p.name for p in folder.iterdir()]
    versions = [int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit()]
    last = None
    size = adds = removes = 0
    if (folder / "_last_checkpoint").exists():
        import pyarrow.parquet as pq

        last = int(json.loads((folder / "_last_checkpoint").read_text())["version"])
        parts = [folder / n for n in names if n.startswith(f"{last:020d}.checkpoint")]
        size = sum(p.stat().st_size for p in parts)
        for p in parts:
            t = pq.read_table(p, columns=["add", "remove"])
            adds += t.num_rows - t.column("add").null_count
            removes += t.num_rows - t.column("remove").null_count
    latest = max(versions)
    return {"latest_version": latest, "last_checkpoint": last,
            "json_after_checkpoint": sum(1 for v in versions if v > (last if last is not None else -1)),
            "log_files": len(names), "checkpoint_bytes": size, "checkpoint_adds": adds,
            "checkpoint_removes": removes}


def open_times(spark: Any, path: str) -> dict[str, float]:
    """Seconds to open one table (and count its rows from the log) on each engine: Spark (a
    new DeltaLog: the session's cache cleared, ``DeltaTable.forPath`` and a count, answered
    from the log's statistics), DuckDB (``delta_scan`` count on a fresh connection) and
    delta-rs (``DeltaTable(path)``, and lakehouse's ``row_count``)."""
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import DeltaTable

    from lakehouse.query.duckdb import connect
    from lakehouse.warehouse import row_count

    out: dict[str, float] = {}
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    t0 = time.monotonic()
    SparkDeltaTable.forPath(spark, path).toDF().count()
    out["spark"] = time.monotonic() - t0
    con = connect()
    t0 = time.monotonic()
    con.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchall()
    out["duckdb"] = time.monotonic() - t0
    con.close()
    t0 = time.monotonic()
    DeltaTable(path)
    out["delta_rs"] = time.monotonic() - t0
    t0 = time.monotonic()
    row_count(path)
    out["row_count"] = time.monotonic() - t0
    return out


def counts(spark: Any, path: str) -> dict[str, int]:
    """A table's row count on each engine (Spark, DuckDB, delta-rs's log statistics)."""
    from lakehouse.query.duckdb import connect
    from lakehouse.warehouse import row_count

    con = connect()
    try:
        duck = int(con.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0])
    finally:
        con.close()
    return {"spark": int(spark.read.format("delta").load(path).count()), "duckdb": duck,
            "delta_rs": row_count(path)}


def one_commit_copy(src: str, dst: str, configuration: dict[str, str]) -> None:
    """A table at ``dst`` whose one commit adds exactly the data files of ``src``'s latest
    version (hard links), with their statistics and partition values (delta-rs; its kernel
    refuses to create a table with properties outside ``delta.*``, such as ``lakehouse.*``)."""
    import json
    import os

    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, create_table_with_add_actions

    from lakehouse.definitions import PARTITION_COLUMN

    def value(v: Any) -> Any:
        if isinstance(v, dt.datetime):  # as Delta writes them: UTC, milliseconds
            return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return v.isoformat() if isinstance(v, dt.date) else v

    table = DeltaTable(src)
    adds = []
    for a in pa.table(table.get_add_actions(flatten=False)).to_pylist():
        os.makedirs(os.path.dirname(os.path.join(dst, a["path"])), exist_ok=True)
        os.link(os.path.join(src, a["path"]), os.path.join(dst, a["path"]))
        stats = {"numRecords": a["num_records"],
                 "minValues": {k: value(v) for k, v in (a.get("min") or {}).items() if v is not None},
                 "maxValues": {k: value(v) for k, v in (a.get("max") or {}).items() if v is not None},
                 "nullCount": {k: v for k, v in (a.get("null_count") or {}).items() if v is not None}}
        part = {k: value(v) for k, v in a["partition"].items()}
        adds.append(AddAction(a["path"], a["size_bytes"], part, a["modification_time"], True, json.dumps(stats)))
    create_table_with_add_actions(dst, table.schema(), adds, partition_by=[PARTITION_COLUMN],
                                  configuration=configuration)


def bench_open(master: str, commits: int = 2000, rounds: int = 5, workdir: str | None = None) -> dict[str, Any]:
    """Opening a table of ``commits`` commits (``build_long_table``) against a baseline holding
    the very same data files in one commit (``one_commit_copy``), on Spark, DuckDB and delta-rs,
    in one process: the median of ``rounds`` opens of each, after a warm-up round. The two differ
    only in their history, so the ratio is what the long log costs."""
    import statistics

    import yaml
    from deltalake import DeltaTable

    from lakehouse.definitions import TableDefinition
    from lakehouse.physical import delta_properties
    from lakehouse.session import get_spark

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-open-"))
    try:
        definition = TableDefinition.model_validate(yaml.safe_load(BENCH_TABLE))
        spark = get_spark(master)
        long, base = str(root / "long"), str(root / "baseline")
        generated = build_long_table(spark, long, definition, commits)
        one_commit_copy(long, base, delta_properties(definition, "live"))
        for p in (long, base):
            got = counts(spark, p)
            assert set(got.values()) == {generated["rows"]}, (p, got, generated["rows"])
        samples: dict[str, dict[str, list[float]]] = {"long": {}, "baseline": {}}
        for r in range(rounds + 1):
            for name, p in (("long", long), ("baseline", base)):
                for engine, secs in open_times(spark, p).items():
                    if r:  # round 0 warms up
                        samples[name].setdefault(engine, []).append(secs)
        doc: dict[str, Any] = {"master": master, "commits": commits, "rows": generated["rows"],
                               "rounds": rounds, "generate": generated}
        doc["log"] = {**log_tail(long), "active_files": len(DeltaTable(long).file_uris()),
                      "baseline_active_files": len(DeltaTable(base).file_uris())}
        for engine in samples["long"]:
            a = statistics.median(samples["long"][engine])
            b = statistics.median(samples["baseline"][engine])
            doc[engine] = {"open_seconds": round(a, 3), "baseline_open_seconds": round(b, 3),
                           "ratio_to_baseline": round(a / b, 2) if b else None}
        return doc
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
