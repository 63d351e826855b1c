"""Numbered migrations: migrations/NNNN_<slug>.py, each with ``upgrade(ctx)``.

Applied in numeric order by ``lakehouse migrate``. The applied set is a Delta table in the
warehouse (``_lakehouse/migrations``: version, name, checksum, applied_at). A migration that
fails is not recorded and its own changes are undone (created tables removed; columns it added
dropped and properties it set put back by a metadata-only commit, so data committed meanwhile
stays). An applied migration whose file changed is
refused. After migrating, the physical tables are compared with tables/*.yaml.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse import delta_log
from lakehouse.definitions import ArchiveSettings, TableDefinition, load_definitions
from lakehouse.errors import (
    DefinitionError,
    LakehouseError,
    MigrationError,
    TableNotFound,
    first_line,
)
from lakehouse.lease import LeaseHeld, exclusive
from lakehouse.physical import columns_from_dicts, create_table, describe, drift
from lakehouse.settings import Settings
from lakehouse.sql import literal, spark_ident
from lakehouse.storage import join, make_dirs, remove_tree
from lakehouse.warehouse import TablePaths, history_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9][a-z0-9_]*)\.py$")


@dataclass(frozen=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    """File name without .py, e.g. 0001_create_trips."""
    path: Path
    checksum: str
    """sha256 of the file's bytes."""


@dataclass(frozen=True)
class AppliedMigration:
    """A migration as the warehouse's migration history records it (with its checksum then)."""

    version: int
    name: str
    checksum: str
    applied_at: dt.datetime


@dataclass
class MigrationStatus:
    """Applied and pending migrations, and the problems found comparing them."""

    applied: list[AppliedMigration]
    pending: list[Migration]
    changed: list[str] = field(default_factory=list)
    """Applied migrations whose file changed or disappeared."""


def discover(migrations_dir: Path) -> list[Migration]:
    """All migration files in numeric order; bad names and duplicate numbers are errors."""
    if not migrations_dir.is_dir():
        return []
    found: dict[int, Migration] = {}
    for path in sorted(migrations_dir.iterdir()):
        if path.suffix != ".py" or path.name.startswith((".", "_")):
            continue
        m = MIGRATION_FILE.fullmatch(path.name)
        if not m:
            raise MigrationError(
                f"migrations/{path.name}: bad file name; expected NNNN_<slug>.py (four digits, lower-case slug)"
            )
        version = int(m.group(1))
        if version in found:
            raise MigrationError(
                f"migrations/{path.name}: number {m.group(1)} is also used by migrations/{found[version].path.name}"
            )
        found[version] = Migration(version, path.stem, path, hashlib.sha256(path.read_bytes()).hexdigest())
    return [found[v] for v in sorted(found)]


def read_history(warehouse: str) -> list[AppliedMigration]:
    """Applied migrations recorded in the warehouse (read with delta-rs, no Spark)."""
    path = history_path(warehouse)
    if not delta_log.exists(path):
        return []
    rows = delta_log.scan(path).to_pylist()
    out = [AppliedMigration(r["version"], r["name"], r["checksum"], r["applied_at"]) for r in rows]
    return sorted(out, key=lambda a: a.version)


def _record(warehouse: str, m: Migration, duration_ms: int) -> None:
    import pyarrow as pa

    from lakehouse import delta_log

    table = pa.table(
        {
            "version": pa.array([m.version], pa.int32()),
            "name": pa.array([m.name]),
            "checksum": pa.array([m.checksum]),
            "applied_at": pa.array([dt.datetime.now(dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
            "duration_ms": pa.array([duration_ms], pa.int64()),
        }
    )
    delta_log.append_records(history_path(warehouse), table)


def status(settings: Settings) -> MigrationStatus:
    """Compare migration files with the warehouse's history."""
    files = discover(settings.migrations_dir)
    applied = read_history(settings.warehouse)
    by_version = {m.version: m for m in files}
    changed = []
    for a in applied:
        f = by_version.get(a.version)
        if f is None:
            changed.append(f"migration {a.name} was applied but migrations/{a.name}.py is gone")
        elif f.checksum != a.checksum:
            changed.append(
                f"migrations/{f.path.name} changed after it was applied (checksum {a.checksum[:12]} applied, "
                f"{f.checksum[:12]} now); write a new migration instead of editing an applied one"
            )
    done = {a.version for a in applied}
    pending = [m for m in files if m.version not in done]
    return MigrationStatus(applied=applied, pending=pending, changed=changed)


class MigrationContext:
    """What a migration's ``upgrade(ctx)`` can do. Every change is undone if the migration fails."""

    def __init__(self, settings: Settings, definitions: dict[str, TableDefinition],
                 spark_factory: Callable[[], "SparkSession"]) -> None:
        self.settings = settings
        self.definitions = definitions
        self._spark_factory = spark_factory
        self._created: list[str] = []
        self._before: dict[str, int] = {}
        self._added: dict[str, list[str]] = {}
        """Per changed table path, the columns this migration added."""
        self._props: dict[str, dict[str, str | None]] = {}
        """Per changed table path, the properties this migration set and their values before it
        (None: absent)."""

    @property
    def spark(self) -> "SparkSession":
        """The SparkSession (started on first use)."""
        return self._spark_factory()

    def paths(self, table: str) -> TablePaths:
        """Where ``table``'s data lives in the warehouse."""
        return TablePaths(self.settings.warehouse, table)

    def _definition(self, table: str) -> TableDefinition:
        if table not in self.definitions:
            raise TableNotFound(
                f"table {table!r} is not defined (no tables/{table}.yaml); known: {', '.join(sorted(self.definitions)) or 'none'}"
            )
        return self.definitions[table]

    def _remember(self, path: str) -> None:
        """Note a table's version before its first change in this migration, for rollback."""
        if path in self._before or path in self._created:
            return
        t = describe(path)
        if t is None:
            self._created.append(path)
        else:
            self._before[path] = t.version

    def create_table(self, table: str) -> None:
        """Create the table's live, archive and rejects Delta tables from tables/<table>.yaml."""
        d = self._definition(table)
        p = self.paths(table)
        existing = describe(p.live)
        if existing is not None:
            problems = drift(d, p)
            if problems:
                raise MigrationError(f"create_table({table!r}): the table exists and differs: {problems[0]}")
            log.info("table %s exists and matches its definition", table)
            return
        for path in (p.live, p.archive, p.rejects):
            self._remember(path)
        create_table(self.spark, p, d)

    def add_columns(self, table: str, columns: list[dict[str, Any]]) -> None:
        """Add nullable columns to live and archive. Columns that exist with the same type are skipped."""
        self._definition(table)
        cols = columns_from_dicts(table, columns)
        p = self.paths(table)
        live = describe(p.live)
        if live is None:
            raise MigrationError(f"add_columns({table!r}): the table is not created yet (ctx.create_table first)")
        to_add = []
        for c in cols:
            if not c.nullable:
                raise MigrationError(f"add_columns({table!r}): column {c.name} must be nullable (existing rows have no value)")
            have = live.column(c.name)
            if have is None:
                to_add.append(c)
            elif have.type != str(c.type):
                raise MigrationError(f"add_columns({table!r}): column {c.name} exists as {have.type}, not {c.type}")
        if not to_add:
            return
        ddl = ", ".join(f"`{c.name}` {c.type.spark_ddl()}" for c in to_add)
        for path in (p.live, p.archive):
            self._remember(path)
            self.spark.sql(f"ALTER TABLE delta.{spark_ident(path)} ADD COLUMNS ({ddl})")
            self._added.setdefault(path, []).extend(c.name for c in to_add)

    def set_archive(self, table: str, *, delay: str | None = None, interval: str | None = None,
                    sort_columns: list[str] | None = None, vectors: str | None = None) -> None:
        """Change a table's archive settings (recorded as table properties of live and archive)."""
        d = self._definition(table)
        p = self.paths(table)
        live = describe(p.live)
        if live is None:
            raise MigrationError(f"set_archive({table!r}): the table is not created yet (ctx.create_table first)")
        current = {
            "delay": live.properties.get("lakehouse.archive.delay", str(d.archive.delay)),
            "interval": live.properties.get("lakehouse.archive.interval", str(d.archive.interval)),
            "sort_columns": [s for s in live.properties.get("lakehouse.archive.sort_columns", "").split(",") if s],
            "vectors": live.properties.get("lakehouse.archive.vectors", d.archive.vectors),
        }
        for k, v in (("delay", delay), ("interval", interval), ("sort_columns", sort_columns), ("vectors", vectors)):
            if v is not None:
                current[k] = v
        try:
            settings = ArchiveSettings.model_validate(current)
        except Exception as e:  # noqa: BLE001 - pydantic's and our validators raise several kinds
            raise DefinitionError(f"set_archive({table!r}): {e}".splitlines()[0]) from None
        names = {c.name for c in live.columns}
        for s in settings.sort_columns:
            if s not in names:
                raise DefinitionError(f"set_archive({table!r}): sort column {s!r} is not a column of the table")
        props = ", ".join(f"'{k}' = '{v}'" for k, v in settings.as_properties().items())
        for path in (p.live, p.archive):
            self._remember(path)
            t = describe(path)
            before = self._props.setdefault(path, {})
            for k in settings.as_properties():
                if k not in before:
                    before[k] = None if t is None else t.properties.get(k)
            self.spark.sql(f"ALTER TABLE delta.{spark_ident(path)} SET TBLPROPERTIES ({props})")

    def sql(self, statement: str) -> None:
        """Run a Spark SQL statement (an escape hatch; not rolled back automatically)."""
        self.spark.sql(statement)

    def rollback(self) -> list[str]:
        """Undo this migration's changes, and only them; returns what could not be undone.

        Created tables are removed. A changed table gets one metadata-only commit that drops the
        columns this migration added and puts back the properties it set, so loads, ingest
        batches and archiving runs committed meanwhile stay (a RESTORE to the version before the
        migration would remove them too)."""
        problems = []
        for path in reversed(self._created):
            try:
                remove_tree(path)
            except Exception as e:  # noqa: BLE001 - report and go on undoing the rest
                problems.append(f"could not remove {path}: {e}")
        for path in self._before:
            if path in self._created:
                continue
            try:
                self._undo(path)
            except Exception as e:  # noqa: BLE001
                problems.append(f"could not undo the changes to {path}: {first_line(e)}")
        return problems

    def _undo(self, path: str) -> None:
        """This migration's columns out (one metadata-only commit of delta-rs: Delta's SQL drops
        columns only under column mapping), then its properties back (one ``ALTER TABLE``); both
        on any kind of Spark session, and neither touches data committed meanwhile."""
        from lakehouse.definitions import PARTITION_COLUMN
        from lakehouse.delta_log import drop_columns
        from lakehouse.spark.commit import with_retries

        added = set(self._added.get(path, []))
        props = self._props.get(path, {})
        if added:
            with_retries(f"rollback of the migration's columns of {path}",
                         lambda: drop_columns(path, added, PARTITION_COLUMN))
        now = describe(path)
        current = {} if now is None else now.properties
        restore = {k: v for k, v in props.items() if v is not None and current.get(k) != v}
        unset = sorted(k for k, v in props.items() if v is None and k in current)
        table = f"delta.{spark_ident(path)}"
        if restore:
            pairs = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in sorted(restore.items()))
            with_retries(f"rollback of the migration's properties of {path}",
                         lambda: self.spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})"))
        if unset:
            keys = ", ".join(literal(k) for k in unset)
            with_retries(f"rollback of the migration's properties of {path}",
                         lambda: self.spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ({keys})"))
        log.info("rolled back %s: dropped columns %s, restored properties %s", path, sorted(added), sorted(props))


def _load_upgrade(m: Migration) -> Callable[[MigrationContext], None]:
    """The migration's ``upgrade``, from its source as it is now: compiled here, never from a
    ``__pycache__`` file (one written in the same second by a version of the same size would be
    taken for it) and leaving none in the project's migrations folder."""
    module = types.ModuleType(f"lakehouse_migration_{m.version:04d}")
    module.__file__ = str(m.path)
    try:
        exec(compile(m.path.read_bytes(), str(m.path), "exec"), module.__dict__)  # noqa: S102 - the project's own code
    except Exception as e:  # noqa: BLE001 - a user's module may raise anything on import
        raise MigrationError(f"migrations/{m.path.name}: failed to import: {type(e).__name__}: {e}") from None
    upgrade = getattr(module, "upgrade", None)
    if not callable(upgrade):
        raise MigrationError(f"migrations/{m.path.name}: defines no upgrade(ctx) function")
    return upgrade


@dataclass
class MigrateResult:
    """What ``lakehouse migrate`` did: migrations applied, still pending (with ``--dry-run``), and
    the differences left between tables and their definitions."""

    applied: list[str]
    pending: list[str]
    drift: list[str]


MIGRATE_WAIT = 600.0
"""Seconds a ``migrate`` waits for another one of the same warehouse to finish."""


def migrate(settings: Settings, spark_factory: Callable[[], "SparkSession"], dry_run: bool = False) -> MigrateResult:
    """Apply pending migrations in order, then check the tables against tables/*.yaml. One
    ``migrate`` of a warehouse at a time (others wait for it, then find nothing pending)."""
    if dry_run:
        return _migrate(settings, spark_factory, dry_run)
    lock = join(settings.warehouse, "_lakehouse", "migrate.lock")
    make_dirs(join(settings.warehouse, "_lakehouse"))
    try:
        with exclusive(lock, "migrate", lambda: f"migrate: another migrate of {settings.warehouse} holds {lock}",
                       wait=MIGRATE_WAIT) as lease:
            return _migrate(settings, spark_factory, dry_run, lease.check if lease is not None else lambda: None)
    except LeaseHeld as e:
        raise MigrationError(str(e)) from None


def _migrate(settings: Settings, spark_factory: Callable[[], "SparkSession"], dry_run: bool,
             still_held: Callable[[], None] = lambda: None) -> MigrateResult:
    st = status(settings)
    if st.changed:
        raise MigrationError(st.changed[0] + (f" (and {len(st.changed) - 1} more)" if len(st.changed) > 1 else ""))
    definitions = load_definitions(settings.tables_dir)
    if dry_run:
        return MigrateResult([], [m.name for m in st.pending], [])
    applied: list[str] = []
    for m in st.pending:
        still_held()  # the lock of an object store is a lease: lost (a long pause), nothing more runs
        upgrade = _load_upgrade(m)
        ctx = MigrationContext(settings, definitions, spark_factory)
        started = time.monotonic()
        log.info("applying %s", m.name)
        try:
            upgrade(ctx)
        except Exception as e:  # noqa: BLE001 - any failure of a user's migration rolls it back
            problems = ctx.rollback()
            reason = first_line(e)
            if not isinstance(e, LakehouseError):
                reason = f"{type(e).__name__}: {reason}"
                log.debug("migration %s failed:\n%s", m.name, traceback.format_exc())
            undo = f"; rollback problems: {'; '.join(problems)}" if problems else "; its changes were rolled back"
            raise MigrationError(
                f"migration {m.name} failed: {reason}" + undo + (f" (applied before it: {', '.join(applied)})" if applied else "")
            ) from None
        still_held()
        _record(settings.warehouse, m, int((time.monotonic() - started) * 1000))
        applied.append(m.name)
    problems = []
    for d in definitions.values():
        problems.extend(drift(d, TablePaths(settings.warehouse, d.name)))
    return MigrateResult(applied, [], problems)
