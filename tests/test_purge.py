"""Archiving's purge of live (lakehouse/archive/purge.py) on real Spark + Delta: files that hold
only archived rows leave live in one metadata-only delta-rs commit with no Spark job; rows in
files that also hold rows to keep (a file spanning the cutoff, a file an upsert made of two
loads) go by the MERGE; a commit racing the purge's makes it read again; and after every purge
live holds exactly the rows at or after the cutoff and the rows no run archived."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lakehouse import delta_log
from lakehouse.archive import purge as purge_mod
from tests.conftest import HEADER_SMALL, TRIPS_SMALL, Project

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def row(tid: str, t: str, status: int = 0) -> list[Any]:
    return [tid, 1, status, 1.0, 2.0, "2.00", "false", "2026-11-18", t]


def live_ids(p: Project) -> set[str]:
    return {r["trip_id"] for r in delta_log.scan(p.lh.paths("trips").live, "SELECT trip_id FROM t").to_pylist()}


def operations(p: Project) -> list[tuple[str, str]]:
    """(operation, engine) of live's commits, oldest first."""
    h = sorted(delta_log.history(p.lh.paths("trips").live), key=lambda c: c["version"])
    return [(c.get("operation", ""), c.get("engineInfo", "").split(":")[0].split("/")[0]) for c in h]


@pytest.fixture
def trips(project: Project, spark: Any) -> Project:
    return project.table(TRIPS_SMALL).create("trips")


def test_files_of_archived_rows_leave_live_by_metadata_with_no_spark_job(trips: Project, spark: Any,
                                                                         monkeypatch: Any) -> None:
    trips.lh.load("trips", [trips.csv("a.csv", HEADER_SMALL, [row("a", "2026-11-17T10:00:00Z"),
                                                              row("b", "2026-11-18T10:00:00Z")])])
    trips.lh.load("trips", [trips.csv("b.csv", HEADER_SMALL, [row("c", "2026-11-18T11:00:00Z")])])
    real = purge_mod.purge

    def purge_in_group(*args: Any, **kwargs: Any) -> int:
        spark.sparkContext.setJobGroup("the-purge", "the purge's own jobs")
        try:
            return real(*args, **kwargs)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    monkeypatch.setattr(purge_mod, "purge", purge_in_group)
    r = trips.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert r.rows_archived == 3 and r.rows_purged == 3 and live_ids(trips) == set()
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup("the-purge")) == []
    last = operations(trips)[-1]
    assert last[1] == "delta-rs" and last[0] != "MERGE", operations(trips)
    # Spark and DuckDB read live and the split as before
    assert spark.read.format("delta").load(trips.lh.paths("trips").live).count() == 0
    assert trips.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [{"n": 3}]
    assert trips.lh.query("SELECT count(*) AS n FROM trips", "spark").to_pylist() == [{"n": 3}]


def test_rows_in_files_that_also_hold_rows_to_keep_go_by_the_merge(trips: Project, spark: Any) -> None:
    # one file spans the cutoff (2026-11-19T00:00): x below it, y after it
    trips.lh.load("trips", [trips.csv("a.csv", HEADER_SMALL, [row("x", "2026-11-18T23:00:00Z"),
                                                              row("y", "2026-11-19T01:00:00Z")])])
    # an upsert makes a file of two loads: k (load 1, kept as is) and m (updated by load 2)
    trips.lh.load("trips", [trips.csv("b.csv", HEADER_SMALL, [row("k", "2026-11-17T10:00:00Z"),
                                                              row("m", "2026-11-17T11:00:00Z")])])
    trips.lh.load("trips", [trips.csv("c.csv", HEADER_SMALL, [row("m", "2026-11-17T11:00:00Z", status=1)])])
    r = trips.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert r.rows_archived == 3 and r.rows_purged == 3
    assert live_ids(trips) == {"y"}
    assert ("MERGE", "Apache-Spark") in operations(trips)[-3:]
    got = trips.lh.query("SELECT trip_id, status FROM trips ORDER BY trip_id", "duckdb").to_pylist()
    assert got == [{"trip_id": "k", "status": 0}, {"trip_id": "m", "status": 1}, {"trip_id": "x", "status": 0},
                   {"trip_id": "y", "status": 0}]


def test_a_commit_racing_the_purges_makes_it_read_live_again(trips: Project, spark: Any, monkeypatch: Any) -> None:
    trips.lh.load("trips", [trips.csv("a.csv", HEADER_SMALL, [row("a", "2026-11-17T10:00:00Z")])])
    real = delta_log.remove_files
    raced: list[int] = []

    def racing(path: str, version: int, files: Any) -> int:
        if not raced:  # another writer commits to live first: a load of a row after the cutoff
            raced.append(version)
            trips.lh.load("trips", [trips.csv("late.csv", HEADER_SMALL, [row("z", "2026-11-19T10:00:00Z")])])
        return real(path, version, files)

    monkeypatch.setattr(delta_log, "remove_files", racing)
    r = trips.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert raced and r.rows_purged == 1
    assert live_ids(trips) == {"z"}
    assert trips.lh.query("SELECT count(*) AS n FROM trips", "duckdb").to_pylist() == [{"n": 2}]


def test_a_cutoff_inside_a_day_keeps_every_row_at_or_after_it(trips: Project, spark: Any) -> None:
    """The cutoff 2026-11-19T12:00 falls inside a day, and Delta cuts a file's timestamp
    statistics to milliseconds: a file whose last row is half a millisecond before the cutoff
    cannot be told from one with a row at it, so its rows go by the MERGE; a file 1.5 ms before
    goes whole; a row half a millisecond after the cutoff stays."""
    cases = {"a.csv": [row("a", "2026-11-19T11:59:59.9995Z"), row("b", "2026-11-19T12:00:00.0005Z")],
             "c.csv": [row("c", "2026-11-19T11:59:59.9985Z")],
             "d.csv": [row("d", "2026-11-19T11:59:59.9995Z")]}
    for name, rows in cases.items():  # a load (a file of one load in live) each
        trips.lh.load("trips", [trips.csv(name, HEADER_SMALL, rows)])
    r = trips.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))
    assert r.rows_archived == 3 and r.rows_purged == 3
    assert live_ids(trips) == {"b"}
    # which files the purge vouches for, on the same layout before any run: c's alone
    p2 = Project(trips.root.parent / "again").table(TRIPS_SMALL).create("trips")
    for name, rows in cases.items():
        p2.lh.load("trips", [p2.csv(name, HEADER_SMALL, rows)])
    d2, paths2 = p2.lh.definition("trips"), p2.lh.paths("trips")
    loads = {r["trip_id"]: (r["event_date"], r["_lh_load"]) for r in delta_log.scan(
        paths2.live, "SELECT trip_id, event_date, _lh_load FROM t").to_pylist()}
    cutoff = int(ts("2026-11-19T12:00:00Z").timestamp())
    whole = purge_mod.whole_files(d2, paths2, sorted(set(loads.values())), cutoff)
    assert whole.partial and whole.rows == 1 and len(whole.files) == 1
    [(path, _, parts)] = whole.files
    assert parts == {"event_date": "2026-11-19"}
    import pyarrow.parquet as pq

    assert pq.read_table(delta_log.file_uri(paths2.live, path)).column("trip_id").to_pylist() == ["c"]
