"""A table of a project as the Python API hands it out (``lh.table("clicks")``): its producers,
its stream's state, and the Structured Streaming sink into it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakehouse.ingest.producer import Producer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


class Table:
    """A table of a project (``lh.table(name)``)."""

    def __init__(self, lakehouse: Any, name: str) -> None:
        self.lakehouse = lakehouse
        self.name = name
        self.definition = lakehouse.definition(name)

    def producer(self, name: str, bound: Any = None, clock: Callable[[], int] | None = None) -> Producer:
        """Producer ``name`` of this table (``clock``: a fixed clock in micros, for replays and tests)."""
        return Producer(self.lakehouse.spark, self.lakehouse.settings.warehouse, self.definition, name,
                        clock=clock, bound=bound)

    def write_stream(self, df: Any, producer: str, checkpoint: str, trigger: dict[str, Any] | None = None,
                     query_name: str | None = None, watermark: bool | None = None) -> Any:
        """Start a Structured Streaming query writing the streaming DataFrame ``df`` into this
        table, each micro-batch one insert of ``producer``, exactly once across crashes and
        restarts from ``checkpoint`` (its checkpointLocation); the query's watermark is the
        producer's bound (see ``lakehouse.ingest.sink``). Returns the ``StreamingQuery``."""
        from lakehouse.ingest.sink import write_stream

        return write_stream(df, self.lakehouse.settings.warehouse, self.definition, producer, checkpoint,
                            trigger=trigger, query_name=query_name, watermark=watermark)

    def foreach_batch(self, producer: str, checkpoint: str, watermark: bool = False) -> Any:
        """The function for ``df.writeStream.foreachBatch(...)`` of one's own query (give it the
        same ``checkpointLocation``): batch N is ``producer``'s insert keyed by (query id, N);
        ``watermark``: the query's watermark is the producer's bound. It attaches the producer at
        its first batch; detach it when the query ends (``producer(name).detach()``):
        ``write_stream`` does that, and renews its lease while the query is idle."""
        from lakehouse.ingest.sink import BatchWriter

        return BatchWriter(self.lakehouse.settings.warehouse, self.definition, producer, checkpoint, watermark)

    # -- the change feed (lakehouse.stream.changes) ------------------------------------------------

    def changes(self, start: Any = None, end: Any = None) -> "pa.Table":
        """The rows releases ``start`` to ``end`` put into the table (release numbers or times,
        inclusive; None: from the first the feed can still read, to the last), each once with its release, release time,
        the table's watermark then and its producer (``_lh_*`` columns); read with Arrow, no Spark."""
        from lakehouse.stream import changes

        return changes.read(self.definition, self._paths, start, end)

    def read_changes(self, start: Any = None, end: Any = None) -> "DataFrame":
        """``changes`` as a Spark DataFrame (read by Spark's tasks, a few releases each)."""
        from lakehouse.stream import changes
        from lakehouse.stream.changes_spark import read_changes

        first, last = changes.span(self._paths, start, end)
        return read_changes(self.lakehouse.spark(), self.lakehouse.settings.warehouse, self.definition, first, last)

    def read_stream(self, start: Any = "earliest") -> "DataFrame":
        """The table's change feed as a streaming DataFrame: every release from ``start`` (a
        release number, a time, ``"earliest"`` or ``"latest"``: the next release), then each
        release as it is committed (``"earliest"``: the first the feed can still read, within live's
        log retention and VACUUM's); a query restarted from its checkpoint goes on after the last
        release it took. Archiving and compaction are not changes; a key released again is a
        new row (its ``_lh_release`` is later)."""
        from lakehouse.stream import changes
        from lakehouse.stream.changes_spark import read_stream

        found = changes.Releases(self._paths)
        if start in (None, "earliest"):
            first = found.earliest()
        elif start == "latest":
            first = found.latest() + 1
        else:
            first = changes.position(found, start)
        return read_stream(self.lakehouse.spark(), self.lakehouse.settings.warehouse, self.definition, first)

    @property
    def _paths(self) -> Any:
        return self.lakehouse.paths(self.name)

    def stream(self, now: Any = None) -> dict[str, Any]:
        """The stream's state (bound, watermark, staged rows, producers)."""
        return self.lakehouse.stream_status(self.name, now)
