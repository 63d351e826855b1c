"""``lakehouse bench``: each benchmark measures lakehouse against a baseline in the same run
(ratios, not absolute targets); one module per benchmark, ``workload`` for what they run on."""

from lakehouse.bench.age import bench_age
from lakehouse.bench.archive import bench_archive
from lakehouse.bench.backfill import bench_backfill
from lakehouse.bench.commands import bench_cli
from lakehouse.bench.compact import bench_compact
from lakehouse.bench.delete import bench_delete
from lakehouse.bench.groups import bench_groups
from lakehouse.bench.incremental import bench_incremental
from lakehouse.bench.ingest import bench_ingest
from lakehouse.bench.memory import bench_memory
from lakehouse.bench.open import bench_open
from lakehouse.bench.query import bench_query
from lakehouse.bench.stream import bench_stream

__all__ = ["bench_age", "bench_archive", "bench_backfill", "bench_cli", "bench_compact", "bench_delete", "bench_groups",
           "bench_incremental",
           "bench_ingest", "bench_memory", "bench_open", "bench_query", "bench_stream"]
