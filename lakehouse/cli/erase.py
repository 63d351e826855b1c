"""``delete``: erase rows by predicate or by key from every part of a table (live, archive,
producers' staged rows, rejects), or show the deletes the audit keeps (``--history``)."""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import emit, emit_records, fail, format_option, handle_errors, steps
from lakehouse.output import text_table

HISTORY_KEYS = ("table_name", "number", "at", "predicate", "keys_sha256", "keys", "rows_live", "rows_archive",
                "rows_staged", "rows_rejects", "rejects_unmatched", "days", "purged", "purged_at")


def _history_row(e: dict[str, Any]) -> list[Any]:
    asked = (f"--where {e['predicate']}" if e["predicate"] is not None
             else f"--keys {e['keys']} key(s) sha256 {str(e['keys_sha256'])[:12]}")
    return [e["table_name"], e["number"], e["at"].isoformat(timespec="seconds"), asked, e["rows_live"],
            e["rows_archive"], e["rows_staged"], e["rows_rejects"], e["rejects_unmatched"],
            "yes" if e["purged"] else "no"]


def _days(m: dict[str, int]) -> str:
    return ", ".join(f"{d} ({n})" for d, n in m.items()) or "-"


@click.command("delete")
@click.argument("table", required=False)
@click.option("--where", "where", default=None, metavar="PREDICATE",
              help="A SQL predicate over the table's columns (one expression; no subquery, no volatile function).")
@click.option("--keys", "keys", default=None, metavar="FILE",
              help="Primary keys to erase: one per line, a CSV with the key's columns as header, or Parquet.")
@click.option("--dry-run", is_flag=True, help="Print the rows and days each part would lose; change nothing.")
@click.option("--purge", is_flag=True,
              help="Then remove every file still holding a deleted row, and the table's history before it (time "
                   "travel to an earlier moment is refused); alone: purge the deletes not purged yet.")
@click.option("--history", is_flag=True, help="Show the deletes the audit keeps (of TABLE, or of every table).")
@format_option()
@click.pass_obj
@handle_errors
def delete(obj: Ctx, table: str | None, where: str | None, keys: str | None, dry_run: bool, purge: bool,
           history: bool, fmt: str | None) -> None:
    """Erase rows from every place the table holds them: live (every day), archive days (each
    touched day rewritten, re-sorted and re-encoded, the cutoff unchanged), producers' staged
    rows and rejects. The books keep: verify and check pass after it."""
    if history:
        if where is not None or keys is not None or dry_run or purge:
            fail("delete --history takes no --where, --keys, --dry-run or --purge")
        found = [e.as_dict() for e in obj.lakehouse.erasures(table)]

        def history_text() -> None:
            if not found:
                click.echo("no deletes recorded" + (f" for {table}" if table else ""))
                return
            text_table(("table", "number", "at", "asked", "live", "archive", "staged", "rejects", "unjudged", "purged"),
                       (_history_row(e) for e in found),
                       right={"number", "live", "archive", "staged", "rejects", "unjudged"})

        emit_records(obj.fmt(fmt), found, HISTORY_KEYS, history_text)
        return
    if table is None:
        fail("delete: give TABLE (or --history)")
    with steps(obj.fmt(fmt)) as report:
        result = obj.lakehouse.delete(table, where=where, keys=keys, dry_run=dry_run, purge=purge, report=report)
    doc = result.as_dict()

    def purge_text(p: dict[str, Any]) -> None:
        parts = ", ".join(f"{part} {v['data_files']} file(s) and {v['log_files']} log file(s) (history from "
                          f"version {v['first_version']})" for part, v in p["parts"].items())
        click.echo(f"  purged up to erasure {p['number']}: {parts or 'no Delta table'}; {p['staged_folders']} staged "
                   f"rows folder(s) rewritten, {p['staging_folders']} staging folder(s) and {p['inbox_files']} inbox "
                   f"file(s) removed; {p['quality_samples']} quality sample(s) emptied, {p['quality_files']} "
                   "validation file(s) removed")
        if p["busy_sources"]:
            click.echo(f"  busy, not purged: the staging of {', '.join(p['busy_sources'])}; run the purge again")

    def plan_text() -> None:
        click.echo(f"{table}: erasure {doc['number']} ({doc['request']}) would erase {doc['rows']} row(s)")
        click.echo(f"  live:    {sum(doc['live'].values())} row(s): {_days(doc['live'])}")
        click.echo(f"  archive: {sum(doc['archive'].values())} row(s), {doc['archive_days_rewritten']} day(s) "
                   f"rewritten: {_days(doc['archive'])}")
        click.echo(f"  staged:  {sum(doc['staged'].values())} row(s): {_days(doc['staged'])}")
        click.echo(f"  rejects: {doc['rejects']} row(s)"
                   + (f"; {doc['rejects_unmatched']} rejected record(s) could not be judged"
                      if doc["rejects_unmatched"] else ""))

    def run_text() -> None:
        a = doc["archive"]
        click.echo(f"{table}: erasure {doc['number']} ({doc['request']}): {doc['rows']} row(s) erased"
                   + (" (finished after an interruption)" if doc["resumed"] else ""))
        click.echo(f"  live: {doc['live']}, staged: {doc['staged']}, rejects: {doc['rejects']}"
                   + (f" ({doc['rejects_unmatched']} rejected record(s) could not be judged)"
                      if doc["rejects_unmatched"] else ""))
        click.echo(f"  archive: {a.get('rows', 0)} row(s) from {len(a.get('days', {}))} day(s) "
                   f"({a.get('files_written', 0)} files, {a.get('bytes_written', 0):,} bytes written)")
        if doc.get("purged"):
            purge_text(doc["purged"])

    def purge_only_text() -> None:
        click.echo(f"{table}: purged")
        purge_text(doc)

    emit(obj.fmt(fmt), doc, plan_text if dry_run else run_text if "request" in doc else purge_only_text)
