"""Erasing and purging a delete's rows from producers' staged rows (steps of ``lakehouse delete``).

**Erase** (``erase``, under the stream's lease): each segment still holding a matched row to
release is written anew into ``<staging>/rows-e<number>`` with its rows still to release less
the matched ones, its count set from them, and the switch is one save of the state (with the
erasure's record: run again, it does nothing and says what it erased then); the folder read
before goes after. Rows already released are in live, rows rejected in rejects (both committed
before this runs): not staging's to keep.

**Purge** (``purge``, ``delete --purge``): a segment's rows folder also holds the rows it released
and the raw text of the rows it rejected (both committed elsewhere, and erased there); the purge
writes every segment's rows folder anew as ``rows-p<number>``, holding only its rows still to
release (less any the predicate matches), in one save of the state, and removes the folders read
before: no copy of a released or rejected row is left in staging.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from lakehouse import crashpoints
from lakehouse.errors import LakehouseError
from lakehouse.storage import join, remove_tree
from lakehouse.stream import staged

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse.stream.engine import Stream
    from lakehouse.stream.entries import Segment
    from lakehouse.stream.model import StreamState


def staged_rows(stream: Stream) -> pa.Table:
    """The rows producers staged that are not yet released or rejected, the table's columns
    (read without the lease: a delete's plan)."""
    import pyarrow as pa

    d = stream.definition
    parts = [_unreleased(stream, seg).select(d.column_names)
             for seg in stream.store.read().segments if seg.staged > 0] if stream.store.exists() else []
    schema = pa.schema([(c.name, c.type.arrow()) for c in d.columns])
    return pa.concat_tables([t.cast(schema) for t in parts]) if parts else schema.empty_table()


def _unreleased(stream: Stream, seg: Segment) -> pa.Table:
    return staged.read_rows(stream.definition, seg.data["path"], seg.data.get("failed", []), seg.late_below,
                            seg.released_upto, None, rows=staged.segment_rows(seg.data))


def erase(stream: Stream, match: Callable[[pa.Table], pa.Array], number: int) -> dict[str, int]:
    """Erase the staged rows ``match`` picks (given rows of the table's columns; a boolean each)
    as erasure ``number``; segment id -> rows erased."""
    import pyarrow.compute as pc

    with stream._changing(f"erase {number}") as (state, lease):
        before = state.erasures.get(str(int(number)))
        if before is not None:
            return dict(before)
        erased: dict[str, int] = {}
        for seg in state.segments:
            if seg.staged <= 0:
                continue
            rows = _unreleased(stream, seg)
            hit = match(rows.select(stream.definition.column_names))
            n = int(pc.sum(hit).as_py() or 0)
            if not n:
                continue
            folder = join(seg.data["path"], f"rows-e{int(number)}")
            if folder.rstrip("/") == staged.segment_rows(seg.data).rstrip("/"):
                raise LakehouseError(f"{stream.definition.name}: erasure {number} ran on this stream before; "
                                     "an erasure takes a number of its own")
            lease.check()
            _switch(stream, seg, rows.filter(pc.invert(hit)), folder)
            erased[seg.id] = n
        state.erased(number, erased)
        crashpoints.reached("stream_before_erase_save")
        stream.store.save(state)
        crashpoints.reached("stream_after_erase_save")
        lease.check()  # (a process whose lease ran out removes nothing another may read)
        drop_old_rows(state)
        return erased


def purge(stream: Stream, match: Callable[[pa.Table], pa.Array], number: int) -> int:
    """Write every segment's rows folder anew with only its rows still to release (less those
    ``match`` picks), then remove the folders read before; rows folders rewritten."""
    import pyarrow.compute as pc

    if not stream.store.exists():
        return 0
    with stream._changing(f"purge {number}") as (state, lease):
        done = 0
        for seg in state.segments:
            folder = join(seg.data["path"], f"rows-p{int(number)}")
            if folder.rstrip("/") == staged.segment_rows(seg.data).rstrip("/"):
                continue  # this purge rewrote it already
            rows = _unreleased(stream, seg)
            if rows.num_rows:
                rows = rows.filter(pc.invert(match(rows.select(stream.definition.column_names))))
            lease.check()
            _switch(stream, seg, rows, folder)
            done += 1
        if done:
            stream.store.save(state)
        lease.check()
        drop_old_rows(state)
        return done


def _switch(stream: Stream, seg: Segment, keep: pa.Table, folder: str) -> None:
    """Write ``keep`` (rows still to release) as the segment's rows folder ``folder`` (saved by the caller)."""
    remove_tree(folder)
    staged.write_rows(stream.definition, keep, folder)
    times = np.sort(staged.read_times(stream.definition, seg.data["path"], [], folder)["t"])
    seg.data["rows"] = folder
    seg.rows = seg.released + len(times)
    seg.next_time = int(times[0]) if len(times) else None
    stream._times[seg.id], stream._times_from[seg.id] = times, folder


def drop_old_rows(state: StreamState) -> None:
    """Remove the rows folders of segments' stagings that no segment reads any more."""
    from lakehouse import storage

    for seg in state.segments:
        current = staged.segment_rows(seg.data).rstrip("/")
        for name in storage.list_names(seg.data["path"]):
            folder = join(seg.data["path"], name)
            if (name == "rows" or name.startswith(("rows-e", "rows-p"))) and folder.rstrip("/") != current:
                remove_tree(folder)
