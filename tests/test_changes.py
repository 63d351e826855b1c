"""The change feed (``lakehouse.stream.changes``) on real Spark and Delta: each release's rows as
it put them into the table, each once, with its release, time, watermark and producer; archiving's
moves, compaction and a later release of the same key are not changes of the earlier release.
Arrow (``changes``), a Spark batch (``read_changes``) and a stream (``read_stream``) resumed from
its checkpoint agree. The downstream query killed and restarted is in test_changes_kills.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lakehouse.stream.changes import PRODUCER, RELEASE, RELEASED_AT, WATERMARK, FeedGone
from tests.conftest import Project

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
ORDERS = """
name: orders
columns:
  - {name: id, type: string, nullable: false}
  - {name: amount, type: 'decimal(10,2)'}
  - {name: at, type: timestamp, nullable: false}
primary_key: [id]
event_time: at
archive: {delay: 1d}
"""


def row(i: str, amount: str, at: str) -> dict[str, Any]:
    return {"id": i, "amount": amount, "at": at}


def feed_rows(table: Any) -> list[tuple[int, str, str, str | None]]:
    """(release, id, amount, producer) of every feed row, in order."""
    return sorted((r[RELEASE], r["id"], str(r["amount"]), r[PRODUCER]) for r in table.to_pylist())


@pytest.fixture
def orders(spark: Any, project: Project) -> Project:
    project.table(ORDERS)
    project.create("orders")
    return project


def test_the_feed_is_each_release_once_and_nothing_else(orders: Project) -> None:
    p = orders
    t = p.lh.table("orders")
    with t.producer("a") as a:
        a.insert([row("x1", "1", "2026-11-18T10:00:00Z"), row("x2", "2", "2026-11-19T10:00:00Z"),
                  row("x3", "3", "2026-11-20T10:00:00Z")])
        a.insert([row("x2", "20", "2026-11-19T11:00:00Z"), row("x4", "4", "2026-11-20T11:00:00Z")])  # x2 again
    arch = p.lh.archive("orders", now=dt.datetime(2026, 11, 21, 0, 30, tzinfo=UTC))  # x1, x2 archived
    assert arch.rows_archived == 2
    p.lh.optimize("orders")  # compaction rewrites files: not a change
    p.lh.load("orders", [p.csv("late.csv", ["id", "amount", "at"], [["x5", "5", "2026-11-18T12:00:00Z"],
                                                                   ["x3", "30", "2026-11-20T12:00:00Z"]])])
    p.lh.archive("orders", now=dt.datetime(2026, 11, 21, 1, 30, tzinfo=UTC))  # the late row moves too
    feed = t.changes()
    assert feed_rows(feed) == [(1, "x1", "1.00", "a"), (1, "x2", "2.00", "a"), (1, "x3", "3.00", "a"),
                               (2, "x2", "20.00", "a"), (2, "x4", "4.00", "a"),
                               (3, "x3", "30.00", "load"), (3, "x5", "5.00", "load")]
    assert feed.column_names == [*p.lh.definition("orders").visible_columns, RELEASE, RELEASED_AT, WATERMARK,
                                 PRODUCER]
    by_release = {r[RELEASE]: r for r in feed.to_pylist()}
    assert by_release[1][WATERMARK] == dt.datetime(2026, 11, 20, 10, tzinfo=UTC)  # a held it at its latest row
    assert by_release[1][RELEASED_AT] <= by_release[2][RELEASED_AT] <= by_release[3][RELEASED_AT]
    assert {r["event_date"] for r in feed.to_pylist() if r["id"] == "x5"} == {dt.date(2026, 11, 18)}
    # the latest of each key, from the feed, is the split view
    latest: dict[str, Any] = {}
    for r in sorted(feed.to_pylist(), key=lambda r: r[RELEASE]):
        latest[r["id"]] = str(r["amount"])
    view = {r["id"]: str(r["amount"]) for r in p.lh.query("SELECT id, amount FROM orders", "duckdb").to_pylist()}
    assert latest == view
    # spans: release numbers and times, inclusive
    assert feed_rows(t.changes(2, 2)) == [(2, "x2", "20.00", "a"), (2, "x4", "4.00", "a")]
    assert feed_rows(t.changes(start=3)) == feed_rows(feed)[-2:]
    second = by_release[2][RELEASED_AT]
    assert {r[0] for r in feed_rows(t.changes(start=second))} == {2, 3}
    assert {r[0] for r in feed_rows(t.changes(end=second))} == {1, 2}
    assert t.changes(start=4).num_rows == 0
    # the same in Spark
    spark_rows = t.read_changes().toArrow()
    assert feed_rows(spark_rows) == feed_rows(feed)
    assert feed_rows(t.read_changes(2, 2).toArrow()) == feed_rows(t.changes(2, 2))


def test_a_feed_stream_resumes_after_the_last_release_it_took(orders: Project, spark: Any, tmp_path: Path) -> None:
    p = orders
    t = p.lh.table("orders")
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def run() -> None:
        q = t.read_stream().writeStream.format("parquet").option("path", out).option("checkpointLocation", ck).start()
        q.processAllAvailable()
        q.stop()

    with t.producer("a") as a:
        a.insert([row("x1", "1", "2026-11-20T10:00:00Z")])
        run()
        a.insert([row("x1", "2", "2026-11-20T10:30:00Z"), row("x2", "2", "2026-11-20T11:00:00Z")])
        a.insert([row("x3", "3", "2026-11-20T12:00:00Z")])
        run()
        run()  # nothing new: nothing written
    got = sorted((r[RELEASE], r["id"]) for r in spark.read.parquet(out).collect())
    assert got == [(1, "x1"), (2, "x1"), (2, "x2"), (3, "x3")]
    # "latest" starts after what is committed now
    q = t.read_stream(start="latest").writeStream.format("memory").queryName("feed_latest").start()
    try:
        q.processAllAvailable()
        with t.producer("b") as b:
            b.insert([row("y", "9", "2026-11-20T13:00:00Z")])
        q.processAllAvailable()
        assert [(r[RELEASE], r["id"], r[PRODUCER]) for r in spark.sql("SELECT * FROM feed_latest").collect()] == \
            [(4, "y", "b")]
    finally:
        q.stop()


def test_a_release_whose_files_are_gone_is_refused_in_one_line(orders: Project) -> None:
    p = orders
    t = p.lh.table("orders")
    with t.producer("a") as a:
        a.insert([row("x1", "1", "2026-11-18T10:00:00Z")])
    p.lh.archive("orders", now=dt.datetime(2026, 11, 21, tzinfo=UTC))  # purged from live
    p.lh.vacuum("orders", retain="0h", force=True)  # the release's file is gone now
    with pytest.raises(FeedGone, match="release 1") as e:
        t.changes()
    assert "\n" not in str(e.value)


def test_releases_from_before_a_column_was_added_read_it_as_null(orders: Project) -> None:
    p = orders
    t = p.lh.table("orders")
    with t.producer("a") as a:
        a.insert([row("x1", "1", "2026-11-20T10:00:00Z")])
    p.table(ORDERS.replace("primary_key:", "  - {name: note, type: string}\nprimary_key:"))
    p.migration("0002_add_note.py", """
        def upgrade(ctx):
            ctx.add_columns("orders", [{"name": "note", "type": "string"}])
    """)
    p.lh.migrate()
    with p.lh.table("orders").producer("a") as a:
        a.insert([{**row("x2", "2", "2026-11-20T11:00:00Z"), "note": "new"}])
    feed = p.lh.table("orders").changes()
    assert sorted((r[RELEASE], r["id"], r["note"]) for r in feed.to_pylist()) == [(1, "x1", None), (2, "x2", "new")]


def test_feed_positions_are_checked_in_one_line(orders: Project) -> None:
    from lakehouse.errors import LakehouseError

    t = orders.lh.table("orders")
    with t.producer("a") as a:
        a.insert([row("x1", "1", "2026-11-20T10:00:00Z")])
        a.insert([row("x2", "2", "2026-11-20T11:00:00Z")])
    for bad in (0, -1, 4, "soon", True, 1.5):
        with pytest.raises(LakehouseError, match="bad feed position") as e:
            t.changes(start=bad)
        assert "\n" not in str(e.value)
    assert t.changes(start=3).num_rows == 0  # the next release: nothing yet
    assert t.changes(start=2, end=1).num_rows == 0
    assert t.changes(start=dt.date(2020, 1, 1)).num_rows == 2  # a date: from its midnight
    with pytest.raises(LakehouseError, match="bad feed position"):
        t.read_stream(start=0)
