"""Finishing or rolling back what an archiving run left: purge from live the rows the committed
archive holds, remove vector files no reader uses and leftover staging, discard the files of a
run whose commit did not happen, and write the ledger rows a crash kept out of the ledger.
Each step is idempotent: a run does them for itself after its commit (steps 5 and 6), and the
next run does them first for a run that was killed."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse import storage
from lakehouse.archive import ledger_table, onepass, purge, vectors
from lakehouse.archive.state import current_snapshot
from lakehouse.definitions import TableDefinition
from lakehouse.storage import join, remove_tree
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def discard_uncommitted(paths: TablePaths, cutoff: int, staging: str | None = None,
                        days: Sequence[dt.date] = (), run_id: str | None = None, erasure: int = 0) -> None:
    """After a failed run of ``cutoff`` (or an erasure's rewrite, ``erasure``: its number): when
    its commit did not happen (the archive's cutoff is not the run's; its last erasure is below
    this one), remove what it wrote: the data files of a one-pass run (``run_id``, in the folders
    of ``days``), its vector files and its sidecar; then its ``staging`` (last: it holds the
    marker by which the next run's recovery finds the data files, should this fail midway). When
    whether it committed cannot be told, nothing is removed: recovery and VACUUM do it."""
    try:
        snap = current_snapshot(paths.archive)
        if (snap.erasures < erasure if erasure  # numbers and cutoffs only grow: its commit is not in
                else snap.cutoff is None or snap.cutoff < cutoff):
            if run_id is not None:
                onepass.remove_written(paths, list(days), cutoff, run_id)
            run = (cutoff, erasure)
            files, _ = vectors.list_files(paths.vectors)
            vectors.delete([f.path for f in files if f.run == run], paths.vectors)
            vectors.delete([vectors.sidecar(paths.vectors, run)], paths.vectors)
        if staging:
            remove_tree(staging)
    except Exception:  # noqa: BLE001 - the next run's recovery (and VACUUM) removes them
        log.warning("archive %s: what the uncommitted run of cutoff %s wrote was not all removed; the next run's "
                    "recovery removes it", paths.name, cutoff)


def clean(spark: SparkSession, paths: TablePaths, committed: int | None = None) -> int:
    """Remove vector files no reader uses, temporary leftovers, run sidecars no day uses
    and archive staging (other runs' only while this run holds the lease), with the data files of
    a one-pass run that did not commit; files removed."""
    return cleaned(paths, committed)[0]


def cleaned(paths: TablePaths, committed: int | None = None) -> tuple[int, list[vectors.VectorFile]]:
    """``clean``: (files removed, the vector files left, as listed: what a plan made next under
    the same lease may take instead of listing the folder again)."""
    import pyarrow.fs as pafs

    snap = current_snapshot(paths.archive)  # (under the table's lease: no commit meanwhile)
    if committed is None:
        committed = snap.cutoff
    run = vectors.run_of(committed, snap.erasures)
    files, temps = vectors.list_files(paths.vectors)
    garbage = vectors.garbage(files, run)
    removed = vectors.delete([f.path for f in garbage] + temps, paths.vectors)
    gone = {f.path for f in garbage}
    left = [f for f in files if f.path not in gone]
    used = set(vectors.day_runs(files, run).values()) | ({run} if run is not None else set())
    fs, root = storage.filesystem(join(paths.vectors, vectors.RUNS_FOLDER))
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        stem = info.base_name.removesuffix(".json")
        if info.base_name.startswith(".") or vectors.parse_run_name(stem) not in used:
            storage.delete(join(paths.vectors, vectors.RUNS_FOLDER, info.base_name))
    fs, root = storage.filesystem(paths.staging)
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("archive-"):
            folder = join(paths.staging, info.base_name)  # this table's archive staging only
            removed += onepass.left_by(folder, paths, committed, snap.erasures)  # a pass that did not commit
            storage.remove_tree(folder)
    return removed, left


def recover(
    spark: SparkSession, definition: TableDefinition, paths: TablePaths, ledger: bool = True
) -> tuple[int, int, int, list[vectors.VectorFile]]:
    """Finish what a crashed or failed run left: (rows purged, files removed, ledger rows
    repaired, the vector files left); the ledger rows a crash kept out of the ledger are
    written first."""
    committed = current_snapshot(paths.archive).cutoff
    repaired = ledger_table.repair(spark, definition, paths, committed) if ledger else 0
    purged = purge.purge(spark, definition, paths, committed)
    removed, left = cleaned(paths, committed)
    return purged, removed, repaired, left
