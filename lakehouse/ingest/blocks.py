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
    LongLines,
    RawReject,
    csv_header,
    csv_reader,
    csv_records,
    json_records,
    open_parquet,
    parquet_records,
    read_records,
    utf8_lines,
)
from lakehouse.records import BadValue, RowConverter, first_line

FILE_COLUMN = "_lh_file"
LINE_COLUMN = "_lh_line"
KIND_COLUMN = "_lh_kind"
RAW_COLUMN = "_lh_raw"
REASON_COLUMN = "_lh_reason"
GOOD, REJECT, FILE_ERROR = 0, 1, 2
"""Values of the kind column."""
BATCH_ROWS = 20_000
SCAN_CHUNK = 16 << 20
_NL, _CR, _QUOTE, _COMMA = 10, 13, 34, 44


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
    max_record = definition.ingest.max_record_bytes
    if path.endswith(".gz"):
        _check_start(path, fmt, columns, max_record)
        return [Block(file_index, path, fmt, 0, 0, -1, 1)]
    _check_text(path)
    header: tuple[str, ...] | None = None
    data_start = 0
    first_line = 1
    if fmt == "csv":
        with open(path, "rb") as f:
            first = f.readline(max_record + 1)
        if len(first) > max_record and not first.endswith(b"\n"):
            raise InputError(f"{path}: line 1: the header row is longer than max_record_bytes ({max_record} bytes)")
        header = tuple(_csv_header_line(path, first, columns))
        data_start, first_line = len(first), 2
    else:
        _check_start(path, fmt, columns, max_record)
    if size - data_start <= block_size:
        return [Block(file_index, path, fmt, 0, data_start, size, first_line, header)]
    starts = record_starts(path, data_start, size, block_size, quoted=(fmt == "csv"), max_record=max_record)
    if starts is None:  # quoting that parity cannot follow: parse the file as one block
        return [Block(file_index, path, fmt, 0, data_start, size, first_line, header)]
    bounds = [(data_start, first_line), *starts]
    blocks = []
    for i, (s, line) in enumerate(bounds):
        end = bounds[i + 1][0] if i + 1 < len(bounds) else size
        blocks.append(Block(file_index, path, fmt, i, s, end, line, header))
    return blocks


def record_starts(path: str, data_start: int, size: int, block_size: int,
                  quoted: bool, max_record: int | None = None) -> list[tuple[int, int]] | None:
    """(byte offset, file line) of the first record start at or after each nominal boundary
    ``data_start + k * block_size`` (k >= 1), without duplicates; a record start is the byte after
    a newline (outside double quotes when ``quoted``).

    Quote parity tells inside from outside only under RFC 4180 quoting. Python's csv reader also
    accepts a quote inside an unquoted field (``5" screen``) as a literal character, which flips
    the parity; so when ``quoted`` and any quote before the last boundary is not where RFC 4180
    puts one (see ``quotes_follow_rfc4180``), or a lone CR (after which the reader drops the rest
    of the line, quotes included), or a line longer than ``max_record`` (which the reader skips,
    quotes included) comes before the last boundary, this returns None: the file is not split."""
    wanted = list(range(data_start + block_size, size, block_size))
    out: list[tuple[int, int]] = []
    if not wanted:
        return out
    with open(path, "rb") as f:
        f.seek(data_start)
        newlines_before = 1 if data_start else 0  # newlines in [0, chunk start): the header's
        quotes_before = 0
        before = -1
        last_nl = data_start - 1  # the newline that ends the line before the data
        w = 0
        lo = data_start
        while w < len(wanted):
            chunk = np.frombuffer(f.read(SCAN_CHUNK), dtype=np.uint8)
            if not len(chunk):
                break
            peek = f.read(1)
            if peek:
                f.seek(-1, os.SEEK_CUR)
            nl = np.flatnonzero(chunk == _NL)
            if quoted:
                q = np.flatnonzero(chunk == _QUOTE)
                after = peek[0] if peek else -1
                if not quotes_follow_rfc4180(chunk, q, before, after, quotes_before):
                    return None
                cr = np.flatnonzero(chunk == _CR)
                if len(cr):
                    nxt = np.where(cr + 1 < len(chunk), chunk[np.minimum(cr + 1, len(chunk) - 1)], after)
                    if np.any(nxt != _NL):
                        return None
                if max_record is not None:
                    ends = np.append(nl + lo, lo + len(chunk))  # the open line so far counts too
                    if len(ends) and np.max(np.diff(np.insert(ends, 0, last_nl))) - 1 > max_record:
                        return None
                    if len(nl):
                        last_nl = int(nl[-1]) + lo
                outside = ((quotes_before + np.searchsorted(q, nl)) % 2) == 0
                quotes_before += len(q)
                candidates = np.flatnonzero(outside)  # indexes into nl
            else:
                candidates = np.arange(len(nl))
            before = int(chunk[-1])
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


def _longest_line(buf: np.ndarray) -> int:
    """The longest line of ``buf`` in bytes, its newline not counted."""
    nl = np.flatnonzero(buf == _NL)
    ends = np.append(nl, len(buf))
    starts = np.insert(nl + 1, 0, 0)
    return int(np.max(ends - starts)) if len(ends) else 0


def quotes_follow_rfc4180(buf: np.ndarray, q: np.ndarray, before: int, after: int, parity: int) -> bool:
    """True when every double quote in ``buf`` (positions ``q``) sits where RFC 4180 puts one,
    counting ``parity`` quotes before ``buf``: an opening quote (even count) at the start of a
    field (after a comma, a newline, or the start) or right after a quote (an escaped ``""``); a
    closing quote (odd count) before a comma, CR, newline, the end, or a quote. Under that rule
    quote parity tells exactly where Python's csv reader is inside a quoted field. ``before`` and
    ``after`` are the bytes around ``buf`` (-1: the start or the end of the data)."""
    if not len(q):
        return True
    n = len(buf)
    prev = np.where(q > 0, buf[np.maximum(q - 1, 0)].astype(np.int16), before)
    nxt = np.where(q + 1 < n, buf[np.minimum(q + 1, n - 1)].astype(np.int16), after)
    opening = ((parity + np.arange(len(q))) % 2) == 0
    ok_open = np.isin(prev, (_COMMA, _NL, _QUOTE, -1))
    ok_close = np.isin(nxt, (_COMMA, _NL, _CR, _QUOTE, -1))
    return bool(np.all(np.where(opening, ok_open, ok_close)))


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


def _check_start(path: str, fmt: Format, columns: list[str], max_record: int) -> None:
    """Reject a file whose start shows it is not what it claims (a gzip stream included)."""
    for rec in read_records(path, fmt, columns, max_record):
        # a first line that is not even an object's start shows another format (CSV, say); a bad
        # object (too deep, too long, a huge number) is a reject like any other line
        if fmt == "json" and isinstance(rec, RawReject) and rec.raw and not rec.raw.lstrip().startswith("{"):
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
_FAST_DECIMAL = r"^[+-]?[0-9]{1,38}(\.[0-9]{0,38})?$"
"""Plain decimal text Arrow casts exactly (longer text wraps beyond 128 bits; exponents are left
to the row converter)."""
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
    if block.end - block.start > definition.ingest.block_size + definition.ingest.max_record_bytes:
        return None  # a block stretched by an over-long record: stream it row by row instead
    with open(block.path, "rb") as f:
        f.seek(block.start)
        data = f.read(block.end - block.start)
    if not data:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        return None  # Arrow drops a leading U+FEFF; the row path keeps it in the value
    buf = np.frombuffer(data, dtype=np.uint8)
    if not quotes_follow_rfc4180(buf, np.flatnonzero(buf == _QUOTE), -1, -1, 0):
        return None  # Arrow reads `"x"y` as xy; Python's strict reader rejects it
    if _longest_line(buf) > definition.ingest.max_record_bytes:
        return None  # the row path rejects the over-long record
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

    def no_year_zero() -> None:  # Arrow reads year 0000; Python (the row path) does not
        if pc.any(pc.starts_with(raw, "0000")).as_py():
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
        all_match(_FAST_DECIMAL)
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
        no_year_zero()
        return _in_range(pc.cast(raw, pa.date32()), _MIN_DATE, _MAX_DATE, pc)
    if kind == "timestamp":
        all_match(_FAST_TS)
        no_year_zero()
        s = pc.replace_substring_regex(raw, r"^(.{10}) ", r"\1T")
        zoned = pc.match_substring_regex(s, r"(Z|[+-][0-9]{2}:[0-9]{2})$")
        s = pc.if_else(zoned, s, pc.binary_join_element_wise(s, "Z", ""))
        return _in_range(pc.cast(s, target), _MIN_TS, _MAX_TS, pc)
    raise _Slow


_MIN_DATE, _MAX_DATE = pa.scalar(1 - 719163, pa.int32()), pa.scalar(2932896, pa.int32())
"""0001-01-01 and 9999-12-31 as days since the epoch."""
_MIN_TS = pa.scalar(-62135596800_000000, pa.int64())
_MAX_TS = pa.scalar(253402300799_999999, pa.int64())
"""0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds since the epoch."""


def _in_range(values: pa.Array, lo: pa.Scalar, hi: pa.Scalar, pc: Any) -> pa.Array:
    """``values`` when all lie in [lo, hi] (as integers); else the row path decides (years 0
    and 10000, or an offset that moves an instant past 9999-12-31, are rejects there)."""
    ints = values.cast(lo.type)
    mm = pc.min_max(ints)
    if mm["min"].is_valid and (mm["min"].as_py() < lo.as_py() or mm["max"].as_py() > hi.as_py()):
        raise _Slow
    return values


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
    with open(block.path, "rb") as f:
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
    return f"{path}: unexpected {type(e).__name__} while reading: {first_line(e)}"
