"""Commands that bring rows in: ``load`` (files, now), ``ingest`` (a landing directory, in
implied-time order), ``ingest-log`` (every file ingest has seen) and ``rejects`` (the rows and
files that were refused, with reasons)."""

from __future__ import annotations

import os
from typing import Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import cutoff_text, emit, emit_records, fail, format_option, handle_errors
from lakehouse.output import format_timestamp, text_table

INGEST_LOG_KEYS = ("file", "implied_time", "status", "rows", "rows_rejected", "batch", "error", "source", "kind",
                   "load_id")
"""The fields of an ``ingest-log`` entry (the CSV header)."""
REJECT_KEYS = ("source", "line", "reason", "record", "at", "load_id", "producer", "bound", "producer_bound",
               "allowed_lateness")
"""The fields of a ``rejects`` entry (the CSV header)."""


def _existing(ctx: click.Context, param: click.Parameter, files: tuple[str, ...]) -> tuple[str, ...]:
    """FILES that name local files must exist: a usage error before anything starts or is recorded."""
    for f in files:
        if "://" not in f and not os.path.isfile(f):
            why = "is a directory" if os.path.isdir(f) else "does not exist"
            raise click.BadParameter(f"{f} {why}", ctx=ctx, param=param)
    return files


@click.command()
@click.argument("table")
@click.argument("files", nargs=-1, required=True, callback=_existing)
@click.option("--input-format", "input_format", type=click.Choice(["csv", "json", "parquet"]), default=None,
              help="Input file format (default: from each file's extension; .gz allowed).")
@click.option("--force", is_flag=True, help="Load files whose content was loaded before (default: skip them).")
@format_option()
@click.pass_obj
@handle_errors
def load(obj: Ctx, table: str, files: tuple[str, ...], input_format: str | None, force: bool,
         fmt: str | None) -> None:
    """Upsert rows from FILES into TABLE's live store; bad rows go to rejects. A file whose
    content was already loaded is skipped (like COPY INTO) unless --force. Exit 1 when a file was
    rejected whole, after the summary: the other files load."""
    result = obj.lakehouse.load(table, list(files), input_format, force=force)
    doc = result.as_dict()

    def text() -> None:
        if result.recovered:
            click.echo(f"finished {len(result.recovered)} interrupted load batch(es) first")
        for f in result.files:
            if f.error:
                click.echo(f"{f.source}: REJECTED: {f.error}")
            elif f.skipped:
                click.echo(f"{f.source}: skipped: {f.skipped}")
            else:
                click.echo(f"{f.source}: {f.rows_loaded} rows loaded, {f.rows_rejected} rejected")
        click.echo(f"{table}: {result.rows_loaded} rows loaded ({result.rows_inserted} inserted, "
                   f"{result.rows_updated} updated), {result.rows_rejected} rejected"
                   + (f", {len(result.files_rejected)} file(s) rejected" if result.files_rejected else "")
                   + (f", {len(result.files_skipped)} file(s) skipped" if result.files_skipped else "")
                   + ("; see `lakehouse rejects " + table + "`" if result.rows_rejected or result.files_rejected else ""))
        if doc["rows_late"]:
            click.echo(f"{table}: {doc['rows_late']} of the rejected rows came too late for the stream "
                       "(late_row: earlier than the producer's bound minus stream.allowed_lateness)")
        if result.rows_below_cutoff:
            click.echo(f"{table}: {result.rows_below_cutoff} loaded row(s) have an event time below the archive "
                       f"cutoff ({cutoff_text(result.cutoff)}): they wait in live, and queries see them only after "
                       f"the next archive run (`lakehouse archive {table}`)")

    emit(obj.fmt(fmt), doc, text)
    if result.files_rejected_now:
        first = result.files_rejected_now[0]
        others = " (the other files were loaded)" if result.rows_loaded else ""
        fail(f"{first.error}; the file is in `lakehouse rejects {table}`{others}")


@click.command()
@click.argument("table")
@click.option("--source", required=True, type=click.Path(file_okay=False), help="The landing directory to scan.")
@click.option("--once", "mode", flag_value="once", default=True, help="Scan, load what the rule allows, exit (default).")
@click.option("--watch", "mode", flag_value="watch", help="Scan again every ingress_file_scan_wait until Ctrl-C.")
@click.option("--drain", is_flag=True, help="Also take every queued file at the end (the end of a stream).")
@click.option("--dry-run", is_flag=True, help="Print what would be taken; change nothing.")
@click.option("--producer", "producer_name", default=None,
              help="The producer this landing directory writes the table as (default: the directory's path); "
                   "its bound is the implied time of the last file taken; --drain detaches it.")
@format_option()
@click.pass_obj
@handle_errors
def ingest(obj: Ctx, table: str, source: str, mode: str, drain: bool, dry_run: bool, producer_name: str | None,
           fmt: str | None) -> None:
    """Load files from a landing directory in implied-time order, exactly once. Exit 1 when a file
    was failed whole (unreadable; it is in rejects), after the summary: the other files load."""
    import signal
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    f = obj.fmt(fmt)
    stop = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        click.echo("stopping after the current batch (Ctrl-C again to abort)", err=True)

    if mode == "watch":
        obj.lakehouse.spark()  # first: PySpark installs its own SIGINT handler (cancel jobs, raise)
        signal.signal(signal.SIGINT, on_sigint)
        signal.signal(signal.SIGTERM, on_sigint)
    console = Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True, disable=f == "json" or not console.is_terminal)
    tasks: dict[int, Any] = {}

    def on_start(batch: Any, blocks: int) -> None:
        tasks[batch.number] = progress.add_task(f"batch {batch.number}: {len(batch.files)} file(s)", total=blocks)

    def on_batch(r: Any) -> None:
        if r.number in tasks:
            progress.update(tasks[r.number], completed=r.blocks)
            progress.remove_task(tasks.pop(r.number))
        if f != "json":
            progress.console.print(
                f"batch {r.number}: {len(r.files) - len(r.failed)} file(s), {r.rows} rows, {r.rows_rejected} rejected"
                + (f", {len(r.failed)} failed" if r.failed else "") + (" (finished after a crash)" if r.recovered else "")
                + f" in {r.seconds:.1f}s", highlight=False)

    with progress:
        report = obj.lakehouse.ingest(table, source, watch=(mode == "watch"), drain=drain, dry_run=dry_run,
                                      stop=stop, on_batch=on_batch, on_start=on_start, producer=producer_name)

    def text() -> None:
        for name in report.incomplete:
            click.echo(f"{name}: still being written (size or mtime changed); next scan")
        for name in report.late:
            click.echo(f"{name}: LATE, set aside (see `lakehouse ingest-log {table}`)")
        for name, err in report.failed:
            click.echo(f"{name}: FAILED: {err}")
        for name in report.modified:
            click.echo(f"{name}: modified after it was loaded; not reloaded")
        if dry_run:
            for b in report.planned:
                click.echo(f"would take batch {b.number}: {', '.join(b.files) or '(no readable files)'}"
                           + (f"; failing {', '.join(n for n, _ in b.failed)}" if b.failed else ""))
            click.echo(f"{table}: dry run, nothing changed; {len(report.new)} new file(s), "
                       f"{report.waiting} would wait in the queue")
            return
        click.echo(f"{table}: {report.files_ingested} file(s) ingested in {len(report.batches)} batch(es), "
                   f"{report.rows} rows, {report.rows_rejected} rejected; {len(report.late)} late, "
                   f"{len(report.failed)} failed, {report.waiting} waiting in the queue"
                   + (f"; {report.unfinished} batch(es) taken, finished by the next run" if report.unfinished else ""))

    emit(f, report.to_json(), text)
    if report.failed and not dry_run:  # as `load`: input refused whole is exit 1, after the summary
        name, err = report.failed[0]
        more = f" (and {len(report.failed) - 1} more file(s))" if len(report.failed) > 1 else ""
        others = "; the other files were ingested" if report.files_ingested else ""
        fail(f"{err if name in err else f'{name}: {err}'}{more}; see `lakehouse ingest-log {table}` and `lakehouse rejects {table}`"
             f"{others}")


@click.command("ingest-log")
@click.argument("table")
@click.option("--source", type=click.Path(file_okay=False), default=None, help="Only this landing directory.")
@format_option()
@click.pass_obj
@handle_errors
def ingest_log(obj: Ctx, table: str, source: str | None, fmt: str | None) -> None:
    """Every file ingest has seen for TABLE, in the order seen, with its status."""
    entries = obj.lakehouse.ingest_log(table, source)

    def text() -> None:
        if not entries:
            click.echo(f"{table}: no files ingested yet")
            return
        # a batch is a load's, a producer's insert or an ingest of a landing directory: numbered
        # per source, so the source and the kind tell them apart
        text_table(("source", "batch", "file", "implied_time", "status", "rows", "rejected", "error"),
                   ([e["source"], "-" if e["batch"] is None else f"{e['kind']} {e['batch']}",
                     os.path.basename(e["file"]), format_timestamp(e["implied_time"]) if e["implied_time"] else "-",
                     e["status"], e["rows"], e["rows_rejected"], e["error"] or ""] for e in entries),
                   right={"rows", "rejected"})

    emit_records(obj.fmt(fmt), entries, INGEST_LOG_KEYS, text)


@click.command()
@click.argument("table")
@click.option("--limit", type=int, default=None, help="Show at most this many (newest).")
@format_option()
@click.pass_obj
@handle_errors
def rejects(obj: Ctx, table: str, limit: int | None, fmt: str | None) -> None:
    """List TABLE's rejected rows and files with reasons."""
    import datetime as dt

    rows = obj.lakehouse.rejects(table)
    if limit is not None:
        rows = rows[-limit:] if limit > 0 else []
    lateness = obj.lakehouse.definition(table).stream.allowed_lateness
    docs = [{"source": r["source"], "line": r["line"], "reason": r["reason"], "record": r["record"], "at": r["at"],
             "load_id": r.get("load_id"), "producer": r.get("producer"), "bound": r.get("bound"),
             # late_row: ``bound`` is the limit the row broke, the producer's bound minus the lateness
             "producer_bound": (r["bound"] + dt.timedelta(milliseconds=lateness.millis)
                                if r.get("bound") is not None and lateness is not None else None),
             "allowed_lateness": str(lateness) if r.get("bound") is not None and lateness is not None else None}
            for r in rows]

    def text() -> None:
        if not docs:
            click.echo(f"{table}: no rejects")
            return
        for d in docs:
            where = f"{d['source']}:{d['line']}" if d["line"] is not None else f"{d['source']} (whole file)"
            why = d["reason"]
            if d["bound"] is not None:  # late_row: who broke which limit, and how it follows from the bound
                why += f" (producer {d['producer']}: earlier than {format_timestamp(d['bound'])}"
                if d["producer_bound"] is not None:
                    why += (f" = its bound {format_timestamp(d['producer_bound'])} minus stream.allowed_lateness "
                            f"{d['allowed_lateness']}")
                why += ")"
            click.echo(f"{format_timestamp(d['at'])}  {where}  {why}" + (f"  [{d['load_id']}]" if d["load_id"] else ""))
            if d["record"]:  # a long record is cut, and says so
                click.echo(f"    {d['record'][:200]}" + (" ..." if len(d["record"]) > 200 else ""))

    emit_records(obj.fmt(fmt), docs, REJECT_KEYS, text)
