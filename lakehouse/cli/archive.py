"""Commands about the archive: ``archive`` (one archiving run), and reading what it wrote:
``vectors`` (a day's vector file, decoded) and ``lookup`` (a record range by binary search on
the vectors)."""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.context import Ctx, parse_day, parse_now
from lakehouse.cli.output import cutoff_text, emit, format_option, handle_errors, steps
from lakehouse.output import format_timestamp, text_table, text_value

RUN_KEYS = ("value", "null", "count", "accumulative_count")
"""The fields of a run of a run-length encoded vector file (``vectors``' CSV columns ``runs.<field>``)."""


@click.command()
@click.argument("table")
@click.option("--now", default=None, help="The clock for this run (ISO 8601; replays and tests).")
@click.option("--allow-future", is_flag=True,
              help="Accept a --now more than a minute ahead of the clock (the cutoff cannot move back).")
@click.option("--dry-run", is_flag=True, help="Print the plan (cutoff, days, rows); change nothing.")
@format_option()
@click.pass_obj
@handle_errors
def archive(obj: Ctx, table: str, now: str | None, allow_future: bool, dry_run: bool, fmt: str | None) -> None:
    """One archiving run: live rows older than now - delay move into the archive."""
    with steps(obj.fmt(fmt)) as report:
        result = obj.lakehouse.archive(table, now=parse_now(now), dry_run=dry_run, allow_future=allow_future,
                                       report=report)
    plan = result.plan

    def plan_text() -> None:
        if plan.no_watermark:
            click.echo(f"{table}: nothing to do: {plan.notes[0]}")
            return
        if not plan.advances:
            click.echo(f"{table}: nothing to do: cutoff {cutoff_text(plan.cutoff)} is not above the current cutoff "
                       f"{cutoff_text(plan.previous_cutoff)}")
            return
        click.echo(f"{table}: would move the cutoff {cutoff_text(plan.previous_cutoff)} -> {cutoff_text(plan.cutoff)} "
                   f"from live version {plan.live_version}")
        click.echo(f"  {plan.rows} live rows ({plan.late_rows} late) into {len(plan.days)} day(s), "
                   f"merged with {plan.archive_rows_in_days} archived rows: {', '.join(d.isoformat() for d in plan.days) or '-'}")

    def run_text() -> None:
        if plan.no_watermark:
            click.echo(f"{table}: nothing to do: {plan.notes[0]}")
            return
        if not plan.advances:
            click.echo(f"{table}: nothing to do: the new cutoff {cutoff_text(plan.cutoff)} is not above the current "
                       f"cutoff {cutoff_text(plan.previous_cutoff)}"
                       + (f" (clock: bound; watermark {format_timestamp(plan.watermark)})" if plan.watermark else "")
                       + (f" (recovered: purged {result.recovered_rows} rows)" if result.recovered_rows else ""))
            return
        click.echo(f"{table}: cutoff {cutoff_text(plan.previous_cutoff)} -> {cutoff_text(plan.cutoff)}; "
                   f"{result.rows_archived} rows archived into {len(plan.days)} day(s), {result.rows_purged} purged from live, "
                   f"{result.vector_files} vector files, {result.seconds:.1f}s"
                   + (f"; {len(plan.reencode_days)} day(s) archived under other settings re-sorted and re-encoded"
                      if plan.reencode_days else ""))

    if dry_run:
        emit(obj.fmt(fmt), plan.as_dict(), plan_text)
    else:
        emit(obj.fmt(fmt), result.as_dict(), run_text)


@click.command()
@click.argument("table")
@click.option("--day", required=True, help="The archive day (YYYY-MM-DD).")
@click.option("--column", required=True, help="The column.")
@click.option("--limit", type=int, default=None, help="Show at most this many runs or values.")
@format_option()
@click.pass_obj
@handle_errors
def vectors(obj: Ctx, table: str, day: str, column: str, limit: int | None, fmt: str | None) -> None:
    """A day's vector file for a column, decoded."""
    dv = obj.lakehouse.vectors(table, parse_day(day), column)
    rows = dv.table.to_pylist() if dv.encoded else dv.table.column("value").to_pylist()
    if limit is not None:
        rows = rows[:limit]
    listed = "runs" if dv.encoded else "values"
    doc: dict[str, Any] = {"file": dv.file, "cutoff": dv.cutoff, listed: rows}

    def text() -> None:
        click.echo(f"{dv.file}  (cutoff {cutoff_text(dv.cutoff)}, {'run-length encoded' if dv.encoded else 'plain'}, "
                   f"{dv.table.num_rows} {'runs' if dv.encoded else 'values'})")
        if dv.encoded:
            text_table(("value", "null", "count", "accumulative"),
                       ([text_value(r["value"]), int(r["null"]), r["count"], r["accumulative_count"]] for r in rows),
                       right={"value", "null", "count", "accumulative"})
        else:
            for v in rows:
                click.echo(text_value(v))

    emit(obj.fmt(fmt), doc, text, table=listed, keys=RUN_KEYS if dv.encoded else ())


@click.command()
@click.argument("table")
@click.option("--day", required=True, help="The archive day (YYYY-MM-DD).")
@click.option("--where", "where", multiple=True, required=True,
              help="COLUMN=VALUE on a prefix of the sort columns (repeatable; NULL for the null run).")
@format_option()
@click.pass_obj
@handle_errors
def lookup(obj: Ctx, table: str, day: str, where: tuple[str, ...], fmt: str | None) -> None:
    """The record range of an archive day matching equalities, by binary search on the vectors."""
    res = obj.lakehouse.lookup(table, parse_day(day), list(where))
    r = res.range

    def text() -> None:
        click.echo(f"records [{r.start}, {r.end}): {r.count} matching ({res.touched} vector entries read, "
                   f"cutoff {cutoff_text(res.cutoff)})")

    emit(obj.fmt(fmt), {"start": r.start, "end": r.end, "count": r.count}, text)
