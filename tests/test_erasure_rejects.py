"""Erasing from rejects (lakehouse.erasure.rejects, step 5 of a delete), on real tables: a reject
is matched by key or predicate where its record parses (JSON records; CSV lines with the header of
their source file), counted unmatched where it does not; the matched rows leave the table in one
commit, once, and no current file of the rejects holds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse import delta_log
from lakehouse.erasure.predicate import parse
from lakehouse.erasure.rejects import erase, match
from tests.conftest import ORDERS, Project

pytestmark = pytest.mark.spark


@pytest.fixture
def rejected(spark: Any, project: Project) -> Project:
    """orders with rejects of every kind: bad CSV rows (their file kept, and one whose file is
    gone), bad JSON rows, late rows of a producer, a file rejected whole."""
    project.table(ORDERS)
    project.create("orders")
    lh = project.lh
    kept = project.text("kept.csv", "id,amount,at\na1,1,2026-11-20T10:00:00Z\na2,1,not-a-time\nb1,x,2026-11-20T10:00:00Z\n"
                                    "e1,,not-a-time\n")
    gone = project.text("gone.csv", "amount,id,at\nx,a3,2026-11-20T10:00:00Z\n")
    lines = project.text("rows.jsonl", "".join(json.dumps(r) + "\n" for r in [
        {"id": "a4", "amount": "many", "at": "2026-11-20T10:00:00Z"}, {"amount": 5, "at": "2026-11-20T10:00:00Z"},
        {"id": "c1", "amount": 500, "at": "2026-11-20T10:00:00Z"}]))  # (c1 is a good row: loaded)
    whole = project.text("empty.parquet", "not parquet")
    lh.load("orders", [kept, gone, lines, whole])
    Path(gone).unlink()
    with lh.table("orders").producer("p") as p:
        p.insert([{"id": "z", "amount": 1, "at": "2026-11-20T12:00:00Z"}])
        p.insert([{"id": "a5", "amount": 700, "at": "2026-11-20T11:00:00Z"},
                  {"id": "d1", "amount": 7, "at": "2026-11-20T11:30:00Z"}])  # late: behind 12:00
    return project


def records(project: Project) -> list[str]:
    return sorted(r["record"] or f"<file {Path(r['source']).name}>" for r in project.lh.rejects("orders"))


def current_bytes(project: Project) -> bytes:
    paths = project.lh.paths("orders")
    out = b""
    for rel in delta_log.add_actions(paths.rejects).column("path").to_pylist():
        out += Path(delta_log.file_uri(paths.rejects, rel)).read_bytes()
    return out


def test_rejects_are_erased_by_key_where_their_records_parse(rejected: Project) -> None:
    p = rejected
    d, paths = p.lh.definition("orders"), p.lh.paths("orders")
    before = records(p)
    assert len(before) == 9  # a2, b1, e1, a3 (CSV), a4, the row without id (JSON), a5, d1 (late), the file
    keys = pa.table({"id": ["a1", "a2", "a3", "a4", "a5", "b1", "nobody"]})
    found = match(d, paths, keys=keys)
    # a2 (a CSV line with its file's header), a4 (JSON), a5 (a late row), b1 (CSV): matched;
    # a3's file is gone, the JSON row without id has no key: unmatched; the whole file has no record
    assert found.rows == 4 and found.unmatched == 2
    assert erase(paths, found, 1) == (4, 2)
    left = records(p)
    assert len(left) == 5 and not any(k in r for r in left for k in ('"a2', "a2,", '"a4"', '"a5"', "b1,"))
    assert b"b1,x" not in current_bytes(p) and b"a5" not in current_bytes(p)
    assert erase(paths, found, 1) == (4, 2)  # the same erasure again: nothing done, its commit's figures
    assert records(p) == left


def test_rejects_are_erased_by_predicate_over_the_columns_it_reads(rejected: Project) -> None:
    p = rejected
    d, paths = p.lh.definition("orders"), p.lh.paths("orders")
    found = match(d, paths, predicate=parse(d, "amount >= 500"))
    # a5 (700, late); b1's, a4's amounts do not read and a3's file is gone: unmatched
    assert found.rows == 1 and found.unmatched == 3
    erase(paths, found, 1)
    assert not any('"a5"' in r for r in records(p)) and len(records(p)) == 8
    by_day = match(d, paths, predicate=parse(d, "event_date = DATE '2026-11-20' AND id LIKE 'b%'"))
    assert by_day.rows == 1  # b1: its event time reads, its amount does not (not read by the predicate)
    empty = match(d, paths, predicate=parse(d, "amount IS NULL AND id LIKE 'e%'"))
    assert empty.rows == 1  # e1: an empty CSV field is NULL, as ingest reads it


def test_rejects_appended_between_match_and_erase_are_matched_again(rejected: Project) -> None:
    from lakehouse.erasure.rejects import erase_matching

    p = rejected
    d, paths = p.lh.definition("orders"), p.lh.paths("orders")
    stale = match(d, paths, keys=pa.table({"id": ["a2", "b9"]}))
    p.lh.load("orders", [p.text("more.csv", "id,amount,at\nb9,y,2026-11-20T10:00:00Z\n")])  # a new reject of b9
    with pytest.raises(Exception, match="committed by another writer"):
        erase(paths, stale, 1)
    assert erase_matching(d, paths, 1, keys=pa.table({"id": ["a2", "b9"]})) == (2, 2)
    assert not any(r.startswith(("a2,", "b9,")) for r in records(p))


def test_a_csv_source_written_again_since_the_reject_is_not_read_for_its_header(rejected: Project) -> None:
    """A daily file name written again with its columns in another order: its header is not the
    rejected line's, so those records are unmatched, never read under the wrong columns."""
    import os
    import time

    p = rejected
    d, paths = p.lh.definition("orders"), p.lh.paths("orders")
    kept = p.root / "data" / "kept.csv"
    kept.write_text("amount,id,at\n")
    later = time.time() + 5
    os.utime(kept, (later, later))
    found = match(d, paths, keys=pa.table({"id": ["a2", "b1", "e1"]}))
    assert found.rows == 0 and found.unmatched == 5  # a2, b1, e1 (the file changed), a3 (gone), no id
