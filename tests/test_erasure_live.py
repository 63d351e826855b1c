"""Erasing from live (lakehouse.erasure.live, step 3 of a delete), on a real table: the rows a
predicate matches, per day, on every day (rows below the cutoff waiting for the next archiving
run too); the DELETE commits once with the erasure's number, and a second run of it deletes
nothing more, even when rows matching it arrived since (another erasure's). Keys select the same
rows as an IN list and as a join (lakehouse.erasure.selection), compound keys of every type too."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lakehouse import delta_log
from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.erasure.live import erase
from lakehouse.erasure.predicate import parse, read_keys
from lakehouse.erasure.selection import Selection, matched
from tests.conftest import Project

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc
ORDERS = """
name: orders
columns:
  - {name: id, type: string, nullable: false}
  - {name: shop, type: int}
  - {name: at, type: timestamp, nullable: false}
primary_key: [id]
event_time: at
archive: {delay: 1d}
"""


def test_live_rows_of_every_day_are_erased_once(spark: Any, project: Project) -> None:
    project.table(ORDERS)
    project.create("orders")
    lh = project.lh
    rows = [{"id": f"o{i}", "shop": i % 3, "at": f"2026-11-{18 + i % 3}T10:00:00Z"} for i in range(12)]
    lh.load("orders", [project.csv("o.csv", ["id", "shop", "at"], [[r["id"], r["shop"], r["at"]] for r in rows])])
    lh.archive("orders", now=dt.datetime(2026, 11, 19, 12, tzinfo=UTC))  # 11-18 archived
    late = project.csv("late.csv", ["id", "shop", "at"], [["x1", 1, "2026-11-18T11:00:00Z"]])
    lh.load("orders", [late])  # below the cutoff: waits in live for the next run
    d, paths = lh.definition("orders"), lh.paths("orders")
    cond = Selection(parse(d, "shop = 1").sql)
    assert matched(spark, paths.live, cond) == {dt.date(2026, 11, 19): 4, dt.date(2026, 11, 18): 1}
    assert erase(spark, paths, cond, 1) == 5
    assert delta_log.txn_version(paths.live, ERASURE_APP_ID) == 1
    assert matched(spark, paths.live, cond) == {}
    lh.load("orders", [project.csv("more.csv", ["id", "shop", "at"], [["y1", 1, "2026-11-20T09:00:00Z"]])])
    assert erase(spark, paths, cond, 1) == 5  # erasure 1 is done (what it deleted): a row loaded since is not its
    assert sorted(r["id"] for r in delta_log.scan(paths.live).to_pylist()) == ["o11", "o2", "o5", "o8", "y1"]
    assert erase(spark, paths, cond, 2) == 1


VISITS = """
name: visits
columns:
  - {name: user, type: long, nullable: false}
  - {name: site, type: string, nullable: false}
  - {name: at, type: timestamp, nullable: false}
  - {name: day, type: date}
  - {name: amount, type: 'decimal(10,2)'}
primary_key: [user, site, at]
event_time: at
"""


def test_keys_select_the_same_rows_as_an_in_list_and_as_a_join(spark: Any, project: Project, tmp_path: Any) -> None:
    from lakehouse.archive.write import SIDE_COLUMN

    project.table(VISITS)
    project.create("visits")
    lh = project.lh
    rows = [[u, f"site,{u % 3}" if u % 2 else f"s'{u % 3}", f"2026-11-{17 + u % 3}T{u % 24:02d}:00:00.{u:06d}Z",
             "2026-11-01", f"{u}.25"] for u in range(60)]
    lh.load("visits", [project.csv("v.csv", ["user", "site", "at", "day", "amount"], rows)])
    d, paths = lh.definition("visits"), lh.paths("visits")
    wanted = rows[::4]
    keys = tmp_path / "keys.csv"
    with keys.open("w", newline="") as f:
        import csv

        w = csv.writer(f)
        w.writerow(["site", "at", "user"])  # the key's columns in any order
        w.writerows([[r[1], r[2], r[0]] for r in wanted] + [["nowhere", "2026-11-17T00:00:00Z", 1]])
    table = read_keys(d, str(keys))
    inline, joined = Selection.of_keys(d, table), Selection.of_keys(d, table, inline=0)
    assert inline.keys is None and joined.keys is not None and joined.condition == ""
    days = matched(spark, paths.live, inline)
    assert sum(days.values()) == len(wanted) and matched(spark, paths.live, joined) == days
    live_rows = spark.read.format("delta").load(paths.live)
    for sel in (inline, joined):
        sided = sel.sided(spark, live_rows, SIDE_COLUMN)
        assert sided.count() == len(rows)
        assert sorted(r["user"] for r in sided.where(f"{SIDE_COLUMN} = 'deleted'").collect()) == \
            [r[0] for r in wanted]
    assert erase(spark, paths, joined, 1) == len(wanted)
    assert delta_log.txn_version(paths.live, ERASURE_APP_ID) == 1
    assert matched(spark, paths.live, inline) == {}
    assert erase(spark, paths, joined, 1) == len(wanted)  # done: what its commit deleted
    assert sorted(r["user"] for r in delta_log.scan(paths.live).to_pylist()) == \
        [u for u in range(60) if u % 4]
