"""The live store on real Spark + Delta, read back through DuckDB: upserts, appends, rejects."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import DriftError, TableNotFound
from tests.conftest import CLICKS, TRIPS_SMALL

pytestmark = pytest.mark.spark

HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "fare_local", "is_pool", "trip_date", "event_time"]
UTC = dt.timezone.utc


def row(tid, status=0, fare=10.0, t="2026-11-20T10:00:00Z", city=1):
    return [tid, city, status, 1.0, fare, f"{fare:.2f}", "false", "2026-11-20", t]


@pytest.fixture
def trips(project, spark):
    return project.table(TRIPS_SMALL).create("trips")


def test_upsert_later_line_wins_within_a_file(trips):
    f = trips.csv("a.csv", HEADER, [row("t1", 0, 5.0), row("t2", 0, 6.0), row("t1", 1, 7.0), row("t1", 2, 8.0)])
    r = trips.lh.load("trips", [f])
    assert (r.rows_loaded, r.rows_rejected) == (4, 0)
    rows = trips.live("trips", "trip_id")
    assert [(x["trip_id"], x["status"], x["fare_total"]) for x in rows] == [("t1", 2, 8.0), ("t2", 0, 6.0)]


def test_upsert_later_load_wins_and_later_file_wins_within_a_load(trips):
    a = trips.csv("a.csv", HEADER, [row("t1", 0, 5.0), row("t2", 0, 6.0)])
    trips.lh.load("trips", [a])
    b = trips.csv("b.csv", HEADER, [row("t1", 1, 7.0)])
    c = trips.csv("c.csv", HEADER, [row("t1", 2, 9.0), row("t3", 0, 1.0)])
    r = trips.lh.load("trips", [b, c])
    assert (r.rows_inserted, r.rows_updated) == (1, 1)
    rows = {x["trip_id"]: x for x in trips.live("trips")}
    assert rows["t1"]["status"] == 2 and rows["t1"]["fare_total"] == 9.0
    assert rows["t2"]["status"] == 0
    assert len(rows) == 3
    # an older version loaded later still wins: load order is the contract, not the values
    d = trips.csv("d.csv", HEADER, [row("t1", 0, 1.0)])
    trips.lh.load("trips", [d])
    assert {x["trip_id"]: x["status"] for x in trips.live("trips")}["t1"] == 0


def test_typed_values_and_utc_partition_day(trips):
    f = trips.csv("a.csv", HEADER, [
        ["t1", 7, 2, 0.25, 12.5, "123.45", "true", "2026-11-19", "2026-11-20T23:59:59.5+00:00"],
        ["t2", 7, 2, 0.25, 12.5, "", "", "", "2026-11-21T00:30:00+02:00"],  # 22:30 UTC on the 20th
        ["t3", 7, 2, 0.25, 12.5, "1", "false", "2026-11-19", "2026-11-21T00:00:00"],  # no offset = UTC
    ])
    trips.lh.load("trips", [f])
    rows = {x["trip_id"]: x for x in trips.live("trips")}
    assert rows["t1"]["fare_local"] == decimal.Decimal("123.45")
    assert rows["t1"]["is_pool"] is True and rows["t2"]["is_pool"] is None
    assert rows["t1"]["trip_date"] == dt.date(2026, 11, 19)
    assert rows["t1"]["event_time"] == dt.datetime(2026, 11, 20, 23, 59, 59, 500000, tzinfo=UTC)
    assert rows["t1"]["event_date"] == dt.date(2026, 11, 20)
    assert rows["t2"]["event_time"] == dt.datetime(2026, 11, 20, 22, 30, tzinfo=UTC)
    assert rows["t2"]["event_date"] == dt.date(2026, 11, 20)
    assert rows["t3"]["event_date"] == dt.date(2026, 11, 21)
    # Spark sees the same partition days
    spark_days = trips.lh.query("SELECT trip_id, event_date FROM trips ORDER BY trip_id", "spark").to_pylist()
    assert [r["event_date"] for r in spark_days] == [dt.date(2026, 11, 20), dt.date(2026, 11, 20), dt.date(2026, 11, 21)]


def test_every_bad_row_goes_to_rejects_with_its_reason(trips):
    good = row("ok1")
    rows = [
        good,
        ["b1", "x", 0, 1.0, 1.0, "1.00", "false", "2026-11-20", "2026-11-20T10:00:00Z"],  # int unparseable
        ["b2", 1, 0, "cheap", 1.0, "1.00", "false", "2026-11-20", "2026-11-20T10:00:00Z"],  # double
        ["", 1, 0, 1.0, 1.0, "1.00", "false", "2026-11-20", "2026-11-20T10:00:00Z"],  # null key
        ["b4", 1, 0, 1.0, 1.0, "1.00", "false", "2026-11-20", ""],  # null event time
        ["b5", 1, 0, 1.0, 1.0, "1.00", "false", "2026-11-20", "noon"],  # bad timestamp
        ["b6", 1, 0, 1.0, 1.0, "1.001", "false", "2026-11-20", "2026-11-20T10:00:00Z"],  # decimal scale
        ["b7", 1, 0, 1.0, 1.0, "1.00", "maybe", "2026-11-20", "2026-11-20T10:00:00Z"],  # boolean
        ["b8", 1, 0, 1.0, 1.0, "1.00", "false", "20.11.2026", "2026-11-20T10:00:00Z"],  # date
        ["b9", 99999999999, 0, 1.0, 1.0, "1.00", "false", "2026-11-20", "2026-11-20T10:00:00Z"],  # int range
        ["b10", 1, 0],  # too few fields
        row("ok2"),
    ]
    f = trips.csv("bad.csv", HEADER, rows)
    r = trips.lh.load("trips", [f])
    assert (r.rows_loaded, r.rows_rejected) == (2, 10)
    rejects = trips.lh.rejects("trips")
    by_line = {x["line"]: x for x in rejects}
    assert set(by_line) == set(range(3, 13))
    assert all(x["source"] == f for x in rejects)
    expect = {
        3: "column city_id: 'x' is not an int",
        4: "column fx_rate: 'cheap' is not a double",
        5: "column trip_id: null in a non-nullable column",
        6: "column event_time: null in a non-nullable column",
        7: "column event_time: 'noon' is not an ISO 8601 timestamp",
        8: "column fare_local: '1.001' has more than 2 decimal places for decimal(10,2)",
        9: "column is_pool: 'maybe' is not a boolean (true/false)",
        10: "column trip_date: '20.11.2026' is not a date (YYYY-MM-DD)",
        11: "column city_id: 99999999999 is out of range for an int",
        12: "expected 9 fields as in the header, got 3",
    }
    assert {k: v["reason"] for k, v in by_line.items()} == expect
    assert by_line[4]["record"].startswith("b2,1,0,cheap")
    assert {x["trip_id"] for x in trips.live("trips")} == {"ok1", "ok2"}


def test_json_and_parquet_inputs_and_missing_required_column(trips):
    lines = [
        {"trip_id": "j1", "city_id": 3, "fare_total": 4.5, "fare_local": 4.5, "event_time": "2026-11-20T01:00:00Z"},
        {"trip_id": "j2", "event_time": "2026-11-20T01:00:00Z", "status": None},
        {"city_id": 3, "event_time": "2026-11-20T01:00:00Z"},  # no key
        {"trip_id": "j4", "city_id": "3", "event_time": "2026-11-20T01:00:00Z", "fare_total": True},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n{not json\n[1, 2]\n"
    jf = trips.text("a.jsonl", text)
    r = trips.lh.load("trips", [jf])
    assert (r.rows_loaded, r.rows_rejected) == (2, 4)
    reasons = {x["line"]: x["reason"] for x in trips.lh.rejects("trips")}
    assert reasons[3] == "column trip_id: missing required column"
    assert reasons[4] == "column fare_total: True is a boolean, not a double"
    assert reasons[5].startswith("invalid JSON")
    assert reasons[6] == "expected a JSON object, got list"
    pf = str(trips.root / "data" / "a.parquet")
    pq.write_table(pa.table({
        "trip_id": ["p1", "p2", None],
        "city_id": pa.array([1, 2, 3], pa.int64()),
        "event_time": pa.array([dt.datetime(2026, 11, 20, 5), dt.datetime(2026, 11, 21, 5), dt.datetime(2026, 11, 21, 6)],
                               pa.timestamp("us")),
    }), pf)
    r = trips.lh.load("trips", [pf])
    assert (r.rows_loaded, r.rows_rejected) == (2, 1)
    assert [x["reason"] for x in trips.lh.rejects("trips") if x["source"] == pf] == [
        "column trip_id: null in a non-nullable column"]
    live = {x["trip_id"]: x for x in trips.live("trips")}
    assert set(live) == {"j1", "j2", "p1", "p2"}
    assert live["j1"]["fare_local"] == decimal.Decimal("4.50")
    assert live["p2"]["event_date"] == dt.date(2026, 11, 21)


def test_unknown_column_rejects_the_whole_file_and_others_load(trips):
    bad = trips.csv("extra.csv", HEADER + ["surprise"], [row("x1") + ["?"]])
    good = trips.csv("good.csv", HEADER, [row("g1")])
    r = trips.lh.load("trips", [bad, good])
    assert r.rows_loaded == 1 and len(r.files_rejected) == 1
    assert "unknown column 'surprise'" in r.files_rejected[0].error and bad in r.files_rejected[0].error
    rej = [x for x in trips.lh.rejects("trips") if x["source"] == bad]
    assert len(rej) == 1 and rej[0]["line"] is None and "surprise" in rej[0]["reason"]
    assert [x["trip_id"] for x in trips.live("trips")] == ["g1"]


def test_nothing_lost_rows_in_equal_loaded_plus_rejected(repo_copy, spark, tmp_path):
    from lakehouse.demo import generate

    repo_copy.lh.migrate()
    data = generate(tmp_path / "in", rows=1200, days=3, end=dt.date(2026, 11, 20))
    loaded = rejected = 0
    for f in data.files:
        r = repo_copy.lh.load("trips", [str(f)])
        loaded += r.rows_loaded
        rejected += r.rows_rejected
    assert loaded + rejected == data.rows_written
    assert rejected == data.bad_rows == len(repo_copy.lh.rejects("trips"))
    state = {s.name: s for s in repo_copy.lh.tables()}["trips"]
    distinct = repo_copy.lh.query("SELECT count(DISTINCT trip_id) AS n FROM trips", "duckdb").to_pylist()[0]["n"]
    assert state.live_rows == distinct  # upserts merged: one row per key


def test_append_only_table_keeps_duplicates(project, spark):
    project.table(CLICKS).create("clicks")
    f = project.csv("c.csv", ["user_id", "url", "at"], [[1, "/a", "2026-11-20T10:00:00Z"], [1, "/a", "2026-11-20T10:00:00Z"]])
    project.lh.load("clicks", [f])
    again = project.lh.load("clicks", [f])  # same content: skipped, like COPY INTO
    assert (again.rows_loaded, len(again.files_skipped)) == (0, 1)
    assert "already loaded" in (again.files_skipped[0].skipped or "")
    assert len(project.live("clicks")) == 2
    forced = project.lh.load("clicks", [f], force=True)
    assert forced.rows_loaded == 2 and not forced.files_skipped
    assert len(project.live("clicks")) == 4
    # a column called `at` works on both engines
    q = "SELECT at, count(*) AS n FROM clicks GROUP BY at"
    assert project.lh.query(q, "spark").to_pylist() == project.lh.query(q, "duckdb").to_pylist()


def test_concurrent_loads_lose_nothing(trips):
    files = [trips.csv(f"c{i}.csv", HEADER, [row(f"k{i}-{j}", t=f"2026-11-20T{j % 24:02d}:00:00Z") for j in range(30)]
                       + [row("shared", status=i)]) for i in range(4)]
    errors: list[BaseException] = []

    def go(f: str) -> None:
        try:
            trips.lh.load("trips", [f])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=go, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = trips.live("trips")
    assert len(rows) == 4 * 30 + 1
    assert len({r["trip_id"] for r in rows}) == len(rows)


def test_load_before_migrate_and_drift_are_clear_errors(project, spark):
    project.table(TRIPS_SMALL)
    f = project.csv("a.csv", HEADER, [row("t1")])
    with pytest.raises(TableNotFound, match="run `lakehouse migrate`"):
        project.lh.load("trips", [f])
    project.create("trips")
    # the definition gains a column without a migration: loading says so
    project.table(TRIPS_SMALL.replace("  - {name: event_time", "  - {name: tip, type: double}\n  - {name: event_time"))
    with pytest.raises(DriftError, match="column tip"):
        project.lh.load("trips", [f])
    with pytest.raises(TableNotFound, match="known tables: trips"):
        project.lh.load("nope", [f])
