"""Blocks: the pieces of one input file that Spark tasks parse in parallel, and how a file is cut
into them.

Pure (files, no engine). ``plan_file`` cuts a file into blocks on the driver; every block starts
at the start of a record, so a record that straddles a nominal boundary belongs to exactly one
block and is parsed once:

- uncompressed CSV / JSON Lines: at the record starts ``lakehouse.ingest.splitting`` finds after
  each nominal boundary ``k * block_size`` (with the file line each starts on, so rejects keep
  file line numbers);
- gzip files cannot be split: one block;
- Parquet: consecutive row groups up to ``block_size`` compressed bytes.

``lakehouse.ingest.parse`` turns one block into Arrow record batches of the staged schema
(``lakehouse.staging``).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from lakehouse import storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError
from lakehouse.ingest.splitting import record_starts
from lakehouse.inputs import Format, RawReject, csv_header, open_parquet, read_records


@dataclass(frozen=True)
class Block:
    """One piece of one file: bytes [start, end) of a text file (end -1: to the end), or row
    groups [start, end) of a Parquet file."""

    file_index: int
    """The file's position in its batch (a later file wins over an earlier one)."""
    path: str
    """The file."""
    format: Format
    """The file's format."""
    index: int
    """The block's position in its file."""
    start: int
    """First byte (text) or row group (Parquet) of the block."""
    end: int
    """Byte or row group after the block's last; -1: to the end of the file (a whole file)."""
    first_line: int
    """File line (text) or record number (Parquet) of the block's first record."""
    header: tuple[str, ...] | None = None
    """CSV: the column names of the file's header row."""
    error: str | None = None
    """A problem with the whole file found while planning: parsing yields only this error."""

    @property
    def whole(self) -> bool:
        """Whether the block is the whole file, read as a stream (a gzip file)."""
        return self.end < 0

    @property
    def nbytes(self) -> int:
        """The bytes the block reads (at least 1): its range of a text file, or the whole file
        (a compressed stream, a Parquet file); 1 when the file cannot be seen (its parser says why)."""
        if self.whole or self.format == "parquet":
            try:
                return max(1, storage.size(self.path))
            except OSError:
                return 1
        return max(1, self.end - self.start)


def plan_file(path: str, fmt: Format, definition: TableDefinition, block_size: int, file_index: int) -> list[Block]:
    """Cut one file into blocks; InputError for a problem with the whole file found up front
    (missing, empty, unreadable header, first JSON line not an object, not Parquet)."""
    columns = definition.column_names
    info = storage.file_info(path)
    if info is None:
        raise InputError(f"{path}: no such file")
    size = info.size
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
        with storage.open_read(path) as f:
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



SNIFF = 64 << 10
"""Bytes at the start of a text file checked for binary data and UTF-8."""


def _check_text(path: str) -> None:
    """Fail fast on a file that is not UTF-8 text at its start (binary data, another encoding)."""
    with storage.open_read(path) as f:
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
    """The column names of a CSV file's first line; InputError when it is not a header."""
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
    """Consecutive row groups up to ``block_size`` compressed bytes per block."""
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
