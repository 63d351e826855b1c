"""Committing to Delta tables with Spark, safely: bounded retries of optimistic-concurrency
conflicts and SetTransaction idempotence (a commit replayed after a crash is skipped by a table
that already holds it).

The one home of these helpers: loads, ingest batches, stream releases, archiving runs, compaction
and migrations all commit through them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from lakehouse.errors import CommitConflict, first_line, is_conflict
from lakehouse.sql import spark_ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_ATTEMPTS = 8
"""Attempts of a Delta commit that keeps conflicting with concurrent writers."""


def with_retries(what: str, fn: Callable[[], T], attempts: int = MAX_ATTEMPTS) -> tuple[T, int]:
    """Run a Delta commit, retrying conflicts with jittered backoff; (result, attempts used)."""
    for attempt in range(1, attempts + 1):
        try:
            return fn(), attempt
        except Exception as e:
            if not is_conflict(e):
                raise
            if attempt == attempts:
                raise CommitConflict(
                    f"{what}: still conflicting with concurrent writers after {attempts} attempts: "
                    f"{first_line(e)}"
                ) from None
            pause = min(5.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random())
            log.warning("%s: conflict with a concurrent commit (attempt %d/%d), retrying in %.1fs",
                        what, attempt, attempts, pause)
            time.sleep(pause)
    raise AssertionError("unreachable")


SESSION_CONF = threading.RLock()
"""Held while a commit relies on session-wide Spark settings (SetTransaction, commit metadata):
threads of one process (two producers of an application) commit one at a time."""


@contextlib.contextmanager
def idempotent(spark: "SparkSession", txn: tuple[str, int] | None) -> Iterator[None]:
    """Make the Delta writes inside (MERGE, append) record the SetTransaction ``txn`` = (app id,
    version) in their commit; Delta skips such a write when the table already holds that
    version for the app id (a batch replayed after a crash is not applied twice)."""
    if txn is None:
        yield
        return
    with SESSION_CONF:
        spark.conf.set("spark.databricks.delta.write.txnAppId", txn[0])
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(txn[1]))
        try:
            yield
        finally:
            spark.conf.unset("spark.databricks.delta.write.txnAppId")
            spark.conf.unset("spark.databricks.delta.write.txnVersion")


def merge_into(spark: "SparkSession", path: str, source: "DataFrame", on: str, actions: str) -> dict[str, int]:
    """One ``MERGE INTO`` the Delta table at ``path`` (alias ``t``) from ``source`` (alias ``s``)
    ``ON on`` with the ``WHEN ...`` clauses ``actions``, in SQL (any kind of session runs it);
    Delta's metrics (``num_inserted_rows``, ``num_updated_rows``, ``num_deleted_rows``, ...), or
    {} when Delta skipped the write (its SetTransaction already recorded)."""
    view = f"lh_merge_source_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        rows = spark.sql(f"MERGE INTO delta.{spark_ident(path)} AS t USING {view} AS s ON {on} {actions}").collect()
    finally:
        spark.catalog.dropTempView(view)
    if not rows:
        return {}
    return {k: int(v or 0) for k, v in rows[0].asDict().items()}
