"""The command line as users and scripts see it: exit codes, one-line errors, clean JSON on
stdout. Most commands run in this process on the real command group (tests/conftest.py
``cli_in_process``: the shared SparkSession, no JVM to start); the real ``lakehouse`` entry point
runs in subprocesses where the process is the point: exit codes of usage and definition errors,
two loads at once, and what the JVM prints on its console."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAST_JVM, REPO, cli_in_process


def run(project: Path, *args: str, check: int | None = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    """``lakehouse --project <project> ...`` in this process; asserts the exit code ``check``."""
    p = cli_in_process(project, *args, env=env)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    return p


def run_process(project: Path, *args: str, check: int | None = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    """``lakehouse --project <project> ...`` as a process of its own (the real entry point)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    e.update(env or {})
    e.setdefault("LAKEHOUSE_MASTER", "local[2]")
    e.setdefault("LAKEHOUSE_JAVA_OPTS", FAST_JVM)
    p = subprocess.run(
        [sys.executable, "-m", "lakehouse.cli", "--project", str(project), *args],
        capture_output=True, text=True, env=e, timeout=600,
    )
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    return p


def error_lines(p: subprocess.CompletedProcess) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def proj(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "proj"
    root.mkdir()
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(REPO / d, root / d)
    return root


def test_usage_errors_exit_2(proj):
    """(Processes: the real entry point's exit code; none of them starts Spark.)"""
    assert run_process(proj, "load", check=None).returncode == 2
    assert run_process(proj, "query", check=None).returncode == 2  # neither SQL nor --file
    assert run_process(proj, "no-such-command", check=None).returncode == 2
    assert run_process(proj, "query", "SELECT 1", "--engine", "oracle", check=None).returncode == 2


def test_bad_definition_is_one_error_line_exit_1(tmp_path):
    """(Processes: all a user sees of the real entry point is one line; no Spark is started.)"""
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "x.yaml").write_text("name: x\ncolumns: [{name: a, type: strin}]\nevent_time: a\n")
    p = run_process(tmp_path, "tables", check=1)
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: tables/x.yaml: columns[0].type: unknown type 'strin'")
    p = run_process(tmp_path / "missing", "tables", check=1)
    assert error_lines(p) == [f"error: project directory '{tmp_path / 'missing'}' does not exist"]


@pytest.mark.spark
def test_end_to_end_json_contract(spark, proj, tmp_path):
    p = run(proj, "migrate", "--status", "--format", "json")
    assert json.loads(p.stdout) == {"applied": [], "pending": ["0001_create_trips", "0002_create_driver_pings"],
                                    "changed": [], "drift": []}
    p = run(proj, "migrate", "--format", "json")
    assert json.loads(p.stdout) == {"applied": ["0001_create_trips", "0002_create_driver_pings"], "pending": []}
    p = run(proj, "migrate", "--format", "json")  # idempotent, and fast (no Spark needed)
    assert json.loads(p.stdout) == {"applied": [], "pending": []}

    data = tmp_path / "trips.csv"
    data.write_text(
        "trip_id,city_id,status,fare_total,fare_local,event_time\n"
        "a,1,2,10.5,10.50,2026-11-20T10:15:00Z\n"
        "b,1,2,oops,1.00,2026-11-20T11:00:00Z\n"
        "a,1,3,0,0.00,2026-11-20T10:15:00Z\n"
        "c,5,2,7.25,7.25,2026-11-21T00:00:00.250Z\n"
    )
    p = run(proj, "--format", "json", "load", "trips", str(data))
    doc = json.loads(p.stdout)
    assert (doc["rows_loaded"], doc["rows_rejected"], doc["files_rejected"]) == (3, 1, [])

    p = run(proj, "tables", "--format", "json")
    docs = {d["name"]: d for d in json.loads(p.stdout)}
    assert sorted(docs) == ["driver_pings", "trips"]
    # load is a one-shot producer: the stream bound is the latest event time it released
    assert docs["trips"] == {"name": "trips", "live_rows": 2, "archive_rows": 0, "cutoff": None,
                             "bound": "2026-11-21T00:00:00.25Z", "watermark": "2026-11-21T00:00:00.25Z",
                             "staged": 0, "created": True, "rejects": 1, "waiting_rows": 0}
    p = run(proj, "rejects", "trips", "--format", "json")
    (rej,) = json.loads(p.stdout)
    assert rej["source"] == str(data) and rej["line"] == 3
    assert rej["reason"] == "column fare_total: 'oops' is not a double"
    assert rej["record"] == "b,1,2,oops,1.00,2026-11-20T11:00:00Z" and rej["at"].endswith("Z")

    sql = "SELECT trip_id, status, fare_local, event_time, event_date FROM trips ORDER BY trip_id"
    want = [
        {"trip_id": "a", "status": 3, "fare_local": "0.00", "event_time": "2026-11-20T10:15:00Z", "event_date": "2026-11-20"},
        {"trip_id": "c", "status": 2, "fare_local": "7.25", "event_time": "2026-11-21T00:00:00.25Z", "event_date": "2026-11-21"},
    ]
    # (Spark's answers are compared with DuckDB's in test_query, and both engines' Arrow results
    # are written as JSON by the same code)
    p = run(proj, "query", sql, "--engine", "duckdb", "--format", "json")
    assert json.loads(p.stdout) == want
    p = run(proj, "query", "SELECT count(*) AS n, sum(fare_total) AS s FROM trips", "--engine", "duckdb", "--format", "csv")
    assert p.stdout == "n,s\n2,7.25\n"
    qf = tmp_path / "q.sql"
    qf.write_text("SELECT city_id, count(*) AS n FROM trips GROUP BY city_id ORDER BY city_id\n")
    p = run(proj, "query", "--file", str(qf), "--engine", "duckdb")
    assert "city_id" in p.stdout and "(2 rows)" in p.stdout

    # a query error: exit 1, one line
    p = run(proj, "query", "SELECT nope FROM trips", "--engine", "duckdb", check=1)
    assert p.stdout == "" and len(error_lines(p)) == 1 and "nope" in error_lines(p)[0]


@pytest.mark.slow
@pytest.mark.spark
def test_two_concurrent_load_processes_lose_nothing(spark, proj, tmp_path):
    run(proj, "migrate")
    files = []
    for i in range(2):
        f = tmp_path / f"c{i}.csv"
        f.write_text("trip_id,city_id,event_time\n" + "".join(
            f"p{i}-{j},{j % 3},2026-11-19T{j % 24:02d}:00:00Z\n" for j in range(200)) + f"both,{i},2026-11-19T05:00:00Z\n")
        files.append(f)
    before = json.loads(run(proj, "tables", "--format", "json").stdout)[1]["live_rows"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_MASTER"] = "local[1]"
    env["LAKEHOUSE_JAVA_OPTS"] = FAST_JVM
    procs = [subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "--project", str(proj), "--format", "json",
                               "load", "trips", str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for f in files]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out)["rows_loaded"] == 201
    after = json.loads(run(proj, "tables", "--format", "json").stdout)[1]["live_rows"]
    assert after - before == 401


@pytest.mark.spark
def test_ingest_dry_run_and_ingest_log_json(spark, proj, tmp_path):
    """(A real ingest's JSON report and log are checked in test_ingest_crash's --watch test.)"""
    run(proj, "migrate")
    land = tmp_path / "landing"
    land.mkdir()
    header = "trip_id,city_id,status,fare_total,event_time\n"
    (land / "trips_20261120T1000.csv").write_text(header + "i1,1,2,3.5,2026-11-20T10:00:00Z\ni2,1,2,x,2026-11-20T10:01:00Z\n")
    (land / "trips_20261120T1030.csv").write_text(header + "i3,1,2,4.5,2026-11-20T10:30:00Z\n")
    (land / "notes.txt").write_text("not a trips file\n")
    # the plan: the 10-minute window holds back the newest file; nothing changes (and no Spark)
    p = run(proj, "ingest", "trips", "--source", str(land), "--dry-run", "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["dry_run"] and doc["planned"] == [{"batch": 1, "files": ["trips_20261120T1000.csv"]}]
    assert doc["waiting"] == 1 and doc["batches"] == []
    assert json.loads(run(proj, "ingest-log", "trips", "--source", str(land), "--format", "json").stdout) == []
    p = run(proj, "ingest-log", "trips", "--source", str(land))
    assert "no files ingested yet" in p.stdout
    p = run(proj, "ingest", "trips", "--source", str(tmp_path / "nope"), check=1)
    assert error_lines(p) == [f"error: {tmp_path / 'nope'}: no such directory"]


@pytest.mark.slow
def test_what_the_jvm_prints_goes_to_stderr_and_stdout_stays_the_output():
    """Delta and Spark print to the JVM's console (VACUUM's "Deleted N files", Ivy's resolution
    report): the JVM is started with its stdout on our stderr, so ``--format json`` output stays
    one parseable document, and what the JVM said is still shown."""
    code = (
        "import json, sys\n"
        "from lakehouse.spark.session import get_spark\n"
        "s = get_spark('local[1]')\n"
        "s._jvm.System.out.println('JVM-SAID-THIS'); s._jvm.System.out.flush()\n"
        "print('python before'); sys.stdout.flush()\n"
        "print(json.dumps({'rows': s.range(3).count()}))\n"
    )
    e = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    e["LAKEHOUSE_JAVA_OPTS"] = FAST_JVM
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines() == ["python before", '{"rows": 3}'], p.stdout
    assert "JVM-SAID-THIS" in p.stderr


def test_the_entry_point_ends_after_its_threads_atexit_handlers_and_output_with_the_exit_status(tmp_path):
    """``main`` ends the process without tearing its modules down, but as Python would otherwise:
    a running non-daemon thread is waited for, atexit handlers run, buffered output is written,
    and the command's exit status (0, click's 2, a message's 1) is the process's."""
    script = (
        "import atexit, sys, threading, time\n"
        "from lakehouse.cli import main\n"
        f"out = {str(tmp_path)!r}\n"
        "atexit.register(lambda: open(out + '/atexit', 'w').write('ran'))\n"
        "def slow():\n"
        "    time.sleep(0.5)\n"
        "    open(out + '/thread', 'w').write('joined')\n"
        "threading.Thread(target=slow).start()\n"
        "sys.stdout.write('x' * 100000)\n"
        "if sys.argv[1:] == ['message']:\n"
        "    import lakehouse.cli as c\n"
        "    c.cli = lambda **kw: sys.exit('stopped: a message')\n"
        "sys.argv = ['lakehouse', *sys.argv[1:]]\n"
        "main()\n"
        "open(out + '/after', 'w').write('main returned')\n")
    for args, status in ((["--help"], 0), (["no-such-command"], 2), (["message"], 1)):
        for name in ("atexit", "thread"):
            (tmp_path / name).unlink(missing_ok=True)
        p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, cwd=REPO)
        assert p.returncode == status, (args, p.stderr)
        assert p.stdout.startswith("x" * 100000), args
        assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
        assert not (tmp_path / "after").exists()  # the process ended in main
        if status == 0:
            assert "Usage: lakehouse" in p.stdout
        if args == ["message"]:
            assert p.stderr.strip() == "stopped: a message"
