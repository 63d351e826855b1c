"""Shared fixtures: one real local SparkSession with Delta for the whole run, and small projects
built in temporary folders."""

from __future__ import annotations

import atexit
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakehouse.project import Lakehouse
from lakehouse.settings import Settings

REPO = Path(__file__).resolve().parent.parent
MASTER = "local[2]"
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
"""JVM options for the short-lived lakehouse processes tests start (C1 only: starts much faster).
C1 alone gets a 48 MB code cache by default, which a session compiling Spark's generated code
can fill: the JVM then dies ("Out of space in CodeCache for adapters"); reserved, not committed."""

SMALL_JOBS = ("spark.sql.codegen.wholeStage=false spark.sql.codegen.factoryMode=NO_CODEGEN "
              "spark.sql.adaptive.enabled=false")
"""Spark settings for the suite's tables of a few rows, in every Spark the tests start (the shared
session, the suite's Connect server, each lakehouse process): Spark evaluates expressions without
compiling generated code (Janino's compile of each new query costs more than it saves on a few
rows) and plans once, without adaptive re-planning. Spark answers the same either way (its own
suite runs both modes); lakehouse's defaults stay Spark's. Measured on tests/test_archive.py, one
worker: busy CPU 145 -> 111 s."""
os.environ.setdefault("LAKEHOUSE_SPARK_CONF", SMALL_JOBS)
# ... and the quick-start JVM, two shuffle partitions: whichever test of a worker starts its
# SparkSession first (the shared one, or an in-process command's, which the rest then reuse)
os.environ.setdefault("LAKEHOUSE_JAVA_OPTS", FAST_JVM)
os.environ.setdefault("LAKEHOUSE_SHUFFLE_PARTITIONS", "2")
SMALL_CLUSTER = "spark.sql.shuffle.partitions=2 spark.databricks.delta.snapshotPartitions=2"
"""The same for a Spark of the suite on a standalone cluster: lakehouse keeps Spark's 200 shuffle
partitions and Delta's 50 snapshot partitions there (adaptive execution merges them by size), but
SMALL_JOBS turns adaptive execution off, so each shuffle of a few rows would run 200 tasks."""

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

ORDERS = """
name: orders
columns:
  - {name: id, type: string, nullable: false}
  - {name: amount, type: int}
  - {name: at, type: timestamp, nullable: false}
primary_key: [id]
event_time: at
stream: {allowed_lateness: 0}
"""
"""A keyed table of the stream tests (a later version of a key replaces it)."""

SALES = """
name: sales
columns:
  - {name: id, type: string, nullable: false}
  - {name: shop, type: int}
  - {name: price, type: double}
  - {name: at, type: timestamp, nullable: false}
primary_key: [id]
event_time: at
archive: {delay: 1d, sort_columns: [shop], vectors: all}
"""
"""A keyed table of the erasure tests, every column a vector file."""

CLICKS = """
name: clicks
columns:
  - {name: user_id, type: long}
  - {name: url, type: string, nullable: false}
  - {name: at, type: timestamp, nullable: false}
event_time: at
"""


# -- how the suite spreads over pytest-xdist's workers (make test) --------------------------------
# A scope runs on one worker, its module fixtures built once: a test module, a test of APART
# (independent of its module's fixtures) on its own, so that it can run beside its module, or a
# group of TOGETHER (tests that share an expensive session fixture, built once then). Scopes
# start heaviest first: a heavy scope started last is the whole run's tail. (xdist's loadgroup
# cannot do this: it renames tests, which pytest 9.2 no longer takes.)
APART = (
    "tests/test_archive_safety.py::test_a_backfill_of_600_days_archives_purges_and_archives_again",
    "tests/test_stream_kills.py::test_random_kills_lose_and_double_nothing[",
    "tests/test_s3.py::test_two_spark_processes_racing_commits_to_one_table_on_s3_lose_none",
)
TOGETHER = {
    "tests/test_s3.py::on the standalone cluster": (
        "tests/test_s3.py::test_the_story_told_on_s3_and_a_cluster_answers_as_on_a_local_warehouse",
        "tests/test_s3.py::test_a_spark_submit_job_runs_lakehouse_on_the_standalone_cluster",
    ),
    "tests/test_s3.py::on the S3 Spark Connect server": (
        "tests/test_s3.py::test_kills_of_archive_on_s3_followed_by_other_writers_lose_and_double_nothing",
        "tests/test_s3.py::test_kills_of_ingest_and_producer_insert_on_s3_lose_and_double_nothing",
        "tests/test_s3.py::test_two_producers_in_processes_of_their_own_and_an_archive_write_one_table_on_s3_at_once",
        "tests/test_s3.py::test_bench_archive_on_s3_reports_both_ratios_and_the_requests_per_archived_day",
    ),
}
"""Tests apart from their module that share one scope (its name, then theirs): the tests of the
``s3_spark`` fixture run on one worker, so the suite starts one S3 Spark Connect server (a JVM of
about 30 CPU-s), not one per worker; so do those of the ``spark_cluster`` fixture (one standalone
master and worker)."""
SCOPE_SECONDS = {
    "test_archive_safety.py": 275, "test_stream_crash.py": 275, "test_jobs_processes.py": 305,
    "test_archive_safety.py::test_a_backfill_of_600_days_archives_purges_and_archives_again": 80,
    "test_stream_kills.py::test_random_kills_lose_and_double_nothing[302]": 50,
    "test_stream_kills.py::test_random_kills_lose_and_double_nothing[304]": 66,
    "test_stream_kills.py::test_random_kills_lose_and_double_nothing[301]": 62,
    "test_stream_kills.py::test_random_kills_lose_and_double_nothing[303]": 40,
    "test_archive_crash.py": 160, "test_stream.py": 100, "test_query_parity.py": 120, "test_tpch.py": 100, "test_functions_parity.py": 60, "test_casing.py": 15, "test_ingest_crash.py": 55,
    "test_ingest.py": 75, "test_archive_memory.py": 45, "test_jobs.py": 190, "test_notebooks.py": 125,
    "test_quality.py": 125, "test_query.py": 45, "test_load_crash.py": 25, "test_archive.py": 175,
    "test_time_travel.py": 85, "test_live.py": 70, "test_delta_log.py": 25, "test_cli.py": 50, "test_load.py": 60,
    "test_ledger.py": 60, "test_stream_interleavings.py": 50, "test_lateness_e2e.py": 20, "test_stream_model.py": 15,
    "test_server.py": 220, "test_format_contract.py": 55, "test_no_spark.py": 30, "test_tour.py": 50,
    "test_bench_cli.py": 45, "test_bench_runs.py": 150, "test_purge.py": 30, "test_small_commits.py": 30,
    "test_s3.py::on the standalone cluster": 290,
    "test_s3.py::on the S3 Spark Connect server": 155,
    "test_s3.py::test_two_spark_processes_racing_commits_to_one_table_on_s3_lose_none": 45,
    "test_s3.py": 40, "test_sink_kills.py": 80, "test_changes_kills.py": 100, "test_changes.py": 50,
    "test_sink.py": 30, "test_delete_kills.py": 120, "test_delete_race.py": 45, "test_delete.py": 55,
    "test_delete_purge.py": 90,
    "test_erasure_archive.py": 30, "test_check_erasure.py": 45,
}
"""Seconds each scope took in a `make test` of two workers on this machine (the order they start
in; an unlisted scope is light and starts after these)."""


def scope_of(nodeid: str) -> str:
    """The scope of a test: its group when TOGETHER names it, the test itself when APART does,
    else its module."""
    for group, members in TOGETHER.items():
        if nodeid.startswith(members):
            return group
    return nodeid if nodeid.startswith(APART) else nodeid.split("::", 1)[0]


def scope_seconds(nodeid: str) -> int:
    return SCOPE_SECONDS.get(scope_of(nodeid).removeprefix("tests/"), 0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heaviest scopes first, each scope's tests in collection order (every worker sorts the
    same collection the same way, as xdist requires)."""
    items.sort(key=lambda item: -scope_seconds(item.nodeid))  # stable


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Scopes as scope_of() says, in the order the workers collected them (heaviest first)."""
    from xdist.scheduler import LoadScopeScheduling

    class HeaviestFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return HeaviestFirst(config, log)


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (real Spark, real Delta); its JVM compiles with C1
    only, which spends far less CPU on a suite of many small jobs. It is also the suite's Spark
    Connect server (``suite_server``)."""
    return _shared_session()


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
        """Add a create migration per table and migrate. A new warehouse whose project (tables,
        migrations, settings) this test process migrated before is a copy of what that migrate
        made (``_MIGRATED``): the same files, made by a real ``migrate``, without its Spark jobs."""
        n = len(list((self.root / "migrations").glob("*.py")))
        for i, t in enumerate(tables, start=n + 1):
            self.migration(f"{i:04d}_create_{t}.py", f"def upgrade(ctx):\n    ctx.create_table({t!r})\n")
        warehouse = Path(self.settings.warehouse)
        if warehouse.exists() or not warehouse.is_absolute():
            self.lh.migrate()
            return self
        key = self._migrated_key()
        made = _MIGRATED.get(key)
        if made is None:
            self.lh.migrate()
            if "root" not in _MIGRATED:
                _MIGRATED["root"] = Path(tempfile.mkdtemp(prefix="lakehouse-migrated-"))
                atexit.register(shutil.rmtree, _MIGRATED["root"], True)
            made = _MIGRATED["root"] / str(len(_MIGRATED))
            shutil.copytree(warehouse, made)
            _MIGRATED[key] = made
        else:  # files dated now, as a migrate now would date them (Delta dates a commit by its file)
            shutil.copytree(made, warehouse, copy_function=shutil.copyfile)
        return self

    def _migrated_key(self) -> tuple[tuple[str, str], ...]:
        """What a migrate of a new warehouse depends on: the project's definitions, migrations and settings."""
        files = [*sorted((self.root / "tables").glob("*")), *sorted((self.root / "migrations").glob("*")),
                 self.root / "pyproject.toml"]
        return tuple((str(f.relative_to(self.root)), f.read_text()) for f in files if f.is_file())

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


def copy_of_repo(root: Path) -> Project:
    """A copy of this repository's own project (tables/, migrations/, queries/) in ``root``."""
    root.mkdir()
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(REPO / d, root / d)
    return Project(root)


@pytest.fixture
def repo_copy(tmp_path: Path) -> Project:
    """A copy of this repository's own project (tables/, migrations/, queries/)."""
    return copy_of_repo(tmp_path / "repo")


# pytest imports this file as ``conftest`` (the fixtures), the test modules as ``tests.conftest``
# (cli(), suite_server()): both copies share one state, one shared session and its server.
_OTHER = sys.modules.get("tests.conftest" if __name__ == "conftest" else "conftest")
_SERVER: dict[str, Any] = _OTHER._SERVER if hasattr(_OTHER, "_SERVER") else {}
_SERVER_LOCK: Any = _OTHER._SERVER_LOCK if hasattr(_OTHER, "_SERVER_LOCK") else threading.Lock()
_MIGRATED: dict[Any, Path] = _OTHER._MIGRATED if hasattr(_OTHER, "_MIGRATED") else {}
"""The warehouses ``Project.create`` migrated in this test process, by what each migrate depended
on (``Project._migrated_key``), kept in one temporary folder (``"root"``) until the process ends."""


def suite_server() -> str:
    """The Spark Connect URL (with its token) of this test process's server: the shared session's
    driver, which serves Spark Connect on a loopback port with a token, as ``lakehouse server``
    does (lakehouse.spark.server: the same Spark settings and ``connect_conf``, master local[2]).
    Commands in processes of their own (``cli()``) reach Spark through it, as a user's commands
    do once ``lakehouse server start`` ran: a process then starts no JVM. One JVM serves both
    this process and its commands, so their code is compiled once (tests/test_server.py starts
    real ``lakehouse server`` processes). Thread-safe: tests start commands from thread pools."""
    _shared_session()
    return str(_SERVER["url"])


def _shared_session() -> Any:
    with _SERVER_LOCK:
        if "spark" not in _SERVER:
            import secrets

            from lakehouse.spark import server
            from lakehouse.spark.session import get_spark

            spark = get_spark(MASTER)  # this process's session, whoever made it first
            # Spark Connect's service in its driver, as SparkConnectPlugin starts it in a server's
            # (server.connect_conf), with the token a server takes from its environment
            port, token = server._free_port(), secrets.token_urlsafe(32)
            conf = spark._jvm.org.apache.spark.SparkEnv.get().conf()
            for key, value in {**server.connect_conf(port), "spark.connect.authenticate.token": token}.items():
                if key != "spark.plugins":
                    conf.set(key, value)
            spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(spark._jsc.sc())
            deadline = time.monotonic() + 60
            while not server._answers(port):
                assert time.monotonic() < deadline, f"the shared session's Spark Connect port {port} does not answer"
                time.sleep(0.1)
            _SERVER.update(spark=spark, url=f"sc://localhost:{port}/;token={token}")
        return _SERVER["spark"]


def wait_until(what: Any, seconds: float = 30.0) -> Any:
    """Poll ``what()`` until it gives something true (returned), failing after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"not within {seconds}s: {what}")


def needs_own_spark(crash: str | None) -> bool:
    """A process killed at a ``*during*`` point (a timer inside a Spark job, or a point inside a
    Spark task) runs its own Spark: on a server that job would go on after the kill, and a task's
    environment is the server's. A point between two steps is the same crash either way, and so
    is ``ingest_during_staging`` for the tests' small batches: the command stages them itself
    (``ingest.stage_local``), the point is in its own process. LAKEHOUSE_TESTS_OWN_SPARK=1 gives
    every such process a Spark of its own (as before servers)."""
    in_spark = crash is not None and "during" in crash and crash != "ingest_during_staging"
    return in_spark or os.environ.get("LAKEHOUSE_TESTS_OWN_SPARK") == "1"


def cli(p: "Project", *args: str, crash: str | None = None, env: dict[str, str] | None = None,
        own_spark: bool = False, **kw: Any) -> "subprocess.Popen[str] | subprocess.CompletedProcess[str]":
    """Run ``lakehouse`` on a project in a process of its own, on the suite's Spark Connect
    server (``suite_server``), or with a Spark of its own (quick-start JVM, one core) when
    ``own_spark`` or ``needs_own_spark(crash)``; killed at the crash point ``crash`` if given,
    with ``env`` added to its environment; ``background=True`` returns the running process."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    child.update(LAKEHOUSE_MASTER="local[1]", LAKEHOUSE_JAVA_OPTS=FAST_JVM)
    if not (own_spark or needs_own_spark(crash)):
        child["LAKEHOUSE_REMOTE"] = suite_server()
    if crash:
        child["LAKEHOUSE_CRASH_AT"] = crash
    child.update(env or {})
    cmd = [sys.executable, "-m", "lakehouse.cli", "--project", str(p.root), "--warehouse", p.settings.warehouse, *args]
    if kw.pop("background", False):
        return subprocess.Popen(cmd, env=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=child, capture_output=True, text=True, timeout=900)


KEPT_IN_PROCESS = ("LAKEHOUSE_SHUFFLE_PARTITIONS", "LAKEHOUSE_JAVA_OPTS", "LAKEHOUSE_SPARK_CONF")
"""LAKEHOUSE_* variables of the test process a command run in this process still sees: they only
shape the process's SparkSession, which the command reuses, or starts as the shared one when it is
the worker's first (without them that session, the worker's for the rest of the run, is a JVM
with C2, G1 and generated code: a suite run so started had 558 of 1,914 tests done in 15 minutes)."""


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


# -- an S3 API server on loopback ------------------------------------------------------------------

AWS_TEST_ENV = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "lakehouse-test-key",
                "AWS_SECRET_ACCESS_KEY": "lakehouse-test-secret-never-printed"}
"""The standard AWS variables the s3 tests run with (besides AWS_ENDPOINT_URL, the server's)."""


class S3Server:
    """moto's S3 API on a free loopback port, in a process of its own (deltalake's calls hold the
    GIL while they wait for the network, so a server thread in the test process would stall them);
    ``ignore`` names conditions it does not honour (If-None-Match, If-Match), as a store without
    conditional writes does. Stopped with :meth:`stop` or when the test process ends."""

    def __init__(self, ignore: tuple[str, ...] = ()) -> None:
        args = [sys.executable, "-m", "tests.s3_server", "--owner", str(os.getpid())]
        self._proc = subprocess.Popen([*args, *(x for h in ignore for x in ("--ignore", h))], cwd=REPO,
                                      stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self._proc.kill()
            raise RuntimeError(f"the S3 API server did not start: {line!r}")
        self.endpoint = line

    def bucket(self, name: str | None = None) -> str:
        """A new bucket (a fresh name unless given): its ``s3://`` URI."""
        import uuid

        import boto3

        name = name or f"lake-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name=AWS_TEST_ENV["AWS_REGION"],
                     aws_access_key_id=AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=name)
        return f"s3://{name}"

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()


@pytest.fixture(scope="session")
def spark_cluster(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone master and one worker with two cores on free loopback ports
    (tests/spark_cluster.py, about 15 s to start); its ``spark://`` URL. Its machines hold the
    suite's S3 credentials, as a cluster's instance role would; stopped at the end."""
    folder = tmp_path_factory.mktemp("spark-cluster")
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark_cluster", "--owner", str(os.getpid()),
                             "--folder", str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("spark://"):
        proc.kill()
        raise RuntimeError(f"the Spark cluster did not start: {url!r}")
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def s3_spark(s3_server: S3Server) -> Iterator[str]:
    """A Spark Connect server (``lakehouse server``, master local[2]) for warehouses on the suite's
    S3 server: hadoop-aws on its class path, the store's settings in its Spark and in its Python
    workers' environment. Commands of the s3 tests reach Spark through it (``LAKEHOUSE_REMOTE``),
    as a user's do once ``lakehouse server start`` ran on an S3 project; its URL (with its token)."""
    import tempfile

    from lakehouse.spark import server

    root = Path(tempfile.mkdtemp(prefix="lakehouse-s3-server-"))
    settings = Settings.resolve(root, s3_server.bucket() + "/server", MASTER, env={})
    saved = dict(os.environ)
    os.environ.update(LAKEHOUSE_SHUFFLE_PARTITIONS="2", LAKEHOUSE_SERVER_OWNER=str(os.getpid()),
                      LAKEHOUSE_SPARK_CONF=SMALL_JOBS)
    try:
        rec = server.start(settings)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield rec.url
    finally:
        server.stop(settings)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The suite's S3 API server, with the standard AWS variables pointing at it for the rest of
    the session (child processes inherit them); stopped at the end."""
    from lakehouse import objectstore

    server = S3Server()
    saved = {k: os.environ.get(k) for k in (*AWS_TEST_ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(AWS_TEST_ENV, AWS_ENDPOINT_URL=server.endpoint)
    objectstore.use(None)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()
