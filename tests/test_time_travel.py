"""``lakehouse query --as-of VERSION|TS``: the split view of a past moment, on both engines.

One small table goes through a history (load, archive, load, upsert, an archive run that has
committed but not purged yet, its purge); at every moment the answer of a plain query is
recorded, then ``--as-of`` that moment, each archive version and timestamps between commits
must give exactly the recorded JSON on Spark and DuckDB. Errors are one line naming the table,
what was asked and what exists.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lakehouse.archive.run import ArchiveJob
from lakehouse.delta_log import commits
from lakehouse.errors import QueryError
from lakehouse.output import dumps, format_timestamp
from tests.conftest import CLICKS, HEADER_SMALL, TRIPS_SMALL, Project, cli_in_process

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
ROWS = "SELECT * FROM trips ORDER BY trip_id"
DAYS = "SELECT event_date, count(*) AS n, sum(fare_local) AS fares FROM trips GROUP BY event_date ORDER BY event_date"


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def row(key: str, city: int, fare: str, at: str) -> list[object]:
    return [key, city, 0, 1.0, float(fare), fare, "true", "2026-11-01", at]


def answer(p: Project, sql: str, engine: str, as_of: object = None) -> str:
    """What ``lakehouse query --format json`` prints."""
    return dumps(p.lh.query(sql, engine, as_of=as_of).to_pylist())  # type: ignore[arg-type]


@dataclass
class History:
    p: Project
    before: dt.datetime
    moments: dict[str, tuple[dt.datetime, str]] = field(default_factory=dict)
    """label -> (a time between commits, the JSON a plain query gave then)."""
    archive_commits: dict[str, int] = field(default_factory=dict)
    """label of the moment right after an archive commit -> that archive version."""

    def record(self, label: str) -> None:
        """A plain query's answer now (DuckDB: no Spark job; --as-of is checked on both engines)."""
        time.sleep(0.01)  # commit timestamps are milliseconds: keep the moment clear of them
        self.moments[label] = (now(), answer(self.p, ROWS, "duckdb"))
        time.sleep(0.01)


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark) -> History:
    p = Project(tmp_path_factory.mktemp("tt") / "proj")
    p.table(TRIPS_SMALL).table(CLICKS)
    h = History(p, now())
    time.sleep(0.01)
    p.create("trips", "clicks")
    h.record("created")
    h.archive_commits["created"] = 0
    p.lh.load("trips", [p.csv("a.csv", HEADER_SMALL, [
        row("a", 1, "1.00", "2026-11-17T10:00:00Z"), row("b", 2, "2.00", "2026-11-18T10:00:00Z"),
        row("c", 1, "3.00", "2026-11-19T10:00:00Z"), row("d", 2, "4.00", "2026-11-19T23:00:00Z")])])
    h.record("loaded")
    job = ArchiveJob(spark, p.settings.warehouse, p.lh.definition("trips"))
    r = job.execute(job.plan(ts("2026-11-20T00:00:00Z")), through="commit")  # cutoff 11-19T00:00
    assert r.committed and r.rows_archived == 2
    h.record("archived, not purged")
    h.archive_commits["archived, not purged"] = 1
    job.purge(r.plan.cutoff)
    h.record("archived")
    p.lh.load("trips", [p.csv("b.csv", HEADER_SMALL, [
        row("e", 3, "5.00", "2026-11-20T08:00:00Z"),
        row("late", 3, "6.00", "2026-11-18T12:00:00Z")])])  # below the cutoff: waits for the next run
    h.record("loaded again")
    p.lh.load("trips", [p.csv("c.csv", HEADER_SMALL, [
        row("a", 1, "10.00", "2026-11-17T10:00:00Z"),  # an archived key changed
        row("c", 4, "30.00", "2026-11-19T10:00:00Z")])])  # a live key changed
    h.record("upserted")
    job = ArchiveJob(spark, p.settings.warehouse, p.lh.definition("trips"))
    r = job.execute(job.plan(ts("2026-11-21T00:00:00Z")), through="commit")  # cutoff 11-20T00:00
    assert r.committed
    h.record("archived again, not purged")
    h.archive_commits["archived again, not purged"] = 2
    p.lh.archive("trips", now=ts("2026-11-21T00:00:00Z"))  # the next run's recovery purges
    h.record("archived again")
    return h


def test_every_moment_reads_as_it_was_on_both_engines(history):
    p = history.p
    answers = {label: a for label, (_, a) in history.moments.items()}
    # the history did what it says: an empty table, then rows; the upsert shows after the runs
    assert answers["created"] == "[]"
    assert answers["archived, not purged"] == answers["loaded"] == answers["archived"]
    assert '"fare_local": "10.00"' in answers["archived again"]
    assert answers["upserted"] != answers["archived again"]  # the late row and the archived key
    for label, (at, want) in history.moments.items():
        for engine in ("spark", "duckdb"):
            assert answer(p, ROWS, engine, at) == want, (label, engine)
        assert answer(p, ROWS, "duckdb", format_timestamp(at)) == want, (label, "as text")
    # no row twice, also where the archive had committed and live was not purged yet
    for label in ("archived, not purged", "archived again, not purged"):
        rows = p.lh.query(ROWS, "duckdb", as_of=history.moments[label][0]).to_pylist()
        assert len(rows) == len({r["trip_id"] for r in rows}), label
    at = history.moments["archived again, not purged"][0]  # aggregates: the same JSON too
    assert answer(p, DAYS, "spark", at) == answer(p, DAYS, "duckdb", at)


def test_each_archive_version_is_the_moment_of_its_commit(history):
    p = history.p
    for label, version in history.archive_commits.items():
        want = history.moments[label][1]
        pinned = p.lh.as_of(ROWS, version)
        assert pinned.version == version and pinned.splits[0].archive.version == version
        for engine in ("spark", "duckdb"):
            assert answer(p, ROWS, engine, version) == want, (version, engine)
        assert answer(p, ROWS, "duckdb", str(version)) == want, (version, "as text")
    assert [c.version for c in commits(p.lh.paths("trips").archive)] == [0, 1, 2]


def test_between_an_archive_commit_and_its_purge_nothing_is_counted_twice(history):
    """A timestamp between the archive's commit and live's purge commit: the new cutoff hides
    the live rows the archive now holds."""
    p = history.p
    paths = p.lh.paths("trips")
    archive = commits(paths.archive)
    live = commits(paths.live)
    for version in (1, 2):
        committed = archive[version].ms
        purge = next(c for c in live if c.ms > committed)  # live's next commit: the purge
        mid = dt.datetime.fromtimestamp((committed + purge.ms) / 2000, UTC)
        pinned = p.lh.as_of(ROWS, mid)
        (split,) = pinned.splits
        assert split.archive.version == version and split.live.version == purge.version - 1
        label = "archived, not purged" if version == 1 else "archived again, not purged"
        for engine in ("spark", "duckdb") if version == 2 else ("duckdb",):
            assert answer(p, ROWS, engine, pinned) == history.moments[label][1], (version, engine)


def test_versions_are_resolved_as_delta_resolves_timestamps(history, spark):
    """The versions picked for a timestamp are those Delta's own history gives (commit file
    times): the same as ``timestampAsOf`` would read."""
    from delta.tables import DeltaTable

    p = history.p
    for part in ("live", "archive"):
        path = getattr(p.lh.paths("trips"), part)
        hist = DeltaTable.forPath(spark, path).history().selectExpr("version", "unix_millis(timestamp) AS ms")
        delta = sorted((r["version"], r["ms"]) for r in hist.collect())
        assert [(c.version, c.ms) for c in commits(path)] == delta
        for at, _ in history.moments.values():
            pinned = p.lh.as_of(ROWS, at)
            want = max(v for v, ms in delta if ms <= at.timestamp() * 1000)
            assert getattr(pinned.splits[0], part).version == want


def test_clear_errors(history):
    p = history.p
    before = format_timestamp(history.before)
    with pytest.raises(QueryError, match=rf"^trips: nothing to read as of {before}: the table's history runs from "
                                         r".* \(archive versions 0\.\.2, live versions 0\.\.\d+\)$"):
        p.lh.as_of(ROWS, history.before)
    with pytest.raises(QueryError, match=r"^trips: nothing to read as of 2001-01-01T00:00:00Z"):
        p.lh.query(ROWS, "duckdb", as_of="2001-01-01")
    with pytest.raises(QueryError, match=r"^trips: archive version 3 does not exist; archive versions 0\.\.2 exist "
                                         r"\(\d{4}-.*Z \.\. \d{4}-.*Z\)$"):
        p.lh.as_of(ROWS, 3)
    with pytest.raises(QueryError, match=r"a version is a number from 0 up"):
        p.lh.as_of(ROWS, "-1")
    with pytest.raises(QueryError, match=r"expected an archive version \(an integer\) or an ISO 8601 timestamp"):
        p.lh.as_of(ROWS, "yesterday")
    with pytest.raises(QueryError, match=r"is in the future"):
        p.lh.as_of(ROWS, now() + dt.timedelta(hours=1))
    both = "SELECT count(*) AS n FROM trips JOIN clicks ON trips.trip_id = clicks.url"
    with pytest.raises(QueryError, match=r"^--as-of 1: a version number is one table's archive version, and this "
                                         r"query reads 2 tables \(clicks, trips\): give a timestamp instead"):
        p.lh.as_of(both, 1)
    with pytest.raises(QueryError, match=r"reads no table: give a timestamp"):
        p.lh.as_of("SELECT 1 AS x", 1)
    # a CTE of its own name does not count as a second table; a timestamp is fine with two tables
    assert [s.name for s in p.lh.as_of("WITH t AS (SELECT * FROM trips) SELECT count(*) FROM t", 1).splits] == ["trips"]
    assert answer(p, both, "spark", history.moments["upserted"][0]) == answer(
        p, both, "duckdb", history.moments["upserted"][0]) == '[{"n": 0}]'
    with pytest.raises(QueryError, match="lakehouse_watermarks is the streams' current state"):
        p.lh.as_of("SELECT * FROM lakehouse_watermarks", history.moments["upserted"][0])
    with pytest.raises(QueryError, match="SHOW lists today's catalog"):
        p.lh.as_of("SHOW TABLES", history.moments["upserted"][0])


def test_cli(history):
    """The command line (DuckDB: no JVM to start): JSON unchanged in shape, the moment on
    stderr in text, one-line errors."""
    p = history.p
    at, want = history.moments["loaded again"]
    r = cli_in_process(p, "query", ROWS, "--engine", "duckdb", "--as-of", format_timestamp(at), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want
    r = cli_in_process(p, "query", "SELECT count(*) AS n FROM trips", "--engine", "duckdb", "--as-of", "1")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("as of ") and "trips: archive version 1 (cutoff 2026-11-19T00:00:00Z), live version" in r.stderr
    assert "│ 4 │" in r.stdout and "(1 row)" in r.stdout, r.stdout
    join = "SELECT * FROM trips JOIN clicks ON trips.trip_id = clicks.url"
    for sql, as_of, says in [
            (ROWS, "7", "error: trips: archive version 7 does not exist; archive versions 0..2 exist ("),
            (join, "1", "error: --as-of 1: a version number is one table's archive version, and this query reads 2")]:
        r = cli_in_process(p, "query", sql, "--engine", "duckdb", "--as-of", as_of, "--format", "json")
        assert r.returncode == 1 and r.stdout == "", r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(says), r.stderr


def test_vacuumed_versions_say_what_is_readable(history, tmp_path):
    """A copy of the warehouse (commit times kept) whose live table was vacuumed: the moments
    that need removed files are refused by name, later ones still read."""
    from deltalake import DeltaTable

    root = tmp_path / "copy"
    shutil.copytree(history.p.root, root)  # copy2: file times, so commit times, are kept
    p = Project(root)
    live = p.lh.paths("trips").live
    assert [c.ms for c in commits(live)] == [c.ms for c in commits(history.p.lh.paths("trips").live)]
    gone = DeltaTable(live).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert gone
    at, _ = history.moments["loaded"]  # live then held files the purges removed
    for engine in ("spark", "duckdb"):
        with pytest.raises(QueryError, match=r"^trips: as of .*Z, live version \d+ \(.*Z\) can no longer be read: "
                                             r"\d+ of its data files were vacuumed \(e\.g\. event_date=.*\); live versions "
                                             r"0\.\.\d+ exist \(.*\); version \d+ \(.*Z\) is the next one readable$"):
            p.lh.query(ROWS, engine, as_of=at)
    last_at, want = history.moments["archived again"]
    assert answer(p, ROWS, "duckdb", last_at) == want
    assert answer(p, ROWS, "spark", last_at) == want


def test_columns_added_later_read_as_nulls_at_earlier_moments(history, tmp_path):
    """After ``ctx.add_columns`` the views have the new column; at a moment before it, its
    values are NULL (typed) on both engines."""
    import json

    root = tmp_path / "copy"
    shutil.copytree(history.p.root, root)
    p = Project(root)
    text = (root / "tables" / "trips.yaml").read_text().replace(
        "  - {name: event_time, type: timestamp, nullable: false}",
        "  - {name: event_time, type: timestamp, nullable: false}\n  - {name: tip, type: 'decimal(10,2)'}")
    (root / "tables" / "trips.yaml").write_text(text)
    p.migration("0003_tip.py", """
        def upgrade(ctx):
            ctx.add_columns("trips", [{"name": "tip", "type": "decimal(10,2)"}])
    """)
    p.lh.migrate()
    at, before = history.moments["upserted"]
    want = [{**{k: v for k, v in r.items() if k != "event_date"}, "tip": None, "event_date": r["event_date"]}
            for r in json.loads(before)]
    for engine in ("spark", "duckdb"):
        got = json.loads(answer(p, ROWS, engine, at))
        assert got == want and [list(r) for r in got] == [list(r) for r in want], engine
    assert answer(p, ROWS, "spark", at) == answer(p, ROWS, "duckdb", at)
    sums = "SELECT sum(tip) AS tips, count(*) AS n FROM trips"
    assert answer(p, sums, "spark", 1) == answer(p, sums, "duckdb", 1) == '[{"tips": null, "n": 4}]'


def test_readme_mentions_as_of():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "--as-of" in readme
