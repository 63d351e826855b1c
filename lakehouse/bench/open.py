"""``lakehouse bench open``: opening a table with a long Delta log (a year of hourly commits)
against the same data files in one commit, on Spark, DuckDB and delta-rs."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from lakehouse.bench.workload import BENCH_TABLE


def _hour_rows(schema: Any, hour: int, rows: int, start_us: int, load: str) -> Any:
    """``rows`` generated trips of one hour (``BENCH_TABLE``'s columns, the load, the day) as an
    Arrow table of ``schema`` (the Delta table's)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(hour)
    ts = pa.array(start_us + hour * 3_600_000_000 + rng.integers(0, 3_600_000_000, rows), pa.int64()) \
        .cast(pa.timestamp("us", tz="UTC"))
    return pa.table({
        "trip_id": pa.array([f"H{hour}-{k}" for k in range(rows)]),
        "city_id": pa.array(rng.integers(1, 40, rows).astype(np.int32)),
        "status": pa.array(rng.integers(0, 4, rows).astype(np.int32)),
        "fx_rate": pa.array(np.round(rng.random(rows) + 0.5, 6)),
        "fare_total": pa.array(np.round(rng.random(rows) * 80, 2)),
        "distance_km": pa.array(np.round(rng.random(rows) * 30, 2)),
        "vehicle_type": pa.array(np.array(["economy", "comfort", "xl", "moto"])[rng.integers(0, 4, rows)]),
        "event_time": ts,
        "_lh_load": pa.array([load] * rows),
        "event_date": ts.cast(pa.date32()),
    }).cast(schema)


def build_long_table(spark: Any, path: str, definition: Any, commits: int, rows: int = 40, spark_tail: int = 12,
                     start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)) -> dict[str, Any]:
    """A live-like table of ``definition`` with ``commits`` commits (versions 0 .. commits - 1),
    the way a year of hourly jobs leaves it: created by Spark with lakehouse's properties, then
    one commit an hour of event time, written by delta-rs (about 100 times faster a commit than
    Spark, and checkpointing by the same ``delta.checkpointInterval``): mostly appends of ``rows``
    rows, every 24th a day rewritten sorted into one file (an overwrite of the day two days back,
    as compaction and archiving do: removes and an add), every 97th a delete of some of a day's
    rows. The last ``spark_tail`` commits are Spark appends, so the table's latest checkpoint is
    written by Spark from the history delta-rs wrote, as our Spark writers leave it.

    Returns what was written (``rows``: the table's row count)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    from deltalake.transaction import PostCommitHookProperties

    from lakehouse.definitions import PARTITION_COLUMN
    from lakehouse.physical import create_delta, delta_properties

    if commits < spark_tail + 2:
        raise ValueError(f"commits must be at least {spark_tail + 2}, got {commits}")
    create_delta(spark, path, definition.spark_ddl(), True,
                 {**definition.properties(), **delta_properties(definition, "live")})
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    # checkpoints by delta.checkpointInterval; expired log files are looked for at checkpoints
    # only, as Spark does (delta-rs would list the whole log after every commit)
    hook = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
    start_us = int(start.timestamp()) * 1_000_000
    total = replaces = deletes = 0
    t0 = time.monotonic()
    last_rs = commits - spark_tail  # delta-rs writes versions 1 .. last_rs - 1
    for v in range(1, last_rs):
        day = start + dt.timedelta(hours=v - 1)
        old = (day - dt.timedelta(days=2)).date().isoformat()
        # each commit opens the table afresh (from its last checkpoint), as a job does: a long-
        # lived DeltaTable handle gets slower with every commit it makes (delta-rs 1.6)
        if v % 24 == 0 and v > 72:
            part = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(
                f"SELECT * FROM t WHERE {PARTITION_COLUMN} = DATE '{old}' ORDER BY city_id, status, fx_rate, "
                "event_time, trip_id").read_all())
            write_deltalake(path, part.cast(schema), mode="overwrite", predicate=f"{PARTITION_COLUMN} = '{old}'",
                            post_commithook_properties=hook)
            replaces += 1
        elif v % 97 == 0 and v > 72:
            metrics = DeltaTable(path).delete(f"{PARTITION_COLUMN} = '{old}' AND city_id < 4",
                                              post_commithook_properties=hook)
            total -= int(metrics.get("num_deleted_rows", 0))
            deletes += 1
        else:
            write_deltalake(path, _hour_rows(schema, v - 1, rows, start_us, f"load-{v}"), mode="append",
                            post_commithook_properties=hook)
            total += rows
    delta_rs_s = time.monotonic() - t0
    t0 = time.monotonic()
    for v in range(last_rs, commits):
        batch = _hour_rows(schema, v - 1, rows, start_us, f"load-{v}")
        spark.createDataFrame(batch).write.format("delta").mode("append").save(path)
        total += rows
    spark_s = time.monotonic() - t0
    return {"commits": commits, "rows": total, "delta_rs_commits": last_rs - 1,
            "delta_rs_seconds": round(delta_rs_s, 1), "spark_commits": spark_tail + 1,
            "spark_seconds": round(spark_s, 1), "replaces": replaces, "deletes": deletes}


def log_tail(path: str) -> dict[str, Any]:
    """The state of a local table's ``_delta_log``: latest version, the checkpoint
    ``_last_checkpoint`` names, how many JSON commits a reader replays after it, files in the
    folder, and the checkpoint's size and actions (files and the tombstones of removed files
    kept for ``delta.deletedFileRetentionDuration``)."""
    import json

    folder = Path(path) / "_delta_log"
    names = [p.name for p in folder.iterdir()]
    versions = [int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit()]
    last = None
    size = adds = removes = 0
    if (folder / "_last_checkpoint").exists():
        import pyarrow.parquet as pq

        last = int(json.loads((folder / "_last_checkpoint").read_text())["version"])
        parts = [folder / n for n in names if n.startswith(f"{last:020d}.checkpoint")]
        size = sum(p.stat().st_size for p in parts)
        for p in parts:
            t = pq.read_table(p, columns=["add", "remove"])
            adds += t.num_rows - t.column("add").null_count
            removes += t.num_rows - t.column("remove").null_count
    latest = max(versions)
    return {"latest_version": latest, "last_checkpoint": last,
            "json_after_checkpoint": sum(1 for v in versions if v > (last if last is not None else -1)),
            "log_files": len(names), "checkpoint_bytes": size, "checkpoint_adds": adds,
            "checkpoint_removes": removes}


def open_times(spark: Any, path: str) -> dict[str, float]:
    """Seconds to open one table (and count its rows from the log) on each engine: Spark (a
    new DeltaLog: the session's cache cleared, ``DeltaTable.forPath`` and a count, answered
    from the log's statistics), DuckDB (``delta_scan`` count on a fresh connection) and
    delta-rs (``DeltaTable(path)``, and lakehouse's ``delta_log.row_count``)."""
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import DeltaTable

    from lakehouse import delta_log
    from lakehouse.query.duckdb import connect

    out: dict[str, float] = {}
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    t0 = time.monotonic()
    SparkDeltaTable.forPath(spark, path).toDF().count()
    out["spark"] = time.monotonic() - t0
    con = connect()
    t0 = time.monotonic()
    con.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchall()
    out["duckdb"] = time.monotonic() - t0
    con.close()
    t0 = time.monotonic()
    DeltaTable(path)
    out["delta_rs"] = time.monotonic() - t0
    t0 = time.monotonic()
    delta_log.row_count(path)
    out["delta_log.row_count"] = time.monotonic() - t0
    return out


def counts(spark: Any, path: str) -> dict[str, int]:
    """A table's row count on each engine (Spark, DuckDB, delta-rs's log statistics)."""
    from lakehouse import delta_log
    from lakehouse.query.duckdb import connect

    con = connect()
    try:
        duck = int(con.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0])
    finally:
        con.close()
    return {"spark": int(spark.read.format("delta").load(path).count()), "duckdb": duck,
            "delta_rs": delta_log.row_count(path)}


def one_commit_copy(src: str, dst: str, configuration: dict[str, str]) -> None:
    """A table at ``dst`` whose one commit adds exactly the data files of ``src``'s latest
    version (hard links), with their statistics and partition values (delta-rs; its kernel
    refuses to create a table with properties outside ``delta.*``, such as ``lakehouse.*``)."""
    import json
    import os

    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, create_table_with_add_actions

    from lakehouse.definitions import PARTITION_COLUMN

    def value(v: Any) -> Any:
        """A statistic or partition value as the Delta log writes it."""
        if isinstance(v, dt.datetime):  # as Delta writes them: UTC, milliseconds
            return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return v.isoformat() if isinstance(v, dt.date) else v

    table = DeltaTable(src)
    adds = []
    for a in pa.table(table.get_add_actions(flatten=False)).to_pylist():
        os.makedirs(os.path.dirname(os.path.join(dst, a["path"])), exist_ok=True)
        os.link(os.path.join(src, a["path"]), os.path.join(dst, a["path"]))
        stats = {"numRecords": a["num_records"],
                 "minValues": {k: value(v) for k, v in (a.get("min") or {}).items() if v is not None},
                 "maxValues": {k: value(v) for k, v in (a.get("max") or {}).items() if v is not None},
                 "nullCount": {k: v for k, v in (a.get("null_count") or {}).items() if v is not None}}
        part = {k: value(v) for k, v in a["partition"].items()}
        adds.append(AddAction(a["path"], a["size_bytes"], part, a["modification_time"], True, json.dumps(stats)))
    create_table_with_add_actions(dst, table.schema(), adds, partition_by=[PARTITION_COLUMN],
                                  configuration=configuration)


def bench_open(master: str, commits: int = 2000, rounds: int = 5, workdir: str | None = None) -> dict[str, Any]:
    """Opening a table of ``commits`` commits (``build_long_table``) against a baseline holding
    the very same data files in one commit (``one_commit_copy``), on Spark, DuckDB and delta-rs,
    in one process: the median of ``rounds`` opens of each, after a warm-up round. The two differ
    only in their history, so the ratio is what the long log costs."""
    import statistics

    import yaml
    from deltalake import DeltaTable

    from lakehouse.definitions import TableDefinition
    from lakehouse.physical import delta_properties
    from lakehouse.spark.session import get_spark

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-open-"))
    try:
        definition = TableDefinition.model_validate(yaml.safe_load(BENCH_TABLE))
        spark = get_spark(master)
        long, base = str(root / "long"), str(root / "baseline")
        generated = build_long_table(spark, long, definition, commits)
        one_commit_copy(long, base, delta_properties(definition, "live"))
        for p in (long, base):
            got = counts(spark, p)
            assert set(got.values()) == {generated["rows"]}, (p, got, generated["rows"])
        samples: dict[str, dict[str, list[float]]] = {"long": {}, "baseline": {}}
        for r in range(rounds + 1):
            for name, p in (("long", long), ("baseline", base)):
                for engine, secs in open_times(spark, p).items():
                    if r:  # round 0 warms up
                        samples[name].setdefault(engine, []).append(secs)
        doc: dict[str, Any] = {"master": master, "commits": commits, "rows": generated["rows"],
                               "rounds": rounds, "generate": generated}
        doc["log"] = {**log_tail(long), "active_files": len(DeltaTable(long).file_uris()),
                      "baseline_active_files": len(DeltaTable(base).file_uris())}
        for engine in samples["long"]:
            a = statistics.median(samples["long"][engine])
            b = statistics.median(samples["baseline"][engine])
            doc[engine] = {"open_seconds": round(a, 3), "baseline_open_seconds": round(b, 3),
                           "ratio_to_baseline": round(a / b, 2) if b else None}
        return doc
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
