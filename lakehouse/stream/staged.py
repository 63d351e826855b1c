"""The staged rows of an insert, as the stream reads them: their event times, and their rejects.

An insert's rows are parsed by the one write path (``lakehouse.ingest.batch``) into
``<staging>/rows`` (Parquet with the staged columns of ``lakehouse.staging``: file index,
line, kind, raw record, reason). When the stream registers the insert, the insert's rejects are
described by a ``DueRejects`` record (``rejects_spec`` builds its data); ``commit_rejects`` commits
them, from whichever process finishes the insert, in one commit carrying the SetTransaction
(origin, number) so that committing them twice is a no-op.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from lakehouse import delta_log, rejects, storage
from lakehouse.definitions import TableDefinition
from lakehouse.spark.commit import with_retries
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
    from pyspark.sql import DataFrame, SparkSession

UTC = dt.timezone.utc


def rows_folder(staging: str) -> str:
    """The folder of an insert's staging that holds its parsed rows (Parquet)."""
    return join(staging, "rows")


def read_times(definition: TableDefinition, staging: str, failed: list[int]) -> dict[str, np.ndarray]:
    """Event times (micros, key ``t``) and file indexes (``f``) of the good rows staged in
    ``staging``, files ``failed`` excluded (read with Arrow, no Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    et = definition.event_time
    folder = rows_folder(staging)
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


def commit_rejects(spark_factory: Callable[[], "SparkSession"], definition: TableDefinition, paths: TablePaths,
                   due: DueRejects) -> bool:
    """Commit an insert's rejects (False: the table held them already; Spark is not started)."""
    if (delta_log.txn_version(paths.rejects, due.origin) or 0) >= due.number:
        return False
    spark = spark_factory()
    frames = _frames(spark, definition, due)
    if not frames:
        return False
    with_retries(f"rejects of insert {due.number} of {due.producer!r} into {definition.name}",
                 lambda: rejects.append(spark, paths, frames, txn=(due.origin, due.number)))
    return True


def _frames(spark: "SparkSession", definition: TableDefinition, due: DueRejects) -> list["DataFrame"]:
    from pyspark.sql import functions as F

    d = due.data
    at = from_micros(int(d["at"]))
    load_id = d["load_id"]
    ok = [i for i in range(len(d["sources"])) if i not in set(d["failed"])]
    staged = storage.exists(rows_folder(d["staging"]))
    frames = []
    if staged and ok and (d["bad"] or due.late):
        sources = F.create_map(*[x for i in ok for x in (F.lit(i), F.lit(d["sources"][i]))])
        df = spark.read.parquet(rows_folder(d["staging"])).where(F.col(FILE_COLUMN).isin(ok))
        source = F.element_at(sources, F.col(FILE_COLUMN))
        if d["bad"]:
            frames.append(rejects.rows_frame(df.where(F.col(KIND_COLUMN) == REJECT), source, F.col(LINE_COLUMN),
                                             F.col(RAW_COLUMN), F.col(REASON_COLUMN), load_id, at,
                                             producer=due.producer))
        if due.late and due.late_below is not None:
            et = F.col(definition.event_time)
            late = df.where((F.col(KIND_COLUMN) == GOOD) & (et < F.expr(f"timestamp_micros({int(due.late_below)}L)")))
            record = F.coalesce(F.col(RAW_COLUMN), F.to_json(F.struct(*[F.col(c) for c in definition.column_names])))
            frames.append(rejects.rows_frame(late, source, F.col(LINE_COLUMN), record, F.lit(rejects.LATE_ROW),
                                             load_id, at, producer=due.producer,
                                             bound=from_micros(int(due.late_below))))
    files = [(s, r) for s, r in d["file_errors"]]
    if not staged and ok and (d["bad"] or due.late):  # never silently: the loss is a reject of its own
        files.append((d["staging"], f"the staged rows of insert {due.number} of {due.producer!r} were removed "
                                    f"before their rejects were written ({d['bad']} bad rows, {due.late} late rows)"))
    if files:
        frames.append(rejects.file_frame(spark, files, load_id, at, producer=due.producer))
    return frames
