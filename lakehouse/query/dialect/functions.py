"""Rewrites of Spark's functions whose DuckDB namesakes differ: LIKE's escape, substring
positions, day numbering, pmod, percentiles, isnan, dates; unknown functions are refused.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule
from lakehouse.query.dialect.macros import call, parse_duckdb
from lakehouse.query.dialect.refuse import APPROX, FnKey, duck_refuse
from lakehouse.query.dialect.types import INTEGRAL, is_numeric


def _like(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark's LIKE escapes with a backslash by default; DuckDB has no default escape.
    if isinstance(e.parent, exp.Escape):
        return None
    return exp.Escape(this=e.copy(), expression=exp.Literal.string("\\"))


def _substring(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    start = e.args.get("start")
    length = e.args.get("length")
    if start is None:
        return None
    # Spark: position 0 behaves as 1; DuckDB counts position 0 as before the first character.
    start = parse_duckdb(f"lh_substr_pos({start.sql('duckdb', identify=True)})")
    args = [e.this, start] + ([length] if length is not None else [])
    return call("lh_substr", *args) if length is not None else call("substring", *args)


def _dayofweek(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark: 1 = Sunday .. 7 = Saturday; DuckDB's dayofweek: 0 = Sunday .. 6.
    return exp.Add(this=exp.Paren(this=call("dayofweek", e.this)), expression=exp.Literal.number(1))


def _weekday(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark: 0 = Monday .. 6 = Sunday
    return exp.Sub(this=exp.Paren(this=call("isodow", e.expressions[0])), expression=exp.Literal.number(1))


def _pmod(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("expressions.0") not in INTEGRAL or c.get("expressions.1") not in INTEGRAL:
        raise duck_refuse("pmod() of non-integral operands", "not translated")
    return call("lh_pmod", *e.expressions)


def _approximate(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    raise duck_refuse(f"{e.name.lower()}()", APPROX)


def _quantile(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark's percentile interpolates between the closest ranks, as DuckDB's quantile_cont.
    q = e.args.get("quantile")
    if not isinstance(q, exp.Literal) or q.is_string or not is_numeric(c.get("this")):
        raise duck_refuse("percentile() with a non-constant or array percentage", "not translated")
    # Spark interpolates the values as doubles (DuckDB would keep a decimal's scale)
    return exp.Cast(this=call("quantile_cont", exp.Cast(this=e.this, to=exp.DataType.build("DOUBLE")), q),
                    to=exp.DataType.build("DOUBLE"))


def _median(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if not is_numeric(c.get("this")):
        raise duck_refuse("median() of a non-number", "not translated")
    return exp.Cast(this=call("quantile_cont", exp.Cast(this=e.this, to=exp.DataType.build("DOUBLE")),
                              exp.Literal.number(0.5)),
                    to=exp.DataType.build("DOUBLE"))


def _count_if(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark's count_if is a count (0 over no rows); DuckDB's is NULL over no rows. Still one
    # aggregate, so it stands in a window or under FILTER as count_if does.
    return exp.Count(this=exp.Case(ifs=[exp.If(this=e.this.copy(), true=exp.Literal.number(1))]))


def _isnan(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    # Spark's isnan(NULL) is false; DuckDB's is NULL.
    return exp.Coalesce(this=e.copy(), expressions=[exp.false()])


def _to_date(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if e.args.get("format") is not None:
        raise duck_refuse("to_date() with a format", "date patterns are not translated")
    src = c.get("this")
    if src == "date":
        return e.this
    # Spark's to_date(x) is CAST(x AS DATE), which fails on bad input under ANSI.
    return exp.Cast(this=e.this, to=exp.DataType.build("DATE"))


def _date_add(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    unit_arg = e.args.get("unit")
    unit = (unit_arg.name if unit_arg is not None else "DAY").upper()
    if unit != "DAY":
        raise duck_refuse(f"{e.sql('spark')}", "not translated")
    x = e.this if c.get("this") == "date" else exp.Cast(this=e.this, to=exp.DataType.build("DATE"))
    n = e.expression
    op = exp.Sub if isinstance(e, exp.DateSub) else exp.Add
    # DuckDB's date + integer stays a date (date + INTERVAL would become a timestamp).
    return op(this=x, expression=exp.Cast(this=n, to=exp.DataType.build("INT")))


def _window(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    spec = e.args.get("spec")
    if spec is not None and str(spec.args.get("kind", "")).upper() == "RANGE" and any(
            isinstance(spec.args.get(k), exp.Expression) for k in ("start", "end")):
        # Spark computes the bounds (x - n, x + n) in the order column's type: an overflow fails
        raise duck_refuse("a RANGE frame with an offset", "Spark fails where a bound overflows its type")
    return None


RULES: dict[FnKey, Rule] = {
    exp.Window: _window,
    exp.Like: _like,
    exp.ILike: _like,
    exp.Substring: _substring,
    exp.DayOfWeek: _dayofweek,
    "weekday": _weekday,
    "pmod": _pmod,
    "percentile_approx": _approximate,
    "approx_percentile": _approximate,
    exp.Quantile: _quantile,
    exp.Median: _median,
    exp.IsNan: _isnan,
    exp.CountIf: _count_if,
    exp.TsOrDsToDate: _to_date,
    exp.TsOrDsAdd: _date_add,
    exp.DateAdd: _date_add,
    exp.DateSub: _date_add,
}
"""The function rewrites by sqlglot class."""
