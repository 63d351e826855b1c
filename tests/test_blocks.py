"""Pure tests for block planning and block parsing (lakehouse/ingest/: blocks, splitting, parse, fast_csv).

The central property: for any block size (1 byte included, smaller than any line), the
concatenated parse of all blocks of a file is exactly the parse of the file as one block, and
exactly what ``read_records`` + ``RowConverter`` make of the whole file. Files are generated with
hypothesis (quoted commas, doubled quotes, embedded LF / CRLF, CRLF line ends, blank lines, wrong
field counts, bad values, BOM, no trailing newline, non-ASCII; JSON Lines with invalid and
non-object lines). No Spark.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import gzip
import json
import random
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.definitions import parse_definition
from lakehouse.errors import InputError
from lakehouse.ingest import splitting
from lakehouse.ingest.blocks import Block, plan_file
from lakehouse.ingest.parse import parse_block
from lakehouse.ingest.splitting import record_starts
from lakehouse.inputs import RawReject, read_records
from lakehouse.records import BadValue, RowConverter
from lakehouse.staging import FILE_ERROR, GOOD, REJECT, block_schema

REPO = Path(__file__).resolve().parents[1]
SOURCE = "tables/trips.yaml"
D = parse_definition(yaml.safe_load((REPO / SOURCE).read_text(encoding="utf-8")), SOURCE)
NCOLS = len(D.columns)
BIG = 1 << 40
"""A block size larger than any test file: the whole file is one block."""
UTC = dt.timezone.utc

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                              HealthCheck.too_slow])


# -- helpers ---------------------------------------------------------------------------------------


def put(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def rows_of(batches: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    """(line, kind, raw, reason, typed values) of every parsed row, in order."""
    out = []
    for b in batches:
        assert b.schema.equals(block_schema(D))
        d = b.to_pydict()
        for i in range(b.num_rows):
            values = tuple(d[c.name][i] for c in D.columns)
            out.append((d["_lh_line"][i], d["_lh_kind"][i], d["_lh_raw"][i], d["_lh_reason"][i], values))
    return out


def parse_all(blocks: list[Block], batch_rows: int | None = None) -> list[tuple[Any, ...]]:
    batches: list[pa.RecordBatch] = []
    for b in blocks:
        batches += list(parse_block(D, b) if batch_rows is None else parse_block(D, b, batch_rows))
    return rows_of(batches)


def parse_file(path: str, fmt: str, block_size: int) -> list[tuple[Any, ...]]:
    return parse_all(plan_file(path, fmt, D, block_size, 0))  # type: ignore[arg-type]


def expected_from_read_records(path: str, fmt: str) -> list[tuple[Any, ...]]:
    """The same rows, made independently of blocks: read_records over the whole file + RowConverter."""
    conv = RowConverter(D, empty_is_null=(fmt == "csv"))
    out = []
    for rec in read_records(path, fmt, D.column_names):  # type: ignore[arg-type]
        if isinstance(rec, RawReject):
            out.append((rec.line, REJECT, rec.raw, rec.reason, (None,) * NCOLS))
            continue
        try:
            out.append((rec.line, GOOD, None, None, conv.convert(rec.values)))
        except BadValue as e:
            out.append((rec.line, REJECT, rec.raw, str(e), (None,) * NCOLS))
    return out


def check_plan_shape(blocks: list[Block], data: bytes, path: str, fmt: str, data_start: int) -> None:
    """Blocks are contiguous byte ranges covering [data_start, size), each starting a record,
    with the file line of its first record."""
    assert blocks, "a file has at least one block"
    assert [b.index for b in blocks] == list(range(len(blocks)))
    assert blocks[0].start == data_start
    assert blocks[-1].end == len(data)
    for a, b in zip(blocks, blocks[1:]):
        assert a.end == b.start
        assert a.start < a.end
    for b in blocks:
        assert (b.path, b.format, b.file_index, b.error) == (path, fmt, 0, None)
        if b.start < len(data):  # (a header-only CSV without newline has one empty block)
            assert b.first_line == data[:b.start].count(b"\n") + 1
        if b.start > data_start:
            assert data[b.start - 1:b.start] == b"\n"
            if fmt == "csv":
                assert data[:b.start].count(b'"') % 2 == 0, "a block must not start inside quotes"


def single_line(msg: str) -> str:
    assert "\n" not in msg
    return msg


# -- generated CSV files ---------------------------------------------------------------------------

CSV_COLUMNS = ["trip_id", "city_id", "vehicle_type", "fare_local", "is_pool", "event_time"]

_text_piece = st.sampled_from(["a", "b", "Z", " ", ",", '"', '""', "é", "日本", "€", "😀", "\n", "\r\n", ";"])
free_text = st.lists(_text_piece, max_size=6).map("".join)
"""Text with commas, quotes, embedded LF and CRLF, non-ASCII (never a lone CR)."""

FIELD_VALUES = {
    "trip_id": free_text,
    "city_id": st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["", "x", "1.5", " 7 ", "99999999999"])),
    "vehicle_type": free_text,
    "fare_local": st.sampled_from(["12.34", "0", "-3.5", "", "1.234", "abc", "1e2", "12345678901.00"]),
    "is_pool": st.sampled_from(["true", "false", "yes", "0", "", "maybe"]),
    "event_time": st.sampled_from(["2024-01-02T03:04:05", "2024-01-02 03:04:05.123456+02:00", "2024-03-01",
                                   "", "yesterday", "2024-13-01T00:00:00Z"]),
}


def csv_field(draw: Any, value: str) -> str:
    must_quote = any(ch in value for ch in ',"\r\n') or value != value.strip()
    if must_quote or draw(st.booleans()):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def csv_files(draw: Any) -> bytes:
    header = draw(st.permutations(CSV_COLUMNS))
    n_header = draw(st.integers(3, len(header)))
    header = header[:n_header]
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["row", "row", "row", "blank", "short", "long"]))
        if kind == "blank":
            lines.append("")
            continue
        fields = [csv_field(draw, draw(FIELD_VALUES[c])) for c in header]
        if kind == "short":
            fields = fields[: draw(st.integers(1, len(fields) - 1))]
        elif kind == "long":
            fields += [csv_field(draw, draw(free_text)) for _ in range(draw(st.integers(1, 2)))]
        if fields == [""]:
            fields = ['""']  # a single empty unquoted field would be a blank line
        lines.append(",".join(fields))
    endings = [draw(st.sampled_from(["\n", "\r\n"])) for _ in range(len(lines) + 1)]
    text = "".join(line + end for line, end in zip([",".join(header), *lines], endings))
    if draw(st.booleans()):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]  # no trailing newline
    data = text.encode("utf-8")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return data


# -- generated JSON Lines files --------------------------------------------------------------------

json_value = {
    "trip_id": st.one_of(free_text, st.integers(0, 99), st.none(), st.just([1])),
    "city_id": st.one_of(st.integers(-10, 10**6), st.sampled_from(["7", "x", 2.0, 2.5, None, True])),
    "vehicle_type": st.one_of(free_text, st.none()),
    "fare_local": st.sampled_from([12.34, 1.234, 0, "5.50", None, "abc", 1e20]),
    "is_pool": st.sampled_from([True, False, "yes", None, 3]),
    "event_time": st.sampled_from(["2024-01-02T03:04:05Z", "2024-01-02 03:04:05+05:30", "bad", None, 5]),
}


@st.composite
def json_objects(draw: Any) -> str:
    keys = draw(st.lists(st.sampled_from(CSV_COLUMNS), unique=True, min_size=1))
    obj = {k: draw(json_value[k]) for k in keys}
    return json.dumps(obj, ensure_ascii=draw(st.booleans()))


INVALID_JSON = st.sampled_from(['{"trip_id": ', "nope", "{bad}", '{"a" 1}', "[1,", "é€"])
NON_OBJECT = st.sampled_from(["[1, 2]", "3", '"s"', "null", "true", "[]"])


@st.composite
def json_files(draw: Any) -> bytes:
    lines = [draw(st.sampled_from(["", "  "])) for _ in range(draw(st.integers(0, 2)))]
    lines.append(draw(json_objects()))  # the first non-blank line must be an object
    for _ in range(draw(st.integers(0, 10))):
        lines.append(draw(st.one_of(json_objects(), json_objects(), INVALID_JSON, NON_OBJECT,
                                    st.sampled_from(["", "   "]))))
    endings = [draw(st.sampled_from(["\n", "\r\n"])) for _ in lines]
    text = "".join(line + end for line, end in zip(lines, endings))
    if draw(st.booleans()):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    data = text.encode("utf-8")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return data


def _check_same_parse_any_block_size(tmp_path: Path, data: bytes, fmt: str, ext: str, sizes: list[int],
                                     chunk: int | None) -> None:
    path = put(tmp_path, f"in.{ext}", data)
    whole = plan_file(path, fmt, D, BIG, 0)  # type: ignore[arg-type]
    assert len(whole) == 1
    reference = parse_all(whole)
    assert reference == expected_from_read_records(path, fmt)
    data_start = len(data.split(b"\n", 1)[0]) + 1 if fmt == "csv" else 0
    data_start = min(data_start, len(data))
    for size in sizes:
        with mock.patch.object(splitting, "SCAN_CHUNK", chunk or splitting.SCAN_CHUNK):
            blocks = plan_file(path, fmt, D, size, 0)  # type: ignore[arg-type]
        check_plan_shape(blocks, data, path, fmt, data_start)
        assert parse_all(blocks) == reference, f"block size {size}"
    # the same content gzipped: one block, the same rows
    gz = put(tmp_path, f"in.{ext}.gz", gzip.compress(data))
    gz_blocks = plan_file(gz, fmt, D, 1, 0)  # type: ignore[arg-type]
    assert len(gz_blocks) == 1 and gz_blocks[0].whole
    assert parse_all(gz_blocks) == reference


@PROPERTY
@given(data=csv_files(), size=st.integers(2, 64), chunk=st.sampled_from([None, 2, 7, 64]))
def test_csv_any_block_size_parses_like_the_whole_file(tmp_path, data, size, chunk):
    _check_same_parse_any_block_size(tmp_path, data, "csv", "csv", [1, size, len(data)], chunk)


@PROPERTY
@given(data=json_files(), size=st.integers(2, 64), chunk=st.sampled_from([None, 2, 7, 64]))
def test_json_any_block_size_parses_like_the_whole_file(tmp_path, data, size, chunk):
    _check_same_parse_any_block_size(tmp_path, data, "json", "jsonl", [1, size, len(data)], chunk)


def test_one_byte_blocks_give_one_block_per_record(tmp_path):
    data = (b'trip_id,vehicle_type,event_time\r\n'
            b'a,"x, ""y""\r\nz",2024-01-01\r\n'
            b'\r\n'
            b'b,plain,2024-01-02\n'
            b'c,"multi\nline\nvalue",bad\n'
            b'd,short\n'
            b'e,\xc3\xa9,2024-01-03')
    path = put(tmp_path, "a.csv", data)
    blocks = plan_file(path, "csv", D, 1, 7)
    assert [b.first_line for b in blocks] == [2, 4, 5, 6, 9, 10]
    assert {b.file_index for b in blocks} == {7}
    assert all(b.header == ("trip_id", "vehicle_type", "event_time") for b in blocks)
    rows = parse_all(blocks)
    assert [(r[0], r[1]) for r in rows] == [(2, GOOD), (5, GOOD), (6, REJECT), (9, REJECT), (10, GOOD)]
    assert rows[0][4][D.column_names.index("vehicle_type")] == 'x, "y"\r\nz'
    assert rows[2][3] == "column event_time: 'bad' is not an ISO 8601 timestamp"
    assert rows[3][3] == "expected 3 fields as in the header, got 2"
    assert rows[4][4][D.column_names.index("vehicle_type")] == "é"


def test_file_index_is_stamped_on_every_row(tmp_path):
    path = put(tmp_path, "a.csv", b"trip_id,event_time\na,2024-01-01\nb,bad\n")
    batches = [rb for b in plan_file(path, "csv", D, 1, 5) for rb in parse_block(D, b)]
    assert {v for rb in batches for v in rb.column("_lh_file").to_pylist()} == {5}


def test_small_batch_rows_split_output_without_changing_rows(tmp_path):
    body = b"trip_id,event_time\n" + b"".join(b"t%d,2024-01-01\n" % i for i in range(25))
    path = put(tmp_path, "a.csv", body)
    blocks = plan_file(path, "csv", D, BIG, 0)
    batches = list(parse_block(D, blocks[0], batch_rows=10))
    assert [b.num_rows for b in batches] == [10, 10, 5]
    assert rows_of(batches) == parse_all(blocks)


def test_typed_values_of_a_good_csv_row(tmp_path):
    path = put(tmp_path, "a.csv", b"trip_id,city_id,fare_local,is_pool,event_time,surge\n"
                                  b"t1,7,12.30,yes,2024-01-02 03:04:05+02:00,\n")
    ((line, kind, raw, reason, values),) = parse_file(path, "csv", BIG)
    row = dict(zip(D.column_names, values))
    assert (line, kind, raw, reason) == (2, GOOD, None, None)
    assert row["trip_id"] == "t1" and row["city_id"] == 7 and row["is_pool"] is True
    assert row["fare_local"] == decimal.Decimal("12.30")
    assert row["event_time"] == dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert row["surge"] is None and row["driver_id"] is None


# -- record_starts -------------------------------------------------------------------------------


def brute_force_starts(data: bytes, data_start: int, block_size: int, quoted: bool) -> list[tuple[int, int]]:
    """The first record start at or after each boundary, found by walking the bytes."""
    starts = []
    quotes = 0
    for i, byte in enumerate(data):
        if byte == 34:
            quotes += 1
        if byte == 10 and (not quoted or quotes % 2 == 0) and i + 1 < len(data):
            starts.append(i + 1)
    out: list[tuple[int, int]] = []
    for boundary in range(data_start + block_size, len(data), block_size):
        first = next((p for p in starts if p >= boundary), None)
        if first is not None and first > data_start and (not out or first > out[-1][0]):
            out.append((first, data[:first].count(b"\n") + 1))
    return out


@PROPERTY
@given(data=st.one_of(csv_files(), json_files()), size=st.integers(1, 40), chunk=st.sampled_from([None, 1, 3, 16]))
def test_record_starts_are_the_first_record_start_after_each_boundary(tmp_path, data, size, chunk):
    path = put(tmp_path, "in.bin", data)
    quoted = data.lstrip(b"\xef\xbb\xbf").startswith(tuple(c.encode() for c in CSV_COLUMNS))
    data_start = min(len(data.split(b"\n", 1)[0]) + 1, len(data)) if quoted else 0
    with mock.patch.object(splitting, "SCAN_CHUNK", chunk or splitting.SCAN_CHUNK):
        got = record_starts(path, data_start, len(data), size, quoted=quoted)
    offsets = [p for p, _ in got]
    assert offsets == sorted(set(offsets))
    for p, line in got:
        assert data_start < p < len(data)
        assert data[p - 1] == 10
        assert line == data[:p].count(b"\n") + 1
        if quoted:
            assert data[:p].count(b'"') % 2 == 0
    assert got == brute_force_starts(data, data_start, size, quoted)


def test_record_starts_skip_newlines_inside_quotes(tmp_path):
    data = b'h\n"a\nb\nc",1\nx\n'
    path = put(tmp_path, "q.csv", data)
    # every boundary inside the quoted field maps to the record after it (line 5)
    assert record_starts(path, 2, len(data), 1, quoted=True) == [(12, 5)]
    assert record_starts(path, 2, len(data), 1, quoted=False) == [(5, 3), (7, 4), (12, 5)]


def test_record_starts_no_boundary_inside_the_file(tmp_path):
    data = b"h\nabc\n"
    path = put(tmp_path, "q.csv", data)
    assert record_starts(path, 2, len(data), 100, quoted=True) == []


# -- whole-file problems found when planning ---------------------------------------------------


def _parquet_bytes(tmp_path: Path) -> bytes:
    p = tmp_path / "tmp.parquet"
    pq.write_table(pa.table({"trip_id": ["a"], "nope": [1]}), p)
    return p.read_bytes()


WHOLE_FILE_PROBLEMS = [
    ("empty.csv", "csv", b"", "empty file"),
    ("empty.jsonl", "json", b"", "empty file"),
    ("blank_header.csv", "csv", b"\n\na,b\n", "no header row"),
    ("unknown.csv", "csv", b"trip_id,tip,event_time\na,1,2024-01-01\n", "unknown column 'tip'"),
    ("dupe.csv", "csv", b"trip_id,event_time,trip_id\n", "header repeats column 'trip_id'"),
    ("notjson.jsonl", "json", b"trip_id=a\n{\"trip_id\": \"b\"}\n", "line 1: not JSON Lines"),
    ("notobject.jsonl", "json", b"\n[1, 2]\n", "line 2: not JSON Lines"),
    ("blanks.jsonl", "json", b"\n  \n\n", "no JSON records"),
    ("unknown_first.jsonl", "json", b'{"tip": 1}\n', "unknown column 'tip'"),
    ("garbage.csv", "csv", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" * 40, ""),
    ("control_bytes.csv", "csv", bytes(range(256)) * 4, ""),
    ("latin1.csv", "csv", "trip_id,event_time\ncaf\xe9,2024-01-01\n".encode("latin-1"), "not UTF-8"),
    ("garbage.jsonl", "json", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 20, ""),
    ("latin1.jsonl", "json", '{"trip_id": "caf\xe9"}\n'.encode("latin-1"), "not UTF-8"),
    ("notgzip.csv.gz", "csv", b"trip_id,event_time\na,2024-01-01\n", "cannot read"),
    ("notgzip.jsonl.gz", "json", b'{"trip_id": "a"}\n', "cannot read"),
    ("notparquet.parquet", "parquet", b"PAR1 this is not parquet at all PAR1", "not a readable Parquet file"),
    ("empty.parquet", "parquet", b"", "not a readable Parquet file"),
]


@pytest.mark.parametrize("name, fmt, data, why", WHOLE_FILE_PROBLEMS, ids=[w[0] for w in WHOLE_FILE_PROBLEMS])
def test_plan_file_raises_input_error_for_whole_file_problems(tmp_path, name, fmt, data, why):
    path = put(tmp_path, name, data)
    with pytest.raises(InputError) as ei:
        plan_file(path, fmt, D, 1, 0)
    msg = single_line(str(ei.value))
    assert msg.startswith(f"{path}: ")
    assert why in msg  # ("" for binary garbage: any reason that names the file)


def test_plan_file_missing_file(tmp_path):
    path = str(tmp_path / "nope.csv")
    with pytest.raises(InputError) as ei:
        plan_file(path, "csv", D, 1, 0)
    assert str(ei.value) == f"{path}: no such file"


def test_plan_file_directory_is_no_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        plan_file(str(tmp_path), "csv", D, 1, 0)


def test_plan_file_parquet_with_unknown_column(tmp_path):
    path = put(tmp_path, "u.parquet", _parquet_bytes(tmp_path))
    with pytest.raises(InputError) as ei:
        plan_file(path, "parquet", D, 1, 0)
    assert str(ei.value).startswith(f"{path}: unknown column 'nope'")


def test_plan_file_invalid_utf8_in_csv_header(tmp_path):
    path = put(tmp_path, "h.csv", b"trip_id,event\xfftime\n")
    with pytest.raises(InputError) as ei:
        plan_file(path, "csv", D, 1, 0)
    assert str(ei.value).startswith(f"{path}: not UTF-8 text")
    assert "at byte 13" in str(ei.value)


def test_plan_file_csv_header_with_unterminated_quote_is_an_input_error(tmp_path):
    path = put(tmp_path, "h.csv", b'trip_id,"event_time\na,2024-01-01\n')
    with pytest.raises(InputError) as ei:
        plan_file(path, "csv", D, 1, 0)
    assert str(ei.value).startswith(f"{path}: ")


# -- whole-file problems found when parsing (kind 2 rows) -------------------------------------------


def _big_csv(n: int) -> bytes:
    return b"trip_id,vehicle_type,event_time\n" + b"".join(
        b't%05d,"v, %d",2024-01-01T00:00:00\n' % (i, i) for i in range(n))


def _with_invalid_byte(data: bytes, offset: int, byte: int = 0xFF) -> tuple[bytes, int]:
    """``data`` with one byte replaced (outside quotes, commas and newlines) by ``byte``."""
    out = bytearray(data)
    while out[offset] in b'",\n':
        offset += 1
    out[offset] = byte
    return bytes(out), offset


LARGE_ROWS = 7000
"""About 250 KB: invalid bytes at 3/4 of it lie well past any sniffed start of the file."""


def utf8_error(path: str, data: bytes, offset: int, reason: str = "invalid start byte") -> str:
    """The reason given for invalid UTF-8 at ``offset``: the file line and the byte in that line."""
    line = data[:offset].count(b"\n") + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1)
    return f"{path}: line {line}: not UTF-8 text ({reason} at byte {col} of the line)"


def test_invalid_utf8_in_the_middle_is_one_file_error_row_for_its_block(tmp_path):
    data = _big_csv(LARGE_ROWS)
    data, offset = _with_invalid_byte(data, len(data) * 3 // 4)
    path = put(tmp_path, "bad.csv", data)
    blocks = plan_file(path, "csv", D, 16 << 10, 3)
    assert len(blocks) > 5
    hit = [b for b in blocks if b.start <= offset < b.end]
    assert len(hit) == 1
    for b in blocks:
        rows = parse_all([b])
        if b is hit[0]:
            assert len(rows) == 1
            line, kind, raw, reason, values = rows[0]
            assert kind == FILE_ERROR and raw is None and values == (None,) * NCOLS
            assert line == b.first_line
            assert reason == utf8_error(path, data, offset)
        else:
            assert rows and all(r[1] == GOOD for r in rows)


def test_invalid_utf8_in_a_single_block_file_names_the_file_offset(tmp_path):
    data = _big_csv(LARGE_ROWS)
    data, offset = _with_invalid_byte(data, len(data) - 10, 0xC3)  # a lead byte followed by ASCII
    path = put(tmp_path, "bad.csv", data)
    rows = parse_file(path, "csv", BIG)
    assert [(r[1], r[3]) for r in rows] == [
        (FILE_ERROR, utf8_error(path, data, offset, "invalid continuation byte"))]


@functools.lru_cache(maxsize=1)
def _truncated_gzip_bytes() -> bytes:
    rnd = random.Random(1)
    body = b"trip_id,vehicle_type,event_time\n" + b"".join(
        b"t%d,%s,2024-01-01\n" % (i, bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(30)))
        for i in range(6000))
    z = gzip.compress(body)
    return z[: len(z) // 2]


def _truncated_gzip(tmp_path: Path, name: str) -> str:
    return put(tmp_path, name, _truncated_gzip_bytes())


def test_truncated_gzip_gives_a_file_error_row(tmp_path):
    path = _truncated_gzip(tmp_path, "cut.csv.gz")
    blocks = plan_file(path, "csv", D, 1, 0)
    assert len(blocks) == 1
    rows = parse_all(blocks)
    assert len(rows) == 1
    assert rows[0][1] == FILE_ERROR and rows[0][0] == 1
    assert rows[0][3].startswith(f"{path}: cannot read")


def test_truncated_gzip_file_error_is_the_last_row_with_small_batches(tmp_path):
    path = _truncated_gzip(tmp_path, "cut.csv.gz")
    rows = parse_all(plan_file(path, "csv", D, 1, 0), batch_rows=1000)
    kinds = [r[1] for r in rows]
    assert kinds.count(FILE_ERROR) == 1 and kinds[-1] == FILE_ERROR


def _gzip_with_invalid_utf8(tmp_path: Path, offset: int) -> tuple[str, int, bytes]:
    body = bytearray(_big_csv(2000))
    while body[offset] in b'",\n':
        offset += 1
    body[offset] = 0xFF
    return put(tmp_path, "bad.csv.gz", gzip.compress(bytes(body))), offset, bytes(body)


def test_invalid_utf8_at_the_start_of_a_gzip_is_found_when_planning(tmp_path):
    path, offset, body = _gzip_with_invalid_utf8(tmp_path, 60)
    with pytest.raises(InputError) as ei:
        plan_file(path, "csv", D, 1, 0)
    assert str(ei.value) == utf8_error(path, body, offset)


def test_invalid_utf8_deep_in_a_gzip_is_a_file_error_row(tmp_path):
    path, offset, body = _gzip_with_invalid_utf8(tmp_path, 20_000)
    rows = parse_file(path, "csv", BIG)
    assert len(rows) == 1 and rows[0][:3] == (1, FILE_ERROR, None)
    assert rows[0][3] == utf8_error(path, body, offset)


def test_json_unknown_key_is_a_file_error_row(tmp_path):
    data = (b'{"trip_id": "a", "event_time": "2024-01-01"}\n'
            b'{"trip_id": "b", "event_time": "2024-01-01"}\n'
            b'{"trip_id": "c", "tip": 3, "event_time": "2024-01-01"}\n'
            b'{"trip_id": "d", "event_time": "2024-01-01"}\n')
    path = put(tmp_path, "k.jsonl", data)
    whole = parse_file(path, "json", BIG)
    assert len(whole) == 1
    assert whole[0][:2] == (1, FILE_ERROR)
    assert whole[0][3] == f"{path}: line 3: unknown column 'tip' (the table has: {', '.join(D.column_names)})"
    per_line = [parse_all([b]) for b in plan_file(path, "json", D, 1, 0)]
    assert [[r[1] for r in rows] for rows in per_line] == [[GOOD], [GOOD], [FILE_ERROR], [GOOD]]
    assert per_line[2][0][0] == 3 and "line 3: unknown column 'tip'" in per_line[2][0][3]


def test_block_with_planning_error_yields_only_that_error():
    b = Block(4, "/x/a.csv", "csv", 0, 0, 10, 1, ("trip_id",), error="/x/a.csv: gone")
    rows = rows_of(list(parse_block(D, b)))
    assert rows == [(1, FILE_ERROR, None, "/x/a.csv: gone", (None,) * NCOLS)]


def test_file_that_shrank_after_planning_is_a_file_error(tmp_path):
    data = _big_csv(200)
    path = put(tmp_path, "s.csv", data)
    blocks = plan_file(path, "csv", D, 1024, 0)
    Path(path).write_bytes(data[: blocks[-1].start + 5])
    rows = parse_all([blocks[-1]])
    assert len(rows) == 1 and rows[0][1] == FILE_ERROR and "shrank" in rows[0][3] and path in rows[0][3]


# -- gzip ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, ext, data", [
    ("csv", "csv", "\ufefftrip_id,vehicle_type,event_time\r\na,\"é\r\nx\",2024-01-01\r\n\r\nb,,bad\r\nc\r\n".encode()),
    ("json", "jsonl", '{"trip_id":"a","event_time":"2024-01-01"}\n\nnope\n[1]\n{"trip_id":"é"}'.encode()),
])
def test_gzip_is_one_block_and_parses_like_the_uncompressed_file(tmp_path, fmt, ext, data):
    plain = put(tmp_path, f"a.{ext}", data)
    gz = put(tmp_path, f"a.{ext}.gz", gzip.compress(data))
    blocks = plan_file(gz, fmt, D, 1, 2)
    assert blocks == [Block(2, gz, fmt, 0, 0, -1, 1)]
    assert blocks[0].whole
    assert parse_all(blocks) == parse_file(plain, fmt, 1) == parse_file(plain, fmt, BIG)
    assert [r[1] for r in parse_all(blocks)].count(GOOD) >= 1


# -- Parquet ---------------------------------------------------------------------------------------


def _parquet(tmp_path: Path, n: int, row_group_size: int) -> str:
    ids: list[str | None] = [f"t{i}" for i in range(n)]
    ids[4] = None  # record 5: null in a non-nullable column
    table = pa.table({
        "trip_id": pa.array(ids, pa.string()),
        "city_id": pa.array(list(range(n)), pa.int32()),
        "fare_local": pa.array([decimal.Decimal(i) / 4 for i in range(n)], pa.decimal128(12, 2)),
        "event_time": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=i) for i in range(n)],
                               pa.timestamp("us", tz="UTC")),
    })
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def test_parquet_is_cut_by_row_groups_and_record_numbers_continue(tmp_path):
    path = _parquet(tmp_path, 10, 3)
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    blocks = plan_file(path, "parquet", D, 1, 1)
    assert [(b.index, b.start, b.end, b.first_line) for b in blocks] == [
        (0, 0, 1, 1), (1, 1, 2, 4), (2, 2, 3, 7), (3, 3, 4, 10)]
    assert all(b.format == "parquet" and b.file_index == 1 for b in blocks)
    rows = parse_all(blocks)
    assert [r[0] for r in rows] == list(range(1, 11))
    assert [r[1] for r in rows] == [GOOD] * 4 + [REJECT] + [GOOD] * 5
    assert rows[4][3] == "column trip_id: null in a non-nullable column"
    good = dict(zip(D.column_names, rows[9][4]))
    assert good["trip_id"] == "t9" and good["city_id"] == 9 and good["fare_local"] == decimal.Decimal("2.25")
    assert good["event_time"] == dt.datetime(2024, 1, 1, 0, 9, tzinfo=UTC)


def test_parquet_blocks_parse_like_one_block_and_like_read_records(tmp_path):
    path = _parquet(tmp_path, 23, 4)
    whole = plan_file(path, "parquet", D, BIG, 0)
    assert [(b.start, b.end, b.first_line) for b in whole] == [(0, 6, 1)]
    reference = parse_all(whole)
    assert reference == expected_from_read_records(path, "parquet")
    md = pq.ParquetFile(path).metadata
    # the planner counts compressed bytes where pyarrow reports them, else total_byte_size
    sizes = [getattr(md.row_group(g), "total_compressed_size", md.row_group(g).total_byte_size)
             for g in range(md.num_row_groups)]
    for block_size in (1, sizes[0] + 1, sum(sizes[:3]), sum(sizes) - 1):
        blocks = plan_file(path, "parquet", D, block_size, 0)
        assert blocks[0].start == 0 and blocks[-1].end == md.num_row_groups
        assert all(a.end == b.start for a, b in zip(blocks, blocks[1:]))
        assert [b.first_line for b in blocks] == [1 + sum(md.row_group(g).num_rows for g in range(b.start))
                                                  for b in blocks]
        assert parse_all(blocks) == reference, block_size
    assert len(plan_file(path, "parquet", D, sizes[0] + 1, 0)) < md.num_row_groups


# -- schema ---------------------------------------------------------------------------------------


def test_block_schema_is_the_columns_then_bookkeeping():
    s = block_schema(D)
    assert s.names == [*D.column_names, "_lh_file", "_lh_line", "_lh_kind", "_lh_raw", "_lh_reason"]
    assert all(f.nullable for f in s)
    assert [str(s.field(n).type) for n in ("_lh_file", "_lh_line", "_lh_kind", "_lh_raw", "_lh_reason")] == [
        "int32", "int64", "int8", "string", "string"]
    assert s.field("fare_local").type == pa.decimal128(12, 2)
    assert s.field("event_time").type == pa.timestamp("us", tz="UTC")


# -- known divergences --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, data", [
    ("csv", b'trip_id,vehicle_type,event_time\na,"p\rq",2024-01-01\nb,x,bad\n'),
    ("json", b'{"trip_id":"a","event_time":"2024-01-01"}\n{"trip_id":"a","event_time":"2024-01-01"}\r'
             b'{"trip_id":"b","event_time":"2024-01-01"}\nnope\n'),
], ids=["csv-cr-inside-quotes", "json-cr-between-objects"])
def test_lone_cr_keeps_line_numbers_across_block_sizes(tmp_path, fmt, data):
    path = put(tmp_path, f"cr.{fmt}", data)
    assert parse_file(path, fmt, 1) == parse_file(path, fmt, BIG)


def test_stray_quote_in_unquoted_field_does_not_change_the_parse(tmp_path):
    path = put(tmp_path, "q.csv", b'trip_id,vehicle_type,event_time\n'
                                  b'a,ab"c,2024-01-01\nb,"x\ny",2024-01-01\nc,z,2024-01-01\n')
    assert parse_file(path, "csv", 1) == parse_file(path, "csv", BIG)
