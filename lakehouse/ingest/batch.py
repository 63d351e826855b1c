"""Executing one batch of files: THE write path of ``load`` and ``ingest``.

A batch is a numbered set of files taken by a source (a landing directory, or ``load``), recorded
in the source's durable state before anything is written. Executing it: Spark tasks parse the
files' blocks in parallel into staging, with a manifest of counts and days
[``ingest_during_staging``, ``ingest_after_staging``]; one commit into live carrying the
SetTransaction (source app id, batch number) [``ingest_after_live``]; one commit of the rejects
(bad rows, and files rejected whole) with the same [``ingest_after_rejects``]; then the batch is
recorded done [``ingest_after_state``]. A replayed batch finds its SetTransaction in the table and
skips the commit, so a crash at any point loads every file exactly once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, delta_log, storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError, TransientError, first_line
from lakehouse.ingest import stage_local
from lakehouse.ingest.blocks import Block, plan_file
from lakehouse.ingest.parse import parse_block, unexpected
from lakehouse.ingest.state import (
    LOAD_SOURCE,
    Batch,
    FileEntry,
    IngestState,
    StateStore,
    inbox_folder,
    is_files_source,
    producer_of,
)
from lakehouse.inputs import Format, detect_format
from lakehouse.spark.session import parallelism, sees_local_files
from lakehouse.spark.tasks import per_item
from lakehouse.staging import (
    FILE_COLUMN,
    FILE_ERROR,
    GOOD,
    KIND_COLUMN,
    REASON_COLUMN,
    REJECT,
    block_schema,
)
from lakehouse.storage import is_local, join, remove_tree, write_json
from lakehouse.stream import staged
from lakehouse.stream.entries import DueRejects
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.stream.engine import Registered, Stream

log = logging.getLogger(__name__)
UTC = dt.timezone.utc


@dataclass
class BatchResult:
    """One batch as executed (or found already committed, after a crash)."""

    number: int
    files: list[str]
    """The batch's files (failed ones included): names in a landing directory, paths for load."""
    rows: int = 0
    rows_rejected: int = 0
    failed: list[str] = field(default_factory=list)
    blocks: int = 0
    seconds: float = 0.0
    recovered: bool = False
    """True when the batch was left by an interrupted run and finished by this one."""
    rows_inserted: int = 0
    rows_updated: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    """File -> reason of the files rejected whole."""
    per_file: dict[str, tuple[int, int]] = field(default_factory=dict)
    """File -> (rows loaded, rows rejected) of the files that loaded."""
    rows_late: int = 0
    """Rows rejected ``late_row`` (earlier than the producer's bound), counted in rows_rejected."""
    duplicate: bool = False
    """Its idempotency key was inserted before: nothing of it was taken."""


MAX_STAGE_ATTEMPTS = 3
"""A batch whose staging job fails this often has its files failed (with the error) instead of
blocking its source for good."""


def plan_entry(state: IngestState, e: FileEntry, definition: TableDefinition, file_index: int = 0,
               verify: bool = False) -> list[Block]:
    """Cut one taken file into blocks; InputError (with the reason) when it cannot be read, when a
    link in a landing directory leads out of it, or (``verify``) when its content is no longer the
    content recorded when it was taken."""
    path = state.path_of(e)
    if not is_files_source(state.source) and not definition.ingest.follow_symlinks and is_local(path):
        real = os.path.realpath(path)
        if not real.startswith(state.source.rstrip("/") + "/"):  # checked at scan; again now
            raise InputError(f"{e.name}: a symbolic link to a file outside the landing directory; "
                             "not read (set ingest.follow_symlinks: true to allow)")
    if verify and e.checksum and storage.is_file(path) and content_checksum(path) != e.checksum:
        raise InputError(f"{path}: changed since it was taken (its content is not the content recorded "
                         "then); not loaded: load it again")
    try:
        fmt: Format = e.format or detect_format(path, definition.ingest.format)  # type: ignore[assignment]
        return plan_file(path, fmt, definition, definition.ingest.block_size, file_index)
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - one unreadable file never stops the others
        raise storage.transient(path, err) or InputError(unexpected(path, err)) from None


def content_checksum(path: str) -> str:
    """SHA-256 of a file's content (read in pieces)."""
    h = hashlib.sha256()
    with storage.open_read(path) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _shown(state: IngestState, name: str, root: str) -> str:
    e = state.files.get(name)
    if e is None:
        return name
    return inserted_as(state, e, root) or e.path or e.name


def inserted_as(state: IngestState, e: FileEntry, root: str) -> str | None:
    """How rows a producer inserted as data (the Python API writes them to a temporary file in the
    table's inbox under ``root``) are named as a source, in rejects and results: ``producer P
    insert N`` (the producer's insert number N; ``part K`` of a Spark DataFrame written as several
    files). None for a file a user gave or a landing directory holds (named by its path)."""
    if not is_files_source(state.source) or state.source == LOAD_SOURCE or not e.path:
        return None
    inbox = inbox_folder(root, state.source).rstrip("/") + "/"
    if not e.path.startswith(inbox):
        return None
    label = f"producer {producer_of(state.source)} insert {e.batch}"
    base = os.path.basename(e.path)
    if os.path.dirname(e.path).rstrip("/") + "/" != inbox and base.startswith("part-"):
        label += f" part {int(base.split('-')[1]) + 1}" if base.split("-")[1].isdigit() else f" part {base}"
    return label


def continue_numbering(state: IngestState, paths: TablePaths) -> None:
    """Batch numbers never repeat in a table: a state older than the table (deleted, or restored
    from a backup) continues after the last batch the table holds, so its batches are neither
    skipped as done nor mixed up with archived ones."""
    from lakehouse.stream.store import StreamStore

    inserted = max((p.inserts.get(state.app_id, 0) for p in StreamStore(paths).read().producers.values()), default=0)
    done = max(delta_log.txn_version(paths.live, state.app_id) or 0, delta_log.txn_version(paths.rejects, state.app_id) or 0, inserted)
    if state.next_batch <= done and not state.pending:
        log.warning("ingest state of %s is behind the table (last batch %d); numbering continues at %d",
                    state.source, done, done + 1)
        state.next_batch = done + 1


def registered(paths: TablePaths, state: IngestState, batch: Batch) -> bool:
    """Whether the stream took a batch as an insert (or, before streams, live holds it)."""
    from lakehouse.stream.store import StreamStore

    return (StreamStore(paths).read().seen_by(state.app_id, batch.number) is not None
            or (delta_log.txn_version(paths.live, state.app_id) or 0) >= batch.number)


def discard(paths: TablePaths, store: StateStore, state: IngestState, batch: Batch) -> None:
    """Forget a batch of an insert that was interrupted before the stream registered it: it never
    happened, and it never comes back. Its files are recorded ``discarded`` (temporary files of the
    Python API, in the producer's inbox, are deleted and forgotten) and its staging goes. Only for
    files sources, whose batches their producer's process runs under the source's lock (hold it);
    a landing directory's batch is taken again instead."""
    assert is_files_source(state.source), state.source
    inbox = inbox_folder(paths.root, state.source)
    for name in [*batch.files, *(n for n, _ in batch.failed)]:
        e = state.files.get(name)
        if e is None:
            continue
        path = state.path_of(e)
        if os.path.dirname(path).startswith(inbox):
            del state.files[name]
            with contextlib.suppress(OSError):
                storage.delete(path)
            continue
        e.status, e.rows, e.rows_rejected = "discarded", 0, 0
        e.error = (f"{path}: its insert (batch {batch.number} of {state.source}) was interrupted before the "
                   "stream registered it; nothing of it was taken: give the file again")
    state.pending = [b for b in state.pending if b.number != batch.number]
    store.save(state)
    log.warning("%s: batch %d of %s was interrupted before it was registered; discarded (its files can be given "
                "again)", paths.name, batch.number, state.source)
    remove_tree(join(paths.staging, f"ingest-{state.key}-{batch.number:08d}"))


class BatchRunner:
    """Executes the taken batches of one source of one table."""

    def __init__(self, spark_factory: Callable[[], "SparkSession"], definition: TableDefinition,
                 paths: TablePaths, store: StateStore, stream: "Stream", producer: str,
                 on_start: Callable[[Batch, int], None] | None = None) -> None:
        self.spark_factory = spark_factory
        self.definition = definition
        self.paths = paths
        self.store = store
        self.stream = stream
        """The table's stream: a batch's good rows are an insert of ``producer``."""
        self.producer = producer
        self.on_start = on_start or (lambda b, n: None)
        self.planned: dict[str, list[Block]] = {}
        """Blocks planned when the files were taken (a recovered batch plans again)."""

    def execute(self, state: IngestState, batch: Batch, recovered: bool = False,
                key: tuple[str, int] | None = None, moves_bound: bool = True) -> BatchResult:
        """Take one batch to the end: stage its files with Spark (unless an earlier attempt left its
        manifest), register the good rows as the producer's insert with its rejects, and record each
        file's outcome in the state. Repeatable after a crash (``recovered``: an interrupted run's
        batch; its files are planned again and checked). A staging failure is raised, and after
        MAX_STAGE_ATTEMPTS the batch's files are failed instead. ``key`` and ``moves_bound``: the
        insert's idempotency key and bound rule (``Stream.register``)."""
        started = time.monotonic()
        app = state.app_id
        staging = join(self.paths.staging, f"ingest-{state.key}-{batch.number:08d}")
        manifest_path = join(staging, "manifest.json")
        # a batch of a run before streams went straight into live with the source's SetTransaction
        live_done = (delta_log.txn_version(self.paths.live, app) or 0) >= batch.number
        replay = self.stream.replay(self.producer, app, batch.number)
        manifest: dict[str, Any] | None = replay.get("manifest") if replay else None
        if manifest is None and storage.is_file(manifest_path):
            manifest = storage.read_json(manifest_path)
        paths = [state.path_of(state.files[n]) for n in batch.files]
        failed_paths = [state.path_of(state.files[n]) if n in state.files else n for n, _ in batch.failed]
        shown = [_shown(state, n, self.paths.root) for n in batch.files]
        failed_shown = [_shown(state, n, self.paths.root) for n, _ in batch.failed]
        # rejects name a file by its path, rows a producer inserted as data by the insert
        sources = [inserted_as(state, state.files[n], self.paths.root) or p for n, p in zip(batch.files, paths)]
        result = BatchResult(batch.number, [*shown, *failed_shown], recovered=recovered)
        if manifest is None and batch.files:  # (re)stage: the counts are needed even if both commits are in
            blocks = self._plan_blocks(state, batch, verify=recovered)
            self.on_start(batch, len(blocks))
            try:
                manifest = self._stage(batch, blocks, staging, manifest_path)
            except Exception as err:  # noqa: BLE001 - retried, then the files are failed
                if storage.is_transient(err):  # the store did not answer: not the files' fault
                    raise
                batch.attempts += 1
                self.store.save(state)
                if batch.attempts < MAX_STAGE_ATTEMPTS:
                    raise
                log.error("batch %d of %s failed to stage %d times; its files are failed: %s",
                          batch.number, state.source, batch.attempts, err)
                reason = (f"parsing its batch ({batch.number}) failed {batch.attempts} times: "
                          f"{type(err).__name__}: {first_line(err, 200)}")
                manifest = {"files": {str(i): {"good": 0, "rejected": 0, "error": f"{p}: {reason}"}
                                      for i, p in enumerate(paths)},
                            "days": [], "good": 0, "rejected": 0, "blocks": len(blocks)}
        elif manifest is None:
            manifest = {"files": {}, "days": [], "good": 0, "rejected": 0, "blocks": 0}
        result.blocks = int(manifest["blocks"])
        file_errors = [(sources[int(i)], f["error"].replace(paths[int(i)], sources[int(i)]))
                       for i, f in manifest["files"].items() if f["error"]]
        failed_sources = [inserted_as(state, state.files[n], self.paths.root) or p if n in state.files else p
                          for (n, _), p in zip(batch.failed, failed_paths)]
        file_errors += [(s, reason.replace(p, s)) for s, p, (_, reason) in zip(failed_sources, failed_paths, batch.failed)]
        load_id = state.load_id(batch)
        failed_idx = [int(i) for i, f in manifest["files"].items() if f["error"]]
        spec = staged.rejects_spec(staging, sources, failed_idx, file_errors, int(manifest["rejected"]), load_id,
                                   dt.datetime.now(UTC))
        reg: Registered | None = None
        if not live_done:  # the good rows are this producer's insert (none: it still renews its lease)
            before = (self.stream.released.inserted, self.stream.released.updated)
            reg = self.stream.register(self.producer, app, batch.number, staging, failed_idx, load_id,
                                       rejects=spec, manifest=manifest,  # its rejects are committed too
                                       key=key, moves_bound=moves_bound)
            result.rows_inserted = self.stream.released.inserted - before[0]
            result.rows_updated = self.stream.released.updated - before[1]
        elif staged.has_rejects(spec, 0):  # a batch of a run before streams: its rejects, if not in yet
            staged.commit_rejects(self.definition, self.paths,
                                  DueRejects(app, batch.number, self.producer, None, None, 0, spec))
        crashpoints.reached("ingest_after_live")
        if reg is not None and reg.duplicate:
            return self._duplicate(state, batch, result, staging, key, started)
        late = reg.late_by_file if reg is not None else {}
        crashpoints.reached("ingest_after_rejects")
        for i, name in enumerate(batch.files):
            e = state.files[name]
            stats = manifest["files"].get(str(i), {"good": 0, "rejected": 0, "error": None})
            if stats["error"]:
                e.status, e.error, e.rows, e.rows_rejected = "failed", stats["error"], 0, 0
                result.failed.append(shown[i])
                result.errors[shown[i]] = stats["error"].replace(paths[i], sources[i])
            else:
                n_late = late.get(i, 0)
                e.status, e.rows = "ingested", int(stats["good"]) - n_late
                e.rows_rejected = int(stats["rejected"]) + n_late
                result.rows += e.rows
                result.rows_rejected += e.rows_rejected
                result.rows_late += n_late
                result.per_file[shown[i]] = (e.rows, e.rows_rejected)
        for name, (_, reason), path, source in zip(failed_shown, batch.failed, failed_paths, failed_sources):
            result.failed.append(name)
            result.errors[name] = reason.replace(path, source)
        state.pending = [b for b in state.pending if b.number != batch.number]
        self.store.save(state)
        crashpoints.reached("ingest_after_state")
        if reg is None or not reg.keeps_staging:
            remove_tree(staging)  # else the stream removes it once its rows are released
        result.seconds = time.monotonic() - started
        return result

    def _duplicate(self, state: IngestState, batch: Batch, result: BatchResult, staging: str,
                   key: tuple[str, int] | None, started: float) -> BatchResult:
        """A batch whose idempotency key the table had taken before: its files are recorded
        ``discarded`` with the reason, nothing of it counted."""
        for name in [*batch.files, *(n for n, _ in batch.failed)]:
            e = state.files.get(name)
            if e is not None:
                e.status, e.rows, e.rows_rejected = "discarded", 0, 0
                e.error = f"not inserted: idempotency key {key!r} was inserted before"
        result.duplicate = True
        state.pending = [b for b in state.pending if b.number != batch.number]
        self.store.save(state)
        remove_tree(staging)
        result.seconds = time.monotonic() - started
        return result

    def clean_staging(self, state: IngestState) -> None:
        """Remove the staging of this source's finished batches (a crash after the state was saved
        leaves it behind)."""
        prefix = f"ingest-{state.key}-"
        pending = {f"{prefix}{b.number:08d}" for b in state.pending}
        staged = {os.path.basename(p.rstrip("/")) for p in self.stream.store.referenced()}
        for name in storage.list_names(self.paths.staging):
            mine = name.startswith(prefix) and name[len(prefix):].isdigit()  # not "ingest-load-x-..." for "load"
            if mine and name not in pending and name not in staged:
                remove_tree(join(self.paths.staging, name))

    def _plan_blocks(self, state: IngestState, batch: Batch, verify: bool) -> list[Block]:
        blocks: list[Block] = []
        for i, name in enumerate(batch.files):
            planned = self.planned.pop(name, None)
            if planned is None:  # a batch left by a crashed run: plan again
                e = state.files[name]
                try:
                    planned = plan_entry(state, e, self.definition, verify=verify)
                except InputError as err:
                    planned = [Block(i, state.path_of(e), "csv", 0, 0, 0, 0, error=str(err))]
            blocks += [replace(b, file_index=i) for b in planned]
        return blocks

    def _stage(self, batch: Batch, blocks: list[Block], staging: str, manifest_path: str) -> dict[str, Any]:
        """Parse the batch's blocks into staging (a small batch in this process, others with Spark
        tasks); the manifest of what they hold."""
        remove_tree(staging)
        copies: dict[str, str] = {}
        if stage_local.stageable(blocks):
            stats = stage_local.stage(self.definition, blocks, staging)
        else:
            spark = self.spark_factory()
            if not sees_local_files(spark):
                blocks, copies = reachable(blocks, staging)
            stats = self._stage_with_spark(blocks, staging)
            if copies:
                remove_tree(join(staging, "inputs"))  # parsed: the rows are staged
        crashpoints.reached("ingest_after_staging")
        files: dict[str, dict[str, Any]] = {str(i): {"good": 0, "rejected": 0, "error": None}
                                            for i in range(len(batch.files))}
        days: set[str] = set()
        for file, kind, day, n, reason in stats:
            f = files[str(file)]
            if kind == GOOD:
                f["good"] += n
                if day is not None:  # a good row always has its event time
                    f.setdefault("days", []).append(day.isoformat())
            elif kind == REJECT:
                f["rejected"] += n
            elif kind == FILE_ERROR:
                for copy, original in copies.items():  # named as given, not as copied
                    reason = reason.replace(copy, original) if reason else reason
                f["error"] = f["error"] or reason
        for f in files.values():
            if not f["error"]:
                days.update(f.get("days", []))
            f.pop("days", None)
        manifest = {
            "batch": batch.number,
            "files": files,
            "days": sorted(days),
            "good": sum(f["good"] for f in files.values() if not f["error"]),
            "rejected": sum(f["rejected"] for f in files.values() if not f["error"]),
            "blocks": len(blocks),
        }
        write_json(manifest_path, manifest)
        return manifest

    def _stage_with_spark(self, blocks: list[Block], staging: str) -> list[tuple[int, int, Any, int, str | None]]:
        """Parse the blocks with Spark tasks into staging; per (file, kind, day) the count and reason."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        spark = self.spark_factory()
        definition = self.definition
        schema = from_arrow_schema(block_schema(definition))

        def parse(group: list[Block]) -> Any:
            for block in group:
                yield from parse_block(definition, block)

        groups = pack_blocks(blocks, definition.ingest.block_size, parallelism(spark))
        crashpoints.kill_later("ingest_during_staging", 0.5)
        per_item(spark, groups, parse, schema).write.mode("overwrite").parquet(join(staging, "rows"))
        return [(r[FILE_COLUMN], r[KIND_COLUMN], r["day"], r["n"], r["reason"]) for r in (
            self._staged(spark, staging)
            .groupBy(FILE_COLUMN, KIND_COLUMN, F.to_date(F.col(definition.event_time)).alias("day"))
            .agg(F.count(F.lit(1)).alias("n"), F.min(REASON_COLUMN).alias("reason"))
            .collect())]

    def _staged(self, spark: "SparkSession", staging: str) -> "DataFrame":
        return spark.read.parquet(join(staging, "rows"))


def reachable(blocks: list[Block], staging: str) -> tuple[list[Block], dict[str, str]]:
    """The blocks with every local input file copied into the batch's staging on the warehouse,
    which a cluster's executors reach (a file on this machine they cannot); the copy keeps the
    bytes, so the blocks' offsets hold. Also the copies' paths -> the files' own paths."""
    copies: dict[str, str] = {}
    for b in blocks:
        if is_local(b.path) and not b.error and b.path not in copies and storage.is_file(b.path):
            dest = join(staging, "inputs", f"{len(copies):05d}-{os.path.basename(b.path)}")
            try:
                storage.copy_file(b.path, dest)
            except OSError as e:
                raise TransientError(f"{b.path}: could not copy it into {staging} for the cluster's executors: "
                                     f"{first_line(e, 200)}") from None
            copies[b.path] = dest
    log.info("copied %d input file(s) into %s for the cluster's executors", len(copies), staging)
    return [replace(b, path=copies.get(b.path, b.path)) for b in blocks], {v: k for k, v in copies.items()}


# -- block descriptors as Spark rows -------------------------------------------------------------


def pack_blocks(blocks: list[Block], block_size: int, parallelism: int) -> list[list[Block]]:
    """Group blocks into Spark tasks, in order: a full-size block (a piece of a big file) is a
    task of its own; small files share a task up to about ``block_size`` bytes, but never in
    fewer tasks than there are cores while there are blocks to spread."""
    sizes = [b.nbytes for b in blocks]
    total = sum(sizes)
    target = max(1, min(block_size, -(-total // max(1, parallelism))))
    groups: list[list[Block]] = []
    current: list[Block] = []
    used = 0
    for b, size in zip(blocks, sizes):
        if current and used + size > target:
            groups.append(current)
            current, used = [], 0
        current.append(b)
        used += size
    if current:
        groups.append(current)
    return groups

