"""What the lateness profile reads (no Spark): the table's rows with their load times, the
archive's cutoff history and the rows rejected late.

The rows: every archived row and every live row (a live row below the cutoff whose (day, load)
the archive already holds is an archived row not purged yet: the archiving run's purge would
delete it, so it is skipped here too), with event time in the window, each joined to the
release of the loads ledger (``lakehouse.stream.ledger``) that took it into live: the entry of
its load id whose event-time range holds it. DuckDB reads live first, then the archive (the
snapshot order of queries), and groups the rows by (source, load time, event second, in live).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.lateness.core import Arrivals, Profile
from lakehouse.sql import duck_ident, literal_body
from lakehouse.warehouse import TablePaths

UTC = dt.timezone.utc


def arrivals(definition: TableDefinition, paths: TablePaths, since_us: int | None = None) -> Arrivals:
    """The table's rows with event time >= ``since_us`` (all when None), grouped."""
    from lakehouse.archive.plan import cutoff_time
    from lakehouse.archive.state import read_snapshot
    from lakehouse.query.duckdb import connect
    from lakehouse.stream import ledger

    live = read_snapshot(paths.live)  # live first, then the archive: each row is seen once
    archive = read_snapshot(paths.archive)
    assert live is not None and archive is not None
    committed = ledger.last_committed(paths)  # read after live's snapshot: covers its releases
    loads = ledger.read(paths, committed)
    et, load, day = duck_ident(definition.event_time), duck_ident(LOAD_COLUMN), duck_ident(PARTITION_COLUMN)

    def window(alias: str) -> str:
        if since_us is None:
            return "TRUE"
        since = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=since_us)
        return f"{alias}{day} >= DATE '{since.date().isoformat()}' AND epoch_us({alias}{et}) >= {int(since_us)}"

    def scan(path: str, version: int) -> str:
        return f"delta_scan('{literal_body(path)}', version => {int(version)})"

    held = "FALSE"
    with_held = ""
    if archive.cutoff is not None:  # archived rows a crashed or running archiving run has not purged yet
        cut_day = cutoff_time(archive.cutoff).date().isoformat()
        with_held = (f"held AS (SELECT DISTINCT {day} AS day, {load} AS load FROM {scan(paths.archive, archive.version)} "
                     f"WHERE {day} <= DATE '{cut_day}'),")
        held = (f"epoch_us(l.{et}) < {int(archive.cutoff) * 1_000_000} AND EXISTS "
                f"(SELECT 1 FROM held h WHERE h.day = l.{day} AND h.load = l.{load})")
    sql = f"""
        WITH {with_held}
        rows_ AS (
            SELECT epoch_us({et}) AS t, {load} AS load, FALSE AS in_live
            FROM {scan(paths.archive, archive.version)} WHERE {window('')}
            UNION ALL
            SELECT epoch_us(l.{et}) AS t, l.{load} AS load, TRUE AS in_live
            FROM {scan(paths.live, live.version)} l WHERE {window('l.')}
                AND NOT ({held})
        )
        SELECT g.producer AS source, g.loaded_at AS loaded_us,
               CAST(floor(r.t / 1000000.0) AS BIGINT) AS event_s, r.in_live, count(*) AS n
        FROM rows_ r LEFT JOIN loads g
          ON r.load = g.load AND (g.after IS NULL OR r.t > g.after) AND r.t <= g.upto
        GROUP BY ALL
    """
    con = connect()
    try:
        con.register("loads", loads)
        groups = con.execute(sql).fetch_arrow_table()
    finally:
        con.close()
    import numpy as np
    import pyarrow.compute as pc

    known = groups.filter(pc.is_valid(groups["loaded_us"]))
    unknown = int(pc.sum(groups.filter(pc.is_null(groups["loaded_us"]))["n"]).as_py() or 0)

    def col(name: str, kind: Any) -> Any:
        return known[name].to_numpy(zero_copy_only=False).astype(kind)

    return Arrivals(col("source", object), col("loaded_us", np.int64), col("event_s", np.int64),
                    col("in_live", bool), col("n", np.int64), unknown)


def cutoff_history(paths: TablePaths) -> tuple[list[int], list[int]]:
    """The archive commits that moved the cutoff: (commit times in micros, cutoffs)."""
    from lakehouse.archive.state import cutoff_history as history

    h = history(paths.archive)
    return [c.at_ms * 1000 for c in h], [c.cutoff for c in h]


def rejected_late(paths: TablePaths, since_us: int | None = None) -> dict[str, int]:
    """Rows rejected ``late_row`` (behind their producer's bound) per producer, rejected at or
    after ``since_us`` (read with delta-rs: counted, not fetched)."""
    from lakehouse import delta_log, rejects
    from lakehouse.errors import TableNotFound

    if not delta_log.exists(paths.rejects):
        raise TableNotFound(f"table {paths.name!r} has no rejects table; run `lakehouse migrate`")
    if "producer" not in delta_log.column_names(paths.rejects):
        return {}  # a rejects table older than streams: no row was rejected late
    when = "" if since_us is None else f" AND at >= to_timestamp_micros({int(since_us)})"
    t = delta_log.scan(paths.rejects, "SELECT coalesce(producer, source) AS producer, count(*) AS n FROM t "
                            f"WHERE reason = '{rejects.LATE_ROW}'{when} GROUP BY 1")
    return {str(r["producer"]): int(r["n"]) for r in t.to_pylist()}


def profile(definition: TableDefinition, paths: TablePaths, fraction: float, days: int | None = None,
            now: dt.datetime | None = None) -> Profile:
    """The lateness profile of one table (no Spark)."""
    from lakehouse import delta_log
    from lakehouse.errors import TableNotFound
    from lakehouse.lateness.core import profile as build
    from lakehouse.times import micros

    if not (delta_log.exists(paths.live) and delta_log.exists(paths.archive)):
        raise TableNotFound(f"table {definition.name!r} is not created in the warehouse yet; run `lakehouse migrate`")
    now_us = micros(now or dt.datetime.now(UTC))
    since_us = None if days is None else now_us - int(days) * 86_400 * 1_000_000
    rows = arrivals(definition, paths, since_us)
    commits_us, cutoffs = cutoff_history(paths)
    return build(definition.name, rows, commits_us, cutoffs, rejected_late(paths, since_us),
                 definition.archive.delay.millis, fraction, now_us, since_us)
