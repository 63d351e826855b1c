"""Exactly once for ``load``: kill a real ``lakehouse load`` process (SIGKILL) at each named point of
the write path it shares with ingest; right after the crash a file is in live entirely or not at
all, and running the same ``load`` again loads every row exactly once (the table has no key, so
a double would show) with every reject once. Also: the CLI's options of ``load``."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakehouse import delta_log
from tests.conftest import Project, cli, cli_in_process

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EVENTS = """
name: events
columns:
  - {name: id,     type: long, nullable: false}
  - {name: amount, type: double}
  - {name: at,     type: timestamp, nullable: false}
event_time: at
ingest:
  block_size: 200B
"""
POINTS = ["ingest_after_take", "ingest_during_staging", "ingest_after_staging", "ingest_after_live",
          "ingest_after_rejects", "ingest_after_state"]


def make_files(data: Path) -> dict[str, list[int]]:
    """Three files of 12 good rows (ids unique) and one bad row each."""
    out = {}
    for f in range(3):
        ids = [f * 100 + i for i in range(12)]
        lines = ["id,amount,at"] + [f"{i},{i / 2},2026-11-2{f}T10:00:00Z" for i in ids]
        lines.insert(5, f"{f}x,oops,2026-11-20T10:00:00Z")
        path = data / f"part-{f}.csv"
        path.write_text("\n".join(lines) + "\n")
        out[str(path)] = ids
    return out


def check(p: Project, files: dict[str, list[int]], complete: bool) -> None:
    rows = delta_log.scan(p.lh.paths("events").live, "SELECT id FROM t").to_pylist()
    ids = Counter(r["id"] for r in rows)
    assert not [i for i, n in ids.items() if n > 1], "rows loaded twice"
    seen = [[i in ids for i in want] for want in files.values()]
    assert all(all(v) or not any(v) for v in seen), "a file is partly visible"
    rejects = p.lh.rejects("events")
    assert len(rejects) == len({(r["source"], r["line"]) for r in rejects}), "rejects recorded twice"
    if complete:
        assert sorted(ids) == sorted(i for v in files.values() for i in v)
        assert sorted((r["source"], r["line"]) for r in rejects) == sorted((f, 6) for f in files)


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """A project per point with its load process killed there (two processes at a time)."""
    pool = ThreadPoolExecutor(max_workers=2)
    template = Project(tmp_path_factory.mktemp("template") / "proj").table(EVENTS).create("events")
    out = {}
    for point in POINTS:
        root = tmp_path_factory.mktemp(point) / "proj"
        shutil.copytree(template.root, root)
        p = Project(root)
        files = make_files(p.root / "data")
        out[point] = (p, files, pool.submit(cli, p, "load", "events", *files, crash=point))
    yield out
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("point", POINTS)
def test_load_killed_at_each_point_then_run_again_loads_every_row_once(point, crashed):
    p, files, future = crashed[point]
    proc = future.result()
    if point == "ingest_during_staging":
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr  # staging may beat the timer
    else:
        assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"
    check(p, files, complete=False)
    again = p.lh.load("events", list(files))  # the user runs the same command again
    check(p, files, complete=True)
    if proc.returncode == 0:
        return
    # the interrupted batch is finished first, so nothing is reported skipped that was not loaded
    # by an earlier, complete load
    assert again.rows_loaded + again.rows_rejected == 39 or len(again.files_skipped) == 3
    third = p.lh.load("events", list(files))
    assert (third.rows_loaded, len(third.files_skipped)) == (0, 3)
    check(p, files, complete=True)


def test_load_cli_options_after_the_command(spark, tmp_path):
    p = Project(tmp_path / "proj").table(EVENTS).create("events")
    f = p.text("rows.csv", "id,amount,at\n1,0.5,2026-11-20T10:00:00Z\n")
    proc = cli_in_process(p, "load", "events", f, "--format", "json")  # --format after the command: output
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) | {"load_ids": None} == {
        "rows_loaded": 1, "rows_rejected": 0, "files_skipped": 0, "files_rejected": [], "skipped": [],
        "rows_inserted": 1, "rows_updated": 0, "rows_late": 0, "rows_below_cutoff": 0, "cutoff": None,
        "rows_staged": 0, "recovered_batches": [], "discarded_batches": [], "load_ids": None}
    proc = cli_in_process(p, "load", "events", f, "--format", "json")  # the same content: skipped
    assert proc.returncode == 0 and json.loads(proc.stdout)["files_skipped"] == 1
    # the input format is --input-format; content that contradicts it is one file reject, exit 1
    g = p.text("rows2.csv", "id,amount,at\n2,0.5,2026-11-20T10:00:00Z\n")
    proc = cli_in_process(p, "load", "events", g, "--input-format", "json", "--format", "json")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1 and "rows2.csv" in errors[0] and "not JSON Lines" in errors[0]
    doc = json.loads(proc.stdout)
    assert doc["rows_rejected"] == 0 and len(doc["files_rejected"]) == 1
    proc = cli_in_process(p, "--format", "csv", "rejects", "events")
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == (
        "source,line,reason,record,at,load_id,producer,bound,producer_bound,allowed_lateness")


def test_rerun_after_a_crash_never_doubles_rows_or_rejects_even_with_force(spark, tmp_path):
    """Killed after the files were taken (before the stream registered the insert): the rerun
    discards the interrupted batch and takes the files afresh, once each whatever --force says (a
    failed file is rejected once)."""
    p = Project(tmp_path / "proj").table(EVENTS).create("events")
    good = p.text("good.csv", "id,amount,at\n1,0.5,2026-11-20T10:00:00Z\n2,0.5,2026-11-20T10:00:00Z\n")
    wrong = p.text("wrong.jsonl", "id,amount,at\n3,0.5,2026-11-20T10:00:00Z\n")  # CSV, not JSON Lines
    proc = cli(p, "load", "events", good, wrong, "--force", crash="ingest_after_take")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    r = p.lh.load("events", [good, wrong, good], force=True)
    assert r.discarded == [1] and [b.recovered for b in r.batches] == [False]
    assert sorted(x["id"] for x in delta_log.scan(p.lh.paths("events").live, "SELECT id FROM t").to_pylist()) == [1, 2]
    rejects = p.lh.rejects("events")
    assert [(os.path.basename(x["source"]), x["line"]) for x in rejects] == [("wrong.jsonl", None)]


def test_a_file_changed_between_the_crash_and_the_rerun_is_never_half_loaded(spark, tmp_path):
    """A load killed before its insert was registered is discarded: the rerun loads the file as it
    is now, once (never a mix of the old and the new content)."""
    p = Project(tmp_path / "proj").table(EVENTS).create("events")
    f = p.text("a.csv", "id,amount,at\n1,0.5,2026-11-20T10:00:00Z\n")
    proc = cli(p, "load", "events", f, crash="ingest_after_take")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    Path(f).write_text("id,amount,at\n7,0.5,2026-11-20T10:00:00Z\n8,0.5,2026-11-20T10:00:00Z\n")
    r = p.lh.load("events", [f])
    assert r.discarded == [1] and not r.recovered and r.rows_loaded == 2
    assert sorted(x["id"] for x in delta_log.scan(p.lh.paths("events").live, "SELECT id FROM t").to_pylist()) == [7, 8]
    assert p.lh.load("events", [f]).files_skipped  # the new content is now the loaded content
