"""The groups of a split view (``shape.GROUP_VIEW``), read from the archive's run lengths.

For a query of a table's shape (lakehouse.query.shape), the split view's rows are replaced by
their groups: per archived day, the groups of its first k sort columns from the day's vector
files (lakehouse.archive.rollup: no data file is read), and per live row at or after the cutoff,
a group of one (read with delta-rs). Both sides are of the same pinned versions as the plain
view (``split.current``: live first, then the archive and its cutoff), so every row is counted
once, in the archive's groups or as a live row.

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import delta_log
from lakehouse.archive import rollup, vectors
from lakehouse.archive.reader import current_encoding
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.query import TableSource
from lakehouse.query.shape import ROWS, NotRuns, Shape
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
    """Live rows at or after the cutoff (a group each)."""

    def explain(self) -> dict[str, Any]:
        """What the groups were made of, for ``query --explain``."""
        return {"archive_days": self.days, "vector_files": self.files, "archive_rows": self.archive_rows,
                "groups": self.table.num_rows - self.live_rows, "live_rows": self.live_rows}


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


def plan(tables: list[TableSource], sql: str, attempts: int = 3) -> Plan:
    """Whether the archive's runs answer ``sql`` (a read-only statement over ``tables``), with
    the groups read when they do; the split view pinned anew when a run replaced files meanwhile."""
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
                return Plan(shape, read_groups(current(source), shape))
            except Changed:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")
    except NotRuns as e:
        return Plan(None, None, str(e))


def read_groups(split: Split, shape: Shape) -> Groups:
    """The groups of ``split`` for ``shape`` (NotRuns when the vector files cannot give them)."""
    d = split.source.definition
    cutoff = split.cutoff
    if cutoff is None:
        raise NotRuns("nothing is archived yet")
    sort = list(d.archive.sort_columns)
    keys = sort[: shape.depth]
    wanted = [*keys, *(m.column for m in shape.measures)]
    types = _types(split, shape)
    days = _archive_days(split)
    found, _ = vectors.list_files(split.source.paths.vectors, sorted(set(wanted)))
    current = vectors.current(found, cutoff)
    stale = vectors.stale_days(split.source.paths.vectors, current_encoding(d), cutoff, days, found) \
        if days and wanted else {}  # with no column wanted, the days' record counts are the groups
    for day, why in sorted(stale.items())[:1]:
        raise NotRuns(f"archive day {day} cannot answer from runs: {why}")
    parts, files = [], 0
    for day, records in sorted(days.items()):
        missing = [c for c in wanted if (c, day) not in current]
        if missing:
            raise NotRuns(f"archive day {day} has no vector file of column {missing[0]}")
        try:
            tables = {c: vectors.read(current[(c, day)].path) for c in dict.fromkeys(wanted)}
        except FileNotFoundError:
            raise Changed("archiving runs kept replacing the vector files while they were read") from None
        files += len(tables)
        parts.append(_day_groups(day, records, [tables[c] for c in keys], tables, shape, types))
    live = _live_groups(split, shape, types)
    table = pa.concat_tables([*parts, live]) if parts else live
    return Groups(table, [(n, t.lower()) for n, (t, _) in types.items()], len(days), files,
                  sum(days.values()), live.num_rows)


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
                out[m.name(kind)] = (_spark_type(at), at)
            else:
                out[m.name(kind)] = (t.spark_ddl(), t.arrow())
    return out


def _spark_type(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    return "BIGINT" if pa.types.is_integer(t) else "DOUBLE"


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


def _day_groups(day: dt.date, records: int, runs: list[pa.Table], tables: dict[str, pa.Table], shape: Shape,
                types: dict[str, tuple[str, pa.DataType]]) -> pa.Table:
    try:
        g = rollup.groups(runs, records)
    except rollup.Unsupported as e:
        raise NotRuns(f"archive day {day}: {e}") from None
    columns: dict[str, pa.Array] = {}
    for (name, _), key in zip(list(types.items())[: shape.depth], g.keys):
        columns[name] = key
    columns[PARTITION_COLUMN] = pa.array([day] * len(g), pa.date32())
    columns[ROWS] = pa.array(g.counts, pa.int64())
    for m in shape.measures:
        t = tables[m.column]
        try:
            items = rollup.run_items(g, t) if "count" in t.column_names and "accumulative_count" in t.column_names \
                else rollup.plain_items(g, t.column("value"))
            for kind in sorted(m.kinds):
                columns[m.name(kind)] = rollup.aggregate(kind, *items)
        except rollup.Unsupported as e:
            raise NotRuns(f"archive day {day}, column {m.column}: {e}") from None
    return _typed(columns, types)


def _typed(columns: dict[str, pa.Array], types: dict[str, tuple[str, pa.DataType]]) -> pa.Table:
    return pa.table({n: columns[n].cast(at) for n, (_, at) in types.items()})


def _live_groups(split: Split, shape: Shape, types: dict[str, tuple[str, pa.DataType]]) -> pa.Table:
    """The live rows of the split view (at or after the cutoff), a group of one each."""
    d = split.source.definition
    need = list(dict.fromkeys([*shape.group_columns(d), *(m.column for m in shape.measures), split.event_time]))
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
    got = {c: v.filter(keep) for c, v in got.items()}
    n = len(got[split.event_time])
    first = np.arange(n, dtype=np.int64)
    columns: dict[str, pa.Array] = {c: got[c] for c in shape.group_columns(d)}
    columns[ROWS] = pa.array(np.ones(n, np.int64))
    for m in shape.measures:
        for kind in sorted(m.kinds):
            try:
                columns[m.name(kind)] = rollup.aggregate(kind, got[m.column], None, first) if n else \
                    pa.nulls(0, types[m.name(kind)][1])
            except rollup.Unsupported as e:
                raise NotRuns(f"live column {m.column}: {e}") from None
    return _typed(columns, types)
