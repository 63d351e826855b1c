"""SQL over a warehouse's tables on two engines: Spark (the pipeline's) and DuckDB (the verifier).

Every created table is a view under its own name. Users write Spark SQL; the DuckDB side
transpiles it with sqlglot, so one saved query runs on both.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.definitions import TableDefinition
from lakehouse.warehouse import TablePaths, delta_exists


@dataclass(frozen=True)
class TableSource:
    """Where a table's view reads from."""

    name: str
    live: str


def sources(warehouse: str, definitions: dict[str, TableDefinition]) -> list[TableSource]:
    """The tables a query can see: defined in tables/ and created in the warehouse."""
    out = []
    for name in sorted(definitions):
        p = TablePaths(warehouse, name)
        if delta_exists(p.live):
            out.append(TableSource(name, p.live))
    return out
