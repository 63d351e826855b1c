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
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError
from lakehouse.ingest.batch import BatchResult, BatchRunner, continue_numbering, plan_entry
from lakehouse.ingest.scanner import Listed, check_source, implied_time, is_complete, list_source
from lakehouse.ingest.state import (
    LOAD_SOURCE,
    Batch,
    FileEntry,
    IngestState,
    StateStore,
    canonical_source,
    is_files_source,
    producer_of,
)
from lakehouse.ingest.tsort import FileTSort
from lakehouse.live import check_loadable
from lakehouse.output import format_timestamp
from lakehouse.stream.engine import Stream
from lakehouse.times import micros
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
UTC = dt.timezone.utc


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
        """Rows the run's batches took in."""
        return sum(b.rows for b in self.batches)

    @property
    def rows_rejected(self) -> int:
        """Rows the run's batches rejected."""
        return sum(b.rows_rejected for b in self.batches)

    @property
    def files_ingested(self) -> int:
        """Files the run's batches took in (files failed whole not counted)."""
        return sum(len(b.files) - len(b.failed) for b in self.batches)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``lakehouse ingest --json``."""
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


def batch_kind(source: str) -> str:
    """What made a source's batches: ``load`` (``lakehouse load``), ``insert`` (a producer's
    inserts) or ``ingest`` (a landing directory)."""
    if source == LOAD_SOURCE:
        return "load"
    return "insert" if is_files_source(source) else "ingest"


def batch_source(source: str) -> str:
    """A source as ``ingest-log`` names it: ``load``, ``producer NAME``, or the landing directory."""
    if source == LOAD_SOURCE:
        return "load"
    return f"producer {producer_of(source)}" if is_files_source(source) else source


def log_entry(state: IngestState, e: FileEntry) -> dict[str, Any]:
    """One line of ``ingest-log`` (the contract's keys, then where the file came from: ``source``,
    ``kind`` (``load``, a producer's ``insert``, or ``ingest`` of a landing directory) and the
    batch's ``load_id``, the one rejects carry)."""
    return {
        "file": state.path_of(e),
        "source": batch_source(state.source),
        "kind": batch_kind(state.source),
        "load_id": state.load_id(Batch(e.batch, [])) if e.batch is not None else None,
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
                 on_start: Callable[[Batch, int], None] | None = None, producer: str | None = None) -> None:
        self.definition = definition
        self.settings = definition.ingest
        self.paths = TablePaths(warehouse, definition.name)
        self.source = canonical_source(source)
        self.spelled = source
        """The directory as given (a state from before real paths is found by it)."""
        self.store = StateStore(self.paths)
        self.on_batch = on_batch or (lambda r: None)
        from lakehouse.ingest.producer import check_name

        self.producer = check_name(producer) if producer is not None else self.source
        """The producer this landing directory writes the table's stream as."""
        self.stream = Stream(spark_factory, definition, self.paths)
        self.runner = BatchRunner(spark_factory, definition, self.paths, self.store, self.stream, self.producer,
                                  on_start)

    # -- the run ---------------------------------------------------------------------------------

    def run(self, watch: bool = False, drain: bool = False, dry_run: bool = False,
            stop: threading.Event | None = None) -> IngestReport:
        """``--once`` (default) or ``--watch`` until ``stop`` is set; ``drain`` takes every queued
        file at the end; ``dry_run`` reports what would happen and changes nothing."""
        check_source(self.source)
        check_loadable(self.definition, self.paths)
        stop = stop or threading.Event()
        report = IngestReport(self.definition.name, self.source, dry_run=dry_run)
        with self.store.lock(self.source):
            state = self.store.load(self.spelled)
            continue_numbering(state, self.paths)
            if not dry_run:
                if not self.stream.attached(self.producer):
                    self.stream.attach(self.producer)
                self.runner.clean_staging(state)
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
            if drain and not dry_run and not state.pending:
                self.stream.detach(self.producer)  # nothing more to come: stop holding the watermark
            report.waiting = len(state.queued())
            report.unfinished = len(state.pending)
        return report

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
                if f.refused:
                    raise InputError(f.refused)
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
        log.warning("%s: %s", storage.join(self.source, e.name), e.modified)

    def _late(self, state: IngestState, e: FileEntry, report: IngestReport) -> None:
        assert state.t_read is not None and e.implied_time is not None
        e.status = "late"
        e.error = (f"late: implied time {format_timestamp(e.implied_time)} is before the last file taken "
                   f"({state.t_read.name}, {format_timestamp(state.t_read.time)}); not loaded")
        folder = self.settings.late_folder
        if folder and not report.dry_run:
            dest = storage.join(self.source, folder, e.name)
            if not storage.exists(dest):  # (an object store's move is a copy, then a delete)
                storage.rename(storage.join(self.source, e.name), dest)
                e.moved_to = dest
                e.error += f"; moved to {dest}"
        report.late.append(e.name)
        log.warning("%s: %s", storage.join(self.source, e.name), e.error)

    def _tsort(self, state: IngestState) -> FileTSort:
        queued = state.queued()
        return FileTSort(self.settings.ingress_delay_interval.millis, state.t_read, [e.t for e in queued])

    # -- take ----------------------------------------------------------------------------------------

    def _take(self, state: IngestState, report: IngestReport, drain: bool, save: bool = True) -> list[Batch]:
        tsort = self._tsort(state)
        taken = tsort.pop()
        if drain:
            taken += tsort.drain()
        # files found unreadable by the scan (no time in the name, a link out of the directory)
        # go to rejects with the next batch
        unassigned = [e for e in state.log() if e.status == "failed" and e.batch is None]
        if not taken and not unassigned:
            return []
        if taken:
            state.t_read = tsort.t_read
        limit = self.settings.blocks_per_batch
        batches: list[Batch] = []
        current: Batch | None = None
        used = 0
        number = state.next_batch
        for t in taken:
            e = state.files[t.name]
            try:
                blocks = plan_entry(state, e, self.definition)
                n = len(blocks)
                self.runner.planned[e.name] = blocks
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
        if unassigned:
            if current is None:
                current = Batch(number + len(batches), [])
                batches.append(current)
            for e in unassigned:
                e.batch = current.number
                current.failed.append((e.name, e.error or ""))
        state.next_batch = number + len(batches)
        if save:
            state.pending.extend(batches)
            self._save(state, report)
            crashpoints.reached("ingest_after_take")
        else:
            report.planned.extend(batches)
        return batches

    def _save(self, state: IngestState, report: IngestReport) -> None:
        if not report.dry_run:
            self.store.save(state)

    # -- execute -------------------------------------------------------------------------------------

    def _execute(self, state: IngestState, batch: Batch, report: IngestReport, recovered: bool = False) -> None:
        result = self.runner.execute(state, batch, recovered=recovered)
        times = [state.files[n].implied_time for n in batch.files if n in state.files]
        implied = max((t for t in times if t is not None), default=None)
        if implied is not None:  # the producer's bound: the implied time of the last file taken
            self.stream.assert_bound(self.producer, micros(implied), raise_only=True)
        taken_failed = {n for n, _ in batch.failed}
        report.failed += [(n, reason) for n, reason in result.errors.items() if n not in taken_failed]
        report.batches.append(result)
        self.on_batch(result)


# -- ingest log ----------------------------------------------------------------------------------


def read_log(warehouse: str, table: str, source: str | None = None) -> list[dict[str, Any]]:
    """Every file seen by ``ingest`` for a table (one landing directory, or all), in order seen."""
    store = StateStore(TablePaths(warehouse, table))
    states = [store.load(source)] if source else store.all()
    return [log_entry(s, e) for s in states for e in s.log()]
