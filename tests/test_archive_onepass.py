"""The one-pass archive (lakehouse/archive/onepass.py) against the staged path, on the same plan
of the same table (a key, upserts that replace archived rows, late rows, nulls, decimals, booleans,
dates): per day the same rows in the same order, byte-identical vector files, and the figures
of the books equal to the plan's (live) and to Spark's over the staged rows (out)."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

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


def _unreferenced(paths) -> list[str]:
    """Data files in the archive's day folders that its latest version does not reference."""
    from lakehouse import delta_log, storage

    referenced = set(delta_log.add_actions(paths.archive).column("path").to_pylist())
    on_disk = {f"{folder}/{name}" for folder in storage.list_names(paths.archive) if folder.startswith(PARTITION_COLUMN)
               for name in storage.list_names(f"{paths.archive}/{folder}") if name.endswith(".parquet")}
    return sorted(on_disk - referenced)


def test_a_commit_refused_after_the_pass_leaves_the_archive_as_it_was_and_no_file_of_the_run(project, spark,
                                                                                             monkeypatch) -> None:
    """Another commit lands on the archive between the plan and the commit (a compaction, another
    run): the one-pass commit is refused (CommitConflict, nothing committed), the files the pass
    wrote are removed, and the next run archives everything once."""
    from lakehouse import delta_log
    from lakehouse.archive.state import read_snapshot
    from lakehouse.errors import CommitConflict

    rng = random.Random(4)
    p = project.table(TABLE, "trips").create("trips")
    p.lh.load("trips", [p.csv("a.csv", HEADER, _rows(rng, range(40), ["2026-11-16", "2026-11-17"]))])
    d, paths = p.lh.definition("trips"), p.lh.paths("trips")
    job = ArchiveJob(spark, p.settings.warehouse, d, run_id="racer")
    plan = job.plan(dt.datetime(2026, 11, 19, tzinfo=UTC))
    other = delta_log.replace_partitions(paths.archive, plan.archive_version, [], PARTITION_COLUMN, [])
    before = read_snapshot(paths.archive)
    removed: list[int] = []
    real = onepass.remove_written
    monkeypatch.setattr(onepass, "remove_written", lambda *a: removed.append(real(*a)) or removed[-1])
    with pytest.raises(CommitConflict, match="changed since the plan"):
        job.execute(plan)
    after = read_snapshot(paths.archive)
    assert after == before and after.version == other and after.cutoff is None
    assert removed and removed[0] >= len(plan.days)  # the pass had written a file a day at least
    assert _unreferenced(paths) == []
    r = p.lh.archive("trips", now=dt.datetime(2026, 11, 19, tzinfo=UTC))
    assert r.committed and r.rows_archived == 40 and p.lh.tables()[0].archive_rows == 40
    assert _unreferenced(paths) == []
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]


def test_a_failure_after_the_commit_is_in_keeps_every_committed_file(project, spark, monkeypatch) -> None:
    """The commit lands but its caller sees an error (the store's answer lost on the way): the run
    fails, yet none of the files the commit references is removed; the next run finishes the purge."""
    from lakehouse import delta_log
    from lakehouse.archive.state import read_snapshot

    rng = random.Random(5)
    p = project.table(TABLE, "trips").create("trips")
    p.lh.load("trips", [p.csv("a.csv", HEADER, _rows(rng, range(30), ["2026-11-16", "2026-11-17"]))])
    paths = p.lh.paths("trips")
    real = delta_log.replace_partitions

    def lost_answer(*args, **kwargs):
        real(*args, **kwargs)
        raise OSError("connection reset by peer")

    monkeypatch.setattr(delta_log, "replace_partitions", lost_answer)
    with pytest.raises(OSError, match="connection reset"):
        p.lh.archive("trips", now=dt.datetime(2026, 11, 19, tzinfo=UTC))
    monkeypatch.undo()
    committed = read_snapshot(paths.archive).cutoff
    assert committed is not None and _unreferenced(paths) == []
    files = delta_log.add_actions(paths.archive).column("path").to_pylist()
    assert files and all((Path(paths.archive) / f).exists() for f in files)
    assert p.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [{"n": 30}]
    r = p.lh.archive("trips", now=dt.datetime(2026, 11, 19, tzinfo=UTC))
    assert not r.plan.advances and p.lh.tables()[0].live_rows == 0 and p.lh.tables()[0].archive_rows == 30
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]
