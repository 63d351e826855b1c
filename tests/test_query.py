"""Queries on both engines over the same Delta tables: saved queries agree, UTC days agree."""

from __future__ import annotations

import datetime as dt

import pytest

from lakehouse.errors import QueryError
from lakehouse.query.duckdb import transpile
from tests.conftest import HEADER_SMALL, TRIPS_SMALL

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def loaded_repo(tmp_path_factory, spark):
    """This repository's project with generated trips loaded (module-scoped: built once)."""
    from lakehouse.demo import generate
    from tests.conftest import Project
    import shutil
    from tests.conftest import REPO

    root = tmp_path_factory.mktemp("q") / "repo"
    root.mkdir()
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(REPO / d, root / d)
    p = Project(root)
    p.lh.migrate()
    data = generate(root / "in", rows=3000, days=3, end=dt.date(2026, 11, 20))
    # through ingest with the shipped trips.yaml settings: days, then updates, then requests
    r = p.lh.ingest("trips", str(root / "in"), drain=True)
    assert [f for b in r.batches for f in b.files] == [f.name for f in data.files]
    assert r.rows + r.rows_rejected == data.rows_written and r.rows_rejected == data.bad_rows
    return p


def test_every_saved_query_agrees_on_both_engines(loaded_repo):
    queries = loaded_repo.lh.saved_queries()
    assert len(queries) >= 4
    for q in queries:
        s, d, cmp = loaded_repo.lh.compare_engines(q.sql)
        assert cmp.equal, f"queries/{q.path.name}: {cmp.detail}"
        assert s.num_rows > 0, f"queries/{q.path.name} returned nothing on the demo data"


def test_engines_agree_on_utc_days_around_midnight(project, spark):
    project.table(TRIPS_SMALL).create("trips")
    times = ["2026-11-20T23:59:59.999999Z", "2026-11-21T00:00:00Z", "2026-11-20T20:00:00-05:00",
             "2026-11-21T01:00:00+02:00", "2026-03-29T01:30:00Z"]
    f = project.csv("a.csv", HEADER_SMALL, [[f"t{i}", 1, 0, 1.0, 1.0, "1.00", "true", "", t] for i, t in enumerate(times)])
    project.lh.load("trips", [f])
    sql = ("SELECT event_date, CAST(event_time AS DATE) AS d, hour(event_time) AS h, count(*) AS n "
           "FROM trips GROUP BY event_date, CAST(event_time AS DATE), hour(event_time) ORDER BY event_date, h")
    s = project.lh.query(sql, "spark").to_pylist()
    d = project.lh.query(sql, "duckdb").to_pylist()
    assert s == d
    # 20:00-05:00 is 01:00 UTC on the 21st; 01:00+02:00 is 23:00 UTC on the 20th
    assert [(r["event_date"], r["h"], r["n"]) for r in s] == [
        (dt.date(2026, 3, 29), 1, 1), (dt.date(2026, 11, 20), 23, 2),
        (dt.date(2026, 11, 21), 0, 1), (dt.date(2026, 11, 21), 1, 1),
    ]
    assert all(r["event_date"] == r["d"] for r in s)


def test_query_errors_name_the_engine(loaded_repo):
    with pytest.raises(QueryError, match=r"^spark: .*no_such_table"):
        loaded_repo.lh.query("SELECT * FROM no_such_table", "spark")
    with pytest.raises(QueryError, match=r"^duckdb: .*no_such_table"):
        loaded_repo.lh.query("SELECT * FROM no_such_table", "duckdb")
    with pytest.raises(QueryError, match="exactly one SQL statement"):
        loaded_repo.lh.query("SELECT 1; SELECT 2", "duckdb")


def test_transpile_quotes_identifiers_duckdb_reserves():
    out = transpile("SELECT at, count(*) FROM clicks GROUP BY at")
    assert '"at"' in out and '"clicks"' in out
