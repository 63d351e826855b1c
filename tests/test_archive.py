"""Archiving on real Spark + Delta, read back through DuckDB: the issue's example, merging with
upserts and late rows, no-op and repeated runs, append-only tables, split queries, verify."""

from __future__ import annotations

import datetime as dt
import random
import threading

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from lakehouse.archive.reader import read_day
from lakehouse.archive.state import read_snapshot
from tests.conftest import CLICKS, TRIPS_SMALL

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


@pytest.fixture
def trips(project, spark):
    return project.table(TRIPS_SMALL).create("trips")


def load(p, name, rows):
    return p.lh.load("trips", [p.csv(name, HEADER, rows)])


def totals(p, engine):
    sql = "SELECT count(*) AS n, count(DISTINCT trip_id) AS k, sum(fare_total) AS s FROM trips"
    r = p.lh.query(sql, engine).to_pylist()[0]
    return r["n"], r["k"], round(r["s"] or 0, 6)


def test_the_issue_example(trips):
    rows = [  # (trip, city, status, fx, fare, time): shuffled on purpose
        ["e", 18, 0, 1.2, 8.9, "2026-11-18T05:00:00Z"],
        ["b", 1, 0, 1.0, 4.3, "2026-11-18T02:00:00Z"],
        ["c", 1, 1, "", "", "2026-11-18T03:00:00Z"],
        ["f", 18, 0, 1.3, 7.2, "2026-11-18T06:00:00Z"],
        ["a", 1, 0, 1.0, 5.2, "2026-11-18T01:00:00Z"],
        ["d2", 5, 0, 1.0, 3.6, "2026-11-18T04:30:00Z"],
        ["d1", 5, 0, 1.0, 6.3, "2026-11-18T04:00:00Z"],
    ]
    load(trips, "ex.csv", rows)
    said: list[str] = []
    r = trips.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"), report=said.append)
    assert r.committed and r.rows_archived == 7 and r.plan.days == (dt.date(2026, 11, 18),)
    # each step said as it starts (a line on a terminal: cli.output.steps)
    assert said == [f"archive trips: {s}" for s in (
        "recover", "plan", "write (1 day(s), 7 live rows, 0 archived rows)", "conservation", "commit",
        "check", "ledger", "purge", "clean")]
    said.clear()
    trips.lh.optimize("trips", dry_run=False, report=said.append)
    trips.lh.vacuum("trips", dry_run=True, report=said.append)
    assert said[0] == "optimize trips: plan" and said[-5:] == [
        f"vacuum trips: {s}" for s in ("live", "archive", "rejects", "vectors", "staging")]
    assert r.plan.cutoff == int(ts("2026-11-19T00:00:00Z").timestamp())
    day = dt.date(2026, 11, 18)

    def runs(col):
        t = read_day(trips.lh.definition("trips"), trips.lh.paths("trips"), col, day).table.to_pydict()
        return list(zip(t["value"], t["null"], t["count"], t["accumulative_count"]))

    assert runs("city_id") == [(1, False, 3, 3), (5, False, 2, 5), (18, False, 2, 7)]
    assert runs("status") == [(0, False, 2, 2), (1, False, 1, 3), (0, False, 2, 5), (0, False, 2, 7)]
    assert runs("fx_rate") == [(1.0, False, 2, 2), (None, True, 1, 3), (1.0, False, 2, 5), (1.2, False, 1, 6),
                               (1.3, False, 1, 7)]
    fares = read_day(trips.lh.definition("trips"), trips.lh.paths("trips"), "fare_total", day)
    assert not fares.encoded and fares.table.column("value").to_pylist() == [5.2, 4.3, None, 6.3, 3.6, 8.9, 7.2]
    # the file is a plain Arrow IPC file as the contract says
    with open(fares.file, "rb") as f:
        assert ipc.open_file(f).read_all().column_names == ["value"]
    assert fares.file.endswith(f"/vectors/fare_total/20261118-{r.plan.cutoff}")
    # lookups by binary search
    for where, want in [(["city_id=5"], (3, 5)), (["city_id=5", "status=0"], (3, 5)),
                        (["city_id=18", "status=0", "fx_rate=1.3"], (6, 7)), (["city_id=1", "status=1", "fx_rate=NULL"], (2, 3)),
                        (["city_id=2"], (3, 3)), (["city_id=1", "status=0"], (0, 2))]:
        rng, _ = trips.lh.lookup("trips", day, where)
        assert (rng.start, rng.end) == want, where
    # the archive holds the rows, live none; both engines see all of them once
    assert trips.lh.tables()[0].live_rows == 0 and trips.lh.tables()[0].archive_rows == 7
    assert totals(trips, "spark") == totals(trips, "duckdb") == (7, 7, 35.5)
    assert all(c.ok for c in trips.lh.verify("trips")), [c for c in trips.lh.verify("trips") if not c.ok]


def test_merge_into_existing_days_with_upserts_and_late_rows(trips):
    rows = [[f"t{i}", i % 3, i % 2, 1.0, float(i), f"2026-11-{17 + i % 3}T{i % 24:02d}:10:00Z"] for i in range(30)]
    load(trips, "a.csv", rows)
    expect = totals(trips, "duckdb")
    assert expect[0] == 30
    r1 = trips.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))  # cutoff 2026-11-19T12:00
    cutoff = r1.plan.cutoff
    assert r1.plan.days == (dt.date(2026, 11, 17), dt.date(2026, 11, 18), dt.date(2026, 11, 19))
    assert totals(trips, "spark") == totals(trips, "duckdb") == expect
    st = trips.lh.tables()[0]
    assert st.cutoff == cutoff and st.archive_rows + st.live_rows == 30 and st.waiting_rows == 0
    # a late row below the cutoff and an update of an archived key: invisible until the next run
    load(trips, "late.csv", [["late1", 7, 0, 2.0, 100.0, "2026-11-17T09:00:00Z"],
                             ["t0", 0, 1, 1.0, 1000.0, "2026-11-17T00:10:00Z"]])
    assert totals(trips, "duckdb") == expect
    assert trips.lh.tables()[0].waiting_rows == 2
    # a purge (a run's recovery) finds no archived (day, load) pair in live: no Spark job, no commit
    from lakehouse.archive.purge import purge

    live = trips.lh.paths("trips").live
    before = read_snapshot(live).version
    spark = trips.lh.spark()
    spark.sparkContext.setJobGroup("purge-with-late-rows", "the purge's own jobs")
    try:
        assert purge(spark, trips.lh.definition("trips"), trips.lh.paths("trips")) == 0
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup("purge-with-late-rows")) == []
    assert read_snapshot(live).version == before and trips.lh.tables()[0].waiting_rows == 2
    r2 = trips.lh.archive("trips", now=ts("2026-11-20T13:00:00Z"))
    assert r2.plan.late_rows == 2 and dt.date(2026, 11, 17) in r2.plan.days
    n, k, s = totals(trips, "duckdb")
    assert (n, k) == (31, 31) and s == pytest.approx(expect[2] + 100.0 + 1000.0 - 0.0)
    assert totals(trips, "spark") == (n, k, s)
    t0 = trips.lh.query("SELECT status, fare_total FROM trips WHERE trip_id = 't0'", "duckdb").to_pylist()
    assert t0 == [{"status": 1, "fare_total": 1000.0}]
    assert trips.lh.tables()[0].waiting_rows == 0
    assert all(c.ok for c in trips.lh.verify("trips"))


def test_runs_with_nothing_to_do_and_repeated_runs(trips):
    load(trips, "a.csv", [["a", 1, 0, 1.0, 1.0, "2026-11-18T10:00:00Z"], ["b", 1, 0, 1.0, 2.0, "2026-11-19T10:00:00Z"]])
    now = ts("2026-11-20T00:00:00Z")
    r = trips.lh.archive("trips", now=now)
    assert r.committed and r.rows_archived == 1
    version = read_snapshot(trips.lh.paths("trips").archive).version
    again = trips.lh.archive("trips", now=now)
    assert not again.plan.advances and not again.committed
    earlier = trips.lh.archive("trips", now=ts("2026-11-19T00:00:00Z"))
    assert not earlier.plan.advances
    assert read_snapshot(trips.lh.paths("trips").archive).version == version
    # the cutoff advances even when no live row is old enough (an empty commit)
    r = trips.lh.archive("trips", now=ts("2026-11-20T05:00:00Z"))
    assert r.committed and r.rows_archived == 0 and r.plan.days == ()
    assert read_snapshot(trips.lh.paths("trips").archive).cutoff == r.plan.cutoff
    assert totals(trips, "duckdb") == (2, 2, 3.0)
    plan = trips.lh.archive("trips", now=ts("2026-11-21T00:00:00Z"), dry_run=True).plan
    assert plan.rows == 1 and plan.days == (dt.date(2026, 11, 19),)
    assert read_snapshot(trips.lh.paths("trips").archive).cutoff == r.plan.cutoff  # dry run changed nothing


def test_append_only_table_keeps_duplicates_through_archiving(project, spark):
    project.table(CLICKS.replace("event_time: at", "event_time: at\narchive: {delay: 1h, sort_columns: [url]}")).create("clicks")
    rows = [[1, "/a", "2026-11-20T10:00:00Z"], [1, "/a", "2026-11-20T10:00:00Z"], [2, "/b", "2026-11-20T11:30:00Z"]]
    f = project.csv("c.csv", ["user_id", "url", "at"], rows)
    project.lh.load("clicks", [f])
    project.lh.archive("clicks", now=ts("2026-11-20T12:00:00Z"))  # cutoff 11:00: two rows archived
    project.lh.load("clicks", [f], force=True)  # the same rows again: two of them late
    count = "SELECT count(*) AS n FROM clicks"
    assert project.lh.query(count, "duckdb").to_pylist() == [{"n": 4}]  # 2 archived + 1 live + late hidden
    project.lh.archive("clicks", now=ts("2026-11-20T13:00:00Z"))
    assert project.lh.query(count, "duckdb").to_pylist() == [{"n": 6}]
    assert project.lh.query(count, "spark").to_pylist() == [{"n": 6}]
    assert project.lh.tables()[0].live_rows == 0
    runs = read_day(project.lh.definition("clicks"), project.lh.paths("clicks"), "url", dt.date(2026, 11, 20)).table
    assert runs.to_pydict()["value"] == ["/a", "/b"] and runs.to_pydict()["count"] == [4, 2]
    assert all(c.ok for c in project.lh.verify("clicks"))


def test_verify_catches_a_corrupted_vector_file(trips):
    load(trips, "a.csv", [[f"t{i}", i % 4, 0, 1.0, float(i), f"2026-11-18T{i:02d}:00:00Z"] for i in range(20)])
    trips.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert all(c.ok for c in trips.lh.verify("trips"))
    dv = read_day(trips.lh.definition("trips"), trips.lh.paths("trips"), "fare_total", dt.date(2026, 11, 18))
    values = dv.table.column("value").to_pylist()
    values[3], values[4] = values[4], values[3]
    with pa.OSFile(dv.file, "wb") as sink, ipc.new_file(sink, dv.table.schema) as w:
        w.write_table(pa.table({"value": pa.array(values, pa.float64())}))
    bad = [c for c in trips.lh.verify("trips") if not c.ok]
    assert [c.name for c in bad] == ["vector files decode to their day"]
    assert dv.file in bad[0].detail and "record 3" in bad[0].detail
    # a run table whose counts do not add up is caught too
    cv = read_day(trips.lh.definition("trips"), trips.lh.paths("trips"), "city_id", dt.date(2026, 11, 18))
    d = cv.table.to_pydict()
    d["accumulative_count"][0] += 1
    with pa.OSFile(cv.file, "wb") as sink, ipc.new_file(sink, cv.table.schema) as w:
        w.write_table(pa.table(d, schema=cv.table.schema))
    details = " ".join(c.detail for c in trips.lh.verify("trips") if not c.ok)
    assert "accumulative_count is not the running sum" in details


def test_queries_running_during_archive_runs_are_exact(trips):
    rng = random.Random(3)
    rows = [[f"q{i}", rng.randrange(4), rng.randrange(3), 1.0, float(i % 50),
             (ts("2026-11-15T00:00:00Z") + dt.timedelta(minutes=37 * i)).isoformat()] for i in range(200)]
    load(trips, "a.csv", rows)
    expect = totals(trips, "duckdb")
    stop = threading.Event()
    seen: list[tuple] = []
    errors: list[BaseException] = []

    def loop(engine: str) -> None:
        try:
            while not stop.is_set():
                seen.append((engine, totals(trips, engine)))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(e,)) for e in ("duckdb", "spark")]
    for t in threads:
        t.start()
    try:
        for hours in (0, 100):
            trips.lh.archive("trips", now=ts("2026-11-16T00:00:00Z") + dt.timedelta(hours=hours))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len({e for e, _ in seen}) == 2 and len(seen) > 10
    wrong = [s for s in seen if s[1] != expect]
    assert not wrong, wrong[:3]
    assert trips.lh.tables()[0].archive_rows > 100


def test_a_run_lists_the_vector_folder_at_its_recovery_and_its_end_only(trips, monkeypatch):
    """The plan's stale-day check takes the listing the run's recovery left (under the same
    lease) instead of listing the folder again: two listings a run, whatever the days; the
    re-encoding of days written under other settings still follows from it."""
    from lakehouse.archive import vectors

    load(trips, "a.csv", [["a", 1, 0, 1.0, 1.0, "2026-11-17T10:00:00Z"], ["b", 1, 0, 1.0, 2.0, "2026-11-18T10:00:00Z"]])
    trips.lh.archive("trips", now=ts("2026-11-19T00:00:00Z"))
    listings: list[str] = []
    real = vectors.list_files

    def counted(root, columns=None):
        listings.append(root)
        return real(root, columns)

    monkeypatch.setattr(vectors, "list_files", counted)
    load(trips, "b.csv", [["c", 2, 0, 1.0, 1.0, "2026-11-19T10:00:00Z"]])
    r = trips.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))
    assert r.committed and r.plan.days == (dt.date(2026, 11, 18), dt.date(2026, 11, 19)) and len(listings) == 2
    # the table now wants another vector set: both archived days are re-encoded by the next run
    import yaml

    definition = yaml.safe_load(TRIPS_SMALL)
    definition["archive"]["vectors"] = "sort_columns"
    trips.table(yaml.safe_dump(definition))
    listings.clear()
    r = trips.lh.archive("trips", now=ts("2026-11-20T13:00:00Z"))
    assert set(r.plan.reencode_days) == {dt.date(2026, 11, 17), dt.date(2026, 11, 18), dt.date(2026, 11, 19)}
    assert r.committed and len(listings) == 2
    assert totals(trips, "duckdb") == totals(trips, "spark")
