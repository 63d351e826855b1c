"""Pure tests for listing a landing directory (lakehouse/ingest/scanner.py): which files count,
when a file is complete, and the time a file stands for. No Spark."""

from __future__ import annotations

import copy
import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.definitions import IngestSettings, parse_definition
from lakehouse.errors import InputError
from lakehouse.ingest.scanner import Listed, implied_time, is_complete, list_source

REPO = Path(__file__).resolve().parents[1]
SOURCE = "tables/trips.yaml"
BASE: dict[str, Any] = yaml.safe_load((REPO / SOURCE).read_text(encoding="utf-8"))
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
NAMED = {
    "sort_field": "TIME_IN_FILENAME",
    "filename_time": {"regex": r"trips_(\d{8}T\d{4})", "format": "%Y%m%dT%H%M"},
    "pattern": r"^trips_.*\.csv$",
}


def ingest_settings(**ingest: Any) -> IngestSettings:
    data = copy.deepcopy(BASE)
    data["ingest"] = ingest
    return parse_definition(data, SOURCE).ingest


def touch(folder: Path, name: str, content: bytes = b"x", mtime_ns: int | None = None) -> Path:
    p = folder / name
    p.write_bytes(content)
    if mtime_ns is not None:
        os.utime(p, ns=(mtime_ns, mtime_ns))
    return p


def from_ns(ns: int) -> dt.datetime:
    """The expected implied time: the mtime truncated to microseconds, in UTC (integer arithmetic)."""
    return EPOCH + dt.timedelta(microseconds=ns // 1000)


# -- list_source --------------------------------------------------------------------------------


def test_list_source_keeps_matching_visible_files_sorted_by_name(tmp_path):
    for name in ["trips_b.csv", "trips_a.csv", "trips_c.csv.tmp", ".trips_h.csv", "_trips_u.csv",
                 "other.csv", "TRIPS_x.csv", "trips_ü.csv"]:
        touch(tmp_path, name)
    (tmp_path / "trips_dir.csv").mkdir()
    touch(tmp_path / "trips_dir.csv", "trips_inner.csv")
    listed = list_source(str(tmp_path), ingest_settings(**NAMED))
    assert [f.name for f in listed] == ["trips_a.csv", "trips_b.csv", "trips_ü.csv"]


def test_list_source_without_pattern_takes_every_visible_file(tmp_path):
    for name in ["b.json", "a.csv", "c", ".hidden", "_inprogress.csv"]:
        touch(tmp_path, name)
    (tmp_path / "sub").mkdir()
    assert [f.name for f in list_source(str(tmp_path), ingest_settings())] == ["a.csv", "b.json", "c"]


def test_list_source_pattern_is_searched_not_anchored(tmp_path):
    for name in ["x_trips_1.csv", "trips.json", "a.csv"]:
        touch(tmp_path, name)
    got = list_source(str(tmp_path), ingest_settings(pattern=r"trips"))
    assert [f.name for f in got] == ["trips.json", "x_trips_1.csv"]


def test_list_source_reports_size_and_mtime_ns(tmp_path):
    ns = 1_700_000_000_123_456_789
    touch(tmp_path, "trips_20240101T0000.csv", b"hello world", mtime_ns=ns)
    (f,) = list_source(str(tmp_path), ingest_settings(**NAMED))
    assert f == Listed("trips_20240101T0000.csv", 11, ns)


def test_list_source_follows_symlinks_to_files_only(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    target = touch(tmp_path, "real.csv", b"abc")
    (src / "link.csv").symlink_to(target)
    (tmp_path / "d").mkdir()
    (src / "dirlink.csv").symlink_to(tmp_path / "d")
    (src / "dangling.csv").symlink_to(tmp_path / "missing.csv")
    # a link out of the landing directory is listed, refused (nothing about its target), and
    # read only with follow_symlinks
    (listed,) = list_source(str(src), ingest_settings())
    assert listed.name == "link.csv" and "outside the landing directory" in (listed.refused or "")
    assert "real.csv" not in listed.refused and listed.size != 3
    followed = list_source(str(src), IngestSettings(follow_symlinks=True))
    assert [(f.name, f.size, f.refused) for f in followed] == [("link.csv", 3, None)]


def test_a_file_name_that_is_not_utf8_is_refused_under_a_printable_name(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with open(os.path.join(os.fsencode(src), b"caf\xe9.csv"), "wb") as f:
        f.write(b"x")
    (listed,) = list_source(str(src), ingest_settings())
    assert listed.name == "caf\\xe9.csv" and "not UTF-8" in (listed.refused or "")


def test_list_source_empty_directory(tmp_path):
    assert list_source(str(tmp_path), ingest_settings()) == []


def test_list_source_missing_directory_is_an_input_error(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(InputError) as ei:
        list_source(missing, ingest_settings())
    assert str(ei.value) == f"{missing}: no such directory"


def test_list_source_on_a_file_is_an_input_error(tmp_path):
    p = touch(tmp_path, "a.csv")
    with pytest.raises(InputError, match="no such directory"):
        list_source(str(p), ingest_settings())


# -- is_complete --------------------------------------------------------------------------------

NS = 1_700_000_000_000_000_000
F = Listed("trips_a.csv", 100, NS)
MTIME = from_ns(NS)


def test_listed_mtime_is_utc_microseconds():
    assert Listed("a", 0, 1_700_000_000_123_456_789).mtime == dt.datetime(2023, 11, 14, 22, 13, 20, 123456,
                                                                          tzinfo=UTC)


@settings(max_examples=200, deadline=None)
@given(ns=st.integers(-2 * 10**18, 4 * 10**18))
def test_listed_mtime_truncates_nanoseconds(ns):
    t = Listed("a", 0, ns).mtime
    assert t == from_ns(ns)
    assert t.utcoffset() == dt.timedelta(0)


def test_unchanged_since_previous_scan_is_complete():
    assert is_complete(F, [100, NS], MTIME, None)


@pytest.mark.parametrize("previous", [None, [101, NS], [100, NS + 1], [100], []])
def test_new_or_changed_file_without_min_age_is_not_complete(previous):
    assert not is_complete(F, previous, MTIME + dt.timedelta(days=365), None)


@pytest.mark.parametrize("age_ms, complete", [(0, False), (59_999, False), (60_000, True), (3_600_000, True)])
def test_min_age_makes_an_old_enough_file_complete(age_ms, complete):
    now = MTIME + dt.timedelta(milliseconds=age_ms)
    assert is_complete(F, None, now, 60_000) is complete
    assert is_complete(F, [1, 2], now, 60_000) is complete


def test_min_age_zero_is_complete_at_once_but_not_for_a_future_mtime():
    assert is_complete(F, None, MTIME, 0)
    assert not is_complete(F, None, MTIME - dt.timedelta(microseconds=1), 0)


def test_unchanged_file_is_complete_even_when_young():
    assert is_complete(F, [100, NS], MTIME, 3_600_000)


def test_min_age_uses_the_microsecond_mtime():
    f = Listed("a", 1, NS + 999_999)  # 999.999 us after NS: mtime NS + 999 us
    assert is_complete(f, None, MTIME + dt.timedelta(microseconds=999 + 1000), 1)
    assert not is_complete(f, None, MTIME + dt.timedelta(microseconds=999 + 999), 1)


def test_complete_with_files_from_list_source(tmp_path):
    p = touch(tmp_path, "a.csv", b"12345", mtime_ns=NS)
    (first,) = list_source(str(tmp_path), ingest_settings())
    assert not is_complete(first, None, MTIME, None)
    (second,) = list_source(str(tmp_path), ingest_settings())
    assert is_complete(second, [first.size, first.mtime_ns], MTIME, None)
    p.write_bytes(b"123456")
    os.utime(p, ns=(NS + 10**9, NS + 10**9))
    (third,) = list_source(str(tmp_path), ingest_settings())
    assert not is_complete(third, [second.size, second.mtime_ns], MTIME, None)


# -- implied_time -------------------------------------------------------------------------------


def test_modified_file_time_is_the_mtime_in_utc(tmp_path):
    ns = 1_714_567_890_987_654_321
    touch(tmp_path, "a.csv", mtime_ns=ns)
    (f,) = list_source(str(tmp_path), ingest_settings(sort_field="MODIFIED_FILE_TIME"))
    t = implied_time(f, ingest_settings())
    assert t == dt.datetime(2024, 5, 1, 12, 51, 30, 987654, tzinfo=UTC)
    assert t.utcoffset() == dt.timedelta(0)


def test_time_in_filename_is_parsed_as_utc():
    s = ingest_settings(**NAMED)
    t = implied_time(Listed("trips_20240502T1330.csv", 1, NS), s)
    assert t == dt.datetime(2024, 5, 2, 13, 30, tzinfo=UTC)
    assert t.tzinfo is not None and t.utcoffset() == dt.timedelta(0)


def test_time_in_filename_ignores_the_mtime():
    s = ingest_settings(**NAMED)
    assert implied_time(Listed("trips_20240502T1330.csv", 1, 0), s) == implied_time(
        Listed("trips_20240502T1330.csv", 1, NS), s)


def test_time_in_filename_uses_the_first_group_of_a_search():
    s = ingest_settings(sort_field="TIME_IN_FILENAME",
                        filename_time={"regex": r"_(\d{8})_(\d+)", "format": "%Y%m%d"})
    assert implied_time(Listed("x/y-eu_20240229_17.json", 1, NS), s) == dt.datetime(2024, 2, 29, tzinfo=UTC)


def test_time_in_filename_with_offset_is_converted_to_utc():
    s = ingest_settings(sort_field="TIME_IN_FILENAME",
                        filename_time={"regex": r"at_(\S+?)\.csv", "format": "%Y-%m-%dT%H:%M%z"})
    t = implied_time(Listed("at_2024-01-01T01:30+0200.csv", 1, NS), s)
    assert t == dt.datetime(2023, 12, 31, 23, 30, tzinfo=UTC)
    assert t.utcoffset() == dt.timedelta(0)


def test_time_in_filename_no_match_is_an_input_error_naming_the_file():
    s = ingest_settings(**NAMED)
    with pytest.raises(InputError) as ei:
        implied_time(Listed("trips_latest.csv", 1, NS), s)
    msg = str(ei.value)
    assert msg.startswith("trips_latest.csv: ")
    assert "no time in the file name" in msg and r"trips_(\\d{8}T\\d{4})" in msg


@pytest.mark.parametrize("name, why", [
    ("trips_20241301T0000.csv", "month must be in 1..12"),
    ("trips_20240230T0000.csv", "day is out of range for month"),
    ("trips_20240101T2561.csv", "unconverted data remains"),
])
def test_time_in_filename_unparseable_is_an_input_error_naming_the_file(name, why):
    s = ingest_settings(**NAMED)
    with pytest.raises(InputError) as ei:
        implied_time(Listed(name, 1, NS), s)
    msg = str(ei.value)
    assert msg.startswith(f"{name}: cannot parse the time ")
    assert "'%Y%m%dT%H%M'" in msg
    assert "\n" not in msg


def test_time_in_filename_optional_group_without_a_match_is_an_input_error():
    s = ingest_settings(sort_field="TIME_IN_FILENAME",
                        filename_time={"regex": r"trips_(\d{8})?\.csv", "format": "%Y%m%d"})
    with pytest.raises(InputError) as ei:
        implied_time(Listed("trips_.csv", 1, NS), s)
    assert str(ei.value).startswith("trips_.csv: ")
