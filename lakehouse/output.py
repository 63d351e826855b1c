"""Values as people and machines read them, as the contract says: JSON values, text values, CSV
text (a document or records as one table: ``csv_document``, ``csv_records``), and the one
text-table renderer (shared by the command line and the demo).

JSON values: timestamps ``"2026-11-20T10:15:00Z"`` (fraction only when non-zero), dates
``"2026-11-20"``, decimals as strings, NaN/inf as strings. Imports nothing heavy: the command
line's start-up reads it.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa


Progress = Callable[[str], None]
"""Where long work says what it is doing: a line on a terminal (``cli.output.steps``), or nothing."""


def quiet(_: str) -> None:
    """A ``Progress`` that says nothing."""


@dataclass
class Steps:
    """The step a job is at (recorded with a failure), each new one said to ``report``."""

    job: str
    report: Progress = quiet
    step: str = "start"

    def at(self, step: str, detail: str = "") -> None:
        """The job starts ``step`` (``detail``: its size, such as days and rows)."""
        self.step = step
        self.report(f"{self.job}: {step}" + (f" ({detail})" if detail else ""))


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


def text_value(v: Any) -> str:
    """One value as text output shows it: NULL, floats to 10 significant digits, the rest as in JSON."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return json_value(v) if not math.isfinite(v) else f"{v:.10g}"
    j = json_value(v)
    return j if isinstance(j, str) else json.dumps(j)


def csv_value(v: Any) -> str:
    """One CSV cell: empty for NULL, floats in full precision, the rest as ``text_value``."""
    if v is None:
        return ""
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)
    return text_value(v)


def csv_table(keys: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as CSV text under a header row of ``keys`` (the header alone when there are no rows)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(keys)
    for row in rows:
        w.writerow([csv_value(v) for v in row])
    return buf.getvalue()


def inline_text(v: Any) -> str:
    """A value inside a line of text: ``-`` for NULL, a list as ``a, b`` (``none`` when empty), a
    document as ``(k v, k v)``, the rest as ``text_value`` (never a Python repr)."""
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return ", ".join(inline_text(x) for x in v) or "none"
    if isinstance(v, Mapping):
        return "(" + ", ".join(f"{k} {inline_text(x)}" for k, x in v.items()) + ")"
    return text_value(v)


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A document as the fields of one CSV row: a nested document's fields named ``outer.inner``
    (an empty one stays one field); any other value, a list too, is one field."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def csv_records(records: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()) -> str:
    """Records as CSV: one row a record, flattened (``flatten``); the header ``keys``, then any
    other field in the order first seen (a record without a field has an empty cell)."""
    rows = [flatten(r) for r in records]
    header = dict.fromkeys(keys)
    for r in rows:
        header.update(dict.fromkeys(r))
    return csv_table(list(header), ([r.get(k) for k in header] for r in rows))


def csv_document(doc: Mapping[str, Any], table: str | None = None, keys: Sequence[str] = ()) -> str:
    """A document as CSV. Without ``table``: one row of its fields, flattened (``flatten``). With
    ``table``, the key of a list the document holds: one row an entry of that list (its fields,
    flattened, ``keys`` first, as columns ``<table>.<field>``; an entry that is a plain value as
    column ``<table>``), after the document's other fields, flattened and repeated on every row;
    an empty list gives one row with those columns empty."""
    head = flatten({k: v for k, v in doc.items() if k != table})
    if table is None:
        return csv_table(list(head), [list(head.values())])
    entries = [flatten(e, f"{table}.") if isinstance(e, Mapping) else {table: e} for e in doc.get(table) or []]
    columns = [f"{table}.{k}" for k in keys] if keys else [] if entries else [table]
    return csv_records([{**head, **e} for e in entries] or [head], [*head, *columns])


def csv_text(t: pa.Table) -> str:
    """An Arrow table (a query result) as CSV text with a header row."""
    return csv_table(t.column_names, (row.values() for row in t.to_pylist()))


def text_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Collection[str] = (),
               title: str | None = None, file: TextIO | None = None) -> None:
    """Print rows as a boxed text table on stdout or ``file``: columns named ``headers``, those in
    ``right`` right-aligned; strings as they are, other values as ``text_value`` shows them; a
    cell of several lines takes several lines. Drawn here rather than by rich, which takes
    milliseconds a row (a long ``jobs history`` or query result would take minutes)."""
    from rich.cells import cell_len  # display width: wide (CJK) characters take two columns

    def lines_of(v: Any) -> list[str]:
        return (v if isinstance(v, str) else text_value(v)).expandtabs().splitlines() or [""]

    header = [lines_of(h) for h in headers]
    body = [[lines_of(v) for v in row] for row in rows]
    widths = [max(cell_len(line) for cell in column for line in cell) for column in zip(header, *body, strict=True)]
    aligned = [name in right for name in headers]

    def rule(left: str, fill: str, mid: str, end: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + end

    def row_lines(cells: list[list[str]], bar: str) -> Iterable[str]:
        for i in range(max(len(c) for c in cells)):
            parts = []
            for cell, w, r in zip(cells, widths, aligned, strict=True):
                text = cell[i] if i < len(cell) else ""
                pad = " " * (w - cell_len(text))
                parts.append(f" {pad}{text} " if r else f" {text}{pad} ")
            yield bar + bar.join(parts) + bar

    out = file or sys.stdout
    if title:
        print(title, file=out)
    print(rule("┏", "━", "┳", "┓"), file=out)
    print("\n".join(row_lines(header, "┃")), file=out)
    print(rule("┡", "━", "╇", "┩"), file=out)
    for cells in body:
        print("\n".join(row_lines(cells, "│")), file=out)
    print(rule("└", "─", "┴", "┘"), file=out)


def print_table(t: pa.Table, title: str | None = None, file: TextIO | None = None) -> None:
    """A query result as a text table (numbers right-aligned) and its row count, on stdout or ``file``."""
    import pyarrow as pa

    def numeric(name: str) -> bool:
        kind = t.schema.field(name).type
        return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind))

    text_table(t.column_names, (list(row.values()) for row in t.to_pylist()),
               right={name for name in t.column_names if numeric(name)}, title=title, file=file)
    print(f"({t.num_rows} row{'s' if t.num_rows != 1 else ''})", file=file or sys.stdout)
