"""What every command receives: the root options and the project they open (``Ctx``), and the
parsers of values typed on the command line (timestamps, days, durations)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import click

from lakehouse.settings import spark_master

if TYPE_CHECKING:
    from lakehouse.durations import Duration
    from lakehouse.project import Lakehouse


class Ctx:
    """The root group's options, and the project opened on first use (commands that need no
    project, such as ``bench``, never open one)."""

    def __init__(self, project: str | None, warehouse: str | None, master: str | None, fmt: str | None,
                 remote: str | None = None, conf: tuple[str, ...] = ()) -> None:
        self.project = project
        """--project, or None (then LAKEHOUSE_PROJECT, then the current directory)."""
        self.warehouse = warehouse
        """--warehouse, or None (then LAKEHOUSE_WAREHOUSE, then <project>/warehouse)."""
        self.master = master
        """--master, or None (then LAKEHOUSE_MASTER, then local[*])."""
        self.remote = remote
        """--remote, or None (then LAKEHOUSE_REMOTE, then the project's server when one runs)."""
        self.conf = conf
        """--conf's Spark settings (``spark.KEY=VALUE``), over the project's and the environment's."""
        self.global_format = fmt
        """The root group's --format, or None."""
        self._lh: Lakehouse | None = None

    @property
    def lakehouse(self) -> Lakehouse:
        """The project (settings resolved from the options, the environment and the defaults)."""
        if self._lh is None:
            from lakehouse.project import Lakehouse
            from lakehouse.settings import Settings

            self._lh = Lakehouse(Settings.resolve(self.project, self.warehouse, self.master, remote=self.remote,
                                                     conf=self.conf))
        return self._lh

    @property
    def spark_master(self) -> str:
        """The Spark master URL this invocation uses."""
        return spark_master(self.master)

    def fmt(self, local: str | None) -> str:
        """The output format: the command's --format, else the root group's, else text."""
        f = local or self.global_format or "text"
        return "text" if f == "table" else f


def parse_now(value: str | None) -> dt.datetime | None:
    """An ISO 8601 timestamp option (``--now``, ``--bound``) as an aware UTC datetime; None stays None."""
    if value is None:
        return None
    from lakehouse.records import BadValue, parse_timestamp

    try:
        return parse_timestamp(value)
    except BadValue:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 timestamp (e.g. 2026-11-20T10:15:00Z)") from None


def parse_day(value: str) -> dt.date:
    """A UTC day option (``YYYY-MM-DD`` or ``YYYYMMDD``)."""
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(value, fmt).date()
        except ValueError:
            pass
    raise click.BadParameter(f"{value!r} is not a day (YYYY-MM-DD)")


def parse_duration(value: str, option: str) -> Duration:
    """A duration option (``30s``, ``7d``); a bad one is a usage error naming ``option``."""
    from lakehouse.durations import Duration

    try:
        return Duration.parse(value)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=option) from None
