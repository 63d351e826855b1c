"""The lateness profile's arithmetic: pure (numpy; no Spark, no files).

A row's lateness is the time it was loaded (its release into live, ``lakehouse.stream.ledger``)
minus its event time, in whole seconds rounded up. The input holds rows grouped by (source, load
time, event second, still in live) with a count, so a day of a busy table is a few thousand
groups, not millions of rows; lateness is measured from the start of a row's event second, never
below the true lateness, so a delay that covers it covers the row.

Quantiles are the inverted CDF: the p-quantile is the smallest lateness d such that at least a
share p of the rows has lateness <= d. The suggested archive delay is that d for the chosen
fraction, rounded up to a whole unit (``suggest_delay``): a row whose lateness is at most the
delay is never below the cutoff when it is loaded (the cutoff is at most now - delay), whatever
the archive interval.

The late path: a row whose event time was already below the archive cutoff in force when it was
loaded (the cutoff of the last archive commit at or before the load), or any row still in live
below the latest cutoff. It waits in live, hidden by the split view, until the next archiving
run merges it into its archived day: its wait is the load time to the first archive commit
after it (a release that raced an archiving run counts from that run, so a wait can come out
one run short); a row still in live is waiting, for now - load time so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

US = 1_000_000
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
"""The percentiles every profile shows (the chosen fraction is added when it is another)."""
UNITS = (("s", 1), ("m", 60), ("h", 3600), ("d", 86400))


def exact(fraction: float) -> Fraction:
    """A fraction as written (0.999 is 999/1000, not the nearest double)."""
    return Fraction(str(fraction))


def check_fraction(fraction: float) -> float:
    """A share of rows: above 0, at most 1; ValueError otherwise."""
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not math.isfinite(fraction) \
            or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be above 0 and at most 1 (e.g. 0.999), got {fraction!r}")
    return float(fraction)


def label(q: float) -> str:
    """``p50``, ``p99.9``: a percentile's key in the profile."""
    return "p" + format(float(exact(q) * 100), "g")


def lateness_seconds(loaded_us: np.ndarray, event_s: np.ndarray) -> np.ndarray:
    """Load time (micros) minus the start of the event second, in whole seconds rounded up."""
    diff = np.asarray(loaded_us, np.int64) - np.asarray(event_s, np.int64) * US
    return -((-diff) // US)


@dataclass(frozen=True)
class Distribution:
    """Integer values with counts, sorted, for quantiles and shares."""

    values: np.ndarray
    cumulative: np.ndarray

    @classmethod
    def of(cls, values: Any, counts: Any = None) -> "Distribution":
        """The distribution of ``values`` (each counted ``counts`` times; once without counts)."""
        v = np.asarray(values, np.int64)
        c = np.ones(len(v), np.int64) if counts is None else np.asarray(counts, np.int64)
        order = np.argsort(v, kind="stable")
        return cls(v[order], np.cumsum(c[order]))

    @property
    def total(self) -> int:
        """The sum of the counts."""
        return int(self.cumulative[-1]) if len(self.cumulative) else 0

    def quantile(self, q: float) -> int | None:
        """The smallest value d with a share >= q of the counts at or below d (None: empty)."""
        if not self.total:
            return None
        rank = max(1, math.ceil(exact(q) * self.total))
        return int(self.values[int(np.searchsorted(self.cumulative, rank, side="left"))])

    def at_most(self, limit: float) -> int:
        """How many are <= limit."""
        i = int(np.searchsorted(self.values, limit, side="right"))
        return int(self.cumulative[i - 1]) if i else 0

    def share(self, limit: float) -> float | None:
        """The share of the counts <= limit (None: empty)."""
        return self.at_most(limit) / self.total if self.total else None

    @property
    def max(self) -> int | None:
        """The largest value (None: empty)."""
        return int(self.values[-1]) if len(self.values) else None

    def percentiles(self, qs: tuple[float, ...]) -> dict[str, int | None]:
        """The quantile of each fraction in ``qs``, by its label (``p50``, ``p99.9``)."""
        return {label(q): self.quantile(q) for q in qs}


def unit_for(seconds: int) -> tuple[str, int]:
    """The unit a delay of about ``seconds`` is rounded up to: seconds below 2 minutes, minutes
    below 2 hours, hours below 7 days, then days."""
    if seconds < 120:
        return UNITS[0]
    if seconds < 7200:
        return UNITS[1]
    if seconds < 7 * 86400:
        return UNITS[2]
    return UNITS[3]


def round_up(seconds: int) -> tuple[int, str]:
    """``seconds`` rounded up to a whole unit (``unit_for``), and as a duration ('27h'; '2h'
    rather than '120m'); 0 and below: 0s."""
    if seconds <= 0:
        return 0, "0s"
    name, unit = unit_for(seconds)
    total = -(-seconds // unit) * unit
    for bigger, size in reversed(UNITS):  # the largest unit that divides it
        if size >= unit and total % size == 0:
            return total, f"{total // size}{bigger}"
    return total, f"{total // unit}{name}"  # pragma: no cover - the unit itself divides it


@dataclass(frozen=True)
class Suggestion:
    """The smallest delay keeping ``fraction`` of the rows out of the late path."""

    fraction: float
    needed: int | None
    """The fraction's quantile of lateness (seconds): the exact smallest such delay."""
    seconds: int | None
    """``needed`` rounded up to a whole unit."""
    text: str | None
    """As an archive.delay ('27h')."""


def suggest_delay(dist: Distribution, fraction: float) -> Suggestion:
    """The smallest archive delay d (rounded up to a unit) with at least ``fraction`` of the rows
    at lateness <= d; None without rows."""
    needed = dist.quantile(fraction)
    if needed is None:
        return Suggestion(fraction, None, None, None)
    seconds, text = round_up(needed)
    return Suggestion(fraction, needed, seconds, text)


# -- the late path --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatePath:
    """Per group: below the cutoff when loaded, and how long it waited (or waits) in live."""

    late: np.ndarray
    """The event time was below the cutoff in force at the load."""
    archived: np.ndarray
    """Late and since merged into the archive."""
    waiting: np.ndarray
    """Late and still in live."""
    wait_s: np.ndarray
    """Archived: seconds from the load to the first archive commit after it (-1: unknown);
    waiting: seconds from the load to now; others -1."""


def late_path(loaded_us: np.ndarray, event_s: np.ndarray, in_live: np.ndarray, commits_us: np.ndarray,
              cutoffs: np.ndarray, now_us: int) -> LatePath:
    """Classify groups against the archive's cutoff history (commit times in micros, ascending,
    with the cutoff each committed, in epoch seconds): late when the event time is below the
    cutoff of the last commit at or before the load, or when the row is still in live below the
    latest cutoff."""
    loaded_us = np.asarray(loaded_us, np.int64)
    event_s = np.asarray(event_s, np.int64)
    in_live = np.asarray(in_live, bool)
    commits_us = np.asarray(commits_us, np.int64)
    cutoffs = np.asarray(cutoffs, np.int64)
    n = len(commits_us)
    before = np.searchsorted(commits_us, loaded_us, side="right") - 1  # last commit at or before the load
    if n:
        then = np.where(before >= 0, cutoffs[np.clip(before, 0, n - 1)], np.iinfo(np.int64).min)
    else:
        then = np.full(len(loaded_us), np.iinfo(np.int64).min, np.int64)
    # a live row below today's cutoff waits on the late path whatever the times say (its release
    # was stamped just before an archiving run committed, and that run did not take it)
    current = cutoffs[-1] if n else np.iinfo(np.int64).min
    late = (event_s < then) | (in_live & (event_s < current))
    archived = late & ~in_live
    waiting = late & in_live
    after = before + 1
    has_next = after < n
    taken = commits_us[np.clip(after, 0, max(n - 1, 0))] if n else np.zeros(len(loaded_us), np.int64)
    wait_us = np.full(len(loaded_us), -1, np.int64)
    done = archived & has_next
    wait_us[done] = taken[done] - loaded_us[done]
    wait_us[waiting] = now_us - loaded_us[waiting]
    wait_s = np.where(wait_us >= 0, -((-wait_us) // US), -1)
    return LatePath(late, archived, waiting, wait_s)


# -- the profile ----------------------------------------------------------------------------------


@dataclass
class Arrivals:
    """The rows of a table (in the window), grouped: parallel arrays, one entry per group."""

    source: np.ndarray
    """The producer that loaded them (``load``, a landing directory, a producer's name)."""
    loaded_us: np.ndarray
    """When they entered live (wall clock, micros)."""
    event_s: np.ndarray
    """Their event second (epoch seconds, rounded down)."""
    in_live: np.ndarray
    """Still in live (else in the archive)."""
    count: np.ndarray
    unknown: int = 0
    """Rows without a load time (loaded before the loads ledger existed), not in the arrays."""

    @classmethod
    def of(cls, rows: list[tuple[str, int, int, bool, int]], unknown: int = 0) -> "Arrivals":
        """From (source, loaded_us, event_s, in_live, count) tuples."""
        cols: list[Any] = list(zip(*rows)) if rows else [(), (), (), (), ()]
        return cls(np.asarray(cols[0], object), np.asarray(cols[1], np.int64), np.asarray(cols[2], np.int64),
                   np.asarray(cols[3], bool), np.asarray(cols[4], np.int64), unknown)

    @property
    def rows(self) -> int:
        """How many rows the groups hold."""
        return int(self.count.sum())

    @property
    def lateness(self) -> np.ndarray:
        """Each group's lateness in whole seconds (load time minus event second, rounded up)."""
        return lateness_seconds(self.loaded_us, self.event_s)


@dataclass
class SourceProfile:
    """One source's line of the profile."""

    source: str
    rows: int
    percentiles: dict[str, int | None]
    late_path: int
    rejected_late: int

    def as_dict(self) -> dict[str, Any]:
        """The source's line of ``lakehouse lateness --format json``."""
        return {"source": self.source, "rows": self.rows, "lateness": self.percentiles,
                "late_path": self.late_path, "rejected_late": self.rejected_late}


@dataclass
class Profile:
    """``lakehouse lateness``: how late a table's rows arrive, the late path, rejected-late rows
    and the archive delay they call for."""

    table: str
    now_us: int
    since_us: int | None
    fraction: float
    rows: int
    unknown: int
    percentiles: dict[str, int | None]
    sources: list[SourceProfile]
    late_path: dict[str, Any]
    rejected_late: dict[str, Any]
    delay: dict[str, Any]
    distribution: Distribution = field(repr=False)
    by_source: dict[str, Distribution] = field(repr=False, default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``lakehouse lateness --format json`` (seconds as integers)."""
        import datetime as dt

        def ts(us: int | None) -> Any:
            return None if us is None else dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)

        return {
            "table": self.table, "now": ts(self.now_us), "since": ts(self.since_us), "fraction": self.fraction,
            "rows": self.rows, "rows_without_load_time": self.unknown, "lateness": self.percentiles,
            "sources": [s.as_dict() for s in self.sources], "late_path": self.late_path,
            "rejected_late": self.rejected_late, "delay": self.delay,
        }


def profile(table: str, arrivals: Arrivals, commits_us: Any, cutoffs: Any, rejected: dict[str, int],
            delay_ms: int, fraction: float, now_us: int, since_us: int | None = None) -> Profile:
    """The lateness profile of a table from its grouped rows, the archive's cutoff history, the
    rows rejected late per producer and the current archive delay."""
    fraction = check_fraction(fraction)
    qs = tuple(sorted({*PERCENTILES, fraction}))
    lateness = arrivals.lateness
    dist = Distribution.of(lateness, arrivals.count)
    lp = late_path(arrivals.loaded_us, arrivals.event_s, arrivals.in_live, np.asarray(commits_us, np.int64),
                   np.asarray(cutoffs, np.int64), now_us)
    names = sorted({*(str(s) for s in arrivals.source), *rejected})
    by_source: dict[str, Distribution] = {}
    sources = []
    for name in names:
        mine = arrivals.source == name
        d = Distribution.of(lateness[mine], arrivals.count[mine])
        by_source[name] = d
        sources.append(SourceProfile(name, d.total, {**d.percentiles(qs), "max": d.max},
                                     int(arrivals.count[mine & lp.late].sum()), int(rejected.get(name, 0))))
    waits = Distribution.of(lp.wait_s[lp.archived & (lp.wait_s >= 0)], arrivals.count[lp.archived & (lp.wait_s >= 0)])
    late_rows = int(arrivals.count[lp.late].sum())
    waiting = int(arrivals.count[lp.waiting].sum())
    late_path_doc = {
        "rows": late_rows,
        "share": late_rows / dist.total if dist.total else None,
        "archived": int(arrivals.count[lp.archived].sum()),
        "waiting": waiting,
        "wait": {**waits.percentiles((0.5, 0.9)), "max": waits.max},
        "waiting_longest": int(lp.wait_s[lp.waiting].max()) if waiting else None,
    }
    s = suggest_delay(dist, fraction)
    current_s = delay_ms / 1000
    change = None if s.seconds is None else (
        "longer" if s.seconds > current_s else "shorter" if s.seconds < current_s else "same")
    delay_doc = {
        "current": format_delay(delay_ms), "current_seconds": current_s if delay_ms % 1000 else delay_ms // 1000,
        "current_covers": dist.share(current_s), "needed_seconds": s.needed, "suggested": s.text,
        "suggested_seconds": s.seconds, "change": change,
    }
    rejected_doc = {"rows": int(sum(rejected.values())), "by_producer": dict(sorted(rejected.items()))}
    return Profile(table, now_us, since_us, fraction, dist.total, arrivals.unknown,
                   {**dist.percentiles(qs), "max": dist.max}, sources, late_path_doc, rejected_doc, delay_doc,
                   dist, by_source)


def format_delay(ms: int) -> str:
    """A delay in milliseconds as a duration in its largest whole unit ('24h', '90m', '500ms')."""
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    for name, size in reversed(UNITS):
        if s % size == 0 and s:
            return f"{s // size}{name}"
    return "0s"


def human(seconds: int | float | None) -> str:
    """A span for people: 45s, 12m30s, 3h05m, 2d04h (None: -)."""
    if seconds is None:
        return "-"
    s = int(math.ceil(seconds))
    sign = "-" if s < 0 else ""
    s = abs(s)
    if s < 60:
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{sign}{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{sign}{s // 86400}d{s % 86400 // 3600:02d}h"
