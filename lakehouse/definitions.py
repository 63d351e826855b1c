"""Table definitions: strict, frozen models loaded from tables/<name>.yaml.

Every error names the file, the field and what is wrong, on one line, e.g.
``tables/trips.yaml: columns[2].type: unknown type 'strin' (expected one of ...)``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lakehouse.durations import Duration
from lakehouse.errors import DefinitionError, TableNotFound
from lakehouse.types import ColumnType

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
COLUMN_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
PARTITION_COLUMN = "event_date"
"""The partition column every physical table carries: the UTC day of the event time."""
RESERVED_COLUMNS = frozenset({PARTITION_COLUMN})
LOAD_COLUMN = "_lh_load"
"""Hidden column of live and archive rows: the load that wrote the row. Archiving uses it to
delete exactly the live rows it archived (rows loaded later stay, whatever their time)."""
HIDDEN_PREFIX = "_lh_"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Column(_Strict):
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
        if not isinstance(v, str) or not COLUMN_NAME.match(v):
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


class ArchiveSettings(_Strict):
    """When and how live rows move to the archive."""

    delay: Duration = Duration.parse("24h")
    """Rows older than now - delay are archived."""
    interval: Duration = Duration.parse("2h")
    """How often the scheduled archive job runs."""
    sort_columns: tuple[str, ...] = ()
    """Archive sort order (low cardinality first); then event time, then primary key."""
    vectors: Literal["all", "sort_columns"] = "all"
    """Which columns get vector files."""

    @field_validator("delay", "interval", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Duration:
        return Duration.parse(v)

    @field_validator("sort_columns", mode="before")
    @classmethod
    def _list(cls, v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"must be a list of column names, got {v!r}")
        return v

    def as_properties(self) -> dict[str, str]:
        """The settings as Delta table properties (recorded by migrations, checked for drift)."""
        return {
            "lakehouse.archive.delay": str(self.delay),
            "lakehouse.archive.interval": str(self.interval),
            "lakehouse.archive.sort_columns": ",".join(self.sort_columns),
            "lakehouse.archive.vectors": self.vectors,
        }


class TableDefinition(_Strict):
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

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, v: Any) -> str:
        if not isinstance(v, str) or not TABLE_NAME.match(v):
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
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def has_key(self) -> bool:
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


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _format_error(err: dict[str, Any]) -> str:
    loc = _format_loc(tuple(err["loc"]))
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind == "literal_error":
        msg = f"{msg}, got {err.get('input')!r}"
    if kind in ("model_type", "dict_type"):
        msg = f"expected a mapping, got {err.get('input')!r}"
    return f"{loc}: {msg}"


class _NoDuplicatesLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses duplicate keys instead of keeping the last one."""


def _construct_mapping(loader: _NoDuplicatesLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_NoDuplicatesLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def parse_definition(data: Any, source: str, expected_name: str | None = None) -> TableDefinition:
    """Validate a parsed YAML document; raise DefinitionError naming source, field and reason."""
    if not isinstance(data, dict):
        raise DefinitionError(f"{source}: expected a mapping with name, columns, event_time, ...")
    try:
        d = TableDefinition.model_validate(data)
    except ValidationError as e:
        raise DefinitionError(f"{source}: " + "; ".join(_format_error(x) for x in e.errors())) from None
    problems = _cross_check(d, expected_name)
    if problems:
        raise DefinitionError(f"{source}: " + "; ".join(problems))
    return d


def _cross_check(d: TableDefinition, expected_name: str | None) -> list[str]:
    problems: list[str] = []
    if expected_name is not None and d.name != expected_name:
        problems.append(f"name: {d.name!r} must equal the file name {expected_name!r}")
    seen: dict[str, int] = {}
    for i, c in enumerate(d.columns):
        if c.name in seen:
            problems.append(f"columns[{i}].name: duplicate column {c.name!r} (also columns[{seen[c.name]}])")
        seen.setdefault(c.name, i)
    names = set(seen)
    if d.event_time not in names:
        problems.append(f"event_time: unknown column {d.event_time!r}")
    elif d.column(d.event_time).type.name != "timestamp":
        problems.append(
            f"event_time: column {d.event_time!r} is {d.column(d.event_time).type}, not a timestamp"
        )
    for i, k in enumerate(d.primary_key):
        if k not in names:
            problems.append(f"primary_key[{i}]: unknown column {k!r}")
    if len(set(d.primary_key)) != len(d.primary_key):
        problems.append("primary_key: a column is listed twice")
    for i, s in enumerate(d.archive.sort_columns):
        if s not in names:
            problems.append(f"archive.sort_columns[{i}]: unknown column {s!r}")
    if len(set(d.archive.sort_columns)) != len(d.archive.sort_columns):
        problems.append("archive.sort_columns: a column is listed twice")
    if d.archive.interval.millis == 0:
        problems.append("archive.interval: must be greater than zero")
    return problems


def load_definition(path: Path) -> TableDefinition:
    """Load and validate one tables/<name>.yaml file."""
    source = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(f"{source}: cannot read: {e}") from None
    try:
        data = yaml.load(text, Loader=_NoDuplicatesLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DefinitionError(f"{source}: invalid YAML{where}: {problem}") from None
    if data is None:
        raise DefinitionError(f"{source}: the file is empty (expected name, columns, event_time, ...)")
    return parse_definition(data, source, expected_name=path.stem)


def _display(path: Path) -> str:
    """tables/<file> relative to the project where possible, so messages stay short."""
    parts = path.parts
    if len(parts) >= 2 and parts[-2] == "tables":
        return f"tables/{parts[-1]}"
    return str(path)


def load_definitions(tables_dir: Path) -> dict[str, TableDefinition]:
    """All definitions of a project, by table name; a bad file raises naming that file."""
    if not tables_dir.is_dir():
        return {}
    out: dict[str, TableDefinition] = {}
    for path in sorted(tables_dir.iterdir()):
        if path.name.startswith(".") or path.suffix not in (".yaml", ".yml"):
            continue
        d = load_definition(path)
        out[d.name] = d
    return out


def get_definition(tables_dir: Path, name: str) -> TableDefinition:
    """One table's definition; TableNotFound with the known names otherwise."""
    if not TABLE_NAME.match(name):
        raise TableNotFound(f"bad table name {name!r}: expected ^[a-z][a-z0-9_]{{0,62}}$")
    for suffix in (".yaml", ".yml"):
        path = tables_dir / f"{name}{suffix}"
        if path.exists():
            return load_definition(path)
    known = sorted(p.stem for p in tables_dir.glob("*.y*ml")) if tables_dir.is_dir() else []
    raise TableNotFound(
        f"table {name!r} is not defined (no tables/{name}.yaml); known tables: {', '.join(known) or 'none'}"
    )
