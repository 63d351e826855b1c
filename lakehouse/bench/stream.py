"""``lakehouse bench stream``: rows through 1 and 4 producers (insert and release into live)
against a plain ``load`` of the same files, in one process."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from lakehouse.bench.workload import INGEST_TABLE, make_project, write_trips_csv


def bench_stream(master: str, batches: int = 16, rows: int = 50_000, workdir: str | None = None) -> dict[str, Any]:
    """Rows through producers (insert + release into live) for 1 and 4 producers, against a
    plain ``load`` of the same files, in one process, after a warm-up. Batch k of every
    producer covers the k-th hour of event time, so releases follow the slowest producer."""
    from lakehouse import delta_log

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-stream-"))
    hour = 3_600_000_000
    start = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
    try:
        def files(case: str, producers: int, batches: int, rows: int) -> list[list[Path]]:
            """[batch][producer] -> a CSV file: ``rows`` rows in total per batch."""
            folder = root / f"in-{case}"
            folder.mkdir(parents=True)
            out = []
            for k in range(batches):
                row = []
                for p in range(producers):
                    f = folder / f"b{k:04d}-p{p}.csv"
                    write_trips_csv(f, rows // producers, seed=k * 10 + p, start_us=start + k * hour, span_us=hour)
                    row.append(f)
                out.append(row)
            return out

        table = INGEST_TABLE.replace("BLOCKS", "16")
        results: dict[str, Any] = {}

        def run(case: str, producers: int | None, batches: int = batches, rows: int = rows) -> dict[str, Any]:
            """One case, timed: ``producers`` producers inserting the files, or plain loads (None)."""
            lh = make_project(root / case, master, table)
            live = lh.paths("bench").live
            fs = files(case, producers or 1, batches, rows)
            t0 = time.monotonic()
            if producers is None:  # the baseline: one plain load per batch file
                for batch in fs:
                    lh.load("bench", [str(f) for f in batch])
            else:
                ps = [lh.table("bench").producer(f"p{i}") for i in range(producers)]
                for p in ps:
                    p.attach()
                for batch in fs:
                    for p, f in zip(ps, batch):
                        p.insert_files([str(f)])
                for p in ps:
                    p.detach()
            secs = time.monotonic() - t0
            n = delta_log.row_count(live)
            assert n == batches * (rows // (producers or 1)) * (producers or 1), n
            return {"rows": n, "inserts": batches * (producers or 1), "seconds": round(secs, 2),
                    "rows_per_s": round(n / secs)}

        run("warmup", 2, 2, 2000)
        results["load"] = run("load", None)
        results["producers_1"] = run("p1", 1)
        results["producers_4"] = run("p4", 4)
        for k in ("producers_1", "producers_4"):
            results[k]["ratio_to_load"] = round(results[k]["seconds"] / results["load"]["seconds"], 2)
        return {"master": master, "batches": batches, "rows_per_batch": rows, **results}
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
