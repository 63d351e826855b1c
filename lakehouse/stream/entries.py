"""The entries of a stream's state (``stream.model``): producers, staged segments, rejects due,
releases and events, each with its JSON form in ``_stream/state.json``. Plain data: the rules
that change them are ``StreamState``'s."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Producer:
    """One producer of a stream, as the stream remembers it."""

    name: str
    attached: bool = True
    holding: bool = True
    """Holds the watermark: attached and its lease has not expired."""
    bound: int | None = None
    """b_P: max(latest event time inserted, latest bound asserted); None: undefined."""
    lease_expires: int = 0
    attached_at: int = 0
    rejected: int = 0
    """Rows rejected late, over the producer's life."""
    inserted: int = 0
    """Rows staged (not late), over the producer's life."""
    inserts: dict[str, int] = field(default_factory=dict)
    """Insert origin (e.g. an ingest source's app id) -> highest insert number registered: a
    replayed insert (after a crash) is recognised and not staged twice."""
    last: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Origin -> what its last insert did (for the durable layer to report a replay the same)."""

    def to_json(self) -> dict[str, Any]:
        """The producer as stored in the stream state document."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Producer":
        """A producer from the stream state document (``to_json`` reversed)."""
        return cls(**{**d, "inserts": dict(d.get("inserts", {})), "last": dict(d.get("last", {}))})


@dataclass
class Segment:
    """The staged rows of one insert: rows with event time >= ``late_below`` (the others were
    rejected late) and > ``released_upto`` (the others are in live)."""

    id: str
    producer: str
    seq: int
    """Global insert sequence number: the tie-break after event time and producer."""
    late_below: int | None
    rows: int
    """Rows staged by the insert (not late)."""
    max_time: int | None
    released_upto: int | None = None
    released: int = 0
    next_time: int | None = None
    """The earliest event time still staged (None: nothing is)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Where the rows are and how to read them (the durable layer's business)."""

    @property
    def staged(self) -> int:
        """Rows of the segment not yet released into live."""
        return self.rows - self.released

    def to_json(self) -> dict[str, Any]:
        """The segment as stored in the stream state document."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Segment":
        """A segment from the stream state document (``to_json`` reversed)."""
        return cls(**{k: v for k, v in d.items() if k != "rejects_done"})  # (kept by older versions)


@dataclass
class DueRejects:
    """The rejects (bad rows, failed files, late rows) of a registered insert, saved with it and
    committed by whichever operation comes next if the inserting process died first (the commit
    carries the SetTransaction ``origin`` -> ``number``: never twice)."""

    origin: str
    number: int
    producer: str
    segment: str | None
    """The segment the same insert staged (None: no row was taken)."""
    late_below: int | None
    late: int
    data: dict[str, Any] = field(default_factory=dict)
    """Where the rejected rows are (the durable layer's business)."""

    def to_json(self) -> dict[str, Any]:
        """The record as stored in the stream state document."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DueRejects":
        """A record from the stream state document (``to_json`` reversed)."""
        return cls(**d)


@dataclass
class Release:
    """A planned release: rows of each segment with released_upto < t <= upto go to live."""

    seq: int
    upto: int | None
    """R, or None when no producer holds (everything staged goes)."""
    segments: dict[str, int]
    """Segment id -> new released_upto."""
    ranges: dict[str, tuple[int | None, int]]
    """Segment id -> (released_upto before, after): the event-time range (exclusive, inclusive]."""
    rows: int
    bound: int | None
    """B after the release."""
    counts: dict[str, int] = field(default_factory=dict)
    """Segment id -> rows released from it."""
    at: int = 0
    next: dict[str, int | None] = field(default_factory=dict)
    """Segment id -> its earliest event time still staged after the release."""

    def to_json(self) -> dict[str, Any]:
        """The release as stored in the stream state document (ranges as lists)."""
        d = asdict(self)
        d["ranges"] = {k: list(v) for k, v in self.ranges.items()}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Release":
        """A release from the stream state document (``to_json`` reversed)."""
        d = dict(d)
        d["ranges"] = {k: (v[0], v[1]) for k, v in d["ranges"].items()}
        return cls(**d)


@dataclass
class Event:
    """Something that happened to a stream: attach, detach, bound, expiry, insert, release."""

    kind: str
    at: int
    producer: str | None = None
    bound: int | None = None
    rows: int | None = None
    rejected: int | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The event as the stream's log stores it (fields that are None left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}
