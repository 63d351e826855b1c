"""``lakehouse bench age``: what the table's operations cost as it gets older. The same rows laid
over few and many UTC days (25, 250 and 2,500 by default: a month, most of a year, seven years),
each archived, then the operations a data engineer runs every day, timed on each layout in one run.

Per layout, made untimed: the bench table with ``rows`` trips over the layout's days, archived by
one run (with the books), then a new day of ``NEW_DAY_ROWS`` trips waiting in live. Timed, the
layouts interleaved (``bench.sampling``), in-process on one Spark session:
- ``verify`` and ``check`` of the table (``check`` without Data Docs: their site lists every check
  run, which grows with the checks made, not with the table's days);
- ``archive (one new day)``: the run that takes the new day, each on a fresh copy of the table;
- ``optimize --dry-run``, ``vacuum --dry-run``, ``tables``;
- ``query --as-of`` (a count at the instant after the setup), ``lookup`` (one archived day, one
  sort column value) and a split query with a one-day filter, on Spark.

The report gives each operation's median per layout and the ratio of the most days to the fewest
(median, and the range the samples allow) against issue 26's goals: 1.5x, and 1.2x for the
operations that touch one day."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lakehouse.bench.sampling import Side, measure, ratio
from lakehouse.bench.workload import archive_run, copy_of, generate_live, make_project
from lakehouse.errors import LakehouseError
from lakehouse.output import Progress, quiet

NEW_DAY_ROWS = 1_000
"""Trips of the new day every layout's archive run takes (the same day size for all layouts)."""
ONE_DAY = 1.2
"""The goal for what touches one day: within 1.2x of the fewest days."""
ANY = 1.5
"""The goal for every other operation."""
GOALS = {"verify": ANY, "check": ANY, "archive (one new day)": ONE_DAY, "optimize --dry-run": ANY,
         "vacuum --dry-run": ANY, "tables": ANY, "query --as-of": ANY, "lookup": ANY, "one-day query": ONE_DAY}
"""Each operation timed, with the most days' goal against the fewest."""
UTC = dt.timezone.utc


class Layout:
    """One layout: the bench table with ``rows`` trips over ``days`` days archived, a new day in
    live; ``day`` an archived day in the middle, ``now`` the instant the new day archives at,
    ``as_of`` an instant after the setup."""

    def __init__(self, root: Path, master: str, rows: int, days: int, report: Progress) -> None:
        self.root, self.master, self.days = root, master, days
        self.lh = make_project(root / "table", master)
        spark = self.lh.spark()
        today = dt.datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        last = today - dt.timedelta(days=3)  # the backfill's last day; the new day is the one after
        start = last - dt.timedelta(days=days - 1)
        report(f"{days} days: {rows:,} trips into live, archived")
        generate_live(spark, self.lh.paths("bench").live, rows, start, days)
        done = archive_run(self.lh, last + dt.timedelta(days=2), ledger=True)
        if done.rows_archived != rows or len(done.plan.days) != days:
            raise LakehouseError(f"bench age: {done.rows_archived} rows over {len(done.plan.days)} days archived, "
                               f"not {rows} over {days}")
        generate_live(spark, self.lh.paths("bench").live, NEW_DAY_ROWS, last + dt.timedelta(days=1), 1, load="new",
                      first_id=rows)
        self.now = last + dt.timedelta(days=3)
        self.day = (start + dt.timedelta(days=days // 2)).date()
        self.as_of = dt.datetime.now(UTC)
        self.copies = 0
        self.fresh: Any = None

    def prepare_archive(self, i: int) -> None:
        """A fresh copy of the table for the next archive run (untimed)."""
        cold(i)
        if self.fresh is not None:
            shutil.rmtree(self.fresh.settings.project, ignore_errors=True)
        self.copies += 1
        self.fresh = copy_of(self.lh, self.root / f"copy{self.copies}", self.master)

    def archive(self, _: int) -> Any:
        """The run taking the new day, on the fresh copy."""
        r = archive_run(self.fresh, self.now, ledger=True)
        if r.rows_archived != NEW_DAY_ROWS:
            raise LakehouseError(f"bench age: the new day's run archived {r.rows_archived} rows, not {NEW_DAY_ROWS}")
        return r.rows_archived

    def operations(self) -> dict[str, Side]:
        """Every operation timed on this layout."""
        lh, day = self.lh, self.day
        one_day = (f"SELECT count(*) AS n, sum(fare_total) AS fares FROM bench "
                   f"WHERE event_date = DATE '{day.isoformat()}'")

        def run(f: Callable[[], Any]) -> Side:
            return Side(lambda _: f(), cold)

        return {
            "verify": run(lambda: _all_ok(lh.verify("bench"))),
            "check": run(lambda: lh.check("bench", docs=False).ok),
            "archive (one new day)": Side(self.archive, self.prepare_archive),
            "optimize --dry-run": run(lambda: lh.optimize("bench", dry_run=True)),
            "vacuum --dry-run": run(lambda: lh.vacuum("bench", dry_run=True)),
            "tables": run(lh.tables),
            "query --as-of": run(lambda: lh.query("SELECT count(*) AS n FROM bench", as_of=self.as_of).to_pylist()),
            "lookup": run(lambda: lh.lookup("bench", day, ["city_id=5"]).range),
            "one-day query": run(lambda: lh.query(one_day).to_pylist()),
        }


def cold(_: int) -> None:
    """Before each timed run: this process's delta-rs read handles dropped, so every operation
    reads the Delta logs as a command's new process does (Spark's own caches stay, as on a
    server)."""
    from lakehouse import delta_log

    delta_log.forget_handles()


def _all_ok(checks: list[Any]) -> bool:
    bad = [c for c in checks if not c.ok]
    if bad:
        raise LakehouseError(f"bench age: verify failed: {bad[0]}")
    return True


def bench_age(master: str, rows: int = 1_000_000, days: Sequence[int] = (25, 250, 2500), repeats: int = 3,
              warmup: bool = True, only: Sequence[str] = (), report: Progress = quiet) -> dict[str, Any]:
    """Each operation of ``GOALS`` (or of ``only``) on each layout of ``rows`` trips over ``days``;
    see the module doc."""
    import time

    layouts = sorted(set(days))
    if len(layouts) < 2 or layouts[0] < 1:
        raise LakehouseError(f"bench age: give at least two different --days of 1 or more, got {list(days)}")
    if rows < layouts[-1]:
        raise LakehouseError(f"bench age: {rows} rows cannot fill {layouts[-1]} days (every day gets rows)")
    unknown = sorted(set(only) - set(GOALS))
    if unknown:
        raise LakehouseError(f"bench age: unknown operation(s) {unknown}; known: {list(GOALS)}")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-age-"))
    try:
        made: dict[int, Layout] = {}
        setup: dict[int, float] = {}
        for n in layouts:
            t0 = time.perf_counter()
            made[n] = Layout(root / f"days{n}", master, rows, n, report)
            setup[n] = round(time.perf_counter() - t0, 1)
        ops: list[dict[str, Any]] = []
        for op, goal in GOALS.items():
            if only and op not in only:
                continue
            report(f"{op}: {', '.join(map(str, layouts))} days")
            sides = {str(n): made[n].operations()[op] for n in layouts}
            samples = measure(sides, repeats, warmup=warmup)
            r = ratio(samples[str(layouts[-1])], samples[str(layouts[0])])
            ops.append({"operation": op, "goal": goal, "sides": {k: s.as_dict() for k, s in samples.items()},
                        "ratio_most_to_fewest_days": r, "met": r["median"] is not None and r["median"] <= goal})
        return {"rows": rows, "days": layouts, "repeats": repeats, "new_day_rows": NEW_DAY_ROWS,
                "setup_s": {str(n): s for n, s in setup.items()}, "operations": ops,
                "goals_met": sum(o["met"] for o in ops), "goals": len(ops)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
