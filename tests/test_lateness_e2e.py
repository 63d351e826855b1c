"""``lakehouse lateness`` end to end on real Spark + Delta, read by DuckDB: arrivals generated
with known delay distributions (source ``load``: exponential, mean 1h, and 40 rows backfilled
about 50h late; producer ``app``: uniform over 0..7.5h) after a first archiving run (on the
empty table; delay 6h), so the rows below its cutoff take the late path; 5 rows of app's 10 days
old, rejected late; a second run that merges the late rows into the archive.

Event times are whole seconds before the wall clock at generation; load times are the wall
clock at the release into live, a few seconds later: the measured lateness is the drawn delay
plus that load latency.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import Project, cli_in_process

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
HOUR = 3600
TABLE = """
name: clicks
columns:
  - {name: id, type: long, nullable: false}
  - {name: src, type: string}
  - {name: at, type: timestamp, nullable: false}
event_time: at
archive: {delay: 6h, interval: 1h}
stream: {allowed_lateness: 3d}
"""
LATENCY = 120
"""Seconds a load may take from generating its rows to their release into live (slack)."""


def quantile(values: np.ndarray, q: float) -> int:
    """The inverted-CDF quantile, computed independently of the code under test."""
    v = np.sort(values)
    return int(v[max(1, math.ceil(Fraction(str(q)) * len(v))) - 1])


class Scenario:
    """What was generated, and the profiles taken along the way."""

    def __init__(self) -> None:
        self.delays: dict[str, list[int]] = {"load": [], "app": [], "backfill": []}
        self.events: dict[str, list[int]] = {"load": [], "app": []}
        self.next_id = 0
        self.cutoff1 = 0
        self.loaded = (0.0, 0.0)
        self.archived2 = (0.0, 0.0)
        self.before: Any = None
        self.after: Any = None
        self.recent: Any = None

    def rows(self, source: str, delays: np.ndarray, kind: str | None = None) -> list[dict[str, Any]]:
        now = int(time.time())
        out = []
        for d in delays.tolist():
            self.next_id += 1
            t = now - int(d)
            self.delays[kind or source].append(int(d))
            self.events[source].append(t)
            out.append({"id": self.next_id, "src": kind or source, "at": dt.datetime.fromtimestamp(t, UTC)})
        return out


@pytest.fixture(scope="module")
def scenario(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Scenario]:
    p = Project(tmp_path_factory.mktemp("lateness") / "proj")
    p.table(TABLE).create("clicks")
    s = Scenario()
    rng = np.random.default_rng(20261123)
    first = p.lh.archive("clicks")  # now - 6h, on an empty table
    s.cutoff1 = first.plan.cutoff
    started = time.time()
    # source load: exponential delays, and 40 backfilled rows about 50h late
    rows = s.rows("load", np.ceil(rng.exponential(HOUR, 2000)))
    rows += s.rows("load", np.ceil(rng.uniform(50 * HOUR, 51 * HOUR, 40)), kind="backfill")
    path = p.csv("a.csv", ["id", "src", "at"], [[r["id"], r["src"], r["at"].isoformat()] for r in rows])
    assert p.lh.load("clicks", [path]).rows_loaded == 2040
    rows = s.rows("app", np.ceil(rng.uniform(0, 7.5 * HOUR, 2000)))  # producer app: uniform delays
    # and 5 rows 10 days old: more than stream.allowed_lateness (3d) behind the bound, rejected late
    rows += [{"id": 10**6 + i, "src": "old", "at": dt.datetime.now(UTC) - dt.timedelta(days=10)} for i in range(5)]
    with p.lh.table("clicks").producer("app") as prod:
        r = prod.insert(rows).as_dict()
        assert (r["rows_loaded"], r["rows_late"]) == (2000, 5)
    s.loaded = (started, time.time())
    s.before = p.lh.lateness("clicks")  # rows below cutoff1 wait in live
    started = time.time()
    # the cutoff moves in whole seconds: a run in the same second as the first (a warm JVM does
    # all of the above in < 1 s) would not advance and would leave the late rows waiting
    second = p.lh.archive("clicks", now=max(dt.datetime.now(UTC), first.plan.now + dt.timedelta(seconds=1)))
    assert second.committed and second.plan.late_rows > 0, second.plan.as_dict()
    s.archived2 = (started, time.time())
    s.after = p.lh.lateness("clicks")
    s.recent = p.lh.lateness("clicks", days=1)
    return p, s


def test_percentiles_and_suggestion_match_the_known_distributions(scenario: tuple[Project, Scenario]) -> None:
    _, s = scenario
    prof = s.recent  # the last day: load's exponential rows and app's uniform ones, not the backfill
    drawn = np.array(s.delays["load"] + s.delays["app"])
    assert prof.rows == len(drawn) == 4000 and prof.unknown == 0
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)):
        exact = quantile(drawn, q)
        assert exact <= prof.percentiles[key] <= exact + LATENCY, (key, prof.percentiles[key], exact)
    by = {x.source: x for x in prof.sources}
    # per source, against the distributions themselves (sampling noise: a few percent)
    assert by["load"].percentiles["p50"] == pytest.approx(np.log(2) * HOUR, rel=0.08)
    assert by["load"].percentiles["p90"] == pytest.approx(np.log(10) * HOUR, rel=0.08)
    assert by["app"].percentiles["p50"] == pytest.approx(0.5 * 7.5 * HOUR, rel=0.05)
    assert by["app"].percentiles["p90"] == pytest.approx(0.9 * 7.5 * HOUR, rel=0.05)
    # 99.9% of the rows need about 7.5h: 8h is the smallest whole hour, 7h is not enough
    assert prof.delay["suggested"] == "8h" and prof.delay["suggested_seconds"] == 8 * HOUR
    assert prof.delay["change"] == "longer" and prof.delay["current"] == "6h"
    covered = np.count_nonzero(drawn <= 6 * HOUR) / len(drawn)
    assert prof.delay["current_covers"] == pytest.approx(covered, abs=0.01)
    # over all the days the backfill (1% of the rows, ~50h late) sets the 99.9% delay
    assert s.after.rows == 4040 and s.after.delay["suggested"] in ("51h", "52h")


def test_per_source_numbers_and_rejected_late(scenario: tuple[Project, Scenario]) -> None:
    _, s = scenario
    by = {x.source: x for x in s.after.sources}
    assert {n: by[n].rows for n in by} == {"load": 2040, "app": 2000}
    assert {n: by[n].rejected_late for n in by} == {"load": 0, "app": 5}
    assert s.after.rejected_late == {"rows": 5, "by_producer": {"app": 5}}
    back = np.array(s.delays["backfill"])
    assert int(back.max()) <= by["load"].percentiles["max"] <= int(back.max()) + LATENCY
    assert {x.source: x.rows for x in s.recent.sources} == {"load": 2000, "app": 2000}


def test_late_path_counts_and_waits(scenario: tuple[Project, Scenario]) -> None:
    _, s = scenario
    # every row was loaded after the first run: those below its cutoff took the late path
    expected = {n: sum(1 for t in s.events[n] if t < s.cutoff1) for n in ("load", "app")}
    total = sum(expected.values())
    assert expected["app"] > 300 and expected["load"] >= 40  # a fifth of app's, load's tail and the backfill
    before = s.before.late_path
    assert (before["rows"], before["waiting"], before["archived"]) == (total, total, 0)
    assert 0 <= before["waiting_longest"] <= s.archived2[0] - s.loaded[0] + LATENCY
    after = s.after.late_path
    assert (after["rows"], after["waiting"], after["archived"]) == (total, 0, total)
    assert after["share"] == pytest.approx(total / 4040)
    longest = s.archived2[1] - s.loaded[0]
    assert 0 < after["wait"]["p50"] <= after["wait"]["max"] <= longest + 2, (after, longest)
    assert {x.source: x.late_path for x in s.after.sources} == expected
    assert s.recent.late_path["rows"] == total - 40  # the last day leaves the backfill out
    # the second run archived rows above the first cutoff too: those were not late
    assert s.after.rows - total > 0


def test_cli_json_and_plot(scenario: tuple[Project, Scenario], tmp_path: Path) -> None:
    p, s = scenario
    png = tmp_path / "lateness.png"
    r = cli_in_process(p, "lateness", "clicks", "--days", "1", "--fraction", "0.99", "--plot", str(png), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["table"] == "clicks" and doc["fraction"] == 0.99 and doc["rows"] == 4000
    assert list(doc["lateness"]) == ["p50", "p90", "p99", "p99.9", "max"]
    assert doc["late_path"]["rows"] == s.recent.late_path["rows"] and doc["rejected_late"]["rows"] == 5
    assert doc["delay"]["needed_seconds"] == doc["lateness"]["p99"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = cli_in_process(p, "lateness", "clicks")
    assert text.returncode == 0, text.stderr
    assert "suggested archive.delay" in text.stdout and "late path:" in text.stdout
    bad = cli_in_process(p, "lateness", "nope")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("error: table 'nope'")
    assert cli_in_process(p, "lateness", "clicks", "--fraction", "1.5").returncode == 2
