"""A table of a project as the Python API hands it out (``lh.table("clicks")``): its producers,
its stream's state, and the Structured Streaming sink into it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakehouse.ingest.producer import Producer


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
        ``watermark``: the query's watermark is the producer's bound. The producer must be
        attached (``producer(name).attach()``) and detached when the query ends; ``write_stream``
        does both, and renews its lease while the query is idle."""
        from lakehouse.ingest.sink import BatchWriter

        return BatchWriter(self.lakehouse.settings.warehouse, self.definition, producer, checkpoint, watermark)

    def stream(self, now: Any = None) -> dict[str, Any]:
        """The stream's state (bound, watermark, staged rows, producers)."""
        return self.lakehouse.stream_status(self.name, now)
