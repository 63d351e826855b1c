"""``lakehouse check``: the table's GE suite and the built-in invariants in one run, recorded.

A run pins the table's snapshots (live first, as queries do), builds the rows of its scope
(``all``: the split view, each row once; ``live`` or ``archive``: that table), runs the row
invariants (quality.invariants) and the archive's file checks (sorted days, vector files; from
lakehouse.audit.files), then the ``quality:`` expectations through Great Expectations (the rows
in scope read into Spark's cache first, up to ``CACHE_BYTES``, when GE asks for unexpected rows),
and appends every result to ``<warehouse>/_quality/results`` (``check --history``).

A delete that erases from the table after the versions a run read, or is under way when it
records (``lakehouse delete``, maybe with ``--purge``, takes the table's lease; a check takes
none), makes the run keep its outcomes and counts only: no sample, observed value or detail of it
is recorded, and the table's Great Expectations validation results and Data Docs pages go (the
next check writes them anew). A delete that commits while the results are being recorded is
waited for (its lease), then the table's values on record are emptied and, when it purged, the
results table's history is cut as its purge did.

``quality.gate`` runs the same on the staged day batches of an archive run, before its commit
(``archive.checks: before_commit``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from typing import TYPE_CHECKING

from lakehouse import storage
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.errors import LakehouseError
from lakehouse.quality import gx, results
from lakehouse.quality.gate import run_invariants
from lakehouse.quality.model import CheckResult, Report
from lakehouse.quality.results import record

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.audit.files import ArchiveFiles, Check
    from lakehouse.query import TableSource
    from lakehouse.query.split import Split
    from lakehouse.warehouse import TablePaths

UTC = dt.timezone.utc
SCOPES = ("all", "live", "archive")
"""What ``lakehouse check --scope`` can check: the split view, live or the archive."""
CACHE_BYTES = 2 << 30
"""When an expectation finds unexpected rows, Great Expectations asks for them with two Spark
jobs per expectation, each reading the rows in scope again (lakehouse.quality.gx.validate). A
scope whose data files hold up to this many bytes (compressed; its days only, with ``--day``) is
then read once into Spark's cache (memory, then the executors' disks) and released after."""
WITHHELD = "values withheld: a delete erased rows of the table during the check, or one is unfinished"
LEASE_WAIT = 600.0
"""Seconds a check whose results a delete overtook waits for the delete (and its purge) to finish."""


def _frames(spark: "SparkSession", split: "Split", scope: str, day: dt.date | None) -> dict[str, "DataFrame"]:
    """The invariants' frames of the scope (lakehouse.quality.gate.run_invariants): ``view``, the
    rows in scope, is also what the expectations read; no ``archive`` when the scope is live."""
    from pyspark.sql import functions as F

    from lakehouse.query import spark as spark_q

    live, arch = spark_q.stored_frames(spark, split, day)
    rows = {"all": spark_q.frame(spark, split), "live": live, "archive": arch}[scope]
    if day and scope == "all":
        rows = rows.where(F.col(PARTITION_COLUMN) == F.lit(day))
    stored = {"all": live.unionByName(arch), "live": live, "archive": arch}[scope]
    tagged = spark_q.tagged(split, live if scope != "archive" else None, arch if scope != "live" else None)
    frames = {"view": rows, "stored": stored, "tagged": tagged}
    if scope != "live":
        frames["archive"] = spark_q.with_cutoff(arch, split)
    return frames


def run(spark: "SparkSession", source: "TableSource", warehouse: str, scope: str = "all",
        day: dt.date | None = None, docs: bool = True, trigger: str = "check") -> Report:
    """Every check of one table in ``scope`` (and on ``day``), recorded; see the module doc."""
    from lakehouse.audit.files import ArchiveFiles
    from lakehouse.query.split import current

    if scope not in SCOPES:
        raise LakehouseError(f"check {source.name}: --scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    d = source.definition
    if d.quality:
        gx.preload()  # GE's imports run while Spark answers the invariants
    report = Report(d.name, scope, day, uuid.uuid4().hex[:12], dt.datetime.now(UTC))
    split = current(source)  # one pair of pinned snapshots (live first) for the row and the file checks
    frames = _frames(spark, split, scope, day)
    report.versions = {"live_version": split.live.version, "archive_version": split.archive.version,
                       "cutoff": split.cutoff}
    files = None if scope == "live" else ArchiveFiles(source, split.archive, days={day} if day else None)
    report.checks += run_invariants(spark, d, frames)
    if files is not None:
        for c in [files.sorted_check(), files.vector_check()]:
            report.checks.append(_from_verify(c))
    if d.quality:
        cache = _scope_bytes(split, scope, files, day) <= CACHE_BYTES
        report.checks += gx.validate(spark, frames["view"], d, warehouse, f"{d.name}.{scope}", f"tables/{d.name}.yaml",
                                     docs=docs, cache=cache)
    if d.quality and docs:
        report.docs = gx.docs_index(warehouse)
    paths = split.source.paths
    withheld = bool(_erased_since(split)) or storage.exists(paths.erasure)
    if withheld:  # the rows read may hold values a delete erased meanwhile (and purged), or is erasing
        _withhold(report, warehouse)
    record(warehouse, report, trigger)
    erased = 0 if withheld else _erased_since(split)
    if erased:  # ... or a delete erased them (and purged) while the results were being recorded
        _forget(warehouse, paths, erased)
    return report


def _erased_since(split: "Split") -> int:
    """The last erasure a delete committed to live or the archive after the versions the check
    read (0: none)."""
    from lakehouse.archive.state import read_snapshot

    paths = split.source.paths
    found = 0
    for path, read in ((paths.live, split.live), (paths.archive, split.archive)):
        now = read_snapshot(path)
        if now is not None and now.erasures > read.erasures:
            found = max(found, now.erasures)
    return found


def _forget(warehouse: str, paths: "TablePaths", erasure: int) -> None:
    """What a purge does to the table's quality results, again, after the delete (it holds the
    table's lease until its purge is done; waited for): values on record emptied, GE validations
    removed, and when ``erasure`` was purged, the results table's history cut as the purge cut it,
    so no version holds what this run recorded."""
    from lakehouse import delta_log
    from lakehouse.archive.state import PURGE_APP_ID
    from lakehouse.lease import table_lease, within

    with contextlib.ExitStack() as stack:
        within(lambda: stack.enter_context(table_lease(paths, "check")), LEASE_WAIT,
               f"check {paths.name}: the table's lease, to empty values a delete erased meanwhile")
        results.clear_samples(warehouse, paths.name)
        gx.forget_validations(warehouse, paths.name)
        path = results.results_path(warehouse)
        if (delta_log.txn_version(paths.live, PURGE_APP_ID) or 0) >= erasure and delta_log.exists(path):
            delta_log.cut_and_drop(path, (PURGE_APP_ID, erasure))


def _withhold(report: Report, warehouse: str) -> None:
    """Keep a check's outcomes and counts, not the values it saw (samples, what it observed, the
    details that may name them), nor Great Expectations' validation results and Data Docs pages of
    the table: a delete ran during the check, and what the check read may hold rows it erased."""
    for c in report.checks:
        c.sample, c.observed, c.detail = [], None, WITHHELD
    gx.forget_validations(warehouse, report.table)


def _scope_bytes(split: "Split", scope: str, files: "ArchiveFiles | None", day: dt.date | None) -> int:
    """The bytes of the data files the scope reads, at the pinned versions: the archive's from
    ``files`` (its layout; None when the scope is live alone), live's from its log."""
    from lakehouse.layout import layout

    days = {day} if day else None
    live = layout(split.source.paths.live, split.live.version).totals(days)[1] if scope != "archive" else 0
    return live + (files.layout.totals(days)[1] if files is not None else 0)


def _from_verify(c: "Check") -> CheckResult:
    values = dict(c.values)
    problems = list(values.pop("problems", []))
    return CheckResult(c.name, "invariant", c.ok, observed=values or None, unexpected_count=len(problems),
                       sample=problems[:gx.SAMPLE], detail=c.detail)


