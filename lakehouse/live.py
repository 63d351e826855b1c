"""The live store: load files into a table's live Delta table; bad rows go to its rejects.

A load parses every file on the driver into typed Arrow batches staged as Parquet next to the
table (``_staging/<load_id>``), then commits with Spark: with a primary key one MERGE on key and
event_date where the latest row wins (a later file beats an earlier one, a later line beats an
earlier one), without a key one append. Rejected rows and files are appended to the rejects
table with the source, line, raw record and reason. Delta conflicts with concurrent writers are
retried a bounded number of times.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.commit import idempotent, with_retries
from lakehouse.definitions import LOAD_COLUMN, PARTITION_COLUMN, TableDefinition
from lakehouse.errors import CommitConflict, DriftError, InputError, TableNotFound
from lakehouse.inputs import RawReject, detect_format, read_records
from lakehouse.physical import column_drift, describe
from lakehouse.records import BadValue, RowConverter
from lakehouse.settings import is_local
from lakehouse.warehouse import TablePaths, join, remove_tree, scan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
T = TypeVar("T")
BATCH_ROWS = 50_000
MAX_ATTEMPTS = 8
FILE_ORDER = "_lh_file"
LINE_ORDER = "_lh_line"


@dataclass
class FileResult:
    """What happened to one input file."""

    source: str
    rows_loaded: int = 0
    rows_rejected: int = 0
    error: str | None = None
    """Set when the whole file was rejected."""
    days: set[dt.date] = field(default_factory=set)
    """UTC days of the staged good rows (the partitions the commit touches)."""


@dataclass
class LoadResult:
    """The outcome of one ``load``."""

    table: str
    load_id: str
    files: list[FileResult] = field(default_factory=list)
    rows_inserted: int = 0
    rows_updated: int = 0
    attempts: int = 0

    @property
    def rows_loaded(self) -> int:
        return sum(f.rows_loaded for f in self.files)

    @property
    def rows_rejected(self) -> int:
        return sum(f.rows_rejected for f in self.files)

    @property
    def files_rejected(self) -> list[FileResult]:
        return [f for f in self.files if f.error]


def staging_schema(definition: TableDefinition) -> pa.Schema:
    fields = [pa.field(c.name, c.type.arrow()) for c in definition.columns]
    fields += [pa.field(FILE_ORDER, pa.int32()), pa.field(LINE_ORDER, pa.int64())]
    return pa.schema(fields)


REJECTS_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("line", pa.int64()),
        ("record", pa.string()),
        ("reason", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("load_id", pa.string()),
    ]
)


class _Stager:
    """Writes typed good rows and rejects of one file to Parquet in batches."""

    def __init__(self, definition: TableDefinition, good_path: str, rejects_path: str,
                 file_index: int, source: str, load_id: str) -> None:
        self.schema = staging_schema(definition)
        self.good_path, self.rejects_path = good_path, rejects_path
        self.file_index, self.source, self.load_id = file_index, source, load_id
        self.rows: list[tuple[Any, ...]] = []
        self.days: set[dt.date] = set()
        self._event_index = definition.column_names.index(definition.event_time)
        self.rejects: list[tuple[int, str, str]] = []
        self.good_writer: pq.ParquetWriter | None = None
        self.rejects_writer: pq.ParquetWriter | None = None
        self.now = dt.datetime.now(dt.timezone.utc)

    def add(self, row: tuple[Any, ...], line: int) -> None:
        self.rows.append((*row, self.file_index, line))
        if len(self.rows) >= BATCH_ROWS:
            self._flush_rows()

    def reject(self, line: int, raw: str, reason: str) -> None:
        self.rejects.append((line, raw, reason))
        if len(self.rejects) >= BATCH_ROWS:
            self._flush_rejects()

    def _flush_rows(self) -> None:
        if not self.rows:
            return
        cols = list(zip(*self.rows))
        batch = pa.table([pa.array(c, type=f.type) for c, f in zip(cols, self.schema)], schema=self.schema)
        # event times are UTC, so their date is the UTC day (event_date)
        self.days.update(pc.unique(batch.column(self._event_index).cast(pa.date32())).to_pylist())
        if self.good_writer is None:
            self.good_writer = pq.ParquetWriter(self.good_path, self.schema)
        self.good_writer.write_table(batch)
        self.rows = []

    def _flush_rejects(self) -> None:
        if not self.rejects:
            return
        n = len(self.rejects)
        batch = pa.table(
            [
                pa.array([self.source] * n),
                pa.array([r[0] for r in self.rejects], pa.int64()),
                pa.array([r[1] for r in self.rejects]),
                pa.array([r[2] for r in self.rejects]),
                pa.array([self.now] * n, pa.timestamp("us", tz="UTC")),
                pa.array([self.load_id] * n),
            ],
            schema=REJECTS_SCHEMA,
        )
        if self.rejects_writer is None:
            self.rejects_writer = pq.ParquetWriter(self.rejects_path, REJECTS_SCHEMA)
        self.rejects_writer.write_table(batch)
        self.rejects = []

    def close(self) -> None:
        self._flush_rows()
        self._flush_rejects()
        for w in (self.good_writer, self.rejects_writer):
            if w is not None:
                w.close()

    def discard(self) -> None:
        for w in (self.good_writer, self.rejects_writer):
            if w is not None:
                w.close()
        for p in (self.good_path, self.rejects_path):
            if os.path.exists(p):
                os.remove(p)


def stage_file(definition: TableDefinition, path: str, fmt: str | None, staging_dir: str,
               file_index: int, load_id: str) -> FileResult:
    """Parse one file into staged Parquet (good rows and rejects). InputError rejects the file."""
    result = FileResult(source=path)
    fmt_ = detect_format(path, fmt)
    converter = RowConverter(definition, empty_is_null=(fmt_ == "csv"))
    stager = _Stager(
        definition,
        os.path.join(staging_dir, "good", f"part-{file_index:05d}.parquet"),
        os.path.join(staging_dir, "rejects", f"part-{file_index:05d}.parquet"),
        file_index, path, load_id,
    )
    try:
        for rec in read_records(path, fmt_, definition.column_names):
            if isinstance(rec, RawReject):
                stager.reject(rec.line, rec.raw, rec.reason)
                result.rows_rejected += 1
                continue
            try:
                row = converter.convert(rec.values)
            except BadValue as e:
                stager.reject(rec.line, rec.raw, str(e))
                result.rows_rejected += 1
                continue
            stager.add(row, rec.line)
            result.rows_loaded += 1
        stager.close()
        result.days = stager.days
    except BaseException:
        stager.discard()
        raise
    return result


def check_loadable(definition: TableDefinition, paths: TablePaths) -> None:
    """The live table exists and matches the definition's columns."""
    live = describe(paths.live)
    if live is None:
        raise TableNotFound(f"table {definition.name!r} is not created in the warehouse yet; run `lakehouse migrate`")
    problems = [p for p in column_drift(definition, live, "live") if "setting" not in p]
    if problems:
        raise DriftError(f"{problems[0]}; run `lakehouse migrate` (or add a migration) first")


def load(spark_factory: Callable[[], "SparkSession"], warehouse: str, definition: TableDefinition,
         files: list[str], fmt: str | None = None) -> LoadResult:
    """Load files into live (upsert by key, or append), sending bad rows and files to rejects."""
    paths = TablePaths(warehouse, definition.name)
    check_loadable(definition, paths)
    load_id = uuid.uuid4().hex
    result = LoadResult(definition.name, load_id)
    if not is_local(warehouse):
        raise InputError(f"load stages input on the warehouse; {warehouse} is not a local path yet")
    staging = join(paths.staging, load_id)
    os.makedirs(os.path.join(staging, "good"), exist_ok=True)
    os.makedirs(os.path.join(staging, "rejects"), exist_ok=True)
    file_rejects: list[tuple[str, str]] = []
    try:
        for i, f in enumerate(files):
            try:
                fr = stage_file(definition, f, fmt, staging, i, load_id)
            except InputError as e:
                fr = FileResult(source=f, error=str(e))
                file_rejects.append((f, str(e)))
            log.info("%s: %d rows parsed, %d rejected", f, fr.rows_loaded, fr.rows_rejected)
            result.files.append(fr)
        spark = spark_factory()
        if result.rows_loaded:
            (ins, upd), result.attempts = with_retries(
                f"load into {definition.name}/live",
                lambda: commit_live(spark, definition, paths, spark.read.parquet(join(staging, "good")), load_id,
                                    set().union(*(f.days for f in result.files)), result.rows_loaded),
            )
            result.rows_inserted, result.rows_updated = ins, upd
        if result.rows_rejected or file_rejects:
            with_retries(
                f"rejects of {definition.name}",
                lambda: append_rejects(spark, paths, [
                    *([spark.read.parquet(join(staging, "rejects"))] if result.rows_rejected else []),
                    *([file_rejects_frame(spark, file_rejects, load_id)] if file_rejects else []),
                ]),
            )
    finally:
        remove_tree(staging)
    return result


def _source_frame(definition: TableDefinition, df: "DataFrame", load_id: str) -> "DataFrame":
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.withColumn(PARTITION_COLUMN, F.to_date(F.col(definition.event_time)))
    if definition.has_key:
        w = Window.partitionBy(*definition.primary_key).orderBy(F.desc(FILE_ORDER), F.desc(LINE_ORDER))
        df = df.withColumn("_lh_rank", F.row_number().over(w)).where("_lh_rank = 1")
    return df.select(*definition.column_names, F.lit(load_id).alias(LOAD_COLUMN), PARTITION_COLUMN)


def commit_live(spark: "SparkSession", definition: TableDefinition, paths: TablePaths, good: "DataFrame",
                load_id: str, days: set[dt.date], rows: int, txn: tuple[str, int] | None = None) -> tuple[int, int]:
    """Upsert (key) or append (no key) parsed rows into live in one commit; (inserted, updated).

    ``good`` holds the table's columns plus the file and line order columns (later wins)."""
    with idempotent(spark, txn):
        return _commit_live(spark, definition, paths, good, load_id, days, rows)


def _commit_live(spark: "SparkSession", definition: TableDefinition, paths: TablePaths,
                 good: "DataFrame", load_id: str, days: set[dt.date], rows: int) -> tuple[int, int]:
    from delta.tables import DeltaTable

    src = _source_frame(definition, good, load_id)
    if not definition.has_key:
        src.write.format("delta").mode("append").save(paths.live)
        return rows, 0
    # The literal day list (known from staging) lets Delta see which partitions the MERGE reads,
    # so concurrent loads and archive purges of other days do not conflict with it.
    cond = " AND ".join(f"t.`{k}` = s.`{k}`" for k in (*definition.primary_key, PARTITION_COLUMN))
    cond += f" AND t.`{PARTITION_COLUMN}` IN ({', '.join(repr(d.isoformat()) for d in sorted(days))})"
    metrics = (
        DeltaTable.forPath(spark, paths.live).alias("t")
        .merge(src.alias("s"), cond)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
        .collect()
    )
    if metrics:
        m = metrics[0].asDict()
        return int(m.get("num_inserted_rows", 0) or 0), int(m.get("num_updated_rows", 0) or 0)
    return 0, 0


def file_rejects_frame(spark: "SparkSession", file_rejects: list[tuple[str, str]], load_id: str) -> "DataFrame":
    """Rejects rows for whole files: (source, reason), with no line or record."""
    now = dt.datetime.now(dt.timezone.utc)
    t = pa.table(
        [
            pa.array([f for f, _ in file_rejects]),
            pa.array([None] * len(file_rejects), pa.int64()),
            pa.array([None] * len(file_rejects), pa.string()),
            pa.array([r for _, r in file_rejects]),
            pa.array([now] * len(file_rejects), pa.timestamp("us", tz="UTC")),
            pa.array([load_id] * len(file_rejects)),
        ],
        schema=REJECTS_SCHEMA,
    )
    return spark.createDataFrame(t)


def append_rejects(spark: "SparkSession", paths: TablePaths, frames: list["DataFrame"],
                   txn: tuple[str, int] | None = None) -> None:
    """Append frames of rejects rows (source, line, record, reason, at, load_id) in one commit."""
    from pyspark.sql import functions as F

    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    with idempotent(spark, txn):
        df.select("source", "line", "record", "reason", F.col("at").cast("timestamp"), "load_id") \
            .write.format("delta").mode("append").save(paths.rejects)


def read_rejects(warehouse: str, table: str) -> list[dict[str, Any]]:
    """Rejected rows and files of a table, oldest first (read with delta-rs, no Spark)."""
    paths = TablePaths(warehouse, table)
    if describe(paths.rejects) is None:
        raise TableNotFound(f"table {table!r} has no rejects table; run `lakehouse migrate`")
    rows = scan(paths.rejects).to_pylist()
    rows.sort(key=lambda r: (r["at"] or dt.datetime.min.replace(tzinfo=dt.timezone.utc), r["source"] or "", r["line"] or 0))
    return rows
