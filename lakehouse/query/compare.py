"""Comparing two engines' answers: same columns, same rows (as multisets), numbers within 1e-9."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

REL_TOL = 1e-9


@dataclass(frozen=True)
class Comparison:
    """Whether two results are the same, and the first difference when not."""

    equal: bool
    detail: str
    """Empty when equal; otherwise the first difference, for one error line."""


def _norm(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, decimal.Decimal)):
        f = float(v)
        return "NaN" if math.isnan(f) else f
    if isinstance(v, dt.datetime):
        v = v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[tuple[int, Any]] = []
    for v in row:
        if v is None:
            out.append((0, ""))
        elif isinstance(v, float):
            out.append((1, float(f"{v:.6g}") if math.isfinite(v) else v))
        else:
            out.append((2, str(v)))
    # exact values break ties between rows that only differ beyond the rounding
    return (tuple(out), tuple((0, "") if v is None else (1, v) if isinstance(v, float) else (2, str(v)) for v in row))


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)
    return a == b


def rows_of(t: pa.Table) -> list[tuple[Any, ...]]:
    """A result's rows as comparable tuples (numbers as floats, times as UTC ISO strings)."""
    return [tuple(_norm(v) for v in r.values()) for r in t.to_pylist()]


def compare(left: pa.Table, right: pa.Table, left_name: str = "spark", right_name: str = "duckdb") -> Comparison:
    """Whether two results hold the same columns and rows (order ignored)."""
    lc = [c.lower() for c in left.column_names]
    rc = [c.lower() for c in right.column_names]
    if lc != rc:
        return Comparison(False, f"columns differ: {left_name} {lc} vs {right_name} {rc}")
    if left.num_rows != right.num_rows:
        return Comparison(False, f"row counts differ: {left_name} {left.num_rows} vs {right_name} {right.num_rows}")
    a = sorted(rows_of(left), key=_sort_key)
    b = sorted(rows_of(right), key=_sort_key)
    for i, (x, y) in enumerate(zip(a, b)):
        for col, u, v in zip(lc, x, y):
            if not _close(u, v):
                return Comparison(False, f"row {i + 1} (sorted), column {col}: {left_name} {u!r} vs {right_name} {v!r}")
    return Comparison(True, "")


def json_rows(t: pa.Table) -> list[list[Any]]:
    """A result's rows as ``lakehouse query --format json`` renders their values."""
    from lakehouse.output import json_value

    cols = [c.to_pylist() for c in t.columns]
    return [[json_value(v) for v in row] for row in zip(*cols)] if cols else []


def _same_json_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)
    return a == b


def compare_json(left: pa.Table, right: pa.Table, left_name: str = "spark",
                 right_name: str = "duckdb") -> Comparison:
    """Whether two results print the same JSON: the same column names and JSON values (a number
    stays a number, a decimal stays a string with its scale); rows as multisets; floats may
    differ in the last digits (engines add in different orders)."""
    from lakehouse.output import dumps

    if left.column_names != right.column_names:
        return Comparison(False, f"columns differ: {left_name} {left.column_names} vs "
                                 f"{right_name} {right.column_names}")
    a, b = json_rows(left), json_rows(right)
    if dumps(a) == dumps(b):
        return Comparison(True, "")
    if len(a) != len(b):
        return Comparison(False, f"row counts differ: {left_name} {len(a)} vs {right_name} {len(b)}")

    def key(row: list[Any]) -> tuple[Any, ...]:
        return _sort_key(tuple(row))

    for i, (x, y) in enumerate(zip(sorted(a, key=key), sorted(b, key=key))):
        for col, u, v in zip(left.column_names, x, y):
            if not _same_json_value(u, v):
                return Comparison(False, f"row {i + 1} (sorted), column {col}: {left_name} "
                                         f"{dumps(u)} vs {right_name} {dumps(v)}")
    return Comparison(True, "")
