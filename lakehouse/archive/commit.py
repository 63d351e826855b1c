"""Step 4 of an archiving run: one Delta commit replaces the staged days in the archive and
records the new cutoff (a SetTransaction) and the books (``userMetadata``), so the cutoff
becomes visible with the data it describes (invariant 3); then the commit is checked."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse import crashpoints, delta_log, storage
from lakehouse.archive import vectors
from lakehouse.archive.ledger import CommitFigures, commit_info
from lakehouse.archive.order import days_predicate, row_order
from lakehouse.archive.plan import ArchivePlan
from lakehouse.archive.reader import current_encoding
from lakehouse.archive.stage import day_partitions, read_staged
from lakehouse.archive.state import CUTOFF_APP_ID, current_snapshot, day_rows
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.delta_log import NewFile
from lakehouse.errors import CommitConflict, LakehouseError
from lakehouse.lease import Lease
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def write_run_sidecar(definition: TableDefinition, paths: TablePaths, plan: ArchivePlan, run_id: str,
                      generation: int = 0) -> None:
    """Write ``vectors/_runs/<cutoff>[.<generation>].json``: the encoding the run (or an
    erasure's rewrite) wrote its days under."""
    doc = {
        "cutoff": plan.cutoff,
        "run_id": run_id,
        "encoding": current_encoding(definition).key(),
        "days": len(plan.days),
    }
    if generation:
        doc["erasure"] = generation
    storage.write_json(vectors.sidecar(paths.vectors, (plan.cutoff, generation)), doc)


def commit(
    spark: SparkSession,
    definition: TableDefinition,
    paths: TablePaths,
    plan: ArchivePlan,
    staging: str,
    figures: CommitFigures | None = None,
    lease: Lease | None = None,
) -> int:
    """Commit the staged days and the cutoff (and the figures); the archive version written.
    CommitConflict when the archive moved since the plan or another run's cutoff won."""
    from pyspark.sql import functions as F

    d = definition
    if plan.days:
        df = (
            read_staged(spark, d, staging)
            .repartition(day_partitions(spark, plan), F.col(PARTITION_COLUMN))
            .sortWithinPartitions(*row_order(d))
        )
        writer = (
            df.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", days_predicate(plan.days))
        )
    else:
        writer = spark.createDataFrame([], d.spark_ddl()).write.format("delta").mode("append")
    if lease is not None:
        lease.check()
    current = current_snapshot(paths.archive)
    if current.version != plan.archive_version:
        raise CommitConflict(
            f"archive {d.name}: the archive changed since the plan (version {plan.archive_version} -> "
            f"{current.version}); another archiving run is under way or finished; run again"
        )
    crashpoints.kill_later("during_commit", 1.0)
    writer = writer.option("txnAppId", CUTOFF_APP_ID).option("txnVersion", plan.cutoff)
    if figures is not None:
        writer = writer.option("userMetadata", commit_info(figures))
    writer.save(paths.archive)
    after = current_snapshot(paths.archive)
    if after.cutoff != plan.cutoff:
        raise CommitConflict(
            f"archive {d.name}: cutoff {plan.cutoff} was not committed (the archive holds {after.cutoff}); "
            "another archiving run committed first; run again"
        )
    return after.version


def commit_written(
    definition: TableDefinition,
    paths: TablePaths,
    plan: ArchivePlan,
    files: list[NewFile],
    figures: CommitFigures | None = None,
    lease: Lease | None = None,
) -> int:
    """Commit the files a one-pass run wrote into the archive's folder and the cutoff (and the
    figures): one metadata-only commit (delta-rs) right after the plan's archive version that
    replaces the plan's days; the archive version written. CommitConflict when the archive moved
    since the plan (nothing committed: the files stay unreferenced). Once the commit is in,
    nothing here raises: the version right after the plan's holds this run's cutoff."""
    d = definition
    assert plan.archive_version is not None
    if lease is not None:
        lease.check()
    crashpoints.kill_later("during_commit", 0.05)
    try:
        version = delta_log.replace_partitions(
            paths.archive, plan.archive_version, files, PARTITION_COLUMN, [day.isoformat() for day in plan.days],
            txn=(CUTOFF_APP_ID, plan.cutoff), user_metadata=commit_info(figures) if figures is not None else None)
    except delta_log.StaleVersion:
        raise CommitConflict(
            f"archive {d.name}: the archive changed since the plan (version {plan.archive_version}); another "
            "archiving run or a compaction committed first; run again"
        ) from None
    return version


def check_committed(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, plan: ArchivePlan,
    staged: dict[dt.date, int], version: int | None = None,
) -> None:
    """The committed rows per day are the staged ones (from the Delta log at ``version``, the
    run's commit, by default the latest; no data read)."""
    if not plan.days:
        return
    if version is None:
        version = current_snapshot(paths.archive).version
    committed = day_rows(paths.archive, version)
    bad = [day for day in plan.days if committed.get(day, 0) != staged.get(day, 0)]
    if bad:
        day = bad[0]
        raise LakehouseError(
            f"archive {definition.name}: day {day} holds {committed.get(day, 0)} rows after the commit of "
            f"cutoff {plan.cutoff}, {staged.get(day, 0)} were staged; live rows are not purged; "
            "check the archive with lakehouse verify"
        )
