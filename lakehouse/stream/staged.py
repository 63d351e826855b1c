"""The staged rows of an insert, as the stream reads them: their event times, and their rejects.

An insert's rows are parsed by the one write path (``lakehouse.ingest.batch``) into
``<staging>/rows`` (Parquet with the staged columns of ``lakehouse.staging``: file index,
line, kind, raw record, reason). When the stream registers the insert, the insert's rejects are
described by a ``DueRejects`` record (``rejects_spec`` builds its data); ``commit_rejects`` commits
them, from whichever process finishes the insert, in one commit carrying the SetTransaction
(origin, number) so that committing them twice is a no-op. Nothing here starts Spark: the staged
rows are read with Arrow and the rejects committed through delta-rs.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import numpy as np

from lakehouse import delta_log, rejects, storage
from lakehouse.definitions import TableDefinition
from lakehouse.staging import (
    FILE_COLUMN,
    GOOD,
    KIND_COLUMN,
    LINE_COLUMN,
    RAW_COLUMN,
    REASON_COLUMN,
    REJECT,
)
from lakehouse.storage import join
from lakehouse.stream.entries import DueRejects
from lakehouse.times import from_micros, micros
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa

UTC = dt.timezone.utc


def rows_folder(staging: str) -> str:
    """The folder of an insert's staging that holds its parsed rows (Parquet)."""
    return join(staging, "rows")


def segment_rows(data: dict[str, Any]) -> str:
    """Where a segment's rows are: its staging's rows folder, or the one an erasure rewrote them
    into (``data["rows"]``)."""
    return str(data.get("rows") or rows_folder(data["path"]))


def read_times(definition: TableDefinition, staging: str, failed: list[int], rows: str | None = None) -> dict[str, np.ndarray]:
    """Event times (micros, key ``t``) and file indexes (``f``) of the good rows staged in
    ``staging`` (its rows folder, or ``rows``), files ``failed`` excluded (read with Arrow, no
    Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    et = definition.event_time
    folder = rows or rows_folder(staging)
    if not storage.exists(folder):
        return {"t": np.zeros(0, np.int64), "f": np.zeros(0, np.int64)}
    fs, where = storage.filesystem(folder)
    t = ds.dataset(where, filesystem=fs, format="parquet").to_table(columns=[et, FILE_COLUMN, KIND_COLUMN],
                                                      filter=ds.field(KIND_COLUMN) == GOOD)
    if failed:
        t = t.filter(pc.invert(pc.is_in(t[FILE_COLUMN], value_set=pa.array(failed, t[FILE_COLUMN].type))))
    times = pc.cast(pc.cast(t[et], pa.timestamp("us", tz="UTC")), pa.int64())
    return {"t": times.to_numpy(zero_copy_only=False).astype(np.int64),
            "f": t[FILE_COLUMN].to_numpy(zero_copy_only=False).astype(np.int64)}


def read_rows(definition: TableDefinition, staging: str, failed: list[int], late_below: int | None,
              after: int | None, upto: int | None, rows: str | None = None) -> pa.Table:
    """The good rows staged in ``staging`` (its rows folder, or ``rows``; files ``failed``
    excluded) with event times in (``after``, ``upto``] (None: no upper end) and not below
    ``late_below``: the table's columns and the file and line order columns (read with Arrow,
    no Spark)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    et = definition.event_time
    fs, where = storage.filesystem(rows or rows_folder(staging))
    data = ds.dataset(where, filesystem=fs, format="parquet")
    us = data.schema.field(et).type

    def at(micros_: int) -> pa.Scalar:
        """An instant in micros as a scalar of the event-time column's type."""
        return pa.scalar(micros_, pa.int64()).cast(pa.timestamp("us", tz=getattr(us, "tz", None))).cast(us)

    cond = ds.field(KIND_COLUMN) == GOOD
    if upto is not None:
        cond &= ds.field(et) <= at(upto)
    if failed:
        cond &= ~ds.field(FILE_COLUMN).isin(failed)
    if late_below is not None:
        cond &= ds.field(et) >= at(late_below)
    if after is not None:
        cond &= ds.field(et) > at(after)
    return data.to_table(columns=[*definition.column_names, FILE_COLUMN, LINE_COLUMN], filter=cond)


def rejects_spec(staging: str, sources: list[str], failed: list[int], file_errors: list[tuple[str, str]],
                 bad: int, load_id: str, at: dt.datetime) -> dict[str, Any]:
    """The data of an insert's ``DueRejects``: its staging folder, the source of each file index,
    the files rejected whole (indexes, and (source, reason) also of files never staged), how many
    bad rows were staged, its load id and when it was rejected."""
    return {"staging": staging, "sources": list(sources), "failed": sorted(int(i) for i in failed),
            "file_errors": [[s, r] for s, r in file_errors], "bad": int(bad), "load_id": load_id,
            "at": micros(at)}


def has_rejects(data: dict[str, Any], late: int) -> bool:
    """Whether an insert has rejects to commit: late rows, bad rows or files rejected whole."""
    return bool(late or data.get("bad") or data.get("file_errors"))


def commit_rejects(definition: TableDefinition, paths: TablePaths, due: DueRejects) -> bool:
    """Commit an insert's rejects, read from its staging with Arrow (False: the table held them
    already)."""
    if (delta_log.txn_version(paths.rejects, due.origin) or 0) >= due.number:
        return False
    tables = _rejects(definition, due)
    if not tables:
        return False
    return rejects.append(paths, tables, txn=(due.origin, due.number))


def _rejects(definition: TableDefinition, due: DueRejects) -> list[pa.Table]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    d = due.data
    at = from_micros(int(d["at"]))
    load_id = d["load_id"]
    ok = [i for i in range(len(d["sources"])) if i not in set(d["failed"])]
    staged = storage.exists(rows_folder(d["staging"]))
    tables = []
    if staged and ok and (d["bad"] or due.late):
        fs, where = storage.filesystem(rows_folder(d["staging"]))
        data = ds.dataset(where, filesystem=fs, format="parquet")
        in_ok = ds.field(FILE_COLUMN).isin(ok)
        sources = pa.array(d["sources"], pa.string())
        if d["bad"]:
            bad = data.to_table(columns=[FILE_COLUMN, LINE_COLUMN, RAW_COLUMN, REASON_COLUMN],
                                filter=in_ok & (ds.field(KIND_COLUMN) == REJECT))
            tables.append(rejects.rows(pc.take(sources, bad[FILE_COLUMN]), bad[LINE_COLUMN], bad[RAW_COLUMN],
                                       bad[REASON_COLUMN], load_id, at, producer=due.producer))
        if due.late and due.late_below is not None:
            et = definition.event_time
            below = pa.scalar(int(due.late_below), pa.int64()).cast(pa.timestamp("us", tz="UTC")) \
                .cast(data.schema.field(et).type)
            late = data.to_table(columns=[FILE_COLUMN, LINE_COLUMN, RAW_COLUMN, *definition.column_names],
                                 filter=in_ok & (ds.field(KIND_COLUMN) == GOOD) & (ds.field(et) < below))
            record = pc.coalesce(late[RAW_COLUMN], rejects.record_json(late, tuple(definition.column_names)))
            tables.append(rejects.rows(pc.take(sources, late[FILE_COLUMN]), late[LINE_COLUMN], record,
                                       rejects.LATE_ROW, load_id, at, producer=due.producer,
                                       bound=from_micros(int(due.late_below))))
    files = [(s, r) for s, r in d["file_errors"]]
    if not staged and ok and (d["bad"] or due.late):  # never silently: the loss is a reject of its own
        files.append((d["staging"], f"the staged rows of insert {due.number} of {due.producer!r} were removed "
                                    f"before their rejects were written ({d['bad']} bad rows, {due.late} late rows)"))
    if files:
        tables.append(rejects.file_rows(files, load_id, at, producer=due.producer))
    return tables


def write_rows(definition: TableDefinition, rows: pa.Table, folder: str) -> None:
    """Write good rows (the table's columns, file and line) as a rows folder of their own (one
    Parquet file, the staged schema), whole: a folder without its file is empty."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakehouse.staging import block_schema

    schema = block_schema(definition)
    n = rows.num_rows
    cols = {f.name: rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(n, f.type)
            for f in schema}
    cols[KIND_COLUMN] = pa.array([GOOD] * n, schema.field(KIND_COLUMN).type)
    storage.make_dirs(folder)
    with storage.open_write(join(folder, "part-00000.parquet")) as out:
        pq.write_table(pa.table(cols, schema=schema), out)
