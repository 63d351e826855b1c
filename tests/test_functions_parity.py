"""Every Spark function the DuckDB reader translates gives Spark's answer: each is run on both
engines over a table of hostile values (NULLs, NaN, infinities, -0.0, integer and decimal
limits, day edges, Unicode's special cases) and the JSON compared byte for byte.

``CASES`` holds each translated function's expressions (the catalog's names, tested all; a
function without cases fails ``test_every_translated_function_has_cases``). Expressions that must
fail on both engines (ANSI errors) are in ``BOTH_FAIL``.
"""

from __future__ import annotations

import json
import math

import pytest

from lakehouse.errors import QueryError
from lakehouse.output import dumps
from lakehouse.query.compare import REL_TOL
from lakehouse.query.dialect.catalog import LAST_BITS, ORDER_DEPENDENT, TRANSLATED, ULPS

pytestmark = pytest.mark.spark

FX = """
name: fx
columns:
  - {name: id, type: string, nullable: false}
  - {name: i,  type: int}
  - {name: l,  type: long}
  - {name: x,  type: double}
  - {name: a,  type: 'decimal(10,2)'}
  - {name: m,  type: 'decimal(38,18)'}
  - {name: s,  type: string}
  - {name: b,  type: boolean}
  - {name: d,  type: date}
  - {name: ts, type: timestamp, nullable: false}
primary_key: [id]
event_time: ts
"""
_ROWS = [
    # id, i, l, x, a, m, s, b, d, ts
    ["r00", "0", "0", "0.0", "0.00", "0", "", "false", "1970-01-01", "1970-01-01T00:00:00Z"],
    ["r01", "1", "1", "-0.0", "0.01", "0.000000000000000001", "a", "true", "2024-02-29", "2024-02-29T23:59:59.999999Z"],
    ["r02", "-1", "-1", "NaN", "-0.01", "-1.5", " a b ", "", "2026-12-31", "2026-12-31T12:00:00.5Z"],
    ["r03", "2147483647", "9223372036854775807", "inf", "99999999.99",
     "99999999999999999999.999999999999999999", "ÄÖü ß", "true", "2021-01-03", "2021-01-03T00:00:01Z"],
    ["r04", "-2147483648", "-9223372036854775808", "-inf", "-99999999.99", "-0.5", "İstanbul ΟΔΟΣ",
     "false", "2020-12-31", "1969-12-31T23:59:59Z"],
    ["r05", "", "", "", "", "", "", "", "", "2026-11-21T10:15:00.123Z"],
    ["r06", "7", "1000000", "2.5", "2.50", "2.5", "Hello, World", "true", "1900-03-01", "1900-03-01T06:07:08Z"],
    ["r07", "-7", "-3", "-2.5", "-2.55", "-2.55", "x\\_y%z", "false", "2000-02-29", "2000-02-29T12:34:56.789Z"],
    ["r08", "20", "21", "0.1", "1.05", "0.125", "ﬀ ŉ ǰ", "true", "2026-03-29", "2026-03-29T01:30:00Z"],
    ["r09", "3", "-21", "1e-300", "0.05", "-0.000000000000000001", "a,b,,c", "", "1999-12-31", "1999-12-31T23:59:59Z"],
    ["r10", "-2", "5", "1.7976931348623157e308", "12.35", "123.456", "Ⅻ ǅ ΐ", "true", "2026-01-01",
     "2026-01-01T00:00:00Z"],
    ["r11", "100", "-100", "-1e-320", "-12.35", "-1", "tab\there", "false", "2023-06-15", "2023-06-15T18:00:00Z"],
    ["r12", "12", "13", "2.675", "2.67", "1.005", "1.5", "true", "2023-01-01", "2023-01-01T00:00:00Z"],
    ["r13", "-12", "-13", "-0.5", "-0.50", "0.5", "-3", "false", "2022-01-02", "2022-01-02T23:00:00Z"],
]
HEADER = ["id", "i", "l", "x", "a", "m", "s", "b", "d", "ts"]

NUMS = ("i", "l", "x", "a", "m")
"""The numeric columns every math function is tried on."""

FINITE = "CASE WHEN abs(x) < 1e300 THEN x END"
FITS = "CASE WHEN id <> 'r03' THEN m END"
"""m without its largest value: a sum with it overflows decimal(38,18) (BOTH_FAIL)."""

CASES: dict[str, list[str]] = {
    # date and time fields
    "extract": [f"extract({f} FROM {c})" for c in ("d", "ts") for f in
                ("YEAR", "YEAROFWEEK", "QUARTER", "MONTH", "WEEK", "DAY", "DAYOFWEEK", "DAYOFWEEK_ISO", "DOY",
                 "HOUR", "MINUTE", "SECOND", "y", "dow", "secs")],
    "date_part": [f"date_part('{f}', {c})" for c in ("d", "ts") for f in ("year", "week", "dow", "SECOND", "doy")],
    "datepart": ["datepart('month', d)", "datepart('S', ts)"],
    "year": ["year(d)", "year(ts)"], "month": ["month(d)", "month(ts)"], "day": ["day(d)", "day(ts)"],
    "dayofmonth": ["dayofmonth(d)", "dayofmonth(ts)"], "hour": ["hour(ts)"], "minute": ["minute(ts)"],
    "second": ["second(ts)"], "datediff": ["datediff(d, DATE '2000-01-01')", "datediff(ts, d)"],
    "date_trunc": [f"date_trunc('{u}', ts)" for u in ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "minute")],
    "dayofweek": ["dayofweek(d)", "dayofweek(ts)"], "weekday": ["weekday(d)", "weekday(ts)"],
    "to_date": ["to_date(ts)", "to_date('2020-02-29')"], "date_add": ["date_add(d, 1)", "date_add(d, i % 1000)"],
    "date_sub": ["date_sub(d, 30)", "date_sub(ts, 1)"], "dayofyear": ["dayofyear(d)", "dayofyear(ts)"],
    "weekofyear": ["weekofyear(d)", "weekofyear(ts)"], "quarter": ["quarter(d)", "quarter(ts)"],
    "last_day": ["last_day(d)", "last_day(ts)"],
    "add_months": ["add_months(d, 1)", "add_months(d, -13)", "add_months(d, i % 100)", "add_months(ts, 1)"],
    "next_day": ["next_day(d, 'MO')", "next_day(d, 'sunday')", "next_day(ts, 'Fri')"],
    "trunc": [f"trunc(d, '{u}')" for u in ("YEAR", "yy", "MM", "mon", "week", "quarter", "day")] + ["trunc(ts, 'MM')"],
    "make_date": ["make_date(2024, 2, 29)", "make_date(year(d), month(d), 1)", "make_date(2000 + i % 10, 1, 31)"],
    "date_format": [f"date_format(ts, '{f}')" for f in (
        "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm:ss.SSS", "yyyy-MM-dd HH:mm:ss.SSSSSS", "yy/M/d h:m:s a",
        "MMMM d, yyyy", "EEE, dd MMM yyyy", "EEEE", "dd.MM.yyyy", "yyyyMMdd", "100% MM")]
        + ["date_format(d, 'yyyy-MM-dd')", "date_format(d, 'MMM yy')"],
    "unix_date": ["unix_date(d)"], "unix_seconds": ["unix_seconds(ts)"], "unix_millis": ["unix_millis(ts)"],
    "unix_micros": ["unix_micros(ts)"], "unix_timestamp": ["unix_timestamp(ts)"],
    "to_unix_timestamp": ["to_unix_timestamp(ts)"], "date_from_unix_date": ["date_from_unix_date(i % 100000)"],
    "timestamp_seconds": ["timestamp_seconds(i)"], "timestamp_millis": ["timestamp_millis(l % 10000000000000)"],
    "timestamp_micros": ["timestamp_micros(l % 1000000000000000)"],
    # math
    "abs": ["abs(x)", "abs(a)", "abs(m)", "abs(l % 100)"], "floor": ["floor(x)", "floor(a)", "floor(i)"],
    "ceil": ["ceil(x)", "ceil(a)", "ceil(i)"], "ceiling": ["ceiling(x)", "ceiling(m)"],
    "pow": ["pow(x, 2)", "pow(2, i % 10)", "pow(a, 0.5)"], "power": ["power(x, -1)", "power(l % 7, 3)"],
    "pmod": ["pmod(i, 3)", "pmod(l, -7)", "pmod(i, -3)"], "mod": ["mod(i, 3)", "i % -3", "mod(l, 7)"],
    "sqrt": [f"sqrt({c})" for c in NUMS],
    "acos": [f"acos({c})" for c in NUMS] + ["acos(x / 3)"],
    "asin": [f"asin({c})" for c in NUMS] + ["asin(a / 100)"],
    "atan": [f"atan({c})" for c in NUMS],
    "atan2": ["atan2(x, i)", "atan2(i, x)", "atan2(a, l)", "atan2(x, x)"],
    "sin": [f"sin({c})" for c in NUMS],
    "cos": [f"cos({c})" for c in NUMS],
    "tan": [f"tan({c})" for c in NUMS],
    "sinh": [f"sinh({c})" for c in NUMS],
    "cosh": [f"cosh({c})" for c in NUMS],
    "tanh": [f"tanh({c})" for c in NUMS],
    "cbrt": [f"cbrt({c})" for c in NUMS],
    "exp": [f"exp({c})" for c in NUMS],
    "ln": [f"ln({c})" for c in NUMS],
    "log": [f"log({c})" for c in NUMS] + ["log(2, x)", "log(10, a)", "log(i, l)", "log(0.5, m)", "floor(log(10, 1000))"],
    "log10": [f"log10({c})" for c in NUMS],
    "log2": [f"log2({c})" for c in NUMS],
    "degrees": [f"degrees({c})" for c in NUMS],
    "radians": [f"radians({c})" for c in NUMS],
    "pi": ["pi()", "pi() * i"],
    "e": ["e()", "e() * x"],
    "sign": [f"sign({c})" for c in NUMS],
    "signum": [f"signum({c})" for c in NUMS],
    "factorial": ["factorial(i)", "factorial(l % 1000)", "factorial(5)"],
    "negative": ["negative(x)", "negative(a)", "-a", "negative(l % 100)", "-(l % 100)"],
    "+ - * of wide decimals": [f"i + {FITS}", f"{FITS} - i", f"{FITS} - a", "a * a", f"{FITS} + 0.5",
                               f"l % 1000 + {FITS}", f"{FITS} + {FITS}", f"{FITS} - {FITS}", f"{FITS} * a",
                               "a * a * a", "a * 1.005", f"{FITS} * 0.5"],
    "positive": [f"positive({c})" for c in NUMS],
    "bit_count": ["bit_count(i)", "bit_count(l)"],
    "round": [f"round(x, {n})" for n in (0, 1, 2, 3, -1, -2, -17)] + [
        "round(x)", "round(a, 1)", "round(i, 0)", "round(i % 1000, -1)", "round(l % 100000, -2)", "round(i, 2)", "round(x * 1e20, -17)", "round(x * 1e16, -16)", "round(x / 7, 5)"],
    # strings
    "ascii": ["ascii(s)"],
    "reverse": ["reverse(s)"],
    "repeat": ["repeat(s, 2)", "repeat(s, i % 3)", "repeat(s, 0)"],
    "left": ["left(s, 2)", "left(s, 0)", "left(s, -1)", "left(s, i)"],
    "right": ["right(s, 2)", "right(s, 0)", "right(s, -1)", "right(s, i)"],
    "startswith": ["startswith(s, 'a')", "startswith(s, '')", "startswith(s, s)"],
    "endswith": ["endswith(s, 'b')", "endswith(s, '')"],
    "contains": ["contains(s, 'a')", "contains(s, '')", "contains(s, NULL)"],
    "translate": ["translate(s, 'ab', 'x')", "translate(s, 'a', 'xyz')", "translate(s, '', 'x')"],
    "upper": ["upper(s)"], "ucase": ["ucase(s)"], "lower": ["lower(replace(s, 'Σ', ''))"],
    "lcase": ["lcase(replace(s, 'Σ', 'x'))"],  # (lower of a capital sigma: tests/test_casing.py)
    "md5": ["md5(s)"], "sha1": ["sha1(s)"], "sha": ["sha(s)"], "sha2": ["sha2(s, 256)", "sha2(s, 0)"],
    "hex": ["hex(i)", "hex(l)", "hex(s)"], "base64": ["base64(s)"], "chr": ["chr(i)", "chr(l % 1000)"],
    "char": ["char(65)", "char(i)"], "space": ["space(i % 5)", "space(2)"], "bit_length": ["bit_length(s)"],
    "octet_length": ["octet_length(s)"],
    "split_part": ["split_part(s, ',', 1)", "split_part(s, ',', -1)", "split_part(s, ',', 3)",
                   "split_part(s, ' ', 2)", "split_part(s, '', 1)", "split_part(s, '', 2)", "split_part(s, 'ab', 5)"],
    "find_in_set": ["find_in_set('b', s)", "find_in_set('', s)", "find_in_set('a,b', s)", "find_in_set(s, 'a,b,c')"],
    "length": ["length(s)"], "char_length": ["char_length(s)"], "character_length": ["character_length(s)"],
    "len": ["len(s)"], "trim": ["trim(s)", "trim(BOTH 'a' FROM s)"], "ltrim": ["ltrim(s)"], "rtrim": ["rtrim(s)"],
    "replace": ["replace(s, 'a', 'xy')", "replace(s, 'a')", "replace(s, ' ', '')"],
    "lpad": ["lpad(s, 8, '*')", "lpad(s, 2, 'xy')", "lpad(s, 0, 'x')", "lpad(s, 5)"],
    "rpad": ["rpad(s, 8, 'ab')", "rpad(s, 1, 'x')", "rpad(s, 5)"],
    "instr": ["instr(s, 'a')", "instr(s, 'b')"], "locate": ["locate('a', s)", "locate('a', s, 3)"],
    "position": ["position('b' IN s)"],
    "substring": ["substring(s, 2)", "substring(s, 0, 2)", "substring(s, -3, 2)", "substring(s, 2, -1)"],
    "substr": ["substr(s, 3, 4)", "substr(s, -1)"],
    "concat": ["concat(s, '-', i)", "concat(s, d)", "concat(s, ts)"],
    "concat_ws": ["concat_ws('-', s, s)", "concat_ws(',', s, NULL, 'x')"],
    # conditionals
    "nvl2": ["nvl2(x, 1, 2)", "nvl2(s, s, 'none')", "nvl2(i, a, m)"],
    "nanvl": ["nanvl(x, 0.0)", "nanvl(x, i)"],
    "isnull": ["isnull(x)", "isnull(s)"],
    "isnotnull": ["isnotnull(d)"],
    "if": ["if(b, i, l)", "if(x > 1, 'big', s)"], "coalesce": ["coalesce(x, 0.5)", "coalesce(i, l)", "coalesce(s, 'none')"],
    "nvl": ["nvl(a, m)"], "ifnull": ["ifnull(d, DATE '2000-01-01')"], "nullif": ["nullif(i, 0)", "nullif(s, '')"],
    "greatest": ["greatest(i, l)", "greatest(x, 0.5)", "greatest(a, m)", "greatest(s, 'b')"],
    "least": ["least(i, l)", "least(x, 0.5)", "least(d, DATE '2000-01-01')"], "isnan": ["isnan(x)", "isnan(i)"],
    # windows
    "ntile": ["ntile(3) OVER (ORDER BY id)", "ntile(5) OVER (PARTITION BY b ORDER BY id)"],
    "cume_dist": ["cume_dist() OVER (ORDER BY b)", "cume_dist() OVER (PARTITION BY b ORDER BY i)"],
    "percent_rank": ["percent_rank() OVER (ORDER BY b)", "percent_rank() OVER (PARTITION BY b ORDER BY x)"],
    "first_value": ["first_value(x) OVER (ORDER BY id)", "first_value(s) OVER (PARTITION BY b ORDER BY id DESC)",
                    "first_value(a) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)"],
    "last_value": ["last_value(x) OVER (ORDER BY id)",
                   "last_value(d) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
                   "last_value(i) OVER (ORDER BY i RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"],
    "nth_value": ["nth_value(s, 2) OVER (ORDER BY id)", "nth_value(l, 3) OVER (PARTITION BY b ORDER BY id "
                  "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"],
    "sum (window frames)": ["sum(i) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
                            "sum(a) OVER (PARTITION BY b ORDER BY i RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
                            "avg(l % 100) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING)",
                            "count(*) OVER (ORDER BY d RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"],
    "row_number": ["row_number() OVER (ORDER BY id)", "row_number() OVER (PARTITION BY b ORDER BY id DESC)"],
    "rank": ["rank() OVER (ORDER BY b)", "rank() OVER (PARTITION BY b ORDER BY i)"],
    "dense_rank": ["dense_rank() OVER (ORDER BY b)", "dense_rank() OVER (ORDER BY x)"],
    "lag": ["lag(x) OVER (ORDER BY id)", "lag(s, 2, 'none') OVER (ORDER BY id)"],
    "lead": ["lead(a) OVER (ORDER BY id)", "lead(d, 3) OVER (PARTITION BY b ORDER BY id)"],
}

AGGREGATES: dict[str, list[str]] = {
    "sum": ["sum(i)", "sum(l % 1000)", "sum(a)", f"sum({FITS})", f"sum({FINITE})", "sum(x)"],
    "avg": ["avg(i)", "avg(a)", f"avg({FITS})", f"avg({FINITE})", "avg(x)",
            "avg(CASE WHEN id IN ('r06', 'r07') THEN CAST(9000000000000000 AS DECIMAL(38,18)) WHEN i = 0 THEN m END)"], "mean": ["mean(a)", "mean(i)"],
    "min": ["min(x)", "min(s)", "min(d)", "min(ts)", "min(a)"], "max": ["max(x)", "max(s)", "max(d)", "max(ts)", "max(m)"],
    "count": ["count(*)", "count(x)", "count(DISTINCT s)", "count(DISTINCT i, s)", "count(DISTINCT b, d)"], "count_if": ["count_if(x > 0)"],
    "bool_and": ["bool_and(x > 0)"], "bool_or": ["bool_or(i > 10)"], "every": ["every(l > 0)"], "some": ["some(a > 1)"],
    "stddev": ["stddev(i)", "stddev(a)"], "std": ["std(l % 1000)"], "stddev_samp": [f"stddev_samp({FINITE})"],
    "variance": ["variance(i)"], "var_samp": ["var_samp(a)"],
    "percentile": ["percentile(i, 0.5)", "percentile(a, 0.25)"], "median": ["median(a)", "median(i)"],
    "stddev_pop": ["stddev_pop(i)", f"stddev_pop({FINITE})"], "var_pop": ["var_pop(a)", "var_pop(l % 100)"],
    "corr": ["corr(i, a)", f"corr({FINITE}, i)"], "covar_pop": ["covar_pop(i, a)", "covar_pop(l % 100, i)"],
    "covar_samp": ["covar_samp(a, i)"], "bit_and": ["bit_and(i)", "bit_and(l)"], "bit_or": ["bit_or(i)", "bit_or(l)"],
    "bit_xor": ["bit_xor(i)", "bit_xor(l)"],
}
"""Aggregates: each run per group of ``b`` (NULL, false, true)."""

BOTH_FAIL: list[str] = [
    "negative(i)",  # -(-2147483648) overflows
    "factorial(l)",  # Spark's factorial takes an int: -9223372036854775808 does not fit
    "SELECT b, sum(m) AS v FROM fx GROUP BY b",  # overflows decimal(38,18)
    "SELECT avg(m) AS v FROM fx",
    "abs(i)",  # abs(-2147483648) overflows
    "round(i, -1)",  # 2147483647 rounds to 2147483650: beyond an int
    "round(l, -3)",
]

REFUSED: list[tuple[str, str]] = [
    ("negative(m)", "negation of a decimal(38,18)"),  # Spark rounds it to 34 digits (or fails)
    ("-m", "negation of a decimal(38,18)"),
    ("levenshtein(s, 'a')", "levenshtein()"),
    ("m + m", "+ of decimals whose digits exceed 37 is refused"),  # at run time: only the largest row
    ("i + m", "+ of decimals whose digits exceed 37 is refused"),
    ("m * m", "* of decimals whose exact product exceeds 38 digits is refused"),  # 36 places: 2 digits left
    ("date_format(ts, 'Q')", "date_format() with the pattern 'Q'"),
    ("date_format(ts, 'yyyy-MM-dd''T''HH')", "date_format() with a pattern"),
    ("date_format(s, 'yyyy')", "date_format() of a string"),
    ("date_format(ts, 'YYYY')", "date_format() with the pattern 'YYYY'"),  # week-based year, read as yyyy
    ("date_format(ts, 'yyyy[MM]')", "date_format() with the pattern 'yyyy[MM]'"),  # an optional section
    ("sum(i) OVER (ORDER BY i RANGE BETWEEN 5 PRECEDING AND CURRENT ROW)", "RANGE frame with an offset"),
]


def make_fx(tmp_path_factory, name: str):
    """A project holding the hostile table ``fx`` (this module's and the differential test's)."""
    from tests.conftest import Project

    p = Project(tmp_path_factory.mktemp(name) / "proj")
    p.table(FX).create("fx")
    p.lh.load("fx", [p.csv("fx.csv", HEADER, _ROWS)])
    return p


@pytest.fixture(scope="module")
def fx_project(tmp_path_factory, spark):
    return make_fx(tmp_path_factory, "functions")


EXTRA = {"sum (window frames)", "+ - * of wide decimals"}
"""Cases of constructs rather than functions."""


def test_every_translated_function_has_cases():
    assert not set(CASES) & set(AGGREGATES)
    assert sorted(set(TRANSLATED) - set(CASES) - set(AGGREGATES)) == []
    assert sorted(set(CASES) - set(TRANSLATED) - EXTRA) == []
    assert sorted(set(AGGREGATES) - set(TRANSLATED)) == []


def _select(exprs: list[str], grouped: bool = False) -> str:
    key = "b" if grouped else "id"
    return (f"SELECT {key}, " + ", ".join(f"{e} AS v{i}" for i, e in enumerate(exprs)) + " FROM fx "
            + ("GROUP BY b " if grouped else "") + f"ORDER BY {key}")


def _both(p, sql: str) -> tuple[str, str]:
    return (dumps(p.lh.query(sql, "spark").to_pylist()), dumps(p.lh.query(sql, "duckdb").to_pylist()))


def close(u, v, order: bool, bits: bool) -> bool:
    """Two JSON values alike under the floating-point rule: the same, but doubles within the
    relative ``REL_TOL`` (``order``: from an ``ORDER_DEPENDENT`` aggregate) or within ``ULPS``
    units in the last place (``bits``: from a ``LAST_BITS`` function); the sign of zero and the
    type always the same."""
    if type(u) is not type(v):
        return False
    if isinstance(u, float):
        if math.copysign(1, u) != math.copysign(1, v):
            return False
        if order:
            return math.isclose(u, v, rel_tol=REL_TOL, abs_tol=REL_TOL)
        return u == v or (bits and abs(u - v) <= ULPS * math.ulp(max(abs(u), abs(v))))
    if isinstance(u, list):
        return len(u) == len(v) and all(close(a, b, order, bits) for a, b in zip(u, v))
    if isinstance(u, dict):
        return list(u) == list(v) and all(close(u[k], v[k], order, bits) for k in u)
    return u == v


def _same(spark_json: str, duck_json: str, name: str) -> bool:
    if spark_json == duck_json:
        return True
    return close(json.loads(spark_json), json.loads(duck_json), name in ORDER_DEPENDENT, name in LAST_BITS)


@pytest.mark.parametrize("name", sorted([*CASES, *AGGREGATES]))
def test_the_function_gives_sparks_answer(fx_project, name):
    grouped = name in AGGREGATES
    exprs = AGGREGATES[name] if grouped else CASES[name]
    spark_json, duck_json = _both(fx_project, _select(exprs, grouped))
    if not _same(spark_json, duck_json, name):  # name the first expression that differs
        for e in exprs:
            one_spark, one_duck = _both(fx_project, _select([e], grouped))
            assert _same(one_spark, one_duck, name), f"{e}: spark {one_spark} duckdb {one_duck}"
        pytest.fail(f"{name}: spark {spark_json} duckdb {duck_json}")


@pytest.mark.parametrize("expr,construct", REFUSED)
def test_refused_on_duckdb(fx_project, expr, construct):
    with pytest.raises(QueryError, match=r"^duckdb: ") as e:
        fx_project.lh.query(_select([expr]), "duckdb")
    assert construct in str(e.value)


@pytest.mark.parametrize("expr", BOTH_FAIL)
def test_both_engines_fail(fx_project, expr):
    for engine in ("spark", "duckdb"):
        with pytest.raises(QueryError, match=rf"^{engine}: "):
            fx_project.lh.query(expr if expr.startswith("SELECT") else _select([expr]), engine)
