"""The erasures' audit: ``<warehouse>/_lakehouse/erasures``, a Delta table with one row per
delete (``lakehouse delete --history``): when, which table, what was asked (the predicate as
given, or the keys file's SHA-256 and how many keys: never the values), the rows erased per part
(live, archive, staged, rejects), the rejects that could not be judged, and whether and when the
bytes were purged. Written with delta-rs (no Spark), each row with the SetTransaction
(``lakehouse.erasure.<table>``, the erasure's number): recording a delete twice (after a crash)
writes it once. A purge later adds the row again with ``purged``, which wins."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, fields
from typing import Any

from lakehouse import delta_log
from lakehouse.storage import join

UTC = dt.timezone.utc


def audit_path(warehouse: str) -> str:
    """``<warehouse>/_lakehouse/erasures``."""
    return join(warehouse, "_lakehouse", "erasures")


@dataclass(frozen=True)
class Erasure:
    """One delete, as the audit keeps it."""

    table_name: str
    number: int
    at: dt.datetime
    predicate: str | None = None
    keys_sha256: str | None = None
    keys: int | None = None
    rows_live: int = 0
    rows_archive: int = 0
    rows_staged: int = 0
    rows_rejects: int = 0
    rejects_unmatched: int = 0
    days: str = ""
    """The archive days rewritten, comma-separated (YYYY-MM-DD)."""
    purged: bool = False
    purged_at: dt.datetime | None = None
    versions: str = ""
    """The versions of live, archive and rejects the delete left (JSON): where a purge after the
    retention cuts their history, so time travel to any later moment keeps working."""

    @property
    def rows(self) -> int:
        """Rows erased in all."""
        return self.rows_live + self.rows_archive + self.rows_staged + self.rows_rejects

    def as_dict(self) -> dict[str, Any]:
        """The row as ``delete --history --json`` shows it."""
        return asdict(self)


def _schema() -> Any:
    import pyarrow as pa

    kinds = {"table_name": pa.string(), "number": pa.int64(), "at": pa.timestamp("us", tz="UTC"),
             "predicate": pa.string(), "keys_sha256": pa.string(), "keys": pa.int64(), "rows_live": pa.int64(),
             "rows_archive": pa.int64(), "rows_staged": pa.int64(), "rows_rejects": pa.int64(),
             "rejects_unmatched": pa.int64(), "days": pa.string(), "purged": pa.bool_(),
             "purged_at": pa.timestamp("us", tz="UTC"), "versions": pa.string()}
    return pa.schema([(f.name, kinds[f.name]) for f in fields(Erasure)])


def record(warehouse: str, erasure: Erasure) -> bool:
    """Append a delete's row, once (False: it was there): a delete's with the SetTransaction
    (``lakehouse.erasure.<table>``, its number); its purge's (purges come in any order: VACUUM
    purges older deletes after a newer one was purged) when the history does not show it purged."""
    import pyarrow as pa

    row = pa.Table.from_pylist([asdict(erasure)], schema=_schema())
    if not erasure.purged:
        return delta_log.append_records(audit_path(warehouse), row, txn=(f"lakehouse.erasure.{erasure.table_name}",
                                                                          erasure.number))
    if any(e.number == erasure.number and e.purged for e in history(warehouse, erasure.table_name)):
        return False
    return delta_log.append_records(audit_path(warehouse), row)


def history(warehouse: str, table: str | None = None) -> list[Erasure]:
    """Every delete (of ``table``), oldest first, each once (its latest row)."""
    path = audit_path(warehouse)
    if not delta_log.exists(path):
        return []
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in delta_log.scan(path).to_pylist():
        if table is not None and r["table_name"] != table:
            continue
        k = (r["table_name"], int(r["number"]))
        if k not in latest or (r["purged"] and not latest[k]["purged"]):
            latest[k] = r
    names = {f.name for f in fields(Erasure)}
    return sorted((Erasure(**{k: v for k, v in r.items() if k in names and v is not None}) for r in latest.values()),
                  key=lambda e: (e.at, e.table_name, e.number))
