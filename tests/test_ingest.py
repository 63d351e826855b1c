"""Ingestion with real files, Spark and Delta: the T-sort example, both sort fields, blocks and
straddling records, throttling, bad files, completeness, modified files, exactly-once replay."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse import delta_log
from lakehouse.ingest.state import StateStore
from lakehouse.warehouse import TablePaths

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
EVENTS = """
name: events
columns:
  - {{name: id,     type: long, nullable: false}}
  - {{name: city,   type: int}}
  - {{name: amount, type: double}}
  - {{name: note,   type: string}}
  - {{name: at,     type: timestamp, nullable: false}}
event_time: at
ingest:
{ingest}
"""
BY_NAME = """
  format: csv
  pattern: '^ev_.*\\.csv(\\.gz)?$'
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'ev_(\\d{8}T\\d{4})', format: '%Y%m%dT%H%M'}
  ingress_file_scan_wait: 0s
"""


def events(project, ingest: str = BY_NAME, **extra: Any):
    lines = [ln for ln in ingest.splitlines() if ln.strip() and ln.split(":")[0].strip() not in extra]
    body = "\n".join(lines) + "\n" + "".join(f"  {k}: {v}\n" for k, v in extra.items())
    project.table(EVENTS.format(ingest=body)).create("events")
    land = project.root / "landing"
    land.mkdir(exist_ok=True)
    return land


def name_at(minute: int, ext: str = "csv") -> str:
    return f"ev_20261120T{minute // 60:02d}{minute % 60:02d}.{ext}"


def write(land: Path, name: str, ids: list[int], minute: int = 0, extra_lines: str = "") -> Path:
    p = land / name
    lines = ["id,city,amount,note,at"]
    lines += [f"{i},{i % 7},{i * 1.5},n{i},2026-11-20T10:{minute % 60:02d}:00Z" for i in ids]
    p.write_text("\n".join(lines) + "\n" + extra_lines)
    return p


def live_ids(project) -> list[int]:
    return sorted(r["id"] for r in delta_log.scan(project.lh.paths("events").live, "SELECT id FROM t").to_pylist())


def log(project) -> dict[str, dict[str, Any]]:
    return {os.path.basename(e["file"]): e for e in project.lh.ingest_log("events")}


def ingest(project, land: Path, **kw: Any):
    return project.lh.ingest("events", str(land), **kw)


# -- the T-sort example, step by step ------------------------------------------------------------


def test_issue_example_step_by_step(spark, project):
    land = events(project, ingress_delay_interval="10m")
    taken: list[str] = []

    def arrive(minute: int) -> list[str]:
        write(land, name_at(minute), [minute], minute)
        r = ingest(project, land)
        got = [f for b in r.batches for f in b.files]
        taken.extend(got)
        return got

    assert arrive(0) == [] and arrive(4) == [] and arrive(8) == []  # 8 - 0 < 10
    assert arrive(6) == []
    assert arrive(12) == [name_at(0)]  # 12 - 0 >= 10
    assert arrive(2) == [name_at(2)]  # not late (after 0000), queued at the head, 12 - 2 >= 10
    assert arrive(1) == []  # late: before 0002
    entries = log(project)
    assert entries[name_at(1)]["status"] == "late"
    assert "before the last file taken" in entries[name_at(1)]["error"]
    assert (land / name_at(1)).exists()  # set aside, never deleted
    assert {n: e["status"] for n, e in entries.items()} == {
        name_at(0): "ingested", name_at(4): "queued", name_at(8): "queued", name_at(6): "queued",
        name_at(12): "queued", name_at(2): "ingested", name_at(1): "late"}
    assert live_ids(project) == [0, 2]
    # the end of the stream: --drain takes the rest, in T order
    r = ingest(project, land, drain=True)
    assert [f for b in r.batches for f in b.files] == [name_at(m) for m in (4, 6, 8, 12)]
    assert live_ids(project) == [0, 2, 4, 6, 8, 12]
    e = log(project)
    assert [n for n in e] == [name_at(m) for m in (0, 4, 8, 6, 12, 2, 1)]  # in the order seen
    assert e[name_at(12)]["implied_time"] == dt.datetime(2026, 11, 20, 0, 12, tzinfo=UTC)
    assert e[name_at(12)]["rows"] == 1 and e[name_at(12)]["batch"] == 3


def test_modified_file_time_and_strict_order(spark, project):
    land = events(project, "  format: csv\n  sort_field: MODIFIED_FILE_TIME\n  ingress_file_scan_wait: 0s\n",
                  ingress_delay_interval=0, blocks_per_batch=1)
    base = time.time() - 3600
    for i, name in enumerate(["c.csv", "a.csv", "b.csv"]):  # mtime order: c, a, b
        write(land, name, [i])
        os.utime(land / name, (base + i * 60, base + i * 60))
    r = ingest(project, land)
    assert [b.files for b in r.batches] == [["c.csv"], ["a.csv"], ["b.csv"]]
    write(land, "z.csv", [9])
    os.utime(land / "z.csv", (base + 30, base + 30))  # older than b.csv, the last taken
    r = ingest(project, land)
    assert r.late == ["z.csv"] and r.batches == []
    st = (land / "z.csv").stat()
    expect = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=st.st_mtime_ns // 1000)
    assert log(project)["z.csv"]["implied_time"] == expect
    assert live_ids(project) == [0, 1, 2]


def test_no_ordering_takes_files_as_found(spark, project):
    land = events(project, "  format: csv\n  sort_field: MODIFIED_FILE_TIME\n  ingress_file_scan_wait: 0s\n",
                  ingress_delay_interval=-1, blocks_per_batch=1)
    now = time.time()
    write(land, "b.csv", [1])
    os.utime(land / "b.csv", (now, now))
    write(land, "a.csv", [2])
    os.utime(land / "a.csv", (now - 100, now - 100))
    r = ingest(project, land)
    assert [b.files for b in r.batches] == [["a.csv"], ["b.csv"]]  # ties by name within a scan
    write(land, "0.csv", [3])
    os.utime(land / "0.csv", (now - 5000, now - 5000))  # older than everything: still not late
    r = ingest(project, land)
    assert [b.files for b in r.batches] == [["0.csv"]] and r.late == []
    assert live_ids(project) == [1, 2, 3]


# -- blocks, straddling records, throttling --------------------------------------------------------


def test_blocks_smaller_than_a_line_parse_every_record_once(spark, project):
    land = events(project, block_size="7B", blocks_per_batch=1000)
    rows = ["id,city,amount,note,at"]
    for i in range(40):
        note = ['plain', '"with, comma"', '"two\nlines"', '"say ""hi"""', ''][i % 5]
        amount = "oops" if i % 17 == 0 else f"{i}.25"
        rows.append(f"{i},{i % 3},{amount},{note},2026-11-20T10:00:{i % 60:02d}Z")
    (land / name_at(0)).write_text("\r\n".join(rows) + "\r\n")
    r = ingest(project, land, drain=True)
    assert r.batches[0].blocks > 35
    bad = [i for i in range(40) if i % 17 == 0]
    assert live_ids(project) == [i for i in range(40) if i not in bad]
    notes = {r["id"]: r["note"] for r in delta_log.scan(project.lh.paths("events").live, "SELECT id, note FROM t").to_pylist()}
    assert notes[2] == "two\nlines" and notes[3] == 'say "hi"' and notes[1] == "with, comma"
    rejects = project.lh.rejects("events")
    # file line numbers survive block splitting (record i starts on line 2 + i + number of earlier 2-line notes)
    expect = {2 + i + len([j for j in range(i) if j % 5 == 2]) for i in bad}
    assert {x["line"] for x in rejects} == expect
    assert all(x["source"].endswith(name_at(0)) and "amount" in x["reason"] for x in rejects)
    assert log(project)[name_at(0)]["rows"] == 40 - len(bad)
    assert log(project)[name_at(0)]["rows_rejected"] == len(bad)


def test_blocks_per_batch_throttles_commits(spark, project):
    land = events(project, ingress_delay_interval=0, block_size="30B", blocks_per_batch=5)
    sizes = {}
    for m in range(5):
        p = write(land, name_at(m), [m * 10 + k for k in range(3)], m)
        sizes[name_at(m)] = p.stat().st_size
    from lakehouse.ingest.blocks import plan_file

    d = project.lh.definition("events")
    nblocks = {n: len(plan_file(str(land / n), "csv", d, 30, 0)) for n in sizes}
    assert set(nblocks.values()) == {3}  # 3 lines of ~37 bytes: a block each
    live = project.lh.paths("events").live
    before = _delta_version(live)
    r = ingest(project, land)
    assert [b.files for b in r.batches] == [[name_at(0)], [name_at(1)], [name_at(2)], [name_at(3)], [name_at(4)]]
    assert _delta_version(live) == before + 5  # one commit per batch
    assert len(live_ids(project)) == 15


def test_batches_group_files_up_to_the_block_limit(spark, project):
    land = events(project, ingress_delay_interval=0, blocks_per_batch=3)
    for m in range(7):
        write(land, name_at(m), [m], m)
    r = ingest(project, land)
    assert [len(b.files) for b in r.batches] == [3, 3, 1]
    assert [b.number for b in r.batches] == [1, 2, 3]
    assert live_ids(project) == list(range(7))


def test_later_file_wins_within_a_batch(spark, project):
    project.table("""
        name: trips
        columns:
          - {name: trip_id, type: string, nullable: false}
          - {name: status,  type: int}
          - {name: event_time, type: timestamp, nullable: false}
        primary_key: [trip_id]
        event_time: event_time
        ingest: {format: csv, ingress_file_scan_wait: 0s, sort_field: TIME_IN_FILENAME,
                 filename_time: {regex: 't_(\\d{4})', format: '%H%M'}}
    """).create("trips")
    land = project.root / "landing"
    land.mkdir()
    (land / "t_0002.csv").write_text("trip_id,status,event_time\na,3,2026-11-20T10:00:00Z\n")
    (land / "t_0001.csv").write_text("trip_id,status,event_time\na,1,2026-11-20T10:00:00Z\na,2,2026-11-20T10:00:00Z\n")
    r = project.lh.ingest("trips", str(land))
    assert [b.files for b in r.batches] == [["t_0001.csv", "t_0002.csv"]]
    assert delta_log.scan(project.lh.paths("trips").live, "SELECT trip_id, status FROM t").to_pylist() == [
        {"trip_id": "a", "status": 3}]


# -- bad input -----------------------------------------------------------------------------------


def test_bad_files_are_failed_with_reasons_and_good_files_load(spark, project):
    land = events(project, pattern="'^ev_.*'", format="csv", blocks_per_batch=100)
    write(land, name_at(0), [1, 2], extra_lines="3,1,notanumber,x,2026-11-20T10:00:00Z\n")
    good_gz = gzip.compress(b"id,city,amount,note,at\n4,1,1.0,g,2026-11-20T10:00:00Z\n")
    (land / name_at(1, "csv.gz")).write_bytes(good_gz)
    (land / name_at(2, "csv.gz")).write_bytes(gzip.compress(b"id,city,amount,note,at\n" + b"5,1,1.0,g,2026-11-20T10:00:00Z\n" * 2000)[:200])
    (land / name_at(3)).write_bytes(bytes(range(256)) * 4)
    (land / name_at(4)).write_bytes("id,city,amount,note,at\n6,1,1.0,caf\xe9,2026-11-20T10:00:00Z\n".encode("latin-1"))
    (land / name_at(5)).write_text("")
    (land / name_at(6)).write_text("id,town,amount\n7,1,1.0\n")
    (land / "ev_notatime.csv").write_text("id,city,amount,note,at\n8,1,1.0,x,2026-11-20T10:00:00Z\n")
    r = ingest(project, land, drain=True)
    entries = log(project)
    status = {n: e["status"] for n, e in entries.items()}
    assert status == {name_at(0): "ingested", name_at(1, "csv.gz"): "ingested", name_at(2, "csv.gz"): "failed",
                      name_at(3): "failed", name_at(4): "failed", name_at(5): "failed", name_at(6): "failed",
                      "ev_notatime.csv": "failed"}
    reasons = {n: e["error"] for n, e in entries.items() if e["status"] == "failed"}
    assert "gzip" in reasons[name_at(2, "csv.gz")].lower() or "compressed" in reasons[name_at(2, "csv.gz")].lower() \
        or "end of stream" in reasons[name_at(2, "csv.gz")].lower()
    assert "binary data" in reasons[name_at(3)] and "not UTF-8 text" in reasons[name_at(4)]
    assert "empty" in reasons[name_at(5)]
    assert "unknown column" in reasons[name_at(6)] and "'town'" in reasons[name_at(6)]
    assert "no time in the file name" in reasons["ev_notatime.csv"]
    for n in reasons:
        assert (land / n).exists()  # left in place
    assert live_ids(project) == [1, 2, 4]
    # rejects hold bad rows (with file and line) and every failed file once (no line), with the
    # reason of the ingest log
    rejects = project.lh.rejects("events")
    rows = [(os.path.basename(x["source"]), x["line"]) for x in rejects if x["line"] is not None]
    assert rows == [(name_at(0), 4)]
    files = {os.path.basename(x["source"]): x["reason"] for x in rejects if x["line"] is None}
    assert files == reasons
    assert sorted(n for n, _ in r.failed) == sorted(reasons)
    again = ingest(project, land)  # nothing new: no file is rejected twice
    assert not again.batches and len(project.lh.rejects("events")) == len(rejects)


# -- completeness, hidden names, modified files, late folder, dry run -----------------------------


def test_a_file_being_written_waits_until_it_is_stable(spark, project):
    land = events(project, ingress_delay_interval=0)
    d = project.lh.definition("events")
    from lakehouse.ingest.pipeline import Ingest

    job = Ingest(project.lh.spark, project.settings.warehouse, d, str(land))
    p = write(land, name_at(0), [1])
    from lakehouse.ingest.pipeline import IngestReport

    state = job.store.load(str(land))
    rep = IngestReport("events", str(land))
    job._scan(state, rep)  # first sight: not known complete yet
    assert rep.incomplete == [name_at(0)] and state.queued() == []
    with p.open("a") as f:
        f.write("2,1,1.0,x,2026-11-20T10:00:00Z\n")
    os.utime(p, ns=(p.stat().st_mtime_ns + 10_000_000, p.stat().st_mtime_ns + 10_000_000))
    rep = IngestReport("events", str(land))
    job._scan(state, rep)  # changed since the previous scan: still incomplete
    assert rep.incomplete == [name_at(0)] and state.queued() == []
    rep = IngestReport("events", str(land))
    job._scan(state, rep)  # unchanged since the previous scan: complete
    assert rep.incomplete == [] and [e.name for e in state.queued()] == [name_at(0)]


def test_min_file_age_makes_old_files_complete_at_once(spark, project):
    land = events(project, ingress_delay_interval=0, min_file_age="1m", ingress_file_scan_wait="1h")
    p = write(land, name_at(0), [1])
    old = time.time() - 120
    os.utime(p, (old, old))
    r = ingest(project, land)  # would otherwise wait an hour for a second scan
    assert [b.files for b in r.batches] == [[name_at(0)]]


def test_hidden_and_unmatched_names_are_ignored(spark, project):
    land = events(project, ingress_delay_interval=0)
    write(land, "." + name_at(0), [1])
    write(land, "_" + name_at(1), [2])
    write(land, "other.csv", [3])
    (land / "sub").mkdir()
    write(land / "sub", name_at(2), [4])
    write(land, name_at(3), [5])
    r = ingest(project, land)
    assert r.new == [name_at(3)]
    assert list(log(project)) == [name_at(3)]
    assert live_ids(project) == [5]


def test_a_file_modified_after_loading_is_reported_not_reloaded(spark, project):
    land = events(project, ingress_delay_interval=0)
    p = write(land, name_at(0), [1])
    ingest(project, land)
    write(land, name_at(0), [1, 2, 3])
    r = ingest(project, land)
    assert r.modified == [name_at(0)] and r.batches == []
    e = log(project)[name_at(0)]
    assert e["status"] == "ingested" and "modified after it was ingested" in e["error"]
    assert live_ids(project) == [1]
    assert ingest(project, land).modified == []  # reported once
    assert p.exists()


def test_late_files_can_be_moved_to_a_late_folder(spark, project):
    land = events(project, ingress_delay_interval=0, late_folder="_late")
    write(land, name_at(10), [10], 10)
    ingest(project, land)
    write(land, name_at(5), [5], 5)
    r = ingest(project, land)
    assert r.late == [name_at(5)]
    assert not (land / name_at(5)).exists() and (land / "_late" / name_at(5)).exists()
    assert "moved to" in log(project)[name_at(5)]["error"]
    assert ingest(project, land).new == []  # the late folder is not scanned


def test_dry_run_changes_nothing(spark, project):
    land = events(project, ingress_delay_interval=0)
    for m in range(3):
        write(land, name_at(m), [m], m)
    store = StateStore(TablePaths(project.settings.warehouse, "events"))
    r = ingest(project, land, dry_run=True)
    assert r.dry_run and [b.files for b in r.planned] == [[name_at(0), name_at(1), name_at(2)]]
    assert not os.path.exists(store.path(str(land)))
    assert live_ids(project) == []


# -- exactly once ------------------------------------------------------------------------------------


def test_a_replayed_batch_is_not_applied_twice(spark, project):
    """A run that committed a batch but died before recording it: the next run finds the batch
    registered with the table's stream (its rows released into live under the stream's
    SetTransaction) and its SetTransaction in rejects, skips both, and records the batch."""
    land = events(project, ingress_delay_interval=0)
    write(land, name_at(0), [1, 2], extra_lines="x,1,1,x,2026-11-20T10:00:00Z\n")
    store = StateStore(TablePaths(project.settings.warehouse, "events"))
    from lakehouse.ingest import pipeline

    saved: list[str] = []
    real_execute = pipeline.Ingest._execute

    def remember(self, state, batch, report, recovered=False):
        saved.append(Path(store.path(str(land))).read_text())  # the state as a crash would leave it
        return real_execute(self, state, batch, report, recovered)

    pipeline.Ingest._execute = remember
    try:
        ingest(project, land)
    finally:
        pipeline.Ingest._execute = real_execute
    paths = project.lh.paths("events")
    app = store.load(str(land)).app_id
    from lakehouse.stream.ledger import APP_ID
    from lakehouse.stream.store import StreamStore

    stream = StreamStore(paths).read()
    assert stream.producers[str(land.resolve())].inserts[app] == 1
    assert delta_log.txn_version(paths.live, APP_ID) == 1 and delta_log.txn_version(paths.rejects, app) == 1
    Path(store.path(str(land))).write_text(saved[0])  # back to "batch 1 taken, not recorded"
    assert json.loads(saved[0])["pending"][0]["files"] == [name_at(0)]
    r = ingest(project, land)
    assert r.batches[0].recovered and r.batches[0].rows == 2 and r.batches[0].rows_rejected == 1
    assert live_ids(project) == [1, 2]
    assert len(project.lh.rejects("events")) == 1
    assert log(project)[name_at(0)]["status"] == "ingested"


def test_watch_picks_up_files_while_it_runs(spark, project):
    land = events(project, ingress_delay_interval=0, ingress_file_scan_wait="200ms")
    stop = threading.Event()
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("r", ingest(project, land, watch=True, stop=stop)))
    t.start()
    try:
        for m in range(3):
            write(land, name_at(m), [m], m)
            deadline = time.time() + 120
            while time.time() < deadline and log(project).get(name_at(m), {}).get("status") != "ingested":
                time.sleep(0.2)
            assert log(project)[name_at(m)]["status"] == "ingested"
    finally:
        stop.set()
        t.join(120)
    assert not t.is_alive()
    assert live_ids(project) == [0, 1, 2]
    assert out["r"].files_ingested == 3


def _delta_version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def test_state_survives_a_second_landing_directory(spark, project):
    land = events(project, ingress_delay_interval=0)
    other = project.root / "landing2"
    other.mkdir()
    write(land, name_at(0), [1])
    write(other, name_at(0), [2])
    ingest(project, land)
    ingest(project, other)
    assert live_ids(project) == [1, 2]
    files = [e["file"] for e in project.lh.ingest_log("events")]
    assert sorted(files) == sorted([str(land / name_at(0)), str(other / name_at(0))])
    # both are batch 1 of their directory; their rows carry different loads (archiving purges by load)
    loads = delta_log.scan(project.lh.paths("events").live, "SELECT DISTINCT _lh_load AS l FROM t").column("l").to_pylist()
    assert len(loads) == 2
    shutil.rmtree(other)


def test_a_lost_state_continues_batch_numbers_instead_of_skipping(spark, project):
    land = events(project, ingress_delay_interval=0)
    write(land, name_at(0), [1])
    ingest(project, land)
    store = StateStore(TablePaths(project.settings.warehouse, "events"))
    os.remove(store.path(str(land)))  # the state is lost; the table still holds batch 1
    (land / name_at(0)).rename(project.root / name_at(0))
    write(land, name_at(5), [2], 5)
    r = ingest(project, land)
    assert [(b.number, b.files) for b in r.batches] == [(2, [name_at(5)])]  # not skipped as "batch 1, done"
    assert live_ids(project) == [1, 2]


# -- randomized arrivals, real files, against a reference model of the rule ------------------------


def reference_model(delay: int, scans: list[list[int]], drain_at_end: bool = True) -> tuple[list[int], set[int]]:
    """The file T-sort written plainly: times in minutes, one name per time. Returns (taken in
    order, late)."""
    queue: list[int] = []
    t_read: int | None = None
    taken: list[int] = []
    late: set[int] = set()
    for arrivals in scans:
        for m in (sorted(arrivals) if delay >= 0 else sorted(arrivals, key=lambda m: name_at(m))):
            if delay >= 0 and t_read is not None and m < t_read:
                late.add(m)
            else:
                queue.append(m)
        if delay < 0:
            taken += queue
            queue = []
            continue
        queue.sort()
        while queue and queue[-1] - queue[0] >= delay:
            t_read = queue.pop(0)
            taken.append(t_read)
    if drain_at_end:
        taken += sorted(queue) if delay >= 0 else queue
    return taken, late


@pytest.mark.parametrize("delay", [-1, 0, 7])
def test_random_arrivals_follow_the_rule(spark, project, delay):
    import random

    rng = random.Random(delay + 100)
    minutes = rng.sample(range(0, 40), 9)
    cut = sorted(rng.sample(range(1, 9), 3))
    scans = [minutes[a:b] for a, b in zip([0, *cut], [*cut, 9])]
    land = events(project, ingress_delay_interval=f"{delay}m" if delay > 0 else delay, blocks_per_batch=1000)
    taken: list[str] = []
    late: list[str] = []
    for i, arrivals in enumerate(scans):
        for m in arrivals:
            write(land, name_at(m), [m], m)
        r = ingest(project, land, drain=(i == len(scans) - 1))
        taken += [f for b in r.batches for f in b.files]
        late += r.late
    want_taken, want_late = reference_model(delay, scans)
    assert taken == [name_at(m) for m in want_taken]
    assert sorted(late) == sorted(name_at(m) for m in want_late)
    assert live_ids(project) == sorted(want_taken)
