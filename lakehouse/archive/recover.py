"""Finishing or rolling back what an archiving run left: purge from live the rows the committed
archive holds, remove vector files no reader uses and leftover staging, discard the files of a
run whose commit did not happen, and write the ledger rows a crash kept out of the ledger.
Each step is idempotent: a run does them for itself after its commit (steps 5 and 6), and the
next run does them first for a run that was killed."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lakehouse import storage
from lakehouse.archive import ledger_table, onepass, vectors
from lakehouse.archive.plan import cutoff_time, date_literal
from lakehouse.archive.state import current_snapshot
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.spark.commit import merge_into, with_retries
from lakehouse.storage import join, remove_tree
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def purge(spark: SparkSession, definition: TableDefinition, paths: TablePaths, cutoff: int | None = None) -> int:
    """Delete from live the rows the archive holds: event time < cutoff and a (day, load)
    pair the archive's batch of that day contains. One MERGE against the small frame of
    pairs, however many days, and none when no such pair is in live (rows below the cutoff
    that wait for the next run, late ones, are not the archive's). Idempotent; returns rows
    deleted."""
    from pyspark.sql import functions as F

    from lakehouse import delta_log

    d = definition
    if cutoff is None:
        cutoff = current_snapshot(paths.archive).cutoff
        if cutoff is None:
            return 0
    # which (day, load) pairs wait below the cutoff, and which of them the archive holds: read
    # with delta-rs (no Spark job); the MERGE below is Spark's and runs only when there is work
    pair = f'"{PARTITION_COLUMN}" AS day, "{LOAD_COLUMN}" AS load'
    waiting = {(r["day"], r["load"]) for r in delta_log.scan(paths.live, (
        f'SELECT DISTINCT {pair} FROM t WHERE "{PARTITION_COLUMN}" <= DATE \'{cutoff_time(cutoff).date().isoformat()}\' '
        f'AND "{d.event_time}" < to_timestamp_seconds({int(cutoff)})')).to_pylist()}
    if not waiting:
        return 0
    days = ", ".join(f"DATE '{day.isoformat()}'" for day in sorted({day for day, _ in waiting}))
    held_pairs = sorted((r["day"], r["load"]) for r in delta_log.scan(paths.archive, (
        f'SELECT DISTINCT {pair} FROM t WHERE "{PARTITION_COLUMN}" IN ({days})')).to_pylist()
        if (r["day"], r["load"]) in waiting)
    if not held_pairs:
        return 0
    source = spark.createDataFrame(held_pairs, f"`{PARTITION_COLUMN}` DATE, `{LOAD_COLUMN}` STRING")
    held = [day for day, _ in held_pairs]
    cond = (  # the literal day range lets Delta prune live's files; the join does the rest
        f"t.`{PARTITION_COLUMN}` >= {date_literal(held[0])} AND t.`{PARTITION_COLUMN}` <= {date_literal(held[-1])} "
        f"AND t.`{PARTITION_COLUMN}` = s.`{PARTITION_COLUMN}` AND t.`{LOAD_COLUMN}` = s.`{LOAD_COLUMN}` "
        f"AND t.`{d.event_time}` < timestamp_seconds({int(cutoff)})"
    )

    def delete() -> int:
        """One MERGE deleting the held pairs' rows; the rows it deleted."""
        return merge_into(spark, paths.live, F.broadcast(source), cond, "WHEN MATCHED THEN DELETE").get(
            "num_deleted_rows", 0)

    deleted, _ = with_retries(f"purge of archived rows from {d.name}/live", delete)
    return deleted


def discard_uncommitted(spark: SparkSession, paths: TablePaths, cutoff: int, staging: str | None = None) -> None:
    """Remove the vector files (and staging) of a run's cutoff when its commit did not happen."""
    try:
        if staging:
            remove_tree(staging)
        if current_snapshot(paths.archive).cutoff == cutoff:
            return
        files, _ = vectors.list_files(paths.vectors)
        vectors.delete([f.path for f in files if f.cutoff == cutoff], paths.vectors)
        vectors.delete(
            [join(paths.vectors, vectors.RUNS_FOLDER, f"{cutoff}.json")], paths.vectors
        )
    except Exception:  # noqa: BLE001 - the next run's clean-up removes them too
        log.warning("could not remove the uncommitted vector files of cutoff %s", cutoff)


def clean(spark: SparkSession, paths: TablePaths, committed: int | None = None) -> int:
    """Remove vector files no reader uses, temporary leftovers, run sidecars no day uses
    and archive staging (other runs' only while this run holds the lease), with the data files of
    a one-pass run that did not commit; files removed."""
    import pyarrow.fs as pafs

    if committed is None:
        committed = current_snapshot(paths.archive).cutoff
    files, temps = vectors.list_files(paths.vectors)
    junk = [f.path for f in vectors.garbage(files, committed)] + temps
    removed = vectors.delete(junk, paths.vectors)
    used = set(vectors.day_runs(files, committed).values()) | (
        {committed} if committed is not None else set()
    )
    fs, root = storage.filesystem(join(paths.vectors, vectors.RUNS_FOLDER))
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        stem = info.base_name.removesuffix(".json")
        if (
            info.base_name.startswith(".")
            or not stem.lstrip("-").isdigit()
            or int(stem) not in used
        ):
            storage.delete(join(paths.vectors, vectors.RUNS_FOLDER, info.base_name))
    fs, root = storage.filesystem(paths.staging)
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("archive-"):
            folder = join(paths.staging, info.base_name)  # this table's archive staging only
            removed += onepass.left_by(folder, paths, committed)  # a one-pass run that did not commit
            storage.remove_tree(folder)
    return removed


def recover(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, ledger: bool = True
) -> tuple[int, int, int]:
    """Finish what a crashed or failed run left: (rows purged, files removed, ledger rows
    repaired); the ledger rows a crash kept out of the ledger are written first."""
    committed = current_snapshot(paths.archive).cutoff
    repaired = ledger_table.repair(spark, definition, paths, committed) if ledger else 0
    return purge(spark, definition, paths, committed), clean(spark, paths, committed), repaired
