"""The Python surface of producers::

    lh = lakehouse.open("path/to/project")
    with lh.table("trips").producer("app") as p:   # attach (at the stream's bound)
        p.insert(rows)          # dicts, an Arrow table, a pandas or Spark DataFrame, or file paths
        p.bound("2026-11-20T10:05:00Z")             # no row of mine will be earlier
    # leaving the block detaches (also on an exception)

Rows given as data are written to a Parquet file in the table's inbox and inserted through the
one write path (the same parser, rejects and exactly-once batches as ``load`` and ``ingest``).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lakehouse import storage
from lakehouse.errors import InputError, first_line
from lakehouse.ingest.state import inbox_folder, producer_source
from lakehouse.storage import join
from lakehouse.stream.engine import Stream
from lakehouse.stream.model import check_key
from lakehouse.times import micros
from lakehouse.warehouse import TablePaths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.definitions import TableDefinition
    from lakehouse.ingest.load import LoadResult

UTC = dt.timezone.utc
PRODUCER_NAME_MAX = 200


RESERVED = "load"
"""The producer of ``lakehouse load`` (a one-shot producer): no other producer may take its name."""


def check_name(name: str, reserved_ok: bool = False) -> str:
    """A producer name: 1-200 printable characters (it is shown, logged and stored as given);
    ``load`` is ``lakehouse load``'s own."""
    if not isinstance(name, str) or not name or len(name) > PRODUCER_NAME_MAX or not name.isprintable() \
            or name != name.strip():
        raise InputError(f"bad producer name {name!r}: expected 1-{PRODUCER_NAME_MAX} printable characters "
                         "without leading or trailing spaces")
    if name == RESERVED and not reserved_ok:
        raise InputError(f"producer name {name!r} is reserved for `lakehouse load` (a one-shot producer); "
                         "choose another name")
    return name


def to_micros(t: Any) -> int:
    """A bound given as a datetime (naive = UTC) or an ISO 8601 string."""
    from lakehouse.records import BadValue, parse_timestamp

    if isinstance(t, dt.datetime):
        return micros(t)
    try:
        return micros(parse_timestamp(t))
    except BadValue:
        raise InputError(f"{t!r} is not an ISO 8601 timestamp (e.g. 2026-11-20T10:15:00Z)") from None


class Producer:
    """One producer of one table (a context manager: attach on enter, detach on exit)."""

    def __init__(self, spark_factory: Callable[[], "SparkSession"], warehouse: str, definition: "TableDefinition",
                 name: str, clock: Callable[[], int] | None = None, bound: Any = None) -> None:
        self.name = check_name(name)
        self.definition = definition
        self.warehouse = warehouse
        self.paths = TablePaths(warehouse, definition.name)
        self.spark_factory = spark_factory
        self.stream = Stream(spark_factory, definition, self.paths, clock)
        self._initial_bound = bound

    # -- operations -------------------------------------------------------------------------------

    def attach(self, bound: Any = None) -> "Producer":
        """Attach to the table's stream (holding its watermark) at ``bound`` (a datetime or ISO string)."""
        self.stream.attach(self.name, None if bound is None else to_micros(bound))
        return self

    def bound(self, t: Any) -> None:
        """Promise that no later row of this producer is earlier than ``t``."""
        self.stream.assert_bound(self.name, to_micros(t))

    def heartbeat(self) -> None:
        """Renew the producer's lease without inserting (it keeps holding the watermark)."""
        self.stream.heartbeat(self.name)

    def detach(self) -> None:
        """Leave the stream: stop holding the watermark (what the producer held back can be released)."""
        self.stream.detach(self.name)

    def insert_files(self, files: list[str], input_format: str | None = None, force: bool = False,
                     _temporary: bool = False, idempotency_key: tuple[str, int] | None = None,
                     moves_bound: bool = True) -> "LoadResult":
        """Insert files (CSV, JSON Lines, Parquet) as one batch; a file whose content this
        producer inserted before is skipped unless ``force``. ``idempotency_key`` and
        ``moves_bound``: as for ``insert``."""
        from lakehouse.ingest.load import Load

        key = None if idempotency_key is None else check_key(idempotency_key)
        load = Load(self.spark_factory, self.warehouse, self.definition, producer=self.name, stream=self.stream)
        return load.run(files, input_format, force=force, one_shot=False, forget=_temporary, key=key,
                        moves_bound=moves_bound)

    def inserted(self, idempotency_key: tuple[str, int]) -> bool:
        """Whether the table took an insert with this idempotency key (app, version), or with a
        later version of the same app, from any producer."""
        return self.stream.store.read().seen_key(check_key(idempotency_key)) is not None

    def insert(self, data: Any, input_format: str | None = None, idempotency_key: tuple[str, int] | None = None,
               moves_bound: bool = True) -> "LoadResult":
        """Insert rows: a list of dicts, an Arrow table or record batch, a pandas DataFrame, a
        Spark DataFrame, or a file path (or list of them).

        An insert happens when the stream registers it (one save of the stream's state): from then
        on its rows go into live or rejects even if this process dies (the next operation on the
        table, whoever runs it, finishes the insert). An insert interrupted before that took
        nothing and never comes back.

        ``idempotency_key`` = (app, version), as Delta's ``txnAppId``/``txnVersion``: the key is
        saved in the same save that registers the insert, and an insert whose app the table has
        seen at this version or a later one takes nothing (the result's ``duplicate``). So a
        retry after an error, or a batch replayed after a crash, with the same key is safe:
        give each batch of an application a growing version (a streaming query's batch id).

        ``moves_bound`` (default True): the rows move the producer's bound to their latest event
        time. False: only ``bound()`` moves it (a pipeline whose watermark is its bound): rows
        above the bound wait staged until a later bound passes them, or the producer detaches."""
        key = None if idempotency_key is None else check_key(idempotency_key)
        if key is not None and self.stream.store.read().seen_key(key) is not None:
            from lakehouse.ingest.load import LoadResult

            return LoadResult(self.definition.name, duplicate=True)  # nothing written, nothing read
        if isinstance(data, (str, os.PathLike)):
            return self.insert_files([os.fspath(data)], input_format, idempotency_key=key, moves_bound=moves_bound)
        if isinstance(data, list) and data and all(isinstance(x, (str, os.PathLike)) for x in data):
            return self.insert_files([os.fspath(x) for x in data], input_format, idempotency_key=key,
                                     moves_bound=moves_bound)
        inbox = inbox_folder(self.paths.root, producer_source(self.name))
        storage.make_dirs(inbox)
        files = self._write(data, inbox)
        try:
            return self.insert_files(files, "parquet", force=True, _temporary=True, idempotency_key=key,
                                     moves_bound=moves_bound)
        finally:  # registered (the rows are staged) or failed whole; a crash leaves them to the next insert
            for f in files:
                storage.delete(f)
            for folder in {os.path.dirname(f) for f in files} - {inbox}:  # a Spark frame's output
                storage.remove_tree(folder)

    def _write(self, data: Any, inbox: str) -> list[str]:
        import pyarrow as pa

        try:
            return self._write_files(data, inbox)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InputError(f"{self.definition.name}: producer {self.name!r}: cannot insert these rows: "
                             f"{type(e).__name__}: {first_line(e) if str(e) else ''}") from None

    def _write_files(self, data: Any, inbox: str) -> list[str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = join(inbox, f"{uuid.uuid4().hex}.parquet")
        if _is_spark_frame(data):
            folder = join(inbox, uuid.uuid4().hex)
            data.write.parquet(folder)
            return [join(folder, n) for n in storage.list_names(folder) if n.endswith(".parquet")]
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        elif type(data).__module__.startswith("pandas"):
            data = pa.Table.from_pandas(data, preserve_index=False)
        elif isinstance(data, Iterable) and not isinstance(data, (pa.Table, bytes, dict)):
            rows = list(data)
            if not all(isinstance(r, dict) for r in rows):
                raise InputError(f"producer {self.name!r}: insert takes dicts (one per row), an Arrow table, "
                                 "a pandas or Spark DataFrame, or file paths")
            data = pa.Table.from_pylist(rows) if rows else pa.table({})
        if not isinstance(data, pa.Table):
            raise InputError(f"producer {self.name!r}: cannot insert a {type(data).__name__}")
        with storage.open_write(path) as out:
            pq.write_table(data, out)
        return [path]

    # -- context manager ----------------------------------------------------------------------------

    def __enter__(self) -> "Producer":
        return self.attach(self._initial_bound)

    def __exit__(self, *exc: object) -> None:
        self.detach()


def _is_spark_frame(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark")
