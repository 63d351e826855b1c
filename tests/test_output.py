"""Pure tests for output rendering (lakehouse/output.py) and result comparison
(lakehouse/query/compare.py)."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.output import (
    csv_document,
    csv_records,
    csv_text,
    dumps,
    flatten,
    format_timestamp,
    inline_text,
    json_value,
    text_value,
)
from lakehouse.query.compare import REL_TOL, Comparison, compare
from lakehouse.records import parse_timestamp

UTC = dt.timezone.utc
D = decimal.Decimal


# -- json_value ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, out",
    [
        (dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC), "2026-11-20T10:15:00Z"),
        (dt.datetime(2026, 11, 20, 10, 15, 0, 500_000, tzinfo=UTC), "2026-11-20T10:15:00.5Z"),
        (dt.datetime(2026, 11, 20, 10, 15, 0, 120_000, tzinfo=UTC), "2026-11-20T10:15:00.12Z"),
        (dt.datetime(2026, 11, 20, 10, 15, 0, 123, tzinfo=UTC), "2026-11-20T10:15:00.000123Z"),
        (dt.datetime(2026, 11, 20, 10, 15, 0, 999_999, tzinfo=UTC), "2026-11-20T10:15:00.999999Z"),
        (dt.datetime(2026, 11, 20, 10, 15), "2026-11-20T10:15:00Z"),  # naive is UTC
        (dt.datetime(2026, 11, 20, 12, 15, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2026-11-20T10:15:00Z"),
        (dt.datetime(2026, 11, 20, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))), "2026-11-19T23:30:00Z"),
    ],
)
def test_json_value_timestamps(value, out):
    assert json_value(value) == out
    assert format_timestamp(value) == out


def test_json_value_dates():
    assert json_value(dt.date(2026, 11, 20)) == "2026-11-20"
    assert json_value(dt.date(2026, 1, 2)) == "2026-01-02"


@pytest.mark.parametrize(
    "value, out",
    [(D("1.50"), "1.50"), (D("-0.00"), "-0.00"), (D("12345678901234567890.12"), "12345678901234567890.12"),
     (D("0"), "0")],
)
def test_json_value_decimals_as_strings(value, out):
    assert json_value(value) == out


def test_json_value_decimal_with_large_scale_is_plain():
    (zero,) = pa.array([D("0")], pa.decimal128(38, 10)).to_pylist()
    assert json_value(zero) == "0.0000000000"
    (small,) = pa.array([D("0.00000001")], pa.decimal128(12, 8)).to_pylist()
    assert json_value(small) == "0.00000001"


@pytest.mark.parametrize("value, out", [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_json_value_non_finite_floats_as_strings(value, out):
    assert json_value(value) == out


@pytest.mark.parametrize("value", [None, True, False, 0, -5, 2**63, 1.5, -0.25, "text", ""])
def test_json_value_plain_values_unchanged(value):
    got = json_value(value)
    assert got == value and type(got) is type(value)


def test_json_value_nested():
    doc = {"a": [1, math.nan, (D("2.5"), dt.date(2026, 1, 1))], 3: {"t": dt.datetime(2026, 1, 1)}}
    assert json_value(doc) == {"a": [1, "NaN", ["2.5", "2026-01-01"]], "3": {"t": "2026-01-01T00:00:00Z"}}


def test_json_value_other_types():
    assert json_value(dt.timedelta(seconds=90)) == 90.0
    assert json_value(b"\x01\xff") == "01ff"


def test_format_timestamp_small_year_is_four_digits():
    assert format_timestamp(dt.datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"


@settings(deadline=None, max_examples=80)
@given(st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9999, 12, 31),
                    timezones=st.just(UTC)))
def test_prop_timestamp_renders_and_parses_back(t):
    s = format_timestamp(t)
    assert s.endswith("Z")
    assert (("." in s) == (t.microsecond != 0))
    assert not s.endswith("0Z") or "." not in s  # no trailing zeros in a fraction
    assert parse_timestamp(s) == t


# -- dumps -----------------------------------------------------------------------------------------


def test_dumps_is_valid_json_with_contract_values():
    doc = [{"t": dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC), "d": dt.date(2026, 11, 20), "x": math.nan,
            "y": -math.inf, "m": D("3.10"), "n": None, "s": "ü"}]
    text = dumps(doc)
    assert "\n" not in text
    assert "ü" in text  # not escaped
    assert json.loads(text) == [{"t": "2026-11-20T10:15:00Z", "d": "2026-11-20", "x": "NaN", "y": "-Infinity",
                                 "m": "3.10", "n": None, "s": "ü"}]


def test_dumps_output_is_strict_json():
    text = dumps({"a": [math.nan, math.inf, 1.0]})
    # strict parsers reject bare NaN / Infinity
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c} in {text}"))


# -- csv_text / text_value --------------------------------------------------------------------------


def test_csv_text():
    t = pa.table({
        "a": [1, None, 3],
        "f": [1.5, math.nan, 0.1],
        "s": ["x,y", None, 'q"'],
        "ts": pa.array([dt.datetime(2026, 1, 1), None, dt.datetime(2026, 1, 1, 0, 0, 1, 500_000)],
                       pa.timestamp("us", tz="UTC")),
        "d": pa.array([D("1.50"), None, D("2.00")], pa.decimal128(5, 2)),
        "b": [True, None, False],
        "day": pa.array([dt.date(2026, 1, 1), None, dt.date(2026, 1, 2)], pa.date32()),
    })
    text = csv_text(t)
    assert text == (
        "a,f,s,ts,d,b,day\n"
        "1,1.5,\"x,y\",2026-01-01T00:00:00Z,1.50,true,2026-01-01\n"
        ",NaN,,,,,\n"
        "3,0.1,\"q\"\"\",2026-01-01T00:00:01.5Z,2.00,false,2026-01-02\n"
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][2] == "x,y" and rows[3][2] == 'q"'


def test_csv_text_floats_keep_full_precision():
    t = pa.table({"f": [0.1 + 0.2, 1e-20, -math.inf]})
    assert csv_text(t).splitlines()[1:] == ["0.30000000000000004", "1e-20", "-Infinity"]


def test_csv_text_empty_table_has_header():
    assert csv_text(pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())})) == "a,b\n"


def test_text_value():
    assert text_value(None) == "NULL"
    assert text_value(1 / 3) == "0.3333333333"
    assert text_value(math.nan) == "NaN"
    assert text_value("x") == "x"
    assert text_value(5) == "5"
    assert text_value(True) == "true"
    assert text_value(dt.datetime(2026, 1, 1)) == "2026-01-01T00:00:00Z"


# -- compare ---------------------------------------------------------------------------------------


def T(**cols) -> pa.Table:
    return pa.table(cols)


def test_compare_equal_tables_in_different_row_order():
    a = T(x=[1, 2, 3, None], y=["a", "b", "c", "d"])
    b = T(x=[None, 3, 1, 2], y=["d", "c", "a", "b"])
    assert compare(a, b) == Comparison(True, "")


def test_compare_duplicates_are_a_multiset():
    assert compare(T(x=[1, 1, 2]), T(x=[2, 1, 1])).equal
    c = compare(T(x=[1, 1, 2]), T(x=[1, 2, 2]))
    assert not c.equal
    assert "column x" in c.detail


def test_compare_float_tolerance():
    assert compare(T(x=[1.0]), T(x=[1.0 + 1e-12])).equal
    assert compare(T(x=[0.1 + 0.2]), T(x=[0.3])).equal
    assert compare(T(x=[0.0]), T(x=[1e-12])).equal  # absolute tolerance near zero
    c = compare(T(x=[1.0]), T(x=[1.0 + 1e-6]))
    assert not c.equal
    assert c.detail.startswith("row 1 (sorted), column x: spark 1.0 vs duckdb 1.000001")
    assert REL_TOL == 1e-9


def test_compare_non_finite_floats():
    assert compare(T(x=[math.nan]), T(x=[math.nan])).equal
    assert compare(T(x=[math.inf, -math.inf]), T(x=[-math.inf, math.inf])).equal
    assert not compare(T(x=[math.inf]), T(x=[-math.inf])).equal
    assert not compare(T(x=[math.nan]), T(x=[1.0])).equal
    assert not compare(T(x=[math.inf]), T(x=[1e308])).equal


def test_compare_int_decimal_float_are_equal_numbers():
    ints = T(x=pa.array([1, 250], pa.int64()))
    decs = T(x=pa.array([D("1.00"), D("250.00")], pa.decimal128(10, 2)))
    floats = T(x=pa.array([1.0, 250.0], pa.float64()))
    int32 = T(x=pa.array([1, 250], pa.int32()))
    assert compare(ints, decs).equal
    assert compare(decs, floats).equal
    assert compare(ints, floats).equal
    assert compare(int32, ints).equal
    assert not compare(ints, T(x=pa.array([D("1.00"), D("250.01")], pa.decimal128(10, 2)))).equal


def test_compare_timestamps_naive_and_utc_are_equal():
    naive = T(t=pa.array([dt.datetime(2026, 1, 1, 10)], pa.timestamp("us")))
    aware = T(t=pa.array([dt.datetime(2026, 1, 1, 10, tzinfo=UTC)], pa.timestamp("us", tz="UTC")))
    assert compare(naive, aware).equal
    later = T(t=pa.array([dt.datetime(2026, 1, 1, 10, 0, 1)], pa.timestamp("us")))
    c = compare(naive, later)
    assert not c.equal and "column t" in c.detail


def test_compare_dates_and_strings_and_booleans():
    a = T(d=pa.array([dt.date(2026, 1, 1)], pa.date32()), s=["x"], b=[True])
    assert compare(a, T(d=pa.array([dt.date(2026, 1, 1)], pa.date32()), s=["x"], b=[True])).equal
    c = compare(a, T(d=pa.array([dt.date(2026, 1, 1)], pa.date32()), s=["x"], b=[False]))
    assert c == Comparison(False, "row 1 (sorted), column b: spark True vs duckdb False")


def test_compare_column_name_mismatch():
    c = compare(T(x=[1], y=[2]), T(x=[1], z=[2]))
    assert c == Comparison(False, "columns differ: spark ['x', 'y'] vs duckdb ['x', 'z']")


def test_compare_column_order_matters():
    c = compare(T(x=[1], y=[2]), T(y=[2], x=[1]))
    assert not c.equal and c.detail.startswith("columns differ")


def test_compare_column_names_ignore_case():
    assert compare(T(X=[1]), T(x=[1])).equal


def test_compare_row_count_mismatch():
    c = compare(T(x=[1, 2]), T(x=[1]))
    assert c == Comparison(False, "row counts differ: spark 2 vs duckdb 1")


def test_compare_real_difference_names_the_column_and_engines():
    a = T(id=[1, 2, 3], name=["a", "b", "c"])
    b = T(id=[3, 2, 1], name=["c", "B", "a"])
    c = compare(a, b, "left", "right")
    assert not c.equal
    assert c.detail.startswith("row ") and "column name: left 'b' vs right 'B'" in c.detail


def test_compare_null_vs_value():
    c = compare(T(x=pa.array([None], pa.int64())), T(x=[0]))
    assert not c.equal
    assert c.detail == "row 1 (sorted), column x: spark None vs duckdb 0.0"


def test_compare_empty_tables():
    assert compare(T(x=pa.array([], pa.int64())), T(x=pa.array([], pa.float64()))).equal


def test_compare_order_ignored_for_floats_close_in_6_digits():
    assert compare(T(x=[1.00000001, 1.0]), T(x=[1.0, 1.00000001])).equal


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.tuples(st.integers(-5, 5) | st.none(), st.sampled_from(["a", "b", "é", ""]) | st.none()),
        max_size=20,
    ),
    st.randoms(use_true_random=False),
)
def test_prop_compare_ignores_row_order(rows, rnd: random.Random):
    shuffled = list(rows)
    rnd.shuffle(shuffled)

    def table(rs):
        return pa.table({"k": pa.array([r[0] for r in rs], pa.int64()), "s": pa.array([r[1] for r in rs], pa.string())})

    assert compare(table(rows), table(shuffled)).equal


# -- csv_document / csv_records / flatten / inline_text ---------------------------------------------


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_flatten_names_nested_fields_outer_inner():
    doc = {"a": 1, "live": {"files": 2, "why": {}, "deep": {"x": None}}, "days": ["2026-01-10"]}
    assert flatten(doc) == {"a": 1, "live.files": 2, "live.why": {}, "live.deep.x": None, "days": ["2026-01-10"]}


def test_csv_document_is_one_row_lists_as_json_text():
    doc = {"applied": ["0001_x", "0002_y"], "pending": [], "at": dt.datetime(2026, 1, 1, tzinfo=UTC),
           "files": {"live": 1, "archive": 0}, "cutoff": None}
    assert rows_of(csv_document(doc)) == [
        ["applied", "pending", "at", "files.live", "files.archive", "cutoff"],
        ['["0001_x", "0002_y"]', "[]", "2026-01-01T00:00:00Z", "1", "0", ""],
    ]


def test_csv_document_with_a_table_keeps_the_documents_own_fields():
    doc = {"bound": dt.datetime(2026, 1, 1, tzinfo=UTC), "staged": 3,
           "producers": [{"name": "p1", "bound": None}, {"name": "p2", "bound": dt.datetime(2026, 1, 2, tzinfo=UTC),
                                                          "extra": {"k": 1}}]}
    assert rows_of(csv_document(doc, "producers", ("name", "bound"))) == [
        ["bound", "staged", "producers.name", "producers.bound", "producers.extra.k"],
        ["2026-01-01T00:00:00Z", "3", "p1", "", ""],
        ["2026-01-01T00:00:00Z", "3", "p2", "2026-01-02T00:00:00Z", "1"],
    ]
    empty = {**doc, "producers": []}
    assert rows_of(csv_document(empty, "producers", ("name", "bound"))) == [
        ["bound", "staged", "producers.name", "producers.bound"], ["2026-01-01T00:00:00Z", "3", "", ""]]


def test_csv_document_with_a_table_of_plain_values():
    doc = {"file": "f", "cutoff": 5, "values": [1.5, None]}
    assert rows_of(csv_document(doc, "values")) == [["file", "cutoff", "values"], ["f", "5", "1.5"], ["f", "5", ""]]
    assert rows_of(csv_document({**doc, "values": []}, "values")) == [["file", "cutoff", "values"], ["f", "5", ""]]


def test_csv_records_header_is_the_keys_then_fields_first_seen():
    records = [{"a": 1, "b": {"x": 2}}, {"a": 2, "c": [1]}]
    assert rows_of(csv_records(records, ("a", "z"))) == [["a", "z", "b.x", "c"], ["1", "", "2", ""], ["2", "", "", "[1]"]]
    assert csv_records([], ("a", "b")) == "a,b\n"


def test_inline_text_never_shows_a_python_repr():
    assert inline_text(None) == "-"
    assert inline_text([]) == "none"
    assert inline_text(["a", 1, None]) == "a, 1, -"
    assert inline_text({"live": 0, "archive": [dt.date(2026, 1, 1)]}) == "(live 0, archive 2026-01-01)"
    assert inline_text(True) == "true"
    assert inline_text(dt.datetime(2026, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)) == "2026-01-01T00:00:00.25Z"


def test_long_work_says_its_steps_on_a_terminal_only_and_never_under_json(monkeypatch, capsys) -> None:
    import time

    from lakehouse.cli.output import steps
    from lakehouse.output import Steps

    def told(fmt: str, terminal: bool) -> str:
        for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE"):
            monkeypatch.setenv(name, "1" if terminal else "0")
        with steps(fmt) as report:
            job = Steps("archive trips", report)
            job.at("stage", "3 day(s), 40 live rows")
            time.sleep(0.2)
            job.at("commit")
            time.sleep(0.2)
        out = capsys.readouterr()
        assert out.out == "" and job.step == "commit"
        return out.err

    err = told("text", terminal=True)
    assert "archive trips: stage (3 day(s), 40 live rows)" in err and "archive trips: commit" in err
    assert told("json", terminal=True) == ""
    assert told("text", terminal=False) == ""
