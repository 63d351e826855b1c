"""Pure tests for the ``ingest:`` section of table definitions (IngestSettings, FilenameTime,
parse_size in lakehouse/definitions/fields.py).

The base definition is tables/trips.yaml; each test adds an ``ingest`` mapping. Every bad value
must raise DefinitionError with ONE line starting with the source and naming the field path.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.definitions import FilenameTime, IngestSettings, parse_definition, parse_size
from lakehouse.durations import Duration
from lakehouse.errors import DefinitionError

REPO = Path(__file__).resolve().parents[1]
SOURCE = "tables/trips.yaml"
BASE: dict[str, Any] = yaml.safe_load((REPO / SOURCE).read_text(encoding="utf-8"))
MB = 1 << 20

EXAMPLE = r"""
format: csv
pattern: '^trips_\d{8}T\d{4}\.csv(\.gz)?$'
sort_field: TIME_IN_FILENAME
filename_time:
  regex: 'trips_(\d{8}T\d{4})'
  format: '%Y%m%dT%H%M'
ingress_delay_interval: 10m
ingress_file_scan_wait: 2s
block_size: 64MB
blocks_per_batch: 16
"""

NAMED = {"sort_field": "TIME_IN_FILENAME", "filename_time": {"regex": r"trips_(\d{8})", "format": "%Y%m%d"}}


def definition(ingest: Any = None, **fields: Any):
    """trips.yaml with an ``ingest`` section: the given value (any YAML value) plus ``fields``;
    no section at all when neither is given."""
    data = copy.deepcopy(BASE)
    if fields:
        data["ingest"] = {**(ingest or {}), **fields}
    elif ingest is not None:
        data["ingest"] = ingest
    return parse_definition(data, SOURCE, expected_name="trips")


def ingest(**fields: Any) -> IngestSettings:
    return definition(None, **fields).ingest


def error(ingest: Any = None, **fields: Any) -> str:
    """The message of the DefinitionError the section raises; checks the message's shape."""
    with pytest.raises(DefinitionError) as info:
        definition(ingest, **fields)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{SOURCE}: "), msg
    return msg


# -- the full example ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> IngestSettings:
    return definition(yaml.safe_load(EXAMPLE)).ingest


def test_example_format_and_pattern(example: IngestSettings) -> None:
    assert example.format == "csv"
    assert example.pattern == r"^trips_\d{8}T\d{4}\.csv(\.gz)?$"


def test_example_sort_field_and_filename_time(example: IngestSettings) -> None:
    assert example.sort_field == "TIME_IN_FILENAME"
    assert example.filename_time == FilenameTime(regex=r"trips_(\d{8}T\d{4})", format="%Y%m%dT%H%M")


def test_example_durations(example: IngestSettings) -> None:
    assert example.ingress_delay_interval.millis == 600_000
    assert str(example.ingress_delay_interval) == "10m"
    assert example.ingress_file_scan_wait.millis == 2000
    assert example.ordered is True


def test_example_blocks(example: IngestSettings) -> None:
    assert example.block_size == 64 * 1024 * 1024
    assert example.blocks_per_batch == 16


def test_example_leaves_other_fields_default(example: IngestSettings) -> None:
    assert example.min_file_age is None
    assert example.late_folder is None


def test_min_file_age_and_late_folder() -> None:
    s = ingest(min_file_age="30s", late_folder="late")
    assert s.min_file_age == Duration(30_000, "30s")
    assert s.late_folder == "late"


# -- defaults --------------------------------------------------------------------------------


def test_defaults_when_section_absent() -> None:
    data = {k: v for k, v in BASE.items() if k != "ingest"}
    s = parse_definition(data, SOURCE, expected_name="trips").ingest
    assert s.format is None
    assert s.pattern is None
    assert s.sort_field == "MODIFIED_FILE_TIME"
    assert s.filename_time is None
    assert s.ingress_delay_interval.millis == 0
    assert s.ingress_file_scan_wait.millis == 2000
    assert s.min_file_age is None
    assert s.block_size == 64 * MB
    assert s.blocks_per_batch == 16
    assert s.late_folder is None
    assert s.ordered is True


def test_empty_section_equals_defaults() -> None:
    assert definition({}).ingest == IngestSettings()


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_each_format_literal(fmt: str) -> None:
    assert ingest(format=fmt).format == fmt


def test_time_in_filename_with_filename_time() -> None:
    s = ingest(**NAMED)
    assert s.sort_field == "TIME_IN_FILENAME"
    assert s.filename_time.regex == r"trips_(\d{8})"


# -- ingress_delay_interval ------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, "0", "0s", "0ms"])
def test_delay_zero_is_strict_order(value: Any) -> None:
    s = ingest(ingress_delay_interval=value)
    assert s.ingress_delay_interval.millis == 0
    assert s.ordered is True


@pytest.mark.parametrize("value", [-1, "-1"])
def test_delay_minus_one_is_no_ordering(value: Any) -> None:
    s = ingest(ingress_delay_interval=value)
    assert s.ingress_delay_interval.millis == -1
    assert s.ordered is False


@pytest.mark.parametrize("value, millis", [("500ms", 500), ("90s", 90_000), ("10m", 600_000), ("2h", 7_200_000), ("1d", 86_400_000)])
def test_delay_durations(value: str, millis: int) -> None:
    assert ingest(ingress_delay_interval=value).ingress_delay_interval.millis == millis


def test_delay_read_from_yaml_text() -> None:
    assert definition(yaml.safe_load("ingress_delay_interval: -1")).ingest.ordered is False
    assert definition(yaml.safe_load("ingress_delay_interval: 0")).ingest.ingress_delay_interval.millis == 0


@pytest.mark.parametrize("value", [-2, "-2", -10])
def test_delay_below_minus_one_mentions_minus_one(value: Any) -> None:
    msg = error(ingress_delay_interval=value)
    assert "ingest.ingress_delay_interval:" in msg
    assert "-1" in msg


@pytest.mark.parametrize("value", ["10x", "10", "1.5m", "m", "", 600, True, None, [1]])
def test_delay_bad_values(value: Any) -> None:
    assert "ingest.ingress_delay_interval:" in error(ingress_delay_interval=value)


@pytest.mark.parametrize("text", ["ingress_delay_interval: false", "ingress_delay_interval: off"])
def test_delay_boolean_is_rejected(text: str) -> None:
    assert "ingest.ingress_delay_interval:" in error(yaml.safe_load(text))


# -- other durations -------------------------------------------------------------------------


@pytest.mark.parametrize("value, millis", [("2s", 2000), ("500ms", 500), ("1m", 60_000), (0, 0)])
def test_scan_wait_values(value: Any, millis: int) -> None:
    assert ingest(ingress_file_scan_wait=value).ingress_file_scan_wait.millis == millis


@pytest.mark.parametrize("field", ["ingress_file_scan_wait", "min_file_age"])
@pytest.mark.parametrize("value", ["2", "2x", "-1s", "1.5s", -1, 5, True])
def test_bad_durations(field: str, value: Any) -> None:
    assert f"ingest.{field}:" in error(**{field: value})


def test_scan_wait_boolean_is_rejected() -> None:
    assert "ingest.ingress_file_scan_wait:" in error(ingress_file_scan_wait=False)


# -- sizes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, n",
    [
        (1, 1),
        (1000, 1000),
        ("1000", 1000),
        ("512B", 512),
        ("4KB", 4 << 10),
        ("64MB", 64 << 20),
        ("2GB", 2 << 30),
        ("1TB", 1 << 40),
        ("64mb", 64 << 20),
        ("4kb", 4 << 10),
        ("2gb", 2 << 30),
        ("7b", 7),
        ("8Mb", 8 << 20),
        ("64 MB", 64 << 20),
    ],
)
def test_parse_size(value: Any, n: int) -> None:
    assert parse_size(value) == n


@pytest.mark.parametrize("value", [0, -1, "0", "0MB", "-1MB", "1.5MB", "64XB", "MB", "", "64 M", True, False, None, 1.5, [64],
                                   " 64MB ", "64MB\n", "16MB\x00"])
def test_parse_size_rejects(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_size(value)


@pytest.mark.parametrize("value, n", [(4096, 4096), ("16KB", 16 << 10), ("64mb", 64 << 20), ("1GB", 1 << 30)])
def test_block_size_in_definition(value: Any, n: int) -> None:
    assert ingest(block_size=value).block_size == n


@pytest.mark.parametrize("value", [0, -5, "0MB", "64XB", "1.5MB", True, None])
def test_block_size_bad_values(value: Any) -> None:
    assert "ingest.block_size:" in error(block_size=value)


# -- blocks_per_batch ------------------------------------------------------------------------


def test_blocks_per_batch_one() -> None:
    assert ingest(blocks_per_batch=1).blocks_per_batch == 1


@pytest.mark.parametrize("value", [0, -1, True, "3", 2.0, None])
def test_blocks_per_batch_bad_values(value: Any) -> None:
    assert "ingest.blocks_per_batch:" in error(blocks_per_batch=value)


# -- errors naming the field -----------------------------------------------------------------


def test_unknown_key() -> None:
    assert error(delay="10m") == f"{SOURCE}: ingest.delay: unknown key"


def test_unknown_key_in_filename_time() -> None:
    bad = {**NAMED, "filename_time": {**NAMED["filename_time"], "tz": "UTC"}}
    assert "ingest.filename_time.tz: unknown key" in error(bad)


@pytest.mark.parametrize("value", ["xml", "CSV", "csv.gz", ""])
def test_bad_format_literal(value: str) -> None:
    msg = error(format=value)
    assert "ingest.format:" in msg
    assert repr(value) in msg


@pytest.mark.parametrize("value", ["FILE_TIME", "time_in_filename", ""])
def test_bad_sort_field(value: str) -> None:
    msg = error(sort_field=value)
    assert "ingest.sort_field:" in msg
    assert "TIME_IN_FILENAME" in msg


def test_time_in_filename_requires_filename_time() -> None:
    msg = error(sort_field="TIME_IN_FILENAME")
    assert "ingest.filename_time:" in msg
    assert "required" in msg


def test_filename_time_only_with_time_in_filename() -> None:
    assert "ingest.filename_time:" in error(filename_time=NAMED["filename_time"])


def test_filename_time_with_explicit_modified_file_time() -> None:
    msg = error(sort_field="MODIFIED_FILE_TIME", filename_time=NAMED["filename_time"])
    assert "ingest.filename_time:" in msg


def _named(**filename_time: Any) -> str:
    return error(sort_field="TIME_IN_FILENAME", filename_time=filename_time)


@pytest.mark.parametrize("regex", ["trips_(\\d{8}", "[a", "*x", "(?P<t>a"])
def test_filename_time_regex_does_not_compile(regex: str) -> None:
    msg = _named(regex=regex, format="%Y%m%d")
    assert "ingest.filename_time.regex:" in msg
    assert "bad regular expression" in msg


@pytest.mark.parametrize("regex", ["trips_\\d{8}", "(?:\\d{8})", ""])
def test_filename_time_regex_without_group(regex: str) -> None:
    msg = _named(regex=regex, format="%Y%m%d")
    assert "ingest.filename_time.regex:" in msg
    assert "group" in msg


def test_filename_time_named_group_counts() -> None:
    s = ingest(sort_field="TIME_IN_FILENAME", filename_time={"regex": r"(?P<t>\d{8})", "format": "%Y%m%d"})
    assert s.filename_time.regex == r"(?P<t>\d{8})"


@pytest.mark.parametrize("fmt", ["YYYYmmdd", "", "Ymd"])
def test_filename_time_format_without_percent(fmt: str) -> None:
    msg = _named(regex=r"(\d{8})", format=fmt)
    assert "ingest.filename_time.format:" in msg
    assert "%" in msg


def test_filename_time_missing_format() -> None:
    assert "ingest.filename_time.format: required key is missing" in _named(regex=r"(\d{8})")


def test_filename_time_not_a_mapping() -> None:
    assert "ingest.filename_time:" in error(sort_field="TIME_IN_FILENAME", filename_time="trips_(\\d+)")


@pytest.mark.parametrize("pattern", ["[a", "(", "*.csv", "a)"])
def test_bad_pattern_regex(pattern: str) -> None:
    msg = error(pattern=pattern)
    assert "ingest.pattern:" in msg
    assert "bad regular expression" in msg


def test_pattern_that_compiles() -> None:
    assert ingest(pattern=r".*\.csv$").pattern == r".*\.csv$"


@pytest.mark.parametrize("folder", ["a/b", "late/", "/late", "..", ".", "", "a\\b", "../late"])
def test_bad_late_folder(folder: str) -> None:
    assert "ingest.late_folder:" in error(late_folder=folder)


@pytest.mark.parametrize("value", ["x", [1], 3])
def test_section_not_a_mapping(value: Any) -> None:
    assert "ingest: expected a mapping" in error(value)


def test_several_errors_on_one_line() -> None:
    msg = error(format="xml", blocks_per_batch=0)
    assert "ingest.format:" in msg
    assert "ingest.blocks_per_batch:" in msg
