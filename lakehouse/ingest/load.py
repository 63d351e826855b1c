"""``lakehouse load TABLE FILE...``: a one-shot ingest of the files at hand.

The files are taken as one batch of the table's ``load`` source and run through the same write
path as ``ingest`` (``lakehouse.ingest.batch``): Spark tasks parse their blocks (the vectorized
CSV path included), one commit into live and one into rejects, both carrying the source's
SetTransaction. Like COPY INTO, a load is idempotent: a file whose content (SHA-256) the table
already loaded is skipped and reported, unless ``force``. The files and their checksums are
recorded in the source's durable state before anything is written, so a load killed at any
instant and run again finishes the interrupted batch first and loads every row exactly once.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import ConfigError, InputError
from lakehouse.ingest.batch import (
    BatchResult,
    BatchRunner,
    content_checksum,
    continue_numbering,
    discard,
    plan_entry,
    registered,
)
from lakehouse.ingest.state import (
    Batch,
    FileEntry,
    IngestState,
    StateStore,
    producer_source,
)
from lakehouse.inputs import detect_format
from lakehouse.live import check_loadable
from lakehouse.stream.engine import Stream
from lakehouse.stream.model import StreamError
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
UTC = dt.timezone.utc
LOCK_WAIT = 3600.0
"""Seconds a load waits for another load of the same table to finish (loads commit in turn)."""


@dataclass
class FileResult:
    """What happened to one file given to ``load``."""

    source: str
    rows_loaded: int = 0
    rows_rejected: int = 0
    error: str | None = None
    """Set when the whole file was rejected (it is in rejects with this reason)."""
    skipped: str | None = None
    """Set when the file was not loaded because its content already was (the reason)."""


@dataclass
class LoadResult:
    """The outcome of one ``load``."""

    table: str
    files: list[FileResult] = field(default_factory=list)
    batches: list[BatchResult] = field(default_factory=list)
    load_ids: list[str] = field(default_factory=list)
    rows_staged: int = 0
    """Rows of the producer still staged at the end, waiting for the watermark to pass them."""
    discarded: list[int] = field(default_factory=list)
    """Batches of an earlier insert interrupted before it was registered: discarded (never taken)."""
    cutoff: int | None = None
    """The table's committed archive cutoff after the load (epoch seconds; None: never archived)."""
    rows_below_cutoff: int = 0
    """Rows the load put into live with event time below ``cutoff``: queries see them only after
    the next archive run moves them into the archive (the late path)."""
    duplicate: bool = False
    """The insert's idempotency key was inserted before: nothing of it was taken."""

    @property
    def rows_loaded(self) -> int:
        """Rows of the load's batches that went in (after late rows were rejected)."""
        return sum(b.rows for b in self.batches)

    @property
    def rows_rejected(self) -> int:
        """Rows of the load's batches rejected: bad rows and late rows (whole files: ``files_rejected``)."""
        return sum(b.rows_rejected for b in self.batches)

    @property
    def rows_inserted(self) -> int:
        """Rows the releases during the load inserted into live (new keys)."""
        return sum(b.rows_inserted for b in self.batches)

    @property
    def rows_updated(self) -> int:
        """Rows the releases during the load replaced in live (keys already there)."""
        return sum(b.rows_updated for b in self.batches)

    @property
    def files_rejected(self) -> list[FileResult]:
        """Files rejected whole, with the reason in ``error`` (rejects holds them with it)."""
        return [f for f in self.files if f.error]

    @property
    def files_rejected_now(self) -> list[FileResult]:
        """Files of this command rejected whole (not those of an interrupted load it finished)."""
        earlier = {p for b in self.recovered for p in b.files}
        return [f for f in self.files_rejected if f.source not in earlier]

    @property
    def files_skipped(self) -> list[FileResult]:
        """Files not loaded because this producer loaded the same content before."""
        return [f for f in self.files if f.skipped]

    @property
    def recovered(self) -> list[BatchResult]:
        """Batches an interrupted load left, finished by this one."""
        return [b for b in self.batches if b.recovered]

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``lakehouse load --json``."""
        return {
            "rows_loaded": self.rows_loaded,
            "rows_rejected": self.rows_rejected,
            "files_skipped": len(self.files_skipped),
            "files_rejected": [{"source": f.source, "reason": f.error} for f in self.files_rejected],
            "skipped": [{"source": f.source, "reason": f.skipped} for f in self.files_skipped],
            "rows_inserted": self.rows_inserted,
            "rows_updated": self.rows_updated,
            "rows_late": sum(b.rows_late for b in self.batches),
            "rows_below_cutoff": self.rows_below_cutoff,
            "cutoff": self.cutoff,
            "rows_staged": self.rows_staged,
            "recovered_batches": [b.number for b in self.recovered],
            "discarded_batches": self.discarded,
            "load_ids": self.load_ids,
        }


class Load:
    """Loads files into one table through the ingest write path."""

    def __init__(self, spark_factory: Callable[[], "SparkSession"], warehouse: str,
                 definition: TableDefinition, producer: str = "load", stream: Stream | None = None) -> None:
        self.definition = definition
        self.paths = TablePaths(warehouse, definition.name)
        self.store = StateStore(self.paths)
        self.producer = producer
        self.source = producer_source(producer)
        self.stream = stream or Stream(spark_factory, definition, self.paths)
        self.runner = BatchRunner(spark_factory, definition, self.paths, self.store, self.stream, producer)

    def run(self, files: list[str], fmt: str | None = None, force: bool = False, one_shot: bool = True,
            forget: bool = False, key: tuple[str, int] | None = None, moves_bound: bool = True) -> LoadResult:
        """Load ``files`` (in order: a later file wins over an earlier one for the same key).

        ``one_shot`` (``lakehouse load``): the producer attaches, inserts and detaches; otherwise
        (``lakehouse producer T NAME insert``) it must be attached and stays so. ``forget``: the
        files are temporary (rows given to the Python API): once done, the state forgets them.
        ``key``: the insert's idempotency key (app, version): taken before, nothing is taken
        (``duplicate``). ``moves_bound`` False: the rows do not move the producer's bound."""
        check_loadable(self.definition, self.paths)
        result = LoadResult(self.definition.name)
        with self.store.lock(self.source, wait=LOCK_WAIT):
            # attached still: by a one-shot load killed before it detached; its batches are
            # finished under its old bound, then this load attaches afresh (at the stream's bound)
            left = self.stream.attached(self.producer)
            if one_shot and not left:
                self.stream.attach(self.producer)
            elif not one_shot and not left:
                raise StreamError(f"producer {self.producer!r} is not attached to {self.definition.name}: "
                                  f"run `lakehouse producer {self.definition.name} {self.producer} attach` first")
            state = self.store.load(self.source)
            continue_numbering(state, self.paths)
            self.runner.clean_staging(state)
            # batches of an insert killed (or failed) before the stream registered it never
            # happened: discarded for good; those registered are finished (their bookkeeping)
            for batch in list(state.pending):
                if not registered(self.paths, state, batch):
                    discard(self.paths, self.store, state, batch)
                    result.discarded.append(batch.number)
            recovered = {(state.path_of(state.files[n]), state.files[n].checksum)
                         for b in state.pending for n in [*b.files, *(m for m, _ in b.failed)]
                         if n in state.files}
            for batch in list(state.pending):
                result.batches.append(self.runner.execute(state, batch, recovered=True))
                result.load_ids.append(state.load_id(batch))
            if one_shot and left:
                self.stream.detach(self.producer)
                self.stream.attach(self.producer)
            if key is not None and self.stream.store.read().seen_key(key) is not None:
                result.duplicate = True  # (checked again under the stream's lease when registering)
                taken = None
            else:
                taken = self._take(state, files, fmt, force, result, recovered)
            if taken is not None:
                done = self.runner.execute(state, taken, key=key, moves_bound=moves_bound)
                result.duplicate = done.duplicate
                result.batches.append(done)
                if not done.duplicate:
                    result.load_ids.append(state.load_id(taken))
                if forget:
                    for name in [*taken.files, *(n for n, _ in taken.failed)]:
                        state.files.pop(name, None)
                    self.store.save(state)
            if one_shot:
                self.stream.detach(self.producer)
            result.rows_staged = self.stream.store.read().staged(self.producer)
        self._report_files(result)
        return result

    def _take(self, state: IngestState, files: list[str], fmt: str | None, force: bool,
              result: LoadResult, recovered: set[tuple[str, str | None]]) -> Batch | None:
        """Record the files to load as one batch (with their checksums) before anything is written."""
        now = dt.datetime.now(UTC)
        loaded: dict[str, FileEntry] = {e.checksum: e for e in state.log()
                                        if e.checksum and e.status == "ingested"}
        batch = Batch(state.next_batch, [])
        seq = state.next_seq()
        taken_sums: dict[str, str] = {}
        taken_paths: set[str] = set()
        recovered_paths = {p for p, _ in recovered}
        for given in files:
            entry = FileEntry(f"{seq:08d}", seq, 0, 0, None, "queued", seen_at=now, path=given)
            try:
                path = storage.absolute(given)
                shown = entry.path = os.fsencode(path).decode("utf-8", "backslashreplace")
                if shown != path:  # no engine can carry the name; the content is never read
                    raise InputError(f"{shown}: the file name is not UTF-8; rename the file to load it")
                info = storage.file_info(path)
                if info is None:
                    raise InputError(f"{path}: not a regular file" if storage.exists(path) else f"{path}: no such file")
                entry.size, entry.mtime_ns = info.size, info.mtime_ns
                entry.format = detect_format(path, fmt)
                entry.checksum = content_checksum(path)
            except FileNotFoundError:
                entry.status, entry.error = "failed", f"{entry.path}: no such file"
            except InputError as e:
                entry.status, entry.error = "failed", str(e)
            except (OSError, ConfigError) as e:  # a bucket that is not there, a store not set up
                wait = storage.transient(given, e)
                if wait is not None:  # the store did not answer: the load fails, nothing is recorded
                    raise wait from None
                entry.status, entry.error = "failed", f"{entry.path}: cannot read: {getattr(e, 'strerror', None) or e}"
            path = shown = entry.path or given
            if (shown, entry.checksum) in recovered or (entry.checksum is None and shown in recovered_paths):
                continue  # finished just now from the interrupted load (whatever --force says)
            if shown in taken_paths:
                result.files.append(FileResult(shown, skipped="given twice in this load"))
                continue
            taken_paths.add(shown)
            if entry.checksum and not force:
                prior = loaded.get(entry.checksum)
                if prior is not None:
                    result.files.append(FileResult(path, skipped=(
                        f"already loaded (same content, sha256 {entry.checksum[:12]}) from {state.path_of(prior)} "
                        f"in {state.load_id(Batch(prior.batch or 0, []))}; pass --force to load it again")))
                    continue
                if entry.checksum in taken_sums:
                    result.files.append(FileResult(path, skipped=(
                        f"same content as {taken_sums[entry.checksum]} earlier in this load")))
                    continue
                taken_sums[entry.checksum] = path
            seq += 1
            state.files[entry.name] = entry
            entry.batch = batch.number
            if entry.status == "failed":
                batch.failed.append((entry.name, entry.error or ""))
                continue
            try:
                self.runner.planned[entry.name] = plan_entry(state, entry, self.definition)
                batch.files.append(entry.name)
            except InputError as e:
                entry.status, entry.error = "failed", str(e)
                batch.failed.append((entry.name, str(e)))
        if not batch.files and not batch.failed:
            return None
        state.next_batch = batch.number + 1
        state.pending.append(batch)
        self.store.save(state)
        crashpoints.reached("ingest_after_take")
        return batch

    def _report_files(self, result: LoadResult) -> None:
        for b in result.batches:
            for p in b.files:
                if b.duplicate:
                    result.files.append(FileResult(p, skipped="its insert's idempotency key was inserted before"))
                elif p in b.errors:
                    result.files.append(FileResult(p, error=b.errors[p]))
                else:
                    good, bad = b.per_file.get(p, (0, 0))
                    result.files.append(FileResult(p, rows_loaded=good, rows_rejected=bad))
        for f in result.files:
            if f.error:
                log.warning("%s", f.error)
