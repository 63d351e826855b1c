"""A reference model of a table's stream, written from the issue's rules (not from
``lakehouse.stream.model``): plain lists of rows, every quantity recomputed from scratch.

Times are integers (microseconds); None is "undefined", below every time.

- B (``bound``): the latest event time released into live; never decreases; None before the
  first release.
- b_P (``Producer.bound``): the greater of the latest event time P inserted and the latest bound
  P asserted (after joining at B).
- A producer holds the stream while it is attached and its lease has not expired
  (``lease_expires > now``). R = min of b_P over holders (None if a holder's b_P is None).
- Release (after every operation): with holders, staged rows with t <= R (nothing when R is
  None); with no holder, everything staged. B := max(B, max released t).
- Watermark: R while some producer holds, else max(B, floor), where the floor is the highest
  watermark seen at the start of any operation; joining and returning producers start at
  max(B, floor), and lateness is measured from max(B, floor, b_P) (so the watermark never goes back).
- An expired producer that renews its lease (insert, bound, heartbeat, attach) rejoins at B:
  b_P := max(b_P, B) first.
- Errors (``RefError``) change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class RefError(Exception):
    """An operation the rules refuse (the implementation raises StreamError)."""


def mx(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


@dataclass
class RefRow:
    t: int
    producer: str
    seq: int
    line: int
    payload: Any = None

    def order(self) -> tuple[int, str, int, int]:
        return (self.t, self.producer, self.seq, self.line)


@dataclass
class RefLate:
    t: int
    producer: str
    bound: int
    line: int
    payload: Any = None


@dataclass
class RefProducer:
    name: str
    attached: bool = False
    bound: int | None = None
    lease_expires: int | None = None
    rejected: int = 0

    def holds(self, now: int) -> bool:
        return self.attached and self.lease_expires is not None and self.lease_expires > now


@dataclass
class RefInsert:
    """What one insert did."""

    staged: list[RefRow]
    late: list[RefLate]
    late_below: int | None


@dataclass
class RefStream:
    bound: int | None = None
    floor: int | None = None
    """The highest watermark shown at an operation (joining/returning producers start at
    max(B, floor); lateness is measured from it)."""
    producers: dict[str, RefProducer] = field(default_factory=dict)
    staged_rows: list[RefRow] = field(default_factory=list)
    releases: list[list[RefRow]] = field(default_factory=list)
    late_rows: list[RefLate] = field(default_factory=list)
    inserts: int = 0

    # -- derived ------------------------------------------------------------------------------------

    def holders(self, now: int) -> list[RefProducer]:
        return [p for p in self.producers.values() if p.holds(now)]

    def release_point(self, now: int) -> tuple[bool, int | None]:
        """(someone holds, R)."""
        hs = self.holders(now)
        if not hs:
            return False, None
        if any(p.bound is None for p in hs):
            return True, None
        return True, min(p.bound for p in hs)

    def top(self) -> int | None:
        return mx(self.bound, self.floor)

    def watermark(self, now: int) -> int | None:
        held, r = self.release_point(now)
        return r if held else self.top()

    def shown_watermark(self, now: int) -> int | None:
        """The watermark as ``tables`` and ``stream`` show it: never covering a row still staged
        (rows a lease that ran out made due, or an operation killed before its release left, wait
        staged for the next operation that releases)."""
        w = self.watermark(now)
        due = [x.t for x in self.staged_rows if w is not None and x.t <= w]
        return min(due) - 1 if due else w

    def observe(self, now: int) -> None:
        """At the start of every operation: the floor rises to the watermark as of now."""
        self.floor = mx(self.floor, self.watermark(now))

    def staged(self, producer: str | None = None) -> int:
        return sum(1 for r in self.staged_rows if producer is None or r.producer == producer)

    def released_rows(self) -> list[RefRow]:
        return [r for rel in self.releases for r in rel]

    # -- helpers ------------------------------------------------------------------------------------

    def _attached(self, name: str, what: str) -> RefProducer:
        p = self.producers.get(name)
        if p is None or not p.attached:
            raise RefError(f"{what}: producer {name!r} is not attached")
        return p

    def _own(self, p: RefProducer, now: int) -> int | None:
        """P's own bound as of an operation at ``now`` (an expired producer rejoins at B)."""
        if p.holds(now):
            return p.bound
        return mx(p.bound, mx(self.top(), self.watermark(now)))

    def _renew(self, p: RefProducer, now: int, lease: int) -> None:
        p.bound = self._own(p, now)
        p.lease_expires = now + lease

    # -- operations (each followed by release(now) by the caller) -----------------------------------

    def attach(self, name: str, now: int, lease: int, bound: int | None = None) -> None:
        p = self.producers.get(name)
        if p is not None and p.attached:
            own = self._own(p, now)
            if bound is not None and own is not None and bound < own:
                raise RefError("bound below own bound")
            self.observe(now)
            self._renew(p, now, lease)
            p.bound = mx(p.bound, bound)
            return
        self.observe(now)
        if p is None:
            p = self.producers[name] = RefProducer(name)
        p.attached = True
        p.bound = mx(self.top(), bound)  # the old bound is forgotten
        p.lease_expires = now + lease

    def assert_bound(self, name: str, bound: int, now: int, lease: int) -> None:
        p = self._attached(name, "bound")
        own = self._own(p, now)
        if own is not None and bound < own:
            raise RefError("bound below own bound")
        self.observe(now)
        self._renew(p, now, lease)
        p.bound = mx(p.bound, bound)

    def heartbeat(self, name: str, now: int, lease: int) -> None:
        p = self._attached(name, "heartbeat")
        self.observe(now)
        self._renew(p, now, lease)

    def detach(self, name: str, now: int) -> None:
        p = self._attached(name, "detach")
        self.observe(now)
        p.attached = False

    def insert(self, name: str, rows: list[tuple[int, Any]], now: int, lease: int,
               lateness: int | None) -> RefInsert:
        """``rows``: (event time, payload) in the order given (line = index)."""
        p = self._attached(name, "insert")
        self.observe(now)
        self._renew(p, now, lease)
        self.inserts += 1
        seq = self.inserts
        base = mx(self.top(), p.bound)
        below = None if lateness is None or base is None else base - lateness
        ordered = sorted(((t, line, payload) for line, (t, payload) in enumerate(rows)), key=lambda x: (x[0], x[1]))
        staged, late = [], []
        for t, line, payload in ordered:
            if below is not None and t < below:
                late.append(RefLate(t, name, below, line, payload))
            else:
                staged.append(RefRow(t, name, seq, line, payload))
        p.rejected += len(late)
        self.late_rows.extend(late)
        self.staged_rows.extend(staged)
        if ordered:
            p.bound = mx(p.bound, ordered[-1][0])
        return RefInsert(staged, late, below)

    def release(self, now: int) -> list[RefRow]:
        """Commit what is due into live; the rows released (in commit order), maybe none."""
        self.observe(now)
        held, r = self.release_point(now)
        if held:
            due = [] if r is None else [x for x in self.staged_rows if x.t <= r]
        else:
            due = list(self.staged_rows)
        if not due:
            return []
        self.staged_rows = [x for x in self.staged_rows if not any(x is d for d in due)]
        due.sort(key=RefRow.order)
        self.bound = mx(self.bound, max(x.t for x in due))
        self.releases.append(due)
        return due

    # -- live of a table with a primary key ---------------------------------------------------------

    def live_by_key(self, key: Any) -> dict[Any, RefRow]:
        """Live rows of a keyed table: ``key(row)`` -> the row that won. Within one release the
        later insert (sequence, then line) wins; a later release overwrites an earlier one."""
        out: dict[Any, RefRow] = {}
        for rel in self.releases:
            for row in sorted(rel, key=lambda x: (x.seq, x.line)):
                out[key(row)] = row
        return out
