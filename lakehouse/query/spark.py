"""Running SQL on Spark with every table registered as a temporary split view.

A user's statement passes the read-only guard (sqlglot, lakehouse.query.guard) and then Spark's
own parser: the plan Spark parsed must be exactly one statement of the kind the guard allowed,
reading only plain table names, and that very plan is what runs. So a difference between the
two parsers (comments, quoting, escapes) cannot run anything the guard did not see. Spark runs
the user's text, not sqlglot's regeneration of it: regeneration is lossy (sqlglot 30 turns
``percentile_cont(...) WITHIN GROUP`` into ``percentile_approx``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.archive.plan import cutoff_time
from lakehouse.archive.state import Snapshot, spark_snapshot
from lakehouse.errors import QueryError
from lakehouse.query import TableSource, guard

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def split_frame(spark: SparkSession, t: TableSource, live: Snapshot | None = None,
                archive: Snapshot | None = None) -> tuple[DataFrame, Snapshot, Snapshot]:
    """archive UNION ALL live-at-or-after-cutoff, from pinned snapshots (live read first)."""
    from pyspark.sql import functions as F

    from lakehouse.definitions import PARTITION_COLUMN

    live = live or spark_snapshot(spark, t.paths.live)
    archive = archive or spark_snapshot(spark, t.paths.archive)
    cols = t.definition.visible_columns
    live_df = spark.read.format("delta").option("versionAsOf", live.version).load(t.paths.live)
    arch_df = spark.read.format("delta").option("versionAsOf", archive.version).load(t.paths.archive)
    if archive.cutoff is not None:
        at = cutoff_time(archive.cutoff)
        live_df = live_df.where(F.col(PARTITION_COLUMN) >= F.lit(at.date())).where(
            F.col(t.definition.event_time) >= F.lit(at).cast("timestamp"))
    return arch_df.select(*cols).unionByName(live_df.select(*cols)), live, archive


def register_views(spark: SparkSession, tables: list[TableSource]) -> None:
    """(Re)create one temporary split view per table, on the tables' current snapshots."""
    from lakehouse.stream.engine import WATERMARK_VIEW, watermarks

    for t in tables:
        split_frame(spark, t)[0].createOrReplaceTempView(t.name)
    spark.createDataFrame(watermarks(tables)).createOrReplaceTempView(WATERMARK_VIEW)


def run(spark: SparkSession, tables: list[TableSource], sql: str) -> pa.Table:
    """Run one read-only Spark SQL statement; the result as Arrow."""
    checked = guard.check(sql)
    register_views(spark, tables)
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {_first_line(e)}") from None
    confirm(spark, plan, checked)
    try:
        return _dataframe(spark, plan).toArrow()
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"spark: {_first_line(e)}") from None


_PLAN_KINDS = {"show": ("Show",), "describe": ("Describe",), "explain": ("ExplainCommand",)}
_RELATION = re.compile(r"'UnresolvedRelation \[(.*?)\], ")
_TVF = re.compile(r"'UnresolvedTableValuedFunction \[(.*?)\], ")


def confirm(spark: SparkSession, plan: Any, checked: guard.Checked) -> None:
    """Spark's parse agrees with the guard: the statement kind, plain table names, TVFs."""
    jvm: Any = spark._jvm
    name = plan.getClass().getSimpleName()
    if checked.kind == "query":
        for trait in ("Command", "ParsedStatement"):
            cls = jvm.java.lang.Class.forName(f"org.apache.spark.sql.catalyst.plans.logical.{trait}")
            if cls.isInstance(plan):
                raise guard.refuse(f"{name} (as Spark parses it)")
    elif not name.startswith(_PLAN_KINDS[checked.kind]):
        raise guard.refuse(f"{name} (as Spark parses it)")
    # The tree string includes CTE definitions and subqueries.
    tree = plan.treeString()
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


def _dataframe(spark: SparkSession, plan: Any) -> DataFrame:
    """The DataFrame of an already parsed (and confirmed) plan."""
    from pyspark.sql import DataFrame

    jvm: Any = spark._jvm
    jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan)
    return DataFrame(jdf, spark)


def _first_line(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
