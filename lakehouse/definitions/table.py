"""A table definition: its columns and key, its event time, and the sections that say how it is
archived, ingested, streamed, maintained and checked."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from lakehouse.definitions.archive import ArchiveSettings
from lakehouse.definitions.fields import Strict
from lakehouse.definitions.ingest import IngestSettings
from lakehouse.definitions.jobs import JobsSettings
from lakehouse.definitions.names import (
    COLUMN_NAME,
    HIDDEN_PREFIX,
    LOAD_COLUMN,
    PARTITION_COLUMN,
    RESERVED_COLUMNS,
    TABLE_NAME,
)
from lakehouse.definitions.quality import Expectation, parse_expectations
from lakehouse.definitions.stream import StreamSettings
from lakehouse.types import ColumnType


class Column(Strict):
    """One column of a fact table."""

    name: str
    """Lower-case SQL identifier, unique in the table."""
    type: ColumnType
    """string, int, long, double, boolean, date, timestamp or decimal(p,s)."""
    nullable: bool = True
    """Whether nulls are allowed; rows with a null here are rejected otherwise."""

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, v: Any) -> str:
        if not isinstance(v, str) or not COLUMN_NAME.fullmatch(v):
            raise ValueError(f"bad column name {v!r}: expected ^[a-z_][a-z0-9_]{{0,127}}$")
        if v in RESERVED_COLUMNS:
            raise ValueError(f"column name {v!r} is reserved for the UTC-day partition column")
        if v.startswith(HIDDEN_PREFIX):
            raise ValueError(f"column names starting with {HIDDEN_PREFIX!r} are reserved for lakehouse")
        return v

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> ColumnType:
        if isinstance(v, ColumnType):
            return v
        return ColumnType.parse(v)

    @field_validator("nullable", mode="before")
    @classmethod
    def _nullable(cls, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"nullable must be true or false, got {v!r}")
        return v


class TableDefinition(Strict):
    """A fact table: columns, optional primary key, event time, archive settings."""

    name: str
    """Table name, equal to the YAML file's name."""
    columns: tuple[Column, ...]
    """The table's columns, in order."""
    primary_key: tuple[str, ...] = ()
    """Key columns; without a key the table is append-only."""
    event_time: str
    """The timestamp column whose UTC day partitions the table."""
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    """Archiving settings."""
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    """How ``lakehouse ingest`` takes files from landing directories."""
    stream: StreamSettings = Field(default_factory=StreamSettings)
    """Producers and rowtime bounds: allowed lateness and the producers' lease."""
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    """Scheduled compaction and VACUUM (``lakehouse jobs``)."""
    quality: tuple[Expectation, ...] = ()
    """Great Expectations expectations checked by ``lakehouse check`` (and before archive
    commits with ``archive.checks: before_commit``)."""

    @field_validator("quality", mode="before")
    @classmethod
    def _quality(cls, v: Any) -> Any:
        return parse_expectations(v)

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, v: Any) -> str:
        if not isinstance(v, str) or not TABLE_NAME.fullmatch(v):
            raise ValueError(f"bad table name {v!r}: expected ^[a-z][a-z0-9_]{{0,62}}$")
        return v

    @field_validator("columns", mode="before")
    @classmethod
    def _columns(cls, v: Any) -> Any:
        if not isinstance(v, (list, tuple)) or not v:
            raise ValueError("must be a non-empty list of {name, type, nullable} entries")
        return v

    @field_validator("primary_key", mode="before")
    @classmethod
    def _pk(cls, v: Any) -> Any:
        if v is None:
            return ()
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"must be a list of column names, got {v!r}")
        return v

    # -- derived ---------------------------------------------------------------------------

    def column(self, name: str) -> Column:
        """The column called ``name``; KeyError when there is none."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def column_names(self) -> list[str]:
        """The names of the table's columns, in order."""
        return [c.name for c in self.columns]

    @property
    def has_key(self) -> bool:
        """Whether the table has a primary key (without one it is append-only)."""
        return bool(self.primary_key)

    def spark_ddl(self, with_partition: bool = True, hidden: bool = True) -> str:
        """Column list in Spark DDL: the columns, the hidden load column, the partition column."""
        parts = [
            f"`{c.name}` {c.type.spark_ddl()}{'' if c.nullable else ' NOT NULL'}" for c in self.columns
        ]
        if hidden:
            parts.append(f"`{LOAD_COLUMN}` STRING NOT NULL")
        if with_partition:
            parts.append(f"`{PARTITION_COLUMN}` DATE")
        return ", ".join(parts)

    @property
    def visible_columns(self) -> list[str]:
        """What queries see: the table's columns, then event_date."""
        return [*self.column_names, PARTITION_COLUMN]

    @property
    def sort_order(self) -> list[str]:
        """The archive's total order: sort columns, event time, key, then every other column
        (so that equal sort keys still order deterministically), then the load."""
        order: list[str] = []
        for c in (*self.archive.sort_columns, self.event_time, *self.primary_key, *self.column_names, LOAD_COLUMN):
            if c not in order:
                order.append(c)
        return order

    def properties(self) -> dict[str, str]:
        """What a physical table records about its definition (as Delta table properties)."""
        props = {
            "lakehouse.table": self.name,
            "lakehouse.primary_key": ",".join(self.primary_key),
            "lakehouse.event_time": self.event_time,
        }
        props.update(self.archive.as_properties())
        return props
