"""The one-pass archive (lakehouse/archive/onepass.py) against the staged path, on the same plan
of the same table (a key, upserts that replace archived rows, late rows, nulls, decimals, booleans,
dates): per day the same rows in the same order, byte-identical vector files, and the figures
of the books equal to the plan's (live) and to Spark's over the staged rows (out)."""

from __future__ import annotations

import datetime as dt
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.archive import ledger_table, onepass, stage
from lakehouse.archive.ledger import fold, stored_columns
from lakehouse.archive.run import ArchiveJob
from lakehouse.definitions import PARTITION_COLUMN
from tests.conftest import TRIPS_SMALL

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "fare_local", "is_pool", "trip_date", "event_time"]
TABLE = TRIPS_SMALL.replace("sort_columns: [city_id, status, fx_rate]", "sort_columns: [city_id, status, fx_rate]\n  vectors: all")


def _rows(rng: random.Random, keys: range, days: list[str]) -> list[list]:
    def maybe(v):
        return "" if rng.random() < 0.1 else v

    return [[f"k{k}", maybe(rng.randrange(4)), maybe(rng.randrange(3)), maybe(rng.choice([0.5, 1.0, 1.25])),
             maybe(round(rng.random() * 50, 2)), maybe(f"{rng.randrange(10000) / 100:.2f}"),
             maybe(rng.choice(["true", "false"])), maybe("2026-11-01"),
             f"{rng.choice(days)}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(10**6):06d}Z"]
            for k in keys]


def test_one_pass_writes_what_the_staged_path_writes(project, spark, tmp_path) -> None:
    rng = random.Random(20)
    p = project.table(TABLE, "trips").create("trips")
    p.lh.load("trips", [p.csv("a.csv", HEADER, _rows(rng, range(300), ["2026-11-16", "2026-11-17"]))])
    assert p.lh.archive("trips", now=dt.datetime(2026, 11, 19, tzinfo=UTC)).committed
    # upserts of archived keys (they replace archived rows), new rows, late rows on archived days
    p.lh.load("trips", [p.csv("b.csv", HEADER, _rows(rng, range(150, 450), ["2026-11-16", "2026-11-17", "2026-11-18"]))])
    d, paths = p.lh.definition("trips"), p.lh.paths("trips")
    job = ArchiveJob(spark, p.settings.warehouse, d)
    plan = job.plan(dt.datetime(2026, 11, 20, tzinfo=UTC))
    assert len(plan.days) == 3 and sum(plan.archive_rows.values()) > 0

    staging = str(tmp_path / "staging")
    stage.stage_days(spark, d, paths, plan, staging)
    _, staged_counts = stage.write_vectors(spark, d, paths, plan, staging)
    task = onepass.write_task(d, paths, plan, "cmp", table_root=str(tmp_path / "table"),
                              vectors_root=str(tmp_path / "vectors"))
    records = onepass.write_pass(spark, d, paths, plan, task)

    names = [n for n, _ in task.columns]
    schema = pa.schema([pa.field(n, t) for n, t in task.columns])
    h = ledger_table.hash_column(stored_columns(d)).alias("_lh_hash")
    out_sums = ledger_table.figures_by(stage.read_staged(spark, d, staging).select(PARTITION_COLUMN, h),
                                       [PARTITION_COLUMN], hashed="_lh_hash")
    for day, files in stage.staged_files(staging).items():
        want = pa.concat_tables([pq.read_table(f, coerce_int96_timestamp_unit="us").select(names).cast(schema)
                                 for f in files])
        mine = sorted((r for r in records if r["kind"] == "file" and r["day"] == day.isoformat()), key=lambda r: r["path"])
        got = pa.concat_tables([pq.read_table(tmp_path / "table" / r["path"]) for r in mine])
        assert got.to_pylist() == want.to_pylist(), day
        assert sum(json.loads(r["stats"])["numRecords"] for r in mine) == got.num_rows == staged_counts[day]
        for col in [c.name for c in d.columns]:
            name = f"{day:%Y%m%d}-{plan.cutoff}"
            assert (tmp_path / "vectors" / col / name).read_bytes() == \
                open(f"{paths.vectors}/{col}/{name}", "rb").read(), (day, col)
        figures = {r["side"]: (r["rows"], fold(int(r["sum"]))) for r in records
                   if r["kind"] == "figures" and r["day"] == day.isoformat()}
        assert figures["live"][0] == plan.new_rows.get(day, 0)
        assert figures["live"][1] == fold(plan.new_sums.get(day, 0))
        archived = figures.get("kept", (0, 0))[0] + figures.get("replaced", (0, 0))[0]
        assert archived == plan.archive_rows.get(day, 0)
        assert figures["out"] == (out_sums[(day,)].rows, out_sums[(day,)].checksum)
