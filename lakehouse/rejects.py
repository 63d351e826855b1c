"""A table's rejects: THE schema of rejected rows and files, and how they are written and read.

Every bad row (with its file, line, raw record and reason) and every file rejected whole (line
and record null) becomes one row of ``<warehouse>/<table>/rejects``, a Delta table. An insert
(a load, an ingest batch, a producer's insert) appends its rejects in one commit carrying its
SetTransaction, so a replayed insert never writes them twice. They are built in Arrow and
committed through delta-rs: no Spark job, whatever the insert's size.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from lakehouse import delta_log
from lakehouse.errors import TableNotFound
from lakehouse.warehouse import TablePaths

UTC = dt.timezone.utc

SCHEMA = pa.schema(
    [
        pa.field("source", pa.string()),  # the input file, or "producer P insert N" (rows given as data)
        pa.field("line", pa.int64()),  # 1-based line (text) or record number (Parquet); null: whole file
        pa.field("record", pa.string()),  # the raw record as read (cut at 10,000 characters)
        pa.field("reason", pa.string()),  # why: names the column and the problem
        pa.field("at", pa.timestamp("us", tz="UTC")),  # when it was rejected
        pa.field("load_id", pa.string()),  # the load or ingest batch that rejected it
        pa.field("producer", pa.string()),  # the producer whose insert it was (streams)
        pa.field("bound", pa.timestamp("us", tz="UTC")),  # late_row: the limit it broke (bound - allowed_lateness)
    ]
)
COLUMNS = tuple(SCHEMA.names)
DDL = ("source STRING, line BIGINT, record STRING, reason STRING, at TIMESTAMP, load_id STRING, "
       "producer STRING, bound TIMESTAMP")
LATE_ROW = "late_row"
"""The reason of a row earlier than its producer's bound (minus the allowed lateness)."""


def file_rows(files: list[tuple[str, str]], load_id: str, at: dt.datetime | None = None,
              producer: str | None = None) -> pa.Table:
    """Rejects of whole files: (source, reason) each, with no line or record."""
    return rows([f for f, _ in files], pa.nulls(len(files), pa.int64()), pa.nulls(len(files), pa.string()),
                [r for _, r in files], load_id, at, producer)


def rows(source: Any, line: Any, record: Any, reason: Any, load_id: str, at: dt.datetime | None = None,
         producer: str | None = None, bound: dt.datetime | None = None) -> pa.Table:
    """Rejects rows, one per entry of the columns ``source``, ``line``, ``record`` and ``reason``
    (Arrow arrays or lists); ``reason`` may be one string for all."""
    at = at or dt.datetime.now(UTC)
    n = len(source)
    if isinstance(reason, str):
        reason = [reason] * n
    return pa.table([pa.array(source, pa.string()), pa.array(line, pa.int64()), pa.array(record, pa.string()),
                     pa.array(reason, pa.string()), pa.array([at] * n, SCHEMA.field("at").type),
                     pa.array([load_id] * n, pa.string()), pa.array([producer] * n, pa.string()),
                     pa.array([bound] * n, SCHEMA.field("bound").type)], schema=SCHEMA)


def append(paths: TablePaths, tables: list[pa.Table], txn: tuple[str, int] | None = None) -> bool:
    """Append rejects rows to the table's rejects in one commit (with ``txn``: nothing is written
    when the rejects already hold it); a rejects table older than ``producer`` and ``bound``
    gains them. True when written."""
    return delta_log.append_records(paths.rejects, pa.concat_tables(tables), txn=txn)


def record_json(rows_: pa.Table, columns: tuple[str, ...]) -> pa.Array:
    """Each row's ``columns`` as one line of compact JSON, the record of a rejected row that has
    no raw text (rows inserted as data, Parquet). It parses to the values Spark's ``to_json``
    gives: nulls left out, dates ``YYYY-MM-DD``, decimals as plain numbers, NaN and infinities as
    strings; but doubles are written in Python's shortest form (``1e-05``, not ``1.0E-5``) and
    timestamps (ISO 8601 UTC) keep their microseconds where Spark cuts them to milliseconds."""
    import json

    values = [rows_[c].to_pylist() for c in columns]
    names = [json.dumps(c) for c in columns]
    out = [
        "{" + ",".join(f"{name}:{_json_value(v[i])}" for name, v in zip(names, values) if v[i] is not None) + "}"
        for i in range(rows_.num_rows)
    ]
    return pa.array(out, pa.string())


def _json_value(v: Any) -> str:
    import decimal
    import json
    import math

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        v = v.astimezone(UTC) if v.tzinfo else v.replace(tzinfo=UTC)
        spec = "milliseconds" if v.microsecond % 1000 == 0 else "microseconds"
        return '"' + v.replace(tzinfo=None).isoformat(timespec=spec) + 'Z"'
    if isinstance(v, dt.date):
        return '"' + v.isoformat() + '"'
    if isinstance(v, float):
        if math.isfinite(v):
            return repr(v)
        return '"NaN"' if math.isnan(v) else ('"Infinity"' if v > 0 else '"-Infinity"')
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, int):
        return str(v)
    return json.dumps(v if isinstance(v, str) else str(v), ensure_ascii=False)


def read(warehouse: str, table: str) -> list[dict[str, Any]]:
    """Rejected rows and files of a table, oldest first (read with delta-rs, no Spark)."""
    paths = TablePaths(warehouse, table)
    if not delta_log.exists(paths.rejects):
        raise TableNotFound(f"table {table!r} has no rejects table; run `lakehouse migrate`")
    rows = [{c: r.get(c) for c in COLUMNS} for r in delta_log.scan(paths.rejects).to_pylist()]
    rows.sort(key=lambda r: (r["at"] or dt.datetime.min.replace(tzinfo=UTC), r["source"] or "", r["line"] or 0))
    return rows
