"""Committing to Delta tables safely: bounded retries of optimistic-concurrency conflicts and
SetTransaction idempotence (a commit replayed after a crash is skipped by a table that already
holds it).

The one home of these helpers: loads, ingest batches, archiving runs and migrations all commit
through them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from lakehouse.errors import CommitConflict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_ATTEMPTS = 8


def is_conflict(e: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts, which a retry can resolve."""
    try:
        from delta.exceptions import (
            ConcurrentAppendException,
            ConcurrentDeleteDeleteException,
            ConcurrentDeleteReadException,
            ConcurrentTransactionException,
            ConcurrentWriteException,
            MetadataChangedException,
            ProtocolChangedException,
        )

        kinds: tuple[type[BaseException], ...] = (
            ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
            ConcurrentTransactionException, ConcurrentWriteException, MetadataChangedException,
            ProtocolChangedException,
        )
        if isinstance(e, kinds):
            return True
    except ImportError:  # pragma: no cover
        pass
    text = f"{type(e).__name__} {e}"
    return "DELTA_CONCURRENT" in text or "ConcurrentAppendException" in text or "DELTA_METADATA_CHANGED" in text


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
                    f"{str(e).splitlines()[0]}"
                ) from None
            pause = min(5.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random())
            log.warning("%s: conflict with a concurrent commit (attempt %d/%d), retrying in %.1fs",
                        what, attempt, attempts, pause)
            time.sleep(pause)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def idempotent(spark: "SparkSession", txn: tuple[str, int] | None) -> Iterator[None]:
    """Make the Delta writes inside (MERGE, append) record the SetTransaction ``txn`` = (app id,
    version) in their commit; Delta skips such a write when the table already holds that
    version for the app id (a batch replayed after a crash is not applied twice)."""
    if txn is None:
        yield
        return
    spark.conf.set("spark.databricks.delta.write.txnAppId", txn[0])
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(txn[1]))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
