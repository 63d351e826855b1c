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
from lakehouse.archive.onepass import Written
from lakehouse.archive.plan import ArchivePlan, cutoff_time, staged_problems
from lakehouse.archive.stage import read_staged, taken
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import ConservationError, LakehouseError
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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


def pass_conservation(definition: TableDefinition, paths: TablePaths, plan: ArchivePlan, run_id: str,
                      written: Written, refused: str | None = None) -> CommitFigures:
    """The books of a one-pass run (``onepass.Written``), or ConservationError (nothing
    committed). Its tasks counted the rows they took in (live, kept, replaced) and the rows they
    handed to the files (out: the hashes Spark computed as it read them; the bytes written are
    checked by ``verify`` against the ledger). What the tasks cannot vouch for themselves is
    checked against sources of their own: the live rows against the plan's figures (hashed from
    the same live snapshot when it was planned); the day's archive rows read against the archive
    log's row count and, where the ledger holds the day under the same columns, against its last
    figures out; no more rows replaced than live rows taken; and the rows out against the rows the
    data files and the vector files hold."""
    from lakehouse.archive.ledger import believed, columns_of, fold

    d = definition
    columns = stored_columns(d)
    names = tuple(c for c, _ in columns)
    inputs: dict[dt.date, DayInput] = {}
    outputs: dict[dt.date, Figures] = {}
    figures = written.figures
    for day, sides in figures.items():
        live = sides.get("live", Figures())
        if plan.new_sums:  # the plan's own figures: a live row lost or changed in the pass shows
            live = Figures(plan.new_rows.get(day, 0), fold(plan.new_sums.get(day, 0)))
        inputs[day] = DayInput(live, sides.get("kept", Figures()), sides.get("replaced", Figures()),
                               sides.get("deleted", Figures()))
        outputs[day] = sides.get("out", Figures())
    problems = conservation_problems(d.name, plan.days, inputs, outputs, plan.new_rows, plan.archive_rows)
    for day in plan.days if not problems else ():
        out = outputs.get(day, Figures()).rows
        held = {"data files": written.rows.get(day, 0)}
        if written.vector_files:
            held["vector files"] = written.vector_rows.get(day, 0)
        for what, n in held.items():
            if n != out:
                problems.append(f"archive {d.name}: day {day}: {out} rows written, the {what} hold {n}")
        replaced = inputs.get(day, DayInput()).replaced.rows
        if replaced > plan.new_rows.get(day, 0):
            problems.append(f"archive {d.name}: day {day}: {replaced} archived rows replaced by "
                            f"{plan.new_rows.get(day, 0)} live rows")
    if not problems and any(n > 0 for n in plan.archive_rows.values()):
        ledger = believed(ledger_table.read_rows(paths), plan.previous_cutoff)
        for day in plan.days:
            row = ledger.get(day)
            if row is None or tuple(columns_of(row.columns)) != names or day not in inputs:
                continue
            if inputs[day].existing != row.out:
                problems.append(f"archive {d.name}: day {day}: the archive rows read ({inputs[day].existing.text()}) "
                                f"are not the ledger's ({row.out.text()})")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConservationError(
            f"{problems[0]}{more}; {refused or f'cutoff {plan.cutoff} refused: nothing was committed, live rows stay'}"
        )
    return CommitFigures(plan.cutoff, plan.previous_cutoff, run_id, names,
                         tuple((day, inputs.get(day, DayInput()), outputs.get(day, Figures())) for day in plan.days))


def quality_gate(
    spark: SparkSession,
    definition: TableDefinition,
    paths: TablePaths,
    plan: ArchivePlan,
    rows: DataFrame,
    run_id: str,
) -> None:
    """``archive.checks: before_commit``: the table's quality checks on the run's new day
    batches ``rows`` (written, not committed); a failing one refuses the commit
    (QualityGateFailed: terminal for the jobs)."""
    from lakehouse.quality.gate import gate

    gate(spark, definition, rows, cutoff_time(plan.cutoff), paths.warehouse, run_id)
