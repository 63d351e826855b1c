"""The built-in invariants as SQL: one definition each, used by ``lakehouse check`` (with the
count of violations and sample rows, on Spark) and ``lakehouse verify`` (counts on both engines).

Each invariant is a query of the offending rows over named views, so it renders on Spark and,
transpiled, on DuckDB:

- ``view``: the rows in scope, each once (the split view, or one of the two tables);
- ``archive``: archive rows with the committed cutoff as ``cutoff_ts``;
- ``stored``: every stored row of the scope, live rows below the cutoff included (those still
  wait for an archive run, and a key that changed day shows there first).

Their counts come from one more view, ``tagged``: every stored row of the scope once, with
``IN_VIEW`` (the rows in scope hold it), ``IN_ARCHIVE`` (an archive row) and ``cutoff_ts``, so
``counts_sql`` counts every invariant in one read of the rows; the offending rows themselves are
asked for only of an invariant that fails.
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
IN_VIEW = "_lh_in_view"
"""Column of the ``tagged`` view: the row is one of the rows in scope."""
IN_ARCHIVE = "_lh_in_archive"
"""Column of the ``tagged`` view: the row is an archive row (``cutoff_ts`` is the archive's cutoff)."""


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


def names(d: TableDefinition, archive: bool) -> list[str]:
    """The row invariants' names in ``row_invariants``' (and ``counts_sql``'s) order."""
    return [inv.name for inv in row_invariants(d, "view", "archive" if archive else None, "stored")]


def count_sql(inv: Invariant) -> str:
    """SQL counting the rows that break ``inv`` (one row, column ``violations``)."""
    return f"SELECT count(*) AS violations FROM ({inv.rows_sql}) v"


def counts_sql(d: TableDefinition, tagged: str, archive: bool, distinct_keys: bool = False) -> str:
    """One query counting the violations of every row invariant (``row_invariants`` with an
    archive view when ``archive``) over the ``tagged`` view, read once: columns ``c0``, ``c1``,
    ... in ``row_invariants``' order; with ``distinct_keys``, first the number of distinct keys
    of the rows in scope. Spark SQL that transpiles to DuckDB."""
    et = spark_ident(d.event_time)

    def count(cond: str) -> str:
        return f"CAST(coalesce(sum(CASE WHEN {cond} THEN 1 ELSE 0 END), 0) AS BIGINT)"

    bad_cut = f"{IN_ARCHIVE} AND {et} >= cutoff_ts"
    bad_date = f"{PARTITION_COLUMN} <> CAST({et} AS DATE)"
    if d.has_key:
        keys = ", ".join(spark_ident(k) for k in d.primary_key)
        # a key on more than one day: its first day before its last (a distinct count would be a
        # second aggregation, one more shuffle of every row)
        source = (f"(SELECT {count(IN_VIEW)} AS copies, min({PARTITION_COLUMN}) < max({PARTITION_COLUMN}) AS moved, "
                  f"{count(bad_cut)} AS bad_cut, {count(bad_date)} AS bad_date FROM {tagged} GROUP BY {keys}) k")
        parts = [count("copies > 0")] if distinct_keys else []
        parts.append(count("copies > 1"))
        if archive:
            parts.append("CAST(coalesce(sum(bad_cut), 0) AS BIGINT)")
        parts += ["CAST(coalesce(sum(bad_date), 0) AS BIGINT)", count("moved")]
    else:
        source = tagged
        parts = ([count(bad_cut)] if archive else []) + [count(bad_date)]
    return "SELECT " + ", ".join(f"{p} AS c{i}" for i, p in enumerate(parts)) + f" FROM {source}"
