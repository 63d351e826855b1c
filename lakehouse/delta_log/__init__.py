"""Delta tables without Spark, through delta-rs (deltalake): the one module that reads Delta's log.

What a table holds and held: whether it exists, its versions and commit timestamps, the
SetTransactions committed at a version or by each commit, its data files, its history; small SQL
scans with delta-rs's own engine (read handles kept per thread: ``_reading``); and the few writes
lakehouse makes without Spark.

Data is never read through ``DeltaTable.to_pyarrow_dataset()``: a pyarrow dataset scan over
delta-rs's filesystem leaves threads behind that abort the interpreter at exit ("terminate
called without an active exception", delta-io/delta-rs#2184) in about half of all runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import objectstore
from lakehouse.delta_log.commit_files import (  # noqa: F401 - the package's names
    AddedFile,
    Commit,
    TxnCommit,
    added_files,
    commits,
    file_uri,
    txn_commit_info,
    txn_commits,
)
from lakehouse.delta_log.cut import (  # noqa: F401 - the package's names
    Cut,
    cut,
    cut_and_drop,
    cut_at,
    drop_unreferenced,
    first_readable,
)
from lakehouse.errors import first_line
from lakehouse.objectstore import is_s3
from lakehouse.sql import literal, spark_ident
from lakehouse.storage import filesystem, is_local

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger(__name__)


def exists(path: str) -> bool:
    """True when ``path`` holds a Delta table."""
    if is_local(path):
        log = os.path.join(path, "_delta_log")
        if os.path.isfile(os.path.join(log, "_last_checkpoint")):  # no need to list a long log
            return True
        try:
            with os.scandir(log) as entries:  # stops at the first commit file
                return any(e.name.endswith(".json") for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            return False
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(path, storage_options=storage_options(path)))


def open_table(path: str, version: int | None = None) -> DeltaTable:
    """A new delta-rs handle on a Delta table, at its latest or a given version."""
    from deltalake import DeltaTable

    return DeltaTable(path, version=version, storage_options=storage_options(path))


_HANDLES, HANDLES = threading.local(), 16  # each thread keeps its 16 read handles used last


def metadata(path: str) -> tuple[int, Any, Any]:
    """(version, schema, metadata) of a Delta table's latest version, as delta-rs gives them."""
    table = _reading(path)
    return int(table.version()), table.schema(), table.metadata()


def _reading(path: str, version: int | None = None) -> DeltaTable:
    """A handle to read at once (never to write with, never kept by a caller): on a local table
    the thread's handle of ``path`` (at ``version``, or brought to the latest by applying only
    the newer commits), while the commit file of its version is still the one it was opened on
    (a table made anew under the same path is opened anew); else a new handle."""
    if not is_local(path):
        return open_table(path, version)
    kept = _HANDLES.__dict__.setdefault("kept", {})
    table, stamp = kept.pop((path, version), (None, None))
    if table is None and version is not None and (path, None) in kept:  # the latest's, if at that version
        table, stamp = kept[(path, None)]
    try:  # a newer commit that cannot be applied (its file cleaned up meanwhile): a new handle
        if table is None or stamp is None or stamp != _stamp(path, table.version()) or \
                version not in (None, table.version()):
            raise LookupError(path)  # none kept, or the table was made anew
        if version is None:
            table.update_incremental()
    except Exception:  # noqa: BLE001
        table = open_table(path, version)
    kept[(path, version)] = (table, _stamp(path, table.version()))  # the last used at the end
    while len(kept) > HANDLES:
        del kept[next(iter(kept))]
    return table


def _stamp(path: str, version: int) -> tuple[int, int] | None:
    """Size and modification time of a local table's commit file of ``version``."""
    with contextlib.suppress(OSError):
        st = os.stat(os.path.join(path, "_delta_log", f"{version:020d}.json"))
        return st.st_size, st.st_mtime_ns
    return None


def forget_handles() -> None:
    """Drop this thread's read handles: its next reads open the logs anew, as a new process's."""
    _HANDLES.__dict__.pop("kept", None)


def storage_options(path: str) -> dict[str, str] | None:
    """deltalake's ``storage_options`` for a table at ``path`` (None for a local table)."""
    return objectstore.active().storage_options() if is_s3(path) else None


def version(path: str) -> int | None:
    """The latest version of a Delta table (None when there is no table)."""
    if not exists(path):
        return None
    return int(_reading(path).version())


def column_names(path: str) -> set[str]:
    """The columns of a Delta table's current schema."""
    return {f.name for f in _reading(path).schema().fields}


def txn_version(path: str, app_id: str, version: int | None = None) -> int | None:
    """The SetTransaction version of ``app_id`` in a Delta table, at its latest or a given
    version (None when the table or the app id's transaction is absent)."""
    found = snapshot(path, app_id, version)
    return None if found is None else found.txn


@dataclass(frozen=True)
class Snapshot:
    """A Delta table version and the SetTransaction version of one app id committed at it (and
    of the ``more`` app ids asked for, from the same read of the log)."""

    version: int
    txn: int | None
    more: dict[str, int | None] = field(default_factory=dict)


def snapshot(path: str, app_id: str, version: int | None = None, more: tuple[str, ...] = ()) -> Snapshot | None:
    """The latest (or a given) version of a Delta table and ``app_id``'s transaction version
    there (and those of the ``more`` app ids); None when there is no table."""
    if not exists(path):
        return None
    table = _reading(path, version)

    def txn(app: str) -> int | None:
        v = table.transaction_version(app)
        return None if v is None else int(v)

    return Snapshot(int(table.version()), txn(app_id), {a: txn(a) for a in more})


def history(path: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The commit infos of a Delta table, newest first (the latest ``limit``)."""
    return list(_reading(path).history(limit))


def add_actions(path: str, version: int | None = None) -> pa.Table:
    """The data files of a Delta table at its latest or a given version: one row per file with
    ``path``, ``size_bytes``, ``num_records`` and ``partition.<column>`` (flattened)."""
    import pyarrow as pa

    return pa.table(_reading(path, version).get_add_actions(flatten=True))


def missing_files(path: str, version: int) -> tuple[DeltaTable | None, list[str]]:
    """(delta-rs table at ``version``, its data files that are missing); (None, [why]) when the
    log cannot rebuild that version."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        table = open_table(path, version)
    except Exception as e:  # noqa: BLE001 - delta-rs raises several kinds; one line names it
        return None, [first_line(e)]
    rel = pa.table(table.get_add_actions(flatten=False)).column("path").to_pylist()
    fs, root = filesystem(path)
    inside = [p for p in rel if "://" not in p]  # relative paths, as Delta writes them
    infos = fs.get_file_info([p if p.startswith("/") else f"{root.rstrip('/')}/{p}" for p in inside])
    missing = [p for p, i in zip(inside, infos, strict=True) if i.type == pafs.FileType.NotFound]
    for p in rel:  # absolute URIs (shallow clones): rare, one look-up each
        if "://" in p:
            other, where = filesystem(p)
            if other.get_file_info(where).type == pafs.FileType.NotFound:
                missing.append(p)
    return table, missing


def row_count(path: str) -> int:
    """Rows in a Delta table from its log statistics (no data files are read)."""
    if not exists(path):
        return 0
    actions = add_actions(path)
    col = actions.column("num_records") if "num_records" in actions.column_names else None
    counts = col.to_pylist() if col is not None else [None]
    if any(v is None for v in counts):  # a writer that kept no statistics: count the data
        return int(scan(path, "SELECT count(*) AS n FROM t").column("n")[0].as_py())
    return int(sum(counts))


def scan(path: str, sql: str = "SELECT * FROM t", version: int | None = None) -> pa.Table:
    """Run SQL over one Delta table, registered as ``t``, with delta-rs's own engine."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register("t", _reading(path, version)).execute(sql).read_all())


def append_records(path: str, table: pa.Table, attempts: int = 10,
                   txn: tuple[str, int] | list[tuple[str, int]] | None = None, merge_schema: bool = True) -> bool:
    """Append a few records to a small Delta table of the warehouse (the jobs history, quality
    results, migrations, the archive's ledger), creating it on first use; a commit that races
    another writer's is tried again. With ``txn`` = (app id, version), or a list of them, the
    commit records those SetTransactions, and nothing is written when the table already holds
    each of those versions or a later one. True when written."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    txns = [] if txn is None else [txn] if isinstance(txn, tuple) else list(txn)
    props = (CommitProperties(app_transactions=[Transaction(app_id=a, version=v) for a, v in txns])
             if txns else None)
    for attempt in range(attempts):
        if txns:
            found = snapshot(path, txns[0][0], more=tuple(a for a, _ in txns[1:]))
            held = {} if found is None else {txns[0][0]: found.txn, **found.more}
            if all((held.get(a) is not None and held[a] >= v) for a, v in txns):  # type: ignore[operator]
                return False
        try:
            write_deltalake(path, table, mode="append", schema_mode="merge" if merge_schema else None,
                            commit_properties=props, storage_options=storage_options(path))
            return True
        except CommitFailedError:  # raced another process's append: try again
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    return False


def rewrite_records(path: str, change: Callable[[pa.Table], pa.Table | None], attempts: int = 10) -> bool:
    """Rewrite a small Delta table of the warehouse whole: ``change`` gets its rows and returns
    the new ones (None: leave it); an overwrite that races another writer's commit reads again.
    True when written."""
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        table = open_table(path)
        read = table.version()
        new = change(table.to_pyarrow_table())
        if new is None:
            return False
        try:
            write_deltalake(table, new, mode="overwrite", storage_options=storage_options(path))
            return True
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            log.info("%s: version %d was followed by another commit; reading again", path, read)
            time.sleep(0.05 * (attempt + 1))
    return False


@dataclass(frozen=True)
class NewFile:
    """A data file written into a table's folder, to be added by a commit."""

    path: str
    """Relative to the table's root (``event_date=2026-11-18/part-....parquet``)."""
    size: int
    partition: dict[str, str]
    stats: str
    """Delta's statistics JSON (``archive.stats``)."""
    modified_ms: int


def replace_partitions(path: str, read_version: int, files: list[NewFile], column: str, values: list[str],
                       txn: tuple[str, int] | None = None, user_metadata: str | None = None) -> int:
    """One metadata-only commit, right after ``read_version``, removing every file of the partitions
    ``column`` IN ``values`` (as of that version) and adding ``files`` (already in the table's folder),
    with ``txn`` = (app id, version) as a SetTransaction and ``user_metadata`` as its ``userMetadata``.
    No other version is tried (``StaleVersion``: another writer committed first). The version."""
    return _commit_actions(path, read_version, [], files, txn, user_metadata,
                           overwrite=[(column, "in", list(values))] if values else None)


def _commit_actions(path: str, read_version: int, removed: list[tuple[str, int, dict[str, str | None] | None]],
                    added: list[NewFile], txn: tuple[str, int] | None, user_metadata: str | None,
                    overwrite: list[tuple[str, str, Any]] | None = None) -> int:
    """The one metadata-only commit of ``replace_partitions`` and ``rewrite_files``: right after
    ``read_version``, the removes and adds given (``overwrite``: also every file of the partitions
    its filter names), a SetTransaction and ``userMetadata``; no retry (``StaleVersion``)."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, PostCommitHookProperties, RemoveAction

    table = open_table(path, read_version)
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [RemoveAction(p, True, now, size, parts) for p, size, parts in removed]
    actions += [AddAction(f.path, f.size, f.partition, f.modified_ms, True, f.stats) for f in added]
    props = CommitProperties(custom_metadata={"userMetadata": user_metadata} if user_metadata is not None else None,
                             max_commit_retries=0,
                             app_transactions=[Transaction(app_id=txn[0], version=txn[1])] if txn else None)
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    try:
        if overwrite:
            table.create_write_transaction(actions, "overwrite", table.schema(), table.metadata().partition_columns,
                                           overwrite, commit_properties=props, post_commithook_properties=hooks)
        else:
            table.create_write_transaction(actions, "append", table.schema(), table.metadata().partition_columns,
                                           commit_properties=props, post_commithook_properties=hooks)
    except CommitFailedError as e:
        raise StaleVersion(f"{path}: version {read_version + 1} was committed by another writer ({first_line(e)})") \
            from None
    version = read_version + 1
    _checkpoint(path, table, version)
    return version


def _checkpoint(path: str, table: DeltaTable, version: int) -> None:
    """Write the checkpoint of ``version`` when the table's interval asks for one, apart from the
    commit: once a commit is in, nothing may report it as failed (a later commit writes the next
    checkpoint)."""
    interval = int(table.metadata().configuration.get("delta.checkpointInterval") or 10)
    if version % interval == 0:
        try:
            open_table(path, version).create_checkpoint()
        except Exception as e:  # noqa: BLE001 - a later commit writes the next one
            log.warning("%s: the checkpoint of version %s was not written: %s", path, version, first_line(e))


def upsert(path: str, rows: pa.Table, keys: tuple[str, ...], column: str, values: list[str],
           txn: tuple[str, int] | None = None, user_metadata: str | None = None,
           attempts: int = 10) -> tuple[int, int] | None:
    """One commit of ``rows`` into a Delta table without Spark (delta-rs's MERGE): a row whose
    ``keys`` and partition ``column`` match a row of the table replaces it, the others are added
    (no ``keys``: every row is appended). ``values`` are the partitions the rows fall in, the only
    ones read. The commit carries ``txn`` = (app id, version) as a SetTransaction and
    ``user_metadata`` as its ``userMetadata``; None (nothing written) when the table already holds
    that version of the app id or a later one.

    The commit is made right after the version it read or not at all: when another writer
    committed in between, the MERGE is made again on the new version (up to ``attempts`` times,
    then ``StaleVersion``), so no commit ever lands on rows it did not see. (inserted, updated)."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import PostCommitHookProperties

    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    props = CommitProperties(custom_metadata={"userMetadata": user_metadata} if user_metadata is not None else None,
                             max_commit_retries=0,
                             app_transactions=[Transaction(app_id=txn[0], version=txn[1])] if txn else None)
    for attempt in range(attempts):
        table = open_table(path)
        if txn is not None:
            have = table.transaction_version(txn[0])
            if have is not None and have >= txn[1]:
                return None
        read = table.version()
        source = rows.select(list(_arrow_schema(table).names)).cast(_arrow_schema(table))
        try:
            if not source.num_rows:  # nothing to write: the commit records the SetTransaction alone
                table.create_write_transaction([], "append", table.schema(), table.metadata().partition_columns,
                                               commit_properties=props, post_commithook_properties=hooks)
                inserted, updated = 0, 0
            elif not keys:
                write_deltalake(table, source, mode="append", commit_properties=props,
                                post_commithook_properties=hooks)
                inserted, updated = source.num_rows, 0
            else:
                on = " AND ".join(f"t.{spark_ident(k)} = s.{spark_ident(k)}" for k in (*keys, column))
                on += f" AND t.{spark_ident(column)} IN ({', '.join(literal(v) for v in sorted(values))})"
                m = table.merge(source, on, source_alias="s", target_alias="t", commit_properties=props,
                                post_commithook_properties=hooks) \
                    .when_matched_update_all().when_not_matched_insert_all().execute()
                inserted, updated = int(m.get("num_target_rows_inserted", 0)), int(m.get("num_target_rows_updated", 0))
        except CommitFailedError as e:  # another writer committed first: read again, merge again
            if attempt == attempts - 1:
                raise StaleVersion(f"{path}: every commit raced another writer's ({attempts} attempts; "
                                   f"{first_line(e)})") from None
            time.sleep(min(1.0, 0.02 * 2 ** attempt) * (0.5 + random.random()))
            continue
        _checkpoint(path, table, read + 1)
        return inserted, updated
    raise AssertionError("unreachable")


def _arrow_schema(table: DeltaTable) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(table.schema().to_arrow())


def remove_files(path: str, read_version: int, files: list[tuple[str, int, dict[str, str | None] | None]]) -> int:
    """One metadata-only commit, right after ``read_version``, removing ``files`` ((path as the log
    names it, size, partition values) each): their rows leave the table, no data read or written.
    No other version is tried (``StaleVersion``: another writer committed first). The version."""
    return rewrite_files(path, read_version, files, [])


def rewrite_files(path: str, read_version: int, removed: list[tuple[str, int, dict[str, str | None] | None]],
                  added: list[NewFile], txn: tuple[str, int] | None = None, user_metadata: str | None = None) -> int:
    """One metadata-only commit, right after ``read_version``, removing ``removed`` ((path as the
    log names it, size, partition values) each) and adding ``added`` (already in the table's
    folder), with ``txn`` = (app id, version) as a SetTransaction and ``user_metadata`` as its
    ``userMetadata``. No other version is tried (``StaleVersion``: another writer committed
    first). The version."""
    return _commit_actions(path, read_version, removed, added, txn, user_metadata)


class StaleVersion(Exception):
    """A commit made on top of a version that is no longer the latest (nothing was committed)."""


def vacuum(path: str, retention_hours: int, dry_run: bool) -> list[str]:
    """Delta's VACUUM (full: untracked files too) through delta-rs: the files it removes (or
    would remove, with ``dry_run``), as full paths; no checkpoint or log cleanup after it."""
    from deltalake.transaction import PostCommitHookProperties

    table = open_table(path)
    files = table.vacuum(retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False,
                         full=True, post_commithook_properties=None if dry_run else PostCommitHookProperties(
                             create_checkpoint=False, cleanup_expired_logs=False))
    return [f if f.startswith("/") or "://" in f else f"{path.rstrip('/')}/{f}" for f in files]  # not URL-encoded


def drop_columns(path: str, names: set[str], partition_column: str) -> bool:
    """One metadata-only commit taking ``names`` out of the schema, the rest of the metadata kept (a
    migration's added columns, undone; Delta's SQL drops columns only under column mapping): a write of
    no files whose overwrite matches no partition replaces the schema alone. False: none was in it."""
    from deltalake import Schema

    table = open_table(path)
    fields = table.schema().fields
    kept = [f for f in fields if f.name not in names]
    if len(kept) == len(fields):
        return False
    partitions = table.metadata().partition_columns
    if partition_column not in partitions:  # an overwrite without a partition filter would remove every file
        raise ValueError(f"{path}: not partitioned by {partition_column}; its columns are not dropped here")
    table.create_write_transaction([], "overwrite", Schema(kept), partitions,
                                   [(partition_column, "=", "0001-01-01")])
    return True
