"""The translator: one checked Spark query as DuckDB SQL that computes Spark's answer.

It refuses what DuckDB cannot match (lakehouse.query.dialect.refuse), then walks the query once:
sources and scopes, Spark's type of every expression (lakehouse.query.dialect.infer), the
rewrites of the constructs whose meaning differs (casts, numeric, functions) and Spark's order of
NULLs. The result columns carry Spark's names and types (``Translation``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlglot import exp

from lakehouse.errors import QueryError
from lakehouse.query.dialect import calendar, casts, datetimes, functions, numeric, scalars
from lakehouse.query.dialect.infer import ChildTypes, Rule, Scope, Typer, type_of
from lakehouse.query.dialect.names import spark_name
from lakehouse.query.dialect.refuse import FnKey, duck_refuse, fn_key, refuse_functions
from lakehouse.query.dialect.types import Columns, wider
from lakehouse.query.guard import func_name

REWRITES: dict[FnKey, Rule] = {**casts.RULES, **numeric.RULES, **functions.RULES, **datetimes.RULES,
                               **scalars.RULES, **calendar.RULES}
"""Every rewrite by function (``fn_key``): DuckDB computes Spark's value once it is applied."""
TYPES: dict[FnKey, Typer] = {**datetimes.TYPES, **scalars.TYPES, **calendar.TYPES}
"""Spark's result type of the functions whose modules type them (the rest: ``type_of``)."""

ALIASES: dict[str, type[exp.Func]] = {"mean": exp.Avg, "std": exp.Stddev, "every": exp.LogicalAnd,
                                       "some": exp.LogicalOr}
"""Spark's other names of functions sqlglot knows under one name (one argument each)."""


@dataclass(frozen=True)
class Translation:
    """A query translated for DuckDB, with the result columns Spark would give."""

    sql: str
    """The DuckDB SQL."""
    names: list[str]
    """Spark's result column names."""
    types: list[str | None]
    """Spark's result column types (None: DuckDB's type is kept)."""


class Translator:
    """One query: Spark types for every expression, rewritten for DuckDB in place."""

    def __init__(self, tables: dict[str, Columns]) -> None:
        self.tables = {k.lower(): v for k, v in tables.items()}

    def translate(self, tree: exp.Expression) -> Translation:
        """The DuckDB SQL of a checked query (left unchanged) with Spark's result columns."""
        tree = tree.copy()
        for wrap in list(tree.find_all(exp.TimeStrToTime)):  # sqlglot's wrap of date_format's argument
            if isinstance(wrap.parent, exp.TimeToStr):
                wrap.replace(wrap.this)
        for f in list(tree.find_all(exp.Filter)):
            _unfilter(f)
        refuse_functions(tree, {*REWRITES, *ALIASES})
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
                cte_names, cte_types, _ = self.query(cte.this, ctes)
                alias_cols = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") else []
                if alias_cols:
                    cte_names = alias_cols
                ctes[cte.alias_or_name.lower()] = [(a or "", b) for a, b in zip(cte_names, cte_types)]
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        if isinstance(q, exp.SetOperation):
            ln, lt, le = self.query(q.left, ctes)
            _, rt, _ = self.query(q.right, ctes)
            self._order_nulls(q, Scope({"": [(n or "", t) for n, t in zip(ln, lt)]}), ctes)
            return ln, [wider(a, b) for a, b in zip(lt, rt)], le
        if isinstance(q, exp.Values):
            return self._values(q, ctes)
        if not isinstance(q, exp.Select):
            raise duck_refuse(f"{q.key.upper()}", "not supported on DuckDB")
        return self._select(q, ctes)

    def _values(self, q: exp.Values, ctes: dict[str, Columns]
                ) -> tuple[list[str | None], list[str | None], list[exp.Expression]]:
        rows = q.expressions
        scope = Scope()
        types = [self.expr(e, scope, ctes) for e in rows[0].expressions] if rows else []
        for r in rows[1:]:
            for i, e in enumerate(r.expressions):
                types[i] = wider(types[i], self.expr(e, scope, ctes))
        names: list[str | None] = [f"col{i + 1}" for i in range(len(types))]
        return names, types, list(rows[0].expressions) if rows else []

    def _select(self, q: exp.Select, ctes: dict[str, Columns]
                ) -> tuple[list[str | None], list[str | None], list[exp.Expression]]:
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
                for col_name, col_type in cols:
                    names.append(col_name)
                    types.append(col_type)
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
        """Add one FROM or JOIN source's columns to ``scope`` (refused when not known)."""
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
            fname = func_name(node.this)
            if fname == "range":
                scope.sources[alias or "range"] = [("id", "bigint")]
                return
            raise duck_refuse(f"table function {fname}()", "not translated to DuckDB")
        if isinstance(node, (exp.Subquery, exp.Values)):
            n, t, _ = self.query(node.this if isinstance(node, exp.Subquery) else node, ctes)
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
        child_types: ChildTypes = {}
        for key, value in list(e.args.items()):
            if isinstance(value, exp.Expression):
                child_types[key] = self.expr(value, scope, ctes)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, exp.Expression):
                        child_types[f"{key}.{i}"] = self.expr(v, scope, ctes)
        fn = fn_key(e)
        if isinstance(fn, str) and fn in ALIASES:  # Spark's other name of a function: typed and
            if len(e.expressions) != 1:  # rewritten as that one (its result column keeps this name)
                raise duck_refuse(f"{fn}() of {len(e.expressions)} arguments", "it takes one")
            named = cast(exp.Expression, ALIASES[fn](this=e.expressions[0]))
            e.replace(named)
            e, child_types, fn = named, {"this": child_types.get("expressions.0")}, type(named)
        typer = TYPES.get(fn)
        t = typer(e, child_types) if typer is not None else type_of(e, scope, child_types)
        rule = REWRITES.get(fn)
        if rule is not None:
            new = rule(e, child_types, t)
            if new is not None and new is not e:
                e.replace(new)
        return t


_NULL_BLIND = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count, exp.Stddev, exp.StddevPop, exp.StddevSamp,
               exp.Variance, exp.VariancePop)
"""Aggregates of one argument that skip its nulls: ``agg(x) FILTER (WHERE w)`` is
``agg(CASE WHEN w THEN x END)``."""


def _unfilter(f: exp.Filter) -> None:
    """``agg(x) FILTER (WHERE w)`` as ``agg(CASE WHEN w THEN x END)`` where that is the same
    (``_NULL_BLIND``; ``count(*)`` counts ``CASE WHEN w THEN 1 END``): the rewrites of the
    aggregate then wrap it whole, which a FILTER clause cannot follow."""
    agg, where = f.this, f.expression
    if not isinstance(agg, _NULL_BLIND) or agg.expressions or not isinstance(where, exp.Where):
        return
    arg = agg.this
    distinct = isinstance(arg, exp.Distinct)
    if distinct and len(arg.expressions) != 1:
        return
    inner = arg.expressions[0] if distinct else (exp.Literal.number(1) if isinstance(arg, exp.Star) else arg)
    case = exp.Case(ifs=[exp.If(this=where.this.copy(), true=inner.copy())])
    agg.set("this", exp.Distinct(expressions=[case]) if distinct else case)
    f.replace(agg)


def _spark_nulls(o: exp.Ordered) -> None:
    """Spark sorts NULLs first ascending and last descending; say so explicitly for DuckDB."""
    if o.args.get("nulls_first") is None:
        o.set("nulls_first", not o.args.get("desc"))
