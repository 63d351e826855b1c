"""The defects a new user met walking README's CLI tour (issue 25): each command as a user types
it, in this process on the shared session (``cli_in_process``), its text and its JSON."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.conftest import CLICKS, Project, cli_in_process

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def clicks_csv(p: Project, name: str, rows: list[tuple[int, str]]) -> str:
    return p.csv(name, ["user_id", "url", "at"], [[u, f"/u{u}", at] for u, at in rows])


@pytest.fixture
def clicks(spark: Any, project: Project) -> Project:
    project.table(CLICKS)
    project.create("clicks")
    return project


def test_load_counts_and_names_rows_below_the_archive_cutoff(clicks: Project) -> None:
    p = clicks
    p.lh.load("clicks", [clicks_csv(p, "a.csv", [(1, "2026-11-18T10:00:00Z"), (2, "2026-11-19T12:00:00Z")])])
    r = p.lh.archive("clicks", now=ts("2026-11-20T00:00:00Z"))  # cutoff 2026-11-19T00:00:00Z (delay 24h)
    assert r.committed and r.rows_archived == 1
    late = clicks_csv(p, "b.csv", [(3, "2026-11-18T12:00:00Z"), (4, "2026-11-18T13:00:00Z"), (5, "2026-11-19T13:00:00Z")])
    proc = cli_in_process(p, "load", "clicks", late, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["rows_loaded"], doc["rows_below_cutoff"], doc["rows_late"]) == (3, 2, 0)
    assert doc["cutoff"] == int(ts("2026-11-19T00:00:00Z").timestamp())
    proc = cli_in_process(p, "load", "clicks", clicks_csv(p, "c.csv", [(6, "2026-11-18T14:00:00Z")]))
    assert proc.returncode == 0, proc.stderr
    assert "1 loaded row(s) have an event time below the archive cutoff" in proc.stdout
    assert "after the next archive run" in proc.stdout and "2026-11-19T00:00:00Z" in proc.stdout
    proc = cli_in_process(p, "load", "clicks", clicks_csv(p, "d.csv", [(7, "2026-11-19T14:00:00Z")]))
    assert proc.returncode == 0 and "below the archive cutoff" not in proc.stdout, proc.stdout


def test_jobs_run_and_jobs_history_give_one_attempt_the_same_numbers(clicks: Project) -> None:
    p = clicks
    p.lh.load("clicks", [clicks_csv(p, "a.csv", [(1, "2026-11-18T10:00:00Z"), (2, "2026-11-19T12:00:00Z")])])
    p.lh.load("clicks", [clicks_csv(p, "b.csv", [(3, "2026-11-19T13:00:00Z")])])
    proc = cli_in_process(p, "jobs", "run", "--now", "2026-11-20T00:10:00Z", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ran = {o["job"]: o["result"] for o in json.loads(proc.stdout) if o["ran"]}
    assert set(ran) == {"archive", "compact_live", "compact_archive", "vacuum"}
    proc = cli_in_process(p, "jobs", "history", "--format", "json")
    history = {r["job"]: r for r in json.loads(proc.stdout)}
    counts = ("rows", "files_before", "files_after", "bytes_before", "bytes_after")
    for job, result in ran.items():
        assert {k: result[k] for k in counts} == {k: history[job][k] for k in counts}, job
    # nothing to compact in live (two files, fewer than compact_min_files): its files, unchanged
    assert (history["compact_live"]["files_before"], history["compact_live"]["files_after"]) == (2, 2)
    assert history["compact_live"]["bytes_before"] > 0
    text = cli_in_process(p, "jobs", "history").stdout
    line = next(x for x in text.splitlines() if "compact_live" in x)
    assert "2->2" in line, text
    proc = cli_in_process(p, "jobs", "run", "--now", "2026-11-20T01:10:00Z")  # compact_live is hourly
    line = next(x for x in proc.stdout.splitlines() if "compact_live" in x)
    assert "files 2->2" in line, proc.stdout
