"""The soak (``make soak``, not in ``make test``): lakehouse on an S3 API server and a Spark
standalone cluster, on loopback, for ``--minutes`` (30 by default), everything at once:

- two producers, each a process of its own (the Python API, as an application runs it), inserting
  rows every few seconds, some of them late on purpose (they go to rejects as ``late_row``);
- a landing prefix that keeps receiving CSV files (a bad row in each, for rejects), ingested every
  few seconds by ``lakehouse ingest --source s3://...``;
- ``lakehouse jobs run`` every minute (archive every minute on the watermark's clock, compaction
  of live and archive, vacuum with a short retention);
- queries on both engines every few seconds, each checking that no row shows twice.

Every command reaches Spark through the project's Spark Connect server (``lakehouse server
start``) whose master is the cluster. At the end: the producers detach, the landing prefix is
drained, the jobs run once more, ``verify`` must pass, and every row sent must be exactly once in
live, the archive or rejects (a row of an insert that failed may be nowhere, never twice). Prints
a JSON report (counts, conflicts retried, failures) and exits 1 when an invariant broke.

``python -m tests.soak [--minutes 30] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

UTC = dt.timezone.utc
REPO = Path(__file__).resolve().parent.parent
BUCKET = "soak"
TABLE = r"""
name: events
columns:
  - {name: id,     type: long, nullable: false}
  - {name: src,    type: string}
  - {name: amount, type: double}
  - {name: at,     type: timestamp, nullable: false}
event_time: at
archive: {delay: 2m, interval: 1m, sort_columns: [src], clock: bound}
stream:
  allowed_lateness: 1m
  lease: 3m
ingest:
  format: csv
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'ev_(\d{8}T\d{6})', format: '%Y%m%dT%H%M%S'}
  ingress_delay_interval: 0
  ingress_file_scan_wait: 0s
jobs: {compact_live: 3m, compact_archive: 5m, vacuum: 5m, retention: 5m, compact_min_files: 4}
"""
QUERY = "SELECT count(*) AS n, count(DISTINCT id) AS d FROM events"
CONFLICT = "conflict with a concurrent commit"
"""What lakehouse logs when a Delta commit met a concurrent one and is tried again."""


# -- a producer: a process of its own ------------------------------------------------------------

def producer(name: str, first_id: int, project: Path, stop: Path, log: Path) -> None:
    """Insert 100-300 rows every few seconds until ``stop`` exists, then detach; one JSON line per
    insert in ``log`` (its ids, the ids sent late on purpose, whether it returned)."""
    import lakehouse

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    table = lakehouse.open(project).table("events")
    next_id = first_id
    with table.producer(name) as p, open(log, "a") as out:
        for number in itertools.count():
            if stop.exists():
                break
            now = dt.datetime.now(UTC)
            n = random.randint(100, 300)
            ids = list(range(next_id, next_id + n))
            next_id += n
            # rows 10 minutes old, once the producer's own bound (its first insert's rows) makes them late
            late = set(random.sample(ids, 2)) if number and random.random() < 0.3 else set()
            rows = [{"id": i, "src": name, "amount": round(random.random() * 100, 2),
                     "at": now - (dt.timedelta(minutes=10) if i in late else dt.timedelta(seconds=random.random() * 20))}
                    for i in ids]
            entry: dict[str, Any] = {"ids": [ids[0], ids[-1]], "late": sorted(late)}
            try:
                r = p.insert(rows)
                entry.update(ok=True, rows_rejected=r.rows_rejected)
            except Exception as e:  # noqa: BLE001 - recorded: its rows may be nowhere, never twice
                entry.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
            out.write(json.dumps(entry) + "\n")
            out.flush()
            time.sleep(random.uniform(1, 4))


# -- the soak ------------------------------------------------------------------------------------

class Soak:
    """The servers, the project and the loops of one soak, and what they saw."""

    def __init__(self, folder: Path, minutes: float) -> None:
        self.folder = folder
        self.minutes = minutes
        self.project = folder / "project"
        self.logs = folder / "logs"
        self.stop = threading.Event()
        self.counts: Counter[str] = Counter()
        self.failures: list[str] = []
        self.twice: list[str] = []
        self.sent_files: dict[str, tuple[list[int], int]] = {}
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen[str]] = []

    # -- set-up

    def _start(self, args: list[str], prefix: str) -> str:
        """Start a helper that prints its address on its first line (it stops when we are gone)."""
        proc = subprocess.Popen([sys.executable, "-m", *args, "--owner", str(os.getpid())], cwd=REPO,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith(prefix):
            raise SystemExit(f"soak: {args[0]} did not start: {line!r}")
        self.procs.append(proc)
        return line

    def set_up(self) -> None:
        import boto3

        self.logs.mkdir(parents=True)
        endpoint = self._start(["tests.s3_server"], "http://")
        os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="soak",
                          AWS_SECRET_ACCESS_KEY="soak-secret")
        for k in [k for k in os.environ if k.startswith("LAKEHOUSE_")]:
            del os.environ[k]
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        master = self._start(["tests.spark_cluster", "--folder", str(self.folder / "cluster")], "spark://")
        (self.project / "tables").mkdir(parents=True)
        (self.project / "migrations").mkdir()
        (self.project / "tables" / "events.yaml").write_text(TABLE)
        (self.project / "migrations" / "0001_events.py").write_text(
            "def upgrade(ctx):\n    ctx.create_table('events')\n")
        (self.project / "pyproject.toml").write_text(
            f'[tool.lakehouse]\nwarehouse = "s3://{BUCKET}/wh"\nmaster = "{master}"\n'
            '[tool.lakehouse.spark]\n"spark.cores.max" = "2"\n"spark.executor.memory" = "1g"\n')
        os.environ["LAKEHOUSE_SERVER_OWNER"] = str(os.getpid())
        self.cli("server", "start", check=True)
        self.cli("migrate", check=True)
        print(f"soak: S3 {endpoint}, cluster {master}, project {self.project}", file=sys.stderr, flush=True)

    def cli(self, *args: str, check: bool = False, log: str = "commands") -> subprocess.CompletedProcess[str]:
        """``lakehouse --format json ARGS`` in the project (on its Spark Connect server)."""
        r = subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(self.project), "--format", "json",
                            *args], cwd=self.project, capture_output=True, text=True, timeout=1800)
        with self.lock, open(self.logs / f"{log}.log", "a") as out:
            out.write(f"$ lakehouse {' '.join(args)}  (exit {r.returncode})\n{r.stderr}")
        if check and r.returncode != 0:
            raise SystemExit(f"soak: lakehouse {' '.join(args)} failed: {r.stderr.strip()[-2000:]}")
        return r

    # -- the loops

    def every(self, seconds: float, what: str, fn: Any) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - a loop that died is a failure, reported
                with self.lock:
                    self.failures.append(f"{what}: {type(e).__name__}: {e}")
            self.stop.wait(max(0.0, seconds - (time.monotonic() - t0)))

    def land(self) -> None:
        """A new CSV file in the landing prefix: 50 good rows and a bad one (its 7th line)."""
        import boto3

        now = dt.datetime.now(UTC)
        with self.lock:
            n = self.counts["files_landed"]
            self.counts["files_landed"] += 1
        ids = [3_000_000_000 + n * 100 + i for i in range(50)]
        lines = ["id,src,amount,at"] + [f"{i},landing,{i % 97}.5,{(now - dt.timedelta(seconds=random.random() * 3)):%Y-%m-%dT%H:%M:%S.%fZ}"
                                        for i in ids]
        lines.insert(6, f"{n}x,landing,oops,{now:%Y-%m-%dT%H:%M:%SZ}")
        name = f"ev_{now:%Y%m%dT%H%M%S}_{n}.csv"
        boto3.client("s3").put_object(Bucket=BUCKET, Key=f"landing/{name}", Body=("\n".join(lines) + "\n").encode())
        self.sent_files[name] = (ids, 7)

    def ingest(self, *extra: str) -> None:
        r = self.cli("ingest", "events", "--source", f"s3://{BUCKET}/landing", "--producer", "landing", *extra,
                     log="ingest")
        with self.lock:
            self.counts["ingest_runs"] += 1
            if r.returncode != 0:
                self.failures.append(f"ingest exit {r.returncode}: {r.stderr.strip()[-300:]}")

    def jobs(self) -> None:
        r = self.cli("jobs", "run", log="jobs")
        with self.lock:
            self.counts["jobs_runs"] += 1
            try:
                outcomes = json.loads(r.stdout)
            except ValueError:
                outcomes = []
            if r.returncode != 0 and not any(o["ran"] and o["outcome"] != "succeeded" for o in outcomes):
                self.failures.append(f"jobs run exit {r.returncode}: {r.stderr.strip()[-300:]}")
            for o in outcomes:
                if o["ran"]:
                    self.counts[f"job_{o['job']}_{o['outcome']}"] += 1
                    if o["outcome"] != "succeeded":
                        self.failures.append(f"jobs run: {o['job']} {o['outcome']}: {o.get('error')}")

    def query(self) -> None:
        engine = "duckdb" if self.counts["queries"] % 2 else "spark"
        r = self.cli("query", QUERY, "--engine", engine, log="queries")
        with self.lock:
            self.counts["queries"] += 1
            if r.returncode != 0:
                self.failures.append(f"query on {engine} exit {r.returncode}: {r.stderr.strip()[-300:]}")
                return
            row = json.loads(r.stdout)[0]
            self.counts[f"queries_{engine}"] += 1
            if row.get("n") != row.get("d"):
                self.twice.append(f"{engine}: {row}")

    # -- the run

    def run(self) -> dict[str, Any]:
        stop_file = self.folder / "stop-producers"
        producers = []
        for k, name in enumerate(("app-a", "app-b")):
            log = self.logs / f"producer-{name}.jsonl"
            err = open(self.logs / f"producer-{name}.log", "w")  # noqa: SIM115 - closed with the process
            producers.append((log, err, subprocess.Popen(
                [sys.executable, "-m", "tests.soak", "--producer", name, "--first-id", str((k + 1) * 1_000_000_000),
                 "--project", str(self.project), "--stop", str(stop_file), "--log", str(log)],
                cwd=REPO, stdout=err, stderr=err, text=True)))
        loops = [threading.Thread(target=self.every, args=a, daemon=True) for a in (
            (5, "land", self.land), (8, "ingest", self.ingest), (60, "jobs", self.jobs), (4, "query", self.query))]
        started = time.monotonic()
        for t in loops:
            t.start()
        deadline = started + self.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(10)
            for _, _, p in producers:
                if p.poll() is not None:
                    self.failures.append(f"a producer exited early (exit {p.returncode})")
                    deadline = 0
            with self.lock:
                print(f"soak: {(time.monotonic() - started) / 60:.1f} min {dict(self.counts)} "
                      f"failures {len(self.failures)}", file=sys.stderr, flush=True)
        self.stop.set()
        stop_file.touch()
        for t in loops:
            t.join()
        for _, err, p in producers:
            if p.wait(600) != 0:
                self.failures.append(f"a producer ended with exit {p.returncode}")
            err.close()
        soaked = time.monotonic() - started
        self.ingest("--drain")
        self.jobs()
        verify = self.cli("verify", "events", log="verify")
        if verify.returncode != 0:
            self.failures.append(f"verify exit {verify.returncode}: {verify.stdout[-1000:]} {verify.stderr[-500:]}")
        return {"minutes": round(soaked / 60, 1), **self.account([log for log, _, _ in producers]),
                "counts": dict(self.counts), "queries_showing_a_row_twice": self.twice,
                "conflicts_retried": self.conflicts(), "failures": self.failures}

    def account(self, producer_logs: list[Path]) -> dict[str, Any]:
        """Every row sent, exactly once in live, the archive or rejects."""
        from lakehouse import delta_log, objectstore
        from lakehouse.objectstore import S3
        from lakehouse.warehouse import TablePaths

        objectstore.use(S3.resolve({}, dict(os.environ)))
        paths = TablePaths(f"s3://{BUCKET}/wh", "events")
        held = Counter(r["id"] for part in (paths.live, paths.archive)
                       for r in delta_log.scan(part, "SELECT id FROM t").to_pylist())
        rejects = delta_log.scan(paths.rejects, "SELECT source, line, record, reason FROM t").to_pylist()
        rejected: Counter[int] = Counter()
        bad_rows: Counter[tuple[str, int]] = Counter()
        for r in rejects:
            if r["reason"].startswith("late_row"):
                record = r["record"] or ""
                rid = json.loads(record)["id"] if record.startswith("{") else int(record.split(",", 1)[0])
                rejected[int(rid)] += 1
            else:
                bad_rows[(os.path.basename(r["source"] or ""), r["line"])] += 1
        problems: list[str] = []
        sent = {"producers": 0, "landing": 0}
        late_sent = failed_inserts = 0
        accounted: set[int] = set()
        for log in producer_logs:
            for line in (log.read_text() if log.exists() else "").splitlines():
                e = json.loads(line)
                ids = range(e["ids"][0], e["ids"][1] + 1)
                accounted.update(ids)
                found = [held[i] + rejected[i] for i in ids]
                if not e["ok"]:  # an insert that raised happened whole or not at all
                    failed_inserts += 1
                    self.failures.append(f"an insert of rows {e['ids']} failed: {e.get('error')}")
                    if set(found) not in ({0}, {1}):
                        problems.append(f"failed insert {e['ids']}: partly in the table ({sorted(set(found))})")
                for i, n in zip(ids, found):
                    if n > 1 or (e["ok"] and n != 1):
                        problems.append(f"producer row {i}: {held[i]} in the table, {rejected[i]} in rejects")
                    if e["ok"] and i in e["late"] and rejected[i] != 1:
                        problems.append(f"producer row {i} sent late: not in rejects")
                sent["producers"] += len(ids)
                late_sent += len(e["late"])
        for name, (landed, bad_line) in self.sent_files.items():
            accounted.update(landed)
            for i in landed:
                if held[i] + rejected[i] != 1:
                    problems.append(f"{name} row {i}: {held[i]} in the table, {rejected[i]} in rejects")
            if bad_rows[(name, bad_line)] != 1:
                problems.append(f"{name} line {bad_line}: {bad_rows[(name, bad_line)]} times in rejects")
            sent["landing"] += len(landed) + 1
        strangers = sorted((set(held) | set(rejected)) - accounted)
        if strangers:
            problems.append(f"{len(strangers)} row(s) no one sent, e.g. ids {strangers[:5]}")
        unexpected = sum(bad_rows.values()) - len(self.sent_files)
        if unexpected:
            problems.append(f"{unexpected} more reject(s) than the bad rows sent: {sorted(bad_rows)[:5]}")
        return {"rows_sent": sent, "failed_inserts": failed_inserts, "rows_sent_late_on_purpose": late_sent, "rows_in_live_and_archive": sum(held.values()),
                "late_rows_rejected": sum(rejected.values()), "bad_rows_rejected": sum(bad_rows.values()),
                "exactly_once_problems": problems[:50], "exactly_once_problem_count": len(problems)}

    def conflicts(self) -> int:
        """Delta commits lakehouse tried again after a concurrent one took their version."""
        texts = [p.read_text(errors="replace") for p in self.logs.glob("*.log")]
        texts += [p.read_text(errors="replace") for p in (self.project / ".lakehouse").rglob("*.log")]
        return sum(t.count(CONFLICT) for t in texts)

    def tear_down(self) -> None:
        self.cli("server", "stop")
        for p in self.procs:
            p.terminate()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--keep", help="a folder to keep the project, logs and cluster files in")
    parser.add_argument("--producer")
    parser.add_argument("--first-id", type=int)
    parser.add_argument("--project")
    parser.add_argument("--stop")
    parser.add_argument("--log")
    args = parser.parse_args()
    if args.producer:
        producer(args.producer, args.first_id, Path(args.project), Path(args.stop), Path(args.log))
        return
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lakehouse-soak-"))
    soak = Soak(folder, args.minutes)
    try:
        soak.set_up()
        report = soak.run()
    finally:
        soak.tear_down()
    print(json.dumps(report, indent=2))
    ok = not (report["failures"] or report["exactly_once_problem_count"] or report["queries_showing_a_row_twice"])
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
