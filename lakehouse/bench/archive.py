"""``lakehouse bench archive``: archiving against a plain sorted Delta write of the same rows,
measured in one run on this machine (a ratio, not an absolute target), and what the books
(the conservation check and the ledger) cost."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.bench.workload import archive_figures, generate_live, make_project

if TYPE_CHECKING:
    from lakehouse.settings import Settings


START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
"""The first day of the benchmarks' generated trips."""


def _timed_generate(spark: Any, live: str, rows: int, days: int) -> float:
    """``rows`` generated trips over ``days`` days from ``START`` into the live table ``live``; seconds."""
    t0 = time.monotonic()
    generate_live(spark, live, rows, START, days)
    return time.monotonic() - t0


def _baseline(spark: Any, live: str, definition: Any, days: int, dest: str) -> float:
    """The baseline, timed: the rows of ``live`` sorted the way archiving sorts them, in one plain
    partitioned Delta write to ``dest``."""
    from pyspark.sql import functions as F

    from lakehouse.archive.order import row_order
    from lakehouse.definitions import PARTITION_COLUMN

    rows = spark.read.format("delta").load(live)
    t0 = time.monotonic()
    (rows.repartition(days, F.col(PARTITION_COLUMN)).sortWithinPartitions(*row_order(definition))
     .write.format("delta").partitionBy(PARTITION_COLUMN).save(dest))
    return time.monotonic() - t0


def _timed_archive(lh: Any, now: dt.datetime, ledger: bool) -> tuple[float, Any]:
    """One archive run of the bench table, with or without the books: (seconds, result)."""
    from lakehouse.archive.run import run_archive

    t0 = time.monotonic()
    r = run_archive(lh.spark, lh.settings.warehouse, lh.definition("bench"), now=now, ledger=ledger)
    return time.monotonic() - t0, r


def _ledger_figures(runs: list[tuple[tuple[float, Any], bool]]) -> dict[str, Any]:
    """What the books cost: the mean of the runs with them against the mean without, and the
    mean of each step on either side (the books' own steps: conservation and ledger)."""

    def mean(xs: list[float]) -> float:
        """The mean of ``xs`` (0 when empty)."""
        return sum(xs) / len(xs) if xs else 0.0

    def side(books: bool) -> tuple[float, dict[str, float]]:
        """The mean seconds of the runs with (or without) the books, and of each of their steps."""
        picked = [(s, r) for (s, r), b in runs if b == books]
        steps = sorted({k for _, r in picked for k in r.timings})
        return mean([s for s, _ in picked]), {k: round(mean([r.timings.get(k, 0.0) for _, r in picked]), 2)
                                              for k in steps}

    with_s, with_steps = side(True)
    without_s, without_steps = side(False)
    own = with_steps.get("conservation", 0.0) + with_steps.get("ledger", 0.0)
    return {
        "runs_per_side": len(runs) // 2,
        "archive_seconds_with_ledger": round(with_s, 2),
        "archive_seconds_without_ledger": round(without_s, 2),
        "ratio_with_to_without": round(with_s / without_s, 3) if without_s else None,
        "conservation_check_seconds": with_steps.get("conservation", 0.0),
        "ledger_write_seconds": with_steps.get("ledger", 0.0),
        "share_of_the_run": round(own / with_s, 3) if with_s else None,
        "steps_with_ledger_seconds": with_steps,
        "steps_without_ledger_seconds": without_steps,
    }


def bench_archive(master: str, rows: int, days: int, workdir: str | None = None) -> dict[str, Any]:
    """Generate ``rows`` trips over ``days`` UTC days straight into live, archive them all, and
    write the same rows with a plain sorted, partitioned Delta write; both timed."""


    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-"))
    try:
        lh = make_project(root, master)
        spark = lh.spark()
        d = lh.definition("bench")
        start = START
        generate_s = _timed_generate(spark, lh.paths("bench").live, rows, days)

        baseline_s = _baseline(spark, lh.paths("bench").live, d, days, str(root / "baseline"))

        # with and without the books (the conservation check and the ledger), on copies of the
        # same table, in the order with, without, without, with (and the reverse for the merge
        # run), after a small table archived both ways: order and warm-up effects cancel out
        warm = make_project(root / "warm", master)
        generate_live(spark, warm.paths("bench").live, 10_000, start, days)
        _timed_archive(warm, start + dt.timedelta(days=days), ledger=False)
        _timed_archive(warm, start + dt.timedelta(days=days + 2), ledger=True)
        copies = {}
        for name in ("bare1", "bare2", "books2"):
            copies[name] = make_project(root / name, master)
            shutil.rmtree(copies[name].paths("bench").root)
            shutil.copytree(lh.paths("bench").root, copies[name].paths("bench").root)
        order = [(lh, True), (copies["bare1"], False), (copies["bare2"], False), (copies["books2"], True)]

        now = start + dt.timedelta(days=days + 2)
        first = [(_timed_archive(project, now, books), books) for project, books in order]
        (archive_s, result), _ = first[0]
        assert all(r.rows_archived == rows for (_, r), _ in first), [r.rows_archived for (_, r), _ in first]
        # a merge run: a tenth of the keys upserted into every day (kept, replaced and live rows)
        upserts = max(1, rows // 10)
        for project, _ in order:
            generate_live(spark, project.paths("bench").live, upserts, start, days, load="upsert")
        later = now + dt.timedelta(minutes=1)
        merge = [(_timed_archive(project, later, books), books) for project, books in reversed(order)]
        for (_, r), books in merge:
            replaced = sum(i.replaced.rows for _, i, _ in r.figures.days) if r.figures else 0
            assert r.rows_archived == upserts and (replaced == upserts or not books), (r.rows_archived, replaced)
        return {
            **archive_figures(rows, days, master, generate_s, baseline_s, archive_s, result),
            "ledger": _ledger_figures(first) | {
                "merge_run_upserted_rows": upserts,
                "merge_run": _ledger_figures(merge),
            },
        }
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _on_one_store(master: str, rows: int, days: int, root: Path, store: Settings | None,
                  warehouse: str | None) -> dict[str, Any]:
    """Archive vs the plain sorted Delta write on one store (the local disk under ``root``, or
    ``warehouse`` on the object store of ``store``), after a warm-up archive of a small table on
    the same store; on an object store, the requests each made, as the store counted them."""

    from lakehouse import storage
    from lakehouse.bench.requests import StoreRequests, not_counted

    def where(name: str) -> str | None:
        """The warehouse of the project ``name`` (None: in its folder under ``root``)."""
        return storage.join(warehouse, name) if warehouse else None

    lh = make_project(root / "bench", master, store=store, warehouse=where("bench"))
    spark = lh.spark()
    d = lh.definition("bench")
    start = START
    generate_s = _timed_generate(spark, lh.paths("bench").live, rows, days)
    warm = make_project(root / "warm", master, store=store, warehouse=where("warm"))
    generate_live(spark, warm.paths("bench").live, min(rows, 10_000), start, days)
    _timed_archive(warm, start + dt.timedelta(days=days), ledger=True)

    counter = StoreRequests(store.s3.endpoint if store and store.s3 else None) if warehouse else None
    with counter.counting() if counter else not_counted() as baseline_requests:
        baseline_s = _baseline(spark, lh.paths("bench").live, d, days, where("baseline") or str(root / "baseline"))
    with counter.counting() if counter else not_counted() as archive_requests:
        archive_s, result = _timed_archive(lh, start + dt.timedelta(days=days + 2), ledger=True)
    if result.rows_archived != rows:
        raise RuntimeError(f"bench archive: {result.rows_archived} rows archived of {rows}")
    figures = archive_figures(rows, days, master, generate_s, baseline_s, archive_s, result)
    if counter is not None:
        figures["requests"] = _per_day({"archive": archive_requests, "baseline_sorted_delta_write": baseline_requests},
                                       days, counter.why_not)
    return figures


def _per_day(counts: dict[str, dict[str, int]], days: int, why_not: str | None) -> dict[str, Any]:
    """Request counts of each side, in all and per archived day (or why there are none)."""
    if why_not is not None:
        return {"counted": False, "why_not": why_not}
    return {"counted": True, **{side: {**c, "per_day": round(c["total"] / days, 1)} for side, c in counts.items()}}


def bench_archive_on_store(master: str, rows: int, days: int, store: Settings) -> dict[str, Any]:
    """``bench archive`` on the object store of ``store`` (scratch tables under its warehouse, in a
    prefix of their own that goes at the end) and on the local disk, the same rows on each: both
    ratios to the plain sorted Delta write, and the object-store requests per archived day."""
    import uuid

    from lakehouse import storage

    scratch = storage.join(store.warehouse, f"_bench-{uuid.uuid4().hex[:12]}")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    try:
        # the object store first: the process's Spark is made with its settings (and jars)
        on_store = _on_one_store(master, rows, days, root / "s3", store, scratch)
        local = _on_one_store(master, rows, days, root / "local", None, None)
    finally:
        storage.remove_tree(scratch)
        shutil.rmtree(root, ignore_errors=True)
    return {
        "rows": rows,
        "days": days,
        "warehouse": store.warehouse,
        "ratio_archive_to_baseline_local": local["ratio_archive_to_baseline"],
        "ratio_archive_to_baseline_s3": on_store["ratio_archive_to_baseline"],
        "requests_per_archived_day": on_store["requests"]["archive"]["per_day"]
        if on_store["requests"]["counted"] else None,
        "local": local,
        "s3": on_store,
    }
