"""``delta_log.replace_partitions``: the metadata-only commit of files a job wrote itself (the
one-pass archive's): the named partitions' files replaced by the new ones, a SetTransaction and
userMetadata in the same commit, the table's metadata untouched, and a commit on top of a version
that is no longer the latest refused with nothing changed. delta-rs only: no Spark."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakehouse import delta_log
from lakehouse.delta_log import NewFile, StaleVersion

PROPS = {"delta.checkpointInterval": "10", "delta.dataSkippingStatsColumns": "a"}


def _table(root: Path) -> str:
    path = str(root / "t")
    write_deltalake(path, pa.table({"a": pa.array([1, 2, 3], pa.int64()),
                                    "event_date": pa.array(["2026-01-01", "2026-01-02", "2026-01-02"])}),
                    partition_by=["event_date"], configuration=PROPS)
    return path


def _file(table: str, day: str, values: list[int], name: str) -> NewFile:
    rel = f"event_date={day}/{name}.parquet"
    os.makedirs(f"{table}/event_date={day}", exist_ok=True)
    pq.write_table(pa.table({"a": pa.array(values, pa.int64())}), f"{table}/{rel}")
    stats = {"numRecords": len(values), "minValues": {"a": min(values)}, "maxValues": {"a": max(values)},
             "nullCount": {"a": 0}}
    return NewFile(rel, os.path.getsize(f"{table}/{rel}"), {"event_date": day}, json.dumps(stats),
                   int(time.time() * 1000))


def _rows(table: str) -> list[tuple[str, int]]:
    return sorted((r["event_date"], r["a"]) for r in delta_log.scan(table, "SELECT * FROM t").to_pylist())


def test_the_named_partitions_are_replaced_with_the_txn_and_metadata_in_one_commit(tmp_path: Path) -> None:
    table = _table(tmp_path)
    new = [_file(table, "2026-01-02", [7, 8], "one"), _file(table, "2026-01-03", [9], "two")]
    v = delta_log.replace_partitions(table, 0, new, "event_date", ["2026-01-02", "2026-01-03"],
                                     txn=("lakehouse.cutoff", 1234), user_metadata='{"books": 1}')
    assert v == 1 == delta_log.version(table)
    assert _rows(table) == [("2026-01-01", 1), ("2026-01-02", 7), ("2026-01-02", 8), ("2026-01-03", 9)]
    assert delta_log.txn_version(table, "lakehouse.cutoff") == 1234
    assert delta_log.history(table, 1)[0]["userMetadata"] == '{"books": 1}'
    actions = [json.loads(line) for line in (Path(table) / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    kinds = sorted(next(iter(a)) for a in actions)
    assert kinds == ["add", "add", "commitInfo", "remove", "txn"]  # no metaData: schema and properties as they were
    assert DeltaTable(table).metadata().configuration == PROPS
    adds = delta_log.add_actions(table).to_pylist()
    assert sorted(a["num_records"] for a in adds) == [1, 1, 2]  # the statistics are the table's


def test_a_commit_on_a_version_that_is_no_longer_the_latest_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    table = _table(tmp_path)
    delta_log.replace_partitions(table, 0, [_file(table, "2026-01-01", [5], "first")], "event_date", ["2026-01-01"])
    before = _rows(table)
    with pytest.raises(StaleVersion, match="version 1 was committed by another writer"):
        delta_log.replace_partitions(table, 0, [_file(table, "2026-01-02", [6], "late")], "event_date",
                                     ["2026-01-02"], txn=("lakehouse.cutoff", 99))
    assert delta_log.version(table) == 1 and _rows(table) == before
    assert delta_log.txn_version(table, "lakehouse.cutoff") is None


def test_no_partitions_to_replace_commits_the_txn_alone(tmp_path: Path) -> None:
    table = _table(tmp_path)
    before = _rows(table)
    assert delta_log.replace_partitions(table, 0, [], "event_date", [], txn=("lakehouse.cutoff", 7)) == 1
    assert _rows(table) == before and delta_log.txn_version(table, "lakehouse.cutoff") == 7
