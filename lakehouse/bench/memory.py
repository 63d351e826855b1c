"""``lakehouse bench memory`` (P6): one UTC day several times larger than the memory Spark is
given, archived, against the plain sorted Delta write of the same day under the same limit;
each in a process of its own whose peak memory is reported.

The day is generated first (a process with Spark's defaults). Then each side runs in a fresh
process with a ``--driver-memory`` JVM (``LAKEHOUSE_DRIVER_MEMORY``) and Spark's ``spark.memory.fraction`` (0.6): Spark's
execution and storage memory is then about (heap - 300 MB) x 0.6, and the day's rows, as Spark
holds them in memory (its estimate of the cached day), are several times that, so Spark's sort
must spill. Reported per side: seconds, bytes spilled, and the peak resident memory of the JVM
(``VmHWM``) and of the Python driver. Sides run one after the other, ``repeats`` times each,
interleaved.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lakehouse.output import Progress, quiet

RESERVED_MB = 300
"""The heap Spark keeps for itself before ``spark.memory.fraction`` applies."""
FRACTION = 0.6


def _child(root: Path, side: str, out: str) -> dict[str, Any]:
    """In a child process: one side on the day of ``root``'s project; its figures."""
    import resource

    from lakehouse.bench.workload import START, archive_run, sorted_delta_write
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings

    lh = Lakehouse(Settings.resolve(root, str(root / "warehouse"), "local[2]", env={},
                                    conf=[f"spark.memory.fraction={FRACTION}"]))
    spark = lh.spark()
    t0 = time.monotonic()
    if side == "archive":
        r = archive_run(lh, START + dt.timedelta(days=2), ledger=True)
        rows = r.rows_archived
    else:
        sorted_delta_write(spark, lh.paths("bench").live, lh.definition("bench"), 1, out)
        rows = spark.read.format("delta").load(out).count()
    seconds = time.monotonic() - t0
    sc: Any = spark.sparkContext
    jvm: Any = sc._jvm
    stages = sc._jsc.sc().statusStore().stageList(
        jvm.java.util.ArrayList(), False, False, sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    spilled, it = 0, stages.iterator()
    while it.hasNext():
        spilled += int(it.next().diskBytesSpilled())
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return {"rows": int(rows), "seconds": round(seconds, 2), "spilled_mb": round(spilled / 2**20, 1),
            "jvm_peak_rss_mb": round(hwm / 1024, 1),
            "python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "driver_memory": sc.getConf().get("spark.driver.memory")}


def bench_memory(master: str, rows: int = 7_500_000, driver_memory_mb: int = 512, repeats: int = 1,
                 report: Progress = quiet) -> dict[str, Any]:
    """Every side of the module's description on ``rows`` generated trips of one day."""
    from lakehouse.bench.workload import START, generate_live, make_project

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-memory-"))
    try:
        lh = make_project(root / "project", master)
        spark = lh.spark()
        report(f"{rows:,} rows of one day: generating")
        generate_live(spark, lh.paths("bench").live, rows, START, 1)
        day = spark.read.format("delta").load(lh.paths("bench").live).cache()
        day.count()
        in_memory = int(day._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
        day.unpersist()
        spark_memory = int((driver_memory_mb - RESERVED_MB) * FRACTION * 2**20)
        template = root / "template"
        shutil.copytree(root / "project", template)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
        env["LAKEHOUSE_DRIVER_MEMORY"] = f"{driver_memory_mb}m"
        samples: dict[str, list[dict[str, Any]]] = {"archive": [], "sorted_delta_write": []}
        for r in range(repeats):
            for side in (("archive", "sorted_delta_write") if r % 2 == 0 else ("sorted_delta_write", "archive")):
                report(f"{side}: run {r + 1} of {repeats}")
                work = root / f"{side}-{r}"
                shutil.copytree(template, work)
                proc = subprocess.run([sys.executable, "-m", "lakehouse.bench.memory", str(work), side,
                                       str(root / f"out-{side}-{r}")], env=env, capture_output=True, text=True,
                                      timeout=3600)
                if proc.returncode != 0:
                    raise RuntimeError(f"bench memory: {side} failed: {proc.stderr.strip()[-800:]}")
                doc = json.loads(proc.stdout.strip().splitlines()[-1])
                if doc["rows"] != rows:
                    raise RuntimeError(f"bench memory: {side} wrote {doc['rows']} rows of {rows}")
                samples[side].append(doc)
                shutil.rmtree(work, ignore_errors=True)
        out: dict[str, Any] = {"rows": rows, "master": master, "repeats": repeats,
                               "driver_memory_mb": driver_memory_mb, "spark_memory_mb": round(spark_memory / 2**20, 1),
                               "day_in_memory_mb": round(in_memory / 2**20, 1),
                               "day_to_spark_memory": round(in_memory / spark_memory, 2), "sides": {}}
        for side, runs in samples.items():
            out["sides"][side] = {k: statistics.median(r[k] for r in runs)
                                  for k in ("seconds", "spilled_mb", "jvm_peak_rss_mb", "python_peak_rss_mb")}
            out["sides"][side]["samples"] = runs
        a, b = out["sides"]["archive"], out["sides"]["sorted_delta_write"]
        out["ratio_archive_to_sorted_write"] = round(a["seconds"] / b["seconds"], 3)
        out["ratio_jvm_peak_memory"] = round(a["jvm_peak_rss_mb"] / b["jvm_peak_rss_mb"], 3)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # a side in a process of its own: python -m lakehouse.bench.memory ROOT SIDE OUT
    print(json.dumps(_child(Path(sys.argv[1]), sys.argv[2], sys.argv[3])))
