"""``lakehouse bench delete``: what erasing keys from an archived table costs, against archiving
the days it touches again.

The table: ``rows`` generated trips over ``days`` days, all archived. Sides, each measured by
``bench.sampling`` (every run on a fresh copy of its table, made untimed):
- ``delete``: ``lakehouse delete --keys`` of ``keys`` keys spread over every day (each day holds
  some: every day is rewritten);
- ``delete_few``: the same number of keys from ``few_days`` days only (only those are rewritten);
- ``rearchive``: one archive run of the same rows from live into an empty archive (archiving
  every day again: what the rewrite of all days may cost at most).
The goal is ``delete`` / ``rearchive`` at most 1; the files and bytes each delete wrote, and the
days it rewrote, are reported.
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
)
from lakehouse.output import Progress, quiet


def bench_delete(master: str, rows: int = 10_000_000, days: int = 30, keys: int = 1000, few_days: int = 3,
                 repeats: int = 3, warmup: bool = True, report: Progress = quiet) -> dict[str, Any]:
    """Every side of the module's description; seconds, what each delete wrote, the ratios."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-delete-"))
    try:
        live = make_project(root / "live", master)
        spark = live.spark()
        report(f"{rows:,} rows over {days} days: generating")
        begin = START - dt.timedelta(days=days + 2)  # every run's --now in the past
        generate_live(spark, live.paths("bench").live, rows, begin, days)
        now = begin + dt.timedelta(days=days + 1, hours=1)  # every day below the cutoff (delay 1d)
        archived = copy_of(live, root / "archived", master)
        report(f"archiving {days} days")
        first = archive_run(archived, now, ledger=True)
        if first.rows_archived != rows:
            raise RuntimeError(f"bench delete: {first.rows_archived} rows archived of {rows}")
        frame = spark.read.format("delta").load(archived.paths("bench").archive)
        step = max(1, rows // keys)
        spread = [f"T{i}" for i in range(0, rows, step)][:keys]
        few: list[str] = []
        for k in range(few_days):  # the same number of keys from each of the first few days
            day = (begin + dt.timedelta(days=k)).date().isoformat()
            n = keys // few_days + (1 if k < keys % few_days else 0)
            few += [r[0] for r in frame.where(F.col(PARTITION_COLUMN) == F.lit(day).cast("date"))
                    .select("trip_id").limit(n).collect()]
        files = {"delete": root / "keys-spread.txt", "delete_few": root / "keys-few.txt"}
        files["delete"].write_text("\n".join(spread) + "\n")
        files["delete_few"].write_text("\n".join(few) + "\n")
        projects = Copies(root, master)
        fresh = projects.fresh

        def delete(side: str, want: int) -> Side:
            def run(i: int) -> Any:
                from lakehouse.erasure.job import DeleteResult

                r = projects[side].delete("bench", keys=str(files[side]))
                if not isinstance(r, DeleteResult) or r.rows != want:
                    raise RuntimeError(f"bench delete: {side}: {getattr(r, 'rows', None)} rows erased of {want}")
                return r

            return Side(run, lambda i: fresh(side, archived, i))

        def rearchive(i: int) -> Any:
            r = archive_run(projects["rearchive"], now, ledger=True)
            if r.rows_archived != rows:
                raise RuntimeError(f"bench delete: rearchive: {r.rows_archived} rows archived of {rows}")
            return r

        sides = {
            "delete": delete("delete", len(spread)),
            "delete_few": delete("delete_few", len(few)),
            "rearchive": Side(rearchive, lambda i: fresh("rearchive", live, i)),
        }
        samples = measure(sides, repeats, warmup, report)

        def wrote(side: str) -> dict[str, Any]:
            a = samples[side].results[-1].archive
            return {"days_rewritten": len(a.get("days", {})), "files_written": a.get("files_written", 0),
                    "bytes_written": a.get("bytes_written", 0), "rows_rewritten": a.get("rows_rewritten", 0)}

        return {
            "rows": rows, "days": days, "keys": len(spread), "keys_few": len(few), "few_days": few_days,
            "repeats": repeats, "master": master,
            "sides": {side: s.as_dict() for side, s in samples.items()},
            "ratio_delete_to_rearchive": ratio(samples["delete"], samples["rearchive"]),
            "ratio_delete_few_to_rearchive": ratio(samples["delete_few"], samples["rearchive"]),
            "delete_wrote": wrote("delete"), "delete_few_wrote": wrote("delete_few"),
            "archive_bytes": sum(f.size for f in _files(archived)),
            "rearchive_steps_seconds": median_of([r.timings for r in samples["rearchive"].results]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _files(lh: Any) -> list[Any]:
    """The archive's data files (from its log)."""
    from lakehouse.layout import layout

    return [f for fs in layout(lh.paths("bench").archive).by_day().values() for f in fs]
