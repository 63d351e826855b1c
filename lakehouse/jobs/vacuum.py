"""VACUUM and retention (``lakehouse vacuum``, the vacuum job).

Deletes what no reader within the retention can need:
- data files of live, archive and rejects that no snapshot newer than the retention references
  (Delta's VACUUM; also untracked files, e.g. of a rewrite killed before its commit);
- orphaned vector files: written by a run that never committed, or superseded by a later run
  (the current file of each day and column is kept), and temporary leftovers;
- staging of finished runs: archive staging (no run holds the table's lease meanwhile) and
  ingest/load staging of batches their source has finished (taken under that source's lock;
  a source busy right now is skipped) and no stream segment still needs, and of producers' and
  loads' inserts interrupted before the stream registered them (discarded, as the producer's
  next insert would: a producer that never comes back leaves nothing behind).

The retention defaults to the tables' ``delta.deletedFileRetentionDuration`` (``jobs.retention``
in the table's YAML, 7 days). A shorter one is refused, as Delta's own check does, and so is one
shorter than the longest job in the jobs history (it may still be reading an old snapshot),
unless forced. Time travel (``query --as-of``) keeps working within the retention.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from lakehouse import delta_log, storage
from lakehouse.definitions import TableDefinition
from lakehouse.durations import Duration
from lakehouse.errors import LakehouseError, first_line
from lakehouse.lease import Lease, table_lease
from lakehouse.output import Progress, Steps, quiet
from lakehouse.warehouse import TablePaths

PARTS = ("live", "archive", "rejects")
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*(millisecond|second|minute|hour|day|week)s?\s*$",
                       re.IGNORECASE)
_UNIT_S = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
DELTA_DEFAULT_RETENTION = 7 * 86400.0


def parse_interval(text: str | None) -> float | None:
    """Seconds of a Delta interval property such as ``interval 7 days`` (None when absent or in a
    form this does not read)."""
    if not text:
        return None
    m = _INTERVAL.match(text)
    if not m:
        return None
    return float(m.group(1)) * _UNIT_S[m.group(2).lower()]


def human_seconds(s: float) -> str:
    """A retention for people: whole days, hours or minutes when exact, else seconds."""
    if s >= 86400 and s % 86400 == 0:
        return f"{int(s // 86400)}d"
    if s >= 3600 and s % 3600 == 0:
        return f"{int(s // 3600)}h"
    if s >= 60 and s % 60 == 0:
        return f"{int(s // 60)}m"
    return f"{s:g}s"


@dataclass
class VacuumPlan:
    """What ``lakehouse vacuum`` removes (or would remove) from a table, per kind of file."""

    table: str
    retain_seconds: float
    forced: bool = False
    dry_run: bool = False
    files: dict[str, list[str]] = field(default_factory=dict)
    """Per Delta table (live, archive, rejects): data files deleted (or that would be)."""
    bytes: dict[str, int] = field(default_factory=dict)
    vector_files: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)
    staging_bytes: int = 0
    vector_bytes: int = 0
    busy_sources: list[str] = field(default_factory=list)
    seconds: float = 0.0
    purged_erasure: int | None = None
    """The last delete whose copies this vacuum purged (older than the retention), if any."""

    @property
    def removed(self) -> int:
        """How many files the plan removes (Delta data files, vector files, staging folders)."""
        return sum(len(v) for v in self.files.values()) + len(self.vector_files) + len(self.staging)

    @property
    def removed_bytes(self) -> int:
        """How many bytes the plan removes."""
        return sum(self.bytes.values()) + self.vector_bytes + self.staging_bytes

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``lakehouse vacuum --json``."""
        return {
            "table": self.table, "dry_run": self.dry_run, "retain": human_seconds(self.retain_seconds),
            "retain_seconds": self.retain_seconds, "forced": self.forced,
            "files": {k: len(v) for k, v in self.files.items()},
            "bytes": dict(self.bytes),
            "vector_files": len(self.vector_files), "vector_bytes": self.vector_bytes,
            "staging": [os.path.basename(s) for s in self.staging], "staging_bytes": self.staging_bytes,
            "busy_sources": self.busy_sources, "purged_erasure": self.purged_erasure,
            "removed_files": self.removed, "removed_bytes": self.removed_bytes,
            "seconds": round(self.seconds, 3),
        }


def table_retention(paths: TablePaths) -> dict[str, float]:
    """Each Delta table's ``delta.deletedFileRetentionDuration`` in seconds (Delta's 7 days when
    unset)."""
    from lakehouse.physical import describe

    out: dict[str, float] = {}
    for part in PARTS:
        t = describe(getattr(paths, part))
        if t is None:
            continue
        out[part] = parse_interval(t.properties.get("delta.deletedFileRetentionDuration")) or DELTA_DEFAULT_RETENTION
    return out


def check_retention(table: str, retain: float, floors: dict[str, float], longest_job: float, force: bool) -> None:
    """Refuse a retention below what readers may still need (unless ``force``)."""
    if force:
        return
    part, need = max(floors.items(), key=lambda kv: kv[1]) if floors else ("", DELTA_DEFAULT_RETENTION)
    if retain < need:
        raise LakehouseError(
            f"vacuum {table}: --retain {human_seconds(retain)} is below the retention of {table}/{part} "
            f"(delta.deletedFileRetentionDuration = {human_seconds(need)}, set by jobs.retention): a query or "
            "job may still read a snapshot that old; lower jobs.retention (and migrate) or pass --force")
    if retain < longest_job:
        raise LakehouseError(
            f"vacuum {table}: --retain {human_seconds(retain)} is below the longest job on record "
            f"({human_seconds(round(longest_job))} in lakehouse jobs history): such a job may still read a "
            "snapshot that old; keep a longer retention or pass --force")


class Vacuum:
    """Finds (and, executing, removes) what a table no longer needs: Delta, vector and staging files."""

    def __init__(self, definition: TableDefinition, paths: TablePaths, lease: Lease | None = None,
                 report: Progress = quiet) -> None:
        self.steps = Steps(f"vacuum {definition.name}", report)
        self.definition = definition
        self.paths = paths
        self.lease = lease

    # -- data files (Delta) -------------------------------------------------------------------

    def _delta(self, plan: VacuumPlan, part: str, execute: bool) -> None:
        """Delta's VACUUM through delta-rs (milliseconds where Spark's takes several jobs per
        table): removed files whose removal is older than the retention, and untracked files
        older than it (``full``: e.g. a rewrite killed before its commit). The retention is in
        whole hours, rounded up (it keeps at least what was asked); 0 with ``--force``."""
        path = getattr(self.paths, part)
        if not delta_log.exists(path):
            return
        hours = math.ceil(plan.retain_seconds / 3600)
        try:
            full = delta_log.vacuum(path, hours, dry_run=True)
            plan.files[part] = full
            plan.bytes[part] = sum(_size(f) for f in full)
            if execute and full:
                if self.lease is not None:
                    self.lease.check()
                delta_log.vacuum(path, hours, dry_run=False)
        except LakehouseError:
            raise
        except Exception as e:  # noqa: BLE001 - one line naming the table
            raise LakehouseError(f"vacuum {self.definition.name}/{part}: {first_line(e)}") from None

    # -- vector files and staging --------------------------------------------------------------

    def _vectors(self, plan: VacuumPlan, execute: bool) -> None:
        from lakehouse.archive import vectors
        from lakehouse.archive.reader import committed_run

        committed = committed_run(self.paths)
        files, temps = vectors.list_files(self.paths.vectors)
        junk = [f.path for f in vectors.garbage(files, committed)] + temps
        plan.vector_files = junk
        plan.vector_bytes = sum(_size(p) for p in junk)
        if execute and junk:
            vectors.delete(junk, self.paths.vectors)

    def _staging(self, plan: VacuumPlan, execute: bool) -> None:
        from lakehouse.ingest.cleanup import finished_staging

        found = finished_staging(self.paths, execute)
        plan.staging += found.staging
        plan.staging_bytes += found.staging_bytes
        plan.busy_sources += found.busy_sources

    def run(self, plan: VacuumPlan, execute: bool) -> VacuumPlan:
        """Fill ``plan`` with what is removable and, when ``execute``, remove it (checking the lease,
        when held, before Delta's VACUUM); the plan with the time taken."""
        started = time.monotonic()
        for part in PARTS:
            self.steps.at(part)
            self._delta(plan, part, execute)
        self.steps.at("vectors")
        self._vectors(plan, execute)
        self.steps.at("staging")
        self._staging(plan, execute)
        plan.seconds = time.monotonic() - started
        return plan


def _size(path: str) -> int:
    """A file's size in bytes (0 when it is gone)."""
    return storage.size(path[len("file:"):] if path.startswith("file:") else path)


def _remove(path: str) -> None:
    from lakehouse.storage import remove_tree

    remove_tree(path)


def longest_job_seconds(warehouse: str, table: str) -> float:
    """The longest job run of a table on record (0 without a history)."""
    try:
        from lakehouse.jobs.history import History

        return History(warehouse).longest(table)
    except Exception:  # noqa: BLE001 - no history yet
        return 0.0


def run_vacuum(spark_factory: Any, warehouse: str, definition: TableDefinition, retain: Duration | None = None,
               dry_run: bool = False, force: bool = False, lease: Lease | None = None,
               report: Progress = quiet) -> VacuumPlan:
    """``lakehouse vacuum``: check the retention, then (unless ``dry_run``) delete under the
    table's lease; the plan with what was (or would be) removed."""
    from lakehouse.live import check_loadable

    paths = TablePaths(warehouse, definition.name)
    check_loadable(definition, paths)
    floors = table_retention(paths)
    seconds = retain.seconds if retain is not None else max(floors.values(), default=definition.jobs.retention.seconds)
    check_retention(definition.name, seconds, floors, longest_job_seconds(warehouse, definition.name), force)
    plan = VacuumPlan(definition.name, seconds, forced=force, dry_run=dry_run)
    if dry_run:
        return Vacuum(definition, paths, report=report).run(plan, execute=False)
    with contextlib.nullcontext(lease) if lease is not None else table_lease(paths, "vacuum") as held:
        done = Vacuum(definition, paths, held, report).run(plan, execute=True)
        from lakehouse.erasure.job import purge_due

        purged = purge_due(spark_factory, warehouse, definition, seconds, report)  # deletes past the retention
        if purged is not None:
            done.purged_erasure = purged.number
        return done
