"""The vectorized CSV path of block parsing gives exactly what the row-by-row path gives, and is
taken for clean data; any value it cannot vouch for sends the block to the row-by-row path."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.definitions import parse_definition
from lakehouse.ingest.blocks import plan_file
from lakehouse.ingest.fast_csv import fast_csv_block
from lakehouse.ingest.parse import parse_block, parse_rows

D = parse_definition({
    "name": "t",
    "columns": [
        {"name": "k", "type": "string", "nullable": False},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "d", "type": "double"},
        {"name": "m", "type": "decimal(10,3)"},
        {"name": "b", "type": "boolean"},
        {"name": "day", "type": "date"},
        {"name": "s", "type": "string"},
        {"name": "ts", "type": "timestamp", "nullable": False},
    ],
    "primary_key": ["k"],
    "event_time": "ts",
}, "t.yaml")
HEADER = "k,i,l,d,m,b,day,s,ts"

ints = st.one_of(st.integers(-2**31, 2**31 - 1).map(str), st.just("007"), st.just("-0"), st.just(""))
longs = st.one_of(st.integers(-2**63, 2**63 - 1).map(str), st.just(""))
doubles = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["-0.0", "0.0", "1e5", "1E-3", ".5", "5.", "-.25", "123456789.123456789", ""]))
decimals = st.one_of(st.decimals(min_value=-9999999, max_value=9999999, places=3).map(str),
                     st.sampled_from(["1.5", "-0.000", "2", "1e2", ""]))
bools = st.sampled_from(["true", "false", "TRUE", "False", "t", "f", "1", "0", "yes", "no", "Y", "n", ""])
days = st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31)).map(lambda d: d.isoformat())
texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\"\x00"), max_size=8)


@st.composite
def timestamps(draw) -> str:
    t = draw(st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2200, 1, 1)))
    sep = draw(st.sampled_from(["T", " "]))
    frac = draw(st.sampled_from(["", ".5", ".123", ".123456"]))
    zone = draw(st.sampled_from(["Z", "", "+02:00", "-05:30", "+00:00"]))
    return t.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + frac + zone


def _q(s: str) -> str:
    return '"' + s.replace('"', '""') + '"' if ("," in s or '"' in s) else s


@st.composite
def rows(draw) -> list[str]:
    n = draw(st.integers(1, 30))
    out = []
    for r in range(n):
        vals = [f"k{r}", draw(ints), draw(longs), draw(doubles), draw(decimals), draw(bools), draw(days),
                draw(texts), draw(timestamps())]
        out.append(",".join(_q(v) for v in vals))
    return out


def _table(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows())
def test_fast_path_equals_row_by_row(tmp_path, lines):
    path = tmp_path / "f.csv"
    path.write_text(HEADER + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (block,) = plan_file(str(path), "csv", D, 1 << 30, 0)
    fast = fast_csv_block(D, block)
    slow = _table(parse_rows(D, block, 10_000))
    if fast is not None:
        assert fast.to_pylist() == slow.to_pylist()
    else:  # the fast path declined: some value needed the row converter (a reject or an odd form)
        assert _table(parse_block(D, block)).to_pylist() == slow.to_pylist()


def test_fast_path_is_taken_for_clean_data(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text(HEADER + "\n" + "\n".join(
        f"k{i},{i},{i * 10**12},{i / 3},{i}.125,{'true' if i % 2 else 'f'},2026-11-2{i % 9},x{i},2026-11-20 10:00:0{i % 10}"
        for i in range(100)) + "\n")
    (block,) = plan_file(str(path), "csv", D, 1 << 30, 0)
    fast = fast_csv_block(D, block)
    assert fast is not None and fast.num_rows == 100
    assert fast.to_pylist() == _table(parse_rows(D, block, 10_000)).to_pylist()


@pytest.mark.parametrize("bad", [
    "k1,+5,,,,,,,2026-11-20T10:00:00Z",          # a form only the row converter accepts
    "k1,x,,,,,,,2026-11-20T10:00:00Z",           # a reject
    "k1,,,nan,,,,,2026-11-20T10:00:00Z",          # a float word
    "k1,,,,1.2345,,,,2026-11-20T10:00:00Z",       # too many decimal places: a reject
    ",,,,,,,,2026-11-20T10:00:00Z",               # null key: a reject
    "k1,,,,,,,,2026-11-20T10:00",                 # a timestamp without seconds
    "k1,,,,,,2026-02-30,,2026-11-20T10:00:00Z",   # not a date
    "k1,,,,,,,",                                  # too few fields
])
def test_odd_values_take_the_row_by_row_path(tmp_path, bad):
    path = tmp_path / "f.csv"
    path.write_text(HEADER + "\nk0,1,2,3.0,4.5,true,2026-11-20,x,2026-11-20T10:00:00Z\n" + bad + "\n")
    (block,) = plan_file(str(path), "csv", D, 1 << 30, 0)
    assert fast_csv_block(D, block) is None
    assert repr(_table(parse_block(D, block)).to_pylist()) == repr(_table(parse_rows(D, block, 10_000)).to_pylist())


def test_an_unexpected_failure_is_a_file_error_not_an_exception(tmp_path):
    """Invariant 7: whatever breaks while a block is read (here: the path became a folder), the
    block yields one file error with the reason, so the file is failed and the others go on."""
    from lakehouse.ingest.blocks import Block
    from lakehouse.staging import FILE_ERROR, KIND_COLUMN, REASON_COLUMN

    folder = tmp_path / "was_a_file.csv"
    folder.mkdir()
    block = Block(0, str(folder), "csv", 0, 10, 100, 2, ("trip_id", "event_time"))
    out = pa.Table.from_batches(list(parse_block(D, block)))
    assert out.column(KIND_COLUMN).to_pylist() == [FILE_ERROR]
    assert "was_a_file.csv" in out.column(REASON_COLUMN)[0].as_py()
