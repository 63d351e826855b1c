"""The archive's quality gate (``archive.checks: before_commit``): the table's row invariants
and ``quality:`` expectations on an archive run's staged day batches, before its commit; a
failing check refuses the commit."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lakehouse.definitions import TableDefinition
from lakehouse.errors import QualityGateFailed, first_line
from lakehouse.quality import gx
from lakehouse.quality.invariants import (
    IN_ARCHIVE,
    IN_VIEW,
    Invariant,
    count_sql,
    counts_sql,
    row_invariants,
)
from lakehouse.quality.model import CheckResult, Report
from lakehouse.quality.results import record

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

UTC = dt.timezone.utc
SAMPLE = gx.SAMPLE
"""How many offending rows a result shows."""


def run_invariants(spark: "SparkSession", d: TableDefinition, frames: "Mapping[str, DataFrame | None]") -> list[CheckResult]:
    """The row invariants over ``frames``: ``view`` (rows in scope), ``archive`` (archived rows
    with their cutoff; None: no invariant about the cutoff), ``stored`` (every stored row) and
    ``tagged`` (lakehouse.quality.invariants), as check results.

    The frames are not registered as views: each query names the frames it reads
    (``spark.sql(text, **frames)``), which on Spark Connect sends their plans inside the one SQL
    request (a view is two more requests, each planning its frame, to create and to drop)."""
    from lakehouse.output import json_value
    from lakehouse.spark.session import QUERIES_AT_ONCE

    given = {k: v for k, v in frames.items() if v is not None}
    archive = "{archive}" if "archive" in given else None
    invariants = row_invariants(d, "{view}", archive, "{stored}")

    def sql(text: str) -> "DataFrame":
        refs: dict[str, Any] = {k: v for k, v in given.items() if "{" + k + "}" in text}
        return spark.sql(text, None, **refs)

    try:  # every count in one query, one read of the rows; rows only of those that fail
        first = sql(counts_sql(d, "{tagged}", archive is not None)).first()
        counts: list[int | None] = [int(n) for n in first] if first is not None else [None] * len(invariants)
    except Exception:  # noqa: BLE001 - asked one by one below, so each that cannot run says why
        counts = [None] * len(invariants)

    def one(inv: Invariant, n: int | None) -> CheckResult:
        try:
            if n is None:
                n = int(sql(count_sql(inv)).first()[0])  # type: ignore[index]
            sample = json_value(sql(f"{inv.rows_sql} LIMIT {SAMPLE}").toArrow().to_pylist()) if n else []
        except Exception as e:  # noqa: BLE001 - a check that cannot run is a failed result
            return CheckResult(inv.name, "invariant", False, detail=f"could not run: {first_line(e)}")
        return CheckResult(inv.name, "invariant", n == 0, observed=n, unexpected_count=n, sample=sample)

    # asked of Spark all at once: each is a small query, mostly fixed latency
    with ThreadPoolExecutor(max_workers=QUERIES_AT_ONCE) as pool:
        return list(pool.map(one, invariants, counts))


def gate(spark: "SparkSession", d: TableDefinition, staged: "DataFrame", cutoff_at: dt.datetime, warehouse: str,
         run_id: str) -> Report:
    """The table's checks on an archive run's staged day batches (before its commit): the row
    invariants (keys unique, every row before the new cutoff, event_date) and the expectations.
    Raises QualityGateFailed naming the first failing check and its count (its sample rows are in
    the results on record, which a delete's purge empties, not in the message, which the archive's
    status and the jobs' history keep)."""
    from pyspark.sql import functions as F

    report = Report(d.name, "staged", None, run_id, dt.datetime.now(UTC))
    rows = staged.select(*d.visible_columns)
    archive = rows.withColumn("cutoff_ts", F.lit(cutoff_at).cast("timestamp"))
    tagged = archive.withColumns({IN_VIEW: F.lit(True), IN_ARCHIVE: F.lit(True)})
    report.checks += run_invariants(spark, d, {"view": rows, "archive": archive, "stored": rows, "tagged": tagged})
    report.checks += gx.validate(spark, rows, d, warehouse, f"{d.name}.staged", f"tables/{d.name}.yaml", docs=True)
    report.docs = gx.docs_index(warehouse) if d.quality else None
    record(warehouse, report, "archive")
    if not report.ok:
        bad = report.failed[0]
        more = f" (and {len(report.failed) - 1} more failing check(s))" if len(report.failed) > 1 else ""
        raise QualityGateFailed(  # no row value: the message is kept (archive status, jobs history, logs)
            f"archive {d.name}: quality check {bad.name} failed on the staged batches "
            f"({bad.unexpected_count if bad.unexpected_count is not None else '?'} unexpected){more}; "
            "nothing was committed and the live rows stay; fix the data or the check "
            f"(the sample rows: lakehouse check {d.name} --history)")
    return report
