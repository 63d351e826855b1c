"""A table's stream as readers see it (no lease, no Spark): its state as of a moment
(``describe``: ``lakehouse stream``, ``tables``) and the ``lakehouse_watermarks`` view."""

from __future__ import annotations

from typing import Any

from lakehouse.definitions import TableDefinition
from lakehouse.stream import ledger
from lakehouse.stream.store import StreamStore
from lakehouse.times import from_micros, micros
from lakehouse.warehouse import TablePaths


def wall_clock() -> int:
    """Now, in microseconds since the epoch."""
    import datetime as dt

    return micros(dt.datetime.now(dt.timezone.utc))


def describe(store: StreamStore, definition: TableDefinition, paths: TablePaths, now: int) -> dict[str, Any]:
    """The stream's state as of ``now`` (read only: expiry and a committed pending release are
    applied to a copy)."""
    state = store.read()
    if state.pending is not None and ledger.last_committed(paths) >= state.pending.seq:
        state.apply_release(state.pending)
    state.expire(now)
    holders = {p.name for p in state.holders(now)}
    return {
        "table": definition.name,
        "bound": from_micros(state.bound),
        "watermark": from_micros(state.complete(now)),
        "staged": state.staged(),
        "producers": [
            {"name": p.name, "bound": from_micros(p.bound), "staged": state.staged(p.name),
             "lease_expires": from_micros(p.lease_expires) if p.attached else None,
             "rejected": p.rejected, "attached": p.attached, "holding": p.name in holders}
            for p in sorted(state.producers.values(), key=lambda p: p.name)
        ],
    }


WATERMARK_VIEW = "lakehouse_watermarks"
"""The view every query can read: each table's stream bound and watermark, as of the query."""
WATERMARK_COLUMNS = (("table_name", "string"), ("bound", "timestamp"), ("watermark", "timestamp"),
                     ("staged", "bigint"), ("producers_attached", "int"), ("producers_holding", "int"))


def watermarks(tables: list[Any], now: int | None = None) -> Any:
    """One row per table (``TableSource``): B, the watermark, rows staged, producers."""
    import pyarrow as pa

    now = wall_clock() if now is None else now
    rows = []
    for t in tables:
        d = describe(StreamStore(t.paths), t.definition, t.paths, now)
        rows.append({"table_name": t.name, "bound": d["bound"], "watermark": d["watermark"], "staged": d["staged"],
                     "producers_attached": sum(p["attached"] for p in d["producers"]),
                     "producers_holding": sum(p["holding"] for p in d["producers"])})
    schema = pa.schema([("table_name", pa.string()), ("bound", pa.timestamp("us", tz="UTC")),
                        ("watermark", pa.timestamp("us", tz="UTC")), ("staged", pa.int64()),
                        ("producers_attached", pa.int32()), ("producers_holding", pa.int32())])
    return pa.Table.from_pylist(rows, schema=schema)
