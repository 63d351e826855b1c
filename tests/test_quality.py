"""``lakehouse check`` on real Spark, Delta and Great Expectations: a suite with passing and
failing expectations, every built-in invariant failing on a deliberately broken table, results
recorded for a trend, Data Docs in the warehouse, and GE reusing (never restarting) the session."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from lakehouse.quality import invariants as inv
from tests.conftest import HEADER_SMALL, TRIPS_SMALL

pytestmark = pytest.mark.spark

QUALITY = """
quality:
  - expect_column_values_to_be_between: {column: fare_total, min_value: 0}
  - expect_column_values_to_not_be_null: {column: city_id}
  - expect_column_values_to_be_in_set: {column: status, value_set: [0, 1, 2, 3]}
  - expect_table_row_count_to_be_between: {min_value: 1}
"""


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def row(i: int, day: str, fare: float = 10.0, city: int | None = 1, status: int = 1) -> list[object]:
    return [f"t{i}", city, status, 1.0, fare, "1.00", "true", day, f"{day}T{i % 24:02d}:00:00Z"]


@pytest.fixture
def trips(project):
    p = project.table(TRIPS_SMALL + QUALITY).create("trips")
    rows = [row(i, "2026-11-18") for i in range(30)] + [row(100 + i, "2026-11-19") for i in range(20)]
    rows[3][4] = -5.0  # a negative fare (archived)
    rows[40][4] = -1.0  # and one in live
    p.lh.load("trips", [p.csv("a.csv", HEADER_SMALL, rows)])
    p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))  # cutoff 2026-11-19T01:00: day 18 archived
    return p


def by_name(report) -> dict:
    return {c.name: c for c in report.checks}


def test_a_suite_with_passing_and_failing_expectations_on_each_scope(trips, spark):
    p = trips
    app = spark.sparkContext.applicationId
    rep = p.lh.check("trips")
    assert spark.sparkContext.applicationId == app  # GE reused our session
    got = by_name(rep)
    fare = got["expect_column_values_to_be_between(fare_total)"]
    assert not fare.ok and fare.unexpected_count == 2 and fare.kind == "expectation"
    assert sorted(map(str, fare.sample)) == sorted(map(str, [{"trip_id": "t3"}, {"trip_id": "t110"}])) or fare.sample
    assert got["expect_column_values_to_not_be_null(city_id)"].ok
    assert got["expect_table_row_count_to_be_between"].ok
    assert got["expect_table_row_count_to_be_between"].observed == 50
    assert all(c.ok for c in rep.checks if c.kind == "invariant"), [c for c in rep.checks if not c.ok]
    assert not rep.ok
    doc = rep.as_dict()
    json.dumps(doc)  # JSON-able as is
    assert set(doc["checks"][0]) >= {"name", "ok", "observed", "unexpected_count", "sample"}
    assert Path(rep.docs).is_file() and rep.docs == os.path.join(p.settings.warehouse, "_quality", "docs", "index.html")

    arch = by_name(p.lh.check("trips", scope="archive"))
    assert arch["expect_column_values_to_be_between(fare_total)"].unexpected_count == 1
    assert arch["expect_table_row_count_to_be_between"].observed == 30
    live = by_name(p.lh.check("trips", scope="live", day=dt.date(2026, 11, 19)))
    assert live["expect_column_values_to_be_between(fare_total)"].unexpected_count == 1
    assert inv.SORTED not in live  # file checks are the archive's

    hist = p.lh.check_history("trips", "expect_column_values_to_be_between(fare_total)")
    assert [(h["scope"], h["unexpected_count"]) for h in hist] == [("all", 2), ("archive", 1), ("live", 1)]


def test_ge_asks_for_unexpected_rows_only_when_a_count_is_not_0_then_on_a_cached_scope(trips, spark, monkeypatch):
    """A clean scope is one GE run, the counts alone (no query per expectation for rows that are
    not there); a scope with unexpected rows is run again for them, on the rows in scope read
    once into Spark's cache (up to CACHE_BYTES) and released after. The results are the same
    cached or not, every check run leaves one validation result (the counts' run is replaced),
    and Data Docs show it."""
    import great_expectations as gx

    from lakehouse.audit import check
    from lakehouse.audit.files import ArchiveFiles
    from lakehouse.query import TableSource
    from lakehouse.query.split import current

    def results(rep) -> list[tuple]:
        return [(c.name, c.ok, c.observed, c.unexpected_count, sorted(map(str, c.sample))) for c in rep.checks]

    cache = spark._jsparkSession.sharedState().cacheManager()
    runs: list[bool] = []  # per GE run: whether Spark's cache was empty
    run = gx.Checkpoint.run

    def watched(self, *args, **kwargs):
        runs.append(cache.isEmpty())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(gx.Checkpoint, "run", watched)
    warehouse = trips.settings.warehouse

    def stored() -> int:
        return len(check.gx._context(warehouse).validation_results_store.list_keys())

    fine = trips.table((TRIPS_SMALL + QUALITY).replace("name: trips", "name: fine")).create("fine")
    fine.lh.load("fine", [fine.csv("f.csv", HEADER_SMALL, [row(i, "2026-11-19") for i in range(10)])])
    before = stored()
    clean = fine.lh.check("fine")
    assert runs == [True] and stored() == before + 1
    assert all(c.ok and c.unexpected_count in (0, None) and c.sample == [] for c in clean.checks), clean.checks
    assert "fine.all" in Path(clean.docs).read_text()

    source = TableSource(trips.lh.definition("trips"), trips.lh.paths("trips"))
    split = current(source)
    files = ArchiveFiles(source, split.archive)
    # the file checks' own DuckDB connection reads Parquet files alone: no delta extension loaded
    loaded = "SELECT count(*) FROM duckdb_extensions() WHERE extension_name = 'delta' AND loaded"
    assert files.con.execute(loaded).fetchone()[0] == 0 and files.sorted_check().ok
    assert 0 < check._scope_bytes(split, "all", files, None) <= check.CACHE_BYTES
    assert check._scope_bytes(split, "live", None, None) + check._scope_bytes(split, "archive", files, None) == \
        check._scope_bytes(split, "all", files, None)
    runs.clear()
    cached = results(trips.lh.check("trips", docs=False))
    assert runs == [True, False] and cache.isEmpty() and stored() == before + 2
    assert any(c[3] for c in cached) and all(c[4] for c in cached if c[3] and c[0].startswith("expect_column"))
    monkeypatch.setattr(check, "CACHE_BYTES", 0)
    runs.clear()
    assert results(trips.lh.check("trips", docs=False)) == cached
    assert runs == [True, True] and cache.isEmpty() and stored() == before + 3


def _append(path: str, rows: list[dict]) -> None:
    """A raw Delta append (no lakehouse code): the way a broken writer would break the table."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    write_deltalake(path, pa.Table.from_pylist(rows, schema=schema), mode="append")


def test_each_built_in_invariant_fails_on_a_deliberately_broken_table(project, spark):
    """One table broken six ways at once; each invariant names its own broken rows."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    p = project.table(TRIPS_SMALL).create("trips")
    rows = [row(i, "2026-11-17", city=i % 3) for i in range(12)] + [row(50 + i, "2026-11-18", city=i % 3) for i in range(12)]
    rows += [row(90 + i, "2026-11-19") for i in range(6)]
    p.lh.load("trips", [p.csv("a.csv", HEADER_SMALL, rows)])
    p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))  # days 17 and 18 archived
    assert all(c.ok for c in p.lh.check("trips", docs=False).checks)
    paths = p.lh.paths("trips")
    arch = DeltaTable(paths.archive).to_pyarrow_table().to_pylist()
    a17 = next(r for r in arch if r["trip_id"] == "t0")
    # keys unique: a second copy of t1 on its own day
    _append(paths.archive, [{**next(r for r in arch if r["trip_id"] == "t1"), "fare_total": 99.0}])
    # no archive row at or after the cutoff (2026-11-19T01:00Z)
    _append(paths.archive, [{**a17, "trip_id": "late", "event_time": ts("2026-11-19T05:00:00Z"),
                             "event_date": dt.date(2026, 11, 19)}])
    # event_date is the UTC day of the event time: a live row filed on the wrong day
    _append(paths.live, [{**a17, "trip_id": "wrongday", "event_time": ts("2026-11-19T10:00:00Z"),
                          "event_date": dt.date(2026, 11, 20)}])
    # a key never changes day: t50 (archived on the 18th) waits in live below the cutoff on the 16th
    _append(paths.live, [{**a17, "trip_id": "t50", "event_time": ts("2026-11-16T10:00:00Z"),
                          "event_date": dt.date(2026, 11, 16)}])
    # archive days sorted: day 18 rewritten in reverse order (same rows)
    d18 = DeltaTable(paths.archive).to_pyarrow_table(filters=[("event_date", "=", dt.date(2026, 11, 18))])
    write_deltalake(paths.archive, d18.take(pc.subtract(d18.num_rows - 1, pa_range(d18.num_rows))),
                    mode="overwrite", predicate="event_date = '2026-11-18'")
    # vector files: one of day 17 overwritten with garbage
    vec = sorted(Path(paths.vectors, "city_id").glob("20261117-*"))[0]
    vec.write_bytes(b"garbage")

    got = by_name(p.lh.check("trips", docs=False))
    assert not got[inv.KEYS_UNIQUE].ok and {"trip_id": "t1", "copies": 2} in got[inv.KEYS_UNIQUE].sample
    assert not got[inv.BEFORE_CUTOFF].ok and got[inv.BEFORE_CUTOFF].sample[0]["trip_id"] == "late"
    assert not got[inv.EVENT_DATE].ok and [s["trip_id"] for s in got[inv.EVENT_DATE].sample] == ["wrongday"]
    assert not got[inv.KEY_ONE_DAY].ok and got[inv.KEY_ONE_DAY].sample[0]["trip_id"] == "t50"
    assert got[inv.KEY_ONE_DAY].sample[0]["first_day"] == "2026-11-16"
    assert not got[inv.SORTED].ok and got[inv.SORTED].unexpected_count == 2  # day 17 got an extra file, 18 reversed
    assert [s[:14] for s in got[inv.SORTED].sample] == ["day 2026-11-17", "day 2026-11-18"]
    assert not got[inv.VECTORS].ok and any(s.startswith(f"{vec}: unreadable") for s in got[inv.VECTORS].sample)
    # the same broken table fails verify too (one definition of each invariant)
    failing = {c.name for c in p.lh.verify("trips") if not c.ok}
    assert {inv.KEYS_UNIQUE, inv.BEFORE_CUTOFF, inv.EVENT_DATE, inv.KEY_ONE_DAY, inv.SORTED, inv.VECTORS} <= failing


def pa_range(n: int):
    import pyarrow as pa

    return pa.array(range(n), pa.int64())


def test_before_commit_gate_refuses_an_archive_run_then_a_fix_commits(project, spark):
    """archive.checks: before_commit: a failing expectation on the staged batches refuses the
    commit (cutoff unchanged, live rows stay, no vector files), the jobs history records a
    terminal failure with the check's name; once the data is fixed the next run commits."""
    from lakehouse.errors import QualityGateFailed

    gated = TRIPS_SMALL.replace("  sort_columns: [city_id, status, fx_rate]\n",
                                "  sort_columns: [city_id, status, fx_rate]\n  checks: before_commit\n")
    p = project.table(gated + QUALITY).create("trips")
    rows = [row(i, "2026-11-18") for i in range(10)] + [row(20 + i, "2026-11-19") for i in range(4)]
    rows[4][4] = -3.0
    p.lh.load("trips", [p.csv("a.csv", HEADER_SMALL, rows)])
    before = p.lh.tables()[0]
    with pytest.raises(QualityGateFailed) as e:
        p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))
    msg = str(e.value)
    assert "expect_column_values_to_be_between(fare_total)" in msg and "nothing was committed" in msg
    assert "t4" not in msg and "-3" not in msg and "--history" in msg  # no row value in what status and jobs keep
    after = p.lh.tables()[0]
    assert (after.cutoff, after.live_rows, after.archive_rows) == (before.cutoff, 14, 0)
    assert not list(Path(p.lh.paths("trips").vectors).rglob("2026*"))
    staged = [h for h in p.lh.check_history("trips") if h["scope"] == "staged"]
    assert {h["trigger"] for h in staged} == {"archive"} and any(not h["ok"] for h in staged)
    assert any("t4" in json.dumps(h["sample"]) for h in staged)  # the sample rows are on record

    out = {o.decision.job: o for o in p.lh.jobs_run(now=ts("2026-11-20T01:00:00Z"))}
    arch = out["archive"].runs[-1]
    assert arch.outcome == "failed" and arch.terminal and "fare_total" in arch.error

    fixed = [row(4, "2026-11-18")]  # the upsert with a good fare
    p.lh.load("trips", [p.csv("fix.csv", HEADER_SMALL, fixed)])
    r = p.lh.archive("trips", now=ts("2026-11-20T01:00:00Z"))
    assert r.committed and r.rows_archived == 10


def test_the_check_command_exit_code_json_and_docs_path(trips):
    """``lakehouse check`` as scripts see it (in this process, its exact output): a failing
    expectation is exit 1, one JSON document on stdout, one error line and the Data Docs' path on
    stderr; ``--history`` lists the recorded results."""
    from click.testing import CliRunner

    from lakehouse.cli import cli as lakehouse_main
    from tests.conftest import MASTER

    p = trips

    def invoke(*args: str):
        return CliRunner().invoke(lakehouse_main, ["--project", str(p.root), "--warehouse", p.settings.warehouse,
                                                   "--master", MASTER, *args], catch_exceptions=False)

    r = invoke("check", "trips", "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    fare = next(c for c in doc["checks"] if c["name"] == "expect_column_values_to_be_between(fare_total)")
    assert doc["ok"] is False and fare["ok"] is False and fare["unexpected_count"] == 2
    assert all(c["ok"] for c in doc["checks"] if c["kind"] == "invariant")
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: check trips: expect_column_values_to_be_between(fare_total) failed"]
    assert f"Data Docs: {doc['docs']}" in r.stderr and Path(doc["docs"]).is_file()
    r = invoke("check", "trips", "--history", "--format", "json")
    assert r.exit_code == 0 and {x["check"] for x in json.loads(r.stdout)} == {c["name"] for c in doc["checks"]}
    r = invoke("check", "trips", "--scope", "nowhere")
    assert r.exit_code == 2


def test_a_warehouse_moved_elsewhere_writes_its_data_docs_where_it_is(trips, tmp_path):
    """GE's Data Docs site names its folder by absolute path in the warehouse's GE config: a moved
    warehouse's next check writes the Docs under the new place, never under the old one."""
    import shutil

    from tests.conftest import Project

    assert trips.lh.check("trips").docs
    old = Path(trips.settings.warehouse) / "_quality" / "docs"
    moved = tmp_path / "moved" / "proj"
    moved.parent.mkdir()
    shutil.move(str(trips.root), str(moved))
    there = Project(moved)
    rep = there.lh.check("trips")
    assert rep.docs == os.path.join(there.settings.warehouse, "_quality", "docs", "index.html")
    assert Path(rep.docs).is_file() and not old.exists()
