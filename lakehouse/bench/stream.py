"""``lakehouse bench stream``: what a producer's insert costs, and rows per second through 1 and 4
producers (insert and release into live) against plain loads of the same rows.

Sides, each measured by ``bench.sampling`` (a warm-up, then interleaved repeats, each run on a
fresh project made untimed):
- ``load``: one plain ``load`` per batch (the baseline);
- ``producers_1``: one producer inserts every batch;
- ``producers_4``: four producers, in threads of their own, each insert a quarter of every batch
  (batch k covers hour k of event time, so each release waits for the slowest producer);
- ``insert``: ``inserts`` inserts of one row each by one attached producer (the fixed cost of an
  insert: its seconds over ``inserts``);
- ``cli_insert``: ``lakehouse producer ... insert`` of a one-row file, the whole process (its
  interpreter, its imports, and a JVM if it started one).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.bench.sampling import Side, measure
from lakehouse.bench.workload import INGEST_TABLE, make_project, write_trips_csv
from lakehouse.output import Progress, quiet

if TYPE_CHECKING:
    from lakehouse.project import Lakehouse

HOUR = 3_600_000_000
START = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000


def _files(folder: Path, producers: int, batches: int, rows: int) -> list[list[Path]]:
    """[batch][producer] -> a CSV file; ``rows`` rows in total per batch, batch k in hour k."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(batches):
        row = []
        for p in range(producers):
            f = folder / f"b{k:04d}-p{p}.csv"
            write_trips_csv(f, rows // producers, seed=k * 10 + p, start_us=START + k * HOUR, span_us=HOUR)
            row.append(f)
        out.append(row)
    return out


def _through(lh: Lakehouse, files: list[list[Path]], producers: int | None) -> int:
    """The batches through ``producers`` producers (in threads, each its own share of every
    batch), or plain loads (None); the rows in live."""
    from lakehouse import delta_log

    if producers is None:
        for batch in files:
            lh.load("bench", [str(f) for f in batch])
    else:
        ps = [lh.table("bench").producer(f"p{i}") for i in range(producers)]

        def produce(i: int) -> None:
            """Producer ``i``'s share of every batch, in its own thread."""
            ps[i].attach()
            for batch in files:
                ps[i].insert_files([str(batch[i])])

        with ThreadPoolExecutor(producers) as pool:
            list(pool.map(produce, range(producers)))
        for p in ps:
            p.detach()
    return delta_log.row_count(lh.paths("bench").live)


def bench_stream(master: str, batches: int = 16, rows: int = 50_000, repeats: int = 3, inserts: int = 20,
                 warmup: bool = True, report: Progress = quiet, workdir: str | None = None) -> dict[str, Any]:
    """Every side of the module's description, measured; seconds, rows per second, the insert's
    fixed cost and the ratios the goals name (4 producers over 1 in rows per second)."""
    root = Path(workdir or tempfile.mkdtemp(prefix="lakehouse-bench-stream-"))
    table = INGEST_TABLE.replace("BLOCKS", "16")
    try:
        inputs = {"load": _files(root / "in-1", 1, batches, rows)}
        inputs["producers_1"] = inputs["load"]
        inputs["producers_4"] = _files(root / "in-4", 4, batches, rows)
        one_row = root / "one-row.csv"
        write_trips_csv(one_row, 1, seed=7, start_us=START, span_us=HOUR)
        projects: dict[str, Lakehouse] = {}
        folders: dict[str, Path] = {}

        def fresh(name: str, i: int) -> Lakehouse:
            """A fresh project for run ``i`` of side ``name``."""
            folders[name] = root / f"{name}-{i + 2}"
            shutil.rmtree(folders[name], ignore_errors=True)
            projects[name] = make_project(folders[name], master, table)
            return projects[name]

        def flow(name: str, producers: int | None) -> Side:
            """The side of the batches through ``producers`` producers (None: loads)."""
            def prepare(i: int) -> None:
                """A fresh project for run ``i``."""
                fresh(name, i)

            return Side(run=lambda i: _through(projects[name], inputs[name], producers), prepare=prepare)

        def prepare_inserts(i: int) -> None:
            """A fresh project with producer ``p`` attached."""
            fresh("insert", i).table("bench").producer("p").attach()

        def run_inserts(i: int) -> int:
            """``inserts`` one-row inserts in this process."""
            p = projects["insert"].table("bench").producer("p")
            for _ in range(inserts):
                p.insert_files([str(one_row)], force=True)
            return inserts

        def prepare_cli(i: int) -> None:
            """A fresh project with producer ``p`` attached."""
            lh = fresh("cli_insert", i)
            lh.table("bench").producer("p").attach()

        def run_cli(i: int) -> int:
            """One ``lakehouse producer ... insert`` of a one-row file, as a process."""
            lh = projects["cli_insert"]
            env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
            env["LAKEHOUSE_MASTER"] = master
            proc = subprocess.run([sys.executable, "-m", "lakehouse.cli", "--project", str(folders["cli_insert"]),
                                   "--warehouse",
                                   lh.settings.warehouse, "producer", "bench", "p", "insert", str(one_row), "--force"],
                                  env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"lakehouse producer insert failed: {proc.stderr.strip()[-500:]}")
            return 1

        sides = {"load": flow("load", None), "producers_1": flow("producers_1", 1),
                 "producers_4": flow("producers_4", 4), "insert": Side(run_inserts, prepare_inserts),
                 "cli_insert": Side(run_cli, prepare_cli)}
        samples = measure(sides, repeats, warmup, report)
        out: dict[str, Any] = {"master": master, "batches": batches, "rows_per_batch": rows, "repeats": repeats,
                               "inserts": inserts, "sides": {}}
        for name, s in samples.items():
            doc = s.as_dict()
            if name in inputs:
                got, n = s.results[-1], 4 if name == "producers_4" else 1
                if got != batches * (rows // n) * n:
                    raise RuntimeError(f"bench stream: {name} left {got} rows in live, not {batches * (rows // n) * n}")
                doc["rows_per_s"] = round(got / s.median)
            out["sides"][name] = doc
        out["insert_fixed_cost_s"] = round(samples["insert"].median / inserts, 4)
        out["cli_insert_s"] = round(samples["cli_insert"].median, 3)
        p1, p4 = out["sides"]["producers_1"]["rows_per_s"], out["sides"]["producers_4"]["rows_per_s"]
        out["ratio_producers_4_to_1"] = round(p4 / p1, 3)
        out["ratio_producers_1_to_load"] = round(samples["producers_1"].median / samples["load"].median, 3)
        return out
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
