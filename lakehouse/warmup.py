"""Record the Spark driver's class archive (lakehouse.spark.class_archive) from a real run.

``python -m lakehouse.warmup`` (``make setup`` runs it once) starts Spark with
``-XX:ArchiveClassesAtExit``, takes a small table in a throw-away project through what lakehouse
commands do on Spark (migrate, load with a bad row, archive with vector files, a query on the
split view, an upsert, a second archive run merging into a day, optimize, a producer's insert),
stops the driver, waits for the JVM to write the archive as it exits and moves the file into
place in one rename. Every later driver maps those classes instead of loading them.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

from lakehouse.errors import ConfigError
from lakehouse.settings import Settings, set_env
from lakehouse.spark import class_archive
from lakehouse.spark.session import get_spark, stop_spark

TABLE = """\
name: warm
columns:
  - {name: trip_id, type: string, nullable: false}
  - {name: city_id, type: int}
  - {name: fare, type: 'decimal(10,2)'}
  - {name: event_time, type: timestamp, nullable: false}
primary_key: [trip_id]
event_time: event_time
archive: {delay: 1d, sort_columns: [city_id]}
stream: {allowed_lateness: 1d, lease: 5m}
"""


def workload(root: Path, master: str) -> None:
    """lakehouse's Spark operations, once each, on a small table in the project folder ``root``."""
    from lakehouse.project import Lakehouse

    (root / "tables").mkdir(parents=True)
    (root / "migrations").mkdir()
    (root / "tables" / "warm.yaml").write_text(TABLE)
    (root / "migrations" / "0001_create_warm.py").write_text("def upgrade(ctx):\n    ctx.create_table('warm')\n")
    lh = Lakehouse(Settings.resolve(root, str(root / "warehouse"), master, env={}))
    lh.migrate()
    rows = "\n".join(f"t{i},{i % 3},{i}.50,2026-11-{18 + i % 3}T{i % 24:02d}:00:00Z" for i in range(30))
    first = root / "first.csv"
    first.write_text(f"trip_id,city_id,fare,event_time\n{rows}\nbad,x,1,not-a-time\n")
    lh.load("warm", [str(first)])
    lh.archive("warm", now=dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc))
    lh.query("SELECT city_id, count(*) AS n, sum(fare) AS s FROM warm GROUP BY city_id", "spark")
    again = root / "again.csv"
    again.write_text("trip_id,city_id,fare,event_time\nt1,2,9.99,2026-11-19T01:00:00Z\nt99,1,1.00,2026-11-18T05:00:00Z\n")
    lh.load("warm", [str(again)])
    lh.archive("warm", now=dt.datetime(2026, 11, 20, 13, tzinfo=dt.timezone.utc))
    lh.optimize("warm")
    producer = lh.producer("warm", "warmup", now=dt.datetime(2026, 11, 20, 14, tzinfo=dt.timezone.utc))
    producer.attach()
    producer.insert([{"trip_id": "p1", "city_id": 1, "fare": "2.00", "event_time": "2026-11-20T13:59:00Z"}])
    producer.detach()


def record(target: Path | None = None, master: str = "local[2]") -> Path:
    """Record the class archive into ``target`` (default: class_archive.default_path()); must run
    in a process that has not started Spark yet."""
    target = target or class_archive.default_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    set_env("LAKEHOUSE_CLASS_ARCHIVE", "off")  # a JVM cannot map one archive while it writes another
    # C1 alone: the archive holds classes, not compiled code, and a short workload is recorded
    # with a third less CPU than with C2 compiling beside it (make's set-up runs it beside others)
    spark = get_spark(master, java_options=f"-XX:ArchiveClassesAtExit={partial} {class_archive.QUIET} "
                                           "-XX:TieredStopAtLevel=1")
    jvm = getattr(spark.sparkContext._gateway, "proc", None)  # type: ignore[attr-defined]
    if jvm is None or jvm.stdin is None:
        raise ConfigError("cannot record the class archive: this process did not start the Spark driver")
    with tempfile.TemporaryDirectory(prefix="lakehouse-warmup-") as tmp:
        workload(Path(tmp) / "project", master)
    stop_spark()
    jvm.stdin.close()  # the driver exits when its standard input closes, and writes the archive then
    if jvm.wait(timeout=600) != 0 or not partial.is_file():
        raise ConfigError(f"the JVM wrote no class archive at {partial} (exit {jvm.returncode})")
    os.replace(partial, target)
    return target


def main() -> int:
    """Record the archive, saying where and how long it took (on stderr)."""
    started = time.monotonic()
    try:
        target = record(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    except Exception as e:  # noqa: BLE001 - the archive only speeds starts up: say why, go on without
        print(f"note: no Spark class archive recorded ({e}); Spark starts without it", file=sys.stderr)
        return 0
    size = target.stat().st_size / 2**20
    print(f">> Spark class archive {target} ({size:.0f} MB) in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
