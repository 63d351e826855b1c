"""``lakehouse verify``: the same checks on Spark and on DuckDB, compared, plus invariants.

Per table: rows per day, sums of every numeric column per day, distinct keys, min/max event
time per day, keys unique across days, every archive row older than the cutoff, every archive
day batch sorted, every vector file decoding to exactly its day's rows in order, and every
archive day holding the rows and checksum its last write recorded in the ledger (Spark: the
checksum is Spark's xxhash64). A check fails when the engines disagree or when an invariant does
not hold; the detail names it.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.archive import rle
from lakehouse.archive.vectors import batch_order, list_files
from lakehouse.archive.vectors import current as vectors_current
from lakehouse.archive.vectors import read as read_vector
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import first_line
from lakehouse.quality.invariants import SORTED, VECTORS
from lakehouse.query import TableSource
from lakehouse.query.compare import compare
from lakehouse.query.split import current
from lakehouse.sql import duck_ident, literal_body, spark_ident

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


SPARK_QUERIES_AT_ONCE = 4
"""Spark queries of the engine checks in flight at once."""


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


def _nulls_first_violation(cols: list[str], cur: str, prev: str) -> str:
    """SQL: the row ``cur`` sorts before ``prev`` (ascending, nulls first) on ``cols``."""
    terms = []
    for i in range(len(cols)):
        eq = " AND ".join(f"({cur}_{j} IS NOT DISTINCT FROM {prev}_{j})" for j in range(i)) or "TRUE"
        lt = f"(({cur}_{i} IS NULL AND {prev}_{i} IS NOT NULL) OR ({cur}_{i} IS NOT NULL AND {prev}_{i} IS NOT NULL AND {cur}_{i} < {prev}_{i}))"
        terms.append(f"({eq} AND {lt})")
    return " OR ".join(terms) or "FALSE"


def engine_queries(d: TableDefinition, archive_view: str, stored_view: str) -> dict[str, tuple[str, str | None]]:
    """Check name -> (Spark SQL over the split view ``d.name``, ``archive_view`` and
    ``stored_view`` (every stored row), invariant).

    The invariant, when given, is the column that must be 0 in every result row."""
    from lakehouse.quality.invariants import count_sql, row_invariants

    t = spark_ident(d.name)
    et = spark_ident(d.event_time)
    numeric = [c.name for c in d.columns if c.type.is_numeric]
    qs: dict[str, tuple[str, str | None]] = {
        "rows per day": (f"SELECT event_date, count(*) AS n FROM {t} GROUP BY event_date", None),
        "min/max event time per day": (
            f"SELECT event_date, min({et}) AS lo, max({et}) AS hi FROM {t} GROUP BY event_date", None),
    }
    if numeric:
        sums = ", ".join(f"sum(CAST({spark_ident(c)} AS DOUBLE)) AS {spark_ident('sum_' + c)}" for c in numeric)
        qs["sums of numeric columns per day"] = (f"SELECT event_date, {sums} FROM {t} GROUP BY event_date", None)
    if d.has_key:
        keys = ", ".join(spark_ident(k) for k in d.primary_key)
        qs["distinct keys"] = (f"SELECT count(*) AS n FROM (SELECT DISTINCT {keys} FROM {t}) k", None)
    for inv in row_invariants(d, t, archive_view, stored_view):
        qs[inv.name] = (count_sql(inv), "violations")
    return qs


def _invariant_detail(result: pa.Table, col: str) -> str:
    bad = [r for r in result.to_pylist() if r[col]]
    return f"{bad[0][col]} violation(s)" if bad else ""


class Verifier:
    """Runs the verify checks of one table on one pinned pair of live and archive snapshots."""

    def __init__(self, spark: "SparkSession", source: TableSource) -> None:
        self.spark = spark
        self.source = source
        self.d = source.definition
        self.days: set[dt.date] | None = None
        """Only these archive days in the file checks (``check --day``); None: all."""
        # One pair of snapshots (live first) for every check and both engines.
        self.split = current(source)
        self.live, self.archive = self.split.live, self.split.archive

    def run(self) -> list[Check]:
        """Every check: both engines compared, archive days sorted, vector files, the ledger."""
        checks = self._engine_checks()
        checks += self.sorted_checks()
        checks += self.vector_checks()
        checks += self.ledger_checks()
        return checks

    # -- both engines -------------------------------------------------------------------------

    def _engine_checks(self) -> list[Check]:
        from pyspark.sql import functions as F

        from lakehouse.query import duckdb as duck
        from lakehouse.query import spark as spark_q

        d, p = self.d, self.source.paths
        archive_view = f"{d.name}__archive"
        arch_snap = self.split.archive
        # Spark views
        spark_q.frame(self.spark, self.split).createOrReplaceTempView(d.name)
        cutoff = arch_snap.cutoff
        arch = self.spark.read.format("delta").option("versionAsOf", arch_snap.version).load(p.archive)
        at = self.split.cutoff_time
        cut = F.lit(at).cast("timestamp") if at is not None else F.lit(None).cast("timestamp")
        arch.select(*d.visible_columns).withColumn("cutoff_ts", cut).createOrReplaceTempView(archive_view)
        stored_view = f"{d.name}__stored"
        live = self.spark.read.format("delta").option("versionAsOf", self.split.live.version).load(p.live)
        live.select(*d.visible_columns).unionByName(arch.select(*d.visible_columns)).createOrReplaceTempView(stored_view)
        # DuckDB views on the same snapshots
        con = duck.connect()
        con.execute(f"CREATE VIEW {duck_ident(d.name)} AS {duck.view_sql(self.split)}")
        cols = ", ".join(duck_ident(c) for c in d.visible_columns)
        cut_sql = f"to_timestamp({cutoff})" if cutoff is not None else "CAST(NULL AS TIMESTAMPTZ)"
        con.execute(
            f"CREATE VIEW {duck_ident(archive_view)} AS SELECT {cols}, {cut_sql} AS cutoff_ts "
            f"FROM delta_scan('{literal_body(p.archive)}', version => {arch_snap.version})"
        )
        con.execute(
            f"CREATE VIEW {duck_ident(stored_view)} AS SELECT {cols} FROM delta_scan('{literal_body(p.live)}', "
            f"version => {self.split.live.version}) UNION ALL BY NAME SELECT {cols} FROM "
            f"delta_scan('{literal_body(p.archive)}', version => {arch_snap.version})"
        )
        out = []
        queries = engine_queries(d, archive_view, stored_view)
        # Spark's answers are asked for all at once (each small query is mostly fixed latency,
        # a Connect round trip and a job's start) while DuckDB answers here in turn
        with ThreadPoolExecutor(max_workers=SPARK_QUERIES_AT_ONCE) as pool:
            on_spark = {name: pool.submit(lambda q: self.spark.sql(q).toArrow(), sql)
                        for name, (sql, _) in queries.items()}
            on_duck: dict[str, Any] = {}
            for name, (sql, _) in queries.items():
                try:
                    on_duck[name] = con.execute(duck.transpile(sql)).fetch_arrow_table()
                except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
                    on_duck[name] = e
        for name, (_, invariant) in queries.items():
            try:
                s = on_spark[name].result()
                k = on_duck[name]
                if isinstance(k, Exception):
                    raise k
            except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
                out.append(Check(d.name, name, False, f"could not run: {first_line(e)}"))
                continue
            cmp = compare(s, k)
            detail = "" if cmp.equal else f"engines differ: {cmp.detail}"
            if cmp.equal and invariant:
                detail = _invariant_detail(s, invariant)
            out.append(Check(d.name, name, not detail, detail, {"rows": s.num_rows}))
        return out

    # -- archive files ---------------------------------------------------------------------------

    def _day_files(self) -> tuple[dict[dt.date, list[str]], int | None]:
        from lakehouse import delta_log

        snap = self.archive
        actions = delta_log.add_actions(self.source.paths.archive, snap.version)
        out: dict[dt.date, list[str]] = {}
        for row in actions.select(["path", f"partition.{PARTITION_COLUMN}"]).to_pylist():
            path = delta_log.file_uri(self.source.paths.archive, row["path"])
            day = row[f"partition.{PARTITION_COLUMN}"]
            if self.days is None or day in self.days:
                out.setdefault(day, []).append(path)
        return out, snap.cutoff

    def _vector_state(self) -> tuple[dict[tuple[str, dt.date], Any], dict[dt.date, str]]:
        """The current vector files (one run per day, for the snapshot's cutoff) and, per day
        written under other settings than today's, why (those days are skipped, not failed: the
        next archive run re-sorts and re-encodes them)."""
        if hasattr(self, "_vstate"):
            return self._vstate
        from lakehouse.archive.reader import current_encoding
        from lakehouse.archive.vectors import stale_days

        files, cutoff = self._day_files()
        listed, _ = list_files(self.source.paths.vectors)
        current = vectors_current(listed, cutoff)
        stale = stale_days(self.source.paths.vectors, current_encoding(self.d), cutoff, files)
        self._vstate: tuple[dict[tuple[str, dt.date], Any], dict[dt.date, str]] = (current, stale)
        return self._vstate

    def sorted_checks(self) -> list[Check]:
        """One check: every archive day's files hold their rows in the sort order (days written under
        other settings are skipped until re-sorted)."""
        files, _ = self._day_files()
        _, stale = self._vector_state()
        bad: list[str] = []
        for day, paths in sorted(files.items()):
            if day in stale and stale[day] != "no vector files":
                continue  # sorted under the old settings until re-encoded
            problem = unsorted_day(self.d, paths)
            if problem:
                bad.append(f"day {day}: {problem}")
        order_all = [c for c in self.d.sort_order if c in self.d.column_names]
        detail = (bad[0] + f" (sorted by {', '.join(order_all)} expected"
                  + (f"; and {len(bad) - 1} more days)" if len(bad) > 1 else ")")) if bad else _skipped(stale)
        return [Check(self.d.name, SORTED, not bad, detail,
                      {"days": len(files), "files": sum(len(v) for v in files.values()), "problems": bad})]

    def ledger_checks(self) -> list[Check]:
        """Every archive day against the ledger row of its last write: rows and checksum of the
        data now (Spark, at the verified archive version), each row's arithmetic, and the chain
        from one run of a day to the next. Rows of cutoffs the ledger does not hold yet (a run
        under way, or a crash before its ledger write) are read from the archive commits."""
        from lakehouse.archive import ledger, ledger_table
        from lakehouse.layout import layout

        d, paths, snap = self.d, self.source.paths, self.archive
        name = "archive days match the ledger"
        have = ledger_table.ledger_cutoff(paths)
        rows = ledger_table.read_rows(paths)
        pending, reached = ledger_table.pending_rows(paths, have, snap.cutoff)
        rows += pending
        archived = {day: sum(f.rows for f in fs) for day, fs in layout(paths.archive, snap.version).by_day().items()}
        archived = {day: n for day, n in archived.items() if n}
        if have is None and not rows:
            detail = (f"{len(archived)} archive day(s) and no ledger yet (archived before the ledger); the next "
                      "archive run records what they hold as a baseline") if archived else ""
            return [Check(d.name, name, True, detail, {"days": 0})]
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
                data.update(ledger_table.archive_figures(self.spark, d, paths, snap.version, days,
                                                         ledger.columns_of(cols)))
        except Exception as e:  # noqa: BLE001 - a failing check is a result, not a crash
            return [Check(d.name, name, False, f"could not run: {first_line(e)}")]
        problems += ledger.data_problems(d.name, latest, data)
        for r in latest.values():
            problems += [f"{d.name}: ledger row of {p}" for p in ledger.row_problems(r)]
        problems += [f"{d.name}: {p}" for p in ledger.chain_problems(rows, snap.cutoff)]
        detail = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") if problems else ""
        if before and not problems:
            detail = (f"{len(before)} day(s) archived before the ledger are not in it yet; the next archive run "
                      "records what they hold as a baseline")
        return [Check(d.name, name, not problems, detail,
                      {"days": len(latest), "ledger_rows": len(rows), "pending_rows": len(pending)})]

    def vector_checks(self) -> list[Check]:
        """One check: every vector file of the current runs decodes to exactly its day's column, in
        record order."""
        from lakehouse.archive.reader import current_encoding

        d = self.d
        files, cutoff = self._day_files()
        wanted = list(current_encoding(d).vector_columns)
        wanted = [c for c in d.column_names if c in wanted]
        if not wanted or cutoff is None:
            return [Check(d.name, VECTORS, True, "", {"files": 0})]
        current, stale = self._vector_state()
        problems: list[str] = []
        checked = 0
        for day, paths in sorted(files.items()):
            if day in stale:
                continue  # written under other settings: skipped (reason in the detail)
            parts = []
            for p in batch_order(paths):
                t = pq.read_table(p, columns=[c for c in wanted if c in pq.read_schema(p).names])
                for c in wanted:  # a column added after the file was written is null in it
                    if c not in t.column_names:
                        t = t.append_column(c, pa.nulls(t.num_rows, d.column(c).type.arrow()))
                parts.append(t.select(wanted))
            rows = pa.concat_tables(parts, promote_options="permissive")  # writers differ in nullability
            for col in wanted:
                f = current.get((col, day))
                if f is None:
                    problems.append(f"no vector file for {col} on {day}")
                    continue
                checked += 1
                try:
                    table = read_vector(f.path)
                    if col in d.archive.sort_columns:
                        issues = rle.check_runs(table)
                        if issues:
                            problems.append(f"{f.path}: {issues[0]}")
                            continue
                        values = rle.decode(table)
                    else:
                        values = table.column("value").combine_chunks()
                except Exception as e:  # noqa: BLE001
                    problems.append(f"{f.path}: unreadable: {e}")
                    continue
                expect = rows.column(col).combine_chunks().cast(values.type)
                if len(values) != len(expect):
                    problems.append(f"{f.path}: {len(values)} records, the archive day has {len(expect)}")
                elif not values.equals(expect):
                    i = next((i for i in range(len(values)) if values[i] != expect[i] and not (
                        values[i].as_py() is None and expect[i].as_py() is None) and not _both_nan(values[i], expect[i])), None)
                    if i is not None:
                        problems.append(f"{f.path}: record {i} is {values[i].as_py()!r}, the archive day has {expect[i].as_py()!r}")
        detail = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") if problems else _skipped(stale)
        return [Check(d.name, VECTORS, not problems, detail,
                      {"files": checked, "skipped_days": len(stale), "problems": problems})]


def unsorted_day(d: TableDefinition, paths: list[str]) -> str:
    """Why the files of an archive day, read in batch order (``vectors.batch_order``), are not
    one batch sorted by the archive's order; "" when they are."""
    from lakehouse.query import duckdb as duck

    paths = batch_order(paths)
    if not paths:
        return ""
    have = set(pq.read_schema(paths[0]).names)  # columns added later are null in old files
    for p in paths[1:]:
        have &= set(pq.read_schema(p).names)
    order = [c for c in d.sort_order if c in d.column_names and c in have]
    if not order:
        return ""
    files = ", ".join(f"'{literal_body(p)}'" for p in paths)
    rank = "CASE filename " + " ".join(f"WHEN '{literal_body(p)}' THEN {i}" for i, p in enumerate(paths)) + " END"
    cur = ", ".join(f"{duck_ident(c)} AS cur_{i}" for i, c in enumerate(order))
    prev = ", ".join(f"lag({duck_ident(c)}) OVER (ORDER BY {rank}, file_row_number) AS prev_{i}"
                     for i, c in enumerate(order))
    cond = _nulls_first_violation(order, "cur", "prev")
    sql = (f"SELECT {rank} AS f, file_row_number FROM (SELECT filename, file_row_number, {cur}, {prev} FROM "
           f"read_parquet([{files}], filename = true, file_row_number = true, union_by_name = true)) "
           f"WHERE NOT ({rank} = 0 AND file_row_number = 0) AND ({cond}) LIMIT 1")
    row = duck.connect().execute(sql).fetchone()
    if row is None:
        return ""
    where = f"{paths[int(row[0])].rsplit('/', 1)[-1]} row {int(row[1])}"
    return f"not sorted at {where}" + (" (the first row of a file sorts before the last row of the one before)"
                                       if int(row[1]) == 0 else "")


def _skipped(stale: dict[dt.date, str]) -> str:
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



# -- saved queries ------------------------------------------------------------------------------


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


def saved_query_checks(lh: Any, table: str | None = None) -> list[Check]:
    """One check per saved query (queries/*.sql): both engines print the same JSON.

    With ``table``, only the saved queries that read it. A refusal or an error on either engine
    fails the check too: a saved query is meant to run on both."""
    from lakehouse.errors import LakehouseError

    out = []
    for q in lh.saved_queries():
        if table is not None and table.lower() not in query_tables(q.sql):
            continue
        name = f"saved query {q.path.name} gives the same answer on both engines"
        try:
            s, _, cmp = lh.compare_engines(q.sql)
        except LakehouseError as e:
            out.append(Check("queries", name, False, str(e)))
            continue
        detail = "" if cmp.equal else f"engines differ: {cmp.detail}"
        out.append(Check("queries", name, cmp.equal, detail, {"rows": s.num_rows}))
    return out
