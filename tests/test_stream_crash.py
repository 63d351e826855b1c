"""Exactly once for streams: kill a real ``lakehouse producer ... insert`` process (SIGKILL) at each
named point of the stream path and of the one write path while a second producer holds the
watermark back, then go on with the next operations: every input row ends up exactly once in live
or in rejects, nothing stays staged once every producer detached, the stream bound is the latest
event time in live and the events log tells each insert and release once. The same for a detach
killed in its release and finished by another producer's process. Also: producers in separate
processes at once, a one-shot ``load`` killed while it holds the watermark, and a kill between a
release's event and the state that records it."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lakehouse import delta_log
from lakehouse.lease import read_lease
from lakehouse.stream.ledger import APP_ID
from lakehouse.stream.model import StreamError
from tests.conftest import CLICKS as CLICKS_TABLE
from tests.conftest import Project, cli, cli_in_process

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CLICKS = CLICKS_TABLE + "stream: {allowed_lateness: 0, lease: 24h}\n"
HEADER = ["user_id", "url", "at"]
POINTS = ["ingest_after_take", "ingest_after_staging", "stream_after_insert", "stream_after_plan",
          "stream_during_release", "stream_after_live", "stream_after_state", "stream_before_rejects",
          "ingest_after_live", "ingest_after_rejects", "ingest_after_state"]
"""In the order the insert reaches them (ingest_during_staging, a timer in the staging job, is
tested by test_load_crash and test_ingest_crash: nothing of the stream has happened by then)."""
UNREGISTERED = ("ingest_after_take", "ingest_after_staging")
"""Killed before the stream registered the insert: it never happened (and never comes back)."""
DETACH_POINTS = ["stream_after_plan", "stream_after_live"]
"""Killed in the release of A's detach: planned and not committed, committed and not recorded."""
TIMERS = ("stream_during_release",)
"""Points armed as a timer: the work may finish before it fires."""


def ts(hhmm: str) -> str:
    return f"2026-11-20T{hhmm}:00Z"


# A (attached at 09:00) inserts before the crash: its rows wait for B (attached at 09:00); B's
# insert moves R to min(A's 10:05, B's 10:30): one release of A's and B's rows up to 10:05
A_ROWS = [(200, "09:20", "live"), (201, "09:50", "live"), (202, "10:05", "live")]
# B's file: line -> (user_id, event time, what becomes of it after B's insert)
B_ROWS = [(100, "08:50", "late"), (101, "08:55", "late"), (102, "09:00", "live"), ("x", "09:05", "bad"),
          (103, "09:45", "live"), (104, "10:00", "live"), (105, "10:10", "staged"), (106, "10:30", "staged")]
# test 3: the killed load's file, and another producer's rows that wait behind the load
LOAD_ROWS = [(1, "09:00", "live"), (2, "09:10", "live"), ("y", "09:15", "bad"), (3, "09:30", "live")]
OTHER_ROWS = [(50, "09:05", "live"), (51, "09:20", "live"), (52, "10:00", "live")]
# test 4: a load killed after its insert (X holds at 09:00), then a load of a 10:10 row
FIRST_ROWS = [(1, "10:00", "live"), (2, "10:30", "live")]
NEXT_ROWS = [(3, "10:10", "live")]


def write(p: Project, name: str, rows: list[tuple[Any, str, str]]) -> str:
    return p.csv(name, HEADER, [[i, f"/{name}/{i}", ts(t)] for i, t, _ in rows])


def ids(rows: list[tuple[Any, str, str]], *what: str) -> set[Any]:
    return {i for i, _, w in rows if w in what}


def lines(name: str, rows: list[tuple[Any, str, str]], what: str) -> set[tuple[str, int]]:
    """(file, line) of the rows of a file that become ``what`` (line 1 is the header)."""
    return {(name, n) for n, (_, _, w) in enumerate(rows, start=2) if w == what}


def live_ids(p: Project, table: str = "clicks") -> Counter[int]:
    return Counter(r["user_id"] for r in delta_log.scan(p.lh.paths(table).live, "SELECT user_id FROM t").to_pylist())


def rejected(p: Project, table: str = "clicks") -> Counter[tuple[str, int, str]]:
    """(file name, line, late_row | bad) of every reject."""
    return Counter((os.path.basename(r["source"]), r["line"], "late" if r["reason"] == "late_row" else "bad")
                   for r in p.lh.rejects(table))


def stream_json(p: Project, table: str = "clicks") -> dict[str, Any]:
    proc = cli_in_process(p, "stream", table, "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def check_events(p: Project, table: str = "clicks", via_cli: bool = True) -> list[dict[str, Any]]:
    """The events log reads back whole (every line is JSON; the CLI lists them all), and its
    releases are numbered 1..n without a gap or a double, n being the live table's stream
    SetTransaction."""
    with open(os.path.join(p.lh.paths(table).root, "_stream", "events.jsonl"), encoding="utf-8") as f:
        raw = [json.loads(line) for line in f]
    assert [e["seq"] for e in raw] == list(range(1, len(raw) + 1))  # every event once, in order
    assert [(e["kind"], e["producer"], e["rows"]) for e in p.lh.stream_events(table)] == [
        (e["kind"], e.get("producer"), e.get("rows")) for e in raw]
    if via_cli:
        proc = cli_in_process(p, "stream", table, "--events", "--format", "json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert [(e["kind"], e["producer"], e["rows"]) for e in json.loads(proc.stdout)] == [
            (e["kind"], e.get("producer"), e.get("rows")) for e in raw]
    numbers = [int(re.findall(r"^release (\d+) ", e["detail"])[0]) for e in raw if e["kind"] == "release"]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert (delta_log.txn_version(p.lh.paths(table).live, APP_ID) or 0) == len(numbers)
    return raw


def staging_left(p: Project, table: str = "clicks") -> list[str]:
    folder = p.lh.paths(table).staging
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


# -- 1. the kill matrix --------------------------------------------------------------------------


def clone(template: Project, root: Path) -> Project:
    """A copy of a project whose stream has staged rows: the stream state names its staging
    folders relative to the table's folder, the producers' insert states name their input files
    (the project's data/, outside the warehouse) by absolute path, so those are moved along (the
    copy must never touch the template's files)."""
    shutil.copytree(template.root, root)
    old, new = str(template.root), str(root)
    wh = root / "warehouse" / "clicks"
    for f in wh.glob("_ingest/*.json"):
        f.write_text(f.read_text().replace(old, new))
    for f in wh.rglob("*"):
        if f.is_file() and "_delta_log" not in f.parts and f.suffix != ".parquet":
            assert old not in f.read_text(errors="replace"), f"{f} still names the template"
    return Project(root)


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """The killed ``load`` of test 3; a project per point with producers A and B attached at
    09:00, A's rows staged and B's insert process killed at the point; and a project per release
    point with B's insert done and A's detach process killed there. Two processes run at a time
    in the background while the tests check and recover the ones already done."""
    pool = ThreadPoolExecutor(max_workers=2)
    template = Project(tmp_path_factory.mktemp("template") / "proj").table(CLICKS).create("clicks")
    out: dict[str, Any] = {}
    root = tmp_path_factory.mktemp("load") / "proj"
    shutil.copytree(template.root, root)
    p = Project(root)
    f = write(p, "load.csv", LOAD_ROWS)
    out["load"] = (p, f, pool.submit(cli, p, "load", "clicks", f, crash="ingest_after_staging"))
    root = tmp_path_factory.mktemp("load-late") / "proj"
    shutil.copytree(template.root, root)
    p = Project(root)
    p.lh.producer("clicks", "X").attach(ts("09:00"))
    f = write(p, "first.csv", FIRST_ROWS)
    out["load-late"] = (p, f, pool.submit(cli, p, "load", "clicks", f, crash="ingest_after_live"))
    template.lh.producer("clicks", "A").attach(ts("09:00"))
    template.lh.producer("clicks", "B").attach(ts("09:00"))
    r = template.lh.producer("clicks", "A").insert_files([write(template, "a.csv", A_ROWS)])
    assert (r.rows_loaded, r.rows_staged) == (3, 3), r.as_dict()
    write(template, "b.csv", B_ROWS)
    for point in POINTS:
        p = clone(template, tmp_path_factory.mktemp(point) / "proj")
        f = str(p.root / "data" / "b.csv")
        out[point] = (p, f, pool.submit(cli, p, "producer", "clicks", "B", "insert", f, crash=point))
    p = clone(template, tmp_path_factory.mktemp("gone") / "proj")
    out["gone"] = (p, None, pool.submit(cli, p, "producer", "clicks", "B", "insert", str(p.root / "data" / "b.csv"),
                                        crash="stream_before_rejects"))
    inserted = clone(template, tmp_path_factory.mktemp("inserted") / "proj")
    r = inserted.lh.producer("clicks", "B").insert_files([str(inserted.root / "data" / "b.csv")])
    assert (r.rows_loaded, r.rows_staged) == (5, 2), r.as_dict()
    for point in DETACH_POINTS:
        p = clone(inserted, tmp_path_factory.mktemp(f"detach-{point}") / "proj")
        out[f"detach-{point}"] = (p, None, pool.submit(cli, p, "producer", "clicks", "A", "detach", crash=point))
    yield out
    pool.shutdown(wait=True, cancel_futures=True)


def check_killed(point: str, proc: Any) -> None:
    if point in TIMERS:
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr[-2000:]
    else:
        assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {proc.returncode} {proc.stderr[-2000:]}"


def check_after_crash(p: Project, releases: list[set[int]]) -> None:
    """Right after the kill: nothing doubled, a release is in live entirely or not at all, and the
    stream's lock is free (its holder is gone); then ``stream`` (which first finishes a release
    the killed process left) shows what live holds."""
    live = live_ids(p)
    assert not [i for i, n in live.items() if n > 1], f"rows released twice: {live}"
    assert set(live) in releases, f"a release is partly visible: {sorted(live)}"
    rej = rejected(p)
    assert not [r for r, n in rej.items() if n > 1], f"rejects recorded twice: {rej}"
    assert {(f, n) for f, n, _ in rej} <= lines("b.csv", B_ROWS, "late") | lines("b.csv", B_ROWS, "bad")
    lock = read_lease(os.path.join(p.lh.paths("clicks").root, "_stream", "lock"))
    assert lock is None or lock.free(time.time()), lock
    # what `stream` shows is what live holds (a release the killed process planned is in it now)
    bound = p.lh.stream_status("clicks")["bound"]
    live = live_ids(p)
    assert set(live) in releases and not [i for i, n in live.items() if n > 1], sorted(live)
    assert bound == (max(r["at"] for r in p.live("clicks")) if live else None), (bound, sorted(live))


def check_exact(p: Project, live: set[int], rejects: set[tuple[str, int, str]], staged: int,
                bound: str | None) -> None:
    counts = live_ids(p)
    assert not [i for i, n in counts.items() if n > 1], f"rows released twice: {counts}"
    assert set(counts) == live
    rej = rejected(p)
    assert not [r for r, n in rej.items() if n > 1], f"rejects recorded twice: {rej}"
    assert set(rej) == rejects
    status = p.lh.stream_status("clicks")
    assert status["staged"] == staged, status
    assert (status["bound"] and status["bound"].isoformat().replace("+00:00", "Z")) == (bound and ts(bound)), status


RELEASED = ids(A_ROWS, "live") | ids(B_ROWS, "live")
"""Released by B's insert (up to A's 10:05)."""
EVERYTHING = RELEASED | ids(B_ROWS, "staged")
REJECTS = {(*x, "late") for x in lines("b.csv", B_ROWS, "late")} | {(*x, "bad") for x in lines("b.csv", B_ROWS, "bad")}


def check_final(p: Project) -> None:
    """Both detached: every row once in live or rejects, nothing staged or left in staging, B is
    the latest event time in live, and the events tell each insert and release once."""
    check_exact(p, EVERYTHING, REJECTS, staged=0, bound="10:30")
    doc = stream_json(p)
    assert doc["staged"] == 0 and doc["bound"] == ts("10:30") == doc["watermark"]
    assert [(x["name"], x["attached"], x["holding"], x["staged"], x["rejected"]) for x in doc["producers"]] == [
        ("A", False, False, 0, 0), ("B", False, False, 0, 2)]
    assert max(r["at"] for r in p.live("clicks")).isoformat().replace("+00:00", "Z") == doc["bound"]
    assert staging_left(p) == [], "staged rows left behind"
    events = check_events(p, via_cli=False)
    assert sum(e["rows"] for e in events if e["kind"] == "release") == len(EVERYTHING)
    inserts = [(e["producer"], e["rows"], e["rejected"]) for e in events if e["kind"] == "insert"]
    assert inserts == [("A", 3, 0), ("B", 5, 2)], inserts
    assert [(e["kind"], e["producer"]) for e in events if e["kind"] in ("attach", "detach")] == [
        ("attach", "A"), ("attach", "B"), ("detach", "A"), ("detach", "B")]


@pytest.mark.parametrize("point", POINTS)
def test_insert_killed_at_each_point_then_every_row_once(point, crashed):
    p, f, future = crashed[point]
    check_killed(point, future.result())
    check_after_crash(p, [set(), RELEASED])

    # another producer's operation finishes what the killed one left: a registered insert whole
    # (its release, its late and bad rows in rejects), an unregistered one stays nowhere for good
    p.lh.producer("clicks", "A").heartbeat()
    if point in UNREGISTERED:
        check_exact(p, set(), set(), staged=3, bound=None)
    else:
        check_exact(p, RELEASED, REJECTS, staged=2, bound="10:05")

    # B runs the same insert again: a registered one is finished (nothing taken twice); an
    # unregistered one was discarded and the file is taken afresh
    B = p.lh.producer("clicks", "B")
    again = B.insert_files([f])
    if point in UNREGISTERED:
        assert again.discarded == [1] and not again.recovered and again.rows_loaded == 5, again.as_dict()
        assert not [n for n in staging_left(p) if n.startswith("ingest-producer-B-") and n.endswith("-00000001")]
    else:
        assert (again.recovered or again.files_skipped) and not again.discarded, again.as_dict()
    check_exact(p, RELEASED, REJECTS, staged=2, bound="10:05")
    late = [r for r in p.lh.rejects("clicks") if r["reason"] == "late_row"]
    assert {(r["producer"], r["bound"].isoformat()) for r in late} == {("B", "2026-11-20T09:00:00+00:00")}
    assert (B.insert_files([f]).rows_loaded, p.lh.stream_status("clicks")["staged"]) == (0, 2)  # and once more

    # A detaches: B's bound (10:30) is R; B detaches: nothing holds, nothing is left
    p.lh.producer("clicks", "A").detach()
    check_exact(p, EVERYTHING, REJECTS, staged=0, bound="10:30")
    B.detach()
    check_final(p)


@pytest.mark.parametrize("point", DETACH_POINTS)
def test_detach_killed_in_its_release_then_the_other_producer_finishes_it(point, crashed):
    """A's detach is saved before its release (B's rows up to B's 10:30): killed in the release,
    the next operation of B, another process, finishes it."""
    p, _, future = crashed[f"detach-{point}"]
    check_killed(point, future.result())
    check_after_crash(p, [RELEASED, EVERYTHING])
    assert [(x["name"], x["attached"]) for x in p.lh.stream_status("clicks")["producers"]] == [
        ("A", False), ("B", True)]
    with pytest.raises(StreamError):
        p.lh.producer("clicks", "A").detach()  # detached already: refused, nothing changes
    p.lh.producer("clicks", "B").heartbeat()
    check_exact(p, EVERYTHING, REJECTS, staged=0, bound="10:30")
    p.lh.producer("clicks", "B").detach()
    check_final(p)


def test_a_producer_killed_before_its_rejects_that_detaches_and_never_returns_leaves_nothing_behind(crashed):
    """B's insert is registered and released, then B is killed before its rejects commit. B's own
    next operation is a detach (it never inserts again), then A detaches: the late and bad rows
    are in rejects (with producer and bound), counted on B, and no staging is left."""
    p, _, future = crashed["gone"]
    check_killed("stream_before_rejects", future.result())
    assert rejected(p) == Counter() and set(live_ids(p)) == RELEASED
    p.lh.producer("clicks", "B").detach()
    assert set(rejected(p)) == REJECTS
    late = [r for r in p.lh.rejects("clicks") if r["reason"] == "late_row"]
    assert {(r["producer"], r["bound"].isoformat()) for r in late} == {("B", "2026-11-20T09:00:00+00:00")}
    p.lh.producer("clicks", "A").detach()
    check_exact(p, EVERYTHING, REJECTS, staged=0, bound="10:30")
    assert staging_left(p) == [], "staged rows left behind"
    assert {x["name"]: x["rejected"] for x in stream_json(p)["producers"]} == {"A": 0, "B": 2}
    check_events(p, via_cli=False)


# -- 2. producers in separate processes at once --------------------------------------------------

FREE = CLICKS.replace("stream: {allowed_lateness: 0, lease: 24h}", "stream: {lease: 24h}")


def test_three_producer_processes_at_once_release_every_row_once(spark, tmp_path):
    """P1, P2 and P3 attach, insert, assert a bound and detach, each operation a ``lakehouse``
    process, the three at once. A fourth producer (this process) holds the watermark at 10:30
    meanwhile, so the rows up to 10:30 go in the insert processes, racing the others' operations,
    and the rest when it detaches (the bound and detach processes then need no Spark)."""
    p = Project(tmp_path / "proj").table(FREE).create("clicks")
    gate = p.lh.producer("clicks", "gate")
    gate.attach(ts("10:30"))
    # producer k, file f, row j: ids distinct, event times of the three interleaved, 10:0x-11:5x
    files: dict[str, list[str]] = {}
    at: dict[int, str] = {}
    for k in (1, 2, 3):
        files[f"P{k}"] = []
        for f in range(3 if k == 2 else 2):
            rows = [(k * 1000 + f * 100 + j, f"{10 + (f + j) % 2}:{(f * 20 + j * 7 + k * 2) % 60:02d}", "live")
                    for j in range(6)]
            at.update((i, t) for i, t, _ in rows)
            files[f"P{k}"].append(write(p, f"p{k}-{f}.csv", rows))
    start = threading.Barrier(3)

    def produce(name: str) -> list[dict[str, Any]]:
        start.wait()
        docs = []
        for step in (["attach"], ["insert", *files[name]], ["bound", ts("13:00")], ["detach"]):
            proc = cli(p, "producer", "clicks", name, *step, "--format", "json", background=True)
            assert isinstance(proc, subprocess.Popen)
            out, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"{name} {step[0]}: {err[-2000:]}"
            docs.append(json.loads(out))
        return docs

    with ThreadPoolExecutor(max_workers=3) as pool:
        done = {n: pool.submit(produce, n) for n in ("P1", "P2", "P3")}
        docs = {n: f.result() for n, f in done.items()}
    for name, (attach, insert, bound, detach) in docs.items():
        assert (attach["attached"], insert["insert"]["rows_loaded"], bound["bound"], detach["attached"]) == (
            True, 6 * len(files[name]), ts("13:00"), False), docs[name]
    released = live_ids(p)
    assert not [i for i, n in released.items() if n > 1], "rows released twice"
    assert set(released) == {i for i, t in at.items() if t <= "10:30"}
    gate.detach()
    counts = live_ids(p)
    assert not [i for i, n in counts.items() if n > 1], "rows released twice"
    assert set(counts) == set(at)
    assert p.lh.rejects("clicks") == []
    latest = max(r["at"] for r in p.live("clicks")).isoformat().replace("+00:00", "Z")
    doc = stream_json(p)
    assert (doc["bound"], doc["watermark"], doc["staged"]) == (latest, latest, 0), doc
    assert [(x["name"], x["attached"], x["holding"], x["staged"]) for x in doc["producers"]] == [
        ("P1", False, False, 0), ("P2", False, False, 0), ("P3", False, False, 0), ("gate", False, False, 0)]
    assert staging_left(p) == []
    events = check_events(p)
    assert sum(e["rows"] for e in events if e["kind"] == "release") == len(at)
    assert sorted(e["producer"] for e in events if e["kind"] == "insert") == ["P1", "P2", "P3"]
    assert sum(e["rows"] for e in events if e["kind"] == "insert") == len(at)
    for kind in ("attach", "detach"):
        assert sorted(e["producer"] for e in events if e["kind"] == kind) == ["P1", "P2", "P3", "gate"]


# -- 3. a one-shot load killed while it holds the watermark --------------------------------------


def test_a_killed_load_holds_the_watermark_until_the_next_load_detaches(crashed):
    p, f, future = crashed["load"]
    proc = future.result()
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    doc = p.lh.stream_status("clicks")
    assert [(x["name"], x["attached"], x["holding"]) for x in doc["producers"]] == [("load", True, True)]
    assert live_ids(p) == Counter()

    # another producer's rows wait behind the load's (undefined) bound
    other = p.lh.producer("clicks", "other")
    other.attach()
    r = other.insert_files([write(p, "other.csv", OTHER_ROWS)])
    assert (r.rows_loaded, r.rows_staged) == (3, 3), r.as_dict()
    assert live_ids(p) == Counter() and p.lh.stream_status("clicks")["watermark"] is None

    # the user runs the same load again: the interrupted batch (never registered) is discarded and
    # the killed load's attachment is finished (detached), so the other producer's rows pass; the
    # load attaches afresh at B (10:00) and takes the file anew: its rows, older, are late now
    again = p.lh.load("clicks", [f])
    assert again.discarded == [1] and [b.recovered for b in again.batches] == [False], again.as_dict()
    assert (again.rows_loaded, again.as_dict()["rows_late"]) == (0, 3), again.as_dict()
    assert live_ids(p) == Counter(ids(OTHER_ROWS, "live"))
    assert set(rejected(p)) == {(*x, "bad") for x in lines("load.csv", LOAD_ROWS, "bad")} | {
        (*x, "late") for x in lines("load.csv", LOAD_ROWS, "live")}
    late = [r for r in p.lh.rejects("clicks") if r["reason"] == "late_row"]
    assert {(r["producer"], r["bound"].isoformat()) for r in late} == {("load", "2026-11-20T10:00:00+00:00")}
    doc = stream_json(p)
    assert [(x["name"], x["attached"], x["holding"], x["staged"]) for x in doc["producers"]] == [
        ("load", False, False, 0), ("other", True, True, 0)]
    assert (doc["bound"], doc["watermark"], doc["staged"]) == (ts("10:00"), ts("10:00"), 0)
    # and a third run loads nothing again (the load source knows the file)
    third = p.lh.load("clicks", [f])
    assert (third.rows_loaded, len(third.files_skipped)) == (0, 1)
    other.detach()
    assert live_ids(p) == Counter(ids(OTHER_ROWS, "live"))
    assert staging_left(p) == []
    events = check_events(p)
    # the second load discards the killed one's batch, detaches it and attaches afresh (at B)
    assert [(e["kind"], e.get("producer")) for e in events if e["kind"] in ("attach", "detach")] == [
        ("attach", "load"), ("attach", "other"), ("detach", "load"), ("attach", "load"), ("detach", "load"),
        ("attach", "load"), ("detach", "load"), ("detach", "other")]


# -- 4. a one-shot load killed after its insert ---------------------------------------------------

def test_a_load_killed_after_its_insert_does_not_make_the_next_loads_rows_late(crashed):
    """Each ``load`` is a producer of its own (attach at B, insert, detach): with X holding at
    09:00, a load of 10:00 and 10:30 then a load of 10:10 takes all three rows, and so it must
    when the first load was killed after its insert."""
    p, f, future = crashed["load-late"]
    proc = future.result()
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    r = p.lh.load("clicks", [write(p, "next.csv", NEXT_ROWS)])
    assert [b.recovered for b in r.batches] == [True, False]
    p.lh.producer("clicks", "X").detach()
    assert live_ids(p) == Counter(ids(FIRST_ROWS, "live") | ids(NEXT_ROWS, "live"))
    assert rejected(p) == Counter()


# -- 5. a kill between a release's event and the state that records it ----------------------------


class Killed(BaseException):
    """Stands for SIGKILL at one instant in this process: nothing after it runs, and what is on
    disk stays as it is (the stream's lock is let go, as the death of its holder does)."""


@pytest.mark.parametrize("instant", ["before_append", "after_append"])
def test_a_kill_around_logging_a_release_logs_it_once(spark, tmp_path, monkeypatch, instant):
    """Events are saved with the state first, then appended to the log: a kill before the append
    leaves them in the state (the next operation appends them), a kill after it leaves them in
    both (the log does not take a number twice)."""
    from lakehouse.stream.store import StreamStore

    p = Project(tmp_path / "proj").table(CLICKS).create("clicks")
    A, B = p.lh.producer("clicks", "A"), p.lh.producer("clicks", "B")
    A.attach(ts("09:00"))
    B.attach(ts("09:00"))
    A.insert_files([write(p, "a.csv", A_ROWS)])  # staged: B holds at 09:00
    real = StreamStore.flush

    def flush(self: StreamStore, state: Any) -> None:
        release = any(e.get("kind") == "release" for e in state.unlogged)
        if release and instant == "before_append":
            raise Killed
        real(self, state)
        if release and instant == "after_append":
            raise Killed

    monkeypatch.setattr(StreamStore, "flush", flush)
    with pytest.raises(Killed):
        B.detach()  # saved, then its release: committed, recorded, killed around the log append
    monkeypatch.undo()
    A.heartbeat()  # the next operation finishes the pending release
    assert live_ids(p) == Counter(ids(A_ROWS, "live"))
    A.detach()
    events = check_events(p, via_cli=False)
    assert sum(e["rows"] for e in events if e["kind"] == "release") == len(A_ROWS)


# -- 6. random interleavings with kills at random points -----------------------------------------

KILL_POINTS = ("ingest_after_take", "ingest_after_staging", "stream_after_insert", "stream_after_plan",
               "stream_after_live", "stream_after_state", "ingest_after_live", "ingest_after_rejects",
               "ingest_after_state")


@pytest.mark.parametrize("seed", [11, 12])
def test_random_interleavings_with_kills_lose_and_double_nothing(spark, tmp_path, monkeypatch, seed):
    """Three producers attach, insert files (some rows late, some bad), assert bounds and detach
    in a random order; before most operations a kill is armed at a random point
    (in this process: everything after it is skipped, the lease is let go, files stay as they
    are), and the operation is run again as a user would. In the end every row is once in live or
    rejected, nothing is staged, B is the latest live time and the log numbers every release once."""
    import random

    from lakehouse import crashpoints
    from lakehouse.ingest.producer import to_micros

    rng = random.Random(seed)
    p = Project(tmp_path / "proj").table(CLICKS).create("clicks")
    clock = {"now": to_micros("2026-11-20T12:00:00Z")}
    prods = {n: p.lh.table("clicks").producer(n, clock=lambda: clock["now"]) for n in ("A", "B", "C")}
    armed: dict[str, str | None] = {"point": None}

    def reached(point: str, pid: int | None = None) -> None:
        if point == armed["point"]:
            armed["point"] = None
            raise Killed(point)

    monkeypatch.setattr(crashpoints, "reached", reached)
    attached: set[str] = set()
    bounds = {n: 9 * 60 for n in prods}  # minutes after midnight
    sent: set[Any] = set()
    bad = 0
    kills = 0
    for step in range(24):
        name = rng.choice(sorted(prods))
        prod = prods[name]
        if name not in attached:
            op: tuple[Any, ...] = ("attach", ts(f"{bounds[name] // 60:02d}:{bounds[name] % 60:02d}"))
        else:
            op = rng.choice([("insert",), ("insert",), ("insert",), ("bound",), ("detach",)])
        if op[0] == "insert":
            rows = []
            for k in range(rng.randint(1, 4)):
                m = bounds[name] + rng.randint(-20, 15)  # some below the bounds: late under strict bounds
                uid = step * 10 + k
                rows.append((uid, f"{m // 60:02d}:{m % 60:02d}", "?"))
                sent.add(uid)
            if rng.random() < 0.2:
                rows.append(("bad", "10:00", "bad"))
                bad += 1
            f = write(p, f"s{step}.csv", rows)
            bounds[name] = max(bounds[name], max(int(t[:2]) * 60 + int(t[3:]) for _, t, _ in rows))
        elif op[0] == "bound":  # at or above its own bound (which may have risen to the stream's floor)
            at = dt.datetime.fromtimestamp(clock["now"] / 1e6, dt.timezone.utc)
            own = {x["name"]: x["bound"] for x in p.lh.stream_status("clicks", at)["producers"]}[name]
            bounds[name] = max(bounds[name], own.hour * 60 + own.minute) + rng.randint(0, 15)
        points = KILL_POINTS if op[0] == "insert" else ("stream_after_plan", "stream_after_live", "stream_after_state")
        armed["point"] = rng.choice(points) if rng.random() < 0.6 else None
        for attempt in range(2):
            try:
                if op[0] == "attach":
                    prod.attach(op[1])
                elif op[0] == "insert":
                    prod.insert_files([f])
                elif op[0] == "bound":
                    prod.bound(ts(f"{bounds[name] // 60:02d}:{bounds[name] % 60:02d}"))
                else:
                    prod.detach()
                break
            except Killed:
                kills += 1
                assert attempt == 0
            except StreamError as e:  # the killed run had done it: attached, detached, bound asserted
                assert attempt == 1 and ("not attached" in str(e) or "below its own bound" in str(e)), e
                break
        armed["point"] = None
        if op[0] == "attach":
            attached.add(name)
        elif op[0] == "detach":
            attached.discard(name)
        clock["now"] += 1_000_000
    for name in sorted(attached):
        prods[name].detach()
    assert kills >= 3, kills  # the seed must exercise kills
    live = live_ids(p)
    late = Counter(r["record"] for r in p.lh.rejects("clicks") if r["reason"] == "late_row")
    assert all(n == 1 for n in live.values()), live
    assert all(n == 1 for n in late.values()), late
    late_ids = {json.loads(x)["user_id"] if x.startswith("{") else int(x.split(",")[0]) for x in late}
    assert set(live) | late_ids == sent and not set(live) & late_ids
    assert sum(1 for r in p.lh.rejects("clicks") if r["reason"] != "late_row") == bad
    status = p.lh.stream_status("clicks")
    assert status["staged"] == 0 and all(not x["attached"] for x in status["producers"])
    times = [r["at"] for r in delta_log.scan(p.lh.paths("clicks").live, "SELECT at FROM t").to_pylist()]
    assert status["bound"] == max(times)
    check_events(p, via_cli=False)
    assert staging_left(p) == []
