"""The checks between staging and the commit of an archiving run: the staged rows per day
against the plan, the books (conservation: rows and checksums in == out per day) and the
table's quality gate. A failing check refuses the commit; nothing is committed, live rows stay."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.archive import ledger_table
from lakehouse.archive.ledger import (
    CommitFigures,
    DayInput,
    Figures,
    conservation_problems,
    stored_columns,
)
from lakehouse.archive.plan import ArchivePlan, cutoff_time, staged_problems
from lakehouse.archive.stage import read_staged, taken
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import ConservationError, LakehouseError
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_staged(definition: TableDefinition, plan: ArchivePlan, staged: dict[dt.date, int]) -> None:
    """The staged rows per day are what the plan expects, or LakehouseError (nothing committed)."""
    problems = staged_problems(
        definition.name, plan.days, plan.new_rows, plan.archive_rows, staged, definition.has_key
    )
    if problems:
        raise LakehouseError(
            problems[0]
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; nothing was committed; run again"
        )


def conservation(
    spark: SparkSession,
    definition: TableDefinition,
    paths: TablePaths,
    plan: ArchivePlan,
    staging: str,
    run_id: str,
) -> CommitFigures:
    """Rows in == rows out per day, or ConservationError (nothing committed). The live rows
    taken were hashed and summed per day by the plan (same snapshot, same pass); one Spark
    job hashes and sums per day the days' archive rows, kept or replaced (by a live row of the
    same key and day; skipped when the days hold none), and the staged rows read back."""
    from pyspark.sql import functions as F

    d = definition
    columns = stored_columns(d)
    h = ledger_table.hash_column(columns).alias("_lh_hash")
    sides: dict[dt.date, dict[str, Figures]] = {}
    if plan.new_sums:
        for day, n in plan.new_rows.items():
            sides.setdefault(day, {})["live"] = Figures(n, plan.new_sums.get(day, 0))
    parts = []
    if plan.days:
        new, old = taken(spark, d, paths, plan)
        if not plan.new_sums and plan.new_rows:  # a plan made without the books
            parts.append(new.select(PARTITION_COLUMN, F.lit("live").alias("_lh_side"), h))
        if sum(plan.archive_rows.values()):
            if d.has_key:
                keys = [*d.primary_key, PARTITION_COLUMN]
                marks = new.select(*keys).distinct().withColumn("_lh_replaced", F.lit(True))
                old = old.join(marks, on=keys, how="left")
                side = F.when(F.col("_lh_replaced"), F.lit("replaced")).otherwise(F.lit("kept"))
            else:
                side = F.lit("kept")
            parts.append(old.select(PARTITION_COLUMN, side.alias("_lh_side"), h))
        parts.append(read_staged(spark, d, staging).select(PARTITION_COLUMN, F.lit("out").alias("_lh_side"), h))
    if parts:
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        figs = ledger_table.figures_by(union, [PARTITION_COLUMN, "_lh_side"], hashed="_lh_hash")
        for (day, side_name), f in figs.items():
            sides.setdefault(day, {})[side_name] = f
    inputs = {
        day: DayInput(s.get("live", Figures()), s.get("kept", Figures()), s.get("replaced", Figures()))
        for day, s in sides.items() if set(s) - {"out"}
    }
    outputs = {day: s["out"] for day, s in sides.items() if "out" in s}
    problems = conservation_problems(d.name, plan.days, inputs, outputs, plan.new_rows, plan.archive_rows)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConservationError(
            f"{problems[0]}{more}; cutoff {plan.cutoff} refused: nothing was committed, live rows stay"
        )
    return CommitFigures(
        plan.cutoff, plan.previous_cutoff, run_id, tuple(c for c, _ in columns),
        tuple((day, inputs.get(day, DayInput()), outputs.get(day, Figures())) for day in plan.days),
    )


def quality_gate(
    spark: SparkSession,
    definition: TableDefinition,
    paths: TablePaths,
    plan: ArchivePlan,
    staging: str,
    run_id: str,
) -> None:
    """``archive.checks: before_commit``: the table's quality checks on the staged batches;
    a failing one refuses the commit (QualityGateFailed: terminal for the jobs)."""
    from lakehouse.quality.gate import gate

    gate(spark, definition, read_staged(spark, definition, staging), cutoff_time(plan.cutoff),
         paths.warehouse, run_id)
