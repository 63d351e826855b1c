"""Commands that check the data: ``verify`` (the same checks on Spark and DuckDB, compared) and
``check`` (a table's Great Expectations suite and the built-in invariants, or their history)."""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.context import Ctx, parse_day
from lakehouse.cli.output import emit, emit_records, fail, format_option, handle_errors
from lakehouse.output import dumps, format_timestamp

HISTORY_KEYS = ("at", "run_id", "scope", "day", "check", "kind", "ok", "unexpected_count", "observed", "trigger")
"""The fields of a recorded check result in ``check --history`` (the CSV header starts with these)."""
VERIFY_KEYS = ("table", "check", "ok", "detail")
"""The fields of every check of ``verify`` (its CSV columns ``checks.<field>`` start with these)."""
CHECK_KEYS = ("name", "kind", "ok", "observed", "unexpected_count", "sample", "detail")
"""The fields of every check of ``check`` (its CSV columns ``checks.<field>`` start with these)."""


def _mark(ok: bool) -> str:
    """A check's verdict as a coloured mark (colours only on a terminal)."""
    return click.style("ok  ", fg="green") if ok else click.style("FAIL", fg="red")


@click.command()
@click.argument("table", required=False)
@format_option()
@click.pass_obj
@handle_errors
def verify(obj: Ctx, table: str | None, fmt: str | None) -> None:
    """Run the same checks on Spark and DuckDB and compare; exit 1 on any difference."""
    checks = obj.lakehouse.verify(table)
    ok = all(c.ok for c in checks)

    def text() -> None:
        for c in checks:
            click.echo(f"{_mark(c.ok)} {c.table}: {c.name}" + (f": {c.detail}" if c.detail else ""))

    emit(obj.fmt(fmt), {"ok": ok, "checks": [c.as_dict() for c in checks]}, text, table="checks", keys=VERIFY_KEYS)
    if not ok:
        bad = [c for c in checks if not c.ok]
        fail(f"verify: {bad[0].table}: {bad[0].name}: {bad[0].detail}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


@click.command()
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
        _check_history(obj, table, check_name, f)
        return
    report = obj.lakehouse.check(table, scope, parse_day(day) if day else None, docs=not no_docs)

    def text() -> None:
        for c in report.checks:
            extra = "" if c.ok else (f": {c.unexpected_count} unexpected" if c.unexpected_count is not None else "")
            sample = "" if c.ok or not c.sample else f"; e.g. {dumps(c.sample[:3])}"
            click.echo(f"{_mark(c.ok)} {c.name}{extra}{sample}" + (f" ({c.detail})" if c.detail and not c.ok else ""))

    emit(f, report.as_dict(), text, table="checks", keys=CHECK_KEYS)
    if report.docs:  # stdout holds the JSON or CSV alone
        click.echo(f"Data Docs: {report.docs}", err=f != "text")
    if not report.ok:
        bad = report.failed
        fail(f"check {table}: {bad[0].name} failed" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


TREND = 30
"""Results per check ``check --history`` marks in its trend line (the newest)."""


def _at(r: dict[str, Any]) -> str:
    return format_timestamp(r["at"].replace(microsecond=0))


def _check_history(obj: Ctx, table: str, check_name: str | None, fmt: str) -> None:
    """``check --history``: every recorded result of TABLE's checks (or of one), oldest first."""
    rows = obj.lakehouse.check_history(table, check_name)
    by_check: dict[str, list[dict[str, Any]]] = {}
    numbered = []
    for r in rows:  # oldest first: each check's results in order, numbered, with the one before
        mine = by_check.setdefault(r["check"], [])
        mine.append({**r, "n": len(mine) + 1, "previous_ok": mine[-1]["ok"] if mine else None})
        numbered.append(mine[-1])

    def text() -> None:
        if not rows:
            click.echo(f"no quality results recorded for {table} yet (run lakehouse check {table})")
            return
        for name, results in by_check.items():
            failed = [r for r in results if not r["ok"]]
            marks = ["ok" if r["ok"] else "FAIL" for r in results[-TREND:]]
            click.echo(f"{name}: {len(results)} result(s), {len(failed)} failed")
            click.echo("  trend, oldest to newest: " + ("... " if len(results) > TREND else "") + " ".join(marks))
            last = results[-1]
            click.echo(f"  last: {'ok' if last['ok'] else 'FAIL'} at {_at(last)} (scope {last['scope']})")
            if failed:
                f = failed[-1]
                n = "" if f["unexpected_count"] is None else f", {f['unexpected_count']} unexpected"
                click.echo(f"  last failure: {_at(f)} (scope {f['scope']}{n})")

    keys = (*HISTORY_KEYS, "n", "previous_ok", "sample", "detail")
    emit_records(fmt, [{k: r[k] for k in keys} for r in numbered], keys, text)
