"""A day batch larger than the memory Spark is given archives without running out of memory:
Spark's sort spills to disk and the vector encoding streams over the sorted rows.

The run happens in its own process with a 512 MB driver (Spark's minimum) of which Spark may use
a fifth for execution and storage (``spark.memory.fraction`` 0.2: about 30 MB), on one UTC day of
rows that take several times that memory, and the test checks that Spark really spilled and that
the archive and its vector files are exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import FAST_JVM

pytestmark = pytest.mark.slow

ROWS = 500_000

SCRIPT = textwrap.dedent('''
    import datetime as dt, json, sys
    from pathlib import Path
    root, rows = Path(sys.argv[1]), int(sys.argv[2])
    (root / "tables").mkdir(parents=True)
    (root / "migrations").mkdir()
    (root / "tables" / "big.yaml").write_text("""
    name: big
    columns:
      - {name: trip_id, type: string, nullable: false}
      - {name: city_id, type: int}
      - {name: status, type: int}
      - {name: fx_rate, type: double}
      - {name: fare_total, type: double}
      - {name: note, type: string}
      - {name: event_time, type: timestamp, nullable: false}
    primary_key: [trip_id]
    event_time: event_time
    archive: {delay: 1d, sort_columns: [city_id, status, fx_rate]}
    """)
    (root / "migrations" / "0001_big.py").write_text("def upgrade(ctx):\\n    ctx.create_table('big')\\n")
    from lakehouse.project import Lakehouse
    from lakehouse.settings import Settings
    lh = Lakehouse(Settings.resolve(root, str(root / "warehouse"), "local[2]", env={},
                                   conf=["spark.memory.fraction=0.2"]))
    lh.migrate()
    spark = lh.spark()
    from pyspark.sql import functions as F
    day = dt.date(2026, 11, 18)
    i = F.col("id")
    (spark.range(rows, numPartitions=8).select(
        F.concat(F.lit("k"), i.cast("string")).alias("trip_id"),
        (F.hash(i) % 40).cast("int").alias("city_id"),
        (F.hash(i, F.lit(1)) % 4).cast("int").alias("status"),
        ((F.abs(F.hash(i, F.lit(2))) % 9) / 10.0).alias("fx_rate"),
        (F.abs(F.hash(i, F.lit(3))) % 10000 / 100.0).alias("fare_total"),
        F.sha2(i.cast("string"), 256).alias("note"),
        F.timestamp_seconds(F.lit(int(dt.datetime(2026, 11, 18, tzinfo=dt.timezone.utc).timestamp())) + i % 86400).alias("event_time"),
        F.lit("generated").alias("_lh_load"),
        F.lit(day).alias("event_date"),
    ).write.format("delta").mode("append").save(lh.paths("big").live))
    conf = spark.sparkContext.getConf()
    mem = (conf.get("spark.driver.memory"), conf.get("spark.memory.fraction"))
    result = lh.archive("big", now=dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc))
    spilled = 0
    sc = spark.sparkContext
    jvm = sc._jvm
    stages = sc._jsc.sc().statusStore().stageList(
        jvm.java.util.ArrayList(), False, False, sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    it = stages.iterator()
    while it.hasNext():
        s = it.next()
        spilled += s.diskBytesSpilled()
    counts = lh.query("SELECT count(*) AS n, count(DISTINCT trip_id) AS k FROM big", "duckdb").to_pylist()[0]
    checks = [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in lh.verify("big")
              if c.name in ("vector files decode to their day", "archive days sorted")]
    print(json.dumps({"memory": mem, "archived": result.rows_archived, "spilled": spilled, "counts": counts,
                      "checks": checks, "seconds": result.seconds}))
''')


def test_a_day_larger_than_spark_memory_archives(tmp_path):
    script = tmp_path / "big.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env["LAKEHOUSE_DRIVER_MEMORY"] = "512m"
    env["LAKEHOUSE_JAVA_OPTS"] = FAST_JVM  # the quick-start JIT: the same memory, 40% less CPU
    env["LAKEHOUSE_SHUFFLE_PARTITIONS"] = "2"
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "proj"), str(ROWS)], env=env,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["memory"] == ["512m", "0.2"]
    assert doc["archived"] == ROWS
    assert doc["counts"] == {"n": ROWS, "k": ROWS}
    assert doc["spilled"] > 0, "the sort did not spill: the day was not larger than Spark's memory"
    assert all(c["ok"] for c in doc["checks"]) and len(doc["checks"]) == 2, doc["checks"]
