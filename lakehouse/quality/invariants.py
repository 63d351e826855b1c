"""The built-in invariants as SQL: one definition each, used by ``lakehouse check`` (with the
count of violations and sample rows, on Spark) and ``lakehouse verify`` (counts on both engines).

Each invariant is a query of the offending rows over named views, so it renders on Spark and,
transpiled, on DuckDB:

- ``view``: the rows in scope, each once (the split view, or one of the two tables);
- ``archive``: archive rows with the committed cutoff as ``cutoff_ts``;
- ``stored``: every stored row of the scope, live rows below the cutoff included (those still
  wait for an archive run, and a key that changed day shows there first).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.definitions import PARTITION_COLUMN, TableDefinition
from lakehouse.sql import spark_ident

KEYS_UNIQUE = "keys unique across live and archive"
BEFORE_CUTOFF = "no archive row at or after the cutoff"
EVENT_DATE = "event_date is the UTC day of the event time"
KEY_ONE_DAY = "a key never changes day"
SORTED = "archive days sorted"
VECTORS = "vector files decode to their day"


@dataclass(frozen=True)
class Invariant:
    """A rule every row must keep, as the SQL selecting the rows that break it."""

    name: str
    rows_sql: str
    """The offending rows (their key, or their event time when the table has none)."""


def row_invariants(d: TableDefinition, view: str, archive: str | None, stored: str) -> list[Invariant]:
    """The row-level invariants over the given views (``archive`` None: none about the cutoff)."""
    et = spark_ident(d.event_time)
    keys = ", ".join(spark_ident(k) for k in d.primary_key)
    ident = keys or et
    out = []
    if d.has_key:
        out.append(Invariant(KEYS_UNIQUE, f"SELECT {keys}, count(*) AS copies FROM {view} GROUP BY {keys} "
                                          "HAVING count(*) > 1"))
    if archive is not None:
        out.append(Invariant(BEFORE_CUTOFF, f"SELECT {ident}, {et} AS event_time, cutoff_ts FROM {archive} "
                                            f"WHERE {et} >= cutoff_ts"))
    out.append(Invariant(EVENT_DATE, f"SELECT {ident}{'' if ident == et else ', ' + et}, {PARTITION_COLUMN} "
                                     f"FROM {stored} WHERE {PARTITION_COLUMN} <> CAST({et} AS DATE)"))
    if d.has_key:
        out.append(Invariant(KEY_ONE_DAY, f"SELECT {keys}, count(DISTINCT {PARTITION_COLUMN}) AS days, "
                                          f"min({PARTITION_COLUMN}) AS first_day, max({PARTITION_COLUMN}) AS last_day "
                                          f"FROM {stored} GROUP BY {keys} HAVING count(DISTINCT {PARTITION_COLUMN}) > 1"))
    return out


def count_sql(inv: Invariant) -> str:
    """SQL counting the rows that break ``inv`` (one row, column ``violations``)."""
    return f"SELECT count(*) AS violations FROM ({inv.rows_sql}) v"
