"""What the benchmarks run on: the bench tables (YAML), generated trips (into a live Delta table
or as CSV files), a project holding the bench table, and the figures they report."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

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
"""The benchmarks' trips table: a key, three sort columns, every column a vector."""

# the same columns, without a key (both sides of the ingest benchmark append)
INGEST_TABLE = BENCH_TABLE.replace("primary_key: [trip_id]\n", "").split("archive:")[0] + """ingest:
  format: csv
  sort_field: MODIFIED_FILE_TIME
  ingress_delay_interval: 0
  ingress_file_scan_wait: 0s
  block_size: 64MB
  blocks_per_batch: BLOCKS
"""
"""``BENCH_TABLE``'s columns without a key or archive section, ingested from CSV; ``BLOCKS`` is
replaced with the blocks per batch."""


def generate_live(spark: Any, live_path: str, rows: int, start: dt.datetime, days: int, load: str = "bench",
                  first_id: int = 0) -> None:
    """``rows`` generated trips (``BENCH_TABLE``'s columns) spread over ``days`` UTC days from
    ``start``, appended straight into a live Delta table (one load id)."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN
    from lakehouse.spark.session import parallelism

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
    (gen.repartitionByRange(max(1, parallelism(spark)), PARTITION_COLUMN)
     .write.format("delta").mode("append").save(live_path))


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


def make_project(root: Path, master: str, table: str = BENCH_TABLE, store: Settings | None = None,
                 warehouse: str | None = None) -> Lakehouse:
    """A project in ``root`` with the bench table (``table``, YAML) created, its warehouse in
    ``root`` (or ``warehouse``, on the object store and with the Spark of the user's settings
    ``store``)."""
    import dataclasses

    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    (root / "tables").mkdir(parents=True, exist_ok=True)
    (root / "migrations").mkdir(exist_ok=True)
    (root / "tables" / "bench.yaml").write_text(table)
    (root / "migrations" / "0001_bench.py").write_text("def upgrade(ctx):\n    ctx.create_table('bench')\n")
    settings = Settings.resolve(root, str(root / "warehouse"), master, env={})
    if store is not None and warehouse is not None:
        settings = dataclasses.replace(store, project=settings.project, warehouse=warehouse)
    lh = Lakehouse(settings)
    lh.migrate()
    return lh


START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
"""The first day of the benchmarks' generated trips."""


def sorted_delta_write(spark: Any, live: str, definition: Any, days: int, dest: str) -> None:
    """The baseline: the rows of ``live`` sorted the way archiving sorts them, in one plain
    partitioned Delta write to ``dest``."""
    from pyspark.sql import functions as F

    from lakehouse.archive.order import row_order
    from lakehouse.definitions import PARTITION_COLUMN

    rows = spark.read.format("delta").load(live)
    (rows.repartition(days, F.col(PARTITION_COLUMN)).sortWithinPartitions(*row_order(definition))
     .write.format("delta").partitionBy(PARTITION_COLUMN).save(dest))


def archive_run(lh: Any, now: dt.datetime, ledger: bool, one_pass: bool = True) -> Any:
    """One archive run of the bench table, with or without the books (on the staged path with
    ``one_pass`` False); its result."""
    from lakehouse.archive.run import run_archive

    return run_archive(lh.spark, lh.settings.warehouse, lh.definition("bench"), now=now, ledger=ledger,
                       one_pass=one_pass)


class Copies:
    """Fresh copies of template tables for timed runs, one project per side at a time (the
    previous run's goes when the next one's is made)."""

    def __init__(self, root: Path, master: str) -> None:
        self.root = root
        self.master = master
        self.projects: dict[str, Lakehouse] = {}

    def fresh(self, side: str, template: Lakehouse, i: int) -> None:
        """A fresh copy of ``template``'s table for run ``i`` of ``side``."""
        import shutil

        old = self.projects.pop(side, None)
        if old is not None:
            shutil.rmtree(old.settings.project, ignore_errors=True)
        self.projects[side] = copy_of(template, self.root / f"{side}-{i + 2}", self.master)

    def __getitem__(self, side: str) -> Lakehouse:
        return self.projects[side]


def copy_of(template: Lakehouse, folder: Path, master: str) -> Lakehouse:
    """A new project in ``folder`` whose bench table is a copy of ``template``'s (its live,
    archive and bookkeeping), for a run that must start from the same table every time."""
    import shutil

    lh = make_project(folder, master)
    shutil.rmtree(lh.paths("bench").root)
    shutil.copytree(template.paths("bench").root, lh.paths("bench").root)
    return lh
