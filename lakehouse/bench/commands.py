"""``lakehouse bench cli``: the wall time of each command of README's tour, as a user runs it (a
new ``lakehouse`` process each time), with the project's Spark Connect server up, without one,
and on DuckDB where the command has an engine, in one run, against the goals of issue 25.

The commands run in a scratch copy of the project (its ``tables/``, ``migrations/`` and
``queries/``) with a scratch warehouse holding the demo's generated trips, archived, and a few
pings of one producer; never the project's own warehouse."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse.errors import LakehouseError

UTC = dt.timezone.utc
QUERY = "SELECT city_id, count(*) AS trips, sum(duration_s) AS seconds FROM trips GROUP BY city_id ORDER BY city_id"
#: the environment a user's shell might carry that would point the commands elsewhere
FOREIGN_ENV = ("LAKEHOUSE_PROJECT", "LAKEHOUSE_WAREHOUSE", "LAKEHOUSE_REMOTE", "LAKEHOUSE_MASTER", "SPARK_REMOTE")


@dataclass(frozen=True)
class Command:
    """One command of the tour: its name in the report, its arguments (``{load}`` stands for a new
    one-row file each run), the goal with a server and without one (seconds; None: none set), and
    its arguments on DuckDB when it has an engine."""

    name: str
    argv: tuple[str, ...]
    goal_server: float | None = None
    goal_alone: float | None = None
    duckdb: tuple[str, ...] | None = None


def tour(day: str, now: str, as_of: str) -> list[Command]:
    """README's tour on the example project: ``day`` an archived day, ``now`` the instant of the
    setup's archive run (an archive run at it again has nothing to do), ``as_of`` an instant
    after the setup (a time-travel query reads the tables as they were then)."""
    return [
        Command("tables", ("tables",), 1, 1),
        Command("stream", ("stream", "driver_pings"), 1, 1),
        Command("rejects", ("rejects", "trips"), 1, 1),
        Command("ingest-log", ("ingest-log", "trips")),
        Command("migrate --status", ("migrate", "--status")),
        Command("archive --dry-run", ("archive", "trips", "--dry-run", "--now", now), 1, 1),
        Command("optimize --dry-run", ("optimize", "trips", "--dry-run"), 1, 1),
        Command("vacuum --dry-run", ("vacuum", "trips", "--dry-run"), 1, 1),
        Command("jobs run --dry-run", ("jobs", "run", "--dry-run", "--now", now), 1, 1),
        Command("jobs history", ("jobs", "history")),
        Command("check --history", ("check", "trips", "--history")),
        Command("vectors", ("vectors", "trips", "--day", day, "--column", "city_id")),
        Command("lookup", ("lookup", "trips", "--day", day, "--where", "city_id=5")),
        Command("load (one file)", ("load", "trips", "{load}"), 3),
        Command("query", ("query", QUERY), 3, None, ("query", QUERY, "--engine", "duckdb")),
        Command("query --as-of", ("query", "SELECT count(*) FROM trips", "--as-of", as_of), None, None,
                ("query", "SELECT count(*) FROM trips", "--as-of", as_of, "--engine", "duckdb")),
        Command("archive (nothing to do)", ("archive", "trips", "--now", now), 3),
        Command("check", ("check", "trips"), 3),
        Command("verify", ("verify",), 3),
    ]


class Scratch:
    """The scratch project the commands run in, and how a user's command is started in it."""

    def __init__(self, source: Path, root: Path, master: str) -> None:
        tables = source / "tables"
        if not tables.is_dir():
            raise LakehouseError(f"{source}: no tables/ folder; run bench cli in a lakehouse project")
        for part in ("tables", "migrations", "queries"):
            if (source / part).is_dir():
                shutil.copytree(source / part, root / part)
        self.root = root
        self.master = master
        self.env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
        self.loads = 0

    def run(self, argv: Sequence[str], check: bool = True) -> tuple[float, subprocess.CompletedProcess[str]]:
        """Run ``lakehouse ARGV`` in the scratch project as a new process: its wall time and result."""
        args = [self._load_file() if a == "{load}" else a for a in argv]
        cmd = [sys.executable, "-m", "lakehouse.cli", "--project", str(self.root), "--master", self.master, *args]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True)
        took = time.perf_counter() - t0
        if check and proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise LakehouseError(f"bench cli: `lakehouse {' '.join(args)}` exited {proc.returncode}: {last}")
        return took, proc

    def _load_file(self) -> str:
        """A new one-row trips file (a new trip, now): what a one-file ``load`` takes."""
        self.loads += 1
        at = dt.datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        path = self.root / "input" / f"one_{self.loads}.csv"
        path.parent.mkdir(exist_ok=True)
        path.write_text("trip_id,city_id,driver_id,rider_id,status,vehicle_type,distance_km,duration_s,surge,"
                        "fx_rate,fare_local,fare_total,currency,is_pool,event_time\n"
                        f"B{self.loads:07d},5,1001,100001,1,economy,3.2,600,1.0,0.92,8.10,8.80,EUR,false,{at}\n")
        return str(path)


def _setup(s: Scratch, rows: int, days: int) -> tuple[str, str, str]:
    """The example tables created, the demo's trips loaded and archived, one producer's pings in
    the stream. Returns an archived day, the archive run's instant and the instant after it all."""
    from lakehouse.demo import generate

    end = dt.datetime.now(UTC).date() - dt.timedelta(days=1)
    data = generate(s.root / "input", rows, days, end)
    now = dt.datetime.now(UTC).replace(microsecond=0)
    now_text = now.isoformat().replace("+00:00", "Z")
    s.run(("migrate",))
    s.run(("load", "trips", *map(str, data.files)), check=False)  # exit 1: the demo's bad file
    s.run(("archive", "trips", "--now", now_text))
    pings = s.root / "input" / "pings.csv"
    start = now - dt.timedelta(minutes=30)
    pings.write_text("driver_id,city_id,lat,lon,speed_kmh,gateway,event_time\n" + "".join(
        f"{1000 + k % 7},{5 if k % 2 else 1},52.5,13.4,{k % 60}.5,gw-eu,"
        f"{(start + dt.timedelta(seconds=20 * k)).isoformat().replace('+00:00', 'Z')}\n" for k in range(60)))
    s.run(("producer", "driver_pings", "gw-eu", "attach", "--bound", start.isoformat().replace("+00:00", "Z")))
    s.run(("producer", "driver_pings", "gw-eu", "insert", str(pings)))
    as_of = dt.datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return (end - dt.timedelta(days=1)).isoformat(), now_text, as_of


def _median(s: Scratch, argv: Sequence[str], rounds: int) -> float:
    return statistics.median(s.run(argv)[0] for _ in range(rounds))


def _met(took: float | None, goal: float | None) -> bool | None:
    return None if took is None or goal is None else took <= goal


def bench_cli(project: Path, master: str, rounds: int = 3, rows: int = 20_000, days: int = 4,
              only: Sequence[str] = (), warmup: bool = True) -> dict[str, Any]:
    """Each command of the tour ``rounds`` times with the project's server up (after one untimed
    run of each with ``warmup``: a server runs all day, its JIT and caches warm), then without
    one (and on DuckDB where it has an engine): median seconds, against the goals. ``only``
    limits the commands to those names."""
    if rounds < 1:
        raise LakehouseError(f"bench cli: --rounds must be at least 1, got {rounds}")
    known = [c.name for c in tour("", "", "")]
    unknown = sorted(set(only) - set(known))
    if unknown:  # before anything starts
        raise LakehouseError(f"bench cli: unknown command(s) {unknown}; known: {known}")
    with tempfile.TemporaryDirectory(prefix="lakehouse-bench-cli-") as tmp:
        s = Scratch(project, Path(tmp), master)
        server_start, _ = s.run(("server", "start"))
        try:
            commands = [c for c in tour(*_setup(s, rows, days)) if not only or c.name in only]
            for c in commands if warmup else ():
                s.run(c.argv)
            with_server = {c.name: _median(s, c.argv, rounds) for c in commands}
            duckdb = {c.name: _median(s, c.duckdb, rounds) for c in commands if c.duckdb}
        finally:
            s.run(("server", "stop"), check=False)
        alone = {c.name: _median(s, c.argv, rounds) for c in commands}
    table = []
    for c in commands:
        table.append({
            "command": c.name, "server_s": round(with_server[c.name], 2), "no_server_s": round(alone[c.name], 2),
            "duckdb_s": round(duckdb[c.name], 2) if c.name in duckdb else None,
            "goal_server_s": c.goal_server, "goal_no_server_s": c.goal_alone,
            "met": all(m is not False for m in (_met(with_server[c.name], c.goal_server),
                                                 _met(alone[c.name], c.goal_alone))),
        })
    goals = [r for r in table if r["goal_server_s"] is not None or r["goal_no_server_s"] is not None]
    return {"rounds": rounds, "warmup": warmup, "rows": rows, "days": days, "server_start_s": round(server_start, 2),
            "goals_met": sum(r["met"] for r in goals), "goals": len(goals), "commands": table}
