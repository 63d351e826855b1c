"""The archive's file checks, shared by ``lakehouse verify`` and ``lakehouse check``: every
archive day's files hold one batch sorted by the archive's order, and every vector file of the
current runs decodes to exactly its day's column, in record order.

Fixed costs are paid once per run, whatever the number of days: one listing of the archive's
files (from the Delta log) and of the vector folder, one DuckDB connection, and the sort order of
all days checked by a few queries (days grouped by the columns their files hold, in batches of
at most ``ROWS_PER_QUERY`` rows), never one query per day; the vector files compared with their
days one column at a time over batches of days (``ROWS_AT_ONCE`` rows), day by day only where a
batch differs, to say where.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse import storage
from lakehouse.archive import rle
from lakehouse.archive.state import Snapshot
from lakehouse.archive.vectors import batch_order, list_files
from lakehouse.archive.vectors import current as vectors_current
from lakehouse.archive.vectors import read as read_vector
from lakehouse.definitions import TableDefinition
from lakehouse.quality.invariants import SORTED, VECTORS
from lakehouse.query import TableSource
from lakehouse.sql import duck_ident, literal_body

ROWS_PER_QUERY = 4_000_000
"""At most this many archive rows (whole days) in one sort-order query."""
DAYS_AT_ONCE = 2
"""Archive days whose files are read at once (a small day's reads are mostly Python, which more
threads only contend for: 2,500 days of 400 rows read in 3.3 s by two threads, 5.3 s by eight)."""
ROWS_AT_ONCE = 1_000_000
"""At most this many archive rows (whole days) compared with their vector files at once."""


@dataclass
class Check:
    """The result of one check of one table: whether it passed, why not, and its figures."""

    table: str
    name: str
    ok: bool
    detail: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The check's row of ``lakehouse verify --json``."""
        return {"table": self.table, "check": self.name, "ok": self.ok, "detail": self.detail, **self.values}


def summary(problems: list[str]) -> str:
    """A check's detail from its problems: the first, and how many more."""
    if not problems:
        return ""
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


class ArchiveFiles:
    """The file checks of one table's archive at one pinned snapshot."""

    def __init__(self, source: TableSource, archive: Snapshot, con: Any | None = None,
                 days: set[dt.date] | None = None) -> None:
        from lakehouse.archive.reader import current_encoding
        from lakehouse.archive.vectors import stale_days
        from lakehouse.layout import layout

        self.d = source.definition
        self.source = source
        self.cutoff = archive.cutoff
        self._con = con
        self.layout = layout(source.paths.archive, archive.version)
        """The archive's data files at the snapshot."""
        by_day = self.layout.by_day()
        self.day_rows = {day: sum(f.rows for f in fs) for day, fs in by_day.items()}
        """Rows per archive day at the snapshot (every day, whatever ``days`` selects)."""
        from lakehouse.delta_log import file_uri

        self.files = {day: [file_uri(source.paths.archive, f.path) for f in fs] for day, fs in by_day.items()
                      if days is None or day in days}
        """The data files of each checked day (``days``: only those; None: all)."""
        listed, _ = list_files(source.paths.vectors)
        self.vectors = vectors_current(listed, archive.run)
        self.stale = stale_days(source.paths.vectors, current_encoding(self.d), archive.run, self.files, listed)
        """Days written under other settings than today's, with why: skipped, not failed (the next
        archive run re-sorts and re-encodes them)."""

    @property
    def con(self) -> Any:
        """The run's DuckDB connection (one of its own when none was given: it reads Parquet
        files alone, so without the delta extension)."""
        if self._con is None:
            from lakehouse.query import duckdb as duck

            self._con = duck.connect(delta=False)
        return self._con

    def sorted_check(self) -> Check:
        """Every archive day's files hold their rows in the sort order (days written under other
        settings are skipped until re-sorted)."""
        files = {day: paths for day, paths in self.files.items()
                 if not (day in self.stale and self.stale[day] != "no vector files")}
        problems = unsorted_days(self.d, files, self.con, self.day_rows)
        bad = [f"day {day}: {problems[day]}" for day in sorted(problems)]
        order_all = [c for c in self.d.sort_order if c in self.d.column_names]
        detail = (bad[0] + f" (sorted by {', '.join(order_all)} expected"
                  + (f"; and {len(bad) - 1} more days)" if len(bad) > 1 else ")")) if bad else skipped(self.stale)
        return Check(self.d.name, SORTED, not bad, detail,
                     {"days": len(self.files), "files": sum(len(v) for v in self.files.values()), "problems": bad})

    def vector_check(self) -> Check:
        """Every vector file of the current runs decodes to exactly its day's column, in record order."""
        from lakehouse.archive.reader import current_encoding

        d = self.d
        wanted = list(current_encoding(d).vector_columns)
        wanted = [c for c in d.column_names if c in wanted]
        if not wanted or self.cutoff is None:
            return Check(d.name, VECTORS, True, "", {"files": 0})
        days = [day for day in sorted(self.files) if day not in self.stale]  # stale: skipped, reason in the detail
        problems: list[str] = []
        checked = 0
        # days read at once (Arrow reads without the GIL), then compared together: one comparison
        # per column over a batch of days; only a batch that differs is compared day by day
        with ThreadPoolExecutor(max_workers=DAYS_AT_ONCE) as pool:
            for batch in _batches(days, self.day_rows, ROWS_AT_ONCE):
                read = list(pool.map(lambda day: self._read_day(day, wanted), batch))
                if _batch_matches(read, wanted, d.archive.sort_columns):
                    checked += len(wanted) * len(batch)
                    continue
                for day, (rows, vectors) in zip(batch, read, strict=True):
                    n, found = _day_problems(day, rows, vectors, wanted, d.archive.sort_columns)
                    checked += n
                    problems += found
        detail = summary(problems) or skipped(self.stale)
        return Check(d.name, VECTORS, not problems, detail,
                     {"files": checked, "skipped_days": len(self.stale), "problems": problems})

    def _read_day(self, day: dt.date, wanted: list[str]) -> tuple[pa.Table, dict[str, Any]]:
        """A day's ``wanted`` columns and its vector files: per column the file's table, None when
        there is none, or the exception reading it raised (path and error)."""
        vectors: dict[str, Any] = {}
        for col in wanted:
            f = self.vectors.get((col, day))
            try:
                vectors[col] = None if f is None else (f.path, read_vector(f.path))
            except Exception as e:  # noqa: BLE001 - an unreadable file is a finding, not a crash
                vectors[col] = (f.path if f is not None else "", e)
        return self._day_columns(self.files[day], wanted), vectors

    def _day_columns(self, paths: list[str], wanted: list[str]) -> pa.Table:
        """The ``wanted`` columns of a day's files in batch order (a column added after a file was
        written is null in it)."""
        parts = []
        for p in batch_order(paths):
            fs, where = storage.filesystem(p)  # an object store's file through lakehouse's store
            with fs.open_input_file(where) as f:
                pf = pq.ParquetFile(f)
                t = pf.read(columns=[c for c in wanted if c in pf.schema_arrow.names])
            for c in wanted:
                if c not in t.column_names:
                    t = t.append_column(c, pa.nulls(t.num_rows, self.d.column(c).type.arrow()))
            parts.append(t.select(wanted))
        return pa.concat_tables(parts, promote_options="permissive")  # writers differ in nullability


def _batches(days: list[dt.date], day_rows: dict[dt.date, int], rows: int) -> Iterator[list[dt.date]]:
    """``days`` in order, in batches of at most ``rows`` rows (a bigger day alone)."""
    batch: list[dt.date] = []
    n = 0
    for day in days:
        if batch and n + day_rows.get(day, 0) > rows:
            yield batch
            batch, n = [], 0
        batch.append(day)
        n += day_rows.get(day, 0)
    if batch:
        yield batch


def _batch_matches(read: list[tuple[pa.Table, dict[str, Any]]], wanted: list[str], rle_columns: Sequence[str]) -> bool:
    """Whether every day of a batch has every vector file, each well formed and decoding to
    exactly its day's column: checked over the batch at once (the days' files end to end, each
    file's runs and length checked against its own day). False also when the batch cannot be
    compared this way (types that differ between days, NaN values): the day-by-day check decides."""
    try:
        lengths = np.array([rows.num_rows for rows, _ in read], dtype=np.int64)
        for col in wanted:
            got = [vectors[col] for _, vectors in read]
            if any(v is None or isinstance(v[1], Exception) for v in got):
                return False
            tables = [t for _, t in got]
            expect = pa.chunked_array([part for rows, _ in read for part in rows.column(col).chunks],
                                      type=read[0][0].schema.field(col).type).combine_chunks()
            if col in rle_columns:
                runs = pa.concat_tables(tables)
                per_file = [t.num_rows for t in tables]
                if rle.check_runs(runs, per_file):
                    return False
                ends = np.concatenate(([0], np.cumsum(runs.column("count").to_numpy())))
                first = np.concatenate(([0], np.cumsum(per_file)))
                if not np.array_equal(ends[first[1:]] - ends[first[:-1]], lengths):  # each file's records
                    return False
                values = rle.decode(runs)
            else:
                if not np.array_equal(np.array([t.num_rows for t in tables], dtype=np.int64), lengths):
                    return False
                values = pa.concat_tables(tables).column("value").combine_chunks()
            if len(values) != len(expect) or not values.equals(expect.cast(values.type)):
                return False
    except Exception:  # noqa: BLE001 - not comparable at once: compared day by day
        return False
    return True


def _day_problems(day: dt.date, rows: pa.Table, vectors: dict[str, Any], wanted: list[str],
                  rle_columns: Sequence[str]) -> tuple[int, list[str]]:
    """The vector files of one day checked against its rows: (files checked, problems)."""
    found, checked = [], 0
    for col in wanted:
        got = vectors[col]
        if got is None:
            found.append(f"no vector file for {col} on {day}")
            continue
        checked += 1
        problem = _vector_problem(got[0], got[1], col in rle_columns, rows.column(col).combine_chunks())
        if problem:
            found.append(problem)
    return checked, found


def _vector_problem(path: str, table: pa.Table | Exception, run_length: bool, expect: pa.Array) -> str:
    """Why the vector file at ``path`` (read as ``table``) does not decode to ``expect``; "" when it does."""
    try:
        if isinstance(table, Exception):
            raise table
        if run_length:
            issues = rle.check_runs(table)
            if issues:
                return f"{path}: {issues[0]}"
            values = rle.decode(table)
        else:
            values = table.column("value").combine_chunks()
    except Exception as e:  # noqa: BLE001 - an unreadable file is a finding, not a crash
        return f"{path}: unreadable: {e}"
    expect = expect.cast(values.type)
    if len(values) != len(expect):
        return f"{path}: {len(values)} records, the archive day has {len(expect)}"
    if values.equals(expect):
        return ""
    i = next((i for i in range(len(values)) if values[i] != expect[i] and not (
        values[i].as_py() is None and expect[i].as_py() is None) and not _both_nan(values[i], expect[i])), None)
    return "" if i is None else f"{path}: record {i} is {values[i].as_py()!r}, the archive day has {expect[i].as_py()!r}"


def _nulls_first_violation(cols: list[str], cur: str, prev: str) -> str:
    """SQL: the row ``cur`` sorts before ``prev`` (ascending, nulls first) on ``cols``."""
    terms = []
    for i in range(len(cols)):
        eq = " AND ".join(f"({cur}_{j} IS NOT DISTINCT FROM {prev}_{j})" for j in range(i)) or "TRUE"
        lt = (f"(({cur}_{i} IS NULL AND {prev}_{i} IS NOT NULL) OR ({cur}_{i} IS NOT NULL AND {prev}_{i} "
              f"IS NOT NULL AND {cur}_{i} < {prev}_{i}))")
        terms.append(f"({eq} AND {lt})")
    return " OR ".join(terms) or "FALSE"


def unsorted_days(d: TableDefinition, files: dict[dt.date, list[str]], con: Any | None = None,
                  day_rows: dict[dt.date, int] | None = None) -> dict[dt.date, str]:
    """Per archive day whose files, read in batch order (``vectors.batch_order``), are not one
    batch sorted by the archive's order: why (the first row out of order). Days are checked
    together: one query per group of days whose files hold the same sort columns (columns added
    later are absent from old files), in batches of at most ``ROWS_PER_QUERY`` rows
    (``day_rows``: rows per day, when known)."""
    from lakehouse.query import duckdb as duck

    ordered = {day: batch_order(paths) for day, paths in files.items() if paths}
    if not ordered:
        return {}
    con = con if con is not None else duck.connect(delta=False)
    wanted = [c for c in d.sort_order if c in d.column_names]
    have: dict[str, set[str]] = {}
    every = [p for paths in ordered.values() for p in paths]
    for name, column in con.execute(
            f"SELECT file_name, name FROM parquet_schema([{', '.join(_path(p) for p in every)}])").fetchall():
        have.setdefault(name, set()).add(column)
    groups: dict[tuple[str, ...], list[dt.date]] = {}
    for day, paths in ordered.items():
        common = set.intersection(*(have.get(p, set()) for p in paths))
        order = tuple(c for c in wanted if c in common)
        if order:
            groups.setdefault(order, []).append(day)
    out: dict[dt.date, str] = {}
    for order, days in groups.items():
        batch: list[dt.date] = []
        rows = 0
        for day in sorted(days):
            n = (day_rows or {}).get(day, 0)
            if batch and rows + n > ROWS_PER_QUERY:
                out.update(_first_unsorted(con, list(order), {k: ordered[k] for k in batch}))
                batch, rows = [], 0
            batch.append(day)
            rows += n
        if batch:
            out.update(_first_unsorted(con, list(order), {k: ordered[k] for k in batch}))
    return out


def _path(p: str) -> str:
    return f"'{literal_body(p)}'"


def _first_unsorted(con: Any, order: list[str], files: dict[dt.date, list[str]]) -> dict[dt.date, str]:
    """The first row out of ``order`` on each of these days (their files in batch order)."""
    ranks = ", ".join(f"({_path(p)}, DATE '{day.isoformat()}', {i})"
                      for day, paths in files.items() for i, p in enumerate(paths))
    every = ", ".join(_path(p) for paths in files.values() for p in paths)
    cur = ", ".join(f"{duck_ident(c)} AS cur_{i}" for i, c in enumerate(order))
    keep = ", ".join(f"cur_{i}" for i in range(len(order)))
    prev = ", ".join(f"lag(cur_{i}) OVER (PARTITION BY day ORDER BY rank, rn) AS prev_{i}" for i in range(len(order)))
    cond = _nulls_first_violation(order, "cur", "prev")
    sql = (f"WITH f(path, day, rank) AS (VALUES {ranks}), "
           f"r AS (SELECT f.day, f.rank, p.file_row_number AS rn, {cur} FROM read_parquet([{every}], filename = true, "
           f"file_row_number = true, union_by_name = true) p JOIN f ON p.filename = f.path), "
           f"w AS (SELECT day, rank, rn, {keep}, {prev} FROM r) "
           f"SELECT day, rank, rn FROM w WHERE NOT (rank = 0 AND rn = 0) AND ({cond}) "
           "QUALIFY row_number() OVER (PARTITION BY day ORDER BY rank, rn) = 1")
    out = {}
    for day, rank, rn in con.execute(sql).fetchall():
        where = f"{files[day][int(rank)].rsplit('/', 1)[-1]} row {int(rn)}"
        out[day] = f"not sorted at {where}" + (
            " (the first row of a file sorts before the last row of the one before)" if int(rn) == 0 else "")
    return out


def skipped(stale: dict[dt.date, str]) -> str:
    """The detail of a check that skipped days archived under other settings."""
    if not stale:
        return ""
    day = min(stale)
    more = f" and {len(stale) - 1} more day(s)" if len(stale) > 1 else ""
    return (f"skipped {day}{more}: {stale[day]}; the next lakehouse archive run re-sorts and re-encodes "
            "them")


def _both_nan(a: pa.Scalar, b: pa.Scalar) -> bool:
    x, y = a.as_py(), b.as_py()
    return isinstance(x, float) and isinstance(y, float) and x != x and y != y
