"""lakehouse: a storage layer for event-time fact tables on Delta Lake."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.project import Lakehouse

__version__ = "0.1.0"


def open(project: Any = None, warehouse: str | None = None, master: str | None = None) -> "Lakehouse":  # noqa: A001
    """A project over its warehouse (flags > LAKEHOUSE_* environment > defaults), as the CLI sees it."""
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    return Lakehouse(Settings.resolve(project, warehouse, master))
