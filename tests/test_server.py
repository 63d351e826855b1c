"""``lakehouse server``: a project's Spark Connect server, which the project's commands use.

Real processes throughout: ``lakehouse server start`` starts a real Spark Connect server (a
detached process), commands are real ``lakehouse`` processes, and the client that is refused is
pyspark's own. The same commands run against a server and in-process give the same JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakehouse.cli import hosting
from lakehouse.settings import private_folder
from lakehouse.spark import server
from tests.conftest import FAST_JVM, REPO, Project, cli, cli_in_process, suite_server, wait_until

pytestmark = pytest.mark.slow

NO_JVM = "no-such-master://this-process-must-not-start-spark"
"""A master a command's own Spark would fail on: a command that succeeds with it ran on a server."""

ROWS = (
    "trip_id,city_id,status,fare_total,fare_local,event_time\n"
    "a,1,2,10.5,10.50,2026-11-20T10:15:00Z\n"
    "b,1,2,oops,1.00,2026-11-20T11:00:00Z\n"
    "a,1,3,0,0.00,2026-11-20T10:15:00Z\n"
    "c,5,2,7.25,7.25,2026-11-21T00:00:00.250Z\n"
    "d,7,1,3.5,3.50,2026-11-23T08:00:00Z\n"
)


def lakehouse(root: Path | str, *args: str, env: dict[str, str] | None = None, timeout: float = 300,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lakehouse --project root ...`` in a process of its own, with no LAKEHOUSE_* of ours."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    child.update(LAKEHOUSE_JAVA_OPTS=FAST_JVM, **(env or {}))
    return subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(root), *args],
                          env=child, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def repo_project(root: Path) -> Path:
    root.mkdir(parents=True)
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(REPO / d, root / d)
    (root / "trips.csv").write_text(ROWS)
    return root


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """A project with its own server, started with ``lakehouse server start`` (stopped at the end)."""
    root = repo_project(tmp_path_factory.mktemp("served") / "my proj")  # a space: Spark splits JVM options
    p = lakehouse(root, "server", "start", "--format", "json", env={"LAKEHOUSE_MASTER": "local[1]"})
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    yield root, doc
    host = hosting.read_record(root)
    assert lakehouse(root, "server", "stop").returncode == 0
    assert not (root / ".lakehouse" / "tmp").exists()  # its scratch went with it
    # the command host went with the server
    assert host is not None and not hosting.running(host["pid"])
    assert not (root / ".lakehouse" / "host.json").exists() and not (root / ".lakehouse" / "host.sock").exists()


def test_start_records_the_server_privately_and_status_says_commands_use_it(running):
    root, doc = running
    assert doc["state"] == "running" and doc["address"].startswith("sc://127.0.0.1:")
    rec = server.read_record(root)
    assert rec is not None and rec.pid == doc["pid"] and rec.warehouse == str(root / "warehouse")
    assert stat.S_IMODE(os.stat(root / ".lakehouse").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / ".lakehouse" / "server.json").st_mode) == 0o600
    # the JVM's scratch (Spark's local dirs, session artifacts) is in the private folder, not /tmp
    assert any(d.name.startswith(("spark-", "blockmgr-", "artifacts-")) for d in (root / ".lakehouse" / "tmp").iterdir())
    assert rec.token and rec.token not in doc["address"] and rec.token not in json.dumps(doc)
    st = lakehouse(root, "server", "status", "--format", "json")
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["state"] == "running" and status["commands_use"] == f"server ({rec.address})"
    again = lakehouse(root, "server", "start")
    assert again.returncode == 1 and "already runs for this project" in again.stderr


def test_commands_run_on_the_server_and_start_no_spark_of_their_own(running):
    root, _ = running
    no_jvm = {"LAKEHOUSE_MASTER": NO_JVM}
    for args in (("migrate",), ("load", "trips", str(root / "trips.csv")),
                 ("archive", "trips", "--now", "2026-11-23T00:00:00Z"), ("verify", "trips")):
        p = lakehouse(root, *args, "--format", "json", env=no_jvm)
        assert p.returncode == 0, (args, p.stderr)
        json.loads(p.stdout)
        assert "Setting default log level" not in p.stderr  # no JVM banner: no JVM
    q = lakehouse(root, "query", "SELECT count(*) AS n FROM trips", "--engine", "spark", "--format", "json", env=no_jvm)
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout) == [{"n": 3}]


def test_a_client_without_the_token_is_refused(running):
    root, _ = running
    rec = server.read_record(root)
    assert rec is not None
    code = ("import sys\nfrom pyspark.sql import SparkSession\n"
            "s = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
            "print(s.range(3).count())\n")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    for url, refusal in ((f"sc://localhost:{rec.port}", "No authentication token provided"),
                         (f"sc://localhost:{rec.port}/;token=not-the-token", "Invalid authentication token")):
        p = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode != 0 and refusal in p.stderr and "3" not in p.stdout.split()
    ok = subprocess.run([sys.executable, "-c", code, rec.url], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and ok.stdout.split()[-1] == "3", ok.stderr


def test_a_server_of_another_warehouse_is_not_used(running):
    root, _ = running
    other = str(root / "elsewhere")
    st = lakehouse(root, "--warehouse", other, "server", "status", "--format", "json")
    doc = json.loads(st.stdout)
    assert doc["commands_use"].startswith("in-process") and "serves the warehouse" in doc["commands_use"]
    settings = server.Settings.resolve(root, other, "local[1]", env={})
    rec = server.read_record(root)
    assert rec is not None and "serves the warehouse" in (server.problem(rec, settings) or "")


def test_a_stale_record_is_noticed_with_one_line_and_ignored(tmp_path):
    """A server killed outright leaves its record and scratch behind (SIGKILL runs no clean-up);
    here they are those of a process that has ended, as ``serve`` writes them."""
    root = repo_project(tmp_path / "proj")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    rec = server.ServerRecord(port=server._free_port(), pid=pid, token="t", project=str(root),
                              warehouse=str(root / "warehouse"), master="local[1]", started="2026-11-28T00:00:00+00:00",
                              log=str(root / ".lakehouse" / "server.log"))
    private_folder(root)
    (server.scratch_path(root) / "blockmgr-1").mkdir(parents=True)
    server.record_path(root).write_text(json.dumps(dataclasses.asdict(rec)))
    st = json.loads(lakehouse(root, "server", "status", "--format", "json").stdout)
    assert st["state"] == "not usable" and "is gone" in st["commands_use"]
    p = lakehouse(root, "migrate", "--format", "json", env={"LAKEHOUSE_MASTER": "local[1]"})
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stderr.splitlines() if "not using the Spark Connect server" in ln]
    assert len(notes) == 1 and f"its process {pid} is gone" in notes[0]
    stopped = json.loads(lakehouse(root, "server", "stop", "--format", "json").stdout)
    assert stopped["state"] == "stopped" and not server.record_path(root).exists()
    assert not server.scratch_path(root).exists()  # the killed server's scratch went with its record
    assert json.loads(lakehouse(root, "server", "stop", "--format", "json").stdout)["state"] == "not running"


def test_a_bad_remote_is_one_error_line():
    root = REPO
    p = lakehouse(root, "--remote", "http://x:1", "tables")
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("error: remote 'http://x:1'")


SAME_JSON = (
    ("migrate",),
    ("load", "trips", "{data}"),
    ("query", "SELECT trip_id, status, fare_total FROM trips ORDER BY trip_id", "--engine", "spark"),
    ("archive", "trips", "--now", "2026-11-23T00:00:00Z"),
    ("query", "SELECT event_date, count(*) AS n FROM trips GROUP BY 1 ORDER BY 1", "--engine", "spark"),
    ("verify", "trips"),
)
"""Commands whose work runs on Spark (``tables``, ``rejects`` and the plans answer from Delta's
log without it, the same code either way: tests/test_no_spark.py)."""
VARYING = ("seconds", "ms", "at", "started", "finished", "load_id", "source", "path", "staging", "duration")


def _stable(doc):
    """A JSON document without what differs between two runs of the same command (times, paths, ids)."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if not any(w in k for w in VARYING)}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


def test_the_same_commands_give_the_same_json_on_a_server_and_in_process(spark, tmp_path):
    """Through the suite's server (``--remote``, real processes) and in this process (the shared
    SparkSession): every answer the same."""
    on_server, in_process = Project(tmp_path / "a"), Project(tmp_path / "b")
    for proj in (on_server, in_process):
        for d in ("tables", "migrations", "queries"):
            shutil.rmtree(proj.root / d)
            shutil.copytree(REPO / d, proj.root / d)
        (proj.root / "trips.csv").write_text(ROWS)
    suite_server()
    for args in SAME_JSON:
        a = cli(on_server, *(x.format(data=on_server.root / "trips.csv") for x in args), "--format", "json")
        b = cli_in_process(in_process, *(x.format(data=in_process.root / "trips.csv") for x in args), "--format", "json")
        assert isinstance(a, subprocess.CompletedProcess)
        assert (a.returncode, b.returncode) == (0, 0), (args, a.stderr, b.stderr)
        assert _stable(json.loads(a.stdout)) == _stable(json.loads(b.stdout)), args


SLOW_JOB = """
import sys, time
from lakehouse.spark.session import connect
spark = connect(sys.argv[1], ship_package=False)
def slow(batches):
    import time
    for b in batches:
        time.sleep(6)
        yield b
print("running", flush=True)
spark.range(0, 4, 1, 2).mapInArrow(slow, "id long").write.mode("overwrite").parquet(sys.argv[2])
"""

FENCE = """
import sys
from lakehouse.spark.session import connect
connect(sys.argv[1], ship_package=False)   # connecting fences the dead clients first
print("fenced", flush=True)
"""


def _killed_mid_job(url: str, out: Path, registered: bool) -> None:
    code = SLOW_JOB if registered else SLOW_JOB.replace(
        "spark = connect(sys.argv[1], ship_package=False)",
        "from pyspark.sql import SparkSession\nspark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()")
    proc = subprocess.Popen([sys.executable, "-c", code, url, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "running", proc.stderr
    time.sleep(2.5)  # inside the job (its tasks sleep 6 s)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


CACHED_THEN_KILLED = """
import os, signal, sys
from lakehouse.spark.session import connect
spark = connect(sys.argv[1], ship_package=False)
df = spark.range(int(sys.argv[2])).persist()
assert df.count() == int(sys.argv[2]) and df.storageLevel.useMemory
os.kill(os.getpid(), signal.SIGKILL)   # as a `check` killed while GE reads its cached rows
"""
STORAGE = """
import sys
from lakehouse.spark.session import connect
spark = connect(sys.argv[1], ship_package=False)   # connecting fences the dead clients first
print(spark.range(int(sys.argv[2])).storageLevel.useMemory, flush=True)
"""


def test_what_a_killed_client_cached_is_released_by_the_next_client():
    """Spark's cache belongs to the server: the fence clears it when it finds a dead client."""
    url, n = suite_server(), 7_654_321
    p = subprocess.run([sys.executable, "-c", CACHED_THEN_KILLED, url, str(n)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    p = subprocess.run([sys.executable, "-c", STORAGE, url, str(n)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr[-2000:]


def test_the_job_of_a_killed_command_is_stopped_before_the_next_command_starts(tmp_path):
    """Spark Connect finishes a dead client's job after its death; lakehouse's next client stops
    it first. Without the fence (an unregistered client) the job does land: the contrast shows
    the check can fail."""
    from lakehouse.spark import fence

    url = suite_server()
    unfenced = tmp_path / "unfenced"
    _killed_mid_job(url, unfenced, registered=False)
    deadline = time.monotonic() + 30
    while not (unfenced / "_SUCCESS").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (unfenced / "_SUCCESS").exists()  # the dead client's job finished on the server

    fenced = tmp_path / "fenced"
    _killed_mid_job(url, fenced, registered=True)
    assert len(list(fence.folder(url).glob("*.json"))) >= 1
    p = subprocess.run([sys.executable, "-c", FENCE, url], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "fenced", p.stderr
    time.sleep(8)  # longer than the job had left
    assert not (fenced / "_SUCCESS").exists() and not list(fenced.glob("part-*"))
    from lakehouse import lease

    assert not [e for e in fence.folder(url).glob("*.json")
                if not lease.alive(json.loads(e.read_text())["pid"])]


# -- the command host: commands of a project with a server run in a pre-imported process --------

def _host_children(host_pid: int) -> list[int]:
    """The processes the host forked (the commands it runs)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat_line = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat_line.rsplit(")", 1)[1].split()[1]) == host_pid:
                out.append(int(entry.name))
    return out


def _watching(root: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``lakehouse ingest trips --source <empty folder> --watch`` (runs until a signal) as a process of its own."""
    source = cwd / "landing"
    source.mkdir(exist_ok=True)
    child = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    child.update(LAKEHOUSE_JAVA_OPTS=FAST_JVM, **env)
    return subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "--project", str(root), "ingest", "trips",
                             "--source", "landing", "--watch", "--format", "json"],
                            cwd=cwd, env=child, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_commands_run_in_the_host_with_the_callers_folder_environment_streams_and_signals(running, tmp_path):
    root, doc = running
    host = hosting.read_record(root)
    assert host is not None and doc["host"] == f"running (pid {host['pid']})"
    for name in ("host.json", "host.sock"):
        assert stat.S_IMODE(os.stat(root / ".lakehouse" / name).st_mode) == 0o600
    status = json.loads(lakehouse(root, "server", "status", "--format", "json").stdout)
    assert status["host"] == f"running (pid {host['pid']})"
    assert lakehouse(root, "migrate").returncode == 0
    proc = _watching(root, tmp_path, {})
    try:
        [child] = wait_until(lambda: _host_children(host["pid"]))
        # forked first, then it takes the caller's folder (before the command runs): wait for that
        wait_until(lambda: os.readlink(f"/proc/{child}/cwd") == str(tmp_path), 10)
        for fd in (0, 1, 2):  # the caller's own pipes, not copies
            assert os.readlink(f"/proc/{child}/fd/{fd}") == os.readlink(f"/proc/{proc.pid}/fd/{fd}")
        time.sleep(2)  # past the watch's first scan
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the command's process passes it on
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopping after the current batch" in err  # the child's own SIGINT handler ran
    assert json.loads(out)["files_ingested"] == 0
    assert _host_children(host["pid"]) == []


def test_a_killed_command_takes_its_hosted_child_with_it_and_the_host_serves_on(running, tmp_path):
    root, _ = running
    host = hosting.read_record(root)
    assert host is not None
    proc = _watching(root, tmp_path, {})
    [child] = wait_until(lambda: _host_children(host["pid"]))
    proc.kill()
    proc.wait()
    wait_until(lambda: not hosting.running(child) and _host_children(host["pid"]) == [], 10)
    runs = [subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "--project", str(root), "tables", "--format", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for r in runs:  # at once: a child each
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0 and {t["name"] for t in json.loads(out)} == {"trips", "driver_pings"}, err


def test_a_hosted_command_killed_at_a_crash_point_ends_with_its_signal_and_the_next_finishes_its_work(running):
    root, _ = running
    data = root / "more.csv"
    data.write_text("trip_id,city_id,status,fare_total,fare_local,event_time\nk1,3,2,1.5,1.50,2026-11-24T10:00:00Z\n")
    assert lakehouse(root, "migrate").returncode == 0
    killed = lakehouse(root, "load", "trips", str(data), env={"LAKEHOUSE_CRASH_AT": "ingest_after_live"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "command load (pid" in (root / ".lakehouse" / "host.log").read_text()  # it was the host's child
    again = lakehouse(root, "load", "trips", str(data), "--format", "json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)  # the killed load's batch finished first, its row once
    assert doc["recovered_batches"] and doc["rows_loaded"] == 1 and doc["rows_rejected"] == 0, doc


def test_a_hosted_command_answers_as_one_in_its_own_process(running):
    """Output, errors and status the same with the host and without it, also where they depend on
    the caller's environment (the warehouse a variable names) and folder (a relative path)."""
    root, _ = running
    elsewhere = {"LAKEHOUSE_WAREHOUSE": str(root / "elsewhere")}
    cases = [((root, "tables", "--format", "json"), {}, None),
             ((root, "query", "SELECT count(*) AS n FROM trips", "--format", "csv"), {}, None),
             ((root, "query", "SELECT nope FROM trips"), {}, None),
             ((root, "no-such-command"), {}, None),
             ((root, "tables", "--format", "yaml"), {}, None),
             ((root, "--format", "json", "rejects", "trips"), {}, None),
             ((root, "tables", "--format", "json"), elsewhere, None),
             ((".", "load", "trips", "nope.csv"), {}, root)]
    log = root / ".lakehouse" / "host.log"
    for (where, *args), env, cwd in cases:
        before = log.read_text().count(") ended with status")
        hosted = lakehouse(where, *args, env=env, cwd=cwd)
        alone = lakehouse(where, *args, env={**env, "LAKEHOUSE_HOST": "off"}, cwd=cwd)
        assert (hosted.returncode, hosted.stdout, hosted.stderr) == (alone.returncode, alone.stdout, alone.stderr), args
        assert log.read_text().count(") ended with status") == before + 1, args  # the first ran in the host
    # and the environment did matter: the other warehouse holds no table yet
    here, there = (json.loads(lakehouse(root, "tables", "--format", "json", env=e).stdout) for e in ({}, elsewhere))
    assert all(t["created"] for t in here) and not any(t["created"] for t in there)


def test_a_host_that_cannot_run_the_command_is_passed_over_with_one_line(running):
    root, _ = running
    path = root / ".lakehouse" / "host.json"
    saved = path.read_text()
    rec = json.loads(saved)
    try:
        for change, why in (({"identity": {**rec["identity"], "python": "/elsewhere/python3"}}, "it runs another python"),
                            ({"code_stamp": 0.0}, "lakehouse or a package it uses changed since it started"),
                            ({"pid": rec["server_pid"]}, f"its process {rec['server_pid']} is gone")):
            path.write_text(json.dumps({**rec, **change}))
            p = lakehouse(root, "tables", "--format", "json")
            assert p.returncode == 0 and json.loads(p.stdout), p.stderr
            notes = [ln for ln in p.stderr.splitlines() if ln.startswith("note: not using the command host")]
            assert len(notes) == 1 and why in notes[0], p.stderr
    finally:
        path.write_text(saved)
    quiet = lakehouse(root, "tables", "--format", "json", env={"LAKEHOUSE_HOST": "off"})
    assert quiet.returncode == 0 and "command host" not in quiet.stderr
