"""The archive's books on storage: figures computed on Spark, the ledger table, its repair.

``<warehouse>/<table>/_ledger`` is a small Delta table (written with delta-rs, read by any
engine), one row per archiving run (or erasure) and day (``ledger.LedgerRow``). Each write carries
a SetTransaction (``lakehouse.ledger``, the run's cutoff; an erasure's also ``lakehouse.ledger.
erasure``, its number), so the ledger knows the last cutoff and erasure it holds, and a replayed
write is skipped.

Order of writes: the archive commit (data, cutoff and the figures in its ``userMetadata``), then
the ledger rows. A crash between the two leaves the ledger behind the archive's cutoff; the next
run's recovery (``repair``) rebuilds the missing rows from the archive commits' metadata, and
``verify`` reads them from there meanwhile. A ledger row of a cutoff the archive has not
committed is never believed (``ledger.believed``). Days archived before the table had a ledger
(or whose commit metadata is gone with old log files) get a baseline row from the data.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log
from lakehouse.archive.ledger import (
    LEDGER_APP_ID,
    LEDGER_ERASURE_APP_ID,
    CommitFigures,
    Figures,
    LedgerRow,
    baseline_row,
    hash_sum_sql,
    parse_commit_info,
    row_hash_sql,
    stored_columns,
)
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

HISTORY_LIMIT = 1000
"""How many of the archive's latest commits repair and verify look through for figures."""


def schema() -> "pa.Schema":
    """The Arrow schema of the ledger table (one column per ``LedgerRow`` field)."""
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    return pa.schema([
        ("cutoff", i64), ("day", pa.date32()), ("rows_live", i64), ("rows_kept", i64), ("rows_replaced", i64),
        ("rows_out", i64), ("checksum_live", s), ("checksum_kept", s), ("checksum_replaced", s),
        ("checksum_in", s), ("checksum_out", s), ("archive_version", i64), ("previous_cutoff", i64),
        ("kind", s), ("run_id", s), ("spec", s), ("columns", s), ("recorded", pa.timestamp("us", tz="UTC")),
        ("rows_deleted", i64), ("checksum_deleted", s), ("erasure", i64),
    ])


# -- figures on Spark ------------------------------------------------------------------------------


def hash_column(columns: list[tuple[str, str]]) -> "Any":
    """A Spark column computing each row's hash over ``(column, type name)`` pairs."""
    from pyspark.sql import functions as F

    return F.expr(row_hash_sql(columns))


def figures_by(df: "DataFrame", by: list[str], columns: list[tuple[str, str]] | None = None,
               hashed: str | None = None) -> dict[tuple, Figures]:
    """Figures per group of ``by`` over the row hash of ``columns`` (or the already hashed
    column ``hashed``)."""
    from pyspark.sql import functions as F

    h = F.col(hashed) if hashed else hash_column(columns or [])
    rows = (df.select(*by, h.alias("_lh_hash")).groupBy(*by)
            .agg(F.count(F.lit(1)).alias("n"), F.expr(hash_sum_sql("_lh_hash")).alias("s")).collect())
    return {tuple(r[c] for c in by): Figures.of(r["n"], r["s"]) for r in rows}


def column_types(d: TableDefinition, names: list[str]) -> list[tuple[str, str]]:
    """``(column, type name)`` of recorded columns, from the table's definition."""
    types = dict(stored_columns(d))
    missing = [c for c in names if c not in types]
    if missing:
        raise LakehouseError(f"ledger of {d.name}: column {missing[0]} is not in the table's definition")
    return [(c, types[c]) for c in names]


def archive_figures(spark: "SparkSession", d: TableDefinition, paths: TablePaths, version: int,
                    days: list[dt.date], columns: list[str]) -> dict[dt.date, Figures]:
    """Figures per day of the archive at ``version`` over ``columns`` (some days, or all: [])."""
    from lakehouse.archive.plan import days_sql

    df = spark.read.format("delta").option("versionAsOf", version).load(paths.archive)
    if days:
        df = df.where(days_sql(PARTITION_COLUMN, days))
    absent = [c for c in columns if c not in df.columns]
    if absent:
        raise LakehouseError(f"ledger of {d.name}: column {absent[0]} is not in archive version {version}")
    return {k[0]: f for k, f in figures_by(df, [PARTITION_COLUMN], column_types(d, columns)).items()}


# -- the ledger table --------------------------------------------------------------------------------


def ledger_cutoff(paths: TablePaths) -> int | None:
    """The last cutoff the ledger holds (None: no ledger yet)."""
    return delta_log.txn_version(paths.ledger, LEDGER_APP_ID)


def ledger_place(paths: TablePaths) -> tuple[int | None, int]:
    """The last cutoff and the last erasure the ledger holds (one read of its log)."""
    snap = delta_log.snapshot(paths.ledger, LEDGER_APP_ID, more=(LEDGER_ERASURE_APP_ID,))
    if snap is None:
        return None, 0
    return snap.txn, snap.more.get(LEDGER_ERASURE_APP_ID) or 0


def read_rows(paths: TablePaths) -> list[LedgerRow]:
    """Every row of the table's ledger (none before the first ledger write)."""
    if not delta_log.exists(paths.ledger):
        return []
    return [LedgerRow.from_record(r) for r in delta_log.scan(paths.ledger).to_pylist()]


def append(paths: TablePaths, rows: list[LedgerRow], cutoff: int, erasure: int = 0) -> bool:
    """Append the rows of ``cutoff`` (none: only the marker) unless the ledger holds that cutoff
    already; an erasure's rows (``erasure``: its number; the cutoff is the committed one) unless
    it holds that erasure. True when written. Run under the table's lease (one writer)."""
    import pyarrow as pa

    have, have_erasure = ledger_place(paths)
    if (have is not None and have >= cutoff) and erasure <= have_erasure:
        return False
    now = dt.datetime.now(dt.timezone.utc)
    records = [{**r.record(), "recorded": r.recorded or now} for r in rows]
    table = pa.Table.from_pylist(records, schema=schema())
    txns = [(LEDGER_APP_ID, max(int(cutoff), have if have is not None else int(cutoff)))]
    if erasure > have_erasure:
        txns.append((LEDGER_ERASURE_APP_ID, int(erasure)))
    # (merged: a ledger made before erasures gains their columns, null in its older rows)
    return delta_log.append_records(paths.ledger, table, attempts=5, txn=txns, merge_schema=True)


def committed_figures(paths: TablePaths, after: int | None, upto: int | None, after_erasure: int | None = None,
                      limit: int = HISTORY_LIMIT) -> list[tuple[int, CommitFigures]]:
    """(archive version, figures) of the archive commits whose cutoff is above ``after`` and at
    most ``upto``, and of erasures above ``after_erasure`` (None: none) at cutoffs up to
    ``upto``; oldest first, from the commits' metadata (delta-rs; the latest ``limit``)."""
    if upto is None or not delta_log.exists(paths.archive):
        return []
    if after is not None and after >= upto and after_erasure is None:
        return []
    out = []
    for c in delta_log.history(paths.archive, limit):
        f = parse_commit_info(c.get("userMetadata"))
        if f is None or f.cutoff > upto:
            continue
        if after is not None and f.cutoff < after:
            break  # history is newest first: the rest is older still (cutoffs never go back)
        if after is None or f.cutoff > after or (f.erasure and after_erasure is not None and f.erasure > after_erasure):
            out.append((int(c["version"]), f))
    return sorted(out, key=lambda vf: vf[0])


def pending_rows(paths: TablePaths, after: int | None, upto: int | None,
                 after_erasure: int | None = None) -> tuple[list[LedgerRow], int | None, int]:
    """Ledger rows of committed cutoffs (and erasures above ``after_erasure``) the ledger does
    not hold yet, from the commits' metadata; the latest cutoff they cover (None: none) and the
    latest erasure (0: none)."""
    found = committed_figures(paths, after, upto, after_erasure)
    rows = [r for v, f in found for r in f.rows(v, kind="recovered")]
    return rows, (found[-1][1].cutoff if found else None), max((f.erasure for _, f in found), default=0)


def repair(spark: "SparkSession", d: TableDefinition, paths: TablePaths, committed: int | None) -> int:
    """Bring the ledger up to the archive's committed cutoff: rows of commits a crash kept out
    of it (from the commits' metadata), and a baseline for archived days with no row at all.
    Idempotent; returns the rows written."""
    if committed is None:
        return 0
    from lakehouse.archive.state import read_snapshot
    from lakehouse.layout import layout

    snap = read_snapshot(paths.archive)
    assert snap is not None
    have, have_erasure = ledger_place(paths)
    if have is not None and have >= committed and have_erasure >= snap.erasures:
        return 0
    rows, _, erasure = pending_rows(paths, have, committed, have_erasure)
    covered = {r.day for r in read_rows(paths)} | {r.day for r in rows}
    archived = [day for day, files in layout(paths.archive, snap.version).by_day().items()
                if sum(f.rows for f in files)]
    missing = sorted(set(archived) - covered)
    if missing:
        cols = [c for c, _ in stored_columns(d)]
        figs = archive_figures(spark, d, paths, snap.version, missing, cols)
        rows += [baseline_row(committed, day, figs.get(day, Figures()), snap.version, cols) for day in missing]
        log.warning("ledger of %s: %d archived day(s) had no ledger row; recorded what they hold now as a baseline",
                    d.name, len(missing))
    append(paths, rows, committed, erasure)
    return len(rows)
