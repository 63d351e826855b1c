"""``lakehouse ingest``: landing directory -> live store, in implied-time order, exactly once.

One cycle: finish the batches a crashed run left (recover) -> scan (completeness, T-sort push:
queued / late / failed) -> take what the rule allows (T_read and the batch assignment saved in one
state write) -> execute each batch: Spark tasks parse the batch's blocks in parallel into staging
[``ingest_during_staging``, ``ingest_after_staging``], one commit into live carrying the
SetTransaction (source app id, batch number) [``ingest_after_live``], one into rejects with the
same [``ingest_after_rejects``], then the batch is recorded done [``ingest_after_state``].

A batch's rows become visible in one Delta commit. A replayed batch finds its SetTransaction in
the table and skips the commit, so a crash at any point loads every file exactly once. Bad rows go
to rejects with file and line; a bad file is recorded ``failed`` in the ingest log with the reason,
left in place, and contributes no rows.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError
from lakehouse.ingest.blocks import (
    FILE_COLUMN,
    FILE_ERROR,
    GOOD,
    KIND_COLUMN,
    LINE_COLUMN,
    RAW_COLUMN,
    REASON_COLUMN,
    REJECT,
    Block,
    block_schema,
    parse_block,
    plan_file,
)
from lakehouse.ingest.scanner import Listed, implied_time, is_complete, list_source
from lakehouse.ingest.state import Batch, FileEntry, IngestState, StateStore
from lakehouse.ingest.tsort import FileTSort
from lakehouse.inputs import detect_format
from lakehouse.commit import with_retries
from lakehouse.live import append_rejects, check_loadable, commit_live
from lakehouse.output import format_timestamp
from lakehouse.settings import is_local
from lakehouse.warehouse import TablePaths, join, remove_tree, txn_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
UTC = dt.timezone.utc


@dataclass
class BatchResult:
    """One batch as executed (or found already committed, after a crash)."""

    number: int
    files: list[str]
    rows: int = 0
    rows_rejected: int = 0
    failed: list[str] = field(default_factory=list)
    blocks: int = 0
    seconds: float = 0.0
    recovered: bool = False
    """True when the batch was left by an interrupted run and finished by this one."""


@dataclass
class IngestReport:
    """What one ``ingest`` did (or, with dry_run, would do)."""

    table: str
    source: str
    dry_run: bool = False
    new: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    planned: list[Batch] = field(default_factory=list)
    batches: list[BatchResult] = field(default_factory=list)
    waiting: int = 0
    """Files still queued at the end (held back by the window)."""
    unfinished: int = 0
    """Batches taken but not executed (stopped with Ctrl-C): the next run finishes them first."""

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches)

    @property
    def rows_rejected(self) -> int:
        return sum(b.rows_rejected for b in self.batches)

    @property
    def files_ingested(self) -> int:
        return sum(len(b.files) - len(b.failed) for b in self.batches)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table, "source": self.source, "dry_run": self.dry_run,
            "new": self.new, "late": self.late,
            "failed": [{"file": f, "error": e} for f, e in self.failed],
            "incomplete": self.incomplete, "modified": self.modified,
            "batches": [{"batch": b.number, "files": b.files, "rows": b.rows, "rows_rejected": b.rows_rejected,
                         "failed": b.failed, "blocks": b.blocks, "seconds": round(b.seconds, 3),
                         "recovered": b.recovered} for b in self.batches],
            "planned": [{"batch": b.number, "files": b.files} for b in self.planned] if self.dry_run else [],
            "files_ingested": self.files_ingested, "rows": self.rows, "rows_rejected": self.rows_rejected,
            "waiting": self.waiting, "unfinished_batches": self.unfinished,
        }


def log_entry(state: IngestState, e: FileEntry) -> dict[str, Any]:
    """One line of ``ingest-log`` (the contract's keys)."""
    return {
        "file": os.path.join(state.source, e.name),
        "implied_time": e.implied_time,
        "status": e.status,
        "rows": e.rows,
        "rows_rejected": e.rows_rejected,
        "batch": e.batch,
        "error": e.error if not e.modified else (f"{e.error}; {e.modified}" if e.error else e.modified),
    }


class Ingest:
    """Ingest one landing directory into one table."""

    def __init__(self, spark_factory: Callable[[], "SparkSession"], warehouse: str,
                 definition: TableDefinition, source: str,
                 on_batch: Callable[[BatchResult], None] | None = None,
                 on_start: Callable[[Batch, int], None] | None = None) -> None:
        if not is_local(warehouse):
            raise InputError(f"ingest keeps its state and staging on the warehouse; {warehouse} is not a local path yet")
        self.spark_factory = spark_factory
        self.definition = definition
        self.settings = definition.ingest
        self.paths = TablePaths(warehouse, definition.name)
        self.source = os.path.abspath(source).rstrip("/") or "/"
        self.store = StateStore(self.paths)
        self.on_batch = on_batch or (lambda r: None)
        self.on_start = on_start or (lambda b, n: None)
        self._blocks: dict[str, list[Block]] = {}

    # -- the run ---------------------------------------------------------------------------------

    def run(self, watch: bool = False, drain: bool = False, dry_run: bool = False,
            stop: threading.Event | None = None) -> IngestReport:
        """``--once`` (default) or ``--watch`` until ``stop`` is set; ``drain`` takes every queued
        file at the end; ``dry_run`` reports what would happen and changes nothing."""
        if not os.path.isdir(self.source):
            raise InputError(f"{self.source}: no such directory")
        check_loadable(self.definition, self.paths)
        stop = stop or threading.Event()
        report = IngestReport(self.definition.name, self.source, dry_run=dry_run)
        with self.store.lock(self.source):
            state = self.store.load(self.source)
            self._continue_numbering(state)
            if dry_run:
                report.planned = list(state.pending)  # a crashed run's batches, finished first
            else:
                for batch in list(state.pending):
                    self._execute(state, batch, report, recovered=True)
            wait = self.settings.ingress_file_scan_wait.seconds
            while True:
                self._scan(state, report)
                if not watch and report.incomplete and not stop.is_set():
                    # --once: give files still being written one scan wait to settle
                    stop.wait(wait)
                    self._scan(state, report)
                batches = self._take(state, report, drain and not watch, save=not dry_run)
                if dry_run:
                    break
                for batch in batches:
                    if watch and stop.is_set():
                        break  # Ctrl-C: the batches already taken are finished by the next run
                    self._execute(state, batch, report)
                if not watch or stop.is_set():
                    break
                stop.wait(max(wait, 0.2))
                if stop.is_set():
                    break
            if watch and drain:
                for batch in self._take(state, report, True):
                    self._execute(state, batch, report)
            report.waiting = len(state.queued())
            report.unfinished = len(state.pending)
        return report

    def _continue_numbering(self, state: IngestState) -> None:
        """Batch numbers never repeat in a table: a state older than the table (deleted, or
        restored from a backup) continues after the last batch the table holds, so its batches
        are neither skipped as done nor mixed up with archived ones."""
        done = max(txn_version(self.paths.live, state.app_id) or 0, txn_version(self.paths.rejects, state.app_id) or 0)
        if state.next_batch <= done and not state.pending:
            log.warning("ingest state of %s is behind the table (last batch %d); numbering continues at %d",
                        self.source, done, done + 1)
            state.next_batch = done + 1

    # -- scan and push -----------------------------------------------------------------------------

    def _scan(self, state: IngestState, report: IngestReport) -> None:
        now = dt.datetime.now(UTC)
        report.incomplete = []
        listed = list_source(self.source, self.settings)
        min_age = self.settings.min_file_age.millis if self.settings.min_file_age else None
        new: list[Listed] = []
        for f in listed:
            known = state.files.get(f.name)
            if known is not None:
                self._check_unchanged(known, f, report)
                continue
            if is_complete(f, state.observed.get(f.name), now, min_age):
                new.append(f)
                state.observed.pop(f.name, None)
            else:
                state.observed[f.name] = [f.size, f.mtime_ns]
                report.incomplete.append(f.name)
        names = {f.name for f in listed}
        for gone in [n for n in state.observed if n not in names]:
            del state.observed[gone]
        entries: list[FileEntry] = []
        for f in new:
            e = FileEntry(f.name, 0, f.size, f.mtime_ns, None, "queued", seen_at=now)
            try:
                e.implied_time = implied_time(f, self.settings)
            except InputError as err:
                e.status, e.error = "failed", str(err)
            entries.append(e)
        if self.settings.ordered:
            far = dt.datetime.max.replace(tzinfo=UTC)
            entries.sort(key=lambda e: (e.implied_time or far, e.name))
        tsort = self._tsort(state)
        seq = state.next_seq()
        for e in entries:
            e.seq, seq = seq, seq + 1
            state.files[e.name] = e
            report.new.append(e.name)
            if e.status == "failed":
                report.failed.append((e.name, e.error or ""))
                log.warning("%s", e.error)
            elif not tsort.push(e.t):
                self._late(state, e, report)
        if new or report.incomplete or report.modified:
            self._save(state, report)

    def _check_unchanged(self, e: FileEntry, f: Listed, report: IngestReport) -> None:
        if (f.size, f.mtime_ns) == (e.size, e.mtime_ns) or e.modified:
            return
        if e.status == "queued" and e.batch is None:
            e.size, e.mtime_ns = f.size, f.mtime_ns  # still waiting: it loads as it is when taken
            return
        was = {"ingested": "ingested", "late": "set aside as late", "failed": "marked failed"}.get(e.status, e.status)
        e.modified = (f"modified after it was {was} (size {e.size} -> {f.size} bytes, "
                      f"at {format_timestamp(f.mtime)}); not reloaded")
        report.modified.append(e.name)
        log.warning("%s: %s", os.path.join(self.source, e.name), e.modified)

    def _late(self, state: IngestState, e: FileEntry, report: IngestReport) -> None:
        assert state.t_read is not None and e.implied_time is not None
        e.status = "late"
        e.error = (f"late: implied time {format_timestamp(e.implied_time)} is before the last file taken "
                   f"({state.t_read.name}, {format_timestamp(state.t_read.time)}); not loaded")
        folder = self.settings.late_folder
        if folder and not report.dry_run:
            target = os.path.join(self.source, folder)
            os.makedirs(target, exist_ok=True)
            dest = os.path.join(target, e.name)
            if not os.path.exists(dest):
                os.rename(os.path.join(self.source, e.name), dest)
                e.moved_to = dest
                e.error += f"; moved to {dest}"
        report.late.append(e.name)
        log.warning("%s: %s", os.path.join(self.source, e.name), e.error)

    def _tsort(self, state: IngestState) -> FileTSort:
        queued = state.queued()
        return FileTSort(self.settings.ingress_delay_interval.millis, state.t_read, [e.t for e in queued])

    # -- take ----------------------------------------------------------------------------------------

    def _take(self, state: IngestState, report: IngestReport, drain: bool, save: bool = True) -> list[Batch]:
        tsort = self._tsort(state)
        taken = tsort.pop()
        if drain:
            taken += tsort.drain()
        if not taken:
            return []
        state.t_read = tsort.t_read
        limit = self.settings.blocks_per_batch
        batches: list[Batch] = []
        current: Batch | None = None
        used = 0
        number = state.next_batch
        for t in taken:
            e = state.files[t.name]
            try:
                blocks = plan_file(self._path(e.name), self._format(e.name), self.definition,
                                   self.settings.block_size, 0)
                n = len(blocks)
                self._blocks[e.name] = blocks
            except InputError as err:
                blocks, n = [], 0
                e.status, e.error = "failed", str(err)
                report.failed.append((e.name, str(err)))
                log.warning("%s", err)
            if current is None or (n and used + n > limit and used > 0):
                current = Batch(number + len(batches), [])
                batches.append(current)
                used = 0
            e.batch = current.number
            if n:
                current.files.append(e.name)
                used += n
            else:
                current.failed.append((e.name, e.error or ""))
        state.next_batch = number + len(batches)
        if save:
            state.pending.extend(batches)
            self._save(state, report)
            crashpoints.reached("ingest_after_take")
        else:
            report.planned.extend(batches)
        return batches

    def _path(self, name: str) -> str:
        return os.path.join(self.source, name)

    def _format(self, name: str) -> Any:
        return detect_format(self._path(name), self.settings.format)

    def _save(self, state: IngestState, report: IngestReport) -> None:
        if not report.dry_run:
            self.store.save(state)

    # -- execute -------------------------------------------------------------------------------------

    def _execute(self, state: IngestState, batch: Batch, report: IngestReport, recovered: bool = False) -> None:
        started = time.monotonic()
        app = state.app_id
        staging = join(self.paths.staging, f"ingest-{state.key}-{batch.number:08d}")
        manifest_path = os.path.join(staging, "manifest.json")
        live_done = (txn_version(self.paths.live, app) or 0) >= batch.number
        rejects_done = (txn_version(self.paths.rejects, app) or 0) >= batch.number
        manifest: dict[str, Any] | None = None
        if os.path.exists(manifest_path):
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
        result = BatchResult(batch.number, [*batch.files, *(n for n, _ in batch.failed)], recovered=recovered)
        if manifest is None and batch.files:  # (re)stage: the counts are needed even if both commits are in
            blocks = self._plan_blocks(batch)
            self.on_start(batch, len(blocks))
            manifest = self._stage(batch, blocks, staging, manifest_path)
        elif manifest is None:
            manifest = {"files": {}, "days": [], "good": 0, "rejected": 0, "blocks": 0}
        result.blocks = int(manifest["blocks"])
        spark = None
        if not live_done and manifest["good"]:
            spark = self.spark_factory()
            good = self._staged(spark, staging).where(f"{KIND_COLUMN} = {GOOD}")
            failed_idx = [int(i) for i, f in manifest["files"].items() if f["error"]]
            if failed_idx:
                good = good.where(~good[FILE_COLUMN].isin(failed_idx))
            days = {dt.date.fromisoformat(d) for d in manifest["days"]}
            with_retries(f"ingest batch {batch.number} into {self.definition.name}/live",
                         lambda: commit_live(spark, self.definition, self.paths, good, state.load_id(batch), days,
                                             int(manifest["good"]), txn=(app, batch.number)))
        crashpoints.reached("ingest_after_live")
        if not rejects_done and manifest["rejected"]:
            spark = spark or self.spark_factory()
            frames = [self._rejects_frame(spark, staging, batch, manifest, state.load_id(batch))]
            with_retries(f"rejects of ingest batch {batch.number} into {self.definition.name}",
                         lambda: append_rejects(spark, self.paths, frames, txn=(app, batch.number)))
        crashpoints.reached("ingest_after_rejects")
        for i, name in enumerate(batch.files):
            e = state.files[name]
            stats = manifest["files"].get(str(i), {"good": 0, "rejected": 0, "error": None})
            if stats["error"]:
                e.status, e.error, e.rows, e.rows_rejected = "failed", stats["error"], 0, 0
                result.failed.append(name)
                report.failed.append((name, stats["error"]))
            else:
                e.status, e.rows, e.rows_rejected = "ingested", int(stats["good"]), int(stats["rejected"])
                result.rows += e.rows
                result.rows_rejected += e.rows_rejected
        result.failed += [n for n, _ in batch.failed]
        state.pending = [b for b in state.pending if b.number != batch.number]
        self.store.save(state)
        crashpoints.reached("ingest_after_state")
        remove_tree(staging)
        result.seconds = time.monotonic() - started
        report.batches.append(result)
        self.on_batch(result)

    def _plan_blocks(self, batch: Batch) -> list[Block]:
        blocks: list[Block] = []
        for i, name in enumerate(batch.files):
            planned = self._blocks.pop(name, None)
            if planned is None:  # a batch left by a crashed run: plan again
                try:
                    planned = plan_file(self._path(name), self._format(name), self.definition,
                                        self.settings.block_size, 0)
                except InputError as err:
                    planned = [Block(i, self._path(name), "csv", 0, 0, 0, 0, error=str(err))]
            blocks += [_with_index(b, i) for b in planned]
        return blocks

    def _stage(self, batch: Batch, blocks: list[Block], staging: str, manifest_path: str) -> dict[str, Any]:
        """Parse the batch's blocks with Spark tasks into staging; the manifest of what they hold."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        spark = self.spark_factory()
        remove_tree(staging)
        definition = self.definition
        schema = from_arrow_schema(block_schema(definition))

        def parse(batches: Any) -> Any:
            for rb in batches:
                for row in rb.to_pylist():
                    yield from parse_block(definition, _block_from_row(row))

        groups = pack_blocks(blocks, self.settings.block_size, spark.sparkContext.defaultParallelism)
        rdd = spark.sparkContext.parallelize([[_block_row(b) for b in g] for g in groups], len(groups))
        desc = spark.createDataFrame(rdd.flatMap(lambda g: g), _BLOCK_DDL)
        crashpoints.kill_later("ingest_during_staging", 0.5)
        desc.mapInArrow(parse, schema).write.mode("overwrite").parquet(join(staging, "rows"))
        crashpoints.reached("ingest_after_staging")
        stats = (
            self._staged(spark, staging)
            .groupBy(FILE_COLUMN, KIND_COLUMN, F.to_date(F.col(definition.event_time)).alias("day"))
            .agg(F.count(F.lit(1)).alias("n"), F.min(REASON_COLUMN).alias("reason"))
            .collect()
        )
        files: dict[str, dict[str, Any]] = {str(i): {"good": 0, "rejected": 0, "error": None}
                                            for i in range(len(batch.files))}
        days: set[str] = set()
        for r in stats:
            f = files[str(r[FILE_COLUMN])]
            if r[KIND_COLUMN] == GOOD:
                f["good"] += r["n"]
                f.setdefault("days", []).append(r["day"].isoformat())
            elif r[KIND_COLUMN] == REJECT:
                f["rejected"] += r["n"]
            elif r[KIND_COLUMN] == FILE_ERROR:
                f["error"] = f["error"] or r["reason"]
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
        tmp = manifest_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f)
        os.replace(tmp, manifest_path)
        return manifest

    def _staged(self, spark: "SparkSession", staging: str) -> "DataFrame":
        return spark.read.parquet(join(staging, "rows"))

    def _rejects_frame(self, spark: "SparkSession", staging: str, batch: Batch, manifest: dict[str, Any],
                       load_id: str) -> "DataFrame":
        from pyspark.sql import functions as F

        ok = [int(i) for i, f in manifest["files"].items() if not f["error"]]
        sources = F.create_map(*[x for i in ok for x in (F.lit(i), F.lit(self._path(batch.files[i])))])
        now = dt.datetime.now(UTC)
        df = self._staged(spark, staging)
        return (
            df.where((F.col(KIND_COLUMN) == REJECT) & F.col(FILE_COLUMN).isin(ok))
            .select(
                F.element_at(sources, F.col(FILE_COLUMN)).alias("source"),
                F.col(LINE_COLUMN).alias("line"),
                F.col(RAW_COLUMN).alias("record"),
                F.col(REASON_COLUMN).alias("reason"),
                F.lit(now).cast("timestamp").alias("at"),
                F.lit(load_id).alias("load_id"),
            )
        )


# -- ingest log ----------------------------------------------------------------------------------


def read_log(warehouse: str, table: str, source: str | None = None) -> list[dict[str, Any]]:
    """Every file seen by ``ingest`` for a table (one landing directory, or all), in order seen."""
    store = StateStore(TablePaths(warehouse, table))
    states = [store.load(source)] if source else store.all()
    return [log_entry(s, e) for s in states for e in s.log()]


# -- block descriptors as Spark rows -------------------------------------------------------------


def pack_blocks(blocks: list[Block], block_size: int, parallelism: int) -> list[list[Block]]:
    """Group blocks into Spark tasks, in order: a full-size block (a piece of a big file) is a
    task of its own; small files share a task up to about ``block_size`` bytes, but never in
    fewer tasks than there are cores while there are blocks to spread."""
    sizes = [_block_bytes(b) for b in blocks]
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


def _block_bytes(b: Block) -> int:
    if b.whole or b.format == "parquet":
        try:
            return os.path.getsize(b.path)
        except OSError:
            return 1
    return max(1, b.end - b.start)


_BLOCK_DDL = ("file_index INT, path STRING, format STRING, idx INT, start LONG, end_ LONG, "
              "first_line LONG, header ARRAY<STRING>, error STRING")


def _block_row(b: Block) -> tuple[Any, ...]:
    return (b.file_index, b.path, b.format, b.index, b.start, b.end, b.first_line,
            list(b.header) if b.header is not None else None, b.error)


def _block_from_row(r: dict[str, Any]) -> Block:
    return Block(r["file_index"], r["path"], r["format"], r["idx"], r["start"], r["end_"], r["first_line"],
                 tuple(r["header"]) if r["header"] is not None else None, r["error"])


def _with_index(b: Block, i: int) -> Block:
    return replace(b, file_index=i)
