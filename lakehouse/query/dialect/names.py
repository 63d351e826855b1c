"""Spark's names of result columns: a safe subset of the names Spark generates.

An output expression without AS gets the name Spark would print for it; where this module does
not reproduce Spark's name it answers None, and the translator asks for an AS name.
"""

from __future__ import annotations

from sqlglot import exp

_NAMED_FUNCS: dict[type[exp.Expression], str] = {
    exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max", exp.Lower: "lower",
    exp.Upper: "upper", exp.Abs: "abs", exp.Coalesce: "coalesce", exp.Length: "length",
    exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second", exp.Year: "year",
    exp.Month: "month",
}
_BINARY: dict[type[exp.Expression], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.EQ: "=", exp.NEQ: "!=",
           exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.And: "AND", exp.Or: "OR",
           exp.Mod: "%"}


def spark_name(e: exp.Expression) -> str | None:
    """The column name Spark gives an output expression, or None when not reproduced here."""
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name
    if isinstance(e, (exp.Cast, exp.TryCast)) and isinstance(e.this, exp.Column):
        return e.this.name  # Spark names a cast of a column after the column
    return _pretty(e)


def _pretty(e: exp.Expression) -> str | None:
    if isinstance(e, exp.Column):
        return None if e.table else e.name
    if isinstance(e, exp.Literal):
        return e.this
    if isinstance(e, exp.Boolean):
        return "true" if e.this else "false"
    if isinstance(e, exp.Null):
        return "NULL"
    if isinstance(e, exp.Paren):
        return _pretty(e.this)
    if isinstance(e, exp.Count):
        if isinstance(e.this, exp.Star):
            return "count(1)"
        if isinstance(e.this, exp.Distinct):
            inner = [_pretty(x) for x in e.this.expressions]
            return None if None in inner else f"count(DISTINCT {', '.join(inner)})"  # type: ignore[arg-type]
        inner_name = _pretty(e.this)
        return None if inner_name is None else f"count({inner_name})"
    fname = _NAMED_FUNCS.get(type(e))
    if fname:
        args = [e.this, *(e.expressions or [])]
        inner = [_pretty(a) for a in args if a is not None]
        return None if None in inner else f"{fname}({', '.join(inner)})"  # type: ignore[arg-type]
    op = _BINARY.get(type(e))
    if op:
        a, b = _pretty(e.this), _pretty(e.expression)
        return None if a is None or b is None else f"({a} {op} {b})"
    return None
