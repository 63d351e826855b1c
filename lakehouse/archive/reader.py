"""Reading vector files without Spark: a day's current file, decoded, and lookups by binary search."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse.archive import rle, vectors
from lakehouse.archive.state import read_snapshot
from lakehouse.definitions import TableDefinition
from lakehouse.errors import LakehouseError
from lakehouse.records import BadValue, converter
from lakehouse.warehouse import TablePaths


@dataclass(frozen=True)
class DayVector:
    column: str
    day: dt.date
    file: str
    cutoff: int
    table: pa.Table
    encoded: bool
    """Run-length encoded (a sort column) or plain values."""


def committed_cutoff(paths: TablePaths) -> int | None:
    snap = read_snapshot(paths.archive)
    return None if snap is None else snap.cutoff


def current_files(paths: TablePaths) -> dict[tuple[str, dt.date], vectors.VectorFile]:
    """Per (column, day) the vector file readers use, for the committed cutoff."""
    files, _ = vectors.list_files(paths.vectors)
    return vectors.current(files, committed_cutoff(paths))


def read_day(definition: TableDefinition, paths: TablePaths, column: str, day: dt.date,
             selection: dict[tuple[str, dt.date], vectors.VectorFile] | None = None) -> DayVector:
    """One column's vector of one archive day (``selection``: files chosen once for several reads)."""
    if column not in definition.column_names:
        raise LakehouseError(f"{definition.name}: unknown column {column!r} (columns: {', '.join(definition.column_names)})")
    if definition.archive.vectors == "sort_columns" and column not in definition.archive.sort_columns:
        raise LakehouseError(f"{definition.name}: column {column} has no vector files (vectors: sort_columns)")
    f = (selection if selection is not None else current_files(paths)).get((column, day))
    if f is None:
        raise LakehouseError(f"{definition.name}: no vector file for column {column} on {day} (is that day archived?)")
    return DayVector(column, day, f.path, f.cutoff, vectors.read(f.path), column in definition.archive.sort_columns)


def parse_where(definition: TableDefinition, items: list[str]) -> list[Any]:
    """``C=V`` equalities on a prefix of the sort columns, as typed values in sort-column order.
    ``NULL`` (upper case) looks up the null run."""
    sort = list(definition.archive.sort_columns)
    given: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise LakehouseError(f"--where {item!r}: expected COLUMN=VALUE")
        name, raw = item.split("=", 1)
        name = name.strip()
        if name not in sort:
            raise LakehouseError(f"--where {item!r}: {name!r} is not a sort column of {definition.name} (sort columns: {', '.join(sort) or 'none'})")
        if name in given:
            raise LakehouseError(f"--where: column {name} given twice")
        if raw == "NULL":
            given[name] = None
            continue
        try:
            given[name] = converter(definition.column(name).type)(raw)
        except BadValue as e:
            raise LakehouseError(f"--where {item!r}: {e}") from None
    k = len(given)
    if set(given) != set(sort[:k]):
        missing = [c for c in sort[:k] if c not in given]
        raise LakehouseError(f"--where must cover a prefix of the sort columns ({', '.join(sort)}); missing {', '.join(missing)}")
    return [given[c] for c in sort[:k]]


def lookup(definition: TableDefinition, paths: TablePaths, day: dt.date, values: list[Any]) -> tuple[rle.Range, int]:
    """The record range of a day matching the values; (range, entries touched)."""
    sort = definition.archive.sort_columns
    if not sort:
        raise LakehouseError(f"{definition.name} has no sort columns to look up")
    # One cutoff, one listing: every column comes from the same committed run.
    for attempt in range(3):
        selection = current_files(paths)
        try:
            cols = [rle.RunColumn(read_day(definition, paths, name, day, selection).table)
                    for name in sort[: max(1, len(values))]]
            break
        except FileNotFoundError:  # a run committed and cleaned up meanwhile: choose again
            if attempt == 2:
                raise
    first = cols[0]
    total = first.acc(first.n - 1) if first.n else 0
    r = rle.lookup(cols, values, total)
    return r, sum(c.touched for c in cols)
