"""Where a table's stream state lives, durably: ``<warehouse>/<table>/_stream/``.

- ``state.json``: the ``StreamState`` (B, producers, staged segments, a pending release),
  replaced atomically (temp file, fsync, rename).
- ``events.jsonl``: attach, detach, bound, expiry, insert and release events, appended.
- ``lock/``: a lease (``lakehouse.lease.Lease``) taken for every change of the state, so
  producers in several processes, and on several machines sharing the warehouse, change it one
  at a time; a holder killed on this machine frees it at once, elsewhere at its expiry.

Staged rows stay where the write path staged them (``_staging/...``); a segment names them,
relative to the table's folder in the document (a warehouse copied or moved elsewhere, or synced
to another bucket, keeps its stream; an older state's absolute places are moved along on read),
absolute in memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from lakehouse import storage
from lakehouse.errors import LakehouseError
from lakehouse.lease import Lease, LeaseHeld, within
from lakehouse.storage import join, lines, write_json
from lakehouse.storage.paths import relative, under
from lakehouse.stream.entries import Event
from lakehouse.stream.model import StreamState
from lakehouse.warehouse import TablePaths

LOCK_WAIT = 600.0
"""Seconds a stream operation waits for another to finish with the state (releases commit)."""
LOCK_TTL = 60.0


class StreamStore:
    """The durable state of one table's stream."""

    def __init__(self, paths: TablePaths) -> None:
        self.paths = paths
        self.fence: Callable[[], None] | None = None
        """Called before every save while the lease is held: raises once the lease is lost."""
        self.folder = join(paths.root, "_stream")
        self.state_path = join(self.folder, "state.json")
        self.events_path = join(self.folder, "events.jsonl")

    def exists(self) -> bool:
        """Whether the stream has saved a state (a producer attached once)."""
        return storage.exists(self.state_path)

    def read(self) -> StreamState:
        """The saved state (an empty one when none is saved yet)."""
        try:
            data = storage.read_json(self.state_path)
        except FileNotFoundError:
            return StreamState()
        except (OSError, ValueError) as e:
            raise LakehouseError(f"{self.state_path}: unreadable stream state: {e}") from None
        try:
            return StreamState.from_json(self._placed(data, self._here))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LakehouseError(f"{self.state_path}: corrupt stream state: {e!r}") from None

    def referenced(self, state: StreamState | None = None) -> set[str]:
        """Staging folders the stream still needs: staged rows, rejects not committed yet."""
        state = self.read() if state is None else state
        return ({s.data.get("path", "") for s in state.segments}
                | {r.data.get("staging", "") for r in state.rejects_due}) - {""}

    def save(self, state: StreamState) -> None:
        """Write the state document (first checking this process still holds the stream's lease,
        when fenced); events are logged by ``commit``, not here."""
        if self.fence is not None:
            self.fence()
        write_json(self.state_path, self._placed(state.to_json(), lambda p: relative(self.paths.root, p)))

    # The document's fields that name a place under the table's folder: a segment's staging folder
    # and the folder of its rows (an erasure's rewrite), an insert's rejects' staging folder.
    _PLACES = (("segments", ("path", "rows")), ("rejects_due", ("staging",)))

    def _placed(self, doc: dict[str, Any], how: Callable[[str], str]) -> dict[str, Any]:
        """``doc`` with each place ``how`` maps (the document itself, changed in place)."""
        for part, keys in self._PLACES:
            for entry in doc.get(part) or []:
                data = entry.get("data") if isinstance(entry, dict) else None
                if isinstance(data, dict):
                    for key in keys:
                        if isinstance(data.get(key), str) and data[key]:
                            data[key] = how(data[key])
        return doc

    def _here(self, place: str) -> str:
        """A place of the document where this process reaches it: relative ones under the table's
        folder; an absolute one a state saved before places were relative holds, when it names a
        staging folder of this table's elsewhere (the warehouse was copied or moved since), in
        this table's staging (a copy never reads, nor removes, the original's)."""
        place = under(self.paths.root, place)
        mark = f"/{self.paths.name}/_staging/"
        if not place.startswith(self.paths.root.rstrip("/") + "/") and mark in place:
            return join(self.paths.staging, place.rsplit(mark, 1)[1])
        return place

    def commit(self, state: StreamState, events: list[Event] | None = None) -> None:
        """Save the state with its new events, then append them to the log: an event is logged
        only once the change it describes is saved; a crash between the two leaves it in the
        state, and the next ``flush`` appends it (the log skips numbers it already has)."""
        state.record(events or [])
        self.save(state)
        self.flush(state)

    def flush(self, state: StreamState) -> None:
        """Append the state's unlogged events to the log (those it does not hold yet)."""
        last = self._last_seq()
        if last > state.event_seq:  # a state older than its log (restored): numbering goes on after it
            state.event_seq = last
        if not state.unlogged:
            return
        lines.append_json_lines(self.events_path, [e for e in state.unlogged if int(e.get("seq", 0)) > last])
        state.unlogged = []  # on disk too with the next save

    def _last_seq(self) -> int:
        """The number of the log's last complete event (0: none)."""
        for e in reversed(lines.read_json_lines(self.events_path, tail_bytes=65536)):
            try:
                return int(e.get("seq", 0))
            except (ValueError, AttributeError, TypeError):
                continue
        return 0

    def events(self) -> list[dict[str, Any]]:
        """Every event once, oldest first (a line cut short by a crash is skipped; events a
        crashed process saved with the state but did not append yet are read from the state)."""
        out = []
        seen: set[Any] = set()
        pending = self.read().unlogged
        for e in lines.read_json_lines(self.events_path):
            if not isinstance(e, dict) or e.get("seq") in seen:
                continue
            seen.add(e.get("seq"))
            out.append(e)
        return out + [e for e in pending if e.get("seq") not in seen]

    @contextlib.contextmanager
    def locked(self, what: str, wait: float = LOCK_WAIT) -> Iterator[Lease]:
        """Hold the stream's lease (waiting up to ``wait`` seconds for another holder)."""
        lease = Lease(join(self.folder, "lock"), f"stream of {self.paths.name}", ttl=LOCK_TTL, purpose=what)
        try:
            within(lease.acquire, wait, f"{what}: the stream's lease", pause=0.02, max_pause=0.5)
        except LeaseHeld as e:
            raise LakehouseError(f"{what}: {e}") from None
        try:
            yield lease
        finally:
            lease.release()
