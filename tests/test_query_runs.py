"""Group counts and sums answered from the archive's run lengths (lakehouse.query.runs), merged
with live through the split view: the same answer as reading the data files, on both engines.

One real table (sort columns int, string, decimal; nulls, NaN, infinities, -0.0, repeated keys,
day edges) archived up to a cutoff in the middle of a day, then rows loaded after it (visible)
and before it (invisible until the next run). Every query runs four ways (Spark and DuckDB, each
from the runs and from the data files) and all four must print the same JSON (doubles within the
stated relative tolerance: lakehouse.query.compare). A generated query family covers what the
list does not name. A query the runs cannot answer says why (``query --explain``) and reads the
data files.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import QueryError
from lakehouse.query.compare import compare_json
from tests.conftest import cli

pytestmark = pytest.mark.spark

EVENTS = """
name: events
columns:
  - {name: id,   type: string, nullable: false}
  - {name: a,    type: int}
  - {name: b,    type: string}
  - {name: c,    type: 'decimal(10,2)'}
  - {name: x,    type: double}
  - {name: n,    type: long}
  - {name: amt,  type: 'decimal(12,3)'}
  - {name: flag, type: boolean}
  - {name: d,    type: date}
  - {name: s,    type: string}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [id]
event_time: event_time
archive: {delay: 24h, interval: 2h, sort_columns: [a, b, c, x, n], vectors: all}
"""
HEADER = ["id", "a", "b", "c", "x", "n", "amt", "flag", "d", "s", "event_time"]
A = ["1", "1", "2", "", "-3", "2147483647", "-2147483648"]
B = ["p", "q", "", "ß", "Ä"]
C = ["0.00", "1.25", "-1.25", "", "99999999.99"]
X = ["1.5", "NaN", "inf", "-inf", "-0.0", "0.1", "", "1e300", "2.5", "0.0"]
N = ["1", "-7", "", "9000000000", "-9000000000", "3"]
AMT = ["1.001", "-2.500", "", "999999999.999", "0.000"]
TIMES = ["2026-11-18T00:00:00Z", "2026-11-18T23:59:59.999999Z", "2026-11-19T00:00:00Z", "2026-11-19T13:14:15Z",
         "2026-11-20T06:00:00Z", "2026-11-21T11:59:59.999999Z"]


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def rows(count: int, first: int, times: list[str]) -> list[list[str]]:
    """Deterministic rows cycling through the hostile values at different strides."""
    out = []
    for i in range(first, first + count):
        out.append([f"e{i}", A[i % len(A)], B[(i // 2) % len(B)], C[(i // 3) % len(C)], X[i % len(X)],
                    N[(i // 5) % len(N)], AMT[i % len(AMT)], ["true", "false", ""][i % 3],
                    ["2024-02-29", "", "1969-12-31"][i % 3], ["s", "", "t"][i % 3], times[i % len(times)]])
    return out


@pytest.fixture(scope="module")
def events(tmp_path_factory, spark):
    from tests.conftest import Project

    p = Project(tmp_path_factory.mktemp("runs") / "proj")
    p.table(EVENTS).create("events")
    p.lh.load("events", [p.csv("old.csv", HEADER, rows(400, 0, TIMES))])
    p.lh.archive("events", now=ts("2026-11-22T12:00:00Z"), allow_future=True)  # cutoff 2026-11-21T12:00
    late = ["2026-11-21T12:00:00Z", "2026-11-21T18:00:00Z", "2026-11-22T00:00:00Z", "2026-11-23T01:02:03Z",
            "2026-11-20T10:00:00Z"]  # the last: before the cutoff, invisible until the next run
    p.lh.load("events", [p.csv("new.csv", HEADER, rows(60, 1000, late))])
    return p


ANSWERED = [
    "SELECT a, b, count(*) AS n FROM events GROUP BY a, b",
    "SELECT count(*) FROM events",
    "SELECT a, count(*), sum(x), avg(x), min(x), max(x) FROM events GROUP BY a",
    "SELECT a, b, sum(n) AS sn, avg(n) AS an, count(n) AS cn, min(n) AS lo, max(n) AS hi FROM events GROUP BY a, b",
    "SELECT b, sum(c) AS s, count(c) AS k, min(c) AS lo, max(c) AS hi, avg(c) AS m FROM events GROUP BY b",
    "SELECT a, b, avg(c) AS m, sum(c) AS s FROM events GROUP BY a, b",
    "SELECT a, sum(c) AS s, avg(a) AS aa, sum(a) AS sa, min(c), max(b) FROM events GROUP BY a",
    "SELECT event_date, count(*) AS n, sum(x) AS sx FROM events GROUP BY event_date",
    ("SELECT b, count(*) AS k FROM events WHERE event_date >= DATE '2026-11-19' AND a IN (1, 2) "
     "GROUP BY b HAVING count(*) > 1 ORDER BY k DESC, b LIMIT 3"),
    "SELECT a, b, c, count(*) AS k, sum(x) AS sx, min(n) AS mn, max(x) AS mx, count(n) AS cn FROM events GROUP BY 1, 2, 3",
    "SELECT a, b, c, x, count(*) AS k, sum(n) AS sn, avg(n) AS an FROM events GROUP BY 1, 2, 3, 4",
    "SELECT count(DISTINCT a) AS da, count(DISTINCT b) AS db, count(a) AS ca, count(c) AS cc FROM events",
    "SELECT a, count_if(b = 'p') AS cp, sum(c) FILTER (WHERE b IS NULL) AS sc FROM events GROUP BY a",
    "SELECT DISTINCT a, b FROM events",
    "SELECT a, rank() OVER (ORDER BY count(*) DESC, a) AS r, sum(count(*)) OVER () AS total FROM events GROUP BY a",
    "SELECT 2 / avg(n) AS r, count(*) * 2 AS twice FROM events WHERE a IS NOT NULL",
    "SELECT upper(b) AS ub, count(*) AS n FROM events WHERE b <> '' GROUP BY upper(b)",
    "SELECT count(*) AS n, sum(x) AS s FROM events WHERE a > 1000000",
    ("SELECT a, b, c, x, count(*) AS k, min(x) AS lo FROM events WHERE x >= 0 AND x IN (0.0, 1.5, 2.5) "
     "GROUP BY a, b, c, x ORDER BY x"),
    "SELECT a, count(*) AS k, sum(n) AS sn FROM events WHERE x > 0 GROUP BY a",  # NaN > 0, as Spark has it
]

SCANNED = [
    ("SELECT s, count(*) FROM events GROUP BY s", "column s row by row"),
    ("SELECT a, sum(amt * 2) AS s FROM events GROUP BY a", "SUM(amt * 2) reads column amt"),
    ("SELECT a, sum(x * 2) AS s FROM events GROUP BY a", "double key x is read in x * 2"),
    ("SELECT a, sum(c * 2) AS s FROM events GROUP BY a", "SUM(c * 2) is not answered from runs"),
    ("SELECT a, first(c) AS f FROM events GROUP BY a", "FIRST(c) is not answered from runs"),
    ("SELECT a, count(*) FROM events WHERE rand() < 2 GROUP BY a", "rand() is a row's own value"),
    ("SELECT * FROM events", "SELECT * reads every column"),
    ("SELECT a, avg(amt) AS m FROM events GROUP BY a", "AVG(amt) reads column amt row by row"),
    ("SELECT a, min(event_time) AS t FROM events GROUP BY a", "reads column event_time row by row"),
    ("SELECT x FROM events WHERE a = 1", "does not aggregate"),
    ("SELECT a, count(*) FROM (SELECT a FROM events) GROUP BY a", "exactly one table"),
    ("SELECT a, mean(x) AS m FROM events GROUP BY a", "mean() is not known"),
    ("SELECT a, try_sum(n) AS m FROM events GROUP BY a", "try_sum() is not known"),
    ("SELECT DISTINCT a, count(*) OVER (PARTITION BY a) AS k FROM events", "window function"),
    ("SELECT count(DISTINCT input_file_name()) AS f FROM events", "input_file_name() is a row's own"),
    ("SELECT a AS n, count(*) AS k FROM events GROUP BY a HAVING count(n) > 0", "n names both a result"),
    ("SELECT a, count(*) AS _lh_rows FROM events GROUP BY a ORDER BY count(*)", "_lh_rows is of lakehouse"),
    ("SELECT a, b, c, CAST(x AS STRING) AS s, count(*) AS k FROM events GROUP BY 1, 2, 3, 4",
     "double key x is read in CAST(x AS STRING)"),
    ("SELECT a, b, c, 1 / x AS r, count(*) AS k FROM events GROUP BY a, b, c, x", "double key x"),
    ("SELECT a, count(*) FROM events GROUP BY a", None),  # answered: the control
]


def four(p, sql: str) -> dict[str, object]:
    return {f"{engine}/{'runs' if runs else 'scan'}": p.lh.query(sql, engine, runs=runs)
            for engine in ("spark", "duckdb") for runs in (True, False)}


@pytest.mark.parametrize("sql", ANSWERED, ids=[f"q{i:02d}" for i in range(len(ANSWERED))])
def test_runs_give_the_data_files_answer_on_both_engines(events, sql):
    plan = events.lh.explain(sql)
    assert plan.path == "runs", plan.reason
    answers = four(events, sql)
    reference = answers.pop("spark/scan")
    for name, got in answers.items():
        same = compare_json(reference, got, "spark/scan", name)
        assert same.equal, f"{name}: {same.detail}"


def test_the_groups_stand_for_every_visible_row_once(events):
    plan = events.lh.explain("SELECT count(*) FROM events")
    doc = plan.explain()
    assert doc["path"] == "runs" and doc["archive_days"] == 4 and doc["vector_files"] == 0
    pruned = events.lh.explain("SELECT count(*) FROM events WHERE event_date >= '2026-11-20' AND a = 1").explain()
    assert pruned["path"] == "runs" and pruned["archive_days"] == 2 and pruned["vector_files"] == 2
    assert doc["archive_rows"] == 400 - sum(1 for r in rows(400, 0, TIMES) if r[-1] >= "2026-11-21T12")
    live_visible = sum(1 for r in rows(60, 1000, ["a", "b", "c", "d", "e"]) if r[-1] != "e")
    assert doc["live_rows"] == live_visible
    total = events.lh.query("SELECT count(*) AS n FROM events", "duckdb", runs=False).column("n")[0].as_py()
    assert doc["archive_rows"] + doc["live_rows"] == total


@pytest.mark.parametrize("sql,why", SCANNED, ids=[f"s{i}" for i in range(len(SCANNED))])
def test_what_the_runs_cannot_answer_reads_the_data_files(events, sql, why):
    plan = events.lh.explain(sql)
    if why is None:
        assert plan.path == "runs"
        return
    assert plan.path == "scan" and why in (plan.reason or ""), plan.reason
    assert "\n" not in plan.reason


def test_the_runs_read_no_data_file(events, tmp_path):
    """With every archive data file gone, the runs still answer; the data files path cannot."""
    from tests.conftest import Project

    copy = Project(tmp_path / "copy")
    shutil.rmtree(copy.root)
    shutil.copytree(events.root, copy.root)
    copy.settings = copy.settings.__class__.resolve(copy.root, str(copy.root / "warehouse"), events.settings.master,
                                                    env={})
    copy.lh = copy.lh.__class__(copy.settings)
    sql = "SELECT a, b, count(*) AS k, sum(x) AS sx, max(n) AS mn FROM events GROUP BY a, b"
    want = events.lh.query(sql, "duckdb", runs=False)
    for f in Path(copy.settings.warehouse, "events", "archive").rglob("*.parquet"):
        f.unlink()
    got = copy.lh.query(sql, "duckdb")
    assert compare_json(want, got).equal
    with pytest.raises(QueryError):
        copy.lh.query(sql, "duckdb", runs=False)


def test_query_explain_names_the_path(events):
    out = cli(events, "query", "--engine", "duckdb", "--explain", "--format", "json",
              "SELECT a, count(*) AS n FROM events GROUP BY a")
    doc = json.loads(out.stdout)
    assert doc["path"] == "runs" and doc["engine"] == "duckdb" and "_lh_groups" in doc["sql"]
    out = cli(events, "query", "--explain", "SELECT s, count(*) AS n FROM events GROUP BY s")
    assert "path" in out.stdout and "scan" in out.stdout and "column s row by row" in out.stdout
    out = cli(events, "query", "--explain", "--scan", "--format", "json", "SELECT count(*) FROM events")
    assert json.loads(out.stdout)["path"] == "scan"


# -- a generated family ------------------------------------------------------------------------

KEYS = ["a", "b", "c", "event_date"]
AGGS = ["count(*)", "count({m})", "sum({n})", "avg({n})", "min({m})", "max({m})", "count(DISTINCT {k})",
        "count_if({k} IS NULL)", "min({k})", "max({k})", "sum({g})", "avg({g})",
        "count(*) FILTER (WHERE {k} IS NOT NULL)", "sum({g}) FILTER (WHERE b = 'p')"]
GROUPED_NUMBERS = ["a", "c"]
NUMERIC = ["x", "n", "a", "c"]
ANY = ["x", "n", "a", "b", "c"]
FILTERS = ["a IS NULL", "a IN (1, 2)", "b = 'p'", "b IS NOT NULL AND b > 'a'", "c > 0", "c IS NULL",
           "event_date = DATE '2026-11-19'", "event_date >= DATE '2026-11-21'", "a < 0 OR b = 'ß'"]


@st.composite
def queries(draw) -> str:
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
    aggs = []
    for i in range(draw(st.integers(1, 3))):
        form = draw(st.sampled_from(AGGS))
        n = draw(st.sampled_from(NUMERIC))
        aggs.append(form.format(m=draw(st.sampled_from(ANY)), n=n, k=draw(st.sampled_from(KEYS)),
                                g=draw(st.sampled_from(GROUPED_NUMBERS))) + f" AS v{i}")
    where = draw(st.lists(st.sampled_from(FILTERS), max_size=2, unique=True))
    sql = f"SELECT {', '.join([*keys, *aggs])} FROM events"
    if where:
        sql += " WHERE " + " AND ".join(f"({w})" for w in where)
    if keys:
        sql += f" GROUP BY {', '.join(keys)}"
        if draw(st.booleans()):
            sql += f" HAVING count(*) > {draw(st.integers(0, 3))}"
        if draw(st.booleans()):
            sql += " ORDER BY 1"
    return sql


EXAMPLES = int(os.environ.get("LAKEHOUSE_RUNS_EXAMPLES", "25"))
"""Generated queries in ``make test`` (a fixed sequence); more: LAKEHOUSE_RUNS_EXAMPLES=500
LAKEHOUSE_RUNS_RANDOM=1 pytest tests/test_query_runs.py."""


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("LAKEHOUSE_RUNS_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sql=queries())
def test_generated_group_queries_match_the_data_files(events, sql):
    plan = events.lh.explain(sql)
    assert plan.path == "runs", f"{sql}: {plan.reason}"
    want = events.lh.query(sql, "duckdb", runs=False)
    got = events.lh.query(sql, "duckdb")
    same = compare_json(want, got, "scan", "runs")
    assert same.equal, f"{sql}: {same.detail}"


def test_on_spark_many_groups_read_the_data_files(events, monkeypatch):
    """Groups travel to Spark as a local relation: past ``SPARK_GROUPS`` the scan is cheaper."""
    from lakehouse.query import runs

    sql = "SELECT a, b, count(*) AS k FROM events GROUP BY a, b"
    assert events.lh.explain(sql, "spark").path == "runs"
    monkeypatch.setattr(runs, "SPARK_GROUPS", 3)
    plan = events.lh.explain(sql, "spark")
    assert plan.path == "scan" and "groups are more than Spark takes from the runs (3" in (plan.reason or "")
    assert events.lh.explain(sql, "duckdb").path == "runs"
