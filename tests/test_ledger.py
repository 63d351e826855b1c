"""The archive's books on real Spark + Delta: the hash spec, a run's figures in its commit and in
the ledger (upserts accounted), faults injected between staging and commit refused (then a
clean run commits), a crash between the commit and the ledger write repaired, a baseline for
days from before the ledger, and verify catching a day changed behind the archive's back
(compaction keeps the books)."""

from __future__ import annotations

import datetime as dt
import json
import math
import struct

import pytest

from lakehouse import delta_log, faults
from lakehouse.archive import ledger as L
from lakehouse.archive import ledger_table
from lakehouse.archive.state import current_snapshot, read_snapshot
from lakehouse.audit.verify import ledger_check as verify_ledger
from lakehouse.errors import ConservationError
from lakehouse.query import TableSource
from tests.conftest import TRIPS_SMALL

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]
D18, D19 = dt.date(2026, 11, 18), dt.date(2026, 11, 19)
JOBS_YAML = "jobs: {target_file_size: 1KB, compact_min_files: 2, retention: 1h}\n"


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def load(p, name, rows):
    return p.lh.load("trips", [p.csv(name, HEADER, rows)])


def rows_of(tag: str, n: int, day: dt.date) -> list[list]:
    return [[f"{tag}{i}", i % 4, i % 3, [1.0, None, float("nan"), -0.0][i % 4], float(i), f"{day}T{i % 24:02d}:{i % 60:02d}:00Z"]
            for i in range(n)]


def ledger_check(p):
    src = TableSource(p.lh.definition("trips"), p.lh.paths("trips"))
    return verify_ledger(p.lh.spark(), src, current_snapshot(src.paths.archive))


def by_day(rows):
    return {(r.cutoff, r.day): r for r in rows}


def test_the_hash_spec_on_spark(spark):
    """Equal rows hash equally (any NaN, -0.0), a null never trades places with a value, and the
    decimal sum of the hashes folds to the Python sum of the same hashes."""
    from pyspark.sql import functions as F

    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0001))[0]
    assert math.isnan(other_nan)
    df = spark.createDataFrame(
        [(1, 0.0, 5, None), (2, -0.0, 5, None), (3, float("nan"), None, 5), (4, other_nan, None, 5)],
        "id INT, x DOUBLE, a INT, b INT")
    h = {r["id"]: r["h"] for r in df.select("id", F.expr(L.row_hash_sql([("x", "double"), ("a", "int"), ("b", "int")])).alias("h")).collect()}
    assert h[1] == h[2] and h[3] == h[4]
    swapped = {r["id"]: r["h"] for r in df.select("id", F.expr(L.row_hash_sql([("a", "int"), ("b", "int")])).alias("h")).collect()}
    assert swapped[1] != swapped[3]  # (5, null) vs (null, 5)
    big = spark.range(1000).select((F.col("id") % 7).alias("g"), F.col("id").cast("string").alias("s"))
    hashes = big.select("g", F.expr(L.row_hash_sql([("s", "string")])).alias("h")).collect()
    want: dict[int, L.Figures] = {}
    for r in hashes:
        want[r["g"]] = want.get(r["g"], L.Figures()) + L.Figures.of_hashes([r["h"]])
    got = ledger_table.figures_by(big, ["g"], [("s", "string")])
    assert {k[0]: f for k, f in got.items()} == want


def test_a_run_keeps_books_refuses_damaged_batches_and_verify_checks_the_data(project, spark, monkeypatch):
    p = project.table(TRIPS_SMALL + JOBS_YAML).create("trips")
    paths = p.lh.paths("trips")
    load(p, "a.csv", rows_of("a", 40, D18) + rows_of("b", 3, D19))
    r1 = p.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))
    assert r1.committed and r1.plan.days == (D18, D19)
    rows = by_day(ledger_table.read_rows(paths))
    a18 = rows[(r1.plan.cutoff, D18)]
    assert (a18.rows_live, a18.rows_kept, a18.rows_replaced, a18.rows_out, a18.kind) == (40, 0, 0, 40, "run")
    assert a18.checksum_in == a18.checksum_out and a18.archive_version == read_snapshot(paths.archive).version
    assert L.columns_of(a18.columns) == [*p.lh.definition("trips").column_names, "_lh_load"]
    assert ledger_table.ledger_cutoff(paths) == r1.plan.cutoff
    # the same figures ride in the archive commit's metadata
    from deltalake import DeltaTable

    meta = DeltaTable(paths.archive).history(1)[0]["userMetadata"]
    info = L.parse_commit_info(meta)
    assert info is not None and info.cutoff == r1.plan.cutoff and info.rows(a18.archive_version)[0] == \
        L.LedgerRow.from_record({**a18.record(), "recorded": None})
    assert json.loads(meta)[L.COMMIT_INFO_KEY]["rows_out"] == 43

    # upserts of 5 archived keys (new values) and 2 late rows into the archived day
    upserts = [[f"a{i}", 9, 9, 2.5, 100.0 + i, f"{D18}T{i % 24:02d}:{i % 60:02d}:00Z"] for i in range(5)]
    load(p, "b.csv", upserts + rows_of("late", 2, D18))
    now = ts("2026-11-20T13:00:00Z")
    # a fault injected between staging and commit: the run refuses, nothing is committed
    before = read_snapshot(paths.archive)
    for fault, out_rows in (("drop_row", 41), ("dup_row", 43)):  # change_value: tests/test_ledger_books.py
        monkeypatch.setenv(faults.ENV, fault)
        with pytest.raises(ConservationError) as e:
            p.lh.archive("trips", now=now)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"archive trips: day {D18}: rows in != rows out: in 42 rows "
                                                  "(7 live + 35 kept, 5 replaced), checksum "), msg
        assert f"staged {out_rows} rows, checksum " in msg and "nothing was committed, live rows stay" in msg
        assert read_snapshot(paths.archive) == before and delta_log.row_count(paths.live) == 7
        assert ledger_table.ledger_cutoff(paths) == r1.plan.cutoff
        assert p.lh.tables()[0].last_error["step"] == "conservation"
    monkeypatch.delenv(faults.ENV)
    r2 = p.lh.archive("trips", now=now)  # the clean run commits
    assert r2.committed and r2.plan.days == (D18,) and r2.as_dict()["rows_replaced"] == 5
    assert delta_log.row_count(paths.live) == 0
    b18 = by_day(ledger_table.read_rows(paths))[(r2.plan.cutoff, D18)]
    assert (b18.rows_live, b18.rows_kept, b18.rows_replaced, b18.rows_out) == (7, 35, 5, 42)
    assert b18.existing == a18.out  # the chain: the run found what the last one left
    assert b18.out == b18.kept + b18.live and b18.previous_cutoff == r1.plan.cutoff
    check = ledger_check(p)
    assert check.ok and check.values["days"] == 2, check

    # compaction rewrites the days (dataChange=false) in the same rows: the books still hold
    c = p.lh.optimize("trips")
    assert c.archive.days, c.as_dict()
    assert ledger_check(p).ok, ledger_check(p)

    # a row removed behind the archive's back (a raw Delta delete) fails the check, naming the day
    from delta.tables import DeltaTable as SparkDelta

    SparkDelta.forPath(spark, paths.archive).delete("trip_id = 'a7'")
    check = ledger_check(p)
    assert not check.ok
    assert check.detail.startswith(f"trips: day {D18} holds 41 rows, checksum "), check.detail
    assert f"the ledger (run of cutoff {r2.plan.cutoff}, archive version {b18.archive_version}) says 42 rows" in check.detail


def test_a_crash_before_the_ledger_write_is_repaired_and_old_days_get_a_baseline(project, spark, monkeypatch):
    from lakehouse.archive.run import run_archive

    p = project.table(TRIPS_SMALL).create("trips")
    paths, d = p.lh.paths("trips"), p.lh.definition("trips")
    load(p, "a.csv", rows_of("a", 6, D18))
    old = run_archive(p.lh.spark, p.settings.warehouse, d, now=ts("2026-11-19T12:00:00Z"), ledger=False)
    assert old.committed and old.figures is None  # archived before the table had a ledger
    check = ledger_check(p)
    assert check.ok and "1 archive day(s) and no ledger yet" in check.detail

    load(p, "b.csv", rows_of("b", 4, D19))
    cutoff = int(ts("2026-11-19T12:00:00Z").timestamp())
    append = ledger_table.append

    def killed(paths, rows, at, erasure=0):
        if at == cutoff:
            raise RuntimeError("killed between the archive commit and the ledger write")
        return append(paths, rows, at, erasure)

    monkeypatch.setattr(ledger_table, "append", killed)
    with pytest.raises(RuntimeError, match="killed"):
        p.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))  # recovery records the old day first
    monkeypatch.undo()
    assert read_snapshot(paths.archive).cutoff == cutoff and ledger_table.ledger_cutoff(paths) == old.plan.cutoff
    check = ledger_check(p)  # the committed run's figures are read from its commit meanwhile
    assert check.ok and not check.detail and check.values["pending_rows"] == 1, check

    r = p.lh.archive("trips", now=ts("2026-11-20T12:00:00Z"))  # nothing new: recovery repairs the books
    assert not r.plan.advances and r.ledger_rows == 1
    rows = by_day(ledger_table.read_rows(paths))
    assert {(k[1], v.kind) for k, v in rows.items()} == {(D18, "baseline"), (D19, "recovered")}
    assert rows[(cutoff, D19)].rows_live == 4 and rows[(old.plan.cutoff, D18)].rows_out == 6
    assert ledger_table.ledger_cutoff(paths) == cutoff
    check = ledger_check(p)
    assert check.ok and not check.detail and check.values["pending_rows"] == 0, check
    assert ledger_table.repair(spark, d, paths, cutoff) == 0  # idempotent
