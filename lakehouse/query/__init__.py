"""SQL over a warehouse's tables on two engines: Spark (the pipeline's) and DuckDB (the verifier).

Every created table is a view under its own name that splits at the archive cutoff::

    view(t) = ARCHIVE  UNION ALL  (LIVE WHERE event_time >= cutoff)

where the cutoff is the one committed in the archive snapshot the view reads. Snapshot order:
the live version is read FIRST, the archive version (and its cutoff) second. An archiving run
commits the archive before it deletes from live, so a live snapshot taken after the delete is
always paired with the archive that holds those rows; a live snapshot from before the delete
still has them, and the filter hides them when the archive is the new one. Either way each row
is counted once. Live rows older than the cutoff (late arrivals, or rows loaded while a run was
under way) stay invisible until the next run merges them into the archive.

Users write Spark SQL; the DuckDB side transpiles it with sqlglot, so one saved query runs on both.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse import delta_log
from lakehouse.definitions import TableDefinition
from lakehouse.warehouse import TablePaths


@dataclass(frozen=True)
class TableSource:
    """A table a query can see."""

    definition: TableDefinition
    paths: TablePaths

    @property
    def name(self) -> str:
        """The table's name (the view a query reads it by)."""
        return self.definition.name


def sources(warehouse: str, definitions: dict[str, TableDefinition]) -> list[TableSource]:
    """The tables a query can see: defined in tables/ and created in the warehouse."""
    out = []
    for name in sorted(definitions):
        p = TablePaths(warehouse, name)
        if delta_log.exists(p.live) and delta_log.exists(p.archive):
            out.append(TableSource(definitions[name], p))
    return out
