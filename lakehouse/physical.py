"""The physical Delta tables behind a definition: create, evolve, describe, compare.

Creation and evolution go through Spark (the writer of record); describing and drift checks read
the Delta log with delta-rs, so ``migrate --status`` and ``tables`` need no Spark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from lakehouse import rejects
from lakehouse.definitions import (
    HIDDEN_PREFIX,
    LOAD_COLUMN,
    PARTITION_COLUMN,
    Column,
    TableDefinition,
)
from lakehouse.types import ColumnType
from lakehouse.warehouse import TablePaths, delta_exists, open_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

# Deletion vectors stay off so that every reader (delta-rs, DuckDB) sees the same rows and row
# counts from log statistics stay exact.
BASE_PROPERTIES = {"delta.enableDeletionVectors": "false"}


_DELTA_TYPES = {
    "string": "string",
    "integer": "int",
    "long": "long",
    "double": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}


def table_schema(definition: TableDefinition) -> "StructType":
    """The Spark schema of live and archive: the columns, then event_date."""
    from pyspark.sql.types import StructType

    return cast(StructType, StructType.fromDDL(definition.spark_ddl()))


def create_delta(
    spark: "SparkSession", path: str, schema: "StructType", partitioned: bool, properties: dict[str, str]
) -> None:
    """Create a Delta table at ``path`` (no-op when it exists)."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partitioned:
        builder = builder.partitionedBy(PARTITION_COLUMN)
    for k, v in {**BASE_PROPERTIES, **properties}.items():
        builder = builder.property(k, v)
    builder.execute()


def create_table(spark: "SparkSession", paths: TablePaths, definition: TableDefinition) -> None:
    """Create live, archive and rejects of a table."""
    from pyspark.sql.types import StructType

    schema = table_schema(definition)
    props = definition.properties()
    create_delta(spark, paths.live, schema, True, props)
    create_delta(spark, paths.archive, schema, True, props)
    create_delta(spark, paths.rejects, cast(StructType, StructType.fromDDL(rejects.DDL)), False, {"lakehouse.table": definition.name})


@dataclass(frozen=True)
class PhysicalColumn:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class PhysicalTable:
    """What the Delta log says about a table."""

    path: str
    version: int
    columns: tuple[PhysicalColumn, ...]
    partition_columns: tuple[str, ...]
    properties: dict[str, str]

    def column(self, name: str) -> PhysicalColumn | None:
        return next((c for c in self.columns if c.name == name), None)


def _type_name(t: Any) -> str:
    if isinstance(t, str):
        if t in _DELTA_TYPES:
            return _DELTA_TYPES[t]
        if t.startswith("decimal"):
            return str(ColumnType.parse(t))
        return t
    return json.dumps(t)


def describe(path: str) -> PhysicalTable | None:
    """Read a Delta table's schema, partitioning and properties; None when absent."""
    if not delta_exists(path):
        return None
    dt = open_delta(path)
    schema = json.loads(dt.schema().to_json())
    md = dt.metadata()
    cols = tuple(
        PhysicalColumn(f["name"], _type_name(f["type"]), bool(f.get("nullable", True)))
        for f in schema["fields"]
    )
    return PhysicalTable(
        path=path,
        version=int(dt.version()),
        columns=cols,
        partition_columns=tuple(md.partition_columns),
        properties=dict(md.configuration),
    )


def column_drift(definition: TableDefinition, table: PhysicalTable, part: str) -> list[str]:
    """Differences between a definition and one physical table (live or archive)."""
    out: list[str] = []
    where = f"{definition.name}/{part}"
    wanted = {c.name: c for c in definition.columns}
    for c in definition.columns:
        p = table.column(c.name)
        if p is None:
            out.append(f"{where}: column {c.name} ({c.type}) is in tables/{definition.name}.yaml but not in the table")
            continue
        if p.type != str(c.type):
            out.append(f"{where}: column {c.name} is {p.type} in the table but {c.type} in tables/{definition.name}.yaml")
        if p.nullable != c.nullable:
            out.append(
                f"{where}: column {c.name} is {'nullable' if p.nullable else 'not nullable'} in the table "
                f"but {'nullable' if c.nullable else 'not nullable'} in tables/{definition.name}.yaml"
            )
    if table.column(LOAD_COLUMN) is None:
        out.append(f"{where}: hidden column {LOAD_COLUMN} is missing (the table was not created by this lakehouse)")
    for p in table.columns:
        if p.name != PARTITION_COLUMN and p.name not in wanted and not p.name.startswith(HIDDEN_PREFIX):
            out.append(f"{where}: column {p.name} is in the table but not in tables/{definition.name}.yaml")
    if table.partition_columns != (PARTITION_COLUMN,):
        out.append(f"{where}: partitioned by {list(table.partition_columns)}, expected ['{PARTITION_COLUMN}']")
    for k, v in definition.properties().items():
        have = table.properties.get(k)
        if have != v:
            out.append(f"{where}: setting {k} is {have!r} in the table but {v!r} in tables/{definition.name}.yaml")
    return out


def drift(definition: TableDefinition, paths: TablePaths) -> list[str]:
    """Every difference between a definition and its live and archive tables."""
    out: list[str] = []
    for part, path in (("live", paths.live), ("archive", paths.archive)):
        table = describe(path)
        if table is None:
            out.append(f"{definition.name}/{part}: defined in tables/{definition.name}.yaml but not created (add a migration with ctx.create_table)")
            continue
        out.extend(column_drift(definition, table, part))
    return out


def columns_from_dicts(table: str, columns: list[dict[str, Any]]) -> list[Column]:
    """Validate ``ctx.add_columns`` input with the same rules as tables/*.yaml."""
    from pydantic import ValidationError

    from lakehouse.definitions import DefinitionError

    out = []
    for i, c in enumerate(columns):
        try:
            out.append(Column.model_validate(c))
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(entry)"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise DefinitionError(f"add_columns({table!r}) columns[{i}].{loc}: {msg}") from None
    return out
