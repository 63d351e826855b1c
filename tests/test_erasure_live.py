"""Erasing from live (lakehouse.erasure.live, step 3 of a delete), on a real table: the rows a
predicate matches, per day, on every day (rows below the cutoff waiting for the next archiving
run too); the DELETE commits once with the erasure's number, and a second run of it deletes
nothing more, even when rows matching it arrived since (another erasure's)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lakehouse import delta_log
from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.erasure.live import erase, matched
from lakehouse.erasure.predicate import parse
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
    cond = parse(d, "shop = 1").sql
    assert matched(spark, paths.live, cond) == {dt.date(2026, 11, 19): 4, dt.date(2026, 11, 18): 1}
    assert erase(spark, paths, cond, 1) == 5
    assert delta_log.txn_version(paths.live, ERASURE_APP_ID) == 1
    assert matched(spark, paths.live, cond) == {}
    lh.load("orders", [project.csv("more.csv", ["id", "shop", "at"], [["y1", 1, "2026-11-20T09:00:00Z"]])])
    assert erase(spark, paths, cond, 1) == 5  # erasure 1 is done (what it deleted): a row loaded since is not its
    assert sorted(r["id"] for r in delta_log.scan(paths.live).to_pylist()) == ["o11", "o2", "o5", "o8", "y1"]
    assert erase(spark, paths, cond, 2) == 1
