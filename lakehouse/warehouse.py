"""The warehouse's layout: where each table's parts and the warehouse's own tables live.

Layout (fixed by the contract so that any engine can read it)::

    <warehouse>/<table>/live/        Delta, partitioned by event_date
    <warehouse>/<table>/archive/     Delta, partitioned by event_date
    <warehouse>/<table>/vectors/     vector files (archiving)
    <warehouse>/<table>/rejects/     Delta: rejected rows and files with reasons
    <warehouse>/<table>/_staging/    parsed input waiting for its commit (transient)
    <warehouse>/<table>/_ledger/     Delta: the archive's books, one row per archiving run and day
    <warehouse>/_lakehouse/migrations/   Delta: applied migrations with checksums
    <warehouse>/_lakehouse/jobs/         Delta: the jobs history (every attempt of every job)
    <warehouse>/_lakehouse/erasures/     Delta: every delete (what, when, rows per part; never values)
    <warehouse>/_quality/results/        Delta: every quality check result (lakehouse check)
    <warehouse>/_quality/docs/           Great Expectations' Data Docs (index.html)
    <warehouse>/_quality/gx/             Great Expectations' project: suites, validation results
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.storage import join


@dataclass(frozen=True)
class TablePaths:
    """Where one table's parts live in the warehouse."""

    warehouse: str
    name: str

    @property
    def root(self) -> str:
        """``<warehouse>/<table>``: the folder of everything the table has."""
        return join(self.warehouse, self.name)

    @property
    def live(self) -> str:
        """The live Delta table (recent rows, upserted by key)."""
        return join(self.root, "live")

    @property
    def archive(self) -> str:
        """The archive Delta table (older rows, one sorted batch per day)."""
        return join(self.root, "archive")

    @property
    def vectors(self) -> str:
        """The run-length-encoded vector files of archive days."""
        return join(self.root, "vectors")

    @property
    def rejects(self) -> str:
        """The rejects Delta table (rows and files refused, with reasons)."""
        return join(self.root, "rejects")

    @property
    def staging(self) -> str:
        """Parsed input waiting for its commit (transient)."""
        return join(self.root, "_staging")

    @property
    def ledger(self) -> str:
        """The archive's books (Delta)."""
        return join(self.root, "_ledger")

    @property
    def erasure(self) -> str:
        """A delete under way (``lakehouse delete``): its number and request, saved before it
        changes anything and removed once it is finished."""
        return join(self.root, "_state", "erasure.json")


def history_path(warehouse: str) -> str:
    """The Delta table that records applied migrations."""
    return join(warehouse, "_lakehouse", "migrations")
