"""The ``jobs`` group: scheduled archive, compaction and VACUUM jobs (``run`` once, ``serve``,
``history``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from lakehouse.cli.context import Ctx, parse_duration, parse_now
from lakehouse.cli.output import emit_records, field_text, format_option, handle_errors
from lakehouse.output import format_timestamp, text_table

HISTORY_KEYS = ("run_id", "job", "table", "started", "ended", "seconds", "outcome", "attempt", "terminal", "rows",
                "files_before", "files_after", "bytes_before", "bytes_after", "error", "trigger", "host", "pid",
                "detail")
"""The fields of a job run in ``jobs history`` (the CSV header)."""
PLAN_KEYS = ("error", "cutoff", "previous_cutoff", "days", "rows", "files_before", "bytes_before", "files",
             "vector_files", "staging", "removed_files", "removed_bytes", "notes")
"""The fields of a job's plan that a dry run's text line shows."""
OUTCOME_KEYS = ("job", "table", "due", "why", "next_due", "last_outcome", "last_started", "ran", "outcome", "attempts",
                "error", "busy", "plan", "result")
"""The fields of a job's outcome in ``jobs run`` (the CSV header starts with these; a plan's or a
result's fields follow as ``plan.<field>``, ``result.<field>``)."""


@click.group()
def jobs() -> None:
    """Scheduled archive, compaction and VACUUM jobs (run once, serve, history)."""


def outcome_line(o: dict[str, Any]) -> str:
    """One job's outcome in a round (``as_dict`` of a runner outcome) as a line of text."""
    from lakehouse.jobs.compact import human_bytes

    head = f"{o['table']:<16} {o['job']:<16}"
    if o["busy"]:
        return f"{head} busy: {o['busy']}"
    if o["ran"]:
        r = o["result"] or {}
        text = f"{head} {o['outcome']} ({o['attempts']} attempt{'s' if o['attempts'] != 1 else ''})"
        if o["error"]:
            return f"{text}: {o['error']}"
        counts = ("rows", "files_before", "files_after", "bytes_before", "bytes_after")
        did = [f"{k} {field_text(k, v)}" for k, v in r.items() if v not in (None, [], {}) and k not in counts]
        if "files_before" in r:  # as `jobs history` shows the attempt
            did.append(f"rows {r['rows']}, files {r['files_before']}->{r['files_after']}, "
                       f"bytes {human_bytes(r['bytes_before'])}->{human_bytes(r['bytes_after'])}")
        return f"{text}: {', '.join(did)}" if did else text
    if o["plan"] is not None:
        would = ", ".join(f"{k} {field_text(k, v)}" for k, v in o["plan"].items()
                          if v not in (None, [], {}, 0) and k in PLAN_KEYS)
        return f"{head} due: {o['why']}; would: {would or 'nothing'}"
    return f"{head} {'due' if o['due'] else 'not due'}: {o['why']}"


@jobs.command("run")
@click.option("--table", default=None, help="Only this table.")
@click.option("--now", default=None, help="The clock for this round (ISO 8601; replays and tests).")
@click.option("--dry-run", is_flag=True, help="Print each job, why it is due or not, and what it would touch.")
@format_option()
@click.pass_obj
@handle_errors
def jobs_run(obj: Ctx, table: str | None, now: str | None, dry_run: bool, fmt: str | None) -> None:
    """Run once whatever is due, then exit (safe to call from cron every minute)."""
    outcomes = [o.as_dict() for o in obj.lakehouse.jobs_run(table, now=parse_now(now), dry_run=dry_run)]

    def text() -> None:
        for o in outcomes:
            click.echo(outcome_line(o))

    emit_records(obj.fmt(fmt), outcomes, OUTCOME_KEYS, text)
    if any(o["ran"] and o["outcome"] != "succeeded" for o in outcomes):
        sys.exit(1)


@jobs.command("serve")
@click.option("--table", default=None, help="Only this table.")
@click.option("--poll", default="30s", help="Look for due jobs at least this often (a duration; default 30s).")
@format_option(refuse=("json", "csv"), why="it logs each round on stderr until stopped; see jobs history")
@click.pass_obj
@handle_errors
def jobs_serve(obj: Ctx, table: str | None, poll: str, fmt: str | None) -> None:
    """Run jobs on time until SIGTERM or Ctrl-C (which finish the running job, then exit 0; a
    second Ctrl-C aborts)."""
    from lakehouse.jobs.runner import serve

    every = parse_duration(poll, "--poll").seconds

    def show(outcomes: list[Any]) -> None:
        for o in outcomes:
            d = o.as_dict()
            if d["ran"] or d["busy"]:
                click.echo(outcome_line(d), err=True)

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

    def text() -> None:
        if not runs:
            click.echo("no job has run yet")
            return
        text_table(("started", "job", "table", "outcome", "try", "secs", "rows", "files", "bytes", "error"),
                   ([format_timestamp(r["started"].replace(microsecond=0)), r["job"], r["table"], r["outcome"], r["attempt"],
                     f"{r['seconds']:.1f}", r["rows"], f"{r['files_before']}->{r['files_after']}",
                     f"{human_bytes(r['bytes_before'])}->{human_bytes(r['bytes_after'])}", r["error"] or ""]
                    for r in runs),
                   right={"try", "secs", "rows", "files", "bytes"})

    emit_records(obj.fmt(fmt), runs, HISTORY_KEYS, text)
