"""Archive safety (issue 7, section 4): a clock typo cannot commit a future cutoff, readers take
one committed cutoff, day names for every date, backfills at scale, concurrent runs, settings
changes. Real Spark + Delta, read back through DuckDB; pure parts get fast unit tests."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

from lakehouse.archive.job import check_now
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
    with pytest.raises(LakehouseError, match=r"archive trips: --now 2026-11-22T12:01:01\+00:00 is 1m 1s ahead"):
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
    p = subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(tmp_path), "archive", "clicks",
                        "--now", "2126-11-20T00:00:00Z"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: archive clicks: --now 2126-11-20T00:00:00+00:00 is ")
    assert "--allow-future" in lines[0]
