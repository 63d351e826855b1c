"""``lakehouse bench backfill``: years of history archived by one run against a plain sorted,
partitioned Delta write of the same rows, then late rows archived into a few old days."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from lakehouse.bench.workload import archive_figures, generate_live, make_project


def bench_backfill(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """A backfill of years: ``rows`` trips over ``days`` UTC days (ending two days ago) straight
    into live, archived by one run, against a plain sorted, partitioned Delta write of the same
    rows in the same process; then a second run archives late rows into a few of those days."""
    from lakehouse import delta_log
    from lakehouse.archive.order import row_order
    from lakehouse.definitions import PARTITION_COLUMN

    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-backfill-"))
    try:
        lh = make_project(root, master)
        spark = lh.spark()
        d = lh.definition("bench")
        today = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today - dt.timedelta(days=days + 2)
        t0 = time.monotonic()
        generate_live(spark, lh.paths("bench").live, rows, start, days)
        generate_s = time.monotonic() - t0

        live = spark.read.format("delta").load(lh.paths("bench").live)
        t0 = time.monotonic()
        (live.orderBy(*row_order(d)).write.format("delta").partitionBy(PARTITION_COLUMN).save(str(root / "baseline")))
        baseline_s = time.monotonic() - t0

        now = today
        t0 = time.monotonic()
        result = lh.archive("bench", now=now)
        archive_s = time.monotonic() - t0
        assert result.rows_archived == rows and len(result.plan.days) == days, (result.rows_archived, rows)
        assert delta_log.row_count(lh.paths("bench").live) == 0
        # late rows into three old days, archived by a second run (the table archives again)
        late = 30
        generate_live(spark, lh.paths("bench").live, late, start, 3, load="late", first_id=rows)
        t0 = time.monotonic()
        again = lh.archive("bench", now=now + dt.timedelta(minutes=1))
        again_s = time.monotonic() - t0
        assert again.rows_archived == late and delta_log.row_count(lh.paths("bench").archive) == rows + late
        return {
            **archive_figures(rows, days, master, generate_s, baseline_s, archive_s, result),
            "second_run_late_rows": late,
            "second_run_seconds": round(again_s, 2),
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
