"""Streams on real Spark + Delta, read back through DuckDB: producers, rowtime bounds, late rows,
leases, the watermark (tables, the lakehouse_watermarks view on both engines, archiving with
``clock: bound``), and ``load`` / ``ingest`` as producers."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from typing import Any

import pyarrow as pa
import pytest

from lakehouse.ingest.producer import to_micros
from lakehouse.stream.model import StreamError
from tests.conftest import CLICKS, Project, cli_in_process
from tests.conftest import ORDERS as KEYED

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc


class Clock:
    def __init__(self, iso: str) -> None:
        self.now = to_micros(iso)

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1_000_000)


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def row(u: int, at: str) -> dict[str, Any]:
    return {"user_id": u, "url": f"/u{u}", "at": at}


def clicks(project: Project, stream: str = "") -> Project:
    project.table(CLICKS + (f"stream: {stream}\n" if stream else ""))
    project.create("clicks")
    return project


def users(project: Project, table: str = "clicks") -> list[int]:
    return sorted(r["user_id"] for r in project.live(table))


def late(project: Project, table: str = "clicks") -> list[dict[str, Any]]:
    return [r for r in project.lh.rejects(table) if r["reason"] == "late_row"]


def test_the_issues_example_step_by_step(spark: Any, project: Project) -> None:
    clicks(project, "{allowed_lateness: 0}")
    clock = Clock("2026-11-20T12:00:00Z")
    t = project.lh.table("clicks")
    p1, p2, p3 = (t.producer(n, clock=clock) for n in ("P1", "P2", "P3"))

    p1.attach("2026-11-20T10:00:00Z")
    assert t.stream(now="2026-11-20T12:00:00Z")["bound"] is None
    p1.insert([row(1, "2026-11-20T10:00:00Z")])
    s = t.stream(now="2026-11-20T12:00:00Z")
    assert s["bound"] == ts("2026-11-20T10:00:00Z") and users(project) == [1]

    p2.attach("2026-11-20T10:05:00Z")
    r = p2.insert([row(2, "2026-11-20T10:05:00Z")]).as_dict()
    assert r["rows_loaded"] == 1 and r["rows_staged"] == 1
    s = t.stream(now="2026-11-20T12:00:00Z")
    assert s["watermark"] == ts("2026-11-20T10:00:00Z") and s["staged"] == 1 and users(project) == [1]

    r = p2.insert([row(3, "2026-11-20T09:59:00Z")]).as_dict()
    assert r["rows_late"] == 1 and r["rows_loaded"] == 0
    [rej] = late(project)
    assert rej["producer"] == "P2" and rej["bound"] == ts("2026-11-20T10:05:00Z") and '"user_id":3' in rej["record"]

    p1.detach()
    s = t.stream(now="2026-11-20T12:00:00Z")
    assert s["bound"] == ts("2026-11-20T10:05:00Z") and s["staged"] == 0 and users(project) == [1, 2]

    p2.detach()
    p3.attach()
    r = p3.insert([row(4, "2026-11-20T10:01:00Z")]).as_dict()
    assert r["rows_late"] == 1
    assert [x["producer"] for x in late(project)] == ["P2", "P3"]
    assert users(project) == [1, 2]
    kinds = [e["kind"] for e in project.lh.stream_events("clicks")]
    assert kinds.count("attach") == 3 and kinds.count("detach") == 2 and kinds.count("release") == 2


def test_bounds_only_move_forward_and_operations_need_an_attached_producer(spark: Any, project: Project) -> None:
    clicks(project)
    clock = Clock("2026-11-20T12:00:00Z")
    p = project.lh.table("clicks").producer("app", clock=clock)
    with pytest.raises(StreamError, match="not attached"):
        p.bound("2026-11-20T10:00:00Z")
    with pytest.raises(StreamError, match="not attached"):
        p.insert([row(1, "2026-11-20T10:00:00Z")])
    p.attach("2026-11-20T10:00:00Z")
    before = project.lh.stream_status("clicks", "2026-11-20T12:00:00Z")
    with pytest.raises(StreamError, match="below its own bound"):
        p.bound("2026-11-20T09:00:00Z")
    assert project.lh.stream_status("clicks", "2026-11-20T12:00:00Z") == before  # nothing changed
    p.bound("2026-11-20T10:00:00Z")  # equal is fine
    p.detach()
    with pytest.raises(StreamError, match="not attached"):
        p.detach()


@pytest.mark.parametrize(("lateness", "accepted"), [("unbounded", [1, 2, 3, 4]), ("0", [1, 4]), ("5m", [1, 2, 4])])
def test_allowed_lateness(spark: Any, project: Project, lateness: str, accepted: list[int]) -> None:
    """Rows below max(B, b_P) - lateness are late: unbounded rejects nothing, 0 is strict."""
    clicks(project, f"{{allowed_lateness: {lateness}}}")
    clock = Clock("2026-11-20T12:00:00Z")
    with project.lh.table("clicks").producer("app", clock=clock) as p:
        p.insert([row(1, "2026-11-20T10:10:00Z")])
        # 3 minutes, then 8 minutes below the bound; then a later row
        p.insert([row(2, "2026-11-20T10:07:00Z"), row(3, "2026-11-20T10:02:00Z"), row(4, "2026-11-20T10:11:00Z")])
    assert users(project) == accepted
    assert len(late(project)) == 4 - len(accepted)


def test_a_batch_is_sorted_first_so_its_own_rows_are_not_late(spark: Any, project: Project) -> None:
    clicks(project, "{allowed_lateness: 0}")
    clock = Clock("2026-11-20T12:00:00Z")
    with project.lh.table("clicks").producer("app", clock=clock) as p:
        p.insert([row(3, "2026-11-20T10:03:00Z"), row(1, "2026-11-20T10:01:00Z"), row(2, "2026-11-20T10:02:00Z")])
    assert users(project) == [1, 2, 3] and not late(project)


def test_a_stalled_producer_stops_holding_when_its_lease_expires(spark: Any, project: Project) -> None:
    clicks(project, "{allowed_lateness: 0, lease: 5m}")
    clock = Clock("2026-11-20T12:00:00Z")
    t = project.lh.table("clicks")
    fast, slow = t.producer("fast", clock=clock), t.producer("slow", clock=clock)
    fast.attach("2026-11-20T10:00:00Z")
    slow.attach("2026-11-20T10:00:00Z")
    fast.insert([row(1, "2026-11-20T10:00:00Z"), row(2, "2026-11-20T10:30:00Z")])
    assert users(project) == [1]  # slow holds the watermark at 10:00
    clock.advance(4 * 60)
    fast.insert([row(3, "2026-11-20T10:40:00Z")])
    assert users(project) == [1]  # slow's lease runs until 12:05
    clock.advance(2 * 60)  # 12:06: slow's lease has expired; any operation moves the table on
    fast.heartbeat()
    s = t.stream(now="2026-11-20T12:06:00Z")
    assert users(project) == [1, 2, 3] and s["bound"] == ts("2026-11-20T10:40:00Z")
    mine = {p["name"]: p for p in s["producers"]}
    assert mine["slow"]["attached"] and not mine["slow"]["holding"]
    assert any(e["kind"] == "expiry" and e["producer"] == "slow" for e in project.lh.stream_events("clicks"))
    # slow comes back: its rows are checked against B like anyone's, loudly
    slow.insert([row(4, "2026-11-20T10:20:00Z"), row(5, "2026-11-20T10:45:00Z")])
    [rej] = late(project)
    assert rej["producer"] == "slow" and rej["bound"] == ts("2026-11-20T10:40:00Z")
    s = t.stream(now="2026-11-20T12:06:00Z")
    assert {p["name"]: p for p in s["producers"]}["slow"]["holding"]  # it holds again
    assert users(project) == [1, 2, 3]  # 10:45 waits for fast (bound 10:40)
    fast.detach()
    slow.detach()
    assert users(project) == [1, 2, 3, 5]


def test_later_insert_wins_a_key_across_producers(spark: Any, project: Project) -> None:
    project.table(KEYED)
    project.create("orders")
    clock = Clock("2026-11-20T12:00:00Z")
    t = project.lh.table("orders")
    a, b = t.producer("a", clock=clock), t.producer("b", clock=clock)
    a.attach("2026-11-20T10:00:00Z")
    b.attach("2026-11-20T10:00:00Z")
    a.insert([{"id": "k1", "amount": 1, "at": "2026-11-20T10:05:00Z"},
              {"id": "k1", "amount": 2, "at": "2026-11-20T10:05:00Z"}])  # later line wins
    b.insert([{"id": "k1", "amount": 3, "at": "2026-11-20T10:05:00Z"},
              {"id": "k2", "amount": 4, "at": "2026-11-20T10:06:00Z"}])
    # R = min(10:05, 10:06): the three k1 rows go in one release; b's insert is the later one
    assert {r["id"]: r["amount"] for r in project.live("orders")} == {"k1": 3}
    a.detach()
    b.detach()
    rows = {r["id"]: r["amount"] for r in project.live("orders")}
    assert rows == {"k1": 3, "k2": 4}  # b inserted after a: the later insert wins


def test_insert_takes_arrow_pandas_spark_frames_and_files(spark: Any, project: Project) -> None:
    clicks(project)
    path = project.csv("c.csv", ["user_id", "url", "at"], [[4, "/u4", "2026-11-20T10:04:00Z"]])
    with project.lh.table("clicks").producer("app") as p:
        p.insert(pa.table({"user_id": [1], "url": ["/u1"], "at": [ts("2026-11-20T10:01:00Z")]}))
        import pandas as pd

        p.insert(pd.DataFrame({"user_id": [2], "url": ["/u2"], "at": [ts("2026-11-20T10:02:00Z")]}))
        p.insert(spark.createDataFrame([(3, "/u3", ts("2026-11-20T10:03:00Z"))], "user_id long, url string, at timestamp"))
        p.insert(path)
        r = p.insert([{"user_id": "x", "url": "/bad", "at": "2026-11-20T10:05:00Z"}]).as_dict()
        assert r["rows_rejected"] == 1
    assert users(project) == [1, 2, 3, 4]
    inbox = os.path.join(project.settings.warehouse, "clicks", "_stream", "inbox")
    assert not [f for _, _, fs in os.walk(inbox) for f in fs if f.endswith(".parquet")]


def test_leaving_the_block_detaches_also_on_an_exception(spark: Any, project: Project) -> None:
    clicks(project)
    with pytest.raises(RuntimeError), project.lh.table("clicks").producer("app") as p:
        p.insert([row(1, "2026-11-20T10:00:00Z")])
        raise RuntimeError("boom")
    s = project.lh.table("clicks").stream()
    assert not s["producers"][0]["attached"] and users(project) == [1]


def test_load_is_a_one_shot_producer_and_waits_for_the_watermark(spark: Any, project: Project) -> None:
    clicks(project)
    t = project.lh.table("clicks")
    holder = t.producer("app")  # the wall clock, as load's
    holder.attach("2026-11-20T10:00:00Z")
    path = project.csv("l.csv", ["user_id", "url", "at"],
                       [[1, "/u1", "2026-11-20T09:00:00Z"], [2, "/u2", "2026-11-20T11:00:00Z"]])
    r = project.lh.load("clicks", [path]).as_dict()
    assert r["rows_loaded"] == 2 and r["rows_staged"] == 1
    assert users(project) == [1]
    s = t.stream()
    assert {p["name"]: p["attached"] for p in s["producers"]} == {"app": True, "load": False}
    holder.detach()
    assert users(project) == [1, 2]


def test_watermarks_view_and_tables_agree_on_both_engines(spark: Any, project: Project) -> None:
    clicks(project)
    project.table(KEYED)
    project.create("orders")
    with project.lh.table("clicks").producer("app") as p:
        p.insert([row(1, "2026-11-20T10:00:00Z")])
        p.bound("2026-11-20T10:30:00Z")
        sql = "SELECT table_name, bound, watermark, staged, producers_holding FROM lakehouse_watermarks ORDER BY 1"
        s, d, cmp = project.lh.compare_engines(sql)
        assert cmp.equal, cmp
        rows = s.to_pylist()
        assert [r["table_name"] for r in rows] == ["clicks", "orders"]
        assert rows[0]["bound"] == ts("2026-11-20T10:00:00Z") and rows[0]["watermark"] == ts("2026-11-20T10:30:00Z")
        assert rows[1]["bound"] is None and rows[1]["producers_holding"] == 0
        state = {x.name: x for x in project.lh.tables()}["clicks"].as_dict()
        assert state["bound"] == ts("2026-11-20T10:00:00Z") and state["watermark"] == ts("2026-11-20T10:30:00Z")


def test_archive_clock_bound_never_seals_past_the_watermark(spark: Any, project: Project) -> None:
    project.table(CLICKS + "archive: {delay: 1h, clock: bound}\nstream: {lease: 1h}\n")
    project.create("clicks")
    lh = project.lh
    plan = lh.archive("clicks", now=ts("2026-11-20T12:00:00Z"), dry_run=True).plan
    assert plan.no_watermark and not plan.advances
    clock = Clock("2026-11-20T12:00:00Z")
    p = lh.table("clicks").producer("app", clock=clock)
    p.attach()
    p.insert([row(1, "2026-11-19T08:00:00Z"), row(2, "2026-11-20T06:00:00Z")])
    # watermark 06:00 although now is 12:00: cutoff = 05:00, not 11:00
    result = lh.archive("clicks", now=ts("2026-11-20T12:00:00Z"))
    assert result.plan.cutoff == int(ts("2026-11-20T05:00:00Z").timestamp())
    assert result.plan.watermark == ts("2026-11-20T06:00:00Z") and result.rows_archived == 1
    # the producer stalls: after its lease expires the archive's clock is now again
    later = ts("2026-11-20T13:30:00Z")
    result = lh.archive("clicks", now=later)
    assert result.plan.cutoff == int(ts("2026-11-20T05:00:00Z").timestamp())  # B is still 06:00
    p.insert([row(3, "2026-11-20T13:00:00Z")])  # back (its clock: 12:00), rows released
    result = lh.archive("clicks", now=later)
    assert result.plan.cutoff == int(ts("2026-11-20T12:00:00Z").timestamp())
    assert sorted(r["user_id"] for r in lh.query("SELECT user_id FROM clicks", "duckdb").to_pylist()) == [1, 2, 3]


def test_ingest_is_a_producer_with_the_implied_time_as_bound(spark: Any, project: Project, tmp_path: Any) -> None:
    project.table(CLICKS + """ingest:
  sort_field: TIME_IN_FILENAME
  filename_time: {regex: 'c_(\\d{8}T\\d{4})', format: '%Y%m%dT%H%M'}
""")
    project.create("clicks")
    land = tmp_path / "land"
    land.mkdir()
    (land / "c_20261120T1000.csv").write_text("user_id,url,at\n1,/a,2026-11-20T10:00:00Z\n2,/b,2026-11-20T10:20:00Z\n")
    lh = project.lh
    holder = lh.table("clicks").producer("app")
    holder.attach("2026-11-20T10:10:00Z")
    report = lh.ingest("clicks", str(land), producer="landing")
    assert report.rows == 2
    s = lh.table("clicks").stream()
    mine = {p["name"]: p for p in s["producers"]}
    # its bound: max(the implied time 10:00, the latest row 10:20)
    assert mine["landing"]["attached"] and mine["landing"]["bound"] == ts("2026-11-20T10:20:00Z")
    assert users(project) == [1]  # 10:20 waits for app (10:10)
    holder.bound("2026-11-20T11:00:00Z")
    assert users(project) == [1, 2]
    lh.ingest("clicks", str(land), producer="landing", drain=True)
    s = lh.table("clicks").stream()
    assert not {p["name"]: p for p in s["producers"]}["landing"]["attached"]


def test_cli_producer_and_stream(spark: Any, project: Project) -> None:
    clicks(project, "{allowed_lateness: 0}")
    f1 = project.csv("a.csv", ["user_id", "url", "at"], [[1, "/a", "2026-11-20T10:00:00Z"]])
    f2 = project.csv("b.csv", ["user_id", "url", "at"], [[2, "/b", "2026-11-20T09:00:00Z"]])
    now = ["--now", "2026-11-20T12:00:00Z"]
    r = cli_in_process(project, "--format", "json", "producer", "clicks", "P1", "attach", "--bound", "2026-11-20T10:00:00Z", *now)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["producer"] == "P1" and doc["bound"] == "2026-11-20T10:00:00Z" and doc["attached"]
    r = cli_in_process(project, "producer", "clicks", "P1", "insert", f1, f2, *now, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["insert"]["rows_loaded"] == 1 and doc["insert"]["rows_late"] == 1
    assert doc["stream_bound"] == "2026-11-20T10:00:00Z"
    r = cli_in_process(project, "producer", "clicks", "P1", "bound", "2026-11-20T09:00:00Z", *now)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "below its own bound" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli_in_process(project, "producer", "clicks", "P9", "heartbeat", *now)
    assert r.returncode == 1 and "not attached" in r.stderr and "clicks" in r.stderr
    r = cli_in_process(project, "producer", "clicks", "P1", "insert", str(project.root / "data" / "missing.csv"), *now)
    assert r.returncode == 1 and "no such file" in r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("error: ")]) == 1
    r = cli_in_process(project, "producer", "clicks", "load", "attach")
    assert r.returncode == 1 and "reserved" in r.stderr
    r = cli_in_process(project, "producer", "clicks", "P1", "detach", *now)
    assert r.returncode == 0, r.stderr
    r = cli_in_process(project, "--format", "json", "stream", "clicks", *now)
    doc = json.loads(r.stdout)
    assert set(doc) >= {"bound", "watermark", "staged", "producers"}
    assert set(doc["producers"][0]) >= {"name", "bound", "staged", "lease_expires", "rejected"}
    assert doc["producers"][0]["rejected"] == 1 and doc["staged"] == 0
    r = cli_in_process(project, "stream", "clicks", "--events", "--format", "json")
    kinds = [e["kind"] for e in json.loads(r.stdout)]
    assert kinds[0] == "attach" and "detach" in kinds and "release" in kinds
    r = cli_in_process(project, "--format", "json", "rejects", "clicks")
    assert [x["reason"] for x in json.loads(r.stdout)][0] == "late_row"  # then the missing file


def test_producer_names_and_bad_rows_are_one_line_errors(spark: Any, project: Project) -> None:
    from lakehouse.errors import InputError
    from lakehouse.ingest.producer import check_name

    for bad in ("", " x", "x ", "a\nb", "x" * 201, "load"):
        with pytest.raises(InputError):
            check_name(bad)
    clicks(project)
    with project.lh.table("clicks").producer("app") as p, pytest.raises(InputError, match="clicks: producer 'app'"):
        p.insert([{"user_id": 1, "url": "/a", "at": "2026-11-20T10:00:00Z"}, {"user_id": "two", "url": 3}])


def test_a_release_committed_while_an_archive_run_is_under_way_is_never_purged(spark: Any, project: Project) -> None:
    """One insert reaches live in two releases (a second producer held the watermark between
    them). An archive run plans after the first release; the second, below the new cutoff on the
    same day, commits before the run purges. The purge deletes only what the run archived (each
    release writes its own load id), so the second release's row waits in live for the next run."""
    from deltalake import DeltaTable

    from lakehouse.archive.run import ArchiveJob

    clicks(project, "{allowed_lateness: 0, lease: 1h}")
    clock = Clock("2026-11-21T12:00:00Z")
    t = project.lh.table("clicks")
    fast, slow = t.producer("fast", clock=clock), t.producer("slow", clock=clock)
    fast.attach("2026-11-20T10:00:00Z")
    slow.attach("2026-11-20T10:00:00Z")
    fast.insert([row(1, "2026-11-20T10:00:00Z"), row(2, "2026-11-20T10:30:00Z")])
    assert users(project) == [1]  # slow holds the watermark at 10:00: row 2 is staged
    job = ArchiveJob(spark, project.settings.warehouse, project.lh.definition("clicks"))
    plan = job.plan(ts("2026-11-21T12:00:00Z"))  # cutoff 2026-11-20T12:00: row 1 (row 2 is not in live yet)
    assert plan.rows == 1
    slow.detach()  # the second release: row 2, same insert, same day, below the new cutoff
    live = DeltaTable(project.lh.paths("clicks").live).to_pyarrow_table()
    assert sorted(live.column("user_id").to_pylist()) == [1, 2]
    result = job.execute(plan)
    assert result.committed and result.rows_archived == 1 and result.rows_purged == 1
    live = DeltaTable(project.lh.paths("clicks").live).to_pyarrow_table()
    assert live.column("user_id").to_pylist() == [2]  # waits below the cutoff: not lost
    project.lh.archive("clicks", now=ts("2026-11-21T12:00:01Z"))
    assert users(project) == [1, 2]
    fast.detach()


class Killed(BaseException):
    """Stands for SIGKILL at one instant of this process (nothing after it runs; the OS locks go)."""


def test_an_insert_killed_before_registration_is_discarded_by_vacuum_when_its_producer_never_returns(
        spark: Any, project: Project, monkeypatch: Any) -> None:
    """A producer's insert (rows given as data, so a temporary file in its inbox) is killed after
    its staging job, before the stream registered it: nothing of it is anywhere, and VACUUM
    discards it (staging and inbox file gone, no pending batch) as the producer's next insert
    would; the producer's next insert then finds nothing to discard and never brings it back."""
    from lakehouse import crashpoints
    from lakehouse.ingest.state import StateStore, inbox_folder, producer_source

    clicks(project)
    paths = project.lh.paths("clicks")
    a = project.lh.table("clicks").producer("A")
    a.attach()

    def reached(point: str, pid: int | None = None) -> None:
        if point == "ingest_after_staging":
            raise Killed(point)

    monkeypatch.setattr(crashpoints, "reached", reached)
    with pytest.raises(Killed):
        a.insert([row(1, "2026-11-20T10:00:00Z"), row(2, "2026-11-20T10:05:00Z")])
    monkeypatch.undo()
    staging = [n for n in os.listdir(paths.staging) if n.startswith("ingest-producer-A-")]
    source = producer_source("A")
    assert staging and StateStore(paths).load(source).pending
    assert project.lh.stream_status("clicks")["staged"] == 0 and users(project) == []

    v = project.lh.vacuum("clicks")
    assert [os.path.basename(s) for s in v.staging] == staging
    assert not [n for n in os.listdir(paths.staging) if n.startswith("ingest-producer-A-")]
    assert not StateStore(paths).load(source).pending and not StateStore(paths).load(source).files
    inbox = inbox_folder(paths.root, source)
    assert not os.path.isdir(inbox) or os.listdir(inbox) == []

    again = a.insert([row(3, "2026-11-20T10:10:00Z")])
    assert again.discarded == [] and again.rows_loaded == 1
    a.detach()
    assert users(project) == [3] and project.lh.rejects("clicks") == []


def staged_row_waiting(project: Project) -> Clock:
    """clicks with P1 holding the watermark at 10:00 and P2's row of 10:05 staged (its clock)."""
    clicks(project)
    clock = Clock("2026-11-20T12:00:00Z")
    t = project.lh.table("clicks")
    p1, p2 = t.producer("P1", clock=clock), t.producer("P2", clock=clock)
    p1.attach("2026-11-20T10:00:00Z")
    p2.attach("2026-11-20T10:05:00Z")
    assert p2.insert([row(2, "2026-11-20T10:05:00Z")]).as_dict()["rows_staged"] == 1
    return clock


def test_a_warehouse_moved_elsewhere_keeps_its_staged_rows_and_releases_them(spark: Any, project: Project,
                                                                           tmp_path: Any) -> None:
    clock = staged_row_waiting(project)
    # the state names staged rows relative to the table's folder
    state = json.loads((project.root / "warehouse" / "clicks" / "_stream" / "state.json").read_text())
    [seg] = state["segments"]
    assert not seg["data"]["path"].startswith("/") and seg["data"]["path"].startswith("_staging/")
    moved = tmp_path / "elsewhere" / "proj"
    moved.parent.mkdir()
    shutil.move(str(project.root), str(moved))
    there = Project(moved)
    assert there.lh.stream_status("clicks", "2026-11-20T12:00:00Z")["staged"] == 1
    there.lh.table("clicks").producer("P1", clock=clock).detach()
    assert users(there) == [2]
    assert there.lh.stream_status("clicks", "2026-11-20T12:00:00Z")["staged"] == 0


def test_a_copy_of_a_warehouse_whose_state_names_absolute_places_reads_and_removes_only_its_own(
        spark: Any, project: Project, tmp_path: Any) -> None:
    """A state saved before places were relative names the original's staging folders: a copy's
    stream reads its own copies of them, and releasing there leaves the original's in place."""
    clock = staged_row_waiting(project)
    table_root = project.root / "warehouse" / "clicks"
    state_file = table_root / "_stream" / "state.json"
    state = json.loads(state_file.read_text())
    for seg in state["segments"]:  # as an older lakehouse saved it
        seg["data"]["path"] = str(table_root / seg["data"]["path"])
    state_file.write_text(json.dumps(state))
    original = sorted(p.name for p in (table_root / "_staging").iterdir())
    assert original
    copy = tmp_path / "copy" / "proj"
    shutil.copytree(project.root, copy)
    there = Project(copy)
    assert there.lh.stream_status("clicks", "2026-11-20T12:00:00Z")["staged"] == 1
    there.lh.table("clicks").producer("P1", clock=clock).detach()
    assert users(there) == [2]
    assert sorted(p.name for p in (table_root / "_staging").iterdir()) == original  # the original's untouched
    assert project.lh.stream_status("clicks", "2026-11-20T12:00:00Z")["staged"] == 1 and users(project) == []
