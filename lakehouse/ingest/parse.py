"""Parsing one block into Arrow record batches of the staged schema (``lakehouse.staging``): typed
good rows, rejected rows (line, raw record, reason), and at most one file error (a problem with
the whole file, e.g. invalid UTF-8 in the middle of a block), which makes the driver drop the file.

A clean CSV block takes the vectorised path (``lakehouse.ingest.fast_csv``); anything else, or any
doubt, takes the exact row-by-row path here. Pure (files and Arrow, no engine).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from lakehouse import storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError, TransientError, first_line
from lakehouse.ingest.blocks import Block
from lakehouse.ingest.fast_csv import fast_csv_block
from lakehouse.inputs import (
    LongLines,
    RawReject,
    csv_reader,
    csv_records,
    json_records,
    open_parquet,
    parquet_records,
    read_records,
    utf8_lines,
)
from lakehouse.records import BadValue, RowConverter
from lakehouse.staging import FILE_ERROR, GOOD, REJECT, block_schema

BATCH_ROWS = 20_000
"""Rows per record batch of the row path (the vectorised path yields batches five times larger)."""


def block_records(block: Block, columns: list[str], max_record_bytes: int) -> Iterator[Any]:
    """The raw records of one block (RawRecord / RawReject); InputError for a whole-file problem.
    Text is streamed line by line: no line longer than ``max_record_bytes`` is held."""
    if block.format == "parquet":
        pf = open_parquet(block.path, columns)
        yield from parquet_records(block.path, pf, list(range(block.start, block.end)), block.first_line)
        return
    if block.whole:
        yield from read_records(block.path, block.format, columns, max_record_bytes)
        return
    long = LongLines(max_record_bytes)
    with storage.open_read(block.path) as f:
        f.seek(block.start)
        stream = utf8_lines(block.path, f, block.first_line, long, length=block.end - block.start)
        if block.format == "csv":
            assert block.header is not None
            reader = csv_reader(stream, long)
            yield from csv_records(reader, list(block.header), base=block.first_line - 1, long=long,
                                   lines=stream)
        else:
            yield from json_records(block.path, stream, columns, first_line=block.first_line, long=long)
        if f.tell() < block.end:
            raise InputError(f"{block.path}: the file shrank while it was read (expected {block.end} bytes)")


def parse_block(definition: TableDefinition, block: Block, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Parse one block into record batches of ``block_schema(definition)``.

    A clean CSV block (every line a record, every value in a form the row converter accepts
    the same way) takes a vectorized Arrow path; anything else, or any doubt, takes the exact
    row-by-row path, which produces the rejects. Nothing escapes: an unexpected failure makes
    the block a file error (the file is ``failed`` with the reason, the other files go on)."""
    if block.format == "csv" and not block.whole and not block.error:
        try:
            fast = fast_csv_block(definition, block)
        except Exception:  # noqa: BLE001 - any doubt: the row path decides
            fast = None
        if fast is not None:
            yield from fast.to_batches(max_chunksize=batch_rows * 5)
            return
    yield from parse_rows(definition, block, batch_rows)


def parse_rows(definition: TableDefinition, block: Block, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Parse one block row by row (the exact path, which produces the rejects) into record
    batches of ``block_schema(definition)``; a whole-file problem becomes one file error row."""
    schema = block_schema(definition)
    ncols = len(definition.columns)
    converter = RowConverter(definition, empty_is_null=(block.format == "csv"))
    rows: list[tuple[Any, ...]] = []
    meta: list[tuple[int, int, str | None, str | None]] = []  # line, kind, raw, reason

    def flush() -> pa.RecordBatch:
        cols: list[pa.Array] = []
        values = list(zip(*rows)) if rows else [()] * ncols
        for i, f in enumerate(schema.names[:ncols]):
            cols.append(pa.array(values[i], type=schema.field(f).type))
        n = len(meta)
        cols.append(pa.array([block.file_index] * n, pa.int32()))
        cols.append(pa.array([m[0] for m in meta], pa.int64()))
        cols.append(pa.array([m[1] for m in meta], pa.int8()))
        cols.append(pa.array([m[2] for m in meta], pa.string()))
        cols.append(pa.array([m[3] for m in meta], pa.string()))
        rows.clear()
        meta.clear()
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    empty = (None,) * ncols

    def file_error(reason: str) -> pa.RecordBatch:
        rows.clear()
        meta.clear()
        rows.append(empty)
        meta.append((block.first_line, FILE_ERROR, None, reason))
        return flush()

    if block.error:
        yield file_error(block.error)
        return
    try:
        for rec in block_records(block, definition.column_names, definition.ingest.max_record_bytes):
            if isinstance(rec, RawReject):
                rows.append(empty)
                meta.append((rec.line, REJECT, rec.raw, rec.reason))
            else:
                try:
                    rows.append(converter.convert(rec.values))
                    meta.append((rec.line, GOOD, None, None))
                except BadValue as e:
                    rows.append(empty)
                    meta.append((rec.line, REJECT, rec.raw, str(e)))
            if len(rows) >= batch_rows:
                yield flush()
    except InputError as e:
        yield file_error(str(e))
        return
    except Exception as e:  # noqa: BLE001 - one bad file never stops the others (invariant 7)
        wait = storage.transient(block.path, e)
        if wait is not None or isinstance(e, TransientError):  # the batch fails; the next run reads it again
            raise wait or e from None
        yield file_error(unexpected(block.path, e))
        return
    if rows:
        try:
            last = flush()
        except Exception as e:  # noqa: BLE001
            last = file_error(unexpected(block.path, e))
        yield last


def unexpected(path: str, e: BaseException) -> str:
    """The reason of a file that failed in a way no check foresaw."""
    return f"{path}: unexpected {type(e).__name__} while reading: {first_line(e, 200)}"
