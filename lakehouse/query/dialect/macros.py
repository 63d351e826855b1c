"""DuckDB's side of the rewrites: the macros they call, and how a rewrite writes DuckDB.

The macros (``lh_*``) are created on every DuckDB connection (lakehouse.query.duckdb.connect);
each computes a value the way Spark does where DuckDB's built-in differs.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.casing import MACROS as CASING

MACROS = [*CASING,
    # ANSI: division by zero is an error, as on Spark.
    ("CREATE OR REPLACE MACRO lh_nonzero(b) AS CASE WHEN b = 0 THEN "
     "error('[DIVIDE_BY_ZERO] Division by zero') ELSE b END"),
    # n / d rounded half up (away from zero), on integers, never forming 2n (no overflow)
    ("CREATE OR REPLACE MACRO lh_div_half_up(n, d) AS CASE WHEN d = 0 THEN "
     "error('[DIVIDE_BY_ZERO] Division by zero') ELSE (CASE WHEN (n < 0) = (d < 0) THEN 1 ELSE -1 END) * "
     "(abs(n) // abs(d) + CASE WHEN abs(n) % abs(d) >= abs(d) - abs(n) % abs(d) THEN 1 ELSE 0 END) END"),
    # an average at p (a power of ten) times the scale of its sum n: the quotient first, so only
    # the result must fit in 128 bits
    ("CREATE OR REPLACE MACRO lh_avg_half_up(n, d, p) AS CASE WHEN d = 0 THEN NULL "
     "ELSE (CASE WHEN n < 0 THEN -1 ELSE 1 END) * ((abs(n) // d) * p + lh_div_half_up((abs(n) % d) * p, d)) END"),
    # Spark: r = a % b; if r < 0 then (r + b) % b else r
    ("CREATE OR REPLACE MACRO lh_pmod(a, b) AS CASE WHEN a % lh_nonzero(b) < 0 "
     "THEN (a % b + b) % b ELSE a % b END"),
    "CREATE OR REPLACE MACRO lh_substr_pos(p) AS CASE WHEN p = 0 THEN 1 ELSE p END",
    # Java's (long) of a double: NaN is 0, beyond the range the nearest end (DuckDB's cast fails)
    ("CREATE OR REPLACE MACRO lh_long_of_double(x) AS CASE WHEN isnan(x) THEN 0 "
     "WHEN x >= 9223372036854775807.0 THEN 9223372036854775807 "
     "WHEN x <= -9223372036854775808.0 THEN -9223372036854775808 ELSE CAST(trunc(x) AS BIGINT) END"),
    # Java's Math.floorDiv of integers (DuckDB's // truncates toward zero)
    "CREATE OR REPLACE MACRO lh_floordiv(a, b) AS (a - ((a % b) + b) % b) // b",
    ("CREATE OR REPLACE MACRO lh_substr(s, p, n) AS CASE WHEN s IS NULL OR p IS NULL OR n IS NULL "
     "THEN NULL WHEN n < 1 THEN '' ELSE substring(s, p, n) END"),
    # Spark prints a timestamp as 'yyyy-MM-dd HH:mm:ss[.fraction without trailing zeros]'.
    ("CREATE OR REPLACE MACRO lh_ts_to_string(x) AS strftime(x, '%Y-%m-%d %H:%M:%S') || "
     "CASE WHEN microsecond(x) % 1000000 = 0 THEN '' ELSE "
     "rtrim('.' || lpad(CAST(microsecond(x) % 1000000 AS VARCHAR), 6, '0'), '0') END"),
]
"""The DuckDB macros the rewrites call, as statements to run on every connection."""
for _t, _duck_t in (("tinyint", "TINYINT"), ("smallint", "SMALLINT"), ("int", "INTEGER"),
                    ("bigint", "BIGINT")):
    # ANSI: a string that is not an integer is an error (DuckDB would round '2.7' to 3).
    MACROS.append(
        f"CREATE OR REPLACE MACRO lh_str_to_{_t}(s) AS CASE WHEN s IS NULL THEN NULL "
        f"WHEN regexp_full_match(s, '[ ]*[+-]?[0-9]+[ ]*') THEN CAST(trim(s) AS {_duck_t}) "
        f"ELSE error('[CAST_INVALID_INPUT] The value ''' || s || ''' cannot be cast to "
        f"{_t.upper()}') END")


def call(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of the DuckDB function or macro ``name`` on ``args``."""
    return exp.Anonymous(this=name, expressions=list(args))


def parse_duckdb(sql: str) -> exp.Expression:
    """An expression written in DuckDB's SQL, as a tree to put in a rewritten query."""
    import sqlglot

    return sqlglot.parse_one(sql, read="duckdb")


def sql_of(e: exp.Expression) -> str:
    """An expression (already rewritten) as DuckDB SQL, parenthesized, to put in a template."""
    return f"({e.sql('duckdb', identify=True)})"
