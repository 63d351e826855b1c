"""Staging a small batch in the command's own process: the same parser Spark's tasks run
(``parse_block``), its rows written as one Parquet file of the staged schema, and the counts the
manifest needs, without a Spark job.

A batch of a few small files (a one-file ``load``, a producer's insert) costs two Spark jobs of
fixed overhead when staged by Spark (about a second), for a few milliseconds of parsing. Below
``SMALL_BATCH_BYTES`` of input the command parses it itself: the staged folder holds the same
rows, the batch goes on exactly as after Spark's staging (the live commit reads the staging
through Spark either way). It also keeps a small local file off executors that could not read it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa

from lakehouse import crashpoints
from lakehouse.definitions import TableDefinition
from lakehouse.ingest.blocks import Block
from lakehouse.ingest.parse import parse_block
from lakehouse.staging import FILE_COLUMN, KIND_COLUMN, REASON_COLUMN, block_schema
from lakehouse.storage import join, open_write

SMALL_BATCH_BYTES = 1 << 20
"""Input bytes up to which a batch is staged in the command's process rather than by Spark tasks."""


def stageable(blocks: list[Block]) -> bool:
    """True when the blocks read at most ``SMALL_BATCH_BYTES`` together."""
    return sum(b.nbytes for b in blocks) <= SMALL_BATCH_BYTES


def _batches(definition: TableDefinition, blocks: list[Block]) -> Iterator[pa.RecordBatch]:
    for b in blocks:
        yield from parse_block(definition, b)


def stage(definition: TableDefinition, blocks: list[Block], staging: str) -> list[tuple[int, int, dt.date | None, int, str | None]]:
    """Parse ``blocks`` into ``<staging>/rows/part-00000.parquet``; per (file, kind, UTC day of the
    event time) the row count and the smallest reason, as Spark's staging counts them."""
    schema = block_schema(definition)
    counts: Counter[tuple[int, int, dt.date | None]] = Counter()
    reasons: dict[tuple[int, int, dt.date | None], str] = {}
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with open_write(join(staging, "rows", "part-00000.parquet")) as out:
        with pq.ParquetWriter(out, schema, coerce_timestamps="us") as writer:
            for i, batch in enumerate(_batches(definition, blocks)):
                if i == 1:
                    crashpoints.reached("ingest_during_staging")  # a file half written
                writer.write_batch(batch.cast(schema) if batch.schema != schema else batch)
                days = pc.cast(batch.column(definition.event_time), pa.date32()).to_pylist()
                for f, k, d, reason in zip(batch.column(FILE_COLUMN).to_pylist(), batch.column(KIND_COLUMN).to_pylist(),
                                           days, batch.column(REASON_COLUMN).to_pylist(), strict=True):
                    key = (f, k, d)
                    counts[key] += 1
                    if reason is not None and (key not in reasons or reason < reasons[key]):
                        reasons[key] = reason
            crashpoints.reached("ingest_during_staging")  # the file written, nothing counted yet
    return [(f, k, d, n, reasons.get((f, k, d))) for (f, k, d), n in counts.items()]
