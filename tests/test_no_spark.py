"""Commands that need no Spark start none: plans, "nothing to do", the state of tables, their
rejects, logs and histories answer from Delta's log (delta-rs) and lakehouse's files; argument,
path and name errors answer before anything is started or recorded.

Each command runs in a process of its own with a Spark master that cannot start
(``NO_JVM``) and no server: a command that tried to start Spark would fail.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse import delta_log
from tests.conftest import TRIPS_SMALL, Project

pytestmark = pytest.mark.slow

NO_JVM = "no-such-master://a-command-here-must-not-start-spark"
NOW = "2026-11-24T00:00:00Z"


def run(p: Project, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_MASTER"] = NO_JVM
    return subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(p.root), "--warehouse",
                           p.settings.warehouse, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def project(spark, tmp_path_factory) -> Project:
    """trips, migrated, with rows loaded and one archive run (in this process, on the shared session)."""
    p = Project(tmp_path_factory.mktemp("nospark") / "proj").table(TRIPS_SMALL).create("trips")
    f = p.csv("t.csv", ["trip_id", "city_id", "status", "fx_rate", "event_time"],
              [["a", 1, 2, 1.5, "2026-11-20T10:00:00Z"], ["b", 2, 1, 0.5, "2026-11-22T10:00:00Z"],
               ["c", 3, 1, "oops", "2026-11-23T10:00:00Z"]])
    p.lh.load("trips", [f])
    p.lh.archive("trips", now=dt.datetime(2026, 11, 23, tzinfo=dt.UTC))
    return p


ANSWERS = [
    ("tables",),
    ("tables", "--format", "json"),
    ("rejects", "trips", "--format", "json"),
    ("ingest-log", "trips", "--format", "json"),
    ("stream", "trips", "--format", "json"),
    ("jobs", "history", "--format", "json"),
    ("check", "trips", "--history", "--format", "json"),
    ("migrate", "--status", "--format", "json"),
    ("migrate", "--format", "json"),  # nothing pending
    ("archive", "trips", "--dry-run", "--now", NOW, "--format", "json"),
    ("archive", "trips", "--now", "2026-11-23T00:00:00Z", "--format", "json"),  # nothing to do
    ("optimize", "trips", "--dry-run", "--format", "json"),
    ("vacuum", "trips", "--dry-run", "--format", "json"),
    ("jobs", "run", "--dry-run", "--now", NOW, "--format", "json"),
    ("query", "SELECT count(*) AS n FROM trips", "--engine", "duckdb", "--format", "json"),
    ("query", "SELECT city_id, count(*) AS n FROM trips GROUP BY 1", "--engine", "duckdb", "--format", "json"),
    ("query", "--explain", "SELECT city_id, count(*) AS n FROM trips GROUP BY 1", "--format", "json"),
]


@pytest.mark.parametrize("args", ANSWERS, ids=lambda a: " ".join(a[:3]))
def test_answers_without_spark(project: Project, args: tuple[str, ...]) -> None:
    p = run(project, *args)
    assert p.returncode == 0, f"{args}: {p.stderr[-1500:]}"
    assert "cannot start Spark" not in p.stderr
    if "json" in args:
        json.loads(p.stdout)


ERRORS = [
    (("load", "trips", "data/nope.csv"), 2, "nope.csv"),
    (("load", "nosuch", "{csv}"), 1, "nosuch"),
    (("archive", "nosuch"), 1, "nosuch"),
    (("query", "SELECT 1", "--engine", "oracle"), 2, "oracle"),
    (("optimize", "trips", "--day", "2026-13-40"), 2, "2026-13-40"),
    (("rejects", "nosuch"), 1, "nosuch"),
    (("load", "trips", "{csv}", "--input-format", "xml"), 2, "xml"),
]


@pytest.mark.parametrize("args,code,named", ERRORS, ids=lambda a: " ".join(a) if isinstance(a, tuple) else str(a))
def test_errors_answer_before_spark_and_record_nothing(project: Project, args: tuple[str, ...], code: int,
                                                        named: str) -> None:
    csv = str(project.root / "data" / "t.csv")
    rejects_before = delta_log.row_count(project.lh.paths("trips").rejects)
    log_before = project.lh.ingest_log("trips")
    p = run(project, *(a.format(csv=csv) for a in args))
    assert p.returncode == code, f"{args}: {p.returncode} {p.stderr[-1500:]}"
    assert "cannot start Spark" not in p.stderr and named in p.stderr
    assert delta_log.row_count(project.lh.paths("trips").rejects) == rejects_before
    assert project.lh.ingest_log("trips") == log_before


def test_a_missing_input_file_is_a_usage_error_naming_it(project: Project) -> None:
    missing = Path(project.root) / "data" / "nope.csv"
    p = run(project, "load", "trips", str(missing))
    assert p.returncode == 2
    assert str(missing) in p.stderr and "does not exist" in p.stderr


def test_small_loads_and_inserts_start_no_spark(spark, tmp_path: Path) -> None:
    """A one-file load, a producer's attach, insert (an update, a new key, a bad and a late row),
    heartbeat and detach commit into live and rejects through delta-rs; Spark reads the result."""
    p = Project(tmp_path / "proj").table(TRIPS_SMALL + "stream: {allowed_lateness: 0}\n").create("trips")
    header = ["trip_id", "city_id", "status", "fx_rate", "event_time"]
    a = p.csv("a.csv", header, [["a", 1, 1, 1.5, "2026-11-20T10:00:00Z"], ["b", 2, 1, 0.5, "2026-11-20T11:00:00Z"],
                                ["c", 3, 1, "oops", "2026-11-20T12:00:00Z"]])
    b = p.csv("b.csv", header, [["a", 1, 2, 1.5, "2026-11-20T13:00:00Z"], ["d", 4, 1, 2.5, "2026-11-20T13:30:00Z"],
                                ["e", 5, 1, 0.1, "2026-11-20T08:00:00Z"]])
    now = ("--now", "2026-11-20T14:00:00Z")
    steps = [("load", "trips", a), ("producer", "trips", "P", "attach", "--bound", "2026-11-20T12:30:00Z", *now),
             ("producer", "trips", "P", "insert", b, *now), ("producer", "trips", "P", "heartbeat", *now),
             ("producer", "trips", "P", "detach", *now), ("stream", "trips", "--format", "json", *now)]
    for args in steps:
        r = run(p, *args)
        assert r.returncode == 0, f"{args}: {r.stderr[-1500:]}"
        assert "cannot start Spark" not in r.stderr
    assert json.loads(r.stdout)["staged"] == 0
    live = {x["trip_id"]: x["status"] for x in delta_log.scan(p.lh.paths("trips").live).to_pylist()}
    assert live == {"a": 2, "b": 1, "d": 1}
    reasons = sorted((os.path.basename(x["source"]), x["line"], x["reason"] == "late_row") for x in p.lh.rejects("trips"))
    assert reasons == [("a.csv", 4, False), ("b.csv", 4, True)]
    rows = spark.read.format("delta").load(p.lh.paths("trips").live).orderBy("trip_id").collect()
    assert [(x.trip_id, x.status) for x in rows] == [("a", 2), ("b", 1), ("d", 1)]
