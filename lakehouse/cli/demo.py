"""The ``demo`` command: the end-to-end demo on generated trips."""

from __future__ import annotations

import click

from lakehouse.cli.context import Ctx
from lakehouse.cli.output import fail, format_option, handle_errors


@click.command()
@click.option("--reset", is_flag=True, help="Empty the warehouse first (it must hold only lakehouse data).")
@click.option("--rows", type=int, default=20_000, show_default=True, help="Trips to generate.")
@click.option("--days", type=int, default=4, show_default=True, help="UTC days of trips.")
@format_option(refuse=("json", "csv"), why="the demo is a narrative for people")
@click.pass_obj
@handle_errors
def demo(obj: Ctx, reset: bool, rows: int, days: int, fmt: str | None) -> None:
    """The end-to-end demo on generated trips."""
    from lakehouse.demo import run_demo

    if not run_demo(obj.lakehouse, reset=reset, rows=rows, days=days):
        fail("the engines disagreed on at least one saved query (see above)")
