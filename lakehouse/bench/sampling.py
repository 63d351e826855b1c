"""How every benchmark times its sides: a warm-up, then repeated runs interleaved (side A, side B,
then B, A, ...), so that a machine getting warmer or busier weighs on both sides alike; each side
reported by its median and spread, and a ratio of two sides by its median and its range.

No Spark here: a side is two plain callables, one preparing a run (not timed: a fresh copy of
the input, a new destination) and one doing it (timed)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakehouse.output import Progress, quiet


@dataclass(frozen=True)
class Side:
    """One thing timed: ``run(i)`` does run ``i`` (timed; what it returns is kept), after
    ``prepare(i)`` (not timed). Run ``-1`` is the warm-up."""

    run: Callable[[int], Any]
    prepare: Callable[[int], None] = lambda _: None


@dataclass
class Samples:
    """The timed runs of one side, in seconds, and what each returned."""

    seconds: list[float] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)

    @property
    def median(self) -> float:
        """The median of the seconds."""
        return statistics.median(self.seconds)

    def as_dict(self) -> dict[str, Any]:
        """Runs, median, min, max, the spread ((max - min) / median) and every sample."""
        med = self.median
        return {"runs": len(self.seconds), "median_s": round(med, 3), "min_s": round(min(self.seconds), 3),
                "max_s": round(max(self.seconds), 3),
                "spread": round((max(self.seconds) - min(self.seconds)) / med, 3) if med else None,
                "samples_s": [round(s, 3) for s in self.seconds]}


def order(names: list[str], round_: int) -> list[str]:
    """The order of the sides in round ``round_``: as given in even rounds, reversed in odd ones."""
    return list(names) if round_ % 2 == 0 else list(reversed(names))


def measure(sides: Mapping[str, Side], repeats: int, warmup: bool = True, report: Progress = quiet) -> dict[str, Samples]:
    """Run every side ``repeats`` times, interleaved (``order``), after one untimed warm-up run of
    each (unless ``warmup`` is False); the samples of each side."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    names = list(sides)
    if warmup:
        for name in names:
            report(f"{name}: warm-up")
            sides[name].prepare(-1)
            sides[name].run(-1)
    out = {name: Samples() for name in names}
    for r in range(repeats):
        for name in order(names, r):
            report(f"{name}: run {r + 1} of {repeats}")
            sides[name].prepare(r)
            t0 = time.perf_counter()
            result = sides[name].run(r)
            out[name].seconds.append(time.perf_counter() - t0)
            out[name].results.append(result)
    return out


def ratio(a: Samples, b: Samples) -> dict[str, float | None]:
    """``a`` over ``b``: the ratio of the medians, and the lowest and highest it can be from the
    samples (min of ``a`` over max of ``b``, max over min)."""
    if not b.seconds or not a.seconds or min(b.seconds) <= 0:
        return {"median": None, "low": None, "high": None}
    return {"median": round(a.median / b.median, 3), "low": round(min(a.seconds) / max(b.seconds), 3),
            "high": round(max(a.seconds) / min(b.seconds), 3)}


def median_of(dicts: list[Mapping[str, float]]) -> dict[str, float]:
    """Key by key, the median of the values of ``dicts`` (a key missing from one counts as 0)."""
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: round(statistics.median([d.get(k, 0.0) for d in dicts]), 3) for k in keys} if dicts else {}


def prefixed(report: Progress, prefix: str) -> Progress:
    """``report`` with each line led by ``prefix`` (the query or case a side belongs to)."""
    return lambda what: report(f"{prefix}: {what}")
