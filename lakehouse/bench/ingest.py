"""``lakehouse bench ingest``: ``ingest`` of many small files and of one big file against
Spark's own file streaming source writing the same files to Delta, in one process (P5: the goal
is ingest at most 1.0x the stream on both inputs, with every guarantee ingest gives)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from lakehouse.bench.sampling import Side, measure, ratio
from lakehouse.bench.workload import INGEST_TABLE, make_project, write_trips_csv
from lakehouse.output import Progress, quiet


def bench_ingest(master: str, small_files: int = 1000, small_rows: int = 1000, big_mb: int = 1024,
                 blocks_per_batch: int = 256, repeats: int = 3, warmup: bool = True,
                 report: Progress = quiet) -> dict[str, Any]:
    """``ingest --drain`` of many small files and of one big file, each against Spark's own file
    streaming source (CSV, trigger availableNow) writing the same files to a Delta table
    partitioned the same way, in one process: per input, a warm-up of both on three small files,
    then ``repeats`` interleaved runs of each (``bench.sampling``), every run into a fresh table."""
    from lakehouse import delta_log

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-ingest-"))
    table = INGEST_TABLE.replace("BLOCKS", str(blocks_per_batch))
    try:
        report("generating the inputs")
        warm = root / "in-warmup"
        warm.mkdir()
        for k in range(3):
            write_trips_csv(warm / f"w{k}.csv", 2000, seed=900 + k)
        small = root / "in-small"
        small.mkdir()
        for k in range(small_files):
            write_trips_csv(small / f"s{k:05d}.csv", small_rows, seed=k)
        big = root / "in-big"
        big.mkdir()
        big_rows = max(1, big_mb * 1_000_000 // 76)  # ~76 bytes a row
        write_trips_csv(big / "big.csv", big_rows, seed=10_000)
        projects: dict[str, Any] = {}
        spark = make_project(root / "spark", master, table).spark()

        def case(name: str, folder: Path, files: int, rows: int) -> dict[str, Any]:
            """Both sides on one input: their samples and figures."""
            def source(i: int) -> tuple[Path, int]:
                """The folder and rows of run ``i`` (the warm-up's small files for -1)."""
                return (warm, 6000) if i < 0 else (folder, rows)

            def fresh(i: int) -> None:
                """A fresh project for run ``i`` of ingest (the previous one goes)."""
                old = projects.pop(name, None)
                if old is not None:
                    shutil.rmtree(old.settings.project, ignore_errors=True)
                projects[name] = make_project(root / f"{name}-{i + 2}", master, table)

            def ingest(i: int) -> Any:
                """One timed ``ingest --drain``, its rows checked."""
                where, want = source(i)
                lh = projects[name]
                r = lh.ingest("bench", str(where), drain=True)
                got = delta_log.row_count(lh.paths("bench").live)
                if got != want or r.rows != want:
                    raise RuntimeError(f"bench ingest: {name}: {got} rows in live, {r.rows} ingested, not {want}")
                return r

            def out(i: int) -> Path:
                """Where run ``i`` of Spark's stream writes."""
                return root / f"stream-{name}-{i + 2}"

            def stream(i: int) -> int:
                """One timed run of Spark's file stream, its rows checked."""
                where, want = source(i)
                got = _spark_stream(spark, projects[name].definition("bench"), where, out(i))
                if got != want:
                    raise RuntimeError(f"bench ingest: {name}: Spark's stream wrote {got} rows, not {want}")
                return got

            samples = measure({"ingest": Side(ingest, fresh),
                               "spark_stream": Side(stream, lambda i: shutil.rmtree(out(i - 1), ignore_errors=True))},
                              repeats, warmup, lambda what: report(f"{name}: {what}"))
            size = sum(f.stat().st_size for f in folder.iterdir())
            med = {side: s.median for side, s in samples.items()}
            return {
                "files": files, "rows": rows, "megabytes": round(size / 1e6, 1),
                "batches": len(samples["ingest"].results[-1].batches),
                "sides": {side: s.as_dict() for side, s in samples.items()},
                "ingest_rows_per_s": round(rows / med["ingest"]), "spark_stream_rows_per_s": round(rows / med["spark_stream"]),
                "ingest_files_per_s": round(files / med["ingest"], 2),
                "ratio_ingest_to_spark_stream": ratio(samples["ingest"], samples["spark_stream"]),
            }

        cases = {"small_files": case("small_files", small, small_files, small_files * small_rows),
                 "big_file": case("big_file", big, 1, big_rows)}
        return {"master": master, "blocks_per_batch": blocks_per_batch, "repeats": repeats, **cases}
    finally:
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
