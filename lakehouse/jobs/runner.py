"""Running what is due: ``lakehouse jobs run`` (once, for cron or an orchestrator) and
``lakehouse jobs serve`` (a long-running scheduler).

A round, per table (in name order): decide from the history which jobs are due (archive every
``archive.interval``; compact_live, compact_archive and vacuum every ``jobs.<name>``); if any,
take the table's lease (waiting a bounded time for another job to finish), decide again under
the lease (an overlapping call may have just run them: a job never runs twice for one slot),
then run the due jobs in order, each attempt recorded in the history. Transient failures are
retried at once with backoff (a few attempts), then again in a later round after a longer
backoff; terminal ones are recorded once and wait for the definition or the data to change.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lakehouse.errors import LakehouseError, first_line, is_transient
from lakehouse.jobs.attempt import Run
from lakehouse.jobs.history import History
from lakehouse.jobs.schedule import JOBS, Decision, decide
from lakehouse.lease import Lease, LeaseHeld, table_lease, within
from lakehouse.settings import env_float
from lakehouse.storage import disk_usage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.definitions import TableDefinition
    from lakehouse.settings import Settings
    from lakehouse.warehouse import TablePaths

log = logging.getLogger(__name__)
UTC = dt.timezone.utc
ATTEMPTS = 3
"""Attempts of a job within one round when it fails transiently."""


class Lakehouse(Protocol):
    """What the jobs need of a project (``lakehouse.project.Lakehouse`` is one)."""

    settings: Settings

    def spark(self) -> SparkSession:
        """The process's SparkSession (started on first use)."""

    def definitions(self) -> dict[str, TableDefinition]:
        """Every table definition of the project."""

    def definition(self, table: str) -> TableDefinition:
        """One table's definition."""

    def paths(self, table: str) -> TablePaths:
        """Where a table's parts live in the warehouse."""

    def recover_stream(self, table: str) -> bool:
        """Finish what a crashed stream operation on the table left."""


@dataclass
class Outcome:
    """What a round did with one job of one table."""

    decision: Decision
    ran: bool = False
    runs: list[Run] = field(default_factory=list)
    busy: str | None = None
    """Why the job was due but not run (the table's lease held by another job)."""
    plan: dict[str, Any] | None = None
    """With ``--dry-run``: what the job would touch."""

    def as_dict(self) -> dict[str, Any]:
        """The outcome's row of ``lakehouse jobs run --json``: the decision, then what the run did."""
        last = self.runs[-1] if self.runs else None
        return {
            **self.decision.as_dict(),
            "ran": self.ran,
            "outcome": last.outcome if last else None,
            "attempts": len(self.runs),
            "error": last.error if last else None,
            "busy": self.busy,
            "plan": self.plan,
            "result": last.result() if last else None,
        }


class Clock:
    """The runner's clock: the wall clock, or an injected ``now`` advancing with real time."""

    def __init__(self, now: dt.datetime | None = None) -> None:
        self.start = now
        self.mono = time.monotonic()

    def __call__(self) -> dt.datetime:
        """Now (UTC): the wall clock, or the injected ``now`` plus the time since the runner started."""
        if self.start is None:
            return dt.datetime.now(UTC)
        return self.start + dt.timedelta(seconds=time.monotonic() - self.mono)

    @property
    def injected(self) -> bool:
        """Whether the clock runs from an injected ``now`` (not the wall clock)."""
        return self.start is not None


class Runner:
    """Runs the scheduled jobs of a project's tables: decides what is due, runs it, records it."""

    def __init__(self, lh: "Lakehouse", trigger: str = "run", now: dt.datetime | None = None,
                 attempts: int = ATTEMPTS, stop: Callable[[], bool] | None = None) -> None:
        self.lh = lh
        self.trigger = trigger
        self.clock = Clock(now)
        self.attempts = max(1, attempts)
        self.history = History(lh.settings.warehouse)
        self.stop = stop or (lambda: False)
        self.backoff = env_float("LAKEHOUSE_JOBS_BACKOFF_SECONDS", 5.0)
        """The pause before the second attempt within a round (doubling after)."""
        self.lease_wait = env_float("LAKEHOUSE_JOBS_LEASE_WAIT_SECONDS", 60.0)
        """How long a round waits for another job to free a table's lease."""
        self.retry_backoff = dt.timedelta(seconds=env_float("LAKEHOUSE_JOBS_RETRY_SECONDS", 60.0))
        """The wait after a failed run before a later round tries again (doubling)."""

    # -- deciding -----------------------------------------------------------------------------

    def fingerprint(self, d: "TableDefinition") -> str:
        """The table's definition and Delta versions, hashed: a job that failed for good is retried
        once it changes."""
        from lakehouse.archive.state import read_snapshot

        paths = self.lh.paths(d.name)
        versions = [getattr(read_snapshot(p), "version", None) for p in (paths.live, paths.archive)]
        return hashlib.sha256(f"{d.model_dump_json()}|{versions}".encode()).hexdigest()[:16]

    def decisions(self, table: str | None = None) -> list[Decision]:
        """What is due now, per job of every table (or of one)."""
        return [x for d in self._tables(table) for x in self._decide_table(d)]

    def _tables(self, table: str | None) -> list["TableDefinition"]:
        from lakehouse import delta_log

        if table is not None:
            return [self.lh.definition(table)]
        defs = self.lh.definitions()
        return [d for _, d in sorted(defs.items()) if delta_log.exists(self.lh.paths(d.name).live)]

    # -- running -----------------------------------------------------------------------------

    def run_once(self, table: str | None = None, dry_run: bool = False) -> list[Outcome]:
        """One round over every table (or one): run what is due; the outcome of every job."""
        out: list[Outcome] = []
        for d in self._tables(table):
            if self.stop():
                break
            out += self._table_round(d, dry_run)
        return out

    def _decide_table(self, d: "TableDefinition") -> list[Decision]:
        runs = self.history.runs(d.name)
        fp = self.fingerprint(d)
        now = self.clock()
        return [decide(job, d.name, interval(d, job), runs, now, fp, self.retry_backoff) for job in JOBS]

    def _table_round(self, d: "TableDefinition", dry_run: bool) -> list[Outcome]:
        if not dry_run:
            try:
                self.lh.recover_stream(d.name)  # what a crashed stream operation left, first
            except LakehouseError as e:  # the jobs still run; the next operation tries again
                log.warning("%s: could not finish what a crashed stream operation left: %s", d.name, e)
        decisions = self._decide_table(d)
        if not any(x.due for x in decisions):
            return [Outcome(x) for x in decisions]
        if dry_run:
            return [Outcome(x, plan=self._plan(d, x.job) if x.due else None) for x in decisions]
        with contextlib.ExitStack() as stack:
            try:
                lease = stack.enter_context(self._lease(self.lh.paths(d.name)))
            except LeaseHeld as e:
                return [Outcome(x, busy=str(e) if x.due else None) for x in decisions]
            decisions = self._decide_table(d)  # again, under the lease: an overlapping round may have run them
            if any(x.due for x in decisions):
                self._ensure_properties(d)
            out = []
            for x in decisions:
                if not x.due or self.stop():
                    out.append(Outcome(x))
                    continue
                out.append(self._run_job(d, x, lease))
            return out

    def _ensure_properties(self, d: "TableDefinition") -> None:
        """Delta properties from the definition (stats columns, retention, checkpoints), when a
        table lacks them (an older table, or jobs.retention changed)."""
        from lakehouse.physical import ensure_properties, properties_differ

        paths = self.lh.paths(d.name)
        try:
            if properties_differ(paths, d):
                ensure_properties(self.lh.spark(), paths, d)
        except Exception as e:  # noqa: BLE001 - the jobs still run under the old properties
            log.warning("%s: could not update the Delta properties: %s", d.name, first_line(e))

    @contextlib.contextmanager
    def _lease(self, paths: Any) -> Iterator[Lease | None]:
        """The table's lease, waiting (with backoff) up to ``lease_wait`` for another job."""
        with contextlib.ExitStack() as stack:
            yield within(lambda: stack.enter_context(table_lease(paths, f"jobs {self.trigger}")), self.lease_wait,
                         f"{paths.name}: the table's lease", pause=0.5, max_pause=10.0, stop=self.stop)

    def _run_job(self, d: "TableDefinition", x: Decision, lease: Lease | None) -> Outcome:
        outcome = Outcome(x, ran=True)
        run_id = uuid.uuid4().hex[:12]
        for attempt in range(1, self.attempts + 1):
            started = self.clock()
            fp = self.fingerprint(d)
            try:
                detail, counts = self._execute(d, x.job, lease)
            except KeyboardInterrupt:  # aborted (a second Ctrl-C or SIGTERM): recorded, then out
                self.history.record(Run(run_id, x.job, d.name, started, self.clock(), "aborted", attempt,
                                        error="interrupted; the next round runs it again", fingerprint=fp,
                                        trigger=self.trigger))
                raise
            except Exception as e:  # noqa: BLE001 - recorded, then retried or reported
                transient = is_transient(e)
                final = not transient or attempt == self.attempts
                message = (str(e).strip().splitlines() or [type(e).__name__])[0]
                if not isinstance(e, LakehouseError):
                    message = f"{type(e).__name__}: {message}"
                run = Run(run_id, x.job, d.name, started, self.clock(), "failed" if final else "retrying", attempt,
                          terminal=not transient, error=message[:2000], fingerprint=fp, trigger=self.trigger)
                self.history.record(run)
                outcome.runs.append(run)
                log.warning("%s %s: attempt %d failed%s: %s", x.job, d.name, attempt,
                            "" if transient else " (terminal)", message)
                if final or self.stop():
                    return outcome
                time.sleep(self.backoff * 2 ** (attempt - 1))
                continue
            run = Run(run_id, x.job, d.name, started, self.clock(), "succeeded", attempt, fingerprint=fp,
                      trigger=self.trigger, detail=detail, rows=counts.get("rows", 0),
                      files_before=counts.get("files_before", 0), files_after=counts.get("files_after", 0),
                      bytes_before=counts.get("bytes_before", 0), bytes_after=counts.get("bytes_after", 0))
            self.history.record(run)
            outcome.runs.append(run)
            return outcome
        return outcome

    def _execute(self, d: "TableDefinition", job: str, lease: Lease | None) -> tuple[dict[str, Any], dict[str, int]]:
        """Run one job under the held lease: (detail for the history, counts)."""
        wh = self.lh.settings.warehouse
        if job == "archive":
            from lakehouse.archive.run import run_archive
            from lakehouse.erasure.job import finish_pending
            from lakehouse.layout import layout

            paths = self.lh.paths(d.name)
            finish_pending(self.lh.spark, wh, d, lease)  # a delete a crash interrupted, first
            f0, b0, _ = layout(paths.archive).totals()
            r = run_archive(self.lh.spark, wh, d, now=self.clock() if self.clock.injected else None, lease=lease,
                            allow_future=False)
            f1, b1, _ = layout(paths.archive).totals()
            doc = r.as_dict()
            return ({k: doc[k] for k in ("cutoff", "previous_cutoff", "days", "rows_purged", "committed")},
                    {"rows": r.rows_archived, "files_before": f0, "files_after": f1, "bytes_before": b0,
                     "bytes_after": b1})
        if job in ("compact_live", "compact_archive"):
            from lakehouse.jobs.compact import run_optimize

            part = job.split("_", 1)[1]
            p = run_optimize(self.lh.spark, wh, d, parts=(part,), lease=lease)
            pp = getattr(p, part)
            # the rows, files and bytes of the days compacted (none: 0 -> 0), in the history and
            # in the round's result alike
            return {"days": [k.isoformat() for k in pp.days]}, p.touched()
        if job == "vacuum":
            from lakehouse.jobs.vacuum import run_vacuum

            paths = self.lh.paths(d.name)
            f0, b0 = disk_usage(paths.root)
            v = run_vacuum(self.lh.spark, wh, d, lease=lease)
            f1, b1 = disk_usage(paths.root)
            doc = v.as_dict()
            return ({k: doc[k] for k in ("retain", "files", "vector_files", "staging", "removed_files",
                                         "removed_bytes")},
                    {"rows": 0, "files_before": f0, "files_after": f1, "bytes_before": b0, "bytes_after": b1})
        raise LakehouseError(f"unknown job {job!r}")

    def _plan(self, d: "TableDefinition", job: str) -> dict[str, Any]:
        """What a due job would touch (``--dry-run``)."""
        wh = self.lh.settings.warehouse
        try:
            if job == "archive":
                from lakehouse.archive.run import run_archive

                return dict(run_archive(self.lh.spark, wh, d, now=self.clock(), dry_run=True).plan.as_dict())
            if job in ("compact_live", "compact_archive"):
                from lakehouse.jobs.compact import run_optimize

                part = job.split("_", 1)[1]
                return dict(getattr(run_optimize(self.lh.spark, wh, d, parts=(part,), dry_run=True), part).as_dict())
            if job == "vacuum":
                from lakehouse.jobs.vacuum import run_vacuum

                return run_vacuum(self.lh.spark, wh, d, dry_run=True).as_dict()
        except LakehouseError as e:
            return {"error": str(e)}
        return {}

    # -- serving -----------------------------------------------------------------------------

    def next_wake(self, poll: float) -> float:
        """Seconds until the next job is due (at most ``poll``; at least a second)."""
        now = self.clock()
        waits = [(x.next_due - now).total_seconds() for x in self.decisions() if x.next_due is not None]
        return max(1.0, min([poll, *waits]))


def interval(d: "TableDefinition", job: str) -> Any:
    """How often ``job`` runs on the table, from its definition (a Duration; None: the job is off)."""
    return d.archive.interval if job == "archive" else d.jobs.interval(job)


def serve(lh: "Lakehouse", poll: float = 30.0, table: str | None = None,
          on_round: Callable[[list[Outcome]], None] | None = None) -> int:
    """Run rounds on time until SIGTERM or Ctrl-C: the first finishes the running job and returns
    0; a second aborts at once (the job is recoverable as always)."""
    stopping = threading.Event()
    lh.spark()  # start Spark first: it installs its own SIGINT handler, which ours replaces

    def handler(signum: int, frame: Any) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()
        log.warning("jobs serve: %s received; finishing the running job, then exiting (again to abort)",
                    signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        runner = Runner(lh, trigger="serve", stop=stopping.is_set)
        while not stopping.is_set():
            outcomes = runner.run_once(table)
            if on_round is not None:
                on_round(outcomes)
            if stopping.is_set():
                break
            stopping.wait(runner.next_wake(poll))
        return 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)
