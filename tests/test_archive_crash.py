"""Crash safety: kill a real ``lakehouse archive`` process (SIGKILL) at each named point, check
that every query is still exact, then check that the next run converges to the same archive
content (rows in order, vector files) as a run that never crashed."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.archive import vectors
from lakehouse.archive.reader import committed_run
from lakehouse.archive.state import read_snapshot
from lakehouse.project import Lakehouse
from tests.conftest import TRIPS_SMALL, Project, cli

pytestmark = [pytest.mark.slow, pytest.mark.spark]

UTC = dt.timezone.utc
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "event_time"]
NOW = "2026-11-21T06:00:00Z"
POINTS = ["after_plan", "after_staging", "during_vectors", "after_vectors", "during_commit", "after_commit",
          "after_purge"]


def totals(lh: Lakehouse, engine: str) -> tuple:
    sql = "SELECT count(*) AS n, count(DISTINCT trip_id) AS k, sum(fare_total) AS s, sum(status) AS st FROM trips"
    r = lh.query(sql, engine).to_pylist()[0]
    return r["n"], r["k"], round(r["s"], 6), r["st"]


@pytest.fixture(scope="module")
def template(tmp_path_factory, spark) -> tuple[Path, tuple]:
    """A warehouse with an earlier archive run, then late rows and upserts waiting in live."""
    root = tmp_path_factory.mktemp("crash") / "proj"
    p = Project(root).table(TRIPS_SMALL).create("trips")
    start = dt.datetime(2026, 11, 16, tzinfo=UTC)
    rows = [[f"t{i}", i % 5, i % 3, 1.0 + (i % 4) / 10, float(i % 97),
             (start + dt.timedelta(minutes=53 * i)).isoformat()] for i in range(600)]  # 16th .. 7th of Dec
    p.lh.load("trips", [p.csv("a.csv", HEADER, rows[:300])])
    p.lh.archive("trips", now=dt.datetime(2026, 11, 19, 12, tzinfo=UTC))
    late = [[f"late{i}", 9, 0, 2.0, 1.5, f"2026-11-17T0{i}:30:00Z"] for i in range(5)]
    upserts = [[f"t{i}", i % 5, 2, 1.0 + (i % 4) / 10, 500.0, (start + dt.timedelta(minutes=53 * i)).isoformat()]
               for i in range(0, 300, 7)]
    p.lh.load("trips", [p.csv("b.csv", HEADER, rows[300:] + late + upserts)])
    return root, totals(p.lh, "duckdb")


def clone(template_root: Path, dest: Path) -> Project:
    shutil.copytree(template_root, dest)
    return Project(dest)


def archive_content(p: Project) -> dict:
    """Archive rows per day in file order, and every current vector file decoded."""
    from deltalake import DeltaTable

    paths = p.lh.paths("trips")
    snap = read_snapshot(paths.archive)
    actions = pa.table(DeltaTable(paths.archive, version=snap.version).get_add_actions(flatten=True))
    days: dict = {}
    for row in actions.select(["path", "partition.event_date"]).to_pylist():
        days.setdefault(row["partition.event_date"], []).append(pq.read_table(f"{paths.archive}/{row['path']}").to_pylist())
    files, _ = vectors.list_files(paths.vectors)
    current = vectors.current(files, committed_run(paths))
    vecs = {f"{c}/{d}-{f.cutoff}": vectors.read(f.path).to_pydict() for (c, d), f in sorted(current.items())}
    return {"cutoff": snap.cutoff, "days": {d: v for d, v in sorted(days.items())}, "vectors": vecs}


@pytest.fixture(scope="module")
def reference(template, tmp_path_factory) -> dict:
    p = clone(template[0], tmp_path_factory.mktemp("ref") / "proj")
    r = p.lh.archive("trips", now=dt.datetime.fromisoformat(NOW.replace("Z", "+00:00")))
    assert r.committed and r.plan.late_rows == 15  # 5 late rows + 10 updates of archived keys
    after = totals(p.lh, "duckdb")
    assert after[0] == template[1][0] + 5  # the late rows became visible, the updates replaced keys
    return {"content": archive_content(p), "totals": after}


def _crash(root: Path, point: str) -> subprocess.CompletedProcess:
    proc = cli(Project(root), "archive", "trips", "--now", NOW, crash=point)
    assert isinstance(proc, subprocess.CompletedProcess)
    return proc


@pytest.fixture(scope="module")
def crashed(template, tmp_path_factory):
    """One clone per point, each with its archive process killed there; the processes run two at
    a time in the background while the tests check and recover the ones already done."""
    pool = ThreadPoolExecutor(max_workers=2)
    out = {}
    for point in POINTS:
        root = tmp_path_factory.mktemp(point) / "proj"
        shutil.copytree(template[0], root)
        out[point] = (root, pool.submit(_crash, root, point))
    yield out
    pool.shutdown(wait=True, cancel_futures=True)


def never_committed(table: Path) -> list[str]:
    """Data files in a Delta table's folders that no commit of its log ever added."""
    added = {json.loads(line)["add"]["path"] for f in (table / "_delta_log").glob("*.json")
             for line in f.read_text().splitlines() if line.startswith('{"add"')}
    return sorted(str(f.relative_to(table)) for f in table.glob("*/*.parquet") if str(f.relative_to(table)) not in added)


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_each_step_then_recover(point, template, crashed, reference):
    root, future = crashed[point]
    p = Project(root)
    proc = future.result()
    if point == "during_commit":
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr  # the write may beat the timer
    else:
        assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    # right after the crash every query is exact on both engines: the state before the run, or
    # (once the commit happened) the state after it, never a mix
    before, after = template[1], reference["totals"]
    want = {"after_commit": after, "after_purge": after}.get(point, before)
    for engine in ("duckdb", "spark") if point in ("during_commit", "after_commit") else ("duckdb",):
        got = totals(p.lh, engine)
        assert got == want or (point == "during_commit" and got in (before, after)), (engine, got)
    # the next run finishes the job and converges to the clean run's content
    r = p.lh.archive("trips", now=dt.datetime.fromisoformat(NOW.replace("Z", "+00:00")))
    assert totals(p.lh, "duckdb") == totals(p.lh, "spark") == after
    assert archive_content(p) == reference["content"]
    if point == "after_commit":  # verify is slow; the content check above is exact
        assert all(c.ok for c in p.lh.verify("trips")), [c for c in p.lh.verify("trips") if not c.ok]
    files, temps = vectors.list_files(p.lh.paths("trips").vectors)
    assert not temps and not vectors.garbage(files, committed_run(p.lh.paths("trips")))
    assert never_committed(Path(p.lh.paths("trips").archive)) == []  # the killed run's files went with it
    assert p.lh.tables()[0].waiting_rows == 0
    if point in ("after_commit", "after_purge"):
        assert not r.plan.advances  # the crashed run had committed; this one only recovered
