"""Encoding one staged, sorted day batch into its vector files (runs on Spark executors).

No Spark here: the task reads the day's staged Parquet files with pyarrow, in order and in
batches, so memory stays bounded however big the day is, and writes each column's vector file
atomically where the warehouse is (any filesystem pyarrow reaches).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse import crashpoints, storage
from lakehouse.archive import vectors
from lakehouse.archive.rle import RunEncoder, run_schema

BATCH_ROWS = 65_536


@dataclass(frozen=True)
class DayTask:
    """Everything an executor needs to write one day's vector files."""

    day: dt.date
    files: tuple[str, ...]
    """The day's staged Parquet files, in record order."""
    vectors_root: str
    cutoff: int
    sort_columns: tuple[tuple[str, pa.DataType], ...]
    plain_columns: tuple[tuple[str, pa.DataType], ...]
    driver_pid: int | None = None
    encoding: str | None = None
    """The settings the files are written under (``vectors.Encoding.key()``), kept in each
    file's schema metadata."""


def encode_days(tasks: list[DayTask]) -> list[tuple[str, int, int]]:
    """Encode many days in one Spark task, one after the other (tasks do not grow one per day)."""
    return [encode_day(t) for t in tasks]


class DayVectors:
    """The vector files of one day being written, batch by batch in record order: the sort
    columns run-length encoded, the plain columns as they are; each file appears whole at
    ``commit`` (atomically where the warehouse is), none after ``abort``."""

    def __init__(self, vectors_root: str, day: dt.date, cutoff: int, sort_columns: tuple[tuple[str, pa.DataType], ...],
                 plain_columns: tuple[tuple[str, pa.DataType], ...], encoding: str | None, generation: int = 0) -> None:
        self.sort_names = [n for n, _ in sort_columns]
        self.plain_names = [n for n, _ in plain_columns]
        self.types = dict([*sort_columns, *plain_columns])
        self.encoder = RunEncoder([t for _, t in sort_columns])
        self.writers: dict[str, vectors.AtomicIpcWriter] = {}
        self.rows = 0
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        enc = vectors.Encoding.parse(encoding)
        try:
            for name, t in sort_columns:
                self.writers[name] = vectors.AtomicIpcWriter(vectors_root, name, day, cutoff, run_schema(t), enc,
                                                             generation)
            for name, t in plain_columns:
                self.writers[name] = vectors.AtomicIpcWriter(vectors_root, name, day, cutoff,
                                                             pa.schema([pa.field("value", t)]), enc, generation)
        except BaseException:
            self.abort()
            raise

    @property
    def columns(self) -> list[str]:
        """The columns the files are written of."""
        return [*self.sort_names, *self.plain_names]

    def push(self, batch: pa.RecordBatch | pa.Table) -> None:
        """The day's next rows (at least ``columns``). They are encoded in chunks of exactly
        ``BATCH_ROWS`` rows, however they come: the same rows make the same bytes whether they
        were read back from staged files or handed over by Spark."""
        t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        self.pending.append(t.select(self.columns))
        self.pending_rows += t.num_rows
        self.rows += t.num_rows
        if self.pending_rows >= BATCH_ROWS:
            rest = pa.concat_tables(self.pending)
            while rest.num_rows >= BATCH_ROWS:
                self._encode(rest.slice(0, BATCH_ROWS))
                rest = rest.slice(BATCH_ROWS)
            self.pending, self.pending_rows = [rest], rest.num_rows

    def _encode(self, chunk: pa.Table) -> None:
        cols = {n: chunk.column(n).combine_chunks().cast(self.types[n]) for n in self.columns}
        if self.sort_names:
            for name, runs in zip(self.sort_names, self.encoder.push([cols[n] for n in self.sort_names])):
                self.writers[name].write(runs)
        for name in self.plain_names:
            self.writers[name].write(pa.table({"value": canonical(cols[name])}))

    def commit(self) -> int:
        """The last runs, then every file in place; files written."""
        if self.pending_rows:
            self._encode(pa.concat_tables(self.pending))
            self.pending, self.pending_rows = [], 0
        if self.sort_names:
            for name, runs in zip(self.sort_names, self.encoder.finish()):
                self.writers[name].write(runs)
        for w in self.writers.values():
            w.commit()
        return len(self.writers)

    def abort(self) -> None:
        """No file of the day appears (best effort: the next run removes leftovers)."""
        for w in self.writers.values():
            try:
                w.abort()
            except Exception:  # noqa: BLE001 - best effort; the next run removes leftovers
                pass


def canonical(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``arr`` with zeros under its nulls: what a null slot holds in memory is whatever its
    producer left there (Spark's Arrow batches and Parquet's reader differ), and the same values
    should be the same bytes in a vector file."""
    import decimal

    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count == 0:
        return arr
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        zero = pa.scalar("", t)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        zero = pa.scalar(b"", t)
    elif pa.types.is_boolean(t):
        zero = pa.scalar(False, t)
    elif pa.types.is_decimal(t):
        zero = pa.scalar(decimal.Decimal(0), t)
    elif pa.types.is_primitive(t):
        zero = pa.scalar(0, t)
    else:
        return arr
    filled = pc.fill_null(arr, zero)
    return pa.Array.from_buffers(t, len(arr), [pc.is_valid(arr).buffers()[1], *filled.buffers()[1:]], arr.null_count)


def encode_day(task: DayTask) -> tuple[str, int, int]:
    """Write the day's vector files from its staged files; (day, records, files written)."""
    day = DayVectors(task.vectors_root, task.day, task.cutoff, task.sort_columns, task.plain_columns, task.encoding)
    try:
        for path in task.files:
            fs, p = storage.filesystem(path)
            with fs.open_input_file(p) as f:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH_ROWS, columns=day.columns):
                    day.push(batch)
                    crashpoints.reached("during_vectors", task.driver_pid)
        return task.day.isoformat(), day.rows, day.commit()
    except BaseException:
        day.abort()
        raise
