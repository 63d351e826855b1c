"""``lakehouse bench incremental``: what archiving one new day costs when the archive already
holds ``days`` days, against the least that day's rows need and against archiving every day at
once.

Sides, each measured by ``bench.sampling`` (every run on a fresh copy of its table, made untimed):
- ``new_day``: an archive run whose live table holds one new day (the day after ``days``
  archived days): the run the archiving interval makes every day;
- ``day_write``: that day's rows, sorted the way archiving sorts them, in one plain Delta write
  (the least the new day needs);
- ``full``: one archive run of all ``days + 1`` days from live into an empty archive (the
  rebuild).
The goal is ``new_day`` / ``full`` at most 0.1: a new day costs what a day costs, not what the
table holds.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any

from lakehouse.bench.sampling import Side, measure, median_of, ratio
from lakehouse.bench.workload import (
    START,
    Copies,
    archive_run,
    copy_of,
    generate_live,
    make_project,
    sorted_delta_write,
)
from lakehouse.output import Progress, quiet


def bench_incremental(master: str, rows: int = 3_100_000, days: int = 30, repeats: int = 3, warmup: bool = True,
                      report: Progress = quiet) -> dict[str, Any]:
    """Every side of the module's description on ``rows`` generated trips over ``days + 1``
    days (the same number each day); seconds, the archive runs' steps and the ratios."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-incremental-"))
    try:
        everything = make_project(root / "everything", master)
        spark = everything.spark()
        d = everything.definition("bench")
        report(f"{rows:,} rows over {days + 1} days: generating")
        begin = START - dt.timedelta(days=days + 1)  # so that every run's --now is in the past
        generate_live(spark, everything.paths("bench").live, rows, begin, days + 1)
        last = (begin + dt.timedelta(days=days)).date()
        delay = dt.timedelta(days=1)  # the bench table's archive delay
        # the archive of the first `days` days, with only the new day left in live
        archived = copy_of(everything, root / "archived", master)
        report(f"archiving the first {days} days")
        archive_run(archived, begin + dt.timedelta(days=days) + delay, ledger=True)
        day_rows = spark.read.format("delta").load(everything.paths("bench").live) \
            .where(F.col(PARTITION_COLUMN) == F.lit(last.isoformat()).cast("date"))
        day_source = str(root / "day-source")
        day_rows.write.format("delta").partitionBy(PARTITION_COLUMN).save(day_source)
        n_day = spark.read.format("delta").load(day_source).count()
        now = begin + dt.timedelta(days=days + 1) + delay
        projects = Copies(root, master)
        fresh = projects.fresh

        def archive(side: str, want: int) -> Side:
            """The side of an archive run that must archive ``want`` rows."""
            def run(i: int) -> Any:
                """One timed archive run, its rows checked."""
                r = archive_run(projects[side], now, ledger=True)
                if r.rows_archived != want:
                    raise RuntimeError(f"bench incremental: {side}: {r.rows_archived} rows archived of {want}")
                return r

            return Side(run, lambda i: fresh(side, everything if side == "full" else archived, i))

        def day_dest(i: int) -> str:
            """Where run ``i`` of the day's sorted write goes."""
            return str(root / f"day-write-{i + 2}")

        sides = {
            "new_day": archive("new_day", n_day),
            "day_write": Side(lambda i: sorted_delta_write(spark, day_source, d, 1, day_dest(i)),
                              lambda i: shutil.rmtree(day_dest(i - 1), ignore_errors=True)),
            "full": archive("full", rows),
        }
        samples = measure(sides, repeats, warmup, report)
        return {
            "rows": rows, "days_archived": days, "rows_new_day": n_day, "repeats": repeats, "master": master,
            "sides": {side: s.as_dict() for side, s in samples.items()},
            "ratio_new_day_to_full": ratio(samples["new_day"], samples["full"]),
            "ratio_new_day_to_day_write": ratio(samples["new_day"], samples["day_write"]),
            "new_day_steps_seconds": median_of([r.timings for r in samples["new_day"].results]),
            "full_steps_seconds": median_of([r.timings for r in samples["full"].results]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
