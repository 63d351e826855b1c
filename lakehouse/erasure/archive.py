"""Erasing from a table's archive (step 4 of a delete): only the days that hold a matched row,
each rewritten the way an archiving run rewrites a day, without live rows and at the unchanged
cutoff.

One pass (``archive.onepass``): the days' rows at the archive's version, each on the side
``kept`` or ``deleted`` (``erasure.selection``: the predicate true, Spark's ``DELETE`` semantics,
a NULL keeps the row; or the key among many keys joined)
with its row hash; one shuffle by day, one sort by the table's total order, and in the sort's
tasks the days' new data files (named by the unchanged cutoff and this rewrite's run id) and
vector files of a new generation (``<day>-<cutoff>.<erasure>``: readers take, per day, the
largest (cutoff, generation) the archive committed). The books (``checks.pass_conservation``):
per day, rows kept + deleted are what the archive's log and the ledger say the day held, the
rows deleted are the ones matched, the files hold the rows kept. Then one metadata-only commit
right after the version read replaces the days' files and carries the SetTransaction
(``lakehouse.erasure``, the erasure's number: the archive's record that this erasure is done)
and the figures; the ledger gets a row per day (rows out = rows in - deleted).

Crash points: ``erase_after_archive_write`` (files and vector files written, nothing committed:
the next recovery removes them by the staging folder's marker, or this step when run again) and
``erase_after_archive_commit`` (committed, the ledger not written: recovery rebuilds its rows
from the commit's metadata, as for an archiving run)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, delta_log
from lakehouse.archive import checks, commit, ledger_table, onepass, recover
from lakehouse.archive.ledger import CommitFigures, commit_info, parse_commit_info, stored_columns
from lakehouse.archive.order import archive_columns
from lakehouse.archive.plan import ArchivePlan
from lakehouse.archive.stage import read_at
from lakehouse.archive.state import ERASURE_APP_ID, Snapshot, current_snapshot, day_rows
from lakehouse.archive.write import HASH_COLUMN, SIDE_COLUMN
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.erasure.selection import Selection, matched
from lakehouse.errors import CommitConflict, ConservationError
from lakehouse.lease import Lease
from lakehouse.storage import join
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class ArchiveErasure:
    """What the archive's step did: rows deleted per day, the files it wrote."""

    days: dict[dt.date, int] = field(default_factory=dict)
    already: bool = False
    """The archive holds this erasure already (nothing done)."""
    version: int | None = None
    """The archive version committed."""
    files: int = 0
    bytes: int = 0
    vector_files: int = 0
    rows_rewritten: int = 0
    """Rows the rewritten days hold now (written again)."""
    figures: CommitFigures | None = None

    @property
    def rows(self) -> int:
        """Rows deleted."""
        return sum(self.days.values())

    def as_dict(self) -> dict[str, Any]:
        """The step as the CLI's JSON document."""
        return {"rows": self.rows, "days": {d.isoformat(): n for d, n in sorted(self.days.items())},
                "already": self.already, "version": self.version, "files_written": self.files,
                "bytes_written": self.bytes, "vector_files": self.vector_files, "rows_rewritten": self.rows_rewritten}


def plan(spark: SparkSession, definition: TableDefinition, paths: TablePaths, selection: Selection,
         snap: Snapshot | None = None) -> tuple[ArchivePlan | None, dict[dt.date, int]]:
    """The rewrite's plan at the archive's version ``snap`` (the latest by default) and the rows
    the selection holds per day (no plan: nothing archived or nothing matched)."""
    snap = snap or current_snapshot(paths.archive)
    if snap.cutoff is None:
        return None, {}
    days = matched(spark, paths.archive, selection, snap.version)
    if not days:
        return None, {}
    held = day_rows(paths.archive, snap.version)
    counts = {day: held.get(day, 0) for day in days}
    return ArchivePlan(definition.name, dt.datetime.now(dt.timezone.utc), snap.cutoff, snap.cutoff, None,
                       snap.version, days=tuple(sorted(days)), archive_rows_in_days=sum(counts.values()),
                       archive_rows=counts), days


def sided(spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan,
          selection: Selection) -> DataFrame:
    """The plan's days' rows at its version, each ``kept`` or ``deleted``, with its row hash."""
    from lakehouse.archive.order import days_predicate

    assert plan.archive_version is not None
    days = read_at(spark, paths.archive, plan.archive_version).where(days_predicate(plan.days))
    return (selection.sided(spark, days, SIDE_COLUMN)
            .select(*archive_columns(definition), SIDE_COLUMN)
            .withColumn(HASH_COLUMN, ledger_table.hash_column(stored_columns(definition))))


def erase(spark: SparkSession, definition: TableDefinition, paths: TablePaths, selection: Selection, number: int,
          lease: Lease | None = None, run_id: str | None = None) -> ArchiveErasure:
    """Delete from the archive the rows ``selection`` holds, as erasure ``number``: the days
    holding one rewritten without them, one commit. Run under the table's lease."""
    d = definition
    snap = current_snapshot(paths.archive)
    if snap.erasures >= number:  # done before: what its commit says it deleted
        done = ArchiveErasure(already=True)
        info = delta_log.txn_commit_info(paths.archive, ERASURE_APP_ID, number)
        figures = parse_commit_info((info or {}).get("userMetadata"))
        if figures is not None and figures.erasure == number:
            done.days = {day: i.deleted.rows for day, i, _ in figures.days}
            done.version, done.figures = int((info or {})["version"]), figures
        return done
    p, days = plan(spark, d, paths, selection, snap)
    if p is None:
        return ArchiveErasure()
    run_id = run_id or f"e{number}{uuid.uuid4().hex[:8]}"
    staging = join(paths.staging, f"archive-{p.cutoff}-{run_id}")
    result = ArchiveErasure(dict(days))
    try:
        onepass.mark(staging, p, run_id, erasure=number)
        task = dataclasses.replace(onepass.write_task(d, paths, p, run_id), generation=number)
        written = onepass.Written.of(onepass.write_pass(spark, d, paths, p, task, sided(spark, d, paths, p, selection)))
        refused = f"erasure {number}: nothing was committed to the archive; see lakehouse verify {d.name}"
        figures = dataclasses.replace(checks.pass_conservation(d, paths, p, run_id, written, refused), erasure=number)
        wrong = [day for day, i, _ in figures.days if i.deleted.rows != days.get(day, 0)]
        if wrong:
            got = {day: i.deleted.rows for day, i, _ in figures.days}
            raise ConservationError(
                f"archive {d.name}: erasure {number}: day {wrong[0]}: {got.get(wrong[0], 0)} rows deleted in the "
                f"rewrite, {days.get(wrong[0], 0)} matched at version {p.archive_version}; nothing was committed")
        crashpoints.reached("erase_after_archive_write")
        commit.write_run_sidecar(d, paths, p, run_id, number)
        if lease is not None:
            lease.check()
        try:
            version = delta_log.replace_partitions(
                paths.archive, snap.version, written.files, PARTITION_COLUMN, [day.isoformat() for day in p.days],
                txn=(ERASURE_APP_ID, number), user_metadata=commit_info(figures))
        except delta_log.StaleVersion:
            raise CommitConflict(f"archive {d.name}: the archive changed while erasure {number} rewrote "
                                 f"{len(p.days)} day(s) (version {snap.version}); nothing was committed; "
                                 "run the delete again") from None
    except BaseException:
        recover.discard_uncommitted(paths, p.cutoff, staging, p.days, run_id, erasure=number)
        raise
    crashpoints.reached("erase_after_archive_commit")
    result.version, result.figures = version, figures
    result.files = len(written.files)
    result.bytes = sum(f.size for f in written.files)
    result.vector_files = written.vector_files
    result.rows_rewritten = sum(written.rows.values())
    commit.check_committed(spark, d, paths, p, written.rows, version)
    ledger_table.append(paths, figures.rows(version), p.cutoff, erasure=number)
    recover.clean(spark, paths)  # the days' old vector files and this rewrite's staging
    return result
