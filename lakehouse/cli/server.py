"""``lakehouse server start|stop|status``: the project's Spark Connect server, which every later
command of the project uses instead of starting Spark itself (lakehouse.spark.server), and beside
it the command host, in which those commands run without importing their libraries again
(lakehouse.cli.host)."""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import emit, format_option, handle_errors
from lakehouse.errors import LakehouseError

KEYS = ("state", "address", "pid", "master", "warehouse", "started", "log", "commands_use", "host")


def _row(state: str, rec: Any, uses: dict[str, Any] | None, host: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"state": state, "address": None, "pid": None, "master": None, "warehouse": None,
                           "started": None, "log": None}
    if rec is not None:
        row.update(address=rec.address, pid=rec.pid, master=rec.master, warehouse=rec.warehouse,
                   started=rec.started, log=rec.log)
    if uses is not None:
        row["commands_use"] = uses["spark"] + (f" ({uses['address']})" if uses.get("address") else "") + (
            f": {uses['why']}" if uses.get("why") else "")
    if host is not None:
        row["host"] = host
    return row


def _emit(fmt: str, row: dict[str, Any], text: str) -> None:
    emit(fmt, row, lambda: click.echo(text), keys=KEYS)


@click.group()
def server() -> None:
    """The project's Spark Connect server: commands connect to it (about a second) instead of
    starting Spark (10-20 s). Loopback only, with a token; one per project."""


@server.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default: a free one).")
@format_option()
@click.pass_obj
@handle_errors
def start(obj: Ctx, port: int | None, fmt: str | None) -> None:
    """Start the server and wait until it answers."""
    from lakehouse.cli import hosting
    from lakehouse.settings import env_flag
    from lakehouse.spark import server as connect_server

    settings = obj.lakehouse.settings
    rec = connect_server.start(settings, port)
    host = "off (LAKEHOUSE_HOST)"
    if env_flag("LAKEHOUSE_HOST", True):
        try:
            host = f"running (pid {hosting.start(settings.project, rec.pid)['pid']})"
        except LakehouseError as e:  # the server serves all the same: commands import their libraries themselves
            host = f"not started: {e}"
            click.echo(f"note: {host}", err=True)
    row = _row("running", rec, None, host)
    _emit(obj.fmt(fmt), row, f"Spark Connect server running on {rec.address} (pid {rec.pid}, master {rec.master}); "
                             f"commands of this project use it; command host: {host}; log: {rec.log}")


@server.command()
@format_option()
@click.pass_obj
@handle_errors
def stop(obj: Ctx, fmt: str | None) -> None:
    """Stop the server (commands start their own Spark again)."""
    from lakehouse.cli import hosting
    from lakehouse.spark import server as connect_server

    hosted = hosting.stop(obj.lakehouse.settings.project)
    rec = connect_server.stop(obj.lakehouse.settings)
    row = _row("stopped" if rec else "not running", rec, None, "stopped" if hosted else "not running")
    _emit(obj.fmt(fmt), row, f"stopped the Spark Connect server on {rec.address} (pid {rec.pid})" if rec
          else "no Spark Connect server runs for this project")


@server.command()
@format_option()
@click.pass_obj
@handle_errors
def status(obj: Ctx, fmt: str | None) -> None:
    """Whether a server runs for the project, and which Spark commands use."""
    from lakehouse.cli import hosting
    from lakehouse.spark import server as connect_server

    settings = obj.lakehouse.settings
    rec = connect_server.read_record(settings.project)
    uses = connect_server.which(settings)
    if rec is None:
        state = "not running"
    else:
        state = "running" if connect_server.problem(rec, settings) is None else "not usable"
    row = _row(state, rec, uses, hosting.status(settings.project))
    lines = [f"server: {state}" + (f" on {rec.address} (pid {rec.pid}, master {rec.master}, since {rec.started})"
                                   if rec is not None else "")]
    if rec is not None:
        lines.append(f"log: {rec.log}")
    lines.append(f"commands use: {row['commands_use']}")
    lines.append(f"command host: {row['host']}")
    _emit(obj.fmt(fmt), row, "\n".join(lines))
