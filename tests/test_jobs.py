"""Compaction, VACUUM and jobs rounds on real Spark + Delta, read back with delta-rs and DuckDB:
archive days rewritten in their order with vectors, lookups and verify unchanged; compaction and
archiving racing on a day; retention; the history and due logic of ``jobs run``."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lakehouse.archive.vectors import batch_order
from lakehouse.errors import CommitConflict, LakehouseError
from lakehouse.jobs import compact
from lakehouse.layout import layout
from tests.conftest import TRIPS_SMALL, Project

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]
DAYS = [dt.date(2026, 11, 15), dt.date(2026, 11, 16), dt.date(2026, 11, 17)]
JOBS_YAML = "jobs: {target_file_size: 8KB, compact_min_files: 2, retention: 1h}\n"


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def batch(tag: str, n: int, rnd: random.Random, days: list[dt.date]) -> list[list[object]]:
    return [[f"{tag}-{i}", rnd.choice([1, 2, 3, 5, 8, None]), rnd.randint(0, 3), rnd.choice([1.0, 1.1, None, float("nan")]),
             round(rnd.random() * 40, 2), f"{rnd.choice(days)}T{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00Z"]
            for i in range(n)]


@pytest.fixture(scope="module")
def template(tmp_path_factory, spark) -> Path:
    """Three archived days (each one file, too big for the 8KB target) and a live day of small
    files: built once, copied for each test."""
    p = Project(tmp_path_factory.mktemp("jobs") / "template").table(TRIPS_SMALL + JOBS_YAML).create("trips")
    rnd = random.Random(7)
    for b in range(3):
        p.lh.load("trips", [p.csv(f"a{b}.csv", HEADER, batch(f"a{b}", 1500, rnd, DAYS))])
    p.lh.archive("trips", now=ts("2026-11-19T00:00:00Z"))
    for b in range(4):
        p.lh.load("trips", [p.csv(f"l{b}.csv", HEADER, batch(f"l{b}", 40, rnd, [dt.date(2026, 11, 18)]))])
    return p.root


@pytest.fixture
def table(template, tmp_path):
    shutil.copytree(template, tmp_path / "proj")
    return Project(tmp_path / "proj")


def day_rows(p, day: dt.date, version: int | None = None) -> list[dict]:
    """An archive day's rows in batch order (what the vector files describe)."""
    base = p.lh.paths("trips").archive
    files = [f"{base}/{f.path}" for f in layout(base, version).by_day()[day]]
    rows: list[dict] = []
    for f in batch_order(files):
        rows += pq.read_table(f).to_pylist()
    return [{k: "NaN" if isinstance(v, float) and v != v else v for k, v in r.items() if k != "event_date"}
            for r in rows]


def vector_bytes(p) -> dict[str, str]:
    root = Path(p.lh.paths("trips").vectors)
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(root.rglob("*"))
            if f.is_file() and not f.name.startswith(".")}


def answers(p, engine: str = "spark") -> list[dict]:
    sql = ("SELECT event_date, count(*) AS n, count(DISTINCT trip_id) AS k, sum(CAST(round(fare_total * 100) AS BIGINT)) AS s "
           "FROM trips GROUP BY event_date ORDER BY event_date")
    return p.lh.query(sql, engine).to_pylist()


def test_archive_days_are_rewritten_in_order_and_vectors_stay_valid(table):
    p = table
    paths = p.lh.paths("trips")
    before_rows = {day: day_rows(p, day) for day in DAYS}
    before_vectors = vector_bytes(p)
    before_lookup = {day: p.lh.lookup("trips", day, ["city_id=3"]) for day in DAYS}
    before_answers = answers(p)

    dry = p.lh.optimize("trips", dry_run=True)
    assert dry.dry_run and sorted(dry.archive.days) == DAYS and list(dry.live.days) == [dt.date(2026, 11, 18)]
    assert layout(paths.archive).version == dry.archive.version  # the dry run changed nothing

    r = p.lh.optimize("trips")
    assert r.archive.files_before == 3 and r.archive.files_after > 3
    assert r.live.files_before == 4 and r.live.files_after < 4
    assert r.archive.version_after == r.archive.version + 1
    for day in DAYS:
        assert len(layout(paths.archive).by_day()[day]) > 1
        assert day_rows(p, day) == before_rows[day]  # same rows, same order
        assert p.lh.lookup("trips", day, ["city_id=3"]) == before_lookup[day]
    assert vector_bytes(p) == before_vectors
    assert answers(p) == before_answers == answers(p, "duckdb")
    assert all(c.ok for c in p.lh.verify("trips")), [c.as_dict() for c in p.lh.verify("trips") if not c.ok]
    # the commit is a rearrangement: no data change, the cutoff unchanged
    from delta.tables import DeltaTable

    last = DeltaTable.forPath(p.lh.spark(), paths.archive).history(1).collect()[0]
    assert last["operationParameters"]["mode"] == "Overwrite" and last["isBlindAppend"] is False
    assert p.lh.tables()[0].cutoff == int(ts("2026-11-18T00:00:00Z").timestamp())
    again = p.lh.optimize("trips")
    assert again.empty  # converged


def test_a_sort_column_filter_reads_a_fraction_of_a_compacted_day(table, spark):
    p = table
    p.lh.optimize("trips")
    day = DAYS[1]
    n_files = len(layout(p.lh.paths("trips").archive).by_day()[day])
    df = spark.read.format("delta").load(p.lh.paths("trips").archive).where(
        f"event_date = DATE'{day}' AND city_id = 1")
    rows = df.count()
    rng = p.lh.lookup("trips", day, ["city_id=1"]).range
    assert rows == rng.end - rng.start > 0
    read = _files_read(df)
    assert 1 <= read < n_files, (read, n_files)


def _files_read(df) -> int:
    df.collect()
    found: list[int] = []

    def walk(node) -> None:
        if node.nodeName().startswith("AdaptiveSparkPlan"):
            walk(node.executedPlan())
            return
        metrics = node.metrics()
        if "Scan" in node.nodeName() and metrics.contains("numFiles"):
            found.append(int(metrics.apply("numFiles").value()))
        it = node.children().iterator()
        while it.hasNext():
            walk(it.next())

    walk(df._jdf.queryExecution().executedPlan())
    return sum(found)


def test_an_archive_run_committing_after_the_compaction_plan_wins_and_compaction_plans_again(table):
    p = table
    d, paths = p.lh.definition("trips"), p.lh.paths("trips")
    plan = compact.plan(d, paths)
    # an archive run lands rows into a planned day after the plan
    p.lh.load("trips", [p.csv("late.csv", HEADER, [["late-1", 3, 1, 1.0, 9.5, "2026-11-16T05:00:00Z"]])])
    r = p.lh.archive("trips", now=ts("2026-11-19T00:00:00Z") + dt.timedelta(hours=1))
    assert r.committed and dt.date(2026, 11, 16) in r.plan.days
    expected = {day: day_rows(p, day) for day in DAYS}
    compact.Compaction(p.lh.spark(), d, paths).execute(plan)
    assert plan.archive.version == r.plan.archive_version + 1  # planned again on the archive's commit
    for day in DAYS:
        assert day_rows(p, day) == expected[day]
    assert p.lh.query("SELECT count(*) AS n FROM trips WHERE trip_id = 'late-1'").to_pylist() == [{"n": 1}]
    assert all(c.ok for c in p.lh.verify("trips"))


def test_a_compaction_committing_after_the_archive_plan_makes_the_archive_run_retry(table):
    from lakehouse.archive.run import ArchiveJob

    p = table
    d = p.lh.definition("trips")
    p.lh.load("trips", [p.csv("late.csv", HEADER, [["late-2", 5, 0, 1.0, 1.5, "2026-11-17T05:00:00Z"]])])
    job = ArchiveJob(p.lh.spark(), p.settings.warehouse, d)
    aplan = job.plan(ts("2026-11-19T01:00:00Z"))
    p.lh.optimize("trips")  # commits on the archive between the plan and the commit
    with pytest.raises(CommitConflict, match="changed since the plan"):
        job.execute(aplan)
    assert all(c.ok for c in p.lh.verify("trips"))
    r = p.lh.archive("trips", now=ts("2026-11-19T01:00:00Z"))  # the retry
    assert r.committed
    assert p.lh.query("SELECT count(*) AS n FROM trips WHERE trip_id = 'late-2'").to_pylist() == [{"n": 1}]
    assert all(c.ok for c in p.lh.verify("trips"))


def test_optimize_one_day_and_a_day_written_under_other_sort_columns_is_left_alone(table):
    p = table
    r = p.lh.optimize("trips", day=DAYS[0])
    assert list(r.archive.days) == [DAYS[0]] and not r.live.days  # live has no small files that day
    assert len(layout(p.lh.paths("trips").archive).by_day()[DAYS[1]]) == 1


def test_vacuum_keeps_what_a_snapshot_in_retention_reads_and_refuses_a_shorter_retention(table, spark):
    p = table
    paths = p.lh.paths("trips")
    v0 = layout(paths.archive).version
    old_rows = spark.read.format("delta").option("versionAsOf", v0).load(paths.archive).count()
    p.lh.optimize("trips")
    with pytest.raises(LakehouseError, match=r"--retain 1m is below the retention of trips/.*pass --force"):
        p.lh.vacuum("trips", retain="1m")
    v = p.lh.vacuum("trips")  # retention: the table's (1h, from jobs.retention)
    assert v.removed == 0 or not v.files.get("archive")
    # the snapshot before the compaction is still readable: its files are inside the retention
    assert spark.read.format("delta").option("versionAsOf", v0).load(paths.archive).count() == old_rows
    # orphans: a vector file of a run that never committed, staging of a finished archive run
    orphan = Path(paths.vectors) / "city_id" / "20261116-1900000000"
    orphan.write_bytes(b"junk")
    staging = Path(paths.staging) / "archive-1-deadbeef"
    staging.mkdir(parents=True)
    (staging / "x.parquet").write_bytes(b"x")
    dry = p.lh.vacuum("trips", dry_run=True)
    assert str(orphan) in dry.vector_files and str(staging) in dry.staging and orphan.exists()
    forced = p.lh.vacuum("trips", retain="0s", force=True)
    assert forced.files["archive"] and not orphan.exists() and not staging.exists()
    assert all(not os.path.exists(f.removeprefix("file:")) for f in forced.files["archive"])
    with pytest.raises(Exception, match=r"(?i)version|file|exist"):  # outside the retention now: gone
        spark.read.format("delta").option("versionAsOf", v0).load(paths.archive).select("trip_id").collect()
    assert all(c.ok for c in p.lh.verify("trips"))


def test_jobs_round_runs_what_is_due_once_per_slot_and_records_it(table):
    p = table
    now = ts("2026-11-20T00:10:00Z")
    plan = {(o.decision.job): o for o in p.lh.jobs_run(now=now, dry_run=True)}
    assert all(o.decision.due and not o.ran for o in plan.values())
    assert plan["archive"].plan["cutoff"] == int(ts("2026-11-19T00:10:00Z").timestamp())
    assert plan["compact_archive"].plan["days"] == [d.isoformat() for d in DAYS]
    assert not p.lh.jobs_history()  # a dry run records nothing

    first = {o.decision.job: o for o in p.lh.jobs_run(now=now)}
    assert all(o.ran and o.runs[-1].outcome == "succeeded" for o in first.values())
    hist = p.lh.jobs_history("trips")
    assert [r.job for r in hist] == ["archive", "compact_live", "compact_archive", "vacuum"]
    arch = hist[0]
    assert arch.rows == 160 and arch.started >= now and arch.detail["days"] == ["2026-11-18"]
    comp = hist[2]
    assert comp.files_before == 3 and comp.files_after > 3 and comp.bytes_before > 0

    second = p.lh.jobs_run(now=now + dt.timedelta(minutes=5))
    assert not any(o.ran for o in second) and all("ran at" in o.decision.why for o in second)
    third = {o.decision.job: o for o in p.lh.jobs_run(now=now + dt.timedelta(hours=1))}  # 01:10
    assert third["compact_live"].ran and not third["archive"].ran  # hourly (a new slot) vs every 2h (the same)
    assert len(p.lh.jobs_history()) == 5

    # the history is a Delta table DuckDB reads too
    from lakehouse.query.duckdb import connect

    con = connect()
    hp = os.path.join(p.settings.warehouse, "_lakehouse", "jobs")
    got = con.execute(f"SELECT job, outcome, attempt, rows FROM delta_scan('{hp}') ORDER BY started").fetchall()
    assert got == [(r.job, r.outcome, r.attempt, r.rows) for r in p.lh.jobs_history()]


def test_a_terminal_failure_is_recorded_once_and_waits_for_a_change(table):
    p = table
    now = ts("2026-11-20T01:00:00Z")
    yaml_path = p.root / "tables" / "trips.yaml"
    good = yaml_path.read_text()
    yaml_path.write_text(good.replace("  - {name: event_time", "  - {name: extra, type: int}\n  - {name: event_time"))
    out = {o.decision.job: o for o in p.lh.jobs_run(now=now)}
    assert out["archive"].runs[-1].outcome == "failed" and out["archive"].runs[-1].terminal
    assert len(out["archive"].runs) == 1  # not retried at once
    assert "extra" in out["archive"].runs[-1].error
    again = {o.decision.job: o for o in p.lh.jobs_run(now=now + dt.timedelta(hours=3))}
    assert not again["archive"].ran and "not retried until" in again["archive"].decision.why
    yaml_path.write_text(good)  # the fix
    fixed = {o.decision.job: o for o in p.lh.jobs_run(now=now + dt.timedelta(hours=3))}
    assert fixed["archive"].ran and fixed["archive"].runs[-1].outcome == "succeeded"


def test_a_round_waits_its_whole_lease_wait_for_a_busy_table_then_reports_it(project, monkeypatch):
    """Another job holds the table's lease: the round waits up to LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS
    (its whole time, with backoff), then reports the table busy, records no attempt, and the next
    round runs once the lease is free."""
    import time

    from lakehouse.lease import table_lease

    p = project.table(TRIPS_SMALL + JOBS_YAML).create("trips")
    monkeypatch.setenv("LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS", "2.5")
    now = ts("2026-11-20T00:10:00Z")
    with table_lease(p.lh.paths("trips"), "archive (a test holding it)"):
        t0 = time.monotonic()
        busy = p.lh.jobs_run(now=now)
        waited = time.monotonic() - t0
    assert 2.5 <= waited < 10, waited
    assert all(not o.ran and o.busy and "archive (a test holding it)" in o.busy for o in busy), busy
    assert p.lh.jobs_history() == []
    free = p.lh.jobs_run(now=now)
    assert all(o.ran and o.runs[-1].outcome == "succeeded" for o in free), free
