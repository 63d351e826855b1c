"""The facade the CLI, the demo and the notebooks use: one object per project and warehouse."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log, migrations, objectstore, rejects, storage
from lakehouse.definitions import (
    TableDefinition,
    get_definition,
    load_definitions,
)
from lakehouse.errors import ConfigError
from lakehouse.output import Progress, quiet
from lakehouse.project.queries import Engine, Queries, SavedQuery  # noqa: F401 - the facade's names
from lakehouse.query import sources
from lakehouse.settings import Settings
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from lakehouse.archive.reader import DayVector, LookupResult, Lookups
    from lakehouse.archive.run import ArchiveResult
    from lakehouse.audit.verify import Check
    from lakehouse.erasure.audit import Erasure
    from lakehouse.erasure.job import DeletePlan, DeleteResult
    from lakehouse.erasure.purge import Purged
    from lakehouse.ingest.load import LoadResult
    from lakehouse.ingest.pipeline import IngestReport
    from lakehouse.ingest.producer import Producer
    from lakehouse.ingest.table import Table
    from lakehouse.jobs.compact import CompactPlan
    from lakehouse.jobs.history import Run
    from lakehouse.jobs.runner import Outcome
    from lakehouse.jobs.vacuum import VacuumPlan
    from lakehouse.lateness.core import Profile
    from lakehouse.quality.model import Report

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableState:
    """A row of ``lakehouse tables``."""

    name: str
    created: bool
    live_rows: int
    archive_rows: int
    rejects: int
    cutoff: int | None
    bound: Any
    """The stream bound B: the latest event time released into live (None before any)."""
    watermark: Any = None
    """The table's completeness: min bound of the producers holding it, else B."""
    staged: int = 0
    """Rows inserted by producers and waiting for the watermark."""
    waiting_rows: int = 0
    """Live rows older than the cutoff: late arrivals invisible until the next archiving run."""
    last_error: dict[str, Any] | None = None
    """The last archiving run's failure (step, error, at, failures in a row, since), cleared by
    the next run that succeeds; None when the last run succeeded."""

    def as_dict(self) -> dict[str, Any]:
        """The table's row of ``lakehouse tables --json`` (``last_error`` only while archiving fails)."""
        doc = {
            "name": self.name, "live_rows": self.live_rows, "archive_rows": self.archive_rows,
            "cutoff": self.cutoff, "bound": self.bound, "watermark": self.watermark, "staged": self.staged,
            "created": self.created, "rejects": self.rejects, "waiting_rows": self.waiting_rows,
        }
        if self.last_error:  # only while archiving fails (the document stays the same otherwise)
            doc["last_error"] = self.last_error
        return doc


class Lakehouse(Queries):
    """One project (tables/, migrations/, queries/) over one warehouse."""

    def __init__(self, settings: Settings, spark: SparkSession | None = None) -> None:
        self.settings = settings
        if spark is not None:  # the user's session: checked, then every command's (never stopped)
            from lakehouse.spark.session import adopt

            adopt(spark)
        if settings.s3 is not None:  # the store every warehouse path of this process reaches
            objectstore.use(settings.s3)
            storage.check_reachable(settings.warehouse)  # a wrong setting is one line, here

    # -- engines --------------------------------------------------------------------------

    def spark(self) -> SparkSession:
        """The SparkSession commands run on (made on first use): ``--remote``'s Spark Connect
        server, else the project's running server, else Spark in this process."""
        from lakehouse.spark.server import session_for

        return session_for(self.settings)

    # -- definitions ----------------------------------------------------------------------

    def definitions(self) -> dict[str, TableDefinition]:
        """Every table of the project, by name (from tables/*.yaml)."""
        return load_definitions(self.settings.tables_dir)

    def definition(self, table: str) -> TableDefinition:
        """The definition of ``table`` (TableNotFound when tables/ has none)."""
        return get_definition(self.settings.tables_dir, table)

    def paths(self, table: str) -> TablePaths:
        """Where ``table``'s data lives in the warehouse."""
        return TablePaths(self.settings.warehouse, table)

    # -- migrations -----------------------------------------------------------------------

    def migrate(self, dry_run: bool = False) -> migrations.MigrateResult:
        """Apply the pending migrations, then check the tables against their definitions."""
        return migrations.migrate(self.settings, self.spark, dry_run=dry_run)

    def migration_status(self) -> migrations.MigrationStatus:
        """The applied and pending migrations, and the problems found comparing them."""
        return migrations.status(self.settings)

    # -- tables ---------------------------------------------------------------------------

    def tables(self) -> list[TableState]:
        """Every defined table and its state (from Delta logs; Spark only to finish what a
        crashed stream operation left)."""
        if not self.settings.tables_dir.is_dir():  # not a project: say where tables were looked for
            raise ConfigError(f"{self.settings.tables_dir}: no such folder; this is not a lakehouse project "
                              "(give --project DIR or LAKEHOUSE_PROJECT, or run in the project's folder)")
        out = []
        from lakehouse.archive.state import read_snapshot
        from lakehouse.archive.status import read_status
        from lakehouse.archive.survey import rows_below
        from lakehouse.stream.status import describe, wall_clock
        from lakehouse.stream.store import StreamStore

        now = wall_clock()
        for name, d in sorted(self.definitions().items()):
            p = self.paths(name)
            created = delta_log.exists(p.live)
            if created:
                self.recover_stream(name)  # what a crashed operation left, first
            snap = read_snapshot(p.archive) if created else None
            cutoff = snap.cutoff if snap else None
            stream = describe(StreamStore(p), d, p, now) if created else {"bound": None, "watermark": None,
                                                                          "staged": 0}
            out.append(
                TableState(
                    name=name,
                    created=created,
                    live_rows=delta_log.row_count(p.live) if created else 0,
                    archive_rows=delta_log.row_count(p.archive) if created else 0,
                    rejects=delta_log.row_count(p.rejects) if created else 0,
                    cutoff=cutoff,
                    bound=stream["bound"],
                    watermark=stream["watermark"],
                    staged=int(stream["staged"] or 0),
                    waiting_rows=rows_below(p.live, d.event_time, cutoff) if created and cutoff is not None else 0,
                    last_error=(read_status(p.root) or {}).get("last_error") if created else None,
                )
            )
        return out

    # -- archiving ------------------------------------------------------------------------

    def archive(self, table: str, now: Any = None, dry_run: bool = False, allow_future: bool = False,
                report: Progress = quiet) -> ArchiveResult:
        """One archiving run (or its plan, with ``dry_run``). ``now`` more than a minute ahead of
        the wall clock is refused unless ``allow_future`` (a committed cutoff cannot move back).
        Each step is said to ``report`` as it starts."""
        from lakehouse.archive.run import run_archive

        d = self.definition(table)
        if not dry_run:  # a delete a crash interrupted is finished first
            from lakehouse.erasure.job import finish_pending

            finish_pending(self.spark, self.settings.warehouse, d, report=report)
        return run_archive(self.spark, self.settings.warehouse, d, now=now, dry_run=dry_run,
                           allow_future=allow_future, report=report)

    # -- erasure ----------------------------------------------------------------------------

    def delete(self, table: str, where: str | None = None, keys: str | None = None, dry_run: bool = False,
               purge: bool = False, report: Progress = quiet) -> DeleteResult | DeletePlan | Purged:
        """Erase the rows ``where`` (a SQL predicate over the table's columns) or ``keys`` (a file
        of primary keys) match from every part of the table: live, archive, staged rows, rejects;
        with ``dry_run``, the rows per part and day it would erase; with ``purge``, then remove
        every file still holding a deleted row (and the history before the purge): alone, the
        purge of the deletes not purged yet."""
        from lakehouse.erasure.job import run_delete

        return run_delete(self.spark, self.settings.warehouse, self.definition(table), where=where, keys=keys,
                          dry_run=dry_run, purge=purge, report=report)

    def erasures(self, table: str | None = None) -> list[Erasure]:
        """Every delete (of ``table``), oldest first, as the audit keeps it."""
        from lakehouse.erasure.audit import history

        if table is not None:
            self.definition(table)
        return history(self.settings.warehouse, table)

    # -- maintenance ----------------------------------------------------------------------

    def optimize(self, table: str, day: Any = None, dry_run: bool = False, report: Progress = quiet) -> CompactPlan:
        """Compact live's small files and rewrite archive days into files of the target size in
        their sorted order (vector files stay valid); a CompactPlan with files and bytes before
        and after."""
        from lakehouse.jobs.compact import run_optimize

        return run_optimize(self.spark, self.settings.warehouse, self.definition(table), day=day, dry_run=dry_run,
                            report=report)

    def vacuum(self, table: str, retain: Any = None, dry_run: bool = False, force: bool = False,
               report: Progress = quiet) -> VacuumPlan:
        """Delete files no snapshot within the retention reads (live, archive, rejects), orphaned
        vector files and finished staging; a VacuumPlan of what was (or would be) removed."""
        from lakehouse.durations import Duration
        from lakehouse.jobs.vacuum import run_vacuum

        if retain is not None and not isinstance(retain, Duration):
            retain = Duration.parse(retain)
        return run_vacuum(self.spark, self.settings.warehouse, self.definition(table), retain=retain,
                          dry_run=dry_run, force=force, report=report)

    def jobs_run(self, table: str | None = None, now: Any = None, dry_run: bool = False) -> list[Outcome]:
        """One round of scheduled jobs (archive, compaction, VACUUM): run what is due."""
        from lakehouse.jobs.runner import Runner

        if isinstance(now, str):
            from lakehouse.records import parse_timestamp

            now = parse_timestamp(now)
        return Runner(self, now=now).run_once(table, dry_run=dry_run)

    def jobs_history(self, table: str | None = None) -> list[Run]:
        """Every recorded job attempt, oldest first."""
        from lakehouse.jobs.history import History

        if table is not None:
            self.definition(table)
        return History(self.settings.warehouse).runs(table)

    def vectors(self, table: str, day: Any, column: str) -> DayVector:
        """One column's vector of one archive day (for the committed cutoff; no Spark)."""
        from lakehouse.archive.reader import read_day

        return read_day(self.definition(table), self.paths(table), column, day)

    def lookup(self, table: str, day: Any, where: list[str]) -> LookupResult:
        """The record range of archive ``day`` whose sort columns equal ``where`` (``C=V`` items on a
        prefix of them), found in the vector files (no Spark)."""
        from lakehouse.archive.reader import lookup, parse_where

        d = self.definition(table)
        return lookup(d, self.paths(table), day, parse_where(d, where))

    def lookups(self, table: str, max_runs: int = 2_000_000) -> Lookups:
        """A reader for many lookups in ``table``'s archive, pinned to the committed cutoff (its
        ``lookup(day, where)``: ``where`` typed values by sort column or ``C=V`` items; its
        ``refresh()`` moves to the latest cutoff). It keeps the runs of the days used last, up
        to ``max_runs`` runs, so a lookup after a day's first is a binary search alone (no Spark)."""
        from lakehouse.archive.reader import Lookups

        return Lookups(self.definition(table), self.paths(table), max_runs)

    def verify(self, table: str | None = None) -> list[Check]:
        """Checks on both engines, compared (see lakehouse.audit.verify); with ``table``, that
        table's and the saved queries that read it."""
        from lakehouse.audit.verify import query_tables, verify

        defs = self.definitions()
        if table is not None:
            self.definition(table)
        saved = [(q.path.name, q.sql) for q in self.saved_queries()
                 if table is None or table.lower() in query_tables(q.sql)]
        return verify(self.spark(), sources(self.settings.warehouse, defs), None if table is None else [table], saved)

    # -- quality --------------------------------------------------------------------------

    def check(self, table: str, scope: str = "all", day: Any = None, docs: bool = True) -> Report:
        """The table's quality checks: built-in invariants and its GE suite (see lakehouse.audit.check)."""
        from lakehouse.audit import check
        from lakehouse.live import check_loadable
        from lakehouse.query import TableSource

        d = self.definition(table)
        check_loadable(d, self.paths(table))
        return check.run(self.spark(), TableSource(d, self.paths(table)), self.settings.warehouse, scope, day,
                         docs=docs)

    def check_history(self, table: str, check_name: str | None = None) -> list[dict[str, Any]]:
        """Every recorded quality result of ``table`` (of one check), oldest first."""
        from lakehouse.quality import results

        self.definition(table)
        return results.history(self.settings.warehouse, table, check_name)

    # -- live store -----------------------------------------------------------------------

    def load(self, table: str, files: list[str], fmt: str | None = None, force: bool = False) -> LoadResult:
        """Load files into a table's live store (a one-shot ingest; see lakehouse.ingest.load)."""
        from lakehouse.archive.state import read_snapshot
        from lakehouse.archive.survey import rows_below
        from lakehouse.ingest.load import Load

        d = self.definition(table)
        result = Load(self.spark, self.settings.warehouse, d).run(files, fmt, force=force)
        snap = read_snapshot(self.paths(table).archive)
        result.cutoff = snap.cutoff if snap else None
        if result.cutoff is not None and result.load_ids:
            result.rows_below_cutoff = rows_below(self.paths(table).live, d.event_time, result.cutoff,
                                                  result.load_ids)
        return result

    def ingest(self, table: str, source: str, watch: bool = False, drain: bool = False, dry_run: bool = False,
               stop: Any = None, on_batch: Any = None, on_start: Any = None, producer: str | None = None) -> IngestReport:
        """Take files from a landing directory into live (see lakehouse.ingest.pipeline)."""
        from lakehouse.ingest.pipeline import Ingest

        job = Ingest(self.spark, self.settings.warehouse, self.definition(table), source,
                     on_batch=on_batch, on_start=on_start, producer=producer)
        return job.run(watch=watch, drain=drain, dry_run=dry_run, stop=stop)

    def ingest_log(self, table: str, source: str | None = None) -> list[dict[str, Any]]:
        """Every file ``ingest`` has seen for a table, in the order seen."""
        from lakehouse.ingest.pipeline import read_log

        self.definition(table)
        return read_log(self.settings.warehouse, table, source)

    def rejects(self, table: str) -> list[dict[str, Any]]:
        """The rejected rows of ``table``, oldest first."""
        self.definition(table)
        return rejects.read(self.settings.warehouse, table)

    def lateness(self, table: str, fraction: float = 0.999, days: int | None = None, now: Any = None) -> Profile:
        """How late ``table``'s rows arrive, the late path, rows rejected late and the archive
        delay that keeps ``fraction`` of the rows out of the late path (a
        ``lakehouse.lateness.core.Profile``; ``days``: the last N days of event time; no Spark)."""
        from lakehouse.lateness.gather import profile

        return profile(self.definition(table), self.paths(table), fraction, days, now)

    # -- streams --------------------------------------------------------------------------

    def table(self, name: str) -> Table:
        """A table handle: ``lh.table("trips").producer("app")`` (see lakehouse.ingest.producer)."""
        from lakehouse.ingest.table import Table

        return Table(self, name)

    def producer(self, table: str, name: str, now: Any = None) -> Producer:
        """Producer ``name`` of ``table``; ``now`` fixes its clock (replays, tests)."""
        return self.table(table).producer(name, clock=_clock(now))

    def recover_stream(self, table: str) -> bool:
        """Finish what a crashed operation left on ``table``'s stream (a release, an insert's
        rejects), if anything (True then; Spark starts only for that)."""
        from lakehouse.stream.engine import Stream

        d, p = self.definition(table), self.paths(table)
        return delta_log.exists(p.live) and Stream(self.spark, d, p).recover()

    def stream_status(self, table: str, now: Any = None) -> dict[str, Any]:
        """``table``'s stream as of ``now``: B, the watermark, staged rows, producers (a crashed
        operation's work is finished first)."""
        from lakehouse.stream.status import describe, wall_clock
        from lakehouse.stream.store import StreamStore

        self.recover_stream(table)
        d, p = self.definition(table), self.paths(table)
        clock = _clock(now) or wall_clock
        return describe(StreamStore(p), d, p, clock())

    def stream_events(self, table: str) -> list[dict[str, Any]]:
        """The events of ``table``'s stream (attach, bound, insert, release, ...), oldest first."""
        from lakehouse.stream.store import StreamStore
        from lakehouse.times import from_micros

        self.definition(table)
        return [{"kind": e["kind"], "at": from_micros(e["at"]), "producer": e.get("producer"),
                 "bound": from_micros(e.get("bound")), "rows": e.get("rows"), "rejected": e.get("rejected"),
                 "detail": e.get("detail")} for e in StreamStore(self.paths(table)).events()]

def _clock(now: Any) -> Callable[[], int] | None:
    """A fixed clock at ``now`` (a datetime or ISO string), or None for the wall clock."""
    if now is None:
        return None
    from lakehouse.ingest.producer import to_micros

    t = to_micros(now)
    return lambda: t
