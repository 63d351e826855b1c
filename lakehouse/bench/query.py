"""``lakehouse bench query``: what the split costs a query, and what the vectors buy a lookup.

On generated trips over ``days`` days, all archived but the last (so every query reads both
sides of the cutoff), each side measured by ``bench.sampling`` (a warm-up, then interleaved
repeats):
- per query of ``QUERIES``:
  - ``split_spark``: the query as users run it (``Lakehouse.query``: the split views pinned and
    registered, the SQL guarded and run on Spark, the answer collected as Arrow);
  - ``one_table_spark``: the same SQL on Spark over one plain Delta table holding the same rows
    (the split's own answer written once, partitioned by day), read anew each run (P3: the goal
    is the split at most 1.10x this);
  - ``split_duckdb``: the query on the DuckDB reader (no Spark);
- ``lookup``: ``lookups`` (city, status) pairs looked up on one archived day by a
  ``Lakehouse.lookups`` reader (binary search on the day's vector runs, kept between calls),
  against ``duckdb_scan``: a DuckDB count of the same rows over the day's Parquet files on one
  connection (P4: the goal is the lookup at least 50x faster). Both must find the same number of
  rows. ``lookup_one_shot``: one ``Lakehouse.lookup`` (the command's way: the log and the files
  read anew).
"""

from __future__ import annotations

import datetime as dt
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from lakehouse.bench.sampling import Side, measure, prefixed, ratio
from lakehouse.bench.workload import START, archive_run, generate_live, make_project
from lakehouse.output import Progress, quiet

QUERIES = {
    "per_city": "SELECT city_id, count(*) AS n, sum(fare_total) AS fare FROM bench GROUP BY city_id ORDER BY city_id",
    "per_day": ("SELECT CAST(event_time AS DATE) AS day, avg(distance_km) AS km FROM bench WHERE status = 1 "
                "GROUP BY CAST(event_time AS DATE) ORDER BY day"),
    "one_city": ("SELECT vehicle_type, count(*) AS n, max(fx_rate) AS fx FROM bench WHERE city_id = 3 AND status = 2 "
                 "GROUP BY vehicle_type ORDER BY vehicle_type"),
}
"""The queries timed: a scan with a small group-by, a filter with a group by day, a selective filter."""


def bench_query(master: str, rows: int = 3_000_000, days: int = 10, repeats: int = 5, lookups: int = 200,
                warmup: bool = True, report: Progress = quiet) -> dict[str, Any]:
    """Every side of the module's description; seconds, and the ratios the goals name (their
    median over the queries too). A lookup side times ``lookups`` calls (seconds per call)."""
    from lakehouse import delta_log
    from lakehouse.definitions import PARTITION_COLUMN
    from lakehouse.query import duckdb as duck
    from lakehouse.query import sources
    from lakehouse.query import spark as spark_engine
    from lakehouse.query.split import current
    from lakehouse.stream.status import watermarks

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-query-"))
    try:
        lh = make_project(root / "project", master)
        spark = lh.spark()
        begin = START - dt.timedelta(days=days + 1)  # every --now in the past
        report(f"{rows:,} rows over {days} days: generating and archiving all days but the last")
        generate_live(spark, lh.paths("bench").live, rows, begin, days)
        archive_run(lh, begin + dt.timedelta(days=days), ledger=True)  # cutoff: the start of the last day
        tables = sources(lh.settings.warehouse, lh.definitions())
        spark_engine.register_splits(spark, [current(t) for t in tables], watermarks(tables))
        one = str(root / "one-table")
        spark.sql("SELECT * FROM bench") \
            .write.format("delta").partitionBy(PARTITION_COLUMN).save(one)
        split_rows = {"archive": delta_log.row_count(lh.paths("bench").archive),
                      "live": delta_log.row_count(lh.paths("bench").live)}

        def on(engine: str, sql: str) -> Side:
            """The side of ``sql`` run as ``query`` runs it on ``engine``."""
            return Side(lambda i: lh.query(sql, engine))  # type: ignore[arg-type]

        def one_table(sql: str) -> Side:
            """The side of ``sql`` on the one Delta table."""
            def run(i: int) -> Any:
                """The one table read anew, ``sql`` run on it, collected as Arrow."""
                spark.read.format("delta").load(one).createOrReplaceTempView("bench")
                return spark.sql(sql).toArrow()

            return Side(run)

        out: dict[str, Any] = {"rows": rows, "days": days, "repeats": repeats, "master": master,
                               "rows_archived": split_rows["archive"], "rows_live": split_rows["live"], "queries": {}}
        for name, sql in QUERIES.items():
            sides = {"split_spark": on("spark", sql), "one_table_spark": one_table(sql),
                     "split_duckdb": on("duckdb", sql)}
            samples = measure(sides, repeats, warmup, prefixed(report, name))
            answers = {side: _rounded(s.results[-1].to_pylist()) for side, s in samples.items()}
            if not answers["split_spark"] == answers["one_table_spark"] == answers["split_duckdb"]:
                raise RuntimeError(f"bench query: {name}: the sides answer differently: {answers}")
            out["queries"][name] = {
                "sql": sql, "sides": {side: s.as_dict() for side, s in samples.items()},
                "ratio_split_to_one_table": ratio(samples["split_spark"], samples["one_table_spark"]),
                "ratio_duckdb_to_spark": ratio(samples["split_duckdb"], samples["split_spark"]),
            }
        for key in ("ratio_split_to_one_table", "ratio_duckdb_to_spark"):
            out[key] = round(statistics.median(q[key]["median"] for q in out["queries"].values()), 3)

        day = (begin + dt.timedelta(days=days // 2)).date()
        files = delta_log.add_actions(lh.paths("bench").archive)
        in_day = [p for p, v in zip(files["path"].to_pylist(), files[f"partition.{PARTITION_COLUMN}"].to_pylist())
                  if str(v) == day.isoformat()]
        con = duck.connect()
        day_files = ", ".join(
            "'" + delta_log.file_uri(lh.paths("bench").archive, p).replace("'", "''") + "'" for p in in_day)
        scan = (f"SELECT count(*) FROM read_parquet([{day_files}]) "
                "WHERE city_id = $city_id AND status = $status")
        keys = [{"city_id": (3 + 7 * k) % 40, "status": k % 4} for k in range(lookups)]
        reader = lh.lookups("bench")  # pinned to the committed cutoff, as the scan's file list is

        def looked_up(i: int) -> int:
            """A lookup of each key (the reader keeps the day's runs between calls, as the DuckDB
            connection keeps its cache); the rows found in all."""
            return sum(int(reader.lookup(day, key).range.count) for key in keys)

        def scanned(i: int) -> int:
            """A DuckDB count of each key over the day's Parquet files; the rows found in all."""
            found = 0
            for key in keys:
                n = con.execute(scan, key).fetchone()
                assert n is not None
                found += int(n[0])
            return found

        one_shot = measure({"lookup_one_shot": Side(lambda i: int(lh.lookup("bench", day, [
            f"{c}={v}" for c, v in keys[0].items()]).range.count))}, repeats, warmup,
            lambda what: report(f"lookup (one shot): {what}"))["lookup_one_shot"]
        samples = measure({"lookup": Side(looked_up), "duckdb_scan": Side(scanned)}, repeats, warmup,
                          lambda what: report(f"lookup: {what}"))
        found = {side: s.results[-1] for side, s in samples.items()}
        if found["lookup"] != found["duckdb_scan"]:
            raise RuntimeError(f"bench query: the lookup found {found['lookup']} rows, DuckDB {found['duckdb_scan']}")
        per_call = {side: s.median / lookups for side, s in samples.items()}
        out["lookup"] = {"day": day.isoformat(), "keys": len(keys), "rows_found": found["lookup"],
                         "day_rows": int(con.execute(scan.split(" WHERE ")[0]).fetchone()[0]),  # type: ignore[index]
                         "calls_per_run": lookups, "seconds_per_call": {k: round(v, 8) for k, v in per_call.items()},
                         "one_shot_seconds": one_shot.as_dict(),
                         "sides": {side: s.as_dict() for side, s in samples.items()},
                         "times_faster_than_duckdb_scan": round(per_call["duckdb_scan"] / per_call["lookup"], 3)}
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _rounded(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples, floats to 9 significant digits (a sum's last bits depend on its order)."""
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in r.values()) for r in rows]
