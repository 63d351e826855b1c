"""Running SQL on Spark with every table registered as a temporary split view.

A user's statement passes the read-only guard (sqlglot, lakehouse.query.guard) and then Spark's
own parser: the plan Spark parses (``EXPLAIN EXTENDED``, which runs nothing, on a classic or a
Spark Connect session alike) must be exactly one statement of the kind the guard allowed, with no
command in it, reading only plain table names; the same text is then run, parsed again the same
way. So a difference between the two parsers (comments, quoting, escapes) cannot run anything
the guard did not see. Spark runs
the user's text, not sqlglot's regeneration of it: regeneration is lossy (sqlglot 30 turns
``percentile_cont(...) WITHIN GROUP`` into ``percentile_approx``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.archive.state import current_snapshot
from lakehouse.errors import QueryError, first_line
from lakehouse.query import TableSource, guard
from lakehouse.query.commands import is_command
from lakehouse.query.split import Split

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.query.asof import AsOf


def frame(spark: SparkSession, split: Split) -> DataFrame:
    """Render the split view (lakehouse.query.split) as a Spark DataFrame on its pinned versions."""
    from pyspark.sql import functions as F

    def side(path: str, version: int, absent: frozenset[str]) -> tuple[DataFrame, list[Any]]:
        df = spark.read.format("delta").option("versionAsOf", version).load(path)
        return df, [F.lit(None).cast(split.column_type(c).spark_ddl()).alias(c) if c in absent else c
                    for c in split.columns]

    live_df, live_cols = side(split.source.paths.live, split.live.version, split.live_absent)
    arch_df, arch_cols = side(split.source.paths.archive, split.archive.version, split.archive_absent)
    if split.cutoff_time is not None:
        live_df = live_df.where(in_split(split))
    return arch_df.select(*arch_cols).unionByName(live_df.select(*live_cols))


def in_split(split: Split) -> Any:
    """A live row is in the split view (at or after the cutoff: its day, then its event time;
    every live row before the first run), as a Spark column."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    at = split.cutoff_time
    if at is None:
        return F.lit(True)
    return (F.col(PARTITION_COLUMN) >= F.lit(at.date())) & (F.col(split.event_time) >= F.lit(at).cast("timestamp"))


def stored_frames(spark: SparkSession, split: Split, day: Any = None) -> tuple[DataFrame, DataFrame]:
    """Every stored row of the split's pinned versions, as (live, archive) with the table's
    visible columns (live rows below the cutoff included, unlike the split view); ``day``: only
    that UTC day's."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    cols = split.source.definition.visible_columns

    def read(path: str, version: int) -> DataFrame:
        df = spark.read.format("delta").option("versionAsOf", version).load(path).select(*cols)
        return df.where(F.col(PARTITION_COLUMN) == F.lit(day)) if day else df

    return read(split.source.paths.live, split.live.version), read(split.source.paths.archive, split.archive.version)


def with_cutoff(archive: DataFrame, split: Split) -> DataFrame:
    """Archive rows with the committed cutoff as ``cutoff_ts`` (null before the first run): the
    ``archive`` view of the invariants (lakehouse.quality.invariants)."""
    from pyspark.sql import functions as F

    at = split.cutoff_time
    return archive.withColumn("cutoff_ts", F.lit(at).cast("timestamp") if at is not None else F.lit(None).cast("timestamp"))


def tagged(split: Split, live: DataFrame | None, archive: DataFrame | None) -> DataFrame:
    """The invariants' ``tagged`` view (lakehouse.quality.invariants) of stored ``live`` and
    ``archive`` rows (None: that table is not in scope): every row once, with whether the rows in
    scope hold it (a live row beside the archive: when it is in the split view), whether it is an
    archive row, and the cutoff as ``cutoff_ts``."""
    from pyspark.sql import functions as F

    from lakehouse.quality.invariants import IN_ARCHIVE, IN_VIEW

    parts = []
    if archive is not None:
        parts.append(with_cutoff(archive, split).withColumns({IN_VIEW: F.lit(True), IN_ARCHIVE: F.lit(True)}))
    if live is not None:
        in_view = F.coalesce(in_split(split), F.lit(False)) if archive is not None else F.lit(True)
        parts.append(with_cutoff(live, split).withColumns({IN_VIEW: in_view, IN_ARCHIVE: F.lit(False)}))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def current(spark: SparkSession, t: TableSource) -> Split:
    """The split view on the latest versions as Spark's Delta log sees them (live read first)."""
    live = current_snapshot(t.paths.live)
    return Split(t, live, current_snapshot(t.paths.archive))


def register_views(spark: SparkSession, tables: list[TableSource], as_of: AsOf | None = None,
                   names: set[str] | None = None) -> set[str]:
    """(Re)create one temporary split view per table: on the tables' current snapshots, or on
    the versions ``as_of`` pinned (then only those: other tables' views are dropped, so nothing
    can read a view left by an earlier query). ``names``: only the tables (and the watermarks
    view) of these names, those a statement mentions. Returns the names of the views created."""
    from lakehouse.stream.status import WATERMARK_VIEW, watermarks

    if as_of is None:
        chosen = [t for t in tables if names is None or t.name.lower() in names]
        marks = watermarks(tables) if names is None or WATERMARK_VIEW in names else None
        register_splits(spark, [current(spark, t) for t in chosen], marks)
        return {t.name.lower() for t in chosen} | ({WATERMARK_VIEW} if marks is not None else set())
    pinned = {s.name for s in as_of.splits}
    for name in [t.name for t in tables if t.name not in pinned] + [WATERMARK_VIEW]:
        spark.catalog.dropTempView(name)
    register_splits(spark, list(as_of.splits), None)
    return {s.name.lower() for s in as_of.splits}


def register_splits(spark: SparkSession, splits: list[Split], watermarks: pa.Table | None) -> None:
    """One temporary view per split view, on its pinned versions, and the watermarks view
    (``lakehouse.stream.engine.watermarks``) when given."""
    from lakehouse.stream.status import WATERMARK_VIEW

    try:
        for s in splits:
            frame(spark, s).createOrReplaceTempView(s.name)
        if watermarks is not None:
            spark.createDataFrame(watermarks).createOrReplaceTempView(WATERMARK_VIEW)
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {first_line(e)}") from None


def run(spark: SparkSession, tables: list[TableSource], sql: str, as_of: AsOf | None = None) -> pa.Table:
    """Run one read-only Spark SQL statement (on the moment ``as_of`` pinned); the result as Arrow."""
    from lakehouse.stream.status import WATERMARK_VIEW

    checked = guard.check(sql)
    names = guard.names_read(checked)

    def register(wanted: set[str] | None) -> set[str]:
        try:
            return register_views(spark, tables, as_of, wanted)
        except QueryError:
            raise
        except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
            raise QueryError(f"spark: {first_line(e)}") from None

    registered = register(names)
    known = {t.name.lower() for t in tables} | {WATERMARK_VIEW}

    def complete(tree: str) -> None:
        """Spark's parse names a project table the guard's did not: register every view (so
        no view of an earlier query, on older versions, can be read)."""
        if as_of is None and names is not None and (relations(tree) & known) - registered:
            register(None)

    return run_on_views(spark, sql, checked, complete)


def run_groups(spark: SparkSession, sql: str, groups: pa.Table, types: list[tuple[str, str]]) -> pa.Table:
    """Run a query rewritten over a split view's groups (lakehouse.query.shape, ``sql`` reads
    ``GROUP_VIEW``) on Spark; ``types``: the groups' Spark types."""
    from lakehouse.query.shape import GROUP_VIEW
    from lakehouse.sql import spark_ident

    try:
        spark.createDataFrame(groups, schema=", ".join(f"{spark_ident(n)} {t}" for n, t in types)
                              ).createOrReplaceTempView(GROUP_VIEW)
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {first_line(e)}") from None
    try:
        return run_on_views(spark, sql)
    finally:
        spark.catalog.dropTempView(GROUP_VIEW)


def run_on_views(spark: SparkSession, sql: str, checked: guard.Checked | None = None,
                 parsed: Callable[[str], None] | None = None) -> pa.Table:
    """Run one read-only Spark SQL statement on the views registered already (``register_splits``);
    ``parsed`` is called with Spark's parse of it, once confirmed, before it runs."""
    checked = checked or guard.check(sql)
    try:
        tree = parsed_plan(spark, sql, checked.kind == "query")
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {first_line(e)}") from None
    confirm(tree, checked)
    if parsed is not None:
        parsed(tree)
    try:
        return spark.sql(sql).toArrow()
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {first_line(e)}") from None


def parsed_plan(spark: SparkSession, sql: str, query: bool = False) -> str:
    """The tree of the plan Spark's parser makes of ``sql``, as text, read without running it.
    A classic session asks Spark's own parser (no planning: milliseconds); a Spark Connect
    session, which runs a command at once and has no parse-only request, reads the parsed plan
    out of ``EXPLAIN EXTENDED`` (the same tree: Spark prints it with the same ``treeString``).

    There a ``query`` (the guard found one) is explained as ``SELECT * FROM (<sql>) LIMIT 0``
    first: Spark's optimizer turns a limit of 0 into an empty relation before it plans any scan,
    so the explanation costs no file listing or Delta file skipping (the query plans them once
    more when it runs). The wrapper's tree holds everything Spark parsed of ``sql`` and is
    checked (``confirm``) as a whole; a command, a second statement or a comment left open
    cannot stand inside the parentheses, and what does not parse so is explained as it stands."""
    parser = _parser(spark)
    if parser is not None:
        try:
            return str(parser.parsePlan(sql).treeString()).strip("\n")
        except Exception as e:  # noqa: BLE001 - Spark could not parse it: its message's first line
            raise QueryError(f"spark: {first_line(e)}") from None
    if query:
        try:
            return explained_plan(spark, f"SELECT * FROM (\n{sql}\n) LIMIT 0")
        except Exception:  # noqa: BLE001 - not a query inside parentheses: explained as it stands
            pass
    return explained_plan(spark, sql)


def explained_plan(spark: SparkSession, sql: str) -> str:
    """The parsed plan of ``sql`` as ``EXPLAIN EXTENDED`` prints it (any kind of session)."""
    text = str(spark.sql(f"EXPLAIN EXTENDED {sql}").collect()[0][0])
    head, sep, rest = text.partition(_PARSED)
    if not sep:  # Spark could not parse it: its message stands in the output
        raise QueryError(f"spark: {first_line(text)}")
    return rest.split(_ANALYZED, 1)[0].strip("\n")


def _parser(spark: SparkSession) -> Any:
    """Spark's SQL parser of a classic session (None on Spark Connect)."""
    jss = getattr(spark, "_jsparkSession", None)
    return None if jss is None else jss.sessionState().sqlParser()


_PARSED = "== Parsed Logical Plan ==\n"
_ANALYZED = "\n== Analyzed Logical Plan =="
_PLAN_KINDS = {"show": ("Show",), "describe": ("Describe",), "explain": ("ExplainCommand",)}
_NODE = re.compile(r"^[\s:|+-]*'?(\w+)", re.MULTILINE)
_RELATION = re.compile(r"'UnresolvedRelation \[(.*?)\], ")
_TVF = re.compile(r"'UnresolvedTableValuedFunction \[(.*?)\], ")


def relations(tree: str) -> set[str]:
    """The (lower-case) names of the relations in Spark's parse (``parsed_plan``)."""
    return {parts.strip("`").lower() for parts in _RELATION.findall(tree)}


def confirm(tree: str, checked: guard.Checked) -> None:
    """Spark's parse (``tree``, from ``parsed_plan``) agrees with the guard: the statement
    kind, no command anywhere in a query, plain table names, TVFs. Spark parses the same text
    with the same settings again when it runs it, so what runs is what was checked."""
    nodes = _NODE.findall(tree)
    name = nodes[0] if nodes else "an empty plan"
    if checked.kind == "query":
        for node in nodes:
            if is_command(node):
                raise guard.refuse(f"{node} (as Spark parses it)")
    elif not name.startswith(_PLAN_KINDS[checked.kind]):
        raise guard.refuse(f"{name} (as Spark parses it)")
    # The tree includes CTE definitions and subqueries.
    if "ScriptTransformation" in tree:
        raise guard.refuse("TRANSFORM ... USING (as Spark parses it)", "it runs an external script")
    for parts in _RELATION.findall(tree):
        if ", " in parts:
            raise guard.refuse(f"path-qualified table {parts} (as Spark parses it)",
                               "queries read only the project's tables, by name")
    for fn in _TVF.findall(tree):
        if fn.lower() not in guard.TABLE_FUNCTIONS:
            raise guard.refuse(f"table function {fn}() (as Spark parses it)",
                               "queries read only the project's tables")
