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


def encode_day(task: DayTask) -> tuple[str, int, int]:
    """Write the day's vector files; (day, records, files written)."""
    sort_names = [n for n, _ in task.sort_columns]
    plain_names = [n for n, _ in task.plain_columns]
    encoder = RunEncoder([t for _, t in task.sort_columns])
    writers: dict[str, vectors.AtomicIpcWriter] = {}
    enc = vectors.Encoding.parse(task.encoding)
    try:
        for name, t in task.sort_columns:
            writers[name] = vectors.AtomicIpcWriter(task.vectors_root, name, task.day, task.cutoff,
                                                    run_schema(t), enc)
        for name, t in task.plain_columns:
            writers[name] = vectors.AtomicIpcWriter(task.vectors_root, name, task.day, task.cutoff,
                                                    pa.schema([pa.field("value", t)]), enc)
        rows = 0
        wanted = [*sort_names, *plain_names]
        types = dict([*task.sort_columns, *task.plain_columns])
        for path in task.files:
            fs, p = storage.filesystem(path)
            with fs.open_input_file(p) as f:
                pf = pq.ParquetFile(f)
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
                    cols = {n: batch.column(n).cast(types[n]) for n in wanted}
                    if sort_names:
                        for name, runs in zip(sort_names, encoder.push([cols[n] for n in sort_names])):
                            writers[name].write(runs)
                    for name in plain_names:
                        writers[name].write(pa.table({"value": cols[name]}))
                    rows += batch.num_rows
                    crashpoints.reached("during_vectors", task.driver_pid)
        if sort_names:
            for name, runs in zip(sort_names, encoder.finish()):
                writers[name].write(runs)
        for w in writers.values():
            w.commit()
        return task.day.isoformat(), rows, len(writers)
    except BaseException:
        for w in writers.values():
            try:
                w.abort()
            except Exception:  # noqa: BLE001 - best effort; the next run removes leftovers
                pass
        raise

