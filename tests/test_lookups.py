"""The lookup reader (``Lakehouse.lookups``): pinned to one committed cutoff, each day's runs kept
between calls, the same answers as the one-shot ``lookup`` (itself tested against a scan in
test_rle.py), moved to the latest cutoff by ``refresh`` or when a later run removed a day's files.
Real Spark archives; the reader itself needs no Spark."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from lakehouse.archive.run import ArchiveJob
from lakehouse.errors import LakehouseError
from tests.conftest import TRIPS_SMALL

HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]
DAYS = [dt.date(2026, 11, 17), dt.date(2026, 11, 18)]


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def _rows(rng: random.Random, n: int, prefix: str) -> list[list[object]]:
    """Rows over DAYS with repeated, NULL and NaN sort values."""
    out: list[list[object]] = []
    for i in range(n):
        day = DAYS[i % len(DAYS)]
        city = rng.choice(["", 1, 2, 2, 5, 7, 7, 7])
        status = rng.choice(["", 0, 1, 1, 3])
        fx = rng.choice(["", "NaN", 0.5, 1.0, 1.0, 1.25, -0.0, 0.0])
        out.append([f"{prefix}{i}", city, status, fx, float(i), f"{day}T{i % 24:02d}:{i % 60:02d}:00Z"])
    return out


def _queries(rng: random.Random) -> list[list[str]]:
    """``C=V`` prefixes of the sort columns: present values, NULL, NaN and absent ones."""
    cities, statuses = ["NULL", "1", "2", "5", "7", "4", "99"], ["NULL", "0", "1", "3", "2"]
    fxs = ["NULL", "NaN", "0.5", "1.0", "1.25", "0.0", "-0.0", "9.5"]
    out = [[f"city_id={c}"] for c in cities]
    for _ in range(60):
        q = [f"city_id={rng.choice(cities)}", f"status={rng.choice(statuses)}", f"fx_rate={rng.choice(fxs)}"]
        out.append(q[: rng.randint(1, 3)])
    return out


@pytest.mark.spark
def test_the_reader_answers_as_the_one_shot_lookup_on_every_day_and_key(project):
    p = project.table(TRIPS_SMALL).create("trips")
    rng = random.Random(11)
    p.lh.load("trips", [p.csv("a.csv", HEADER, _rows(rng, 400, "a"))])
    c1 = p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z")).plan.cutoff
    reader = p.lh.lookups("trips", max_runs=1)  # days evicted and read again on the way
    assert reader.cutoff == c1
    checked = 0
    for q in _queries(rng):
        for day in DAYS:
            want = p.lh.lookup("trips", day, q)
            got = reader.lookup(day, q)
            assert (got.range, got.cutoff, got.files) == (want.range, want.cutoff, want.files), (day, q)
            # each call counts its own entries (not the reader's running total)
            assert got.touched == want.touched, (day, q)
            checked += want.range.count
    assert checked > 400  # the keys found rows, not only empty ranges
    # typed values by column, text converted as on the command line, the day as text
    assert reader.lookup(DAYS[0], {"city_id": 7, "status": 1}).range == p.lh.lookup("trips", DAYS[0], ["city_id=7", "status=1"]).range
    assert reader.lookup("2026-11-17", {"city_id": "7"}).range == p.lh.lookup("trips", DAYS[0], ["city_id=7"]).range
    assert reader.lookup(dt.datetime(2026, 11, 18, 5, tzinfo=dt.timezone.utc), {"city_id": None}).range == \
        p.lh.lookup("trips", DAYS[1], ["city_id=NULL"]).range
    # a datetime's UTC day (23:00 on the 17th at -05:00 is the 18th in UTC); NULL as on the command line;
    # NumPy scalars (a float32 NaN finds the NaN run as Python's NaN does)
    import numpy as np

    eastern = dt.timezone(dt.timedelta(hours=-5))
    assert reader.lookup(dt.datetime(2026, 11, 17, 23, tzinfo=eastern), {"city_id": "NULL"}).range == \
        p.lh.lookup("trips", DAYS[1], ["city_id=NULL"]).range
    nan = p.lh.lookup("trips", DAYS[0], ["city_id=7", "status=1", "fx_rate=NaN"])
    assert nan.range.count > 0
    for value in (float("nan"), np.float32("nan"), np.float64("nan")):
        got = reader.lookup(DAYS[0], {"city_id": np.int32(7), "status": np.int64(1), "fx_rate": value})
        assert (got.range, got.touched) == (nan.range, nan.touched)


@pytest.mark.spark
def test_the_reader_stays_on_its_cutoff_until_refreshed(project, spark):
    p = project.table(TRIPS_SMALL).create("trips")
    day = DAYS[1]
    rows = [["a", 1, 0, 1.0, 1.0, "2026-11-18T01:00:00Z"], ["b", 1, 0, 1.0, 1.0, "2026-11-18T02:00:00Z"],
            ["c", 1, 1, 1.0, 1.0, "2026-11-18T03:00:00Z"], ["d", 5, 0, 1.0, 1.0, "2026-11-18T04:00:00Z"],
            ["x", 2, 0, 1.0, 1.0, "2026-11-17T04:00:00Z"]]
    p.lh.load("trips", [p.csv("a.csv", HEADER, rows)])
    c1 = p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z")).plan.cutoff
    reader = p.lh.lookups("trips")
    assert reader.lookup(day, ["city_id=1"]).range.count == 3
    p.lh.load("trips", [p.csv("late.csv", HEADER, [["e", 1, 0, 1.0, 1.0, "2026-11-18T05:00:00Z"],
                                                   ["f", 1, 0, 1.0, 1.0, "2026-11-18T06:00:00Z"]])])
    job = ArchiveJob(spark, p.settings.warehouse, p.lh.definition("trips"))
    plan2 = job.plan(ts("2026-11-20T06:00:00Z"))
    job.execute(plan2, through="commit")  # commits C2; C1's files stay until the run cleans
    kept = reader.lookup(day, ["city_id=1"])
    assert (kept.range.count, kept.cutoff) == (3, c1)  # pinned: the answer of its cutoff
    assert reader.refresh() == plan2.cutoff
    moved = reader.lookup(day, ["city_id=1"])
    assert (moved.range.count, moved.cutoff) == (5, plan2.cutoff)
    assert all(f.endswith(f"20261118-{plan2.cutoff}") for f in moved.files)

    # a reader on C2 that has not read 2026-11-17 yet; a third run re-archives that day and
    # removes C2's files of it: its first lookup there moves to the latest cutoff
    stale = p.lh.lookups("trips")
    p.lh.load("trips", [p.csv("late2.csv", HEADER, [["y", 2, 0, 1.0, 1.0, "2026-11-17T05:00:00Z"]])])
    r3 = p.lh.archive("trips", now=ts("2026-11-20T07:00:00Z"))  # recovers C2's run, then archives y
    assert r3.committed
    got = stale.lookup(DAYS[0], ["city_id=2"])
    assert (got.range.count, got.cutoff) == (2, r3.plan.cutoff)
    assert stale.cutoff == r3.plan.cutoff


@pytest.mark.spark
def test_the_reader_refuses_bad_where_in_one_line(project):
    p = project.table(TRIPS_SMALL).create("trips")
    early = p.lh.lookups("trips")  # opened before the first run
    with pytest.raises(LakehouseError, match="nothing is archived yet"):
        early.lookup(DAYS[0], ["city_id=1"])
    with pytest.raises(LakehouseError, match="max_runs 0 must be 1 or more"):
        p.lh.lookups("trips", max_runs=0)
    p.lh.load("trips", [p.csv("a.csv", HEADER, [["a", 1, 0, 1.0, 1.0, "2026-11-18T01:00:00Z"]])])
    p.lh.archive("trips", now=ts("2026-11-20T00:00:00Z"))
    assert early.lookup(DAYS[1], ["city_id=1"]).range.count == 1  # it reads the first cutoff then
    reader = p.lh.lookups("trips")
    cases = [
        ({"status": 0}, "must cover a prefix of the sort columns"),
        ({"trip_id": "a"}, "'trip_id' is not a sort column of trips"),
        ({"city_id": "one"}, "where city_id='one'"),
        ({"city_id": b"\x01"}, "does not compare with its column's values"),
        (["city_id"], "expected COLUMN=VALUE"),
    ]
    from decimal import Decimal

    cases.append(({"city_id": 1, "status": 0, "fx_rate": Decimal("NaN")}, "does not compare"))
    for where, message in cases:
        with pytest.raises(LakehouseError, match=message) as e:
            reader.lookup(DAYS[1], where)  # type: ignore[arg-type]
        assert "\n" not in str(e.value)
    with pytest.raises(LakehouseError, match="expected a date"):
        reader.lookup("18 Nov", ["city_id=1"])  # type: ignore[arg-type]
    with pytest.raises(LakehouseError, match="is that day archived"):
        reader.lookup(dt.date(2026, 11, 1), ["city_id=1"])
    assert reader.lookup(DAYS[1], {"city_id": 1}).range.count == 1  # the reader still answers
