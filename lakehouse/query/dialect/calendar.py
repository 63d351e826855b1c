"""Spark's calendar functions on DuckDB: days of the year and weeks, month arithmetic, truncation,
and the Unix epoch in days, seconds, milliseconds and microseconds (UTC on both engines)."""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule, Typer
from lakehouse.query.dialect.macros import parse_duckdb, sql_of
from lakehouse.query.dialect.refuse import FnKey, duck_refuse, spark_func_name
from lakehouse.query.dialect.types import INTEGRAL

_DAYS = {"SU": 7, "SUN": 7, "SUNDAY": 7, "MO": 1, "MON": 1, "MONDAY": 1, "TU": 2, "TUE": 2, "TUESDAY": 2,
         "WE": 3, "WED": 3, "WEDNESDAY": 3, "TH": 4, "THU": 4, "THURSDAY": 4, "FR": 5, "FRI": 5, "FRIDAY": 5,
         "SA": 6, "SAT": 6, "SATURDAY": 6}
"""next_day()'s day names (any case) -> ISO day of the week."""
_TRUNC = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
          "MON": "month", "WEEK": "week"}
"""trunc()'s units -> DuckDB's date_trunc part (weeks start on Monday on both)."""


def _date_arg(e: exp.Expression, c: ChildTypes, key: str = "this") -> str:
    """The argument ``key`` as a DuckDB DATE (a timestamp's UTC day, as Spark casts it)."""
    arg, t = e.args[key], c.get(key)
    if t == "date":
        return sql_of(arg)
    if t == "timestamp":
        return f"CAST({sql_of(arg)} AS DATE)"
    raise duck_refuse(f"{spark_func_name(e)}() of a {t or 'value of unknown type'}", "only dates and timestamps are translated")



def _int_of(fn: str) -> Rule:
    def rule(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
        return parse_duckdb(f"CAST({fn}({_date_arg(e, c)}) AS INTEGER)")
    return rule


def _last_day(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    return parse_duckdb(f"last_day({_date_arg(e, c)})")


def _add_months(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("expression") not in INTEGRAL:
        raise duck_refuse("add_months() by a non-integer", "not translated")
    # both clamp to the month's last day (Jan 31 + 1 month = Feb 28/29)
    return parse_duckdb(f"CAST({_date_arg(e, c)} + to_months(CAST({sql_of(e.expression)} AS INTEGER)) AS DATE)")


def _next_day(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    day = e.expression
    if not (isinstance(day, exp.Literal) and day.is_string) or day.name.strip().upper() not in _DAYS:
        raise duck_refuse("next_day() with a day that is not a constant day name", "not translated")
    target, d = _DAYS[day.name.strip().upper()], _date_arg(e, c)
    return parse_duckdb(f"CAST({d} + CAST((({target} - isodow({d}) + 6) % 7) + 1 AS INTEGER) AS DATE)")


def _trunc(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    unit = e.args.get("unit")
    if not (isinstance(unit, exp.Literal) and unit.is_string):
        raise duck_refuse("trunc() with a unit that is not a constant", "not translated")
    part = _TRUNC.get(unit.name.strip().upper())
    if part is None:  # Spark: NULL for a unit it does not know
        return parse_duckdb("CAST(NULL AS DATE)")
    return parse_duckdb(f"CAST(date_trunc('{part}', {_date_arg(e, c)}) AS DATE)")


def _unix_date(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    return parse_duckdb(f"CAST({_date_arg(e, c)} - DATE '1970-01-01' AS INTEGER)")


def _epoch(per_second: int) -> Rule:
    def rule(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
        if c.get("this") not in ("timestamp", "date"):  # (a format applies to text only)
            raise duck_refuse(f"{spark_func_name(e)}() of a {c.get('this') or 'value of unknown type'}",
                              "only dates and timestamps are translated")
        us = f"epoch_us(CAST({sql_of(e.this)} AS TIMESTAMPTZ))"
        return parse_duckdb(us if per_second == 1_000_000 else f"lh_floordiv({us}, {1_000_000 // per_second})")
    return rule


def _from_unix_date(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("this") not in INTEGRAL:
        raise duck_refuse("date_from_unix_date() of a non-integer", "not translated")
    return parse_duckdb(f"CAST(DATE '1970-01-01' + CAST({sql_of(e.this)} AS INTEGER) AS DATE)")


def _timestamp_of(micros_per: int) -> Rule:
    def rule(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
        if c.get("expressions.0") not in INTEGRAL:
            raise duck_refuse(f"{e.name.lower()}() of a non-integer", "not translated")
        n = sql_of(e.expressions[0])
        us = n if micros_per == 1 else f"(CAST({n} AS BIGINT) * {micros_per})"  # an overflow fails on both
        return parse_duckdb(f"CAST(make_timestamp(CAST({us} AS BIGINT)) AS TIMESTAMPTZ)")
    return rule


def _make_date(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if len(e.expressions) != 3 or any(c.get(f"expressions.{i}") not in INTEGRAL for i in range(3)):
        raise duck_refuse("make_date() of other than three integers", "not translated")
    y, m, d = (f"CAST({sql_of(a)} AS BIGINT)" for a in e.expressions)  # an invalid date fails on both
    return parse_duckdb(f"make_date({y}, {m}, {d})")


def _of(t: str) -> Typer:
    return lambda e, c: t


CALENDAR: dict[FnKey, tuple[Rule, Typer]] = {
    exp.DayOfYear: (_int_of("dayofyear"), _of("int")),
    exp.WeekOfYear: (_int_of("weekofyear"), _of("int")),
    exp.Quarter: (_int_of("quarter"), _of("int")),
    exp.LastDay: (_last_day, _of("date")),
    exp.AddMonths: (_add_months, _of("date")),
    exp.NextDay: (_next_day, _of("date")),
    exp.DateTrunc: (_trunc, _of("date")),
    exp.UnixDate: (_unix_date, _of("int")),
    exp.UnixSeconds: (_epoch(1), _of("bigint")),
    exp.UnixMillis: (_epoch(1000), _of("bigint")),
    exp.UnixMicros: (_epoch(1_000_000), _of("bigint")),
    exp.StrToUnix: (_epoch(1), _of("bigint")),
    exp.DateFromUnixDate: (_from_unix_date, _of("date")),
    "make_date": (_make_date, _of("date")),
    "timestamp_seconds": (_timestamp_of(1_000_000), _of("timestamp")),
    "timestamp_millis": (_timestamp_of(1_000), _of("timestamp")),
    "timestamp_micros": (_timestamp_of(1), _of("timestamp")),
}
"""Each calendar function: its rewrite and Spark's result type."""
RULES: dict[FnKey, Rule] = {k: r for k, (r, _) in CALENDAR.items()}
TYPES: dict[FnKey, Typer] = {k: t for k, (_, t) in CALENDAR.items()}
