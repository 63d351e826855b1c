"""Hostile input never stops a load or an ingest (issue: "Bad values never stop a load or an
ingest"). Pure: no Spark; hypothesis properties over these classes of input:

1. raw values of every column type handed to ``RowConverter.convert``: text (5,000-digit
   strings, unicode, NUL, whitespace, numeric forms), ISO timestamps with offsets at the edges
   of years 1 and 9999, years 0000 and 10000, ints of any size, floats with nan/inf, Decimals
   with huge exponents, booleans, dicts, lists, bytes, dates, datetimes, ``Unreadable``;
2. whole CSV files (quoted commas, doubled quotes, embedded LF / CRLF, CRLF line ends, blank
   lines, BOM, quotes inside unquoted fields such as ``5" screen``, ``a,"x"y``, unterminated
   quotes, wrong field counts, bad values) and JSON Lines files (invalid JSON, non-objects, JSON
   nested 1,000+ deep, huge ints, NaN / Infinity, over-long lines), planned with ``plan_file``
   at any block size and parsed block by block with ``parse_block``;
3. the vectorized CSV path (``fast_csv_block``) against the row-by-row path on the same block;
4. ``record_starts`` on random CSV bytes against Python's csv reader over the whole file;
5. Parquet files with hostile typed values (timestamps beyond 9999 stored as int64 micros,
   dates beyond 9999, decimals that do not fit, ints out of range, nulls in required columns).

Each bug these properties found has a test of its own with the minimal failing input (they
were strict xfails until fixed).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import functools
import itertools
import json
import math
import re
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, currently_in_test_context, example, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

from lakehouse.definitions import TableDefinition, parse_definition
from lakehouse.errors import InputError
from lakehouse.ingest.blocks import plan_file
from lakehouse.ingest.fast_csv import fast_csv_block
from lakehouse.ingest.parse import parse_block, parse_rows
from lakehouse.ingest.splitting import quotes_follow_rfc4180, record_starts
from lakehouse.inputs import RawReject, read_records
from lakehouse.records import BadValue, RowConverter, Unreadable
from lakehouse.staging import FILE_ERROR, GOOD, REJECT

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
US = dt.timedelta(microseconds=1)
MIN_US, MAX_US = -62135596800_000000, 253402300799_999999
"""0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds since the epoch."""
BIG = 1 << 40
"""A block size larger than any test file: the whole file is one block."""

COLUMNS = [
    ("k", "string", False), ("s", "string", True), ("i", "int", True), ("l", "long", True),
    ("d", "double", True), ("b", "boolean", True), ("day", "date", True),
    ("m", "decimal(7,2)", True), ("w", "decimal(38,10)", True), ("ts", "timestamp", False),
]
NAMES = [c[0] for c in COLUMNS]
KINDS = {name: kind for name, kind, _ in COLUMNS}
NCOLS = len(COLUMNS)
REQUIRED = {"k", "ts"}


@functools.cache
def table(block_size: int = 64 << 20, max_record_bytes: int = 16 << 20) -> TableDefinition:
    """A table with every column type; k is the key, ts the event time."""
    return parse_definition({
        "name": "hostile",
        "columns": [{"name": n, "type": t, "nullable": nl} for n, t, nl in COLUMNS],
        "primary_key": ["k"],
        "event_time": "ts",
        "ingest": {"block_size": block_size, "max_record_bytes": max_record_bytes},
    }, "hostile.yaml")


D = table()
PROPERTY = dict(deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


_names = itertools.count()


def event(text: str) -> None:
    """A hypothesis statistics event (shown by --hypothesis-show-statistics), if in a test."""
    if currently_in_test_context():
        hypothesis_event(text)


def any_size(seed: int, data: bytes) -> int:
    """A block size from 1 byte to a little beyond the file, from any positive seed."""
    return 1 + (seed - 1) % (len(data) + 8)


def put(workdir: Path, suffix: str, data: bytes) -> str:
    path = workdir / f"f{next(_names)}{suffix}"
    path.write_bytes(data)
    return str(path)


# -- comparing parsed rows -------------------------------------------------------------------------


def norm(v: Any) -> Any:
    """A value in a form that compares exactly: floats by repr (nan == nan, -0.0 != 0.0),
    Decimals by text (zero without sign), instants in UTC."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, Decimal):
        return ("decimal", str(v.copy_abs() if v == 0 else v))
    if isinstance(v, dt.datetime):
        return ("ts", v.astimezone(UTC).isoformat())
    return v


def rows_of(batches: list[pa.RecordBatch], definition: TableDefinition) -> list[tuple[Any, ...]]:
    """(line, kind, raw, reason, values) of every parsed row, in order."""
    out = []
    for b in batches:
        d = b.to_pydict()
        for r in range(b.num_rows):
            values = tuple(norm(d[c.name][r]) for c in definition.columns)
            out.append((d["_lh_line"][r], d["_lh_kind"][r], d["_lh_raw"][r], d["_lh_reason"][r],
                        values))
    return out


def parse_plan(path: str, fmt: str, definition: TableDefinition, block_size: int) -> Any:
    """Every block's rows, concatenated; or the InputError of planning (a whole-file problem)."""
    try:
        blocks = plan_file(path, fmt, definition, block_size, 0)  # type: ignore[arg-type]
    except InputError as e:
        return ("plan error", str(e))
    if block_size != BIG:
        event("split into blocks" if len(blocks) > 1 else "one block")
    batches: list[pa.RecordBatch] = []
    for b in blocks:
        batches += list(parse_block(definition, b))
    return rows_of(batches, definition)


def oracle(path: str, fmt: str, definition: TableDefinition) -> list[tuple[Any, ...]]:
    """The same rows made without blocks: read_records over the whole file + RowConverter."""
    conv = RowConverter(definition, empty_is_null=(fmt == "csv"))
    empty = (None,) * len(definition.columns)
    out = []
    for rec in read_records(path, fmt, definition.column_names,  # type: ignore[arg-type]
                            definition.ingest.max_record_bytes):
        if isinstance(rec, RawReject):
            out.append((rec.line, REJECT, rec.raw, rec.reason, empty))
            continue
        try:
            values = tuple(norm(v) for v in conv.convert(rec.values))
            out.append((rec.line, GOOD, None, None, values))
        except BadValue as e:
            out.append((rec.line, REJECT, rec.raw, str(e), empty))
    return out


def check_split_equals_whole(path: str, fmt: str, size: int, max_record: int) -> list[Any]:
    """The file at block size ``size`` parses exactly as one block, and both exactly as the
    whole-file oracle: same lines, kinds, raw records, reasons and values; no file error."""
    whole = parse_plan(path, fmt, table(BIG, max_record), BIG)
    split = parse_plan(path, fmt, table(size, max_record), size)
    assert split == whole
    if isinstance(whole, tuple):
        return []
    assert whole == oracle(path, fmt, table(BIG, max_record))
    assert FILE_ERROR not in {r[1] for r in whole}, "no file error"
    event(f"goods: {min(sum(r[1] == GOOD for r in whole), 2)}, "
          f"rejects: {min(sum(r[1] == REJECT for r in whole), 2)} (2: 2 or more)")
    lines = [r[0] for r in whole]
    assert lines == sorted(set(lines)), "one row per record, in file order"
    for _, kind, _, reason, _ in whole:
        assert (kind == REJECT) == bool(reason)
    return whole


# -- 1. RowConverter on any raw value -----------------------------------------------------------------

NO_SURROGATES = st.characters(blacklist_categories=("Cs",))
huge_digits = st.builds(lambda sign, n, frac: sign + "9" * n + frac,
                        st.sampled_from(["", "-", "+", " "]), st.integers(1, 5000),
                        st.sampled_from(["", ".5", "e3", "0.0", "E-400"]))
number_text = st.from_regex(
    r"\A\s?[+-]?[0-9]{0,25}(\.[0-9]{0,12})?([eE][+-]?[0-9]{1,4})?\s?\Z")
word_text = st.sampled_from([
    "", " ", "\t", "\x00", "nan", "NaN", "-inf", "Infinity", "true", " yes ", "N", "null",
    "None", "0x10", "1_000", "٣", "１２", "1e", ".", "-", "+", "--1", "1.2.3", "\ufeff1"])


@st.composite
def iso_timestamps(draw: Any) -> str:
    """ISO-like timestamps around the edges: years 0000, 0001, 9999, 10000; odd fields."""
    year = draw(st.sampled_from(["0000", "0001", "0002", "1970", "9998", "9999", "10000", "99"]))
    month = draw(st.sampled_from(["01", "12", "02", "13", "00"]))
    day = draw(st.sampled_from(["01", "31", "29", "30", "00", "32"]))
    clock = draw(st.sampled_from(["00:00:00", "23:59:59", "00:30:00", "23:00:00", "24:00:00",
                                  "23:59:60", "12:00", "00:00:00.999999", "00:00:00.1234567"]))
    sep = draw(st.sampled_from(["T", " ", "t", "  "]))
    zone = draw(st.sampled_from(["", "Z", "z", "+00:00", "-00:00", "+01:00", "-01:00", "+05:00",
                                 "-05:00", "+23:59", "-23:59", "+24:00", "+00:60", "+0100",
                                 "+01:00:30", " UTC"]))
    return draw(st.sampled_from([f"{year}-{month}-{day}{sep}{clock}{zone}",
                                 f"{year}-{month}-{day}"]))


EDGE_TIMESTAMPS = [
    "9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00", "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00Z", "0001-01-01T00:00:00-00:01", "9999-12-31T23:59:59+00:00",
    "10000-01-01T00:00:00Z", "0000-12-31T23:00:00-05:00", "9999-12-31 19:00:00-05:00",
]
text_values = st.one_of(
    st.text(NO_SURROGATES, max_size=30), huge_digits, number_text, word_text, iso_timestamps(),
    st.sampled_from(EDGE_TIMESTAMPS),
    st.builds(lambda a, b, c: a + b + c, st.sampled_from(["", " ", "\t", "\n"]),
              st.one_of(number_text, iso_timestamps()), st.sampled_from(["", " ", "\r\n"])),
)
huge_exponent = st.integers(-999_999_999, 999_999_999)
small_exponent = st.integers(-5000, 5000)


def decimals(exponents: st.SearchStrategy[int]) -> st.SearchStrategy[Decimal]:
    return st.one_of(
        st.decimals(allow_nan=True, allow_infinity=True),
        st.builds(lambda m, e: Decimal(f"{m}E{e}"), st.integers(-10**40, 10**40), exponents),
        st.sampled_from([Decimal("-0"), Decimal("0E+5"), Decimal("sNaN"), Decimal("-NaN"),
                         Decimal("1E-1000"), Decimal("9" * 60)]),
    )


@functools.cache
def raw_values(huge_exponents: bool) -> st.SearchStrategy[Any]:
    """Any raw value a reader may hand over; Decimal exponents up to +-999,999,999 only when
    ``huge_exponents`` (int columns: see test_huge_decimal_exponent_for_an_int_column...)."""
    aware = st.builds(lambda t, m: t.replace(tzinfo=dt.timezone(dt.timedelta(minutes=m))),
                      st.datetimes(), st.integers(-1439, 1439))
    scalars = st.one_of(
        text_values, st.none(), st.booleans(),
        st.integers(), st.integers(0, 5000).map(lambda n: -(10**n) if n % 2 else 10**n),
        st.floats(), st.sampled_from([-0.0, math.nan, math.inf, -math.inf, 1e308, 5e-324]),
        decimals(huge_exponent if huge_exponents else small_exponent),
        st.dates(), st.datetimes(), aware,
        st.sampled_from([dt.datetime.max.replace(tzinfo=dt.timezone(-dt.timedelta(hours=1))),
                         dt.datetime.min.replace(tzinfo=dt.timezone(dt.timedelta(hours=1))),
                         dt.time(1, 2), dt.timedelta(days=1), b"12", bytearray(b"x"),
                         Unreadable("a value Python cannot read"), object(), 1 + 2j]),
    )
    return st.one_of(scalars, st.lists(scalars, max_size=2),
                     st.dictionaries(st.text(max_size=3), scalars, max_size=2))


@st.composite
def raw_records(draw: Any) -> dict[str, Any]:
    """A raw record: a valid one with one column given any raw value (or dropped), or one with
    every column hostile; Decimal exponents beyond 5,000 never go to an int column (see
    test_huge_decimal_exponent_for_an_int_column_is_rejected_at_once)."""
    rec: dict[str, Any] = {"k": "x", "ts": "2020-01-01T00:00:00Z"}
    targets = COLUMNS if draw(st.integers(0, 3)) == 0 else [draw(st.sampled_from(COLUMNS))]
    for name, kind, _ in targets:
        if draw(st.integers(0, 9)) == 0:
            rec.pop(name, None)  # a missing column
            continue
        v = draw(raw_values(huge_exponents=kind not in ("int", "long")))
        if kind in ("int", "long") and isinstance(v, Decimal) and v.is_finite():
            v = v if v.adjusted() <= 5000 else Decimal(1)
        rec[name] = v
    return rec


def check_typed(kind: str, v: Any) -> None:
    """An accepted value has the column's Python type and range and is storable in Arrow."""
    if kind == "string":
        assert type(v) is str
    elif kind in ("int", "long"):
        lo, hi = (-(2**31), 2**31 - 1) if kind == "int" else (-(2**63), 2**63 - 1)
        assert type(v) is int and lo <= v <= hi
    elif kind == "double":
        assert type(v) is float and not (v == 0 and math.copysign(1, v) < 0)
    elif kind == "boolean":
        assert type(v) is bool
    elif kind == "date":
        assert type(v) is dt.date
    elif kind == "timestamp":
        assert isinstance(v, dt.datetime) and v.utcoffset() == dt.timedelta(0)
        assert MIN_US <= (v - EPOCH) // US <= MAX_US
    else:
        p, s = map(int, re.findall(r"\d+", kind))
        assert isinstance(v, Decimal) and v.is_finite()
        assert v.as_tuple().exponent == -s and len(v.as_tuple().digits) <= p


@settings(max_examples=300, **PROPERTY)
@given(raw_records(), st.booleans())
@example({"ts": "9999-12-31T23:00:00-05:00", "k": "x"}, False)
@example({"ts": "0001-01-01T00:30:00+01:00", "k": "x"}, True)
@example({"ts": "10000-01-01T00:00:00Z", "k": "x", "w": Decimal("1E+999999999")}, True)
@example({"k": "9" * 5000, "i": "9" * 5000, "l": 10**5000, "d": 10**400, "ts": "0000-01-01"},
         False)
def test_convert_returns_a_typed_row_or_raises_bad_value(record, empty_is_null):
    """Any raw record: a tuple of the columns' types (timestamps UTC within 0001..9999, values
    Arrow can store) or a BadValue naming a column; never another exception."""
    conv = RowConverter(D, empty_is_null=empty_is_null)
    try:
        row = conv.convert(record)
    except BadValue as e:
        event("reject")
        name = str(e).split(":")[0].removeprefix("column ")
        assert name in NAMES and len(str(e)) > len(name) + 9
        return
    event("typed row")
    assert isinstance(row, tuple) and len(row) == NCOLS
    for (name, kind, nullable), v in zip(COLUMNS, row):
        raw = record.get(name)
        if v is None:
            assert name not in REQUIRED and nullable
            assert raw is None or (empty_is_null and raw == "")
            continue
        check_typed(kind, v)
        pa.array([v], type=D.column(name).type.arrow())  # storable as the column's Arrow type


def _offset(minutes: int) -> str:
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


edge_datetimes = st.one_of(
    st.datetimes(dt.datetime(1, 1, 1), dt.datetime(1, 1, 2, 23, 59)),
    st.datetimes(dt.datetime(9999, 12, 30), dt.datetime.max),
    st.datetimes(),
)


@settings(max_examples=200, **PROPERTY)
@given(edge_datetimes, st.integers(-1439, 1439), st.sampled_from(["str", "datetime", "space"]))
@example(dt.datetime(9999, 12, 31, 23), -300, "str")
@example(dt.datetime(1, 1, 1, 0, 30), 60, "str")
@example(dt.datetime(9999, 12, 31, 23, 59, 59, 999999), 0, "datetime")
def test_timestamp_is_accepted_exactly_when_its_utc_instant_is_in_range(local, minutes, form):
    """A local time with an offset is accepted iff its UTC instant lies in 0001..9999, and then
    converts to exactly that instant in UTC; otherwise a reject naming the range."""
    tz = dt.timezone(dt.timedelta(minutes=minutes))
    if form == "datetime":
        raw: Any = local.replace(tzinfo=tz)
    else:
        raw = local.isoformat("T" if form == "str" else " ") + _offset(minutes)
    local_us = (local.replace(tzinfo=UTC) - EPOCH) // US
    instant = local_us - minutes * 60_000_000
    conv = RowConverter(D, empty_is_null=True)
    try:
        v = conv.convert({"k": "x", "ts": raw})[NAMES.index("ts")]
    except BadValue as e:
        assert not MIN_US <= instant <= MAX_US, f"in-range {raw!r} rejected: {e}"
        assert "outside 0001-01-01..9999-12-31 UTC" in str(e)
        return
    assert MIN_US <= instant <= MAX_US
    assert v.utcoffset() == dt.timedelta(0) and (v - EPOCH) // US == instant


def test_lone_surrogate_string_is_a_reject_not_an_unstorable_value():
    """A string Arrow cannot store as UTF-8 is a reject."""
    conv = RowConverter(D, empty_is_null=False)
    try:
        row = conv.convert({"k": "\ud800", "ts": "2020-01-01"})
    except BadValue:
        return
    pa.array([row[0]], pa.string())


def test_huge_decimal_exponent_for_an_int_column_is_rejected_at_once():
    """A JSON number like 1e150000 for an int column is a reject in well under a second."""
    conv = RowConverter(D, empty_is_null=False)
    start = time.perf_counter()
    for name in ("i", "l"):
        with pytest.raises(BadValue):
            conv.convert({"k": "x", "ts": "2020-01-01", name: Decimal("1E+150000")})
    assert time.perf_counter() - start < 0.2


# -- 2. whole files at any block size -------------------------------------------------------------

# CSV text: any character but NUL (a whole-file error when planning) and lone surrogates (not
# encodable as UTF-8); lone CRs and U+FEFF included.
csv_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
csv_text = st.lists(st.one_of(csv_chars, st.sampled_from([",", '"', "\n", "\r\n", " "])),
                    max_size=12).map("".join)


@st.composite
def good_values(draw: Any) -> dict[str, str]:
    """One value per column, each in a form the row converter accepts."""
    t = draw(st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)))
    return {
        "k": draw(st.text(csv_chars, min_size=1, max_size=6)),
        "s": draw(csv_text),
        "i": str(draw(st.integers(-(2**31), 2**31 - 1))),
        "l": str(draw(st.integers(-(2**63), 2**63 - 1))),
        "d": draw(st.one_of(st.floats().map(repr), st.sampled_from(["-0.0", "1e5", ".5", "5."]))),
        "b": draw(st.sampled_from(["true", "False", "t", "F", "1", "0", "yes", "NO", "y", "n"])),
        "day": draw(st.dates()).isoformat(),
        "m": str(draw(st.decimals(-99999, 99999, places=draw(st.integers(0, 2))))),
        "w": str(draw(st.decimals(-(10**27), 10**27, places=draw(st.integers(0, 10))))),
        "ts": t.isoformat(draw(st.sampled_from(["T", " "])))
        + draw(st.sampled_from(["", "Z", "+00:00", "-05:30", "+14:00"])),
    }


def _csv_safe(v: str) -> str:
    """Hostile text for a CSV file without the inputs of known bugs: no lone CR, U+FEFF or
    NUL, no zero with a positive exponent (test_fast_path_agrees_on_zero_with_a_positive...),
    no year 0000 (test_fast_path_rejects_a_year_0000_timestamp_like_the_row_path)."""
    v = re.sub(r"\r(?!\n)", "", v).replace("\ufeff", "").replace("\x00", "")
    v = re.sub(r"^(\s*)0000-", r"\g<1>0001-", v)
    try:
        d = Decimal(v.strip())
        if d.is_finite() and d == 0 and d.as_tuple().exponent > 0:
            return "0"
    except decimal.InvalidOperation:
        pass
    return v


def _no_decimal_overflow(v: str) -> str:
    """No decimal literal of 39 digits or more (see
    test_fast_path_never_wraps_a_decimal_beyond_128_bits)."""
    mantissa = re.split("[eE]", v)[0]
    return "not a number" if sum(c.isdigit() for c in mantissa) >= 39 else v


def quote(v: str) -> str:
    return '"' + v.replace('"', '""') + '"'


BROKEN_FIELDS = ['5" screen', 'x"y', '"x"y', '"unterminated', '"', '""', '"a""b"', 'a""',
                 '" x"', '"x" ', ' "x"', '"""', '"a,b"c', '"\n"x']


@st.composite
def csv_fields(draw: Any, kind: str, good: str, broken: bool) -> str:
    """One CSV field for a column of ``kind``: its good value or a hostile one, quoted or not
    (RFC 4180 quoting unless ``broken``)."""
    choice = draw(st.integers(0, 9 if broken else 7))
    if choice < 5:
        v = good
    elif choice < 7:
        v = _csv_safe(draw(text_values))
        v = _no_decimal_overflow(v) if kind.startswith("decimal") else v
    elif choice == 7:
        v = ""
    else:
        return draw(st.sampled_from(BROKEN_FIELDS))
    if kind == "string" and not broken and draw(st.integers(0, 3)) == 0:
        v += draw(st.sampled_from(["\r", "x\ry", "\r\r\n"]))  # a lone CR, always quoted
    needs = any(c in v for c in ',"\n\r') or v[:1] == '"'
    return quote(v) if needs or draw(st.integers(0, 4)) == 0 else v


@st.composite
def csv_files(draw: Any) -> bytes:
    """A CSV file with a header row and a mix of good rows, hostile rows and blank lines;
    one in three with quoting outside RFC 4180 (``5" screen``, ``"x"y``, ...)."""
    broken = draw(st.integers(0, 2)) == 0
    header = draw(st.permutations(NAMES))[: draw(st.integers(1, NCOLS))]
    if draw(st.integers(0, 4)):
        header = sorted(set(header) | REQUIRED, key=NAMES.index)
    ends = st.sampled_from(["\n", "\r\n"])
    out = [draw(st.sampled_from(["", "\ufeff"])) + ",".join(header) + draw(ends)]
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out.append(draw(st.sampled_from(["", " ", ",,"])) + draw(ends))
            continue
        good = draw(good_values())
        fields = [draw(csv_fields(KINDS[n], good[n], broken)) for n in header]
        if kind == 1:  # a wrong field count
            fields = fields[: draw(st.integers(0, len(fields)))] + ["x"] * draw(st.integers(0, 2))
        out.append(",".join(fields) + draw(ends))
    text = "".join(out)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no newline at the end of the file
    return text.encode("utf-8")


@settings(max_examples=100, **PROPERTY)
@given(csv_files(), st.integers(1, 1 << 20))
@example(b'ts,k,s\n2020-01-01,a,5" screen\n2020-01-01,b,"x\n""y"\n2020-01-01,c,"x"y\n'
         b'2020-01-01,d,ok\n', 5)
def test_csv_any_block_size_parses_like_the_whole_file(workdir, data, seed):
    """Any CSV file, any block size (1 byte .. beyond the file): the blocks' rows concatenated
    are exactly the one-block rows and exactly read_records + RowConverter over the whole
    file; every record is one GOOD or REJECT row; nothing escapes."""
    path = put(workdir, ".csv", data)
    check_split_equals_whole(path, "csv", any_size(seed, data), 16 << 20)


MAX_JSON_RECORD = 4096
json_chars = st.characters(blacklist_categories=("Cs",))


def _json_literal(v: str, kind: str) -> str:
    """A good CSV-form value as a JSON literal for a column of ``kind``."""
    if kind in ("int", "long"):
        return v
    if kind.startswith("decimal"):
        return v  # a JSON number literal (parsed as Decimal by the reader)
    if kind == "boolean":
        return "true" if v.lower() in ("true", "t", "1", "yes", "y") else "false"
    if kind == "double":
        return v if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", v) else json.dumps(v)
    return json.dumps(v, ensure_ascii=False)


HOSTILE_JSON = st.one_of(
    st.sampled_from(["null", "true", "[1, 2]", '{"a": 1}', "1e400", "-1e400", "NaN",
                     "Infinity", "-Infinity", "9" * 30, "1.5", "-0", "0.000", "1E+5000", '""',
                     '"\\u0000"', '"\\ud83d\\ude00"', '"\\u00e9"', "1e-400", "[]", "{}"]),
    st.integers(4301, 6000).map(lambda n: "9" * n),  # beyond Python's int digits limit
    st.integers(1000, 3000).map(lambda n: "[" * n + "]" * n),  # nested too deeply
    st.integers(1, 50).map(lambda n: "[" * n + "]" * n),
    st.text(json_chars, max_size=20).map(lambda s: json.dumps(s, ensure_ascii=False)),
    text_values.map(json.dumps),
)
INVALID_JSON_LINES = ["{", '{"k": }', "[1]", '"x"', "1", "nul", "{'k': 1}", '{"k": 1}}', "\\",
                      "[" * 1500, '{"k": "a" "b"}', '{"k": "\x01"}', "{}garbage", "\x7f"]


@st.composite
def json_files(draw: Any) -> bytes:
    """JSON Lines: a good first record, then good, hostile, invalid, blank and over-long lines."""
    ends = st.sampled_from(["\n", "\r\n"])

    def obj(hostile: bool) -> str:
        good = draw(good_values())
        parts = []
        for name, kind, _ in COLUMNS:
            if hostile and draw(st.integers(0, 3)) == 0:
                parts.append(f'"{name}": {draw(HOSTILE_JSON)}')
            elif draw(st.integers(0, 7)):
                parts.append(f'"{name}": {_json_literal(good[name], kind)}')
        return "{" + ", ".join(draw(st.permutations(parts))) + "}"

    lines = [draw(st.sampled_from(["", "\ufeff"])) + obj(False) + draw(ends)]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 9))
        if kind < 4:
            line = obj(kind >= 2)
        elif kind < 6:
            line = draw(st.sampled_from(INVALID_JSON_LINES))
        elif kind == 6:
            line = draw(st.sampled_from(["", " ", "\t"]))
        elif kind == 7:  # over-long (never the first line: see test_over_long_first_json...)
            n = draw(st.integers(MAX_JSON_RECORD - 8, 3 * MAX_JSON_RECORD))
            line = '{"k": "' + "x" * n + '", "ts": "2020-01-01"}'
        else:
            line = obj(True)
        lines.append(line + draw(ends))
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text.encode("utf-8")


@settings(max_examples=80, **PROPERTY)
@given(json_files(), st.integers(1, 1 << 20))
def test_json_any_block_size_parses_like_the_whole_file(workdir, data, seed):
    """Any JSON Lines file (invalid JSON, deep nesting, huge ints, NaN, over-long lines), any
    block size: rows identical to one block and to read_records + RowConverter; nothing
    escapes; an over-long line is a reject with the max_record_bytes reason."""
    path = put(workdir, ".json", data)
    rows = check_split_equals_whole(path, "json", any_size(seed, data), MAX_JSON_RECORD)
    assert not isinstance(rows, tuple)
    lines = data.split(b"\n")
    for line, kind, _, reason, _ in rows:
        if len(lines[line - 1].rstrip(b"\r")) > MAX_JSON_RECORD:
            assert kind == REJECT and "max_record_bytes" in reason


def test_lone_surrogate_in_a_json_string_is_one_reject(workdir):
    """The line with the unstorable string is a reject; the other lines load."""
    data = b'{"k": "a", "ts": "2020-01-01"}\n{"k": "\\ud800", "ts": "2020-01-01"}\n'
    path = put(workdir, ".json", data)
    rows = parse_plan(path, "json", D, BIG)
    assert [(r[0], r[1]) for r in rows] == [(1, GOOD), (2, REJECT)]


def test_over_long_first_json_line_is_a_reject_and_the_rest_loads(workdir):
    """An over-long first record is a reject like any other; the following records load."""
    data = ('{"k": "' + "x" * 100 + '", "ts": "2020-01-01"}\n'
            '{"k": "a", "ts": "2020-01-01"}\n').encode()
    path = put(workdir, ".json", data)
    rows = parse_plan(path, "json", table(BIG, 64), BIG)
    assert not isinstance(rows, tuple), rows
    assert [(r[0], r[1]) for r in rows] == [(1, REJECT), (2, GOOD)]


# -- over-long CSV records --------------------------------------------------------------------------


@settings(max_examples=30, **PROPERTY)
@given(st.integers(31, 300), st.integers(0, 3), st.booleans())
@example(50, 1, False)
def test_over_long_csv_line_is_a_reject_and_the_others_load(workdir, length, position, crlf):
    """A CSV line longer than max_record_bytes is a reject wherever it is; the others load."""
    end = "\r\n" if crlf else "\n"
    lines = ["a,2020-01-01T00:00:00Z"] * 4
    lines[position] = "b" * length + ",2020-01-01T00:00:00Z"
    data = ("k,ts" + end + end.join(lines) + end).encode()
    path = put(workdir, ".csv", data)
    rows = parse_plan(path, "csv", table(BIG, 30), BIG)  # the good lines have 22 bytes
    kinds = [(r[0], r[1]) for r in rows]
    assert kinds == [(n + 2, REJECT if n == position else GOOD) for n in range(4)]


def test_multi_line_csv_record_longer_than_max_record_bytes_is_a_reject(workdir):
    """A quoted field spanning many short lines still makes a record longer than the limit."""
    data = ('k,s,ts\nk,"' + "xxxxxxxxxx\n" * 10 + '",2020-01-01\nb,,2020-01-01\n').encode()
    path = put(workdir, ".csv", data)
    rows = parse_plan(path, "csv", table(BIG, 20), BIG)
    assert [(r[0], r[1]) for r in rows] == [(2, REJECT), (13, GOOD)]


@settings(max_examples=20, **PROPERTY)
@given(st.integers(40, 120), st.integers(1, 1 << 20))
@example(40, 50)
def test_over_long_csv_line_with_a_quote_splits_like_the_whole_file(workdir, length, seed):
    """Files with an over-long line holding an odd number of quotes parse the same at any
    block size."""
    data = ('s,k,ts\nq,"' + "x" * length + '\n"\nP,Q\n",z\nw,v"\n').encode()
    size = any_size(seed, data)
    path = put(workdir, ".csv", data)
    assert parse_plan(path, "csv", table(size, 30), size) == parse_plan(
        path, "csv", table(BIG, 30), BIG)


# -- 3. the fast CSV path against the row path ---------------------------------------------------------


@st.composite
def near_valid(draw: Any, kind: str) -> str:
    """A value in or near a form both paths accept, for a column of ``kind``."""
    if kind in ("int", "long"):
        return draw(st.one_of(
            st.integers(-(2**64), 2**64).map(str), st.from_regex(r"\A[+-]?0{0,30}[0-9]{1,25}\Z"),
            st.sampled_from(["-0", "+0", "2147483648", "-2147483649", "9223372036854775808",
                             " 1", "1 ", "9" * 5000])))
    if kind == "double":
        return draw(st.one_of(number_text.map(str.strip), st.floats().map(repr),
                              st.sampled_from(["1e400", "-1e400", "1e-400", "9" * 5000, "0e0"])))
    if kind.startswith("decimal"):
        return _csv_safe(draw(st.one_of(
            number_text.map(str.strip),
            st.decimals(-(10**8), 10**8, places=draw(st.integers(0, 12))).map(str),
            st.sampled_from(["1e2", "1E-2", "-0.000", "99999.995", "1e5", "123456.78"]))))
    if kind == "boolean":
        return draw(st.sampled_from(["true", "TRUE", "tRuE", "t", "y", "yes", "1", "0", "n",
                                     "no", "f", "false", "maybe", "True ", "2"]))
    if kind == "date":
        y = draw(st.sampled_from(["0000", "0001", "1900", "2000", "2024", "9999"]))
        md = draw(st.sampled_from(["01-01", "02-29", "02-30", "12-31", "13-01", "04-31", "00-10"]))
        return f"{y}-{md}"
    if kind == "timestamp":
        return draw(st.one_of(iso_timestamps(), st.sampled_from(EDGE_TIMESTAMPS[:7]),
                              good_values().map(lambda g: g["ts"]))).strip()
    return _csv_safe(draw(csv_text))


def _no_year_zero(v: str) -> str:
    """See test_fast_path_rejects_a_year_0000_timestamp_like_the_row_path."""
    return "0001" + v[4:] if v.startswith("0000") else v


CLEAN = {
    "s": st.text(st.characters(blacklist_categories=("Cs",),
                               blacklist_characters="\r\n\ufeff\x00"), max_size=8),
    "i": st.integers(-(2**31), 2**31 - 1).map(str),
    "l": st.integers(-(2**63), 2**63 - 1).map(str),
    "d": st.floats(allow_nan=False).map(repr),
    "b": st.sampled_from(["true", "false", "t", "f", "1", "0"]),
    "day": st.dates().map(dt.date.isoformat),
    "m": st.decimals(-99999, 99999, places=2).map(str),
    "w": st.decimals(-(10**27), 10**27, places=10).map(str),
    "ts": st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)).map(
        lambda t: t.isoformat() + "Z"),
}


@st.composite
def fast_blocks(draw: Any) -> bytes:
    """A CSV block of clean values (the fast path's home ground) with some values in odd,
    near-valid or invalid forms."""
    rows = []
    for r in range(draw(st.integers(1, 4))):
        values = [f"k{r}"]
        for name, kind, _ in COLUMNS[1:]:
            tricky = draw(st.integers(0, 5)) == 0
            v = draw(near_valid(kind)) if tricky else draw(CLEAN[name])
            values.append(_no_year_zero(v) if kind == "timestamp" else v)
        rows.append(",".join(quote(v) if any(c in v for c in ',"\n') else v for v in values))
    return (",".join(NAMES) + "\n" + "\n".join(rows) + "\n").encode()


@settings(max_examples=120, **PROPERTY)
@given(fast_blocks())
def test_fast_path_equals_row_path_on_the_same_block(workdir, data):
    """When the vectorized path returns a table it is the row path's table, value for value
    (ints with signs and leading zeros, doubles and decimals in exponent forms, 5,000 digits,
    boolean words, impossible dates, timestamps with odd offsets and years 1 and 9999)."""
    fast, slow = fast_and_slow(workdir, data)
    event("fast path taken" if fast is not None else "fast path declined")
    if fast is not None:
        assert fast == slow


def fast_and_slow(workdir: Path, data: bytes) -> tuple[Any, Any]:
    path = put(workdir, ".csv", data)
    (block,) = plan_file(path, "csv", D, BIG, 0)
    fast = fast_csv_block(D, block)
    slow = pa.Table.from_batches(list(parse_rows(D, block, 10_000)))
    return (None if fast is None else rows_of(fast.to_batches(), D)), rows_of(slow.to_batches(), D)


@pytest.mark.parametrize("value", ["0E+5", "0e5", "-0E+10", "0.0E+7"])
def test_fast_path_agrees_on_zero_with_a_positive_exponent(workdir, value):
    """Both paths give the same row for a zero written with a positive exponent."""
    fast, slow = fast_and_slow(workdir, f"k,m,ts\na,{value},2020-01-01T00:00:00Z\n".encode())
    assert fast is None or fast == slow


@pytest.mark.parametrize("value", ["340282366920938463463374607431768211457", "9" * 128,
                                   "9" * 125 + "e3", "340282366920938463463374607431768211456"])
def test_fast_path_never_wraps_a_decimal_beyond_128_bits(workdir, value):
    """A decimal literal too big for 128 bits is a reject on both paths, never a wrapped value."""
    fast, slow = fast_and_slow(workdir, f"k,m,ts\na,{value},2020-01-01T00:00:00Z\n".encode())
    assert fast is None or fast == slow


@pytest.mark.parametrize("header,first", [("k,ts", "\ufeffk1,2020-01-01T00:00:00Z"),
                                          ("i,k,ts", "\ufeff5,k1,2020-01-01T00:00:00Z")])
def test_fast_path_keeps_a_leading_bom_of_a_block(workdir, header, first):
    """A U+FEFF that starts a block's first value is data, on both paths."""
    fast, slow = fast_and_slow(workdir, f"{header}\n{first}\n".encode())
    assert fast is None or fast == slow


@pytest.mark.parametrize("value", ["0000-12-31T23:00:00-05:00",
                                   "0000-12-31 23:59:59.999999-00:01"])
def test_fast_path_rejects_a_year_0000_timestamp_like_the_row_path(workdir, value):
    """A timestamp written in year 0000 is the same on both paths (a reject on the row path)."""
    fast, slow = fast_and_slow(workdir, f"k,ts\na,{value}\n".encode())
    assert fast is None or fast == slow


# -- 4. record starts against Python's csv reader ----------------------------------------------------


def python_record_starts(data: bytes, data_start: int) -> set[int]:
    """Byte offsets where Python's csv reader (fed the file's lines split at LF, as the blocks
    are read) starts a record, errors included, over the whole file after the header."""
    lines = data[data_start:].split(b"\n")
    pieces = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    offsets = [data_start]
    for p in pieces:
        offsets.append(offsets[-1] + len(p))
    reader = csv.reader((p.decode() for p in pieces), strict=True)
    starts = {data_start}
    while True:
        try:
            next(reader)
        except StopIteration:
            return starts
        except csv.Error:
            pass
        starts.add(offsets[reader.line_num])


def check_record_starts(workdir: Path, body: bytes, block_size: int) -> None:
    """record_starts on "h\\n" + body against the csv reader's record starts."""
    data = b"h\n" + body
    path = put(workdir, ".csv", data)
    starts = record_starts(path, 2, len(data), block_size, quoted=True)
    event("not split" if starts is None else f"split points: {min(len(starts), 2)} (2: 2+)")
    if starts is None:  # only for quoting parity cannot follow, or a lone CR
        buf = np.frombuffer(data[2:], dtype=np.uint8)
        lone_cr = any(data[i] == 13 and data[i + 1:i + 2] != b"\n" for i in range(2, len(data)))
        assert lone_cr or not quotes_follow_rfc4180(buf, np.flatnonzero(buf == 34), -1, -1, 0)
        return
    real = sorted(python_record_starts(data, 2))
    assert {p for p, _ in starts} <= set(real), "every block starts where the csv reader does"
    expected: list[tuple[int, int]] = []
    for boundary in range(2 + block_size, len(data), block_size):
        p = next((s for s in real if s >= boundary), None)
        if p is not None and p < len(data) and (not expected or p > expected[-1][0]):
            expected.append((p, data[:p].count(b"\n") + 1))
    assert starts == expected


quoted_field = st.lists(st.sampled_from([b"a", b",", b"\n", b"\r\n", b'""', b"\xc3\xa9"]),
                       max_size=6).map(lambda parts: b'"' + b"".join(parts) + b'"')


@st.composite
def csv_bodies(draw: Any, lone_cr: bool = False) -> bytes:
    """CSV rows of plain and quoted fields, LF or CRLF ends; one in four with stray quotes
    (``5" screen``, ``"x"y``), and lone CRs when ``lone_cr``."""
    fields = [st.sampled_from([b"", b"a", b"\xc3\xa9"]), quoted_field]
    if draw(st.integers(0, 3)) == 0:
        fields.append(st.sampled_from([b'"', b'x"y', b'"x"y', b'5" screen', b'"a""']))
    if lone_cr:
        fields.append(st.sampled_from([b"a\r", b"\r", b"\ra", b'"a"\r']))
    rows = draw(st.lists(st.lists(st.one_of(fields), min_size=1, max_size=4).map(b",".join),
                         min_size=1, max_size=12))
    return b"".join(r + draw(st.sampled_from([b"\n", b"\r\n", b"\n\n"])) for r in rows)


@settings(max_examples=200, **PROPERTY)
@given(csv_bodies(), st.integers(0, 1 << 20))
@example(b'a,"b\nc",d\n"x""\n"\ne\n', 2)
def test_record_starts_are_the_csv_readers_record_starts(workdir, body, seed):
    """Random CSV bytes (quoted fields with commas, doubled quotes, LF and CRLF inside; stray
    quotes): a split puts each block start at the csv reader's first record start at or after
    each boundary; refusing to split happens only for quoting outside RFC 4180."""
    check_record_starts(workdir, body, 1 + seed % max(1, len(body) // 2))


@settings(max_examples=100, **PROPERTY)
@given(csv_bodies(lone_cr=True), st.integers(0, 1 << 20))
@example(b'a\r,"x\n"\nP,Q\n",z\nw,v"\n', 4)
def test_lone_cr_in_an_unquoted_field_does_not_misplace_record_starts(workdir, body, seed):
    """Random CSV bytes with lone CRs: every split point is a record start of the csv reader."""
    check_record_starts(workdir, body, 1 + seed % max(1, len(body) // 2))


# -- 5. Parquet with hostile typed values ----------------------------------------------------------

PQ_COLUMNS = ("k", "i", "d", "day", "m", "ts")


@st.composite
def parquet_rows(draw: Any) -> tuple[dict[str, list[Any]], list[bool]]:
    """Columns of Arrow-typed values, and per row whether every value is good."""
    n = draw(st.integers(1, 40))
    cols: dict[str, list[Any]] = {c: [] for c in PQ_COLUMNS}
    good: list[bool] = []
    for _ in range(n):
        bad = draw(st.sets(st.sampled_from(["k", "i", "day", "m", "ts"]), max_size=2)) if draw(
            st.integers(0, 2)) == 0 else set()
        cols["k"].append(None if "k" in bad else draw(st.text(max_size=5)))
        cols["i"].append(draw(st.one_of(st.integers(2**31, 2**63 - 1),
                                        st.integers(-(2**63), -(2**31) - 1)))
                         if "i" in bad else draw(st.one_of(st.none(),
                                                           st.integers(-(2**31), 2**31 - 1))))
        cols["d"].append(draw(st.one_of(st.none(), st.floats())))
        cols["day"].append(draw(st.one_of(st.integers(2932897, 2**31 - 1),
                                          st.integers(-(2**31), -719163)))
                           if "day" in bad else draw(st.integers(-719162, 2932896)))
        cols["m"].append(draw(st.one_of(
            st.decimals(Decimal("100000"), Decimal("1e27"), places=2),
            st.decimals(-1, 1, places=10).filter(lambda x: x != x.quantize(Decimal("0.01")))))
            if "m" in bad else draw(st.decimals(-99999, 99999, places=2)))
        cols["ts"].append(draw(st.one_of(st.integers(MAX_US + 1, 2**63 - 1),
                                         st.integers(-(2**63), MIN_US - 1), st.none()))
                          if "ts" in bad else draw(st.integers(MIN_US, MAX_US)))
        good.append(not bad)
    return cols, good


@settings(max_examples=40, **PROPERTY)
@given(parquet_rows(), st.integers(1, 15), st.integers(1, 4000), st.sampled_from([None, "UTC"]))
def test_parquet_hostile_values_are_rejects(workdir, rows, group_rows, block_size, tz):
    """Parquet values Python cannot hold (years beyond 9999 or before 1), decimals that do not
    fit, ints out of range, nulls in required columns: each such row is a reject with a reason,
    every other row loads; blocks of row groups parse like one block; nothing escapes."""
    cols, good = rows
    t = pa.table({
        "k": pa.array(cols["k"], pa.string()),
        "i": pa.array(cols["i"], pa.int64()),
        "d": pa.array(cols["d"], pa.float64()),
        "day": pa.array(cols["day"], pa.int32()).cast(pa.date32()),
        "m": pa.array(cols["m"], pa.decimal128(38, 10)),
        "ts": pa.array(cols["ts"], pa.int64()).cast(pa.timestamp("us", tz=tz)),
    })
    path = str(workdir / f"f{next(_names)}.parquet")
    pq.write_table(t, path, row_group_size=group_rows)
    whole = parse_plan(path, "parquet", table(BIG), BIG)
    split = parse_plan(path, "parquet", table(block_size), block_size)
    assert split == whole
    assert [r[0] for r in whole] == list(range(1, len(good) + 1))
    for (line, kind, _, reason, values), ok in zip(whole, good):
        assert kind == (GOOD if ok else REJECT), (line, reason)
        if ok:
            assert values[NAMES.index("ts")] == norm(EPOCH + cols["ts"][line - 1] * US)
        else:
            assert reason.startswith("column ")


@pytest.mark.parametrize("tz,micros", [("+05:00", 253402297200_000000),
                                       ("-05:00", -62135593200_000000)])
def test_parquet_timestamp_in_range_loads_whatever_the_column_time_zone(workdir, tz, micros):
    """An instant within 0001..9999 UTC loads from a Parquet column with any time zone."""
    t = pa.table({"k": ["a"], "ts": pa.array([micros], pa.int64()).cast(pa.timestamp("us", tz))})
    path = str(workdir / f"f{next(_names)}.parquet")
    pq.write_table(t, path)
    ((_, kind, _, reason, values),) = parse_plan(path, "parquet", D, BIG)
    assert kind == GOOD, reason
    assert values[NAMES.index("ts")] == norm(EPOCH + micros * US)


@pytest.mark.parametrize("max_record", [64, 2000])
def test_a_quoted_field_past_the_field_limit_is_one_reject_and_injects_no_rows(workdir, max_record):
    """A quoted field of over-long lines (64), or of short lines but longer than the reader's
    field limit (2000: the limit is then 128 KiB), is one reject; none of its lines is read as a
    record, and the rows after it load."""
    filler = ("x" * 1000 + "\n") * 200  # 200 KB inside the quotes
    data = ('k,s,ts\na,ok,2020-01-01\nb,"' + filler + '99,injected\n' + filler
            + '",2020-01-01\nc,after,2020-01-01\n').encode()
    path = put(workdir, ".csv", data)
    for size in (BIG, 50_000):
        rows = parse_plan(path, "csv", table(size, max_record), size)
        assert [(r[0], r[1]) for r in rows] == [(2, GOOD), (3, REJECT), (405, GOOD)], size
