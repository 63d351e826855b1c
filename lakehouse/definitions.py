"""Table definitions: strict, frozen models loaded from tables/<name>.yaml.

Every error names the file, the field and what is wrong, on one line, e.g.
``tables/trips.yaml: columns[2].type: unknown type 'strin' (expected one of ...)``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, cast

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
    clock: Literal["now", "bound"] = "now"
    """What the cutoff follows: ``now`` (cutoff = now - delay) or ``bound`` (cutoff =
    min(now, the table's watermark) - delay, so a day is never sealed while an attached producer
    may still write into it)."""
    checks: Literal["off", "before_commit"] = "off"
    """``before_commit``: run the table's quality checks on the staged day batches before the
    archive commit; a failing check refuses the commit (the live rows stay where they are)."""

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


SORT_FIELDS = ("TIME_IN_FILENAME", "MODIFIED_FILE_TIME")
_SIZE = re.compile(r"^([0-9]+) *(B|KB|MB|GB|TB)?$", re.IGNORECASE)
_SIZE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def parse_size(value: Any) -> int:
    """A size in bytes from an integer or ``<int><unit>`` (B, KB, MB, GB, TB; 1 KB = 1024 B)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as '64MB', got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        n = int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "B").upper()]
    else:
        raise ValueError(f"expected a size such as '64MB' (units B, KB, MB, GB, TB), got {value!r}")
    if n < 1:
        raise ValueError(f"must be at least 1 byte, got {value!r}")
    return n


def positive_int(v: Any) -> int:
    """A whole number >= 1 (not a bool, not a float)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"must be a whole number >= 1, got {v!r}")
    return v


class FilenameTime(_Strict):
    """How to read a file's implied time from its name."""

    regex: str
    """A regular expression searched in the file name; its first group holds the time."""
    format: str
    """The ``strptime`` format of that group (UTC), e.g. ``%Y%m%dT%H%M``."""

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            compiled = re.compile(v)
        except re.error as e:
            raise ValueError(f"bad regular expression {v!r}: {e}") from None
        if compiled.groups < 1:
            raise ValueError(f"regular expression {v!r} needs a group around the time, e.g. 'trips_(\\d{{8}})'")
        return v

    @field_validator("format")
    @classmethod
    def _format(cls, v: str) -> str:
        if "%" not in v:
            raise ValueError(f"bad time format {v!r}: expected strptime directives such as '%Y%m%dT%H%M'")
        return v


class IngestSettings(_Strict):
    """How ``lakehouse ingest`` takes files from a landing directory (the ``ingest:`` section)."""

    format: Literal["csv", "json", "parquet"] | None = None
    """Input format; by default from each file's extension (.gz accepted for csv and json)."""
    pattern: str | None = None
    """Regular expression matched against file names; other files are ignored (default: all)."""
    sort_field: Literal["TIME_IN_FILENAME", "MODIFIED_FILE_TIME"] = "MODIFIED_FILE_TIME"
    """Where a file's implied time comes from."""
    filename_time: FilenameTime | None = None
    """Required with TIME_IN_FILENAME."""
    ingress_delay_interval: Duration = Duration(0, "0")
    """Hold-back window of the file T-sort; 0 = strict order; -1 = no ordering (files in the
    order found, nothing is late)."""
    ingress_file_scan_wait: Duration = Duration.parse("2s")
    """Pause between scans in --watch mode; also how long a new file must stay unchanged."""
    min_file_age: Duration | None = None
    """A file whose last change is at least this old counts as complete at once (without it, a
    file is complete once its size and mtime did not change between two scans)."""
    block_size: int = 64 << 20
    """Files larger than this are parsed by several Spark tasks, one per block (bytes)."""
    blocks_per_batch: int = 16
    """At most this many blocks per commit (a bigger file is a batch of its own)."""
    late_folder: str | None = None
    """A folder (inside the source directory) late files are moved to; by default they stay."""
    max_record_bytes: int = 16 << 20
    """The longest record (bytes) read; a longer one is a reject, skipped without being held."""
    follow_symlinks: bool = False
    """Whether a symlink in a landing directory may point outside it (by default such a file is
    ``failed``, so a landing directory cannot be used to read other files)."""

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"bad regular expression {v!r}: {e}") from None
        return v

    @field_validator("ingress_delay_interval", mode="before")
    @classmethod
    def _delay(cls, v: Any) -> Duration:
        if isinstance(v, Duration):
            return v
        if isinstance(v, (bool, float)):
            raise ValueError(f"expected a duration such as '10m', 0 (strict order) or -1 (no ordering), got {v!r}")
        if v == -1 or v == "-1":
            return Duration(-1, "-1")
        if v == 0 or v == "0":
            return Duration(0, "0")
        try:
            return Duration.parse(v)
        except ValueError:
            raise ValueError(f"expected a duration such as '10m', 0 (strict order) or -1 (no ordering), got {v!r}") from None

    @field_validator("ingress_file_scan_wait", "min_file_age", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Duration | None:
        if v is None:
            return None
        if not isinstance(v, bool) and (v == 0 or v == "0") and not isinstance(v, float):
            return Duration(0, "0")
        return Duration.parse(v)

    @field_validator("block_size", "max_record_bytes", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        return parse_size(v)

    @field_validator("follow_symlinks", mode="before")
    @classmethod
    def _bool(cls, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, got {v!r}")
        return v

    @field_validator("blocks_per_batch", mode="before")
    @classmethod
    def _blocks(cls, v: Any) -> int:
        return positive_int(v)

    @field_validator("late_folder")
    @classmethod
    def _late_folder(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v or "\\" in v or v in (".", "..")):
            raise ValueError(f"must be a plain folder name inside the source directory, got {v!r}")
        return v

    @property
    def ordered(self) -> bool:
        """False with ingress_delay_interval -1 (files are taken as found)."""
        return self.ingress_delay_interval.millis >= 0


class StreamSettings(_Strict):
    """How producers write the table through rowtime bounds (the ``stream:`` section)."""

    allowed_lateness: Duration | None = None
    """How far below max(stream bound, producer bound) a row may be and still be taken; None
    (``unbounded``, the default) rejects nothing for time; ``0`` gives strict bounds."""
    lease: Duration = Duration.parse("5m")
    """A producer that neither inserts, asserts a bound nor heartbeats for this long stops
    holding the watermark back (its lease expires)."""

    @field_validator("allowed_lateness", mode="before")
    @classmethod
    def _lateness(cls, v: Any) -> Duration | None:
        if v is None or v == "unbounded":
            return None
        if not isinstance(v, bool) and (v == 0 or v == "0") and not isinstance(v, float):
            return Duration(0, "0")
        try:
            return Duration.parse(v)
        except ValueError:
            raise ValueError(f"expected 'unbounded', 0 or a duration such as '5m', got {v!r}") from None

    @field_validator("lease", mode="before")
    @classmethod
    def _lease(cls, v: Any) -> Duration:
        d = Duration.parse(v)
        if d.millis < 1:
            raise ValueError(f"must be longer than 0, got {v!r}")
        return d


class JobsSettings(_Strict):
    """The table's scheduled maintenance (the ``jobs:`` section); archiving runs every
    ``archive.interval``. An interval of ``off`` turns a job off."""

    compact_live: Duration | None = Duration.parse("1h")
    """How often live's small files are bin-packed (Delta OPTIMIZE on partitions with more than
    ``compact_min_files`` small files)."""
    compact_archive: Duration | None = Duration.parse("1d")
    """How often archive days are rewritten into files of ``target_file_size`` in their sorted
    order (vector files stay valid)."""
    vacuum: Duration | None = Duration.parse("1d")
    """How often files no snapshot within ``retention`` reads are deleted."""
    retention: Duration = Duration.parse("7d")
    """How long removed files stay readable (time travel, long queries): recorded as the Delta
    tables' ``delta.deletedFileRetentionDuration``; VACUUM keeps at least this much."""
    target_file_size: int = 128 << 20
    """Compaction writes files of about this size (bytes, or '128MB')."""
    compact_min_files: int = 8
    """A live partition is compacted when it has more than this many small files (smaller than
    half the target size)."""

    @field_validator("compact_live", "compact_archive", "vacuum", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> Duration | None:
        if v is None or v is False or v == "off":
            return None
        d = Duration.parse(v)
        if d.millis < 1000:
            raise ValueError(f"must be at least 1s, or 'off', got {v!r}")
        return d

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, v: Any) -> Duration:
        d = Duration.parse(v)
        if d.millis < 1000:
            raise ValueError(f"must be at least 1s, got {v!r}")
        return d

    @field_validator("target_file_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        n = parse_size(v)
        if n < 1024:
            raise ValueError(f"must be at least 1KB, got {v!r}")
        return n

    @field_validator("compact_min_files", mode="before")
    @classmethod
    def _min_files(cls, v: Any) -> int:
        return positive_int(v)

    def interval(self, job: str) -> Duration | None:
        """The interval of a maintenance job by its name (None: off)."""
        return cast(Duration | None, getattr(self, job))


class Expectation(_Strict):
    """One Great Expectations expectation of the ``quality:`` section: its GE name and arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    def label(self) -> str:
        """``expect_column_values_to_be_between(fare_total)``: how results name it."""
        cols = [self.args[k] for k in ("column", "column_A", "column_B") if isinstance(self.args.get(k), str)]
        cols += [", ".join(map(str, self.args[k])) for k in ("column_list", "column_set")
                 if isinstance(self.args.get(k), (list, tuple))]
        return f"{self.name}({', '.join(cols)})" if cols else self.name


def _expectations(v: Any) -> Any:
    """``quality:`` as a list of ``{expect_name: {args}}`` entries, or a mapping of expectation
    name to its arguments (or to a list of argument mappings, to use one expectation twice)."""
    if v is None:
        return ()
    if isinstance(v, dict):
        v = [{k: a} for k, args in v.items() for a in (args if isinstance(args, list) else [args])]
    if not isinstance(v, (list, tuple)):
        raise ValueError("must be a list of {expect_name: {argument: value, ...}} entries")
    out = []
    for i, item in enumerate(v):
        if isinstance(item, Expectation):
            out.append(item)
            continue
        if isinstance(item, str):
            item = {item: {}}
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"item {i}: expected one {{expect_name: {{argument: value, ...}}}} mapping, got {item!r}")
        ((name, args),) = item.items()
        if args is None:
            args = {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise ValueError(f"item {i} ({name!r}): the arguments must be a mapping, got {args!r}")
        if not all(isinstance(k, str) for k in args):
            raise ValueError(f"item {i} ({name!r}): argument names must be strings")
        out.append(Expectation(name=name, args=args))
    return tuple(out)


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
        return _expectations(v)

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


def _format_error(err: Any) -> str:
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
    ing = d.ingest
    if ing.sort_field == "TIME_IN_FILENAME" and ing.filename_time is None:
        problems.append("ingest.filename_time: required with sort_field TIME_IN_FILENAME "
                        "(e.g. {regex: 'trips_(\\d{8}T\\d{4})', format: '%Y%m%dT%H%M'})")
    if ing.sort_field == "MODIFIED_FILE_TIME" and ing.filename_time is not None:
        problems.append("ingest.filename_time: only used with sort_field TIME_IN_FILENAME")
    if d.quality:
        from lakehouse.quality.catalog import problems as expectation_problems

        visible = names | {PARTITION_COLUMN}
        for i, e in enumerate(d.quality):
            problems += expectation_problems(i, e.name, e.args, visible)
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
    if not TABLE_NAME.fullmatch(name):
        raise TableNotFound(f"bad table name {name!r}: expected ^[a-z][a-z0-9_]{{0,62}}$")
    for suffix in (".yaml", ".yml"):
        path = tables_dir / f"{name}{suffix}"
        if path.exists():
            return load_definition(path)
    known = sorted(p.stem for p in tables_dir.glob("*.y*ml")) if tables_dir.is_dir() else []
    raise TableNotFound(
        f"table {name!r} is not defined (no tables/{name}.yaml); known tables: {', '.join(known) or 'none'}"
    )
