"""The change feed (``lakehouse.stream.changes``) in Spark: a Python data source,
``lakehouse_changes``, read as a stream (``read_stream``: offsets are release numbers, so a query
resumes from its checkpoint at the release after the last it took) or as a batch between two
releases (``read_changes``). Each task reads whole releases (the files their commits added),
with Arrow, in Spark's Python workers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from lakehouse.stream.changes import CommittedRelease, Releases, Shape, read_release
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.definitions import TableDefinition

NAME = "lakehouse_changes"
RELEASES_PER_TASK = 16
"""Releases one task reads (a backlog of many small releases is not one task each)."""


class ReleaseBatch(InputPartition):  # noqa: N801 - a partition: a few releases
    """A task's releases, as plain dicts (pickled to the worker)."""


class ChangesSource(DataSource):
    """``spark.readStream.format("lakehouse_changes")``: options ``warehouse``, ``shape`` (the
    table's ``Shape`` as JSON), ``start`` (a release number) and, for a batch, ``end``."""

    @classmethod
    def name(cls) -> str:
        """The format's name."""
        return NAME

    def schema(self) -> str:
        """The table's visible columns and the feed's."""
        return Shape.from_json(self.options["shape"]).ddl()

    def reader(self, schema: Any) -> DataSourceReader:
        """Releases ``start`` to ``end``, once."""
        return BatchReader(dict(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        """The releases as they are committed, from ``start``."""
        return StreamReader(dict(self.options))


class _Reading:
    def __init__(self, options: dict[str, str]) -> None:
        self.shape = Shape.from_json(options["shape"])
        self.warehouse = options["warehouse"]
        self.start = int(options.get("start") or 1)
        """The first release to read (positions were checked by the caller)."""
        self.end = int(options["end"]) if options.get("end") else None

        self._releases: Releases | None = None

    @property
    def paths(self) -> TablePaths:
        return TablePaths(self.warehouse, self.shape.table)

    @property
    def releases(self) -> Releases:
        """The table's releases, kept from call to call (Spark keeps a stream's reader on its
        driver): live's commit files are read once each."""
        if self._releases is None:
            self._releases = Releases(self.paths)
        return self._releases

    def tasks(self, after: int, upto: int) -> list[InputPartition]:
        found = [dataclasses.asdict(r) for r in self.releases.between(after, upto)]
        return [ReleaseBatch(found[i:i + RELEASES_PER_TASK]) for i in range(0, len(found), RELEASES_PER_TASK)]

    def rows(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for doc in partition.value:
            yield from read_release(self.shape, self.paths, CommittedRelease(**doc)).to_batches()


class BatchReader(_Reading, DataSourceReader):
    """Releases ``start`` to ``end`` (inclusive)."""

    def partitions(self) -> Sequence[InputPartition]:
        """Every release of the span, a few per task."""
        end = self.releases.latest() if self.end is None else self.end
        return self.tasks(self.start - 1, end) or [ReleaseBatch([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of a task's releases."""
        return self.rows(partition)


class StreamReader(_Reading, DataSourceStreamReader):
    """Offsets ``{"release": N}``: everything up to release N was read."""

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        """Before release ``start``."""
        return {"release": self.start - 1}

    def latestOffset(self) -> dict:  # noqa: N802 - Spark's name
        """The last release committed."""
        return {"release": max(self.releases.latest(), self.start - 1)}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The releases after ``start`` up to ``end``, a few per task."""
        return self.tasks(int(start["release"]), int(end["release"]))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of a task's releases."""
        return self.rows(partition)

    def commit(self, end: dict) -> None:
        """Nothing to let go: the releases stay in the table."""


def options(warehouse: str, definition: TableDefinition, start: int, end: int | None = None) -> dict[str, str]:
    """The data source's options for a table's feed from release ``start`` (to ``end``)."""
    opts = {"warehouse": warehouse, "shape": Shape.of(definition).to_json(), "start": str(int(start))}
    if end is not None:
        opts["end"] = str(int(end))
    return opts


def register(spark: SparkSession) -> None:
    """Make ``lakehouse_changes`` known to a session (again: harmless)."""
    spark.dataSource.register(ChangesSource)


def read_stream(spark: SparkSession, warehouse: str, definition: TableDefinition, start: int) -> DataFrame:
    """A streaming DataFrame of the table's feed from release ``start``."""
    register(spark)
    return spark.readStream.format(NAME).options(**options(warehouse, definition, start)).load()


def read_changes(spark: SparkSession, warehouse: str, definition: TableDefinition, start: int, end: int) -> DataFrame:
    """A DataFrame of the table's feed, releases ``start`` to ``end``."""
    register(spark)
    return spark.read.format(NAME).options(**options(warehouse, definition, start, end)).load()
