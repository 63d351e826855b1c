"""Delta file statistics the one-pass archive writes itself (lakehouse/archive/stats.py): every
bound is a bound of every value of the file, for every class of value (negative and pre-1000
instants with microseconds, NaN and infinities, long and non-ASCII strings, nulls, empty
batches), exact where Delta's own writer is exact, and the JSON is what an add action holds."""

from __future__ import annotations

import datetime as dt
import json
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.archive.stats import STRING_PREFIX, FileStats

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
MICROS = st.integers(int((dt.datetime(1, 1, 2, tzinfo=UTC) - EPOCH).total_seconds() * 1e6),
                     int((dt.datetime(9999, 12, 30, tzinfo=UTC) - EPOCH).total_seconds() * 1e6))
COLUMNS = {
    "i": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "l": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "f": (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    "g": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False)),
    "s": (pa.string(), st.text(max_size=3 * STRING_PREFIX)),
    "t": (pa.timestamp("us", tz="UTC"), MICROS),
    "d": (pa.date32(), st.dates()),
    "b": (pa.bool_(), st.booleans()),
}


def _micros_of(text: str) -> int:
    """An instant of the statistics (``YYYY-MM-DDTHH:MM:SS.mmmZ``) in microseconds since the epoch."""
    t = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (t - EPOCH) // dt.timedelta(microseconds=1)


def _value(name: str, v):
    if name == "t":
        return pa.scalar(v, pa.int64()).cast(pa.timestamp("us", tz="UTC")).as_py()
    return v


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_bound_holds_for_every_value_of_the_file(data) -> None:
    batches = data.draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    types = {name: t for name, (t, _) in COLUMNS.items()}
    stats = FileStats(types)
    values: dict[str, list] = {name: [] for name in COLUMNS}
    for n in batches:
        cols = {}
        for name, (t, strategy) in COLUMNS.items():
            vs = data.draw(st.lists(st.one_of(st.none(), strategy), min_size=n, max_size=n))
            values[name] += vs
            cols[name] = pa.array([None if v is None else _value(name, v) for v in vs], t)
        stats.add(pa.table(cols))
    doc = json.loads(stats.json())
    assert doc["numRecords"] == sum(batches)
    assert doc["nullCount"] == {name: sum(v is None for v in vs) for name, vs in values.items()}
    for name, vs in values.items():
        present = [v for v in vs if v is not None]
        lo, hi = doc["minValues"].get(name), doc["maxValues"].get(name)
        if name == "b" or not present:
            assert lo is None and hi is None
            continue
        if name == "f" and any(not math.isfinite(v) for v in present):
            assert lo is None and hi is None  # NaN and infinities: no bounds
            continue
        if name == "t":
            assert _micros_of(lo) <= min(present) and max(present) <= _micros_of(hi)
            assert min(present) - _micros_of(lo) < 1000 and _micros_of(hi) - max(present) < 1000
            continue
        if name == "d":
            assert (lo, hi) == (min(present).isoformat(), max(present).isoformat())
            continue
        if name == "s":
            assert lo == min(present)[:STRING_PREFIX] and lo <= min(present)
            assert hi == max(present) if len(max(present)) <= STRING_PREFIX else hi is None
            continue
        assert (lo, hi) == (min(present), max(present))  # integers and finite floats: exact


def test_instants_before_the_year_1000_and_before_1970_keep_four_digit_years() -> None:
    t = [dt.datetime(999, 3, 4, 5, 6, 7, 891011, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999001, tzinfo=UTC)]
    stats = FileStats({"t": pa.timestamp("us", tz="UTC")})
    stats.add(pa.table({"t": pa.array(t, pa.timestamp("us", tz="UTC"))}))
    doc = stats.as_dict()
    assert doc["minValues"] == {"t": "0999-03-04T05:06:07.891Z"}
    assert doc["maxValues"] == {"t": "1970-01-01T00:00:00.000Z"}  # rounded up to the next millisecond


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamps_of_any_unit_are_bounded_in_milliseconds(unit: str) -> None:
    stats = FileStats({"t": pa.timestamp(unit, tz="UTC")})
    stats.add(pa.table({"t": pa.array([dt.datetime(2026, 11, 18, 1, 2, 3, tzinfo=UTC)], pa.timestamp(unit, tz="UTC"))}))
    assert stats.as_dict()["minValues"] == stats.as_dict()["maxValues"] == {"t": "2026-11-18T01:02:03.000Z"}


def test_a_file_of_no_rows_and_a_column_of_nulls_have_counts_and_no_bounds() -> None:
    stats = FileStats({"a": pa.int64(), "s": pa.string()})
    assert stats.as_dict() == {"numRecords": 0, "minValues": {}, "maxValues": {}, "nullCount": {"a": 0, "s": 0}}
    stats.add(pa.table({"a": pa.array([None, None], pa.int64()), "s": pa.array(["x", None])}))
    assert stats.as_dict() == {"numRecords": 2, "minValues": {"s": "x"}, "maxValues": {"s": "x"},
                               "nullCount": {"a": 2, "s": 1}}
