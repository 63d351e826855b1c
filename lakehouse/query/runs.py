"""The groups of a split view (``shape.GROUP_VIEW``), read from the archive's run lengths.

For a query of a table's shape (lakehouse.query.shape), the split view's rows are replaced by
their groups: per archived day, the groups of its first k sort columns from the day's vector
files (lakehouse.archive.rollup: no data file is read), and the groups of live's rows at or
after the cutoff (read with delta-rs, grouped alike). Both sides are of the same pinned versions
as the plain view (``split.current``: live first, then the archive and its cutoff), so every row
is counted once, in the archive's groups or in live's.

The vector files must describe exactly the archive at the pinned version: every archived day
has the current file of every column the query needs, written under today's sort columns, and
each day's runs hold as many records as the day's data files (Delta's statistics). Otherwise,
or when a run committing meanwhile removes a file being read, ``NotRuns`` says why and the
query reads the data files.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import delta_log, storage
from lakehouse.archive import rollup, vectors
from lakehouse.archive.reader import current_encoding
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.errors import first_line
from lakehouse.query import TableSource
from lakehouse.query.shape import ROWS, NotRuns, Shape, sum_type
from lakehouse.query.split import Split
from lakehouse.sql import duck_ident, literal


@dataclass(frozen=True)
class Groups:
    """A split view's groups for one query shape, and what reading them took."""

    table: pa.Table
    """The groups (``shape.GROUP_VIEW``'s rows): group columns, ``_lh_rows``, the measures."""
    types: list[tuple[str, str]]
    """Each column's Spark type (for the DuckDB translator and Spark's view)."""
    days: int
    """Archived days read from vector files."""
    files: int
    """Vector files read."""
    archive_rows: int
    """Archived records the groups stand for."""
    live_rows: int
    """Live rows at or after the cutoff."""
    live_groups: int
    """The groups of those rows (the last rows of ``table``)."""

    def explain(self) -> dict[str, Any]:
        """What the groups were made of, for ``query --explain``."""
        return {"archive_days": self.days, "vector_files": self.files, "archive_rows": self.archive_rows,
                "archive_groups": self.table.num_rows - self.live_groups, "live_rows": self.live_rows,
                "live_groups": self.live_groups}


class Changed(NotRuns):
    """An archiving run replaced vector files while they were read (read the groups again)."""


@dataclass(frozen=True)
class Plan:
    """How a query is answered: from the runs (its shape and groups) or from the data files
    (``reason`` says why)."""

    shape: Shape | None
    groups: Groups | None
    reason: str | None = None

    @property
    def path(self) -> str:
        """``runs`` or ``scan``."""
        return "runs" if self.groups is not None else "scan"

    def explain(self) -> dict[str, Any]:
        """The plan for ``query --explain``: the path, and its why or what it reads."""
        if self.shape is None or self.groups is None:
            return {"path": "scan", "reason": self.reason}
        return {"path": "runs", "table": self.shape.table, "group_depth": self.shape.depth,
                "measures": [m.column for m in self.shape.measures], **self.groups.explain(),
                "sql": self.shape.sql}


SPARK_GROUPS = 100_000
"""Groups a query on Spark takes from the runs at most: they travel to the session as a local
relation, and 240,000 of them cost what Spark's scan of 10M rows does (``bench groups``)."""


def plan(tables: list[TableSource], sql: str, engine: str = "duckdb", attempts: int = 3) -> Plan:
    """Whether the archive's runs answer ``sql`` (a read-only statement over ``tables``) on
    ``engine``, with the groups read when they do; the split view pinned anew when a run replaced
    files meanwhile."""
    from lakehouse.query import guard
    from lakehouse.query.shape import analyse
    from lakehouse.query.split import current

    checked = guard.check(sql)
    if checked.kind != "query" or checked.tree is None:
        return Plan(None, None, f"a {checked.kind.upper()} statement reads no groups")
    try:
        shape = analyse({t.name.lower(): t.definition for t in tables}, checked.tree)
        source = next(t for t in tables if t.name == shape.table)
        for attempt in range(attempts):
            try:
                groups = read_groups(current(source), shape)
                if engine == "spark" and groups.table.num_rows > SPARK_GROUPS:
                    raise NotRuns(f"{groups.table.num_rows:,} groups are more than Spark takes from the runs "
                                  f"({SPARK_GROUPS:,}: they travel to it as a local relation)")
                return Plan(shape, groups)
            except Changed:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")
    except NotRuns as e:
        return Plan(None, None, str(e))
    except Exception as e:  # noqa: BLE001 - the path is a shortcut: whatever it cannot take, the data files answer
        return Plan(None, None, f"the run-length path failed ({type(e).__name__}: {first_line(e)})")


def read_groups(split: Split, shape: Shape) -> Groups:
    """The groups of ``split`` for ``shape`` (NotRuns when the vector files cannot give them)."""
    types = _types(split, shape)
    archived = archive_groups(split, shape, types)
    live, live_rows = _live_groups(split, shape, types)
    table = pa.concat_tables([archived.table, live]) if archived.table is not None else live
    return Groups(table, [(n, t.lower()) for n, (t, _) in types.items()], archived.days, archived.files,
                  archived.rows, live_rows, live.num_rows)


@dataclass(frozen=True)
class Archived:
    """The archive's groups (None when no day is read), and the days, files and records read."""

    table: pa.Table | None
    days: int
    files: int
    rows: int


def archive_groups(split: Split, shape: Shape, types: dict[str, tuple[str, pa.DataType]] | None = None) -> Archived:
    """The groups of the archived days ``shape`` reads (its event_date range) at the pinned
    version, from their vector files."""
    d = split.source.definition
    cutoff = split.cutoff
    if cutoff is None:
        raise NotRuns("nothing is archived yet")
    types = types or _types(split, shape)
    keys = list(d.archive.sort_columns)[: shape.depth]
    wanted = [*keys, *(m.column for m in shape.measures)]
    first, last = shape.days
    days = {day: n for day, n in _archive_days(split).items()
            if (first is None or day >= first) and (last is None or day <= last)}
    found, _ = vectors.list_files(split.source.paths.vectors, sorted(set(wanted)))
    current = vectors.current(found, split.archive.run)
    stale = vectors.stale_days(split.source.paths.vectors, current_encoding(d), split.archive.run, days, found) \
        if days and wanted else {}  # with no column wanted, the days' record counts are the groups
    for day, why in sorted(stale.items())[:1]:
        raise NotRuns(f"archive day {day} cannot answer from runs: {why}")
    ordered = sorted(days.items())
    for day, _ in ordered:
        missing = [c for c in wanted if (c, day) not in current]
        if missing:
            raise NotRuns(f"archive day {day} has no vector file of column {missing[0]}")
    columns = list(dict.fromkeys(wanted))
    tables = _read_all([current[(c, day)].path for day, _ in ordered for c in columns])
    by_column = {c: tables[i::len(columns)] for i, c in enumerate(columns)} if columns else {}
    table = _archive_groups(ordered, by_column, keys, shape, types, split) if ordered else None
    return Archived(table, len(ordered), len(tables), sum(days.values()))


READERS = 8
"""Vector files read at once (an object store answers each GET in tens of milliseconds)."""


def _read_all(paths: list[str]) -> list[pa.Table]:
    """The vector files at ``paths``, in order (on an object store by ``READERS`` threads: a local
    file reads in a tenth of a millisecond, less than a thread's hand-over); Changed when one is
    gone (an archiving run replaced it since the listing)."""
    from concurrent.futures import ThreadPoolExecutor

    try:
        if len(paths) < 2 * READERS or storage.is_local(paths[0]):
            return [vectors.read_kept(p) for p in paths]
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            return list(pool.map(vectors.read_kept, paths))
    except FileNotFoundError:
        raise Changed("archiving runs kept replacing the vector files while they were read") from None


def _archive_groups(days: list[tuple[dt.date, int]], tables: dict[str, list[pa.Table]], keys: list[str],
                    shape: Shape, types: dict[str, tuple[str, pa.DataType]], split: Split) -> pa.Table:
    """The groups of every archived day at once: the days' runs stacked (a day is a run of
    event_date around its columns' runs), checked day by day against the day's records."""
    records = [n for _, n in days]
    stacked: dict[str, pa.Table] = {}
    try:
        for c, parts in tables.items():
            want = split.column_type(c).arrow()
            if "accumulative_count" not in parts[0].column_names:
                raise NotRuns(f"the vector files of {c} hold no runs")
            parts = [t if t.schema.field("value").type == want else t.set_column(0, "value", t.column("value").cast(want))
                     for t in parts]
            for (day, n), t in zip(days, parts):
                held = int(t.column("accumulative_count")[-1].as_py()) if t.num_rows else 0
                if held != n:
                    raise NotRuns(f"archive day {day}: the vector file of {c} holds {held} records, the day {n}")
            stacked[c] = rollup.stack(parts, records)
        day_runs = rollup.batch_runs(pa.array([d for d, _ in days], pa.date32()), records)
        g = rollup.groups([day_runs, *(stacked[c] for c in keys)], sum(records))
        columns: dict[str, pa.Array] = dict(zip([PARTITION_COLUMN, *keys], g.keys))
        columns[ROWS] = pa.array(g.counts, pa.int64())
        for m in shape.measures:
            items = rollup.run_items(g, stacked[m.column])
            for kind in sorted(m.kinds):
                columns[m.name(kind)] = rollup.aggregate(kind, *items)
    except rollup.Unsupported as e:
        raise NotRuns(f"archived days: {e}") from None
    return _typed(columns, types)


def _types(split: Split, shape: Shape) -> dict[str, tuple[str, pa.DataType]]:
    """Each groups column: (Spark type, Arrow type), in order."""
    d = split.source.definition
    out: dict[str, tuple[str, pa.DataType]] = {}
    for c in shape.group_columns(d):
        t = split.column_type(c)
        out[c] = (t.spark_ddl(), t.arrow())
    out[ROWS] = ("BIGINT", pa.int64())
    for m in shape.measures:
        t = split.column_type(m.column)
        for kind in sorted(m.kinds):
            if kind == "count":
                out[m.name(kind)] = ("BIGINT", pa.int64())
            elif kind == "sum":
                try:
                    at = rollup.sum_type(t.arrow())
                except rollup.Unsupported as e:
                    raise NotRuns(str(e)) from None
                out[m.name(kind)] = (sum_type(t), at)
            else:
                out[m.name(kind)] = (t.spark_ddl(), t.arrow())
    return out


def _archive_days(split: Split) -> dict[dt.date, int]:
    """Per archived day at the pinned version, its records (Delta's statistics)."""
    actions = delta_log.add_actions(split.source.paths.archive, split.archive.version)
    if not actions.num_rows:
        return {}
    part = f"partition.{PARTITION_COLUMN}"
    if part not in actions.column_names or "num_records" not in actions.column_names:
        raise NotRuns("the archive's log lacks partition values or record counts")
    out: dict[dt.date, int] = defaultdict(int)
    for day, n in zip(actions.column(part).to_pylist(), actions.column("num_records").to_pylist()):
        if n is None:
            raise NotRuns("an archive data file has no record count in the log")
        out[day if isinstance(day, dt.date) else dt.date.fromisoformat(str(day))] += int(n)
    return dict(out)


def _typed(columns: dict[str, pa.Array], types: dict[str, tuple[str, pa.DataType]]) -> pa.Table:
    return pa.table({n: columns[n].cast(at) for n, (_, at) in types.items()})


def _live_groups(split: Split, shape: Shape, types: dict[str, tuple[str, pa.DataType]]) -> tuple[pa.Table, int]:
    """The groups of live's rows in the split view (at or after the cutoff), and how many rows:
    the rows grouped by the group columns (``rollup.row_groups``)."""
    d = split.source.definition
    keys = shape.group_columns(d)
    need = list(dict.fromkeys([*keys, *(m.column for m in shape.measures), split.event_time]))
    present = [c for c in need if c not in split.live_absent]
    day = split.cutoff_day
    assert day is not None and split.cutoff is not None
    rows = delta_log.scan(split.source.paths.live,
                          f"SELECT {', '.join(duck_ident(c) for c in present)} FROM t "
                          f"WHERE {duck_ident(PARTITION_COLUMN)} >= CAST({literal(day.isoformat())} AS DATE)",
                          split.live.version)
    n = rows.num_rows
    got = {c: rows.column(c).combine_chunks().cast(split.column_type(c).arrow()) if c in present  # string_view
           else pa.nulls(n, split.column_type(c).arrow()) for c in need}
    at = got[split.event_time].cast(pa.timestamp("us", tz="UTC"))
    keep = pc.fill_null(pc.greater_equal(at, pa.scalar(split.cutoff * 1_000_000, pa.timestamp("us", tz="UTC"))), False)
    table = pa.table({c: v.filter(keep) for c, v in got.items()})
    n = table.num_rows
    if n == 0:
        return pa.table({c: pa.array([], at) for c, (_, at) in types.items()}), 0
    try:
        g, order = rollup.row_groups([table.column(c).combine_chunks() for c in keys])
        columns: dict[str, pa.Array] = dict(zip(keys, g.keys))
        columns[ROWS] = pa.array(g.counts, pa.int64())
        for m in shape.measures:
            items = rollup.plain_items(g, table.column(m.column).take(pa.array(order)))
            for kind in sorted(m.kinds):
                columns[m.name(kind)] = rollup.aggregate(kind, *items)
    except rollup.Unsupported as e:
        raise NotRuns(f"live rows: {e}") from None
    return _typed(columns, types), n
