"""What ``lakehouse delete`` erases: a SQL predicate over a table's visible columns, or keys.

A predicate (``--where``) is checked as ``query``'s SQL is (lakehouse.query.guard: one read-only
statement, no file functions) and more: one boolean expression over the table's visible columns
(a column it does not have is named with the ones it has), no subquery, no aggregate or window,
and nothing whose value changes from one evaluation to the next (``rand()``, ``uuid()``,
``current_timestamp()``, ...): a delete is evaluated on several parts of the table, at several
moments, and again after a crash, and must erase the same rows each time. Its Spark SQL is kept
(``Predicate.sql``); ``query(table)`` is the SELECT of the rows it matches, for either engine.

Keys (``--keys FILE``) are the table's primary key values: one per line for a one-column key (a
file without a header), or a CSV with a header, or a Parquet file, holding the key's columns;
each value is parsed as the column's type, and a bad one is named with its file, line and column.
Pure: no engine here.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from lakehouse import storage
from lakehouse.definitions import TableDefinition
from lakehouse.errors import InputError, QueryError, first_line
from lakehouse.query.guard import check
from lakehouse.records import BadValue, converter
from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    import pyarrow as pa

VOLATILE = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "input_file_block_start", "input_file_block_length", "current_timestamp", "now",
    "current_date", "curdate", "localtimestamp", "current_timezone", "unix_timestamp", "try_reflect", "reflect",
    "java_method", "current_user", "user", "session_user", "current_catalog", "current_database",
    "current_schema", "randstr", "uniform", "try_aes_decrypt", "aes_encrypt", "aes_decrypt",
})
"""Functions whose value is not the same at every evaluation (or reach outside the row)."""


@dataclass(frozen=True)
class Predicate:
    """A checked predicate over one table."""

    table: str
    text: str
    """As given."""
    sql: str
    """The condition in Spark SQL, as parsed (quoted names)."""
    columns: frozenset[str]
    """The visible columns it reads."""

    def query(self, source: str | None = None) -> str:
        """``SELECT * FROM <source> WHERE <condition>`` (the table's name by default)."""
        return f"SELECT * FROM {spark_ident(source or self.table)} WHERE {self.sql}"


def parse(definition: TableDefinition, text: Any) -> Predicate:
    """Check ``text`` as a predicate over ``definition``'s visible columns (InputError in one line
    naming what is wrong)."""
    name = definition.name
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{name}: --where needs a predicate, e.g. \"user_id = 42\"")
    wrapped = f"SELECT * FROM {spark_ident(name)} WHERE ({text})"
    try:
        checked = check(wrapped)
    except QueryError as e:
        raise InputError(f"{name}: --where {text!r}: {first_line(e)}") from None
    tree = checked.tree
    if not isinstance(tree, exp.Select) or tree.args.get("where") is None or \
            any(tree.args.get(k) for k in ("joins", "group", "having", "order", "limit", "qualify", "with")) or \
            len(tree.expressions) != 1 or not isinstance(tree.expressions[0], exp.Star):
        raise InputError(f"{name}: --where takes one boolean expression over the table's columns: {text!r}")
    cond = tree.args["where"].this
    inner = cond.this if isinstance(cond, exp.Paren) else cond
    for node in inner.walk():
        if isinstance(node, exp.Star):
            raise InputError(f"{name}: --where {text!r}: * is not allowed (it reads other columns in each part)")
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)) or \
                (isinstance(node, exp.In) and node.args.get("query") is not None):
            raise InputError(f"{name}: --where {text!r}: a subquery is not allowed (give the values)")
        if isinstance(node, (exp.AggFunc, exp.Window)):
            raise InputError(f"{name}: --where {text!r}: an aggregate or window function is not a row predicate")
        if isinstance(node, exp.Func):
            fn = (node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)).lower()
            if fn in VOLATILE or type(node).__name__.lower() in VOLATILE or \
                    isinstance(node, (exp.Rand, exp.Randn, exp.CurrentTimestamp, exp.CurrentDate, exp.Uuid)):
                raise InputError(f"{name}: --where {text!r}: {fn}() gives another value at each evaluation; "
                                 "a delete must match the same rows every time (give a literal)")
    visible = {c.lower(): c for c in definition.visible_columns}
    used: set[str] = set()
    for col in inner.find_all(exp.Column):
        if col.table:
            raise InputError(f"{name}: --where {text!r}: name columns without a table ({col.sql(dialect='spark')})")
        found = visible.get(col.name.lower())
        if found is None:
            raise InputError(f"{name}: --where {text!r}: unknown column {col.name!r}; {name} has "
                             f"{', '.join(definition.visible_columns)}")
        used.add(found)
    if not used:
        raise InputError(f"{name}: --where {text!r} reads no column: it would match every row or none")
    if isinstance(inner, exp.Literal) or (isinstance(inner, exp.Boolean)):
        raise InputError(f"{name}: --where {text!r} is not a condition on the rows")
    return Predicate(name, text, inner.sql(dialect="spark", identify=True), frozenset(used))


def read_keys(definition: TableDefinition, path: str) -> "pa.Table":
    """The primary key values in ``path`` (one per line, CSV with a header, or Parquet), typed as
    the key's columns, each once (InputError in one line naming the file, line and column)."""
    import pyarrow as pa

    name, key = definition.name, list(definition.primary_key)
    if not key:
        raise InputError(f"{name}: has no primary key; --keys needs one (use --where)")
    shown = os.fsdecode(path)
    if not storage.is_file(shown):
        raise InputError(f"{shown}: no such file (--keys)")
    types = {c.name: c.type for c in definition.columns if c.name in key}
    if shown.lower().endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(storage.arrow_input(shown))
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"{shown}: not a readable Parquet file: {first_line(e)}") from None
        missing = [k for k in key if k not in t.column_names]
        if missing:
            raise InputError(f"{shown}: no column {missing[0]!r} (the key of {name} is {', '.join(key)})")
        rows = [[r[k] for k in key] for r in t.select(key).to_pylist()]
        starts = list(range(1, len(rows) + 1))
    else:
        try:
            text = storage.read_bytes(shown).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InputError(f"{shown}: not UTF-8 text (byte {e.start}); give keys as UTF-8, CSV or Parquet") from None
        lines = text.splitlines()
        first = next(csv.reader([lines[0]])) if lines else []
        header = [h.strip() for h in first]
        numbered: list[tuple[int, list[str]]]
        if len(key) == 1 and key[0] not in header:  # one value per line, as it is (commas and quotes too)
            numbered = [(n, [ln]) for n, ln in enumerate(lines, start=1) if ln.strip()]
        else:
            missing = [k for k in key if k not in header]
            if missing:
                raise InputError(f"{shown}: line 1: no column {missing[0]!r} in the header (the key of {name} is "
                                 f"{', '.join(key)}; a one-column key may also be given one value per line)")
            where = [header.index(k) for k in key]
            numbered = []
            for n, ln in enumerate(lines[1:], start=2):
                if not ln.strip():
                    continue
                try:
                    fields = next(csv.reader([ln]))
                except csv.Error as e:
                    raise InputError(f"{shown}: line {n}: not a CSV line: {e}") from None
                numbered.append((n, [fields[i] if i < len(fields) else "" for i in where]))
        rows = [v for _, v in numbered]
        starts = [n for n, _ in numbered]
    out: dict[str, list[Any]] = {k: [] for k in key}
    seen: set[tuple[Any, ...]] = set()
    for n, values in zip(starts, rows):
        typed = []
        for k, v in zip(key, values):
            try:
                typed.append(converter(types[k])(v))
            except BadValue as e:
                raise InputError(f"{shown}: line {n}: column {k!r}: {e}") from None
        if tuple(typed) in seen:
            continue
        seen.add(tuple(typed))
        for k, v in zip(key, typed):
            out[k].append(v)
    return pa.table({k: pa.array(out[k], types[k].arrow()) for k in key})


def value_sql(v: Any) -> str:
    """A typed key value as a Spark SQL literal (timestamps in UTC)."""
    import datetime as dt
    import decimal

    from lakehouse.sql import spark_literal as literal

    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, decimal.Decimal)):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else f"CAST({literal(str(v))} AS DOUBLE)"
    if isinstance(v, dt.datetime):
        t = v if v.tzinfo is None else v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"TIMESTAMP {literal(t.isoformat(sep=' '))}"
    if isinstance(v, dt.date):
        return f"DATE {literal(v.isoformat())}"
    return literal(str(v))


def keys_predicate(definition: TableDefinition, keys: "pa.Table") -> str:
    """A Spark SQL condition matching exactly these keys."""
    key = list(definition.primary_key)
    if len(key) == 1:
        values = ", ".join(value_sql(v) for v in keys.column(key[0]).to_pylist())
        return f"{spark_ident(key[0])} IN ({values})" if values else "FALSE"
    rows = [" AND ".join(f"{spark_ident(k)} = {value_sql(r[k])}" for k in key) for r in keys.to_pylist()]
    return " OR ".join(f"({r})" for r in rows) or "FALSE"
