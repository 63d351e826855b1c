"""A streaming query into a table, killed with SIGKILL and restarted from its checkpoint.

A worker process (tests/sink_worker.py: a Spark of its own) runs ``write_stream`` from a landing
folder of JSON files (a watermark of 2 minutes) into ``clicks`` (allowed lateness 1 minute) while
this test drops files into the folder: rows in event-time order with jitter, some far behind
(late for the table) and some without their url (bad). The worker is killed, process group and
JVM, at a named point of a micro-batch (before the insert, after the batch was taken, staged,
registered, in a release, after Spark's batch was inserted but before Spark recorded it) or at a
random instant; after each kill this process runs another operation on the table (an archiving
run, or the stream's recovery through ``tables``) and a new worker restarts from the checkpoint.
At the end the last worker takes every file and stops (its producer detaches, everything staged
is released) and a last archiving run moves the late path's rows.

Checked: every row dropped is exactly once in the split view or in rejects (bad rows with their
reason, late rows as ``late_row``); nothing stays staged; the table's watermark, sampled all along
(also while a worker was being killed), never moved back. Seeds: ``LAKEHOUSE_SINK_SEEDS=5,6``
(each failure prints its seed); ``LAKEHOUSE_SINK_KILLS`` kills per seed (default 3).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.stream.status import describe, wall_clock
from lakehouse.stream.store import StreamStore
from tests.conftest import CLICKS, Project
from tests.worker_process import Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]
UTC = dt.timezone.utc
SEEDS = [int(s) for s in os.environ.get("LAKEHOUSE_SINK_SEEDS", "41").split(",") if s.strip()]
KILLS = int(os.environ.get("LAKEHOUSE_SINK_KILLS", "3"))
POINTS = ("-", "sink_before_insert", "ingest_after_take", "ingest_after_staging", "stream_after_insert",
          "stream_after_plan", "stream_after_live", "stream_after_state", "stream_before_rejects",
          "ingest_after_state", "sink_after_insert")
BASE = dt.datetime(2026, 11, 20, 10, tzinfo=UTC)


class Feed:
    """Drops JSON files into the landing folder from a thread: rows in event-time order with up to
    a minute of jitter, a few far behind (late), a few without url (bad); it also samples the
    table's watermark after every file."""

    def __init__(self, rng: random.Random, landing: Path, project: Project) -> None:
        self.rng, self.landing, self.project = rng, landing, project
        self.next_id, self.minute, self.files = 1, 0.0, 0
        self.ids: list[int] = []
        self.bad: set[int] = set()
        self.watermarks: list[Any] = []
        self.running = threading.Event()
        self.thread: threading.Thread | None = None

    def drop(self) -> None:
        rows = []
        for _ in range(self.rng.randint(1, 12)):
            self.minute += self.rng.random() * 0.5
            m = self.minute - (30 if self.rng.random() < 0.05 else self.rng.random())
            row: dict[str, Any] = {"user_id": self.next_id, "at": (BASE + dt.timedelta(minutes=m)).isoformat()}
            if self.rng.random() < 0.05:
                self.bad.add(self.next_id)  # no url: the table's url is not nullable
            else:
                row["url"] = f"/u{self.next_id}"
            rows.append(row)
            self.ids.append(self.next_id)
            self.next_id += 1
        tmp = self.landing.parent / f".{self.files}.json"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.rename(self.landing / f"{self.files:05d}.json")
        self.files += 1

    def sample(self) -> None:
        p = self.project.lh.paths("clicks")
        d = self.project.lh.definition("clicks")
        self.watermarks.append(describe(StreamStore(p), d, p, wall_clock())["watermark"])

    def _run(self) -> None:
        while self.running.is_set():
            self.drop()
            self.sample()
            time.sleep(self.rng.uniform(0.05, 0.4))

    def start(self) -> None:
        self.running.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.running.clear()
        if self.thread is not None:
            self.thread.join(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_streaming_query_killed_and_restarted_takes_every_row_once(spark: Any, project: Project, tmp_path: Path,
                                                                      seed: int) -> None:
    rng = random.Random(seed)
    project.table(CLICKS + "stream: {allowed_lateness: 1m}\n")
    project.create("clicks")
    landing, ck = tmp_path / "landing", tmp_path / "ck"
    landing.mkdir()
    feed = Feed(rng, landing, project)
    for _ in range(3):
        feed.drop()
    plan = [(rng.choice(POINTS), rng.uniform(1.0, 4.0)) for _ in range(KILLS)] + [("end", 0.0)]
    logs = tmp_path / "logs"
    logs.mkdir()
    def start(point: str, seconds: float, n: int) -> Worker:
        return Worker("tests.sink_worker", [str(project.root), str(landing), str(ck), point, f"{seconds:.3f}"],
                      logs / f"worker-{n}.log")

    worker = start(*plan[0], 0)
    done: list[str] = []
    try:
        for n, (point, seconds) in enumerate(plan):
            assert worker.wait_for("ready", 180), f"seed {seed}: worker {n} did not start ({logs})"
            nxt = start(*plan[n + 1], n + 1) if n + 1 < len(plan) else None
            worker.send("go")
            assert worker.wait_for("started", 120), f"seed {seed}: worker {n} did not start its query ({logs})"
            feed.start()
            if point == "end":
                time.sleep(2.0)
                feed.stop()
                worker.send("stop")
                assert worker.wait_for("stopped", 300), f"seed {seed}: the last worker did not stop ({logs})"
                worker.kill()
                break
            # a named point a batch may never pass: killed at a random instant then
            worker.wait_for("__exit__", seconds if point == "-" else 12.0)  # (until it dies, or then)
            killed = worker.proc.poll() is not None
            worker.kill()
            feed.stop()
            batches = sum(line == "point sink_before_insert" for line in worker.lines)
            done.append(f"{point} in batch {batches}" if killed else f"{point} not reached: at {seconds:.1f}s")
            feed.sample()
            if rng.random() < 0.5:  # another operation next: it finishes what the kill left
                project.lh.archive("clicks")
            else:
                project.lh.tables()
            feed.sample()
            assert nxt is not None
            worker = nxt
    finally:
        feed.stop()
        worker.kill()
    print(f"seed {seed}: kills at {done}; {len(feed.ids)} rows in {feed.files} files")
    state = project.lh.table("clicks").stream()
    assert state["staged"] == 0 and not next(p for p in state["producers"] if p["name"] == "pipe")["attached"]
    project.lh.archive("clicks")  # rows the late path left in live below the cutoff
    seen = [r["user_id"] for r in project.lh.query("SELECT user_id FROM clicks", "duckdb").to_pylist()]
    rejects = project.lh.rejects("clicks")
    reasons = {}
    for r in rejects:
        uid = json.loads(r["record"])["user_id"]
        seen.append(uid)
        reasons[uid] = r["reason"]
    assert sorted(seen) == sorted(feed.ids), f"seed {seed}: rows lost or doubled (kills at {done})"
    assert {u for u, why in reasons.items() if why != "late_row"} == feed.bad, f"seed {seed}"
    marks = [w for w in feed.watermarks if w is not None]
    assert marks == sorted(marks), f"seed {seed}: the watermark moved back: {marks}"
