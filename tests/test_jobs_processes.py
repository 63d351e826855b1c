"""Operations as processes: ``lakehouse optimize`` killed (SIGKILL) at each of its crash points,
``jobs run`` twice at once, archiving and compaction of the same days at once (each holding the
table's lease in turn), ``jobs serve`` stopped by SIGTERM in the middle of a job (and aborted by a
second one), the jobs history read by DuckDB, terminal and transient job failures.

Every scenario runs real ``lakehouse`` processes (real Spark, Delta, DuckDB) on its own copy of one
template project. The processes are slow to start (a JVM each), so the scenarios are launched in
the background as soon as the template exists and the tests check their results in order while
the others still run; the commands a test runs afterwards to check a result (the second optimize,
the history listing) run in this process (``cli_in_process``: no JVM to start)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from lakehouse.archive.vectors import batch_order
from lakehouse.cli import cli as lakehouse_main
from lakehouse.lease import read_lease, table_lease
from tests.conftest import MASTER, Project, cli, cli_in_process

pytestmark = [pytest.mark.slow, pytest.mark.spark]

UTC = dt.timezone.utc
TARGET = 8 * 1024
TABLE = f"""
name: trips
columns:
  - {{name: trip_id,    type: string, nullable: false}}
  - {{name: city_id,    type: int}}
  - {{name: status,     type: int}}
  - {{name: fx_rate,    type: double}}
  - {{name: fare_total, type: double}}
  - {{name: note,       type: string}}
  - {{name: event_time, type: timestamp, nullable: false}}
primary_key: [trip_id]
event_time: event_time
archive: {{delay: 24h, interval: 7d, sort_columns: [city_id, status, fx_rate]}}
jobs: {{compact_live: 7d, compact_archive: 7d, vacuum: 7d, target_file_size: {TARGET // 1024}KB, compact_min_files: 2}}
"""
"""Every job every 7 days: slots are aligned to the epoch (Thursdays 00:00 UTC), so one --now (or
the wall clock, for serve) stays in one slot for the whole test."""
BROKEN = TABLE.replace("primary_key:", "  - {name: extra, type: string}\nprimary_key:")
"""The definition with a column the warehouse does not have (no migration): a terminal failure."""
HEADER = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "note", "event_time"]
COLUMNS = HEADER
JOBS = ("archive", "compact_live", "compact_archive", "vacuum")
SLOT = dt.timedelta(days=7)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

FIRST_ARCHIVE = dt.datetime(2026, 11, 14, 1, tzinfo=UTC)
"""The template's archive run: cutoff 2026-11-13T01:00 (days 10..13 archived)."""
ARCHIVE_DAYS = ["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"]
BIG_DAYS = ["2026-11-10", "2026-11-12"]
"""Archive days whose one file is far above the 8KB target: compaction splits them."""
SMALL_LIVE_DAYS = ["2026-11-14", "2026-11-15", "2026-11-16"]
"""Live days with three small files each (three loads): more than compact_min_files."""
NOW = "2026-11-17T12:00:00Z"
"""``--now`` of the scheduled rounds: slot 2026-11-12..19; the archive cutoff moves to 11-16T12:00."""

POINTS = ["compact_after_plan", "compact_during_live", "compact_after_live", "compact_during_archive",
          "compact_after_archive"]
TIMERS = ("compact_during_live", "compact_during_archive")
"""Points armed as a timer in the middle of a Spark write: the commit may beat it."""
LOOKUPS = [("city_id=3",), ("city_id=3", "status=1"), ("city_id=6", "status=0", "fx_rate=1.4"), ("city_id=9",)]
TIMEOUT = 900


# -- data -----------------------------------------------------------------------------------------

def day_rows(day: int, n: int, prefix: str) -> list[list[Any]]:
    """``n`` rows spread over 2026-11-<day>, keys ``<prefix><day>-<i>``."""
    start = dt.datetime(2026, 11, day, tzinfo=UTC)
    return [[f"{prefix}{day}-{i}", i % 7, i % 3, 1.0 + (i % 5) / 10, float((i * 37) % 1000) / 8, f"n{(i * 7919) % 100003}",
             (start + dt.timedelta(seconds=86399 * i // n)).isoformat()] for i in range(n)]


ARCHIVE_ROWS = day_rows(10, 1500, "a") + day_rows(11, 60, "a") + day_rows(12, 1200, "a") + day_rows(13, 40, "a")
LIVE_ROWS = [day_rows(14, 30, f"l{k}-") + day_rows(15, 30, f"l{k}-") + day_rows(16, 30, f"l{k}-") for k in range(3)]
ALL_IDS = {r[0] for r in ARCHIVE_ROWS} | {r[0] for rows in LIVE_ROWS for r in rows}


@dataclasses.dataclass(frozen=True)
class Template:
    root: Path
    rows_per_file: int
    """Rows per file of the rewritten archive days (from the compaction plan)."""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Template:
    """Four archived days (two of them 30KB+ files, split by compaction) and live days with three
    small files each."""
    root = tmp_path_factory.mktemp("jobs") / "template"
    p = Project(root).table(TABLE).create("trips")
    p.lh.load("trips", [p.csv("first.csv", HEADER, ARCHIVE_ROWS + LIVE_ROWS[0])])
    p.lh.archive("trips", now=FIRST_ARCHIVE)
    for k, rows in enumerate(LIVE_ROWS[1:], start=1):
        p.lh.load("trips", [p.csv(f"live{k}.csv", HEADER, rows)])
    plan = p.lh.optimize("trips", dry_run=True)
    assert [d.isoformat() for d in plan.archive.days] == BIG_DAYS, plan.as_dict()
    assert [d.isoformat() for d in plan.live.days] == SMALL_LIVE_DAYS, plan.as_dict()
    return Template(root, plan.archive.rows_per_file)


def clone(t: Template, dest: Path) -> Project:
    shutil.copytree(t.root, dest)
    return Project(dest)


# -- reading a project back ----------------------------------------------------------------------

def delta_version(path: str) -> int:
    return int(DeltaTable(path).version())


def versions(p: Project) -> tuple[int, int]:
    paths = p.lh.paths("trips")
    return delta_version(paths.live), delta_version(paths.archive)


def day_files(p: Project) -> dict[str, list[str]]:
    """Each archive day's data files from the Delta log, in batch order."""
    path = p.lh.paths("trips").archive
    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    names = adds.column("path").to_pylist()
    days = [str(d) for d in adds.column("partition.event_date").to_pylist()]
    out: dict[str, list[str]] = {}
    for name, day in zip(names, days):
        out.setdefault(day, []).append(f"{path}/{name}")
    return {d: batch_order(fs) for d, fs in sorted(out.items())}


def archive_days(p: Project) -> dict[str, list[dict[str, Any]]]:
    """Each archive day's rows, read in batch order (what record i of a vector file refers to)."""
    return {d: [r for f in fs for r in pq.read_table(f).to_pylist()] for d, fs in day_files(p).items()}


def vector_bytes(p: Project) -> dict[str, str]:
    root = p.lh.paths("trips").vectors
    out = {}
    for f in sorted(glob.glob(f"{root}/**", recursive=True)):
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                out[os.path.relpath(f, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def invoke(p: Project, *args: str) -> Any:
    """The ``lakehouse`` command line, run in this process (its exact output, no JVM start)."""
    return CliRunner().invoke(lakehouse_main, ["--project", str(p.root), "--warehouse", p.settings.warehouse,
                                               "--master", MASTER, *args], catch_exceptions=False)


def vector_outputs(p: Project) -> dict[tuple[str, ...], str]:
    """``lakehouse vectors`` of every archive day and column and ``lakehouse lookup`` of a few
    sort-column prefixes, as JSON text."""
    out: dict[tuple[str, ...], str] = {}
    for day in ARCHIVE_DAYS:
        for col in COLUMNS:
            r = invoke(p, "vectors", "trips", "--day", day, "--column", col, "--format", "json")
            assert r.exit_code == 0, r.output
            out[("vectors", day, col)] = r.stdout
        for where in LOOKUPS:
            r = invoke(p, "lookup", "trips", "--day", day, *[a for w in where for a in ("--where", w)], "--format", "json")
            assert r.exit_code == 0, r.output
            out[("lookup", day, *where)] = r.stdout
    return out


def answers(p: Project) -> list[dict[str, Any]]:
    """Every row of the split view (DuckDB), by key."""
    return p.lh.query("SELECT * FROM trips ORDER BY trip_id", "duckdb").to_pylist()


def live_rows(p: Project) -> list[dict[str, Any]]:
    rows = DeltaTable(p.lh.paths("trips").live).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: r["trip_id"])


def rows_once(p: Project) -> None:
    """Every row of the table exactly once in the split view, on both engines."""
    for engine in ("duckdb", "spark"):
        got = Counter(r["trip_id"] for r in p.lh.query("SELECT trip_id FROM trips", engine).to_pylist())
        assert set(got) == ALL_IDS, (engine, len(set(got) ^ ALL_IDS))
        assert max(got.values()) == 1, (engine, [k for k, n in got.items() if n > 1][:5])


def verify_ok(p: Project) -> None:
    r = invoke(p, "verify", "trips")
    assert r.exit_code == 0, r.output[-3000:]


def snapshot(p: Project) -> dict[str, Any]:
    return {"versions": versions(p), "days": archive_days(p), "vectors": vector_bytes(p),
            "outputs": vector_outputs(p), "answers": answers(p), "live": live_rows(p)}


def history(p: Project) -> list[dict[str, Any]]:
    """The jobs history table, read with delta-rs, oldest first."""
    path = os.path.join(p.settings.warehouse, "_lakehouse", "jobs")
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return []
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: (r["started"], r["ended"], r["attempt"]))


def commits(path: str, since: int) -> list[list[dict[str, Any]]]:
    """The actions of each Delta commit after version ``since``."""
    out = []
    for f in sorted(glob.glob(f"{path}/_delta_log/*.json")):
        v = int(os.path.basename(f).split(".")[0])
        if v > since:
            with open(f) as fh:
                out.append([json.loads(line) for line in fh if line.strip()])
    return out


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- processes in the background -----------------------------------------------------------------

CHILD_ENV: dict[str, str] = {}
"""Extra environment of every child process (none: vacuum runs through delta-rs, and local
sessions list files with a few tasks, not Spark's 10,000)."""
STOP = threading.Event()
"""Set at teardown: no scenario starts another process."""


@dataclasses.dataclass
class Done:
    rc: int | None
    out: str
    err: str
    pid: int


class Bg:
    """A ``lakehouse`` process started by ``cli(background=True)`` whose output is drained by a
    thread (so a chatty process never blocks on a full pipe); every one is killed at teardown if
    still running."""

    started: list[subprocess.Popen] = []

    def __init__(self, p: Project, *args: str, env: dict[str, str] | None = None, crash: str | None = None) -> None:
        if STOP.is_set():
            raise RuntimeError("tearing down")
        self.proc: subprocess.Popen = cli(p, *args, env={**CHILD_ENV, **(env or {})}, crash=crash,  # type: ignore[assignment]
                                          background=True)
        Bg.started.append(self.proc)
        self.pid = self.proc.pid
        self.out = self.err = ""
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        self.out, self.err = self.proc.communicate()

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = TIMEOUT) -> Done:
        self._t.join(timeout)
        if self._t.is_alive():
            self.proc.kill()
            self._t.join(30)
        return Done(self.proc.returncode, self.out, self.err, self.pid)


def run(p: Project, *args: str, env: dict[str, str] | None = None, crash: str | None = None) -> Done:
    return Bg(p, *args, env=env, crash=crash).wait()


def wait_for(cond: Callable[[], bool], proc: Bg | None = None, timeout: float = TIMEOUT, step: float = 0.2) -> bool:
    """Poll ``cond`` until true (False when ``proc`` ends first or on timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not STOP.is_set():
        if cond():
            return True
        if proc is not None and not proc.running():
            return cond()
        time.sleep(step)
    return False


def pause(point: str, seconds: float, marker: Path) -> dict[str, str]:
    return {"LAKEHOUSE_PAUSE_AT": f"{point}:{seconds}:{marker}"}


def outside_slot_boundary(margin: dt.timedelta = dt.timedelta(minutes=15)) -> None:
    """``jobs serve`` reads the wall clock: wait until a scenario cannot straddle two slots."""
    now = dt.datetime.now(UTC)
    nxt = EPOCH + SLOT * math.ceil((now - EPOCH) / SLOT)
    if nxt - now < margin:
        time.sleep((nxt - now).total_seconds() + 1)


# scenarios: each runs processes on its own project and returns what they did (the tests judge)

def kill_at(p: Project, point: str) -> Done:
    return run(p, "optimize", "trips", crash=point)


def overlapping_runs(p: Project) -> dict[str, Any]:
    """Two ``jobs run`` with the same --now started at once; each waits for the table's lease as
    long as it takes, so the second one decides again under the lease."""
    wait = {"LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS": "600"}
    a = Bg(p, "jobs", "run", "--now", NOW, "--format", "json", env=wait)
    b = Bg(p, "jobs", "run", "--now", NOW, "--format", "json", env=wait)
    return {"runs": [a.wait(), b.wait()], "h": history(p)}


def failures(p: Project) -> dict[str, Any]:
    """A terminal failure (a column without a migration), the round after it, the fix with the
    table's lease held by another process (this one), and the round after the release."""
    res: dict[str, Any] = {}
    yaml = p.root / "tables" / "trips.yaml"
    good = yaml.read_text()
    yaml.write_text(BROKEN.strip() + "\n")
    res["broken"] = run(p, "jobs", "run", "--now", NOW, "--format", "json")
    res["h_broken"] = history(p)
    res["broken_again"] = run(p, "jobs", "run", "--now", NOW, "--format", "json")
    res["h_broken_again"] = history(p)
    yaml.write_text(good)
    with table_lease(p.lh.paths("trips"), "a test holding the lease"):
        res["busy"] = run(p, "jobs", "run", "--now", NOW, "--format", "json",
                          env={"LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS": "2"})
        res["h_busy"] = history(p)
    res["fixed"] = run(p, "jobs", "run", "--now", NOW, "--format", "json")
    res["h_fixed"] = history(p)
    return res


def archive_then_optimize(p: Project) -> dict[str, Any]:
    """``archive`` paused after its plan (holding the table's lease); two ``optimize`` meanwhile,
    with the host lock and with the warehouse lease alone."""
    marker = p.root / "archive.paused"
    before = versions(p)
    a = Bg(p, "archive", "trips", "--now", NOW, "--format", "json", env=pause("after_plan", 15, marker))
    res: dict[str, Any] = {"before": before, "paused": wait_for(marker.exists, a), "archive_pid": a.pid}
    o1 = Bg(p, "optimize", "trips")
    o2 = Bg(p, "optimize", "trips", env={"LAKEHOUSE_ARCHIVE_FLOCK": "0"})
    res["optimize_flock"], res["optimize_lease"] = o1.wait(), o2.wait()
    res["still_paused"] = a.running() and versions(p) == before
    res["archive"] = a.wait()
    return res


def optimize_then_jobs(p: Project) -> dict[str, Any]:
    """``optimize`` paused after its plan; a ``jobs run`` started meanwhile waits for the lease
    and then runs everything due. Without the host lock: the warehouse lease alone decides."""
    marker = p.root / "optimize.paused"
    no_flock = {"LAKEHOUSE_ARCHIVE_FLOCK": "0"}
    lease_dir = os.path.join(p.lh.paths("trips").root, "_state", "table.lease")
    before = versions(p)
    o = Bg(p, "optimize", "trips", "--format", "json", env={**no_flock, **pause("compact_after_plan", 10, marker)})

    def held_by_optimize() -> bool:
        cur = read_lease(lease_dir)
        return cur is not None and cur.pid == o.pid and cur.expires > time.time()

    res: dict[str, Any] = {"before": before, "held": wait_for(held_by_optimize, o), "optimize_pid": o.pid}
    j = Bg(p, "jobs", "run", "--now", NOW, "--format", "json",
           env={**no_flock, "LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS": "600"})
    res["paused"] = wait_for(marker.exists, o)
    time.sleep(3)  # the jobs run is waiting for the lease by now
    res["while_paused"] = {"jobs_running": j.running(), "versions": versions(p), "holder": read_lease(lease_dir),
                           "history": history(p)}
    res["optimize"] = o.wait()
    res["jobs"] = j.wait()
    res["h"] = history(p)
    return res


def serve_sigterm(p: Project) -> dict[str, Any]:
    """``jobs serve`` paused in compact_archive (after archive and compact_live): SIGTERM; then a
    second serve without a pause does the rest, then SIGTERM."""
    outside_slot_boundary()
    marker = p.root / "serve.paused"
    s1 = Bg(p, "jobs", "serve", "--poll", "2s", env=pause("compact_after_plan", 10, marker))
    res: dict[str, Any] = {"paused": wait_for(marker.exists, s1)}
    res["h_paused"] = history(p)
    s1.signal(signal.SIGTERM)
    res["s1"] = s1.wait()
    res["h1"] = history(p)
    s2 = Bg(p, "jobs", "serve", "--poll", "2s")
    res["vacuumed"] = wait_for(lambda: any(r["job"] == "vacuum" for r in history(p)), s2, step=1.0)
    time.sleep(2)
    s2.signal(signal.SIGTERM)
    res["s2"] = s2.wait()
    res["h2"] = history(p)
    return res


def serve_abort(p: Project) -> dict[str, Any]:
    """``jobs serve`` paused right after the archive commit: SIGTERM, then a second SIGTERM while
    the first is honoured; then ``jobs run`` recovers."""
    outside_slot_boundary()
    marker = p.root / "serve.paused"
    s = Bg(p, "jobs", "serve", "--poll", "2s", env=pause("after_commit", 20, marker))
    res: dict[str, Any] = {"paused": wait_for(marker.exists, s)}
    s.signal(signal.SIGTERM)
    time.sleep(1.5)
    res["alive_after_first"] = s.running()
    s.signal(signal.SIGTERM)
    res["serve"] = s.wait(120)
    res["h_abort"] = history(p)
    view = Project(p.root).lh.query("SELECT count(*) AS n, count(DISTINCT trip_id) AS k FROM trips", "duckdb")
    res["view_after_abort"] = view.to_pylist()[0]
    res["run"] = run(p, "jobs", "run", "--format", "json")
    res["h"] = history(p)
    return res


@dataclasses.dataclass
class Background:
    kills: dict[str, tuple[Project, dict[str, Any], Future]]
    scenarios: dict[str, tuple[Project, Future]]

    def result(self, name: str) -> tuple[Project, dict[str, Any]]:
        p, future = self.scenarios[name]
        return p, future.result(timeout=3 * TIMEOUT)


@pytest.fixture(scope="module")
def background(template: Template, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every scenario on its own copy of the template, four at a time (they wait much of their
    time: for pauses, leases, signals), the longest first."""
    base = tmp_path_factory.mktemp("runs")
    pool = ThreadPoolExecutor(max_workers=4)
    scenarios: dict[str, tuple[Project, Future]] = {}

    def start(name: str, fn: Callable[[Project], Any]) -> None:
        p = clone(template, base / name)
        scenarios[name] = (p, pool.submit(fn, p))

    start("failures", failures)
    start("overlap", overlapping_runs)
    kills = {}
    for point in POINTS:
        p = clone(template, base / point)
        kills[point] = (p, snapshot(p), pool.submit(kill_at, p, point))
    for name, fn in (("serve", serve_sigterm), ("reverse", optimize_then_jobs), ("abort", serve_abort),
                     ("forward", archive_then_optimize)):
        start(name, fn)
    yield Background(kills, scenarios)
    STOP.set()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in Bg.started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    pool.shutdown(wait=True)


def outcomes(done: Done) -> dict[str, dict[str, Any]]:
    return {o["job"]: o for o in json.loads(done.out)}


def by_job(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {j: [] for j in JOBS}
    for r in rows:
        out[r["job"]].append(r)
    return out


def added(after: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History rows in ``after`` and not in ``before`` (by run and attempt: with --now, rounds
    of one slot record overlapping start times, so the order by time says little)."""
    seen = {(r["run_id"], r["attempt"]) for r in before}
    return [r for r in after if (r["run_id"], r["attempt"]) not in seen]


# -- 1. the kill matrix of compaction ------------------------------------------------------------

@pytest.mark.parametrize("point", POINTS)
def test_optimize_killed_at_each_point_keeps_every_day_then_converges(point: str, template: Template,
                                                                       background: Background) -> None:
    p, before, future = background.kills[point]
    proc = future.result(timeout=3 * TIMEOUT)
    if point in TIMERS:
        assert proc.rc in (-signal.SIGKILL, 0), proc.err[-2000:]
    else:
        assert proc.rc == -signal.SIGKILL, f"not killed at {point}: {proc.rc} {proc.err[-2000:]}"
    # the kill happened where its name says: what committed before it, and nothing after it
    (lv, av), (lv1, av1) = before["versions"], versions(p)
    expect = {"compact_after_plan": ({lv}, {av}), "compact_during_live": ({lv, lv + 1}, {av}),
              "compact_after_live": ({lv + 1}, {av}), "compact_during_archive": ({lv + 1}, {av, av + 1}),
              "compact_after_archive": ({lv + 1}, {av + 1})}[point]
    assert lv1 in expect[0] and av1 in expect[1], (point, before["versions"], (lv1, av1))

    def unchanged(when: str) -> None:
        assert archive_days(p) == before["days"], f"{when}: an archive day's rows or their order changed"
        assert vector_bytes(p) == before["vectors"], f"{when}: vector files changed"
        assert vector_outputs(p) == before["outputs"], f"{when}: lakehouse vectors/lookup answer differently"
        assert answers(p) == before["answers"], f"{when}: the split view answers differently"
        assert live_rows(p) == before["live"], f"{when}: live rows changed"

    unchanged(f"after the kill at {point}")
    verify_ok(p)
    # a clean optimize finishes the job; a second one is a no-op
    p.lh.optimize("trips")
    assert versions(p) == (lv + 1, av + 1)
    again = cli_in_process(p, "optimize", "trips", "--format", "json")
    assert again.returncode == 0, again.stderr[-2000:]
    doc = json.loads(again.stdout)
    assert doc["live"]["days"] == [] and doc["archive"]["days"] == [], doc
    assert versions(p) == (lv + 1, av + 1)
    unchanged("after the clean optimize")
    # the big days are split into files of the planned row count, in batch order
    files = day_files(p)
    for day in ARCHIVE_DAYS:
        counts = [pq.ParquetFile(f).metadata.num_rows for f in files[day]]
        if day in BIG_DAYS:
            n, per = len(before["days"][day]), template.rows_per_file
            assert counts == [per] * (n // per) + ([n % per] if n % per else []), (day, counts)
            assert all(os.path.getsize(f) <= 2 * TARGET for f in files[day]), day
        else:
            assert len(counts) == 1, (day, counts)


# -- 2. two jobs run at once ---------------------------------------------------------------------

def test_overlapping_jobs_run_run_each_due_job_once(background: Background) -> None:
    p, res = background.result("overlap")
    a, b = res["runs"]
    assert a.rc == 0 and b.rc == 0, (a.err[-2000:], b.err[-2000:])
    docs = [outcomes(a), outcomes(b)]
    winners = [i for i, d in enumerate(docs) if any(o["ran"] for o in d.values())]
    assert len(winners) == 1, docs
    win, lose = docs[winners[0]], docs[1 - winners[0]]
    assert all(win[j]["ran"] and win[j]["outcome"] == "succeeded" for j in JOBS), win
    for j in JOBS:  # the loser waited for the lease, then found under it that nothing is due any more
        o = lose[j]
        assert not o["ran"] and not o["busy"] and not o["due"] and o["why"].startswith("ran at 2026-11-17T12:"), o
    winner_pid = res["runs"][winners[0]].pid
    runs = by_job(res["h"])
    for j in JOBS:
        assert [(r["outcome"], r["attempt"], r["pid"]) for r in runs[j]] == [("succeeded", 1, winner_pid)], runs[j]
        assert dt.datetime(2026, 11, 12, tzinfo=UTC) <= runs[j][0]["started"] < dt.datetime(2026, 11, 19, tzinfo=UTC)
    rows_once(p)


# -- 6. terminal and transient failures ----------------------------------------------------------

def test_terminal_failure_is_recorded_once_and_transient_busy_is_not_a_failure(background: Background) -> None:
    p, res = background.result("failures")
    # the definition no longer matches the warehouse: every job fails, terminal, once
    broken = res["broken"]
    assert broken.rc == 1, broken.err[-2000:]
    out = outcomes(broken)
    for j in JOBS:
        assert out[j]["ran"] and out[j]["outcome"] == "failed" and out[j]["attempts"] == 1, out[j]
        assert "extra" in out[j]["error"] and "migrat" in out[j]["error"], out[j]
    new = res["h_broken"]
    assert sorted(r["job"] for r in new) == sorted(JOBS), new
    assert all(r["outcome"] == "failed" and r["terminal"] and r["attempt"] == 1 for r in new), new
    # the next round does not retry it
    again = res["broken_again"]
    assert again.rc == 0, again.err[-2000:]
    for o in outcomes(again).values():
        assert not o["ran"] and not o["due"] and "not retried" in o["why"], o
    assert res["h_broken_again"] == res["h_broken"]
    # fixed, but the table's lease is held by another process: busy, nothing recorded
    busy = res["busy"]
    assert busy.rc == 0, busy.err[-2000:]
    for o in outcomes(busy).values():
        assert not o["ran"] and o["busy"], o
        assert f"pid {os.getpid()}" in o["busy"] and "a test holding the lease" in o["busy"], o
    assert res["h_busy"] == res["h_broken"]
    # released: it runs
    fixed = res["fixed"]
    assert fixed.rc == 0, fixed.err[-2000:]
    assert all(o["ran"] and o["outcome"] == "succeeded" for o in outcomes(fixed).values()), fixed.out
    new = added(res["h_fixed"], res["h_busy"])
    assert sorted((r["job"], r["outcome"], r["attempt"]) for r in new) == sorted((j, "succeeded", 1) for j in JOBS)
    rows_once(p)


# -- 5. the history on DuckDB --------------------------------------------------------------------

def test_history_read_by_duckdb_matches_jobs_history(background: Background) -> None:
    from lakehouse.query.duckdb import connect

    p, _ = background.result("failures")
    proc = cli_in_process(p, "jobs", "history", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = sorted(json.loads(proc.stdout), key=lambda r: (r["run_id"], r["attempt"]))
    path = os.path.join(p.settings.warehouse, "_lakehouse", "jobs")
    rows = connect().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY run_id, attempt").fetch_arrow_table().to_pylist()
    assert len(rows) == len(listed) == 2 * len(JOBS)
    assert Counter(r["outcome"] for r in rows) == {"failed": 4, "succeeded": 4}
    same = ("run_id", "job", "outcome", "attempt", "terminal", "rows", "files_before", "files_after", "bytes_before",
            "bytes_after", "error", "trigger", "host", "pid")

    def ts(s: str) -> dt.datetime:
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))

    for d, j in zip(rows, listed):
        assert {k: d[k] for k in same} == {k: j[k] for k in same}
        assert d["table_name"] == j["table"]
        assert d["started"] == ts(j["started"]) and d["ended"] == ts(j["ended"]), (d, j)
        assert round((d["ended"] - d["started"]).total_seconds(), 3) == j["seconds"]
        assert json.loads(d["detail"]) == j["detail"]


# -- 3. archiving and compaction of the same days at once ----------------------------------------

def test_archive_holding_the_lease_refuses_optimize(background: Background) -> None:
    p, res = background.result("forward")
    assert res["paused"], res["archive"].err[-2000:]
    pid = res["archive_pid"]
    for name in ("optimize_flock", "optimize_lease"):
        o = res[name]
        assert o.rc == 1, (name, o.out, o.err[-2000:])
        lines = error_lines(o.err)
        assert len(lines) == 1 and o.err.strip().splitlines()[-1] == lines[0], (name, o.err)
        assert f"pid {pid}" in lines[0] and "archive" in lines[0] and "lease" in lines[0], (name, lines[0])
    assert "table.lock" in error_lines(res["optimize_flock"].err)[0]
    assert res["still_paused"], "the refused optimize changed something, or the archive ended too soon"
    a = res["archive"]
    assert a.rc == 0, a.err[-2000:]
    assert json.loads(a.out)["rows_archived"] > 0
    lv, av = res["before"]
    # the archive commit and the purge (its metadata-only removal of whole files, then its MERGE
    # of rows in mixed files, each when there is any): nothing of the optimize
    assert versions(p)[1] == av + 1 and 1 <= versions(p)[0] - lv <= 2, (versions(p), lv, av)
    for c in commits(p.lh.paths("trips").live, lv):
        [info] = [a["commitInfo"] for a in c if "commitInfo" in a]
        assert info.get("operation") != "OPTIMIZE", info
    [archive_commit] = commits(p.lh.paths("trips").archive, av)
    assert any("txn" in action for action in archive_commit)
    rows_once(p)
    verify_ok(p)


def test_optimize_holding_the_lease_makes_jobs_run_wait(background: Background) -> None:
    p, res = background.result("reverse")
    assert res["held"] and res["paused"], res["optimize"].err[-2000:]
    lv, av = res["before"]
    w = res["while_paused"]
    assert w["jobs_running"] and w["versions"] == (lv, av) and w["history"] == [], w
    assert w["holder"] is not None and w["holder"].pid == res["optimize_pid"], w
    o, j = res["optimize"], res["jobs"]
    assert o.rc == 0, o.err[-2000:]
    doc = json.loads(o.out)
    assert doc["archive"]["days"] == BIG_DAYS and doc["live"]["days"] == SMALL_LIVE_DAYS, doc
    assert j.rc == 0, j.err[-2000:]
    out = outcomes(j)
    assert all(out[x]["ran"] and out[x]["outcome"] == "succeeded" and out[x]["attempts"] == 1 for x in JOBS), out
    assert all(r["outcome"] == "succeeded" for r in res["h"]) and len(res["h"]) == len(JOBS), res["h"]
    # the archive's Delta log: the compaction's rewrite first (no data change), then the archive run
    archive_commits = commits(p.lh.paths("trips").archive, av)
    first = archive_commits[0]
    data = [a[k] for a in first for k in ("add", "remove") if k in a]
    assert data and all(x["dataChange"] is False for x in data), first
    assert not any("txn" in a for a in first)
    assert any("txn" in a for a in archive_commits[1])
    rows_once(p)
    verify_ok(p)


# -- 4. jobs serve and SIGTERM -------------------------------------------------------------------

def test_serve_finishes_the_running_job_on_sigterm_and_a_restart_does_the_rest(background: Background) -> None:
    p, res = background.result("serve")
    assert res["paused"], res["s1"].err[-3000:]
    s1, s2 = res["s1"], res["s2"]
    assert s1.rc == 0, s1.err[-3000:]
    assert "SIGTERM received; finishing the running job" in s1.err, s1.err[-3000:]
    paused = by_job(res["h_paused"])
    assert [len(paused[j]) for j in JOBS] == [1, 1, 0, 0], res["h_paused"]  # paused in compact_archive
    h1 = by_job(res["h1"])
    assert [len(h1[j]) for j in JOBS] == [1, 1, 1, 0], res["h1"]  # it finished, and started nothing more
    assert json.loads(h1["compact_archive"][0]["detail"])["days"] == BIG_DAYS
    assert res["vacuumed"] and s2.rc == 0, s2.err[-3000:]
    h2 = by_job(res["h2"])
    for j in JOBS:
        assert [(r["outcome"], r["attempt"], r["trigger"]) for r in h2[j]] == [("succeeded", 1, "serve")], h2[j]
        assert h2[j][0]["pid"] == (s2.pid if j == "vacuum" else s1.pid), (j, h2[j])
    rows_once(p)


def test_second_sigterm_aborts_serve_and_jobs_run_recovers(background: Background) -> None:
    p, res = background.result("abort")
    assert res["paused"], res["serve"].err[-3000:]
    assert res["alive_after_first"], "the first SIGTERM did not wait for the running job"
    s = res["serve"]
    assert s.rc not in (0, None), s.err[-3000:]
    # the interrupted attempt is on record as aborted (not failed: no backoff holds the next round back)
    assert [r["outcome"] for r in res["h_abort"] if r["job"] == "archive"] == ["aborted"], res["h_abort"]
    # committed and not purged: the split view still shows each row once
    assert res["view_after_abort"] == {"n": len(ALL_IDS), "k": len(ALL_IDS)}, res["view_after_abort"]
    r = res["run"]
    assert r.rc == 0, r.err[-3000:]
    out = outcomes(r)
    assert all(out[j]["ran"] and out[j]["outcome"] == "succeeded" for j in JOBS), out
    assert [x["outcome"] for x in added(res["h"], res["h_abort"])] == ["succeeded"] * len(JOBS), res["h"]
    rows_once(p)
    verify_ok(p)
    assert DeltaTable(p.lh.paths("trips").live).to_pyarrow_table().num_rows == 0  # the purge was finished
