"""Answering the same SQL from the same Delta tables with DuckDB, without Spark.

The delta extension comes from the package index (duckdb-extension-delta) and is loaded from
its installed file, so no extension repository is needed. DuckDB's TimeZone is set to UTC so
that UTC days match Spark's.

A user's query is checked by the read-only guard (lakehouse.query.guard), translated with
Spark's semantics, names and result types (lakehouse.query.dialect), and runs on a connection
that can read only the tables' directories (enable_external_access off, configuration locked):
a second line of defence behind the guard.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse import objectstore
from lakehouse.definitions import PARTITION_COLUMN
from lakehouse.errors import ConfigError, QueryError, first_line
from lakehouse.objectstore import DUCKDB_EXTENSIONS, S3
from lakehouse.query import TableSource
from lakehouse.query.split import Split
from lakehouse.sql import duck_ident, literal_body

if TYPE_CHECKING:
    from lakehouse.definitions import TableDefinition
    from lakehouse.query.asof import AsOf


@cache
def extension_path(name: str = "delta") -> str:
    """The file of DuckDB extension ``name`` shipped by its package from the package index
    (``duckdb-extension-<name>``), for the DuckDB version installed."""
    import importlib

    import duckdb

    try:
        module = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise ConfigError(f"the DuckDB {name} extension is not installed (pip install duckdb-extension-{name})") from None
    base = Path(module.__file__ or "").parent / "extensions"
    wanted = base / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.exists():
        return str(wanted)
    found = sorted(base.glob(f"*/{name}.duckdb_extension"))
    raise ConfigError(
        f"no DuckDB {name} extension for duckdb {duckdb.__version__} in {base} "
        f"(found: {', '.join(p.parent.name for p in found) or 'none'}); pin matching versions"
    )


_SIGNED: set[tuple[str, int, int, int]] = set()
"""Extension files (path, inode, size, mtime) whose signature DuckDB checked in this process."""


def _identity(path: str) -> tuple[str, int, int, int]:
    st = os.stat(path)
    return path, st.st_ino, st.st_size, st.st_mtime_ns


def connect(s3: S3 | None = None, delta: bool = True, remote: bool = True) -> Any:
    """A DuckDB connection with the delta extension (``delta``: a connection that reads Parquet
    files alone does without) and lakehouse's macros; TimeZone = UTC. It also reads the object
    store ``s3`` (default: the project's, when its warehouse is on S3): its extensions loaded, a
    secret that names the credential chain; none with ``remote`` False.

    DuckDB checks an extension's signature at every LOAD by hashing the whole file (the delta
    extension's 80 MB: 0.3 s of CPU, 30 times the rest of a connection). A process's first
    connection loads each file so checked; later ones load the same files, unchanged since (same
    inode, size and modification time), without checking them again, and load nothing else: a
    sandboxed connection can load nothing at all (``sandbox``)."""
    import duckdb


    s3 = (s3 or objectstore.configured()) if remote else None
    files = [*([extension_path("delta")] if delta else []),
             *(extension_path(n) for n in DUCKDB_EXTENSIONS if s3 is not None)]
    known = [_identity(f) for f in files]
    if not all(k in _SIGNED for k in known):
        with duckdb.connect(":memory:") as checking:  # DuckDB's default: every LOAD's signature checked
            for f in files:
                checking.execute(f"LOAD '{literal_body(f)}'")
        _SIGNED.update(known)
    con = duckdb.connect(":memory:", config={"allow_unsigned_extensions": True})
    for f in files:
        con.execute(f"LOAD '{literal_body(f)}'")
    _reader_rules(con, s3)
    return con


def _reader_rules(con: Any, s3: S3 | None) -> None:
    """What a connection reads the tables with, its extensions loaded: the object store's secret
    (naming the credential chain), TimeZone UTC (the tables' days; Spark's hours and dates of a
    timestamp) and lakehouse's macros (``lh_*``, which translated SQL calls)."""
    from lakehouse.query.dialect.macros import MACROS

    if s3 is not None:
        con.execute(s3.duckdb_secret())
    con.execute("SET TimeZone = 'UTC'")
    for m in MACROS:
        con.execute(m)


def prepare_user(con: Any, s3: S3 | None = None) -> None:
    """Make a user's DuckDB connection read the tables as the reader does: the delta extension
    (and the object store's, with a secret naming the credential chain) loaded from the package
    files where it is not loaded yet, each signature checked as the connection's settings say;
    TimeZone UTC (the tables' days, and Spark's hours and dates of a timestamp); lakehouse's
    macros (``lh_*``), so SQL the reader translated (``translate``) runs there too."""
    s3 = s3 or objectstore.configured()
    loaded = {name for name, on in con.execute(
        "SELECT extension_name, loaded FROM duckdb_extensions()").fetchall() if on}
    for name in ["delta", *(DUCKDB_EXTENSIONS if s3 is not None else [])]:
        if name not in loaded:
            con.execute(f"LOAD '{literal_body(extension_path(name))}'")
    _reader_rules(con, s3)


def sandbox(con: Any, tables: list[TableSource]) -> None:
    """From now on the connection reads only the tables' directories and cannot be reconfigured."""
    dirs = [d.rstrip("/") + "/" for t in tables for d in (t.paths.live, t.paths.archive)]
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"SET allowed_directories = [{', '.join(repr(literal_body(d)) for d in dirs)}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def view_sql(split: Split) -> str:
    """Render the split view (lakehouse.query.split) as DuckDB SQL on its pinned versions."""
    def side(path: str, version: int, absent: frozenset[str]) -> str:
        cols = ", ".join(f"CAST(NULL AS {split.column_type(c).duckdb_ddl()}) AS {duck_ident(c)}" if c in absent
                         else duck_ident(c) for c in split.columns)
        return f"SELECT {cols} FROM delta_scan('{literal_body(path)}', version => {int(version)})"

    arch = side(split.source.paths.archive, split.archive.version, split.archive_absent)
    live = side(split.source.paths.live, split.live.version, split.live_absent)
    if split.cutoff is not None:
        live += f" WHERE {in_split_sql(split)}"
    return f"{arch} UNION ALL {live}"


def in_split_sql(split: Split) -> str:
    """DuckDB SQL: a live row is in the split view (at or after the cutoff: its day, then its
    event time; every live row before the first run)."""
    cutoff, day = split.cutoff, split.cutoff_day
    if cutoff is None or day is None:
        return "TRUE"
    return (f"{duck_ident(PARTITION_COLUMN)} >= DATE '{day.isoformat()}'"
            f" AND {duck_ident(split.event_time)} >= to_timestamp({int(cutoff)})")


def tagged_sql(split: Split) -> str:
    """DuckDB SQL of the invariants' ``tagged`` view (lakehouse.quality.invariants) of a table's
    stored rows at the split's pinned versions: every live and archive row once, with whether the
    split view holds it, whether it is an archive row, and the cutoff as ``cutoff_ts`` (the Spark
    side: query.spark.tagged)."""
    from lakehouse.quality.invariants import IN_ARCHIVE, IN_VIEW

    d, p = split.source.definition, split.source.paths
    cols = ", ".join(duck_ident(c) for c in d.visible_columns)
    cutoff = split.archive.cutoff
    cut_sql = f"to_timestamp({cutoff})" if cutoff is not None else "CAST(NULL AS TIMESTAMPTZ)"
    arch = f"delta_scan('{literal_body(p.archive)}', version => {split.archive.version})"
    live = f"delta_scan('{literal_body(p.live)}', version => {split.live.version})"
    return (f"SELECT {cols}, {cut_sql} AS cutoff_ts, TRUE AS {IN_VIEW}, TRUE AS {IN_ARCHIVE} FROM {arch} "
            f"UNION ALL BY NAME SELECT {cols}, {cut_sql} AS cutoff_ts, "
            f"coalesce({in_split_sql(split)}, FALSE) AS {IN_VIEW}, FALSE AS {IN_ARCHIVE} FROM {live}")


def register_views(con: Any, tables: list[TableSource], as_of: AsOf | None = None,
                   names: set[str] | None = None) -> None:
    """One view per table: on the tables' current snapshots (live read first), or on the
    versions ``as_of`` pinned (then only those). ``names``: only the tables (and the watermarks
    view) of these names, those a statement mentions (a new connection holds no other view)."""
    from lakehouse.query.split import current
    from lakehouse.stream.status import WATERMARK_VIEW, watermarks

    if as_of is not None:
        register_splits(con, list(as_of.splits), None)
        return
    chosen = [t for t in tables if names is None or t.name.lower() in names]
    marks = watermarks(tables) if names is None or WATERMARK_VIEW in names else None
    register_splits(con, [current(t) for t in chosen], marks)


def register_splits(con: Any, splits: list[Split], watermarks: pa.Table | None) -> None:
    """One view per split view, on its pinned versions, and the watermarks table
    (``lakehouse.stream.engine.watermarks``) when given."""
    from lakehouse.stream.status import WATERMARK_VIEW

    for s in splits:
        con.execute(f"CREATE OR REPLACE VIEW {duck_ident(s.name)} AS {view_sql(s)}")
    if watermarks is not None:
        con.register("_lh_watermarks", watermarks)
        con.execute(f"CREATE OR REPLACE TABLE {duck_ident(WATERMARK_VIEW)} AS SELECT * FROM _lh_watermarks")
        con.unregister("_lh_watermarks")


def transpile(sql: str) -> str:
    """Spark SQL to DuckDB SQL (identifiers quoted: DuckDB reserves words Spark does not)."""
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        statements = sqlglot.transpile(sql, read="spark", write="duckdb", identify=True)
    except ParseError as e:
        raise QueryError(f"cannot parse the SQL as Spark SQL: {first_line(e)}") from None
    statements = [s for s in statements if s.strip()]
    if len(statements) != 1:
        raise QueryError(f"expected exactly one SQL statement, got {len(statements)}")
    return statements[0]


def table_columns(definition: TableDefinition) -> list[tuple[str, str | None]]:
    """A table's visible columns with their Spark types (for the translator)."""
    from lakehouse.query.dialect.types import COLUMN_TYPES

    types = {c.name: COLUMN_TYPES.get(c.type.name, str(c.type)) for c in definition.columns}
    types[PARTITION_COLUMN] = "date"
    return [(c, types.get(c)) for c in definition.visible_columns]


def schema(tables: list[TableSource]) -> dict[str, list[tuple[str, str | None]]]:
    """Each table's visible columns with their Spark types (for the translator)."""
    out = {t.name: table_columns(t.definition) for t in tables}
    from lakehouse.stream.status import WATERMARK_COLUMNS, WATERMARK_VIEW

    out[WATERMARK_VIEW] = list(WATERMARK_COLUMNS)
    return out


def translate(tables: list[TableSource], sql: str, views: dict[str, list[tuple[str, str | None]]] | None = None) -> Any:
    """Check one Spark SQL statement and translate it for DuckDB (a dialect.translate.Translation);
    ``views``: other relations it may read, their columns with Spark types."""
    from lakehouse.query import guard
    from lakehouse.query.dialect.datetimes import refuse_patterns
    from lakehouse.query.dialect.refuse import duck_refuse
    from lakehouse.query.dialect.translate import Translator

    checked = guard.check(sql)
    if checked.kind != "query":
        raise duck_refuse(checked.kind.upper(), "its output is Spark's own")
    assert checked.tree is not None
    refuse_patterns(sql)
    return Translator({**schema(tables), **(views or {})}).translate(checked.tree)


def describe(tables: list[TableSource], tree: Any) -> pa.Table:
    """``DESCRIBE t`` as Spark answers it for a table's view: col_name, data_type, comment."""
    from lakehouse.query.dialect.refuse import duck_refuse

    table = tree.this
    plain = tree.args.get("kind") in (None, "TABLE") and not tree.args.get("style") and not any(
        tree.args.get(k) for k in ("partition", "expressions", "format"))
    cols = schema(tables).get(table.name.lower()) if plain and table is not None else None
    if cols is None:
        raise duck_refuse("DESCRIBE", "only DESCRIBE <table> is answered on DuckDB (as Spark does)")
    return pa.table({"col_name": [c for c, _ in cols], "data_type": [t for _, t in cols],
                     "comment": pa.array([None] * len(cols), pa.string())})


def run(tables: list[TableSource], sql: str, con: Any | None = None, as_of: AsOf | None = None) -> pa.Table:
    """Run one read-only Spark SQL statement on DuckDB with Spark's semantics (on the moment
    ``as_of`` pinned); Arrow out."""
    from lakehouse.query import guard

    if as_of is not None:
        tables = as_of.sources()
    checked = guard.check(sql)
    if checked.kind == "describe":
        return describe(tables, checked.tree)
    fresh = con is None
    con = con or connect()
    register_views(con, tables, as_of, guard.names_read(checked) if fresh else None)
    sandbox(con, tables)
    return run_on_views(con, tables, sql, checked)


def run_groups(tables: list[TableSource], sql: str, groups: pa.Table, types: list[tuple[str, str]]) -> pa.Table:
    """Run a query rewritten over a split view's groups (lakehouse.query.shape, ``sql`` reads
    ``GROUP_VIEW``) on DuckDB with Spark's semantics; ``types``: the groups' Spark types."""
    from lakehouse.query.dialect.conform import conform
    from lakehouse.query.shape import GROUP_VIEW

    tr = translate(tables, sql, {GROUP_VIEW: [(n, t) for n, t in types]})
    con = sealed_database().cursor()
    try:
        hand_in(con, GROUP_VIEW, groups)
        result = con.execute(tr.sql).fetch_arrow_table()
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"duckdb: {first_line(e)} (SQL as run on DuckDB: {tr.sql})") from None
    finally:
        con.close()
    return conform(result, tr)


def hand_in(con: Any, name: str, rows: pa.Table) -> None:
    """Make Arrow ``rows`` the table ``name`` of a cursor of ``sealed_database`` (its own, gone
    with it), copied into DuckDB: a query over an Arrow table as such has its WHERE pushed into
    Arrow's own compute, whose comparisons with NaN are IEEE's, not Spark's (NaN > 0 is false)."""
    arrow = f"{name}_arrow"
    con.register(arrow, rows)
    try:
        con.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "{arrow}"')
    finally:
        con.unregister(arrow)


@cache
def sealed_database() -> Any:
    """The process's DuckDB database for queries over rows handed in (groups, rows to erase):
    lakehouse's macros, no extension, no access to any file, its configuration locked. Each query
    runs on a cursor of its own (a connection to it: the rows it registers are that cursor's
    alone); the database is made once (12-20 ms), a cursor in microseconds."""
    con = connect(delta=False, remote=False)
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run_on_views(con: Any, tables: list[TableSource], sql: str, checked: Any = None) -> pa.Table:
    """Run one read-only Spark SQL statement on DuckDB on the views registered already
    (``register_splits``) of ``tables`` (``checked``: the guard's verdict, when it ran)."""
    from lakehouse.query import guard
    from lakehouse.query.dialect.conform import conform

    checked = checked or guard.check(sql)
    if checked.kind == "describe":
        return describe(tables, checked.tree)
    tr = translate(tables, sql)
    try:
        result = con.execute(tr.sql).fetch_arrow_table()
    except Exception as e:  # noqa: BLE001 - any engine failure becomes one QueryError line
        raise QueryError(f"duckdb: {first_line(e)} (SQL as run on DuckDB: {tr.sql})") from None
    return conform(result, tr)
