"""Commands that keep a table's files healthy: ``optimize`` (compaction) and ``vacuum``
(deleting files no snapshot within the retention reads)."""

from __future__ import annotations

import click

from lakehouse.cli.context import Ctx, parse_day, parse_duration
from lakehouse.cli.output import emit, format_option, handle_errors, steps


@click.command()
@click.argument("table")
@click.option("--day", default=None, help="Only this UTC day (YYYY-MM-DD).")
@click.option("--dry-run", is_flag=True, help="Print which days would be compacted and why; change nothing.")
@format_option()
@click.pass_obj
@handle_errors
def optimize(obj: Ctx, table: str, day: str | None, dry_run: bool, fmt: str | None) -> None:
    """Compact a table: bin-pack live's small files; rewrite archive days into files of the target
    size in their sorted order (vector files stay valid). Reports files and bytes before and after."""
    from lakehouse.jobs.compact import human_bytes, thresholds

    with steps(obj.fmt(fmt)) as report:
        p = obj.lakehouse.optimize(table, day=parse_day(day) if day else None, dry_run=dry_run, report=report)

    def text() -> None:
        if p.empty:
            click.echo(f"{table}: nothing to compact ({thresholds(p.target, p.min_files)})")
            for d, w in p.live.skipped.items():
                click.echo(f"{table}/live: not picked {d}: {w}")
            for d, w in p.archive.skipped.items():
                click.echo(f"{table}/archive: skipped {d}: {w}")
            return
        for part in (p.live, p.archive):
            if not part.days:
                continue
            how = "bin-packed" if part.part == "live" else "rewritten in sorted order"
            days = ", ".join(f"{d} ({w})" for d, w in part.days.items())
            if dry_run:
                click.echo(f"{table}/{part.part}: would compact {len(part.days)} day(s), {part.files_before} files, "
                           f"{human_bytes(part.bytes_before)}, {part.rows} rows ({how}): {days}")
                continue
            click.echo(f"{table}/{part.part}: {len(part.days)} day(s) {how}: {part.files_before} -> {part.files_after} files, "
                       f"{human_bytes(part.bytes_before)} -> {human_bytes(part.bytes_after or 0)}; whole table "
                       f"{part.table_files_before} -> {part.table_files_after} files")
        for d, w in p.live.skipped.items():
            click.echo(f"{table}/live: not picked {d}: {w}")
        for d, w in p.archive.skipped.items():
            click.echo(f"{table}/archive: skipped {d}: {w}")
        if not dry_run and p.archive.days:
            click.echo(f"{table}: vector files unchanged ({p.seconds:.1f}s)")

    emit(obj.fmt(fmt), p.as_dict(), text)


@click.command()
@click.argument("table")
@click.option("--retain", default=None, help="Keep files a snapshot this recent reads (a duration such as 7d; "
              "default: the table's delta.deletedFileRetentionDuration, from jobs.retention).")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--force", is_flag=True, help="Accept a retention below the table's (old snapshots become unreadable).")
@format_option()
@click.pass_obj
@handle_errors
def vacuum(obj: Ctx, table: str, retain: str | None, dry_run: bool, force: bool, fmt: str | None) -> None:
    """Delete data files no snapshot within the retention reads (live, archive, rejects), orphaned
    vector files and the staging of finished runs."""
    from lakehouse.jobs.compact import human_bytes

    keep = parse_duration(retain, "--retain") if retain is not None else None
    with steps(obj.fmt(fmt)) as report:
        doc = obj.lakehouse.vacuum(table, retain=keep, dry_run=dry_run, force=force, report=report).as_dict()

    def text() -> None:
        verb = "would delete" if dry_run else "deleted"
        parts = ", ".join(f"{k} {n}" for k, n in doc["files"].items())
        click.echo(f"{table}: {verb} {doc['removed_files']} files ({human_bytes(doc['removed_bytes'])}) older than "
                   f"{doc['retain']}: data files {parts}; {doc['vector_files']} vector files; "
                   f"{len(doc['staging'])} staging folders"
                   + (f"; sources busy, skipped: {', '.join(doc['busy_sources'])}" if doc["busy_sources"] else ""))

    emit(obj.fmt(fmt), doc, text)
