"""The defects a new user met walking README's CLI tour (issue 25): each command as a user types
it, in this process on the shared session (``cli_in_process``), its text and its JSON."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.conftest import CLICKS, Project, cli_in_process

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc


def ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def clicks_csv(p: Project, name: str, rows: list[tuple[int, str]]) -> str:
    return p.csv(name, ["user_id", "url", "at"], [[u, f"/u{u}", at] for u, at in rows])


@pytest.fixture
def clicks(spark: Any, project: Project) -> Project:
    project.table(CLICKS)
    project.create("clicks")
    return project


def test_load_counts_and_names_rows_below_the_archive_cutoff(clicks: Project) -> None:
    p = clicks
    p.lh.load("clicks", [clicks_csv(p, "a.csv", [(1, "2026-11-18T10:00:00Z"), (2, "2026-11-19T12:00:00Z")])])
    r = p.lh.archive("clicks", now=ts("2026-11-20T00:00:00Z"))  # cutoff 2026-11-19T00:00:00Z (delay 24h)
    assert r.committed and r.rows_archived == 1
    late = clicks_csv(p, "b.csv", [(3, "2026-11-18T12:00:00Z"), (4, "2026-11-18T13:00:00Z"), (5, "2026-11-19T13:00:00Z")])
    proc = cli_in_process(p, "load", "clicks", late, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["rows_loaded"], doc["rows_below_cutoff"], doc["rows_late"]) == (3, 2, 0)
    assert doc["cutoff"] == int(ts("2026-11-19T00:00:00Z").timestamp())
    proc = cli_in_process(p, "load", "clicks", clicks_csv(p, "c.csv", [(6, "2026-11-18T14:00:00Z")]))
    assert proc.returncode == 0, proc.stderr
    assert "1 loaded row(s) have an event time below the archive cutoff" in proc.stdout
    assert "after the next archive run" in proc.stdout and "2026-11-19T00:00:00Z" in proc.stdout
    proc = cli_in_process(p, "load", "clicks", clicks_csv(p, "d.csv", [(7, "2026-11-19T14:00:00Z")]))
    assert proc.returncode == 0 and "below the archive cutoff" not in proc.stdout, proc.stdout


def test_jobs_run_and_jobs_history_give_one_attempt_the_same_numbers(clicks: Project) -> None:
    p = clicks
    p.lh.load("clicks", [clicks_csv(p, "a.csv", [(1, "2026-11-18T10:00:00Z"), (2, "2026-11-19T12:00:00Z")])])
    p.lh.load("clicks", [clicks_csv(p, "b.csv", [(3, "2026-11-19T13:00:00Z")])])
    proc = cli_in_process(p, "jobs", "run", "--now", "2026-11-20T00:10:00Z", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ran = {o["job"]: o["result"] for o in json.loads(proc.stdout) if o["ran"]}
    assert set(ran) == {"archive", "compact_live", "compact_archive", "vacuum"}
    proc = cli_in_process(p, "jobs", "history", "--format", "json")
    history = {r["job"]: r for r in json.loads(proc.stdout)}
    counts = ("rows", "files_before", "files_after", "bytes_before", "bytes_after")
    for job, result in ran.items():
        assert {k: result[k] for k in counts} == {k: history[job][k] for k in counts}, job
    # nothing to compact in live (two files, fewer than compact_min_files): no day, no file touched,
    # and the round says so as the history does (it printed the table's files, 2 -> 2, before)
    assert ran["compact_live"]["days"] == [] and "table_files_before" not in ran["compact_live"]
    assert (history["compact_live"]["files_before"], history["compact_live"]["files_after"]) == (0, 0)
    text = cli_in_process(p, "jobs", "history").stdout
    line = next(x for x in text.splitlines() if "compact_live" in x)
    assert "0->0" in line, text
    proc = cli_in_process(p, "jobs", "run", "--now", "2026-11-20T01:10:00Z")  # compact_live is hourly
    line = next(x for x in proc.stdout.splitlines() if "compact_live" in x)
    assert "files 0->0" in line and "table_files" not in line, proc.stdout


def test_rejects_show_the_load_id_and_name_a_producers_insert_and_the_bound_a_late_row_broke(
        spark: Any, project: Project) -> None:
    p = project
    p.table(CLICKS + "stream: {allowed_lateness: 2m}\n")
    p.create("clicks")
    with p.lh.table("clicks").producer("gw-eu") as gw:
        gw.insert([{"user_id": 1, "url": "/a", "at": "2026-11-20T10:10:00Z"}])
        r = gw.insert([{"user_id": 2, "url": "/b", "at": "2026-11-20T10:05:00Z"},   # below 10:10 - 2m
                       {"user_id": 3, "url": "/c", "at": "2026-11-20T10:11:00Z"}])
        assert r.as_dict()["rows_late"] == 1
        gw.insert([{"user_id": "x", "url": "/d", "at": "2026-11-20T10:12:00Z"}])  # not a long
    proc = cli_in_process(p, "rejects", "clicks", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert len(docs) == 2 and all(d["load_id"] for d in docs)
    late = next(d for d in docs if d["reason"] == "late_row")
    bad = next(d for d in docs if d["reason"] != "late_row")
    assert late["source"] == "producer gw-eu insert 2" and late["line"] == 1
    assert bad["source"] == "producer gw-eu insert 3" and "_inbox" not in json.dumps(docs) and "inbox" not in bad["reason"]
    assert (late["bound"], late["producer_bound"], late["allowed_lateness"]) == (
        "2026-11-20T10:08:00Z", "2026-11-20T10:10:00Z", "2m")
    assert late["load_id"] != bad["load_id"]
    text = cli_in_process(p, "rejects", "clicks").stdout
    assert ("producer gw-eu insert 2:1  late_row (producer gw-eu: earlier than 2026-11-20T10:08:00Z = its bound "
            "2026-11-20T10:10:00Z minus stream.allowed_lateness 2m)") in text, text
    assert f"[{late['load_id']}]" in text


def test_a_file_refused_whole_is_exit_1_for_load_and_ingest_with_the_summary_and_the_good_files_in(
        spark: Any, project: Project) -> None:
    p = project
    p.table(CLICKS + "ingest: {ingress_file_scan_wait: 0s, min_file_age: 0s}\n")
    p.create("clicks")
    land = p.root / "landing"
    land.mkdir()
    (land / "good.csv").write_text("user_id,url,at\n1,/a,2026-11-20T10:00:00Z\n")
    (land / "bad.csv").write_bytes(b"\xff\xfe\x00binary\x00\n")
    proc = cli_in_process(p, "ingest", "clicks", "--source", str(land), "--drain", "--format", "json")
    doc = json.loads(proc.stdout)  # one document, then the error
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1 and "bad.csv" in errors[0], proc.stderr
    assert "the other files were ingested" in errors[0]
    assert [f["file"] for f in doc["failed"]] == ["bad.csv"] and sum(b["rows"] for b in doc["batches"]) == 1
    (land / "more.csv").write_text("user_id,url,at\n2,/b,2026-11-20T10:01:00Z\n")
    proc = cli_in_process(p, "ingest", "clicks", "--source", str(land), "--drain")  # nothing refused now
    assert proc.returncode == 0 and "1 file(s) ingested" in proc.stdout, proc.stdout + proc.stderr
    good = p.text("good2.csv", "user_id,url,at\n3,/c,2026-11-20T10:02:00Z\n")
    bad = str(land / "bad.csv")
    proc = cli_in_process(p, "load", "clicks", good, bad, "--format", "json")
    doc = json.loads(proc.stdout)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1 and "bad.csv" in errors[0] and doc["rows_loaded"] == 1
    assert sorted(r["user_id"] for r in p.live("clicks")) == [1, 2, 3]


def test_query_before_migrate_says_run_migrate_and_tables_outside_a_project_is_an_error(
        spark: Any, project: Project, tmp_path: Any) -> None:
    p = project.table(CLICKS)  # defined, never migrated
    for engine in ("spark", "duckdb"):
        proc = cli_in_process(p, "query", "SELECT count(*) FROM clicks", "--engine", engine)
        errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
        assert proc.returncode == 1 and len(errors) == 1 and "run `lakehouse migrate`" in errors[0], (engine, proc.stderr)
    nowhere = tmp_path / "not-a-project"
    nowhere.mkdir()
    for fmt in ("text", "json"):
        proc = cli_in_process(nowhere, "tables", "--format", fmt)
        errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
        assert proc.returncode == 1 and len(errors) == 1 and str(nowhere / "tables") in errors[0], proc.stderr
        assert proc.stdout == ""


def test_optimize_dry_run_says_its_rule_and_why_a_day_was_not_picked_and_ingest_log_tells_batches_apart(
        spark: Any, project: Project) -> None:
    p = project
    p.table(CLICKS + "ingest: {ingress_file_scan_wait: 0s, min_file_age: 0s}\n"
            "jobs: {target_file_size: 8KB, compact_min_files: 8}\n")
    p.create("clicks")
    for i in range(2):
        p.lh.load("clicks", [clicks_csv(p, f"l{i}.csv", [(i, f"2026-11-20T10:0{i}:00Z")])])
    land = p.root / "landing"
    land.mkdir()
    (land / "i0.csv").write_text("user_id,url,at\n9,/i,2026-11-20T11:00:00Z\n")
    assert cli_in_process(p, "ingest", "clicks", "--source", str(land), "--drain").returncode == 0
    proc = cli_in_process(p, "optimize", "clicks", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "nothing to compact (target file size 8.0KB: live days with more than 8 files below 4.0KB" in proc.stdout
    assert ("clicks/live: not picked 2026-11-20: 3 small files, not more than jobs.compact_min_files (8); "
            "`optimize --day 2026-11-20` compacts it") in proc.stdout, proc.stdout
    doc = json.loads(cli_in_process(p, "optimize", "clicks", "--dry-run", "--format", "json").stdout)
    assert list(doc["live"]["skipped"]) == ["2026-11-20"] and doc["compact_min_files"] == 8
    day = json.loads(cli_in_process(p, "optimize", "clicks", "--dry-run", "--day", "2026-11-20",
                                    "--format", "json").stdout)
    assert day["live"]["days"] == ["2026-11-20"] and day["live"]["skipped"] == {}

    log = json.loads(cli_in_process(p, "ingest-log", "clicks", "--format", "json").stdout)
    assert sorted((e["source"], e["kind"], e["batch"]) for e in log) == sorted(
        [("load", "load", 1), ("load", "load", 2), (str(land), "ingest", 1)])
    assert len({e["load_id"] for e in log}) == 3
    text = cli_in_process(p, "ingest-log", "clicks").stdout
    lines = text.splitlines()
    assert "source" in text and any("load 2" in x and "l1.csv" in x for x in lines), text
    assert any("ingest 1" in x and "i0.csv" in x for x in lines) and "/landing" in text, text


def test_check_history_is_a_trend_per_check(spark: Any, project: Project) -> None:
    p = project
    p.table(CLICKS + "quality:\n  - expect_column_values_to_be_between: {column: user_id, min_value: 0}\n")
    p.create("clicks")
    p.lh.load("clicks", [clicks_csv(p, "a.csv", [(1, "2026-11-20T10:00:00Z")])])
    name = "expect_column_values_to_be_between(user_id)"
    assert cli_in_process(p, "check", "clicks", "--no-docs").returncode == 0
    p.lh.load("clicks", [clicks_csv(p, "b.csv", [(-1, "2026-11-20T10:01:00Z")])])
    assert cli_in_process(p, "check", "clicks", "--no-docs").returncode == 1
    assert cli_in_process(p, "check", "clicks", "--no-docs", "--scope", "live").returncode == 1
    proc = cli_in_process(p, "check", "clicks", "--history")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    i = lines.index(f"{name}: 3 result(s), 2 failed")
    assert lines[i + 1] == "  trend, oldest to newest: ok FAIL FAIL", proc.stdout
    assert lines[i + 2].startswith("  last: FAIL at ") and lines[i + 2].endswith("(scope live)")
    assert lines[i + 3].startswith("  last failure: ") and lines[i + 3].endswith("(scope live, 1 unexpected)")
    docs = json.loads(cli_in_process(p, "check", "clicks", "--history", "--format", "json").stdout)
    mine = [d for d in docs if d["check"] == name]
    assert [(d["n"], d["ok"], d["previous_ok"]) for d in mine] == [(1, True, None), (2, False, True), (3, False, False)]
