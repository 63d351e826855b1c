"""Python work spread over Spark tasks, one task per item, on any kind of session.

No RDDs (a Spark Connect session has none): the items travel inside the task's function, and
``spark.range(n)`` in ``n`` partitions hands each task the index of its one item. Each task
yields Arrow record batches of ``schema``; the caller collects them or writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")


def per_item(spark: SparkSession, items: Sequence[T], work: Callable[[T], Iterable[pa.RecordBatch]],
             schema: Any) -> DataFrame:
    """A DataFrame of ``schema`` (Spark DDL or a StructType) holding what ``work`` yields for each item, each
    item worked on by a task of its own (lazy: nothing runs until the frame is used)."""
    frozen = list(items)

    def task(batches: Iterable[Any]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for index in rb.column(0).to_pylist():
                yield from work(frozen[index])

    n = max(1, len(frozen))
    return spark.range(0, len(frozen), 1, n).mapInArrow(task, schema)
