"""A small batch staged in the command's own process (``ingest.stage_local``): the staged file
holds what Spark's staging tasks would (the same parser's rows, in the staged schema, readable
by Spark with the same values), the manifest's counts per file, kind and day, and only batches up
to ``SMALL_BATCH_BYTES`` take this path."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import InputError
from lakehouse.ingest import stage_local
from lakehouse.ingest.blocks import Block, plan_file
from lakehouse.ingest.parse import parse_block
from lakehouse.staging import FILE_ERROR, GOOD, REJECT, block_schema
from tests.test_blocks_fast import HEADER, D


def blocks(tmp: Path) -> list[Any]:
    good = tmp / "a.csv"
    good.write_text(f"{HEADER}\nk1,1,2,0.5,1.250,true,2026-11-20,x,2026-11-20T10:00:00Z\n"
                    "k2,oops,2,0.5,1.250,true,2026-11-20,y,2026-11-21T23:59:59.999999Z\n"
                    "k3,3,,,,,,,2026-11-21T00:00:00Z\n")
    bad = tmp / "b.csv"
    bad.write_bytes(HEADER.encode() + b"\nk4,1,2,0.5,1.250,true,2026-11-20,\xff\xfe,2026-11-20T10:00:00Z\n")
    out = [replace(b, file_index=0) for b in plan_file(str(good), "csv", D, 1 << 30, 0)]
    try:
        plan_file(str(bad), "csv", D, 1 << 30, 1)
    except InputError as e:  # as the batch plans it: the file's one error block
        out.append(Block(1, str(bad), "csv", 0, 0, 0, 0, error=str(e)))
    return out


def test_the_staged_file_holds_the_parsers_rows_and_the_counts_per_file_kind_and_day(tmp_path: Path) -> None:
    bs = blocks(tmp_path)
    stats = stage_local.stage(D, bs, str(tmp_path / "staging"))
    staged = pq.read_table(tmp_path / "staging" / "rows" / "part-00000.parquet")
    want = pa.Table.from_batches([b for blk in bs for b in parse_block(D, blk)], schema=block_schema(D))
    assert staged.schema == block_schema(D) and staged.equals(want)
    assert sorted(stats, key=str) == sorted([
        (0, GOOD, dt.date(2026, 11, 20), 1, None), (0, GOOD, dt.date(2026, 11, 21), 1, None),
        (0, REJECT, None, 1, stats_reason(stats, 0, REJECT)),
        (1, FILE_ERROR, None, 1, stats_reason(stats, 1, FILE_ERROR)),
    ], key=str)
    assert "invalid int" in stats_reason(stats, 0, REJECT) or "oops" in stats_reason(stats, 0, REJECT)
    assert "UTF-8" in stats_reason(stats, 1, FILE_ERROR)


def stats_reason(stats: list[Any], file: int, kind: int) -> str:
    (reason,) = [r for f, k, _, _, r in stats if (f, k) == (file, kind)]
    return str(reason)


def test_only_small_batches_are_staged_in_process(tmp_path: Path) -> None:
    bs = blocks(tmp_path)
    assert stage_local.stageable(bs)
    big = tmp_path / "big.csv"
    row = "k1,1,2,0.5,1.250,true,2026-11-20,x,2026-11-20T10:00:00Z\n"
    big.write_text(HEADER + "\n" + row * (stage_local.SMALL_BATCH_BYTES // len(row) + 1))
    assert not stage_local.stageable(bs + plan_file(str(big), "csv", D, 1 << 30, 2))


@pytest.mark.spark
def test_spark_reads_the_staged_file_with_the_same_values(spark: Any, tmp_path: Path) -> None:
    stage_local.stage(D, blocks(tmp_path), str(tmp_path / "staging"))
    path = str(tmp_path / "staging" / "rows")
    by_spark = spark.read.parquet(path).orderBy("_lh_file", "_lh_line").toArrow()
    by_arrow = pq.read_table(path).sort_by([("_lh_file", "ascending"), ("_lh_line", "ascending")])
    assert by_spark.num_rows == by_arrow.num_rows == 4
    assert by_spark.column("ts").to_pylist() == by_arrow.column("ts").to_pylist()
    assert by_spark.column("m").to_pylist() == by_arrow.column("m").to_pylist()
