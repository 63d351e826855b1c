"""Erasing from the archive (lakehouse.erasure.archive, step 4 of a delete), on a real table:
only the days holding a matched row are rewritten, at the unchanged cutoff, with vector files of
the erasure's generation; the books keep (rows out = rows in - deleted), ``verify`` passes on both
engines, a second run of the same erasure does nothing, a later archiving run and a later erasure
chain from it; a failure before the commit leaves nothing behind."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lakehouse import crashpoints
from lakehouse.archive import ledger_table, vectors
from lakehouse.archive.state import current_snapshot, day_rows
from lakehouse.erasure import archive
from lakehouse.erasure.predicate import parse
from lakehouse.erasure.selection import Selection
from lakehouse.errors import LakehouseError
from tests.conftest import SALES, Project

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
COLUMNS = ["id", "shop", "price", "at"]


def rows_of(n: int, day0: int = 16, days: int = 3) -> list[list[Any]]:
    return [[f"s{i}", i % 4, i * 0.5 if i % 7 else None, f"2026-11-{day0 + i % days}T{i % 24:02d}:00:00Z"]
            for i in range(n)]


def ok(lh: Any, table: str = "sales") -> None:
    bad = [c for c in lh.verify(table) if not c.ok]
    assert not bad, bad


def test_only_days_with_a_match_are_rewritten_and_the_books_keep(spark: Any, project: Project) -> None:
    project.table(SALES)
    project.create("sales")
    lh = project.lh
    data = rows_of(60)
    lh.load("sales", [project.csv("s.csv", COLUMNS, data)])
    lh.archive("sales", now=dt.datetime(2026, 11, 20, 12, tzinfo=UTC))  # 16, 17, 18 archived
    d, paths = lh.definition("sales"), lh.paths("sales")
    before = current_snapshot(paths.archive)
    from lakehouse.layout import layout

    old = {day: sorted(f.path for f in fs) for day, fs in layout(paths.archive, before.version).by_day().items()}
    cond = Selection(parse(d, "shop = 1 AND id <> 's1'").sql)  # s5, s9, ... on every day but one row kept
    want = [r for r in data if not (r[1] == 1 and r[0] != "s1")]
    matched_days = {dt.date(2026, 11, 16 + i % 3) for i in range(60) if i % 4 == 1 and i != 1}
    res = archive.erase(spark, d, paths, cond, 3)
    assert set(res.days) == matched_days and res.rows == 60 - len(want) and not res.already
    after = current_snapshot(paths.archive)
    assert (after.cutoff, after.erasures) == (before.cutoff, 3) and after.version == before.version + 1
    new = {day: sorted(f.path for f in fs) for day, fs in layout(paths.archive, after.version).by_day().items()}
    for day in old:  # a rewritten day has only new files; another day keeps its own
        assert (set(new[day]) & set(old[day]) == set()) if day in matched_days else new[day] == old[day]
    got = lh.query("SELECT id FROM sales ORDER BY id")
    assert sorted(got.column("id").to_pylist()) == sorted(r[0] for r in want)
    duck = lh.query("SELECT id FROM sales ORDER BY id", engine="duckdb")
    assert sorted(duck.column("id").to_pylist()) == sorted(r[0] for r in want)
    assert sum(day_rows(paths.archive, after.version).values()) == len(want)
    files, _ = vectors.list_files(paths.vectors)
    runs = {f.run for f in files}
    assert runs == {(before.cutoff, 0), (before.cutoff, 3)} or runs == {(before.cutoff, 3)}
    assert {f.day for f in files if f.run == (before.cutoff, 3)} == matched_days
    ok(lh)
    rows = [r for r in ledger_table.read_rows(paths) if r.erasure == 3]
    assert {r.day for r in rows} == matched_days and all(r.kind == "erasure" for r in rows)
    assert sum(r.rows_deleted for r in rows) == res.rows and all(r.out.rows == r.existing.rows - r.rows_deleted
                                                                  for r in rows)
    assert lh.lookup("sales", "2026-11-17", ["shop=1"]).range.count == sum(
        1 for r in want if r[1] == 1 and r[3].startswith("2026-11-17"))

    again = archive.erase(spark, d, paths, cond, 3)  # the same erasure: the archive holds it
    assert again.already and current_snapshot(paths.archive).version == after.version

    lh.load("sales", [project.csv("t.csv", COLUMNS, [["n1", 1, 2.0, "2026-11-17T05:00:00Z"],
                                                       ["s2", 9, 1.0, "2026-11-18T05:00:00Z"]])])
    lh.archive("sales", now=dt.datetime(2026, 11, 21, 12, tzinfo=UTC))  # late rows into erased days
    ok(lh)
    res = archive.erase(spark, d, paths, Selection(parse(d, "shop = 9 OR id = 'n1'").sql), 4)
    assert res.rows == 2 and set(res.days) == {dt.date(2026, 11, 17), dt.date(2026, 11, 18)}
    ok(lh)
    assert archive.erase(spark, d, paths, Selection(parse(d, "shop = 77").sql), 5).days == {}  # nothing matched: no commit
    assert current_snapshot(paths.archive).erasures == 4
    import pyarrow as pa

    keys = pa.table({"id": pa.array(["s2", "s3", "s3", "s40", "nobody"])})  # a join: s2 gone, s3 given twice
    res = archive.erase(spark, d, paths, Selection.of_keys(d, keys, inline=0), 6)  # the books checked in it
    assert res.rows == 2 and set(res.days) == {dt.date(2026, 11, 16 + 3 % 3), dt.date(2026, 11, 16 + 40 % 3)}
    ok(lh)
    assert {"s2", "s3", "s40"} & set(lh.query("SELECT id FROM sales").column("id").to_pylist()) == set()


def test_a_rewrite_that_fails_before_its_commit_leaves_nothing(spark: Any, project: Project,
                                                               monkeypatch: Any) -> None:
    project.table(SALES)
    project.create("sales")
    lh = project.lh
    lh.load("sales", [project.csv("s.csv", COLUMNS, rows_of(24))])
    lh.archive("sales", now=dt.datetime(2026, 11, 20, 12, tzinfo=UTC))
    d, paths = lh.definition("sales"), lh.paths("sales")
    before = current_snapshot(paths.archive)
    listed = sorted(f.path for f in vectors.list_files(paths.vectors)[0])

    def boom(point: str, *args: Any) -> None:
        if point == "erase_after_archive_write":
            raise LakehouseError("injected")

    monkeypatch.setattr(crashpoints, "reached", boom)
    with pytest.raises(LakehouseError, match="injected"):
        archive.erase(spark, d, paths, Selection(parse(d, "shop = 2").sql), 1)
    assert current_snapshot(paths.archive) == before
    assert sorted(f.path for f in vectors.list_files(paths.vectors)[0]) == listed
    from lakehouse import storage

    for day in ("2026-11-16", "2026-11-17", "2026-11-18"):
        names = storage.list_names(storage.join(paths.archive, f"event_date={day}"))
        assert not [n for n in names if "-e1" in n], names  # the rewrite's data files are gone
    assert storage.list_names(paths.staging) == []
    monkeypatch.undo()
    assert archive.erase(spark, d, paths, Selection(parse(d, "shop = 2").sql), 1).rows == 6
    ok(lh)
