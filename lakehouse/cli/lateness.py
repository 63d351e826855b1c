"""The ``lateness`` command: how late a table's rows arrive, and the archive delay that would
keep a given share of them out of the late path."""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import emit, format_option, handle_errors
from lakehouse.output import format_timestamp, text_table


@click.command()
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
    prof = obj.lakehouse.lateness(table, fraction=fraction, days=days)
    if plot:
        from lakehouse.lateness.plot import write_png

        write_png(prof, plot)
    doc = prof.as_dict()
    # one line a source (and one for all), lateness in seconds: the text table
    lines = [{"source": "(all)", "rows": doc["rows"], **doc["lateness"], "late_path": doc["late_path"]["rows"],
              "rejected_late": doc["rejected_late"]["rows"]}]
    lines += [{"source": s["source"], "rows": s["rows"], **s["lateness"], "late_path": s["late_path"],
               "rejected_late": s["rejected_late"]} for s in doc["sources"]]
    source_keys = ("source", "rows", *(f"lateness.{k}" for k in doc["lateness"]), "late_path", "rejected_late")
    emit(obj.fmt(fmt), doc, lambda: _text(table, doc, lines, fraction, plot), table="sources", keys=source_keys)


def _text(table: str, doc: dict[str, Any], lines: list[dict[str, Any]], fraction: float, plot: str | None) -> None:
    """The lateness profile for people: the per-source table, then the late path, the late
    rejects and the suggested archive delay."""
    from lakehouse.lateness.core import human

    window = f" with event time since {format_timestamp(doc['since'])}" if doc["since"] else ""
    click.echo(f"{table}: {doc['rows']} rows{window}; lateness = load time - event time"
               + (f"; {doc['rows_without_load_time']} rows loaded before load times were recorded (left out)"
                  if doc["rows_without_load_time"] else ""))
    pct = list(doc["lateness"])
    text_table(("source", "rows", *pct, "late path", "rejected late"),
               ([x["source"], x["rows"], *(human(x[k]) for k in pct), x["late_path"], x["rejected_late"]]
                for x in lines),
               right={"rows", *pct, "late path", "rejected late"})
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
