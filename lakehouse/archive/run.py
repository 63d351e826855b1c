"""One archiving run on Spark: plan, then execute, recoverably at every step.

Steps (crash points in brackets; a SIGKILL anywhere leaves every query exact):

0. Lease and recover (``recover``): take the table's lease (a file in the warehouse: one run at
   a time, also across hosts); bring the ledger up to the committed cutoff; purge live rows the
   last committed run archived but did not delete yet; remove vector files no reader uses
   (uncommitted or superseded) and other runs' leftover staging.
1. Plan (``survey``): C' = now - delay; the live snapshot V; the UTC days of V's rows with event
   time < C', rows per day; archived days whose vector files were written under other settings
   (they are re-sorted and re-encoded too). [after_plan]
2-3. Write, in one pass (``onepass``, ``write``): one read of the live rows taken and the days'
   archive rows, each with its side of the books and its row hash; one shuffle by day, one sort
   by the total order (``order``: sort columns, event time, key, other columns); and in the
   sort's own tasks the archive's final Parquet files (``<day>/part-<partition>-<C'>-<run id>-
   <attempt>.c<n>...``, straight into the archive's folder, referenced by nothing until the
   commit; the run's staging folder holds a marker of it first), their statistics, the
   vector files ``<day>-<C'>`` and the figures in and out per day. [during_vectors,
   after_staging, after_vectors] The rows written per day are checked against the plan
   (``checks``). Conservation (``checks.pass_conservation``, ``archive/ledger.py``): per day the
   rows taken (the plan's live figures; the archive rows read, kept or replaced) and the rows
   written have the same count and checksum, and the archive rows read are what the archive's log
   and the ledger say the day held, or the run stops (``ConservationError``); ``LAKEHOUSE_FAULT``
   damages a day's rows after they were counted in (tests).
   (``one_pass=False``: the earlier staged path, the reference the one pass is compared with:
   stage the sorted days in ``_staging/archive-<C'>-<run id>``, encode the vectors from there,
   hash both sides again, then write the days again in the commit.)
4. Commit (``commit``): one metadata-only Delta commit right after the plan's archive version
   adds the new files and removes the days' old ones, and records C' (SetTransaction) and the
   figures (``userMetadata``); another commit in between refuses it (CommitConflict, nothing
   committed). Then the committed rows per day are checked against the written ones, and the
   figures go into the ledger (``<table>/_ledger``; a crash before that is repaired by
   recovery). [during_commit, after_commit] Files of a run that did not commit are removed by
   the run itself when it fails, and by the next run's recovery (from its marker) or VACUUM when
   it was killed (nothing references them).
5. Purge (``purge``): delete from live the archived rows: event time < C' and a (day, load) pair
   the archive holds (rows loaded after V carry other load ids, so they stay). The pairs are
   read with delta-rs; the live files that hold only such rows (nearly all) go in one
   metadata-only commit, and one MERGE deletes what is left in files that also hold other
   rows, if anything is. With nothing to purge (the next run's recovery, late rows waiting) no
   Spark job runs. [after_purge]
6. Clean (``recover``): superseded vector files and staging.

A failing step is recorded in ``_state/archive-status.json`` (``lakehouse tables`` shows it); a
step after the commit is retried by the next run's recovery.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, faults
from lakehouse.archive import (
    checks,
    commit,
    ledger_table,
    onepass,
    purge,
    recover,
    stage,
    survey,
    vectors,
)
from lakehouse.archive.ledger import CommitFigures
from lakehouse.archive.plan import ArchivePlan
from lakehouse.archive.status import record_failure, record_success
from lakehouse.definitions import TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.lease import Lease, table_lease
from lakehouse.output import Progress, Steps, quiet
from lakehouse.storage import join
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    run_id: str = ""
    figures: CommitFigures | None = None
    """The run's books (rows and checksums in and out per day), as committed."""
    ledger_rows: int = 0
    """Ledger rows recovery wrote on behalf of an earlier run (or as a baseline)."""

    def as_dict(self) -> dict[str, Any]:
        """The result as the CLI's JSON document."""
        return {
            "cutoff": self.plan.cutoff if self.committed else self.plan.previous_cutoff,
            "previous_cutoff": self.plan.previous_cutoff,
            "days": [d.isoformat() for d in self.plan.days],
            "rows_archived": self.rows_archived,
            "committed": self.committed,
            "rows_purged": self.rows_purged,
            "recovered_rows": self.recovered_rows,
            "reencoded_days": [d.isoformat() for d in self.plan.reencode_days]
            if self.committed
            else [],
            "rows_replaced": sum(i.replaced.rows for _, i, _ in self.figures.days) if self.figures else 0,
            "ledger_rows_repaired": self.ledger_rows,
            "vector_files": self.vector_files,
            "removed_vector_files": self.removed_vector_files,
            "seconds": round(self.seconds, 3),
        }


class ArchiveJob:
    """An archiving run of one table; ``plan()`` first, then ``execute(plan)``."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        definition: TableDefinition,
        run_id: str | None = None,
        lease: Lease | None = None,
        ledger: bool = True,
        report: Progress = quiet,
        one_pass: bool = True,
    ) -> None:
        self.spark = spark
        self.definition = definition
        self.paths = TablePaths(warehouse, definition.name)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.lease = lease
        self.ledger = ledger
        """Check conservation and keep the books (off only for the benchmark's baseline)."""
        self.repaired = 0
        """Ledger rows the recovery wrote."""
        self.one_pass = one_pass
        """Write the final files in the sort's own tasks (``onepass``), or stage them first (the
        earlier path, kept as the reference the one pass is compared with)."""
        self.steps = Steps(f"archive {definition.name}", report)
        """The step under way (recorded with a failure), each said to ``report``."""
        self.listed: list[vectors.VectorFile] | None = None
        """The vector files the recovery left, listed under this run's lease: the next plan's
        (then None: a later plan lists the folder itself)."""

    @property
    def step(self) -> str:
        """The step under way."""
        return self.steps.step

    def staging_for(self, cutoff: int) -> str:
        """This run's own staging folder (another run never shares it)."""
        return join(self.paths.staging, f"archive-{cutoff}-{self.run_id}")

    def plan(self, now: dt.datetime) -> ArchivePlan:
        """Step 1: the plan of a run at ``now`` (nothing written)."""
        self.steps.at("plan")
        listed, self.listed = self.listed, None  # the recovery's listing, once
        return survey.survey(self.spark, self.definition, self.paths, now, self.ledger, listed)

    def execute(self, plan: ArchivePlan, through: str | None = None) -> ArchiveResult:
        """Run the plan; ``through="commit"`` stops right after the commit (tests of readers)."""
        spark, d, paths = self.spark, self.definition, self.paths
        started = time.monotonic()
        result = ArchiveResult(plan, run_id=self.run_id)
        if not plan.advances:
            result.seconds = time.monotonic() - started
            return result
        crashpoints.reached("after_plan")
        staging = self.staging_for(plan.cutoff)
        staged: dict[dt.date, int] = {}
        figures: CommitFigures | None = None
        written = onepass.Written()
        try:
            if plan.days and self.one_pass:
                written = self._write_pass(plan, result)
                staged = written.rows
            elif plan.days:
                staged = self._stage(plan, staging, result)
            if self.ledger:
                self.steps.at("conservation")
                t = time.monotonic()
                figures = (checks.pass_conservation(d, paths, plan, self.run_id, written) if self.one_pass
                           else checks.conservation(spark, d, paths, plan, staging, self.run_id))
                result.timings["conservation"] = time.monotonic() - t
            if plan.days and self.one_pass:  # after the books, which say more of a damaged day
                checks.check_staged(d, plan, staged)
            if plan.days and d.archive.checks == "before_commit":
                self.steps.at("checks")
                t = time.monotonic()
                rows = (onepass.read_written(spark, d, paths, written.files) if self.one_pass
                        else stage.read_staged(spark, d, staging))
                checks.quality_gate(spark, d, paths, plan, rows, self.run_id)
                result.timings["checks"] = time.monotonic() - t
            self.steps.at("commit")
            t = time.monotonic()
            commit.write_run_sidecar(d, paths, plan, self.run_id)
            if self.one_pass:
                version = commit.commit_written(d, paths, plan, written.files, figures, self.lease)
            else:
                version = commit.commit(spark, d, paths, plan, staging, figures, self.lease)
        except BaseException:
            recover.discard_uncommitted(paths, plan.cutoff, staging, plan.days,
                                        self.run_id if self.one_pass else None)
            raise
        result.timings["commit"] = time.monotonic() - t
        result.committed = True
        result.rows_archived = plan.rows
        result.figures = figures
        crashpoints.reached("after_commit")
        self.steps.at("check")
        commit.check_committed(spark, d, paths, plan, staged, version)
        if figures is not None:
            self.steps.at("ledger")
            t = time.monotonic()
            ledger_table.append(paths, figures.rows(version), plan.cutoff)
            result.timings["ledger"] = time.monotonic() - t
        if through == "commit":
            return result
        self.steps.at("purge")
        t = time.monotonic()
        result.rows_purged = self.purge(plan.cutoff)
        result.timings["purge"] = time.monotonic() - t
        crashpoints.reached("after_purge")
        self.steps.at("clean")
        t = time.monotonic()
        result.removed_vector_files = self.clean(plan.cutoff)
        result.timings["clean"] = time.monotonic() - t
        result.seconds = time.monotonic() - started
        return result

    def _write_pass(self, plan: ArchivePlan, result: ArchiveResult) -> onepass.Written:
        """Steps 2 and 3 in one pass: the days' final data files, vector files and figures."""
        d = self.definition
        self.steps.at("write", f"{len(plan.days):,} day(s), {plan.rows:,} live rows, "
                               f"{plan.archive_rows_in_days:,} archived rows")
        t = time.monotonic()
        fault = faults.armed()
        onepass.mark(self.staging_for(plan.cutoff), plan, self.run_id)
        task = onepass.write_task(d, self.paths, plan, self.run_id, fault)
        written = onepass.Written.of(onepass.write_pass(self.spark, d, self.paths, plan, task))
        if fault:
            log.warning("archive %s: injected fault: %s in the rows of %s", d.name, fault, min(plan.days))
        result.timings["write"] = time.monotonic() - t
        result.vector_files = written.vector_files
        crashpoints.reached("after_staging")
        crashpoints.reached("after_vectors")
        return written

    def _stage(self, plan: ArchivePlan, staging: str, result: ArchiveResult) -> dict[dt.date, int]:
        """Steps 2 and 3 on the staged path: stage the sorted days, then encode their vector files;
        the staged rows per day."""
        spark, d, paths = self.spark, self.definition, self.paths
        self.steps.at("stage", f"{len(plan.days):,} day(s), {plan.rows:,} live rows, "
                               f"{plan.archive_rows_in_days:,} archived rows")
        t = time.monotonic()
        stage.stage_days(spark, d, paths, plan, staging)
        result.timings["stage"] = time.monotonic() - t
        crashpoints.reached("after_staging")
        self.steps.at("vectors")
        t = time.monotonic()
        result.vector_files, staged = stage.write_vectors(spark, d, paths, plan, staging)
        result.timings["vectors"] = time.monotonic() - t
        crashpoints.reached("after_vectors")
        checks.check_staged(d, plan, staged)
        if faults.armed():
            damage = faults.damage_staging(stage.staged_files(staging))
            log.warning("archive %s: injected fault: %s", d.name, damage)
        return staged

    def purge(self, cutoff: int | None = None) -> int:
        """Step 5: delete from live the rows the archive holds below ``cutoff`` (default: the
        committed one); idempotent; rows deleted."""
        return purge.purge(self.spark, self.definition, self.paths, cutoff)

    def clean(self, committed: int | None = None) -> int:
        """Step 6: remove vector files no reader uses and archive staging; files removed."""
        return recover.clean(self.spark, self.paths, committed)

    def recover(self) -> tuple[int, int]:
        """Finish what a crashed or failed run left: (rows purged, files removed); the ledger
        rows a crash kept out of the ledger are written first (``self.repaired``)."""
        self.steps.at("recover")
        purged, removed, self.repaired, self.listed = recover.recover(
            self.spark, self.definition, self.paths, self.ledger)
        return purged, removed


FUTURE_TOLERANCE = dt.timedelta(minutes=1)
"""How far ``--now`` may run ahead of the wall clock without ``--allow-future``."""


def check_now(
    table: str, now: dt.datetime, wall: dt.datetime | None = None, allow_future: bool = False
) -> None:
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
    """A positive duration in its two largest units (``2d 3h``, ``4h 5m``, ``6m 7s``)."""
    s = int(delta.total_seconds())
    if s >= 86_400:
        return f"{s // 86_400}d {s % 86_400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 60}m {s % 60}s"


def run_archive(
    spark_factory: Callable[[], SparkSession],
    warehouse: str,
    definition: TableDefinition,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    allow_future: bool = False,
    lease: Lease | None = None,
    ledger: bool = True,
    report: Progress = quiet,
    one_pass: bool = True,
) -> ArchiveResult:
    """Plan and (unless ``dry_run``) execute one archiving run, after recovering a crashed one.

    ``now`` more than a minute ahead of the wall clock is refused unless ``allow_future``. Runs
    under the table's lease: taken here, or ``lease`` when the caller (the jobs runner) holds it."""
    if now is not None and not dry_run:
        check_now(definition.name, now, allow_future=allow_future)
    now = now or dt.datetime.now(dt.timezone.utc)
    paths = TablePaths(warehouse, definition.name)
    if dry_run:  # planned from Delta's log and delta-rs: no Spark
        return ArchiveResult(survey.survey(None, definition, paths, now, ledger=False))
    idle = _idle(definition, paths, now, ledger)
    if idle is not None:  # nothing to archive and nothing a crashed run left: no Spark either
        return ArchiveResult(idle)
    spark = spark_factory()
    job = ArchiveJob(spark, warehouse, definition, ledger=ledger, report=report, one_pass=one_pass)
    if definition.archive.clock == "bound":  # expire stalled producers' leases, release what is due
        from lakehouse.stream.engine import Stream
        from lakehouse.times import micros

        t = micros(min(now, dt.datetime.now(dt.timezone.utc)))  # a --now ahead expires no lease
        Stream(spark_factory, definition, job.paths, clock=lambda: t).tick()
    with contextlib.nullcontext(lease) if lease is not None else table_lease(job.paths, "archive") as held:
        job.lease = held
        try:
            t0 = time.monotonic()
            recovered, removed = job.recover()
            t1 = time.monotonic()
            plan = job.plan(now)
            t2 = time.monotonic()
            result = job.execute(plan)
        except BaseException as e:
            record_failure(job.paths.root, definition.name, job.step, job.run_id, e)
            raise
        result.timings = {"recover": t1 - t0, "plan": t2 - t1, **result.timings}
        result.recovered_rows = recovered
        result.ledger_rows = job.repaired
        result.removed_vector_files += removed
        record_success(job.paths.root, definition.name, job.run_id,
                       result.plan.cutoff if result.committed else result.plan.previous_cutoff)
        return result


def _idle(definition: TableDefinition, paths: TablePaths, now: dt.datetime, ledger: bool) -> ArchivePlan | None:
    """The plan of a run at ``now`` when it has nothing to do, found without Spark: the cutoff
    does not advance, no live row waits below the committed cutoff (late, or left by a crashed
    purge), the books are up to the cutoff, no run left staging and the last run did not fail.
    None otherwise (then the run goes the whole way, recovery first). Tables whose archiving
    follows the stream's watermark always go the whole way (their stream is ticked first)."""
    from lakehouse.archive.status import read_status
    from lakehouse.storage import list_names

    if definition.archive.clock == "bound":
        return None
    plan = survey.cutoff_plan(definition, paths, now)  # the logs only: no data read twice
    if plan.advances or (read_status(paths.root) or {}).get("last_error") or list_names(paths.staging):
        return None
    committed = plan.previous_cutoff
    if committed is not None:
        if ledger and (ledger_table.ledger_cutoff(paths) or -1) < committed:
            return None
        if survey.rows_below(paths.live, definition.event_time, committed):
            return None
    return plan
