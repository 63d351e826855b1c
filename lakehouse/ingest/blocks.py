"""Blocks: the pieces of one input file that Spark tasks parse in parallel.

Pure (files and Arrow, no engine). ``plan_file`` cuts a file into blocks on the driver; every
block starts at the start of a record, so a record that straddles a nominal boundary belongs to
exactly one block and is parsed once:

- uncompressed CSV / JSON Lines: one pass over the bytes (numpy, memory-mapped) finds, for each
  nominal boundary ``k * block_size``, the first record start at or after it: the byte after a
  newline that lies outside double quotes (CSV, RFC 4180: quotes inside fields are doubled, so
  their count keeps its parity) and counts the lines before it, so rejects keep file line numbers;
- gzip files cannot be split: one block;
- Parquet: consecutive row groups up to ``block_size`` compressed bytes.

``parse_block`` turns one block into Arrow record batches of the ``block_schema``: typed good
rows, rejected rows (line, raw record, reason), and at most one file error (a problem with the
whole file, e.g. invalid UTF-8 in the middle of a block), which makes the driver drop the file.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError
from lakehouse.inputs import (
    Format,
    RawReject,
    csv_header,
    csv_records,
    json_records,
    open_parquet,
    parquet_records,
    read_records,
    utf8_lines,
)
from lakehouse.records import BadValue, RowConverter

FILE_COLUMN = "_lh_file"
LINE_COLUMN = "_lh_line"
KIND_COLUMN = "_lh_kind"
RAW_COLUMN = "_lh_raw"
REASON_COLUMN = "_lh_reason"
GOOD, REJECT, FILE_ERROR = 0, 1, 2
"""Values of the kind column."""
BATCH_ROWS = 20_000
SCAN_CHUNK = 16 << 20
_NL, _QUOTE = 10, 34


@dataclass(frozen=True)
class Block:
    """One piece of one file: bytes [start, end) of a text file (end -1: to the end), or row
    groups [start, end) of a Parquet file."""

    file_index: int
    """The file's position in its batch (a later file wins over an earlier one)."""
    path: str
    format: Format
    index: int
    start: int
    end: int
    first_line: int
    """File line (text) or record number (Parquet) of the block's first record."""
    header: tuple[str, ...] | None = None
    """CSV: the column names of the file's header row."""
    error: str | None = None
    """A problem with the whole file found while planning: parsing yields only this error."""

    @property
    def whole(self) -> bool:
        return self.end < 0


def block_schema(definition: TableDefinition) -> pa.Schema:
    """What parsing a block yields: the table's columns (nullable here) and bookkeeping."""
    fields = [pa.field(c.name, c.type.arrow()) for c in definition.columns]
    fields += [
        pa.field(FILE_COLUMN, pa.int32()),
        pa.field(LINE_COLUMN, pa.int64()),
        pa.field(KIND_COLUMN, pa.int8()),
        pa.field(RAW_COLUMN, pa.string()),
        pa.field(REASON_COLUMN, pa.string()),
    ]
    return pa.schema(fields)


# -- planning ------------------------------------------------------------------------------------


def plan_file(path: str, fmt: Format, definition: TableDefinition, block_size: int, file_index: int) -> list[Block]:
    """Cut one file into blocks; InputError for a problem with the whole file found up front
    (missing, empty, unreadable header, first JSON line not an object, not Parquet)."""
    columns = definition.column_names
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    size = os.path.getsize(path)
    if fmt == "parquet":
        return _plan_parquet(path, columns, block_size, file_index)
    if size == 0:
        raise InputError(f"{path}: empty file")
    if path.endswith(".gz"):
        _check_start(path, fmt, columns)
        return [Block(file_index, path, fmt, 0, 0, -1, 1)]
    _check_text(path)
    header: tuple[str, ...] | None = None
    data_start = 0
    first_line = 1
    if fmt == "csv":
        with open(path, "rb") as f:
            first = f.readline()
        header = tuple(_csv_header_line(path, first, columns))
        data_start, first_line = len(first), 2
    else:
        _check_start(path, fmt, columns)
    if size - data_start <= block_size:
        return [Block(file_index, path, fmt, 0, data_start, size, first_line, header)]
    starts = record_starts(path, data_start, size, block_size, quoted=(fmt == "csv"))
    bounds = [(data_start, first_line), *starts]
    blocks = []
    for i, (s, line) in enumerate(bounds):
        end = bounds[i + 1][0] if i + 1 < len(bounds) else size
        blocks.append(Block(file_index, path, fmt, i, s, end, line, header))
    return blocks


def record_starts(path: str, data_start: int, size: int, block_size: int, quoted: bool) -> list[tuple[int, int]]:
    """(byte offset, file line) of the first record start at or after each nominal boundary
    ``data_start + k * block_size`` (k >= 1), without duplicates; a record start is the byte after
    a newline (outside double quotes when ``quoted``)."""
    wanted = list(range(data_start + block_size, size, block_size))
    out: list[tuple[int, int]] = []
    if not wanted:
        return out
    with open(path, "rb") as f:
        newlines_before = 0  # newlines in [0, chunk start)
        quotes_before = 0
        w = 0
        lo = 0
        while w < len(wanted):
            chunk = np.frombuffer(f.read(SCAN_CHUNK), dtype=np.uint8)
            if not len(chunk):
                break
            nl = np.flatnonzero(chunk == _NL)
            if quoted:
                q = np.flatnonzero(chunk == _QUOTE)
                outside = ((quotes_before + np.searchsorted(q, nl)) % 2) == 0
                quotes_before += len(q)
                candidates = np.flatnonzero(outside)  # indexes into nl
            else:
                candidates = np.arange(len(nl))
            cand_pos = nl[candidates] + lo
            while w < len(wanted):
                # the record start p must satisfy p >= wanted[w], i.e. its newline at >= wanted[w] - 1
                k = int(np.searchsorted(cand_pos, wanted[w] - 1))
                if k == len(cand_pos):
                    break  # not in this chunk
                p = int(cand_pos[k]) + 1
                line = newlines_before + int(candidates[k]) + 1 + 1
                if p < size and (not out or p > out[-1][0]) and p > data_start:
                    out.append((p, line))
                while w < len(wanted) and wanted[w] <= p:
                    w += 1
            newlines_before += len(nl)
            lo += len(chunk)
    return out


SNIFF = 64 << 10


def _check_text(path: str) -> None:
    """Fail fast on a file that is not UTF-8 text at its start (binary data, another encoding)."""
    with open(path, "rb") as f:
        head = f.read(SNIFF)
    nul = head.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{path}: binary data (NUL byte at byte {nul}), not text")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not just a character cut at the end of the sample
            raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _csv_header_line(path: str, first: bytes, columns: list[str]) -> list[str]:
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True)) if text.strip() else []
    except csv.Error as e:
        raise InputError(f"{path}: line 1: bad CSV header: {e}") from None
    if not rows or not rows[0]:
        raise InputError(f"{path}: line 1: no header row (a CSV file starts with a row of column names)")
    return csv_header(path, rows[0], columns)


def _check_start(path: str, fmt: Format, columns: list[str]) -> None:
    """Reject a file whose start shows it is not what it claims (a gzip stream included)."""
    for rec in read_records(path, fmt, columns):
        if fmt == "json" and isinstance(rec, RawReject):
            raise InputError(f"{path}: line {rec.line}: not JSON Lines ({rec.reason})")
        return
    if fmt == "json":
        raise InputError(f"{path}: no JSON records (only blank lines)")


def _plan_parquet(path: str, columns: list[str], block_size: int, file_index: int) -> list[Block]:
    pf = open_parquet(path, columns)
    md = pf.metadata
    blocks: list[Block] = []
    start, acc, first, rows_before = 0, 0, 1, 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        acc += rg.total_compressed_size if hasattr(rg, "total_compressed_size") else rg.total_byte_size
        rows_before += rg.num_rows
        if acc >= block_size and g + 1 < md.num_row_groups:
            blocks.append(Block(file_index, path, "parquet", len(blocks), start, g + 1, first))
            start, acc, first = g + 1, 0, rows_before + 1
    blocks.append(Block(file_index, path, "parquet", len(blocks), start, md.num_row_groups, first))
    return blocks


# -- parsing -------------------------------------------------------------------------------------

_FAST_INT = r"^-?[0-9]+$"
_FAST_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_FAST_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_FAST_TS = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?$"
_FAST_BOOL = {"true": True, "t": True, "1": True, "yes": True, "y": True,
              "false": False, "f": False, "0": False, "no": False, "n": False}


class _Slow(Exception):
    """The vectorized path cannot vouch for this block: parse it row by row."""


def fast_csv_block(definition: TableDefinition, block: Block) -> pa.Table | None:
    """The block parsed with Arrow's CSV reader and vectorized casts, or None when any value is
    not in a form the row converter accepts identically (then the caller parses row by row)."""
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    assert block.header is not None
    with open(block.path, "rb") as f:
        f.seek(block.start)
        data = f.read(block.end - block.start)
    if not data:
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=list(block.header), use_threads=False),
            parse_options=pcsv.ParseOptions(newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(
                column_types={h: pa.string() for h in block.header}, strings_can_be_null=True,
                quoted_strings_can_be_null=True, null_values=[""]),
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    n = table.num_rows
    if n != lines:  # blank lines, lone CRs or newlines inside quotes: line numbers need the slow path
        return None
    required = set(definition.primary_key) | {definition.event_time}
    cols: list[pa.Array] = []
    try:
        for c in definition.columns:
            target = c.type.arrow()
            if c.name not in table.column_names:
                if not c.nullable or c.name in required:
                    raise _Slow
                cols.append(pa.nulls(n, target))
                continue
            raw = table.column(c.name).combine_chunks()
            if raw.null_count and (not c.nullable or c.name in required):
                raise _Slow
            cols.append(_fast_cast(raw, c.type.name, target, pc))
    except (_Slow, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    schema = block_schema(definition)
    nulls_s = pa.nulls(n, pa.string())
    cols += [
        pa.array(np.full(n, block.file_index, dtype=np.int32)),
        pa.array(np.arange(block.first_line, block.first_line + n, dtype=np.int64)),
        pa.array(np.zeros(n, dtype=np.int8)),
        nulls_s,
        nulls_s,
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def _fast_cast(raw: pa.Array, kind: str, target: pa.DataType, pc: Any) -> pa.Array:
    def all_match(pattern: str) -> None:
        ok = pc.match_substring_regex(raw, pattern)
        if pc.sum(pc.invert(ok).cast(pa.int64())).as_py():
            raise _Slow

    if kind == "string":
        return raw
    if kind in ("int", "long"):
        all_match(_FAST_INT)
        return pc.cast(raw, target)  # raises on overflow
    if kind == "double":
        all_match(_FAST_FLOAT)
        return pc.add(pc.cast(raw, pa.float64()), 0.0)  # -0.0 -> 0.0, as the row converter does
    if kind == "decimal":
        all_match(_FAST_FLOAT)
        return pc.cast(raw, target)  # raises when rounding or precision would lose data
    if kind == "boolean":
        low = pc.utf8_lower(raw)
        keys = pa.array(list(_FAST_BOOL))
        idx = pc.index_in(low, value_set=keys)
        if idx.null_count != raw.null_count:
            raise _Slow
        return pc.take(pa.array(list(_FAST_BOOL.values())), idx)
    if kind == "date":
        all_match(_FAST_DATE)
        return pc.cast(raw, pa.date32())
    if kind == "timestamp":
        all_match(_FAST_TS)
        s = pc.replace_substring_regex(raw, r"^(.{10}) ", r"\1T")
        zoned = pc.match_substring_regex(s, r"(Z|[+-][0-9]{2}:[0-9]{2})$")
        s = pc.if_else(zoned, s, pc.binary_join_element_wise(s, "Z", ""))
        return pc.cast(s, target)
    raise _Slow


def block_records(block: Block, columns: list[str]) -> Iterator[Any]:
    """The raw records of one block (RawRecord / RawReject); InputError for a whole-file problem."""
    if block.format == "parquet":
        pf = open_parquet(block.path, columns)
        yield from parquet_records(block.path, pf, list(range(block.start, block.end)), block.first_line)
        return
    if block.whole:
        yield from read_records(block.path, block.format, columns)
        return
    with open(block.path, "rb") as f:
        f.seek(block.start)
        data = f.read(block.end - block.start)
    if len(data) != block.end - block.start:
        raise InputError(f"{block.path}: the file shrank while it was read (expected {block.end} bytes)")
    stream = utf8_lines(block.path, io.BytesIO(data), block.first_line)
    if block.format == "csv":
        assert block.header is not None
        reader = csv.reader(stream, strict=True)
        yield from csv_records(reader, list(block.header), base=block.first_line - 1)
    else:
        yield from json_records(block.path, stream, columns, first_line=block.first_line)


def parse_block(definition: TableDefinition, block: Block, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Parse one block into record batches of ``block_schema(definition)``.

    A clean CSV block (every line a record, every value in a form the row converter accepts
    the same way) takes a vectorized Arrow path; anything else, or any doubt, takes the exact
    row-by-row path, which produces the rejects."""
    if block.format == "csv" and not block.whole and not block.error:
        fast = fast_csv_block(definition, block)
        if fast is not None:
            yield from fast.to_batches(max_chunksize=batch_rows * 5)
            return
    yield from _parse_rows(definition, block, batch_rows)


def _parse_rows(definition: TableDefinition, block: Block, batch_rows: int) -> Iterator[pa.RecordBatch]:
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
    if block.error:
        rows.append(empty)
        meta.append((block.first_line, FILE_ERROR, None, block.error))
        yield flush()
        return
    try:
        for rec in block_records(block, definition.column_names):
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
        rows.clear()
        meta.clear()
        rows.append(empty)
        meta.append((block.first_line, FILE_ERROR, None, str(e)))
    if rows:
        yield flush()
