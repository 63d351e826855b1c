"""Step 5 of a run, and of recovery: deleting from live the rows the archive holds.

The rows to delete are those with event time below the cutoff whose (day, load) pair the
archive's batch of that day holds: rows loaded after the run read live carry other load ids and
stay, and so do late rows waiting for the next run. Which pairs live still holds, and which of
them the archive holds, is read with delta-rs (no Spark job). Then:

1. every live file all of whose rows are to be deleted (its event-time statistic below the
   cutoff; in each of its row groups one load, a held one of its day, by the Parquet footer) is
   removed by one metadata-only commit through delta-rs, right after the version it read
   (another commit in between: it reads again). Live files are written one load at a time, so
   this is nearly every file: nothing is read or rewritten;
2. rows left in files that also hold other rows (a file spanning the cutoff, a file an upsert
   or a compaction made of several loads) are deleted by one MERGE on Spark, only when there are
   any.

Each step is idempotent and leaves every query exact between them: the split view never reads a
live row below the cutoff.
"""

from __future__ import annotations

import datetime as dt
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log, storage
from lakehouse.archive.plan import cutoff_time, date_literal
from lakehouse.archive.state import current_snapshot
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import first_line
from lakehouse.spark.commit import merge_into, with_retries
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
ATTEMPTS = 5
"""Metadata-only commits tried before the rows are left to the MERGE (a busy live table)."""
STAT_SLACK_US = 1000
"""Delta's timestamp statistics are cut to milliseconds: a file's true maximum is below its
statistic plus this."""


@dataclass
class WholeFiles:
    """The live files whose every row is to be deleted, as of one live version."""

    version: int
    files: list[tuple[str, int, dict[str, str | None] | None]] = field(default_factory=list)
    rows: int = 0
    partial: bool = False
    """Some held rows are in files that also hold rows to keep."""


def held_pairs(definition: TableDefinition, paths: TablePaths, cutoff: int) -> list[tuple[dt.date, str]]:
    """The (day, load) pairs live holds below ``cutoff`` that the archive's batch of the day
    holds (read with delta-rs)."""
    pair = f'"{PARTITION_COLUMN}" AS day, "{LOAD_COLUMN}" AS load'
    waiting = {(r["day"], r["load"]) for r in delta_log.scan(paths.live, (
        f'SELECT DISTINCT {pair} FROM t WHERE "{PARTITION_COLUMN}" <= DATE \'{cutoff_time(cutoff).date().isoformat()}\' '
        f'AND "{definition.event_time}" < to_timestamp_seconds({int(cutoff)})')).to_pylist()}
    if not waiting:
        return []
    days = ", ".join(f"DATE '{day.isoformat()}'" for day in sorted({day for day, _ in waiting}))
    return sorted((r["day"], r["load"]) for r in delta_log.scan(paths.archive, (
        f'SELECT DISTINCT {pair} FROM t WHERE "{PARTITION_COLUMN}" IN ({days})')).to_pylist()
        if (r["day"], r["load"]) in waiting)


def whole_files(definition: TableDefinition, paths: TablePaths, pairs: list[tuple[dt.date, str]],
                cutoff: int) -> WholeFiles:
    """Which live files hold only rows of ``pairs`` below ``cutoff``: their statistics and
    footers say so (a file they cannot vouch for is left to the MERGE)."""
    version = delta_log.version(paths.live)
    assert version is not None
    out = WholeFiles(version)
    files = delta_log.add_actions(paths.live, version).to_pylist()
    held: dict[str, set[str]] = {}
    for on, load in pairs:
        held.setdefault(on.isoformat(), set()).add(load)
    limit = cutoff_time(cutoff) - dt.timedelta(microseconds=STAT_SLACK_US)
    candidates = []
    for f in files:
        day = f.get(f"partition.{PARTITION_COLUMN}")
        if day is None or str(day) not in held:
            continue
        top = f.get(f"max.{definition.event_time}")
        if top is None or top >= limit:  # rows at or after the cutoff may be in it (or no statistic)
            out.partial = True
            continue
        candidates.append(f)

    def loads(f: dict[str, Any]) -> set[str] | None:
        """The loads of one candidate file (its footer)."""
        return _loads_of(delta_log.file_uri(paths.live, f["path"]))

    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(loads, candidates))
    for f, in_file in zip(candidates, found):
        value = str(f[f"partition.{PARTITION_COLUMN}"])
        if in_file is not None and in_file <= held[value]:
            out.files.append((f["path"], int(f["size_bytes"]), {PARTITION_COLUMN: value}))
            out.rows += int(f.get("num_records") or 0)
        else:
            out.partial = True
    return out


def _loads_of(uri: str) -> set[str] | None:
    """The loads of a Parquet file, from its footer's statistics: one value per row group (None
    when a row group has no statistic, or several loads, or the footer could not be read: the
    file is then left to the MERGE)."""
    import pyarrow.parquet as pq

    try:
        fs, where = storage.filesystem(uri)
        with fs.open_input_file(where) as f:
            meta = pq.ParquetFile(f).metadata
    except Exception as e:  # noqa: BLE001 - the MERGE deletes its rows instead
        log.warning("purge: the footer of %s was not read (%s); its rows go by the MERGE", uri, first_line(e))
        return None
    col = meta.schema.names.index(LOAD_COLUMN) if LOAD_COLUMN in meta.schema.names else None
    if col is None:
        return None
    out = set()
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(col).statistics
        if st is None or not st.has_min_max or st.min != st.max or st.null_count:
            return None
        out.add(st.min.decode() if isinstance(st.min, bytes) else str(st.min))
    return out


def purge(spark: SparkSession, definition: TableDefinition, paths: TablePaths, cutoff: int | None = None) -> int:
    """Delete from live the rows the archive holds below ``cutoff`` (default: the committed
    cutoff), as the module describes; idempotent; rows deleted."""
    d = definition
    if cutoff is None:
        cutoff = current_snapshot(paths.archive).cutoff
        if cutoff is None:
            return 0
    pairs = held_pairs(d, paths, cutoff)
    if not pairs:
        return 0
    deleted = 0
    partial = True
    for attempt in range(ATTEMPTS):
        whole = whole_files(d, paths, pairs, cutoff)
        partial = whole.partial
        if not whole.files:
            break
        try:
            delta_log.remove_files(paths.live, whole.version, whole.files)
            deleted += whole.rows
            break
        except delta_log.StaleVersion:  # another writer committed to live: read it again
            log.info("purge of %s: live changed while its files were read (attempt %d); again", d.name, attempt + 1)
            partial = True
    if partial and (pairs := held_pairs(d, paths, cutoff)):
        deleted += _merge_delete(spark, d, paths, pairs, cutoff)
    return deleted


def _merge_delete(spark: SparkSession, d: TableDefinition, paths: TablePaths, pairs: list[tuple[dt.date, str]],
                  cutoff: int) -> int:
    """One MERGE deleting the rows of ``pairs`` below ``cutoff`` from live; rows deleted."""
    from pyspark.sql import functions as F

    source = spark.createDataFrame(pairs, f"`{PARTITION_COLUMN}` DATE, `{LOAD_COLUMN}` STRING")
    days = [day for day, _ in pairs]
    cond = (  # the literal day range lets Delta prune live's files; the join does the rest
        f"t.`{PARTITION_COLUMN}` >= {date_literal(days[0])} AND t.`{PARTITION_COLUMN}` <= {date_literal(days[-1])} "
        f"AND t.`{PARTITION_COLUMN}` = s.`{PARTITION_COLUMN}` AND t.`{LOAD_COLUMN}` = s.`{LOAD_COLUMN}` "
        f"AND t.`{d.event_time}` < timestamp_seconds({int(cutoff)})"
    )

    def delete() -> int:
        """The MERGE; the rows it deleted."""
        return merge_into(spark, paths.live, F.broadcast(source), cond, "WHEN MATCHED THEN DELETE").get(
            "num_deleted_rows", 0)

    deleted, _ = with_retries(f"purge of archived rows from {d.name}/live", delete)
    return int(deleted)
