"""``lakehouse bench backfill``: years of history archived by one run against a plain sorted,
partitioned Delta write of the same rows, then late rows archived into a few old days.

Sides, measured by ``bench.sampling`` (a warm-up, then interleaved repeats, every archive run on a
fresh copy of the same live table, made untimed):
- ``archive``: one archive run of ``days`` days of live rows (the backfill);
- ``baseline_sorted_delta_write``: the same rows sorted the way archiving sorts them, in one
  partitioned Delta write;
- ``late_rows``: a second run that archives a few late rows into three of those days (the
  archived table archives again), on a copy of the backfilled table.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any

from lakehouse.bench.sampling import Side, measure, median_of, ratio
from lakehouse.bench.workload import (
    Copies,
    archive_run,
    copy_of,
    generate_live,
    make_project,
    sorted_delta_write,
)
from lakehouse.output import Progress, quiet

LATE = 30
"""Late rows the second run archives into three old days."""


def bench_backfill(master: str, rows: int, days: int, repeats: int = 3, warmup: bool = True,
                   report: Progress = quiet) -> dict[str, Any]:
    """A backfill of years: ``rows`` trips over ``days`` UTC days (ending two days ago) straight
    into live, archived by one run, against a plain sorted, partitioned Delta write of the same
    rows; then a second run archives late rows into a few of those days."""
    from lakehouse import delta_log

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-backfill-"))
    try:
        source = make_project(root / "source", master)
        spark = source.spark()
        d = source.definition("bench")
        today = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today - dt.timedelta(days=days + 2)
        report(f"{rows:,} rows over {days} days: generating")
        generate_live(spark, source.paths("bench").live, rows, start, days)
        # the backfilled table with late rows waiting in three old days: the second run's input
        backfilled = copy_of(source, root / "backfilled", master)
        report("the backfill the late rows go into")
        first = archive_run(backfilled, today, ledger=True)
        if first.rows_archived != rows or len(first.plan.days) != days:
            raise RuntimeError(f"bench backfill: {first.rows_archived} rows over {len(first.plan.days)} days archived")
        generate_live(spark, backfilled.paths("bench").live, LATE, start, 3, load="late", first_id=rows)
        projects = Copies(root, master)
        fresh = projects.fresh

        def backfill(i: int) -> Any:
            """The timed backfill: one archive run of every day."""
            r = archive_run(projects["archive"], today, ledger=True)
            if r.rows_archived != rows or delta_log.row_count(projects["archive"].paths("bench").live) != 0:
                raise RuntimeError(f"bench backfill: {r.rows_archived} rows archived of {rows}")
            return r

        def late(i: int) -> Any:
            """The timed second run: the late rows into three archived days."""
            r = archive_run(projects["late_rows"], today + dt.timedelta(minutes=1), ledger=True)
            if r.rows_archived != LATE or delta_log.row_count(projects["late_rows"].paths("bench").archive) != rows + LATE:
                raise RuntimeError(f"bench backfill: the second run archived {r.rows_archived} rows of {LATE}")
            return r

        def dest(i: int) -> str:
            """Where run ``i`` of the baseline writes."""
            return str(root / f"baseline-{i + 2}")

        sides = {
            "archive": Side(backfill, lambda i: fresh("archive", source, i)),
            "baseline_sorted_delta_write": Side(
                lambda i: sorted_delta_write(spark, source.paths("bench").live, d, days, dest(i)),
                lambda i: shutil.rmtree(dest(i - 1), ignore_errors=True)),
            "late_rows": Side(late, lambda i: fresh("late_rows", backfilled, i)),
        }
        samples = measure(sides, repeats, warmup, report)
        return {
            "rows": rows, "days": days, "repeats": repeats, "master": master,
            "sides": {side: s.as_dict() for side, s in samples.items()},
            "ratio_archive_to_baseline": ratio(samples["archive"], samples["baseline_sorted_delta_write"]),
            "archive_steps_seconds": median_of([r.timings for r in samples["archive"].results]),
            "vector_files": samples["archive"].results[-1].vector_files,
            "second_run_late_rows": LATE,
            "second_run_steps_seconds": median_of([r.timings for r in samples["late_rows"].results]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
