"""Purging a delete's bytes (``lakehouse delete --purge``): after it, no file under the warehouse
holds a row the delete erased (rejected records it could not judge, reported as such, stay in
rejects; a ``--where`` predicate stays in the audit as given).

Where copies of an erased row can still be after the delete, and how each goes (under the
table's lease, taken by the caller; the stream's lease while live and rejects are cut, so no
release commits meanwhile):

- **Producers' staging**: a segment's rows folder also holds its released rows and the raw text
  of its rejected ones: every segment's folder is written anew with its rows still to release
  (``stream.erase.purge``); finished ingest and load staging, and inbox files interrupted
  inserts left, are removed (``ingest.cleanup``).
- **Live, archive, rejects** (Delta): the data files the delete superseded, and the log before it
  (statistics hold minimum and maximum values; a DELETE's commit holds its predicate): each
  table's history is cut at a marker commit (``delta_log.cut``: its checkpoint, then the log
  before it removed) and every data file no version from the marker on references is removed.
  Time travel to a moment before the purge is refused in one line from then on (``query.asof``).
- **Vector files**: the days' superseded vector files (already removed by the archive's step;
  any left by a crash go here).
- **Quality**: the samples of the table's results on record are emptied (outcomes and counts
  stay), its Great Expectations validation results and their Data Docs pages are removed (the
  Docs' index is built again); the results table's history is cut as above.

The audit's row of the delete is then marked purged. Each step can run again: a purge killed at
any step (crash points ``purge_after_staging``, ``purge_after_<part>_cut``) is finished by
``delete TABLE --purge``, which purges every delete not marked purged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, delta_log
from lakehouse.archive.state import PURGE_APP_ID
from lakehouse.definitions import TableDefinition
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


@dataclass
class Purged:
    """What a purge removed."""

    number: int
    parts: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per Delta table: the first readable version now, log files and data files (and bytes) removed."""
    staged_folders: int = 0
    staging_folders: int = 0
    inbox_files: int = 0
    vector_files: int = 0
    quality_samples: int = 0
    quality_files: int = 0
    busy_sources: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The purge as the CLI's JSON document."""
        return {"number": self.number, "parts": self.parts, "staged_folders": self.staged_folders,
                "staging_folders": self.staging_folders, "inbox_files": self.inbox_files,
                "vector_files": self.vector_files, "quality_samples": self.quality_samples,
                "quality_files": self.quality_files, "busy_sources": self.busy_sources}


def cut_table(path: str, number: int, after: int | None = None) -> dict[str, int]:
    """Cut a Delta table's history at a marker of erasure ``number`` and remove the data files no
    version from the marker on reads; with ``after`` (a version), cut right after it instead and
    leave the data files to Delta's VACUUM (a purge after the retention: it removed them)."""
    if after is not None:
        c = delta_log.cut_at(path, after, (PURGE_APP_ID, int(number)))
        return {"first_version": c.version, "log_files": c.removed, "data_files": 0, "bytes": 0}
    c, files, size = delta_log.cut_and_drop(path, (PURGE_APP_ID, int(number)))
    return {"first_version": c.version, "log_files": c.removed, "data_files": files, "bytes": size}


def purge(spark_factory: Callable[[], SparkSession], warehouse: str, definition: TableDefinition, number: int,
          match: Callable[[pa.Table], pa.Array], after: dict[str, int] | None = None) -> Purged:
    """Purge erasure ``number`` of ``definition``'s table (``match``: its rows, for the staged
    ones still to release). Run under the table's lease. ``after``: the versions the delete left
    per part (a purge after the retention, whose VACUUM removed the data files): the history is
    cut right after them, so time travel to any later moment keeps working."""
    from lakehouse.archive import recover
    from lakehouse.ingest.cleanup import finished_staging
    from lakehouse.quality import gx, results
    from lakehouse.stream.engine import Stream
    from lakehouse.stream.erase import purge as purge_staged
    from lakehouse.stream.store import StreamStore

    d = definition
    paths = TablePaths(warehouse, d.name)
    out = Purged(number)
    if delta_log.exists(paths.archive):  # the books first: the cut removes the commits a repair reads;
        out.vector_files = recover.recover(spark_factory(), d, paths)[1]  # superseded vector files with it
    out.staged_folders = purge_staged(Stream(spark_factory, d, paths), match, number)
    found = finished_staging(paths, execute=True, inbox=True)
    out.staging_folders, out.inbox_files, out.busy_sources = len(found.staging), len(found.inbox), found.busy_sources
    crashpoints.reached("purge_after_staging")
    with StreamStore(paths).locked(f"purge of erasure {number} on {d.name}"):
        for part in ("live", "archive", "rejects"):
            path = getattr(paths, part)
            if delta_log.exists(path):
                out.parts[part] = cut_table(path, number, None if after is None else after.get(part))
                crashpoints.reached(f"purge_after_{part}_cut")
    out.quality_samples = results.clear_samples(warehouse, d.name)
    out.quality_files = gx.forget_validations(warehouse, d.name)
    if delta_log.exists(results.results_path(warehouse)):
        out.parts["quality results"] = cut_table(results.results_path(warehouse), number)
    return out
