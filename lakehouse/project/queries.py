"""The facade's queries: SQL on either engine, the run-length path, frames and views for a
user's Spark session or DuckDB connection, moments (``--as-of``) and saved queries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lakehouse.errors import ConfigError, QueryError
from lakehouse.query import compare as compare_mod
from lakehouse.query import sources
from lakehouse.settings import Settings
from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.definitions import TableDefinition
    from lakehouse.query import TableSource
    from lakehouse.query.asof import AsOf
    from lakehouse.query.runs import Plan as RunsPlan

Engine = Literal["spark", "duckdb"]


@dataclass(frozen=True)
class SavedQuery:
    """A saved query of the project: ``queries/<name>.sql``."""

    name: str
    path: Path
    sql: str


class Queries:
    """The query methods of ``lakehouse.project.Lakehouse``."""

    settings: Settings

    def spark(self) -> SparkSession:
        """The facade's session (``Lakehouse.spark``)."""
        raise NotImplementedError

    def definitions(self) -> dict[str, TableDefinition]:
        """The facade's definitions (``Lakehouse.definitions``)."""
        raise NotImplementedError

    def definition(self, table: str) -> TableDefinition:
        """The facade's definition of ``table`` (``Lakehouse.definition``)."""
        raise NotImplementedError

    def query(self, sql: str, engine: Engine = "spark", as_of: Any = None, runs: bool = True) -> pa.Table:
        """Run SQL over all tables on one engine. ``as_of``: the split views of a past moment,
        an archive version (int, when the SQL reads one table), a timestamp (ISO 8601 string
        or datetime; UTC without an offset) or what ``self.as_of`` resolved. ``runs``: answer
        group counts and sums from the archive's run lengths where they can (``explain``)."""
        from lakehouse.query.asof import AsOf

        tables = self._query_tables(sql)
        pinned = None
        if as_of is not None:
            pinned = as_of if isinstance(as_of, AsOf) else self.as_of(sql, as_of)
        elif runs and engine in ("spark", "duckdb"):
            plan = self.explain(sql, engine, tables=tables)
            if plan.shape is not None and plan.groups is not None:
                if engine == "duckdb":
                    from lakehouse.query import duckdb as duck

                    return duck.run_groups(tables, plan.shape.sql, plan.groups.table, plan.groups.types)
                from lakehouse.query import spark as spark_engine

                return spark_engine.run_groups(self.spark(), plan.shape.sql, plan.groups.table, plan.groups.types)
        if engine == "spark":
            from lakehouse.query import spark as spark_engine

            return spark_engine.run(self.spark(), tables, sql, pinned)
        if engine == "duckdb":
            from lakehouse.query import duckdb as duck

            return duck.run(tables, sql, as_of=pinned)
        raise QueryError(f"unknown engine {engine!r} (expected spark or duckdb)")

    def frame(self, table: str, as_of: Any = None) -> DataFrame:
        """``table``'s split view as a lazy Spark DataFrame on the project's session (never
        collected): the archive and live's rows at or after the cutoff, on the tables' current
        versions or those of ``as_of`` (as ``query`` takes it). Filters on event_date prune the
        archive's days (partition filters in the plan), on the event time and the sort columns
        its files (Delta's file statistics)."""
        from lakehouse.query import spark as spark_engine

        t = self._source(table)
        spark = self.spark()
        if as_of is None:
            return spark_engine.frame(spark, spark_engine.current(spark, t))
        pinned = self.as_of(f"SELECT * FROM {spark_ident(t.name)}", as_of)
        return spark_engine.frame(spark, next(s for s in pinned.splits if s.name == t.name))

    def register(self, spark: SparkSession | None = None) -> list[str]:
        """Every table's split view (and ``lakehouse_watermarks``) as a temporary view of a Spark
        session (default: the project's), so ``spark.sql("SELECT ... FROM trips")`` reads it as
        ``query`` does; the views' names. A session other than the project's is checked for
        Delta Lake and UTC first (one line naming what it lacks). Views pin the tables' versions
        of now: register again to see later changes."""
        from lakehouse.query import spark as spark_engine
        from lakehouse.spark.session import delta_problems

        spark = spark or self.spark()
        problems = delta_problems(spark)
        if problems:
            raise ConfigError(f"the SparkSession given cannot read lakehouse's tables: {'; '.join(problems)}")
        return sorted(spark_engine.register_views(spark, sources(self.settings.warehouse, self.definitions())))

    def register_duckdb(self, con: Any) -> list[str]:
        """Every table's split view (and ``lakehouse_watermarks``) as a view of a user's DuckDB
        connection, pinned as ``query --engine duckdb`` pins them; the views' names. The
        connection gets the reader's rules (``duckdb.prepare_user``: the delta extension from the
        package, TimeZone UTC, lakehouse's ``lh_*`` macros). SQL written there is DuckDB's; Spark
        SQL gets Spark's semantics through ``query`` (or ``lakehouse.query.duckdb.translate``)."""
        from lakehouse.query import duckdb as duck
        from lakehouse.stream.status import WATERMARK_VIEW

        tables = sources(self.settings.warehouse, self.definitions())
        duck.prepare_user(con)
        duck.register_views(con, tables)
        return sorted([t.name for t in tables] + [WATERMARK_VIEW])

    def _source(self, table: str) -> TableSource:
        """The created table ``table`` (TableNotFound when it is not defined or not created yet)."""
        from lakehouse.errors import TableNotFound

        self.definition(table)
        for t in sources(self.settings.warehouse, self.definitions()):
            if t.name == table:
                return t
        raise TableNotFound(f"table {table!r} is not created in the warehouse yet; run `lakehouse migrate`")

    def explain(self, sql: str, engine: Engine = "duckdb", tables: list[TableSource] | None = None) -> RunsPlan:
        """How ``query`` answers ``sql`` (no Spark): from the archive's run lengths (the groups
        read, the rewritten SQL) or from the data files, and why (lakehouse.query.runs.Plan)."""
        from lakehouse.query.runs import plan

        return plan(tables if tables is not None else self._query_tables(sql), sql, engine)

    def _query_tables(self, sql: str) -> list[TableSource]:
        """The tables a query can read; a query reading a defined table not created yet is refused."""
        definitions = self.definitions()
        tables = sources(self.settings.warehouse, definitions)
        if len(tables) < len(definitions):
            _refuse_uncreated(sql, set(definitions) - {t.name for t in tables})
        return tables

    def as_of(self, sql: str, value: Any) -> AsOf:
        """The moment ``value`` names (archive version or timestamp) and the versions of every
        table ``sql`` reads at it (a lakehouse.query.asof.AsOf; no Spark)."""
        from lakehouse.query.asof import resolve

        return resolve(sources(self.settings.warehouse, self.definitions()), sql, value)

    def compare_engines(self, sql: str) -> tuple[pa.Table, pa.Table, compare_mod.Comparison]:
        """Run SQL on both engines, on the same pinned snapshots of every table (live read first)
        and the same watermarks, and compare the JSON they print (see compare.compare_json)."""
        from lakehouse.query import duckdb as duck
        from lakehouse.query import spark as spark_engine
        from lakehouse.query.split import current
        from lakehouse.stream.status import watermarks

        definitions = self.definitions()
        tables = sources(self.settings.warehouse, definitions)
        if len(tables) < len(definitions):
            _refuse_uncreated(sql, set(definitions) - {t.name for t in tables})
        splits, marks = [current(t) for t in tables], watermarks(tables)
        con = duck.connect()
        duck.register_splits(con, splits, marks)
        duck.sandbox(con, tables)
        spark = self.spark()
        spark_engine.register_splits(spark, splits, marks)
        s = spark_engine.run_on_views(spark, sql)
        d = duck.run_on_views(con, tables, sql)
        return s, d, compare_mod.compare_json(s, d)

    def saved_queries(self) -> list[SavedQuery]:
        """The project's saved queries (queries/*.sql), by name."""
        qdir = self.settings.queries_dir
        if not qdir.is_dir():
            return []
        return [SavedQuery(p.stem, p, p.read_text(encoding="utf-8")) for p in sorted(qdir.glob("*.sql"))]


def _refuse_uncreated(sql: str, uncreated: set[str]) -> None:
    """A query reading a table that is defined but not created yet (before ``migrate``) is
    refused with what to do, on both engines, as ``load`` refuses it."""
    from lakehouse.errors import TableNotFound
    from lakehouse.query import guard

    read = sorted(guard.tables_read(guard.check(sql)) & uncreated)
    if read:
        raise TableNotFound(f"table {read[0]!r} is not created in the warehouse yet; run `lakehouse migrate`")

