"""One archiving run on Spark: plan, then execute, recoverably at every step.

Steps (crash points in brackets; a SIGKILL anywhere leaves every query exact):

0. Recover: purge live rows the last committed run archived but did not delete yet; remove
   vector files no reader uses (uncommitted or superseded) and leftover staging.
1. Plan: C' = now - delay; the live snapshot V; the UTC days of V's rows with event time < C'.
   [after_plan]
2. Stage: merge those rows with the days' archive batches (with a key, the live version of a key
   replaces the archived one), sort each day by the total order (sort columns, event time, key,
   other columns), write to ``_staging/archive-<C'>`` partitioned by day. [after_staging]
3. Vectors: per day, stream the staged rows into vector files ``<day>-<C'>`` (executors).
   [during_vectors, after_vectors]
4. Commit: one Delta write replaces the days in the archive and records C' (SetTransaction).
   [during_commit, after_commit]
5. Purge: delete from live the archived rows: event time < C' and written by a load that the
   archive day holds (rows loaded after V carry other load ids, so they stay). [after_purge]
6. Clean: superseded vector files and staging.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse import crashpoints
from lakehouse.archive import vectors
from lakehouse.archive.encode import DayTask, encode_day
from lakehouse.archive.plan import ArchivePlan, cutoff_time, new_cutoff
from lakehouse.archive.state import CUTOFF_APP_ID, spark_snapshot
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import CommitConflict, LakehouseError
from lakehouse.commit import with_retries
from lakehouse.live import check_loadable
from lakehouse.settings import is_local
from lakehouse.warehouse import TablePaths, join, remove_tree

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass
class ArchiveResult:
    """What a run did."""

    plan: ArchivePlan
    committed: bool = False
    rows_archived: int = 0
    rows_purged: int = 0
    recovered_rows: int = 0
    """Rows purged on behalf of an earlier run that crashed after its commit."""
    vector_files: int = 0
    removed_vector_files: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.plan.cutoff if self.committed else self.plan.previous_cutoff,
            "previous_cutoff": self.plan.previous_cutoff,
            "days": [d.isoformat() for d in self.plan.days],
            "rows_archived": self.rows_archived,
            "committed": self.committed,
            "rows_purged": self.rows_purged,
            "recovered_rows": self.recovered_rows,
            "vector_files": self.vector_files,
            "removed_vector_files": self.removed_vector_files,
            "seconds": round(self.seconds, 3),
        }


@contextlib.contextmanager
def run_lock(paths: TablePaths) -> Iterator[None]:
    """One archiving run per table at a time (an OS lock: released even on SIGKILL)."""
    if not is_local(paths.root):
        yield  # object stores: the scheduler runs one job per table; Delta's txn check backs it up
        return
    state = os.path.join(paths.root, "_state")
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "archive.lock"), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LakehouseError(f"archive {paths.name}: another archiving run holds {state}/archive.lock") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _order(definition: TableDefinition) -> list["Column"]:
    from pyspark.sql import functions as F

    return [F.col(PARTITION_COLUMN).asc()] + [F.col(c).asc_nulls_first() for c in definition.sort_order]


def _archive_columns(definition: TableDefinition) -> list[str]:
    return [*definition.column_names, LOAD_COLUMN, PARTITION_COLUMN]


def _ts(cutoff: int) -> "Column":
    from pyspark.sql import functions as F

    return F.lit(cutoff_time(cutoff)).cast("timestamp")


def _days_sql(days: list[dt.date] | tuple[dt.date, ...]) -> str:
    return f"{PARTITION_COLUMN} IN ({', '.join(repr(d.isoformat()) for d in days)})"


class ArchiveJob:
    """An archiving run of one table; ``plan()`` first, then ``execute(plan)``."""

    def __init__(self, spark: "SparkSession", warehouse: str, definition: TableDefinition) -> None:
        self.spark = spark
        self.definition = definition
        self.paths = TablePaths(warehouse, definition.name)

    # -- reading ----------------------------------------------------------------------------

    def _read(self, path: str, version: int) -> "DataFrame":
        return self.spark.read.format("delta").option("versionAsOf", version).load(path)

    # -- plan -------------------------------------------------------------------------------

    def plan(self, now: dt.datetime) -> ArchivePlan:
        from pyspark.sql import functions as F

        d = self.definition
        check_loadable(d, self.paths)
        archive = spark_snapshot(self.spark, self.paths.archive)
        live = spark_snapshot(self.spark, self.paths.live)
        cutoff = new_cutoff(now, d.archive.delay)
        previous = archive.cutoff
        base = ArchivePlan(d.name, now, previous, cutoff, live.version, archive.version)
        if not base.advances:
            return base
        et = F.col(d.event_time)
        late = F.lit(False) if previous is None else et < _ts(previous)
        rows = (
            self._read(self.paths.live, live.version)
            .where(F.col(PARTITION_COLUMN) <= F.lit(cutoff_time(cutoff).date()))
            .where(et < _ts(cutoff))
            .groupBy(PARTITION_COLUMN)
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(late, 1).otherwise(0)).alias("late"))
            .collect()
        )
        days = tuple(sorted(r[PARTITION_COLUMN] for r in rows))
        in_days = 0
        if days:
            in_days = self._read(self.paths.archive, archive.version).where(_days_sql(days)).count()
        return ArchivePlan(
            d.name, now, previous, cutoff, live.version, archive.version, days,
            rows=sum(int(r["n"]) for r in rows), late_rows=sum(int(r["late"] or 0) for r in rows),
            archive_rows_in_days=in_days,
        )

    # -- execute ----------------------------------------------------------------------------

    def execute(self, plan: ArchivePlan) -> ArchiveResult:
        started = time.monotonic()
        result = ArchiveResult(plan)
        if not plan.advances:
            result.seconds = time.monotonic() - started
            return result
        crashpoints.reached("after_plan")
        staging = join(self.paths.staging, f"archive-{plan.cutoff}")
        remove_tree(staging)
        if plan.days:
            t = time.monotonic()
            self._stage(plan, staging)
            result.timings["stage"] = time.monotonic() - t
            crashpoints.reached("after_staging")
            t = time.monotonic()
            result.vector_files = self._write_vectors(plan, staging)
            result.timings["vectors"] = time.monotonic() - t
            crashpoints.reached("after_vectors")
        t = time.monotonic()
        try:
            self._commit(plan, staging)
        except BaseException:
            self._discard_uncommitted(plan.cutoff)
            raise
        result.timings["commit"] = time.monotonic() - t
        result.committed = True
        result.rows_archived = plan.rows
        crashpoints.reached("after_commit")
        t = time.monotonic()
        result.rows_purged = self.purge(plan.cutoff)
        result.timings["purge"] = time.monotonic() - t
        crashpoints.reached("after_purge")
        result.removed_vector_files = self.clean(plan.cutoff)
        remove_tree(staging)
        result.seconds = time.monotonic() - started
        return result

    def _merged(self, plan: ArchivePlan) -> "DataFrame":
        from pyspark.sql import functions as F

        d = self.definition
        cols = _archive_columns(d)
        assert plan.live_version is not None and plan.archive_version is not None
        new = (
            self._read(self.paths.live, plan.live_version)
            .where(_days_sql(plan.days))
            .where(F.col(d.event_time) < _ts(plan.cutoff))
            .select(*cols)
        )
        old = self._read(self.paths.archive, plan.archive_version).where(_days_sql(plan.days)).select(*cols)
        if d.has_key:
            keys = [*d.primary_key, PARTITION_COLUMN]
            old = old.join(new.select(*keys), on=keys, how="left_anti").select(*cols)
        return old.unionByName(new)

    def _stage(self, plan: ArchivePlan, staging: str) -> None:
        from pyspark.sql import functions as F

        (
            self._merged(plan)
            .repartition(max(1, len(plan.days)), F.col(PARTITION_COLUMN))
            .sortWithinPartitions(*_order(self.definition))
            .write.mode("overwrite")
            .partitionBy(PARTITION_COLUMN)
            .parquet(staging)
        )

    def _staged_files(self, staging: str) -> dict[dt.date, list[str]]:
        fs, root = vectors.filesystem(staging)
        import pyarrow.fs as pafs

        out: dict[dt.date, list[str]] = {}
        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
                continue
            part = info.path.rsplit("/", 2)[-2]
            if not part.startswith(f"{PARTITION_COLUMN}="):
                continue
            day = dt.date.fromisoformat(part.split("=", 1)[1])
            out.setdefault(day, []).append(vectors.to_uri(staging, root, info.path))
        return {k: sorted(v) for k, v in out.items()}

    def _write_vectors(self, plan: ArchivePlan, staging: str) -> int:
        d = self.definition
        sort_cols = tuple((c, d.column(c).type.arrow()) for c in d.archive.sort_columns)
        plain: tuple[tuple[str, pa.DataType], ...] = ()
        if d.archive.vectors == "all":
            plain = tuple((c.name, c.type.arrow()) for c in d.columns if c.name not in d.archive.sort_columns)
        if not sort_cols and not plain:
            return 0
        files = self._staged_files(staging)
        missing = [day for day in plan.days if day not in files]
        if missing:
            raise LakehouseError(f"archive {d.name}: staged batch missing for {missing[0]} in {staging}")
        pid = os.getpid() if crashpoints.armed() else None
        tasks = [DayTask(day, tuple(files[day]), self.paths.vectors, plan.cutoff, sort_cols, plain, pid)
                 for day in plan.days]
        sc = self.spark.sparkContext
        done = sc.parallelize(tasks, len(tasks)).map(encode_day).collect()
        return sum(n for _, _, n in done)

    def _commit(self, plan: ArchivePlan, staging: str) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        d = self.definition
        schema = StructType.fromDDL(d.spark_ddl())
        if plan.days:
            df = (
                self.spark.read.schema(schema).option("basePath", staging).parquet(staging)
                .select(*_archive_columns(d))
                .repartition(max(1, len(plan.days)), F.col(PARTITION_COLUMN))
                .sortWithinPartitions(*_order(d))
            )
            writer = df.write.format("delta").mode("overwrite").option("replaceWhere", _days_sql(plan.days))
        else:
            writer = self.spark.createDataFrame([], schema).write.format("delta").mode("append")
        current = spark_snapshot(self.spark, self.paths.archive)
        if current.version != plan.archive_version:
            raise CommitConflict(
                f"archive {d.name}: the archive changed since the plan (version {plan.archive_version} -> "
                f"{current.version}); another archiving run is under way or finished; run again"
            )
        crashpoints.kill_later("during_commit", 1.0)
        writer = writer.option("txnAppId", CUTOFF_APP_ID).option("txnVersion", plan.cutoff)
        writer.save(self.paths.archive)
        committed = spark_snapshot(self.spark, self.paths.archive).cutoff
        if committed != plan.cutoff:
            raise CommitConflict(
                f"archive {d.name}: cutoff {plan.cutoff} was not committed (the archive holds {committed}); "
                "another archiving run committed first; run again"
            )

    # -- purge and clean (also the recovery of a crashed run) --------------------------------

    def purge(self, cutoff: int | None = None) -> int:
        """Delete from live the rows the archive holds: event time < cutoff and a load id that
        the archive's batch of that day contains. Idempotent; returns rows deleted."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        d = self.definition
        if cutoff is None:
            cutoff = spark_snapshot(self.spark, self.paths.archive).cutoff
            if cutoff is None:
                return 0
        live = self.spark.read.format("delta").load(self.paths.live)
        below = live.where(F.col(PARTITION_COLUMN) <= F.lit(cutoff_time(cutoff).date())).where(F.col(d.event_time) < _ts(cutoff))
        days = [r[PARTITION_COLUMN] for r in below.select(PARTITION_COLUMN).distinct().collect()]
        if not days:
            return 0
        # (load, day) pairs the archive holds for those days: small (loads per day), so the delete
        # is a plain DELETE with a literal predicate, which Delta prunes to those partitions.
        pairs = (
            self.spark.read.format("delta").load(self.paths.archive)
            .where(F.col(PARTITION_COLUMN).isin(days)).select(PARTITION_COLUMN, LOAD_COLUMN).distinct().collect()
        )
        by_day: dict[dt.date, list[str]] = {}
        for r in pairs:
            by_day.setdefault(r[PARTITION_COLUMN], []).append(r[LOAD_COLUMN])
        if not by_day:
            return 0
        cond = F.lit(False)
        for day, loads in sorted(by_day.items()):
            cond = cond | ((F.col(PARTITION_COLUMN) == F.lit(day)) & F.col(LOAD_COLUMN).isin(sorted(loads)))
        cond = F.col(PARTITION_COLUMN).isin(sorted(by_day)) & (F.col(d.event_time) < _ts(cutoff)) & cond

        def delete() -> int:
            table = DeltaTable.forPath(self.spark, self.paths.live)
            before = table.toDF().where(cond).count()
            if before:
                table.delete(cond)
            return before

        deleted, _ = with_retries(f"purge of archived rows from {d.name}/live", delete)
        return deleted

    def _discard_uncommitted(self, cutoff: int) -> None:
        """Remove the vector files of this run's cutoff when its commit did not happen."""
        try:
            if spark_snapshot(self.spark, self.paths.archive).cutoff == cutoff:
                return
            files, _ = vectors.list_files(self.paths.vectors)
            vectors.delete([f.path for f in files if f.cutoff == cutoff], self.paths.vectors)
        except Exception:  # noqa: BLE001 - the next run's clean-up removes them too
            log.warning("could not remove the uncommitted vector files of cutoff %s", cutoff)

    def clean(self, committed: int | None = None) -> int:
        """Remove vector files no reader uses, temporary leftovers and stale staging."""
        if committed is None:
            committed = spark_snapshot(self.spark, self.paths.archive).cutoff
        files, temps = vectors.list_files(self.paths.vectors)
        junk = [f.path for f in vectors.garbage(files, committed)] + temps
        removed = vectors.delete(junk, self.paths.vectors)
        fs, root = vectors.filesystem(self.paths.staging)
        import pyarrow.fs as pafs

        for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
            if info.type == pafs.FileType.Directory and info.base_name.startswith("archive-"):
                fs.delete_dir(info.path)  # only this table's archive staging; loads stage elsewhere
        return removed

    def recover(self) -> tuple[int, int]:
        """Finish what a crashed run left: (rows purged, files removed)."""
        committed = spark_snapshot(self.spark, self.paths.archive).cutoff
        return self.purge(committed), self.clean(committed)


FUTURE_TOLERANCE = dt.timedelta(minutes=1)
"""How far ``--now`` may run ahead of the wall clock without ``--allow-future``."""


def check_now(table: str, now: dt.datetime, wall: dt.datetime | None = None,
              allow_future: bool = False) -> None:
    """Refuse a clock more than a minute ahead of the wall clock: a committed cutoff never moves
    back, so a typo in ``--now`` would hide every later row for good."""
    wall = wall or dt.datetime.now(dt.timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    if allow_future or now <= wall + FUTURE_TOLERANCE:
        return
    ahead = now - wall
    raise LakehouseError(
        f"archive {table}: --now {now.isoformat()} is {_human(ahead)} ahead of the clock "
        f"({wall.replace(microsecond=0).isoformat()}); a committed cutoff cannot move back, so this "
        "would hide every later row for good; fix --now or pass --allow-future if you mean it"
    )


def _human(delta: dt.timedelta) -> str:
    s = int(delta.total_seconds())
    if s >= 86_400:
        return f"{s // 86_400}d {s % 86_400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 60}m {s % 60}s"


def run_archive(spark_factory: Callable[[], "SparkSession"], warehouse: str, definition: TableDefinition,
                now: dt.datetime | None = None, dry_run: bool = False,
                allow_future: bool = False) -> ArchiveResult:
    """Plan and (unless ``dry_run``) execute one archiving run, after recovering a crashed one.

    ``now`` more than a minute ahead of the wall clock is refused unless ``allow_future``."""
    if now is not None and not dry_run:
        check_now(definition.name, now, allow_future=allow_future)
    spark = spark_factory()
    job = ArchiveJob(spark, warehouse, definition)
    now = now or dt.datetime.now(dt.timezone.utc)
    if dry_run:
        return ArchiveResult(job.plan(now))
    with run_lock(job.paths):
        recovered, removed = job.recover()
        plan = job.plan(now)
        result = job.execute(plan)
        result.recovered_rows = recovered
        result.removed_vector_files += removed
        return result
