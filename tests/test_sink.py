"""Structured Streaming into a table (``lakehouse.ingest.sink``) and idempotent inserts, on real
Spark and Delta: an insert's idempotency key taken once; a streaming query from a file source
(files added while it runs) whose watermark is its producer's bound; a batch Spark runs again is
not inserted again; two queries as two producers; the producer detached when the query stops.
The kills (SIGKILL at random instants, restarts from the checkpoint) are in test_sink_kills.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse.ingest.producer import to_micros
from lakehouse.ingest.sink import batch_watermark, query_id
from lakehouse.stream.model import StreamError
from tests.conftest import CLICKS, Project

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
SCHEMA = "user_id long, url string, at timestamp"


def clicks(project: Project, stream: str = "") -> Project:
    project.table(CLICKS + (f"stream: {stream}\n" if stream else ""))
    project.create("clicks")
    return project


def at(minute: int) -> str:
    return (dt.datetime(2026, 11, 20, 10, tzinfo=UTC) + dt.timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")


def drop(folder: Path, name: str, rows: list[tuple[int, int]]) -> None:
    """A JSON Lines file of (user_id, minute) rows, written whole then renamed into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{name}"
    tmp.write_text("".join(json.dumps({"user_id": u, "url": f"/u{u}", "at": at(m)}) + "\n" for u, m in rows))
    tmp.rename(folder / name)


def one(stream: dict[str, Any], producer: str) -> dict[str, Any]:
    """A producer's entry in ``table(...).stream()``."""
    return next(p for p in stream["producers"] if p["name"] == producer)


def everywhere(project: Project) -> list[int]:
    """user_id of every row the table holds: live and the split view's archive, staged, rejects."""
    live = [r["user_id"] for r in project.lh.query("SELECT user_id FROM clicks", "duckdb").to_pylist()]
    staged = project.lh.table("clicks").stream()["staged"]
    rejected = [json.loads(r["record"])["user_id"] for r in project.lh.rejects("clicks") if r.get("record")]
    assert not staged, staged
    return sorted(live + rejected)


def test_an_idempotency_key_is_taken_once(spark: Any, project: Project) -> None:
    clicks(project)
    with project.lh.table("clicks").producer("app") as p:
        first = p.insert([{"user_id": 1, "url": "/a", "at": at(0)}], idempotency_key=("job", 3))
        assert not first.duplicate and first.rows_loaded == 1
        for key in (("job", 3), ("job", 2), ("job", 0)):  # the same version, or an older one
            again = p.insert([{"user_id": 9, "url": "/z", "at": at(1)}], idempotency_key=key)
            assert again.duplicate and again.rows_loaded == 0
        assert p.inserted(("job", 3)) and not p.inserted(("job", 4))
        p.insert([{"user_id": 2, "url": "/b", "at": at(1)}], idempotency_key=("job", 4))
        p.insert([{"user_id": 3, "url": "/c", "at": at(2)}], idempotency_key=("other", 0))
        with pytest.raises(StreamError, match="bad idempotency key"):
            p.insert([{"user_id": 4, "url": "/d", "at": at(2)}], idempotency_key=("job", -1))
    assert sorted(r["user_id"] for r in project.live("clicks")) == [1, 2, 3]
    # another producer of the same table sees the key too (Delta's txnAppId is the table's)
    with project.lh.table("clicks").producer("other") as q:
        assert q.insert([{"user_id": 5, "url": "/e", "at": at(3)}], idempotency_key=("job", 4)).duplicate


def test_a_key_seen_only_under_the_streams_lease_takes_nothing(spark: Any, project: Project,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two producers racing with one key: b passes the early check, then a's insert with the key
    is registered before b's; the stream's check under its lease refuses b's (no row, no reject,
    its files recorded discarded)."""
    from lakehouse.ingest.load import Load

    clicks(project)
    t = project.lh.table("clicks")
    with t.producer("a") as a, t.producer("b") as b:
        take = Load._take

        def racing(self: Load, *args: Any, **kwargs: Any) -> Any:
            taken = take(self, *args, **kwargs)
            if self.producer == "b":
                a.insert([{"user_id": 1, "url": "/a", "at": at(0)}], idempotency_key=("q", 1))
            return taken

        monkeypatch.setattr(Load, "_take", racing)
        bad = project.text("b.csv", "user_id,url,at\n2,/b,2026-11-20T10:01:00Z\nx,/bad,2026-11-20T10:01:00Z\n")
        r = b.insert_files([bad], idempotency_key=("q", 1))
        assert r.duplicate and r.rows_loaded == 0 and r.rows_rejected == 0
        monkeypatch.setattr(Load, "_take", take)
        assert b.insert_files([bad], idempotency_key=("q", 2)).rows_loaded == 1  # the same file, a new key
    assert sorted(r["user_id"] for r in project.live("clicks")) == [1, 2]
    assert len(project.lh.rejects("clicks")) == 1  # the bad row of the second insert only


def test_a_streaming_query_writes_each_batch_once_and_its_watermark_is_the_bound(
        spark: Any, project: Project, tmp_path: Path) -> None:
    clicks(project, "{allowed_lateness: 2m}")
    landing, ck = tmp_path / "landing", str(tmp_path / "ck")
    drop(landing, "0.json", [(1, 0), (2, 5)])
    events = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing))
              .withWatermark("at", "10 minutes"))
    t = project.lh.table("clicks")
    q = t.write_stream(events, producer="pipe", checkpoint=ck)
    try:
        q.processAllAvailable()
        s = t.stream()
        assert one(s, "pipe")["attached"] and s["staged"] == 2  # nothing is behind its watermark yet
        drop(landing, "1.json", [(3, 30)])
        q.processAllAvailable()
        drop(landing, "2.json", [(4, 31), (5, 12), (6, 25)])  # 5: behind 20 (the watermark) - 2m: late
        q.processAllAvailable()
        assert batch_watermark(ck, 2) == to_micros(at(20))  # max 10:30 seen in batch 1, less 10 minutes
        s = t.stream()
        assert to_micros(one(s, "pipe")["bound"]) == to_micros(at(20))
        assert sorted(r["user_id"] for r in project.live("clicks")) == [1, 2]  # released up to 10:20
        assert [json.loads(r["record"])["user_id"] for r in project.lh.rejects("clicks")] == [5]
        assert query_id(ck) == q.id
    finally:
        q.stop()
    q._lakehouse_liveness.thread.join(30)  # type: ignore[attr-defined]
    s = t.stream()
    assert not one(s, "pipe")["attached"] and s["staged"] == 0  # detached: all of it released
    assert everywhere(project) == [1, 2, 3, 4, 5, 6]


def test_a_batch_run_again_from_the_checkpoint_is_not_inserted_again(
        spark: Any, project: Project, tmp_path: Path) -> None:
    """Spark runs the last batch again when its commit is missing from the checkpoint (the
    process died after the sink wrote it): the sink recognises its key."""
    clicks(project)
    landing, ck = tmp_path / "landing", tmp_path / "ck"
    t = project.lh.table("clicks")
    for n in range(3):
        drop(landing, f"{n}.json", [(10 * n + i, n) for i in range(3)])
    events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing))
    q = t.write_stream(events, producer="pipe", checkpoint=str(ck))
    q.processAllAvailable()
    q.stop()
    last = max(int(f.name) for f in (ck / "commits").iterdir() if f.name.isdigit())
    for f in (str(last), f".{last}.crc"):  # as if the process died after the batch, before Spark's commit
        (ck / "commits" / f).unlink(missing_ok=True)
    q = t.write_stream(events, producer="pipe", checkpoint=str(ck))
    q.processAllAvailable()
    q.stop()
    q._lakehouse_liveness.thread.join(30)  # type: ignore[attr-defined]
    assert (ck / "commits" / str(last)).exists()  # Spark did run it again
    assert everywhere(project) == [0, 1, 2, 10, 11, 12, 20, 21, 22]


def test_two_queries_are_two_producers_and_the_table_follows_the_slower(
        spark: Any, project: Project, tmp_path: Path) -> None:
    clicks(project, "{allowed_lateness: 0}")
    t = project.lh.table("clicks")
    queries = {}
    for name in ("fast", "slow"):
        drop(tmp_path / name, "0.json", [(1 if name == "fast" else 2, 0)])
        events = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / name))
                  .withWatermark("at", "1 minute"))
        queries[name] = t.write_stream(events, producer=name, checkpoint=str(tmp_path / f"ck-{name}"))
    try:
        for n, m in enumerate((10, 20, 30), start=1):
            drop(tmp_path / "fast", f"{n}.json", [(100 + n, m)])
            queries["fast"].processAllAvailable()
        drop(tmp_path / "slow", "1.json", [(200, 5)])
        queries["slow"].processAllAvailable()
        drop(tmp_path / "slow", "2.json", [(201, 6)])
        queries["slow"].processAllAvailable()
        s = t.stream()
        assert to_micros(s["watermark"]) == to_micros(at(4))  # the slow query's: 10:05 less a minute
        assert sorted(r["user_id"] for r in project.live("clicks")) == [1, 2]
        drop(tmp_path / "fast", "4.json", [(300, 3)])  # behind its own watermark (10:29): late
        queries["fast"].processAllAvailable()
        late = project.lh.rejects("clicks")
        assert [(json.loads(r["record"])["user_id"], r["producer"]) for r in late] == [(300, "fast")]
        assert late[0]["reason"] == "late_row" and late[0]["bound"] == dt.datetime(2026, 11, 20, 10, 29, tzinfo=UTC)
        queries["slow"].stop()
        queries["slow"]._lakehouse_liveness.thread.join(30)  # type: ignore[attr-defined]
        s = t.stream()  # the slow one detached: the table follows the fast one's watermark
        assert to_micros(s["watermark"]) == to_micros(at(29))
        assert sorted(r["user_id"] for r in project.live("clicks")) == [1, 2, 101, 102, 200, 201]
    finally:
        for q in queries.values():
            q.stop()
    queries["fast"]._lakehouse_liveness.thread.join(30)  # type: ignore[attr-defined]
    assert everywhere(project) == [1, 2, 101, 102, 103, 200, 201, 300]


def test_write_stream_refuses_a_batch_frame_and_a_bad_checkpoint(spark: Any, project: Project) -> None:
    from lakehouse.errors import InputError

    clicks(project)
    t = project.lh.table("clicks")
    with pytest.raises(InputError, match="streaming DataFrame"):
        t.write_stream(spark.range(1), producer="p", checkpoint="/tmp/x")
    with pytest.raises(InputError, match="bad checkpoint"):
        t.foreach_batch("p", "")
    with pytest.raises(InputError, match="bad producer name"):
        t.foreach_batch(" p", "/tmp/x")
    with pytest.raises(InputError, match="lakehouse reads a query's checkpoint on a local path or s3://"):
        t.foreach_batch("p", "hdfs://nn/ck")
    assert t.foreach_batch("p", "file:///tmp/ck").checkpoint == "/tmp/ck"


CONNECT_CLIENT = """
import json, sys
from pathlib import Path
import lakehouse
root = Path(sys.argv[1])
lh = lakehouse.open(str(root))
spark = lh.spark()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
t = lh.table("clicks")
landing = root / "landing"
landing.mkdir()
(landing / "0.json").write_text(json.dumps({"user_id": 1, "url": "/a", "at": "2026-11-20T10:00:00Z"}) + "\\n")
events = (spark.readStream.schema("user_id long, url string, at timestamp").json(str(landing))
          .withWatermark("at", "1 minute"))
q = t.write_stream(events, producer="pipe", checkpoint=str(root / "ck"))
q.processAllAvailable()
(landing / "1.json").write_text(json.dumps({"user_id": 2, "url": "/b", "at": "2026-11-20T10:05:00Z"}) + "\\n")
q.processAllAvailable()
held = t.stream()
q.stop()
q._lakehouse_liveness.thread.join(30)
feed = t.read_stream().writeStream.format("memory").queryName("feed").start()
feed.processAllAvailable()
streamed = sorted(r.user_id for r in spark.sql("SELECT user_id FROM feed").collect())
feed.stop()
print(json.dumps({"staged_while_running": held["staged"], "attached_after": t.stream()["producers"][0]["attached"],
                  "streamed": streamed, "batch": sorted(r.user_id for r in t.read_changes().collect())}))
"""


@pytest.mark.slow
def test_the_sink_and_the_feed_run_on_a_spark_connect_session(spark: Any, project: Project) -> None:
    """A client of a Spark Connect server (a notebook after `lakehouse server start`): the sink's
    batch function runs on the server, the feed's data source too."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO, suite_server

    clicks(project)
    env = {**os.environ, "LAKEHOUSE_REMOTE": suite_server(), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CONNECT_CLIENT, str(project.root)], env=env, capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc == {"staged_while_running": 2, "attached_after": False, "streamed": [1, 2], "batch": [1, 2]}


def test_an_idle_query_keeps_holding_the_watermark(spark: Any, project: Project, tmp_path: Path) -> None:
    """No new data for longer than the producer's lease: the query's producer still holds the
    table's watermark (renewed while idle), another producer's rows wait behind it."""
    import time

    clicks(project, "{lease: 3s}")
    landing = tmp_path / "landing"
    drop(landing, "0.json", [(1, 0)])
    t = project.lh.table("clicks")
    events = spark.readStream.schema(SCHEMA).json(str(landing)).withWatermark("at", "1 minute")
    q = t.write_stream(events, producer="pipe", checkpoint=str(tmp_path / "ck"))
    try:
        q.processAllAvailable()
        with t.producer("other") as other:
            other.insert([{"user_id": 2, "url": "/o", "at": at(30)}])
            time.sleep(7)  # more than two leases with no new file
            s = t.stream()
            assert one(s, "pipe")["holding"] and s["staged"] >= 1  # "other"'s row waits behind the pipeline
            assert q._lakehouse_liveness.renewals >= 2  # type: ignore[attr-defined]
    finally:
        q.stop()
    q._lakehouse_liveness.thread.join(30)  # type: ignore[attr-defined]
    assert not one(t.stream(), "pipe")["attached"]


def test_a_checkpoint_behind_the_table_is_refused_and_the_last_batch_again_takes_nothing(
        spark: Any, project: Project, tmp_path: Path) -> None:
    """Spark only runs its last batch again: the same batch id is a duplicate; a lower one means the
    checkpoint was restored or reset, and the batch is refused in one line (not dropped silently)."""
    from lakehouse.errors import LakehouseError

    clicks(project)
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "metadata").write_text(json.dumps({"id": "3f6c1d2e-query"}) + "\n")
    writer = project.lh.table("clicks").foreach_batch("pipe", str(ck))
    rows = spark.createDataFrame([(1, "/a", dt.datetime(2026, 11, 20, 10))], SCHEMA)
    assert writer.write(rows, 5).rows_loaded == 1
    assert writer.write(rows, 5).duplicate
    with pytest.raises(LakehouseError, match="behind the table: its query runs batch 3, the table took batch 5") as e:
        writer.write(rows, 3)
    assert "\n" not in str(e.value)
    assert writer.write(rows, 6).rows_loaded == 1
    project.lh.table("clicks").producer("pipe").detach()
    assert len(project.live("clicks")) == 2


def test_a_watermark_that_is_not_the_event_times_is_refused(spark: Any, project: Project, tmp_path: Path) -> None:
    from lakehouse.errors import InputError

    clicks(project)
    t = project.lh.table("clicks")
    source = spark.readStream.schema(SCHEMA + ", seen timestamp").json(str(tmp_path))
    with pytest.raises(InputError, match="watermark is on 'seen', not on the table's event time 'at'"):
        t.write_stream(source.withWatermark("seen", "1 minute"), producer="p", checkpoint=str(tmp_path / "ck"))
    with pytest.raises(InputError, match="watermark=True but the query defines none"):
        t.write_stream(source, producer="p", checkpoint=str(tmp_path / "ck"), watermark=True)
    assert not t.stream()["producers"]  # nothing attached


def test_an_idle_query_moves_its_bound_to_the_watermark_of_its_next_batch(
        spark: Any, project: Project, tmp_path: Path) -> None:
    """Spark runs no batch for a query with no new data (and no state): the last batch's rows above
    its watermark would wait; the sink moves the bound to the watermark the next batch would run
    under (the last batch's latest event time less the delay), so they go."""
    import time

    clicks(project, "{lease: 4s}")
    landing = tmp_path / "landing"
    drop(landing, "0.json", [(1, 0), (2, 30)])
    t = project.lh.table("clicks")
    events = spark.readStream.schema(SCHEMA).json(str(landing)).withWatermark("at", "10 minutes")
    q = t.write_stream(events, producer="pipe", checkpoint=str(tmp_path / "ck"))
    try:
        q.processAllAvailable()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and to_micros(one(t.stream(), "pipe")["bound"] or at(0)) < to_micros(at(20)):
            time.sleep(0.5)
        assert to_micros(one(t.stream(), "pipe")["bound"]) == to_micros(at(20))
        assert sorted(r["user_id"] for r in project.live("clicks")) == [1]  # 10:00 released, 10:30 waits
    finally:
        q.stop()
