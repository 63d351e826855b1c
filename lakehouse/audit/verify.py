"""``lakehouse verify``: the same checks on Spark and on DuckDB, compared, plus invariants.

Per table: rows per day, sums of every numeric column per day, distinct keys, min/max event
time per day, keys unique across days, every archive row older than the cutoff, every archive
day batch sorted, every vector file decoding to exactly its day's rows in order, and every
archive day holding the rows and checksum its last write recorded in the ledger (Spark: the
checksum is Spark's xxhash64). Then every saved query (queries/*.sql) on both engines. A check
fails when the engines disagree or when an invariant does not hold; the detail names it.

A run pins every table's snapshots (live first) and the watermarks once, and registers the same
views on both engines: one Spark session, one DuckDB connection. Spark is asked everything at
once (per table one query of the per-day figures, one of the counts, one of the ledger's
figures; each saved query), ``QUERIES_AT_ONCE`` in flight: each small query is mostly
fixed latency. DuckDB answers the same on the calling thread meanwhile, and the file checks
(lakehouse.audit.files) run there too. So a run's cost grows with its tables and queries, not
with the number of days.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.archive.state import Snapshot
from lakehouse.audit.files import ArchiveFiles, Check, summary
from lakehouse.definitions import TableDefinition
from lakehouse.errors import LakehouseError, first_line
from lakehouse.query import TableSource
from lakehouse.query.compare import compare
from lakehouse.query.split import Split, current
from lakehouse.spark.session import QUERIES_AT_ONCE
from lakehouse.sql import duck_ident, spark_ident

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Check", "bundles", "ledger_check", "query_tables", "verify"]

@dataclass(frozen=True)
class Part:
    """One check answered by a bundle: its name, the result's columns it compares (as
    ``(column, name in the check)``), and the column that must be 0 in every row (invariants)."""

    name: str
    columns: tuple[tuple[str, str], ...]
    invariant: str | None = None

    def of(self, result: pa.Table) -> pa.Table:
        """The check's own columns of a bundle's result."""
        return result.select([c for c, _ in self.columns]).rename_columns([n for _, n in self.columns])


@dataclass(frozen=True)
class Bundle:
    """One query (Spark SQL) answering several checks."""

    sql: str
    parts: tuple[Part, ...]


def bundles(d: TableDefinition, view: str, tagged_view: str) -> list[Bundle]:
    """The engine checks of a table as two queries over the split view ``view`` and
    ``tagged_view`` (every stored row, lakehouse.quality.invariants): the per-day figures (rows,
    min/max event time, sums of the numeric columns) grouped once, and the counts (distinct keys,
    each row invariant's violations) in one read of the stored rows."""
    from lakehouse.quality import invariants

    t, et = view, spark_ident(d.event_time)
    numeric = [c.name for c in d.columns if c.type.is_numeric]
    sums = [(f"sum(CAST({spark_ident(c)} AS DOUBLE))", f"sum_{c}") for c in numeric]
    figures = ", ".join(f"{expr} AS {spark_ident(name)}" for expr, name in
                        [("count(*)", "n"), (f"min({et})", "lo"), (f"max({et})", "hi"), *sums])
    day = ("event_date", "event_date")
    per_day = [Part("rows per day", (day, ("n", "n"))),
               Part("min/max event time per day", (day, ("lo", "lo"), ("hi", "hi")))]
    if numeric:
        per_day.append(Part("sums of numeric columns per day", (day, *((n, n) for _, n in sums))))
    out = [Bundle(f"SELECT event_date, {figures} FROM {t} GROUP BY event_date", tuple(per_day))]
    counts = [Part("distinct keys", (("c0", "n"),))] if d.has_key else []
    for name in invariants.names(d, archive=True):
        counts.append(Part(name, ((f"c{len(counts)}", "violations"),), "violations"))
    out.append(Bundle(invariants.counts_sql(d, tagged_view, True, distinct_keys=d.has_key), tuple(counts)))
    return out


def _invariant_detail(result: pa.Table, col: str) -> str:
    bad = [r for r in result.to_pylist() if r[col]]
    return f"{bad[0][col]} violation(s)" if bad else ""


def _tagged(d: TableDefinition) -> str:
    """The name of a table's tagged view (its stored rows) in a verify run."""
    return f"{d.name}__tagged"


def _spark_views(spark: "SparkSession", split: Split) -> list[Callable[[], None]]:
    """Registering the table's tagged view on Spark (one step, run beside the other tables'
    steps), on the split's pinned versions."""
    from lakehouse.query import spark as spark_q

    def register() -> None:
        live, arch = spark_q.stored_frames(spark, split)
        spark_q.tagged(split, live, arch).createOrReplaceTempView(_tagged(split.source.definition))

    return [register]


def _duck_views(con: Any, split: Split) -> None:
    """The table's tagged view on DuckDB, on the same versions."""
    from lakehouse.query.duckdb import tagged_sql

    con.execute(f"CREATE VIEW {duck_ident(_tagged(split.source.definition))} AS {tagged_sql(split)}")


def _answer(on_spark: "Future[pa.Table]", on_duck: pa.Table | Exception) -> tuple[pa.Table, pa.Table] | str:
    """Both engines' results, or why a check could not run."""
    try:
        s = on_spark.result()
        if isinstance(on_duck, Exception):
            raise on_duck
    except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
        return f"could not run: {first_line(e)}"
    return s, on_duck


def _compared(table: str, answer: tuple[pa.Table, pa.Table] | str, part: Part) -> Check:
    if isinstance(answer, str):
        return Check(table, part.name, False, answer)
    s, k = part.of(answer[0]), part.of(answer[1])
    cmp = compare(s, k)
    detail = "" if cmp.equal else f"engines differ: {cmp.detail}"
    if cmp.equal and part.invariant:
        detail = _invariant_detail(s, part.invariant)
    return Check(table, part.name, not detail, detail, {"rows": s.num_rows})


def verify(spark: "SparkSession", tables: list[TableSource], selected: list[str] | None = None,
           saved: Sequence[tuple[str, str]] = ()) -> list[Check]:
    """Every check of the ``selected`` tables (None: all) and the ``saved`` queries (file name,
    SQL), on one pinned moment of every table; see the module doc."""
    from lakehouse.query import duckdb as duck
    from lakehouse.query import spark as spark_q
    from lakehouse.stream.status import watermarks

    splits = [current(t) for t in tables]  # each live before its archive
    marks = watermarks(tables)
    chosen = [s for s in splits if selected is None or s.name in selected]
    con = duck.connect()
    with ThreadPoolExecutor(max_workers=QUERIES_AT_ONCE) as pool:
        views = [pool.submit(spark_q.register_splits, spark, [s], None) for s in splits]
        views.append(pool.submit(spark_q.register_splits, spark, [], marks))
        views += [pool.submit(step) for s in chosen for step in _spark_views(spark, s)]
        duck.register_splits(con, splits, marks)
        for s in chosen:
            _duck_views(con, s)
        for f in views:
            f.result()  # a view Spark cannot build fails the run: nothing could be checked
        work = [_TableRun(spark, con, pool, s) for s in chosen]
        queries = [_SavedRun(spark, pool, name, sql) for name, sql in saved]
        duck.sandbox(con, tables)  # from here DuckDB reads only the tables' folders
        out: list[Check] = []
        for w in work:
            out += w.finish()
        for q in queries:
            out.append(q.finish(con, tables))
    return out


class _TableRun:
    """One table's checks in a verify run: Spark's queries submitted at once (``__init__``),
    DuckDB's answers and the file checks when finished."""

    def __init__(self, spark: "SparkSession", con: Any, pool: ThreadPoolExecutor, split: Split) -> None:
        self.split, self.con, self.d = split, con, split.source.definition
        self.bundles = bundles(self.d, spark_ident(self.d.name), _tagged(self.d))
        self.on_spark = [pool.submit(lambda q: spark.sql(q).toArrow(), b.sql) for b in self.bundles]
        self.files = ArchiveFiles(split.source, split.archive, con)
        self.ledger = pool.submit(ledger_check, spark, split.source, split.archive, self.files.day_rows)

    def finish(self) -> list[Check]:
        from lakehouse.query import duckdb as duck

        on_duck: list[pa.Table | Exception] = []
        for b in self.bundles:
            try:
                on_duck.append(self.con.execute(duck.transpile(b.sql)).fetch_arrow_table())
            except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
                on_duck.append(e)
        files = [self.files.sorted_check(), self.files.vector_check()]
        out = []
        for b, s, k in zip(self.bundles, self.on_spark, on_duck, strict=True):
            answer = _answer(s, k)
            out += [_compared(self.d.name, answer, part) for part in b.parts]
        return out + files + [self.ledger.result()]


class _SavedRun:
    """One saved query in a verify run: asked of Spark at once, of DuckDB when finished."""

    def __init__(self, spark: "SparkSession", pool: ThreadPoolExecutor, name: str, sql: str) -> None:
        from lakehouse.query import spark as spark_q

        self.name, self.sql = name, sql
        self.on_spark = pool.submit(spark_q.run_on_views, spark, sql)

    def finish(self, con: Any, tables: list[TableSource]) -> Check:
        from lakehouse.query import duckdb as duck
        from lakehouse.query.compare import compare_json

        name = f"saved query {self.name} gives the same answer on both engines"
        try:
            k = duck.run_on_views(con, tables, self.sql)
            s = self.on_spark.result()
        except LakehouseError as e:  # a refusal or an error on either engine: a saved query runs on both
            return Check("queries", name, False, str(e))
        cmp = compare_json(s, k)
        detail = "" if cmp.equal else f"engines differ: {cmp.detail}"
        return Check("queries", name, cmp.equal, detail, {"rows": s.num_rows})


def ledger_check(spark: "SparkSession", source: TableSource, snap: Snapshot,
                 day_rows: dict[Any, int] | None = None) -> Check:
    """Every archive day against the ledger row of its last write: rows and checksum of the
    data now (Spark, at the verified archive version), each row's arithmetic, and the chain
    from one run of a day to the next. Rows of cutoffs the ledger does not hold yet (a run
    under way, or a crash before its ledger write) are read from the archive commits.
    ``day_rows``: rows per archive day at ``snap`` when the caller has them (the Delta log's)."""
    import datetime as dt

    from lakehouse.archive import ledger, ledger_table
    from lakehouse.layout import layout

    d, paths = source.definition, source.paths
    name = "archive days match the ledger"
    have, have_erasure = ledger_table.ledger_place(paths)
    rows = ledger_table.read_rows(paths)
    pending, reached, _ = ledger_table.pending_rows(paths, have, snap.cutoff, have_erasure)
    rows += pending
    if day_rows is None:
        day_rows = {day: sum(f.rows for f in fs) for day, fs in layout(paths.archive, snap.version).by_day().items()}
    archived = {day: n for day, n in day_rows.items() if n}
    if have is None and not rows:
        detail = (f"{len(archived)} archive day(s) and no ledger yet (archived before the ledger); the next "
                  "archive run records what they hold as a baseline") if archived else ""
        return Check(d.name, name, True, detail, {"days": 0})
    problems: list[str] = []
    if snap.cutoff is not None and (have is None or have < snap.cutoff) and reached != snap.cutoff:
        problems.append(f"the ledger stops at cutoff {have}, the archive committed {snap.cutoff} and its "
                        "commit carries no figures; the next archive run records a baseline")
    latest = ledger.believed(rows, snap.cutoff)
    before = sorted(set(archived) - set(latest)) if have is None else []
    if before:  # the ledger's first write is still to come: days from before it are not in the books yet
        archived = {day: n for day, n in archived.items() if day in latest}
    by_columns: dict[str, list[dt.date]] = {}
    current_cols = ledger.columns_text([c for c, _ in ledger.stored_columns(d)])
    for day in sorted(set(latest) | set(archived)):
        r = latest.get(day)
        by_columns.setdefault(r.columns if r is not None else current_cols, []).append(day)
    data: dict[dt.date, ledger.Figures] = {}
    try:
        for cols, days in by_columns.items():
            data.update(ledger_table.archive_figures(spark, d, paths, snap.version, days, ledger.columns_of(cols)))
    except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
        return Check(d.name, name, False, f"could not run: {first_line(e)}")
    problems += ledger.data_problems(d.name, latest, data)
    for r in latest.values():
        problems += [f"{d.name}: ledger row of {p}" for p in ledger.row_problems(r)]
    problems += [f"{d.name}: {p}" for p in ledger.chain_problems(rows, snap.cutoff)]
    detail = summary(problems)
    if before and not problems:
        detail = (f"{len(before)} day(s) archived before the ledger are not in it yet; the next archive run "
                  "records what they hold as a baseline")
    return Check(d.name, name, not problems, detail,
                 {"days": len(latest), "ledger_rows": len(rows), "pending_rows": len(pending)})


def query_tables(sql: str) -> set[str]:
    """The table names a query reads (lower case); empty when it does not parse."""
    from sqlglot import exp

    from lakehouse.errors import QueryError
    from lakehouse.query.guard import parse

    try:
        trees = parse(sql)
    except QueryError:
        return set()
    return {t.name.lower() for tree in trees for t in tree.find_all(exp.Table) if t.name}
