"""lakehouse: a storage layer for event-time fact tables on Delta Lake."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.project import Lakehouse

__version__ = "0.1.0"


def open(project: Any = None, warehouse: str | None = None, master: str | None = None,  # noqa: A001
         spark: Any = None) -> "Lakehouse":
    """A project over its warehouse (flags > LAKEHOUSE_* environment > defaults), as the CLI sees it.

    ``spark``: a SparkSession the user built (a notebook's, ``spark-submit``'s, a cluster's) that
    every command runs on; without it, the session active in this process if there is one, else
    lakehouse's own (``Lakehouse.spark``). A session given or found is checked once for Delta
    Lake and UTC (one line naming what it lacks) and never stopped or reconfigured."""
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    return Lakehouse(Settings.resolve(project, warehouse, master), spark=spark)
