"""Compaction that keeps the archive's order (``lakehouse optimize``, the compact_* jobs).

- **live**: Delta's OPTIMIZE (bin-packing) on the days with more than ``compact_min_files``
  small files (smaller than half the target size). It commits with dataChange=false: readers,
  archiving and loads see the same rows while it runs; a load that conflicts retries.
- **archive**: Delta's OPTIMIZE would concatenate a day's files by size, breaking the day's
  sorted order and the vector files that describe it. So a day is rewritten by us: the day's
  rows sorted by the archive's total order (the order they are in), written by one task into
  files of about the target size (``part-<task>-<uuid>.c000``, ``.c001``, ... in order), and
  committed as one Delta write with ``replaceWhere`` on the days and ``dataChange=false``. The
  vector files are not touched and stay valid byte for byte; the cutoff (SetTransaction) is
  unchanged. A day needs it when a file is more than twice the target (split) or it has two or
  more files below half the target (merge); days written under other sort settings are left to
  the next archive run, which re-sorts them.

Plan first (pure, from the Delta log), then execute. Crash points: compact_after_plan,
compact_during_live, compact_after_live, compact_during_archive, compact_after_archive. A kill at
any of them leaves every day's rows and order as they were (an uncommitted rewrite leaves only
untracked files, which VACUUM removes).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints
from lakehouse.archive.plan import days_sql
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import CommitConflict, LakehouseError
from lakehouse.layout import DataFile, Layout, layout
from lakehouse.lease import Lease
from lakehouse.output import Progress, Steps, quiet
from lakehouse.spark.commit import SESSION_CONF, with_retries
from lakehouse.spark.session import parallelism
from lakehouse.sql import spark_ident
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_FILES_PER_DAY = 999
"""Spark numbers a task's files .c000 to .c999; more would not sort by name in write order."""


# -- plan (pure) ------------------------------------------------------------------------------------

def small(f: DataFile, target: int) -> bool:
    """Whether a data file counts as small: below half the target file size."""
    return f.size < target // 2


def live_days(by_day: dict[dt.date, list[DataFile]], target: int, min_files: int,
              day: dt.date | None = None) -> dict[dt.date, str]:
    """Live days to bin-pack, with why: more than ``min_files`` small files (with ``day``: that
    day, when it has two or more small files)."""
    out: dict[dt.date, str] = {}
    for d, files in by_day.items():
        n = sum(1 for f in files if small(f, target))
        if day is not None:
            if d == day and n >= 2:
                out[d] = f"{n} small files"
        elif n > min_files:
            out[d] = f"{n} small files (more than {min_files})"
    return out


def live_days_left(by_day: dict[dt.date, list[DataFile]], target: int, min_files: int,
                   picked: dict[dt.date, str], day: dt.date | None = None) -> dict[dt.date, str]:
    """Live days with two or more small files that ``live_days`` did not pick, with why (a run
    without ``--day`` takes a day only above ``compact_min_files``; ``--day`` takes any two)."""
    out: dict[dt.date, str] = {}
    for d, files in by_day.items():
        n = sum(1 for f in files if small(f, target))
        if d in picked or n < 2 or (day is not None and d != day):
            continue
        out[d] = (f"{n} small files, not more than jobs.compact_min_files ({min_files}); "
                  f"`optimize --day {d.isoformat()}` compacts it")
    return out


def thresholds(target: int, min_files: int) -> str:
    """The rule compaction applies, as text: which live and archive days it takes."""
    return (f"target file size {human_bytes(target)}: live days with more than {min_files} files below "
            f"{human_bytes(target // 2)} (jobs.compact_min_files; with --day: 2 or more), archive days with a "
            f"file above {human_bytes(2 * target)} or 2 or more below {human_bytes(target // 2)}")


def archive_days(by_day: dict[dt.date, list[DataFile]], target: int, day: dt.date | None = None,
                 stale: set[dt.date] | None = None) -> tuple[dict[dt.date, str], dict[dt.date, str]]:
    """Archive days to rewrite (and why), and days skipped (and why)."""
    todo: dict[dt.date, str] = {}
    skipped: dict[dt.date, str] = {}
    for d, files in by_day.items():
        if day is not None and d != day:
            continue
        big = [f for f in files if f.size > 2 * target]
        few = [f for f in files if small(f, target)]
        why = (f"a file of {human_bytes(big[0].size)} (target {human_bytes(target)})" if big
               else f"{len(few)} files below half the target" if len(few) >= 2 else "")
        if not why:
            continue
        if stale and d in stale:
            skipped[d] = "written under other sort settings; the next archive run re-sorts it"
            continue
        todo[d] = why
    return todo, skipped


def rows_per_file(rows: int, size: int, target: int) -> int:
    """Rows per output file so files come out near ``target`` bytes (never more than
    MAX_FILES_PER_DAY files for the day)."""
    if rows <= 0:
        return 1
    per = max(1, int(target * rows / max(size, 1)))
    return max(per, math.ceil(rows / MAX_FILES_PER_DAY))


def human_bytes(n: int) -> str:
    """A byte count for people: ``512B``, ``1.5KB``, ``3.2MB``, ``1.0GB``."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}B"


@dataclass
class PartPlan:
    """What compaction does to one of live and archive."""

    part: str
    version: int | None
    days: dict[dt.date, str] = field(default_factory=dict)
    """Days to compact, with why."""
    skipped: dict[dt.date, str] = field(default_factory=dict)
    files_before: int = 0
    bytes_before: int = 0
    rows: int = 0
    """Of the days to compact."""
    table_files_before: int = 0
    table_bytes_before: int = 0
    rows_per_file: int = 0
    files_after: int | None = None
    bytes_after: int | None = None
    table_files_after: int | None = None
    table_bytes_after: int | None = None
    version_after: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The part's section of ``lakehouse optimize --json`` (``live`` or ``archive``)."""
        return {
            "days": [d.isoformat() for d in self.days],
            "why": {d.isoformat(): w for d, w in self.days.items()},
            "skipped": {d.isoformat(): w for d, w in self.skipped.items()},
            "rows": self.rows,
            "files_before": self.files_before,
            "bytes_before": self.bytes_before,
            "files_after": self.files_after,
            "bytes_after": self.bytes_after,
            "table_files_before": self.table_files_before,
            "table_bytes_before": self.table_bytes_before,
            "table_files_after": self.table_files_after,
            "table_bytes_after": self.table_bytes_after,
            "version": self.version,
            "version_after": self.version_after,
        }


def _part_plan(part: str, lay: Layout, days: dict[dt.date, str], skipped: dict[dt.date, str]) -> PartPlan:
    files, size, rows = lay.totals(set(days))
    tf, tb, _ = lay.totals()
    return PartPlan(part, lay.version, days, skipped, files, size, rows, tf, tb)


@dataclass
class CompactPlan:
    """What ``lakehouse optimize`` does (or did) to a table: the plan of each part, then its result."""

    table: str
    target: int
    live: PartPlan
    archive: PartPlan
    day: dt.date | None = None
    dry_run: bool = False
    seconds: float = 0.0
    min_files: int = 8
    """``jobs.compact_min_files``: a live day is compacted with more small files than this."""

    @property
    def empty(self) -> bool:
        """Whether neither live nor archive has a day to compact."""
        return not self.live.days and not self.archive.days

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``lakehouse optimize --json``."""
        return {"table": self.table, "dry_run": self.dry_run, "target_file_size": self.target,
                "compact_min_files": self.min_files, "rule": thresholds(self.target, self.min_files),
                "live": self.live.as_dict(), "archive": self.archive.as_dict(), "seconds": round(self.seconds, 3)}

    def touched(self) -> dict[str, int]:
        """Rows, files and bytes before/after of the days compacted, over both parts (for the jobs
        history and a round's result; 0 -> 0 when no day needed it)."""
        parts = [p for p in (self.live, self.archive) if p.days]
        return {
            "rows": sum(p.rows for p in parts),
            "files_before": sum(p.files_before for p in parts),
            "files_after": sum(p.files_after or 0 for p in parts),
            "bytes_before": sum(p.bytes_before for p in parts),
            "bytes_after": sum(p.bytes_after or 0 for p in parts),
        }


def plan(definition: TableDefinition, paths: TablePaths, parts: tuple[str, ...] = ("live", "archive"),
         day: dt.date | None = None) -> CompactPlan:
    """What compaction would do now (from the Delta logs; no Spark)."""
    jobs = definition.jobs
    target = jobs.target_file_size
    live_lay = layout(paths.live) if "live" in parts else Layout(None)
    arch_lay = layout(paths.archive) if "archive" in parts else Layout(None)
    ldays = live_days(live_lay.by_day(), target, jobs.compact_min_files, day) if "live" in parts else {}
    adays, askip = archive_days(arch_lay.by_day(), target, day, _stale_days(definition, paths)) \
        if "archive" in parts and arch_lay.files else ({}, {})
    lleft = live_days_left(live_lay.by_day(), target, jobs.compact_min_files, ldays, day) if "live" in parts else {}
    live = _part_plan("live", live_lay, ldays, lleft)
    arch = _part_plan("archive", arch_lay, adays, askip)
    if arch.days:
        arch.rows_per_file = rows_per_file(arch.rows, arch.bytes_before, target)
    return CompactPlan(definition.name, target, live, arch, day, min_files=jobs.compact_min_files)


def _stale_days(definition: TableDefinition, paths: TablePaths) -> set[dt.date]:
    """Archive days written under other settings (the archive run re-sorts them, compaction must not)."""
    from lakehouse.archive import vectors
    from lakehouse.archive.reader import committed_run, current_encoding

    return set(vectors.stale_days(paths.vectors, current_encoding(definition), committed_run(paths)))


# -- execute (Spark) --------------------------------------------------------------------------------

class Compaction:
    """Runs a CompactPlan under the table's lease (``lease`` checked before each commit)."""

    def __init__(self, spark: "SparkSession", definition: TableDefinition, paths: TablePaths,
                 lease: Lease | None = None, report: Progress = quiet) -> None:
        self.spark = spark
        self.definition = definition
        self.paths = paths
        self.lease = lease
        self.steps = Steps(f"optimize {definition.name}", report)
        """The step under way, each said to ``report``."""

    def execute(self, p: CompactPlan) -> CompactPlan:
        """Compact the plan's live days, then its archive days; the plan with the sizes after."""
        started = time.monotonic()
        crashpoints.reached("compact_after_plan")
        if p.live.days:
            self.steps.at("compact live", f"{len(p.live.days):,} day(s)")
            self._live(p)
            crashpoints.reached("compact_after_live")
        if p.archive.days:
            self.steps.at("compact archive", f"{len(p.archive.days):,} day(s)")
            with_retries(f"compaction of {self.definition.name}/archive", lambda: self._archive(p))
            crashpoints.reached("compact_after_archive")
        self._measure(p)
        p.seconds = time.monotonic() - started
        return p

    def _measure(self, p: CompactPlan) -> None:
        for part, path in (("live", self.paths.live), ("archive", self.paths.archive)):
            pp: PartPlan = getattr(p, part)
            if pp.version is None:
                continue
            lay = layout(path)
            pp.files_after, pp.bytes_after, _ = lay.totals(set(pp.days))
            pp.table_files_after, pp.table_bytes_after, _ = lay.totals()
            pp.version_after = lay.version

    def _live(self, p: CompactPlan) -> None:
        target = p.target
        where = days_sql(PARTITION_COLUMN, sorted(p.live.days))

        def optimize() -> None:
            if self.lease is not None:
                self.lease.check()
            with SESSION_CONF:  # session-wide settings: no other thread commits meanwhile
                conf = self.spark.conf
                keys = {"spark.databricks.delta.optimize.maxFileSize": str(target),
                        "spark.databricks.delta.optimize.minFileSize": str(target // 2)}
                before = {k: conf.get(k, None) for k in keys}
                try:
                    for k, v in keys.items():
                        conf.set(k, v)
                    crashpoints.kill_later("compact_during_live", 0.5)
                    self.spark.sql(f"OPTIMIZE delta.{spark_ident(self.paths.live)} WHERE {where}").collect()
                finally:
                    for k, old in before.items():
                        if old is None:
                            conf.unset(k)
                        else:
                            conf.set(k, old)

        with_retries(f"compaction of {self.definition.name}/live", optimize)

    def _archive(self, p: CompactPlan) -> None:
        """Rewrite the planned days in their sorted order; refuses (CommitConflict, retried by
        the caller after a fresh plan) when the archive moved since the plan."""
        from pyspark.sql import functions as F

        from lakehouse.archive.order import archive_columns, row_order
        from lakehouse.archive.state import current_snapshot

        d = self.definition
        days = sorted(p.archive.days)
        current = current_snapshot(self.paths.archive)
        if current.version != p.archive.version:  # an archive run committed since the plan: plan again
            p.archive = plan(d, self.paths, ("archive",), p.day).archive
            days = sorted(p.archive.days)
            if not days:
                return
        version = p.archive.version
        assert version is not None
        where = days_sql(PARTITION_COLUMN, days)
        df = (
            self.spark.read.format("delta").option("versionAsOf", version).load(self.paths.archive)
            .where(where)
            .select(*archive_columns(d))
            .repartition(max(1, min(len(days), parallelism(self.spark))), F.col(PARTITION_COLUMN))
            .sortWithinPartitions(*row_order(d))
        )
        with SESSION_CONF:
            if self.lease is not None:
                self.lease.check()
            if current_snapshot(self.paths.archive).version != version:
                raise CommitConflict(f"compaction of {d.name}/archive: the archive changed since the plan "
                                     f"(version {version}); planning again")
            crashpoints.kill_later("compact_during_archive", 0.5)
            (df.write.format("delta").mode("overwrite")
             .option("replaceWhere", where)
             .option("dataChange", "false")
             .option("maxRecordsPerFile", p.archive.rows_per_file)
             .save(self.paths.archive))
        after = current_snapshot(self.paths.archive)
        if after.version != version + 1:
            raise LakehouseError(
                f"compaction of {d.name}/archive: another commit landed next to the rewrite of "
                f"{days[0]}..{days[-1]} (version {version} -> {after.version}); check the table with lakehouse verify")
        self._check(p, days, after.version)

    def _check(self, p: CompactPlan, days: list[dt.date], version: int) -> None:
        """The rewritten days hold the same rows per day, in sorted order across their files."""
        before = layout(self.paths.archive, p.archive.version).by_day()
        after = layout(self.paths.archive, version).by_day()
        for day in days:
            n0 = sum(f.rows for f in before.get(day, []))
            n1 = sum(f.rows for f in after.get(day, []))
            if n0 != n1:
                raise LakehouseError(f"compaction of {self.definition.name}/archive: day {day} holds {n1} rows "
                                     f"after the rewrite, {n0} before; check the table with lakehouse verify")
        from lakehouse.audit.files import unsorted_days
        from lakehouse.delta_log import file_uri

        files = {day: [file_uri(self.paths.archive, f.path) for f in after.get(day, [])] for day in days}
        problems = unsorted_days(self.definition, files, day_rows={day: sum(f.rows for f in after.get(day, []))
                                                                   for day in days})
        if problems:
            day = min(problems)
            raise LakehouseError(f"compaction of {self.definition.name}/archive: day {day}: {problems[day]}; "
                                 "check the table with lakehouse verify")


def run_optimize(spark_factory: Any, warehouse: str, definition: TableDefinition, day: dt.date | None = None,
                 dry_run: bool = False, parts: tuple[str, ...] = ("live", "archive"),
                 lease: Lease | None = None, report: Progress = quiet) -> CompactPlan:
    """``lakehouse optimize``: plan, and unless ``dry_run`` compact under the table's lease (taken
    here, or ``lease`` held by the caller)."""
    import contextlib

    from lakehouse.lease import table_lease

    paths = TablePaths(warehouse, definition.name)
    from lakehouse.live import check_loadable

    check_loadable(definition, paths)
    if dry_run:
        p = plan(definition, paths, parts, day)
        p.dry_run = True
        return p
    with contextlib.nullcontext(lease) if lease is not None else table_lease(paths, "optimize") as held:
        report(f"optimize {definition.name}: plan")
        p = plan(definition, paths, parts, day)  # under the lease: no archive run moves the days meanwhile
        if p.empty:
            return p
        from lakehouse.physical import ensure_properties, properties_differ

        spark = spark_factory()
        if properties_differ(paths, definition):  # rewritten files get statistics on the right columns
            ensure_properties(spark, paths, definition)
            p = plan(definition, paths, parts, day)
        return Compaction(spark, definition, paths, held, report).execute(p)
