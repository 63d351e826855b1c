"""Pure tests for table definitions (lakehouse/definitions/), types and durations.

Every bad definition must raise DefinitionError with ONE line naming the file, the field path
and the reason.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse.definitions import (
    PARTITION_COLUMN,
    get_definition,
    load_definition,
    load_definitions,
    parse_definition,
)
from lakehouse.durations import Duration
from lakehouse.errors import ConfigError, DefinitionError, LakehouseError, TableNotFound
from lakehouse.types import ColumnType

REPO = Path(__file__).resolve().parents[1]

BASE = """\
name: t
columns:
  - {name: id, type: string, nullable: false}
  - {name: n, type: int}
  - {name: price, type: double}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [id]
event_time: event_time
archive:
  delay: 24h
  interval: 2h
  sort_columns: [n, price]
  vectors: all
"""


def sub(text: str, old: str, new: str) -> str:
    """Replace exactly one occurrence, so a typo in a test cannot silently test nothing."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def write(tmp_path: Path, text: str, name: str = "t") -> Path:
    d = tmp_path / "tables"
    d.mkdir(exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def error_of(tmp_path: Path, text: str, name: str = "t") -> str:
    p = write(tmp_path, text, name)
    with pytest.raises(DefinitionError) as ei:
        load_definition(p)
    msg = str(ei.value)
    assert "\n" not in msg, f"message is not one line: {msg!r}"
    assert msg.startswith(f"tables/{name}.yaml: "), msg
    return msg


# -- the shipped definition and a good one ------------------------------------------------------


def test_shipped_trips_definition_loads():
    d = load_definition(REPO / "tables" / "trips.yaml")
    assert d.name == "trips"
    assert d.column_names[0] == "trip_id"
    assert d.column_names[-1] == "event_time"
    assert len(d.columns) == 15
    assert d.primary_key == ("trip_id",)
    assert d.has_key
    assert d.event_time == "event_time"
    assert d.column("trip_id").nullable is False
    assert d.column("city_id").nullable is True
    assert d.column("fare_local").type == ColumnType("decimal", 12, 2)
    assert d.column("is_pool").type == ColumnType("boolean")
    assert d.archive.delay == Duration(86_400_000, "24h")
    assert d.archive.interval.millis == 7_200_000
    assert d.archive.sort_columns == ("city_id", "status", "fx_rate")
    assert d.archive.vectors == "all"


def test_shipped_tables_dir_loads_via_load_definitions_and_get_definition():
    defs = load_definitions(REPO / "tables")
    assert "trips" in defs
    assert get_definition(REPO / "tables", "trips") == defs["trips"]


def test_good_definition_and_derived_values(tmp_path):
    d = load_definition(write(tmp_path, BASE))
    assert d.column_names == ["id", "n", "price", "event_time"]
    assert d.spark_ddl() == (
        "`id` STRING NOT NULL, `n` INT, `price` DOUBLE, `event_time` TIMESTAMP NOT NULL, "
        f"`_lh_load` STRING NOT NULL, `{PARTITION_COLUMN}` DATE"
    )
    assert d.spark_ddl(with_partition=False, hidden=False).endswith("`event_time` TIMESTAMP NOT NULL")
    assert d.visible_columns == ["id", "n", "price", "event_time", PARTITION_COLUMN]
    assert d.sort_order[-1] == "_lh_load"
    assert d.properties() == {
        "lakehouse.table": "t",
        "lakehouse.primary_key": "id",
        "lakehouse.event_time": "event_time",
        "lakehouse.archive.delay": "24h",
        "lakehouse.archive.interval": "2h",
        "lakehouse.archive.sort_columns": "n,price",
        "lakehouse.archive.vectors": "all",
    }
    with pytest.raises(KeyError):
        d.column("nope")


def test_defaults_without_archive_and_primary_key(tmp_path):
    text = BASE.split("primary_key:")[0] + "event_time: event_time\n"
    d = load_definition(write(tmp_path, text))
    assert d.primary_key == ()
    assert not d.has_key
    assert str(d.archive.delay) == "24h"
    assert str(d.archive.interval) == "2h"
    assert d.archive.sort_columns == ()
    assert d.archive.vectors == "all"
    assert d.column("n").nullable is True


def test_definitions_are_frozen(tmp_path):
    d = load_definition(write(tmp_path, BASE))
    with pytest.raises(ValueError):  # pydantic's ValidationError
        d.name = "other"  # type: ignore[misc]


def test_yml_suffix_and_vectors_sort_columns(tmp_path):
    d = tmp_path / "tables"
    d.mkdir()
    (d / "t.yml").write_text(sub(BASE, "vectors: all", "vectors: sort_columns"))
    got = get_definition(d, "t")
    assert got.archive.vectors == "sort_columns"


def test_decimal_types_quoted_and_spaced(tmp_path):
    text = sub(BASE, "{name: n, type: int}", "{name: n, type: 'DECIMAL( 38 , 0 )'}")
    d = load_definition(write(tmp_path, text))
    assert d.column("n").type == ColumnType("decimal", 38, 0)
    assert d.column("n").type.spark_ddl() == "DECIMAL(38,0)"


# -- every bad case: file, field path, reason ---------------------------------------------------


def test_unknown_top_level_key(tmp_path):
    msg = error_of(tmp_path, BASE + "ingest_typo: 1\n")
    assert msg == "tables/t.yaml: ingest_typo: unknown key"


def test_unknown_key_inside_a_column(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", "{name: n, type: int, size: 4}"))
    assert msg == "tables/t.yaml: columns[1].size: unknown key"


def test_unknown_key_inside_archive(tmp_path):
    msg = error_of(tmp_path, BASE + "  compress: true\n")
    assert msg == "tables/t.yaml: archive.compress: unknown key"


def test_bad_type(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: strin}"))
    assert msg.startswith("tables/t.yaml: columns[1].type: unknown type 'strin'")
    assert "string, int, long, double, boolean, date, timestamp, decimal(p,s)" in msg


def test_type_not_a_string(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: 5}"))
    assert msg == "tables/t.yaml: columns[1].type: type must be a string, got 5"


def test_missing_type(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", "{name: n}"))
    assert msg == "tables/t.yaml: columns[1].type: required key is missing"


def test_decimal_precision_above_38(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: 'decimal(39,2)'}"))
    assert msg == "tables/t.yaml: columns[1].type: decimal precision must be 1..38, got 39"


def test_decimal_precision_zero(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: 'decimal(0,0)'}"))
    assert msg == "tables/t.yaml: columns[1].type: decimal precision must be 1..38, got 0"


def test_decimal_scale_above_precision(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: 'decimal(5,6)'}"))
    assert msg == "tables/t.yaml: columns[1].type: decimal scale 6 is larger than its precision 5"


def test_unquoted_decimal_in_flow_mapping_says_to_quote(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "type: int}", "type: decimal(12,2)}"))
    assert msg.startswith("tables/t.yaml: columns[1].type: unknown type 'decimal(12'")
    assert "quote it: 'decimal(p,s)'" in msg


def test_primary_key_column_missing(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "primary_key: [id]", "primary_key: [id, trip]"))
    assert msg == "tables/t.yaml: primary_key[1]: unknown column 'trip'"


def test_primary_key_not_a_list(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "primary_key: [id]", "primary_key: id"))
    assert msg == "tables/t.yaml: primary_key: must be a list of column names, got 'id'"


def test_primary_key_column_twice(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "primary_key: [id]", "primary_key: [id, id]"))
    assert msg == "tables/t.yaml: primary_key: a column is listed twice"


def test_event_time_key_missing(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "event_time: event_time\n", ""))
    assert msg == "tables/t.yaml: event_time: required key is missing"


def test_event_time_names_unknown_column(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "event_time: event_time\n", "event_time: ts\n"))
    assert msg == "tables/t.yaml: event_time: unknown column 'ts'"


def test_event_time_not_a_timestamp(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "event_time: event_time\n", "event_time: price\n"))
    assert msg == "tables/t.yaml: event_time: column 'price' is double, not a timestamp"


def test_sort_column_unknown(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "sort_columns: [n, price]", "sort_columns: [n, city]"))
    assert msg == "tables/t.yaml: archive.sort_columns[1]: unknown column 'city'"


def test_sort_columns_not_a_list(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "sort_columns: [n, price]", "sort_columns: n"))
    assert msg == "tables/t.yaml: archive.sort_columns: must be a list of column names, got 'n'"


def test_sort_column_twice(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "sort_columns: [n, price]", "sort_columns: [n, n]"))
    assert msg == "tables/t.yaml: archive.sort_columns: a column is listed twice"


def test_duplicate_column(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: price, type: double}", "{name: n, type: double}"))
    assert msg.startswith("tables/t.yaml: columns[2].name: duplicate column 'n' (also columns[1])")


def test_duplicate_yaml_key_top_level(tmp_path):
    msg = error_of(tmp_path, BASE + "name: t\n")
    assert msg.startswith("tables/t.yaml: invalid YAML at line 14, column 1:")
    assert msg.endswith("duplicate key 'name'")


def test_duplicate_yaml_key_inside_flow_mapping(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", "{name: n, type: int, type: long}"))
    assert msg.startswith("tables/t.yaml: invalid YAML at line 4,")
    assert msg.endswith("duplicate key 'type'")


def test_duplicate_yaml_key_inside_archive(tmp_path):
    msg = error_of(tmp_path, BASE + "  delay: 1h\n")
    assert "invalid YAML at line 14, column 3:" in msg
    assert msg.endswith("duplicate key 'delay'")


@pytest.mark.parametrize(
    "written, expected",
    [
        ("'24'", "archive.delay: bad duration '24': expected an integer with a unit (ms, s, m, h, d)"),
        ("1w", "archive.delay: bad duration '1w': expected an integer with a unit (ms, s, m, h, d)"),
        ("24", "archive.delay: duration must be an integer with a unit (ms, s, m, h, d) such as '24h', got 24"),
        ("-1h", "archive.delay: bad duration '-1h'"),
        ("1.5h", "archive.delay: bad duration '1.5h'"),
    ],
)
def test_bad_duration(tmp_path, written, expected):
    msg = error_of(tmp_path, sub(BASE, "delay: 24h", f"delay: {written}"))
    assert msg.startswith(f"tables/t.yaml: {expected}"), msg


def test_bad_interval_duration_names_interval(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "interval: 2h", "interval: 2 hours"))
    assert msg.startswith("tables/t.yaml: archive.interval: bad duration '2 hours'")


def test_zero_interval(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "interval: 2h", "interval: 0s"))
    assert msg == "tables/t.yaml: archive.interval: must be greater than zero"


@pytest.mark.parametrize("bad", ["T", "1trips", "my-table", "a" * 64])
def test_bad_table_name(tmp_path, bad):
    msg = error_of(tmp_path, sub(BASE, "name: t\n", f"name: {bad}\n"))
    assert msg == f"tables/t.yaml: name: bad table name '{bad}': expected ^[a-z][a-z0-9_]{{0,62}}$"


def test_name_must_equal_file_name(tmp_path):
    msg = error_of(tmp_path, BASE, name="other")
    assert msg == "tables/other.yaml: name: 't' must equal the file name 'other'"


def test_reserved_column_event_date(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", "{name: event_date, type: date}"))
    assert msg.startswith(
        "tables/t.yaml: columns[1].name: column name 'event_date' is reserved for the UTC-day partition column"
    )


@pytest.mark.parametrize("bad", ["Amount", "2x", "a-b"])
def test_bad_column_name(tmp_path, bad):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", f"{{name: '{bad}', type: int}}"))
    assert msg.startswith(f"tables/t.yaml: columns[1].name: bad column name '{bad}'")


def test_invalid_yaml_syntax(tmp_path):
    msg = error_of(tmp_path, BASE + "  - [unclosed\n")
    assert msg.startswith("tables/t.yaml: invalid YAML at line 14, column 3: ")


def test_invalid_yaml_unclosed_flow_mapping(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "{name: n, type: int}", "{name: n, type: int"))
    assert msg.startswith("tables/t.yaml: invalid YAML at line ")


def test_empty_file(tmp_path):
    msg = error_of(tmp_path, "")
    assert msg == "tables/t.yaml: the file is empty (expected name, columns, event_time, ...)"


def test_document_not_a_mapping(tmp_path):
    msg = error_of(tmp_path, "- name: t\n")
    assert msg == "tables/t.yaml: expected a mapping with name, columns, event_time, ..."


def test_columns_empty(tmp_path):
    text = sub(BASE, BASE[BASE.index("columns:"):BASE.index("primary_key")], "columns: []\n")
    msg = error_of(tmp_path, text)
    assert msg.startswith("tables/t.yaml: columns: must be a non-empty list")


def test_column_entry_not_a_mapping(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "  - {name: n, type: int}\n", "  - n\n"))
    assert msg == "tables/t.yaml: columns[1]: expected a mapping, got 'n'"


def test_archive_not_a_mapping(tmp_path):
    msg = error_of(tmp_path, BASE.split("archive:")[0] + "archive: daily\n")
    assert msg == "tables/t.yaml: archive: expected a mapping, got 'daily'"


@pytest.mark.parametrize("bad, shown", [("'yes'", "'yes'"), ("1", "1"), ("'false'", "'false'")])
def test_nullable_not_a_bool(tmp_path, bad, shown):
    msg = error_of(tmp_path, sub(BASE, "type: int}", f"type: int, nullable: {bad}}}"))
    assert msg == f"tables/t.yaml: columns[1].nullable: nullable must be true or false, got {shown}"


def test_vectors_not_all_or_sort_columns(tmp_path):
    msg = error_of(tmp_path, sub(BASE, "vectors: all", "vectors: some"))
    assert msg.startswith("tables/t.yaml: archive.vectors: ")
    assert "'all'" in msg and "'sort_columns'" in msg
    assert msg.endswith("got 'some'")


def test_several_problems_reported_on_one_line(tmp_path):
    text = sub(BASE, "primary_key: [id]", "primary_key: [nope]")
    text = sub(text, "sort_columns: [n, price]", "sort_columns: [zz]")
    msg = error_of(tmp_path, text)
    assert msg == (
        "tables/t.yaml: primary_key[0]: unknown column 'nope'; "
        "archive.sort_columns[0]: unknown column 'zz'"
    )


def test_file_not_found(tmp_path):
    (tmp_path / "tables").mkdir()
    with pytest.raises(DefinitionError, match=r"^tables/gone\.yaml: file not found$"):
        load_definition(tmp_path / "tables" / "gone.yaml")


def test_not_utf8(tmp_path):
    p = write(tmp_path, "")
    p.write_bytes(b"name: \xff\n")
    with pytest.raises(DefinitionError, match=r"^tables/t\.yaml: cannot read: "):
        load_definition(p)


def test_parse_definition_with_explicit_source():
    with pytest.raises(DefinitionError, match=r"^memory: event_time: required key is missing$"):
        parse_definition({"name": "t", "columns": [{"name": "a", "type": "int"}]}, "memory")


def test_errors_are_config_and_lakehouse_errors():
    assert issubclass(DefinitionError, ConfigError)
    assert issubclass(DefinitionError, LakehouseError)
    assert issubclass(TableNotFound, LakehouseError)


# -- load_definitions / get_definition -----------------------------------------------------------


def test_load_definitions_several_and_skips_other_files(tmp_path):
    write(tmp_path, BASE, "t")
    write(tmp_path, sub(BASE, "name: t\n", "name: u\n"), "u")
    (tmp_path / "tables" / "README.md").write_text("not a table")
    (tmp_path / "tables" / ".hidden.yaml").write_text("garbage: [")
    defs = load_definitions(tmp_path / "tables")
    assert sorted(defs) == ["t", "u"]
    assert defs["u"].name == "u"


def test_load_definitions_missing_dir_is_empty(tmp_path):
    assert load_definitions(tmp_path / "tables") == {}


def test_load_definitions_bad_file_names_that_file(tmp_path):
    write(tmp_path, BASE, "t")
    write(tmp_path, BASE + "oops: 1\n", "zz")  # also name != file name
    with pytest.raises(DefinitionError) as ei:
        load_definitions(tmp_path / "tables")
    assert str(ei.value).startswith("tables/zz.yaml: ")
    assert "oops: unknown key" in str(ei.value)


def test_get_definition_unknown_table_lists_known(tmp_path):
    write(tmp_path, BASE, "t")
    with pytest.raises(TableNotFound) as ei:
        get_definition(tmp_path / "tables", "orders")
    assert str(ei.value) == "table 'orders' is not defined (no tables/orders.yaml); known tables: t"


def test_get_definition_unknown_table_no_tables(tmp_path):
    (tmp_path / "tables").mkdir()
    with pytest.raises(TableNotFound, match=r"known tables: none$"):
        get_definition(tmp_path / "tables", "orders")


def test_get_definition_bad_name(tmp_path):
    with pytest.raises(TableNotFound, match=r"^bad table name '\.\./etc'"):
        get_definition(tmp_path / "tables", "../etc")


# -- types ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, spark, arrow",
    [
        ("string", "STRING", pa.string()),
        ("int", "INT", pa.int32()),
        ("long", "BIGINT", pa.int64()),
        ("double", "DOUBLE", pa.float64()),
        ("boolean", "BOOLEAN", pa.bool_()),
        ("date", "DATE", pa.date32()),
        ("timestamp", "TIMESTAMP", pa.timestamp("us", tz="UTC")),
        ("decimal(12,2)", "DECIMAL(12,2)", pa.decimal128(12, 2)),
    ],
)
def test_column_type_spellings(text, spark, arrow):
    t = ColumnType.parse(text)
    assert str(t) == text
    assert t.spark_ddl() == spark
    assert t.arrow() == arrow


def test_column_type_parse_normalises_case_and_matches_whole():
    assert ColumnType.parse("LONG") == ColumnType("long")
    assert ColumnType.parse("Decimal(10, 3)") == ColumnType("decimal", 10, 3)
    for text in ("  LONG ", "long\n", "int\x00", "decimal(10,2)\n"):
        with pytest.raises(ValueError):
            ColumnType.parse(text)


@pytest.mark.parametrize("text", ["24h\n", " 24h", "24h ", "\t2d", "24h\r\n", "1\nh"])
def test_duration_must_match_whole(text):
    with pytest.raises(ValueError):
        Duration.parse(text)


@pytest.mark.parametrize("name", ["trips\n", "trips ", " trips", "trips\x00", "TRIPS", "trips\r"])
def test_table_names_match_whole(tmp_path, name):
    (tmp_path / "trips.yaml").write_text("name: trips\ncolumns: [{name: at, type: timestamp}]\nevent_time: at\n")
    with pytest.raises(TableNotFound):
        get_definition(tmp_path, name)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("integer", "unknown type 'integer'"),
        ("decimal(100,2)", "unknown type 'decimal(100,2)'"),
        ("decimal(12)", "unknown type 'decimal(12)'"),
        ("decimal(12", "quote it"),
        ("decimal(39,0)", "decimal precision must be 1..38, got 39"),
        ("decimal(3,4)", "decimal scale 4 is larger than its precision 3"),
    ],
)
def test_column_type_parse_errors(text, reason):
    with pytest.raises(ValueError) as ei:
        ColumnType.parse(text)
    assert reason in str(ei.value)


def test_column_type_is_numeric():
    assert [t for t in ("string", "int", "long", "double", "boolean", "date", "timestamp")
            if ColumnType.parse(t).is_numeric] == ["int", "long", "double"]
    assert ColumnType.parse("decimal(5,1)").is_numeric


@pytest.mark.parametrize(
    "spark, ours",
    [("string", "string"), ("int", "int"), ("bigint", "long"), ("double", "double"),
     ("boolean", "boolean"), ("date", "date"), ("timestamp", "timestamp"),
     ("decimal(12,2)", "decimal(12,2)"), ("array<int>", "unsupported:array<int>")],
)
def test_column_type_from_spark_simple_string(spark, ours):
    assert str(ColumnType.from_spark_simple_string(spark)) == ours


# -- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, millis",
    [("500ms", 500), ("90s", 90_000), ("10m", 600_000), ("24h", 86_400_000), ("2d", 172_800_000),
     ("0s", 0)],
)
def test_duration_parse(text, millis):
    d = Duration.parse(text)
    assert d.millis == millis
    assert str(d) == text.strip()
    assert d.seconds == millis / 1000


@pytest.mark.parametrize("bad", ["24", "1w", "h", "1 h", "1H", "-5s", "1.5h", ""])
def test_duration_parse_rejects(bad):
    with pytest.raises(ValueError, match="bad duration"):
        Duration.parse(bad)


@pytest.mark.parametrize("bad", [24, 1.5, None, True])
def test_duration_parse_rejects_non_strings(bad):
    with pytest.raises(ValueError, match=r"duration must be an integer with a unit .* got "):
        Duration.parse(bad)


def test_duration_order_and_identity():
    assert Duration.parse("90s") < Duration.parse("2m")
    d = Duration.parse("1h")
    assert Duration.parse(d) is d
    assert str(Duration(1500)) == "1500ms"
