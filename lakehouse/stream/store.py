"""Where a table's stream state lives, durably: ``<warehouse>/<table>/_stream/``.

- ``state.json``: the ``StreamState`` (B, producers, staged segments, a pending release),
  replaced atomically (temp file, fsync, rename).
- ``events.jsonl``: attach, detach, bound, expiry, insert and release events, appended.
- ``lock/``: a lease (``lakehouse.lease.Lease``) taken for every change of the state, so
  producers in several processes, and on several machines sharing the warehouse, change it one
  at a time; a holder killed on this machine frees it at once, elsewhere at its expiry.

Staged rows stay where the write path staged them (``_staging/...``); a segment names them.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from lakehouse.errors import LakehouseError
from lakehouse.lease import Lease, LeaseHeld
from lakehouse.storage import join, write_json
from lakehouse.stream.model import Event, StreamState
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
        return os.path.exists(self.state_path)

    def read(self) -> StreamState:
        try:
            with open(self.state_path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return StreamState()
        except (OSError, ValueError) as e:
            raise LakehouseError(f"{self.state_path}: unreadable stream state: {e}") from None
        try:
            return StreamState.from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LakehouseError(f"{self.state_path}: corrupt stream state: {e!r}") from None

    def referenced(self, state: StreamState | None = None) -> set[str]:
        """Staging folders the stream still needs: staged rows, rejects not committed yet."""
        state = self.read() if state is None else state
        return ({s.data.get("path", "") for s in state.segments}
                | {r.data.get("staging", "") for r in state.rejects_due}) - {""}

    def save(self, state: StreamState) -> None:
        if self.fence is not None:
            self.fence()
        write_json(self.state_path, state.to_json())

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
        new = [e for e in state.unlogged if int(e.get("seq", 0)) > last]
        if new:
            os.makedirs(self.folder, exist_ok=True)
            with open(self.events_path, "a+", encoding="utf-8") as f:
                f.seek(0, os.SEEK_END)
                if f.tell():  # a line cut short by a crash stays apart from the next event
                    f.seek(f.tell() - 1)
                    if f.read(1) != "\n":
                        f.write("\n")
                for e in new:
                    f.write(json.dumps(e, separators=(",", ":")) + "\n")
                f.flush()
                os.fsync(f.fileno())
        state.unlogged = []  # on disk too with the next save

    def _last_seq(self) -> int:
        """The number of the log's last complete event (0: none)."""
        try:
            with open(self.events_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 65536))
                tail = f.read().split(b"\n")
        except FileNotFoundError:
            return 0
        for line in reversed(tail):
            try:
                return int(json.loads(line).get("seq", 0))
            except (ValueError, AttributeError):
                continue
        return 0

    def events(self) -> list[dict[str, Any]]:
        """Every event once, oldest first (a line cut short by a crash is skipped; events a
        crashed process saved with the state but did not append yet are read from the state)."""
        out = []
        seen: set[Any] = set()
        pending = self.read().unlogged
        try:
            with open(self.events_path, encoding="utf-8") as f:
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if not isinstance(e, dict) or e.get("seq") in seen:
                        continue
                    seen.add(e.get("seq"))
                    out.append(e)
        except FileNotFoundError:
            pass
        return out + [e for e in pending if e.get("seq") not in seen]

    @contextlib.contextmanager
    def locked(self, what: str, wait: float = LOCK_WAIT) -> Iterator[Lease]:
        """Hold the stream's lease (waiting up to ``wait`` seconds for another holder)."""
        deadline = time.monotonic() + wait
        pause = 0.02
        while True:
            lease = Lease(join(self.folder, "lock"), f"stream of {self.paths.name}", ttl=LOCK_TTL, purpose=what)
            try:
                lease.acquire()
                break
            except LeaseHeld as e:
                if time.monotonic() >= deadline:
                    raise LakehouseError(f"{what}: {e}") from None
                time.sleep(pause)
                pause = min(0.5, pause * 1.5)
        try:
            yield lease
        finally:
            lease.release()
