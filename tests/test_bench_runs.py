"""The benchmarks of issue 20 run end to end at a tiny size on the suite's Spark (not timed: what
is checked is that every side ran, that the sides agree on their answers, and the documents and
plots they make). Each benchmark checks its own answers too: the split, the one table and DuckDB
give the same rows, the lookup finds what a scan counts, every row ends in live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MASTER

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _sides_ran(doc: dict[str, Any], names: set[str], repeats: int = 1) -> None:
    assert set(doc["sides"]) == names
    for side in doc["sides"].values():
        assert side["runs"] == repeats and len(side["samples_s"]) == repeats and side["median_s"] > 0


def test_bench_stream_measures_an_inserts_cost_and_producers(spark: Any, tmp_path: Path) -> None:
    from lakehouse.bench import bench_stream
    from lakehouse.bench.plot import plot_stream

    doc = bench_stream(MASTER, batches=2, rows=400, repeats=1, inserts=2, warmup=False)
    _sides_ran(doc, {"load", "producers_1", "producers_4", "insert", "cli_insert"})
    assert doc["insert_fixed_cost_s"] > 0 and doc["cli_insert_s"] > 0
    assert doc["sides"]["producers_4"]["rows_per_s"] > 0 and doc["ratio_producers_4_to_1"] > 0
    assert plot_stream(doc, tmp_path / "stream.png").stat().st_size > 10_000


def test_bench_incremental_archives_one_new_day_against_the_full_rebuild(spark: Any, tmp_path: Path) -> None:
    from lakehouse.bench import bench_incremental
    from lakehouse.bench.plot import plot_incremental

    doc = bench_incremental(MASTER, rows=4_000, days=3, repeats=1, warmup=False)
    _sides_ran(doc, {"new_day", "day_write", "full"})
    assert 0 < doc["rows_new_day"] < 4_000 and doc["ratio_new_day_to_full"]["median"] > 0
    assert "write" in doc["new_day_steps_seconds"] and "purge" in doc["full_steps_seconds"]
    assert plot_incremental(doc, tmp_path / "incremental.png").stat().st_size > 10_000


def test_bench_delete_rewrites_only_the_days_holding_a_key(spark: Any) -> None:
    from lakehouse.bench import bench_delete

    doc = bench_delete(MASTER, rows=8_000, days=4, keys=40, few_days=2, repeats=1, warmup=False)
    _sides_ran(doc, {"delete", "delete_few", "rearchive"})
    assert doc["keys"] == doc["keys_few"] == 40
    assert doc["delete_wrote"]["days_rewritten"] == 4 and doc["delete_few_wrote"]["days_rewritten"] == 2
    assert 0 < doc["delete_few_wrote"]["bytes_written"] < doc["delete_wrote"]["bytes_written"] < 2 * doc["archive_bytes"]
    assert doc["delete_wrote"]["rows_rewritten"] == 8_000 - 40
    assert doc["ratio_delete_to_rearchive"]["median"] > 0


def test_bench_query_answers_alike_on_every_side(spark: Any, tmp_path: Path) -> None:
    from lakehouse.bench import bench_query
    from lakehouse.bench.plot import plot_query

    doc = bench_query(MASTER, rows=6_000, days=3, repeats=1, lookups=2, warmup=False)
    assert doc["rows_archived"] + doc["rows_live"] == 6_000 and doc["rows_archived"] and doc["rows_live"]
    for q in doc["queries"].values():
        _sides_ran(q, {"split_spark", "one_table_spark", "split_duckdb"})
    assert doc["lookup"]["rows_found"] > 0 and doc["lookup"]["day_rows"] > doc["lookup"]["rows_found"]
    assert doc["lookup"]["times_faster_than_duckdb_scan"] > 0
    assert plot_query(doc, tmp_path / "query.png").stat().st_size > 10_000


def test_bench_groups_answers_alike_from_the_runs_and_the_scan(spark: Any) -> None:
    from lakehouse.bench import bench_groups

    doc = bench_groups(MASTER, rows=6_000, days=3, repeats=1, warmup=False, spark=True)
    assert doc["rows_archived"] + doc["rows_live"] == 6_000 and doc["rows_archived"] and doc["rows_live"]
    for q in doc["queries"].values():
        _sides_ran(q, {"runs", "scan", "runs_spark", "scan_spark"})
        assert q["vector_files"] > 0 and q["times_faster"]["median"] > 0
    _sides_ran(doc["archive"], {"runs", "runs_cold", "duckdb_scan"})
    assert doc["goal"]["query"] == "count_by_prefix" and doc["goal"]["measured"] > 0


def test_bench_backfill_archives_years_and_late_rows_again(spark: Any) -> None:
    from lakehouse.bench import bench_backfill

    doc = bench_backfill(MASTER, rows=3_000, days=40, repeats=1, warmup=False)
    _sides_ran(doc, {"archive", "baseline_sorted_delta_write", "late_rows"})
    assert doc["ratio_archive_to_baseline"]["median"] > 0 and doc["vector_files"] > 0
    assert "purge" in doc["second_run_steps_seconds"]


def test_bench_ingest_runs_both_inputs_against_sparks_file_stream(spark: Any) -> None:
    from lakehouse.bench import bench_ingest

    doc = bench_ingest(MASTER, small_files=3, small_rows=50, big_mb=1, blocks_per_batch=4, repeats=1, warmup=False)
    for case, rows in (("small_files", 150), ("big_file", 1_000_000 // 76)):
        _sides_ran(doc[case], {"ingest", "spark_stream"})
        assert doc[case]["rows"] == rows and doc[case]["ratio_ingest_to_spark_stream"]["median"] > 0


def test_bench_memory_runs_each_side_in_a_small_jvm_of_its_own(spark: Any) -> None:
    from lakehouse.bench import bench_memory

    doc = bench_memory(MASTER, rows=20_000, driver_memory_mb=512, repeats=1)
    assert doc["spark_memory_mb"] == round((512 - 300) * 0.6, 1) and doc["day_in_memory_mb"] > 0
    for side in ("archive", "sorted_delta_write"):
        s = doc["sides"][side]
        assert s["seconds"] > 0 and s["jvm_peak_rss_mb"] > 100 and s["python_peak_rss_mb"] > 10
        assert s["samples"][0]["driver_memory"] == "512m" and s["samples"][0]["rows"] == 20_000


def test_bench_age_times_every_operation_on_each_layout(spark: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io
    import json

    from lakehouse.bench import bench_age
    from lakehouse.bench.age import GOALS
    from lakehouse.bench.plot import plot_age
    from lakehouse.cli.bench import render_age
    from tests.conftest import cli_in_process

    doc = bench_age(MASTER, rows=600, days=(6, 2), repeats=1, warmup=False)
    assert doc["days"] == [2, 6] and [o["operation"] for o in doc["operations"]] == list(GOALS)
    for o in doc["operations"]:
        assert set(o["sides"]) == {"2", "6"} and all(s["runs"] == 1 for s in o["sides"].values()), o
        assert o["ratio_most_to_fewest_days"]["median"] > 0 and o["met"] == (o["ratio_most_to_fewest_days"]["median"]
                                                                              <= o["goal"])
    assert doc["goals"] == len(GOALS) and 0 <= doc["goals_met"] <= doc["goals"]
    assert plot_age(doc, tmp_path / "age.png").stat().st_size > 10_000
    for fmt in ("csv", "json", "text"):
        render_age(fmt, doc)
        out = capsys.readouterr().out
        if fmt == "csv":
            rows = list(csv.DictReader(io.StringIO(out)))
            assert [r["operations.operation"] for r in rows] == list(GOALS)
            assert all(float(r["operations.sides.6.median_s"]) > 0 for r in rows), rows[0]
        elif fmt == "json":
            assert json.loads(out) == json.loads(json.dumps(doc))
        else:
            assert all(op in out for op in GOALS) and f"goals met: {doc['goals_met']} of {len(GOALS)}" in out
    r = cli_in_process(tmp_path, "bench", "age", "--days", "2", "--days", "3", "--operation", "nope")
    assert r.returncode == 1 and "unknown operation(s) ['nope']" in r.stderr, r.stderr
    r = cli_in_process(tmp_path, "bench", "age", "--days", "2")
    assert r.returncode == 1 and "at least two different --days" in r.stderr, r.stderr
