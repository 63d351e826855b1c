"""The archive's sort-order check over many days at once (lakehouse.audit.files.unsorted_days):
against a plain-Python reading of the same files, for generated days, files, values (nulls
among them), columns missing from some files, hostile folder names and query batch sizes. Real
DuckDB and Parquet files; no Spark."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.audit import files as F
from lakehouse.definitions import parse_definition

D = parse_definition({
    "name": "t",
    "columns": [
        {"name": "k", "type": "string", "nullable": False},
        {"name": "a", "type": "int"},
        {"name": "b", "type": "string"},
        {"name": "ts", "type": "timestamp", "nullable": False},
    ],
    "primary_key": ["k"],
    "event_time": "ts",
    "archive": {"sort_columns": ["a", "b"]},
}, "t.yaml")
DAY0 = dt.date(2026, 1, 1)

values_a = st.one_of(st.none(), st.integers(-3, 3))
values_b = st.one_of(st.none(), st.sampled_from(["", "x", "y", "it's", "é"]))
a_file = st.tuples(st.lists(st.tuples(values_a, values_b), max_size=5), st.booleans())
"""A file: its (a, b) rows, and whether it lacks column b (written before b was added)."""
a_day = st.lists(a_file, min_size=1, max_size=3)
layouts = st.lists(a_day, min_size=1, max_size=4)


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Ascending with nulls first, column by column."""
    return tuple((0, 0) if v is None else (1, v) for v in row)


def expected(files: dict[dt.date, list[tuple[str, list[tuple[Any, Any]], bool]]]) -> dict[dt.date, str]:
    """The first row out of order on each day, read the plain way."""
    out = {}
    for day, fs in files.items():
        cols = ["a"] if any(no_b for _, _, no_b in fs) else ["a", "b"]
        rows = [(name, i, tuple(r[: len(cols)])) for name, rs, _ in fs for i, r in enumerate(rs)]
        for (_, _, prev), (name, i, cur) in itertools.pairwise(rows):
            if _key(cur) < _key(prev):
                out[day] = f"not sorted at {name} row {i}" + (
                    " (the first row of a file sorts before the last row of the one before)" if i == 0 else "")
                break
    return out


def write(root: Path, layout: list[list[tuple[list[tuple[Any, Any]], bool]]]) -> tuple[
        dict[dt.date, list[str]], dict[dt.date, int], dict[dt.date, list[tuple[str, list[tuple[Any, Any]], bool]]]]:
    paths: dict[dt.date, list[str]] = {}
    rows: dict[dt.date, int] = {}
    named: dict[dt.date, list[tuple[str, list[tuple[Any, Any]], bool]]] = {}
    for n, day_files in enumerate(layout):
        day = DAY0 + dt.timedelta(days=n)
        folder = root / f"event_date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        for c, (rs, no_b) in enumerate(day_files):
            name = f"part-00000-{uuid.uuid4()}.c{c:03d}.snappy.parquet"
            cols = {"a": pa.array([r[0] for r in rs], pa.int32())}
            if not no_b:
                cols["b"] = pa.array([r[1] for r in rs], pa.string())
            pq.write_table(pa.table(cols), folder / name)
            paths.setdefault(day, []).append(str(folder / name))
            named.setdefault(day, []).append((name, rs, no_b))
        rows[day] = sum(len(rs) for rs, _ in day_files)
    # the check is handed each day's files in any order: it reads them in batch order
    return {day: list(reversed(ps)) for day, ps in paths.items()}, rows, named


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(layout=layouts, batch=st.sampled_from([1, 3, 7, 4_000_000]))
def test_unsorted_days_finds_the_first_row_out_of_order_on_every_day(tmp_path, monkeypatch, layout, batch):
    from lakehouse.query import duckdb as duck

    root = tmp_path / f"it's a {uuid.uuid4().hex[:6]} [dir]"
    paths, rows, named = write(root, layout)
    monkeypatch.setattr(F, "ROWS_PER_QUERY", batch)
    con = duck.connect()
    assert F.unsorted_days(D, paths, con, rows) == expected(named)


def test_a_sorted_archive_of_many_days_is_checked_in_a_few_queries(tmp_path, monkeypatch):
    """Fixed costs once: 300 days on one connection, one query per batch of days."""
    from lakehouse.query import duckdb as duck

    layout = [[([(i % 3, "x"), (i % 3, "y")], False), ([(5, None), (6, "a")], False)] for i in range(300)]
    paths, rows, _ = write(tmp_path / "archive", layout)
    con = duck.connect()
    seen: list[str] = []

    class Counting:
        def execute(self, sql: str) -> Any:
            seen.append(sql)
            return con.execute(sql)

    monkeypatch.setattr(F, "ROWS_PER_QUERY", 400)
    assert F.unsorted_days(D, paths, Counting(), rows) == {}
    assert len(seen) == 1 + 3  # the files' schemas, then 300 days of 4 rows in batches of 100 days
