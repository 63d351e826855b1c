"""Rewrites of Spark's arithmetic: ANSI division by zero, exact decimal division and average,
and rounding of doubles as Spark computes them.

Decimal results are computed on the unscaled integers (HUGEINT) and rounded half up, as Spark's
BigDecimal does, so that the digits match exactly.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule
from lakehouse.query.dialect.macros import call, parse_duckdb, sql_of
from lakehouse.query.dialect.refuse import FnKey, duck_refuse
from lakehouse.query.dialect.types import FRACTIONAL, INTEGRAL, as_decimal, decimal_of


def _unscaled(x: exp.Expression | str, scale: int) -> str:
    """SQL: a decimal of ``scale`` as the integer of its digits (exact, in HUGEINT)."""
    sql = x if isinstance(x, str) else x.sql("duckdb", identify=True)
    if not scale:
        return f"CAST(({sql}) AS HUGEINT)"
    # the digits of its text: x * 10^scale would overflow DECIMAL(38) for a large x
    return f"CAST(replace(CAST(CAST(({sql}) AS DECIMAL(38,{scale})) AS VARCHAR), '.', '') AS HUGEINT)"


def _decimal_of_unscaled(q: str, p: int, s: int) -> exp.Expression:
    """SQL: the decimal(p,s) whose digits are the integer ``q`` (exact)."""
    return parse_duckdb(f"CAST(CAST({q} AS DECIMAL(38,0)) * CAST('1e-{s}' AS DECIMAL({s + 1},{s})) "
                        f"AS DECIMAL({p},{s}))" if s else f"CAST({q} AS DECIMAL({p},0))")


def _div(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    a, b = e.this, e.expression
    if t is None:
        raise duck_refuse(f"{e.sql('spark')}", "the types of its operands are not known")
    if decimal_of(t):
        da = as_decimal(c.get("this"), a if isinstance(a, exp.Literal) else None)
        db = as_decimal(c.get("expression"), b if isinstance(b, exp.Literal) else None)
        if not da or not db:
            raise duck_refuse(f"{e.sql('spark')}", "decimal division of these types")
        p, s = decimal_of(t)  # type: ignore[misc]
        # value = (A / 10^sa) / (B / 10^sb), rounded half up to scale s
        num = f"{_unscaled(a, da[1])} * {10 ** (db[1] + s)}"
        den = f"{_unscaled(b, db[1])} * {10 ** da[1]}"
        return _decimal_of_unscaled(f"lh_div_half_up({num}, {den})", p, s)
    return exp.Div(this=a, expression=call("lh_nonzero", b))


def _natural(e: exp.Expression, c: ChildTypes) -> tuple[tuple[int, int], tuple[int, int], int, int] | None:
    """For + - * of decimals: the operands' (precision, scale) and the result's precision and
    scale before Spark adjusts them to 38 digits; None when either operand is not a decimal."""
    da = as_decimal(c.get("this"), e.this if isinstance(e.this, exp.Literal) else None)
    db = as_decimal(c.get("expression"), e.expression if isinstance(e.expression, exp.Literal) else None)
    if not da or not db or not (decimal_of(c.get("this")) or decimal_of(c.get("expression"))):
        return None
    (p1, s1), (p2, s2) = da, db
    if isinstance(e, exp.Mul):
        return da, db, p1 + p2 + 1, s1 + s2
    s = max(s1, s2)
    return da, db, max(p1 - s1, p2 - s2) + s + 1, s


def _add_sub_mul(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    natural = _natural(e, c)
    d = decimal_of(t)
    if natural is None or d is None:
        return None
    (p1, s1), (p2, s2), _, scale = natural
    if isinstance(e, exp.Mul):
        # DuckDB multiplies two decimals of 18 digits or fewer in 64 bits: widen one to 128
        a = exp.Cast(this=e.this, to=exp.DataType.build(f"DECIMAL(19,{s1})")) if p1 <= 18 and p2 <= 18 else e.this
        product = exp.Mul(this=a, expression=e.expression)
        if scale == d[1]:
            return product if a is not e.this else None
        # Spark keeps fewer places than the exact product has: it rounds half up to them. DuckDB
        # holds the exact product in 38 digits: a product beyond them is refused (at run time)
        rounded = exp.Cast(this=call("round", product, exp.Literal.number(d[1])),
                           to=exp.DataType.build(f"DECIMAL(38,{d[1]})")).sql("duckdb", identify=True)
        size = f"abs(CAST({sql_of(e.this)} AS DOUBLE) * CAST({sql_of(e.expression)} AS DOUBLE)) * 1e{scale}"
        return parse_duckdb(f"CASE WHEN {size} >= 9e37 THEN error('* of decimals whose exact product exceeds 38 "
                            f"digits is refused on DuckDB: run it with --engine spark') ELSE {rounded} END")
    if scale == d[1]:
        return None  # DuckDB adds exactly at the same scale
    # Spark adds exactly, then rounds half up to the adjusted scale: here on the unscaled integers
    a = f"{_unscaled(e.this, s1)} * {10 ** (scale - s1)}"
    b = f"{_unscaled(e.expression, s2)} * {10 ** (scale - s2)}"
    op = "+" if isinstance(e, exp.Add) else "-"
    exact = _decimal_of_unscaled(f"lh_div_half_up(({a}) {op} ({b}), {10 ** (scale - d[1])})", d[0], d[1])
    # the integers of digits hold 38 digits: operands that add up beyond are refused (at run time)
    size = (f"abs(CAST({sql_of(e.this)} AS DOUBLE)) * 1e{scale} + abs(CAST({sql_of(e.expression)} AS DOUBLE)) "
            f"* 1e{scale}")
    return parse_duckdb(f"CASE WHEN {size} >= 8e37 THEN error('{op} of decimals whose digits exceed 37 is refused on "
                        f"DuckDB: run it with --engine spark') ELSE {exact.sql('duckdb', identify=True)} END")


def _intdiv(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    a, b = c.get("this"), c.get("expression")
    if a not in INTEGRAL or b not in INTEGRAL:
        raise duck_refuse(f"{e.sql('spark')}", "div of non-integral operands is not translated")
    return exp.IntDiv(this=e.this, expression=call("lh_nonzero", e.expression))


def _mod(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if t is None or decimal_of(t):
        raise duck_refuse(f"{e.sql('spark')}", "decimal % is not translated")
    return exp.Mod(this=e.this, expression=call("lh_nonzero", e.expression))


def _avg(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if t is None:
        raise duck_refuse(f"{e.sql('spark')}", "the type of its argument is not known")
    d = decimal_of(c.get("this"))
    if not d or e.find_ancestor(exp.Window) is not None:
        if d:
            raise duck_refuse("avg(decimal) OVER (...)", "the exact window average is not translated")
        return None
    p, s = decimal_of(t)  # type: ignore[misc]
    x = e.this.sql("duckdb", identify=True)
    return _decimal_of_unscaled(f"lh_avg_half_up({_unscaled(f'sum({x})', d[1])}, count({x}), {10 ** (s - d[1])})", p, s)


def _sum(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    d = decimal_of(t)
    if not d or d[0] < 38 or e.find_ancestor(exp.Window) is not None:
        return None
    # Spark's sum of a wide decimal is a decimal(38,s): beyond it, an overflow error under ANSI
    total = e.copy().sql("duckdb", identify=True)
    top = f"CAST('{'9' * (38 - d[1])}.{'9' * d[1]}' AS DECIMAL(38,{d[1]}))" if d[1] else f"CAST('{'9' * 38}' AS DECIMAL(38,0))"
    return parse_duckdb(f"CASE WHEN abs({total}) > {top} THEN "
                        f"error('[ARITHMETIC_OVERFLOW] Overflow in sum of decimals') ELSE {total} END")


def _floor_ceil(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    if c.get("this") in INTEGRAL and e.args.get("decimals") is None:
        return exp.Cast(this=e.this, to=exp.DataType.build("BIGINT"))  # Spark: the value, a bigint
    if e.args.get("decimals") is not None:
        raise duck_refuse(f"{e.sql('spark').split('(')[0].lower()}() to a number of places", "not translated")
    if c.get("this") in FRACTIONAL and e.args.get("decimals") is None:
        return call("lh_long_of_double", e.copy())  # Spark: a bigint, as Java converts a double
    return None


RULES: dict[FnKey, Rule] = {
    exp.Div: _div,
    exp.IntDiv: _intdiv,
    exp.Mod: _mod,
    exp.Avg: _avg,
    exp.Sum: _sum,
    exp.Add: _add_sub_mul,
    exp.Sub: _add_sub_mul,
    exp.Mul: _add_sub_mul,
    exp.Floor: _floor_ceil,
    exp.Ceil: _floor_ceil,
}
"""The arithmetic rewrites by sqlglot class."""
