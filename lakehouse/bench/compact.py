"""``lakehouse bench compact``: live's files and bytes, and query times on both engines,
before and after ``optimize`` of a table of many small ingest batches."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.bench.workload import INGEST_TABLE, make_project, write_trips_csv

if TYPE_CHECKING:
    from lakehouse.project import Engine


def bench_compact(master: str, batches: int = 1000, rows: int = 200, workdir: str | None = None) -> dict[str, Any]:
    """A table of ``batches`` ingest batches (one small file each, event times over two days):
    live's files and bytes before and after ``optimize``, and the same queries on Spark and
    DuckDB before and after (the baseline: the uncompacted table, same run)."""
    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-compact-"))
    try:
        from lakehouse.layout import layout

        table = INGEST_TABLE.replace("BLOCKS", "1") + "jobs: {compact_min_files: 8}\n"
        lh = make_project(root, master, table)
        folder = root / "landing"
        folder.mkdir()
        start = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
        for k in range(batches):
            write_trips_csv(folder / f"b{k:05d}.csv", rows, seed=k, start_us=start, span_us=2 * 86_400_000_000)
            os.utime(folder / f"b{k:05d}.csv", (1_700_000_000 + k, 1_700_000_000 + k))
        t0 = time.monotonic()
        r = lh.ingest("bench", str(folder), drain=True)
        ingest_s = time.monotonic() - t0
        live = lh.paths("bench").live
        sql = "SELECT event_date, city_id, count(*) AS n, sum(fare_total) AS s FROM bench GROUP BY 1, 2 ORDER BY 1, 2"

        def timed(engine: Engine) -> float:
            """The best of three runs of the query on ``engine``, in seconds."""
            best = float("inf")
            for _ in range(3):
                t = time.monotonic()
                lh.query(sql, engine)
                best = min(best, time.monotonic() - t)
            return best

        before = layout(live)
        engines: tuple[Engine, ...] = ("spark", "duckdb")
        q0 = {e: timed(e) for e in engines}
        t0 = time.monotonic()
        p = lh.optimize("bench")
        optimize_s = time.monotonic() - t0
        after = layout(live)
        q1 = {e: timed(e) for e in engines}
        f0, b0, n0 = before.totals()
        f1, b1, n1 = after.totals()
        assert n0 == n1 == batches * rows, (n0, n1)
        return {
            "bench": "compact", "batches": len(r.batches), "rows": n1, "ingest_seconds": round(ingest_s, 1),
            "live_files_before": f0, "live_bytes_before": b0, "live_files_after": f1, "live_bytes_after": b1,
            "days_compacted": len(p.live.days), "optimize_seconds": round(optimize_s, 2),
            "query_seconds_before": {k: round(v, 3) for k, v in q0.items()},
            "query_seconds_after": {k: round(v, 3) for k, v in q1.items()},
            "query_ratio_after_to_before": {k: round(q1[k] / q0[k], 2) for k in q0},
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
