"""Rendering results for people (text tables) and machines (JSON, CSV), as the contract says.

JSON values: timestamps ``"2026-11-20T10:15:00Z"`` (fraction only when non-zero), dates
``"2026-11-20"``, decimals as strings, NaN/inf as strings.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import sys
from typing import Any

import pyarrow as pa


def json_value(v: Any) -> Any:
    """One value in the contract's JSON form."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return format_timestamp(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return str(v)


def format_timestamp(v: dt.datetime) -> str:
    """UTC ISO 8601 with Z; a fraction only when it is not zero."""
    v = v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
    base = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    if v.microsecond:
        base += f".{v.microsecond:06d}".rstrip("0")
    return base + "Z"


def dumps(doc: Any) -> str:
    """The one JSON document a ``--format json`` command prints."""
    return json.dumps(json_value(doc), ensure_ascii=False, allow_nan=False)


def arrow_records(t: pa.Table) -> list[dict[str, Any]]:
    return t.to_pylist()


def text_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return json_value(v) if not math.isfinite(v) else f"{v:.10g}"
    j = json_value(v)
    return j if isinstance(j, str) else json.dumps(j)


def print_table(t: pa.Table, title: str | None = None, file: Any = None) -> None:
    """A query result as a text table (rich) on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False, title_justify="left")
    for name in t.column_names:
        numeric = pa.types.is_integer(t.schema.field(name).type) or pa.types.is_floating(
            t.schema.field(name).type) or pa.types.is_decimal(t.schema.field(name).type)
        table.add_column(name, justify="right" if numeric else "left")
    for row in t.to_pylist():
        table.add_row(*(text_value(v) for v in row.values()))
    Console(file=file or sys.stdout, width=200).print(table)
    print(f"({t.num_rows} row{'s' if t.num_rows != 1 else ''})", file=file or sys.stdout)


def csv_text(t: pa.Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.column_names)
    for row in t.to_pylist():
        w.writerow(["" if v is None else text_value(v) if not isinstance(v, float) or not math.isfinite(v) else repr(v)
                    for v in row.values()])
    return buf.getvalue()
