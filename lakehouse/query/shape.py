"""Which queries the archive's run lengths answer, and the query that answers them from groups.

A query qualifies when it reads one table and aggregates it over the table's sort columns and
``event_date`` alone: every column it reads outside an aggregate (select list, WHERE, GROUP BY,
HAVING, ORDER BY, window specifications) is one of the first k sort columns or ``event_date``,
and each aggregate is either

- *weighted*: over those columns only: ``count(*)``, ``count(e)``, ``count_if(c)``, ``sum(col)``,
  ``avg(col)``, and the duplicate-blind ``min``, ``max``, ``bool_and``/``bool_or`` and any
  ``DISTINCT`` aggregate; or
- a *measure*: ``count``, ``sum``, ``avg``, ``min`` or ``max`` of a sort column deeper than k
  (from its runs).

Then the table's rows can be replaced by its groups: one row per (event_date, c1..ck) of a day
(``GROUP_VIEW``) holding how many records it stands for (``ROWS``) and each measure's partial
count, sum, minimum and maximum. The query is rewritten to read the groups (pure sqlglot, no
engine): WHERE, GROUP BY and the rest stay as written (they read only columns the groups keep),
and each aggregate becomes its re-aggregation (``count(*)`` -> ``coalesce(sum(_lh_rows), 0)``,
``sum(x)`` -> ``CAST(sum(<partial sum>) AS <Spark's sum type>)``, ...), named as Spark names the
original. Anything else raises ``NotRuns`` with the reason, and the query reads the data files.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlglot import exp, parse_one

from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.query.dialect.names import spark_name
from lakehouse.query.guard import func_name
from lakehouse.types import ColumnType

GROUP_VIEW = "_lh_groups"
"""The name the groups are registered under in the engine that runs the rewritten query."""
ROWS = "_lh_rows"
"""The groups' column: how many records a group stands for."""

_PER_ROW = frozenset({"rand", "randn", "random", "uuid", "shuffle", "randstr", "uniform", "monotonically_increasing_id",
                      "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length"})
"""Functions whose value is a row's own (drawn, numbered or placed): over groups they would be
evaluated fewer times, or of no file."""
_BLIND = (exp.Min, exp.Max, exp.LogicalAnd, exp.LogicalOr)
"""Aggregates a repeated row does not change."""
_MEASURED = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
"""Aggregates of a column outside the groups that partial aggregates give."""
_INTEGRAL = ("int", "long")
_SIGN_BLIND = (exp.Select, exp.Group, exp.Ordered, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In,
               exp.Between, exp.Is, exp.NullSafeEQ, exp.Min, exp.Max, exp.Count, exp.Distinct)
"""Where a double key's value is read without its sign of zero showing."""


class NotRuns(Exception):
    """The query is not answered from the runs (the reason is the message)."""


@dataclass
class Measure:
    """A column aggregated within the groups, and what the query needs of it."""

    column: str
    index: int
    kinds: set[str] = field(default_factory=set)

    def name(self, kind: str) -> str:
        """The groups' column holding this measure's partial ``kind`` (count, sum, min, max)."""
        return f"_lh_{self.index}_{kind}"


@dataclass(frozen=True)
class Shape:
    """A query the runs answer: the table, the depth of its groups, its measures, and the Spark
    SQL that answers it from ``GROUP_VIEW``."""

    table: str
    depth: int
    measures: tuple[Measure, ...]
    sql: str
    days: tuple[dt.date | None, dt.date | None] = (None, None)
    """The first and last event_date the WHERE clause lets through (None: unbounded): the
    archived days outside are not read."""

    def group_columns(self, definition: TableDefinition) -> list[str]:
        """The columns a group keeps: the first ``depth`` sort columns, then event_date."""
        return [*definition.archive.sort_columns[: self.depth], PARTITION_COLUMN]


def analyse(definitions: dict[str, TableDefinition], tree: exp.Expression) -> Shape:
    """The shape of a checked query (``guard.check``'s tree), or NotRuns with the reason."""
    if not isinstance(tree, exp.Select) or tree.args.get("with") or tree.args.get("with_"):
        raise NotRuns("only a single SELECT (no WITH, UNION or VALUES) is answered from runs")
    from_ = tree.args.get("from") or tree.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table) or tree.args.get("joins") or tree.args.get("laterals"):
        raise NotRuns("the query does not read exactly one table")
    source: exp.Table = from_.this
    definition = definitions.get(source.name.lower())
    if definition is None or source.args.get("db") or any(
            source.args.get(k) for k in source.args if k not in ("this", "alias")):
        raise NotRuns(f"{source.sql('spark')} is not a lakehouse table read whole")
    for node in tree.walk():
        if node is not tree and isinstance(node, (exp.Select, exp.Subquery)):
            raise NotRuns("subqueries are not answered from runs")
        if isinstance(node, exp.Func) and func_name(node) in _PER_ROW:
            raise NotRuns(f"{func_name(node)}() is a row's own value")
        if isinstance(node, exp.Anonymous):  # sqlglot does not know it: it may aggregate rows
            raise NotRuns(f"{func_name(node)}() is not known to the run-length path")
        if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):
            raise NotRuns("SELECT * reads every column")
    return _Analysis(definition, tree, source).shape()


class _Analysis:
    def __init__(self, definition: TableDefinition, tree: exp.Select, source: exp.Table) -> None:
        self.d, self.tree, self.source = definition, tree, source
        self.columns = {c.lower(): c for c in definition.visible_columns}
        self.types = {c.name: c.type for c in definition.columns}
        self.types[PARTITION_COLUMN] = ColumnType("date")
        self.sort = list(definition.archive.sort_columns)
        self.qualifiers = {source.name.lower(), source.alias_or_name.lower()}
        self.aliases = {e.alias.lower() for e in tree.expressions if isinstance(e, exp.Alias)}
        named = {c.name.lower() for c in tree.find_all(exp.Column) if not c.table}
        for a in self.aliases:
            if a.startswith("_lh_"):
                raise NotRuns(f"result name {a} is of lakehouse's own columns (_lh_)")
            if a in self.columns and a in named:  # which one a reference means is the analyzer's call
                raise NotRuns(f"{a} names both a result and a column of {definition.name}")

    def column(self, c: exp.Column) -> str | None:
        """The table column a reference names (None: an output alias; no alias is also a
        column's name)."""
        if c.table and c.table.lower() not in self.qualifiers:
            raise NotRuns(f"{c.sql('spark')} is not a column of {self.d.name}")
        name = self.columns.get(c.name.lower())
        if name is None and (c.table or c.name.lower() not in self.aliases):
            raise NotRuns(f"{c.sql('spark')} is not a column of {self.d.name}")
        return name

    def shape(self) -> Shape:
        aggs = [a for a in self.tree.find_all(exp.AggFunc) if not isinstance(a.parent, exp.Window)]
        if not aggs and not self.tree.args.get("group"):
            if not self.tree.args.get("distinct"):
                raise NotRuns("the query does not aggregate")
            if self.tree.find(exp.Window):  # evaluated over rows before DISTINCT
                raise NotRuns("a window function of a query that does not aggregate reads every row")
        measured = {id(a) for a in aggs if self._measurable(a)}
        grouped: set[str] = set()
        for c in self.tree.find_all(exp.Column):
            name = self.column(c)
            if name is None or any(id(a) in measured for a in _ancestors(c)):
                continue
            if name != PARTITION_COLUMN and name not in self.sort:
                inside = next((a for a in _ancestors(c) if isinstance(a, exp.AggFunc)), None)
                where = f"{inside.sql('spark')} reads" if inside is not None else "the query reads"
                raise NotRuns(f"{where} column {name} row by row (not a sort column or {PARTITION_COLUMN})")
            grouped.add(name)
        depth = max((self.sort.index(n) + 1 for n in grouped if n in self.sort), default=0)
        kept = {*self.sort[:depth], PARTITION_COLUMN}
        self._signed_zeros(kept, measured)
        names = {id(e): spark_name(e) for e in self.tree.expressions}
        tree = self.tree.copy()
        originals = {id(o): n for o, n in zip(self.tree.walk(), tree.walk())}
        measures: dict[str, Measure] = {}
        for a in aggs:
            node = originals[id(a)]
            column = self.column(a.this) if id(a) in measured else None
            if column is not None and column not in kept:
                m = measures.setdefault(column, Measure(column, len(measures)))
                _replace(node, self._measure(node, column, m))
            else:
                _replace(node, self._weighted(node))
        for original, e in zip(self.tree.expressions, tree.expressions):
            if not isinstance(e, exp.Alias) and e.sql("spark") != original.sql("spark"):
                name = names[id(original)]
                if name is None:
                    raise NotRuns(f"result column `{original.sql('spark')}` needs a name (AS name)")
                e.replace(exp.alias_(e.copy(), name, quoted=True))
        table = tree.args.get("from") or tree.args["from_"]
        table.this.replace(exp.Table(this=exp.to_identifier(GROUP_VIEW),
                                     alias=exp.TableAlias(this=exp.to_identifier(self.source.alias_or_name))))
        return Shape(self.d.name, depth, tuple(measures.values()), tree.sql("spark"), self._days())

    def _days(self) -> tuple[dt.date | None, dt.date | None]:
        """The event_date range of the WHERE clause's top-level conjuncts that compare event_date
        with a date literal (=, <, <=, >, >=, BETWEEN, IN); the rest of the clause only narrows."""
        where = self.tree.args.get("where")
        first: dt.date | None = None
        last: dt.date | None = None
        conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else \
            [where.this] if where is not None else []
        for c in conjuncts:
            for lo, hi in self._bounds(c):
                first = lo if first is None or (lo is not None and lo > first) else first
                last = hi if last is None or (hi is not None and hi < last) else last
        return first, last

    def _bounds(self, c: exp.Expr) -> list[tuple[dt.date | None, dt.date | None]]:
        one = dt.timedelta(days=1)
        if isinstance(c, exp.Between) and self._is_day(c.this):
            lo, hi = _date(c.args.get("low")), _date(c.args.get("high"))
            return [(lo, hi)] if lo is not None and hi is not None else []
        if isinstance(c, exp.In) and self._is_day(c.this) and not c.args.get("query"):
            found = [_date(e) for e in c.expressions]
            return [(min(found), max(found))] if found and all(found) else []  # type: ignore[type-var]
        flips = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}
        kind = type(c)
        if kind not in flips:
            return []
        left, right = c.this, c.expression
        if not self._is_day(left):
            left, right, kind = right, left, flips[kind]
        d = _date(right)
        if not self._is_day(left) or d is None:
            return []
        if (kind is exp.GT and d == dt.date.max) or (kind is exp.LT and d == dt.date.min):
            return []  # no day after the last or before the first: left to the query
        return [{exp.EQ: (d, d), exp.GT: (d + one, None), exp.GTE: (d, None), exp.LT: (None, d - one),
                 exp.LTE: (None, d)}[kind]]

    def _is_day(self, e: exp.Expr | None) -> bool:
        return isinstance(e, exp.Column) and self.column(e) == PARTITION_COLUMN

    def _signed_zeros(self, kept: set[str], measured: set[int]) -> None:
        """A double key's run keeps its first row's sign of zero (-0.0 and 0.0 are one run: equal
        as Spark orders and groups them); so a double key is read only where the sign cannot
        show: as it is (selected, grouped, ordered), compared, or in min, max or count."""
        for c in self.tree.find_all(exp.Column):
            name = self.columns.get(c.name.lower())
            if name not in kept or self.types[name].name != "double" or any(id(a) in measured for a in _ancestors(c)):
                continue
            up: exp.Expr = c
            while isinstance(up.parent, exp.Paren):
                up = up.parent
            parent = up.parent
            if isinstance(parent, exp.Alias) and isinstance(parent.parent, exp.Select):
                parent = parent.parent
            if not isinstance(parent, _SIGN_BLIND):
                raise NotRuns(f"double key {name} is read in {parent.sql('spark') if parent else 'the query'}: "
                              "its runs do not tell -0.0 from 0.0")

    def _measurable(self, a: exp.AggFunc) -> bool:
        """A plain aggregate of one bare sort column: a measure when the column is not grouped
        (from its runs). Another column's vector file holds a value a record: reading it whole
        is slower than DuckDB's scan of the data files (``lakehouse bench groups``)."""
        return (isinstance(a, _MEASURED) and isinstance(a.this, exp.Column) and not a.expressions
                and not isinstance(a.parent, exp.Filter) and self.column(a.this) in self.sort)

    def _measure(self, a: exp.Expr, column: str, m: Measure) -> str:
        t = self.types[column]
        if isinstance(a, exp.Count):
            m.kinds.add("count")
            return f"coalesce(sum({m.name('count')}), 0)"
        if isinstance(a, (exp.Min, exp.Max)):
            kind = "min" if isinstance(a, exp.Min) else "max"
            m.kinds.add(kind)
            return f"{kind}({m.name(kind)})"
        if not t.is_numeric or (t.name == "decimal" and (t.precision or 0) > 18):
            raise NotRuns(f"{func_name(a)}({column}) of {t} is not taken from vector files")
        m.kinds.add("sum")
        if isinstance(a, exp.Sum):
            return f"CAST(sum({m.name('sum')}) AS {sum_type(t)})"
        m.kinds.add("count")
        total = f"sum({m.name('sum')})" if t.name == "decimal" else f"sum(CAST({m.name('sum')} AS DOUBLE))"
        return _average(t, total, f"sum({m.name('count')})")

    def _weighted(self, a: exp.Expr) -> str | None:
        """The re-aggregation over groups of an aggregate of grouped columns (None: the
        aggregate reads the same over groups as over rows)."""
        if isinstance(a, _BLIND) or isinstance(a.this, exp.Distinct):
            return None
        wrap = a.parent if isinstance(a.parent, exp.Filter) else None
        where = wrap.expression.this.sql("spark") if wrap is not None else None

        def agg(inner: str) -> str:  # FILTER (WHERE w) as a CASE: the same rows summed
            return f"sum({inner})" if where is None else f"sum(CASE WHEN {where} THEN {inner} END)"

        if isinstance(a, exp.Count):
            args = [a.this, *a.expressions]
            if isinstance(a.this, exp.Star) or all(isinstance(x, exp.Literal) for x in args):
                return f"coalesce({agg(ROWS)}, 0)"
            if any(isinstance(x, exp.Null) for x in args):
                raise NotRuns("count(NULL) is not answered from runs")
            test = " OR ".join(f"({x.sql('spark')}) IS NULL" for x in args)
            return f"coalesce({agg(f'CASE WHEN {test} THEN 0 ELSE {ROWS} END')}, 0)"
        if isinstance(a, exp.CountIf):
            cond = a.this.sql("spark")
            return f"coalesce({agg(f'CASE WHEN {cond} THEN {ROWS} ELSE 0 END')}, 0)"
        if isinstance(a, (exp.Sum, exp.Avg)) and isinstance(a.this, exp.Column) and not a.expressions:
            column = self.column(a.this)
            t = self.types[column] if column else None
            if t is not None and t.is_numeric and not (t.name == "decimal" and (t.precision or 0) > 17):
                ref = a.this.sql("spark")
                if isinstance(a, exp.Sum):
                    return f"CAST({agg(f'{ref} * {ROWS}')} AS {sum_type(t)})"
                n = agg(f"CASE WHEN {ref} IS NULL THEN 0 ELSE {ROWS} END")
                weighted = f"{ref} * {ROWS}" if t.name == "decimal" else f"CAST({ref} AS DOUBLE) * {ROWS}"
                return _average(t, agg(weighted), n)
        raise NotRuns(f"{a.sql('spark')} is not answered from runs")


def _average(t: ColumnType, total: str, count: str) -> str:
    """Spark's ``avg`` from a sum and a count (no rows: NULL): a double's, or a decimal's as
    Spark divides it (the sum at its type, divided by the count as DECIMAL(20,0), cast to
    DECIMAL(p+4,s+4))."""
    if t.name != "decimal":  # ``total`` sums doubles, as Spark's avg does (no long overflow)
        return f"{total} / nullif({count}, 0)"
    p, s = t.precision or 0, t.scale or 0
    return (f"CAST(CAST({total} AS {sum_type(t)}) / nullif(CAST({count} AS DECIMAL(20,0)), 0) "
            f"AS DECIMAL({min(38, p + 4)},{min(38, s + 4)}))")


def _date(e: exp.Expr | None) -> dt.date | None:
    """The date a literal names: ``DATE 'YYYY-MM-DD'`` or ``'YYYY-MM-DD'`` (None otherwise)."""
    if isinstance(e, exp.Cast) and e.to.is_type(exp.DataType.Type.DATE):
        e = e.this
    if not isinstance(e, exp.Literal) or not e.is_string or len(e.this) != 10:
        return None
    try:
        return dt.date.fromisoformat(e.this)
    except ValueError:
        return None


def sum_type(t: ColumnType) -> str:
    """Spark's result type of ``sum`` over a column of type ``t`` (its SQL; the Arrow type of the
    partial sums that hold it: ``lakehouse.archive.rollup.sum_type``)."""
    if t.name in _INTEGRAL:
        return "BIGINT"
    if t.name == "decimal":
        return f"DECIMAL({min(38, (t.precision or 0) + 10)},{t.scale})"
    return "DOUBLE"


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    p = node.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _replace(node: exp.Expr, sql: str | None) -> None:
    """Put the re-aggregation ``sql`` (Spark SQL) in the place of ``node`` (with its FILTER)."""
    if sql is None:
        return
    target = node.parent if isinstance(node.parent, exp.Filter) else node
    target.replace(exp.Paren(this=parse_one(sql, read="spark")))
