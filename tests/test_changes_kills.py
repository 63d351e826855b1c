"""A downstream streaming query over a table's change feed, killed and restarted, while the table
changes: a worker process (tests/feed_worker.py, a Spark of its own) keeps the latest version of
each key of ``orders`` in a Delta table of its own, from ``read_stream()``; it is killed with
SIGKILL (process group and JVM) at random instants and restarted from its checkpoint, while this
process inserts new keys and new versions of keys (two producers), loads files, runs archiving
(its moves into the archive and purges of live) and compaction. At the end the last worker takes
every release and stops: its hourly counts, and the rows themselves, equal a batch query over the
split view. Seeds: ``LAKEHOUSE_FEED_SEEDS`` (each failure prints its seed)."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.worker_process import Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]
UTC = dt.timezone.utc
SEEDS = [int(s) for s in os.environ.get("LAKEHOUSE_FEED_SEEDS", "7").split(",") if s.strip()]
KILLS = int(os.environ.get("LAKEHOUSE_FEED_KILLS", "2"))
ORDERS = """
name: orders
columns:
  - {name: id, type: string, nullable: false}
  - {name: amount, type: long}
  - {name: at, type: timestamp, nullable: false}
primary_key: [id]
event_time: at
archive: {delay: 1d}
"""
BASE = dt.datetime(2026, 11, 15, tzinfo=UTC)


def naive(t: dt.datetime) -> dt.datetime:
    """A UTC time without its zone (Spark's rows hold the session's, UTC, local time)."""
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


@pytest.mark.parametrize("seed", SEEDS)
def test_a_downstream_query_killed_and_restarted_ends_equal_to_the_split_view(
        spark: Any, project: Project, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    project.table(ORDERS)
    project.create("orders")
    lh = project.lh
    t = lh.table("orders")
    ck, downstream, logs = tmp_path / "ck", tmp_path / "downstream", tmp_path / "logs"
    logs.mkdir()
    keys: dict[str, str] = {}
    """Key -> its event time (immutable by contract: a key's new version keeps it)."""
    day = [0]  # days of event time written so far (archiving follows a day behind)
    done: list[str] = []

    def start(n: int) -> Worker:
        return Worker("tests.feed_worker", [str(project.root), str(ck), str(downstream)], logs / f"worker-{n}.log")

    def rows(n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            if keys and rng.random() < 0.3:
                k = rng.choice(sorted(keys))  # a new version of a key (archived maybe: the late path)
            else:
                k = f"k{len(keys)}"
                keys[k] = (BASE + dt.timedelta(days=day[0], minutes=rng.randrange(0, 24 * 60))).isoformat()
            out.append({"id": k, "amount": rng.randrange(1000), "at": keys[k]})
        return out

    def operate(step: int) -> str:
        kind = rng.choice(("insert", "insert", "load", "archive", "optimize", "next day"))
        if kind == "insert":
            with t.producer(rng.choice(("a", "b"))) as p:
                p.insert(rows(rng.randint(1, 30)))
        elif kind == "load":
            lines = rows(rng.randint(1, 20))
            lh.load("orders", [project.csv(f"load-{step}.csv", ["id", "amount", "at"],
                                           [[r["id"], r["amount"], r["at"]] for r in lines])])
        elif kind == "archive" and day[0] > 1:
            lh.archive("orders", now=BASE + dt.timedelta(days=day[0], hours=1))
        elif kind == "optimize":
            lh.optimize("orders")
        elif kind == "next day" and day[0] < 5:
            day[0] += 1
        return kind

    plan = [rng.uniform(2.0, 5.0) for _ in range(KILLS)] + [None]
    worker = start(0)
    step = 0
    try:
        for n, seconds in enumerate(plan):
            assert worker.wait_for("ready", 180), f"seed {seed}: worker {n} did not start ({logs})"
            nxt = start(n + 1) if seconds is not None else None
            worker.send("go")
            assert worker.wait_for("started", 120), f"seed {seed}: worker {n} did not start its query ({logs})"
            until = time.monotonic() + (seconds if seconds is not None else 3.0)
            while time.monotonic() < until:
                step += 1
                done.append(operate(step))
            if seconds is None:
                worker.send("stop")
                assert worker.wait_for("stopped", 300), f"seed {seed}: the last worker did not stop ({logs})"
                worker.kill()
                break
            worker.kill()
            done.append("KILL")
            assert nxt is not None
            worker = nxt
    finally:
        worker.kill()
    print(f"seed {seed}: {done}")
    lh.archive("orders", now=BASE + dt.timedelta(days=day[0] + 2))  # the late path's rows into the view
    hourly = ("SELECT date_trunc('hour', at) AS h, count(*) AS n, sum(amount) AS s FROM {} GROUP BY 1 ORDER BY 1")
    want = lh.query(hourly.format("orders"), "spark").to_pylist()
    got = [r.asDict() for r in spark.sql(hourly.format(f"delta.`{downstream}`")).collect()]
    assert [(naive(r["h"]), r["n"], r["s"]) for r in got] == [(naive(r["h"]), r["n"], r["s"]) for r in want], \
        f"seed {seed}: {done}"
    view = sorted((r["id"], r["amount"]) for r in lh.query("SELECT id, amount FROM orders", "duckdb").to_pylist())
    mine = sorted((r["id"], r["amount"]) for r in spark.read.format("delta").load(str(downstream)).collect())
    assert mine == view, f"seed {seed}"
