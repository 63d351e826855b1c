"""TPC-H for the tests: its eight tables as lakehouse tables, their rows from DuckDB's tpch
extension (``dbgen``, from the package index), its 22 queries and their official answers.

Each table gets an event time lakehouse needs: the line item's ship date and the order's date at
noon UTC (so they spread over 2,500 days), a fixed instant for the others. The answers are those
the extension ships for the scale factor (the TPC's qualification answers); ``mismatch`` compares
a result with one as the benchmark's rules do: text equal, numbers equal at the answer's printed
precision."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from functools import cache
from pathlib import Path
from typing import Any

TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")
KEYS = {"lineitem": ["l_orderkey", "l_linenumber"], "orders": ["o_orderkey"], "customer": ["c_custkey"],
        "part": ["p_partkey"], "partsupp": ["ps_partkey", "ps_suppkey"], "supplier": ["s_suppkey"],
        "nation": ["n_nationkey"], "region": ["r_regionkey"]}
EVENT = {"lineitem": ("l_shipped_at", "l_shipdate + INTERVAL 12 HOUR"),
         "orders": ("o_ordered_at", "o_orderdate + INTERVAL 12 HOUR")}
"""The event time of the two fact tables: a column added, from a date of the row."""
LOADED = ("loaded_at", "TIMESTAMP '1998-12-31 12:00:00'")
"""The event time of the other tables: one instant."""
SORT = {"lineitem": ["l_shipmode", "l_returnflag", "l_linestatus", "l_quantity"], "orders": ["o_orderstatus"]}
TYPES = {"BIGINT": "long", "INTEGER": "int", "VARCHAR": "string", "DATE": "date"}


def _connect() -> Any:
    import duckdb

    from lakehouse.query.duckdb import extension_path

    con = duckdb.connect()
    con.execute(f"LOAD '{extension_path('tpch')}'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def generate(folder: Path, sf: float = 0.01) -> dict[str, tuple[str, str]]:
    """The eight tables at scale factor ``sf`` as Parquet files in ``folder``: per table, (its
    lakehouse definition as YAML, its Parquet file)."""
    con = _connect()
    con.execute(f"CALL dbgen(sf={sf})")
    out = {}
    for t in TABLES:
        cols = con.sql(f"DESCRIBE {t}").fetchall()
        event, expr = EVENT.get(t, LOADED)
        lines = [f"  - {{name: {name}, type: '{TYPES.get(kind, kind.lower())}', nullable: false}}"
                 for name, kind, *_ in cols]
        lines.append(f"  - {{name: {event}, type: timestamp, nullable: false}}")
        yaml = (f"name: {t}\ncolumns:\n" + "\n".join(lines) + f"\nprimary_key: {KEYS[t]}\nevent_time: {event}\n")
        if t in SORT:
            yaml += f"archive: {{delay: 1d, sort_columns: {SORT[t]}}}\n"
        path = folder / f"{t}.parquet"
        con.execute(f"COPY (SELECT *, CAST({expr} AS TIMESTAMPTZ) AS {event} FROM {t}) TO '{path}' (FORMAT parquet)")
        out[t] = (yaml, str(path))
    return out


@cache
def queries() -> dict[int, str]:
    """The 22 queries as the extension gives them (the qualification parameters), by number."""
    return {int(n): q.strip().rstrip(";") for n, q in _connect().sql("SELECT query_nr, query FROM tpch_queries()").fetchall()}


@cache
def answers(sf: float = 0.01) -> dict[int, list[list[str]]]:
    """The official answers at ``sf``: per query, the header and rows as text fields."""
    rows = _connect().sql(f"SELECT query_nr, answer FROM tpch_answers() WHERE scale_factor = {sf}").fetchall()
    return {int(n): [line.split("|") for line in a.splitlines()] for n, a in rows}


def _text(v: Any) -> str | None:
    if v is None:
        return ""
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, str)):
        return str(v)
    return None  # a number


def mismatch(n: int, result: list[dict[str, Any]], sf: float = 0.01) -> str | None:
    """How ``result`` (rows as dicts, in order) differs from query ``n``'s answer; None when it
    does not. A number matches when it rounds to the answer at the answer's printed digits."""
    header, *rows = answers(sf)[n]
    got = [list(r.values()) for r in result]
    if len(got) != len(rows):
        return f"Q{n}: {len(got)} rows, the answer has {len(rows)}"
    names = [c.lower() for c in result[0]] if result else []
    if result and any(g != h and not g.startswith(h + "(") for g, h in zip(names, (h.lower() for h in header))):
        # (an unnamed aggregate: Spark's generated name, sum(l_quantity), is DuckDB's sum)
        return f"Q{n}: columns {list(result[0])}, the answer has {header}"
    for i, (g, want) in enumerate(zip(got, rows)):
        if len(g) != len(header):
            return f"Q{n} row {i + 1}: {len(g)} columns, the answer has {len(header)}"
        for col, v, w in zip(header, g, want):
            text = _text(v)
            if text is not None:
                if text != w:
                    return f"Q{n} row {i + 1} {col}: {text!r}, the answer has {w!r}"
                continue
            digits = len(w.split(".", 1)[1]) if "." in w else 0
            if isinstance(v, decimal.Decimal):  # equal at the fewer digits of the two
                digits = min(digits, max(0, -int(v.as_tuple().exponent)))
            x = decimal.Decimal(str(v)) if not isinstance(v, float) or math.isfinite(v) else None
            if x is None or abs(x - decimal.Decimal(w)) > decimal.Decimal(5).scaleb(-digits - 1) + \
                    abs(decimal.Decimal(w)) * decimal.Decimal("1e-12"):
                return f"Q{n} row {i + 1} {col}: {v!r}, the answer has {w}"
    return None
