"""``load`` as a one-shot ingest on real Spark + Delta, read back through DuckDB: hostile values
never stop a load, the same file gives the same rows and rejects through ``load`` and ``ingest``
at any block size, loads are idempotent by content, sources are one whatever their spelling."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.spark

EVENTS = """
name: {name}
columns:
  - {{name: id, type: long, nullable: false}}
  - {{name: n, type: int}}
  - {{name: amount, type: 'decimal(10,2)'}}
  - {{name: note, type: string}}
  - {{name: at, type: timestamp, nullable: false}}
primary_key: [id]
event_time: at
ingest:
  sort_field: MODIFIED_FILE_TIME
  ingress_delay_interval: -1
  block_size: {block_size}
  max_record_bytes: 4KB
"""
HEADER = "id,n,amount,note,at\n"

# Good rows and members of each class of hostile value; every line is one record.
HOSTILE_LINES = [
    ("1,1,1.50,plain,2026-11-20T10:00:00Z", True),
    ("2,2,2.00,\"quoted, comma\",2026-11-20T10:01:00Z", True),
    ("3,3,3.00,5\" screen,2026-11-20T10:02:00Z", True),  # a quote inside an unquoted field
    ("4,4,4.00,x,9999-12-31T23:00:00-05:00", False),  # past 9999-12-31 once in UTC
    ("5,5,5.00,x,0001-01-01T00:30:00+01:00", False),  # before 0001-01-01 once in UTC
    ("6,6,6.00,x,0000-06-01T00:00:00Z", False),  # year 0
    ("7,7,7.00,x,10000-01-01T00:00:00Z", False),  # year 10000
    ("8," + "9" * 5000 + ",1.00,x,2026-11-20T10:03:00Z", False),  # an int of 5,000 digits
    ("9,1,1e999999999,x,2026-11-20T10:04:00Z", False),  # a decimal of a huge exponent
    ("10,1,1.00,\"x\"y,2026-11-20T10:05:00Z", False),  # text after a closing quote
    ("11,1,1.00," + "z" * 5000 + ",2026-11-20T10:06:00Z", False),  # longer than max_record_bytes
    ("12,1,1.00,ok,0001-01-01T00:00:00Z", True),  # the first instant there is
    ("13,1,1.00,ok,9999-12-31T23:59:59.999999Z", True),  # the last
    ("14,1,1.00,\"multi\nline\",2026-11-20T10:07:00Z", True),
    ("15,1,1.00,ok,2026-11-20T10:08:00Z", True),
]


def events(project: Project, name: str = "events", block_size: str = "64MB") -> Project:
    project.table(EVENTS.format(name=name, block_size=block_size))
    return project


def hostile_csv(path: Path) -> Path:
    path.write_text(HEADER + "\n".join(line for line, _ in HOSTILE_LINES) + "\n")
    return path


def live_rows(project: Project, table: str) -> list[dict[str, Any]]:
    rows = project.lh.query(f"SELECT id, n, amount, note, at FROM {table} ORDER BY id", "duckdb").to_pylist()
    return rows


def reject_summary(project: Project, table: str) -> list[tuple[Any, ...]]:
    return sorted((os.path.basename(r["source"]), r["line"], r["reason"]) for r in project.lh.rejects(table))


def test_hostile_values_are_rejects_and_good_rows_load_through_load_and_ingest_at_any_block_size(spark, project):
    """Invariant 7 and the one write path: the same file through ``load`` and through ``ingest``
    (at block sizes from 64 bytes to whole) gives the same live rows and the same rejects."""
    events(project, "via_load")
    for i, bs in enumerate(("64B", "300B", "64MB")):
        events(project, f"via_ingest{i}", bs)
    project.create("via_load", "via_ingest0", "via_ingest1", "via_ingest2")
    data = hostile_csv(project.root / "data" / "hostile.csv")
    good = sum(ok for _, ok in HOSTILE_LINES)

    r = project.lh.load("via_load", [str(data)])
    assert (r.rows_loaded, r.rows_rejected) == (good, len(HOSTILE_LINES) - good)
    want_rows = live_rows(project, "via_load")
    assert [row["id"] for row in want_rows] == [i + 1 for i, (_, ok) in enumerate(HOSTILE_LINES) if ok]
    assert want_rows[2]["note"] == '5" screen' and want_rows[-2]["note"] == "multi\nline"
    want_rejects = reject_summary(project, "via_load")
    reasons = " | ".join(x[2] for x in want_rejects)
    assert "outside 0001-01-01..9999-12-31 UTC" in reasons and "max_record_bytes" in reasons

    for i in range(3):
        land = project.root / f"landing{i}"
        land.mkdir()
        hostile_csv(land / "hostile.csv")
        rep = project.lh.ingest(f"via_ingest{i}", str(land), drain=True)
        assert (rep.rows, rep.rows_rejected) == (r.rows_loaded, r.rows_rejected)
        assert live_rows(project, f"via_ingest{i}") == want_rows
        assert reject_summary(project, f"via_ingest{i}") == want_rejects


def test_load_is_idempotent_by_content_and_force_loads_again(spark, project):
    events(project).create("events")
    a = project.text("a.csv", HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n2,1,x,a,2026-11-20T10:00:00Z\n")
    copy = project.text("copy_of_a.csv", Path(a).read_text())
    first = project.lh.load("events", [a])
    assert (first.rows_loaded, first.rows_rejected, len(first.files_skipped)) == (1, 1, 0)
    again = project.lh.load("events", [copy, a])  # same content under another name, and itself
    assert (again.rows_loaded, again.rows_rejected, len(again.files_skipped)) == (0, 0, 2)
    assert len(project.lh.rejects("events")) == 1  # no reject written twice
    forced = project.lh.load("events", [a], force=True)
    assert (forced.rows_loaded, forced.rows_rejected) == (1, 1)
    assert len(project.lh.rejects("events")) == 2 and len(live_rows(project, "events")) == 1
    # a changed file is new content: it loads
    Path(a).write_text(HEADER + "1,2,1.00,b,2026-11-20T10:00:00Z\n")
    assert project.lh.load("events", [a]).rows_loaded == 1
    assert live_rows(project, "events")[0]["n"] == 2


def test_content_that_contradicts_its_format_is_one_file_reject(spark, project):
    events(project).create("events")
    csv_file = project.text("rows.csv", HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n")
    jsonl = project.text("rows.jsonl", '{"id": 2, "at": "2026-11-20T10:00:00Z"}\n')
    ok = project.text("ok.csv", HEADER + "3,1,1.00,a,2026-11-20T10:00:00Z\n")
    r = project.lh.load("events", [csv_file, ok], "json")  # CSV read as JSON Lines
    assert r.rows_loaded == 0 and r.rows_rejected == 0 and len(r.files_rejected) == 2
    r = project.lh.load("events", [jsonl], "csv")  # JSON Lines read as CSV
    assert len(r.files_rejected) == 1 and r.rows_rejected == 0
    rejects = project.lh.rejects("events")
    assert len(rejects) == 3 and all(x["line"] is None for x in rejects)
    assert project.lh.load("events", [csv_file, ok, jsonl]).rows_loaded == 3  # right formats: all load


def test_a_landing_directory_is_one_source_whatever_its_spelling(spark, project):
    events(project).create("events")
    land = project.root / "landing"
    land.mkdir()
    (land / "a.csv").write_text(HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n2,1,1.00,a,2026-11-20T10:00:00Z\n")
    os.symlink(land, project.root / "l2")
    cwd = os.getcwd()
    os.chdir(project.root)
    try:
        spellings = ["landing", "./landing/", str(land), "l2", "l2/"]
        reports = [project.lh.ingest("events", s, drain=True) for s in spellings]
    finally:
        os.chdir(cwd)
    assert [rep.rows for rep in reports] == [2, 0, 0, 0, 0]
    log = project.lh.ingest_log("events")
    assert [(os.path.basename(e["file"]), e["status"]) for e in log] == [("a.csv", "ingested")]


def test_a_link_out_of_the_landing_directory_is_failed_without_revealing_its_target(spark, project):
    events(project).create("events")
    land = project.root / "landing"
    land.mkdir()
    secret = project.root / "secret.csv"
    secret.write_text("SECRET-CONTENT,x\n")
    os.symlink(secret, land / "evil.csv")
    (land / "inside.csv").write_text(HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n")
    os.symlink(land / "inside.csv", land / "alias.csv")  # a link that stays inside is fine
    rep = project.lh.ingest("events", str(land), drain=True)
    assert rep.rows == 2 and len(live_rows(project, "events")) == 1  # inside.csv and its alias
    log = {os.path.basename(e["file"]): e for e in project.lh.ingest_log("events")}
    assert log["evil.csv"]["status"] == "failed" and "outside the landing directory" in log["evil.csv"]["error"]
    everything = json.dumps([log, project.lh.rejects("events")], default=str)
    assert "SECRET" not in everything and "secret.csv" not in everything
    assert log["alias.csv"]["status"] == "ingested" and log["alias.csv"]["rows"] == 1


def test_follow_symlinks_allows_links_out(spark, project):
    project.table(textwrap.dedent(EVENTS.format(name="events", block_size="64MB")) + "  follow_symlinks: true\n")
    project.create("events")
    land = project.root / "landing"
    land.mkdir()
    outside = project.text("outside.csv", HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n")
    os.symlink(outside, land / "link.csv")
    assert project.lh.ingest("events", str(land), drain=True).rows == 1


def test_on_a_cluster_local_files_are_copied_where_executors_reach_them_and_named_as_given(spark, project,
                                                                                          monkeypatch):
    """Executors of a cluster cannot open a file of this machine: a batch Spark stages has its local
    files copied into its staging on the warehouse first (offsets and line numbers hold), rejects
    name the files as given, and the copies go once parsed. Here the session is a local one told
    it cannot see this machine's files (what ``sees_local_files`` answers for a cluster master)."""
    from lakehouse.ingest import batch

    events(project, block_size="256KB").create("events")
    lines = [f"{i},{i % 7},{i % 100}.25,n{i},2026-11-20T{i % 24:02d}:{i % 60:02d}:00Z" for i in range(1, 60_001)]
    lines[40_000] = "40001,x,1.00,bad,2026-11-20T10:00:00Z"
    big = project.text("big.csv", HEADER + "\n".join(lines) + "\n")  # about 2 MB: Spark stages it
    gone = project.text("gone.csv", HEADER + "1,1,1.00,a,2026-11-20T10:00:00Z\n")
    copied: list[tuple[str, str]] = []
    real_copy = batch.storage.copy_file
    monkeypatch.setattr(batch, "sees_local_files", lambda spark: False)
    monkeypatch.setattr(batch.storage, "copy_file", lambda src, dest: (copied.append((src, dest)), real_copy(src, dest)))
    Path(gone).unlink()
    result = project.lh.load("events", [big, gone])
    assert [src for src, _ in copied] == [big]
    assert copied[0][1].startswith(project.lh.paths("events").staging) and "/inputs/" in copied[0][1]
    assert (result.rows_loaded, result.rows_rejected) == (59_999, 1)
    assert [(f.source, f.error) for f in result.files_rejected] == [(gone, f"{gone}: no such file")]
    rejects = project.lh.rejects("events")
    assert sorted((r["source"], r["line"]) for r in rejects if r["line"] is not None) == [(big, 40_002)]
    assert not any("/inputs/" in (r["source"] or "") + (r["reason"] or "") for r in rejects)
    assert not any("/inputs/" in p for p in _files(project.lh.paths("events").staging))


def _files(folder: str) -> list[str]:
    return [os.path.join(root, f) for root, _, names in os.walk(folder) for f in names]
