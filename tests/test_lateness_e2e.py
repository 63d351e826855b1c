"""``lakehouse lateness`` end to end on real Spark + Delta, read by DuckDB: arrivals generated
with known delay distributions (source ``load``: exponential, mean 1h; producer ``app``: uniform
over 0..7.5h; producer ``backfill``: about 50h), an archiving run, a second batch whose rows
below the cutoff take the late path, a producer whose rows are rejected late, a second run.

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

from tests.conftest import Project, cli

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
        self.events: dict[str, list[int]] = {"load": [], "app": [], "backfill": []}
        self.batch_b: dict[str, list[int]] = {"load": [], "app": []}
        self.next_id = 0
        self.cutoff1 = 0
        self.loaded_b = (0.0, 0.0)
        self.archived2 = (0.0, 0.0)
        self.before: Any = None
        self.after: Any = None
        self.recent: Any = None

    def rows(self, source: str, delays: np.ndarray, batch_b: bool = False) -> list[dict[str, Any]]:
        now = int(time.time())
        out = []
        for d in delays.tolist():
            self.next_id += 1
            t = now - int(d)
            self.delays[source].append(int(d))
            self.events[source].append(t)
            if batch_b:
                self.batch_b[source].append(t)
            out.append({"id": self.next_id, "src": source, "at": dt.datetime.fromtimestamp(t, UTC)})
        return out


def load_csv(p: Project, s: Scenario, name: str, delays: np.ndarray, batch_b: bool = False) -> None:
    rows = s.rows("load", delays, batch_b)
    path = p.csv(name, ["id", "src", "at"], [[r["id"], r["src"], r["at"].isoformat()] for r in rows])
    r = p.lh.load("clicks", [path])
    assert r.rows_loaded == len(rows)


def insert(p: Project, s: Scenario, producer: str, delays: np.ndarray, batch_b: bool = False) -> None:
    rows = s.rows(producer, delays, batch_b)
    with p.lh.table("clicks").producer(producer) as prod:
        assert prod.insert(rows).rows_loaded == len(rows)


@pytest.fixture(scope="module")
def scenario(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Scenario]:
    p = Project(tmp_path_factory.mktemp("lateness") / "proj")
    p.table(TABLE).create("clicks")
    s = Scenario()
    rng = np.random.default_rng(20261123)
    # batch A: before any archiving run (no row can take the late path)
    load_csv(p, s, "a.csv", np.ceil(rng.exponential(HOUR, 1500)))
    insert(p, s, "app", np.ceil(rng.uniform(0, 7.5 * HOUR, 1500)))
    insert(p, s, "backfill", np.ceil(rng.uniform(50 * HOUR, 51 * HOUR, 40)))
    s.cutoff1 = p.lh.archive("clicks").plan.cutoff
    # batch B: rows already below the cutoff wait in live
    started = time.time()
    load_csv(p, s, "b.csv", np.ceil(rng.exponential(HOUR, 500)), batch_b=True)
    insert(p, s, "app", np.ceil(rng.uniform(0, 7.5 * HOUR, 500)), batch_b=True)
    s.loaded_b = (started, time.time())
    old = [{"id": 10**6 + i, "src": "old", "at": dt.datetime.now(UTC) - dt.timedelta(days=10)} for i in range(5)]
    with p.lh.table("clicks").producer("old") as prod:  # 10 days behind the stream's bound: rejected late
        assert prod.insert(old).rows_late == 5
    s.before = p.lh.lateness("clicks")
    started = time.time()
    p.lh.archive("clicks")
    s.archived2 = (started, time.time())
    s.after = p.lh.lateness("clicks")
    s.recent = p.lh.lateness("clicks", days=1)
    return p, s


def test_percentiles_and_suggestion_match_the_known_distributions(scenario: tuple[Project, Scenario]) -> None:
    _, s = scenario
    prof = s.recent  # the last day: load and app, not the backfill
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
    assert sorted(by) == ["app", "backfill", "load", "old"]
    assert {n: by[n].rows for n in by} == {"load": 2000, "app": 2000, "backfill": 40, "old": 0}
    assert {n: by[n].rejected_late for n in by} == {"load": 0, "app": 0, "backfill": 0, "old": 5}
    assert s.after.rejected_late == {"rows": 5, "by_producer": {"old": 5}}
    back = np.array(s.delays["backfill"])
    assert int(back.min()) <= by["backfill"].percentiles["p50"] <= int(back.max()) + LATENCY
    assert by["old"].percentiles["p50"] is None
    assert {x.source for x in s.recent.sources} == {"load", "app", "old"}  # the backfill is older than a day


def test_late_path_counts_and_waits(scenario: tuple[Project, Scenario]) -> None:
    _, s = scenario
    expected = {n: sum(1 for t in s.batch_b[n] if t < s.cutoff1) for n in ("load", "app")}
    total = sum(expected.values())
    assert expected["app"] > 50  # uniform over 7.5h against a 6h delay: about a fifth of the batch
    before = s.before.late_path
    assert (before["rows"], before["waiting"], before["archived"]) == (total, total, 0)
    assert 0 <= before["waiting_longest"] <= s.loaded_b[1] - s.loaded_b[0] + LATENCY
    after = s.after.late_path
    assert (after["rows"], after["waiting"], after["archived"]) == (total, 0, total)
    assert after["share"] == pytest.approx(total / 4040)
    longest = s.archived2[1] - s.loaded_b[0]
    assert 0 < after["wait"]["p50"] <= after["wait"]["max"] <= longest + 2, (after, longest)
    assert {x.source: x.late_path for x in s.after.sources} == {**expected, "backfill": 0, "old": 0}


def test_cli_json_and_plot(scenario: tuple[Project, Scenario], tmp_path: Path) -> None:
    p, s = scenario
    png = tmp_path / "lateness.png"
    r = cli(p, "lateness", "clicks", "--days", "1", "--fraction", "0.99", "--plot", str(png), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["table"] == "clicks" and doc["fraction"] == 0.99 and doc["rows"] == 4000
    assert list(doc["lateness"]) == ["p50", "p90", "p99", "p99.9", "max"]
    assert doc["late_path"]["rows"] == s.after.late_path["rows"] and doc["rejected_late"]["rows"] == 5
    assert doc["delay"]["needed_seconds"] == doc["lateness"]["p99"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = cli(p, "lateness", "clicks")
    assert text.returncode == 0, text.stderr
    assert "suggested archive.delay" in text.stdout and "late path:" in text.stdout
    bad = cli(p, "lateness", "nope")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("error: table 'nope'")
    assert cli(p, "lateness", "clicks", "--fraction", "1.5").returncode == 2
