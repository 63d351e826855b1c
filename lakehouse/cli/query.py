"""The ``query`` command: one read-only SQL statement over every table, on Spark or DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import emit_fields, emit_result, format_option, handle_errors
from lakehouse.errors import LakehouseError


@click.command()
@click.argument("sql", required=False)
@click.option("--file", "sql_file", type=click.Path(dir_okay=False), default=None, help="Read the SQL from a file.")
@click.option("--engine", type=click.Choice(["spark", "duckdb"]), default="spark", show_default=True)
@click.option("--as-of", "as_of", metavar="VERSION|TS", default=None,
              help="Read the tables as they were: at a timestamp (ISO 8601, UTC without an offset), or at "
                   "archive version N of the one table the query reads.")
@click.option("--explain", is_flag=True, help="Print how the query would be answered (from the archive's run "
              "lengths or from the data files, and why) instead of its answer; starts no Spark.")
@click.option("--scan", is_flag=True, help="Read the data files even where the archive's run lengths answer.")
@format_option()
@click.pass_obj
@handle_errors
def query(obj: Ctx, sql: str | None, sql_file: str | None, engine: Literal["spark", "duckdb"], as_of: str | None,
          explain: bool, scan: bool, fmt: str | None) -> None:
    """Run one read-only Spark SQL statement over all tables (each table is a view under its name).

    SELECT, WITH, VALUES, SHOW, DESCRIBE and EXPLAIN only. Both engines print the same JSON for
    the same SQL, or DuckDB refuses the construct by name (then use --engine spark).
    With --as-of, each table the query reads is its split view at that moment (the archive and
    cutoff committed then, and live as it was); text output notes the versions on stderr.

    A query that counts or sums over a table's sort columns and event_date (GROUP BY a prefix
    of them, filters on them) is answered from the archive's run lengths, the live rows added;
    --explain says which path a query takes.
    """
    if bool(sql) == bool(sql_file):
        raise click.UsageError("give either SQL or --file F")
    if sql_file:
        try:
            sql = Path(sql_file).read_text(encoding="utf-8")
        except OSError as e:
            raise LakehouseError(f"{sql_file}: cannot read: {e.strerror}") from None
    assert sql is not None
    f = obj.fmt(fmt)
    if explain:
        if as_of is not None or scan:
            doc = {"path": "scan", "reason": "--as-of reads the data files" if as_of is not None else "--scan"}
        else:
            doc = obj.lakehouse.explain(sql, engine).explain()
        emit_fields(f, {"engine": engine, **doc})
        return
    pinned = None
    if as_of is not None:
        pinned = obj.lakehouse.as_of(sql, as_of)
        if f == "text":
            click.echo(pinned.describe(), err=True)
    emit_result(f, obj.lakehouse.query(sql, engine, as_of=pinned, runs=not scan))
