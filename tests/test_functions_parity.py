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
from lakehouse.query.dialect.catalog import LAST_BITS, TRANSLATED, ULPS

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

CASES: dict[str, list[str]] = {
    # date and time fields
    "extract": [f"extract({f} FROM {c})" for c in ("d", "ts") for f in
                ("YEAR", "YEAROFWEEK", "QUARTER", "MONTH", "WEEK", "DAY", "DAYOFWEEK", "DAYOFWEEK_ISO", "DOY",
                 "HOUR", "MINUTE", "SECOND", "y", "dow", "secs")],
    "date_part": [f"date_part('{f}', {c})" for c in ("d", "ts") for f in ("year", "week", "dow", "SECOND", "doy")],
    "datepart": ["datepart('month', d)", "datepart('S', ts)"],
    # math
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
    "log": [f"log({c})" for c in NUMS] + ["log(2, x)", "log(10, a)", "log(i, l)", "log(0.5, m)"],
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
    "positive": [f"positive({c})" for c in NUMS],
    "bit_count": ["bit_count(i)", "bit_count(l)"],
    "round": [f"round(x, {n})" for n in (0, 1, 2, 3, -1, -2, -17)] + [
        "round(x)", "round(a, 1)", "round(i, 0)", "round(x * 1e20, -17)", "round(x * 1e16, -16)", "round(x / 7, 5)"],
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
    "md5": ["md5(s)"],
    # conditionals
    "nvl2": ["nvl2(x, 1, 2)", "nvl2(s, s, 'none')", "nvl2(i, a, m)"],
    "nanvl": ["nanvl(x, 0.0)", "nanvl(x, i)"],
    "isnull": ["isnull(x)", "isnull(s)"],
    "isnotnull": ["isnotnull(d)"],
}

BOTH_FAIL: list[str] = [
    "negative(i)",  # -(-2147483648) overflows
    "factorial(l)",  # Spark's factorial takes an int: -9223372036854775808 does not fit
]

REFUSED: list[tuple[str, str]] = [
    ("negative(m)", "negation of a decimal(38,18)"),  # Spark rounds it to 34 digits (or fails)
    ("-m", "negation of a decimal(38,18)"),
    ("levenshtein(s, 'a')", "levenshtein()"),  # DuckDB counts bytes, Spark characters
]


@pytest.fixture(scope="module")
def fx_project(tmp_path_factory, spark):
    from tests.conftest import Project

    p = Project(tmp_path_factory.mktemp("functions") / "proj")
    p.table(FX).create("fx")
    p.lh.load("fx", [p.csv("fx.csv", HEADER, _ROWS)])
    return p


def test_every_translated_function_has_cases():
    assert sorted(set(TRANSLATED) - set(CASES)) == []
    assert sorted(set(CASES) - set(TRANSLATED)) == []


def _select(exprs: list[str]) -> str:
    return "SELECT id, " + ", ".join(f"{e} AS v{i}" for i, e in enumerate(exprs)) + " FROM fx ORDER BY id"


def _both(p, sql: str) -> tuple[str, str]:
    return (dumps(p.lh.query(sql, "spark").to_pylist()), dumps(p.lh.query(sql, "duckdb").to_pylist()))


def _same(spark_json: str, duck_json: str, last_bits: bool) -> bool:
    """The same JSON; for a function of ``LAST_BITS``, numbers within ``ULPS`` units in the last place."""
    if spark_json == duck_json or not last_bits:
        return spark_json == duck_json

    def close(u, v) -> bool:
        if isinstance(u, float) and isinstance(v, float):
            return u == v or abs(u - v) <= ULPS * math.ulp(max(abs(u), abs(v)))
        if isinstance(u, list) and isinstance(v, list) and len(u) == len(v):
            return all(close(a, b) for a, b in zip(u, v))
        if isinstance(u, dict) and isinstance(v, dict) and list(u) == list(v):
            return all(close(u[k], v[k]) for k in u)
        return u == v

    return close(json.loads(spark_json), json.loads(duck_json))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_function_gives_sparks_answer(fx_project, name):
    sql = _select(CASES[name])
    spark_json, duck_json = _both(fx_project, sql)
    if not _same(spark_json, duck_json, name in LAST_BITS):  # name the first expression that differs
        for e in CASES[name]:
            one_spark, one_duck = _both(fx_project, _select([e]))
            assert _same(one_spark, one_duck, name in LAST_BITS), f"{e}: spark {one_spark} duckdb {one_duck}"
        pytest.fail(f"{name}: spark {spark_json} duckdb {duck_json}")


@pytest.mark.parametrize("expr,construct", REFUSED)
def test_refused_on_duckdb(fx_project, expr, construct):
    with pytest.raises(QueryError, match=r"^duckdb: ") as e:
        fx_project.lh.query(_select([expr]), "duckdb")
    assert construct in str(e.value)
    fx_project.lh.query(_select([expr]), "spark") if "negation" not in construct else None


@pytest.mark.parametrize("expr", BOTH_FAIL)
def test_both_engines_fail(fx_project, expr):
    for engine in ("spark", "duckdb"):
        with pytest.raises(QueryError, match=rf"^{engine}: "):
            fx_project.lh.query(_select([expr]), engine)
