"""A warehouse on an S3 API (moto's server on loopback, from tests/conftest.py): lakehouse's storage
module, Delta reads and writes through deltalake, and DuckDB's reader, reached with the standard AWS
variables alone."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
import yaml

from lakehouse import delta_log, objectstore, storage
from lakehouse.errors import ConfigError, InputError
from lakehouse.objectstore import S3
from lakehouse.storage import lines
from tests.conftest import (
    AWS_TEST_ENV,
    FAST_JVM,
    REPO,
    SMALL_CLUSTER,
    SMALL_JOBS,
    S3Server,
    cli_in_process,
)

pytestmark = pytest.mark.s3


@pytest.fixture
def lake(s3_server) -> str:
    return storage.join(s3_server.bucket(), "wh")


def test_files_are_written_read_listed_and_deleted_on_the_store(lake):
    doc = storage.join(lake, "t", "_state", "state.json")
    assert not storage.exists(doc) and storage.list_names(lake) == [] and storage.list_files(lake) == []
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(doc)
    storage.write_json(doc, {"cutoff": 1})
    storage.write_text(storage.join(lake, "t", "vectors", "c", "20261120-1"), "v")
    assert storage.read_json(doc) == {"cutoff": 1} and storage.is_file(doc) and storage.size(doc) == 12
    storage.write_json(doc, {"cutoff": 2})  # one PUT replaces it whole
    assert storage.read_json(doc) == {"cutoff": 2}
    assert storage.list_names(storage.join(lake, "t")) == ["_state", "vectors"]
    assert storage.list_files(lake) == [doc, storage.join(lake, "t", "vectors", "c", "20261120-1")]
    with storage.open_write(storage.join(lake, "big.bin")) as f:
        f.write(b"x" * 3_000_000)
    assert storage.size(storage.join(lake, "big.bin")) == 3_000_000
    assert storage.delete(doc) and not storage.delete(doc) and not storage.exists(doc)
    storage.remove_tree(storage.join(lake, "t"))
    assert storage.list_files(lake) == [storage.join(lake, "big.bin")]


def test_of_many_racing_creators_exactly_one_wins(lake):
    path = storage.join(lake, "_leases", "trips")
    for round_ in range(5):
        target = f"{path}-{round_}"
        barrier = threading.Barrier(8)

        def create(i: int, target: str = target, barrier: threading.Barrier = barrier) -> bool:
            barrier.wait()
            return storage.create_exclusive(target, f"owner-{i}".encode())

        with ThreadPoolExecutor(8) as pool:
            won = list(pool.map(create, range(8)))
        assert won.count(True) == 1
        winner = f"owner-{won.index(True)}"
        assert storage.read_text(target) == winner
        # a retried create whose first PUT landed (its answer lost) finds its own bytes: created
        assert storage.create_exclusive(target, winner.encode())
        assert not storage.create_exclusive(target, b"owner-other")


def test_appends_from_racing_writers_are_all_kept_once(lake):
    log = storage.join(lake, "_jobs", "history.jsonl")

    def append(i: int) -> None:
        for j in range(5):
            lines.append_json_lines(log, [{"writer": i, "n": j}, {"writer": i, "n": j, "second": True}])

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(append, range(6)))
    docs = lines.read_json_lines(log)
    assert len(docs) == 6 * 5 * 2
    assert sorted(json.dumps(d, sort_keys=True) for d in docs) == sorted(
        json.dumps(d, sort_keys=True) for i in range(6) for j in range(5)
        for d in ({"writer": i, "n": j}, {"writer": i, "n": j, "second": True}))
    assert lines.read_json_lines(log, tail_bytes=60)[-1] in docs


@pytest.mark.parametrize("ignored", [("If-None-Match", "If-Match"), ("If-Match",), ("If-None-Match",)])
def test_a_store_without_conditional_writes_is_refused_by_name_before_any_exclusive_write(lake, monkeypatch, ignored):
    storage.require_conditional_writes(lake)  # moto honours both conditions
    from lakehouse.lease import Lease

    old = S3Server(ignore=ignored)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", old.endpoint)
        objectstore.use(None)
        bucket = old.bucket()
        lake = storage.join(bucket, "wh")
        for attempt in (
            lambda: storage.create_exclusive(storage.join(lake, "x"), b"1"),
            lambda: lines.append_json_lines(storage.join(lake, "log.jsonl"), [{"n": 1}]),
            lambda: Lease(storage.join(lake, "t", "_stream", "lock"), "a producer").acquire(),
        ):
            with pytest.raises(ConfigError) as e:
                attempt()
            msg = str(e.value)
            assert old.endpoint in msg and "If-None-Match" in msg and "\n" not in msg
            assert AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"] not in msg
        assert storage.list_files(bucket) == []  # nothing written, the probes gone
    finally:
        old.stop()
        objectstore.use(None)


def test_delta_tables_are_written_and_read_through_deltalake(lake):
    path = storage.join(lake, "_lakehouse", "history")
    assert not delta_log.exists(path)
    assert delta_log.append_records(path, pa.table({"run": [1, 2]}), txn=("jobs", 1))
    assert not delta_log.append_records(path, pa.table({"run": [3]}), txn=("jobs", 1))  # replayed: a no-op
    assert delta_log.append_records(path, pa.table({"run": [3]}), txn=("jobs", 2))
    assert delta_log.exists(path) and delta_log.txn_version(path, "jobs") == 2
    t = delta_log.open_table(path)
    assert t.version() == 1 and sorted(t.to_pyarrow_table().column("run").to_pylist()) == [1, 2, 3]
    assert delta_log.open_table(path, version=0).to_pyarrow_table().num_rows == 2


def test_duckdb_reads_a_delta_table_on_the_store_with_the_credential_chain(lake):
    from lakehouse.query import duckdb as reader

    path = storage.join(lake, "t")
    delta_log.append_records(path, pa.table({"x": [1, 2, 3]}))
    con = reader.connect(objectstore.active())
    assert con.sql(f"SELECT sum(x) FROM delta_scan('{path}')").fetchall() == [(6,)]
    secrets = con.sql("SELECT name, provider FROM duckdb_secrets()").fetchall()
    assert secrets == [("lakehouse_s3", "credential_chain")]


def test_a_lakehouse_on_an_s3_warehouse_makes_its_store_the_process_one(s3_server, tmp_path, monkeypatch):
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    (tmp_path / "pyproject.toml").write_text(f'[tool.lakehouse.s3]\nendpoint = "{s3_server.endpoint}"\n'
                                             'region = "eu-west-1"\n')
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)  # restored afterwards, as AWS_REGION:
    monkeypatch.setenv("AWS_REGION", AWS_TEST_ENV["AWS_REGION"])
    try:
        bucket = s3_server.bucket()[len("s3://"):]
        lh = Lakehouse(Settings.resolve(tmp_path, warehouse=f"s3a://{bucket}/wh"))
        store = S3(endpoint=s3_server.endpoint, region="eu-west-1", path_style=True)
        assert objectstore.active() == store
        # the processes it starts (Spark's Python workers) reach the same store, and a cluster's executors
        assert (os.environ["AWS_ENDPOINT_URL_S3"], os.environ["AWS_REGION"]) == (s3_server.endpoint, "eu-west-1")
        assert S3.resolve({}, dict(os.environ)) == store
        conf = lh.settings.spark_conf()
        assert conf["spark.executorEnv.AWS_ENDPOINT_URL_S3"] == s3_server.endpoint
        assert conf["spark.executorEnv.AWS_REGION"] == "eu-west-1"
    finally:
        objectstore.use(None)


def test_a_lease_on_the_store_has_one_holder_at_a_time_and_is_taken_over_when_it_expires(lake):
    from lakehouse.lease import Lease, LeaseHeld, LeaseLost, read_lease

    folder = storage.join(lake, "t", "_state", "table.lease")
    barrier = threading.Barrier(6)

    def take(i: int) -> Lease | None:
        barrier.wait()
        try:
            return Lease(folder, f"racer {i}", ttl=30).acquire()
        except LeaseHeld:
            return None

    with ThreadPoolExecutor(6) as pool:
        held = [x for x in pool.map(take, range(6)) if x is not None]
    assert len(held) == 1
    first = held[0]
    with pytest.raises(LeaseHeld) as e:
        Lease(folder, "late comer").acquire()
    assert "held by" in str(e.value) and folder in str(e.value)
    first.release()  # released: free at once
    second = Lease(folder, "second", ttl=1.0).acquire()
    assert read_lease(folder).holder == second.holder
    second._stop.set()  # a holder that stops renewing (a paused process)...
    if second._thread is not None:
        second._thread.join()
    import time

    time.sleep(1.2)
    third = Lease(folder, "third", ttl=30).acquire()  # ...is taken over once its lease expired
    with pytest.raises(LeaseLost):
        second.check()
    third.release()
    assert read_lease(folder).expires == 0


def test_the_tables_lease_on_the_store_refuses_a_second_job(lake):
    from lakehouse.lease import LeaseHeld, table_lease
    from lakehouse.warehouse import TablePaths

    paths = TablePaths(lake, "trips")
    with table_lease(paths, "archive") as held:
        assert held is not None
        with pytest.raises(LeaseHeld) as e:
            with table_lease(paths, "optimize"):
                pass
        assert "archive" in str(e.value)
    with table_lease(paths, "optimize") as again:
        assert again is not None and again.generation == 2


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.cluster
def test_the_story_told_on_s3_and_a_cluster_answers_as_on_a_local_warehouse(s3_server, spark_cluster, repo_copy,
                                                                            spark, tmp_path):
    """Load (a file of this machine, one already in the bucket), ingest of a landing prefix, two
    producers, archive, both engines, --as-of, rejects, vectors, jobs, optimize, vacuum, check:
    with the warehouse on the S3 server and Spark on a standalone cluster (executors in
    processes of their own, reaching this machine's files only through the copies lakehouse puts
    in the bucket) every answer is the one on a local warehouse (tests/scale_story.py)."""
    from tests import scale_story

    data = tmp_path / "data"
    files = scale_story.make_data(data)
    bucket = s3_server.bucket()
    here = {"inputs": tmp_path / "inputs", "landing": tmp_path / "landing"}
    for folder in here.values():
        folder.mkdir()
    for name in (scale_story.IN_STORE, *scale_story.LANDED):
        kind = "inputs" if name == scale_story.IN_STORE else "landing"
        storage.copy_file(str(files[name]), f"{bucket}/{kind}/{name}")
        storage.copy_file(str(files[name]), str(here[kind] / name))

    def local(args: list[str]) -> tuple[int, str, str]:
        r = cli_in_process(repo_copy, "--format", "json", *args)
        return r.returncode, r.stdout, r.stderr

    other = tmp_path / "remote"  # its own project folder: the server records, logs and GE project apart
    for d in ("tables", "migrations", "queries"):
        shutil.copytree(repo_copy.root / d, other / d)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    (tmp_path / "tmp").mkdir()  # its temporary files (the package's zip, GE's project), ended with os._exit
    env.update(TMPDIR=str(tmp_path / "tmp"), LAKEHOUSE_MASTER=spark_cluster, LAKEHOUSE_JAVA_OPTS=FAST_JVM,
               LAKEHOUSE_SPARK_CONF=f"{SMALL_JOBS} {SMALL_CLUSTER} spark.executor.memory=1g "
                                    f"spark.executor.extraJavaOptions='{FAST_JVM}'")
    # the cluster's telling runs in a process of its own while this one tells the story locally
    remote = subprocess.Popen([sys.executable, "-m", "tests.scale_story", "--project", str(other), "--warehouse",
                               f"{bucket}/wh", "--data", str(data), "--inputs", f"{bucket}/inputs", "--landing",
                               f"{bucket}/landing"], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        places = {repo_copy.settings.warehouse: "<warehouse>", str(data): "<data>", str(here["inputs"]): "<inputs>",
                  str(here["landing"]): "<landing>"}
        expected = scale_story.tell(local, str(data), str(here["inputs"]), str(here["landing"]), places)
        assert [s for s in expected if s["code"]] == []
        out, err = remote.communicate(timeout=900)
    finally:
        remote.kill()
    assert remote.returncode == 0, err[-3000:]
    told = json.loads(out)
    assert len(told) == len(expected)
    took = {"local": sum(s.pop("seconds") for s in expected), "cluster": sum(s.pop("seconds") for s in told)}
    print(f"the story took {took['local']:.0f}s on a local warehouse, {took['cluster']:.0f}s on S3 and the cluster")
    differ = [(want["args"][:3], _differences(want, got), got["err"]) for want, got in zip(expected, told) if got != want]
    print(json.dumps(differ, indent=1))
    assert differ == []
    assert not (other / "s3:").exists() and not (REPO / "s3:").exists()


def _differences(want: object, got: object, at: str = "") -> list[str]:
    """Where two JSON documents differ (the first few leaves), for a readable failure."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{at}.{k}: missing on one side" for k in sorted(set(want) ^ set(got))]
        for k in sorted(set(want) & set(got)):
            out += _differences(want[k], got[k], f"{at}.{k}")
        return out[:6]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got)) for d in _differences(w, g, f"{at}[{i}]")][:6]
    return [] if want == got else [f"{at}: {str(want)[:150]!r} != {str(got)[:150]!r}"]


def test_input_files_on_the_store_are_read_in_ranges_listed_and_copied_like_local_ones(lake, tmp_path):
    local = tmp_path / "in.csv"
    body = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(200_000))  # about 2.5 MB
    local.write_bytes(body)
    remote = storage.join(lake, "inputs", "in.csv")
    storage.copy_file(str(local), remote)
    assert storage.absolute("s3a://" + remote[len("s3://"):]) == remote
    info = storage.file_info(remote)
    assert info is not None and (info.name, info.size) == ("in.csv", len(body)) and info.mtime_ns > 0
    assert storage.file_info(storage.join(lake, "inputs")) is None  # a prefix is not a file
    assert storage.file_info(storage.join(lake, "nothing.csv")) is None
    with storage.open_read(remote) as f:
        assert f.readline() == b"a,b\n"
        f.seek(len(body) - 7)
        assert f.read() == body[-7:]
        f.seek(1_000_000)
        assert f.read(10) == body[1_000_000:1_000_010]
    with pytest.raises(FileNotFoundError):
        storage.open_read(storage.join(lake, "nothing.csv"))
    storage.copy_file(remote, str(tmp_path / "back.csv"))
    assert (tmp_path / "back.csv").read_bytes() == body
    storage.write_text(storage.join(lake, "inputs", "sub", "deeper.csv"), "a,b\n")
    storage.write_text(storage.join(lake, "inputs", "_in_progress.csv"), "a,b\n")
    assert [f.name for f in storage.list_file_infos(storage.join(lake, "inputs"))] == ["_in_progress.csv", "in.csv"]
    assert storage.list_file_infos(storage.join(lake, "empty")) == []
    with pytest.raises(FileNotFoundError, match="no bucket"):
        storage.list_file_infos("s3://no-such-bucket-here/landing")
    assert storage.disk_usage(storage.join(lake, "inputs")) == (3, len(body) + 8)


def test_a_landing_prefix_is_listed_by_pattern_without_hidden_or_nested_objects(lake):
    import yaml

    from lakehouse.definitions import parse_definition
    from lakehouse.ingest.scanner import check_source, list_source
    from lakehouse.ingest.state import canonical_source, source_key

    data = yaml.safe_load((REPO / "tables" / "trips.yaml").read_text(encoding="utf-8"))
    settings = parse_definition(data, "tables/trips.yaml").ingest
    landing = storage.join(lake, "landing")
    check_source(landing)  # an empty prefix: an empty landing, not an error
    for name in ("trips_20261120T0000.csv", "trips_20261120T0100.jsonl", ".trips_20261120T0200.csv",
                 "_trips_20261120T0300.csv", "notes.txt", "old/trips_20261119T0000.csv"):
        storage.write_text(storage.join(landing, name), "x")
    listed = list_source(landing, settings)
    assert [f.name for f in listed] == ["trips_20261120T0000.csv", "trips_20261120T0100.jsonl"]
    assert all(f.size == 1 and f.mtime_ns > 0 and f.refused is None for f in listed)
    assert canonical_source("s3a://" + landing[len("s3://"):] + "/") == landing  # one source, however spelled
    assert source_key(landing + "/") == source_key(landing)
    for bad in ("s3://no-such-bucket-here/landing",):
        with pytest.raises(InputError, match="no-such-bucket-here"):
            check_source(bad)


EVENTS = r"""
name: events
columns:
  - {name: id,     type: long, nullable: false}
  - {name: amount, type: double}
  - {name: at,     type: timestamp, nullable: false}
event_time: at
archive:
  delay: 1h
ingest:
  format: csv
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'ev_(\d{4})', format: '%H%M'}
  ingress_delay_interval: 0
  ingress_file_scan_wait: 0s
  block_size: 200B
"""


def _events_file(f: int) -> tuple[bytes, list[int]]:
    """A file of 12 good rows (ids unique across files) and one bad row, at minute ``f`` of 10:00."""
    ids = [f * 100 + i for i in range(12)]
    lines = ["id,amount,at"] + [f"{i},{i / 2},2026-11-20T10:{f % 60:02d}:00Z" for i in ids]
    lines.insert(5, f"{f}x,oops,2026-11-20T10:00:00Z")
    return ("\n".join(lines) + "\n").encode(), ids


def _on(remote: str, root, warehouse: str, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    """``lakehouse ARGS`` in a process of its own on the S3 Spark Connect server (no JVM of its own),
    killed at the crash point ``crash`` if given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_REMOTE=remote, **({"LAKEHOUSE_CRASH_AT": crash} if crash else {}))
    return subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(root), "--warehouse", warehouse,
                           "--format", "json", *args], env=env, cwd=root, capture_output=True, text=True, timeout=600)


def _held(warehouse: str) -> tuple[list[int], list[tuple[str, int]]]:
    """The ids of events' live and archive, and the (source, line) of its rejects, read with deltalake."""
    from lakehouse.warehouse import TablePaths

    paths = TablePaths(warehouse, "events")
    ids = [r["id"] for part in (paths.live, paths.archive) if delta_log.exists(part)
           for r in delta_log.scan(part, "SELECT id FROM t").to_pylist()]
    rejects = [(r["source"], r["line"]) for r in delta_log.scan(paths.rejects, "SELECT source, line FROM t").to_pylist()]
    return ids, rejects


@pytest.mark.slow
@pytest.mark.spark
def test_kills_of_ingest_and_producer_insert_on_s3_lose_and_double_nothing(s3_server, s3_spark, project):
    """SIGKILL an ``ingest`` of a landing prefix and a ``producer insert`` at each named point of
    their write path on the S3 server, run the next command: every file's rows are in the table
    exactly once, whole or not at all, and every reject once."""
    from collections import Counter

    project.table(EVENTS)
    project.migration("0001_create_events.py", "def upgrade(ctx):\n    ctx.create_table('events')\n")
    bucket = s3_server.bucket()
    wh, landing = f"{bucket}/wh", f"{bucket}/landing"
    run = functools.partial(_on, s3_spark, project.root, wh)
    assert run("migrate").returncode == 0
    files: dict[str, list[int]] = {}

    def consistent(complete: bool) -> None:
        ids, rejects = _held(wh)
        assert not [i for i, n in Counter(ids).items() if n > 1], "rows loaded twice"
        seen = [[i in set(ids) for i in want] for want in files.values()]
        assert all(all(v) or not any(v) for v in seen), "a file is partly visible"
        assert len(rejects) == len(set(rejects)), "rejects recorded twice"
        if complete:
            assert sorted(ids) == sorted(i for v in files.values() for i in v)
            assert sorted(rejects) == sorted((name, 6) for name in files)

    for f, point in enumerate(("ingest_after_take", "ingest_after_live", "ingest_after_state")):
        body, ids = _events_file(f)
        storage.write_bytes(f"{landing}/ev_{f:04d}.csv", body)
        files[f"{landing}/ev_{f:04d}.csv"] = ids
        killed = run("ingest", "events", "--source", landing, crash=point)
        assert killed.returncode == -9, (point, killed.stderr[-2000:])
        consistent(complete=False)
    done = run("ingest", "events", "--source", landing, "--drain")
    assert done.returncode == 0, done.stderr[-2000:]
    consistent(complete=True)

    assert run("producer", "events", "p", "attach").returncode == 0
    for f, point in enumerate(("ingest_after_take", "stream_after_insert"), start=10):
        body, ids = _events_file(f)
        local = project.root / "data" / f"p_{f}.csv"
        local.write_bytes(body)
        files[str(local)] = ids
        killed = run("producer", "events", "p", "insert", str(local), crash=point)
        assert killed.returncode == -9, (point, killed.stderr[-2000:])
        again = run("producer", "events", "p", "insert", str(local))  # the retry an application makes
        assert again.returncode == 0, (point, again.stderr[-2000:])
    assert run("producer", "events", "p", "detach").returncode == 0  # what it held back goes into live
    consistent(complete=True)


@pytest.mark.slow
@pytest.mark.spark
def test_two_spark_processes_racing_commits_to_one_table_on_s3_lose_none(s3_server, tmp_path):
    """Two Spark drivers append to one Delta table on the S3 server at the same moment, commit
    after commit: every commit is in the table (lakehouse's ConditionalPutLogStore: one PUT with
    If-None-Match per version). With Delta's own S3SingleDriverLogStore the same race loses
    commits (``LAKEHOUSE_TESTS_RACE_LOGSTORE=io.delta.storage.S3SingleDriverLogStore`` shows it:
    this test then fails, a version replaced by the other writer's)."""
    from deltalake import write_deltalake

    table = storage.join(s3_server.bucket(), "raced")
    write_deltalake(table, pa.table({"w": pa.array([], pa.string()), "i": pa.array([], pa.int32())}),
                    storage_options=delta_log.storage_options(table))
    store = os.environ.get("LAKEHOUSE_TESTS_RACE_LOGSTORE")
    conf = [f"spark.delta.logStore.s3.impl={store}"] if store else []
    go = tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(RACE_GO=str(go), LAKEHOUSE_JAVA_OPTS=FAST_JVM, LAKEHOUSE_SPARK_CONF=SMALL_JOBS)
    commits = 15
    racers = [subprocess.Popen([sys.executable, "-m", "tests.delta_racer", table, w, str(commits), *conf], env=env,
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in "ab"]
    try:
        for r in racers:
            assert r.stdout is not None and r.stdout.readline().strip() == "ready", r.stderr
        go.touch()
        made = [int(r.communicate(timeout=600)[0].strip()) for r in racers]
    finally:
        for r in racers:
            r.kill()
    assert made == [commits, commits]
    rows = delta_log.scan(table, "SELECT w, i FROM t").to_pylist()
    assert sorted((r["w"], r["i"]) for r in rows) == [(w, i) for w in "ab" for i in range(commits)]
    assert delta_log.version(table) == 2 * commits  # version 0 made the table


@pytest.mark.slow
@pytest.mark.spark
def test_kills_of_archive_on_s3_followed_by_other_writers_lose_and_double_nothing(s3_server, s3_spark, project):
    """SIGKILL ``archive`` on the S3 server after each of its steps, let a load and a producer's
    insert write next, archive again: every row is in live or the archive exactly once, and
    ``verify`` (both engines, the ledger, the vector files) passes."""
    from collections import Counter

    project.table(EVENTS)
    project.migration("0001_create_events.py", "def upgrade(ctx):\n    ctx.create_table('events')\n")
    wh = f"{s3_server.bucket()}/wh"
    run = functools.partial(_on, s3_spark, project.root, wh)
    assert run("migrate").returncode == 0
    want: list[int] = []

    def add(f: int, day: int) -> str:
        body, ids = _events_file(f)
        path = project.root / "data" / f"ev_{f}.csv"
        path.write_bytes(body.replace(b"2026-11-20T", f"2026-11-{day:02d}T".encode()))
        want.extend(ids)
        return str(path)

    loaded = run("load", "events", add(0, 17), add(1, 18), add(2, 19))
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert run("producer", "events", "p", "attach").returncode == 0
    for n, point in enumerate(("after_vectors", "after_commit")):  # (every point: tests/test_archive_crash.py)
        killed = run("archive", "events", "--now", f"2026-11-{18 + n // 2:02d}T{12 + n % 2 * 6:02d}:00:00Z", crash=point)
        assert killed.returncode == -9, (point, killed.stderr[-2000:])
        assert run("load", "events", add(10 + n, 17 + n % 3)).returncode == 0, point
        assert run("producer", "events", "p", "insert", add(20 + n, 20)).returncode == 0, point
    assert run("producer", "events", "p", "detach").returncode == 0
    done = run("archive", "events", "--now", "2026-11-21T00:00:00Z")
    assert done.returncode == 0, done.stderr[-2000:]
    ids, _ = _held(wh)
    assert sorted(ids) == sorted(want) and max(Counter(ids).values()) == 1
    verified = run("verify", "events")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.spark
def test_two_producers_in_processes_of_their_own_and_an_archive_write_one_table_on_s3_at_once(s3_server, s3_spark,
                                                                                             project):
    """Two producers insert from processes of their own while archive runs beside them, all on
    one table on the S3 server: every row sent is in live or the archive exactly once."""
    from collections import Counter

    project.table(EVENTS)
    project.migration("0001_create_events.py", "def upgrade(ctx):\n    ctx.create_table('events')\n")
    wh = f"{s3_server.bucket()}/wh"
    run = functools.partial(_on, s3_spark, project.root, wh)
    assert run("migrate").returncode == 0
    files: dict[str, list[str]] = {"p": [], "q": []}
    want: list[int] = []
    for k in range(4):
        body, ids = _events_file(30 + k)
        path = project.root / "data" / f"in_{k}.csv"
        path.write_bytes(body.replace(b"2026-11-20T10", f"2026-11-{17 + k // 2:02d}T{10 + k % 2}".encode()))
        files["pq"[k % 2]].append(str(path))
        want.extend(ids)
    for name in files:
        assert run("producer", "events", name, "attach").returncode == 0

    def produce(name: str) -> list[int]:
        return [run("producer", "events", name, "insert", f).returncode for f in files[name]]

    def archive() -> list[int]:
        return [run("archive", "events", "--now", f"2026-11-{18 + i}T12:00:00Z").returncode for i in range(2)]

    with ThreadPoolExecutor(3) as pool:
        inserted = [pool.submit(produce, name) for name in files]
        archived = pool.submit(archive)
        assert [f.result() for f in inserted] == [[0] * 2, [0] * 2]
        assert archived.result() == [0, 0]
    for name in files:
        assert run("producer", "events", name, "detach").returncode == 0
    assert run("archive", "events", "--now", "2026-11-22T00:00:00Z").returncode == 0
    ids, rejects = _held(wh)
    assert sorted(ids) == sorted(want) and max(Counter(ids).values()) == 1
    assert len(rejects) == 4 and len(set(rejects)) == 4


def test_bad_object_store_settings_are_one_line_each_naming_the_setting(s3_server, repo_copy, monkeypatch, tmp_path):
    """No bucket, an endpoint that does not answer, no credentials: the first command says so in
    one line that names what to set (and never a credential)."""
    from click.testing import CliRunner

    from lakehouse.cli import cli

    def first_command(warehouse: str) -> tuple[int, str]:
        objectstore.use(None)
        r = CliRunner().invoke(cli, ["--project", str(repo_copy.root), "--warehouse", warehouse, "tables"])
        return r.exit_code, r.output.strip()

    code, out = first_command("s3://no-such-bucket-here/wh")
    assert code != 0 and out.count("\n") == 0, out
    assert "no bucket 'no-such-bucket-here'" in out and "AWS_ENDPOINT_URL" in out
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    code, out = first_command(s3_server.bucket() + "/wh")
    assert code != 0 and out.count("\n") == 0 and "cannot reach the object store at http://127.0.0.1:9" in out, out
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.setenv(name, s3_server.endpoint)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out = first_command(s3_server.bucket() + "/wh")
    assert code != 0 and out.count("\n") == 0 and "no AWS credentials found" in out and "AWS_ACCESS_KEY_ID" in out, out
    assert AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"] not in out
    objectstore.use(None)


def test_requests_are_told_apart_by_kind():
    """The request kinds the S3 bench counts, from what the server records."""
    from lakehouse.bench.requests import kind

    assert kind("GET", "http://h/b?list-type=2&prefix=wh%2F", {}) == "LIST"
    assert kind("GET", "http://h/b", {}) == "LIST"
    assert kind("GET", "http://h/b/wh/t/archive/part-0.parquet", {}) == "GET"
    assert kind("HEAD", "http://h/b/wh/x", {}) == "HEAD"
    assert kind("PUT", "http://h/b/wh/x", {"X-Amz-Copy-Source": "b/wh/y"}) == "COPY"
    assert kind("PUT", "http://h/b/wh/x?partNumber=1&uploadId=u", {}) == "PUT"
    assert kind("POST", "http://h/b?delete", {}) == "DELETE"
    assert kind("POST", "http://h/b/wh/x?uploads", {}) == "POST"
    assert kind("DELETE", "http://h/b/wh/x", {}) == "DELETE"


def test_a_store_that_does_not_count_requests_says_why_and_counts_nothing():
    from lakehouse.bench.requests import StoreRequests

    for endpoint, says in ((None, "AWS S3"), ("http://127.0.0.1:9", "records no requests")):
        store = StoreRequests(endpoint)
        assert store.why_not is not None and says in store.why_not
        with store.counting() as counts:
            pass
        assert counts == {}


@pytest.mark.slow
@pytest.mark.spark
def test_bench_archive_on_s3_reports_both_ratios_and_the_requests_per_archived_day(s3_server, s3_spark, project):
    """``bench archive --warehouse s3://...``: the same rows archived (with and without the books)
    and written plainly on the store and on the local disk, each side's runs as samples with their
    median, the ratios, the store's requests counted by the server per archived day, a plot; a
    vector file is one PUT (no copy, no folder marker), and the scratch prefix goes at the end."""
    bucket = s3_server.bucket()
    plot = project.root / "plots" / "archive.png"
    r = _on(s3_spark, project.root, f"{bucket}/wh", "bench", "archive", "--warehouse", f"{bucket}/bench",
            "--rows", "3000", "--days", "2", "--repeats", "1", "--no-warmup", "--plot", str(plot))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["days"], doc["repeats"], doc["warehouse"], doc["plot"]) == (2, 1, f"{bucket}/bench", str(plot))
    assert [(run["store"], run["rows"]) for run in doc["runs"]] == [("s3", 3000), ("local", 3000)]
    for run in doc["runs"]:
        sides = run["sides"]
        assert set(sides) == {"archive", "archive_without_books", "baseline_sorted_delta_write"}
        assert all(s["runs"] == 1 and s["median_s"] == s["samples_s"][0] > 0 for s in sides.values())
        ratio = run["ratio_archive_to_baseline"]
        assert ratio["low"] == ratio["median"] == ratio["high"]
        assert ratio["median"] == pytest.approx(sides["archive"]["median_s"]
                                                / sides["baseline_sorted_delta_write"]["median_s"], rel=0.01)
        assert {"write", "conservation", "commit", "purge"} <= set(run["archive_steps_seconds"])
        assert "conservation" not in run["archive_without_books_steps_seconds"]
    local, on_s3 = doc["runs"][1], doc["runs"][0]
    assert "requests" not in local
    requests = on_s3["requests"]
    assert requests["counted"] is True
    archive, baseline = requests["archive"], requests["baseline_sorted_delta_write"]
    for counts in (archive, baseline):
        kinds = {k: v for k, v in counts.items() if k not in ("total", "per_day")}
        assert set(kinds) == {"GET", "HEAD", "LIST", "PUT", "COPY", "DELETE", "POST"}
        assert sum(kinds.values()) == counts["total"] > 0
        assert counts["per_day"] == round(counts["total"] / 2, 1)
    # every column of the bench table is a vector: 8 files a day, each at least one PUT
    assert archive["PUT"] >= 8 * 2 and on_s3["vector_files"] == local["vector_files"] == 16
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert storage.list_files(f"{bucket}/bench") == []


def test_a_vector_file_on_the_store_is_one_put_and_an_aborted_one_is_no_request(s3_server, lake, monkeypatch):
    """A vector file shows whole or not at all: one PUT (no temporary object, copy or folder
    marker); an aborted one makes no request. One that outgrows memory goes to a temporary object
    of its own, copied to its name on commit, deleted on abort: never partial under its name."""
    import datetime as dt

    import boto3

    from lakehouse.archive.vectors import AtomicIpcWriter
    from lakehouse.bench.requests import StoreRequests

    counter = StoreRequests(s3_server.endpoint)
    assert counter.why_not is None

    def keys() -> list[str]:
        bucket, prefix = lake.removeprefix("s3://").split("/", 1)
        listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"].removeprefix(prefix) for o in listed.get("Contents", []))

    t = pa.table({"v": [1, 1, 2]})
    with counter.counting() as made:
        w = AtomicIpcWriter(storage.join(lake, "vectors"), "v", dt.date(2026, 11, 20), 1764000000, t.schema)
        w.write(t)
        assert keys() == []  # nothing shows before the file is whole
        assert w.commit() == storage.join(lake, "vectors", "v", "20261120-1764000000").removeprefix("s3://")
    assert made["PUT"] == made["total"] - made["LIST"] == 1  # (the LIST is the test's own look)
    assert keys() == ["/vectors/v/20261120-1764000000"]
    with counter.counting() as made:
        w = AtomicIpcWriter(storage.join(lake, "vectors"), "v", dt.date(2026, 11, 21), 1764000000, t.schema)
        w.write(t)
        w.abort()
    assert made["total"] == 0
    monkeypatch.setattr(storage.AtomicFile, "SPILL", 64)  # a file bigger than that streams to a temporary object
    big = pa.table({"v": list(range(1000))})
    for day, keep in ((22, False), (23, True)):
        w = AtomicIpcWriter(storage.join(lake, "vectors"), "v", dt.date(2026, 11, day), 1764000000, big.schema)
        w.write(big)
        assert w.temp.startswith(f"{lake}/vectors/v/.202611{day}-1764000000.tmp-")
        assert [k for k in keys() if f"202611{day}" in k] == []  # an upload shows once complete
        w.commit() if keep else w.abort()
    assert keys() == ["/vectors/v/20261120-1764000000", "/vectors/v/20261123-1764000000"]
    assert storage.read_bytes(storage.join(lake, "vectors", "v", "20261123-1764000000"))[:6] == b"ARROW1"
    storage.remove_tree(storage.join(lake, "vectors"))
    assert keys() == []


def test_a_read_the_store_fails_to_answer_is_tried_again_later_and_a_bad_file_is_failed_for_good(lake, monkeypatch):
    """An object store that does not answer (or answers 5xx after the client's retries) is a moment
    to wait out: the read raises TransientError (the command fails, the file is read again by the
    next run) where a missing, refused or bad file is an InputError (the file is failed, with why)."""
    import gzip

    from lakehouse.definitions import parse_definition
    from lakehouse.errors import TransientError
    from lakehouse.ingest.blocks import Block
    from lakehouse.ingest.parse import parse_block
    from lakehouse.inputs import read_records

    assert storage.transient("/data/x.csv", OSError("AWS Error NETWORK_CONNECTION")) is None  # a local file
    assert storage.transient("s3://b/x.csv", FileNotFoundError("s3://b/x.csv")) is None
    assert storage.transient("s3://b/x.csv", OSError("AWS Error ACCESS_DENIED during GetObject operation")) is None
    assert storage.transient("s3://b/x.csv", ValueError("bad bytes")) is None
    assert storage.transient("s3://b/x.gz", gzip.BadGzipFile("Not a gzipped file (b'id')")) is None
    assert storage.transient("s3://b/x.parquet", OSError("Unexpected end of stream")) is None  # a corrupt page
    assert storage.transient("s3://b/x.csv", OSError("AWS Error INVALID_REQUEST (HTTP status 400)")) is None
    assert isinstance(storage.transient("s3://b/x.csv", OSError("AWS Error SLOW_DOWN during GetObject")),
                      TransientError)
    good = storage.join(lake, "in", "x.csv")
    storage.write_bytes(good, b"id,amount,at\n1,2.5,2026-11-20T10:00:00Z\n")
    with pytest.raises(InputError, match="no such file"):
        list(read_records(storage.join(lake, "in", "missing.csv"), "csv", ["id", "amount", "at"]))
    definition = parse_definition(yaml.safe_load(EVENTS), "events.yaml")
    block = Block(0, good, "csv", 0, 0, -1, 1)
    assert sum(b.num_rows for b in parse_block(definition, block)) == 1
    objectstore.use(S3(endpoint="http://127.0.0.1:9", path_style=True))  # nothing listens there
    try:
        with pytest.raises(TransientError, match="tried again by the next run"):
            list(read_records(good, "csv", ["id", "amount", "at"]))
        with pytest.raises(TransientError):
            list(parse_block(definition, block))
    finally:
        objectstore.use(None)


@pytest.mark.spark
def test_an_ingest_whose_input_the_store_fails_to_serve_fails_whole_and_the_next_takes_it(lake, project,
                                                                                          monkeypatch):
    """The store stops answering while an ingest parses a file of its landing prefix, more times
    than a batch's staging attempts: each run fails with one line and leaves the file to the next
    run, never failed for good; the run once the store answers takes every row once."""
    from lakehouse.ingest import parse

    project.table(EVENTS)
    project.migration("0001_create_events.py", "def upgrade(ctx):\n    ctx.create_table('events')\n")
    assert cli_in_process(project, "migrate").returncode == 0
    body, ids = _events_file(7)
    landing = storage.join(lake, "landing")
    storage.write_bytes(storage.join(landing, "ev_1007.csv"), body)
    real = parse.block_records

    def store_gone(block, *args, **kwargs):
        raise OSError(f"When reading information for key '{block.path}': AWS Error NETWORK_CONNECTION during "
                      "GetObject operation: curlCode: 7, Couldn't connect to server")

    monkeypatch.setattr(parse, "fast_csv_block", lambda *a, **k: None)  # the row path, which reads records
    monkeypatch.setattr(parse, "block_records", store_gone)
    for _ in range(4):  # more than MAX_STAGE_ATTEMPTS
        r = cli_in_process(project, "ingest", "events", "--source", landing)
        assert r.returncode == 1 and "the object store failed to answer a read" in r.stderr, r.stderr
        assert r.stderr.strip().count("\n") == 0 and "failed 3 times" not in r.stderr, r.stderr
    monkeypatch.setattr(parse, "block_records", real)
    r = cli_in_process(project, "--format", "json", "ingest", "events", "--source", landing)
    assert r.returncode == 0, r.stderr
    got = cli_in_process(project, "--format", "json", "query", "SELECT id FROM events ORDER BY id")
    assert [row["id"] for row in json.loads(got.stdout)] == sorted(ids)
    rejects = json.loads(cli_in_process(project, "--format", "json", "rejects", "events").stdout)
    assert [x["line"] for x in rejects] == [6]


def test_a_document_replaced_while_it_is_read_reads_whole_old_or_new(lake):
    """A state document another process replaces (a bigger one, a smaller one) while this one reads
    it reads as one of them, never a mix: one GET of one version, not a size looked up first and
    ranges read after (which read the start of a new version to the old one's length)."""
    path = storage.join(lake, "_stream", "state.json")
    docs = [{"n": i, "pad": "x" * (40_000 if i % 2 else 3_000)} for i in range(2)]
    storage.write_json(path, docs[0])
    stop = threading.Event()

    def replace() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            storage.write_json(path, docs[i % 2])

    writer = threading.Thread(target=replace)
    writer.start()
    try:
        seen = [storage.read_json(path)["n"] for _ in range(150)]
    finally:
        stop.set()
        writer.join()
    assert set(seen) <= {0, 1}


SUBMITTED_JOB = '''
import json, sys
import lakehouse
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.appName("hourly-report").getOrCreate()   # spark-submit's session
lh = lakehouse.open(sys.argv[1], spark=spark)
report = (lh.frame("trips").where(F.col("event_date") >= "2026-11-19")
            .groupBy("event_date", "city_id").agg(F.sum("fare_total").alias("fares")))
report.write.mode("overwrite").parquet(sys.argv[2])
done = lh.archive("trips")
print(json.dumps({"archived": done.rows_archived, "master": spark.conf.get("spark.master"),
                  "same": lh.spark() is spark}))
'''


@pytest.mark.slow
def test_a_spark_submit_job_runs_lakehouse_on_the_standalone_cluster(spark_cluster, repo_copy, spark, tmp_path):
    """README's `spark-submit` job: its session (Delta's settings on the command line) is the one
    every lakehouse command of the job runs on, on the cluster's executors (the package shipped to
    them by `open`); its report is the split view's answer, its archiving run moves the rows."""
    import datetime as dt

    import pyarrow.parquet as pq

    from lakehouse.demo import generate
    from lakehouse.spark.session import DELTA_CATALOG, DELTA_EXTENSION, delta_jars

    p = repo_copy
    p.lh.migrate()
    generate(p.root / "in", rows=600, days=3, end=dt.date(2026, 11, 20))
    p.lh.ingest("trips", str(p.root / "in"), drain=True)
    want = p.lh.query("SELECT event_date, city_id, sum(fare_total) AS fares FROM trips "
                      "WHERE event_date >= DATE '2026-11-19' GROUP BY 1, 2 ORDER BY 1, 2", "duckdb")
    job, out = tmp_path / "hourly_report.py", tmp_path / "report"
    job.write_text(SUBMITTED_JOB)
    submit = os.path.join(os.path.dirname(__import__("pyspark").__file__), "bin", "spark-submit")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=str(REPO),
               SPARK_SUBMIT_OPTS=FAST_JVM)
    confs = [f"spark.sql.extensions={DELTA_EXTENSION}", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
             "spark.sql.session.timeZone=UTC", "spark.executor.memory=1g", "spark.cores.max=2",
             *SMALL_JOBS.split(), *SMALL_CLUSTER.split()]
    cmd = [submit, "--master", spark_cluster, "--jars", ",".join(delta_jars())]
    for c in confs:
        cmd += ["--conf", c]
    r = subprocess.run([*cmd, str(job), str(p.root), str(out)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["master"] == spark_cluster and doc["same"] and doc["archived"] > 0
    got = pq.read_table(str(out)).sort_by([("event_date", "ascending"), ("city_id", "ascending")])
    assert got.column("city_id").to_pylist() == want.column("city_id").to_pylist()
    assert [round(x, 6) for x in got.column("fares").to_pylist()] == \
        [round(x, 6) for x in want.column("fares").to_pylist()]
