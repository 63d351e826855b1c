"""The delete job (``lakehouse delete TABLE --where P | --keys FILE``): plan, then every part of
the table in order, recoverably.

Under the table's lease (no archiving run, compaction or VACUUM meanwhile; the stream's
operations take the stream's own lease, one at a time):

1. **Number and save** (``_state/erasure.json``, and the keys in ``_state/erasure-keys.parquet``):
   the erasure's number N (one above any erasure a part's log, the audit or a saved delete
   knows) and what it erases, saved before anything changes; a delete killed at any step is
   finished from here by the next delete or archiving run. [erase_after_save] Then what a
   crashed archiving run left is finished, as the next run would (``archive.recover``): live
   rows the archive holds purged, the books repaired.
2. **Staged rows** (``stream.erase``): first, since a release after this step carries no
   matched row (releases finished before it are in live for step 3). [erase_after_staged]
3. **Live** (``live.erase``: Spark ``DELETE``, a ``MERGE`` for many keys, SetTransaction
   (``lakehouse.erasure``, N)).
   [erase_after_live]
4. **Archive** (``archive.erase``: the touched days rewritten, one commit with N).
   [erase_after_archive_write, erase_after_archive_commit, erase_after_archive]
5. **Rejects** (``rejects.erase_matching``: one commit with N). [erase_after_rejects]
6. **Audit** (``audit.record``, once per N), then the saved delete is removed.
   [erase_after_audit]
7. With ``--purge``: ``purge.purge`` (its own crash points), then the deletes it covers are
   marked purged in the audit.

Each step saves what it did into the saved delete as it finishes, and is skipped by a part
that holds N already, so a finished step is never run twice and the audit counts every row
once. Rows loaded or inserted while a delete runs are new rows: they are not the delete's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, delta_log, storage
from lakehouse.archive.state import ERASURE_APP_ID
from lakehouse.definitions import TableDefinition
from lakehouse.erasure import archive, audit, live, matching, rejects
from lakehouse.erasure.predicate import Predicate, read_keys
from lakehouse.erasure.purge import Purged
from lakehouse.erasure.selection import Selection, matched
from lakehouse.errors import InputError, LakehouseError, first_line
from lakehouse.lease import Lease, table_lease
from lakehouse.output import Progress, Steps, quiet
from lakehouse.storage import join
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

UTC = dt.timezone.utc
KEYS = "erasure-keys.parquet"


@dataclass(frozen=True)
class Request:
    """What a delete erases: a checked predicate, or keys (and the rows Spark selects either way)."""

    table: str
    selection: Selection
    where: str | None = None
    predicate: Predicate | None = None
    keys: pa.Table | None = None
    keys_sha256: str | None = None

    def matcher(self, definition: TableDefinition) -> Callable[[pa.Table], pa.Array]:
        """A boolean per row of an Arrow table of the table's rows: whether the delete erases it."""
        import pyarrow as pa

        if self.keys is None:
            assert self.predicate is not None
            p = self.predicate
            return lambda rows: matching.matches(definition, p, rows)
        key = list(definition.primary_key)
        wanted = set(zip(*[self.keys.column(k).to_pylist() for k in key], strict=True))
        return lambda rows: pa.array([v in wanted for v in zip(*[rows.column(k).to_pylist() for k in key],
                                                              strict=True)], pa.bool_())

    def said(self) -> str:
        """The request as messages and the audit show it."""
        if self.where is not None:
            return f"--where {self.where!r}"
        n = "?" if self.keys is None else self.keys.num_rows
        return f"--keys ({n} key(s), sha256 {self.keys_sha256})"


def request(definition: TableDefinition, where: str | None = None, keys: str | None = None) -> Request:
    """Check what a delete is asked to erase (InputError in one line: both or neither given, an
    unknown column, a table without a key for ``keys``, a bad keys file)."""
    if (where is None) == (keys is None):
        raise InputError(f"delete {definition.name}: give --where PREDICATE or --keys FILE (one of them)")
    if where is not None:
        p = matching.check(definition, where)
        return Request(definition.name, Selection(p.sql), where=where, predicate=p)
    assert keys is not None
    table = read_keys(definition, keys)
    return Request(definition.name, Selection.of_keys(definition, table), keys=table,
                   keys_sha256=hashlib.sha256(storage.read_bytes(keys)).hexdigest())


@dataclass
class DeletePlan:
    """What a delete would erase (``--dry-run``): rows per part and day, at the versions read."""

    table: str
    request: str
    number: int
    live: dict[dt.date, int] = field(default_factory=dict)
    archive: dict[dt.date, int] = field(default_factory=dict)
    staged: dict[dt.date, int] = field(default_factory=dict)
    rejects: int = 0
    rejects_unmatched: int = 0
    """Rejected records that could not be judged (not parsed, or not the columns the delete reads)."""

    @property
    def rows(self) -> int:
        """Rows in all."""
        return sum(self.live.values()) + sum(self.archive.values()) + sum(self.staged.values()) + self.rejects

    def as_dict(self) -> dict[str, Any]:
        """The plan as the CLI's JSON document."""
        def days(m: dict[dt.date, int]) -> dict[str, int]:
            return {d.isoformat(): n for d, n in sorted(m.items())}

        return {"table": self.table, "request": self.request, "number": self.number, "rows": self.rows,
                "live": days(self.live), "archive": days(self.archive), "staged": days(self.staged),
                "rejects": self.rejects, "rejects_unmatched": self.rejects_unmatched,
                "archive_days_rewritten": len(self.archive)}


@dataclass
class DeleteResult:
    """What a delete erased, per part."""

    table: str
    number: int
    request: str
    staged: int = 0
    live: int = 0
    archive: dict[str, Any] = field(default_factory=dict)
    rejects: int = 0
    rejects_unmatched: int = 0
    resumed: bool = False
    """Finished a delete a crash interrupted (its parts done before were not done again)."""
    purged: dict[str, Any] | None = None
    """With ``--purge``: what the purge removed (``purge.Purged``)."""

    @property
    def rows(self) -> int:
        """Rows erased in all."""
        return self.staged + self.live + int(self.archive.get("rows", 0)) + self.rejects

    def as_dict(self) -> dict[str, Any]:
        """The result as the CLI's JSON document."""
        return {"table": self.table, "number": self.number, "request": self.request, "rows": self.rows,
                "staged": self.staged, "live": self.live, "archive": self.archive, "rejects": self.rejects,
                "rejects_unmatched": self.rejects_unmatched, "resumed": self.resumed, "purged": self.purged}


def next_number(warehouse: str, paths: TablePaths) -> int:
    """One above every erasure the table's parts, the audit and a saved delete know."""
    found = [delta_log.txn_version(p, ERASURE_APP_ID) or 0 for p in (paths.live, paths.archive, paths.rejects)]
    found += [e.number for e in audit.history(warehouse, paths.name)]
    saved = _saved(paths)
    if saved is not None:
        found.append(int(saved["number"]))
    return max(found, default=0) + 1


def plan(spark: SparkSession, definition: TableDefinition, paths: TablePaths, req: Request,
         number: int) -> DeletePlan:
    """The rows the delete matches now, per part and day (nothing written)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakehouse.stream.engine import Stream
    from lakehouse.stream.erase import staged_rows

    d = definition
    out = DeletePlan(d.name, req.said(), number)
    if delta_log.exists(paths.live):
        out.live = matched(spark, paths.live, req.selection)
    if delta_log.exists(paths.archive):
        out.archive = archive.plan(spark, d, paths, req.selection)[1]
    rows = staged_rows(Stream(lambda: spark, d, paths))
    if rows.num_rows:
        hit = rows.filter(req.matcher(d)(rows))
        days = pc.cast(pc.cast(hit.column(d.event_time), pa.timestamp("us", tz="UTC")), pa.date32()).to_pylist()
        for day in days:
            out.staged[day] = out.staged.get(day, 0) + 1
    found = rejects.match(d, paths, req.predicate, req.keys)
    out.rejects, out.rejects_unmatched = found.rows, found.unmatched
    return out


# -- the saved delete -----------------------------------------------------------------------------


def _saved(paths: TablePaths) -> dict[str, Any] | None:
    try:
        doc = storage.read_json(paths.erasure)
    except FileNotFoundError:
        return None
    return doc if isinstance(doc, dict) else None


def _save(paths: TablePaths, doc: dict[str, Any], lease: Lease | None) -> None:
    if lease is not None:
        lease.check()  # (a process whose lease ran out saves nothing)
    storage.write_json(paths.erasure, doc)


def _saved_request(definition: TableDefinition, paths: TablePaths, doc: dict[str, Any]) -> Request:
    """The request a saved delete holds."""
    if doc.get("where") is not None:
        p = matching.check(definition, doc["where"])
        return Request(definition.name, Selection(p.sql), where=doc["where"], predicate=p)
    import pyarrow.parquet as pq

    keys = pq.read_table(storage.arrow_input(join(paths.root, "_state", KEYS)))
    return Request(definition.name, Selection.of_keys(definition, keys), keys=keys, keys_sha256=doc.get("keys_sha256"))


# -- running ----------------------------------------------------------------------------------------


def execute(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition,
            req: Request, lease: Lease | None, report: Progress = quiet, doc: dict[str, Any] | None = None) -> DeleteResult:
    """Run a delete (or finish the saved one, ``doc``) under the table's lease held by the caller."""
    from lakehouse.stream.engine import Stream
    from lakehouse.stream.erase import erase as erase_staged

    d = definition
    paths = TablePaths(warehouse, d.name)
    steps = Steps(f"delete {d.name}", report)
    resumed = doc is not None
    if (doc is None or not {"staged", "live", "archive", "rejects"} <= set(doc.get("done") or {})) \
            and delta_log.exists(paths.archive):
        # what a crashed archiving run left first, as the next run would: live rows the archive
        # holds purged (else a row erased from both would be counted twice), the books repaired
        steps.at("recover")
        from lakehouse.archive import recover

        recover.recover(spark_factory(), d, paths)
    if doc is None:
        steps.at("save")
        number = next_number(warehouse, paths)
        if req.keys is not None:
            import pyarrow.parquet as pq

            with storage.open_write(join(paths.root, "_state", KEYS)) as f:
                pq.write_table(req.keys, f)
        doc = {"table": d.name, "number": number, "where": req.where, "keys_sha256": req.keys_sha256,
               "keys": None if req.keys is None else req.keys.num_rows, "started": dt.datetime.now(UTC).isoformat(),
               "done": {}}
        _save(paths, doc, lease)
        crashpoints.reached("erase_after_save")
    number = int(doc["number"])
    done: dict[str, Any] = doc.setdefault("done", {})

    def finished(part: str, value: Any) -> None:
        done[part] = value
        _save(paths, doc, lease)

    if "staged" not in done:
        steps.at("staged")
        erased = erase_staged(Stream(spark_factory, d, paths), req.matcher(d), number)
        finished("staged", sum(erased.values()))
        crashpoints.reached("erase_after_staged")
    if "live" not in done:
        steps.at("live")
        n = live.erase(spark_factory(), paths, req.selection, number) if delta_log.exists(paths.live) else 0
        finished("live", n)
        crashpoints.reached("erase_after_live")
    if "archive" not in done:
        steps.at("archive")
        a = (archive.erase(spark_factory(), d, paths, req.selection, number, lease)
             if delta_log.exists(paths.archive) else archive.ArchiveErasure())
        finished("archive", a.as_dict())
        crashpoints.reached("erase_after_archive")
    if "rejects" not in done:
        steps.at("rejects")
        finished("rejects", list(rejects.erase_matching(d, paths, number, req.predicate, req.keys)))
        crashpoints.reached("erase_after_rejects")
    result = DeleteResult(d.name, number, req.said(), staged=int(done["staged"]), live=int(done["live"]),
                          archive=dict(done["archive"]), rejects=int(done["rejects"][0]),
                          rejects_unmatched=int(done["rejects"][1]), resumed=resumed)
    steps.at("audit")
    audit.record(warehouse, audit.Erasure(
        d.name, number, dt.datetime.fromisoformat(doc["started"]), predicate=req.where, keys_sha256=req.keys_sha256,
        keys=doc.get("keys"), rows_live=result.live, rows_archive=int(result.archive.get("rows", 0)),
        rows_staged=result.staged, rows_rejects=result.rejects, rejects_unmatched=result.rejects_unmatched,
        days=",".join(sorted(result.archive.get("days", {}))),
        versions=json.dumps({part: delta_log.version(getattr(paths, part)) for part in ("live", "archive", "rejects")
                             if delta_log.exists(getattr(paths, part))})))
    crashpoints.reached("erase_after_audit")
    if lease is not None:
        lease.check()
    storage.delete(paths.erasure)  # first: a saved delete always has its keys
    storage.delete(join(paths.root, "_state", KEYS))
    return result


def finish_pending(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition,
                   lease: Lease | None = None, report: Progress = quiet) -> DeleteResult | None:
    """Finish the delete a crash interrupted, if one was saved (under ``lease``, or the table's
    lease taken here); None when there was none."""
    paths = TablePaths(warehouse, definition.name)
    if _saved(paths) is None:
        return None
    if lease is not None:
        return _finish(spark_factory, warehouse, definition, paths, lease, report)
    with table_lease(paths, "delete") as held:
        return _finish(spark_factory, warehouse, definition, paths, held, report)


def _finish(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition,
            paths: TablePaths, lease: Lease | None, report: Progress) -> DeleteResult | None:
    doc = _saved(paths)  # (read again under the lease: another process may have finished it)
    if doc is None:
        storage.delete(join(paths.root, "_state", KEYS))  # a delete killed before its save: its keys go
        return None
    if {"staged", "live", "archive", "rejects"} <= set(doc.get("done") or {}):  # only the audit left
        req = Request(definition.name, Selection("FALSE"), where=doc.get("where"), keys_sha256=doc.get("keys_sha256"))
        return execute(spark_factory, warehouse, definition, req, lease, report, doc)
    try:
        req = _saved_request(definition, paths, doc)
    except (InputError, OSError) as e:
        raise LakehouseError(
            f"delete {definition.name}: erasure {doc.get('number')} was interrupted and cannot be finished: "
            f"{first_line(e)}; fix that, or give it up by removing {paths.erasure} (its steps done are in it)"
        ) from None
    return execute(spark_factory, warehouse, definition, req, lease, report, doc)


def run_delete(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition,
               where: str | None = None, keys: str | None = None, dry_run: bool = False, purge: bool = False,
               report: Progress = quiet) -> DeleteResult | DeletePlan | Purged:
    """``lakehouse delete``: check the request, then its plan (``dry_run``) or the delete, after
    finishing one a crash interrupted; with ``purge``, then the purge of every delete of the
    table not purged yet (with neither ``where`` nor ``keys``: only that)."""
    d = definition
    paths = TablePaths(warehouse, d.name)
    if purge and where is None and keys is None:
        if dry_run:
            raise InputError(f"delete {d.name} --purge: --dry-run shows a delete's plan; give --where or --keys")
        with table_lease(paths, "purge") as lease:
            _finish(spark_factory, warehouse, d, paths, lease, report)
            pending = [e for e in audit.history(warehouse, d.name) if not e.purged]
            if not pending:
                raise InputError(f"delete {d.name} --purge: no delete to purge (every delete of {d.name} is "
                                 "purged already)")
            return _purge(spark_factory, warehouse, d, pending[-1].number, None, report)
    if dry_run and purge:
        raise InputError(f"delete {d.name}: --dry-run shows what the delete would erase; run it without --purge")
    req = request(d, where, keys)  # before any engine starts: a bad request costs nothing
    if dry_run:
        return plan(spark_factory(), d, paths, req, next_number(warehouse, paths))
    with table_lease(paths, "delete") as lease:
        _finish(spark_factory, warehouse, d, paths, lease, report)
        result = execute(spark_factory, warehouse, d, req, lease, report)
        if purge:
            result.purged = _purge(spark_factory, warehouse, d, result.number, req.matcher(d), report).as_dict()
        return result


def purge_due(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition,
              retain_seconds: float, report: Progress = quiet) -> Purged | None:
    """The vacuum job's purge (under the table's lease it holds): the deletes not purged yet that
    are older than the retention (their superseded files went with Delta's VACUUM) have the rest
    of their copies removed, the history cut right after the versions the last of them left
    (time travel to any later moment keeps working); None when none is due."""
    import math

    paths = TablePaths(warehouse, definition.name)
    horizon = dt.datetime.now(UTC) - dt.timedelta(hours=math.ceil(retain_seconds / 3600))  # VACUUM's, rounded up

    listed: dict[str, dict[int, dt.datetime]] = {}  # each part's log listed once

    def finished(e: audit.Erasure) -> dt.datetime:
        """When the delete's last commit landed (a delete finished after a crash: later than it began)."""
        at = e.at
        for part, v in json.loads(e.versions or "{}").items():
            if part not in listed:
                listed[part] = {c.version: c.at for c in delta_log.commits(getattr(paths, part))}
            found = listed[part].get(int(v))
            if found is not None:
                at = max(at, found)
        return at

    due = [e for e in audit.history(warehouse, definition.name) if not e.purged and finished(e) <= horizon]
    if not due:
        return None
    versions = json.loads(due[-1].versions or "{}")
    return _purge(spark_factory, warehouse, definition, due[-1].number, None, report,
                  after={k: int(v) for k, v in versions.items()} if versions else None)


def _purge(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition, number: int,
           match: Callable[[pa.Table], pa.Array] | None, report: Progress,
           after: dict[str, int] | None = None) -> Purged:
    """Purge (``purge.purge``) at erasure ``number``, then mark every delete of the table up to
    it purged in the audit (the cut removed the history all of them left)."""
    import dataclasses

    import pyarrow as pa

    from lakehouse.erasure.purge import purge

    Steps(f"delete {definition.name}", report).at("purge")
    done = purge(spark_factory, warehouse, definition, number,
                 match or (lambda rows: pa.array([False] * rows.num_rows, pa.bool_())), after)
    from lakehouse.ingest.state import is_files_source

    if any(is_files_source(s) for s in done.busy_sources):
        # a producer's insert under way: its finished staging may hold released copies, not purged
        # until it goes (a landing directory's run removes its own batches' staging as it goes)
        return done
    now = dt.datetime.now(UTC)
    for e in audit.history(warehouse, definition.name):
        if not e.purged and e.number <= number:
            audit.record(warehouse, dataclasses.replace(e, purged=True, purged_at=now))
    return done
