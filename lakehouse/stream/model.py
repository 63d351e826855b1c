"""Rowtime bounds: the pure state machine of a table's stream (no Spark, no files).

Times are whole microseconds since the Unix epoch (UTC); ``None`` is "undefined" (below every
time). The rules (the streams issue, made exact):

- **Stream bound B**: the latest event time released into live; undefined until the first
  release; never decreases; kept when every producer has detached.
- **Producer bound b_P**: the greater of the latest event time P inserted and the latest bound P
  asserted. A joining producer starts at B (at max(B, its asserted bound)). Asserting a bound
  below b_P is an error and changes nothing.
- **Holding**: an attached producer holds the watermark while its lease (renewed by any insert,
  bound or heartbeat) runs. When the lease expires it stops holding (an ``expiry`` event); its
  next insert, bound or heartbeat makes it hold again, starting at max(b_P, B) like a joining
  producer, so the watermark never moves back.
- **Insert**: a batch is sorted by event time first; a row earlier than max(B, b_P) minus the
  allowed lateness (taken before the batch) is late and rejected; the others are staged as one
  segment. Then b_P rises to the batch's latest event time.
- **Release**: staged rows with event time <= R = min(b_P of the holders) are committed into
  live, in (event time, producer, sequence) order; with no holder, everything staged is. B
  advances to the latest released event time.
- **Watermark**: R while some producer holds, else max(B, floor), where the floor is the highest
  watermark the stream has shown at the start of any operation: the watermark never moves back
  (a producer joining or returning, or the last holder detaching, cannot lower it).
- **An insert happens when it is registered**: one save of this state takes its rows (staged
  segment, late rows counted on the producer, and, when it has rejects, a ``DueRejects`` record).
  An insert that never reached its registration (killed, or failed before it) never happened and
  never comes back; one that did is finished by the next operation, whoever runs it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from lakehouse.errors import LakehouseError
from lakehouse.stream.entries import DueRejects, Event, Producer, Release, Segment

if TYPE_CHECKING:
    import numpy as np

Times = Union[Sequence[int], "np.ndarray"]
"""Event times (micros): a list, or a NumPy int64 array for big inserts."""


class StreamError(LakehouseError):
    """A producer operation the rules refuse (nothing changes)."""


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


@dataclass
class StreamState:
    """Everything a table's stream remembers (durable as one JSON document)."""

    bound: int | None = None
    """B."""
    floor: int | None = None
    """The highest watermark the stream has shown at an operation: it never goes back, so
    joining and returning producers start at max(B, floor), not below a completeness already
    promised (and maybe sealed by archiving with ``clock: bound``)."""
    release_seq: int = 0
    """The last release committed (the Delta SetTransaction version of its live commit)."""
    insert_seq: int = 0
    producers: dict[str, Producer] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    pending: Release | None = None
    """A release planned and maybe committed into live, not yet applied here."""
    event_seq: int = 0
    """Events recorded so far (each event's number: the log is deduplicated by it)."""
    unlogged: list[dict[str, Any]] = field(default_factory=list)
    """Events saved with the state but maybe not yet appended to the log."""
    rejects_due: list[DueRejects] = field(default_factory=list)
    """Registered inserts whose rejects are not committed yet (oldest first)."""
    erasures: dict[str, dict[str, int]] = field(default_factory=dict)
    """The latest erasures that ran on the staged rows (number -> segment id -> rows erased),
    saved with the rows' switch: an erasure finished after a crash is not run twice and counts
    its rows once (the last ``ERASURES_KEPT``)."""

    def record(self, events: list[Event]) -> None:
        """Number events and keep them with the state (saved with it, then appended to the log)."""
        for e in events:
            self.event_seq += 1
            self.unlogged.append({"seq": self.event_seq, **e.to_json()})

    # -- the rules --------------------------------------------------------------------------------

    def expire(self, now: int) -> list[Event]:
        """Producers whose lease ran out stop holding (one ``expiry`` event each); the floor
        rises to the watermark as of ``now``."""
        events = []
        for p in self.producers.values():
            if p.attached and p.holding and p.lease_expires <= now:
                p.holding = False
                events.append(Event("expiry", p.lease_expires, p.name, p.bound))
        self.floor = _max(self.floor, self.watermark(now))
        return events

    @property
    def top(self) -> int | None:
        """max(B, floor): where joining and returning producers start, and lateness is measured."""
        return _max(self.bound, self.floor)

    def _active(self, name: str, now: int, lease: int, what: str) -> tuple[Producer, list[Event]]:
        p = self.producers.get(name)
        if p is None or not p.attached:
            raise StreamError(f"producer {name!r} is not attached: {what} needs `attach` first")
        events = self.expire(now)
        if not p.holding:  # back after its lease expired: it starts at B, like a joining producer
            p.holding = True
            p.bound = _max(p.bound, self.top)
        p.lease_expires = now + lease
        return p, events

    def _own(self, p: Producer, now: int) -> int | None:
        """P's own bound as its next operation sees it (at least B once its lease has expired)."""
        if p.holding and p.lease_expires > now:
            return p.bound
        return _max(p.bound, _max(self.bound, _max(self.floor, self.watermark(now))))

    def _check_bound(self, p: Producer, bound: int, now: int) -> None:
        own = self._own(p, now)
        if own is not None and bound < own:
            raise StreamError(f"producer {p.name!r}: bound {fmt(bound)} is below its own bound {fmt(own)} "
                              "(bounds only move forward)")

    def attach(self, name: str, now: int, lease: int, bound: int | None = None) -> list[Event]:
        """Attach (or, when attached, renew and optionally assert ``bound``)."""
        p = self.producers.get(name)
        if p is not None and p.attached:
            if bound is not None:
                self._check_bound(p, bound, now)
            p, events = self._active(name, now, lease, "attach")
            if bound is not None:
                p.bound = bound
                events.append(Event("bound", now, name, bound))
            return events
        events = self.expire(now)
        old = p
        p = Producer(name, bound=_max(self.top, bound), lease_expires=now + lease, attached_at=now)
        if old is not None:  # a producer attaching again keeps its counts (not its bound)
            p.rejected, p.inserted, p.inserts, p.last = old.rejected, old.inserted, old.inserts, old.last
        self.producers[name] = p
        events.append(Event("attach", now, name, p.bound))
        return events

    def assert_bound(self, name: str, bound: int, now: int, lease: int, raise_only: bool = False) -> list[Event]:
        """Producer ``name`` promises no row earlier than ``bound`` (``raise_only``: a bound
        below its own is a heartbeat instead of an error)."""
        p = self.producers.get(name)
        if p is None or not p.attached:
            raise StreamError(f"producer {name!r} is not attached: bound needs `attach` first")
        try:
            self._check_bound(p, bound, now)
        except StreamError:
            if not raise_only:
                raise
            return self.heartbeat(name, now, lease)
        p, events = self._active(name, now, lease, "bound")
        p.bound = bound
        return [*events, Event("bound", now, name, bound)]

    def heartbeat(self, name: str, now: int, lease: int) -> list[Event]:
        """Producer ``name`` renews its lease (holding again, from max(b_P, B), if it had expired)."""
        _, events = self._active(name, now, lease, "heartbeat")
        return events

    def detach(self, name: str, now: int, attached_at: int | None = None) -> list[Event]:
        """Producer ``name`` detaches: it stops holding the watermark (its bound is kept).
        ``attached_at``: only the attachment made then (another since: nothing happens)."""
        p = self.producers.get(name)
        if p is None or not p.attached:
            raise StreamError(f"producer {name!r} is not attached")
        if attached_at is not None and p.attached_at != attached_at:
            return []
        events = self.expire(now)
        p.attached = p.holding = False
        events.append(Event("detach", now, name, p.bound))
        return events

    def late_below(self, name: str, lateness: int | None) -> int | None:
        """Rows of ``name`` earlier than this are late (None: nothing is)."""
        if lateness is None:
            return None
        p = self.producers[name]
        top = _max(self.top, p.bound)
        return None if top is None else top - lateness

    def seen_key(self, key: tuple[str, int]) -> Producer | None:
        """The producer that inserted with idempotency key ``key`` = (app, version), or with a later
        version of the same app (Delta's ``txnAppId``/``txnVersion`` rule), if any did."""
        app, version = check_key(key)
        for p in self.producers.values():
            seen = p.inserts.get(key_origin(app))
            if seen is not None and seen >= version:
                return p
        return None

    def key_version(self, app: str) -> int | None:
        """The highest version of idempotency keys of ``app`` inserted (None: none was)."""
        seen = [v for p in self.producers.values() if (v := p.inserts.get(key_origin(app))) is not None]
        return max(seen) if seen else None

    def seen_by(self, origin: str, number: int) -> Producer | None:
        """The producer that registered insert ``number`` of ``origin``, if any did."""
        for p in self.producers.values():
            if p.inserts.get(origin, 0) >= number:
                return p
        return None

    def insert(self, name: str, times: Times, now: int, lease: int, lateness: int | None,
               origin: str = "", number: int = 0, segment_id: str | None = None,
               data: dict[str, Any] | None = None, key: tuple[str, int] | None = None,
               moves_bound: bool = True) -> tuple[Segment | None, int, int | None, list[Event]]:
        """Insert rows with these event times: (segment staged or None, rows late, the bound they
        broke, events). The durable layer stages the segment's rows (event time >= the bound).

        ``key``: the caller's idempotency key (app, version), recorded with the insert (``seen_key``
        recognises it and every lower version of the app after). ``moves_bound`` False: the rows do
        not move the producer's bound (a pipeline whose own watermark is its bound: its rows above
        that wait staged until a later bound passes them)."""
        if key is not None:
            check_key(key)
        p, events = self._active(name, now, lease, "insert")
        below = self.late_below(name, lateness)
        ordered = _sorted(times)
        n_late = 0 if below is None else bisect.bisect_left(ordered, below)
        staged = ordered[n_late:]
        if len(ordered) and moves_bound:
            p.bound = _max(p.bound, int(ordered[-1]))
        p.rejected += n_late
        p.inserted += len(staged)
        if origin:
            p.inserts[origin] = max(p.inserts.get(origin, 0), number)
        if key is not None:
            k = key_origin(key[0])
            p.inserts[k] = max(p.inserts.get(k, -1), int(key[1]))
        seg = None
        if len(staged):
            self.insert_seq += 1
            seg = Segment(segment_id or f"{self.insert_seq:010d}", name, self.insert_seq, below, len(staged),
                          int(staged[-1]), next_time=int(staged[0]), data=dict(data or {}))
            self.segments.append(seg)
        events.append(Event("insert", now, name, p.bound, rows=len(staged), rejected=n_late,
                            detail=None if not n_late else f"late below {fmt(below)}"))
        return seg, n_late, below, events

    def holders(self, now: int) -> list[Producer]:
        """The producers holding the watermark at ``now``: attached, with a lease still running."""
        return [p for p in self.producers.values() if p.attached and p.holding and p.lease_expires > now]

    def release_point(self, now: int) -> tuple[bool, int | None]:
        """(some producer holds, R): R = min b_P of the holders (None: undefined, nothing goes)."""
        holders = self.holders(now)
        if not holders:
            return False, None
        if any(p.bound is None for p in holders):
            return True, None
        return True, min(p.bound for p in holders)  # type: ignore[type-var]

    def watermark(self, now: int) -> int | None:
        """R while some producer holds, else max(B, floor): never below a watermark shown before."""
        held, r = self.release_point(now)
        return r if held else self.top

    def complete(self, now: int) -> int | None:
        """The watermark as live shows it: ``watermark(now)``, but below any staged row it
        covers (a lease that ran out since the last operation raised R; those rows go into live
        with the next operation, or the archive's tick)."""
        w = self.watermark(now)
        due = [s.next_time for s in self.segments if s.staged > 0 and s.next_time is not None]
        if w is None or not due or min(due) > w:
            return w
        return min(due) - 1

    def plan_release(self, now: int, times_of: Callable[[Segment], Times]) -> Release | None:
        """The next release (None when nothing staged is due). ``times_of(segment)`` gives the
        segment's staged event times, sorted (every one, released or not)."""
        self.expire(now)
        held, r = self.release_point(now)
        if held and r is None:
            return None
        ups: dict[str, int] = {}
        ranges: dict[str, tuple[int | None, int]] = {}
        counts: dict[str, int] = {}
        nxt: dict[str, int | None] = {}
        top = self.bound
        rows = 0
        for seg in self.segments:
            if seg.staged <= 0 or (r is not None and seg.next_time is not None and seg.next_time > r):
                continue  # nothing due: its rows are not even read
            times = times_of(seg)
            lo = 0 if seg.released_upto is None else bisect.bisect_right(times, seg.released_upto)
            hi = len(times) if r is None else bisect.bisect_right(times, r)
            if hi <= lo:
                continue
            last = int(times[hi - 1])
            ups[seg.id] = last
            ranges[seg.id] = (seg.released_upto, last)
            counts[seg.id] = hi - lo
            nxt[seg.id] = int(times[hi]) if hi < len(times) else None
            rows += hi - lo
            top = _max(top, last)
        if not ups:
            return None
        return Release(self.release_seq + 1, r if held else None, ups, ranges, rows, top, counts, now, nxt)

    def apply_release(self, rel: Release) -> list[Event]:
        """Record a release as committed: B advances, the segments' rows are no longer staged."""
        for seg in self.segments:
            if seg.id in rel.segments:
                seg.released_upto = rel.segments[seg.id]
                seg.released += rel.counts.get(seg.id, 0)
                seg.next_time = rel.next.get(seg.id)
        self.bound = _max(self.bound, rel.bound)
        self.release_seq = max(self.release_seq, rel.seq)
        self.pending = None
        return [Event("release", rel.at, None, rel.bound, rows=rel.rows,
                      detail=f"release {rel.seq} up to {fmt(rel.upto) if rel.upto is not None else 'all staged'}")]

    def finished_segments(self) -> list[Segment]:
        """Segments with nothing staged and their rejects committed: their files can go."""
        waiting = {r.segment for r in self.rejects_due}
        return [s for s in self.segments if s.staged <= 0 and s.id not in waiting]

    def rejects_committed(self, rejects: DueRejects) -> None:
        """An insert's rejects are in the rejects table."""
        self.rejects_due = [r for r in self.rejects_due if (r.origin, r.number) != (rejects.origin, rejects.number)]

    def unfinished(self) -> bool:
        """Work a crashed operation may have left: a release planned, rejects not committed."""
        return self.pending is not None or bool(self.rejects_due)

    def drop(self, ids: set[str]) -> None:
        """Forget the segments ``ids`` (finished: nothing staged, their rejects committed)."""
        self.segments = [s for s in self.segments if s.id not in ids]

    def staged(self, producer: str | None = None) -> int:
        """Rows staged and not yet released (of one producer, or of all)."""
        return sum(s.staged for s in self.segments if producer is None or s.producer == producer)

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The stream state document (``_stream/state.json``)."""
        return {
            "format": 1,
            "bound": self.bound,
            "floor": self.floor,
            "release_seq": self.release_seq,
            "insert_seq": self.insert_seq,
            "producers": [p.to_json() for p in self.producers.values()],
            "segments": [s.to_json() for s in self.segments],
            "pending": None if self.pending is None else self.pending.to_json(),
            "event_seq": self.event_seq,
            "unlogged": self.unlogged,
            "rejects_due": [r.to_json() for r in self.rejects_due],
            "erasures": self.erasures,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StreamState":
        """A stream state from its document (``to_json`` reversed)."""
        ps = [Producer.from_json(p) for p in d.get("producers", [])]
        return cls(
            bound=d.get("bound"),
            floor=d.get("floor"),
            release_seq=int(d.get("release_seq", 0)),
            insert_seq=int(d.get("insert_seq", 0)),
            producers={p.name: p for p in ps},
            segments=[Segment.from_json(s) for s in d.get("segments", [])],
            pending=None if d.get("pending") is None else Release.from_json(d["pending"]),
            event_seq=int(d.get("event_seq", 0)),
            unlogged=list(d.get("unlogged", [])),
            rejects_due=[DueRejects.from_json(r) for r in d.get("rejects_due", [])],
            erasures={str(k): {str(s): int(n) for s, n in v.items()} for k, v in (d.get("erasures") or {}).items()},
        )

    def erased(self, number: int, segments: dict[str, int]) -> None:
        """Record what erasure ``number`` erased from the staged rows (the latest kept)."""
        self.erasures[str(int(number))] = dict(segments)
        for old in sorted(self.erasures, key=int)[:-ERASURES_KEPT]:
            del self.erasures[old]


ERASURES_KEPT = 100
"""Erasures the stream's state remembers (a delete is finished long before 100 more run)."""


KEY_PREFIX = "key:"
"""Idempotency keys are kept among a producer's insert origins under this prefix (no origin of
the write path starts with it)."""
KEY_APP_MAX = 500


def key_origin(app: str) -> str:
    """The origin under which inserts with idempotency keys of ``app`` are remembered."""
    return KEY_PREFIX + app


def check_key(key: object) -> tuple[str, int]:
    """An idempotency key: (app, version), app 1-500 printable characters, version an int >= 0."""
    app: object = key[0] if isinstance(key, tuple) and len(key) == 2 else None
    version: object = key[1] if isinstance(key, tuple) and len(key) == 2 else None
    if not (isinstance(app, str) and 0 < len(app) <= KEY_APP_MAX and app.isprintable()
            and isinstance(version, int) and not isinstance(version, bool) and version >= 0):
        raise StreamError(f"bad idempotency key {key!r}: expected (app, version): app 1-{KEY_APP_MAX} printable "
                          "characters, version an integer >= 0 (e.g. a query's id and its batch id)")
    return app, version


def _sorted(times: Times) -> Times:
    """Times in order: a NumPy array stays one (millions of rows), anything else becomes a list."""
    if hasattr(times, "dtype"):
        import numpy as np

        return np.sort(np.asarray(times, dtype=np.int64))
    return sorted(int(t) for t in times)


def fmt(t: int | None) -> str:
    """A time for messages: ISO 8601 UTC, fraction only when non-zero."""
    if t is None:
        return "undefined"
    import datetime as dt

    s = (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=t)).isoformat()
    s = s.replace("+00:00", "Z")
    return s
