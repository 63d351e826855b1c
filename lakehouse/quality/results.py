"""The quality results on record: ``<warehouse>/_quality/results`` (Delta), one row per check
result of every run (``lakehouse check``, archive gates), read back by ``check --history``."""

from __future__ import annotations

import json
from typing import Any

from lakehouse import delta_log
from lakehouse.quality.model import Report
from lakehouse.storage import join


def results_path(warehouse: str) -> str:
    """``<warehouse>/_quality/results``: every check result on record (Delta)."""
    return join(warehouse, "_quality", "results")


def schema() -> Any:
    """The results table's Arrow schema."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("run_id", pa.string()), ("table_name", pa.string()), ("scope", pa.string()), ("day", pa.date32()),
        ("check", pa.string()), ("kind", pa.string()), ("ok", pa.bool_()), ("unexpected_count", pa.int64()),
        ("observed", pa.string()), ("sample", pa.string()), ("detail", pa.string()), ("trigger", pa.string()),
        ("at", ts), ("live_version", pa.int64()), ("archive_version", pa.int64()), ("cutoff", pa.int64()),
    ])


def record(warehouse: str, report: Report, trigger: str) -> None:
    """Append a report's results to the results table (``trigger``: what ran the checks)."""
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
        delta_log.append_records(results_path(warehouse), pa.Table.from_pylist(rows, schema=schema()))


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


def clear_samples(warehouse: str, table: str) -> int:
    """Empty the samples of ``table``'s results on record, what they observed and their details (a
    delete's purge: a sample, a column's maximum, its distinct values or a detail naming a vector
    file's record may show an erased row's value; the outcomes and unexpected counts stay);
    results changed."""
    path = results_path(warehouse)
    if not delta_log.exists(path):
        return 0
    changed = 0

    def change(t: Any) -> Any:
        nonlocal changed
        import pyarrow as pa
        import pyarrow.compute as pc

        mine = pc.equal(t["table_name"], table)
        sampled = pc.and_(mine, pc.not_equal(pc.fill_null(t["sample"], "[]"), "[]"))
        valued = pc.and_(mine, pc.not_equal(pc.fill_null(t["observed"], "null"), "null"))
        told = pc.and_(mine, pc.not_equal(pc.fill_null(t["detail"], ""), ""))
        changed = int(pc.sum(pc.or_(pc.or_(sampled, valued), told)).as_py() or 0)
        if not changed:
            return None
        t = t.set_column(t.schema.get_field_index("sample"), "sample", pc.if_else(sampled, pa.scalar("[]"), t["sample"]))
        t = t.set_column(t.schema.get_field_index("detail"), "detail", pc.if_else(told, pa.scalar(""), t["detail"]))
        return t.set_column(t.schema.get_field_index("observed"), "observed",
                            pc.if_else(valued, pa.scalar("null"), t["observed"]))

    delta_log.rewrite_records(path, change)
    return changed

