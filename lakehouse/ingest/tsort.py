"""The file T-sort: release files in the order of the time they stand for, with a hold-back window.

Pure: no IO. Each file has a comparison tuple T = (implied time, file name). Files wait in a
priority queue ordered by T; ``t_read`` is T of the last file taken.

- push: a file with T < t_read is late (it is not taken); otherwise it joins the queue.
- pop (delay >= 0): the head is taken while time(tail) - time(head) >= delay. With delay 0 every
  queued file is taken at once, in T order.
- delay < 0 (-1 in definitions): no ordering; files are taken in the order they were pushed and
  nothing is late.
- drain: take everything queued, in order (the end of a stream).
"""

from __future__ import annotations

import bisect
import datetime as dt
from dataclasses import dataclass, field
from typing import NamedTuple


class T(NamedTuple):
    """A file's comparison tuple: implied time (aware, UTC), then file name."""

    time: dt.datetime
    name: str


@dataclass
class FileTSort:
    """The queue and its read position; ``delay_ms`` < 0 means no ordering."""

    delay_ms: int
    t_read: T | None = None
    queue: list[T] = field(default_factory=list)
    """Queued files, in T order (in push order when unordered)."""

    def __post_init__(self) -> None:
        self.queue = list(self.queue)
        if self.delay_ms >= 0:
            self.queue.sort()

    @property
    def ordered(self) -> bool:
        """Whether files are taken in T order (a delay is set) or as they come."""
        return self.delay_ms >= 0

    def is_late(self, t: T) -> bool:
        """Whether a newly seen file comes too late to be taken in order."""
        return self.ordered and self.t_read is not None and t < self.t_read

    def push(self, t: T) -> bool:
        """Queue a newly seen file; False (and nothing queued) when it is late."""
        if self.is_late(t):
            return False
        if self.ordered:
            bisect.insort(self.queue, t)
        else:
            self.queue.append(t)
        return True

    def pop(self) -> list[T]:
        """Take every file the rule allows now, in order."""
        if not self.ordered:
            return self.drain()
        delay = dt.timedelta(milliseconds=self.delay_ms)
        taken: list[T] = []
        while self.queue and self.queue[-1].time - self.queue[0].time >= delay:
            taken.append(self._take())
        return taken

    def drain(self) -> list[T]:
        """Take every queued file, in order."""
        taken: list[T] = []
        while self.queue:
            taken.append(self._take())
        return taken

    def _take(self) -> T:
        t = self.queue.pop(0)
        if self.t_read is None or t > self.t_read or not self.ordered:
            self.t_read = t
        return t
