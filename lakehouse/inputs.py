"""Reading input files (CSV with header, JSON Lines, Parquet; .gz for text) into raw records.

No engine here. A record that cannot be read becomes a ``RawReject`` with its line or record
number and reason; a problem with the whole file (missing, unknown columns, no header) raises
``InputError`` naming the file.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from lakehouse import storage
from lakehouse.errors import InputError
from lakehouse.records import Unreadable

Format = Literal["csv", "json", "parquet"]
"""An input file's format."""
FORMATS: tuple[Format, ...] = ("csv", "json", "parquet")
"""Every input format."""
_EXT = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}
MAX_RAW = 10_000
"""Raw records longer than this are cut in rejects (the reason says so)."""


@dataclass(frozen=True)
class RawRecord:
    """One record as read: its 1-based line (CSV, JSON) or record number (Parquet)."""

    line: int
    values: dict[str, Any]
    raw: str


@dataclass(frozen=True)
class RawReject:
    """A record that could not even be read as a record."""

    line: int
    raw: str
    reason: str


def detect_format(path: str, explicit: str | None) -> Format:
    """The file's format: the explicit one, or from its extension (.gz ignored)."""
    if explicit:
        if explicit not in FORMATS:
            raise InputError(f"{path}: unknown format {explicit!r} (expected csv, json or parquet)")
        return explicit  # type: ignore[return-value]
    name = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(name)[1].lower()
    if ext not in _EXT:
        raise InputError(f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; name it with --input-format csv|json|parquet (load) or ingest.format (ingest)")
    return _EXT[ext]  # type: ignore[return-value]


MAX_RECORD_BYTES = 16 << 20
"""Default longest record (bytes) a reader holds in memory; longer ones are rejects."""


class LongLines:
    """File line numbers of lines longer than the record limit, found while reading (the lines
    themselves were skipped in pieces, never held whole)."""

    def __init__(self, max_bytes: int, track: bool = False) -> None:
        """Lines over ``max_bytes`` count as long; ``track`` also keeps every line's length."""
        self.max_bytes = max_bytes
        self.lines: set[int] = set()
        self.track = track
        self.lengths: dict[int, int] = {}
        """With ``track``: bytes of each line read and not yet taken by ``record_bytes``."""

    def record_bytes(self, first: int, last: int) -> int:
        """The bytes of the record on lines [first, last] (newlines between them counted)."""
        return sum(self.lengths.pop(n, 0) for n in range(first, last + 1)) + (last - first)

    def hit(self, first: int, last: int) -> int | None:
        """The first long line in [first, last], if any."""
        for n in range(first, last + 1):
            if n in self.lines:
                return n
        return None

    @property
    def reason(self) -> str:
        """The reject reason of a record with a long line."""
        return f"record longer than max_record_bytes ({self.max_bytes} bytes); not read"


@contextlib.contextmanager
def _open_text(path: str, long: LongLines) -> Iterator[Iterator[str]]:
    """The file's lines (split at \\n only, ends kept), decoded as UTF-8 line by line."""
    with storage.open_read(path) as f:
        raw = gzip.GzipFile(fileobj=f, mode="rb") if path.endswith(".gz") else f
        try:
            yield utf8_lines(path, raw, 1, long)
        finally:
            raw.close()


def utf8_lines(path: str, raw: Any, first_line: int, long: LongLines,
               length: int | None = None) -> Iterator[str]:
    """Decode the lines of a binary stream (at most ``length`` bytes of it); InputError naming
    the file line of the first invalid UTF-8. A line longer than ``long.max_bytes`` is skipped in
    pieces and yields a bare newline in its place (its number is added to ``long.lines``)."""
    n = first_line - 1
    left = length
    limit = long.max_bytes + 1
    while left is None or left > 0:
        line = raw.readline(limit if left is None else min(limit, left))
        if not line:
            return
        n += 1
        if left is not None:
            left -= len(line)
        if len(line) == limit and not line.endswith(b"\n"):
            quotes = line.count(b'"')
            while not line.endswith(b"\n") and (left is None or left > 0):
                line = raw.readline(1 << 20 if left is None else min(1 << 20, left))
                if not line:
                    break
                quotes += line.count(b'"')
                if left is not None:
                    left -= len(line)
            long.lines.add(n)
            # in its place: a line with the same quote parity, so a CSV reader stays in step
            # (a quoted field the long line opens or closes is still opened or closed)
            yield '"\n' if quotes % 2 else "\n"
            continue
        if long.track:
            long.lengths[n] = len(line) - (1 if line.endswith(b"\n") else 0)
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: line {n}: not UTF-8 text ({e.reason} at byte {e.start} of the line)") from None


def _check_columns(path: str, names: list[str], columns: list[str]) -> None:
    known = set(columns)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(
            f"{path}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)} "
            f"(the table has: {', '.join(columns)})"
        )


def _cut(raw: str) -> str:
    return raw if len(raw) <= MAX_RAW else raw[:MAX_RAW] + "...(cut)"


def read_records(path: str, fmt: Format, columns: list[str],
                 max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[RawRecord | RawReject]:
    """Yield the file's records in file order."""
    long = LongLines(max_record_bytes)
    try:
        if not storage.is_file(path):
            raise InputError(f"{path}: no such file")
        if fmt == "csv":
            yield from _read_csv(path, columns, long)
        elif fmt == "json":
            yield from _read_json(path, columns, long)
        else:
            yield from _read_parquet(path, columns)
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise storage.transient(path, e) or InputError(f"{path}: cannot read: {e}") from None


def _read_csv(path: str, columns: list[str], long: LongLines) -> Iterator[RawRecord | RawReject]:
    with _open_text(path, long) as f:
        reader = csv_reader(f, long)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(f"{path}: empty file (a CSV file needs a header row of column names)") from None
        except csv.Error as e:
            raise InputError(f"{path}: line 1: bad CSV header: {e}") from None
        if 1 in long.lines:
            raise InputError(f"{path}: line 1: the header row is longer than {long.max_bytes} bytes")
        header = csv_header(path, header, columns)
        yield from csv_records(reader, header, base=0, long=long, lines=f)


def csv_reader(lines: Iterator[str], long: LongLines) -> Any:
    """Python's strict CSV reader (RFC 4180 quoting, a quote inside an unquoted field taken
    literally), with fields up to the record limit."""
    # a field past the limit is a csv.Error after which the reader resynchronises on the next
    # line (garbage records from the rest of the field), so the field limit only bounds memory;
    # records longer than the setting are rejected whole by their size (csv_records)
    csv.field_size_limit(max(long.max_bytes, 1 << 17))
    long.track = True
    return csv.reader(lines, strict=True)


def csv_header(path: str, header: list[str], columns: list[str]) -> list[str]:
    """The column names of a CSV header row, checked against the table's columns."""
    header = [h.strip() for h in header]
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(f"{path}: header repeats column {', '.join(repr(d) for d in dupes)}")
    _check_columns(path, header, columns)
    return header


def csv_records(reader: Any, header: list[str], base: int, long: LongLines,
                lines: Iterator[str] | None = None) -> Iterator[RawRecord | RawReject]:
    """The records of a ``csv.reader`` over ``lines``; ``base`` is the file line before the
    reader's first line."""
    n = len(header)
    line = reader.line_num
    while True:
        start = base + line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            line = reader.line_num
            if "field larger than field limit" in str(e) and lines is not None:
                # the reader stopped inside a quoted field: skip to its closing quote, so that
                # no line of the field is read as a record of its own
                base += _skip_quoted(lines, long)
                long.record_bytes(start, base + line)
                yield RawReject(start, "", long.reason)
                continue
            long.record_bytes(start, base + line)
            yield RawReject(start, "", f"bad CSV: {e}")
            continue
        line = reader.line_num
        size = long.record_bytes(start, base + line)
        if (long.lines and long.hit(start, base + line) is not None) or size > long.max_bytes:
            yield RawReject(start, "", long.reason)
            continue
        if not row:
            continue  # a blank line is no record
        raw = _to_csv_line(row)
        if len(row) != n:
            yield RawReject(start, _cut(raw), f"expected {n} fields as in the header, got {len(row)}")
            continue
        yield RawRecord(start, dict(zip(header, row)), raw)


def _skip_quoted(lines: Iterator[str], long: LongLines) -> int:
    """Consume the lines up to the one that closes the quoted field the reader is inside (quote
    parity); how many lines were consumed."""
    inside = True
    skipped = 0
    for text in lines:
        skipped += 1
        if text.count('"') % 2:
            inside = not inside
        if not inside:
            break
    return skipped


def _to_csv_line(row: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()[:-1]


def _read_json(path: str, columns: list[str], long: LongLines) -> Iterator[RawRecord | RawReject]:
    with _open_text(path, long) as f:
        yield from json_records(path, f, columns, first_line=1, long=long)


def json_records(path: str, lines: Any, columns: list[str], first_line: int,
                 long: LongLines) -> Iterator[RawRecord | RawReject]:
    """The records of JSON Lines text; ``first_line`` is the file line of the first one."""
    known = set(columns)
    for i, text in enumerate(lines, start=first_line):
        if i in long.lines:
            yield RawReject(i, "", long.reason)
            continue
        text = text.rstrip("\r\n")
        if i == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if not text.strip():
            continue
        try:
            value = json.loads(text, parse_float=_json_float)
        except RecursionError:
            yield RawReject(i, _cut(text), "invalid JSON: nested too deeply")
            continue
        except ValueError as e:
            yield RawReject(i, _cut(text), f"invalid JSON: {e}")
            continue
        if not isinstance(value, dict):
            yield RawReject(i, _cut(text), f"expected a JSON object, got {type(value).__name__}")
            continue
        if not known.issuperset(value):
            extra = [k for k in value if k not in known]
            raise InputError(
                f"{path}: line {i}: unknown column{'s' if len(extra) > 1 else ''} "
                f"{', '.join(repr(k[:60]) for k in extra[:5])} (the table has: {', '.join(columns)})"
            )
        yield RawRecord(i, value, _cut(text))


def _json_float(s: str) -> Any:
    # Keep the literal for decimals; converters turn it into float or Decimal as the column needs.
    from decimal import Decimal

    return Decimal(s)


def _read_parquet(path: str, columns: list[str]) -> Iterator[RawRecord | RawReject]:
    pf = open_parquet(path, columns)
    yield from parquet_records(path, pf, None, first=1)


def open_parquet(path: str, columns: list[str]) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` whose columns are all columns of the table."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(storage.arrow_input(path))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for bad files
        raise InputError(f"{path}: not a readable Parquet file: {e}") from None
    _check_columns(path, pf.schema_arrow.names, columns)
    return pf


def parquet_records(path: str, pf: Any, row_groups: list[int] | None, first: int) -> Iterator[RawRecord | RawReject]:
    """The records of some row groups (all by default); ``first`` is the first record's number."""
    n = first - 1
    try:
        for batch in pf.iter_batches(batch_size=10_000, row_groups=row_groups):
            for row in _pylist(batch):
                n += 1
                yield RawRecord(n, row, _cut(json.dumps(row, default=str)))
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - a corrupt page surfaces as ArrowInvalid and friends
        raise InputError(f"{path}: record {n + 1}: cannot read Parquet data: {e}") from None


def _pylist(batch: Any) -> list[dict[str, Any]]:
    """A record batch as Python rows; a value Python cannot hold (a timestamp beyond year 9999,
    say) becomes an ``Unreadable`` that the row converter rejects, instead of failing the file.
    Zoned timestamps are read in UTC (their local time may leave years 1..9999 when the instant
    does not)."""
    import pyarrow as pa

    zoned = [i for i, f in enumerate(batch.schema) if pa.types.is_timestamp(f.type) and f.type.tz
             and f.type.tz not in ("UTC", "+00:00")]
    for i in zoned:
        f = batch.schema.field(i)
        batch = batch.set_column(i, f.name, batch.column(i).cast(pa.timestamp(f.type.unit, tz="UTC")))
    try:
        return batch.to_pylist()  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - fall back to value by value
        pass
    columns: list[list[Any]] = []
    for col in batch.columns:
        try:
            columns.append(col.to_pylist())
        except Exception:  # noqa: BLE001
            values = []
            for i in range(len(col)):
                try:
                    values.append(col[i].as_py())
                except Exception as e:  # noqa: BLE001
                    values.append(Unreadable(f"{col.type} value Python cannot read ({type(e).__name__}: {e})"))
            columns.append(values)
    names = batch.schema.names
    return [dict(zip(names, vals)) for vals in zip(*columns)] if columns else []
