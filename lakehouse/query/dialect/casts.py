"""Rewrites of Spark's conversions: CAST, TRY_CAST, and the implicit casts to text in concat.

Spark casts with ANSI rules (a bad string is an error, a fraction truncates toward zero) and
prints values in its own text forms; these rules make DuckDB do the same, or refuse.
"""

from __future__ import annotations

from sqlglot import exp

from lakehouse.query.dialect.infer import ChildTypes, Rule
from lakehouse.query.dialect.macros import call
from lakehouse.query.dialect.refuse import FnKey, duck_refuse
from lakehouse.query.dialect.types import FRACTIONAL, INTEGRAL, decimal_of, duck_type, spark_type_of

_FORMAT = "DuckDB's text form differs from Spark's"


def to_string(x: exp.Expression, src: str | None) -> exp.Expression:
    """Spark's text of a value (CAST AS STRING and implicit casts in concat)."""
    if src == "timestamp":
        return call("lh_ts_to_string", x)
    if src in FRACTIONAL:
        raise duck_refuse(f"CAST({x.sql('spark')} AS STRING) of a {src}", _FORMAT)
    if src in ("string",):
        return x
    if src is None or src.startswith(("array", "map", "struct")):
        raise duck_refuse(f"CAST({x.sql('spark')} AS STRING)", "the type of its argument is not known")
    return exp.Cast(this=x, to=exp.DataType.build("VARCHAR"))


def _cast(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    to = spark_type_of(e.args["to"])
    src = c.get("this")
    safe = isinstance(e, exp.TryCast) and bool(e.args.get("safe"))  # try_cast(), not CAST
    kind = "TRY_CAST" if safe else "CAST"
    x = e.this
    if to is None:
        raise duck_refuse(f"{kind}(... AS {e.args['to'].sql('spark')})", "type not translated")
    if src is None and to != "string" and not isinstance(x, exp.Null):
        raise duck_refuse(f"{kind}({x.sql('spark')} AS {to})", "the type of its argument is not known")
    if safe:
        if to in INTEGRAL and src == "string":
            raise duck_refuse(f"TRY_CAST(string AS {to})", "DuckDB accepts strings Spark refuses")
        if to in INTEGRAL and src != to and (src in FRACTIONAL or decimal_of(src)):
            return exp.TryCast(this=call("trunc", x), to=duck_type(to))
        return exp.TryCast(this=x, to=duck_type(to))
    if to in INTEGRAL:
        if src in FRACTIONAL or decimal_of(src):
            # Spark truncates toward zero; DuckDB rounds.
            return exp.Cast(this=call("trunc", x), to=duck_type(to))
        if src == "string":
            return call(f"lh_str_to_{to}", x)
    if to == "string":
        return to_string(x, src)
    if src == "string" and decimal_of(to):
        raise duck_refuse(f"CAST(string AS {to})", "rounding of string to decimal differs")
    if src == "string" and to == "boolean":
        raise duck_refuse("CAST(string AS boolean)", "the accepted spellings differ")
    if src == "string" and to == "timestamp":
        # Spark reads an offset in the text and keeps the instant; so does TIMESTAMPTZ (UTC).
        return exp.Cast(this=x, to=exp.DataType.build("TIMESTAMPTZ"))
    return exp.Cast(this=x, to=duck_type(to))


def _concat(e: exp.Expression, c: ChildTypes, t: str | None) -> exp.Expression | None:
    args = [e.this, e.expression] if isinstance(e, exp.DPipe) else list(e.expressions)
    keys = ["this", "expression"] if isinstance(e, exp.DPipe) else [f"expressions.{i}" for i in range(len(args))]
    new = [a if c.get(k) == "string" else to_string(a, c.get(k)) for a, k in zip(args, keys)]
    if isinstance(e, exp.ConcatWs):
        return call("concat_ws", *new)
    # Spark's concat is NULL when any argument is; DuckDB's concat() skips NULLs, || does not.
    out = new[0]
    for a in new[1:]:
        out = exp.DPipe(this=out, expression=a)
    return out


RULES: dict[FnKey, Rule] = {
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Concat: _concat,
    exp.ConcatWs: _concat,
    exp.DPipe: _concat,
}
"""The conversion rewrites by sqlglot class."""
