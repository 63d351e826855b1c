"""Structured Streaming into a table: each micro-batch is one insert of a producer, exactly once::

    query = lh.table("clicks").write_stream(events, producer="clicks-app", checkpoint="/ck/clicks")

``write_stream`` starts ``events.writeStream.foreachBatch(BatchWriter(...))`` with the checkpoint
given; ``BatchWriter`` is also the function to pass to a ``writeStream`` of one's own (then with
the same ``checkpointLocation``). Per micro-batch ``N``:

- **exactly once**: the batch is the producer's insert with the idempotency key
  (``spark-query:<query id>``, N):
  the query's id is Spark's, kept in ``<checkpoint>/metadata`` (the same across restarts from the
  checkpoint, new with a new checkpoint), as Delta's own ``txnAppId``/``txnVersion`` are used by
  idempotent ``foreachBatch`` writes. The key is saved in the one save that registers the insert,
  so a batch Spark runs again after a crash or a restart is recognised at any point: before the
  save it was never taken, after it its rows are the table's (staged, live or rejects) and the
  replay takes nothing (the check is made again under the stream's lease). Spark only runs its
  last batch again: a lower batch id than the table took means a checkpoint restored or reset,
  refused in one line.
- **bounds**: with a watermark in the query (``withWatermark``), the producer's bound is the
  watermark the batch runs under (``batchWatermarkMs`` of ``<checkpoint>/offsets/N``, which Spark
  writes before running the batch), asserted before the insert, and the batch's rows do not move
  it: rows above it wait staged until a later batch's watermark passes them (or the query stops),
  so the table's watermark follows the pipeline's; rows more than the table's allowed lateness
  behind it go to rejects as ``late_row``. While no batch comes (Spark runs none without new
  data for a query with no state), ``Liveness`` asserts the watermark the next batch would run
  under: the last batch's latest event time less the delay. The watermark must be on the table's
  event time. With no watermark, the batch's latest event time moves the bound (as any insert).
- **liveness**: ``write_stream`` attaches the producer when the query starts, renews its lease
  with every batch and, from a thread of this process, every quarter lease (at most a minute)
  while the query runs, and detaches it when the query stops (or fails). A process that dies leaves
  the producer attached until its lease runs out; the restarted query renews it.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from lakehouse import crashpoints, storage
from lakehouse.errors import InputError, LakehouseError, first_line
from lakehouse.objectstore import is_s3
from lakehouse.storage import join

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from lakehouse.definitions import TableDefinition
    from lakehouse.ingest.load import LoadResult
    from lakehouse.ingest.producer import Producer

log = logging.getLogger(__name__)

KEY_APP = "spark-query:"
"""An idempotency key's app of a streaming query: this, then the query's id."""


def query_id(checkpoint: str) -> str:
    """The id Spark keeps for a streaming query in its checkpoint (``metadata``: ``{"id": ...}``)."""
    path = join(checkpoint, "metadata")
    try:
        doc = json.loads(storage.read_text(path).splitlines()[0])
        return str(doc["id"])
    except FileNotFoundError:
        raise LakehouseError(f"{path}: no such file: is {checkpoint} the query's checkpointLocation?") from None
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise LakehouseError(f"{path}: not a streaming query's metadata: {first_line(e)}") from None


def batch_watermark(checkpoint: str, batch_id: int) -> int:
    """The event-time watermark batch ``batch_id`` runs under, in microseconds (0: none yet), from
    the offsets Spark writes for it before running it (``offsets/<id>``: a version line, then
    ``{"batchWatermarkMs": ..., ...}``)."""
    path = join(checkpoint, "offsets", str(int(batch_id)))
    try:
        lines = storage.read_text(path).splitlines()
        return int(json.loads(lines[1])["batchWatermarkMs"]) * 1000
    except FileNotFoundError:
        raise LakehouseError(f"{path}: no such file: is {checkpoint} the query's checkpointLocation?") from None
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise LakehouseError(f"{path}: not a streaming query's offsets: {first_line(e)}") from None


@dataclasses.dataclass(frozen=True)
class Watermark:
    """A streaming query's event-time watermark: its column and delay (microseconds)."""

    column: str
    delay: int


_UNITS = {"year": 365 * 86_400_000_000, "month": 31 * 86_400_000_000, "week": 7 * 86_400_000_000,
          "day": 86_400_000_000, "hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
          "millisecond": 1_000, "microsecond": 1}
"""Spark's interval units in microseconds (a month as Spark's watermark counts it: 31 days)."""
_CLASSIC = re.compile(r"EventTimeWatermark [^,]*, `?(.+?)`?#\d+: [^,]+, (.+)$", re.M)


def interval_micros(text: str) -> int:
    """A Spark interval string (``10 minutes``, ``1 hours 30 minutes``, ``interval 2 seconds``) in
    microseconds."""
    words = text.lower().replace("interval", " ").replace("'", " ").split()
    if not words or len(words) % 2:
        raise InputError(f"cannot read the watermark delay {text!r}: expected e.g. '10 minutes'")
    total = 0
    for number, unit in zip(words[::2], words[1::2]):
        u = _UNITS.get(unit[:-1] if unit.endswith("s") and unit[:-1] in _UNITS else unit)
        try:
            total += round(float(number) * (u or 0)) if u else int("x")
        except ValueError:
            raise InputError(f"cannot read the watermark delay {text!r}: {number} {unit}?") from None
    return total


def watermarks(df: "DataFrame") -> list[Watermark]:
    """The event-time watermarks a streaming DataFrame defines (``withWatermark``)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:  # classic PySpark: the analysed plan's nodes
        text = jdf.queryExecution().analyzed().toString()
        return [Watermark(c, interval_micros(d)) for c, d in _CLASSIC.findall(text)]
    found, seen = [], set()
    todo = [getattr(df, "_plan", None)]
    while todo:  # Spark Connect: the client's plan, walked
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ == "WithWatermark":
            found.append(Watermark(str(node._event_time), interval_micros(str(node._delay_threshold))))
        for v in vars(node).values():
            kids = v if isinstance(v, (list, tuple)) else [v]
            todo += [k for k in kids if type(k).__module__.startswith("pyspark.sql.connect.plan")]
    return found


def check_checkpoint(checkpoint: Any) -> str:
    """A checkpoint location as the sink and Spark both use it: an absolute local path (``file:``
    URIs too) or an ``s3://`` URI; anything else is refused in one line."""
    if not isinstance(checkpoint, str) or not checkpoint.strip():
        raise InputError(f"bad checkpoint {checkpoint!r}: give the streaming query's checkpoint location "
                         "(a folder path or URI, one per query)")
    if checkpoint.startswith("file:"):
        checkpoint = "/" + checkpoint[len("file:"):].lstrip("/")
    if "://" in checkpoint and not is_s3(checkpoint):
        raise InputError(f"bad checkpoint {checkpoint!r}: lakehouse reads a query's checkpoint on a local path or "
                         "s3://; put it there")
    return storage.absolute(checkpoint)


@dataclasses.dataclass
class BatchWriter:
    """The ``foreachBatch`` function of a table's sink: batch N is producer ``producer``'s insert
    with the key (query id, N). Plain data (it is pickled to a Spark Connect server), the
    producer made on first use from the batch's session."""

    warehouse: str
    definition: "TableDefinition"
    producer: str
    checkpoint: str
    watermark: bool = False
    """The query defines a watermark: it is the producer's bound (else rows move the bound)."""
    batches: int = 0
    duplicates: int = 0

    def __post_init__(self) -> None:
        from lakehouse.ingest.producer import check_name

        check_name(self.producer)
        self.checkpoint = check_checkpoint(self.checkpoint)
        self._app: str | None = None
        self._producer: Producer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_producer",)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._producer = None

    def key(self, batch_id: int) -> tuple[str, int]:
        """Batch ``batch_id``'s idempotency key."""
        if self._app is None:
            self._app = KEY_APP + query_id(self.checkpoint)
        return self._app, int(batch_id)

    def producer_for(self, df: "DataFrame") -> "Producer":
        """The producer, on the session of the query's batches."""
        if self._producer is None:
            from lakehouse.ingest.producer import Producer

            spark = df.sparkSession
            self._producer = Producer(lambda: spark, self.warehouse, self.definition, self.producer)
        return self._producer

    def __call__(self, df: "DataFrame", batch_id: int) -> None:
        """``foreachBatch``'s call: insert micro-batch ``batch_id``."""
        self.write(df, batch_id)

    def write(self, df: "DataFrame", batch_id: int) -> "LoadResult":
        """Insert micro-batch ``batch_id`` (nothing, ``duplicate``, when Spark runs again the batch
        the table took last; a batch older than that is refused: the checkpoint went back)."""
        from lakehouse.ingest.load import LoadResult

        p = self.producer_for(df)
        key = self.key(batch_id)
        last = p.stream.store.read().key_version(key[0])
        if last is not None and batch_id <= last:
            if batch_id < last:  # Spark only ever runs its last batch again
                raise LakehouseError(
                    f"{self.definition.name}: checkpoint {self.checkpoint} is behind the table: its query runs batch "
                    f"{batch_id}, the table took batch {last} of it (the checkpoint was restored or reset); start "
                    "the query from a new checkpoint")
            log.info("%s: batch %d of %s was inserted before; skipped", self.definition.name, batch_id, key[0])
            self.duplicates += 1
            return LoadResult(self.definition.name, duplicate=True)
        if not p.stream.attached(self.producer):  # detached (the query stopped) or never attached
            p.attach()
        if self.watermark:
            w = batch_watermark(self.checkpoint, batch_id)
            if w > 0:
                p.stream.assert_bound(self.producer, w, raise_only=True)
        crashpoints.reached("sink_before_insert")
        result = p.insert(df, idempotency_key=key, moves_bound=not self.watermark)
        crashpoints.reached("sink_after_insert")  # inserted; Spark has not recorded the batch done
        self.batches += 1
        if result.duplicate:
            self.duplicates += 1
        return result


class Liveness:
    """Keeps a query's producer holding the table's watermark: renews its lease every ``every``
    seconds while the query runs (attaching it again if it was detached meanwhile), moves its
    bound to the watermark Spark's next batch will run under while no batch comes (the last
    batch's latest event time less the delay), and detaches it when the query has stopped (only
    the attachment made for this query)."""

    def __init__(self, query: "StreamingQuery", producer: "Producer", every: float,
                 watermark: Watermark | None = None) -> None:
        self.query = query
        self.producer = producer
        self.every = every
        self.watermark = watermark
        self.renewals = 0
        self.attached_at = self._attached_at()
        self.thread = threading.Thread(target=self._run, name=f"lakehouse-sink-{producer.name}", daemon=True)
        self.thread.start()
        atexit.register(self._at_exit)

    def _attached_at(self) -> int | None:
        found = self.producer.stream.store.read().producers.get(self.producer.name)
        return found.attached_at if found is not None and found.attached else None

    def _at_exit(self) -> None:
        """A program that stopped its query and ends: let the producer detach first."""
        try:
            stopped = not self.query.isActive
        except Exception:  # noqa: BLE001 - the session is gone already
            return
        if stopped and self.thread.is_alive():
            self.thread.join(timeout=10.0)

    def _run(self) -> None:
        p = self.producer
        try:
            while not self._stopped():
                try:
                    self._renew()
                except Exception as e:  # noqa: BLE001 - one failed renewal is not the end: the lease lasts
                    log.warning("%s: producer %r: renewing its lease failed: %s", p.definition.name, p.name,
                                first_line(e))
        finally:
            atexit.unregister(self._at_exit)
            try:
                if p.stream.attached(p.name):
                    p.stream.detach(p.name, attached_at=self.attached_at)
            except Exception as e:  # noqa: BLE001 - the lease runs out instead
                log.warning("%s: producer %r: detaching failed (its lease runs out instead): %s",
                            p.definition.name, p.name, first_line(e))

    def _renew(self) -> None:
        p = self.producer
        if not p.stream.attached(p.name):
            p.attach()
            self.attached_at = self._attached_at()
        nxt = self._next_watermark()
        if nxt is not None:
            p.stream.assert_bound(p.name, nxt, raise_only=True)  # (a heartbeat when not above its bound)
        else:
            p.heartbeat()
        self.renewals += 1

    def _next_watermark(self) -> int | None:
        """The watermark of the batch after the last one (its latest event time less the delay)."""
        if self.watermark is None:
            return None
        last: dict[str, Any] = self.query.lastProgress or {}
        latest = (last.get("eventTime") or {}).get("max")
        if not latest:
            return None
        from lakehouse.ingest.producer import to_micros

        return to_micros(latest) - self.watermark.delay

    def _stopped(self) -> bool:
        try:
            return bool(self.query.awaitTermination(self.every))  # type: ignore[arg-type] # (seconds, a float)
        except Exception:  # noqa: BLE001 - the query failed: it stopped
            return True


def write_stream(df: "DataFrame", warehouse: str, definition: "TableDefinition", producer: str, checkpoint: str,
                 trigger: dict[str, Any] | None = None, query_name: str | None = None,
                 watermark: bool | None = None) -> "StreamingQuery":
    """Start a streaming query writing ``df`` into the table as ``producer``'s inserts (see the
    module's docstring); ``trigger``: ``writeStream.trigger``'s keywords (e.g.
    ``{"processingTime": "10 seconds"}``); ``watermark``: whether the query's watermark is the
    producer's bound (default: when ``df`` defines one; it must be on the table's event time)."""
    from lakehouse.ingest.producer import Producer

    if not getattr(df, "isStreaming", False):
        raise InputError(f"{definition.name}: write_stream takes a streaming DataFrame (spark.readStream...); "
                         "insert a batch DataFrame with producer(...).insert(df)")
    marks = watermarks(df)
    if watermark is None:
        watermark = bool(marks)
    if watermark and not marks:
        raise InputError(f"{definition.name}: watermark=True but the query defines none: add "
                         f".withWatermark({definition.event_time!r}, ...) or pass watermark=False")
    if watermark and any(m.column != definition.event_time for m in marks):
        other = next(m.column for m in marks if m.column != definition.event_time)
        raise InputError(f"{definition.name}: the query's watermark is on {other!r}, not on the table's event time "
                         f"{definition.event_time!r}: put withWatermark on {definition.event_time!r}, or pass "
                         "watermark=False (each batch's latest event time is then the bound)")
    writer = BatchWriter(warehouse, definition, producer, checkpoint, bool(watermark))
    spark = df.sparkSession
    holder = Producer(lambda: spark, warehouse, definition, producer)
    holder.attach()  # it holds the table's watermark from the start
    stream = df.writeStream.foreachBatch(writer).option("checkpointLocation", writer.checkpoint)
    if trigger:
        stream = stream.trigger(**trigger)
    if query_name:
        stream = stream.queryName(query_name)
    try:
        query = stream.start()
        if query_id(writer.checkpoint) != str(query.id):  # (Spark wrote it before start returned)
            query.stop()
            raise LakehouseError(f"{definition.name}: {writer.checkpoint} holds another query's id than the one "
                                 "started; give each query a checkpoint of its own")
    except Exception:
        holder.detach()
        raise
    every = min(60.0, max(1.0, definition.stream.lease.millis / 4000))
    one = marks[0] if watermark and len(marks) == 1 else None  # (several: Spark's policy decides; no guess)
    query._lakehouse_liveness = Liveness(query, holder, every, one)  # type: ignore[attr-defined]
    return query
