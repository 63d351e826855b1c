"""Shared fixtures: one real local SparkSession with Delta for the whole run, and small projects
built in temporary folders."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lakehouse.project import Lakehouse
from lakehouse.settings import Settings

REPO = Path(__file__).resolve().parent.parent
MASTER = "local[2]"
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options for the short-lived lakehouse processes tests start (C1 only: starts much faster)."""

TRIPS_SMALL = """
name: trips
columns:
  - {name: trip_id,    type: string, nullable: false}
  - {name: city_id,    type: int}
  - {name: status,     type: int}
  - {name: fx_rate,    type: double}
  - {name: fare_total, type: double}
  - {name: fare_local, type: 'decimal(10,2)'}
  - {name: is_pool,    type: boolean}
  - {name: trip_date,  type: date}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [trip_id]
event_time: event_time
archive:
  delay: 24h
  interval: 2h
  sort_columns: [city_id, status, fx_rate]
"""

HEADER_SMALL = ["trip_id", "city_id", "status", "fx_rate", "fare_total", "fare_local", "is_pool", "trip_date", "event_time"]

CLICKS = """
name: clicks
columns:
  - {name: user_id, type: long}
  - {name: url, type: string, nullable: false}
  - {name: at, type: timestamp, nullable: false}
event_time: at
"""


# -- how the suite spreads over pytest-xdist's workers (make test: --dist loadgroup) ----------------
# A group runs on one worker, its module fixtures built once. A test module is a group, except
# tests marked with a group of their own (independent of their module's fixtures) so that they can
# run beside it. Groups start heaviest first: a heavy group started last is the whole run's tail.
GROUP_SECONDS = {
    "test_archive_safety.py": 280, "backfill": 290, "test_stream_crash.py": 430, "test_jobs_processes.py": 420,
    "kills-301": 75, "kills-302": 130, "kills-303": 75, "kills-304": 90, "test_archive_crash.py": 230,
    "test_stream.py": 210, "test_query_parity.py": 160, "test_ingest_crash.py": 160, "test_ingest.py": 150,
    "test_archive_memory.py": 150, "test_jobs.py": 150, "test_notebooks.py": 140, "test_quality.py": 115,
    "test_query.py": 100, "test_load_crash.py": 100, "test_archive.py": 95, "test_time_travel.py": 75,
    "test_live.py": 65, "test_delta_log.py": 65, "test_cli.py": 65, "test_load.py": 55, "test_ledger.py": 50,
    "test_stream_interleavings.py": 40, "test_lateness_e2e.py": 30, "test_stream_model.py": 30,
}
"""Seconds each group took in a `make test` of two workers on this machine (the order they start in;
an unlisted group is light and starts after these)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its group (its module's, unless marked ``xdist_group``) and start the
    heaviest groups first; the order within a group stays as collected. Every worker sorts the
    same collection the same way, as xdist requires."""
    def group(item: pytest.Item) -> str:
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            name = Path(str(item.fspath)).name
            item.add_marker(pytest.mark.xdist_group(name))
            return name
        return str(mark.args[0] if mark.args else mark.kwargs["name"])

    weight = {id(item): GROUP_SECONDS.get(group(item), 0) for item in items}
    items.sort(key=lambda item: -weight[id(item)])  # stable: collection order within a group


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (real Spark, real Delta); its JVM compiles with C1
    only, which spends far less CPU on a suite of many small jobs."""
    os.environ.setdefault("LAKEHOUSE_SHUFFLE_PARTITIONS", "2")
    os.environ.setdefault("LAKEHOUSE_JAVA_OPTS", FAST_JVM)
    from lakehouse.spark.session import get_spark

    return get_spark(MASTER)


class Project:
    """A throw-away lakehouse project: tables/, migrations/, queries/ and a warehouse."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for d in ("tables", "migrations", "queries", "data"):
            (root / d).mkdir(parents=True, exist_ok=True)
        self.settings = Settings.resolve(root, str(root / "warehouse"), MASTER, env={})
        self.lh = Lakehouse(self.settings)

    def table(self, yaml_text: str, name: str | None = None) -> "Project":
        text = textwrap.dedent(yaml_text).strip() + "\n"
        if name is None:
            name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("name:"))
        (self.root / "tables" / f"{name}.yaml").write_text(text)
        return self

    def migration(self, filename: str, body: str) -> Path:
        p = self.root / "migrations" / filename
        p.write_text(textwrap.dedent(body).strip() + "\n")
        return p

    def create(self, *tables: str) -> "Project":
        """Add a create migration per table and migrate."""
        n = len(list((self.root / "migrations").glob("*.py")))
        for i, t in enumerate(tables, start=n + 1):
            self.migration(f"{i:04d}_create_{t}.py", f"def upgrade(ctx):\n    ctx.create_table({t!r})\n")
        self.lh.migrate()
        return self

    def csv(self, name: str, header: list[str], rows: list[list[Any]]) -> str:
        p = self.root / "data" / name
        with p.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        return str(p)

    def text(self, name: str, content: str) -> str:
        p = self.root / "data" / name
        p.write_text(content)
        return str(p)

    def live(self, table: str, order_by: str = "") -> list[dict[str, Any]]:
        """Live rows read back with DuckDB (the second engine), optionally ordered."""
        sql = f"SELECT * FROM {table}" + (f" ORDER BY {order_by}" if order_by else "")
        return self.lh.query(sql, "duckdb").to_pylist()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture
def repo_copy(tmp_path: Path) -> Project:
    """A copy of this repository's own project (tables/, migrations/, queries/)."""
    root = tmp_path / "repo"
    root.mkdir()
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(REPO / d, root / d)
    return Project(root)


def cli(p: "Project", *args: str, crash: str | None = None, env: dict[str, str] | None = None,
        **kw: Any) -> "subprocess.Popen[str] | subprocess.CompletedProcess[str]":
    """Run ``lakehouse`` on a project in a process of its own (quick-start JVM, one core), killed
    at the crash point ``crash`` if given, with ``env`` added to its environment;
    ``background=True`` returns the running process."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    child.update(LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_JAVA_OPTS=FAST_JVM)
    if crash:
        child["LAKEHOUSE_CRASH_AT"] = crash
    child.update(env or {})
    cmd = [sys.executable, "-m", "lakehouse.cli", "--project", str(p.root), "--warehouse", p.settings.warehouse, *args]
    if kw.pop("background", False):
        return subprocess.Popen(cmd, env=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=child, capture_output=True, text=True, timeout=900)


KEPT_IN_PROCESS = ("LAKEHOUSE_SHUFFLE_PARTITIONS",)
"""LAKEHOUSE_* variables of the test process a command run in this process still sees (they
only shape the shared SparkSession, which the command reuses)."""


def cli_in_process(p: "Project | Path", *args: str,
                   env: dict[str, str] | None = None) -> "subprocess.CompletedProcess[str]":
    """Run ``lakehouse`` as ``cli()`` does, but in this process (click's CliRunner on the real
    command group, the shared SparkSession, no JVM to start): the same returncode, stdout (one
    JSON document with ``--format json``) and stderr. The command sees the LAKEHOUSE_* settings
    a child process of ``cli()`` would (none of the test process's, LAKEHOUSE_MASTER the shared
    session's, then ``env``); the environment is restored afterwards. ``p`` is a Project (its
    folder and warehouse are passed) or a bare project folder (``--project`` only: the default
    warehouse). Use ``cli()`` where a process must be killed or several processes run at once."""
    from click.testing import CliRunner

    from lakehouse.cli import cli as lakehouse_main

    if not isinstance(p, (str, os.PathLike)):  # a Project (pytest may load this module twice: no isinstance)
        head = ["--project", str(p.root), "--warehouse", p.settings.warehouse]
    else:
        head = ["--project", str(p)]
    overrides: dict[str, str | None] = {k: None for k in os.environ
                                        if k.startswith("LAKEHOUSE_") and k not in KEPT_IN_PROCESS}
    overrides["LAKEHOUSE_MASTER"] = MASTER
    overrides.update(env or {})
    saved = dict(os.environ)
    try:
        result = CliRunner().invoke(lakehouse_main, [*head, *args], env=overrides, prog_name="lakehouse")
    finally:  # what the command set (e.g. -v's LAKEHOUSE_LOG_LEVEL) does not outlive it
        os.environ.clear()
        os.environ.update(saved)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # as the interpreter would: the traceback on stderr, exit 1
        import traceback

        stderr += "".join(traceback.format_exception(*result.exc_info))  # type: ignore[misc]
    cmd = ["lakehouse", *head, *args]
    return subprocess.CompletedProcess(cmd, result.exit_code, result.stdout, stderr)
