"""Spark's type of each expression of a query, derived bottom up.

The translator walks a query's tree, resolving column names in a ``Scope`` and typing each node
from its children's types (``type_of``); the rewrite rules receive the same types (``Rule``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from lakehouse.query.dialect.types import (
    FRACTIONAL,
    INTEGRAL,
    Columns,
    arithmetic,
    bounded,
    dec,
    decimal_of,
    is_numeric,
    spark_type_of,
    wider,
)

ChildTypes = dict[str, "str | None"]
"""A node's children's Spark types by argument key: ``this``, ``expression``, ``ifs.0``, ..."""

Rule = Callable[[exp.Expression, ChildTypes, "str | None"], "exp.Expression | None"]
"""A rewrite: (node, its children's types, its own type) -> its replacement for DuckDB, or None
to keep it; raises duck_refuse when DuckDB cannot give Spark's value."""

Typer = Callable[[exp.Expression, ChildTypes], "str | None"]
"""Spark's type of a function's result from its arguments' types (a function module's own rule,
taking precedence over ``type_of``)."""


@dataclass
class Scope:
    """The sources a query's column names refer to."""

    sources: dict[str, Columns] = field(default_factory=dict)
    """alias (lower case) -> columns, in FROM order."""

    def resolve(self, col: exp.Column) -> str | None:
        """The Spark type of the column ``col`` names (None when not found or not known)."""
        name = col.name.lower()
        if col.table:
            cols = self.sources.get(col.table.lower(), [])
            return next((t for n, t in cols if n.lower() == name), None)
        for cols in self.sources.values():
            for n, t in cols:
                if n.lower() == name:
                    return t
        return None

    def star(self, table: str | None = None) -> Columns:
        """The columns ``*`` (or ``table.*``) stands for."""
        if table:
            return list(self.sources.get(table.lower(), []))
        return [c for cols in self.sources.values() for c in cols]


def type_of(e: exp.Expression, scope: Scope, c: ChildTypes) -> str | None:
    """Spark's type of ``e``, given its children's types ``c`` (None when not derived here); the
    functions whose rewrite modules type them (``translate.TYPES``) are typed there, not here."""
    ct = c.get("this")
    if isinstance(e, exp.Column):
        if isinstance(e.this, exp.Star):
            return None
        return scope.resolve(e)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return "string"
        text = e.this
        if re.fullmatch(r"\d+", text):
            return "int" if int(text) <= 2**31 - 1 else "bigint" if int(text) <= 2**63 - 1 else dec(len(text), 0)
        if re.fullmatch(r"\d*\.\d*", text):
            whole, frac = text.split(".")
            digits = len(whole.lstrip("0")) + len(frac)
            return dec(max(digits, len(frac), 1), len(frac))
        return "double"
    if isinstance(e, exp.Boolean):
        return "boolean"
    if isinstance(e, exp.Null):
        return "void"
    if isinstance(e, (exp.Alias, exp.Paren)):
        return ct
    if isinstance(e, exp.Neg):
        lit = e.this
        if isinstance(lit, exp.Literal) and not lit.is_string and re.fullmatch(r"\d+", lit.this):
            # Spark reads the sign as part of the number: -2147483648 is an int
            return "int" if int(lit.this) <= 2**31 else "bigint" if int(lit.this) <= 2**63 else ct
        return ct
    if isinstance(e, (exp.Cast, exp.TryCast)):
        return spark_type_of(e.args["to"])
    if isinstance(e, (exp.Predicate, exp.Connector, exp.Not, exp.Is, exp.In, exp.Between,
                      exp.Like, exp.ILike, exp.RegexpLike, exp.Exists)):
        return "boolean"
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return arithmetic(e, ct, c.get("expression"))
    if isinstance(e, exp.IntDiv):
        return "bigint"
    if isinstance(e, (exp.Count, exp.CountIf)):
        return "bigint"
    if isinstance(e, (exp.LogicalAnd, exp.LogicalOr, exp.IsNan, exp.IsInf)):
        return "boolean"
    if isinstance(e, exp.Sum):
        d = decimal_of(ct)
        if d:
            return bounded(d[0] + 10, d[1])
        return "bigint" if ct in INTEGRAL else "double" if ct in FRACTIONAL else None
    if isinstance(e, exp.Avg):
        d = decimal_of(ct)
        if d:
            return bounded(d[0] + 4, d[1] + 4)
        return "double" if is_numeric(ct) else None
    if isinstance(e, (exp.Min, exp.Max, exp.AnyValue, exp.First, exp.Last, exp.Abs)):
        return ct
    if isinstance(e, (exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop,
                      exp.Quantile, exp.Median, exp.Pow, exp.PercentileCont)):
        return "double"
    if isinstance(e, exp.Window):
        return ct
    if isinstance(e, (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile)):
        return "int"
    if isinstance(e, (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue)):
        return ct
    if isinstance(e, (exp.Coalesce, exp.Greatest, exp.Least)):
        out: str | None = ct
        for k, v in c.items():
            if k.startswith("expressions."):
                out = wider(out, v)
        return out
    if isinstance(e, exp.Nullif):
        return ct
    if isinstance(e, exp.If):
        return wider(c.get("true"), c.get("false", "void"))
    if isinstance(e, exp.Case):
        out = c.get("default", "void")
        for k, v in c.items():
            if k.startswith("ifs."):
                out = wider(out, v)
        return out
    if isinstance(e, (exp.Trim, exp.Concat, exp.ConcatWs, exp.DPipe, exp.Substring, exp.Initcap,
                      exp.Pad, exp.RegexpReplace, exp.RegexpExtract)):
        return "string"
    if isinstance(e, (exp.Length, exp.StrPosition, exp.Hour, exp.Minute, exp.Second,
                      exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfWeek, exp.DateDiff)):
        return "int"
    if isinstance(e, (exp.TsOrDsToDate, exp.TsOrDsAdd, exp.DateAdd, exp.DateSub,
                      exp.CurrentDate, exp.StrToDate)):
        return "date"
    if isinstance(e, (exp.TimestampTrunc, exp.StrToTime, exp.CurrentTimestamp,
                      exp.UnixToTime)):
        return "timestamp"
    if isinstance(e, exp.Round):
        d = decimal_of(ct)
        r = int(e.args["decimals"].name) if isinstance(e.args.get("decimals"), exp.Literal) else 0
        if d:
            s = max(0, min(r, d[1]))
            return bounded(d[0] - d[1] + s + 1, s)
        return ct
    if isinstance(e, (exp.Floor, exp.Ceil)):
        d = decimal_of(ct)
        if d and e.args.get("decimals") is None:
            return bounded(d[0] - d[1] + 1, 0)
        return "bigint" if ct in FRACTIONAL or ct in INTEGRAL else None
    if isinstance(e, exp.Anonymous):
        name = e.name.lower()
        if name in ("weekday", "dayofweek", "day", "dayofmonth", "datediff"):
            return "int"
        if name == "pmod":
            return arithmetic(exp.Mod(), c.get("expressions.0"), c.get("expressions.1"))
    return None
