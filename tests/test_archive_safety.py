"""Archive safety (issue 7, section 4): a clock typo cannot commit a future cutoff, readers take
one committed cutoff, day names for every date, backfills at scale, concurrent runs, settings
changes. Real Spark + Delta, read back through DuckDB; pure parts get fast unit tests."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.archive.run import check_now
from lakehouse.archive.state import read_snapshot
from lakehouse.errors import LakehouseError
from tests.conftest import CLICKS, FAST_JVM, TRIPS_SMALL

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def load(p, name, rows, table="trips"):
    return p.lh.load(table, [p.csv(name, HEADER, rows)])


# -- 1. --now in the future ---------------------------------------------------------------------


def test_check_now_allows_a_minute_of_skew_only():
    wall = ts("2026-11-22T12:00:00Z")
    check_now("trips", wall + dt.timedelta(seconds=60), wall)
    check_now("trips", wall - dt.timedelta(days=400), wall)
    with pytest.raises(
        LakehouseError, match=r"archive trips: --now 2026-11-22T12:01:01\+00:00 is 1m 1s ahead"
    ):
        check_now("trips", wall + dt.timedelta(seconds=61), wall)
    with pytest.raises(LakehouseError, match=r"is 365d 0h ahead .*--allow-future"):
        check_now("trips", ts("2027-11-22T12:00:00Z"), wall)
    check_now("trips", ts("2027-11-22T12:00:00Z"), wall, allow_future=True)


@pytest.mark.spark
def test_future_now_is_refused_and_commits_nothing(project, spark):
    p = project.table(TRIPS_SMALL).create("trips")
    load(p, "a.csv", [["a", 1, 0, 1.0, 1.0, "2026-11-18T10:00:00Z"]])
    future = dt.datetime.now(UTC) + dt.timedelta(days=30)
    with pytest.raises(LakehouseError, match="ahead of the clock"):
        p.lh.archive("trips", now=future)
    assert read_snapshot(p.lh.paths("trips").archive).cutoff is None
    assert p.lh.archive("trips", now=future, dry_run=True).plan.rows == 1  # a plan changes nothing
    r = p.lh.archive("trips", now=dt.datetime.now(UTC) + dt.timedelta(seconds=30))  # skew is fine
    assert r.committed and r.rows_archived == 1
    r = p.lh.archive("trips", now=future, allow_future=True)
    assert r.committed and read_snapshot(p.lh.paths("trips").archive).cutoff == r.plan.cutoff


def test_cli_refuses_a_future_now_in_one_line(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "clicks.yaml").write_text(CLICKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_JAVA_OPTS=FAST_JVM)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakehouse.cli",
            "--project",
            str(tmp_path),
            "archive",
            "clicks",
            "--now",
            "2126-11-20T00:00:00Z",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: archive clicks: --now 2126-11-20T00:00:00+00:00 is "
    )
    assert "--allow-future" in lines[0]


# -- 2. readers take the committed cutoff first --------------------------------------------------


@pytest.mark.spark
def test_lookup_reads_the_cutoff_first_then_the_files_of_that_cutoff(project, spark, monkeypatch):
    """A run commits between the reader's listing of vector files and its reading of the cutoff:
    the answer must still be the one of a single committed cutoff, with that cutoff's files."""
    from lakehouse.archive import reader, vectors
    from lakehouse.archive.run import ArchiveJob

    p = project.table(TRIPS_SMALL).create("trips")
    day = dt.date(2026, 11, 18)
    load(
        p,
        "a.csv",
        [
            ["a", 1, 0, 1.0, 1.0, "2026-11-18T01:00:00Z"],
            ["b", 1, 0, 1.0, 1.0, "2026-11-18T02:00:00Z"],
            ["c", 1, 1, 1.0, 1.0, "2026-11-18T03:00:00Z"],
            ["d", 5, 0, 1.0, 1.0, "2026-11-18T04:00:00Z"],
        ],
    )
    c1 = p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z")).plan.cutoff
    load(
        p,
        "late.csv",
        [
            ["e", 1, 0, 1.0, 1.0, "2026-11-18T05:00:00Z"],
            ["f", 1, 0, 1.0, 1.0, "2026-11-18T06:00:00Z"],
        ],
    )
    job = ArchiveJob(spark, p.settings.warehouse, p.lh.definition("trips"))
    plan2 = job.plan(ts("2026-11-20T06:00:00Z"))
    c2 = plan2.cutoff
    want = {c1: (0, 3), c2: (0, 5)}  # city_id=1 on the day, at each committed cutoff

    real_list, real_snapshot = vectors.list_files, reader.read_snapshot
    interleaved: list[int] = []
    seen: list[int | None] = []

    def list_then_commit(root, columns=None, day=None):
        out = real_list(root, columns, day)
        if not interleaved:
            interleaved.append(1)
            job.execute(plan2, through="commit")  # commits C2, its files stay next to C1's
        return out

    def snapshot(path, *args, **kwargs):
        s = real_snapshot(path, *args, **kwargs)
        seen.append(None if s is None else s.cutoff)
        return s

    monkeypatch.setattr(vectors, "list_files", list_then_commit)
    monkeypatch.setattr(reader, "read_snapshot", snapshot)
    rng, _ = p.lh.lookup("trips", day, ["city_id=1"])
    assert interleaved and seen
    assert (rng.start, rng.end) == want[seen[0]], (
        f"range {rng} with files of another cutoff than {seen[0]}"
    )
    monkeypatch.undo()
    res = p.lh.lookup("trips", day, ["city_id=1"])
    assert (res.range.start, res.range.end) == want[c2] and res.cutoff == c2
    assert all(f.endswith(f"20261118-{c2}") for f in res.files)
    dv = p.lh.vectors("trips", day, "city_id")
    assert dv.cutoff == c2 and dv.committed == c2
    r = p.lh.archive("trips", now=ts("2026-11-20T06:00:00Z"))  # recovers: purge and clean
    assert not r.plan.advances and r.recovered_rows == 2
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]


# -- 3. names for every date; cutoffs before 1970 ------------------------------------------------


@pytest.mark.spark
def test_days_before_1000_and_cutoffs_before_1970_archive_read_and_clean(project, spark):
    from lakehouse.archive import vectors

    p = project.table(TRIPS_SMALL).create("trips")
    load(
        p,
        "a.csv",
        [
            ["a", 1, 0, 1.0, 1.0, "0999-12-31T10:00:00Z"],
            ["b", 2, 0, 1.0, 2.0, "0999-12-31T11:00:00Z"],
            ["c", 1, 0, 1.0, 3.0, "1969-12-30T05:00:00Z"],
            ["d", 3, 0, 1.0, 4.0, "1969-12-31T20:00:00Z"],
            ["e", 1, 0, 1.0, 5.0, "2026-11-18T01:00:00Z"],
        ],
    )
    with pytest.raises(
        LakehouseError,
        match=r"archive trips: the cutoff -43200 \(1969-12-31T12:00:00\+00:00\) "
        r"is before 1970-01-01; .*cannot be negative",
    ):
        p.lh.archive("trips", now=ts("1970-01-01T12:00:00Z"))
    r1 = p.lh.archive("trips", now=ts("1970-01-02T12:00:00Z"))
    assert r1.rows_archived == 4 and r1.plan.cutoff == 43200
    load(p, "late.csv", [["f", 1, 0, 1.0, 6.0, "0999-12-31T12:00:00Z"]])
    r2 = p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert r2.rows_archived == 2 and r2.plan.late_rows == 1
    names = sorted(os.listdir(os.path.join(p.lh.paths("trips").vectors, "city_id")))
    c2 = r2.plan.cutoff
    assert names == [f"09991231-{c2}", "19691230-43200", "19691231-43200", f"20261118-{c2}"]
    files, temps = vectors.list_files(p.lh.paths("trips").vectors)
    assert not temps and {(f.day, f.cutoff) for f in files if f.column == "city_id"} == {
        (dt.date(999, 12, 31), c2),
        (dt.date(1969, 12, 30), 43200),
        (dt.date(1969, 12, 31), 43200),
        (dt.date(2026, 11, 18), c2),
    }
    rng, _ = p.lh.lookup("trips", dt.date(999, 12, 31), ["city_id=1"])
    assert (rng.start, rng.end) == (0, 2)
    assert p.lh.vectors("trips", dt.date(1969, 12, 30), "fare_total").table.column(
        "value"
    ).to_pylist() == [3.0]
    n = p.lh.query("SELECT count(*) AS n, sum(fare_total) AS s FROM trips", "duckdb").to_pylist()
    assert n == [{"n": 6, "s": 21.0}]
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]


# -- 4. backfills of years; failed steps are retried and reported ---------------------------------


def test_day_predicates_stay_shallow_and_exact():
    from lakehouse.archive.plan import days_sql

    base = dt.date(2000, 1, 1)
    assert days_sql("d", []) == "FALSE"
    assert (
        days_sql("d", [base + dt.timedelta(i) for i in range(10)])
        == "`d` >= DATE'2000-01-01' AND `d` <= DATE'2000-01-10'"
    )  # contiguous: a range only
    days = [base + dt.timedelta(2 * i) for i in range(10_000)]
    sql = days_sql("d", days, size=500)
    assert sql.count(" IN (") == 20 and sql.count(" OR ") == 19 and sql.count("DATE'") == 10_002
    assert max(_depth(sql)) <= 6  # balanced: log2(20) levels of OR, not one level per day
    assert days_sql("d", [dt.date(1, 1, 1), dt.date(999, 3, 1)]).startswith(
        "`d` >= DATE'0001-01-01'"
    )


def _depth(sql: str):
    depth = 0
    for ch in sql:
        depth += ch == "("
        depth -= ch == ")"
        yield depth


def test_partitions_and_vector_tasks_do_not_grow_one_per_day():
    from lakehouse.archive.plan import group_days, partition_count

    assert partition_count(600_000, 2342, 2) == 2
    assert partition_count(50_000_000, 2342, 2) == 50
    assert partition_count(10, 1, 8) == 1
    assert partition_count(0, 0, 8) == 1
    base = dt.date(2000, 1, 1)
    rows = {base + dt.timedelta(i): 60 for i in range(10_000)}
    groups = group_days(rows, 2)
    assert len(groups) == 2 and sorted(d for g in groups for d in g) == sorted(rows)
    assert all(g == sorted(g) for g in groups)
    big = {base + dt.timedelta(i): 1_000_000 for i in range(10)}
    assert len(group_days(big, 2, rows_per_task=2_000_000)) == 5
    assert group_days({}, 4) == []


def test_staged_rows_are_checked_against_the_plan():
    from lakehouse.archive.plan import staged_problems

    d1, d2 = dt.date(2026, 11, 17), dt.date(2026, 11, 18)
    assert staged_problems("t", (d1, d2), {d1: 5}, {d1: 3, d2: 4}, {d1: 6, d2: 4}, True) == []
    assert staged_problems("t", (d1, d2), {d1: 5}, {d1: 3, d2: 4}, {d1: 8, d2: 4}, False) == []
    assert staged_problems("t", (d1, d2), {d1: 5}, {d1: 3, d2: 4}, {d1: 6, d2: 4}, False) == [
        "archive t: day 2026-11-17 staged 6 rows, the plan expects 8 (5 new, 3 archived)"
    ]
    assert staged_problems("t", (d1, d2), {d1: 5}, {d1: 3, d2: 4}, {d2: 0}, True) == [
        "archive t: day 2026-11-17 was planned (5 new, 3 archived rows) but not staged",
        "archive t: day 2026-11-18 staged 0 rows, the plan expects 4 (0 new, 4 archived)",
    ]
    assert staged_problems("t", (d1,), {d1: 5}, {d1: 3}, {d1: 4}, True) == [
        "archive t: day 2026-11-17 staged 4 rows, the plan expects 5..8 (5 new, 3 archived)"
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_a_backfill_of_600_days_archives_purges_and_archives_again(project, spark):
    """Years of history in one run: every step over 600 days at once (one vector run per day),
    the purge and a second run merging late rows into old days. (Day predicates of many IN lists:
    ``test_day_predicates_stay_shallow_and_exact``; 2,500 days and more: ``lakehouse bench backfill``.)"""
    from lakehouse import delta_log
    from lakehouse.archive import vectors
    from lakehouse.bench.workload import BENCH_TABLE, generate_live

    p = project.table(BENCH_TABLE).create("bench")
    days, rows = 600, 1200
    today = dt.datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - dt.timedelta(days=days + 2)
    generate_live(spark, p.lh.paths("bench").live, rows, start, days)
    r = p.lh.archive("bench", now=today)
    assert r.committed and r.rows_archived == rows and len(r.plan.days) == days
    assert r.rows_purged == rows and delta_log.row_count(p.lh.paths("bench").live) == 0
    files, temps = vectors.list_files(p.lh.paths("bench").vectors)
    assert not temps and len(files) == days * 8 and len({f.cutoff for f in files}) == 1
    first = start.date()
    dv = p.lh.vectors("bench", first, "city_id")
    assert sum(dv.table.column("count").to_pylist()) >= 1
    q = "SELECT count(*) AS n, count(DISTINCT event_date) AS d, sum(fare_total) AS s FROM bench"
    want = p.lh.query(q, "duckdb").to_pylist()
    assert want[0]["n"] == rows and want[0]["d"] == days
    assert p.lh.query(q, "spark").to_pylist()[0]["n"] == rows
    # late rows into old days: the table archives again, merging into three of the days
    generate_live(spark, p.lh.paths("bench").live, 9, start, 3, load="late", first_id=rows)
    r2 = p.lh.archive("bench", now=today + dt.timedelta(minutes=1))
    assert (
        r2.committed and r2.rows_archived == 9 and r2.plan.late_rows == 9 and len(r2.plan.days) == 3
    )
    assert p.lh.query(q, "duckdb").to_pylist()[0]["n"] == rows + 9
    assert delta_log.row_count(p.lh.paths("bench").live) == 0
    files, temps = vectors.list_files(p.lh.paths("bench").vectors)
    assert not temps and len(files) == days * 8 and not vectors.garbage(files, (r2.plan.cutoff, 0))
    rng, _ = p.lh.lookup("bench", first, [f"city_id={dv.table.column('value')[0].as_py()}"])
    assert rng.count >= 1


@pytest.mark.spark
def test_a_step_failing_after_the_commit_is_retried_and_reported(project, spark):
    from lakehouse.archive.run import ArchiveJob

    p = project.table(TRIPS_SMALL).create("trips")
    load(
        p,
        "a.csv",
        [
            ["a", 1, 0, 1.0, 1.0, "2026-11-18T01:00:00Z"],
            ["b", 2, 0, 1.0, 2.0, "2026-11-18T02:00:00Z"],
        ],
    )
    job = ArchiveJob(spark, p.settings.warehouse, p.lh.definition("trips"))
    job.execute(
        job.plan(ts("2026-11-20T00:00:00Z")), through="commit"
    )  # as if killed after the commit
    staging = p.lh.paths("trips").staging
    shutil.rmtree(staging, ignore_errors=True)
    with open(staging, "w") as f:  # the clean-up step cannot list its folder: a file is in the way
        f.write("in the way")
    for attempt in (1, 2):
        with pytest.raises(Exception, match="_staging"):  # any error naming the path
            p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))
        err = p.lh.tables()[0].last_error
        assert err is not None and err["step"] == "recover" and err["failures"] == attempt, err
    assert p.lh.tables()[0].as_dict()["last_error"]["error"]
    assert p.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [
        {"n": 2}
    ]  # nothing lost
    os.remove(staging)
    r = p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))
    assert r.committed and p.lh.tables()[0].last_error is None and p.lh.tables()[0].live_rows == 0
    assert p.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [{"n": 2}]


# -- 5. concurrent runs: a lease in the warehouse, own staging, staged rows checked ------------------


def test_lease_is_exclusive_expires_and_is_taken_over(tmp_path):
    import threading
    import time

    from lakehouse.lease import Lease, LeaseHeld, LeaseLost, read_lease

    folder = str(tmp_path / "lease")
    a = Lease(folder, "archive t: the archive lease", ttl=30).acquire()
    info = read_lease(folder)
    assert info.holder == a.holder and info.pid == os.getpid() and info.expires > time.time() + 20
    with pytest.raises(
        LeaseHeld, match=rf"archive t: the archive lease: held by .* pid {os.getpid()} "
    ):
        Lease(folder, "archive t: the archive lease").acquire()
    a.check()
    a.release()
    assert read_lease(folder).expires == 0  # released: free at once
    b = Lease(folder, "x", ttl=0.6).acquire()
    b._stop.set()  # b "hangs": no more renewals
    time.sleep(0.8)
    c = Lease(folder, "x", ttl=30).acquire()  # expired: taken over
    with pytest.raises(LeaseLost, match="taken over"):
        b.check()
    c.check()
    c.release()
    # many takers at once: exactly one wins each round
    wins, errors = [], []

    def take():
        try:
            wins.append(Lease(folder, "x", ttl=30).acquire())
        except LeaseHeld as e:
            errors.append(e)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(errors) == 7
    wins[0].release()


def test_lease_is_renewed_while_the_holder_runs(tmp_path):
    import time

    from lakehouse.lease import Lease, LeaseHeld, read_lease

    folder = str(tmp_path / "lease")
    with Lease(folder, "x", ttl=0.9) as lease:
        first = read_lease(folder).expires
        time.sleep(1.5)  # longer than the ttl: renewed meanwhile
        assert read_lease(folder).expires > first
        with pytest.raises(LeaseHeld):
            Lease(folder, "x").acquire()
        lease.check()
    assert read_lease(folder).expires == 0


def _archive_proc(root, now, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(
        LAKEHOUSE_MASTER="local[1]",
        LAKEHOUSE_JAVA_OPTS=FAST_JVM,
        LAKEHOUSE_ARCHIVE_FLOCK="0",
        **(extra_env or {}),
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakehouse.cli",
            "--project",
            str(root),
            "--warehouse",
            str(root / "warehouse"),
            "archive",
            "trips",
            "--now",
            now,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.spark
def test_two_runs_at_once_without_flock_never_lose_or_double_a_row(project, spark):
    import time

    p = project.table(TRIPS_SMALL).create("trips")
    start = ts("2026-11-10T00:00:00Z")
    rows = [
        [
            f"t{i}",
            i % 5,
            i % 3,
            1.0,
            float(i % 97),
            (start + dt.timedelta(minutes=41 * i)).isoformat(),
        ]
        for i in range(400)
    ]
    load(p, "a.csv", rows[:200])
    p.lh.archive("trips", now=ts("2026-11-14T00:00:00Z"))
    load(
        p,
        "b.csv",
        rows[200:]
        + [
            [f"t{i}", 7, 2, 2.0, 50.0, (start + dt.timedelta(minutes=41 * i)).isoformat()]
            for i in range(0, 200, 9)
        ],
    )
    q = (
        "SELECT count(*) AS n, count(DISTINCT trip_id) AS k, sum(fare_total) AS s, "
        "CAST(sum(status) AS BIGINT) AS st FROM trips"
    )
    final = {r[0]: r for r in rows}
    final.update(
        {f"t{i}": [f"t{i}", 7, 2, 2.0, 50.0, ""] for i in range(0, 200, 9)}
    )  # the updates win
    want = [
        {
            "n": 400,
            "k": 400,
            "s": sum(r[4] for r in final.values()),
            "st": sum(r[2] for r in final.values()),
        }
    ]
    lock = os.path.join(p.lh.paths("trips").root, "_state", "table.lock")
    procs = [_archive_proc(p.root, "2026-11-21T00:00:00Z")]
    deadline = time.monotonic() + 120
    while not os.path.exists(lock) and time.monotonic() < deadline and procs[0].poll() is None:
        time.sleep(0.05)
    if os.path.exists(lock):
        os.remove(
            lock
        )  # a warehouse where flock means nothing (another host, a network filesystem)
    procs.append(_archive_proc(p.root, "2026-11-21T00:00:00Z"))
    outs = [(proc.wait(timeout=900), *proc.communicate()) for proc in procs]
    codes = [o[0] for o in outs]
    assert 0 in codes, outs
    for code, _, err in outs:
        assert code == 0 or "lease" in err or "another archiving run" in err, err
    assert p.lh.query(q, "duckdb").to_pylist() == want
    assert p.lh.query(q, "spark").to_pylist() == want
    p.lh.archive("trips", now=ts("2026-11-21T00:00:00Z"))  # whatever is left: recovered
    assert p.lh.query(q, "duckdb").to_pylist() == want and p.lh.tables()[0].waiting_rows == 0
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]


@pytest.mark.spark
def test_runs_with_the_same_cutoff_stage_apart_and_the_late_one_commits_nothing(project, spark):
    """Two runs planned together (no lease: two hosts): each stages in its own folder; the
    second to commit is refused and its staging and files go; no row is lost."""
    from lakehouse.archive.run import ArchiveJob
    from lakehouse.archive.stage import stage_days
    from lakehouse.errors import CommitConflict

    p = project.table(TRIPS_SMALL).create("trips")
    load(
        p,
        "a.csv",
        [[f"t{i}", i % 3, 0, 1.0, 1.0, f"2026-11-1{7 + i % 2}T0{i % 9}:00:00Z"] for i in range(30)],
    )
    d = p.lh.definition("trips")
    a, b = ArchiveJob(spark, p.settings.warehouse, d), ArchiveJob(spark, p.settings.warehouse, d)
    now = ts("2026-11-20T00:00:00Z")
    pa_, pb = a.plan(now), b.plan(now)
    assert pa_.cutoff == pb.cutoff and a.staging_for(pa_.cutoff) != b.staging_for(pb.cutoff)
    stage_days(spark, d, a.paths, pa_, a.staging_for(pa_.cutoff))
    rb = b.execute(pb)  # b runs through while a is staged
    assert rb.committed and rb.rows_purged == 30
    with pytest.raises(CommitConflict, match="the archive changed since the plan"):
        a.execute(pa_)
    assert p.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [{"n": 30}]
    assert p.lh.tables()[0].archive_rows == 30
    assert all(c.ok for c in p.lh.verify("trips"))


# -- 6. changing the archive settings leaves every day consistent ----------------------------------


@pytest.mark.spark
def test_changed_sort_columns_and_added_columns_are_never_read_wrong_and_get_reencoded(
    project, spark
):
    p = project.table(TRIPS_SMALL).create("trips")
    d17, d18 = dt.date(2026, 11, 17), dt.date(2026, 11, 18)
    load(
        p,
        "a.csv",
        [
            ["a", 1, 1, 1.0, 1.0, "2026-11-17T01:00:00Z"],
            ["b", 2, 0, 1.0, 2.0, "2026-11-17T02:00:00Z"],
            ["c", 1, 0, 1.0, 3.0, "2026-11-18T03:00:00Z"],
            ["d", 2, 1, 1.0, 4.0, "2026-11-18T04:00:00Z"],
            ["e", 3, 0, 1.0, 5.0, "2026-11-18T05:00:00Z"],
        ],
    )
    p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    rng, _ = p.lh.lookup("trips", d18, ["city_id=2"])
    assert (rng.start, rng.end) == (1, 2)
    # the sort columns change: status first
    p.table(
        TRIPS_SMALL.replace(
            "sort_columns: [city_id, status, fx_rate]", "sort_columns: [status, city_id]"
        )
    )
    p.migration(
        "0002_sort.py",
        "def upgrade(ctx):\n    ctx.set_archive('trips', sort_columns=['status', 'city_id'])\n",
    )
    assert p.lh.migrate().drift == []
    with pytest.raises(
        LakehouseError,
        match=r"trips: day 2026-11-18 of column status was archived under other "
        r"settings \(sorted by \[city_id, status, fx_rate\], the table now "
        r"sorts by \[status, city_id\]\); the next `lakehouse archive trips`",
    ):
        p.lh.lookup("trips", d18, ["status=0"])
    with pytest.raises(LakehouseError, match="archived under other settings"):
        p.lh.vectors("trips", d18, "fare_total")
    checks = p.lh.verify("trips")
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    vec = next(c for c in checks if c.name == "vector files decode to their day")
    assert vec.values["skipped_days"] == 2 and "skipped 2026-11-17 and 1 more day(s)" in vec.detail
    # the next run re-sorts and re-encodes both days (no new rows in them)
    r = p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))
    assert r.committed and r.plan.reencode_days == (d17, d18) and r.rows_archived == 0
    assert r.as_dict()["reencoded_days"] == ["2026-11-17", "2026-11-18"]
    rng, _ = p.lh.lookup("trips", d18, ["status=0"])
    assert (rng.start, rng.end) == (0, 2)
    rng, _ = p.lh.lookup("trips", d18, ["status=1", "city_id=2"])
    assert (rng.start, rng.end) == (2, 3)
    assert p.lh.vectors("trips", d18, "fare_total").table.column("value").to_pylist() == [
        3.0,
        5.0,
        4.0,
    ]
    checks = p.lh.verify("trips")
    assert all(c.ok and "skipped" not in c.detail for c in checks), [
        c for c in checks if not c.ok or c.detail
    ]
    # a column is added: old days have no vector file for it; verify does not crash
    yaml = TRIPS_SMALL.replace(
        "sort_columns: [city_id, status, fx_rate]", "sort_columns: [status, city_id]"
    )
    p.table(
        yaml.replace(
            "  - {name: event_time", "  - {name: tip, type: double}\n  - {name: event_time"
        )
    )
    p.migration(
        "0003_tip.py",
        "def upgrade(ctx):\n    ctx.add_columns('trips', [{'name': 'tip', 'type': 'double'}])\n",
    )
    assert p.lh.migrate().drift == []
    with pytest.raises(
        LakehouseError,
        match=r"day 2026-11-18 has no vector file for column tip \(column tip had no "
        r"vector files when the day was archived\)",
    ):
        p.lh.vectors("trips", d18, "tip")
    rng, _ = p.lh.lookup("trips", d18, ["status=0"])  # the sort columns did not change: still right
    assert (rng.start, rng.end) == (0, 2)
    checks = p.lh.verify("trips")
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    f = p.csv(
        "tip.csv",
        ["trip_id", "city_id", "status", "event_time", "tip"],
        [["f", 1, 0, "2026-11-18T06:00:00Z", "0.5"]],
    )
    p.lh.load("trips", [f])
    r = p.lh.archive("trips", now=ts("2026-11-20T02:00:00Z"))
    assert r.plan.days == (d17, d18) and r.plan.reencode_days == (d17,) and r.rows_archived == 1
    assert p.lh.vectors("trips", d18, "tip").table.column("value").to_pylist() == [
        None,
        0.5,
        None,
        None,
    ]
    checks = p.lh.verify("trips")
    assert all(c.ok and "skipped" not in c.detail for c in checks), [
        c for c in checks if not c.ok or c.detail
    ]


def test_a_killed_holder_on_this_machine_frees_the_lease_at_once(tmp_path):
    import signal
    import time

    from lakehouse.lease import Lease, read_lease

    folder = str(tmp_path / "lease")
    code = (
        f"from lakehouse.lease import Lease; import os, signal; Lease({folder!r}, 'x', ttl=600).acquire(); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=60,
        check=False,
    )
    assert p.returncode == -signal.SIGKILL
    dead = read_lease(folder)
    assert dead.expires > time.time() + 300 and dead.pid != os.getpid()
    with Lease(folder, "x", ttl=30) as lease:  # the holder is gone: no need to wait 600 s
        assert read_lease(folder).generation == dead.generation + 1
        lease.check()


def test_a_writer_stopped_inside_an_exclusive_create_leaves_no_file_under_the_name(tmp_path, monkeypatch):
    """A lease's generation file appears whole or not at all: the bytes go to a temporary file
    first, linked to the name once on disk (a writer killed in between left an empty file under
    the name, which blocked the lease for good: seed 304 of tests/test_stream_kills.py)."""
    from lakehouse import storage

    path = str(tmp_path / "lease" / "1.json")

    def killed(fd: int) -> None:  # the process ends while its bytes go to disk
        raise SystemExit("killed")

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(SystemExit):
        storage.create_exclusive(path, b'{"holder": "a"}')
    monkeypatch.undo()
    assert not os.path.exists(path)
    assert storage.create_exclusive(path, b"x") and not storage.create_exclusive(path, b"y")
    assert open(path, "rb").read() == b"x" and os.listdir(tmp_path / "lease") == ["1.json"]

    def no_links(src: str, dst: str) -> None:
        raise PermissionError(1, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)  # a filesystem without hard links: an exclusive create
    other = str(tmp_path / "lease" / "2.json")
    assert storage.create_exclusive(other, b"z") and not storage.create_exclusive(other, b"w")
    assert open(other, "rb").read() == b"z" and sorted(os.listdir(tmp_path / "lease")) == ["1.json", "2.json"]


def test_holders_killed_at_random_instants_of_taking_and_giving_back_a_lease_never_block_it(tmp_path):
    """A process taking and releasing one lease in a loop, killed (SIGKILL) at random instants:
    every generation file left is a whole record, and the next taker gets the lease at once (the
    killed holder is seen gone on this machine), whatever instant the kill hit."""
    import json
    import random
    import signal
    import time

    from lakehouse.lease import Lease

    folder = str(tmp_path / "lease")
    code = (
        "import sys; from lakehouse.lease import Lease\n"
        "print('ready', flush=True)\n"
        f"while True:\n    Lease({folder!r}, 'x', ttl=600).acquire().release()\n"
    )
    rng = random.Random(20261128)
    for _ in range(8):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.15))
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
        p.stdout.close()
        for name in os.listdir(folder):
            if name.endswith(".json") and not name.startswith("."):
                assert set(json.loads((Path(folder) / name).read_text())) >= {"holder", "pid", "expires"}, name
        started = time.monotonic()
        with Lease(folder, "x", ttl=30):
            pass
        assert time.monotonic() - started < 5


def test_a_lease_file_that_is_not_a_whole_record_is_held_until_it_expires_not_for_good(tmp_path):
    import time

    from lakehouse.lease import LEASE_TTL_SECONDS, Lease, LeaseHeld, read_lease

    folder = tmp_path / "lease"
    folder.mkdir()
    f = folder / "1.json"
    f.write_bytes(b'{"holder": "ab')  # cut short
    info = read_lease(str(folder))
    assert info.pid == 0 and abs(info.expires - (f.stat().st_mtime + LEASE_TTL_SECONDS)) < 1
    with pytest.raises(LeaseHeld):
        Lease(str(folder), "x").acquire()
    old = time.time() - LEASE_TTL_SECONDS - 5
    os.utime(f, (old, old))  # written that long ago: expired
    left, fresh = folder / ".1.json.tmp-1-00000000", folder / ".3.json.tmp-2-00000000"
    left.write_bytes(b"{")  # what writers killed inside their exclusive create leave
    fresh.write_bytes(b"{")
    os.utime(left, (old, old))
    with Lease(str(folder), "x", ttl=30):
        assert read_lease(str(folder)).generation == 2
    assert not left.exists() and fresh.exists()  # a temporary file is removed once a lease would have expired


@pytest.mark.spark
def test_two_runs_with_the_same_cutoff_in_parallel_without_any_lock_lose_nothing(project, spark):
    """Two runs planned on the same snapshots execute at the same time with no lock at all (the
    lease is what prevents this; here each run's own staging and the commit checks must hold)."""
    import threading

    from lakehouse.archive.run import ArchiveJob

    p = project.table(TRIPS_SMALL).create("trips")
    start = ts("2026-11-10T00:00:00Z")
    rows = [
        [f"t{i}", i % 5, i % 3, 1.0, float(i % 97), (start + dt.timedelta(minutes=53 * i)).isoformat()]
        for i in range(300)
    ]
    load(p, "a.csv", rows[:150])
    p.lh.archive("trips", now=ts("2026-11-13T00:00:00Z"))
    load(p, "b.csv", rows[150:])
    q = "SELECT count(*) AS n, count(DISTINCT trip_id) AS k, sum(fare_total) AS s FROM trips"
    want = [{"n": 300, "k": 300, "s": sum(r[4] for r in rows)}]
    d = p.lh.definition("trips")
    jobs = [ArchiveJob(spark, p.settings.warehouse, d) for _ in range(2)]
    now = ts("2026-11-20T00:00:00Z")
    plans = [j.plan(now) for j in jobs]
    assert plans[0].cutoff == plans[1].cutoff
    outcomes: list = [None, None]

    def run(i):
        try:
            outcomes[i] = jobs[i].execute(plans[i])
        except Exception as e:  # noqa: BLE001 - the loser may fail; it must not lose rows
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert any(not isinstance(o, Exception) and o.committed for o in outcomes), outcomes
    assert p.lh.query(q, "duckdb").to_pylist() == want, outcomes
    p.lh.archive("trips", now=now)  # recovers whatever the loser left
    assert p.lh.query(q, "duckdb").to_pylist() == want
    assert p.lh.query(q, "spark").to_pylist() == want
    assert p.lh.tables()[0].waiting_rows == 0
    assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]
