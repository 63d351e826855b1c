"""Spark SQL on DuckDB with Spark's answer: result types, column names, rewrites, refusals.

Users write Spark SQL (the pipeline's engine is the reference). sqlglot transpiles it to DuckDB,
but the two engines differ in places where a transpiler keeps the syntax and loses the meaning.
This module walks the checked tree once, derives Spark's type of every expression (the rules
of Spark 4 with ANSI mode on, as lakehouse's session runs it), rewrites the constructs whose
meaning differs so that DuckDB computes Spark's value, and refuses the ones it cannot match,
naming the construct. The result columns carry Spark's names and types (``Translation``).

Pure: no engine is imported here. Every rule is checked against real Spark by
tests/test_query_parity.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from lakehouse.errors import QueryError

if TYPE_CHECKING:
    import pyarrow as pa

# -- Spark types -----------------------------------------------------------------------------
# A type is Spark's simpleString: int, bigint, double, decimal(10,2), string, ... or None when
# this module cannot tell (then DuckDB's type is kept, unless that could change the JSON).

INTEGRAL = ("tinyint", "smallint", "int", "bigint")
FRACTIONAL = ("float", "double")
_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")
MAX_PRECISION = 38
# lakehouse column types (types.ColumnType) as Spark types
COLUMN_TYPES = {"string": "string", "int": "int", "long": "bigint", "double": "double",
                "boolean": "boolean", "date": "date", "timestamp": "timestamp"}


def decimal_of(t: str | None) -> tuple[int, int] | None:
    m = _DEC.match(t or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def dec(p: int, s: int) -> str:
    return f"decimal({p},{s})"


def bounded(p: int, s: int) -> str:
    """DecimalType.bounded: precision and scale capped at 38."""
    return dec(min(p, MAX_PRECISION), min(s, MAX_PRECISION))


def adjust(p: int, s: int) -> str:
    """DecimalType.adjustPrecisionScale (spark.sql.decimalOperations.allowPrecisionLoss=true)."""
    if p <= MAX_PRECISION:
        return dec(p, s)
    int_digits = p - s
    min_scale = min(s, 6)
    return dec(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def is_numeric(t: str | None) -> bool:
    return t in INTEGRAL or t in FRACTIONAL or decimal_of(t) is not None


def as_decimal(t: str | None, literal: exp.Expression | None = None) -> tuple[int, int] | None:
    """An integral type as Spark widens it for decimal arithmetic (literals: their digits)."""
    d = decimal_of(t)
    if d:
        return d
    if isinstance(literal, exp.Literal) and not literal.is_string and t in INTEGRAL:
        return (max(len(literal.this.lstrip("-")), 1), 0)
    return {"tinyint": (3, 0), "smallint": (5, 0), "int": (10, 0), "bigint": (20, 0)}.get(t or "")


def wider(a: str | None, b: str | None) -> str | None:
    """The common type of two branches (CASE, COALESCE, UNION), for the types handled here."""
    if a == b or b == "void":
        return a
    if a == "void":
        return b
    if a is None or b is None:
        return None
    if a in INTEGRAL and b in INTEGRAL:
        return max(a, b, key=INTEGRAL.index)
    if a in FRACTIONAL or b in FRACTIONAL:
        return "double" if is_numeric(a) and is_numeric(b) else None
    da, db = as_decimal(a), as_decimal(b)
    if da and db:
        s = max(da[1], db[1])
        return bounded(max(da[0] - da[1], db[0] - db[1]) + s, s)
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    return None


def spark_type_of(data_type: exp.DataType) -> str | None:
    """A sqlglot DataType (parsed as Spark) as Spark's simpleString."""
    t = data_type.this
    T = exp.DataType.Type
    simple = {
        T.TINYINT: "tinyint", T.SMALLINT: "smallint", T.INT: "int", T.BIGINT: "bigint",
        T.FLOAT: "float", T.DOUBLE: "double", T.BOOLEAN: "boolean", T.DATE: "date",
        T.TIMESTAMP: "timestamp", T.TIMESTAMPLTZ: "timestamp", T.TIMESTAMPTZ: "timestamp",
        T.VARCHAR: "string", T.TEXT: "string", T.CHAR: "string",
    }
    if t in simple:
        return simple[t]
    if t == T.DECIMAL:
        params = [int(e.name) for e in data_type.expressions]
        p = params[0] if params else 10
        s = params[1] if len(params) > 1 else 0
        return dec(p, s)
    return None


# -- scopes: what a column name refers to ----------------------------------------------------

Columns = list[tuple[str, "str | None"]]


@dataclass
class Scope:
    sources: dict[str, Columns] = field(default_factory=dict)
    """alias (lower case) -> columns, in FROM order."""

    def resolve(self, col: exp.Column) -> str | None:
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
        if table:
            return list(self.sources.get(table.lower(), []))
        return [c for cols in self.sources.values() for c in cols]


@dataclass(frozen=True)
class Translation:
    sql: str
    """The DuckDB SQL."""
    names: list[str]
    """Spark's result column names."""
    types: list[str | None]
    """Spark's result column types (None: DuckDB's type is kept)."""


def duck_refuse(construct: str, why: str) -> QueryError:
    return QueryError(f"duckdb: {construct} is refused: {why}; run it with --engine spark")


# -- the translator --------------------------------------------------------------------------

_APPROX = "DuckDB's approximation differs from Spark's"
_UNVERIFIED = "not among the functions checked to give Spark's answer on DuckDB"
_FORMAT = "DuckDB's text form differs from Spark's"


class Translator:
    """One query: Spark types for every expression, rewritten for DuckDB in place."""

    def __init__(self, tables: dict[str, Columns]) -> None:
        self.tables = {k.lower(): v for k, v in tables.items()}

    # public ------------------------------------------------------------------------------

    def translate(self, tree: exp.Expression) -> Translation:
        refuse_functions(tree)
        tree = tree.copy()
        names, types, exprs = self.query(tree, {})
        for i, (n, e) in enumerate(zip(names, exprs)):
            if n is None:
                raise QueryError(
                    f"duckdb: result column {i + 1} `{e.sql('spark')}` needs a name (AS name): "
                    "Spark's generated column names are not reproduced; name it, or run it with "
                    "--engine spark")
        sql = tree.sql(dialect="duckdb", identify=True)
        return Translation(sql, [n for n in names if n is not None], types)

    # queries ------------------------------------------------------------------------------

    def query(self, q: exp.Expression, ctes: dict[str, Columns]
              ) -> tuple[list[str | None], list[str | None], list[exp.Expression]]:
        """Walk a query: its output names, Spark types and output expressions."""
        ctes = dict(ctes)
        with_ = q.args.get("with") or q.args.get("with_")
        if with_ is not None:
            for cte in with_.expressions:
                n, t, _ = self.query(cte.this, ctes)
                alias_cols = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") else []
                if alias_cols:
                    n = alias_cols
                ctes[cte.alias_or_name.lower()] = [(a or "", b) for a, b in zip(n, t)]
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        if isinstance(q, exp.SetOperation):
            ln, lt, le = self.query(q.left, ctes)
            _, rt, _ = self.query(q.right, ctes)
            self._order_nulls(q, Scope({"": [(n or "", t) for n, t in zip(ln, lt)]}), ctes)
            return ln, [wider(a, b) for a, b in zip(lt, rt)], le
        if isinstance(q, exp.Values):
            rows = q.expressions
            scope = Scope()
            types = [self.expr(e, scope, ctes) for e in rows[0].expressions] if rows else []
            for r in rows[1:]:
                for i, e in enumerate(r.expressions):
                    types[i] = wider(types[i], self.expr(e, scope, ctes))
            names = [f"col{i + 1}" for i in range(len(types))]
            return names, types, list(rows[0].expressions) if rows else []
        if not isinstance(q, exp.Select):
            raise duck_refuse(f"{q.key.upper()}", "not supported on DuckDB")
        scope = Scope()
        from_ = q.args.get("from") or q.args.get("from_")
        if from_ is not None:
            self.source(from_.this, scope, ctes)
        for j in q.args.get("joins") or []:
            self.source(j.this, scope, ctes)
            if j.args.get("on") is not None:
                self.expr(j.args["on"], scope, ctes)
        if q.args.get("laterals"):
            raise duck_refuse("LATERAL VIEW", "not translated to DuckDB")
        names: list[str | None] = []
        types: list[str | None] = []
        exprs: list[exp.Expression] = []
        for p in q.expressions:
            if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
                cols = scope.star(p.table if isinstance(p, exp.Column) else None)
                if not cols:
                    raise duck_refuse(f"{p.sql('spark')}", "the columns behind * are not known")
                for n, t in cols:
                    names.append(n)
                    types.append(t)
                    exprs.append(p)
                continue
            names.append(spark_name(p))  # before the rewrites below change the expression
            types.append(self.expr(p, scope, ctes))
            exprs.append(p)
        for key in ("where", "having", "qualify"):
            if q.args.get(key) is not None:
                self.expr(q.args[key], scope, ctes)
        group = q.args.get("group")
        if group is not None:
            for g in group.expressions:
                self.expr(g, scope, ctes)
        self._order_nulls(q, scope, ctes, [(n or "", t) for n, t in zip(names, types)])
        return names, types, exprs

    def _order_nulls(self, q: exp.Expression, scope: Scope, ctes: dict[str, Columns],
                     outputs: Columns | None = None) -> None:
        order = q.args.get("order")
        if order is None:
            return
        s = Scope({**scope.sources, "": outputs or []}) if outputs else scope
        for o in order.expressions:
            self.expr(o.this, s, ctes)
            _spark_nulls(o)

    def source(self, node: exp.Expression, scope: Scope, ctes: dict[str, Columns]) -> None:
        alias = node.alias_or_name.lower() if node.alias_or_name else ""
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name.lower()
            if name not in ctes and name not in self.tables:
                raise QueryError(f"duckdb: table or view {node.name} not found (tables: "
                                 f"{', '.join(sorted(self.tables)) or 'none'})")
            cols = ctes[name] if name in ctes else self.tables[name]
            scope.sources[alias or name] = list(cols)
            return
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Func):
            fname = node.this.sql_name().lower() if not isinstance(node.this, exp.Anonymous) else node.this.name.lower()
            if fname == "range":
                scope.sources[alias or "range"] = [("id", "bigint")]
                return
            raise duck_refuse(f"table function {fname}()", "not translated to DuckDB")
        if isinstance(node, exp.Subquery):
            n, t, _ = self.query(node.this, ctes)
            cols_alias = node.args.get("alias")
            if cols_alias is not None and cols_alias.columns:
                n = [c.name for c in cols_alias.columns]
            scope.sources[alias] = [(a or "", b) for a, b in zip(n, t)]
            return
        if isinstance(node, exp.Values):
            n, t, _ = self.query(node, ctes)
            cols_alias = node.args.get("alias")
            if cols_alias is not None and cols_alias.columns:
                n = [c.name for c in cols_alias.columns]
            scope.sources[alias] = [(a or "", b) for a, b in zip(n, t)]
            return
        raise duck_refuse(f"FROM {node.sql('spark')}", "not translated to DuckDB")

    # expressions --------------------------------------------------------------------------

    def expr(self, e: exp.Expression, scope: Scope, ctes: dict[str, Columns]) -> str | None:
        """Spark's type of ``e``; rewrites ``e``'s subtree for DuckDB on the way (bottom up)."""
        if isinstance(e, (exp.Subquery, exp.Select, exp.SetOperation)) and not isinstance(e, exp.Paren):
            inner = e.this if isinstance(e, exp.Subquery) else e
            _, types, _ = self.query(inner, {**ctes})
            return types[0] if len(types) == 1 else None
        if isinstance(e, (exp.Exists,)):
            self.query(e.this, ctes)
            return "boolean"
        child_types: dict[str, str | None] = {}
        for key, value in list(e.args.items()):
            if isinstance(value, exp.Expression):
                child_types[key] = self.expr(value, scope, ctes)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, exp.Expression):
                        child_types[f"{key}.{i}"] = self.expr(v, scope, ctes)
        t = self.type_of(e, scope, child_types)
        rule = _REWRITES.get(type(e))
        if rule is not None:
            new = rule(self, e, child_types, t)
            if new is not None and new is not e:
                e.replace(new)
        return t

    def type_of(self, e: exp.Expression, scope: Scope, c: dict[str, str | None]) -> str | None:
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
                          exp.Quantile, exp.Median, exp.Sqrt, exp.Exp, exp.Ln, exp.Log, exp.Pow,
                          exp.Corr, exp.PercentileCont)):
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
        if isinstance(e, (exp.Lower, exp.Upper, exp.Trim, exp.Concat, exp.ConcatWs, exp.DPipe,
                          exp.Substring, exp.Initcap, exp.Pad, exp.TimeToStr, exp.RegexpReplace,
                          exp.RegexpExtract, exp.Reverse, exp.Repeat, exp.Replace, exp.Left,
                          exp.Right)):
            return "string"
        if isinstance(e, (exp.Length, exp.StrPosition, exp.Hour, exp.Minute, exp.Second,
                          exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfWeek,
                          exp.DayOfYear, exp.Quarter, exp.WeekOfYear, exp.DateDiff)):
            return "int"
        if isinstance(e, (exp.TsOrDsToDate, exp.TsOrDsAdd, exp.DateAdd, exp.DateSub,
                          exp.CurrentDate, exp.LastDay, exp.DateTrunc, exp.StrToDate)):
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


def refuse_functions(node: exp.Expression) -> None:
    """Top down, so that the outermost function a user wrote is the one named."""
    rule = _REWRITES.get(type(node))
    if rule is not None and getattr(rule, "refuses", False):
        rule(None, node, {}, None)  # type: ignore[arg-type]
    if rule is None and isinstance(node, exp.Func) and type(node) not in VERIFIED_FUNCTIONS:
        raise duck_refuse(f"{spark_func_name(node)}()", _UNVERIFIED)
    for child in node.iter_expressions():
        refuse_functions(child)


def arithmetic(e: exp.Expression, a: str | None, b: str | None) -> str | None:
    """Spark's result type of + - * / % on two operand types (ANSI, precision loss allowed)."""
    if a is None or b is None:
        return None
    if a == "void" or b == "void":
        return a if b == "void" else b
    if isinstance(e, exp.Div) and not (decimal_of(a) or decimal_of(b)):
        return "double" if is_numeric(a) and is_numeric(b) else None
    if a in FRACTIONAL or b in FRACTIONAL:
        return "double"
    if a in INTEGRAL and b in INTEGRAL:
        return max(a, b, key=INTEGRAL.index)
    da = as_decimal(a, e.this if isinstance(e.this, exp.Literal) else None)
    db = as_decimal(b, e.expression if isinstance(e.expression, exp.Literal) else None)
    if not da or not db:
        return None
    (p1, s1), (p2, s2) = da, db
    if isinstance(e, (exp.Add, exp.Sub)):
        s = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if isinstance(e, exp.Mul):
        return adjust(p1 + p2 + 1, s1 + s2)
    if isinstance(e, exp.Div):
        s = max(6, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + s, s)
    if isinstance(e, exp.Mod):
        s = max(s1, s2)
        return adjust(min(p1 - s1, p2 - s2) + s, s)
    return None


def _spark_nulls(o: exp.Ordered) -> None:
    """Spark sorts NULLs first ascending and last descending; say so explicitly for DuckDB."""
    if o.args.get("nulls_first") is None:
        o.set("nulls_first", not o.args.get("desc"))


# -- Spark's generated column names (a safe subset; the rest must be named with AS) ----------

_NAMED_FUNCS = {
    exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max", exp.Lower: "lower",
    exp.Upper: "upper", exp.Abs: "abs", exp.Coalesce: "coalesce", exp.Length: "length",
    exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second", exp.Year: "year",
    exp.Month: "month",
}
_BINARY = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.EQ: "=", exp.NEQ: "!=",
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


# -- rewrites: DuckDB computes Spark's value -------------------------------------------------

Rule = Callable[[Translator, exp.Expression, dict, "str | None"], "exp.Expression | None"]


def _duck(sql: str) -> exp.Expression:
    import sqlglot

    return sqlglot.parse_one(sql, read="duckdb")


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _duck_type(t: str) -> exp.DataType:
    return exp.DataType.build(t.replace("string", "varchar"), dialect="duckdb")


def _cast(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
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
            return exp.TryCast(this=_fn("trunc", x), to=_duck_type(to))
        return exp.TryCast(this=x, to=_duck_type(to))
    if to in INTEGRAL:
        if src in FRACTIONAL or decimal_of(src):
            # Spark truncates toward zero; DuckDB rounds.
            return exp.Cast(this=_fn("trunc", x), to=_duck_type(to))
        if src == "string":
            return _fn(f"lh_str_to_{to}", x)
    if to == "string":
        return to_string(x, src)
    if src == "string" and decimal_of(to):
        raise duck_refuse(f"CAST(string AS {to})", "rounding of string to decimal differs")
    if src == "string" and to == "boolean":
        raise duck_refuse("CAST(string AS boolean)", "the accepted spellings differ")
    if src == "string" and to == "timestamp":
        # Spark reads an offset in the text and keeps the instant; so does TIMESTAMPTZ (UTC).
        return exp.Cast(this=x, to=exp.DataType.build("TIMESTAMPTZ"))
    return exp.Cast(this=x, to=_duck_type(to))


def to_string(x: exp.Expression, src: str | None) -> exp.Expression:
    """Spark's text of a value (CAST AS STRING and implicit casts in concat)."""
    if src == "timestamp":
        return _fn("lh_ts_to_string", x)
    if src in FRACTIONAL:
        raise duck_refuse(f"CAST({x.sql('spark')} AS STRING) of a {src}", _FORMAT)
    if src in ("string",):
        return x
    if src is None or src.startswith(("array", "map", "struct")):
        raise duck_refuse(f"CAST({x.sql('spark')} AS STRING)", "the type of its argument is not known")
    return exp.Cast(this=x, to=exp.DataType.build("VARCHAR"))


def _concat(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    args = [e.this, e.expression] if isinstance(e, exp.DPipe) else list(e.expressions)
    keys = ["this", "expression"] if isinstance(e, exp.DPipe) else [f"expressions.{i}" for i in range(len(args))]
    new = [a if c.get(k) == "string" else to_string(a, c.get(k)) for a, k in zip(args, keys)]
    if isinstance(e, exp.ConcatWs):
        return _fn("concat_ws", *new)
    # Spark's concat is NULL when any argument is; DuckDB's concat() skips NULLs, || does not.
    out = new[0]
    for a in new[1:]:
        out = exp.DPipe(this=out, expression=a)
    return out


def _like(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    # Spark's LIKE escapes with a backslash by default; DuckDB has no default escape.
    if isinstance(e.parent, exp.Escape):
        return None
    return exp.Escape(this=e.copy(), expression=exp.Literal.string("\\"))


def _div(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
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
    return exp.Div(this=a, expression=_fn("lh_nonzero", b))


def _unscaled(x: exp.Expression | str, scale: int) -> str:
    """SQL: a decimal of ``scale`` as the integer of its digits (exact, in HUGEINT)."""
    sql = x if isinstance(x, str) else x.sql("duckdb", identify=True)
    return f"CAST(({sql}) * {10 ** scale} AS HUGEINT)"


def _decimal_of_unscaled(q: str, p: int, s: int) -> exp.Expression:
    """SQL: the decimal(p,s) whose digits are the integer ``q`` (exact)."""
    return _duck(f"CAST(CAST({q} AS DECIMAL(38,0)) * CAST('1e-{s}' AS DECIMAL({s + 1},{s})) "
                 f"AS DECIMAL({p},{s}))" if s else f"CAST({q} AS DECIMAL({p},0))")


def _intdiv(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    a, b = c.get("this"), c.get("expression")
    if a not in INTEGRAL or b not in INTEGRAL:
        raise duck_refuse(f"{e.sql('spark')}", "div of non-integral operands is not translated")
    return exp.IntDiv(this=e.this, expression=_fn("lh_nonzero", e.expression))


def _mod(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if t is None or decimal_of(t):
        raise duck_refuse(f"{e.sql('spark')}", "decimal % is not translated")
    return exp.Mod(this=e.this, expression=_fn("lh_nonzero", e.expression))


def _avg(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if t is None:
        raise duck_refuse(f"{e.sql('spark')}", "the type of its argument is not known")
    d = decimal_of(c.get("this"))
    if not d or e.find_ancestor(exp.Window) is not None:
        if d:
            raise duck_refuse("avg(decimal) OVER (...)", "the exact window average is not translated")
        return None
    p, s = decimal_of(t)  # type: ignore[misc]
    x = e.this.sql("duckdb", identify=True)
    num = f"{_unscaled(f'sum({x})', d[1])} * {10 ** (s - d[1])}"
    return _decimal_of_unscaled(f"lh_avg_half_up({num}, count({x}))", p, s)


def _substring(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    start = e.args.get("start")
    length = e.args.get("length")
    if start is None:
        return None
    # Spark: position 0 behaves as 1; DuckDB counts position 0 as before the first character.
    start = _duck(f"lh_substr_pos({start.sql('duckdb', identify=True)})")
    args = [e.this, start] + ([length] if length is not None else [])
    return _fn("lh_substr", *args) if length is not None else _fn("substring", *args)


def _round(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if c.get("this") not in FRACTIONAL:
        return None
    digits = e.args.get("decimals")
    if digits is not None and not (isinstance(digits, exp.Literal) and digits.name == "0"):
        raise duck_refuse("round() of a double to decimal places",
                          "Spark rounds the double's decimal text, DuckDB its binary value")
    # Spark rounds through BigDecimal and never returns -0.0; adding 0.0 turns -0.0 into 0.0.
    return exp.Add(this=e.copy(), expression=exp.Literal.number("0.0"))


def _floor_ceil(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if c.get("this") in FRACTIONAL and e.args.get("decimals") is None:
        return exp.Cast(this=e.copy(), to=exp.DataType.build("BIGINT"))  # Spark: a bigint
    return None


def _dayofweek(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    # Spark: 1 = Sunday .. 7 = Saturday; DuckDB's dayofweek: 0 = Sunday .. 6.
    return exp.Add(this=exp.Paren(this=_fn("dayofweek", e.this)), expression=exp.Literal.number(1))


def _anonymous(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    name = e.name.lower()
    args = e.expressions
    if name == "weekday":  # Spark: 0 = Monday .. 6 = Sunday
        return exp.Sub(this=exp.Paren(this=_fn("isodow", args[0])), expression=exp.Literal.number(1))
    if name == "pmod":
        if c.get("expressions.0") not in INTEGRAL or c.get("expressions.1") not in INTEGRAL:
            raise duck_refuse("pmod() of non-integral operands", "not translated")
        return _fn("lh_pmod", *args)
    if name in ("percentile_approx", "approx_percentile"):
        raise duck_refuse(f"{name}()", _APPROX)
    raise duck_refuse(f"{name}()", _UNVERIFIED)


def _quantile(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    # Spark's percentile interpolates between the closest ranks, as DuckDB's quantile_cont.
    q = e.args.get("quantile")
    if not isinstance(q, exp.Literal) or q.is_string or not is_numeric(c.get("this")):
        raise duck_refuse("percentile() with a non-constant or array percentage", "not translated")
    return exp.Cast(this=_fn("quantile_cont", e.this, q), to=exp.DataType.build("DOUBLE"))


def _median(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if not is_numeric(c.get("this")):
        raise duck_refuse("median() of a non-number", "not translated")
    return exp.Cast(this=_fn("quantile_cont", e.this, exp.Literal.number(0.5)),
                    to=exp.DataType.build("DOUBLE"))


def spark_func_name(e: exp.Expression) -> str:
    """A function's name as Spark spells it (sqlglot's class names are not Spark's)."""
    return e.sql("spark").split("(", 1)[0].strip().lower()


def _isnan(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    # Spark's isnan(NULL) is false; DuckDB's is NULL.
    return exp.Coalesce(this=e.copy(), expressions=[exp.false()])


def _to_date(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    if e.args.get("format") is not None:
        raise duck_refuse("to_date() with a format", "date patterns are not translated")
    src = c.get("this")
    if src == "date":
        return e.this
    # Spark's to_date(x) is CAST(x AS DATE), which fails on bad input under ANSI.
    return exp.Cast(this=e.this, to=exp.DataType.build("DATE"))


def _date_add(e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
    unit = (e.args.get("unit").name if e.args.get("unit") is not None else "DAY").upper()
    if unit != "DAY":
        raise duck_refuse(f"{e.sql('spark')}", "not translated")
    x = e.this if c.get("this") == "date" else exp.Cast(this=e.this, to=exp.DataType.build("DATE"))
    n = e.expression
    op = exp.Sub if isinstance(e, exp.DateSub) else exp.Add
    # DuckDB's date + integer stays a date (date + INTERVAL would become a timestamp).
    return op(this=x, expression=exp.Cast(this=n, to=exp.DataType.build("INT")))


def _refuse_named(what: str | None, why: str) -> Rule:
    def rule(self: Translator, e: exp.Expression, c: dict, t: str | None) -> exp.Expression | None:
        raise duck_refuse(what or f"{spark_func_name(e)}()", why)
    rule.refuses = True  # type: ignore[attr-defined]
    return rule


_REWRITES: dict[type, Rule] = {
    exp.Cast: lambda s, e, c, t: _cast(e, c, t),
    exp.TryCast: lambda s, e, c, t: _cast(e, c, t),
    exp.Concat: lambda s, e, c, t: _concat(e, c, t),
    exp.ConcatWs: lambda s, e, c, t: _concat(e, c, t),
    exp.DPipe: lambda s, e, c, t: _concat(e, c, t),
    exp.Like: lambda s, e, c, t: _like(e, c, t),
    exp.ILike: lambda s, e, c, t: _like(e, c, t),
    exp.Div: lambda s, e, c, t: _div(e, c, t),
    exp.IntDiv: lambda s, e, c, t: _intdiv(e, c, t),
    exp.Mod: lambda s, e, c, t: _mod(e, c, t),
    exp.Avg: lambda s, e, c, t: _avg(e, c, t),
    exp.Substring: lambda s, e, c, t: _substring(e, c, t),
    exp.Round: lambda s, e, c, t: _round(e, c, t),
    exp.Floor: lambda s, e, c, t: _floor_ceil(e, c, t),
    exp.Ceil: lambda s, e, c, t: _floor_ceil(e, c, t),
    exp.DayOfWeek: lambda s, e, c, t: _dayofweek(e, c, t),
    exp.Anonymous: lambda s, e, c, t: _anonymous(e, c, t),
    exp.Quantile: lambda s, e, c, t: _quantile(e, c, t),
    exp.Median: lambda s, e, c, t: _median(e, c, t),
    exp.IsNan: lambda s, e, c, t: _isnan(e, c, t),
    exp.ApproxQuantile: _refuse_named(None, _APPROX),
    exp.ApproxDistinct: _refuse_named(None, _APPROX),
    exp.TsOrDsToDate: lambda s, e, c, t: _to_date(e, c, t),
    exp.TsOrDsAdd: lambda s, e, c, t: _date_add(e, c, t),
    exp.DateAdd: lambda s, e, c, t: _date_add(e, c, t),
    exp.DateSub: lambda s, e, c, t: _date_add(e, c, t),
    exp.RegexpLike: _refuse_named("RLIKE", "Java and RE2 regular expressions differ"),
    exp.RegexpReplace: _refuse_named("regexp_replace()", "Java and RE2 regular expressions differ"),
    exp.RegexpExtract: _refuse_named("regexp_extract()", "Java and RE2 regular expressions differ"),
    exp.TimeToStr: _refuse_named("date_format()", "Java date patterns are not translated"),
    exp.StrToTime: _refuse_named("to_timestamp() with a format", "Java date patterns are not translated"),
    exp.StrToUnix: _refuse_named("unix_timestamp()", "not translated"),
    exp.UnixToStr: _refuse_named("from_unixtime()", "Java date patterns are not translated"),
    exp.First: _refuse_named(None, "the row it picks depends on the engine"),
    exp.Last: _refuse_named(None, "the row it picks depends on the engine"),
    exp.AnyValue: _refuse_named(None, "the row it picks depends on the engine"),
    exp.ArrayAgg: _refuse_named(None, "the order of its elements depends on the engine"),
    exp.Rand: _refuse_named(None, "random numbers differ by engine"),
}
for _cls in (exp.CurrentDate, exp.CurrentTimestamp):
    _REWRITES[_cls] = _refuse_named(None, "the clock is read per engine")


# Functions that DuckDB computes as Spark does once the rewrites above are applied: each is
# exercised by tests/test_query_parity.py against real Spark. Any other function is refused.
VERIFIED_FUNCTIONS: frozenset[type] = frozenset({
    exp.And, exp.Or, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count, exp.CountIf, exp.LogicalAnd, exp.LogicalOr,
    exp.Stddev, exp.StddevSamp, exp.Variance, exp.Case, exp.If, exp.Coalesce, exp.Nullif,
    exp.Greatest, exp.Least, exp.Exists, exp.Lower, exp.Upper, exp.Length, exp.Trim,
    exp.Replace, exp.Pad, exp.StrPosition, exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Sqrt,
    exp.Pow, exp.Year, exp.Month, exp.DayOfMonth, exp.Day, exp.Hour, exp.Minute, exp.Second,
    exp.DateDiff, exp.TimestampTrunc, exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag, exp.Lead,
})


# DuckDB macros the rewrites call (created on every connection; see duckdb.connect).
MACROS = [
    # ANSI: division by zero is an error, as on Spark.
    ("CREATE OR REPLACE MACRO lh_nonzero(b) AS CASE WHEN b = 0 THEN "
     "error('[DIVIDE_BY_ZERO] Division by zero') ELSE b END"),
    ("CREATE OR REPLACE MACRO lh_div_half_up(n, d) AS CASE WHEN d = 0 THEN "
     "error('[DIVIDE_BY_ZERO] Division by zero') WHEN (n < 0) = (d < 0) THEN "
     "(2 * abs(n) + abs(d)) // (2 * abs(d)) ELSE -((2 * abs(n) + abs(d)) // (2 * abs(d))) END"),
    ("CREATE OR REPLACE MACRO lh_avg_half_up(n, d) AS CASE WHEN d = 0 THEN NULL "
     "ELSE lh_div_half_up(n, d) END"),
    # Spark: r = a % b; if r < 0 then (r + b) % b else r
    ("CREATE OR REPLACE MACRO lh_pmod(a, b) AS CASE WHEN a % lh_nonzero(b) < 0 "
     "THEN (a % b + b) % b ELSE a % b END"),
    "CREATE OR REPLACE MACRO lh_substr_pos(p) AS CASE WHEN p = 0 THEN 1 ELSE p END",
    ("CREATE OR REPLACE MACRO lh_substr(s, p, n) AS CASE WHEN s IS NULL OR p IS NULL OR n IS NULL "
     "THEN NULL WHEN n < 1 THEN '' ELSE substring(s, p, n) END"),
    # Spark prints a timestamp as 'yyyy-MM-dd HH:mm:ss[.fraction without trailing zeros]'.
    ("CREATE OR REPLACE MACRO lh_ts_to_string(x) AS strftime(x, '%Y-%m-%d %H:%M:%S') || "
     "CASE WHEN microsecond(x) % 1000000 = 0 THEN '' ELSE "
     "rtrim('.' || lpad(CAST(microsecond(x) % 1000000 AS VARCHAR), 6, '0'), '0') END"),
]
for _t, _duck_t in (("tinyint", "TINYINT"), ("smallint", "SMALLINT"), ("int", "INTEGER"),
                    ("bigint", "BIGINT")):
    # ANSI: a string that is not an integer is an error (DuckDB would round '2.7' to 3).
    MACROS.append(
        f"CREATE OR REPLACE MACRO lh_str_to_{_t}(s) AS CASE WHEN s IS NULL THEN NULL "
        f"WHEN regexp_full_match(s, '[ ]*[+-]?[0-9]+[ ]*') THEN CAST(trim(s) AS {_duck_t}) "
        f"ELSE error('[CAST_INVALID_INPUT] The value ''' || s || ''' cannot be cast to "
        f"{_t.upper()}') END")


# -- result columns: Spark's names and types on DuckDB's answer ------------------------------


def arrow_type(t: str) -> pa.DataType | None:
    import pyarrow as pa

    d = decimal_of(t)
    if d:
        return pa.decimal128(*d)
    return {
        "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
        "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
        "boolean": pa.bool_(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    }.get(t)


def conform(result: pa.Table, tr: Translation) -> pa.Table:
    """DuckDB's result with Spark's column names and types; refuses what would change the JSON."""
    import pyarrow as pa

    if result.num_columns != len(tr.names):
        raise QueryError(f"duckdb: {result.num_columns} result columns, Spark has {len(tr.names)}")
    cols = []
    for i, (name, t) in enumerate(zip(tr.names, tr.types)):
        col = result.column(i)
        have = col.type
        want = arrow_type(t) if t else None
        if t == "void":  # a NULL literal: null on both engines, whatever DuckDB's type
            cols.append(col)
            continue
        if want is None:
            # A number whose Spark type is unknown could print differently (5 vs "5.00").
            if not (pa.types.is_string(have) or pa.types.is_boolean(have)
                    or pa.types.is_temporal(have) or pa.types.is_null(have)):
                raise duck_refuse(f"result column `{name}`",
                                  f"its Spark type is not derived here (DuckDB gives {have})")
            cols.append(col)
            continue
        if have != want:
            ok = (
                pa.types.is_null(have)
                or (pa.types.is_integer(want) and (pa.types.is_integer(have) or (
                    pa.types.is_decimal(have) and have.scale == 0)))
                or (pa.types.is_decimal(want) and (pa.types.is_decimal(have) or pa.types.is_integer(have)))
                or (pa.types.is_floating(want) and (pa.types.is_floating(have) or pa.types.is_integer(have)
                                                    or pa.types.is_decimal(have)))
                or (pa.types.is_timestamp(want) and pa.types.is_timestamp(have))
                or (pa.types.is_date(want) and (pa.types.is_date(have) or pa.types.is_timestamp(have)))
            )
            if not ok:
                raise duck_refuse(f"result column `{name}`",
                                  f"DuckDB computes {have} where Spark computes {t}")
            try:
                col = col.cast(want, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise QueryError(f"duckdb: result column `{name}` does not fit Spark's {t}: "
                                 f"{str(e).splitlines()[0]}") from None
        cols.append(col)
    return pa.Table.from_arrays(cols, names=tr.names)
