"""``lakehouse check``: the table's GE suite and the built-in invariants in one run, recorded.

A run pins the table's snapshots (live first, as queries do), builds the rows of its scope
(``all``: the split view, each row once; ``live`` or ``archive``: that table), runs the row
invariants (quality.invariants) and the archive's file checks (sorted days, vector files; from
lakehouse.quality.verify), then the ``quality:`` expectations through Great Expectations, and appends
every result to ``<warehouse>/_quality/results`` (``check --history``).

``gate`` is the same on the staged day batches of an archive run, before its commit
(``archive.checks: before_commit``).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log
from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.errors import LakehouseError, QualityGateFailed, first_line
from lakehouse.quality import gx
from lakehouse.quality.invariants import count_sql, row_invariants
from lakehouse.quality.model import CheckResult
from lakehouse.storage import join

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.quality.verify import Check
    from lakehouse.query import TableSource
    from lakehouse.query.split import Split

UTC = dt.timezone.utc
SCOPES = ("all", "live", "archive")
SAMPLE = gx.SAMPLE


@dataclass
class Report:
    table: str
    scope: str
    day: dt.date | None
    run_id: str
    at: dt.datetime
    checks: list[CheckResult] = field(default_factory=list)
    docs: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok]

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "table": self.table, "scope": self.scope, "day": self.day, "run_id": self.run_id,
                "docs": self.docs, **self.versions, "checks": [c.as_dict() for c in self.checks]}


def results_path(warehouse: str) -> str:
    return join(warehouse, "_quality", "results")


# -- row invariants on Spark ------------------------------------------------------------------------

def _run_invariants(spark: "SparkSession", d: TableDefinition, view: str, archive: str | None,
                    stored: str) -> list[CheckResult]:
    from lakehouse.output import json_value

    out = []
    for inv in row_invariants(d, view, archive, stored):
        try:
            n = int(spark.sql(count_sql(inv)).first()[0])  # type: ignore[index]
            sample = json_value(spark.sql(f"{inv.rows_sql} LIMIT {SAMPLE}").toArrow().to_pylist()) if n else []
        except Exception as e:  # noqa: BLE001 - a check that cannot run is a failed result
            out.append(CheckResult(inv.name, "invariant", False, detail=f"could not run: {first_line(e)}"))
            continue
        out.append(CheckResult(inv.name, "invariant", n == 0, observed=n, unexpected_count=n, sample=sample))
    return out


def _views(spark: "SparkSession", source: "TableSource", split: "Split", scope: str,
           day: dt.date | None) -> tuple[dict[str, str], "DataFrame", dict[str, Any]]:
    """Register the scope's views; (view names, the rows in scope, pinned versions)."""
    from pyspark.sql import functions as F

    from lakehouse.query import spark as spark_q

    d = source.definition
    cols = d.visible_columns

    def read(path: str, version: int) -> "DataFrame":
        df = spark.read.format("delta").option("versionAsOf", version).load(path).select(*cols)
        return df.where(F.col(PARTITION_COLUMN) == F.lit(day)) if day else df

    live = read(source.paths.live, split.live.version)
    arch = read(source.paths.archive, split.archive.version)
    at = split.cutoff_time
    arch_cut = arch.withColumn("cutoff_ts", F.lit(at).cast("timestamp") if at else F.lit(None).cast("timestamp"))
    rows = {"all": spark_q.frame(spark, split), "live": live, "archive": arch}[scope]
    if day and scope == "all":
        rows = rows.where(F.col(PARTITION_COLUMN) == F.lit(day))
    stored = {"all": live.unionByName(arch), "live": live, "archive": arch}[scope]
    tag = f"_lhq_{d.name}_{uuid.uuid4().hex[:6]}"
    names = {"view": f"{tag}_rows", "archive": f"{tag}_archive", "stored": f"{tag}_stored"}
    rows.createOrReplaceTempView(names["view"])
    arch_cut.createOrReplaceTempView(names["archive"])
    stored.createOrReplaceTempView(names["stored"])
    versions = {"live_version": split.live.version, "archive_version": split.archive.version,
                "cutoff": split.cutoff}
    return names, rows, versions


def run(spark: "SparkSession", source: "TableSource", warehouse: str, scope: str = "all",
        day: dt.date | None = None, docs: bool = True, trigger: str = "check") -> Report:
    """Every check of one table in ``scope`` (and on ``day``), recorded; see the module doc."""
    from lakehouse.quality.verify import Verifier

    if scope not in SCOPES:
        raise LakehouseError(f"check {source.name}: --scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    d = source.definition
    report = Report(d.name, scope, day, uuid.uuid4().hex[:12], dt.datetime.now(UTC))
    v = Verifier(spark, source)  # one pair of pinned snapshots for the row and the file checks
    v.days = {day} if day else None
    names, rows, report.versions = _views(spark, source, v.split, scope, day)
    try:
        report.checks += _run_invariants(spark, d, names["view"], None if scope == "live" else names["archive"],
                                         names["stored"])
        if scope != "live":
            for c in [*v.sorted_checks(), *v.vector_checks()]:
                report.checks.append(_from_verify(c))
        report.checks += gx.validate(spark, rows, d, warehouse, f"{d.name}.{scope}", f"tables/{d.name}.yaml",
                                     docs=docs)
    finally:
        for n in names.values():
            spark.catalog.dropTempView(n)
    if d.quality and docs:
        report.docs = gx.docs_index(warehouse)
    record(warehouse, report, trigger)
    return report


def _from_verify(c: "Check") -> CheckResult:
    values = dict(c.values)
    problems = list(values.pop("problems", []))
    return CheckResult(c.name, "invariant", c.ok, observed=values or None, unexpected_count=len(problems),
                       sample=problems[:SAMPLE], detail=c.detail)


# -- the archive's gate ----------------------------------------------------------------------------

def gate(spark: "SparkSession", d: TableDefinition, staged: "DataFrame", cutoff_at: dt.datetime, warehouse: str,
         run_id: str) -> Report:
    """The table's checks on an archive run's staged day batches (before its commit): the row
    invariants (keys unique, every row before the new cutoff, event_date) and the expectations.
    Raises QualityGateFailed naming the first failing check and sample rows."""
    from pyspark.sql import functions as F

    report = Report(d.name, "staged", None, run_id, dt.datetime.now(UTC))
    tag = f"_lhq_{d.name}_{uuid.uuid4().hex[:6]}"
    rows = staged.select(*d.visible_columns)
    rows.createOrReplaceTempView(f"{tag}_rows")
    rows.withColumn("cutoff_ts", F.lit(cutoff_at).cast("timestamp")).createOrReplaceTempView(f"{tag}_archive")
    try:
        report.checks += _run_invariants(spark, d, f"{tag}_rows", f"{tag}_archive", f"{tag}_rows")
        report.checks += gx.validate(spark, rows, d, warehouse, f"{d.name}.staged", f"tables/{d.name}.yaml",
                                     docs=True)
    finally:
        for n in ("rows", "archive"):
            spark.catalog.dropTempView(f"{tag}_{n}")
    report.docs = gx.docs_index(warehouse) if d.quality else None
    record(warehouse, report, "archive")
    if not report.ok:
        bad = report.failed[0]
        more = f" (and {len(report.failed) - 1} more failing check(s))" if len(report.failed) > 1 else ""
        sample = json.dumps(bad.sample[:3], default=str)
        raise QualityGateFailed(
            f"archive {d.name}: quality check {bad.name} failed on the staged batches "
            f"({bad.unexpected_count if bad.unexpected_count is not None else '?'} unexpected; sample {sample}){more}; "
            "nothing was committed and the live rows stay; fix the data or the check "
            f"(lakehouse check {d.name} --history)")
    return report


# -- the record -------------------------------------------------------------------------------------

def _schema() -> Any:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("run_id", pa.string()), ("table_name", pa.string()), ("scope", pa.string()), ("day", pa.date32()),
        ("check", pa.string()), ("kind", pa.string()), ("ok", pa.bool_()), ("unexpected_count", pa.int64()),
        ("observed", pa.string()), ("sample", pa.string()), ("detail", pa.string()), ("trigger", pa.string()),
        ("at", ts), ("live_version", pa.int64()), ("archive_version", pa.int64()), ("cutoff", pa.int64()),
    ])


def record(warehouse: str, report: Report, trigger: str) -> None:
    import pyarrow as pa

    rows = [{"run_id": report.run_id, "table_name": report.table, "scope": report.scope, "day": report.day,
             "check": c.name, "kind": c.kind, "ok": c.ok,
             "unexpected_count": c.unexpected_count if isinstance(c.unexpected_count, int) else None,
             "observed": json.dumps(c.observed, default=str), "sample": json.dumps(c.sample, default=str),
             "detail": c.detail, "trigger": trigger, "at": report.at,
             "live_version": report.versions.get("live_version"),
             "archive_version": report.versions.get("archive_version"), "cutoff": report.versions.get("cutoff")}
            for c in report.checks]
    if rows:
        delta_log.append_records(results_path(warehouse), pa.Table.from_pylist(rows, schema=_schema()))


def history(warehouse: str, table: str, check: str | None = None) -> list[dict[str, Any]]:
    """Every recorded result of ``table`` (one check's), oldest first."""
    path = results_path(warehouse)
    if not delta_log.exists(path):
        return []
    out = []
    for r in delta_log.scan(path).to_pylist():
        if r["table_name"] != table or (check is not None and r["check"] != check):
            continue
        r["observed"] = json.loads(r["observed"] or "null")
        r["sample"] = json.loads(r["sample"] or "[]")
        out.append(r)
    return sorted(out, key=lambda r: (r["at"], r["run_id"]))
