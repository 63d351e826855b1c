"""Step 1 of an archiving run on Spark: survey live and the archive at pinned versions and build
the run's ArchivePlan (the new cutoff, the days to rewrite, their rows and checksums)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log
from lakehouse.archive import vectors
from lakehouse.archive.ledger import Figures, hash_sum_sql, row_hash_sql, stored_columns
from lakehouse.archive.order import cutoff_column
from lakehouse.archive.plan import ArchivePlan, cutoff_time, new_cutoff
from lakehouse.archive.reader import current_encoding
from lakehouse.archive.stage import read_at
from lakehouse.archive.state import current_snapshot, day_rows
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.live import check_loadable
from lakehouse.sql import duck_ident
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stale_days(
    definition: TableDefinition, paths: TablePaths, committed: vectors.Run | None, archived: set[dt.date],
    listed: list[vectors.VectorFile] | None = None,
) -> list[dt.date]:
    """Archived days whose vector files were written under other settings than today's
    (sort columns or the vector set), or are missing: they need re-sorting and re-encoding.
    ``listed``: the vector folder's files, when the caller listed them already."""
    if committed is None:
        return []
    return sorted(vectors.stale_days(paths.vectors, current_encoding(definition), committed, archived,
                                     listed=listed))


def _run_at(paths: TablePaths, cutoff: int | None, version: int) -> vectors.Run | None:
    """The committed run (cutoff, erasures) of the archive at ``version``."""
    from lakehouse.archive.state import read_snapshot

    snap = read_snapshot(paths.archive, version)
    return vectors.run_of(cutoff, snap.erasures if snap is not None else 0)


def _watermark(definition: TableDefinition, paths: TablePaths, now: dt.datetime) -> dt.datetime | None:
    """The table's stream watermark (``archive.clock: bound``): never seal a day an attached
    producer may still write into."""
    from lakehouse.stream.status import describe
    from lakehouse.stream.store import StreamStore
    from lakehouse.times import micros

    return describe(StreamStore(paths), definition, paths, micros(now))["watermark"]


def survey(
    spark: SparkSession | None, definition: TableDefinition, paths: TablePaths, now: dt.datetime,
    ledger: bool = True, listed: list[vectors.VectorFile] | None = None,
) -> ArchivePlan:
    """Plan a run at ``now``: C' = now - delay (or below the watermark), the live and archive
    versions read, the days of live rows with event time < C' (rows, and with ``ledger`` their
    checksums, per day) and the archived days whose vector files need re-encoding. Without
    ``spark`` (a dry run) the rows are counted by delta-rs and there are no checksums.
    ``listed``: the vector folder's files as the run's recovery left them (else listed here)."""
    base = cutoff_plan(definition, paths, now)
    if not base.advances or base.no_watermark:
        return base
    return _counted(spark, definition, paths, base, ledger, listed)


def cutoff_plan(definition: TableDefinition, paths: TablePaths, now: dt.datetime) -> ArchivePlan:
    """The plan of a run at ``now`` without its days: C' (or none, without a watermark), the
    cutoff before it and the versions read; from the logs alone (no data read)."""
    d = definition
    check_loadable(d, paths)
    archive = current_snapshot(paths.archive)
    live = current_snapshot(paths.live)
    watermark = None
    if d.archive.clock == "bound":
        watermark = _watermark(d, paths, now)
        if watermark is None:
            previous = archive.cutoff
            return ArchivePlan(d.name, now, previous, previous if previous is not None else 0, live.version,
                               archive.version, clock="bound", no_watermark=True,
                               notes=["the table's watermark is undefined (no row released by a producer yet, "
                                      "or a producer holding it has no bound): nothing is sealed"])
    clock = now
    if watermark is not None:  # rows may still come as far below it as the allowed lateness
        lateness = d.stream.allowed_lateness
        clock = min(now, watermark - dt.timedelta(milliseconds=lateness.millis if lateness else 0))
    cutoff = new_cutoff(clock, d.archive.delay)
    if cutoff < 0:
        raise LakehouseError(
            f"archive {d.name}: the cutoff {cutoff} ({cutoff_time(cutoff).isoformat()}) is before "
            "1970-01-01; Delta records the cutoff as a SetTransaction version, which cannot be "
            "negative; pass a --now after 1970-01-01 plus the delay (rows of any earlier day are "
            "archived by such a run)"
        )
    previous = archive.cutoff
    return ArchivePlan(d.name, now, previous, cutoff, live.version, archive.version, clock=d.archive.clock,
                       watermark=watermark)


def _counted(spark: SparkSession | None, d: TableDefinition, paths: TablePaths, base: ArchivePlan,
             ledger: bool, listed: list[vectors.VectorFile] | None = None) -> ArchivePlan:
    """``base`` (an advancing cutoff plan) with its days: the live rows below C' per day, with
    Spark (and the books' checksums) or without (delta-rs)."""
    now, previous, cutoff, watermark = base.now, base.previous_cutoff, base.cutoff, base.watermark
    live_version, archive_version = base.live_version, base.archive_version
    assert live_version is not None and archive_version is not None
    if spark is None:
        rows = _below_without_spark(d, paths, live_version, cutoff, previous)
        ledger = False
    else:
        rows = _below(spark, d, paths, live_version, cutoff, previous, ledger)
    new_rows = {r[PARTITION_COLUMN]: int(r["n"]) for r in rows}
    new_sums = {r[PARTITION_COLUMN]: Figures.of(r["n"], r["h"]).checksum for r in rows} if ledger else {}
    archived = day_rows(paths.archive, archive_version)
    stale = [
        day
        for day in stale_days(d, paths, _run_at(paths, previous, archive_version),
                              {k for k, v in archived.items() if v}, listed)
        if day not in new_rows and archived.get(day)
    ]
    days = tuple(sorted({*new_rows, *stale}))
    archive_rows = {day: archived[day] for day in days if archived.get(day)}
    return ArchivePlan(
        d.name,
        now,
        previous,
        cutoff,
        live_version,
        archive_version,
        days,
        rows=sum(new_rows.values()),
        late_rows=sum(int(r["late"] or 0) for r in rows),
        archive_rows_in_days=sum(archive_rows.values()),
        new_rows=new_rows,
        new_sums=new_sums,
        archive_rows=archive_rows,
        reencode_days=tuple(stale),
        clock=d.archive.clock,
        watermark=watermark,
    )


def _below(spark: SparkSession, d: TableDefinition, paths: TablePaths, version: int, cutoff: int,
           previous: int | None, ledger: bool) -> list[Any]:
    """Per day of live (at ``version``) below ``cutoff``: rows ``n``, ``late`` ones (below
    ``previous``) and with ``ledger`` their hash sum ``h``, with Spark (the books' hash)."""
    from pyspark.sql import functions as F

    et = F.col(d.event_time)
    late = F.lit(False) if previous is None else et < cutoff_column(previous)
    aggs = [F.count(F.lit(1)).alias("n"), F.sum(F.when(late, 1).otherwise(0)).alias("late")]
    if ledger:  # the live side of the books, in the same pass
        aggs.append(F.expr(hash_sum_sql(row_hash_sql(stored_columns(d)))).alias("h"))
    return list(
        read_at(spark, paths.live, version)
        .where(F.col(PARTITION_COLUMN) <= F.lit(cutoff_time(cutoff).date()))
        .where(et < cutoff_column(cutoff))
        .groupBy(PARTITION_COLUMN)
        .agg(*aggs)
        .collect()
    )


def _below_without_spark(d: TableDefinition, paths: TablePaths, version: int, cutoff: int,
                         previous: int | None) -> list[dict[str, Any]]:
    """``_below`` without the books, read by delta-rs (no JVM: a plan of ``--dry-run``)."""
    et = f"CAST({duck_ident(d.event_time)} AS BIGINT)"  # microseconds since the epoch
    late = "0" if previous is None else f"CASE WHEN {et} < {int(previous) * 1_000_000} THEN 1 ELSE 0 END"
    day = duck_ident(PARTITION_COLUMN)
    sql = (f"SELECT {day} AS d, count(*) AS n, sum({late}) AS late FROM t "
           f"WHERE {day} <= DATE '{cutoff_time(cutoff).date().isoformat()}' AND {et} < {int(cutoff) * 1_000_000} "
           f"GROUP BY {day}")
    out = delta_log.scan(paths.live, sql, version).to_pylist()
    return [{PARTITION_COLUMN: r["d"], "n": r["n"], "late": r["late"]} for r in out]


def rows_below(live_path: str, event_time: str, cutoff: int, loads: list[str] | None = None) -> int:
    """Live rows with event time < cutoff (read with delta-rs; partition-pruned): rows waiting
    for an archive run; ``loads``: only the rows these inserts wrote (their load ids, whatever
    release took them into live)."""
    from lakehouse.definitions.names import LOAD_COLUMN
    from lakehouse.sql import literal
    from lakehouse.stream.engine import RELEASE_MARK

    day = cutoff_time(cutoff).date()
    sql = (f'SELECT count(*) AS n FROM t WHERE "{PARTITION_COLUMN}" <= DATE \'{day.isoformat()}\' '
           f'AND "{event_time}" < to_timestamp_seconds({int(cutoff)})')
    if loads:
        sql += " AND (" + " OR ".join(f'starts_with("{LOAD_COLUMN}", {literal(load + RELEASE_MARK)})'
                                      for load in loads) + ")"
    return int(delta_log.scan(live_path, sql).column("n")[0].as_py())
