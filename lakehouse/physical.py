"""The physical Delta tables behind a definition: create, evolve, describe, compare.

Creation and evolution go through Spark (the writer of record); describing and drift checks read
the Delta log with delta-rs, so ``migrate --status`` and ``tables`` need no Spark.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log, rejects
from lakehouse.definitions import (
    HIDDEN_PREFIX,
    LOAD_COLUMN,
    PARTITION_COLUMN,
    Column,
    TableDefinition,
)
from lakehouse.durations import Duration
from lakehouse.spark.commit import with_retries
from lakehouse.sql import literal, spark_ident
from lakehouse.types import ColumnType
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Deletion vectors stay off so that every reader (delta-rs, DuckDB) sees the same rows and row
# counts from log statistics stay exact.
BASE_PROPERTIES = {"delta.enableDeletionVectors": "false"}

# -- operational Delta properties ---------------------------------------------------------------
#
# How lakehouse wants Delta to keep a table's log and statistics. They are Delta's own settings
# (derived from the definition: its key, sort columns and ``jobs.retention``), not a record of
# the definition, so they take no part in the drift check (``column_drift`` compares
# ``definition.properties()`` only): a warehouse created before they existed reports no drift,
# and ``ensure_properties`` brings it up to date.

PARTS = ("live", "archive", "rejects")
CHECKPOINT_INTERVAL = 10
"""Commits between checkpoints. A reader replays the log from the last checkpoint, so it reads
at most this many JSON commits whatever the table's age; expired log files are removed when a
checkpoint is written. Spark's default, written down because delta-rs's writers default to 100."""
MIN_LOG_RETENTION = Duration(30 * 86_400_000, "30d")
"""Delta's default ``logRetentionDuration``: the log is never kept shorter than this."""
_STATS_TYPES = frozenset({"string", "int", "long", "double", "decimal", "date", "timestamp"})
"""Column types delta-spark 4.0 collects min/max statistics for (``SkippingEligibleDataType``:
numeric, date, timestamp, string); a boolean in ``delta.dataSkippingStatsColumns`` is refused
(DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE), and so is a partition column."""


def delta_interval(d: Duration) -> str:
    """A duration as a Delta calendar interval in its largest exact unit (``interval 7 days``):
    the form Spark, delta-rs and the Delta kernel (DuckDB) all parse (delta-rs requires the
    ``interval`` prefix; months and years are refused by Spark)."""
    for unit, size in (("days", 86_400_000), ("hours", 3_600_000), ("minutes", 60_000), ("seconds", 1000)):
        if d.millis % size == 0:
            return f"interval {d.millis // size} {unit}"
    return f"interval {d.millis} milliseconds"


def stats_eligible(type_name: str) -> bool:
    """Whether Delta keeps min/max statistics for a column of this type (``int``, ``decimal(p,s)``...)."""
    return type_name.split("(")[0] in _STATS_TYPES


def stats_columns(definition: TableDefinition) -> list[str]:
    """The columns live and archive keep min/max statistics for: the event time, the primary
    key, the archive sort columns (once each, in that order), without types Delta refuses."""
    out: list[str] = []
    for name in (definition.event_time, *definition.primary_key, *definition.archive.sort_columns):
        if name not in out and stats_eligible(str(definition.column(name).type)):
            out.append(name)
    return out


def delta_properties(definition: TableDefinition, part: str) -> dict[str, str]:
    """The Delta properties lakehouse wants on one part (live, archive, rejects) of a table:

    - ``delta.enableDeletionVectors`` false (``BASE_PROPERTIES``);
    - ``delta.dataSkippingStatsColumns`` (live, archive): statistics only on the event time, the
      key and the sort columns. Sorted archive files then get tight min/max on exactly the
      columns filters use, and every add action carries a few statistics instead of Delta's
      default first 32 columns: a smaller log and checkpoint to replay on open;
    - ``delta.deletedFileRetentionDuration`` = ``jobs.retention``: VACUUM keeps removed files this
      long (time travel and long queries within it stay readable);
    - ``delta.logRetentionDuration`` = the larger of ``jobs.retention`` and Delta's 30 days: a
      version whose files VACUUM keeps can still be reconstructed from the log; older log files
      are removed at checkpoints, so a year of hourly commits does not pile up in ``_delta_log``;
    - ``delta.checkpointInterval`` = 10: a checkpoint at most 10 commits behind the latest version,
      for every writer (delta-rs would default to 100);
    - ``delta.checkpoint.writeStatsAsJson`` true: Delta's default, pinned because delta-spark 4.0
      writes no ``stats_parsed`` column, so without JSON statistics a checkpoint carries none:
      row counts from the log (``num_records``) would be lost and every count would read data.
    """
    if part not in PARTS:
        raise ValueError(f"unknown table part {part!r} (expected one of {', '.join(PARTS)})")
    retention = definition.jobs.retention
    props = {
        **BASE_PROPERTIES,
        "delta.deletedFileRetentionDuration": delta_interval(retention),
        "delta.logRetentionDuration": delta_interval(max(retention, MIN_LOG_RETENTION, key=lambda d: d.millis)),
        "delta.checkpointInterval": str(CHECKPOINT_INTERVAL),
        "delta.checkpoint.writeStatsAsJson": "true",
    }
    if part != "rejects":
        props["delta.dataSkippingStatsColumns"] = ",".join(stats_columns(definition))
    return props


_DELTA_TYPES = {
    "string": "string",
    "integer": "int",
    "long": "long",
    "double": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}


def create_delta(
    spark: "SparkSession", path: str, columns: str, partitioned: bool, properties: dict[str, str]
) -> None:
    """Create a Delta table of the columns ``columns`` (Spark DDL) at ``path`` (no-op when it
    exists), with one SQL statement (any kind of session runs it)."""
    props = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in {**BASE_PROPERTIES, **properties}.items())
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.{spark_ident(path)} ({columns}) USING DELTA"
              + (f" PARTITIONED BY ({spark_ident(PARTITION_COLUMN)})" if partitioned else "")
              + (f" TBLPROPERTIES ({props})" if props else "")).collect()


def create_table(spark: "SparkSession", paths: TablePaths, definition: TableDefinition) -> None:
    """Create live, archive and rejects of a table, with the definition's properties and the
    operational Delta properties (``delta_properties``)."""
    columns = definition.spark_ddl()
    props = definition.properties()
    create_delta(spark, paths.live, columns, True, {**props, **delta_properties(definition, "live")})
    create_delta(spark, paths.archive, columns, True, {**props, **delta_properties(definition, "archive")})
    create_delta(spark, paths.rejects, rejects.DDL, False,
                 {"lakehouse.table": definition.name, **delta_properties(definition, "rejects")})


def _part_path(paths: TablePaths, part: str) -> str:
    return {"live": paths.live, "archive": paths.archive, "rejects": paths.rejects}[part]


def _wanted(definition: TableDefinition, part: str, table: "PhysicalTable") -> dict[str, str]:
    """``delta_properties`` as this physical table can take them: statistics columns it lacks
    (a column not added yet) or holds with a type Delta refuses are left out, which Delta
    would otherwise reject (and with none left, Delta's default statistics stay)."""
    props = delta_properties(definition, part)
    if "delta.dataSkippingStatsColumns" in props:
        cols = [c for c in props.pop("delta.dataSkippingStatsColumns").split(",")
                if (p := table.column(c)) is not None and stats_eligible(p.type)]
        if cols:
            props["delta.dataSkippingStatsColumns"] = ",".join(cols)
    return props


def properties_differ(paths: TablePaths, definition: TableDefinition) -> bool:
    """Whether ``ensure_properties`` would change anything (read from the logs; no Spark)."""
    for part in PARTS:
        table = describe(_part_path(paths, part))
        if table is not None and any(table.properties.get(k) != v for k, v in _wanted(definition, part, table).items()):
            return True
    return False


def ensure_properties(spark: "SparkSession", paths: TablePaths, definition: TableDefinition) -> dict[str, dict[str, str]]:
    """Bring the operational Delta properties of a table's existing parts up to date: one
    ``ALTER TABLE ... SET TBLPROPERTIES`` per part with only the properties that differ (a part
    already up to date gets no commit). Returns what changed, ``{part: {property: value}}``.

    A property change is a metadata commit: it conflicts with concurrent writers, so it is
    retried (the difference is read again on each attempt). Statistics columns apply to files
    written from then on; files written before keep their statistics."""
    changed: dict[str, dict[str, str]] = {}
    for part in PARTS:
        path = _part_path(paths, part)

        def apply(path: str = path, part: str = part) -> dict[str, str]:
            table = describe(path)
            if table is None:
                return {}
            diff = {k: v for k, v in _wanted(definition, part, table).items() if table.properties.get(k) != v}
            if diff:
                sets = ", ".join(f"'{k}' = '{_sql_string(v)}'" for k, v in diff.items())
                spark.sql(f"ALTER TABLE delta.{spark_ident(path)} SET TBLPROPERTIES ({sets})")
            return diff

        diff, _ = with_retries(f"Delta properties of {definition.name}/{part}", apply)
        if diff:
            log.info("%s/%s: set %s", definition.name, part, ", ".join(f"{k}={v}" for k, v in diff.items()))
            changed[part] = diff
    return changed


def _sql_string(v: str) -> str:
    return v.replace("\\", "\\\\").replace("'", "\\'")


@dataclass(frozen=True)
class PhysicalColumn:
    """A column as a Delta log's schema has it: its name, type name and nullability."""

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
        """The column called ``name`` (None when the table has none)."""
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
    if not delta_log.exists(path):
        return None
    version, schema_, md = delta_log.metadata(path)
    schema = json.loads(schema_.to_json())
    cols = tuple(
        PhysicalColumn(f["name"], _type_name(f["type"]), bool(f.get("nullable", True)))
        for f in schema["fields"]
    )
    return PhysicalTable(
        path=path,
        version=version,
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

    from lakehouse.errors import DefinitionError

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
