"""Exactly once: kill a real ``lakehouse ingest`` process (SIGKILL) at each named point; right after
the crash every batch is in live entirely or not at all, and the next run loads every file
exactly once, with an ingest log that matches what the tables hold. Also: ``--watch`` picks up
files while it runs and stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakehouse import delta_log
from lakehouse.ingest.state import StateStore
from lakehouse.stream.engine import insert_of
from tests.conftest import Project, cli, cli_in_process

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EVENTS = r"""
name: events
columns:
  - {name: id,     type: long, nullable: false}
  - {name: amount, type: double}
  - {name: at,     type: timestamp, nullable: false}
event_time: at
ingest:
  format: csv
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'ev_(\d{4})', format: '%H%M'}
  ingress_delay_interval: 0
  ingress_file_scan_wait: 0s
  block_size: 200B
  blocks_per_batch: 4
"""
POINTS = ["ingest_after_take", "ingest_during_staging", "ingest_after_staging", "ingest_after_live",
          "ingest_after_rejects", "ingest_after_state"]


def land_files(land: Path, start: int, count: int) -> dict[str, list[int]]:
    """Files of 12 good rows (ids unique across files) and one bad row each."""
    out = {}
    for f in range(start, start + count):
        ids = [f * 100 + i for i in range(12)]
        lines = ["id,amount,at"] + [f"{i},{i / 2},2026-11-20T10:{f % 60:02d}:00Z" for i in ids]
        lines.insert(5, f"{f}x,oops,2026-11-20T10:00:00Z")
        (land / f"ev_{f:04d}.csv").write_text("\n".join(lines) + "\n")
        out[f"ev_{f:04d}.csv"] = ids
    return out


def check_consistent(p: Project, files: dict[str, list[int]], complete: bool) -> None:
    """Every batch is all-or-nothing in live; ids never appear twice; the log matches the tables."""
    rows = delta_log.scan(p.lh.paths("events").live, "SELECT id, _lh_load FROM t").to_pylist()
    ids = Counter(r["id"] for r in rows)
    assert not [i for i, n in ids.items() if n > 1], "rows loaded twice"
    by_file = {name: [i in ids for i in want] for name, want in files.items()}
    assert all(all(v) or not any(v) for v in by_file.values()), "a file is partly visible"
    per_load = Counter(insert_of(r["_lh_load"]) for r in rows)  # a batch's rows, over its releases
    log = p.lh.ingest_log("events")
    key = StateStore(p.lh.paths("events")).load(str(p.root / "landing")).key
    ingested = [e for e in log if e["status"] == "ingested"]
    for e in ingested:  # the log never claims more than the table holds
        assert all(by_file[os.path.basename(e["file"])]), e
    batches: dict[int, int] = Counter()
    for e in ingested:
        batches[e["batch"]] += e["rows"]
    for b, n in batches.items():
        assert per_load[f"ingest-{key}-{b:08d}"] == n
    rejects = p.lh.rejects("events")
    assert len(rejects) == len({(r["source"], r["line"]) for r in rejects}), "rejects recorded twice"
    if complete:
        assert sorted(ids) == sorted(i for v in files.values() for i in v)
        assert len(ingested) == len(files) and sum(e["rows_rejected"] for e in ingested) == len(files)
        assert sorted((os.path.basename(r["source"]), r["line"]) for r in rejects) == sorted((n, 6) for n in files)
        assert sum(per_load.values()) == len(rows)


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """A project per point with 4 files of 2 blocks (batches of 2 files) landed, and its ingest
    process killed there; the processes run two at a time in the background while the tests
    check and recover the ones already done."""
    pool = ThreadPoolExecutor(max_workers=2)
    template = Project(tmp_path_factory.mktemp("template") / "proj").table(EVENTS).create("events")
    out = {}
    for point in POINTS:
        root = tmp_path_factory.mktemp(point) / "proj"
        shutil.copytree(template.root, root)
        p = Project(root)
        land = p.root / "landing"
        land.mkdir()
        files = land_files(land, 0, 4)
        out[point] = (p, files, pool.submit(cli, p, "ingest", "events", "--source", str(land), crash=point))
    yield out
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_each_point_then_every_file_once(point, crashed):
    p, files, future = crashed[point]
    land = p.root / "landing"
    proc = future.result()
    if point == "ingest_during_staging":
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr  # staging may beat the timer
    else:
        assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    check_consistent(p, files, complete=False)
    files.update(land_files(land, 4, 1))  # more files arrive before the restart
    r = p.lh.ingest("events", str(land))
    assert r.waiting == 0
    check_consistent(p, files, complete=True)
    if point in ("ingest_after_live", "ingest_after_rejects"):
        assert r.batches[0].recovered  # committed by the crashed run, recorded by this one


def test_watch_picks_up_new_files_and_stops_cleanly_on_ctrl_c(spark, tmp_path):
    p = Project(tmp_path / "proj").table(EVENTS.replace("ingress_file_scan_wait: 0s", "ingress_file_scan_wait: 300ms")
                                         ).create("events")
    land = p.root / "landing"
    land.mkdir()
    files = land_files(land, 0, 2)
    proc = cli(p, "--format", "json", "ingest", "events", "--source", str(land), "--watch", background=True)
    try:
        def wait_for(n: int) -> None:
            deadline = time.time() + 180
            while time.time() < deadline:
                if len([e for e in p.lh.ingest_log("events") if e["status"] == "ingested"]) >= n:
                    return
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.3)
            raise AssertionError(f"--watch did not ingest {n} files in time")

        wait_for(2)
        files.update(land_files(land, 2, 3))  # files that appear while it runs
        wait_for(5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    doc = json.loads(out)  # stdout holds exactly the JSON report
    assert (doc["files_ingested"], doc["rows"], doc["rows_rejected"], doc["waiting"]) == (5, 60, 5, 0)
    check_consistent(p, files, complete=True)
    log = json.loads(cli_in_process(p, "ingest-log", "events", "--format", "json").stdout)
    assert [(os.path.basename(e["file"]), e["status"], e["rows"], e["rows_rejected"], e["error"]) for e in log] == [
        (f"ev_{f:04d}.csv", "ingested", 12, 1, None) for f in range(5)]
    assert log[0]["implied_time"] == "1900-01-01T00:00:00Z" and log[0]["batch"] == 1
