"""The command line: a thin click layer over ``lakehouse.project.Lakehouse``.

Exit 0 on success, 1 on an error (one ``error: ...`` line on stderr), 2 on a usage error.
With ``--format json`` stdout holds exactly one JSON document; logs go to stderr.

One module a command group, each registered on the root group ``cli`` here:
project (migrate, tables), load (load, ingest, ingest-log, rejects), query, archive (archive,
vectors, lookup), maintenance (optimize, vacuum), jobs, stream (producer, stream), quality
(verify, check), lateness, bench, demo, server (start, stop, status). Their output goes through ``lakehouse.cli.output``.
Commands import heavy modules (pyspark, the project) only when they run, so that start-up and
``--help`` stay quick; none stops the process's Spark session, so the group can also run in-process
(click's CliRunner) beside other work.
"""

from __future__ import annotations

import logging
import sys

import click

from lakehouse.cli import (
    archive,
    bench,
    demo,
    erase,
    jobs,
    lateness,
    load,
    maintenance,
    project,
    quality,
    query,
    server,
    stream,
)
from lakehouse.cli.context import Ctx
from lakehouse.cli.output import FORMATS
from lakehouse.settings import default_spark_log_level


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project", type=click.Path(file_okay=False), default=None, help="Project folder (default: current directory; LAKEHOUSE_PROJECT).")
@click.option("--warehouse", default=None, help="Warehouse path or URI (default: <project>/warehouse; LAKEHOUSE_WAREHOUSE).")
@click.option("--master", default=None, help="Spark master URL (default: local[*]; LAKEHOUSE_MASTER).")
@click.option("--remote", default=None, metavar="sc://HOST:PORT",
              help="A Spark Connect server to run on (default: the project's server when one runs; LAKEHOUSE_REMOTE).")
@click.option("--conf", "conf", multiple=True, metavar="spark.KEY=VALUE",
              help="A Spark setting (repeatable; over [tool.lakehouse.spark] and LAKEHOUSE_SPARK_CONF).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format for any command (commands also take their own --format).")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
@click.version_option(package_name="lakehouse")
@click.pass_context
def cli(ctx: click.Context, project: str | None, warehouse: str | None, master: str | None,
        remote: str | None, conf: tuple[str, ...], fmt: str | None, verbose: int) -> None:
    """lakehouse: event-time fact tables on Delta Lake (Spark), verified by DuckDB."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if verbose:
        default_spark_log_level("WARN" if verbose == 1 else "INFO")
    from lakehouse.errors import ConfigError
    from lakehouse.settings import parse_spark_conf

    try:
        parse_spark_conf(list(conf), "--conf")
    except ConfigError as e:
        raise click.BadParameter(str(e).removeprefix("--conf: "), param_hint="--conf") from None
    ctx.obj = Ctx(project, warehouse, master, fmt, remote, conf)


for command in (
    project.migrate, project.tables,
    load.load, load.ingest, load.ingest_log, load.rejects,
    query.query,
    archive.archive, archive.vectors, archive.lookup,
    maintenance.optimize, maintenance.vacuum,
    erase.delete,
    jobs.jobs,
    stream.producer, stream.stream,
    quality.verify, quality.check,
    lateness.lateness,
    bench.bench,
    demo.demo,
    server.server,
):
    cli.add_command(command)


def main() -> None:
    """Console entry point (``lakehouse``, ``python -m lakehouse.cli``).

    When the command is done the process ends as Python would, without tearing down its modules
    one by one: non-daemon threads are joined and atexit handlers run (logging, temporary folders,
    the Spark session's), the standard streams are flushed, then ``os._exit``. With pyspark,
    pandas and Great Expectations imported that tear-down alone took about half a second of
    every command (issue 25). An exception other than SystemExit ends the process the usual way.

    While the project's command host runs (lakehouse.cli.host), the command runs there instead:
    this process hands it over, waits, and ends as the command ended."""
    from lakehouse.cli import host

    hosted = host.forward(sys.argv[1:])
    if hosted is not None:
        host.exit_as(hosted)
    try:
        cli(prog_name="lakehouse")
        code: object = 0
    except SystemExit as e:
        code = e.code
    _exit(code)


def _exit(code: object) -> None:
    import atexit
    import os
    import threading

    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what interpreter exit does first
    atexit._run_exitfuncs()
    for out in (sys.stdout, sys.stderr):
        try:
            out.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing left to say
            pass
    os._exit(code)
