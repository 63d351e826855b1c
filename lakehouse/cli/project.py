"""Commands about the project itself: ``migrate`` (apply migrations/) and ``tables`` (every
table and its state)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import cutoff_text, emit, emit_records, fail, format_option, handle_errors
from lakehouse.output import format_timestamp, inline_text, text_table

if TYPE_CHECKING:
    from lakehouse.project import TableState

TABLE_KEYS = ("name", "live_rows", "archive_rows", "cutoff", "bound", "watermark", "staged", "created", "rejects",
              "waiting_rows")
"""The CSV header of ``tables`` when no table is defined."""


@click.command()
@click.option("--status", is_flag=True, help="List applied and pending migrations; change nothing.")
@click.option("--dry-run", is_flag=True, help="Print what would be applied; change nothing.")
@format_option()
@click.pass_obj
@handle_errors
def migrate(obj: Ctx, status: bool, dry_run: bool, fmt: str | None) -> None:
    """Apply pending migrations (migrations/NNNN_<slug>.py) in order."""
    if status:
        _migrate_status(obj, fmt)
        return
    result = obj.lakehouse.migrate(dry_run=dry_run)
    doc: dict[str, Any] = {"applied": result.applied, "pending": result.pending}
    if result.drift:
        doc["drift"] = result.drift

    def text() -> None:
        if dry_run:
            click.echo("would apply: " + (", ".join(result.pending) or "nothing (up to date)"))
            return
        for name in result.applied:
            click.echo(f"applied {name}")
        if not result.applied:
            click.echo("up to date: no pending migrations")

    emit(obj.fmt(fmt), doc, text)
    if result.drift:
        fail(f"the warehouse does not match tables/ after migrating: {result.drift[0]}"
             + (f" (and {len(result.drift) - 1} more; see `lakehouse migrate --status`)" if len(result.drift) > 1 else ""))


def _migrate_status(obj: Ctx, fmt: str | None) -> None:
    """``migrate --status``: applied and pending migrations, changed ones, and the warehouse's
    drift from tables/; exit 1 when an applied migration was changed."""
    from lakehouse.physical import drift as drift_of

    lh = obj.lakehouse
    st = lh.migration_status()
    drift: list[str] = []
    for d in lh.definitions().values():
        drift.extend(drift_of(d, lh.paths(d.name)))
    doc = {
        "applied": [a.name for a in st.applied],
        "pending": [m.name for m in st.pending],
        "changed": st.changed,
        "drift": drift if not st.pending else [],
    }

    def text() -> None:
        for a in st.applied:
            click.echo(f"applied  {a.name}  {format_timestamp(a.applied_at)}  {a.checksum[:12]}")
        for m in st.pending:
            click.echo(f"pending  {m.name}")
        for c in st.changed:
            click.echo(f"CHANGED  {c}")
        for d in doc["drift"]:
            click.echo(f"DRIFT    {d}")
        if not st.applied and not st.pending:
            click.echo("no migrations in migrations/")

    emit(obj.fmt(fmt), doc, text)
    if st.changed:
        sys.exit(1)


def _instant_text(value: Any) -> str:
    """An instant recorded as ISO 8601 text (any offset) as text output shows instants (UTC, Z)."""
    from lakehouse.records import BadValue, parse_timestamp

    try:
        return format_timestamp(parse_timestamp(value)) if isinstance(value, str) else inline_text(value)
    except BadValue:
        return value


@click.command()
@format_option()
@click.pass_obj
@handle_errors
def tables(obj: Ctx, fmt: str | None) -> None:
    """List tables and their state."""
    states = obj.lakehouse.tables()

    def state_of(s: TableState) -> str:
        state = "ok" if s.created else "not created (run lakehouse migrate)"
        if s.last_error:
            e = s.last_error
            state = (f"archive failing at {inline_text(e.get('step'))} ({inline_text(e.get('failures', 1))}x since "
                     f"{_instant_text(e.get('since'))}): {inline_text(e.get('error'))}")
        if s.staged:
            state += f"; {s.staged} rows staged"
        return state

    def text() -> None:
        if not states:
            click.echo("no tables defined in tables/")
            return
        text_table(
            ("table", "live_rows", "archive_rows", "rejects", "waiting", "cutoff", "watermark", "state"),
            ([s.name, s.live_rows, s.archive_rows, s.rejects, s.waiting_rows,
              "-" if s.cutoff is None else cutoff_text(s.cutoff),
              format_timestamp(s.watermark) if s.watermark else "-", state_of(s)] for s in states),
            right={"live_rows", "archive_rows", "rejects", "waiting"})

    emit_records(obj.fmt(fmt), [s.as_dict() for s in states], TABLE_KEYS, text)
