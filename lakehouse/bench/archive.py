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

from lakehouse.bench.sampling import Side, measure, median_of, ratio
from lakehouse.bench.workload import (
    START,
    archive_run,
    generate_live,
    make_project,
    sorted_delta_write,
)
from lakehouse.output import Progress, quiet

if TYPE_CHECKING:
    from lakehouse.settings import Settings


def _timed_generate(spark: Any, live: str, rows: int, days: int) -> float:
    """``rows`` generated trips over ``days`` days from ``START`` into the live table ``live``; seconds."""
    t0 = time.monotonic()
    generate_live(spark, live, rows, START, days)
    return time.monotonic() - t0


def _one_size(master: str, rows: int, days: int, repeats: int, root: Path, store: Settings | None,
              warehouse: str | None, report: Progress, warmup: bool = True, staged: bool = False) -> dict[str, Any]:
    """The sides (an archive run with the books, one without, on the staged path too with
    ``staged``, and the plain sorted Delta write) on ``rows`` generated trips over ``days`` days, on the local disk under
    ``root`` or on the object store of ``store`` under ``warehouse``: a warm-up on a small table,
    then ``repeats`` runs each, interleaved, every archive run on a fresh copy of the same live
    table; on an object store, the requests of each side's first timed run too."""
    from lakehouse import storage
    from lakehouse.bench.requests import StoreRequests, not_counted

    def where(name: str) -> str | None:
        """The warehouse of the project ``name`` (None: in its folder under ``root``)."""
        return storage.join(warehouse, name) if warehouse else None

    source = make_project(root / "source", master, store=store, warehouse=where("source"))
    spark = source.spark()
    d = source.definition("bench")
    report(f"{rows:,} rows: generating")
    generate_s = _timed_generate(spark, source.paths("bench").live, rows, days)
    small = source  # the warm-up's table: a small one of its own
    if warmup:
        small = make_project(root / "small", master, store=store, warehouse=where("small"))
        generate_live(spark, small.paths("bench").live, min(rows, 10_000), START, days)
    now = START + dt.timedelta(days=days + 2)
    counter = StoreRequests(store.s3.endpoint if store and store.s3 else None) if warehouse else None
    requests: dict[str, dict[str, int]] = {}
    projects: dict[tuple[str, int], Any] = {}

    def name(side: str, i: int) -> str:
        return f"{side}-{'warm' if i < 0 else i}"

    def fresh(side: str, i: int) -> None:
        """A project whose live table holds the generated rows (the small table for the warm-up);
        the previous run's project of the side goes."""
        if (side, i - 1) in projects:
            _remove(projects.pop((side, i - 1)), warehouse)
        lh = make_project(root / name(side, i), master, store=store, warehouse=where(name(side, i)))
        src = small if i < 0 else source
        if warehouse:  # an object store: the same rows generated again (a copy is as many requests)
            generate_live(spark, lh.paths("bench").live, min(rows, 10_000) if i < 0 else rows, START, days)
        else:
            shutil.rmtree(lh.paths("bench").root)
            shutil.copytree(src.paths("bench").root, lh.paths("bench").root)
        projects[(side, i)] = lh

    def archive(side: str, books: bool, one_pass: bool = True) -> Side:
        def run(i: int) -> Any:
            with counter.counting() if counter and i == 0 else not_counted() as counted:
                r = archive_run(projects[(side, i)], now, books, one_pass)
            if counted:
                requests[side] = counted
            want = min(rows, 10_000) if i < 0 else rows
            if r.rows_archived != want:
                raise RuntimeError(f"bench archive: {r.rows_archived} rows archived of {want}")
            return r

        return Side(run, lambda i: fresh(side, i))

    def baseline_dest(i: int) -> str:
        return where(name("baseline", i)) or str(root / name("baseline", i))

    def baseline(i: int) -> None:
        src = small if i < 0 else source
        dest = baseline_dest(i)
        with counter.counting() if counter and i == 0 else not_counted() as counted:
            sorted_delta_write(spark, src.paths("bench").live, d, days, dest)
        if counted:
            requests["baseline_sorted_delta_write"] = counted

    sides = {"archive": archive("archive", True),
             **({"archive_staged": archive("archive_staged", True, one_pass=False)} if staged else {}),
             "archive_without_books": archive("archive_without_books", False),
             "baseline_sorted_delta_write": Side(baseline, lambda i: storage.remove_tree(baseline_dest(i - 1)))}
    samples = measure(sides, repeats, warmup, report=lambda what: report(f"{rows:,} rows: {what}"))
    for lh in projects.values():
        _remove(lh, warehouse)
    books = samples["archive"].results
    figures: dict[str, Any] = {
        "rows": rows, "days": days, "master": master, "generate_seconds": round(generate_s, 2),
        "sides": {side: s.as_dict() for side, s in samples.items()},
        "ratio_archive_to_baseline": ratio(samples["archive"], samples["baseline_sorted_delta_write"]),
        "ratio_books": ratio(samples["archive"], samples["archive_without_books"]),
        "archive_steps_seconds": median_of([r.timings for r in books]),
        "archive_without_books_steps_seconds": median_of([r.timings for r in samples["archive_without_books"].results]),
        "vector_files": books[0].vector_files,
    }
    if staged:
        figures["ratio_staged_to_baseline"] = ratio(samples["archive_staged"], samples["baseline_sorted_delta_write"])
        figures["ratio_one_pass_to_staged"] = ratio(samples["archive"], samples["archive_staged"])
        figures["archive_staged_steps_seconds"] = median_of([r.timings for r in samples["archive_staged"].results])
    if counter is not None:
        figures["requests"] = _per_day({side: requests[side] for side in ("archive", "baseline_sorted_delta_write")},
                                       days, counter.why_not)
    return figures


def _remove(lh: Any, warehouse: str | None) -> None:
    """A finished run's scratch project, and its warehouse on the object store."""
    from lakehouse import storage

    if warehouse:
        storage.remove_tree(lh.settings.warehouse)
    shutil.rmtree(lh.settings.project, ignore_errors=True)


def _per_day(counts: dict[str, dict[str, int]], days: int, why_not: str | None) -> dict[str, Any]:
    """Request counts of each side, in all and per archived day (or why there are none)."""
    if why_not is not None:
        return {"counted": False, "why_not": why_not}
    return {"counted": True, **{side: {**c, "per_day": round(c["total"] / days, 1)} for side, c in counts.items()}}


def bench_archive(master: str, sizes: list[int], days: int, repeats: int = 3, store: Settings | None = None,
                  report: Progress = quiet, warmup: bool = True, staged: bool = False) -> dict[str, Any]:
    """``bench archive``: for each number of rows of ``sizes``, archive runs with and without the
    books against the plain sorted Delta write of the same rows (``_one_size``), on a scratch
    folder of the local disk, or with ``store`` on its object store too (scratch tables in a
    prefix of their own under its warehouse, removed at the end), the same rows on each."""
    import uuid

    from lakehouse import storage

    if not sizes:
        raise ValueError("bench archive needs at least one number of rows")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    scratch = storage.join(store.warehouse, f"_bench-{uuid.uuid4().hex[:12]}") if store else None
    try:
        on_store = []
        if store is not None and scratch is not None:  # first: the process's Spark is made with its settings
            on_store = [_one_size(master, n, days, repeats, root / f"s3-{n}", store, storage.join(scratch, str(n)),
                                  lambda what: report(f"S3: {what}"), warmup, staged) for n in sorted(sizes)]
        local = [_one_size(master, n, days, repeats, root / f"local-{n}", None, None, report, warmup, staged)
                 for n in sorted(sizes)]
    finally:
        if scratch is not None:
            storage.remove_tree(scratch)
        shutil.rmtree(root, ignore_errors=True)
    runs = [{"store": "s3", **f} for f in on_store] + [{"store": "local", **f} for f in local]
    doc: dict[str, Any] = {"days": days, "repeats": repeats, "master": master, "runs": runs}
    if store is not None:
        doc["warehouse"] = store.warehouse
    return doc
