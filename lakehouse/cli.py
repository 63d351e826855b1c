"""The command line: a thin click layer over ``lakehouse.project.Lakehouse``.

Exit 0 on success, 1 on an error (one ``error: ...`` line on stderr), 2 on a usage error.
With ``--format json`` stdout holds exactly one JSON document; logs go to stderr.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from lakehouse import output
from lakehouse.errors import LakehouseError

F = TypeVar("F", bound=Callable[..., Any])
OUTPUTS = ("text", "table", "json", "csv")


class Ctx:
    def __init__(self, project: str | None, warehouse: str | None, master: str | None, fmt: str | None) -> None:
        self._args = (project, warehouse, master)
        self.global_format = fmt
        self._lh: Any = None

    @property
    def lakehouse(self) -> Any:
        if self._lh is None:
            from lakehouse.project import Lakehouse
            from lakehouse.settings import Settings

            self._lh = Lakehouse(Settings.resolve(*self._args))
        return self._lh

    def fmt(self, local: str | None) -> str:
        f = local or self.global_format or "text"
        return "text" if f == "table" else f


def handle_errors(fn: F) -> F:
    """Turn lakehouse errors into one ``error:`` line and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LakehouseError as e:
            _fail(str(e))
        except KeyboardInterrupt:
            _fail("interrupted")
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as e:  # noqa: BLE001 - the last line of defence: one line, exit 1
            if os.environ.get("LAKEHOUSE_DEBUG"):
                raise
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            _fail(f"unexpected {type(e).__name__}: {msg} (set LAKEHOUSE_DEBUG=1 for the traceback)")

    return wrapper  # type: ignore[return-value]


def _fail(message: str) -> None:
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(1)


def _emit_json(doc: Any) -> None:
    click.echo(output.dumps(doc))


def _emit_rows(fmt: str, docs: list[dict[str, Any]], keys: tuple[str, ...] = ()) -> bool:
    """Print a list of records as JSON or CSV (header ``keys`` when there are no rows) when
    asked; False for text (the caller prints)."""
    if fmt == "json":
        _emit_json(docs)
        return True
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        keys = tuple(docs[0]) if docs else keys
        w.writerow(keys)
        for d in docs:
            w.writerow(["" if d[k] is None else output.text_value(d[k]) for k in keys])
        click.echo(buf.getvalue(), nl=False)
        return True
    return False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project", type=click.Path(file_okay=False), default=None, help="Project folder (default: current directory; LAKEHOUSE_PROJECT).")
@click.option("--warehouse", default=None, help="Warehouse path or URI (default: <project>/warehouse; LAKEHOUSE_WAREHOUSE).")
@click.option("--master", default=None, help="Spark master URL (default: local[*]; LAKEHOUSE_MASTER).")
@click.option("--format", "fmt", type=click.Choice(["text", "table", "json", "csv"]), default=None,
              help="Output format for any command (commands also take their own --format).")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
@click.version_option(package_name="lakehouse")
@click.pass_context
def cli(ctx: click.Context, project: str | None, warehouse: str | None, master: str | None,
        fmt: str | None, verbose: int) -> None:
    """lakehouse: event-time fact tables on Delta Lake (Spark), verified by DuckDB."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if verbose and "LAKEHOUSE_LOG_LEVEL" not in os.environ:
        os.environ["LAKEHOUSE_LOG_LEVEL"] = "WARN" if verbose == 1 else "INFO"
    ctx.obj = Ctx(project, warehouse, master, fmt)


def format_option(choices: tuple[str, ...] = OUTPUTS) -> Callable[[F], F]:
    return click.option("--format", "fmt", type=click.Choice(choices), default=None, help="Output format.")


# -- migrate ----------------------------------------------------------------------------------

@cli.command()
@click.option("--status", is_flag=True, help="List applied and pending migrations; change nothing.")
@click.option("--dry-run", is_flag=True, help="Print what would be applied; change nothing.")
@format_option()
@click.pass_obj
@handle_errors
def migrate(obj: Ctx, status: bool, dry_run: bool, fmt: str | None) -> None:
    """Apply pending migrations (migrations/NNNN_<slug>.py) in order."""
    lh = obj.lakehouse
    if status:
        st = lh.migration_status()
        drift = []
        for d in lh.definitions().values():
            from lakehouse.physical import drift as drift_of

            drift.extend(drift_of(d, lh.paths(d.name)))
        doc = {
            "applied": [a.name for a in st.applied],
            "pending": [m.name for m in st.pending],
            "changed": st.changed,
            "drift": drift if not st.pending else [],
        }
        if obj.fmt(fmt) == "json":
            _emit_json(doc)
        else:
            for a in st.applied:
                click.echo(f"applied  {a.name}  {output.format_timestamp(a.applied_at)}  {a.checksum[:12]}")
            for m in st.pending:
                click.echo(f"pending  {m.name}")
            for c in st.changed:
                click.echo(f"CHANGED  {c}")
            for d in doc["drift"]:
                click.echo(f"DRIFT    {d}")
            if not st.applied and not st.pending:
                click.echo("no migrations in migrations/")
        if st.changed:
            sys.exit(1)
        return
    result = lh.migrate(dry_run=dry_run)
    doc = {"applied": result.applied, "pending": result.pending}
    if result.drift:
        doc["drift"] = result.drift
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
    else:
        if dry_run:
            click.echo("would apply: " + (", ".join(result.pending) or "nothing (up to date)"))
        else:
            for name in result.applied:
                click.echo(f"applied {name}")
            if not result.applied:
                click.echo("up to date: no pending migrations")
    if result.drift:
        _fail(f"the warehouse does not match tables/ after migrating: {result.drift[0]}"
              + (f" (and {len(result.drift) - 1} more; see `lakehouse migrate --status`)" if len(result.drift) > 1 else ""))


# -- tables -----------------------------------------------------------------------------------

@cli.command()
@format_option()
@click.pass_obj
@handle_errors
def tables(obj: Ctx, fmt: str | None) -> None:
    """List tables and their state."""
    states = obj.lakehouse.tables()
    if _emit_rows(obj.fmt(fmt), [s.as_dict() for s in states]):
        return
    if not states:
        click.echo("no tables defined in tables/")
        return
    click.echo(f"{'table':<20} {'live_rows':>10} {'archive_rows':>12} {'rejects':>8} {'waiting':>8}  {'cutoff':<32} "
               f"{'watermark':<20} state")
    for s in states:
        cutoff = "-" if s.cutoff is None else f"{s.cutoff} ({output.format_timestamp(_cutoff_dt(s.cutoff))})"
        state = "ok" if s.created else "not created (run lakehouse migrate)"
        if s.last_error:
            e = s.last_error
            state = (f"archive failing at {e.get('step')} ({e.get('failures', 1)}x since {e.get('since')}): "
                     f"{e.get('error')}")
        mark = output.format_timestamp(s.watermark) if s.watermark else "-"
        if s.staged:
            state += f"; {s.staged} rows staged"
        click.echo(f"{s.name:<20} {s.live_rows:>10} {s.archive_rows:>12} {s.rejects:>8} {s.waiting_rows:>8}  {cutoff:<32} "
                   f"{mark:<20} {state}")


# -- load -------------------------------------------------------------------------------------

@cli.command()
@click.argument("table")
@click.argument("files", nargs=-1, required=True)
@click.option("--input-format", "input_format", type=click.Choice(["csv", "json", "parquet"]), default=None,
              help="Input file format (default: from each file's extension; .gz allowed).")
@click.option("--force", is_flag=True, help="Load files whose content was loaded before (default: skip them).")
@format_option()
@click.pass_obj
@handle_errors
def load(obj: Ctx, table: str, files: tuple[str, ...], input_format: str | None, force: bool,
         fmt: str | None) -> None:
    """Upsert rows from FILES into TABLE's live store; bad rows go to rejects. A file whose
    content was already loaded is skipped (like COPY INTO) unless --force."""
    result = obj.lakehouse.load(table, list(files), input_format, force=force)
    doc = result.as_dict()
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
    elif obj.fmt(fmt) == "csv":
        _emit_rows("csv", [{k: v for k, v in doc.items() if not isinstance(v, list)}])
    else:
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
    if result.files_rejected_now:
        first = result.files_rejected_now[0]
        others = " (the other files were loaded)" if result.rows_loaded else ""
        _fail(f"{first.error}; the file is in `lakehouse rejects {table}`{others}")


# -- ingest -----------------------------------------------------------------------------------

@cli.command()
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
    """Load files from a landing directory in implied-time order, exactly once."""
    import signal
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
                        console=console, transient=True, disable=not console.is_terminal)
    tasks: dict[int, Any] = {}

    def on_start(batch: Any, blocks: int) -> None:
        tasks[batch.number] = progress.add_task(f"batch {batch.number}: {len(batch.files)} file(s)", total=blocks)

    def on_batch(r: Any) -> None:
        if r.number in tasks:
            progress.update(tasks[r.number], completed=r.blocks)
            progress.remove_task(tasks.pop(r.number))
        if obj.fmt(fmt) != "json":
            progress.console.print(
                f"batch {r.number}: {len(r.files) - len(r.failed)} file(s), {r.rows} rows, {r.rows_rejected} rejected"
                + (f", {len(r.failed)} failed" if r.failed else "") + (" (finished after a crash)" if r.recovered else "")
                + f" in {r.seconds:.1f}s", highlight=False)

    with progress:
        report = obj.lakehouse.ingest(table, source, watch=(mode == "watch"), drain=drain, dry_run=dry_run,
                                      stop=stop, on_batch=on_batch, on_start=on_start, producer=producer_name)
    if obj.fmt(fmt) == "json":
        _emit_json(report.to_json())
        return
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


@cli.command("ingest-log")
@click.argument("table")
@click.option("--source", type=click.Path(file_okay=False), default=None, help="Only this landing directory.")
@format_option()
@click.pass_obj
@handle_errors
def ingest_log(obj: Ctx, table: str, source: str | None, fmt: str | None) -> None:
    """Every file ingest has seen for TABLE, in the order seen, with its status."""
    entries = obj.lakehouse.ingest_log(table, source)
    if _emit_rows(obj.fmt(fmt), entries, ("file", "implied_time", "status", "rows", "rows_rejected", "batch",
                                          "error")):
        return
    if not entries:
        click.echo(f"{table}: no files ingested yet")
        return
    click.echo(f"{'file':<40} {'implied_time':<21} {'status':<9} {'rows':>8} {'rejected':>8} {'batch':>6}  error")
    for e in entries:
        click.echo(f"{os.path.basename(e['file']):<40} {output.format_timestamp(e['implied_time']) if e['implied_time'] else '-':<21} "
                   f"{e['status']:<9} {e['rows']:>8} {e['rows_rejected']:>8} {e['batch'] if e['batch'] is not None else '-':>6}"
                   f"  {e['error'] or ''}")


# -- rejects ----------------------------------------------------------------------------------

@cli.command()
@click.argument("table")
@click.option("--limit", type=int, default=None, help="Show at most this many (newest).")
@format_option()
@click.pass_obj
@handle_errors
def rejects(obj: Ctx, table: str, limit: int | None, fmt: str | None) -> None:
    """List TABLE's rejected rows and files with reasons."""
    rows = obj.lakehouse.rejects(table)
    if limit is not None:
        rows = rows[-limit:] if limit > 0 else []
    docs = [{"source": r["source"], "line": r["line"], "reason": r["reason"], "record": r["record"], "at": r["at"],
             "producer": r.get("producer"), "bound": r.get("bound")} for r in rows]
    if _emit_rows(obj.fmt(fmt), docs, ("source", "line", "reason", "record", "at", "producer", "bound")):
        return
    if not docs:
        click.echo(f"{table}: no rejects")
        return
    for d in docs:
        where = f"{d['source']}:{d['line']}" if d["line"] is not None else f"{d['source']} (whole file)"
        why = d["reason"]
        if d["bound"] is not None:  # late_row: who broke which bound
            why += f" (producer {d['producer']}, below its bound {output.format_timestamp(d['bound'])})"
        click.echo(f"{output.format_timestamp(d['at'])}  {where}  {why}")
        if d["record"]:
            click.echo(f"    {d['record'][:200]}")


# -- lateness ---------------------------------------------------------------------------------

@cli.command()
@click.argument("table")
@click.option("--days", type=click.IntRange(min=1), default=None,
              help="Only rows of the last N days of event time (and rows rejected in them).")
@click.option("--fraction", type=click.FloatRange(min=0, max=1, min_open=True), default=0.999, show_default=True,
              help="The share of rows the suggested archive delay keeps out of the late path.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw a histogram of lateness per source into this PNG file.")
@format_option()
@click.pass_obj
@handle_errors
def lateness(obj: Ctx, table: str, days: int | None, fraction: float, plot: str | None, fmt: str | None) -> None:
    """How late TABLE's rows arrive (load time - event time: percentiles, per source); rows loaded
    below the archive cutoff (the late path) and how long they waited; rows rejected late; the
    smallest archive delay that keeps --fraction of the rows out of the late path."""
    from lakehouse.lateness.core import human

    prof = obj.lakehouse.lateness(table, fraction=fraction, days=days)
    if plot:
        from lakehouse.lateness.plot import write_png

        write_png(prof, plot)
    doc = prof.as_dict()
    f = obj.fmt(fmt)
    if f == "json":
        _emit_json(doc)
        return
    keys = ("source", "rows", *doc["lateness"], "late_path", "rejected_late")
    lines = [{"source": "(all)", "rows": doc["rows"], **doc["lateness"], "late_path": doc["late_path"]["rows"],
              "rejected_late": doc["rejected_late"]["rows"]}]
    lines += [{"source": s["source"], "rows": s["rows"], **s["lateness"], "late_path": s["late_path"],
               "rejected_late": s["rejected_late"]} for s in doc["sources"]]
    if _emit_rows(f, lines, keys):  # csv: one line per source (seconds)
        return
    window = f" with event time since {output.format_timestamp(doc['since'])}" if doc["since"] else ""
    click.echo(f"{table}: {doc['rows']} rows{window}; lateness = load time - event time"
               + (f"; {doc['rows_without_load_time']} rows loaded before load times were recorded (left out)"
                  if doc["rows_without_load_time"] else ""))
    pct = [k for k in doc["lateness"]]
    width = max([len("source"), *(len(str(x["source"])) for x in lines)])
    click.echo(f"{'source':<{width}} {'rows':>9} " + " ".join(f"{k:>8}" for k in pct) + f" {'late path':>10} {'rejected late':>14}")
    for x in lines:
        click.echo(f"{x['source']:<{width}} {x['rows']:>9} " + " ".join(f"{human(x[k]):>8}" for k in pct)
                   + f" {x['late_path']:>10} {x['rejected_late']:>14}")
    lp = doc["late_path"]
    if lp["rows"]:
        w = lp["wait"]
        click.echo(f"late path: {lp['rows']} rows ({lp['share']:.2%}) were loaded below the archive cutoff: "
                   f"{lp['archived']} merged into the archive after waiting p50 {human(w['p50'])}, p90 {human(w['p90'])}, "
                   f"max {human(w['max'])}; {lp['waiting']} still waiting in live"
                   + (f" (longest {human(lp['waiting_longest'])})" if lp["waiting"] else ""))
    else:
        click.echo("late path: no row was loaded below the archive cutoff")
    rj = doc["rejected_late"]
    click.echo(f"rejected late: {rj['rows']} rows" + (" (" + ", ".join(f"{k}: {v}" for k, v in rj["by_producer"].items()) + ")"
                                                      if rj["rows"] else ""))
    d = doc["delay"]
    if d["suggested"] is None:
        click.echo(f"archive.delay {d['current']}: no rows with a load time to suggest another")
    else:
        click.echo(f"archive.delay {d['current']} covers {d['current_covers']:.2%} of the rows; {fraction:.4g} of them "
                   f"need {human(d['needed_seconds'])}: suggested archive.delay {d['suggested']}"
                   + ("" if d["change"] == "same" else f" ({d['change']} than now)"))
    if plot:
        click.echo(f"histogram written to {plot}")


# -- streams ----------------------------------------------------------------------------------

_NOW_HELP = "The clock for this operation (ISO 8601; replays and tests)."


def _producer_doc(obj: Ctx, table: str, name: str, now: str | None) -> dict[str, Any]:
    status = obj.lakehouse.stream_status(table, _parse_now(now))
    mine = next((p for p in status["producers"] if p["name"] == name), None)
    return {"table": table, "producer": name, **(mine or {"attached": False}),
            "stream_bound": status["bound"], "watermark": status["watermark"], "stream_staged": status["staged"]}


def _print_producer(obj: Ctx, fmt: str | None, doc: dict[str, Any], did: str) -> None:
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    if obj.fmt(fmt) == "csv":
        _emit_rows("csv", [doc])
        return
    ts = output.format_timestamp
    click.echo(f"{doc['table']}: producer {doc['producer']!r} {did}; its bound "
               f"{ts(doc['bound']) if doc.get('bound') else 'undefined'}, "
               f"{doc.get('staged', 0)} rows staged; stream bound "
               f"{ts(doc['stream_bound']) if doc['stream_bound'] else 'undefined'}, watermark "
               f"{ts(doc['watermark']) if doc['watermark'] else 'undefined'}")


@cli.group()
@click.argument("table")
@click.argument("name")
@click.pass_context
def producer(ctx: click.Context, table: str, name: str) -> None:
    """Producer NAME of TABLE: attach, insert rows, assert bounds, heartbeat, detach.

    Rows enter live in event-time order: a producer's rows wait (staged) until every attached
    producer's bound has passed them. A row earlier than max(stream bound, the producer's bound)
    minus stream.allowed_lateness is rejected late_row."""
    ctx.obj = (ctx.obj, table, name)


def _producer_op(fn: F) -> F:
    @click.option("--now", default=None, help=_NOW_HELP)
    @format_option()
    @click.pass_obj
    @handle_errors
    @functools.wraps(fn)
    def wrapper(obj: tuple[Ctx, str, str], *args: Any, now: str | None, fmt: str | None, **kw: Any) -> Any:
        ctx, table, name = obj
        from lakehouse.ingest.producer import check_name

        check_name(name)
        at = _parse_now(now)
        if at is not None:
            import datetime as dt

            if at > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1):
                _fail(f"{table}: producer {name!r}: --now {now} is ahead of the clock; a lease renewed "
                      "in the future would hold the watermark long after the producer is gone")
        p = ctx.lakehouse.producer(table, name, at)
        did, extra = fn(p, *args, **kw)
        doc = _producer_doc(ctx, table, name, now)
        doc.update(extra)
        _print_producer(ctx, fmt, doc, did)
        if extra.get("insert", {}).get("error"):
            _fail(extra["insert"]["error"])

    return wrapper  # type: ignore[return-value]


@producer.command("attach")
@click.option("--bound", "bound", default=None, help="Assert this bound on attaching (ISO 8601).")
@_producer_op
def producer_attach(p: Any, bound: str | None) -> tuple[str, dict[str, Any]]:
    """Attach (at the stream's bound, or --bound if later); attaching again renews the lease."""
    p.attach(_parse_now(bound))
    return "attached", {}


@producer.command("insert")
@click.argument("files", nargs=-1, required=True)
@click.option("--input-format", "input_format", type=click.Choice(["csv", "json", "parquet"]), default=None,
              help="Input file format (default: from each file's extension; .gz allowed).")
@click.option("--force", is_flag=True, help="Insert files whose content this producer inserted before.")
@_producer_op
def producer_insert(p: Any, files: tuple[str, ...], input_format: str | None, force: bool) -> tuple[str, dict[str, Any]]:
    """Insert the rows of FILES (one batch); late rows and bad rows go to rejects."""
    r = p.insert_files(list(files), input_format, force=force)
    d = r.as_dict()
    if r.files_rejected_now:  # printed with the rest, then exit 1 (as `load`)
        first = r.files_rejected_now[0]
        d["error"] = f"{first.error}; the file is in `lakehouse rejects {p.definition.name}`"
    return (f"inserted {d['rows_loaded']} rows ({d['rows_late']} late, {d['rows_rejected']} rejected in all)"
            + "".join(f"; {f.source}: skipped: {f.skipped}" for f in r.files_skipped), {"insert": d})


@producer.command("bound")
@click.argument("ts")
@_producer_op
def producer_bound(p: Any, ts: str) -> tuple[str, dict[str, Any]]:
    """Promise that no later row of this producer is earlier than TS."""
    p.bound(_parse_now(ts))
    return f"asserted bound {ts}", {}


@producer.command("heartbeat")
@_producer_op
def producer_heartbeat(p: Any) -> tuple[str, dict[str, Any]]:
    """Renew the producer's lease (it keeps holding the watermark)."""
    p.heartbeat()
    return "renewed its lease", {}


@producer.command("detach")
@_producer_op
def producer_detach(p: Any) -> tuple[str, dict[str, Any]]:
    """Detach: the producer stops holding the watermark; its staged rows go when it passes them."""
    p.detach()
    return "detached", {}


@cli.command()
@click.argument("table")
@click.option("--events", is_flag=True, help="List attach/detach/expiry/bound/insert/release events instead.")
@click.option("--now", default=None, help=_NOW_HELP)
@format_option()
@click.pass_obj
@handle_errors
def stream(obj: Ctx, table: str, events: bool, now: str | None, fmt: str | None) -> None:
    """TABLE's stream: its bound, watermark, staged rows and producers (or --events)."""
    ts = output.format_timestamp
    if events:
        docs = obj.lakehouse.stream_events(table)
        if _emit_rows(obj.fmt(fmt), docs, ("kind", "at", "producer", "bound", "rows", "rejected", "detail")):
            return
        if not docs:
            click.echo(f"{table}: no stream events")
        for d in docs:
            extra = [f"bound {ts(d['bound'])}" if d["bound"] else "",
                     f"{d['rows']} rows" if d["rows"] is not None else "",
                     f"{d['rejected']} late" if d["rejected"] else "", d["detail"] or ""]
            click.echo(f"{ts(d['at'])}  {d['kind']:<8} {d['producer'] or '-':<20} {'; '.join(x for x in extra if x)}")
        return
    doc = obj.lakehouse.stream_status(table, _parse_now(now))
    doc.pop("table", None)
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    if obj.fmt(fmt) == "csv":
        _emit_rows("csv", doc["producers"], ("name", "bound", "staged", "lease_expires", "rejected", "attached",
                                            "holding"))
        return
    click.echo(f"{table}: bound {ts(doc['bound']) if doc['bound'] else 'undefined'}, watermark "
               f"{ts(doc['watermark']) if doc['watermark'] else 'undefined'}, {doc['staged']} rows staged")
    for p in doc["producers"]:
        state = "holding" if p["holding"] else ("attached, lease expired" if p["attached"] else "detached")
        click.echo(f"  {p['name']}: {state}; bound {ts(p['bound']) if p['bound'] else 'undefined'}, "
                   f"{p['staged']} staged, {p['rejected']} rejected late"
                   + (f", lease until {ts(p['lease_expires'])}" if p["lease_expires"] else ""))


# -- query ------------------------------------------------------------------------------------

@cli.command()
@click.argument("sql", required=False)
@click.option("--file", "sql_file", type=click.Path(dir_okay=False), default=None, help="Read the SQL from a file.")
@click.option("--engine", type=click.Choice(["spark", "duckdb"]), default="spark", show_default=True)
@click.option("--as-of", "as_of", metavar="VERSION|TS", default=None,
              help="Read the tables as they were: at a timestamp (ISO 8601, UTC without an offset), or at "
                   "archive version N of the one table the query reads.")
@format_option()
@click.pass_obj
@handle_errors
def query(obj: Ctx, sql: str | None, sql_file: str | None, engine: str, as_of: str | None, fmt: str | None) -> None:
    """Run one read-only Spark SQL statement over all tables (each table is a view under its name).

    SELECT, WITH, VALUES, SHOW, DESCRIBE and EXPLAIN only. Both engines print the same JSON for
    the same SQL, or DuckDB refuses the construct by name (then use --engine spark).
    With --as-of, each table the query reads is its split view at that moment (the archive and
    cutoff committed then, and live as it was); text output notes the versions on stderr.
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
    pinned = None
    if as_of is not None:
        pinned = obj.lakehouse.as_of(sql, as_of)
        if f == "text":
            click.echo(pinned.describe(), err=True)
    result = obj.lakehouse.query(sql, engine, as_of=pinned)  # type: ignore[arg-type]
    if f == "json":
        _emit_json(result.to_pylist())
    elif f == "csv":
        click.echo(output.csv_text(result), nl=False)
    else:
        output.print_table(result)


# -- archiving ---------------------------------------------------------------------------------

def _parse_now(value: str | None) -> Any:
    if value is None:
        return None
    from lakehouse.records import BadValue, parse_timestamp

    try:
        return parse_timestamp(value)
    except BadValue:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 timestamp (e.g. 2026-11-20T10:15:00Z)") from None


def _parse_day(value: str) -> Any:
    import datetime as dt

    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(value, fmt).date()
        except ValueError:
            pass
    raise click.BadParameter(f"{value!r} is not a day (YYYY-MM-DD)")


@cli.command()
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
    result = obj.lakehouse.archive(table, now=_parse_now(now), dry_run=dry_run, allow_future=allow_future)
    plan = result.plan
    if dry_run:
        if obj.fmt(fmt) == "json":
            _emit_json(plan.as_dict())
            return
        if plan.no_watermark:
            click.echo(f"{table}: nothing to do: {plan.notes[0]}")
            return
        if not plan.advances:
            click.echo(f"{table}: nothing to do: cutoff {plan.cutoff} is not above the current cutoff {plan.previous_cutoff}")
            return
        click.echo(f"{table}: would move the cutoff {plan.previous_cutoff} -> {plan.cutoff} "
                   f"({output.format_timestamp(_cutoff_dt(plan.cutoff))}) from live version {plan.live_version}")
        click.echo(f"  {plan.rows} live rows ({plan.late_rows} late) into {len(plan.days)} day(s), "
                   f"merged with {plan.archive_rows_in_days} archived rows: {', '.join(d.isoformat() for d in plan.days) or '-'}")
        return
    doc = result.as_dict()
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    if plan.no_watermark:
        click.echo(f"{table}: nothing to do: {plan.notes[0]}")
        return
    if not plan.advances:
        click.echo(f"{table}: nothing to do: the new cutoff {plan.cutoff} is not above the current cutoff {plan.previous_cutoff}"
                   + (f" (clock: bound; watermark {output.format_timestamp(plan.watermark)})" if plan.watermark else "")
                   + (f" (recovered: purged {result.recovered_rows} rows)" if result.recovered_rows else ""))
        return
    click.echo(f"{table}: cutoff {plan.previous_cutoff} -> {plan.cutoff} ({output.format_timestamp(_cutoff_dt(plan.cutoff))}); "
               f"{result.rows_archived} rows archived into {len(plan.days)} day(s), {result.rows_purged} purged from live, "
               f"{result.vector_files} vector files, {result.seconds:.1f}s"
               + (f"; {len(plan.reencode_days)} day(s) archived under other settings re-sorted and re-encoded"
                  if plan.reencode_days else ""))


@cli.command()
@click.argument("table")
@click.option("--day", default=None, help="Only this UTC day (YYYY-MM-DD).")
@click.option("--dry-run", is_flag=True, help="Print which days would be compacted and why; change nothing.")
@format_option()
@click.pass_obj
@handle_errors
def optimize(obj: Ctx, table: str, day: str | None, dry_run: bool, fmt: str | None) -> None:
    """Compact a table: bin-pack live's small files; rewrite archive days into files of the target
    size in their sorted order (vector files stay valid). Reports files and bytes before and after."""
    from lakehouse.jobs.compact import human_bytes

    p = obj.lakehouse.optimize(table, day=_parse_day(day) if day else None, dry_run=dry_run)
    if obj.fmt(fmt) == "json":
        _emit_json(p.as_dict())
        return
    if p.empty:
        skipped = "; ".join(f"{d}: {w}" for d, w in p.archive.skipped.items())
        click.echo(f"{table}: nothing to compact (target file size {human_bytes(p.target)})"
                   + (f"; archive days skipped: {skipped}" if skipped else ""))
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
    for d, w in p.archive.skipped.items():
        click.echo(f"{table}/archive: skipped {d}: {w}")
    if not dry_run and p.archive.days:
        click.echo(f"{table}: vector files unchanged ({p.seconds:.1f}s)")


@cli.command()
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
    from lakehouse.durations import Duration
    from lakehouse.jobs.compact import human_bytes

    try:
        keep = Duration.parse(retain) if retain is not None else None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--retain") from None
    v = obj.lakehouse.vacuum(table, retain=keep, dry_run=dry_run, force=force)
    if obj.fmt(fmt) == "json":
        _emit_json(v.as_dict())
        return
    doc = v.as_dict()
    verb = "would delete" if dry_run else "deleted"
    parts = ", ".join(f"{k} {n}" for k, n in doc["files"].items())
    click.echo(f"{table}: {verb} {doc['removed_files']} files ({human_bytes(doc['removed_bytes'])}) older than "
               f"{doc['retain']}: data files {parts}; {doc['vector_files']} vector files; "
               f"{len(doc['staging'])} staging folders"
               + (f"; sources busy, skipped: {', '.join(doc['busy_sources'])}" if doc["busy_sources"] else ""))


@cli.group()
def jobs() -> None:
    """Scheduled archive, compaction and VACUUM jobs (run once, serve, history)."""


def _outcome_line(o: dict[str, Any]) -> str:
    head = f"{o['table']:<16} {o['job']:<16}"
    if o["busy"]:
        return f"{head} busy: {o['busy']}"
    if o["ran"]:
        r = o["result"] or {}
        text = f"{head} {o['outcome']} ({o['attempts']} attempt{'s' if o['attempts'] != 1 else ''})"
        if o["error"]:
            return f"{text}: {o['error']}"
        return f"{text}: " + ", ".join(f"{k} {v}" for k, v in r.items() if v not in (None, [], {}))
    if o["plan"] is not None:
        return f"{head} due: {o['why']}; would: " + ", ".join(
            f"{k} {v}" for k, v in o["plan"].items() if v not in (None, [], {}, 0) and k in _PLAN_KEYS)
    return f"{head} {'due' if o['due'] else 'not due'}: {o['why']}"


_PLAN_KEYS = ("error", "cutoff", "previous_cutoff", "days", "rows", "files_before", "bytes_before", "files",
              "vector_files", "staging", "removed_files", "removed_bytes", "notes")


@jobs.command("run")
@click.option("--table", default=None, help="Only this table.")
@click.option("--now", default=None, help="The clock for this round (ISO 8601; replays and tests).")
@click.option("--dry-run", is_flag=True, help="Print each job, why it is due or not, and what it would touch.")
@format_option()
@click.pass_obj
@handle_errors
def jobs_run(obj: Ctx, table: str | None, now: str | None, dry_run: bool, fmt: str | None) -> None:
    """Run once whatever is due, then exit (safe to call from cron every minute)."""
    outcomes = [o.as_dict() for o in obj.lakehouse.jobs_run(table, now=_parse_now(now), dry_run=dry_run)]
    if obj.fmt(fmt) == "json":
        _emit_json(outcomes)
    else:
        for o in outcomes:
            click.echo(_outcome_line(o))
    if any(o["ran"] and o["outcome"] != "succeeded" for o in outcomes):
        sys.exit(1)


@jobs.command("serve")
@click.option("--table", default=None, help="Only this table.")
@click.option("--poll", default="30s", help="Look for due jobs at least this often (a duration; default 30s).")
@click.pass_obj
@handle_errors
def jobs_serve(obj: Ctx, table: str | None, poll: str) -> None:
    """Run jobs on time until SIGTERM or Ctrl-C (which finish the running job, then exit 0; a
    second Ctrl-C aborts)."""
    from lakehouse.durations import Duration
    from lakehouse.jobs.runner import serve

    try:
        every = Duration.parse(poll).seconds
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--poll") from None

    def show(outcomes: list[Any]) -> None:
        for o in outcomes:
            d = o.as_dict()
            if d["ran"] or d["busy"]:
                click.echo(_outcome_line(d), err=True)

    sys.exit(serve(obj.lakehouse, poll=max(1.0, every), table=table, on_round=show))


@jobs.command("history")
@click.option("--table", default=None, help="Only this table.")
@click.option("--job", "job", default=None, type=click.Choice(["archive", "compact_live", "compact_archive", "vacuum"]),
              help="Only this job.")
@format_option()
@click.pass_obj
@handle_errors
def jobs_history(obj: Ctx, table: str | None, job: str | None, fmt: str | None) -> None:
    """Every job run: job, table, start, end, outcome, attempt, rows and files touched, bytes
    before/after, error."""
    from lakehouse.jobs.compact import human_bytes

    runs = [r.as_dict() for r in obj.lakehouse.jobs_history(table) if job is None or r.job == job]
    keys = ("run_id", "job", "table", "started", "ended", "seconds", "outcome", "attempt", "terminal", "rows",
            "files_before", "files_after", "bytes_before", "bytes_after", "error", "trigger", "host", "pid", "detail")
    if _emit_rows(obj.fmt(fmt), runs, keys):
        return
    if not runs:
        click.echo("no job has run yet")
        return
    click.echo(f"{'started':<21} {'job':<16} {'table':<16} {'outcome':<10} {'try':>3} {'secs':>7} {'rows':>9} "
               f"{'files':>11} {'bytes':>19}  error")
    for r in runs:
        click.echo(f"{output.format_timestamp(r['started'])[:20]:<21} {r['job']:<16} {r['table']:<16} {r['outcome']:<10} "
                   f"{r['attempt']:>3} {r['seconds']:>7.1f} {r['rows']:>9} "
                   f"{str(r['files_before']) + '->' + str(r['files_after']):>11} "
                   f"{human_bytes(r['bytes_before']) + '->' + human_bytes(r['bytes_after']):>19}  {r['error'] or ''}")


def _cutoff_dt(cutoff: int) -> Any:
    from lakehouse.archive.plan import cutoff_time

    return cutoff_time(cutoff)


@cli.command()
@click.argument("table")
@click.option("--day", required=True, help="The archive day (YYYY-MM-DD).")
@click.option("--column", required=True, help="The column.")
@click.option("--limit", type=int, default=None, help="Show at most this many runs or values.")
@format_option()
@click.pass_obj
@handle_errors
def vectors(obj: Ctx, table: str, day: str, column: str, limit: int | None, fmt: str | None) -> None:
    """A day's vector file for a column, decoded."""
    dv = obj.lakehouse.vectors(table, _parse_day(day), column)
    rows = dv.table.to_pylist() if dv.encoded else dv.table.column("value").to_pylist()
    if limit is not None:
        rows = rows[:limit]
    doc: dict[str, Any] = {"file": dv.file, "cutoff": dv.cutoff}
    doc["runs" if dv.encoded else "values"] = rows
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    click.echo(f"{dv.file}  (cutoff {dv.cutoff}, {'run-length encoded' if dv.encoded else 'plain'}, "
               f"{dv.table.num_rows} {'runs' if dv.encoded else 'values'})")
    if dv.encoded:
        click.echo(f"{'value':>24} {'null':>5} {'count':>10} {'accumulative':>12}")
        for r in rows:
            click.echo(f"{output.text_value(r['value']):>24} {int(r['null']):>5} {r['count']:>10} {r['accumulative_count']:>12}")
    else:
        for v in rows:
            click.echo(output.text_value(v))


@cli.command()
@click.argument("table")
@click.option("--day", required=True, help="The archive day (YYYY-MM-DD).")
@click.option("--where", "where", multiple=True, required=True,
              help="COLUMN=VALUE on a prefix of the sort columns (repeatable; NULL for the null run).")
@format_option()
@click.pass_obj
@handle_errors
def lookup(obj: Ctx, table: str, day: str, where: tuple[str, ...], fmt: str | None) -> None:
    """The record range of an archive day matching equalities, by binary search on the vectors."""
    res = obj.lakehouse.lookup(table, _parse_day(day), list(where))
    r = res.range
    doc = {"start": r.start, "end": r.end, "count": r.count}
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    click.echo(f"records [{r.start}, {r.end}): {r.count} matching ({res.touched} vector entries read, "
               f"cutoff {res.cutoff})")


@cli.command()
@click.argument("table", required=False)
@format_option()
@click.pass_obj
@handle_errors
def verify(obj: Ctx, table: str | None, fmt: str | None) -> None:
    """Run the same checks on Spark and DuckDB and compare; exit 1 on any difference."""
    checks = obj.lakehouse.verify(table)
    ok = all(c.ok for c in checks)
    if obj.fmt(fmt) == "json":
        _emit_json({"ok": ok, "checks": [c.as_dict() for c in checks]})
    else:
        for c in checks:
            mark = click.style("ok  ", fg="green") if c.ok else click.style("FAIL", fg="red")
            click.echo(f"{mark} {c.table}: {c.name}" + (f": {c.detail}" if c.detail else ""))
    if not ok:
        bad = [c for c in checks if not c.ok]
        _fail(f"verify: {bad[0].table}: {bad[0].name}: {bad[0].detail}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


@cli.command()
@click.argument("table")
@click.option("--scope", type=click.Choice(["all", "live", "archive"]), default="all", show_default=True,
              help="all: the split view (each row once); live or archive: that table.")
@click.option("--day", default=None, help="Only this UTC day (YYYY-MM-DD).")
@click.option("--history", "show_history", is_flag=True, help="Show the recorded results instead (a trend).")
@click.option("--check", "check_name", default=None, help="With --history: only this check.")
@click.option("--no-docs", is_flag=True, help="Do not rebuild the Data Docs.")
@format_option()
@click.pass_obj
@handle_errors
def check(obj: Ctx, table: str, scope: str, day: str | None, show_history: bool, check_name: str | None,
          no_docs: bool, fmt: str | None) -> None:
    """Data-quality checks: the table's Great Expectations suite (quality: in its YAML) and the
    built-in invariants; exit 1 when a check fails."""
    f = obj.fmt(fmt)
    if show_history:
        rows = obj.lakehouse.check_history(table, check_name)
        keys = ("at", "run_id", "scope", "day", "check", "kind", "ok", "unexpected_count", "observed", "trigger")
        if _emit_rows(f, [{k: r[k] for k in (*keys, "sample", "detail")} for r in rows], keys):
            return
        if not rows:
            click.echo(f"no quality results recorded for {table} yet (run lakehouse check {table})")
            return
        click.echo(f"{'at':<21} {'scope':<8} {'ok':<5} {'unexpected':>10}  check")
        for r in rows:
            n = "" if r["unexpected_count"] is None else str(r["unexpected_count"])
            click.echo(f"{output.format_timestamp(r['at'])[:20]:<21} {r['scope']:<8} {'ok' if r['ok'] else 'FAIL':<5} "
                       f"{n:>10}  {r['check']}")
        return
    report = obj.lakehouse.check(table, scope, _parse_day(day) if day else None, docs=not no_docs)
    if f == "json":
        _emit_json(report.as_dict())
    else:
        for c in report.checks:
            mark = click.style("ok  ", fg="green") if c.ok else click.style("FAIL", fg="red")
            extra = "" if c.ok else (f": {c.unexpected_count} unexpected" if c.unexpected_count is not None else "")
            sample = "" if c.ok or not c.sample else f"; e.g. {output.dumps(c.sample[:3])}"
            click.echo(f"{mark} {c.name}{extra}{sample}" + (f" ({c.detail})" if c.detail and not c.ok else ""))
    if report.docs:
        click.echo(f"Data Docs: {report.docs}", err=f == "json")
    if not report.ok:
        bad = report.failed
        _fail(f"check {table}: {bad[0].name} failed" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


# -- bench ------------------------------------------------------------------------------------

def _emit_bench(fmt: str, doc: dict[str, Any]) -> None:
    """A benchmark's figures: JSON, or one line a figure (a case's figures indented under it)."""
    if fmt == "json":
        _emit_json(doc)
        return
    for k, v in doc.items():
        if isinstance(v, dict):
            click.echo(k)
            for k2, v2 in v.items():
                click.echo(f"  {k2:<32} {v2}")
        else:
            click.echo(f"{k:<34} {v}")


@cli.group()
def bench() -> None:
    """Benchmarks that compare against a baseline in the same run."""


@bench.command("archive")
@click.option("--rows", type=int, default=1_000_000, show_default=True)
@click.option("--days", type=int, default=5, show_default=True)
@format_option()
@click.pass_obj
@handle_errors
def bench_archive_cmd(obj: Ctx, rows: int, days: int, fmt: str | None) -> None:
    """Archive ROWS generated trips vs a plain sorted Delta write of the same rows."""
    from lakehouse.bench import bench_archive

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    doc = bench_archive(master, rows, days)
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    for k, v in doc.items():
        click.echo(f"{k:<38} {v}")


@bench.command("backfill")
@click.option("--rows", type=int, default=200_000, show_default=True)
@click.option("--days", type=int, default=2500, show_default=True)
@format_option()
@click.pass_obj
@handle_errors
def bench_backfill_cmd(obj: Ctx, rows: int, days: int, fmt: str | None) -> None:
    """A backfill of DAYS days archived in one run vs a plain sorted, partitioned Delta write."""
    from lakehouse.bench import bench_backfill

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    doc = bench_backfill(master, rows, days)
    if obj.fmt(fmt) == "json":
        _emit_json(doc)
        return
    for k, v in doc.items():
        click.echo(f"{k:<38} {v}")


@bench.command("ingest")
@click.option("--small-files", type=int, default=1000, show_default=True)
@click.option("--small-rows", type=int, default=1000, show_default=True, help="Rows per small file.")
@click.option("--big-mb", type=int, default=1024, show_default=True, help="Size of the big file (MB).")
@click.option("--blocks-per-batch", type=int, default=256, show_default=True)
@format_option()
@click.pass_obj
@handle_errors
def bench_ingest_cmd(obj: Ctx, small_files: int, small_rows: int, big_mb: int, blocks_per_batch: int,
                     fmt: str | None) -> None:
    """Ingest many small files and one big file vs Spark's file streaming source (availableNow)."""
    from lakehouse.bench import bench_ingest

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    doc = bench_ingest(master, small_files, small_rows, big_mb, blocks_per_batch)
    _emit_bench(obj.fmt(fmt), doc)


@bench.command("stream")
@click.option("--batches", type=int, default=16, show_default=True, help="Batches (hours of event time).")
@click.option("--rows", type=int, default=50_000, show_default=True, help="Rows per batch (split among producers).")
@format_option()
@click.pass_obj
@handle_errors
def bench_stream_cmd(obj: Ctx, batches: int, rows: int, fmt: str | None) -> None:
    """Rows through 1 and 4 producers (insert + release) vs a plain load of the same rows."""
    from lakehouse.bench import bench_stream

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    doc = bench_stream(master, batches, rows)
    _emit_bench(obj.fmt(fmt), doc)


@bench.command("compact")
@click.option("--batches", type=int, default=1000, show_default=True, help="Ingest batches (one small file each).")
@click.option("--rows", type=int, default=200, show_default=True, help="Rows per batch.")
@format_option()
@click.pass_obj
@handle_errors
def bench_compact_cmd(obj: Ctx, batches: int, rows: int, fmt: str | None) -> None:
    """Live's files and bytes before and after optimize on a table of many ingest batches, and
    query times on both engines before (the baseline) and after."""
    from lakehouse.bench import bench_compact

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    _emit_bench(obj.fmt(fmt), bench_compact(master, batches, rows))


@bench.command("open")
@click.option("--commits", type=int, default=2000, show_default=True, help="Commits of the long table.")
@click.option("--rounds", type=int, default=5, show_default=True, help="Opens of each table per engine (median).")
@format_option()
@click.pass_obj
@handle_errors
def bench_open_cmd(obj: Ctx, commits: int, rounds: int, fmt: str | None) -> None:
    """Open a table of COMMITS commits vs the same rows in one commit, on Spark, DuckDB and delta-rs."""
    from lakehouse.bench import bench_open

    master = obj._args[2] or os.environ.get("LAKEHOUSE_MASTER") or "local[*]"
    doc = bench_open(master, commits, rounds)
    _emit_bench(obj.fmt(fmt), doc)


# -- demo -------------------------------------------------------------------------------------

@cli.command()
@click.option("--reset", is_flag=True, help="Empty the warehouse first (it must hold only lakehouse data).")
@click.option("--rows", type=int, default=20_000, show_default=True, help="Trips to generate.")
@click.option("--days", type=int, default=4, show_default=True, help="UTC days of trips.")
@format_option()
@click.pass_obj
@handle_errors
def demo(obj: Ctx, reset: bool, rows: int, days: int, fmt: str | None) -> None:
    """The end-to-end demo on generated trips."""
    from lakehouse.demo import run_demo

    ok = run_demo(obj.lakehouse, reset=reset, rows=rows, days=days)
    if not ok:
        _fail("the engines disagreed on at least one saved query (see above)")


def main() -> None:
    """Console entry point."""
    cli(prog_name="lakehouse")


if __name__ == "__main__":
    main()
