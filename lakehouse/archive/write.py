"""The one-pass archive's task (runs on Spark executors, inside ``mapInArrow``): the rows of its
days arrive merged and sorted (by day, then the table's total order), each with its side of
the books and its row hash, and the task writes, day by day and in that order:

- the day's Parquet data files, straight into the archive table's folder
  (``event_date=<day>/part-<partition>-<cutoff>-<run id>-<attempt>.c<n>.snappy.parquet``: named by
  the run, so that files no commit adds are recognised and removed), rolled over at
  ``rows_per_file``;
- the day's vector files (``encode.DayVectors``);
- each file's Delta statistics (``stats.FileStats``);
- the figures of the books: per day, rows and the sum of their hashes on each side in (``live``,
  ``kept``, ``replaced``) and out (the rows written).

It yields one record per data file and one per (day, side) of figures, and the driver commits
the files with one metadata-only Delta commit. Rows on the sides ``replaced`` (archived rows a live
row of the same key replaces) and ``deleted`` (archived rows an erasure deletes) are counted and
not written.

No Spark here: plain Arrow in, Arrow out (unit-tested by feeding batches)."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse import crashpoints, storage
from lakehouse.archive.encode import DayVectors
from lakehouse.archive.stats import FileStats
from lakehouse.definitions import PARTITION_COLUMN

SIDE_COLUMN = "_lh_side"
"""A row's side of the books: ``live`` (taken from live), ``kept``, ``replaced`` or ``deleted``
(archived; an erasure's rows are ``kept`` or ``deleted``)."""
HASH_COLUMN = "_lh_hash"
"""A row's 64-bit hash over the recorded columns (``ledger.row_hash_sql``), computed by Spark."""
SIDES = ("live", "kept", "replaced", "deleted")
NOT_WRITTEN = ("replaced", "deleted")
"""Sides counted in and not written: archived rows a live row replaces, rows an erasure deletes."""
ROW_GROUP_ROWS = 131_072
"""Rows of a Parquet row group (Spark hands batches of 10,000 rows; a row group each would make
files larger and scans slower)."""
OUT_SCHEMA = pa.schema([("kind", pa.string()), ("day", pa.string()), ("path", pa.string()), ("size", pa.int64()),
                        ("rows", pa.int64()), ("stats", pa.string()), ("side", pa.string()), ("sum", pa.string()),
                        ("modified_ms", pa.int64())])
"""What a task yields: ``file`` records (path relative to the table, size, rows, statistics,
modification time) and ``figures`` records (day, side, rows, the sum of hashes as a decimal
text); a ``vectors`` record per day counts its vector files (in ``size``)."""
OUT_DDL = ("kind STRING, day STRING, path STRING, size LONG, rows LONG, stats STRING, side STRING, sum STRING, "
           "modified_ms LONG")


@dataclass(frozen=True)
class WriteTask:
    """Everything a task needs to write its days (pickled into the Spark job)."""

    table_root: str
    """The archive Delta table's folder."""
    vectors_root: str
    cutoff: int
    run_id: str
    columns: tuple[tuple[str, pa.DataType], ...]
    """The data files' columns (the table's, without the day), in order, with their Arrow types."""
    stats_columns: tuple[str, ...]
    sort_columns: tuple[tuple[str, pa.DataType], ...]
    plain_columns: tuple[tuple[str, pa.DataType], ...]
    rows_per_file: int = 0
    """Roll over to a new file after this many rows (0: one file a day)."""
    encoding: str | None = None
    driver_pid: int | None = None
    fault_day: dt.date | None = None
    fault: str | None = None
    """``faults``: damage the last of the first rows of ``fault_day`` the task gets (after they
    were counted in: the figures out then differ from those in; tests of the books)."""
    generation: int = 0
    """The vector files' generation: 0 for an archiving run, an erasure's number for its."""

    @property
    def vectors(self) -> bool:
        """Whether the table has vector files."""
        return bool(self.sort_columns or self.plain_columns)


@dataclass
class _File:
    """A data file being written."""

    rel: str
    writer: pq.ParquetWriter
    sink: contextlib.ExitStack
    """Closes the stream the file is written to."""
    stats: FileStats
    pending: list[pa.Table] = field(default_factory=list)
    """Rows not in a row group yet (``ROW_GROUP_ROWS`` make one)."""
    pending_rows: int = 0

    def flush(self) -> None:
        """Write the pending rows as one row group."""
        if self.pending_rows:
            self.writer.write_table(pa.concat_tables(self.pending))
            self.pending, self.pending_rows = [], 0

    def close(self) -> None:
        """The last row group, the footer, and the stream closed."""
        try:
            self.flush()
            self.writer.close()
        finally:
            self.sink.close()


@dataclass
class _Day:
    """A day being written: its current file, the files done, its vector files and figures."""

    day: dt.date
    done: list[dict] = field(default_factory=list)
    file: _File | None = None
    vectors: DayVectors | None = None
    figures: dict[str, list[int]] = field(default_factory=dict)
    files: int = 0


class DayWriter:
    """Writes the days of one task, in the order their rows come."""

    def __init__(self, task: WriteTask, partition: int, attempt: int) -> None:
        self.task = task
        self.stem = f"part-{partition:05d}-{task.cutoff}-{task.run_id}-{attempt}"
        """File names: Spark's ``part-<partition>-...c<n>`` shape (``vectors.batch_order`` reads a
        day's files in that order), with the run's cutoff and id (``file_of_run``)."""
        self.schema = pa.schema([pa.field(n, t) for n, t in task.columns])
        self.stat_types = {n: t for n, t in task.columns if n in task.stats_columns}
        self.day: _Day | None = None

    # -- files -------------------------------------------------------------------------------

    def _open(self, d: _Day) -> _File:
        t = self.task
        rel = f"{PARTITION_COLUMN}={d.day.isoformat()}/{self.stem}.c{d.files:03d}.snappy.parquet"
        d.files += 1
        sink = contextlib.ExitStack()
        stream = sink.enter_context(storage.open_write(storage.join(t.table_root, rel)))
        writer = pq.ParquetWriter(stream, self.schema, compression="snappy")
        return _File(rel, writer, sink, FileStats(self.stat_types))

    def _close(self, d: _Day) -> None:
        f = d.file
        if f is None:
            return
        f.close()
        d.file = None
        path = storage.join(self.task.table_root, f.rel)
        d.done.append({"kind": "file", "day": d.day.isoformat(), "path": f.rel, "size": storage.size(path),
                       "rows": f.stats.rows, "stats": f.stats.json(), "side": None, "sum": None,
                       "modified_ms": int(time.time() * 1000)})

    def _write(self, d: _Day, rows: pa.Table) -> None:
        """Append the day's next rows to its files (rolling over) and its vector files."""
        limit = self.task.rows_per_file
        while rows.num_rows:
            if d.file is None:
                d.file = self._open(d)
            room = rows.num_rows if limit <= 0 else min(rows.num_rows, limit - d.file.stats.rows)
            part, rows = rows.slice(0, room), rows.slice(room)
            d.file.pending.append(part)
            d.file.pending_rows += part.num_rows
            if d.file.pending_rows >= ROW_GROUP_ROWS:
                d.file.flush()
            d.file.stats.add(part)
            if limit > 0 and d.file.stats.rows >= limit:
                self._close(d)

    # -- days --------------------------------------------------------------------------------

    def _start(self, day: dt.date) -> _Day:
        t = self.task
        d = _Day(day)
        if t.vectors:
            d.vectors = DayVectors(t.vectors_root, day, t.cutoff, t.sort_columns, t.plain_columns, t.encoding,
                                   t.generation)
        return d

    def _finish(self, d: _Day) -> list[dict]:
        """Close the day's last file and commit its vector files; its records."""
        self._close(d)
        out = d.done
        files = d.vectors.commit() if d.vectors is not None else 0
        out.append({"kind": "vectors", "day": d.day.isoformat(), "path": None, "size": files,
                    "rows": d.vectors.rows if d.vectors is not None else None, "stats": None, "side": None,
                    "sum": None, "modified_ms": None})
        for side, (n, s) in sorted(d.figures.items()):
            if side == "damaged":
                continue
            out.append({"kind": "figures", "day": d.day.isoformat(), "path": None, "size": None, "rows": n,
                        "stats": None, "side": side, "sum": str(s), "modified_ms": None})
        return out

    def abort(self) -> None:
        """A failed task: no vector file of the open day appears; its data files stay unreferenced."""
        d = self.day
        if d is None:
            return
        if d.file is not None:
            try:
                d.file.close()
            except Exception:  # noqa: BLE001 - best effort: the file is never committed
                pass
        if d.vectors is not None:
            d.vectors.abort()

    # -- rows --------------------------------------------------------------------------------

    def push(self, batch: pa.RecordBatch) -> list[dict]:
        """The next rows (sorted: a day's rows together); the records of the days finished."""
        out: list[dict] = []
        days = batch.column(PARTITION_COLUMN)
        n = batch.num_rows
        start = 0
        while start < n:
            day = days[start].as_py()
            end = start + _run_length(days, start)
            if self.day is None or self.day.day != day:
                if self.day is not None:
                    out += self._finish(self.day)
                self.day = self._start(day)
            self._rows(self.day, batch.slice(start, end - start))
            start = end
        crashpoints.reached("during_vectors", self.task.driver_pid)
        return out

    def _rows(self, d: _Day, rows: pa.RecordBatch) -> None:
        """Count the rows in by side, write all but the replaced and deleted ones, count those out."""
        sides = rows.column(SIDE_COLUMN)
        for side in SIDES:
            _count(d, side, pc.filter(rows.column(HASH_COLUMN), pc.equal(sides, side)))
        kept = pa.Table.from_batches([rows]).filter(pc.invert(pc.is_in(sides, pa.array(NOT_WRITTEN))))
        t = self.task
        if t.fault is not None and t.fault_day == d.day and "damaged" not in d.figures and kept.num_rows:
            from lakehouse.faults import damage_rows

            kept = damage_rows(kept, t.fault, HASH_COLUMN)
            d.figures["damaged"] = [0, 0]
        _count(d, "out", kept.column(HASH_COLUMN))
        self._write(d, kept.select([n for n, _ in t.columns]).cast(self.schema))
        if d.vectors is not None:
            d.vectors.push(kept)

    def finish(self) -> list[dict]:
        """The records of the last day (none when the task had no rows)."""
        if self.day is None:
            return []
        d, self.day = self.day, None
        return self._finish(d)


def _count(d: _Day, side: str, hashes: pa.Array | pa.ChunkedArray) -> None:
    """Add rows of ``side`` (their hashes) to the day's figures."""
    if len(hashes):
        figures = d.figures.setdefault(side, [0, 0])
        figures[0] += len(hashes)
        figures[1] += _hash_sum(hashes)


def _run_length(values: pa.Array, start: int) -> int:
    """How many values from ``start`` on equal the one at ``start``."""
    rest = values.slice(start)
    differs = pc.not_equal(rest, rest[0])
    first = pc.index(differs, True).as_py()
    return len(rest) if first < 0 else first


def _hash_sum(hashes: pa.Array | pa.ChunkedArray) -> int:
    """The sum of signed 64-bit hashes, exactly (as Spark's DECIMAL(20,0) sum): the high and low
    32 bits summed apart, so no partial sum overflows."""
    h = hashes.cast(pa.int64())
    high = pc.sum(pc.shift_right(h, 32)).as_py() or 0
    low = pc.sum(pc.bit_wise_and(h, pa.scalar(0xFFFFFFFF, pa.int64()))).as_py() or 0
    return high * (1 << 32) + low


def file_of_run(name: str, cutoff: int, run_id: str) -> bool:
    """Whether a data file's name is of the run ``run_id`` of ``cutoff``."""
    return name.startswith("part-") and f"-{cutoff}-{run_id}-" in name


def write_days(task: WriteTask, batches: Iterable[pa.RecordBatch], partition: int,
               attempt: int) -> Iterator[pa.RecordBatch]:
    """A task's work (Spark's ``partition``, its ``attempt``): write the days of ``batches``; the
    records of each day (``OUT_SCHEMA``)."""
    w = DayWriter(task, partition, attempt)
    try:
        for batch in batches:
            done = w.push(batch)
            if done:
                yield pa.RecordBatch.from_pylist(done, schema=OUT_SCHEMA)
        done = w.finish()
        if done:
            yield pa.RecordBatch.from_pylist(done, schema=OUT_SCHEMA)
    except BaseException:
        w.abort()
        raise
