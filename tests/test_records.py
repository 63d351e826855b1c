"""Pure tests for raw value -> typed value conversion (lakehouse/records.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.definitions import parse_definition
from lakehouse.records import BadValue, RowConverter, converter, parse_date, parse_timestamp
from lakehouse.types import ColumnType

UTC = dt.timezone.utc
D = decimal.Decimal


def conv(type_text: str):
    return converter(ColumnType.parse(type_text))


def bad(type_text: str, value, reason: str) -> None:
    with pytest.raises(BadValue) as ei:
        conv(type_text)(value)
    assert str(ei.value) == reason


# -- string ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out", [("abc", "abc"), ("", ""), (" padded ", " padded "), (5, "5"), (1.5, "1.5"),
                 (D("1.50"), "1.50")],
)
def test_string(raw, out):
    assert conv("string")(raw) == out


@pytest.mark.parametrize("raw", [True, {"a": 1}, [1], b"x"])
def test_string_rejects(raw):
    bad("string", raw, f"{raw!r} is not a string")


# -- int / long ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out",
    [("42", 42), (" -7 ", -7), ("2147483647", 2**31 - 1), ("-2147483648", -(2**31)), (3, 3),
     (3.0, 3), (D("7"), 7), (D("7.000"), 7)],
)
def test_int(raw, out):
    got = conv("int")(raw)
    assert got == out and type(got) is int


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("2147483648", "2147483648 is out of range for an int"),
        ("-2147483649", "-2147483649 is out of range for an int"),
        (2**31, "2147483648 is out of range for an int"),
        ("4.0", "'4.0' is not an int"),
        ("1e3", "'1e3' is not an int"),
        ("abc", "'abc' is not an int"),
        ("", "'' is not an int"),
        (3.5, "3.5 is not an int"),
        (D("7.1"), "Decimal('7.1') is not an int"),
        (True, "True is a boolean, not an int"),
        (None, "None is not an int"),
    ],
)
def test_int_rejects(raw, reason):
    bad("int", raw, reason)


@pytest.mark.parametrize(
    "raw, out", [(str(2**63 - 1), 2**63 - 1), (str(-(2**63)), -(2**63)), ("2147483648", 2**31), (2**40, 2**40)]
)
def test_long(raw, out):
    assert conv("long")(raw) == out


@pytest.mark.parametrize(
    "raw, reason",
    [
        (str(2**63), f"{2**63} is out of range for a long"),
        (-(2**63) - 1, f"{-(2**63) - 1} is out of range for a long"),
        ("x", "'x' is not a long"),
        (False, "False is a boolean, not a long"),
    ],
)
def test_long_rejects(raw, reason):
    bad("long", raw, reason)


def test_int_long_huge_float():
    bad("long", 1e30, f"{int(1e30)} is out of range for a long")


# -- double ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out",
    [("2.5", 2.5), (" -1e3 ", -1000.0), ("0", 0.0), (3, 3.0), (D("0.1"), 0.1), (1.25, 1.25),
     ("inf", math.inf), ("+inf", math.inf), ("-inf", -math.inf), ("Infinity", math.inf),
     ("-INFINITY", -math.inf), ("+Infinity", math.inf)],
)
def test_double(raw, out):
    got = conv("double")(raw)
    assert got == out and type(got) is float


@pytest.mark.parametrize("raw", ["NaN", "nan", " NAN "])
def test_double_nan_words(raw):
    assert math.isnan(conv("double")(raw))


@pytest.mark.parametrize(
    "raw, reason",
    [("abc", "'abc' is not a double"), ("", "'' is not a double"), (True, "True is a boolean, not a double"),
     ([1.0], "[1.0] is not a double")],
)
def test_double_rejects(raw, reason):
    bad("double", raw, reason)


# -- boolean ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["true", "TRUE", "True", "t", "1", "yes", "Y", " true ", True])
def test_boolean_true(raw):
    assert conv("boolean")(raw) is True


@pytest.mark.parametrize("raw", ["false", "FALSE", "f", "0", "no", "N", False])
def test_boolean_false(raw):
    assert conv("boolean")(raw) is False


@pytest.mark.parametrize("raw", ["maybe", "", "2", 1, 0, 1.0, None])
def test_boolean_rejects(raw):
    bad("boolean", raw, f"{raw!r} is not a boolean (true/false)")


# -- date ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out",
    [("2026-11-20", dt.date(2026, 11, 20)), (" 2024-02-29 ", dt.date(2024, 2, 29)),
     (dt.date(2026, 1, 1), dt.date(2026, 1, 1))],
)
def test_date(raw, out):
    assert conv("date")(raw) == out
    assert parse_date(raw) == out


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("2026-13-01", "'2026-13-01' is not a date (YYYY-MM-DD)"),
        ("2025-02-29", "'2025-02-29' is not a date (YYYY-MM-DD)"),
        ("20/11/2026", "'20/11/2026' is not a date (YYYY-MM-DD)"),
        (20261120, "20261120 is not a date (YYYY-MM-DD)"),
        (dt.datetime(2026, 1, 1), "datetime.datetime(2026, 1, 1, 0, 0) is a timestamp, not a date"),
    ],
)
def test_date_rejects(raw, reason):
    bad("date", raw, reason)


# -- timestamp -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out",
    [
        ("2026-11-20T10:15:00Z", dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)),
        ("2026-11-20T10:15:00+02:00", dt.datetime(2026, 11, 20, 8, 15, tzinfo=UTC)),
        ("2026-11-20T01:15:00-05:30", dt.datetime(2026, 11, 20, 6, 45, tzinfo=UTC)),
        ("2026-11-20T23:30:00-01:00", dt.datetime(2026, 11, 21, 0, 30, tzinfo=UTC)),
        ("2026-11-20T10:15:00", dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)),
        ("2026-11-20 10:15:00", dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)),
        ("2026-11-20 10:15:00Z", dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)),
        (" 2026-11-20T10:15:00.250Z ", dt.datetime(2026, 11, 20, 10, 15, 0, 250_000, tzinfo=UTC)),
        ("2026-11-20T10:15:00.123456Z", dt.datetime(2026, 11, 20, 10, 15, 0, 123_456, tzinfo=UTC)),
        ("2026-11-20", dt.datetime(2026, 11, 20, tzinfo=UTC)),
        (dt.datetime(2026, 1, 1, 5), dt.datetime(2026, 1, 1, 5, tzinfo=UTC)),
        (dt.datetime(2026, 1, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=5))), dt.datetime(2026, 1, 1, tzinfo=UTC)),
        (dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, tzinfo=UTC)),
    ],
)
def test_timestamp(raw, out):
    got = conv("timestamp")(raw)
    assert got == out
    assert got.utcoffset() == dt.timedelta(0)
    assert got.tzinfo is UTC


@pytest.mark.parametrize("raw", ["garbage", "2026-11-20T25:00:00Z", "2026-11-20T10:15:00+25:00", "", 1_700_000_000, None])
def test_timestamp_rejects(raw):
    bad("timestamp", raw, f"{raw!r} is not an ISO 8601 timestamp")


# -- decimal ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, out",
    [("123.45", "123.45"), ("1.2", "1.20"), (" 7 ", "7.00"), (5, "5.00"), (1.1, "1.10"), (D("0.5"), "0.50"),
     ("-0.00", "-0.00"), ("1E+2", "100.00"), ("9999999999.99", "9999999999.99"),
     ("-9999999999.99", "-9999999999.99")],
)
def test_decimal_12_2(raw, out):
    got = conv("decimal(12,2)")(raw)
    assert isinstance(got, D)
    assert str(got) == out
    assert got.as_tuple().exponent == -2


@pytest.mark.parametrize(
    "type_text, raw, reason",
    [
        ("decimal(12,2)", "1.234", "'1.234' has more than 2 decimal places for decimal(12,2)"),
        ("decimal(12,2)", "10000000000.00", "'10000000000.00' does not fit decimal(12,2)"),
        ("decimal(3,2)", "10", "'10' does not fit decimal(3,2)"),
        ("decimal(1,1)", "1", "'1' does not fit decimal(1,1)"),
        ("decimal(12,2)", 0.125, "0.125 has more than 2 decimal places for decimal(12,2)"),
        ("decimal(12,2)", "NaN", "'NaN' is not a finite decimal(12,2)"),
        ("decimal(12,2)", "-Infinity", "'-Infinity' is not a finite decimal(12,2)"),
        ("decimal(12,2)", "abc", "'abc' is not decimal(12,2)"),
        ("decimal(12,2)", "", "'' is not decimal(12,2)"),
        ("decimal(12,2)", True, "True is a boolean, not decimal(12,2)"),
        ("decimal(12,2)", [1], "[1] is not decimal(12,2)"),
    ],
)
def test_decimal_rejects(type_text, raw, reason):
    bad(type_text, raw, reason)


def test_decimal_edges_of_precision():
    assert conv("decimal(3,2)")("9.99") == D("9.99")
    assert conv("decimal(1,1)")("0.5") == D("0.5")
    assert conv("decimal(5,0)")("99999") == D("99999")
    bad("decimal(5,0)", "100000", "'100000' does not fit decimal(5,0)")
    assert conv("decimal(38,10)")("1.5") == D("1.5000000000")
    assert conv("decimal(38,0)")("1" * 28) == D("1" * 28)


def test_decimal_38_digits_converts():
    assert conv("decimal(38,0)")("1" * 38) == D("1" * 38)


def test_decimal_huge_exponent_is_a_bad_value():
    bad("decimal(12,2)", "1E+50", "'1E+50' does not fit decimal(12,2)")


def test_long_values_are_cut_in_messages():
    raw = "x" * 200
    with pytest.raises(BadValue) as ei:
        conv("int")(raw)
    msg = str(ei.value)
    assert msg.startswith("'xxxx") and "..." in msg
    assert len(msg) < 100


# -- RowConverter ----------------------------------------------------------------------------------


def definition(pk=("id",)):
    return parse_definition(
        {
            "name": "t",
            "columns": [
                {"name": "id", "type": "string"},          # nullable by default, but the key
                {"name": "n", "type": "int"},
                {"name": "label", "type": "string"},
                {"name": "must", "type": "double", "nullable": False},
                {"name": "amount", "type": "decimal(10,2)"},
                {"name": "event_time", "type": "timestamp"},  # nullable by default, but event time
            ],
            "primary_key": list(pk),
            "event_time": "event_time",
        },
        "test",
    )


GOOD = {"id": "a", "n": "5", "label": "x", "must": "1.5", "amount": "2.5", "event_time": "2026-11-20T10:15:00Z"}
GOOD_ROW = ("a", 5, "x", 1.5, D("2.50"), dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC))


def row_error(rc: RowConverter, record) -> str:
    with pytest.raises(BadValue) as ei:
        rc.convert(record)
    return str(ei.value)


def test_row_converter_good_row_in_column_order():
    rc = RowConverter(definition(), empty_is_null=True)
    shuffled = dict(reversed(list(GOOD.items())))
    assert rc.convert(shuffled) == GOOD_ROW


def test_row_converter_optional_columns_may_be_missing_or_null():
    rc = RowConverter(definition(), empty_is_null=False)
    rec = {"id": "a", "must": 1, "event_time": "2026-11-20T10:15:00Z", "label": None}
    assert rc.convert(rec) == ("a", None, None, 1.0, None, GOOD_ROW[-1])


def test_row_converter_ignores_keys_outside_the_table():
    rc = RowConverter(definition(), empty_is_null=True)
    assert rc.convert({**GOOD, "extra": "zzz"}) == GOOD_ROW


@pytest.mark.parametrize("column", ["id", "must", "event_time"])
def test_row_converter_missing_required_column(column):
    rc = RowConverter(definition(), empty_is_null=True)
    rec = {k: v for k, v in GOOD.items() if k != column}
    assert row_error(rc, rec) == f"column {column}: missing required column"


@pytest.mark.parametrize("column", ["id", "must", "event_time"])
def test_row_converter_null_in_required_column(column):
    rc = RowConverter(definition(), empty_is_null=False)
    assert row_error(rc, {**GOOD, column: None}) == f"column {column}: null in a non-nullable column"


def test_row_converter_without_key_id_is_optional():
    rc = RowConverter(definition(pk=()), empty_is_null=True)
    assert rc.convert({**GOOD, "id": None})[0] is None
    assert rc.convert({k: v for k, v in GOOD.items() if k != "id"})[0] is None
    # event time stays required even without a key
    assert row_error(rc, {**GOOD, "event_time": ""}) == "column event_time: null in a non-nullable column"


def test_row_converter_empty_string_is_null_when_empty_is_null():
    rc = RowConverter(definition(), empty_is_null=True)
    assert rc.convert({**GOOD, "label": "", "n": "", "amount": ""}) == ("a", None, None, 1.5, None, GOOD_ROW[-1])
    assert row_error(rc, {**GOOD, "id": ""}) == "column id: null in a non-nullable column"
    assert row_error(rc, {**GOOD, "must": ""}) == "column must: null in a non-nullable column"


def test_row_converter_empty_string_is_a_value_otherwise():
    rc = RowConverter(definition(), empty_is_null=False)
    got = rc.convert({**GOOD, "label": "", "id": ""})
    assert got[0] == "" and got[2] == ""
    assert row_error(rc, {**GOOD, "n": ""}) == "column n: '' is not an int"


def test_row_converter_whitespace_is_not_null():
    rc = RowConverter(definition(), empty_is_null=True)
    assert rc.convert({**GOOD, "label": " "})[2] == " "


def test_row_converter_bad_value_names_column():
    rc = RowConverter(definition(), empty_is_null=True)
    assert row_error(rc, {**GOOD, "n": "five"}) == "column n: 'five' is not an int"
    assert row_error(rc, {**GOOD, "amount": "1.234"}) == (
        "column amount: '1.234' has more than 2 decimal places for decimal(10,2)"
    )
    assert row_error(rc, {**GOOD, "event_time": "yesterday"}) == (
        "column event_time: 'yesterday' is not an ISO 8601 timestamp"
    )


def test_row_converter_typed_values_from_json_and_parquet():
    rc = RowConverter(definition(), empty_is_null=False)
    rec = {"id": "a", "n": 5, "label": "x", "must": D("1.5"), "amount": D("2.5"),
           "event_time": dt.datetime(2026, 11, 20, 10, 15)}
    assert rc.convert(rec) == GOOD_ROW


# -- properties ------------------------------------------------------------------------------------


@settings(deadline=None, max_examples=60)
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_prop_int_round_trips_via_str(n):
    assert conv("int")(str(n)) == n
    assert conv("long")(str(n)) == n


@settings(deadline=None, max_examples=60)
@given(st.integers())
def test_prop_long_accepts_exactly_its_range(n):
    if -(2**63) <= n <= 2**63 - 1:
        assert conv("long")(str(n)) == n
    else:
        with pytest.raises(BadValue, match="out of range for a long"):
            conv("long")(str(n))


@settings(deadline=None, max_examples=60)
@given(st.data())
def test_prop_decimal_within_precision_round_trips(data):
    precision = data.draw(st.integers(min_value=1, max_value=28), label="precision")
    scale = data.draw(st.integers(min_value=0, max_value=precision), label="scale")
    unscaled = data.draw(st.integers(min_value=-(10**precision - 1), max_value=10**precision - 1))
    d = D(unscaled).scaleb(-scale)
    got = conv(f"decimal({precision},{scale})")(str(d))
    assert got == d
    assert got.as_tuple().exponent == -scale
    # and it fits the arrow type used for staging
    assert pa.array([got], pa.decimal128(precision, scale)).to_pylist() == [got]


@settings(deadline=None, max_examples=60)
@given(st.floats(allow_nan=False))
def test_prop_double_round_trips_via_repr(x):
    assert conv("double")(repr(x)) == x


@settings(deadline=None, max_examples=60)
@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                    timezones=st.just(UTC)))
def test_prop_timestamp_isoformat_round_trips(t):
    assert parse_timestamp(t.isoformat()) == t
    assert parse_timestamp(t.isoformat().replace("+00:00", "Z")) == t
    assert parse_timestamp(t.replace(tzinfo=None).isoformat(sep=" ")) == t
