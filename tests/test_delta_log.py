"""Operational Delta properties (statistics columns, retention, checkpoints) and long logs: the
tables lakehouse creates carry them, old tables get them by ``ensure_properties`` (once), real
writers checkpoint every ``delta.checkpointInterval`` commits, and a table of 2,000 commits is
read right by Spark, delta-rs and DuckDB from a checkpoint. Speed is measured by
``lakehouse bench open``, not here."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse import delta_log
from lakehouse.bench.open import build_long_table, counts, log_tail
from lakehouse.bench.workload import BENCH_TABLE
from lakehouse.definitions import TableDefinition
from lakehouse.durations import Duration
from lakehouse.physical import (
    BASE_PROPERTIES,
    PhysicalColumn,
    PhysicalTable,
    _wanted,
    create_delta,
    delta_interval,
    delta_properties,
    describe,
    drift,
    ensure_properties,
    stats_columns,
)
from tests.conftest import TRIPS_SMALL

# no key (the live writer appends: quick); sort columns with a boolean (Delta keeps no min/max for it)
# and the event time again (statistics name it once)
TRIPS = TRIPS_SMALL.replace("primary_key: [trip_id]\n", "").replace(
    "sort_columns: [city_id, status, fx_rate]", "sort_columns: [city_id, is_pool, event_time, trip_id]") + \
    "jobs: {retention: 36h}\n"
STATS = "event_time,city_id,trip_id"


def definition(text: str) -> TableDefinition:
    return TableDefinition.model_validate(yaml.safe_load(text))


def stats_keys(path: str) -> set[frozenset[str]]:
    """The column sets of the min/max statistics of a table's add actions (from its JSON log)."""
    out = set()
    for f in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add.get("stats"):
                out.add(frozenset(json.loads(add["stats"]).get("minValues", {})))
    return out


# -- pure ---------------------------------------------------------------------------------------

def test_properties_follow_the_definition() -> None:
    d = definition(TRIPS)
    assert stats_columns(d) == ["event_time", "city_id", "trip_id"]  # once each; no boolean
    keyed = definition(TRIPS_SMALL)
    assert stats_columns(keyed) == ["event_time", "trip_id", "city_id", "status", "fx_rate"]
    live = delta_properties(d, "live")
    assert live == {
        **BASE_PROPERTIES,
        "delta.dataSkippingStatsColumns": STATS,
        "delta.deletedFileRetentionDuration": "interval 36 hours",
        "delta.logRetentionDuration": "interval 30 days",
        "delta.checkpointInterval": "10",
        "delta.checkpoint.writeStatsAsJson": "true",
    }
    assert delta_properties(d, "archive") == live
    assert "delta.dataSkippingStatsColumns" not in delta_properties(d, "rejects")
    assert not any(k.startswith("delta.") for k in d.properties())  # outside the drift check
    long = definition(TRIPS.replace("retention: 36h", "retention: 90d"))
    assert delta_properties(long, "live")["delta.logRetentionDuration"] == "interval 90 days"
    assert [delta_interval(Duration.parse(s)) for s in ("7d", "90m", "61s", "1500ms")] == \
        ["interval 7 days", "interval 90 minutes", "interval 61 seconds", "interval 1500 milliseconds"]
    with pytest.raises(ValueError, match="unknown table part"):
        delta_properties(d, "vectors")
    # an old table without a column (added later by a migration) gets statistics on those it has
    cols = tuple(PhysicalColumn(n, t, True) for n, t in (("event_time", "timestamp"), ("city_id", "int")))
    old = PhysicalTable("/x", 3, cols, ("event_date",), {})
    assert _wanted(d, "live", old)["delta.dataSkippingStatsColumns"] == "event_time,city_id"
    bare = PhysicalTable("/x", 3, (PhysicalColumn("event_time", "boolean", True),), ("event_date",), {})
    assert "delta.dataSkippingStatsColumns" not in _wanted(d, "live", bare)


# -- Spark, delta-rs, DuckDB --------------------------------------------------------------------

def append(spark: Any, d: TableDefinition, paths: Any, k: int, n: int = 2) -> None:
    """One commit through the live writer of loads, ingest and producers (``commit_live``): ``n``
    trips of day 2026-11-01 + k % 3, load ``load-k``."""
    from lakehouse.live import commit_live
    from lakehouse.staging import FILE_COLUMN, LINE_COLUMN

    day = dt.date(2026, 11, 1) + dt.timedelta(days=k % 3)
    at = dt.datetime.combine(day, dt.time(10), dt.timezone.utc)
    data = [(f"T{k}-{i}", i % 5, i % 3, 1.0, 10.5, None, bool(i % 2), day, at + dt.timedelta(minutes=i), "f", i)
            for i in range(n)]
    ddl = f"{d.spark_ddl(with_partition=False, hidden=False)}, {FILE_COLUMN} STRING, {LINE_COLUMN} LONG"
    commit_live(spark, d, paths, spark.createDataFrame(data, ddl), f"load-{k}", {day}, n)


@pytest.mark.spark
def test_created_tables_carry_the_properties(spark: Any, project: Any) -> None:
    project.table(TRIPS).create("trips")
    d, paths = project.lh.definition("trips"), project.lh.paths("trips")
    for part, path in (("live", paths.live), ("archive", paths.archive), ("rejects", paths.rejects)):
        t = describe(path)
        assert t is not None
        assert delta_properties(d, part).items() <= t.properties.items(), part
    assert drift(d, paths) == []
    assert ensure_properties(spark, paths, d) == {}  # nothing differs: no commit
    assert describe(paths.live).version == 0  # type: ignore[union-attr]


@pytest.mark.spark
def test_ensure_properties_updates_an_old_table_once_then_writers_checkpoint(spark: Any, project: Any) -> None:

    from lakehouse import rejects

    project.table(TRIPS)
    d, paths = project.lh.definition("trips"), project.lh.paths("trips")
    # created as create_table did before the operational properties existed
    create_delta(spark, paths.live, d.spark_ddl(), True, d.properties())
    create_delta(spark, paths.archive, d.spark_ddl(), True, d.properties())
    create_delta(spark, paths.rejects, rejects.DDL, False, {"lakehouse.table": d.name})
    append(spark, d, paths, 0, 5)
    assert drift(d, paths) == []
    assert frozenset(STATS.split(",")) not in stats_keys(paths.live)  # Delta's default: 32 columns
    before = {p: describe(p).version for p in (paths.live, paths.archive, paths.rejects)}  # type: ignore[union-attr]

    changed = ensure_properties(spark, paths, d)
    assert set(changed) == {"live", "archive", "rejects"}
    for part in changed:
        assert changed[part] == {k: v for k, v in delta_properties(d, part).items() if k not in BASE_PROPERTIES}
    after = {p: describe(p).version for p in before}  # type: ignore[union-attr]
    assert after == {p: v + 1 for p, v in before.items()}  # one commit each
    assert ensure_properties(spark, paths, d) == {}  # idempotent: nothing differs, nothing committed
    assert {p: describe(p).version for p in before} == after  # type: ignore[union-attr]
    assert drift(d, paths) == []

    # the live writer's commits: versions 3 .. 11, a checkpoint at 10 that _last_checkpoint names
    for k in range(1, 10):
        append(spark, d, paths, k)
    tail = log_tail(paths.live)
    assert tail["latest_version"] == 11
    assert tail["last_checkpoint"] == 10 and tail["json_after_checkpoint"] == 1
    assert (Path(paths.live) / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    # files written after the change have statistics on exactly the stats columns; old ones keep theirs
    assert frozenset(STATS.split(",")) in stats_keys(paths.live) and len(stats_keys(paths.live)) == 2
    assert counts(spark, paths.live) == {"spark": 23, "duckdb": 23, "delta_rs": 23}
    assert spark.read.format("delta").load(paths.live).where("city_id = 1").count() == 10


@pytest.mark.spark
def test_a_table_of_600_commits_is_read_from_a_checkpoint(spark: Any, tmp_path: Path) -> None:
    """25 days of hourly commits (appends, days rewritten, deletes; `bench open` measures 2,000 and
    more): every engine opens it from a checkpoint at most 10 commits back and counts alike."""
    path = str(tmp_path / "long")
    made = build_long_table(spark, path, definition(BENCH_TABLE), 600, rows=5, spark_tail=2)
    tail = log_tail(path)
    assert tail["latest_version"] == 599
    assert tail["last_checkpoint"] is not None and tail["json_after_checkpoint"] <= 10
    assert made["replaces"] > 0 and made["deletes"] > 0
    assert counts(spark, path) == {"spark": made["rows"], "duckdb": made["rows"], "delta_rs": made["rows"]}
    assert delta_log.open_table(path).version() == 599
